"""Tests of the executors (the Slurm executor's tests live in tests/executors/slurm/)."""
