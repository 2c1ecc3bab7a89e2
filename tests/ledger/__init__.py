"""Tests of allotment.ledger (pure accounting rules)."""
