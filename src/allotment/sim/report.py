"""The evaluation report: policies side by side on one workload, as Markdown and HTML with matplotlib plots.

Owns: the side-by-side table (one column per policy), the per-budget fairness table, the PNG plots (busy versus
offered GPUs over time, session start latency CDF, waits by class, fairness per budget) and writing report.md,
report.html and the plots into one directory. The HTML is the Markdown's content with the same tables and images.

Must not: compute metrics (metrics.py) or run simulations.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from allotment.sim.metrics import SIZE_BUCKETS, Metrics, Quantiles
from allotment.sim.seeds import HEADLINES, Interval, across, headline

Table = list[list[str]]


def _f(x: float, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _q(q: Quantiles, digits: int = 1) -> str:
    return "–" if q.n == 0 else f"{_f(q.p50, digits)} / {_f(q.p95, digits)}"


def _q99(q: Quantiles, digits: int = 0) -> str:
    return "–" if q.n == 0 else f"{_q(q, digits)} / {_f(q.p99, digits)}"


def side_by_side(ms: Sequence[Metrics]) -> Table:
    """Rows: metric name, then one cell per policy."""
    rows: Table = [["metric", *[m.policy for m in ms]]]

    def row(name: str, cells: list[str]) -> None:
        rows.append([name, *cells])

    row("jobs finished / submitted", [f"{m.finished:,} / {m.jobs:,}" for m in ms])
    if any(m.opportunistic for m in ms):
        row(
            "opportunistic jobs finished / submitted",
            [f"{m.opportunistic_finished:,} / {m.opportunistic:,}" for m in ms],
        )
    row("utilisation while demand > supply", [_f(100 * m.utilisation_contended, 1) + " %" for m in ms])
    row("hours with demand > supply", [_f(m.contended_hours, 0) for m in ms])
    for cls in sorted({c for m in ms for c in m.waits}):
        row(f"wait {cls}, h (p50 / p95)", [_q(m.waits.get(cls, Quantiles(0, 0, 0, 0)), 2) for m in ms])
    for name, _lo, _hi in SIZE_BUCKETS:
        row(f"wait {name} GPUs, h (p50 / p95)", [_q(m.waits_by_size[name], 2) for m in ms])
    row(
        "session start within limits, s (p50 / p95 / p99)",
        [_q99(m.session_latency) for m in ms],
    )
    row("sessions within limits started within 60 s", [_f(100 * m.sessions_within_60s, 0) + " %" for m in ms])
    row("sessions told they wait on their own limit", [f"{m.sessions_own_limit:,}" for m in ms])
    row("every session's start, s (p50 / p95)", [_q(m.session_latency_all, 0) for m in ms])
    row(
        "first estimated start off by, h (p50 / p90)",
        ["–" if m.eta_error.n == 0 else f"{_f(m.eta_error.p50, 2)} / {_f(m.eta_error.p90, 2)}" for m in ms],
    )
    row("large gangs (≥ 64 GPUs) wait, h (p50 / p95)", [_q(m.large_gang_wait, 1) for m in ms])
    row("fairness: Jain's index (weekly mean)", [_f(m.jain, 3) for m in ms])
    row("fairness: worst budget received ÷ entitled", [_f(min(m.fairness.values(), default=math.nan), 2) for m in ms])
    row("preemptions", [f"{m.preemptions:,}" for m in ms])
    row(
        "GPU-hours lost to preemption (% of those held)",
        [f"{_f(m.gpu_hours_lost, 0)} ({_f(headline(m)['lost_share'], 2)} %)" for m in ms],
    )
    row("drained node empty after, h (p50 / p95)", [_q(m.drain_empty, 1) for m in ms])
    row("budgets overdrawn (credits)", [f"{m.overdrafts} ({_f(m.overdraft_credits, 0)})" for m in ms])
    row("jobs waiting > 1 day (starvation)", [f"{m.starved:,}" for m in ms])
    if any(m.deadlines for m in ms):
        row("deadlines met", [f"{m.deadlines_met:,} / {m.deadlines:,}" for m in ms])
    return rows


def fairness_table(ms: Sequence[Metrics]) -> Table:
    budgets = sorted({b for m in ms for b in m.fairness})
    return [["budget", *[m.policy for m in ms]]] + [
        [b, *[_f(m.fairness.get(b, math.nan), 2) for m in ms]] for b in budgets
    ]


def seeds_table(by_policy: Mapping[str, Sequence[Metrics]]) -> Table:
    """Rows: each headline metric's mean ± the half-width of its 95 % interval across seeds, one column per policy."""
    stats = {p: across(ms) for p, ms in by_policy.items()}
    rows: Table = [["metric (mean ± 95 % interval)", *stats]]
    for key, label in HEADLINES:
        if any(stats[p][key].n for p in stats):  # a metric no run had a value for (no deadlines) is left out
            rows.append([label, *[_pm(stats[p][key]) for p in stats]])
    return rows


def per_seed_table(by_policy: Mapping[str, Sequence[tuple[int, Metrics]]]) -> Table:
    """One row per policy and seed: the headline metrics of that run."""
    rows: Table = [["policy", "seed", *[label for _, label in HEADLINES]]]
    for policy, runs in by_policy.items():
        for seed, m in runs:
            h = headline(m)
            rows.append([policy, str(seed), *[_f(h[key], 2) for key, _ in HEADLINES]])
    return rows


