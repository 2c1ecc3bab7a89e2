"""Bad configurations: each named case must report the right dotted path, YAML line and reason.

Every case starts from a small valid configuration and changes one thing, so exactly that problem is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from allotment.config import ConfigError, load_config

VALID = """\
credits:
  H100: 1.0
  B200: 1.6
period:
  length: month
  starts: 2026-11-01
fleet:
  clusters:
    - name: c1
      topology: [rack, block]
      node_groups:
        - gpu_type: H100
          count: 4
          rack_size: 2
          block_size: 2
users:
  - {name: ann, full_name: Ann Lee, email: ann@x.example}
  - {name: bob, full_name: Bob Kim, email: bob@x.example}
budgets:
  - name: org
    allocation: 1000
  - name: team
    parent: org
    allocation: 600
    members:
      - {user: ann, role: lead}
  - name: proj
    parent: team
    allocation: 500
    members:
      - {user: bob, role: member}
policy:
  min_slice: 30m
  max_slice: 8h
windows:
  - id: w1
    budget: proj
    cluster: c1
    gpu_type: H100
    gpus: 16
    start: 2026-11-02T00:00:00Z
    end: 2026-11-03T00:00:00Z
"""


@dataclass(frozen=True)
class Case:
    name: str
    old: str
    new: str
    path: str
    line: int
    reason: str


CASES = [
    Case("unknown key with suggestion", "          count: 4\n", "          count: 4\n          rack_szie: 2\n",
         "fleet.clusters[0].node_groups[0].rack_szie", 14, "did you mean 'rack_size'"),
    Case("unknown top-level section", "policy:\n", "polcy:\n", "polcy", 32, "did you mean 'policy'"),
    Case("missing required field", "          count: 4\n", "", "fleet.clusters[0].node_groups[0].count", 12,
         "required field is missing"),
    Case("rate not exact to a micro-credit", "  B200: 1.6\n", "  B200: 1.6000001\n", "credits.B200", 3,
         "more than six decimal places"),
    Case("zero rate", "  B200: 1.6\n", "  B200: 0\n", "credits.B200", 3, "greater than zero"),
    Case("boolean count", "          count: 4\n", "          count: yes\n",
         "fleet.clusters[0].node_groups[0].count", 13, "valid integer"),
    Case("bad duration", "  min_slice: 30m\n", "  min_slice: 30 minutes\n", "policy.min_slice", 33,
         "is not a duration"),
    Case("max slice below min slice", "  max_slice: 8h\n", "  max_slice: 10m\n", "policy.max_slice", 34,
         "at least min_slice"),
    Case("price finer than per mille", "  max_slice: 8h\n", "  max_slice: 8h\n  opportunistic_price: 0.4005\n",
         "policy.opportunistic_price", 35, "finer than a thousandth"),
    Case("starvation bound of zero", "  max_slice: 8h\n", "  max_slice: 8h\n  starvation_after: 0\n",
         "policy.starvation_after", 35, "must be longer than zero"),
    Case("negative checkpoint wait", "  max_slice: 8h\n", "  max_slice: 8h\n  checkpoint_wait: -5\n",
         "policy.checkpoint_wait", 35, "must not be negative"),
    Case("headroom for unknown cluster", "  max_slice: 8h\n", "  max_slice: 8h\n  headroom: {c9: 8}\n",
         "policy.headroom.c9", 35, "unknown cluster 'c9'"),
    Case("unknown role", "      - {user: bob, role: member}\n", "      - {user: bob, role: boss}\n",
         "budgets[2].members[0].role", 31, "'admin', 'operator', 'lead' or 'member'"),
    Case("member is not a user", "      - {user: bob, role: member}\n", "      - {user: eve, role: member}\n",
         "budgets[2].members[0].user", 31, "unknown user 'eve'"),
    Case("parent does not exist", "    parent: team\n", "    parent: teem\n", "budgets[2].parent", 28,
         "parent budget 'teem' does not exist"),
    Case("duplicate budget name", "policy:\n", "  - {name: proj, parent: team, allocation: 50}\npolicy:\n",
         "budgets[3].name", 32, "duplicate budget name 'proj'"),
    Case("children exceed parent", "    allocation: 500\n", "    allocation: 700\n", "budgets[1].allocation", 24,
         "less than its children's sum 700"),
    Case("cycle in the tree", "  - name: org\n    allocation: 1000\n",
         "  - name: org\n    parent: proj\n    allocation: 1000\n", "budgets[0].parent", 21, "cycle"),
    Case("duplicate user", "budgets:\n", "  - {name: ann, full_name: Ann Two, email: a2@x.example}\nbudgets:\n",
         "users[2].name", 19, "duplicate user name 'ann'"),
    Case("bad email", "email: bob@x.example", "email: bob-at-x", "users[1].email", 18, "not an email address"),
    Case("bad name", "    - name: c1\n", "    - name: 'c 1'\n", "fleet.clusters[0].name", 9, "not a valid name"),
    Case("GPU type without a rate", "users:\n",
         "        - {gpu_type: A100, count: 1, rack_size: 1, block_size: 1}\nusers:\n",
         "fleet.clusters[0].node_groups[1].gpu_type", 16, "GPU type 'A100' has no rate in credits (B200, H100)"),
    Case("topology needs rack size", "          rack_size: 2\n", "", "fleet.clusters[0].node_groups[0].rack_size",
         12, "required: the cluster's topology names 'rack'"),
    Case("unsupported topology", "      topology: [rack, block]\n", "      topology: [block, rack]\n",
         "fleet.clusters[0].topology", 10, "topology must be"),
    Case("override of unknown node", "          block_size: 2\n",
         "          block_size: 2\n      node_states:\n        - {node: c1-h100-0009, state: down}\n",
         "fleet.clusters[0].node_states[0].node", 17, "has no node 'c1-h100-0009'"),
    Case("override state ready", "          block_size: 2\n",
         "          block_size: 2\n      node_states:\n        - {node: c1-h100-0001, state: ready}\n",
         "fleet.clusters[0].node_states[0].state", 17, "'cordoned', 'draining' or 'down'"),
    Case("monthly period on day 31", "  starts: 2026-11-01\n", "  starts: 2026-10-31\n", "period.starts", 6,
         "day 1–28"),
    Case("impossible date", "  starts: 2026-11-01\n", "  starts: 2026-11-31\n", "period.starts", 6,
         "not an ISO 8601 date"),
    Case("window without timezone", "    start: 2026-11-02T00:00:00Z\n", "    start: 2026-11-02T00:00:00\n",
         "windows[0].start", 41, "no timezone"),
    Case("window ends before it starts", "    end: 2026-11-03T00:00:00Z\n", "    end: 2026-11-01T00:00:00Z\n",
         "windows[0].end", 42, "must be after start"),
    Case("window larger than its pool", "    gpus: 16\n", "    gpus: 40\n", "windows[0].gpus", 40,
         "40 GPUs exceed the pool's 32"),
    Case("window on a missing pool", "    gpu_type: H100\n    gpus: 16\n", "    gpu_type: B200\n    gpus: 16\n",
         "windows[0].gpu_type", 39, "has no B200 GPUs"),
    Case("window for unknown budget", "    budget: proj\n", "    budget: nope\n", "windows[0].budget", 37,
         "unknown budget 'nope'"),
    Case("overlapping windows overbook a pool", "    end: 2026-11-03T00:00:00Z\n",
         "    end: 2026-11-03T00:00:00Z\n  - {id: w2, budget: team, cluster: c1, gpu_type: H100, gpus: 20,"
         " start: 2026-11-02T12:00:00Z, end: 2026-11-04T00:00:00Z}\n",
         "windows[1].gpus", 43, "book 36 GPUs of pool c1/H100, which has 32"),
    Case("unknown run-as mode", "    end: 2026-11-03T00:00:00Z\n",
         "    end: 2026-11-03T00:00:00Z\nrun_as:\n  mode: owners\n",
         "run_as.mode", 44, "'owner', 'single-user' or 'auto'"),
    Case("run-as account for an unknown user", "    end: 2026-11-03T00:00:00Z\n",
         "    end: 2026-11-03T00:00:00Z\nrun_as:\n  accounts: {eve: eve1}\n",
         "run_as.accounts.eve", 44, "unknown user 'eve'"),
    Case("run-as account that is no Unix name", "    end: 2026-11-03T00:00:00Z\n",
         "    end: 2026-11-03T00:00:00Z\nrun_as:\n  accounts: {bob: 'Bob Kim'}\n",
         "run_as.accounts.bob", 44, "'Bob Kim' is not a Unix account name"),
    Case("duplicate key", "  max_slice: 8h\n", "  max_slice: 8h\n  min_slice: 1h\n", "policy.min_slice", 35,
         "duplicate key 'min_slice' (first at line 33)"),
    Case("list where a mapping belongs", "period:\n  length: month\n  starts: 2026-11-01\n",
         "period:\n  - month\n  - 2026-11-01\n", "period", 4, "expected a mapping"),
]  # fmt: skip


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "allotment.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_base_configuration_is_valid(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, VALID))
    assert [b.name for b in cfg.budgets] == ["org", "team", "proj"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_reports_path_line_and_reason(tmp_path: Path, case: Case) -> None:
    assert VALID.count(case.old) == 1, "the case must change exactly one place"
    path = _write(tmp_path, VALID.replace(case.old, case.new))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    problems = raised.value.problems
    assert len(problems) == 1, "\n".join(map(str, problems))
    problem = problems[0]
    assert problem.path == case.path
    assert problem.line == case.line
    assert case.reason in problem.reason
    assert problem.file == str(path)
    assert str(problem).startswith(f"{path}:{case.line}: {case.path}: ")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = VALID.replace("  B200: 1.6\n", "  B200: -1\n").replace("  min_slice: 30m\n", "  min_slice: soon\n")
    with pytest.raises(ConfigError) as raised:
        load_config(_write(tmp_path, text))
    assert [(p.path, p.line) for p in raised.value.problems] == [("credits.B200", 3), ("policy.min_slice", 33)]
    assert "2 problems in the configuration" in str(raised.value)


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(_write(tmp_path, VALID.replace("  H100: 1.0\n", "  H100: [1.0\n")))
    (problem,) = raised.value.problems
    assert problem.path == ""
    assert problem.line is not None
    assert problem.reason.startswith("invalid YAML")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "nope.yaml")
    assert raised.value.problems[0].reason == "no such file or directory"


def test_empty_file_lists_the_required_sections(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(_write(tmp_path, "# nothing yet\n"))
    assert sorted(p.path for p in raised.value.problems) == ["budgets", "credits", "fleet", "period"]
    assert all(p.reason == "required field is missing" for p in raised.value.problems)
