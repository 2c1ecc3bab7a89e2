"""Fixtures for the executor tests (defined in harness.py)."""

from .harness import harness

__all__ = ["harness"]
