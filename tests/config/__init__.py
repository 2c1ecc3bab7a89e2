"""Tests of the configuration layer (allotment.config)."""
