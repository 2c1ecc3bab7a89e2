"""The local executor's fleet: a host's real GPUs found by nvidia-smi replace the configured virtual nodes; without
nvidia-smi the configuration's nodes are used (issue 4: "GPUs are discovered with nvidia-smi when present, otherwise
declared in configuration"). The stand-in nvidia-smi below prints output captured from a real H200 host (the real
one was exercised by scripts/gpu-check, docs/measurements/gpu-check-h200.txt)."""

from __future__ import annotations

import socket
from pathlib import Path

from allotment.config import load_config
from allotment.engine.setup import host_fleet
from tests.engine.rig import SMALL

CAPTURED = "0, GPU-51f958ed-00a4-3c88-a88c-5747778d3f59, NVIDIA H200, 143771 MiB\n"


def _fake_nvidia_smi(tmp_path: Path, output: str) -> str:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{output}'\n")
    script.chmod(0o755)
    return str(script)


def test_a_host_with_gpus_is_one_node_with_exactly_those_gpus(tmp_path: Path) -> None:
    fleet = host_fleet(load_config(SMALL), _fake_nvidia_smi(tmp_path, CAPTURED * 1))
    assert fleet is not None
    (node,) = fleet
    assert node.name == socket.gethostname() and node.gpus == 1 and node.cluster == "lab"
    # H200 has no credit rate in the small example: it is counted as the configured type (H100)
    assert node.gpu_type == "H100"


def test_without_nvidia_smi_the_configured_nodes_are_used(tmp_path: Path) -> None:
    assert host_fleet(load_config(SMALL), str(tmp_path / "no-such-nvidia-smi")) is None
