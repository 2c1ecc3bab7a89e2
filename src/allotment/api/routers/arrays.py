"""/arrays: a job array's view, and cancel, hold and release of its tasks (its tasks are jobs: /jobs/{task id}).

Owns: the HTTP shape of the array use cases (status codes, bodies).
Must not: hold rules: service.arrays (and service.jobs, which submits arrays through POST /jobs) do.
"""

from __future__ import annotations

from fastapi import APIRouter

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.service import arrays, holds
from allotment.service.views import ArrayControl, ArrayView

router = APIRouter(prefix="/arrays", tags=["jobs"], responses=ERROR_RESPONSES)


@router.get("/{array_id}", response_model=ArrayView)
def get_array(array_id: str, ctx: Ctx, caller: Caller) -> ArrayView:
    """The array (submitted with `array:` in a spec): its tasks counted per state, with their indices, and `held`.
    Whoever may see one of its jobs' details may see it."""
    return arrays.get_array(ctx, caller, array_id)


@router.post("/{array_id}/cancel", response_model=ArrayControl)
def cancel(array_id: str, ctx: Ctx, caller: Caller) -> ArrayControl:
    """Ask the engine to cancel every active task (scancel ARRAY); one task: POST /jobs/{task id}/cancel."""
    return arrays.cancel_array(ctx, caller, array_id)


@router.post("/{array_id}/hold", response_model=ArrayControl)
def hold(array_id: str, ctx: Ctx, caller: Caller, body: holds.HoldRequest | None = None) -> ArrayControl:
    """Hold every pending task (scontrol hold ARRAY); running tasks go on. `kind` as for one job's hold."""
    return arrays.hold_array(ctx, caller, array_id, body)


@router.post("/{array_id}/release", response_model=ArrayControl)
def release(array_id: str, ctx: Ctx, caller: Caller) -> ArrayControl:
    """Release every held task (scontrol release ARRAY); any admin hold among them: administrators only (403)."""
    return arrays.release_array(ctx, caller, array_id)
