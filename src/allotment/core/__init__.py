"""Allotment's scheduling core: a pure function from a snapshot and `now` to decisions.

Imports nothing outside the standard library and itself: no clock, no I/O, no randomness (enforced by the
import-linter contract in pyproject.toml).

core/README.md maps the cycle's state (which part each step reads and writes) and writes down, once, the core
performance rules the mypyc-compiled build needs, with what each was measured to be worth: plain classes with
__slots__ and a compiled __init__ rather than dataclasses, no closures or objects that refer back to the state (no
reference cycles), CycleState.release() at the end of every cycle, packed integer sort keys, and cache keys on
interned objects and strings. Domain modules refer to them as "the core performance rules".
"""
