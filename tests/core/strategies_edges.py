"""Hypothesis strategies for the shapes at the promises' edges (issue 19), which cases() draws too rarely to test.

Owns: a capacity window opening on in-slice, slice-ending, lapsed, opportunistic, leaving and the window budget's own
work (`window_openings`), and budgets whose money lies exactly at, one micro below or above, or half a slice past the
cost of their first slices, with room for every job (`funding_edges`); and the facts their properties need (a
slice's price, a budget's serving order).

Must not: assert anything; the property tests (test_properties_window_openings.py, test_properties_funding_edges.py)
do that.
"""

from __future__ import annotations

from hypothesis import strategies as st

from allotment.core.model import (
    FULL_PRICE,
    MICRO_PER_CREDIT,
    Account,
    Allocation,
    Budget,
    CapacityWindow,
    Cluster,
    ContractClass,
    Job,
    Node,
    PolicyConfig,
    Preemption,
    Run,
    RunClass,
    Snapshot,
)
from allotment.core.units import cost
from tests.core.strategies import GPU_TYPES, HOUR, LEAF_NAMES, RATES, Case, Draw, slice_length

WINDOW_OWNER = "golf"
"""The budget holding the capacity window in window_openings()."""
OPENING_MODES = ("in-slice", "in-slice", "ends-now", "lapsed", "opp", "own-lapsed", "own-in-slice", "leaving")


@st.composite
def window_openings(draw: Draw) -> Case:
    """A capacity window opening (now, or up to two minutes ago) on one pool of one or two 8-GPU nodes, full or
    nearly full of other budgets' work inside its slice, at its slice end exactly now, lapsed (slice gone, still
    guaranteed), opportunistic or already leaving, and of the window budget's own work; the window budget's one
    pending job asks for up to the window's GPUs. No other pending job and no headroom, so that every preemption in
    the decision is the window's reclaim (or, once the window step has passed it by, the job's own)."""
    now = draw(st.integers(100_000, 1_000_000))
    pol = PolicyConfig(default_headroom=0)
    nodes = [Node(f"c0-n{i:02d}", "c0", "H100", 8, (("rack", "c0-r0"),)) for i in range(draw(st.integers(1, 2)))]
    others = ["bravo", "charlie"]
    budgets = [Budget(n, None, 1000 * MICRO_PER_CREDIT) for n in [WINDOW_OWNER, *others]]
    accounts = {
        b.name: Account(b.allocation, draw(st.floats(0, 500, allow_nan=False, allow_infinity=False))) for b in budgets
    }
    jobs: list[Job] = []
    for node in nodes:
        left = draw(st.integers(6, 8))  # GPUs to fill on this node; the rest stay free
        while left > 0:
            gpus = draw(st.integers(1, left))
            used = 8 - left
            left -= gpus
            mode = draw(st.sampled_from(OPENING_MODES))
            budget = WINDOW_OWNER if mode.startswith("own-") else draw(st.sampled_from(others))
            started = now - draw(st.integers(1, 6 * HOUR))
            slice_end: int | None = None
            run_class, contract, preemption = RunClass.OPPORTUNISTIC, ContractClass.GUARANTEED, None
            if mode in ("in-slice", "own-in-slice"):
                run_class, slice_end = RunClass.GUARANTEED, now + draw(st.integers(1, pol.max_slice))
            elif mode == "ends-now":
                run_class, slice_end = RunClass.GUARANTEED, now
            elif mode == "opp":
                contract = ContractClass.OPPORTUNISTIC
            elif mode == "leaving":
                preemption = Preemption(now - 10, now + draw(st.integers(0, 600)), "fair-share")
            if slice_end is not None:
                started = min(started, slice_end - 1)
            run = Run(
                (Allocation(node.name, tuple(range(used, used + gpus))),), started, run_class, slice_end, preemption
            )
            jobs.append(
                Job(
                    f"run{len(jobs):02d}",
                    budget,
                    f"{budget}-u0",
                    gpus,
                    contract=contract,
                    slice_seconds=8 * HOUR,
                    grace=draw(st.sampled_from([0, 30, 300])),
                    submitted_at=started - 60,
                    run=run,
                )
            )
    capacity = 8 * len(nodes)
    start = now - draw(st.integers(0, 120))
    window = CapacityWindow("w0", WINDOW_OWNER, "c0", "H100", draw(st.integers(1, capacity)), start, start + 8 * HOUR)
    want = draw(st.integers(1, min(8, window.gpus)))
    jobs.append(
        Job(
            "want",
            WINDOW_OWNER,
            f"{WINDOW_OWNER}-u1",
            want,
            slice_seconds=draw(st.sampled_from([HOUR, 4 * HOUR])),
            grace=30,
            submitted_at=now - 600,
        )
    )
    snap = Snapshot(
        clusters=(Cluster("c0", ("rack",)),),
        nodes=tuple(nodes),
        rates=dict(RATES),
        budgets=tuple(budgets),
        accounts=accounts,
        jobs=tuple(draw(st.permutations(jobs))),
        windows=(window,),
        policy=pol,
    )
    return Case(snap, now, {})


