"""Rule `slice-funding` (docs/policy.md §6): the terms a pending job could start on now.

Owns: the pools a job could ever run in, with the GPUs it would hold and the cost of a whole slice there; what
keeps a job waiting apart from GPUs (standing_blocker); and its Terms: the run class, the pools whose slice its
budget can pay for — a slice on a pool with capacity windows is capped or refused by `slice_end_before_window` and
`window_lends_idle` — with the slice end in each, or the blocker when there is none; an unfunded guaranteed job that
accepts it runs opportunistically instead (promise 2). Terms are cached per job shape and budget until the budget's
promised money changes (so they may lag a window count changed by another budget's start in the same cycle), and
interned: equal Terms are one object within a cycle, so callers may key caches on their identity. The caches and
the records they hold (Terms, Shape, WindowVerdicts) are declared in caches.py.

Must not: place jobs, or decide the order in which they are served.
"""

from __future__ import annotations

from bisect import bisect_right

from allotment.core.caches import Ends, FoundKey, PoolCost, Pools, Shape, Terms, WindowVerdict, WindowVerdicts
from allotment.core.capacity import Pool
from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass, Job, JobKind, Micro, RunClass, Seconds
from allotment.core.placement import gpus_held, node_size, nodes_needed
from allotment.core.state import CycleState


def terms(st: CycleState, job: Job) -> Terms:
    """The run class, pools and slice ends a pending job could start with now (rule `slice-funding`)."""
    shape = _shape(st, job)
    key = (job.budget, job.contract, job.fallback_opportunistic, st.out.committed.get(job.budget, 0))
    found = shape.by_budget.get(key)
    if found is None:
        found = shape.by_budget[key] = _terms(st, job, shape)
    return found


def never_fits(st: CycleState, job: Job) -> bool:
    """No pool the job allows could ever hold it: it waits for NO_POOL, which comes before every other blocker
    (waiting for its limit or its funds would not help)."""
    return not _shape(st, job).usable


def standing_blocker(st: CycleState, job: Job) -> Blocker:
    """What keeps a job waiting apart from GPUs, by the slice-funding rule alone: NO_POOL when no pool could ever
    hold it, the terms' blocker where its pools have windows, FUNDS when the budget cannot pay for a slice in any
    pool and the job will not run opportunistically, else CAPACITY (its limits are not looked at)."""
    shape = _shape(st, job)
    if not shape.usable:
        return Blocker.NO_POOL
    if shape.windowed:
        return terms(st, job).blocker or Blocker.CAPACITY
    if job.contract is ContractClass.OPPORTUNISTIC or job.fallback_opportunistic:
        return Blocker.CAPACITY
    # without windows every usable pool is plain, and plain_prices holds their distinct costs, cheapest first
    return Blocker.CAPACITY if st.available(job.budget) >= shape.plain_prices[0] else Blocker.FUNDS


def _shape(st: CycleState, job: Job) -> Shape:
    caches = st.caches
    pools = st.pools(job)
    # the shape depends on the GPU types and clusters only through the pools, which the cycle interns: keyed by
    # their identity, the key hashes as plain ints and strings
    key = (id(pools), job.gpus, job.replicas, job.kind, job.slice_seconds)
    found = caches.shapes.get(key)
    if found is None:
        usable = []
        for pool in pools:
            entry = _pool_cost(st, job, pool)
            if entry is not None:
                usable.append(entry)
        by_pool = st.windows.by_pool
        plain = tuple((i, p, c) for i, (p, _, c) in enumerate(usable) if p not in by_pool)
        windowed = tuple((i, p, h, c) for i, (p, h, c) in enumerate(usable) if p in by_pool)
        found = caches.shapes[key] = Shape(tuple(usable), plain, windowed, sorted({c for _, _, c in plain}))
    return found


def _pool_cost(st: CycleState, job: Job, pool: Pool) -> PoolCost | None:
    """(pool, GPUs held there, cost of a whole slice there), or None when no set of ready nodes of the pool could
    ever hold the job; the same for every job of one size, kind and slice."""
    pool_costs = st.caches.pool_costs
    key = (pool, job.gpus, job.replicas, job.kind, job.slice_seconds)
    if key in pool_costs:
        return pool_costs[key]
    size = node_size(st.cap, pool)
    k = nodes_needed(job, size)
    need = job.total_gpus if k == 1 else size
    found = None
    if k > 0 and st.cap.up_nodes_with(pool, need) >= k:
        held = gpus_held(job, size)
        found = (pool, held, st.ix.slice_cost(job, held, pool, st.ix.slice_length(job)))
    pool_costs[key] = found
    return found


def _interned(
    st: CycleState,
    run_class: RunClass,
    pools: Pools,
    ends: Ends,
    blocker: Blocker | None,
) -> Terms:
    """The cycle's one Terms object of this value (and its tuples), so that cache keys may use its identity."""
    caches = st.caches
    pools, ends = caches.intern_pools(pools), caches.intern_ends(ends)
    key = (run_class, pools, ends, blocker)
    found = caches.terms.get(key)
    if found is None:
        found = caches.terms[key] = Terms(run_class, pools, ends, blocker)
    return found


