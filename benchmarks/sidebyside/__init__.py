"""Side by side with a real peer (issue 9): the same time-compressed workload replayed twice on the same local Slurm
cluster (accounting mode) — once with Slurm's own fair share deciding, once with Allotment deciding and Slurm
running — and one report of both. Run: `python -m benchmarks.sidebyside --help`; method and results in
docs/sidebyside.md.
"""
