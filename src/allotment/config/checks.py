"""Rules that span sections or list items of a configuration whose fields are individually valid.

Owns: uniqueness of names, references between sections (members and run_as.accounts → users, budgets → parents,
windows → budgets and pools, headroom → clusters, GPU types → rates), the budget tree's shape (no cycles, a parent's
allocation covers its children's), fleet topology rules, per-node overrides, and capacity-window bounds (a pool is
never booked beyond its size at any instant).

Must not: read files or know about YAML; every complaint is a data path (`Loc`) and a reason, and the loader
maps paths to lines.
"""

from __future__ import annotations

from collections.abc import Iterable

from allotment.config.errors import Loc
from allotment.config.fleet import plan_cluster
from allotment.config.schema import AllotmentConfig, OverrideState

Complaint = tuple[Loc, str]

_TOPOLOGIES = {(), ("rack",), ("rack", "block")}


def _duplicates(items: Iterable[str], prefix: Loc, key: str, what: str) -> list[Complaint]:
    """A complaint at `(*prefix, i, key)` for every item whose name an earlier item already has."""
    seen: dict[str, int] = {}
    out: list[Complaint] = []
    for i, name in enumerate(items):
        if name in seen:
            out.append(((*prefix, i, key), f"duplicate {what} '{name}' (also at index {seen[name]})"))
        else:
            seen[name] = i
    return out


def check_users(cfg: AllotmentConfig) -> list[Complaint]:
    out = _duplicates((u.name for u in cfg.users), ("users",), "name", "user name")
    out += _duplicates((u.email.lower() for u in cfg.users), ("users",), "email", "email")
    names = {u.name for u in cfg.users}
    for user in cfg.run_as.accounts:
        if user not in names:
            out.append((("run_as", "accounts", user), f"unknown user '{user}' (map only users listed under users)"))
    return out


def check_fleet(cfg: AllotmentConfig) -> list[Complaint]:
    clusters = cfg.fleet.clusters
    out = _duplicates((c.name for c in clusters), ("fleet", "clusters"), "name", "cluster name")
    node_owner: dict[str, tuple[int, int]] = {}
    for ci, cluster in enumerate(clusters):
        here: Loc = ("fleet", "clusters", ci)
        if cluster.topology not in _TOPOLOGIES:
            out.append(((*here, "topology"), "topology must be [], [rack] or [rack, block] (tightest first)"))
        for gi, group in enumerate(cluster.node_groups):
            g: Loc = (*here, "node_groups", gi)
            if group.gpu_type not in cfg.credits:
                known = ", ".join(sorted(cfg.credits))
                out.append(((*g, "gpu_type"), f"GPU type '{group.gpu_type}' has no rate in credits ({known})"))
            for key, size in (("rack", group.rack_size), ("block", group.block_size)):
                if key in cluster.topology and size is None:
                    out.append(((*g, f"{key}_size"), f"required: the cluster's topology names '{key}'"))
                if key not in cluster.topology and size is not None:
                    out.append(((*g, f"{key}_size"), f"the cluster's topology does not name '{key}'"))
        planned = plan_cluster(cluster)
        names = {p.node.name for p in planned}
        for p in planned:
            if p.node.name in node_owner and node_owner[p.node.name] != (ci, p.group):
                oc, og = node_owner[p.node.name]
                out.append(
                    (
                        (*here, "node_groups", p.group, "prefix"),
                        f"node name '{p.node.name}' is also produced by"
                        f" fleet.clusters[{oc}].node_groups[{og}]; give the groups different prefixes",
                    )
                )
                break
            node_owner.setdefault(p.node.name, (ci, p.group))
        out += _duplicates((o.node for o in cluster.node_states), (*here, "node_states"), "node", "node")
        for oi, override in enumerate(cluster.node_states):
            o: Loc = (*here, "node_states", oi)
            if override.node not in names:
                out.append(((*o, "node"), f"cluster '{cluster.name}' has no node '{override.node}'"))
            if override.forced and override.state is not OverrideState.DRAINING:
                out.append(((*o, "forced"), "only a draining node can be forced"))
    return out


def check_budgets(cfg: AllotmentConfig) -> list[Complaint]:
    budgets = cfg.budgets
    out = _duplicates((b.name for b in budgets), ("budgets",), "name", "budget name")
    index = {b.name: i for i, b in reversed(list(enumerate(budgets)))}
    users = {u.name for u in cfg.users}
    for i, budget in enumerate(budgets):
        if budget.parent is not None and budget.parent not in index:
            out.append((("budgets", i, "parent"), f"parent budget '{budget.parent}' does not exist"))
        if budget.parent == budget.name:
            out.append((("budgets", i, "parent"), "a budget cannot be its own parent"))
        out += _duplicates((m.user for m in budget.members), ("budgets", i, "members"), "user", "member")
        for j, member in enumerate(budget.members):
            if member.user not in users:
                out.append((("budgets", i, "members", j, "user"), f"unknown user '{member.user}'"))
    # Cycles: follow parents from every budget; a walk that revisits a budget is a cycle.
    reported: set[str] = set()
    for i, budget in enumerate(budgets):
        path: list[str] = [budget.name]
        parent = budget.parent
        while parent is not None and parent in index and parent not in path:
            path.append(parent)
            parent = budgets[index[parent]].parent
        if parent is not None and parent in path:
            cycle = path[path.index(parent) :]
            if not reported.intersection(cycle):
                reported.update(cycle)
                loop = " → ".join([*cycle, parent])
                out.append((("budgets", i, "parent"), f"the budget tree has a cycle: {loop}"))
    if budgets and not any(b.parent is None for b in budgets) and not reported:
        out.append((("budgets",), "the budget tree has no root (a budget without a parent)"))
    children: dict[str, list[int]] = {}
    for i, budget in enumerate(budgets):
        if budget.parent is not None and budget.parent != budget.name:
            children.setdefault(budget.parent, []).append(i)
    for name, kids in children.items():
        if name not in index or name in reported:  # sums around a cycle mean nothing
            continue
        parent_budget = budgets[index[name]]
        total = sum((budgets[k].allocation for k in kids), start=parent_budget.allocation * 0)
        if parent_budget.allocation < total:
            out.append(
                (
                    ("budgets", index[name], "allocation"),
                    f"allocation {parent_budget.allocation} of '{name}' is less than its children's sum {total}",
                )
            )
    return out