def _opportunistic(st: CycleState, shape: Shape) -> Terms:
    """Running opportunistically on any usable pool (no slice)."""
    usable = shape.usable
    return _interned(st, RunClass.OPPORTUNISTIC, tuple(p for p, _, _ in usable), (None,) * len(usable), None)


def _terms(st: CycleState, job: Job, shape: Shape) -> Terms:
    usable = shape.usable
    if not usable or (job.contract is ContractClass.OPPORTUNISTIC and job.kind is JobKind.BATCH):
        found = shape.opportunistic
        if found is None:
            found = shape.opportunistic = (
                _opportunistic(st, shape) if usable else _interned(st, RunClass.OPPORTUNISTIC, (), (), Blocker.NO_POOL)
            )
        return found
    owner: str | None = None
    generation = 0
    allowed: tuple[tuple[int, Pool, Seconds, Micro], ...] = ()
    refused = False
    prices = shape.plain_prices
    if shape.windowed:
        owner = job.budget if job.budget in st.windows.owners else None  # other budgets are all treated alike
        v = _window_verdicts(st, job, shape, owner)
        generation = v.generation  # from 1 on: never (None, 0), the key of a shape without windows
        allowed, refused, prices = v.allowed, v.refused, v.prices
    available = st.available(job.budget)
    # the Terms depend on the money available only through which of the prices it covers
    key: FoundKey = (owner, generation, bisect_right(prices, available), job.fallback_opportunistic)
    found = shape.found.get(key)
    if found is None:
        found = shape.found[key] = _funded_terms(st, job, shape, allowed, refused, available)
    return found


def _window_verdicts(st: CycleState, job: Job, shape: Shape, owner: str | None) -> WindowVerdicts:
    """Rules `slice_end_before_window` and `window_lends_idle` on each of the shape's pools with windows, brought up
    to date with the slices granted on those pools since they were last read."""
    windows = st.windows
    v = shape.verdicts.get(owner)
    if v is not None and v.seen == windows.version:
        return v
    if v is None:
        v = shape.verdicts[owner] = WindowVerdicts(
            windows.version, [-1] * len(shape.windowed), [None] * len(shape.windowed)
        )
    v.seen = windows.version
    changed = v.generation == 0
    for n, (_, pool, held, full_cost) in enumerate(shape.windowed):
        version = windows.pool_version[pool]
        if v.pool_versions[n] != version:
            v.pool_versions[n] = version
            key = (pool, owner, held, job.kind, job.slice_seconds, version)  # shared by all shapes with these
            cached = st.caches.window_verdicts
            if key in cached:
                verdict = cached[key]
            else:
                verdict = cached[key] = _window_verdict(st, job, pool, held, full_cost)
            changed = changed or verdict != v.verdicts[n]
            v.verdicts[n] = verdict
    if changed:
        v.generation += 1
        v.allowed = tuple(
            (i, p, *verdict)
            for (i, p, _, _), verdict in zip(shape.windowed, v.verdicts, strict=True)
            if verdict is not None
        )
        v.refused = any(verdict is None for verdict in v.verdicts)
        v.prices = sorted(set(shape.plain_prices) | {price for *_, price in v.allowed})
    return v


def _window_verdict(st: CycleState, job: Job, pool: Pool, held: int, full_cost: Micro) -> WindowVerdict:
    now = st.ix.now
    length = st.ix.slice_length(job)
    windows = st.windows
    if not windows.window_lends_idle(job.budget, pool, held):
        return None
    end = windows.slice_end_before_window(job.budget, pool, held, now + length)
    if end - now < (length if job.kind is JobKind.SESSION else st.ix.pol.min_slice):
        return None
    return end, full_cost if end == now + length else st.ix.slice_cost(job, held, pool, end - now)


def _funded_terms(
    st: CycleState,
    job: Job,
    shape: Shape,
    allowed: tuple[tuple[int, Pool, Seconds, Micro], ...],
    refused: bool,
    available: Micro,
) -> Terms:
    """The pools whose slice the budget can pay for, in the job's order of pools."""
    run_class = RunClass.SESSION if job.kind is JobKind.SESSION else RunClass.GUARANTEED
    end = st.ix.now + st.ix.slice_length(job)
    funded = [(i, p, end) for i, p, c in shape.plain if c <= available]
    if allowed:
        funded = sorted(funded + [(i, p, e) for i, p, e, c in allowed if c <= available])
    if funded:
        return _interned(st, run_class, tuple(p for _, p, _ in funded), tuple(e for _, _, e in funded), None)
    if job.fallback_opportunistic and job.kind is JobKind.BATCH:
        return _opportunistic(st, shape)
    return _interned(st, run_class, (), (), Blocker.WINDOW if refused else Blocker.FUNDS)