FUNDED_SHAPES = ((1, 1), (2, 1), (3, 1), (4, 1), (8, 1), (8, 2))
"""(GPUs per replica, replicas) of the jobs funding_edges() draws."""
NEIGHBOURS = {
    (1, 1): ((2, 1),),
    (2, 1): ((1, 1), (3, 1)),
    (3, 1): ((2, 1), (4, 1)),
    (4, 1): ((3, 1), (8, 1)),
    (8, 1): ((4, 1), (8, 2)),
    (8, 2): ((8, 1),),
}
"""Shapes that differ from each in GPUs or replicas only (caches keyed on a shape must tell them apart)."""
FUNDED_LENGTHS = (1800, HOUR, 5400, 4 * HOUR)
"""Slice lengths within [min_slice, max_slice], so that a slice is as long as asked."""


WINDOW_STARTS = (1799, 1800, 2700, HOUR, 5400, 10 * HOUR)
"""How long after `now` the window of funding_edges() opens: just below and at `min_slice`, inside and past the
slices asked for."""


def slice_offer(snap: Snapshot, job: Job, now: int) -> tuple[int, int] | None:
    """(slice end, price) of a batch job in funding_edges()'s one pool: as long as asked, or ended at the start of
    another budget's window on the whole pool and priced for that length; None when that leaves less than
    `min_slice`."""
    end = now + slice_length(snap.policy, job)
    for w in snap.windows:
        if w.budget != job.budget and now < w.start < end:
            end = w.start
    if end - now < snap.policy.min_slice:
        return None
    return end, cost(job.total_gpus, snap.rates[snap.nodes[0].gpu_type], FULL_PRICE, end - now)


def serving_order(jobs: list[Job]) -> list[Job]:
    """One budget's pending jobs in its own order: priority (highest first), then age, then id."""
    return sorted(jobs, key=lambda j: (-j.priority, j.submitted_at, j.id))


