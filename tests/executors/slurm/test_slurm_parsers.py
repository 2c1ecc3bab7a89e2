"""Readers of Slurm's output (no cluster needed): host lists, GRES indices, exit codes, node states, scripts.

Covers: the parsers the executor trusts, and that the batch script never carries a user string unquoted.
"""

from __future__ import annotations

import shlex
import subprocess

import pytest

from allotment.core.model import NodeState
from allotment.executors.slurm.cli import (
    SlurmError,
    exit_code,
    expand_hostlist,
    gpu_indices,
    gres_gpu_count,
    json_answer,
)
from allotment.executors.slurm.fleet import node_state, slurm_states
from allotment.executors.slurm.script import batch_script, job_name

from .helpers import spec


def test_expand_hostlist() -> None:
    assert expand_hostlist("gpu[01-03,07],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]
    assert expand_hostlist("gpu05") == ["gpu05"]
    assert expand_hostlist("") == []
    assert expand_hostlist("n[8-10]") == ["n8", "n9", "n10"]


def test_gpu_indices_and_gres() -> None:
    assert gpu_indices("gpu:2(IDX:0-1)") == (0, 1)
    assert gpu_indices("gpu:h100:3(IDX:0,4-5)") == (0, 4, 5)
    assert gpu_indices("") == ()
    assert gres_gpu_count("gpu:8") == (8, None)
    assert gres_gpu_count("gpu:h100:4(S:0-1)") == (4, "h100")
    assert gres_gpu_count("") == (0, None)


def test_exit_codes() -> None:
    assert exit_code(0) == 0
    assert exit_code(7 << 8) == 7
    assert exit_code(9) == 137
    assert exit_code(137 << 8) == 137
    assert (
        exit_code(
            {
                "status": ["SIGNALED"],
                "return_code": {"set": True, "number": 0},
                "signal": {"id": {"set": True, "number": 9}},
            }
        )
        == 137
    )
    assert exit_code({"return_code": 3, "signal": {"id": 0}}) == 3
    assert exit_code(None) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"state": "idle", "state_flags": []}, NodeState.READY),
        ({"state": "mixed", "state_flags": ["DRAIN"]}, NodeState.DRAINING),
        ({"state": "down", "state_flags": []}, NodeState.DOWN),
        ({"state": "idle", "state_flags": ["NOT_RESPONDING"]}, NodeState.DOWN),
        ({"state": ["IDLE", "DRAIN"]}, NodeState.DRAINING),
    ],
)
def test_node_states(raw: dict[str, object], expected: NodeState) -> None:
    assert node_state(slurm_states(raw)) is expected


def test_job_names_are_unique_and_plain() -> None:
    assert job_name("a/b", 0) != job_name("a_b", 0)
    assert job_name("x y;$(z)", 3).startswith("allot.x_y___z_.")
    assert job_name("x", 3).endswith(".3")


def test_batch_script_is_valid_bash_with_only_quoted_user_strings() -> None:
    evil = "'; rm -rf / #\n$(reboot) `halt`"
    script = batch_script(spec(evil, ["echo", evil], ["gpu01"], env={"E": evil}))
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    # shlex reads each user value back as one word, exactly as given.
    assert _words_at(script, "export E=", 2) == ["export", "E=" + evil]
    assert _words_at(script, "export ALLOT_JOB_ID=", 2) == ["export", "ALLOT_JOB_ID=" + evil]
    srun = _words_at(script, "exec srun", 100)
    assert srun[-2:] == ["echo", evil]


def _words_at(script: str, start: str, n: int) -> list[str]:
    """The first n shell words from `start` on (the srun line is the script's last command)."""
    lexer = shlex.shlex(script[script.index(start) :], posix=True)
    lexer.whitespace = " \t\n"
    lexer.whitespace_split = True
    words: list[str] = []
    while len(words) < n:
        word = lexer.get_token()
        if word is None:
            break
        words.append(word)
    return words


def test_a_json_answer_that_reports_errors_is_an_error_not_an_empty_cluster() -> None:
    # the shape of squeue --json's answer (exit status 0) while slurmctld is down, Slurm 22.05: an `errors` entry and
    # an empty job list (message text illustrative; tests/ops/test_slurmctld_restart.py sees the real one)
    down = (
        '{"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [{"error": "Unable to contact slurm '
        'controller (connect failure)", "error_number": 1007}], "jobs": []}'
    )
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        json_answer(["squeue", "--json"], down)
    assert json_answer(["squeue", "--json"], '{"errors": [], "jobs": []}') == {"errors": [], "jobs": []}
    with pytest.raises(SlurmError, match="unreadable JSON"):
        json_answer(["sinfo", "--json"], "slurm_load_partitions: Unable to contact slurm controller")
