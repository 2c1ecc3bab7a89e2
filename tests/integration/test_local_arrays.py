"""A job array run by the local executor, end to end with real processes: every task is started with its index and
its array's facts in ALLOT_ARRAY_* (Slurm's SLURM_ARRAY_*), and `%N` keeps at most N of them running at once."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from allotment.config.arrays import parse_array
from allotment.engine.setup import Built
from allotment.store.jobs import Submission, submit
from allotment.store.tables import JobRow
from tests.integration.support import PY, final, step_until

TASK = (
    "import os, sys, time, pathlib\n"
    "e = os.environ\n"
    "line = ' '.join(e[k] for k in ('ALLOT_ARRAY_JOB_ID', 'ALLOT_ARRAY_INDEX', 'ALLOT_ARRAY_TASK_COUNT',"
    " 'ALLOT_ARRAY_TASK_MIN', 'ALLOT_ARRAY_TASK_MAX', 'ALLOT_JOB_ID'))\n"
    "pathlib.Path(sys.argv[1], e['ALLOT_ARRAY_INDEX']).write_text(line)\n"
    "time.sleep(0.5)\n"
)


def test_each_task_sees_its_index_and_at_most_n_run_at_once(local: Built, tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    out.mkdir()
    with local.sessions.begin() as s:
        sub = Submission(budget="pretrain", user="ben", command=[PY, "-c", TASK, str(out)], gpus=1,
                         array=parse_array("3,5,7-8%2"), array_id="a-0123456789ab", grace=5)  # fmt: skip
        submit(s, sub, local.engine.clock.now())
    ids = [f"a-0123456789ab_{i}" for i in (3, 5, 7, 8)]
    most = 0

    def done() -> bool:
        nonlocal most
        with local.sessions() as s:
            states = list(s.scalars(select(JobRow.state).where(JobRow.array_id == "a-0123456789ab")))
        most = max(most, sum(state in ("running", "preempting") for state in states))
        return final(local, *ids)()

    step_until(local, done, what="every task to end")
    assert most <= 2
    seen = {p.name: p.read_text().split() for p in out.iterdir()}
    assert seen == {str(i): ["a-0123456789ab", str(i), "4", "3", "8", f"a-0123456789ab_{i}"] for i in (3, 5, 7, 8)}
