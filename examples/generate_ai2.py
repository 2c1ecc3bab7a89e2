"""Writes examples/ai2/allotment.yaml: an Ai2-like lab of 4,096 GPUs, 8 groups, 60 projects, 150 users.

Owns: the example organisation's content (fleet, rates, budget tree, users and roles, policy, capacity
windows) and its deterministic rendering as commented YAML.

Must not: depend on anything but the standard library, or produce different output from one run to the next
(the committed file is checked against this script by the tests).

Usage: python examples/generate_ai2.py [--out PATH] [--check]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

HOURS_PER_MONTH = 720
RATES = {"H100": "1.0", "B200": "1.6", "B300": "2.0"}
ORG_ALLOCATION = 4_480_000

# (cluster, [(gpu_type, nodes, rack_size, block_size)]) — 8-GPU nodes everywhere.
NODE_HOST = {"H100": (224, "2T"), "B200": (224, "4T"), "B300": (256, "4T")}
"""CPUs and memory each node offers to jobs, per GPU type (what an 8-GPU host of that kind has, less the system's)."""

CLUSTERS: list[tuple[str, list[tuple[str, int, int, int]]]] = [
    ("ceres", [("H100", 11, 4, 4)]),
    ("saturn", [("H100", 32, 4, 4)]),
    ("neptune", [("H100", 64, 4, 4)]),
    ("jupiter", [("B200", 128, 4, 8)]),
    ("titan", [("B300", 128, 8, 4)]),
    ("augusta", [("H100", 85, 4, 4), ("B300", 64, 8, 4)]),
]
NODE_STATES = {
    "jupiter": [("jupiter-b200-0017", "down", False)],
    "titan": [("titan-b300-0101", "draining", False)],
    "neptune": [("neptune-h100-0005", "cordoned", False)],
}

# group → (share of the org's allocation in per cent, [(project, weight, max_gpus or 0)])
GROUPS: list[tuple[str, int, list[tuple[str, int, int]]]] = [
    (
        "pretraining",
        30,
        [
            ("olmo-core", 30, 0),
            ("olmo-32b", 20, 0),
            ("olmo-moe", 14, 0),
            ("long-context", 8, 0),
            ("data-mixing", 8, 0),
            ("scaling-laws", 8, 256),
            ("tokenizers", 3, 64),
            ("midtraining", 9, 0),
        ],
    ),
    (
        "post-training",
        16,
        [
            ("tulu", 20, 0),
            ("rlvr", 18, 0),
            ("preference-data", 8, 0),
            ("reward-models", 12, 0),
            ("dpo-sweeps", 10, 0),
            ("instruction-tuning", 10, 0),
            ("reasoning-rl", 16, 0),
            ("distillation", 6, 0),
        ],
    ),
    (
        "multimodal",
        12,
        [
            ("molmo", 24, 0),
            ("pixmo", 10, 0),
            ("video-lm", 16, 0),
            ("speech", 10, 0),
            ("ocr-docs", 8, 0),
            ("embodied", 12, 0),
            ("image-gen", 12, 0),
            ("vision-encoders", 8, 0),
        ],
    ),
    (
        "safety",
        6,
        [
            ("red-teaming", 15, 0),
            ("wildguard", 20, 0),
            ("refusal-calibration", 15, 0),
            ("interpretability", 25, 0),
            ("unlearning", 15, 0),
            ("jailbreak-evals", 10, 64),
        ],
    ),
    (
        "evals",
        9,
        [
            ("olmes", 25, 0),
            ("nightly-evals", 25, 0),
            ("leaderboard", 10, 0),
            ("contamination", 10, 0),
            ("long-context-evals", 10, 0),
            ("judge-models", 15, 0),
            ("human-evals", 5, 16),
        ],
    ),
    (
        "infra",
        5,
        [
            ("kernels", 20, 32),
            ("checkpointing", 15, 0),
            ("perf-benchmarks", 25, 0),
            ("fleet-health", 10, 0),
            ("data-pipelines", 15, 0),
            ("inference", 15, 0),
        ],
    ),
    (
        "science",
        10,
        [
            ("semantic-scholar", 20, 0),
            ("paper-finder", 12, 0),
            ("scienceqa", 10, 0),
            ("climate", 12, 0),
            ("molecules", 12, 0),
            ("biology-lm", 14, 0),
            ("math-lm", 12, 0),
            ("astronomy", 8, 0),
            ("citations", 5, 32),
        ],
    ),
    (
        "agents",
        12,
        [
            ("code-agents", 20, 0),
            ("web-agents", 14, 0),
            ("tool-use", 12, 0),
            ("sandboxes", 8, 0),
            ("swe-bench", 14, 0),
            ("planning", 10, 0),
            ("agent-rl", 22, 0),
            ("browser-use", 8, 0),
        ],
    ),
]
GROUP_MAX_GPUS = {"infra": 256, "safety": 512}

_FIRST_NAMES = """
    Aaron Abby Adel Aditi Akira Alba Alex Amara Amir Ana Anil Arjun Asha Ben Bianca Bo Caleb Carla Chen Chidi
    Chloe Dan Dara Dev Diego Dmitri Elena Eli Emre Erin Ezra Farah Felix Gita Hana Hugo Ian Ines Ivan Jae Jana
    Joel Julia Kai Kalani Kenji Kira Lars Leah Leo Lina Luca Maya Mei Milo Nadia Nia Nico Noor Omar Oren Pablo
    Priya Quinn Rafa Rhea Rosa Sam Sana Sara Soren Tara Teo Uma Vera Wei Yara Yusuf Zoe
"""
_LAST_NAMES = """
    Abbott Adeyemi Alvarez Andersen Bauer Becker Brennan Castillo Chowdhury Cohen Dubois Eriksen Farouk
    Fischer Garcia Gupta Haddad Hansen Ito Jensen Kahn Kim Kowalski Larsen Levi Lindqvist Mehta Moreau
    Nakamura Nguyen Novak Okafor Oyelaran Park Patel Quintero Rossi Sato Schmidt Silva Singh Tanaka Torres
    Vasquez Wagner Walsh Yamamoto Zhang
"""
FIRST = _FIRST_NAMES.split()
LAST = _LAST_NAMES.split()
N_USERS = 150
N_ADMINS = 3
N_OPERATORS = 4

START = "2026-11-01"
WINDOWS = [
    (
        "olmo-32b-b300-run",
        "olmo-core",
        "titan",
        "B300",
        512,
        "2026-11-08T00:00:00Z",
        "2026-11-22T00:00:00Z",
        "a two-week pretraining run on half of titan's B300 pool",
    ),
    (
        "nightly-evals-2026-11-11",
        "nightly-evals",
        "neptune",
        "H100",
        128,
        "2026-11-11T22:00:00Z",
        "2026-11-12T06:00:00Z",
        "the nightly eval block: 16 nodes, 22:00–06:00 UTC",
    ),
]


def fleet_credits_per_hour() -> float:
    rates = {k: float(v) for k, v in RATES.items()}
    return sum(rates[t] * n * 8 for _, groups in CLUSTERS for t, n, _, _ in groups)


def make_users(rng: random.Random) -> list[tuple[str, str, str]]:
    """150 distinct people; first names repeat at most twice, logins are first name + last initial."""
    firsts = list(FIRST)
    rng.shuffle(firsts)
    users: list[tuple[str, str, str]] = []
    logins: set[str] = set()
    i = 0
    while len(users) < N_USERS:
        first = firsts[i % len(firsts)]
        i += 1
        last = rng.choice(LAST)
        login = f"{first.lower()}{last[0].lower()}"
        if login in logins:
            continue
        logins.add(login)
        users.append((login, f"{first} {last}", f"{login}@lab.example"))
    return sorted(users)


def plan(rng: random.Random) -> tuple[list[tuple[str, str, str]], dict[str, list[tuple[str, str]]]]:
    """Users and every budget's members as (user, role)."""
    users = make_users(rng)
    logins = [u[0] for u in users]
    rng.shuffle(logins)
    members: dict[str, list[tuple[str, str]]] = {"ai2": []}
    for group, _, projects in GROUPS:
        members[group] = []
        for project, _, _ in projects:
            members[project] = []
    admins, rest = logins[:N_ADMINS], logins[N_ADMINS:]
    operators, rest = rest[:N_OPERATORS], rest[N_OPERATORS:]
    members["ai2"] += [(u, "admin") for u in admins] + [(u, "operator") for u in operators]
    for u in operators:
        members["fleet-health"].append((u, "member"))
    # Researchers get a home group in proportion to its share, one lead per group, then 1–3 projects.
    weights = [share for _, share, _ in GROUPS]
    homes: dict[str, list[str]] = {g: [] for g, _, _ in GROUPS}
    for i, (group, _, _) in enumerate(GROUPS):
        homes[group].append(rest[i])  # at least the lead
    for u in rest[len(GROUPS) :]:
        homes[rng.choices([g for g, _, _ in GROUPS], weights=weights)[0]].append(u)
    all_projects = [p for _, _, ps in GROUPS for p, _, _ in ps]
    for group, _, projects in GROUPS:
        names = [p for p, _, _ in projects]
        lead, *researchers = homes[group]
        members[group].append((lead, "lead"))
        members[rng.choice(names)].append((lead, "member"))
        for i, u in enumerate(researchers):
            count = rng.choices([1, 2, 3], weights=[45, 40, 15])[0]
            chosen = [names[i % len(names)]]  # round robin first, so every project has members
            while len(chosen) < count:
                pool = names if len(chosen) < 2 else all_projects
                pick = rng.choice(pool)
                if pick not in chosen:
                    chosen.append(pick)
            for project in chosen:
                members[project].append((u, "member"))
        for project in names:  # a small group may have fewer researchers than projects
            if not members[project]:
                members[project].append((rng.choice(researchers or [lead]), "member"))
    for roster in members.values():
        roster.sort()
    return users, members


def render() -> str:
    rng = random.Random(2026)
    users, members = plan(rng)
    per_hour = fleet_credits_per_hour()
    gpus = sum(n * 8 for _, groups in CLUSTERS for _, n, _, _ in groups)
    out: list[str] = [
        "# An Ai2-like research lab for Allotment: about 4,096 GPUs (H100, B200, B300) in six clusters",
        "# of 88 to 1,192 GPUs, an org → 8 groups → 60 projects budget tree and 150 users.",
        "# Generated by examples/generate_ai2.py; edit the script, not this file.",
        "# Format: docs/configuration.md.",
        "",
        "credits:  # credits per GPU-hour; one credit is one H100-hour",
        *(f"  {t}: {r}" for t, r in RATES.items()),
        "",
        "period:",
        "  length: month",
        f"  starts: {START}",
        "  carry_over: false",
        "",
        f"# {gpus:,} GPUs deliver about {per_hour:,.1f} credits an hour, "
        f"{per_hour * HOURS_PER_MONTH:,.0f} in a 30-day month.",
        "fleet:",
        "  clusters:",
    ]
    for name, groups in CLUSTERS:
        size = sum(n * 8 for _, n, _, _ in groups)
        out += [f"    - name: {name}  # {size:,} GPUs", "      topology: [rack, block]", "      node_groups:"]
        for gpu_type, nodes, rack, block in groups:
            cpus, memory = NODE_HOST[gpu_type]
            out.append(
                f"        - {{gpu_type: {gpu_type}, count: {nodes}, gpus_per_node: 8, "
                f"rack_size: {rack}, block_size: {block}, cpus_per_node: {cpus}, memory_per_node: {memory}}}"
            )
        if name in NODE_STATES:
            out.append("      node_states:")
            for node, state, forced in NODE_STATES[name]:
                extra = ", forced: true" if forced else ""
                out.append(f"        - {{node: {node}, state: {state}{extra}}}")
    out += ["", "users:"]
    out += [f"  - {{name: {login}, full_name: {full}, email: {email}}}" for login, full, email in users]
    out += [
        "",
        "# allocation: credits per month. A parent's allocation covers the sum of its children's;",
        "# what a group keeps above its projects' sum is its reserve for the lead to hand out.",
        "budgets:",
    ]

    def budget(name: str, parent: str | None, allocation: int, max_gpus: int) -> None:
        out.append(f"  - name: {name}")
        if parent is not None:
            out.append(f"    parent: {parent}")
        out.append(f"    allocation: {allocation}")
        if max_gpus:
            out.append(f"    max_gpus: {max_gpus}")
        if members[name]:
            out.append("    members:")
            out.extend(f"      - {{user: {u}, role: {role}}}" for u, role in members[name])

    budget("ai2", None, ORG_ALLOCATION, 0)
    for group, share, projects in GROUPS:
        group_allocation = ORG_ALLOCATION * share // 100 // 1000 * 1000
        budget(group, "ai2", group_allocation, GROUP_MAX_GPUS.get(group, 0))
        total_weight = sum(w for _, w, _ in projects)
        for project, weight, max_gpus in projects:
            allocation = group_allocation * 97 // 100 * weight // total_weight // 500 * 500
            budget(project, group, allocation, max_gpus)
    out += [
        "",
        "policy:",
        "  min_slice: 30m",
        "  max_slice: 8h",
        "  max_grace: 10m",
        "  session_max_gpus: 8",
        "  session_max_length: 8h",
        "  session_idle_timeout: 1h",
        "  session_max_per_user: 2",
        "  default_headroom: 0  # no fixed floor: the room is sized from session demand (decision 69)",
        "  headroom_max_grace: 30s",
        "  opportunistic_price: 0.4",
        "  session_price: 1.0",
        "  usage_half_life: 7d",
        "  starvation_after: 7d  # plans of jobs waiting a day no longer override fair share here (decision 71)",
        "  max_reservations: 100",
        "",
        "windows:",
    ]
    for wid, budget_name, cluster, gpu_type, count, start, end, note in WINDOWS:
        out += [
            f"  - id: {wid}  # {note}",
            f"    budget: {budget_name}",
            f"    cluster: {cluster}",
            f"    gpu_type: {gpu_type}",
            f"    gpus: {count}",
            f"    start: {start}",
            f"    end: {end}",
        ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    default = Path(__file__).resolve().parent / "ai2" / "allotment.yaml"
    parser.add_argument("--out", type=Path, default=default, help="where to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date; run examples/generate_ai2.py", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
