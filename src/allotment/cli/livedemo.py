"""`allot demo`: Allotment running for real, in about ninety seconds, then left running to explore.

Owns: starting the server in this process (SQLite in a fresh data directory, the local executor running every job as
a process on this host over a virtual fleet, the engine cycling every second, the API with open login on a free
localhost port), the scripted workload submitted through the SDK as the example organisation's users (training jobs
that print progress and checkpoint on SIGTERM, an opportunistic sweep, a two-node gang, then a session into the
full cluster), the narration around it, the exploration hints, and an orderly stop that leaves no process behind.

Must not: decide anything (the engine does) or read the database: what it shows comes from the API (see
`demowatch`), as any client would see it.
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from allotment.cli import render
from allotment.cli.demowatch import Watcher
from allotment.config import AllotmentConfig
from allotment.core.jobstate import JobState
from allotment.sdk import Client

if TYPE_CHECKING:
    from allotment.engine.server import Server

DEMO_CONFIG = Path("examples") / "demo" / "allotment.yaml"
USERS = ("ada", "ben", "chen", "dana", "eli")
BUDGETS = ("pretrain", "finetune", "detection", "segmentation")
SLICE = 60

TRAIN = """\
import os, signal, sys, time
attempt = int(os.environ.get("ALLOT_RESTART_COUNT", "0"))
step = 100 * attempt
if attempt:
    print(f"attempt {attempt}: resuming from the checkpoint at step {step}", flush=True)
