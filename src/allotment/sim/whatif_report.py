"""The what-if report: the current plan, the proposed plan and the recorded history side by side, per leaf budget.

Owns: each budget's expected share of the GPU-time delivered over the horizon (the history's span) under both plans
and its change, its share in the recorded history, waits and jobs finished under the plan, and when it runs out — the
date its balance reaches zero, or that it cannot fund its waiting work (its balance at the end is below the cheapest
slice its waiting jobs ask for), labelled when the date falls after the plan's period — in human units; the burn-down
plot (each budget's balance under both plans); and writing report.md and report.html.

Must not: run simulations (whatif.py) or compute anything the metrics module owns (waits come from metrics).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from allotment.sim import metrics, report
from allotment.sim.results import SimResult


def human(seconds: float) -> str:
    """45 s, 12 min, 3.4 h, 2.1 d."""
    if math.isnan(seconds):
        return "–"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def shares(result: SimResult) -> dict[str, float]:
    """Budget → its part of the GPU-time delivered in the replay's horizon."""
    got: dict[str, float] = {}
    budget_of = {j.id: j.budget for j in result.jobs}
    for r in result.runs:
        end = min(r.end if r.end is not None else result.duration, result.duration)
        got[budget_of[r.job_id]] = got.get(budget_of[r.job_id], 0.0) + r.gpus * max(end - r.start, 0)
    total = sum(got.values())
    return {b: v / total for b, v in got.items()} if total else {}


@dataclass(frozen=True, slots=True)
class Replays:
    current: SimResult
    proposed: SimResult
    recorded: Mapping[str, float]
    """Budget → GPU-seconds held in the recorded history."""
    slices: Mapping[str, int]
    """Budget → the cheapest slice its waiting work asks for under the plan (credit-microunits)."""
    start: int
    period_end: int


def _runs_out(r: Replays, budget: str, period: str) -> str:
    p = r.proposed
    at = p.exhausted.get(budget)
    if at is None:
        waiting = [j for j in p.jobs if j.budget == budget and j.first_start is None]
        balance = p.balances.get(f"{budget}@{period}", 0)
        if waiting and balance < r.slices.get(budget, 0):
            return "cannot fund its waiting work"
        return "–"
    when = r.start + at
    text = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M")
    return f"{text} (after the period)" if when >= r.period_end else text


def rows(r: Replays, period: str) -> list[list[str]]:
    cur, new = shares(r.current), shares(r.proposed)
    recorded_total = sum(r.recorded.values()) or 1.0
    table = [
        [
            "budget",
            "allocation: current → plan (credits)",
            "expected share: current → plan",
            "change",
            "recorded share",
            "wait under the plan (p50 / p95)",
            "jobs finished under the plan",
            "runs out (plan)",
        ]
    ]
    for b in sorted(r.proposed.allocations):
        js = [j for j in r.proposed.jobs if j.budget == b]
        waits = metrics.Quantiles.of(
            (j.first_start if j.first_start is not None else r.proposed.duration) - j.submit for j in js
        )
        a0, a1 = r.current.allocations.get(b), r.proposed.allocations[b]
        alloc = f"{a1 / 1e6:,.0f}" if a0 in (None, a1) else f"{(a0 or 0) / 1e6:,.0f} → {a1 / 1e6:,.0f}"
        c, n = 100 * cur.get(b, 0.0), 100 * new.get(b, 0.0)
        table.append(
            [
                b,
                alloc,
                f"{c:.1f} % → {n:.1f} %",
                f"{n - c:+.1f} pp",
                f"{100 * r.recorded.get(b, 0.0) / recorded_total:.1f} %",
                "–" if waits.n == 0 else f"{human(waits.p50)} / {human(waits.p95)}",
                f"{sum(1 for j in js if j.end is not None)} / {len(js)}",
                _runs_out(r, b, period),
            ]
        )
    return table


MOST_PLOTTED = 12


def burn_plot(r: Replays, out: Path) -> Path | None:
    """Small multiples: each budget's balance over the horizon under the current plan (dashed) and the proposed one
    (solid), the budgets whose allocation or spending changed most first; None when no budget spent anything."""
    budgets = sorted(
        set(r.current.burn) | set(r.proposed.burn),
        key=lambda b: (
            -abs(r.proposed.allocations.get(b, 0) - r.current.allocations.get(b, 0))
            - abs(_spent(r.proposed, b) - _spent(r.current, b)),
            b,
        ),
    )[:MOST_PLOTTED]
    if not budgets:
        return None
    cols = min(4, len(budgets))
    rows_n = -(-len(budgets) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 2.4 * rows_n), squeeze=False)
    cells = list(axes.flat)
    for ax, b in zip(cells, budgets, strict=False):
        for result, style, label in ((r.current, "--", "current"), (r.proposed, "-", "plan")):
            series = result.burn.get(b, ())
            if series:
                xs = [t / 3600 for t, _ in series] + [result.duration / 3600]
                ys = [v / 1e6 for _, v in series] + [series[-1][1] / 1e6]
                ax.step(xs, ys, style, where="post", label=label)
        ax.set_title(b, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.axhline(0, color="grey", linewidth=0.5)
    for ax in cells[len(budgets) :]:
        ax.axis("off")
    cells[0].legend(fontsize=6)
    fig.supxlabel("hours from the period's start", fontsize=8)
    fig.supylabel("balance, credits", fontsize=8)
    fig.tight_layout()
    path = out / "burn-down.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _spent(result: SimResult, budget: str) -> float:
    series = result.burn.get(budget, ())
    return float(series[0][1] - series[-1][1]) if series else 0.0


CAPTION = "Balance over the horizon per budget: current plan dashed, proposed plan solid"


def write(
    title: str, notes: Sequence[str], table: list[list[str]], out: Path, plot: Path | None = None
) -> tuple[Path, Path]:
    legend = [
        "Expected share: the budget's part of the GPU-time delivered over the horizon, replayed under the current",
        "organisation and under the plan (same jobs, same seed); change in percentage points. Recorded share: its part",
        "of the GPU-time its jobs held in the history. Runs out: when its balance first reaches zero, or that at the",
        "end it cannot pay for the cheapest slice its waiting jobs ask for (guaranteed work then waits; opportunistic",
        "work may go on).",
    ]
    md = [f"# {title}", "", *[f"- {n}" for n in notes], "", report.markdown_table(table), "", *legend, ""]
    if plot is not None:
        md += [f"![{CAPTION}]({plot.name})", "", CAPTION, ""]
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text("\n".join(md))
    figure = (
        f'<figure><img src="{plot.name}" alt="{CAPTION}"><figcaption>{CAPTION}</figcaption></figure>' if plot else ""
    )
    body = f"<h1>{html.escape(title)}</h1><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
    html_path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
        f"{body}{report.html_table(table)}<p>{html.escape(' '.join(legend))}</p>{figure}</body></html>"
    )
    return md_path, html_path
