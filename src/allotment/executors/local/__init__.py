"""The local process executor: one host, one detached supervisor process per attempt.

Owns: the public entry point (LocalExecutor). The executor lives in executor.py, the per-attempt supervisor
(and the state directory's file names) in supervisor.py.
Must not: import anything but the standard library and allotment.core/ports, so that scripts/gpu-check runs it
with only the repository on PYTHONPATH.
"""

from allotment.executors.local.executor import LocalExecutor

__all__ = ["LocalExecutor"]
