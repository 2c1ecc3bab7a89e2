"""Configuration problems and the error that carries them.

Owns: `Problem` (one field-level complaint: dotted path, file, line, reason), the path formatting, and
`ConfigError`.

Must not: parse YAML or validate anything; it only describes what went wrong and where.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Loc = tuple[str | int, ...]
"""A location in the configuration data: mapping keys and sequence indices from the top."""


def format_path(loc: Sequence[str | int]) -> str:
    """`("budgets", 3, "parent")` → `budgets[3].parent`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the configuration."""

    path: str
    """Dotted field path, e.g. `fleet.clusters[0].node_groups[1].count` ("" for the whole document)."""
    reason: str
    line: int | None = None
    """1-based line in `file` (None when the configuration did not come from a file)."""
    file: str | None = None

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        elif self.line is not None:
            where = f"line {self.line}: "
        path = f"{self.path}: " if self.path else ""
        return f"{where}{path}{self.reason}"


class ConfigError(Exception):
    """The configuration is invalid. `problems` lists every field-level complaint found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in the configuration"
        super().__init__("\n".join([head, *(f"  {p}" for p in self.problems)]))
