"""The store keeps the CPUs and memory nodes declare and jobs ask for (decision 60), and the snapshot carries them
to the core: configured nodes are written with theirs, a submission's are stored per replica, and a node or job
without them reads as 0 (not declared, no request). On SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy.orm import Session

from allotment.core.model import Cluster, Node, PolicyConfig
from allotment.store.fleet import seed_from
from allotment.store.jobs import Submission, submit
from allotment.store.snapshot import load_snapshot
from allotment.store.tables import NodeRow
from tests.store.support import RATES, T0, seed_org


def test_nodes_and_jobs_keep_cpus_and_memory_into_the_snapshot(session: Session) -> None:
    seed_org(session)
    seed_from(
        session,
        now=T0,
        clusters=[Cluster("c1", ("rack",))],
        nodes=[Node("n3", "c1", "h100", 8, (("rack", "r3"),), cpus=224, memory=2 * 1024 * 1024)],
        budgets=[],
    )
    asked, _ = submit(session, Submission("detect", "ada", ["x"], gpus=2, replicas=2, cpus=16, memory=65536), T0)
    plain, _ = submit(session, Submission("detect", "ada", ["y"], gpus=1), T0)
    snapshot = load_snapshot(session, T0, PolicyConfig(), RATES, "")
    nodes = {n.name: (n.cpus, n.memory) for n in snapshot.nodes}
    assert nodes == {"n1": (0, 0), "n2": (0, 0), "n3": (224, 2 * 1024 * 1024)}
    jobs = {j.id: (j.cpus, j.memory) for j in snapshot.jobs}
    assert jobs == {asked.id: (16, 65536), plain.id: (0, 0)}


def test_seeding_again_updates_what_a_node_declares(session: Session) -> None:
    seed_org(session)
    cluster = [Cluster("c1", ("rack",))]
    seed_from(session, now=T0, clusters=cluster, nodes=[Node("n1", "c1", "h100", 8, cpus=64, memory=1024)], budgets=[])
    row = session.get(NodeRow, "n1")
    assert row is not None and (row.cpus, row.memory_mib) == (64, 1024)
