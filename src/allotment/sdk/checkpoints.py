"""Telling Allotment, from inside a job, that it has saved a checkpoint (rule `least-lost-work`).

    from allotment.sdk import report_checkpoint
    save(model, optimizer, step)
    report_checkpoint()          # after the checkpoint is safely written

Owns: `report_checkpoint()`, which touches the file the executor named in ALLOT_CHECKPOINT_FILE; the executor turns
each change of its modification time into a report. A shell job does the same with `touch "$ALLOT_CHECKPOINT_FILE"`.
The scheduler then counts only the work since that checkpoint as lost if the job is called away, prefers to call
away work that saved recently, and lets a planned start wait briefly for the job's next checkpoint.

Must not: talk to the server (no token or network is needed inside a job) or fail a job: outside Allotment, or on an
executor that does not relay checkpoints, it does nothing and says so by returning False.
"""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "ALLOT_CHECKPOINT_FILE"


def report_checkpoint() -> bool:
    """Report that the job has just saved a checkpoint. True when the report was made (the file was touched)."""
    name = os.environ.get(VARIABLE)
    if not name:
        return False
    try:
        Path(name).touch()
    except OSError:
        return False
    return True
