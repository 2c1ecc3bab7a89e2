"""`allotment.sdk.report_checkpoint()`: inside a job it touches $ALLOT_CHECKPOINT_FILE (the local executor turns each
touch into a CHECKPOINTED event: tests/executors/test_local_executor.py); outside one it does nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from allotment.sdk import report_checkpoint


def test_it_touches_the_file_the_executor_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "allot-checkpoint"
    monkeypatch.setenv("ALLOT_CHECKPOINT_FILE", str(marker))
    assert report_checkpoint() is True
    os.utime(marker, (1_000, 1_000))
    assert report_checkpoint() is True
    assert marker.stat().st_mtime > 1_000


def test_outside_a_job_it_reports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALLOT_CHECKPOINT_FILE", raising=False)
    assert report_checkpoint() is False
    monkeypatch.setenv("ALLOT_CHECKPOINT_FILE", str(tmp_path / "missing" / "allot-checkpoint"))
    assert report_checkpoint() is False
