"""Allotment's scheduling core: a pure function from a snapshot and `now` to decisions.

Imports nothing outside the standard library and itself: no clock, no I/O, no randomness (enforced by the
import-linter contract in pyproject.toml).
"""
