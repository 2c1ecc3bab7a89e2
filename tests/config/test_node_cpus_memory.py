"""Nodes declare the CPUs and memory they offer beside their GPUs (`cpus_per_node`, `memory_per_node` of a node
group); a group that declares neither keeps 0, which placement reads as unconstrained (old configurations keep
working). Memory sizes read as MiB: an integer, or a string with a binary unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from allotment.config import load_config, to_core
from allotment.config.errors import ConfigError
from allotment.config.fields import memory_text, parse_memory

CONFIG = """\
credits: {H100: 1}
period: {length: month, starts: 2026-10-01}
fleet:
  clusters:
    - name: lab
      node_groups:
        - {gpu_type: H100, count: 2, cpus_per_node: 224, memory_per_node: 2T, prefix: big}
        - {gpu_type: H100, count: 1, cpus_per_node: 64, prefix: cpu-only}
        - {gpu_type: H100, count: 1, prefix: old}
users: [{name: u1, full_name: User One, email: u1@x.example}]
budgets: [{name: org, allocation: 10, members: [{user: u1}]}]
"""


@pytest.mark.parametrize(
    ("given", "mib"),
    [
        pytest.param(512, 512, id="an-integer-is-mib"),
        pytest.param("512", 512, id="digits-are-mib"),
        pytest.param("512M", 512, id="mebibytes"),
        pytest.param("16G", 16 * 1024, id="gibibytes"),
        pytest.param("16g", 16 * 1024, id="lower-case"),
        pytest.param("16Gi", 16 * 1024, id="binary-suffix"),
        pytest.param("16GB", 16 * 1024, id="bytes-suffix-reads-binary"),
        pytest.param("2T", 2 * 1024 * 1024, id="tebibytes"),
        pytest.param(0, 0, id="zero-is-no-request"),
    ],
)
def test_memory_sizes_read_as_mib(given: str | int, mib: int) -> None:
    assert parse_memory(given) == mib


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param("1.5G", "not a memory size", id="a-fraction"),
        pytest.param("16X", "not a memory size", id="an-unknown-unit"),
        pytest.param("100K", "use M, G or T", id="below-a-mib"),
        pytest.param(-1, "must not be negative", id="negative"),
        pytest.param(True, "not a memory size", id="a-boolean"),
        pytest.param(2**41, "at most", id="beyond-an-exbibyte"),
    ],
)
def test_bad_memory_sizes_say_why(bad: object, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_memory(bad)


@pytest.mark.parametrize(("mib", "text"), [(16384, "16G"), (1536, "1536M"), (2 * 1024 * 1024, "2T"), (0, "0M")])
def test_memory_text_is_read_back_exactly(mib: int, text: str) -> None:
    assert memory_text(mib) == text and parse_memory(text) == mib


def test_node_groups_declare_cpus_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "allotment.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    nodes = {n.name: (n.cpus, n.memory) for n in to_core(load_config(path)).nodes}
    assert nodes == {
        "big-0000": (224, 2 * 1024 * 1024),
        "big-0001": (224, 2 * 1024 * 1024),
        "cpu-only-0000": (64, 0),
        "old-0000": (0, 0),
    }


def test_a_bad_node_memory_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "allotment.yaml"
    path.write_text(CONFIG.replace("memory_per_node: 2T", "memory_per_node: plenty"), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert "memory_per_node" in str(raised.value) and "allotment.yaml:7:" in str(raised.value)
