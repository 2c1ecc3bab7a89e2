"""GPU discovery: parsing nvidia-smi's CSV and the path without nvidia-smi."""

from __future__ import annotations

import pytest

from allotment.executors.gpus import Gpu, GpuDiscoveryError, discover_gpus, gpu_type_for, parse_nvidia_smi

# Output of `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader`, in the format nvidia-smi
# prints it (trailing newline included).
H200_NODE = """\
0, GPU-3f5c9a2e-1b7d-4e8a-9c6f-0d2b4a6e8c10, NVIDIA H200, 143771 MiB
1, GPU-8a1e4c7b-2d9f-4b3a-8e5c-1f7a3c9e5b21, NVIDIA H200, 143771 MiB
2, GPU-c2d7e9f1-3a5b-4c8d-9e1f-2a4b6c8d0e32, NVIDIA H200, 143771 MiB
3, GPU-e4f6a8b0-4c2d-4e6f-8a0b-3c5d7e9f1a43, NVIDIA H200, 143771 MiB
"""

MIXED = """\
0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 81559 MiB
1, GPU-21111111-2222-3333-4444-555555555555, NVIDIA B200, 183359 MiB
2, GPU-31111111-2222-3333-4444-555555555555, NVIDIA B300 SXM6 AC, 275040 MiB
3, GPU-41111111-2222-3333-4444-555555555555, NVIDIA GB200, 189471 MiB
4, GPU-51111111-2222-3333-4444-555555555555, NVIDIA GH200 480GB, 97871 MiB
5, GPU-61111111-2222-3333-4444-555555555555, NVIDIA A100-SXM4-80GB, [N/A]
"""


def test_parses_an_h200_node() -> None:
    gpus = parse_nvidia_smi(H200_NODE)
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert gpus[0] == Gpu(0, "GPU-3f5c9a2e-1b7d-4e8a-9c6f-0d2b4a6e8c10", "NVIDIA H200", 143771, "H200")
    assert {g.gpu_type for g in gpus} == {"H200"}


def test_maps_names_to_allotment_gpu_types_and_keeps_unknown_names() -> None:
    gpus = parse_nvidia_smi(MIXED)
    assert [(g.name, g.gpu_type) for g in gpus] == [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA GB200", "B200"),
        ("NVIDIA GH200 480GB", "NVIDIA GH200 480GB"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
    ]
    assert gpus[5].memory_mib is None


@pytest.mark.parametrize(
    ("name", "gpu_type"),
    [("NVIDIA H100 PCIe", "H100"), ("NVIDIA H100 NVL", "H100"), ("NVIDIA H200 NVL", "H200"), ("Tesla T4", "Tesla T4")],
)
def test_gpu_type_for(name: str, gpu_type: str) -> None:
    assert gpu_type_for(name) == gpu_type


def test_lines_come_back_sorted_by_index_and_blank_lines_are_ignored() -> None:
    text = "\n1, GPU-b, NVIDIA H100 80GB HBM3, 81559 MiB\n\n0, GPU-a, NVIDIA H100 80GB HBM3, 81559 MiB\n"
    assert [g.uuid for g in parse_nvidia_smi(text)] == ["GPU-a", "GPU-b"]


def test_no_devices_and_empty_output_mean_no_gpus() -> None:
    assert parse_nvidia_smi("No devices were found\n") == []
    assert parse_nvidia_smi("") == []


def test_output_that_is_not_the_query_csv_is_an_error() -> None:
    with pytest.raises(GpuDiscoveryError):
        parse_nvidia_smi(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n"
        )


def test_without_nvidia_smi_discovery_returns_none() -> None:
    assert discover_gpus(nvidia_smi="/nonexistent/bin/nvidia-smi") is None
    assert discover_gpus(nvidia_smi="allotment-no-such-nvidia-smi") is None
