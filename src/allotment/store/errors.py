"""The errors every store raises alike, SQL or in memory (no database import here).

Owns: what a store raises when a ledger entry cannot be posted. Must not: import a database driver.
"""

from __future__ import annotations


class ClosedPeriodError(ValueError):
    """An entry was posted into a period that is already closed."""


class NoOpenPeriodError(LookupError):
    """No open period holds (or follows) the instant an entry is for: open one first."""
