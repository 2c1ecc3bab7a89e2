"""The Python client of the Allotment HTTP API: one typed method per endpoint, over httpx.

Owns: `Client(base_url, token)` (or `Client.from_env()`): building requests, the bearer token, turning responses
into the models of `allotment.sdk.models` and failures into `ApiError`, following pagination (`iter_jobs`), logs
(`follow_logs`) and sessions until they are ready (`wait_session`).

Must not: import the server's packages (api, service, store, engine), print, or exit: it is a library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from allotment.core.jobstate import FINAL
from allotment.sdk import models as m
from allotment.sdk.config import resolve
from allotment.sdk.errors import ApiError

T = TypeVar("T", bound=BaseModel)
Duration = int | str
"""Seconds, or a string such as 90s, 30m, 8h, 2d, 1h30m."""

FINAL_STATES = FINAL
NODES = TypeAdapter(list[m.Node])
TOKENS = TypeAdapter(list[m.Token])
MEMBERS = TypeAdapter(list[m.Member])


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v not in ([], ())}


class Client:
    """A connection to one Allotment server as one user (the token's)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    @classmethod
    def from_env(cls, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> Client:
        """A client configured by arguments, else ALLOT_URL / ALLOT_TOKEN, else the file `allot login` wrote."""
        settings = resolve(url, token)
        return cls(settings.url, settings.token, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON body, or raise ApiError."""
        try:
            response = self._http.request(method, path, json=json, params=params, headers=headers)
        except httpx.TransportError as error:
            raise ApiError.unreachable(self.base_url, error) from error
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response.json() if response.content else None

    def _get(self, model: type[T], path: str, **params: Any) -> T:
        return model.model_validate(self.request("GET", path, params=_params(**params)))

    def _post(self, model: type[T], path: str, body: Any = None, headers: Mapping[str, str] | None = None) -> T:
        return model.model_validate(self.request("POST", path, json=body, headers=headers))

    # -- health and authentication -------------------------------------------------------------------------------

    def health(self) -> m.Health:
        return self._get(m.Health, "/health")

    def login(self, user: str, *, name: str = "", ttl: Duration | None = None) -> m.NewToken:
        """A token for `user`: needs an administrator's token (or the user's own), or a server with open login."""
        return self._post(m.NewToken, "/auth/login", _params(user=user, name=name, ttl=ttl))

    def me(self) -> m.Me:
        return self._get(m.Me, "/auth/me")

    def create_token(self, user: str, *, name: str = "", ttl: Duration | None = None) -> m.NewToken:
        return self._post(m.NewToken, "/auth/tokens", _params(user=user, name=name, ttl=ttl))

    def tokens(self, user: str | None = None) -> list[m.Token]:
        return TOKENS.validate_python(self.request("GET", "/auth/tokens", params=_params(user=user)))

    def revoke_token(self, token_id: str) -> m.Token:
        return m.Token.model_validate(self.request("DELETE", f"/auth/tokens/{token_id}"))

    # -- jobs -----------------------------------------------------------------------------------------------------

    def submit(
        self,
        spec: Mapping[str, Any] | None = None,
        *,
        yaml: str | None = None,
        request_id: str | None = None,
        array: str | None = None,
        dependency: str | None = None,
    ) -> m.Submitted:
        """Submit a job spec, as a mapping or as YAML text (whose problems carry line numbers). A `request_id` makes
        the submission idempotent: a retry returns the job the first request created (`created` is False). `array`
        (`0-999%50`) submits a job array, overriding the spec's `array` (the answer's `array` names it); `dependency`
        (sbatch --dependency text, e.g. "afterok:j-1:j-2") replaces the spec's own."""
        if (spec is None) == (yaml is None):
            raise ValueError("give either spec or yaml")
        body: dict[str, Any] = {"spec": dict(spec)} if spec is not None else {"yaml": yaml}
        if request_id is not None:
            body["request_id"] = request_id
        if array is not None:
            body["array"] = array
        if dependency is not None:
            body["dependency"] = dependency
        return self._post(m.Submitted, "/jobs", body)

    def jobs(
        self,
        *,
        state: str | Sequence[str] | None = None,
        budget: str | None = None,
        user: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> m.JobPage:
        """One page of the queue, newest first; pass `next_cursor` back as `cursor` for the next page."""
        states = [state] if isinstance(state, str) else list(state or [])
        return self._get(
            m.JobPage, "/jobs", state=states, budget=budget, user=user, kind=kind, limit=limit, cursor=cursor
        )

    def iter_jobs(
        self,
        *,
        state: str | Sequence[str] | None = None,
        budget: str | None = None,
        user: str | None = None,
        kind: str | None = None,
        page_size: int = 200,
    ) -> Iterator[m.JobSummary]:
        """Every matching job, newest first, page by page."""
        cursor: str | None = None
        while True:
            page = self.jobs(state=state, budget=budget, user=user, kind=kind, limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def pending(
        self, *, budget: str | None = None, user: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> m.QueuePage:
        """One page of the pending jobs in scheduling order (by estimated start, then submission), each with its
        blocker, the engine's message and its estimated start (`squeue --start`)."""
        return self._get(m.QueuePage, "/jobs/queue", budget=budget, user=user, limit=limit, cursor=cursor)

    def history(
        self,
        *,
        since: int | None = None,
        until: int | None = None,
        user: str | None = None,
        budget: str | None = None,
        state: str | Sequence[str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> m.HistoryPage:
        """One page of finished jobs that ended in [since, until) (Unix seconds; default the last day), newest end
        first, with elapsed time, GPU-seconds, credits charged and exit code (`sacct`)."""
        states = [state] if isinstance(state, str) else list(state or [])
        return self._get(m.HistoryPage, "/jobs/history", since=since, until=until, user=user, budget=budget,
                         state=states, limit=limit, cursor=cursor)  # fmt: skip

    def iter_history(
        self,
        *,
        since: int | None = None,
        until: int | None = None,
        user: str | None = None,
        budget: str | None = None,
        state: str | Sequence[str] | None = None,
        page_size: int = 500,
    ) -> Iterator[m.HistoryEntry]:
        """Every finished job in the range, page by page (the range is fixed by the first page's answer)."""
        cursor: str | None = None
        while True:
            page = self.history(since=since, until=until, user=user, budget=budget, state=state, limit=page_size,
                                cursor=cursor)  # fmt: skip
            yield from page.items
            if page.next_cursor is None:
                return
            since, until, cursor = page.since, page.until, page.next_cursor

    def job(self, job_id: str) -> m.JobDetail:
        """A job with its state history, runs, slices and charges."""
        return self._get(m.JobDetail, f"/jobs/{job_id}")

    def cancel(self, job_id: str) -> m.JobSummary:
        return self._post(m.JobSummary, f"/jobs/{job_id}/cancel")

    def hold(self, job_id: str, *, kind: str | None = None) -> m.JobSummary:
        """Hold a pending job (the scheduler stops considering it): `kind` "user" or "admin" (administrators only);
        None: an administrator's hold is an admin hold, anyone else's a user hold."""
        return self._post(m.JobSummary, f"/jobs/{job_id}/hold", _params(kind=kind))

    def release(self, job_id: str) -> m.JobSummary:
        """Release a held job (an admin hold: administrators only)."""
        return self._post(m.JobSummary, f"/jobs/{job_id}/release")

    def requeue(self, job_id: str, *, hold: bool = False) -> m.JobSummary:
        """Requeue a running batch job: the engine stops its run (with its grace) and puts it back in the queue with
        the same id; `hold` puts it back held (scontrol requeuehold)."""
        return self._post(m.JobSummary, f"/jobs/{job_id}/requeue", {"hold": True} if hold else None)

    def update(
        self,
        job_id: str,
        *,
        priority: int | None = None,
        gpus: int | None = None,
        replicas: int | None = None,
        slice: Duration | None = None,
        max_runtime: Duration | None = None,
        gpu_types: Sequence[str] | None = None,
        clusters: Sequence[str] | None = None,
        name: str | None = None,
    ) -> m.JobUpdated:
        """Update a pending job (scontrol update job); None leaves a field as it is, an empty `gpu_types` or
        `clusters` allows any. The job as updated passes every check a submission does, or nothing changes."""
        asked = {"priority": priority, "gpus": gpus, "replicas": replicas, "slice": slice, "max_runtime": max_runtime,
                 "gpu_types": None if gpu_types is None else list(gpu_types),
                 "clusters": None if clusters is None else list(clusters), "name": name}  # fmt: skip
        body = {k: v for k, v in asked.items() if v is not None}
        return m.JobUpdated.model_validate(self.request("PATCH", f"/jobs/{job_id}", json=body))

    def array(self, array_id: str) -> m.ArrayView:
        """A job array: its tasks counted per state, with their indices."""
        return self._get(m.ArrayView, f"/arrays/{array_id}")

    def cancel_array(self, array_id: str) -> m.ArrayControl:
        """Cancel every active task of the array (one task: `cancel(task id)`)."""
        return self._post(m.ArrayControl, f"/arrays/{array_id}/cancel")

    def hold_array(self, array_id: str, *, kind: str | None = None) -> m.ArrayControl:
        """Hold every pending task of the array (`kind` as for `hold`)."""
        return self._post(m.ArrayControl, f"/arrays/{array_id}/hold", _params(kind=kind))

    def release_array(self, array_id: str) -> m.ArrayControl:
        """Release every held task of the array."""
        return self._post(m.ArrayControl, f"/arrays/{array_id}/release")

    def cancel_matching(
        self,
        *,
        user: str | None = None,
        budget: str | None = None,
        states: Sequence[str] = (),
        name: str | None = None,
        dry_run: bool = False,
    ) -> m.CancelReport:
        """Cancel every active job matching all the given filters (at least one; a non-administrator: only their
        own jobs). `dry_run` reports the jobs and changes nothing."""
        body = _params(user=user, budget=budget, states=list(states), name=name, dry_run=dry_run or None)
        return self._post(m.CancelReport, "/jobs/cancel", body)

    def logs(
        self,
        job_id: str,
        *,
        offset: int = 0,
        attempt: int | None = None,
        limit: int | None = None,
        replica: int | None = None,
    ) -> m.LogChunk:
        """Output of the job's latest attempt (or `attempt`) from byte `offset`: every replica's (a gang's lines
        labelled `N: `), or only `replica`'s own."""
        return self._get(
            m.LogChunk, f"/jobs/{job_id}/logs", offset=offset, attempt=attempt, limit=limit, replica=replica
        )

    def follow_logs(
        self,
        job_id: str,
        *,
        offset: int = 0,
        attempt: int | None = None,
        poll: float = 1.0,
        follow: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        replica: int | None = None,
    ) -> Iterator[m.LogChunk]:
        """Chunks of output (every replica's, or `replica`'s own), from `offset`, each with new data. With `follow`,
        waits for more until the attempt is `complete`; without it, stops once everything written so far has been
        returned."""
        while True:
            chunk = self.logs(job_id, offset=offset, attempt=attempt, replica=replica)
            if chunk.data:
                yield chunk
            if chunk.complete:
                return
            if chunk.next_offset == offset:
                if not follow:
                    return
                sleep(poll)
            offset = chunk.next_offset

    def why(self, job: str) -> m.Why:
        """Why a pending job waits, in numbers, or a running job's outlook (what could preempt it and when). `job`
        is an id or a name (409 when the name is ambiguous; 404 when the job has finished)."""
        return self._get(m.Why, f"/jobs/{job}/why")

    # -- sessions -------------------------------------------------------------------------------------------------

    def request_session(
        self,
        budget: str,
        *,
        gpus: int = 1,
        length: Duration | None = None,
        grace: Duration | None = None,
        command: Sequence[str] | None = None,
        name: str | None = None,
        gpu_types: Sequence[str] = (),
        clusters: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        request_id: str | None = None,
    ) -> m.Session:
        body = _params(
            budget=budget,
            gpus=gpus,
            length=length,
            grace=grace,
            command=list(command) if command is not None else None,
            name=name,
            gpu_types=list(gpu_types),
            clusters=list(clusters),
            env=dict(env) if env else None,
            request_id=request_id,
        )
        return self._post(m.Session, "/sessions", body)

    def session(self, job_id: str) -> m.Session:
        """The session's state and, once ready, how to attach."""
        return self._get(m.Session, f"/sessions/{job_id}")

    def wait_session(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        poll: float = 0.5,
        on_poll: Callable[[m.Session], None] | None = None,
    ) -> m.Session:
        """Poll until the session is ready (returned), has ended (returned, not ready) or `timeout` passes
        (TimeoutError)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self.session(job_id)
            if on_poll is not None:
                on_poll(current)
            if current.ready or current.job.state in FINAL_STATES:
                return current
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"session {job_id} is not ready after {timeout:g}s ({current.job.state_reason})")
            time.sleep(poll)

    def release_session(self, job_id: str) -> m.JobSummary:
        return m.JobSummary.model_validate(self.request("DELETE", f"/sessions/{job_id}"))

    # -- budgets and plans ------------------------------------------------------------------------------------------

    def budgets(self, root: str | None = None) -> m.BudgetTree:
        """The budget tree (or `root`'s subtree) with allocation, used and remaining credit this period."""
        return self._get(m.BudgetTree, "/budgets", root=root)

    def budget(self, name: str) -> m.BudgetDetail:
        """One budget with its run-out forecast (the trailing 24 hours' rate), members, windows and children."""
        return self._get(m.BudgetDetail, f"/budgets/{name}")

    def members(self, name: str) -> list[m.Member]:
        return MEMBERS.validate_python(self.request("GET", f"/budgets/{name}/members"))

    @staticmethod
    def _plan(yaml: str | None, plan: Mapping[str, Any] | None) -> dict[str, Any]:
        if (yaml is None) == (plan is None):
            raise ValueError("give either yaml or plan")
        return {"yaml": yaml} if yaml is not None else {"plan": dict(plan or {})}

    def plan_diff(self, *, yaml: str | None = None, plan: Mapping[str, Any] | None = None) -> m.PlanDiff:
        """What a budget plan would change (nothing is written)."""
        return self._post(m.PlanDiff, "/plans/diff", self._plan(yaml, plan))

    def plan_apply(
        self, *, yaml: str | None = None, plan: Mapping[str, Any] | None = None, why: str = ""
    ) -> m.PlanApplied:
        """Apply a budget plan atomically, recorded in the audit log with `why`."""
        return self._post(m.PlanApplied, "/plans/apply", {**self._plan(yaml, plan), "why": why})

    # -- nodes ----------------------------------------------------------------------------------------------------

    def nodes(self, *, cluster: str | None = None, state: str | None = None) -> list[m.Node]:
        return NODES.validate_python(self.request("GET", "/nodes", params=_params(cluster=cluster, state=state)))

    def charge_lines(self, budget: str, *, limit: int | None = None, cursor: str | None = None) -> m.ChargeLinePage:
        """The budget subtree's ledger entries coalesced into lines (GPUs × time × rate × price = credits), newest
        first; `limit` ledger entries a page, `cursor` continues."""
        return self._get(m.ChargeLinePage, f"/dashboard/budgets/{budget}/charge-lines", limit=limit, cursor=cursor)

    def fleet(self, *, cluster: str | None = None) -> m.FleetMap:
        """The fleet map's clusters with their GPUs in use and session rooms."""
        return self._get(m.FleetMap, "/dashboard/fleet", cluster=cluster)

    def node(self, name: str) -> m.Node:
        return self._get(m.Node, f"/nodes/{name}")

    def cordon(self, name: str, why: str = "") -> m.Node:
        return self._post(m.Node, f"/nodes/{name}/cordon", {"why": why})

    def drain(self, name: str, why: str = "", *, force: bool = False) -> m.Drain:
        """Drain a node; `empty_by` says when it will be empty. `force` (administrators): every job leaves now and
        its owner is refunded."""
        return self._post(m.Drain, f"/nodes/{name}/drain", {"why": why, "force": force})

    def force_drain(self, name: str, why: str = "") -> m.Drain:
        return self.drain(name, why, force=True)

    def resume(self, name: str, why: str = "") -> m.Node:
        return self._post(m.Node, f"/nodes/{name}/resume", {"why": why})

    # -- reports --------------------------------------------------------------------------------------------------

    def usage(self, *, period: str | Sequence[str] | None = None, budget: str | None = None) -> m.UsageReport:
        """GPU-seconds, charges and refunds by budget, period and GPU type (default: the current period)."""
        periods = [period] if isinstance(period, str) else list(period or [])
        return self._get(m.UsageReport, "/reports/usage", period=periods, budget=budget)