@st.composite
def funding_edges(draw: Draw) -> Case:
    """Room for everyone (a node per job, whole nodes for gangs, no headroom, no limits) and one to three budgets
    whose balance lies at, one micro below or above, or half a slice past the cost of the first k of their
    guaranteed jobs in their own order; jobs of several shapes (GPUs, replicas, slice length, contract, fallback)
    per budget, some of one shape in several budgets, and sometimes a slice already running whose remaining cost
    the budget has promised; and sometimes a window of one of the budgets on the whole pool, opening soon, which
    shortens the other budgets' slices to its start (and prices them so) or, below `min_slice`, refuses them. Only
    money and that window can keep a job waiting."""
    now = draw(st.integers(100_000, 1_000_000))
    gpu_type = draw(st.sampled_from(GPU_TYPES))
    pol = PolicyConfig(default_headroom=0)
    names = list(LEAF_NAMES[: draw(st.integers(1, 3))])
    jobs: list[Job] = []
    per_budget: dict[str, list[Job]] = {}
    shared = (draw(st.sampled_from(FUNDED_SHAPES)), draw(st.sampled_from(FUNDED_LENGTHS)))
    for name in names:
        for _ in range(draw(st.integers(1, 5))):
            (gpus, replicas), length = shared
            roll = draw(st.integers(0, 3))  # the shared shape, or one that differs from it in one thing only
            if roll == 1:
                gpus, replicas = draw(st.sampled_from(NEIGHBOURS[(gpus, replicas)]))
            elif roll == 2:
                length = draw(st.sampled_from([n for n in FUNDED_LENGTHS if n != length]))
            elif roll == 3:
                (gpus, replicas), length = draw(st.sampled_from(FUNDED_SHAPES)), draw(st.sampled_from(FUNDED_LENGTHS))
            contract = ContractClass.OPPORTUNISTIC if draw(st.integers(0, 4)) == 0 else ContractClass.GUARANTEED
            job = Job(
                f"job{len(jobs):02d}",
                name,
                f"{name}-u0",
                gpus,
                replicas=replicas,
                contract=contract,
                slice_seconds=length,
                priority=draw(st.integers(-1, 1)),
                submitted_at=now - 1000 + len(jobs),
                fallback_opportunistic=contract is ContractClass.GUARANTEED and draw(st.booleans()),
            )
            jobs.append(job)
            per_budget.setdefault(name, []).append(job)
    size = sum(j.replicas for j in jobs)
    nodes = [Node(f"c0-n{i:02d}", "c0", gpu_type, 8, (("rack", "c0-r0"),)) for i in range(size + 1)]
    windows: tuple[CapacityWindow, ...] = ()
    if draw(st.booleans()):  # a window on the whole pool, opening soon: other budgets' slices end at its start
        start = now + draw(st.sampled_from(WINDOW_STARTS))
        windows = (
            CapacityWindow("w0", draw(st.sampled_from(names)), "c0", gpu_type, 8 * len(nodes), start, start + 4 * HOUR),
        )
    probe = Snapshot(
        clusters=(),
        nodes=tuple(nodes),
        rates=dict(RATES),
        budgets=(),
        accounts={},
        jobs=(),
        windows=windows,
        policy=pol,
    )
    accounts: dict[str, Account] = {}
    for name in names:
        offers = [slice_offer(probe, j, now) for j in serving_order(per_budget[name])]
        prices = [
            o[1]
            for o, j in zip(offers, serving_order(per_budget[name]), strict=True)
            if o is not None and j.contract is ContractClass.GUARANTEED
        ]
        k = draw(st.integers(0, len(prices)))
        edge = draw(st.sampled_from([-1, 0, 1, max(1, (prices[k - 1] if k else 1) // 2)]))
        balance = max(0, sum(prices[:k]) + edge)
        accounts[name] = Account(balance, draw(st.floats(0, 50, allow_nan=False, allow_infinity=False)))
    if draw(st.booleans()):  # a slice already running on the spare node: its remaining cost is promised
        name = draw(st.sampled_from(names))
        left = draw(st.integers(1, 2 * HOUR))
        run = Run((Allocation(nodes[-1].name, (0,)),), now - 60, RunClass.GUARANTEED, now + left)
        jobs.append(Job("running", name, f"{name}-u0", 1, submitted_at=now - 120, run=run))
        promised = cost(1, RATES[gpu_type], FULL_PRICE, left)
        acc = accounts[name]
        accounts[name] = Account(acc.balance + promised * draw(st.integers(0, 1)), acc.usage)
    snap = Snapshot(
        clusters=(Cluster("c0", ("rack",)),),
        nodes=tuple(nodes),
        rates=dict(RATES),
        budgets=tuple(Budget(n, None, 1000 * MICRO_PER_CREDIT) for n in names),
        accounts=accounts,
        jobs=tuple(draw(st.permutations(jobs))),
        windows=windows,
        policy=pol,
    )
    return Case(snap, now, {})
