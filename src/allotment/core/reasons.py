"""Why each pending job waits, in numbers (promise 10, rule `explain-waiting`).

Owns: turning a blocker into a WaitReason — a message with the numbers behind it (GPUs needed and free, budget money
and commitments, limits), an estimated start (the planned start when the job holds a reservation, otherwise the
earliest time its gang could fit given known slice ends: a lower bound), and hints: fewer GPUs, a shorter slice,
another cluster or GPU type, running opportunistically. Results are cached per job shape within a cycle (keyed on
the identity of the job's tuple of pools, which the cycle state interns: equal tuples are one object).

Must not: change the cycle's state.
"""

from __future__ import annotations

from allotment.core.capacity import Pool
from allotment.core.decisions import Blocker, Hint, HintKind, Reserve, WaitReason
from allotment.core.funding import never_fits, standing_blocker
from allotment.core.model import Job, JobKind, ReservationKind, RunClass, Seconds
from allotment.core.placement import asks_beside, fits_beside, gpus_held, node_size, nodes_needed
from allotment.core.reservations import earliest_on_node
from allotment.core.state import CycleState
from allotment.core.units import cost


def _credits(micro: int) -> str:
    return f"{micro / 1_000_000:,.1f}"


def _beside(job: Job) -> str:
    """The CPUs and memory a replica asks for, e.g. "16 CPUs and 64 GiB"."""
    parts = [f"{job.cpus} CPUs"] if job.cpus else []
    if job.memory:
        parts.append(f"{job.memory // 1024} GiB" if job.memory % 1024 == 0 else f"{job.memory} MiB")
    return " and ".join(parts)


