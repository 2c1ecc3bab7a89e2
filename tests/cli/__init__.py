"""Tests of the allot command line (allotment.cli)."""
