"""scripts/gpu-check on a machine without a GPU: it says so and exits with its own code (3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu-check"


@pytest.mark.timeout(120)
def test_gpu_check_without_a_gpu_says_so_and_exits_3(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHON": sys.executable,
        "ALLOT_NVIDIA_SMI": str(tmp_path / "no-nvidia-smi"),  # as on a machine without the NVIDIA driver
        "OUT": str(tmp_path),
    }
    result = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=100, check=False)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "NO GPU" in result.stdout
    assert "PASS" not in result.stdout and "FAIL" not in result.stdout
    assert "NO GPU" in (tmp_path / "gpu-check.txt").read_text()
