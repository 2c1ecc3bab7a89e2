"""Allotment: a GPU-cluster scheduler with budgets, hierarchical fair share and time-slicing contracts."""

__version__ = "0.1.0"