def on_term(*_):
    print(f"SIGTERM: saving a checkpoint at step {step}, then exiting", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print(f"training on node {os.environ.get('ALLOT_NODE')} GPUs {os.environ.get('CUDA_VISIBLE_DEVICES')}", flush=True)
while True:
    step += 1
    print(f"step {step} loss {4.0 / (1 + step / 50):.3f}", flush=True)
    time.sleep(2)
"""
"""A training job: prints its progress; on SIGTERM saves a checkpoint and exits 0; a later attempt resumes."""


@dataclass
class Outcome:
    ok: bool = True
    session_wait: float | None = None
    ids: dict[str, str] = field(default_factory=dict)


def demo_config() -> Path | None:
    for base in (Path(__file__).resolve().parents[3], Path.cwd()):
        if (base / DEMO_CONFIG).is_file():
            return base / DEMO_CONFIG
    return None


def missing_names(cfg: AllotmentConfig) -> list[str]:
    """Users and budgets the scripted workload needs that the configuration lacks."""
    users = {u.name for u in cfg.users}
    budgets = {b.name for b in cfg.budgets}
    return [f"user {u}" for u in USERS if u not in users] + [f"budget {b}" for b in BUDGETS if b not in budgets]


def _batch(name: str, budget: str, *, gpus: int = 8, replicas: int = 1, opportunistic: bool = False) -> dict[str, Any]:
    contract: dict[str, Any] = {"class": "opportunistic"} if opportunistic else {"slice": f"{SLICE}s"}
    return {
        "name": name,
        "budget": budget,
        "command": [sys.executable, "-c", TRAIN],
        "env": {"DEMO_JOB": name},
        "resources": {"gpus": gpus, "replicas": replicas},
        "contract": contract,
        "grace": "5s" if opportunistic else "10s",
    }


def script(w: Watcher, users: dict[str, Client], data_dir: Path) -> Outcome:
    """The scripted part: what each user does, and waiting (with time limits) for the engine's answer."""
    result = Outcome()
    ids = result.ids

    def submit(user: str, spec: dict[str, Any]) -> str:
        job = users[user].submit(spec).job
        ids[spec["name"]] = job.id
        return job.id

    def check(ok: bool) -> None:
        result.ok = result.ok and ok

    w.stage = "1/6 filling the cluster"
    w.say("ben submits three 8-GPU training jobs to pretrain, each asking for a 1-minute guaranteed slice;")
    w.say("eli submits an opportunistic sweep to finetune: cheaper, preemptible at any time, may use the headroom.")
    for n in ("a", "b", "c"):
        submit("ben", _batch(f"pretrain-{n}", "pretrain"))
    submit("eli", _batch("finetune-sweep", "finetune", opportunistic=True))
    first = [ids[n] for n in ("pretrain-a", "pretrain-b", "pretrain-c", "finetune-sweep")]
    check(w.until(lambda: all(w.state(j) == JobState.RUNNING for j in first), 30, "the first jobs to start"))

    w.stage = "2/6 a gang waits"
    w.say("dana submits a 2-node gang (2 × 8 GPUs) to detection. The cluster is full and pretrain's slices protect it:")
    gang = submit("dana", _batch("detect-gang", "detection", replicas=2))

    def explained() -> bool:
        return w.state(gang) != JobState.PENDING or users["dana"].why(gang).blocker is not None

    check(w.until(explained, 20, "the gang's wait reason"))
    if w.state(gang) == JobState.PENDING:
        why = users["dana"].why(gang)
        w.say(f"allot why detect-gang → {why.message}; estimated start {render.estimate(why.estimated_start)}", "cyan")

    w.stage = "3/6 a session into a full cluster"
    w.say("eli asks for an interactive 8-GPU session on segmentation, with every GPU busy and the gang's plan made:")
    asked = time.monotonic()
    session = users["eli"].request_session("segmentation", gpus=8, length="10m", name="eli-notebook").job.id
    ids["eli-notebook"] = session
    check(w.until(lambda: w.state(session) == JobState.RUNNING, 30, "the session to start"))
    if w.state(session) == JobState.RUNNING:
        result.session_wait = time.monotonic() - asked
        w.say(f"the session was ready {result.session_wait:.1f}s after eli asked; attach with: "
              f"allot attach {session} --data-dir {data_dir}", "cyan")  # fmt: skip

    w.stage = "4/6 waiting for pretrain's slices to end"
    ends = [d.runs[-1].slice_end for j in first[:3] if (d := w.details.get(j)) and d.runs and d.runs[-1].slice_end]
    if ends:
        w.say(f"pretrain's slices end {render.clock(min(ends))}: then the gang's planned start takes two nodes.")
    check(w.until(lambda: w.state(gang) == JobState.RUNNING, SLICE + 45, "the gang to start"))
    w.say(f"budgets burn down as jobs run (charged every few seconds); {w.burn()}")

    w.stage = "5/6 giving back"
    w.say("eli releases the session; ben cancels whatever of pretrain still waits.")
    users["eli"].release_session(session)
    check(w.until(lambda: w.state(session) in (JobState.CANCELLED, JobState.COMPLETED), 20, "the session to end"))
    for n in ("pretrain-a", "pretrain-b", "pretrain-c"):
        if w.state(ids[n]) == JobState.PENDING:
            users["ben"].cancel(ids[n])
    w.until(
        lambda: not any(j.state == JobState.PENDING and j.user == "ben" for j in w.jobs.values()), 10, "cancellations"
    )
    _settle(w, 4)
    w.stage = "6/6 done"
    return result


def _settle(w: Watcher, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        w.poll()
        time.sleep(0.5)


def explore_hints(url: str, token: str, data_dir: Path, ids: dict[str, str]) -> Panel:
    gang = ids.get("detect-gang", "JOB")
    lines = [
        "The server keeps running until Ctrl-C. In another terminal (as ada, the administrator):",
        "",
        f"  export ALLOT_URL={url}",
        f"  export ALLOT_TOKEN={token}",
        "  allot queue                         # every job, newest first (--state running, --budget …, --json)",
        f"  allot status {gang}        # history, runs, slices and charges",
        f"  allot logs -f {gang}       # its output, followed",
        "  allot budget tree                   # balances burning down",
        "  allot run --gpus 4 --budget pretrain -- python -c 'print(42)'",
        "  allot session --gpus 2 --budget detection --length 10m",
        "  allot node drain lab-h100-0001 --why 'ECC errors'   # and see when it will be empty",
        "  allot login --user ben              # act as ben instead (this server has open login)",
        "",
        f"Data (SQLite, job output): {data_dir}   API docs: {url}/docs",
    ]
    return Panel("\n".join(escape(line) for line in lines), title="Explore", title_align="left")


def summary_line(w: Watcher, outcome: Outcome) -> str:
    c = w.counts
    parts = [
        f"{c['start'] + c['session']} starts",
        f"{c['preempt'] + c['preempt-session']} preemptions",
        f"{c['renew']} slice renewals",
        f"{c['requeue']} requeues",
    ]
    if outcome.session_wait is not None:
        parts.append(f"session ready in {outcome.session_wait:.1f}s")
    return "Summary: " + ", ".join(parts)


def run_demo(config: Path, *, data_dir: Path | None, port: int, wait: bool, console: Console) -> int:
    """Run the demo; returns the exit code (0 when every scripted step happened)."""
    from allotment.api import attach_api
    from allotment.engine.server import Server
    from allotment.engine.setup import Settings, build

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)  # SIGTERM stops the demo like Ctrl-C: cleanly
    fresh = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="allot-demo-")) if data_dir is None else data_dir
    settings = Settings(config=config, data_dir=directory, executor="local", charge_every=5)
    server = Server(build(settings), interval=1.0)
    server.start()
    try:
        api = attach_api(server, "127.0.0.1", port, settings=settings, open_login=True)
        with Client(api.url) as anonymous:
            tokens = {u: anonymous.login(u, name="allot demo").secret for u in USERS}
        users = {u: Client(api.url, t) for u, t in tokens.items()}
        gpus = sum(n.gpus for n in users["ada"].nodes())
        console.print(Panel(
            f"Allotment is running: engine cycling every second, API at {api.url}, data in {directory}.\n"
            f"Fleet: {gpus} virtual GPUs ({config.name} in {config.parent}); every job is a real process here.\n"
            "Policy for the demo: 1-minute slices, 8 GPUs of session headroom, tiny monthly budgets.",
            title="allot demo", title_align="left"))  # fmt: skip
        with Watcher(users["ada"], console, cluster_gpus=gpus) as watcher:
            outcome = script(watcher, users, directory)
        console.print(render.budget_table(users["ada"].budgets(), title="Budgets after the demo (credits)"))
        console.print(summary_line(watcher, outcome), style="bold")
        if not outcome.ok:
            console.print("[red]some steps did not happen in time (see above)[/red]")
        for client in users.values():
            if client is not users["ada"]:
                client.close()
        if wait:
            console.print(explore_hints(api.url, tokens["ada"], directory, outcome.ids))
            watcher.stage = "exploring (Ctrl-C to stop)"
            try:
                while not server.stop.is_set():
                    watcher.poll()
                    time.sleep(1.0)
            except KeyboardInterrupt:
                console.print("stopping…")
        users["ada"].close()
        return 0 if outcome.ok else 1
    except KeyboardInterrupt:
        console.print("interrupted; stopping…")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.shutdown()
        _stop_jobs(server)
        if fresh:
            shutil.rmtree(directory, ignore_errors=True)


def _stop_jobs(server: Server) -> None:
    """End every job process the demo's executor still runs (SIGKILL) and wait until they are gone."""
    executor = server.built.engine.executor
    deadline = time.monotonic() + 15
    while (alive := executor.alive()) and time.monotonic() < deadline:
        for job_id, attempt in alive.items():
            executor.terminate(job_id, attempt, 0)
        executor.poll()
        time.sleep(0.2)