def _dur(seconds: int) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{max(seconds, 0) // 60} min"


GangKey = tuple[int, int, int, int, int]
"""(id of the job's interned pools, GPUs, replicas, CPUs and memory per replica)."""
Detail = tuple[int | str | bool, ...]
"""What else a reason depends on, for some blockers (Explainer.explain)."""
ReasonKey = tuple[Blocker, str | None, int, int, int, JobKind, bool, Detail, int, int]
"""(blocker, budget when the message names it, id of the pools, GPUs, replicas, kind, fast-leaving, detail, CPUs and
memory per replica)."""
HintsKey = (
    tuple[int, int, int, Blocker, bool]
    | tuple[int, int, int, Blocker, bool, str, bool, JobKind]
    | tuple[int, int, int, Blocker, bool, JobKind, Seconds]
)
"""(id of the pools, GPUs, replicas, blocker, and what the blocker's hints also depend on: Explainer._hints_for)."""
Booked = tuple[int, str, str, int, str, str]
"""A window on a job's pools: (start, id, budget, GPUs, cluster, GPU type)."""


class Explainer:
    """Reads the cycle's state once every step has run (it no longer changes)."""

    def __init__(self, st: CycleState) -> None:
        self.st = st
        self._fit: dict[GangKey, tuple[int, Seconds | None, bool, bool]] = {}
        self._hints: dict[HintsKey, tuple[Hint, ...]] = {}
        self._reserves: dict[str, Reserve] = {r.job_id: r for r in st.out.reserves}
        self._reasons: dict[ReasonKey, WaitReason] = {}
        self._with_room: dict[tuple[Pool, int, int, bool], int] = {}
        self._windows: dict[tuple[int, str], list[Booked]] = {}
        self._pool_fit: dict[tuple[Pool, int, int, int], tuple[list[Seconds], int, int]] = {}
        self._pool_free: dict[Pool, int] = {}
        self._room: dict[tuple[int, int, int, bool], tuple[Hint, ...]] = {}
        self._latest_claim: dict[tuple[int, int], Seconds | None] = {}

    def explain(self, job: Job) -> WaitReason:
        st = self.st
        pools = st.pools(job)
        need = job.total_gpus
        res = self._reserves.get(job.id)
        if res is not None:
            free = self._fit_info(job, pools)[0]
            nodes = ", ".join(n for n, _ in res.nodes[:4]) + (" …" if len(res.nodes) > 4 else "")
            if res.kind is ReservationKind.PREEMPTION:
                return WaitReason(
                    Blocker.WAITING_FOR_GRACE,
                    f"GPUs on {nodes} are being freed for it; the work there leaves by its grace period",
                    need,
                    free,
                    res.planned_start,
                )
            return WaitReason(
                Blocker.CAPACITY,
                f"planned start on {nodes} when the running slices there end (see the estimated start); "
                f"{free} GPUs free now in its pools, it needs {need}",
                need,
                free,
                res.planned_start,
                self._hints_for(job, pools, Blocker.CAPACITY),
            )
        blocker = st.out.blockers.get(job.id, Blocker.CAPACITY)
        if job.id in st.out.unchecked:
            blocker = self._checked_blocker(job)
        # what the reason depends on besides the blocker, the pools and the job's size and kind (see _message and
        # _compute_hints): the budget, except where the message does not name it; the slice, the grace and the user
        # only for some blockers
        who: str | None = job.budget
        detail: Detail = ()
        if blocker is Blocker.CAPACITY:
            free, _, fits_unclaimed, fits_claimed = self._fit_info(job, pools)
            if fits_claimed and not fits_unclaimed:
                detail = (job.grace,)  # it will read RESERVED, whose shorter-slice hint depends on the grace
            if free > 0:
                who = None  # named only when no GPU is free in its pools
            elif job.id in st.out.room_denied:
                detail = ("room",)
        elif blocker in (Blocker.FUNDS, Blocker.RESERVED):
            detail = (job.slice_seconds, job.fallback_opportunistic, job.grace)
        elif blocker is Blocker.SESSION_LIMIT:
            who, detail = None, (job.user, job.slice_seconds)
        elif blocker is Blocker.NO_POOL:
            who = None
        key = (
            blocker,
            who,
            id(pools),
            job.gpus,
            job.replicas,
            job.kind,
            self.st.ix.quick(job),
            detail,
            job.cpus,
            job.memory,
        )
        hit = self._reasons.get(key)
        if hit is not None:
            return hit
        free, earliest, fits_unclaimed, fits_claimed = self._fit_info(job, pools)
        reason = self._explain(job, blocker, pools, free, earliest, fits_unclaimed, fits_claimed)
        self._reasons[key] = reason
        return reason

    def _checked_blocker(self, job: Job) -> Blocker:
        """The blocker of a job the fast path passed over: NO_POOL when no pool could ever hold it, else its limits,
        else its funds or capacity (the cycle's state no longer changes)."""
        if self.st.within_limits(job, job.total_gpus) is not None:
            return Blocker.NO_POOL if never_fits(self.st, job) else Blocker.LIMIT
        return standing_blocker(self.st, job)

    def _explain(
        self,
        job: Job,
        blocker: Blocker,
        pools: tuple[Pool, ...],
        free: int,
        earliest: Seconds | None,
        fits_unclaimed: bool,
        fits_claimed: bool,
    ) -> WaitReason:
        need = job.total_gpus
        if blocker is Blocker.CAPACITY and fits_unclaimed:
            blocker = Blocker.HEADROOM
        elif blocker is Blocker.CAPACITY and fits_claimed:
            blocker = Blocker.RESERVED
        message = self._message(job, blocker, pools, free)
        est = earliest if blocker not in (Blocker.FUNDS, Blocker.NO_POOL, Blocker.LIMIT) else None
        return WaitReason(blocker, message, need, free, est, self._hints_for(job, pools, blocker))

    # -- numbers -----------------------------------------------------------------------------------------------
    def _fit_info(self, job: Job, pools: tuple[Pool, ...]) -> tuple[int, Seconds | None, bool, bool]:
        """(free GPUs in the pools, earliest fit from known leave times, fits now ignoring headroom on an
        unclaimed node, fits now only on nodes a reservation claims)."""
        key = (id(pools), job.gpus, job.replicas, job.cpus, job.memory)
        hit = self._fit.get(key)
        if hit is not None:
            return hit
        st = self.st
        free = 0
        earliest: Seconds | None = None
        unclaimed = claimed = False
        for pool in pools:
            free += self._free_in(pool)
            size = node_size(st.cap, pool)
            k = nodes_needed(job, size)
            if k == 0:
                continue
            need = job.total_gpus if k == 1 else size
            t_pool, fit_u, fit_c = self._fit_in(pool, need, k, job if asks_beside(job) else None)
            if t_pool is not None:
                earliest = t_pool if earliest is None else min(earliest, t_pool)
            unclaimed = unclaimed or fit_u >= k
            claimed = claimed or (fit_u + fit_c >= k and fit_u < k)
        out = (free, earliest, unclaimed, claimed)
        self._fit[key] = out
        return out

    def _free_in(self, pool: Pool) -> int:
        found = self._pool_free.get(pool)
        if found is None:
            found = self._pool_free[pool] = self.st.cap.free_in_pools((pool,))
        return found

    def _fit_in(self, pool: Pool, need: int, k: int, beside: Job | None) -> tuple[Seconds | None, int, int]:
        """(the earliest time k nodes of the pool could each hold `need` GPUs, given known leave times; nodes with
        `need` free GPUs now that no reservation claims; those that one claims). With `beside`, a job asking for CPUs
        or memory, a node also needs them free beside the GPUs."""
        times, fit_u, fit_c = self._pool_times(pool, need, beside)
        return (times[k - 1] if len(times) >= k else None), fit_u, fit_c

    def _pool_times(self, pool: Pool, need: int, beside: Job | None) -> tuple[list[Seconds], int, int]:
        """(for each node of the pool that could ever hold `need` GPUs, the earliest time it could, in order; the
        nodes with `need` free GPUs now that no reservation claims; those that one claims)."""
        key = (pool, need, 0, 0) if beside is None else (pool, need, beside.cpus, beside.memory)
        found = self._pool_fit.get(key)
        if found is not None:
            return found
        st = self.st
        times: list[Seconds] = []
        fit_u = fit_c = 0
        for idx in st.cap.pools.get(pool, ()):
            slot = st.cap.nodes[idx]
            if not slot.accepts or slot.node.gpus < need:
                continue
            t = earliest_on_node(slot, need, st.ix.now, beside=beside)
            claim = slot.claim
            if t is not None and claim is not None and claim.spare < need:
                # a node a reservation claims is its plan's: its free GPUs hold this job only after the plan has
                # started there, at the earliest (a job held back by a plan was told "in 0 s")
                t = max(t, claim.planned_start)
            if t is not None:
                times.append(t)
            if len(slot.free) >= need and (beside is None or fits_beside(beside, slot, need)):
                if slot.claim is None:
                    fit_u += 1
                else:
                    fit_c += 1
        times.sort()
        found = self._pool_fit[key] = (times, fit_u, fit_c)
        return found

    def _message(self, job: Job, blocker: Blocker, pools: tuple[Pool, ...], free: int) -> str:
        st = self.st
        need = job.total_gpus
        shape = f"{job.replicas}×{job.gpus} GPUs" if job.replicas > 1 else f"{need} GPU{'s' if need != 1 else ''}"
        if blocker is Blocker.FUNDS:
            if job.budget not in st.ix.leaves:
                return f"budget {job.budget} is not a leaf budget: only leaf budgets pay for jobs"
            avail = st.available(job.budget)
            pool = min(pools, key=st.ix.rate) if pools else None
            price = "unknown"
            if pool is not None:
                held = gpus_held(job, node_size(st.cap, pool))
                price = _credits(st.ix.slice_cost(job, held, pool, st.ix.slice_length(job)))
            return (
                f"budget {job.budget} has {_credits(avail)} credits not yet promised to running slices; "
                f"a {_dur(st.ix.slice_length(job))} slice of {shape} costs {price}"
            )
        if blocker is Blocker.LIMIT:
            for name in st.fs.ancestors(job.budget):
                limit = st.ix.budgets[name].max_gpus
                held = st.out.held.get(name, 0)
                if limit is not None and held + need > limit:
                    return f"budget {name} holds {held} GPUs of its limit of {limit}; this needs {need}"
            return f"a budget GPU limit; this needs {need}"
        if blocker is Blocker.SESSION_LIMIT:
            pol = st.ix.pol
            if need > pol.session_max_gpus or job.slice_seconds > pol.session_max_length:
                return (
                    f"sessions are limited to {pol.session_max_gpus} GPUs and {_dur(pol.session_max_length)}; "
                    f"this asks {need} GPUs for {_dur(job.slice_seconds)}"
                )
            sessions = st.out.sessions_of.get(job.user, 0)
            return f"user {job.user} already has {sessions} of {pol.session_max_per_user} sessions"
        if blocker is Blocker.NO_POOL:
            return f"no ready node of an allowed GPU type and cluster can hold {shape}"
        if blocker is Blocker.WINDOW:
            booked = self._booked(pools, job.budget)
            if not booked:
                return f"its pools are booked by capacity windows; it needs {shape}"
            _, wid, owner, gpus, cluster, gpu_type = booked[0]
            more = f" (and {len(booked) - 1} more)" if len(booked) > 1 else ""
            return (
                f"capacity window {wid} books {gpus} {gpu_type} GPUs of {cluster} for {owner}{more}; it needs {shape}"
            )
        if blocker is Blocker.HEADROOM:
            return f"{free} GPUs are free in its pools but they are session headroom; it needs {shape}"
        if blocker is Blocker.RESERVED:
            return f"free GPUs that fit {shape} are reserved for planned starts of other jobs"
        if free == 0 and job.kind is JobKind.SESSION:
            # sessions go before every budget's batch work: what holds them is work no session may take
            return (
                f"needs {shape}; no GPU is free in its pools and taking the work a session may take (opportunistic "
                "or past its slice, on nodes no planned start holds) would not make room; sessions start first as GPUs "
                "free up"
            )
        if free == 0 and job.id in self.st.out.room_denied:
            return (
                f"needs {shape}; no GPU is free in its pools, and no planned start can be made yet: the plans already "
                "made there leave only the session headroom unclaimed (see the estimated start)"
            )
        if free == 0:
            return f"needs {shape}; no GPU is free in its pools (budget {job.budget} waits its fair-share turn)"
        short = self._short_beside(job, pools)
        if short:
            return (
                f"needs {shape} with {_beside(job)} per replica; {short} node{'s' if short != 1 else ''} "
                f"{'have' if short != 1 else 'has'} the GPUs free but not the CPUs or memory beside them"
            )
        where = f"{job.total_gpus} on one node" if job.replicas == 1 or job.total_gpus <= 8 else "enough whole nodes"
        return f"needs {shape}; {free} GPUs are free in its pools but not {where}"

    def _short_beside(self, job: Job, pools: tuple[Pool, ...]) -> int:
        """Accepting nodes of the pools with the GPUs free for the job but not its CPUs or memory (rule
        `cpus-and-memory-beside-gpus`); 0 for a job that asks for neither."""
        if not asks_beside(job):
            return 0
        cap = self.st.cap
        short = 0
        for pool in pools:
            k = nodes_needed(job, node_size(cap, pool))
            if k == 0:
                continue
            need = job.total_gpus if k == 1 else node_size(cap, pool)
            short += sum(1 for i in cap.nodes_with_free(pool, need) if not fits_beside(job, cap.nodes[i], need))
        return short

    def _booked(self, pools: tuple[Pool, ...], budget: str) -> list[Booked]:
        """Other budgets' windows on the pools: (start, id, budget, GPUs, cluster, GPU type), earliest first."""
        key = (id(pools), budget)
        found = self._windows.get(key)
        if found is None:
            windows = self.st.windows
            found = self._windows[key] = sorted(
                {
                    (w.start, w.id, w.budget, w.gpus, w.cluster, w.gpu_type)
                    for p in pools
                    for w in windows.windows_on(p)
                    if w.budget != budget
                }
            )
        return found

    # -- hints -------------------------------------------------------------------------------------------------
    def _hints_for(self, job: Job, pools: tuple[Pool, ...], blocker: Blocker) -> tuple[Hint, ...]:
        # what the hints of each blocker depend on (see _compute_hints); the room hints also on whether the job is
        # fast-leaving (_room_hints)
        key: HintsKey
        quick = self._takes_room(job)
        if blocker is Blocker.FUNDS:
            key = (id(pools), job.gpus, job.replicas, blocker, quick, job.budget, job.fallback_opportunistic, job.kind)
        elif blocker is Blocker.RESERVED:
            key = (id(pools), job.gpus, job.replicas, blocker, quick, job.kind, job.grace)
        else:
            key = (id(pools), job.gpus, job.replicas, blocker, quick)
        hit = self._hints.get(key)
        if hit is None:
            hit = tuple(self._compute_hints(job, pools, blocker))
            self._hints[key] = hit
        return hit

    def _room_hints(self, job: Job, pools: tuple[Pool, ...]) -> tuple[Hint, ...]:
        """Fewer GPUs (how many would start now) and another pool with room now; the same for every job of one
        shape, kind and pools. "Now" means as the cycle would start it: on unclaimed nodes, keeping the session
        room unless the job is a session or leaves within seconds."""
        exempt = self._takes_room(job)
        key = (id(pools), job.gpus, job.replicas, exempt)
        found = self._room.get(key)
        if found is not None:
            return found
        now = self.st.ix.now
        hints: list[Hint] = []
        best = max((min(self._startable(job, pool, exempt), job.total_gpus - 1) for pool in pools), default=0)
        if 0 < best < job.total_gpus:
            noun = "GPU" if best == 1 else "GPUs"
            hints.append(Hint(HintKind.FEWER_GPUS, f"with {best} {noun} it could start now", now))
        allowed = set(pools)
        for pool in self.st.cap.pools:
            if pool not in allowed and self._startable(job, pool, exempt) >= job.total_gpus:
                hints.append(Hint(HintKind.OTHER_POOL, f"cluster {pool[0]} ({pool[1]}) has room now", now))
                break
        found = self._room[key] = tuple(hints)
        return found

    def _takes_room(self, job: Job) -> bool:
        """May the job use the session room (a session, or work that leaves within seconds)?"""
        return job.kind is JobKind.SESSION or self.st.ix.quick(job)

    def _startable(self, job: Job, pool: Pool, exempt: bool) -> int:
        """The most GPUs a job of this shape could start with now in the pool: on one unclaimed node's free GPUs
        (a gang: whole free unclaimed nodes), and within what the cluster's session room spares unless `exempt`."""
        key = (pool, job.gpus, job.replicas, exempt)
        found = self._with_room.get(key)
        if found is not None:
            return found
        cap = self.st.cap
        size = node_size(cap, pool)
        k = nodes_needed(job, size)
        unclaimed = [s for i in cap.pools.get(pool, ()) if (s := cap.nodes[i]).accepts and s.claim is None]
        if k == 1:
            fits = max((len(s.free) for s in unclaimed), default=0)
        else:
            fits = sum(1 for s in unclaimed if len(s.free) == size and s.node.gpus == size) * size
        if not exempt:
            spare = cap.room(pool[0]) - self.st.ix.room_for(pool[0])
            fits = min(fits, max(0, spare) if k == 1 else max(0, spare) // size * size)
        found = self._with_room[key] = fits
        return found

    def _latest_claim_with_room(self, pools: tuple[Pool, ...], gpus: int) -> Seconds | None:
        """The latest planned start among claimed nodes of the pools that have `gpus` GPUs free now."""
        key = (id(pools), gpus)
        if key in self._latest_claim:
            return self._latest_claim[key]
        st = self.st
        latest: Seconds | None = None
        for pool in pools:
            for idx in st.cap.pools.get(pool, ()):
                slot = st.cap.nodes[idx]
                if slot.claim is not None and len(slot.free) >= gpus:
                    at = slot.claim.planned_start
                    latest = at if latest is None else max(latest, at)
        self._latest_claim[key] = latest
        return latest

    def _compute_hints(self, job: Job, pools: tuple[Pool, ...], blocker: Blocker) -> list[Hint]:
        st = self.st
        now = st.ix.now
        hints: list[Hint] = []
        if blocker in (Blocker.CAPACITY, Blocker.RESERVED, Blocker.HEADROOM, Blocker.WINDOW):
            hints.extend(self._room_hints(job, pools))
        if blocker is Blocker.RESERVED and job.kind is JobKind.BATCH:
            latest = self._latest_claim_with_room(pools, job.total_gpus)
            longest = 0 if latest is None else max(0, latest - st.ix.grace(job) - now)
            if longest > 0:
                hints.append(Hint(HintKind.SHORTER_SLICE, f"a slice of at most {_dur(longest)} would start now", now))
        if blocker is Blocker.FUNDS and pools:
            pool = min(pools, key=st.ix.rate)
            held = gpus_held(job, node_size(st.cap, pool))
            per_hour = cost(held, st.ix.rate(pool), st.ix.price(job, RunClass.GUARANTEED), 3600)
            avail = st.available(job.budget)
            if per_hour > 0 and avail > 0:
                affordable = avail * 3600 // per_hour
                if affordable >= st.ix.pol.min_slice:
                    hints.append(
                        Hint(HintKind.SHORTER_SLICE, f"a slice of {_dur(int(affordable))} is affordable", None)
                    )
            if not job.fallback_opportunistic and job.kind is JobKind.BATCH:
                hints.append(
                    Hint(
                        HintKind.OPPORTUNISTIC,
                        "accept running opportunistically (preemptible, discounted)",
                        None,
                    )
                )
        return hints
