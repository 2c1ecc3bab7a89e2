"""Seeding the fleet and budgets from core types, the audit log, job transitions and engine key/values."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.core.model import Budget, CapacityWindow, Cluster, Node, NodeState
from allotment.ledger import INFRASTRUCTURE
from allotment.store.fleet import memberships, seed_from
from allotment.store.records import audit, audit_log, get_state, job_events, set_state, transition
from allotment.store.tables import BudgetRow, NodeRow, UserRow, WindowRow

from .support import H100, T0, add_job, seed_org


def test_seeding_creates_the_tree_users_and_infrastructure_account(session: Session) -> None:
    seed_org(session)
    budgets = {b.name: b.parent for b in session.scalars(select(BudgetRow))}
    assert budgets["detect"] == "vision"
    assert budgets["org"] is None
    assert budgets[INFRASTRUCTURE] is None
    users = {u.name: u.admin for u in session.scalars(select(UserRow))}
    assert users == {"ada": False, "bob": False, "root": True}
    assert memberships(session) == [
        ("chat", "bob", "member"),
        ("detect", "ada", "member"),
        ("segment", "ada", "lead"),
    ]


def test_reseeding_updates_shape_but_keeps_operational_node_state(session: Session) -> None:
    seed_org(session)
    node = session.get_one(NodeRow, "n1")
    node.state, node.forced, node.reason = NodeState.DRAINING.value, True, "bad ECC"
    session.flush()
    seed_from(
        session,
        now=T0 + 60,
        clusters=[Cluster("c1", ("rack", "block"))],
        nodes=[Node("n1", "c1", "h100", 4, (("rack", "r9"),))],
        budgets=[Budget("org", None, 20_000 * H100), Budget("detect", "org", 7 * H100, max_gpus=16)],
        members=[("detect", "ada", "lead")],
        windows=[CapacityWindow("w1", "detect", "c1", "h100", 8, T0, T0 + 3600)],
        prune=True,
    )
    session.expire_all()
    n1 = session.get_one(NodeRow, "n1")
    assert (n1.state, n1.forced, n1.reason) == ("draining", True, "bad ECC")
    assert (n1.gpus, n1.labels, n1.updated_at) == (4, {"rack": "r9"}, T0 + 60)
    detect = session.get_one(BudgetRow, "detect")
    assert (detect.parent, detect.allocation_micro, detect.max_gpus) == ("org", 7 * H100, 16)
    assert memberships(session) == [("detect", "ada", "lead")]
    assert [w.id for w in session.scalars(select(WindowRow))] == ["w1"]


def test_audit_log_records_who_did_what_and_why(session: Session) -> None:
    seed_org(session)
    audit(session, at=T0, actor="root", action="drain", target="node:n1", why="bad ECC", detail={"forced": True})
    audit(session, at=T0 + 5, actor="ada", action="cancel", target="job:j1")
    newest = audit_log(session)
    assert [(r.actor, r.action) for r in newest] == [("ada", "cancel"), ("root", "drain")]
    only = audit_log(session, target="node:n1")
    assert [(r.why, r.detail) for r in only] == [("bad ECC", {"forced": True})]


def test_every_job_transition_is_recorded(session: Session) -> None:
    seed_org(session)
    job = add_job(session, "j1")
    job.state = "pending"
    transition(session, job, "running", T0 + 1, "started by fair-share")
    transition(session, job, "preempting", T0 + 2, "for-session")
    transition(session, job, "pending", T0 + 3, "requeued")
    transition(session, job, "cancelled", T0 + 4, "by owner")
    with pytest.raises(ValueError, match="cannot become"):
        transition(session, job, "running", T0 + 5, "resurrect")
    with pytest.raises(ValueError, match="unknown"):
        transition(session, add_job(session, "j2"), "paused", T0, "")
    events = [(e.from_state, e.to_state, e.at) for e in job_events(session, "j1")]
    assert events == [
        ("pending", "running", T0 + 1),
        ("running", "preempting", T0 + 2),
        ("preempting", "pending", T0 + 3),
        ("pending", "cancelled", T0 + 4),
    ]
    assert (job.state, job.state_reason, job.updated_at) == ("cancelled", "by owner", T0 + 4)


def test_engine_state_is_a_key_value_store(session: Session) -> None:
    assert get_state(session, "cycle", 0) == 0
    set_state(session, "cycle", {"n": 1, "at": T0})
    set_state(session, "cycle", {"n": 2, "at": T0 + 10})
    assert get_state(session, "cycle") == {"n": 2, "at": T0 + 10}
