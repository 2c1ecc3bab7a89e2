"""Round trip of a configuration into the core's plain data: rates, nodes and labels, budgets, policy, windows."""

from __future__ import annotations

from pathlib import Path

from allotment.config import load_config, to_core
from allotment.core.model import (
    Budget,
    CapacityWindow,
    Cluster,
    Node,
    NodeState,
    PolicyConfig,
)

CONFIG = """\
credits: {H100: 1, B200: 1.6, B300: 2.0}
period: {length: quarter, starts: 2026-10-01, carry_over: true}
fleet:
  clusters:
    - name: jupiter
      topology: [rack, block]
      node_groups:
        - {gpu_type: B200, count: 10, rack_size: 2, block_size: 2}
        - {gpu_type: H100, count: 3, gpus_per_node: 4, rack_size: 2, block_size: 2, prefix: jup-old}
      node_states:
        - {node: jupiter-b200-0003, state: down}
        - {node: jupiter-b200-0004, state: draining, forced: true}
        - {node: jup-old-0002, state: cordoned}
    - name: small
      node_groups: [{gpu_type: B300, count: 1}]
users:
  - {name: u1, full_name: User One, email: u1@x.example}
  - {name: u2, full_name: User Two, email: u2@x.example}
budgets:
  - {name: org, allocation: 1000.5, members: [{user: u1, role: admin}]}
  - {name: a, parent: org, allocation: 0.25, max_gpus: 16, members: [{user: u2}, {user: u1, role: lead}]}
policy:
  min_slice: 15m
  max_slice: 12h
  max_grace: 90s
  session_max_gpus: 4
  session_max_length: 1d
  session_idle_timeout: 1800
  session_max_per_user: 1
  default_headroom: 0
  headroom: {jupiter: 8}
  headroom_max_grace: 10s
  opportunistic_price: 0.25
  session_price: 1.5
  usage_half_life: 2d
  starvation_after: 3d
  max_reservations: 7
windows:
  - {id: w, budget: a, cluster: jupiter, gpu_type: B200, gpus: 16, start: 2026-11-08T00:00:00Z,
     end: 2026-11-08T08:00:00+02:00}
"""


def test_round_trip_to_core_types(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    cfg = load_config(path)
    core = to_core(cfg)
    assert core.rates == {"H100": 1_000_000, "B200": 1_600_000, "B300": 2_000_000}
    assert core.clusters == (Cluster("jupiter", ("rack", "block")), Cluster("small", ()))
    assert core.budgets == (
        Budget("org", None, 1_000_500_000, None),
        Budget("a", "org", 250_000, 16),
    )
    assert core.policy == PolicyConfig(
        min_slice=900, max_slice=43200, max_grace=90, session_max_gpus=4, session_max_length=86400,
        session_idle_timeout=1800, session_max_per_user=1, default_headroom=0, headroom={"jupiter": 8},
        headroom_max_grace=10, opportunistic_price=250, session_price=1500, usage_half_life=172800,
        starvation_after=259200, max_reservations=7,
    )  # fmt: skip
    assert core.windows == (CapacityWindow("w", "a", "jupiter", "B200", 16, 1794096000, 1794117600),)
    assert len(core.nodes) == 14
    assert core.total_gpus == 10 * 8 + 3 * 4 + 8
    by_name = {n.name: n for n in core.nodes}
    assert by_name["jupiter-b200-0000"] == Node(
        "jupiter-b200-0000", "jupiter", "B200", 8, (("rack", "r000"), ("block", "b00"))
    )
    # 10 B200 nodes: racks r000–r004 (2 nodes each), blocks b00–b02 (2 racks each); the H100 group continues.
    assert by_name["jupiter-b200-0009"].labels == (("rack", "r004"), ("block", "b02"))
    assert by_name["jup-old-0000"].labels == (("rack", "r005"), ("block", "b03"))
    assert by_name["jup-old-0002"].labels == (("rack", "r006"), ("block", "b03"))
    assert by_name["jup-old-0002"].gpus == 4
    assert by_name["jupiter-b200-0003"].state is NodeState.DOWN
    assert by_name["jupiter-b200-0004"].state is NodeState.DRAINING
    assert by_name["jupiter-b200-0004"].forced
    assert by_name["jup-old-0002"].state is NodeState.CORDONED
    assert by_name["small-b300-0000"].labels == ()
    assert sum(1 for n in core.nodes if n.state is NodeState.READY) == 11


def test_members_users_and_period_stay_in_the_config_layer(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    cfg = load_config(path)
    assert cfg.memberships("u1") == (("org", "admin"), ("a", "lead"))
    assert [m.user for m in cfg.members("a")] == ["u2", "u1"]
    assert cfg.user("u2").email == "u2@x.example"
    assert cfg.period.carry_over
    assert [b.name for b in cfg.leaves()] == ["a"]
    assert cfg.ancestors("a") == ("org",)
    assert cfg.pool_sizes() == {("jupiter", "B200"): 80, ("jupiter", "H100"): 12, ("small", "B300"): 8}


def test_defaults_follow_the_core_policy(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.split("policy:", maxsplit=1)[0], encoding="utf-8")
    assert to_core(load_config(path)).policy == PolicyConfig()
