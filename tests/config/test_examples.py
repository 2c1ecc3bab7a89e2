"""The example organisations load and have the promised sizes; the Ai2-like file matches its generator."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from allotment.config import AllotmentConfig, Role, load_config, to_core

ROOT = Path(__file__).resolve().parents[2]
AI2 = ROOT / "examples" / "ai2" / "allotment.yaml"
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
GENERATOR = ROOT / "examples" / "generate_ai2.py"


@pytest.fixture(scope="module")
def ai2() -> AllotmentConfig:
    return load_config(AI2)


def test_ai2_fleet(ai2: AllotmentConfig) -> None:
    core = to_core(ai2)
    sizes = sorted(sum(n.gpus for n in core.nodes if n.cluster == c.name) for c in core.clusters)
    assert sizes == [88, 256, 512, 1024, 1024, 1192]
    assert core.total_gpus == 4096
    assert set(ai2.gpus_by_type()) == {"H100", "B200", "B300"}
    assert all(n.gpus == 8 for n in core.nodes)
    assert all(dict(n.labels).keys() == {"rack", "block"} for n in core.nodes)
    assert core.rates == {"H100": 1_000_000, "B200": 1_600_000, "B300": 2_000_000}
    assert len({n.name for n in core.nodes}) == len(core.nodes)
    assert Counter(n.state.value for n in core.nodes)["ready"] == len(core.nodes) - 3


def test_ai2_budget_tree(ai2: AllotmentConfig) -> None:
    assert ai2.depth() == 3
    (root,) = ai2.roots()
    groups = ai2.children(root.name)
    assert len(groups) == 8
    assert 55 <= len(ai2.leaves()) <= 65
    assert all(len(ai2.ancestors(b.name)) == 2 for b in ai2.leaves())
    assert sum(1 for b in ai2.budgets if b.max_gpus is not None) >= 3
    # Allocations add up to roughly what the fleet delivers in a 30-day month.
    per_month = sum(Decimal(g) * ai2.credits[t] for t, g in ai2.gpus_by_type().items()) * 720
    assert Decimal("0.9") * per_month <= root.allocation <= per_month
    assert sum(b.allocation for b in ai2.leaves()) >= Decimal("0.9") * root.allocation


def test_ai2_people(ai2: AllotmentConfig) -> None:
    assert 140 <= len(ai2.users) <= 160
    roles = Counter(m.role for b in ai2.budgets for m in b.members)
    assert 2 <= roles[Role.ADMIN] <= 5
    assert 2 <= roles[Role.OPERATOR] <= 6
    assert all(sum(1 for m in ai2.members(g.name) if m.role is Role.LEAD) == 1 for g in ai2.children("ai2"))
    leaves = {b.name for b in ai2.leaves()}
    for user in ai2.users:
        roles_here = {r for _, r in ai2.memberships(user.name)}
        projects = [b for b, _ in ai2.memberships(user.name) if b in leaves]
        if roles_here & {Role.ADMIN, Role.OPERATOR}:
            continue
        assert 1 <= len(projects) <= 3, user.name
    assert all(ai2.members(b.name) for b in ai2.leaves())


def test_ai2_windows(ai2: AllotmentConfig) -> None:
    windows = {w.id: w for w in ai2.windows}
    assert len(windows) == 2
    run = windows["olmo-32b-b300-run"]
    assert run.gpu_type == "B300"
    assert run.end - run.start == 14 * 86400
    nightly = windows["nightly-evals-2026-11-11"]
    assert nightly.end - nightly.start == 8 * 3600


def test_small_example() -> None:
    cfg = load_config(SMALL)
    core = to_core(cfg)
    assert len(core.nodes) == 4
    assert core.total_gpus == 32
    assert len(cfg.children("lab")) == 2
    assert len(cfg.leaves()) == 4
    assert len(cfg.users) == 6


def test_generator_is_deterministic_and_matches_the_committed_file(tmp_path: Path) -> None:
    out = tmp_path / "ai2.yaml"
    for _ in range(2):
        subprocess.run([sys.executable, str(GENERATOR), "--out", str(out)], check=True)
        assert out.read_text(encoding="utf-8") == AI2.read_text(encoding="utf-8")
    check = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
