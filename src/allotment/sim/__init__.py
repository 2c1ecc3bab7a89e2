"""The discrete-event simulator: workloads (synthetic or real traces) through the real engine cycle, side by side
under several policies, with the evaluation report and what-if budgeting (docs/simulation.md).

Owns: the simulator package — workload.py (jobs and their true behaviour), synthetic.py (the calibrated generator),
traces.py (ITP 2021 and Philly 2017 importers), executor.py (the simulated executor driven by each job's behaviour),
runner.py (the event loop around `allotment.engine`), results.py, metrics.py, report.py, scenario.py (scenario
files) and whatif.py (a budget plan replayed over a history).

Must not: decide (policies do), or rebuild the engine's wiring (runner.py uses `allotment.engine.setup.build`).
"""