def _pm(i: Interval) -> str:
    if i.n == 0:
        return "–"
    digits = 3 if abs(i.mean) < 10 else 1
    return f"{_f(i.mean, digits)} ± {_f(i.half, digits)}" + ("" if i.n > 1 else " (1 seed)")


def markdown_table(rows: Table) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def html_table(rows: Table) -> str:
    head, *body = rows
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body]
    return "\n".join([*out, "</table>"])


def plots(ms: Sequence[Metrics], out: Path) -> list[tuple[str, str]]:
    """Write the PNGs; returns (file name, caption) pairs."""
    made: list[tuple[str, str]] = []
    fig, ax = plt.subplots(figsize=(9, 4))
    for m in ms:
        if m.curve:
            ax.step([c[0] for c in m.curve], [c[1] for c in m.curve], where="post", label=f"busy: {m.policy}", lw=0.8)
    if ms and ms[0].curve:
        ax.step(
            [c[0] for c in ms[0].curve],
            [c[2] for c in ms[0].curve],
            where="post",
            label="offered (first policy)",
            color="grey",
            lw=0.6,
            ls="--",
        )
    ax.set_xlabel("hours")
    ax.set_ylabel("GPUs")
    _legend(ax)
    made.append(_save(fig, out, "busy.png", "GPUs busy per policy, and GPUs asked for by unfinished jobs"))
    fig, ax = plt.subplots(figsize=(6, 4))
    for m in ms:
        if m.session_latency.n:
            pts = _session_cdf(m)
            ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=m.policy)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("seconds from submission to start")
    ax.set_ylabel("share of sessions")
    _legend(ax)
    made.append(_save(fig, out, "sessions.png", "Session start latency (cumulative share)"))
    classes = sorted({c for m in ms for c in m.waits})
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(len(ms), 1)
    for i, m in enumerate(ms):
        ax.bar(
            [k + i * width for k in range(len(classes))],
            [m.waits[c].mean if c in m.waits else 0 for c in classes],
            width,
            label=m.policy,
        )
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(classes))], classes)
    ax.set_ylabel("mean wait, hours")
    _legend(ax)
    made.append(_save(fig, out, "waits.png", "Mean wait by class"))
    budgets = sorted({b for m in ms for b in m.fairness})
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(budgets) * max(len(ms), 1)), 4))
    for i, m in enumerate(ms):
        ax.bar(
            [k + i * width for k in range(len(budgets))], [m.fairness.get(b, 0) for b in budgets], width, label=m.policy
        )
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(budgets))], budgets, rotation=60, fontsize=6)
    ax.set_ylabel("received ÷ entitled")
    _legend(ax)
    made.append(_save(fig, out, "fairness.png", "Received versus entitled GPU-time per budget (1 = fair)"))
    return made


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _session_cdf(m: Metrics) -> list[tuple[float, float]]:
    n = len(m.session_waits)
    return [(0.0, 0.0)] + [(w, (i + 1) / n) for i, w in enumerate(m.session_waits)]


def _save(fig: Figure, out: Path, name: str, caption: str) -> tuple[str, str]:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name, caption


def write(
    title: str,
    notes: Sequence[str],
    ms: Sequence[Metrics],
    out: Path,
    command: str = "",
    seeds: Mapping[str, Sequence[tuple[int, Metrics]]] | None = None,
) -> tuple[Path, Path]:
    """Write report.md, report.html and the plots into `out`; returns the two report paths. `ms`: one run per policy
    (the side-by-side table and the plots); `seeds`: every policy's runs by seed, when there are several (the
    across-seeds and per-seed tables)."""
    out.mkdir(parents=True, exist_ok=True)
    figures = plots(ms, out)
    table, fair = side_by_side(ms), fairness_table(ms)
    multi = seeds is not None and any(len(r) > 1 for r in seeds.values())
    md = [f"# {title}", "", *[f"- {n}" for n in notes]]
    if command:
        md += ["", f"Reproduce: `{command}`"]
    tables: list[tuple[str, Table]] = []
    if seeds is not None and multi:
        n = max(len(r) for r in seeds.values())
        tables.append((f"Across {n} seeds", seeds_table({p: [m for _, m in r] for p, r in seeds.items()})))
        tables.append(("Per seed", per_seed_table(seeds)))
    first = f" (seed {next(iter(seeds.values()))[0][0]})" if seeds is not None and multi else ""
    tables += [(f"Side by side{first}", table), (f"Fairness per budget{first}", fair)]
    for heading, rows in tables:
        md += ["", f"## {heading}", "", markdown_table(rows)]
    md += [""]
    md += ["## Plots", ""] + [f"![{c}]({f})\n\n{c}\n" for f, c in figures]
    md += ["Definitions of every metric: docs/simulation.md.", ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md))
    body = [f"<h1>{html.escape(title)}</h1>", "<ul>", *[f"<li>{html.escape(n)}</li>" for n in notes], "</ul>"]
    if command:
        body.append(f"<p>Reproduce: <code>{html.escape(command)}</code></p>")
    for heading, rows in tables:
        body += [f"<h2>{html.escape(heading)}</h2>", html_table(rows)]
    body += ["<h2>Plots</h2>"] + [
        f'<figure><img src="{f}" alt="{html.escape(c)}"><figcaption>{html.escape(c)}</figcaption></figure>'
        for f, c in figures
    ]
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}"
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}<p>Definitions: docs/simulation.md.</p></body></html>"
    )
    html_path = out / "report.html"
    html_path.write_text(page)
    return md_path, html_path
