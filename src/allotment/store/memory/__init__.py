"""The in-memory store (issue 20): the engine's Store port on Python structures, for simulations.

Owns: its tables and undo journal (tables.py), its unit of work (unit.py) and the store (store.py). It persists the
same change sets as the SQL store and answers the same loads; the store conformance suite
(tests/store_conformance/) runs against both. Must not: hold a rule of its own.
"""

from allotment.store.memory.store import MemorySchedulingStore
from allotment.store.memory.tables import MemoryState

__all__ = ["MemorySchedulingStore", "MemoryState"]
