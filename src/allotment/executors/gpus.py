"""GPU discovery: which NVIDIA GPUs this host has, as nvidia-smi reports them.

Owns: running `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader`, parsing its output,
and mapping the marketing names to Allotment GPU types (H100, H200, B200, B300, else the raw name).
Must not: import anything but the standard library (scripts/gpu-check runs it with only the repository on
PYTHONPATH), or invent GPUs: when nvidia-smi is absent, discover_gpus() returns None and the caller falls back
to the GPU count declared in configuration (a "virtual" fleet).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

QUERY = ("--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader")

GPU_TYPES: tuple[tuple[str, str], ...] = (
    ("H100", "H100"),
    ("H200", "H200"),
    ("B200", "B200"),
    ("GB200", "B200"),
    ("B300", "B300"),
    ("GB300", "B300"),
)
"""Name token → Allotment GPU type. Tokens match whole words of the name, so "GH200" (a Grace Hopper
superchip, not an H200) keeps its raw name while "GB200" (Grace + B200 GPUs) is a B200."""

NO_DEVICES = "No devices were found"


class GpuDiscoveryError(RuntimeError):
    """nvidia-smi exists but failed (e.g. the driver is not loaded): a broken GPU host, not a GPU-less one."""


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    uuid: str
    name: str
    """The name as nvidia-smi prints it, e.g. "NVIDIA H200"."""
    memory_mib: int | None
    """Total memory in MiB; None when nvidia-smi reports it as not available."""
    gpu_type: str
    """The Allotment GPU type (see gpu_type_for)."""


def gpu_type_for(name: str) -> str:
    """The Allotment GPU type of an nvidia-smi name: "NVIDIA H100 80GB HBM3" → "H100"; others unchanged."""
    tokens = set(re.split(r"[^A-Za-z0-9]+", name.upper()))
    for token, gpu_type in GPU_TYPES:
        if token in tokens:
            return gpu_type
    return name.strip()


def _memory_mib(field: str) -> int | None:
    match = re.fullmatch(r"(\d+)\s*(MiB)?", field.strip())
    return int(match.group(1)) if match else None


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Parse the CSV (no header) that QUERY prints: one "index, uuid, name, memory" line per GPU."""
    gpus: list[Gpu] = []
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(NO_DEVICES):
            return []
        # The name is the only field that might contain a comma, so split from both ends.
        head = line.split(",", 2)
        if len(head) != 3:
            raise GpuDiscoveryError(f"nvidia-smi line {line_no} has too few fields: {line!r}")
        index_field, uuid_field, rest = head
        name_field, sep, memory_field = rest.rpartition(",")
        if not sep or not index_field.strip().isdigit():
            raise GpuDiscoveryError(f"nvidia-smi line {line_no} is not index, uuid, name, memory: {line!r}")
        name = name_field.strip()
        gpus.append(
            Gpu(
                index=int(index_field),
                uuid=uuid_field.strip(),
                name=name,
                memory_mib=_memory_mib(memory_field),
                gpu_type=gpu_type_for(name),
            )
        )
    return sorted(gpus, key=lambda g: g.index)


def discover_gpus(nvidia_smi: str = "nvidia-smi", timeout: float = 30.0) -> list[Gpu] | None:
    """This host's GPUs by index; None when nvidia-smi is not installed (fall back to configuration).

    An empty list means nvidia-smi runs but sees no device. Raises GpuDiscoveryError when nvidia-smi fails in
    any other way or prints something that is not its CSV.
    """
    path = shutil.which(nvidia_smi)
    if path is None:
        return None
    try:
        result = subprocess.run([path, *QUERY], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpuDiscoveryError(f"{path} could not be run: {exc}") from exc
    if result.returncode != 0:
        if NO_DEVICES in result.stdout or NO_DEVICES in result.stderr:
            return []
        message = (result.stderr or result.stdout).strip()
        raise GpuDiscoveryError(f"{path} exited with {result.returncode}: {message}")
    return parse_nvidia_smi(result.stdout)
