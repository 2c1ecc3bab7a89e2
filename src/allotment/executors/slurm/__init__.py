"""The Slurm executor: Allotment decides, Slurm runs.

Owns: the adapter that runs Allotment's decisions as held Slurm batch jobs pinned to the chosen nodes
(executor.py), the batch script and sbatch options (script.py), its durable (job_id, attempt) → Slurm job map
(state.py), the Slurm command-line clients and their parsers (cli.py), and node sync with Slurm (fleet.py: the
FleetSource port of ports/fleet.py).
Must not: decide anything, or let Slurm decide where or when a job runs. docs/slurm.md describes the mapping.
"""

from allotment.executors.slurm.cli import SlurmCli, SlurmError
from allotment.executors.slurm.executor import SlurmExecutor
from allotment.executors.slurm.fleet import discover_nodes, set_node_state

__all__ = [
    "SlurmCli",
    "SlurmError",
    "SlurmExecutor",
    "discover_nodes",
    "set_node_state",
]
