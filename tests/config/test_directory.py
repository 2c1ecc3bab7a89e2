"""A configuration split over several YAML files: sections merge, lists concatenate, conflicts are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from allotment.config import ConfigError, load_config

FLEET = """\
credits: {H100: 1.0}
fleet:
  clusters:
    - name: a
      node_groups: [{gpu_type: H100, count: 2}]
"""
MORE_FLEET = """\
credits: {B200: 1.6}
fleet:
  clusters:
    - name: b
      node_groups: [{gpu_type: B200, count: 1}]
"""
ORG = """\
period: {starts: 2026-11-01}
users:
  - {name: ann, full_name: Ann, email: ann@x.example}
budgets:
  - {name: org, allocation: 100}
"""
PROJECTS = """\
budgets:
  - {name: p1, parent: org, allocation: 50, members: [{user: ann}]}
  - {name: p2, parent: org, allocation: 60}
"""


def _dir(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_sections_merge_across_files(tmp_path: Path) -> None:
    d = _dir(tmp_path, {"10-fleet.yaml": FLEET, "11-fleet.yml": MORE_FLEET, "20-org.yaml": ORG,
                        "30-projects.yaml": PROJECTS.replace("60", "40"), "notes.txt": "ignored"})  # fmt: skip
    cfg = load_config(d)
    assert [c.name for c in cfg.fleet.clusters] == ["a", "b"]
    assert set(cfg.credits) == {"H100", "B200"}
    assert [b.name for b in cfg.budgets] == ["org", "p1", "p2"]


def test_problems_point_into_the_right_file(tmp_path: Path) -> None:
    d = _dir(tmp_path, {"10-fleet.yaml": FLEET, "20-org.yaml": ORG, "30-projects.yaml": PROJECTS})
    with pytest.raises(ConfigError) as raised:
        load_config(d)
    (problem,) = raised.value.problems
    # The merged list's index counts across files; the line is in the file that defines the item.
    assert problem.path == "budgets[0].allocation"
    assert problem.file == str(d / "20-org.yaml")
    assert problem.line == 5
    assert "less than its children's sum 110" in problem.reason
    d2 = tmp_path / "second"
    d2.mkdir()
    _dir(d2, {"10-fleet.yaml": FLEET, "20-org.yaml": ORG, "30-projects.yaml": PROJECTS.replace("p2", "p 2")})
    with pytest.raises(ConfigError) as raised:
        load_config(d2)
    (problem,) = raised.value.problems
    assert (problem.path, problem.file, problem.line) == ("budgets[2].name", str(d2 / "30-projects.yaml"), 3)


def test_the_same_setting_in_two_files_is_an_error(tmp_path: Path) -> None:
    d = _dir(tmp_path, {"a.yaml": FLEET + ORG, "b.yaml": "period: {starts: 2026-12-01}\ncredits: {H100: 2}\n"})
    with pytest.raises(ConfigError) as raised:
        load_config(d)
    problems = {p.path: p for p in raised.value.problems}
    assert set(problems) == {"period.starts", "credits.H100"}
    assert problems["credits.H100"].file == str(d / "b.yaml")
    assert problems["credits.H100"].line == 2
    assert f"{d / 'a.yaml'}:1" in problems["credits.H100"].reason


def test_a_directory_without_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    assert "no .yaml or .yml files" in raised.value.problems[0].reason
