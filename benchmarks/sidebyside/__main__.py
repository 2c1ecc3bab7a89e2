"""`python -m benchmarks.sidebyside`: see benchmarks/sidebyside/run.py."""

from benchmarks.sidebyside.run import main

main()