def check_policy(cfg: AllotmentConfig) -> list[Complaint]:
    policy = cfg.policy
    out: list[Complaint] = []
    if policy.min_slice <= 0:
        out.append((("policy", "min_slice"), "must be longer than zero"))
    if policy.max_slice < policy.min_slice:
        out.append((("policy", "max_slice"), "must be at least min_slice"))
    if policy.session_max_length <= 0:
        out.append((("policy", "session_max_length"), "must be longer than zero"))
    if policy.usage_half_life <= 0:
        out.append((("policy", "usage_half_life"), "must be longer than zero"))
    if policy.starvation_after <= 0:
        out.append((("policy", "starvation_after"), "must be longer than zero"))
    if policy.checkpoint_wait < 0:
        out.append((("policy", "checkpoint_wait"), "must not be negative (0: a plan never waits for a checkpoint)"))
    if policy.opportunistic_price > 1:
        out.append((("policy", "opportunistic_price"), "opportunistic work cannot cost more than full price"))
    clusters = {c.name for c in cfg.fleet.clusters}
    for name in policy.headroom:
        if name not in clusters:
            out.append((("policy", "headroom", name), f"unknown cluster '{name}'"))
    for name in policy.room_ceiling:
        if name not in clusters:
            out.append((("policy", "room_ceiling", name), f"unknown cluster '{name}'"))
    if policy.room_quantile > 1:
        out.append((("policy", "room_quantile"), "a share of the window's time: at most 1 (0.99 is the p99)"))
    return out


def check_period(cfg: AllotmentConfig) -> list[Complaint]:
    if cfg.period.length != "week" and cfg.period.starts.day > 28:
        return [(("period", "starts"), "monthly and quarterly periods must start on day 1–28 of a month")]
    return []


def check_windows(cfg: AllotmentConfig) -> list[Complaint]:
    windows = cfg.windows
    out = _duplicates((w.id for w in windows), ("windows",), "id", "window id")
    budgets = {b.name for b in cfg.budgets}
    clusters = {c.name for c in cfg.fleet.clusters}
    pools = cfg.pool_sizes()
    valid: list[int] = []
    for i, window in enumerate(windows):
        here: Loc = ("windows", i)
        ok = True
        if window.budget not in budgets:
            out.append(((*here, "budget"), f"unknown budget '{window.budget}'"))
        if window.cluster not in clusters:
            out.append(((*here, "cluster"), f"unknown cluster '{window.cluster}'"))
            ok = False
        elif (window.cluster, window.gpu_type) not in pools:
            out.append(((*here, "gpu_type"), f"cluster '{window.cluster}' has no {window.gpu_type} GPUs"))
            ok = False
        elif window.gpus > pools[window.cluster, window.gpu_type]:
            size = pools[window.cluster, window.gpu_type]
            out.append(((*here, "gpus"), f"{window.gpus} GPUs exceed the pool's {size}"))
            ok = False
        if window.end <= window.start:
            out.append(((*here, "end"), "must be after start"))
            ok = False
        if ok:
            valid.append(i)
    # Overlapping windows of one pool must fit in it at every instant (sweep over start and end events).
    by_pool: dict[tuple[str, str], list[int]] = {}
    for i in valid:
        by_pool.setdefault((windows[i].cluster, windows[i].gpu_type), []).append(i)
    for pool, members in by_pool.items():
        events = sorted(
            [(windows[i].start, 1, i) for i in members] + [(windows[i].end, 0, i) for i in members]
        )  # ends (0) sort before starts (1) at one instant: [start, end) windows that touch do not overlap
        booked = 0
        for _, is_start, i in events:
            booked += windows[i].gpus if is_start else -windows[i].gpus
            if is_start and booked > pools[pool]:
                out.append(
                    (
                        ("windows", i, "gpus"),
                        f"overlapping windows book {booked} GPUs of pool {pool[0]}/{pool[1]}, which has {pools[pool]}",
                    )
                )
    return out


def cross_check(cfg: AllotmentConfig) -> list[Complaint]:
    """Every rule that spans sections or items, in document order of sections."""
    out: list[Complaint] = []
    for check in (check_users, check_fleet, check_budgets, check_policy, check_period, check_windows):
        out += check(cfg)
    return out
