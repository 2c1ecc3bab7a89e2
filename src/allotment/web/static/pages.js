// Allotment dashboard, part 2 of 3: the pages (overview, budgets, a budget with its burn-down chart, queue,
// fleet map, a job with its timeline, simulation reports) and their cancel and drain actions.
// Must not: decide rights (the API answers 403; buttons are only hidden for roles that could never use them).
"use strict";

// ---- the run-out forecast (one rule, ledger/forecast.py: the last 24 h's rate, never a date past the period end) -
function runsOut(f, now) {
  if (f.outcome === "exhausted") return "exhausted";
  if (f.outcome === "runs_out") return `${when(f.runs_out_at)} (${relative(f.runs_out_at, now)})`;
  return "lasts the period";
}

function runsOutCell(f, now) {
  return h("td", { class: `runs-out ${f.outcome}`, "data-outcome": f.outcome, "data-runs-out-at": f.runs_out_at ?? "" }, runsOut(f, now));
}

// ---- charge lines (service/charges.py: consecutive charges of a run coalesced; raw memos only in the API) -------
function chargeFormula(c) {
  const amount = credits(c.kind === "charge" ? -c.amount_micro : c.amount_micro);
  if (c.seconds === null || c.gpus === null || c.gpu_rate_micro === null || c.price === null) {
    return c.kind === "charge" ? `charge ${amount} credits` : `${c.kind} ${amount} credits${c.memo ? ` (${c.memo})` : ""}`;
  }
  const price = c.price === 1000 ? "" : ` × ${c.price / 10} %`;
  return `${c.gpus} GPUs × ${span(c.seconds)} × ${credits(c.gpu_rate_micro)} credits/GPU-h${price} = ${amount} credits`;
}

function chargeLinesTable(lines, withBudget) {
  const heads = ["From", "To", ...(withBudget ? ["Budget"] : []), "Job", "Charged", "Credits"];
  return table(heads, lines.map((c) => h("tr", { class: "charge-line", "data-kind": c.kind, "data-entries": c.entries },
    h("td", {}, c.start === null ? "—" : when(c.start)), h("td", {}, when(c.end)),
    withBudget ? h("td", {}, c.budget) : null,
    h("td", {}, c.job_id ? jobLink(c.job_id) : "—"),
    h("td", { class: "formula" }, chargeFormula(c)),
    h("td", { class: `num ${c.amount_micro < 0 ? "neg" : "pos"}` }, credits(c.amount_micro)))));
}

// ---- overview -------------------------------------------------------------------------------------------------
function bar(used, total, extra = 0) {
  const u = total ? (100 * used) / total : 0;
  const x = total ? (100 * extra) / total : 0;
  return h("div", { class: "bar" },
    h("div", { class: "bar-used", style: `width:${u.toFixed(2)}%` }),
    h("div", { class: "bar-off", style: `width:${x.toFixed(2)}%` }));
}

async function overviewPage() {
  const o = await api("/dashboard/overview");
  const st = o.jobs_by_state;
  const util = o.gpus ? o.used_gpus / o.gpus : 0;
  return h("section", { id: "overview" },
    h("h1", {}, "Organisation overview"),
    h("p", { class: "muted" }, `Period ${o.period.id} · ${when(o.now)}`),
    h("div", { class: "cards" },
      h("div", { class: "card", id: "card-fleet" },
        h("h2", {}, "Fleet utilisation"),
        h("p", { class: "big", "data-used": o.used_gpus, "data-gpus": o.gpus }, percent(util)),
        h("p", {}, `${o.used_gpus} of ${o.gpus} GPUs in use · ${o.unavailable_gpus} unavailable (cordoned, draining, down)`),
        bar(o.used_gpus, o.gpus, o.unavailable_gpus)),
      h("div", { class: "card", id: "card-queue" },
        h("h2", {}, "Queue"),
        h("p", { class: "big", id: "queue-depth" }, String(st.pending || 0)),
        h("p", {}, `pending jobs asking for ${o.pending_gpus} GPUs · ${st.running || 0} running`),
        h("a", { href: "#/queue" }, "See why they wait →")),
      h("div", { class: "card wide", id: "card-burn" },
        h("h2", {}, "Budgets burning fastest (last 24 h)"),
        table(["Budget", "Credits / h", "Remaining", "Pace", "Runs out"], o.fastest.map((b) => h("tr", {},
          h("td", {}, budgetLink(b.name)),
          h("td", { class: "num" }, credits(b.forecast.per_hour_micro)),
          h("td", { class: "num" }, credits(b.remaining_micro)),
          h("td", { class: "num" }, b.pace === null ? "—" : `${b.pace.toFixed(2)}×`),
          runsOutCell(b.forecast, o.now)))))),
    h("h2", {}, "Clusters"),
    table(["Cluster", "Nodes", "GPUs", "In use", "Unavailable", ""], o.clusters.map((c) => h("tr", {},
      h("td", {}, c.name), h("td", { class: "num" }, c.nodes), h("td", { class: "num" }, c.gpus),
      h("td", { class: "num" }, c.used_gpus), h("td", { class: "num" }, c.unavailable_gpus),
      h("td", { class: "barcell" }, bar(c.used_gpus, c.gpus, c.unavailable_gpus))))));
}

// ---- budgets --------------------------------------------------------------------------------------------------
function paceCell(b) {
  return h("td", { class: "barcell", title: `${percent(b.used_fraction)} used, ${percent(b.elapsed_fraction)} of the period gone` },
    h("div", { class: `bar pace ${b.pace !== null && b.pace > 1.1 ? "fast" : ""}` },
      h("div", { class: "bar-used", style: `width:${Math.min(100, 100 * b.used_fraction).toFixed(2)}%` }),
      h("div", { class: "marker", style: `left:${(100 * b.elapsed_fraction).toFixed(2)}%` })),
    h("span", { class: "small" }, b.pace === null ? "" : `${b.pace.toFixed(2)}×`));
}

async function budgetsPage() {
  const t = await api("/dashboard/budgets");
  const elapsed = t.budgets.length ? t.budgets[0].elapsed_fraction : 0;
  return h("section", { id: "budgets" },
    h("h1", {}, "Budgets"),
    h("p", { class: "muted" }, `Period ${t.period.id}: ${when(t.period.start)} → ${when(t.period.end)}, ${percent(elapsed)} gone. `,
      "Pace is the share of funds used against the share of the period gone (the line); above 1× a budget runs out early. ",
      "Runs out: at the last 24 h's rate, before the period ends, or it lasts the period."),
    table(["Budget", "Allocation", "Used", "Remaining", "Credits / h", "Pace", "Runs out"], t.budgets.map((b) => h("tr", { "data-budget": b.name },
      h("td", { style: `padding-left:${0.6 + 1.4 * b.depth}em` }, budgetLink(b.name), b.leaf ? "" : h("span", { class: "muted small" }, " (group)")),
      h("td", { class: "num" }, credits(b.allocation_micro)),
      h("td", { class: "num" }, credits(b.used_micro)),
      h("td", { class: "num" }, credits(b.remaining_micro)),
      h("td", { class: "num" }, credits(b.forecast.per_hour_micro)),
      paceCell(b),
      runsOutCell(b.forecast, t.now))), { class: "tree" }));
}

function burnChart(d) {
  const W = 720, H = 260, L = 70, R = 20, T = 16, B = 34;
  const x0 = d.period.start, x1 = d.period.end;
  const top = Math.max(d.funds_micro, ...d.points.map((p) => p.remaining_micro), 1);
  const bottom = Math.min(0, ...d.points.map((p) => p.remaining_micro));
  const X = (t) => L + ((Math.min(Math.max(t, x0), x1) - x0) / (x1 - x0)) * (W - L - R);
  const Y = (v) => T + ((top - v) / (top - bottom)) * (H - T - B);
  const line = (pts) => pts.map(([t, v], i) => `${i ? "L" : "M"}${X(t).toFixed(1)},${Y(v).toFixed(1)}`).join(" ");
  const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const v = bottom + f * (top - bottom);
    return [s("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "grid" }),
      s("text", { x: L - 6, y: Y(v) + 4, class: "tick", "text-anchor": "end" }, credits(v))];
  });
  const days = [];
  const step = Math.max(86400, Math.ceil((x1 - x0) / 86400 / 6) * 86400);
  for (let t = x0; t <= x1; t += step) {
    days.push(s("text", { x: X(t), y: H - 12, class: "tick", "text-anchor": "middle" }, when(t).slice(5, 10)));
  }
  const actual = d.points.map((p) => [p.at, p.remaining_micro]);
  const f = d.forecast;
  let projection = null;
  if (f.outcome === "runs_out") {
    projection = s("path", { d: line([[d.now, d.remaining_micro], [f.runs_out_at, 0]]), class: "projected" });
  } else if (f.outcome === "lasts_period" && f.per_hour_micro > 0 && d.now < x1) {
    projection = s("path", { d: line([[d.now, d.remaining_micro], [x1, f.left_at_end_micro]]), class: "projected" });
  }
  return s("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "chart", id: "burndown", role: "img",
    "aria-label": `Burn-down of ${d.budget}`, "data-remaining-micro": d.remaining_micro,
    "data-points": d.points.length, "data-outcome": f.outcome, "data-runs-out-at": f.runs_out_at ?? "",
  },
  grid, days,
  s("path", { d: line([[x0, d.funds_micro], [x1, 0]]), class: "ideal" }),
  s("path", { d: line(actual), class: "actual" }),
  projection,
  s("line", { x1: X(d.now), x2: X(d.now), y1: T, y2: H - B, class: "now" }),
  f.outcome === "runs_out" ? s("circle", { cx: X(f.runs_out_at), cy: Y(0), r: 4, class: "exhaust" }) : null);
}

async function pagedJobs(params, key, pageSize = 20) {
  const page = await api(`/jobs${query({ ...params, limit: pageSize, cursor: state.cursors[key] })}`);
  return [page, pager(key, page.next_cursor)];
}

function pager(key, next) {
  const first = !state.cursors[key];
  return h("div", { class: "pager" },
    first ? null : h("button", { type: "button", onclick: () => { delete state.cursors[key]; refreshNow(); } }, "← First page"),
    next ? h("button", { type: "button", class: "next-page", onclick: () => { state.cursors[key] = next; refreshNow(); } }, "Next page →") : null);
}

async function budgetPage(name) {
  const q = encodeURIComponent(name);
  const [detail, burn] = await Promise.all([api(`/budgets/${q}`), api(`/dashboard/budgets/${q}/burndown`)]);
  const b = detail.budget;
  const [jobs, jobsPager] = await pagedJobs({ budget: name }, `jobs:${name}`);
  let charges;
  try {
    const [page, p] = await pagedCharges(name);
    charges = h("div", { id: "charges" }, chargeLinesTable(page.items, true), p);
  } catch (e) {
    if (e.status !== 403) throw e;
    charges = h("p", { class: "muted", id: "charges" }, "Charges are visible to the budget's members, its leads, operators and administrators.");
  }
  return h("section", { id: "budget", "data-budget": name },
    h("h1", {}, `Budget ${name}`, b.leaf ? "" : h("span", { class: "muted small" }, " (group)")),
    h("p", {}, b.parent ? ["Part of ", budgetLink(b.parent), ". "] : "", detail.children.length ? ["Sub-budgets: ", detail.children.map((c, i) => [i ? ", " : "", budgetLink(c)]), "."] : ""),
    h("div", { class: "cards" },
      figure("Allocation", credits(b.allocation_micro), "fig-allocation"),
      figure("Used", credits(b.used_micro), "fig-used", { "data-micro": b.used_micro }),
      figure("Remaining", credits(b.remaining_micro), "fig-remaining", { "data-micro": b.remaining_micro }),
      figure("Burn (24 h)", `${credits(detail.forecast.per_hour_micro)} / h`, "fig-burn"),
      figure("Runs out", runsOut(detail.forecast, burn.now), "fig-exhausts",
        { "data-outcome": detail.forecast.outcome, "data-runs-out-at": detail.forecast.runs_out_at ?? "" })),
    h("h2", {}, "Burn-down this period"),
    h("p", { class: "legend" }, h("span", { class: "key actual" }, "remaining"), h("span", { class: "key ideal" }, "even pace"),
      h("span", { class: "key projected" }, "projected at the last 24 h's rate")),
    burnChart(burn),
    h("div", { class: "cols" },
      h("div", {}, h("h2", {}, "Members"), table(["User", "Role"], detail.members.map((m) => h("tr", {}, h("td", {}, m.user), h("td", {}, m.role))))),
      h("div", {}, h("h2", {}, "Capacity windows (GPU-hours so far)"), table(["Window", "Pool", "GPUs", "From", "To", "Booked", "Used", "Unused"], detail.windows.map((w) => h("tr", { class: "window", "data-window": w.id, "data-unused": w.unused_gpu_seconds },
        h("td", {}, w.id), h("td", {}, `${w.cluster}/${w.gpu_type}`), h("td", { class: "num" }, w.gpus), h("td", {}, when(w.start)), h("td", {}, when(w.end)),
        h("td", { class: "num" }, (w.booked_gpu_seconds / 3600).toFixed(2)), h("td", { class: "num" }, (w.used_gpu_seconds / 3600).toFixed(2)),
        h("td", { class: `num unused ${w.unused_gpu_seconds > 0 ? "neg" : ""}` }, (w.unused_gpu_seconds / 3600).toFixed(2))))))),
    h("h2", {}, "Jobs"),
    jobsTable(jobs.items), jobsPager,
    h("h2", {}, "Charges"), charges);
}

async function pagedCharges(name) {
  const key = `charges:${name}`;
  const page = await api(`/dashboard/budgets/${encodeURIComponent(name)}/charge-lines${query({ limit: 500, cursor: state.cursors[key] })}`);
  return [page, pager(key, page.next_cursor)];
}

function figure(label, value, id, attrs = {}) {
  return h("div", { class: "card figure", id }, h("div", { class: "muted small" }, label), h("div", { class: "big", ...attrs }, value));
}

function jobsTable(items) {
  return table(["Job", "Name", "User", "GPUs", "Contract", "State", "Submitted"], items.map((j) => h("tr", { "data-job": j.id },
    h("td", {}, jobLink(j.id)), h("td", {}, j.name), h("td", {}, j.user), h("td", { class: "num" }, j.gpus * j.replicas),
    h("td", {}, j.contract), h("td", {}, stateBadge(j.state)), h("td", {}, when(j.submitted_at)))));
}

// ---- queue ----------------------------------------------------------------------------------------------------
function mayCancel(job) {
  // The API decides (service.principal.may_manage_job); this only hides a button that would get a 403.
  const me = state.me;
  if (me.admin || job.user === me.user) return true;
  for (let b = job.budget; b; b = state.parents[b]) if (["lead", "admin"].includes(me.roles[b])) return true;
  return false;
}

async function cancelJob(id) {
  if (!confirm(`Cancel job ${id}?`)) return;
  try {
    await api(`/jobs/${encodeURIComponent(id)}/cancel`, { method: "POST" });
    flash(`Cancellation of ${id} requested: the engine stops it in its next cycle.`);
    refreshNow();
  } catch (e) { flash(e.message, "error"); }
}

async function queuePage() {
  const { params } = hashPath();
  const budget = params.get("budget") || "", mine = params.get("mine") === "1";
  const key = `queue:${budget}:${mine}`;
  const [page, now] = await Promise.all([
    api(`/dashboard/queue${query({ budget, user: mine ? state.me.user : "", limit: PAGE, cursor: state.cursors[key] })}`),
    serverNow()]);
  const filter = h("form", { class: "filters", id: "queue-filter", onsubmit: (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    location.hash = `#/queue${query({ budget: f.get("budget"), mine: f.get("mine") ? "1" : "" })}`;
  } },
  h("label", {}, "Budget ", h("input", { name: "budget", value: budget, size: 14 })),
  h("label", {}, h("input", { type: "checkbox", name: "mine", checked: mine }), " only mine"),
  h("button", { type: "submit" }, "Filter"));
  return h("section", { id: "queue" },
    h("h1", {}, "Queue"),
    h("p", { class: "muted", id: "queue-total", "data-total": page.total }, `${page.total} pending jobs, oldest first. Each says why it waits, when it should start and what would help.`),
    filter,
    table(["Job", "Budget", "User", "GPUs", "Waiting", "Why it waits", "Estimated start", "What would help", ""], page.items.map((j) => h("tr", { "data-job": j.id },
      h("td", {}, jobLink(j.id), h("div", { class: "small muted" }, j.name)),
      h("td", {}, budgetLink(j.budget)), h("td", {}, j.user),
      h("td", { class: "num" }, j.needed_gpus),
      h("td", {}, span(now - j.submitted_at)),
      h("td", { class: "reason" }, j.blocker ? h("span", { class: "badge blocker", "data-blocker": j.blocker }, j.blocker) : null, " ", j.message),
      h("td", { class: "estimated" }, j.estimated_start ? [when(j.estimated_start), h("div", { class: "small muted" }, relative(j.estimated_start, now))] : "unknown"),
      h("td", { class: "hints" }, j.hints.length ? h("ul", {}, j.hints.map((x) => h("li", {}, x.detail, x.start ? h("span", { class: "muted" }, ` (start ${relative(x.start, now)})`) : ""))) : "—"),
      h("td", {}, mayCancel(j) ? h("button", { type: "button", class: "danger small", onclick: () => cancelJob(j.id) }, "Cancel") : null))), { id: "queue-table" }),
    pager(key, page.next_cursor));
}

// ---- fleet ----------------------------------------------------------------------------------------------------
function tile(n, now) {
  const cells = [];
  for (let i = 0; i < n.gpus; i += 1) cells.push(h("span", { class: i < n.used_gpus ? "gpu used" : "gpu" }));
  const short = n.name.replace(/^.*?-(?=[^-]+-\d+$)/, "");
  return h("button", {
    type: "button", class: `node st-${n.state}${state.node === n.name ? " selected" : ""}`, "data-node": n.name, "data-state": n.state,
    title: `${n.name}: ${n.used_gpus}/${n.gpus} ${n.gpu_type} in use, ${n.state}${n.reason ? ` (${n.reason})` : ""}`,
    onclick: () => { state.node = n.name; refreshNow(); },
  }, h("span", { class: "node-name" }, short), h("span", { class: "gpus" }, cells),
  n.empty_by ? h("span", { class: "empty-by", "data-empty-by": n.empty_by }, `empty ${relative(n.empty_by, now)}`) : null);
}

async function nodeAction(name, action, why) {
  try {
    const result = await api(`/nodes/${encodeURIComponent(name)}/${action}`, { method: "POST", body: { why } });
    if (action === "drain") flash(`Draining ${name}: empty by ${when(result.empty_by)}.`);
    else flash(`${name}: ${result.state}.`);
    refreshNow();
  } catch (e) { flash(e.message, "error"); }
}

async function nodePanel(name, emptyBy, now) {
  const n = await api(`/nodes/${encodeURIComponent(name)}`);
  const operator = state.me.admin || state.me.operator;
  const why = h("input", { id: "node-why", placeholder: "why (e.g. ECC errors)", size: 24 });
  return h("aside", { class: "card panel", id: "node-panel", "data-node": n.name },
    h("h2", {}, n.name, " ", stateBadge(n.state)),
    h("p", {}, `${n.gpus - n.free_gpus} of ${n.gpus} ${n.gpu_type} GPUs in use · cluster ${n.cluster}`),
    n.reason ? h("p", {}, `Reason: ${n.reason}`) : null,
    emptyBy ? h("p", { class: "empty-by-detail", id: "node-empty-by", "data-empty-by": emptyBy }, `Empty by ${when(emptyBy)} (${relative(emptyBy, now)}) at the latest.`) : null,
    table(["Job", "User", "Budget", "GPUs", "Class", "Slice ends"], n.jobs.map((j) => h("tr", {},
      h("td", {}, jobLink(j.job_id)), h("td", {}, j.user), h("td", {}, j.budget), h("td", { class: "num" }, j.gpus),
      h("td", {}, j.began_as && j.began_as !== j.run_class ? `${j.began_as}, past its slice` : j.run_class), h("td", {}, j.kill_at ? `leaving ${relative(j.kill_at, now)}` : j.slice_end ? relative(j.slice_end, now) : "—")))),
    operator ? h("div", { class: "actions" },
      why,
      n.state === "ready" ? h("button", { type: "button", id: "cordon", onclick: () => nodeAction(n.name, "cordon", why.value) }, "Cordon") : null,
      n.state !== "draining" && n.state !== "down" ? h("button", { type: "button", id: "drain", class: "danger", onclick: () => nodeAction(n.name, "drain", why.value) }, "Drain") : null,
      n.state !== "ready" ? h("button", { type: "button", id: "resume", onclick: () => nodeAction(n.name, "resume", why.value) }, "Resume") : null)
      : h("p", { class: "muted small", id: "no-actions" }, "Operators cordon, drain and resume nodes."),
    h("button", { type: "button", class: "link", onclick: () => { state.node = null; refreshNow(); } }, "Close"));
}

async function fleetPage() {
  const f = await api("/dashboard/fleet");
  const byName = new Map(f.clusters.flatMap((c) => c.nodes.map((n) => [n.name, n])));
  const selected = state.node && byName.has(state.node) ? byName.get(state.node) : null;
  const panel = selected ? await nodePanel(selected.name, selected.empty_by, f.now) : null;
  return h("section", { id: "fleet", class: panel ? "with-panel" : "" },
    h("h1", {}, "Fleet"),
    h("p", { class: "legend" }, ["ready", "cordoned", "draining", "down"].map((x) => h("span", { class: `key st-${x}` }, x)),
      h("span", { class: "muted" }, " · each square is a GPU, filled when in use; draining nodes say when they will be empty")),
    h("div", { class: "fleet-body" },
      h("div", { class: "clusters" }, f.clusters.map((c) => h("div", { class: "cluster", "data-cluster": c.name },
        h("h2", {}, c.name, h("span", { class: "muted small" }, ` ${c.used_gpus}/${c.gpus} GPUs in use · ${c.nodes.length} nodes`)),
        h("div", { class: "nodes" }, c.nodes.map((n) => tile(n, f.now)))))),
      panel));
}

// ---- a job ----------------------------------------------------------------------------------------------------
function timeline(job, now) {
  const W = 900, H = 96, L = 10, R = 10;
  const t0 = job.submitted_at;
  const events = job.history;
  const last = ["completed", "failed", "cancelled", "lost"].includes(job.state) && events.length ? events[events.length - 1].at : now;
  const t1 = Math.max(last, t0 + 1);
  const X = (t) => L + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (W - L - R);
  const segs = events.map((e, i) => {
    const end = i + 1 < events.length ? events[i + 1].at : t1;
    return s("g", { class: "seg", "data-state": e.to_state },
      s("rect", { x: X(e.at), y: 14, width: Math.max(2, X(end) - X(e.at)), height: 26, class: `st-${e.to_state}` },
        s("title", {}, `${e.to_state} from ${when(e.at)}: ${e.reason}`)),
      X(end) - X(e.at) > 60 ? s("text", { x: X(e.at) + 4, y: 31, class: "seg-label" }, e.to_state) : null);
  });
  const slices = job.slices.map((sl) => s("rect", { x: X(sl.start), y: 50, width: Math.max(2, X(sl.end) - X(sl.start)), height: 12, class: `slice ${sl.kind}` },
    s("title", {}, `${sl.kind} slice ${when(sl.start)} → ${when(sl.end)}`)));
  return s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart timeline", id: "timeline", "data-events": events.length },
    segs, slices,
    s("text", { x: L, y: 84, class: "tick" }, when(t0)),
    s("text", { x: W - R, y: 84, class: "tick", "text-anchor": "end" }, when(t1)));
}

async function jobPage(id) {
  const q = encodeURIComponent(id);
  const [job, now] = await Promise.all([api(`/jobs/${q}`), serverNow()]);
  let why = null;
  if (job.state === "pending") {
    const w = await api(`/jobs/${q}/why`);
    why = h("div", { class: "card", id: "why" }, h("h2", {}, "Why it waits"),
      h("p", {}, w.blocker ? h("span", { class: "badge blocker" }, w.blocker) : null, " ", w.message),
      h("p", {}, `Estimated start: ${w.estimated_start ? `${when(w.estimated_start)} (${relative(w.estimated_start, now)})` : "unknown"}`),
      w.hints.length ? h("ul", {}, w.hints.map((x) => h("li", {}, x.detail))) : null,
      h("p", { class: "small muted" }, `Budget ${w.standing.budget}: ${credits(w.standing.available_micro)} credits available after committed slices.`));
  }
  const logs = h("pre", { class: "logs", id: "logs" });
  const more = h("button", { type: "button", id: "logs-more", hidden: true }, "More output");
  // A gang's output: every replica's lines labelled "N: ", or one replica's own output (its own byte offsets).
  const replicaChoice = job.replicas > 1 ? h("select", { id: "logs-replica", "aria-label": "Which replica's output" },
    h("option", { value: "" }, "All replicas (lines labelled N:)"),
    Array.from({ length: job.replicas }, (_, r) => h("option", { value: String(r) }, `Replica ${r}`))) : null;
  let offset = 0;
  const readLogs = async () => {
    try {
      const replica = replicaChoice ? replicaChoice.value : "";
      const chunk = await api(`/jobs/${q}/logs${query({ offset, replica })}`);
      if (offset === 0) logs.textContent = "";
      logs.append(chunk.data);
      offset = chunk.next_offset;
      more.hidden = chunk.complete || chunk.next_offset === chunk.offset;
      if (!logs.textContent) logs.textContent = chunk.complete ? "(no output)" : "(no output yet)";
    } catch (e) { logs.textContent = e.message; }
  };
  more.addEventListener("click", readLogs);
  if (replicaChoice) replicaChoice.addEventListener("change", () => { offset = 0; readLogs(); });
  await readLogs();
  const final = ["completed", "failed", "cancelled", "lost"].includes(job.state);
  return h("section", { id: "job", "data-job": job.id, "data-state": job.state },
    h("h1", {}, `Job ${job.id} `, stateBadge(job.state)),
    h("p", {}, `${job.name} · ${job.user} · `, budgetLink(job.budget), ` · ${job.replicas} × ${job.gpus} GPUs · ${job.contract}${job.contract === "guaranteed" ? `, slice ${span(job.slice_seconds)}` : ""} · ${job.kind}`),
    h("p", { class: "mono small" }, job.command.join(" ")),
    !final && mayCancel(job) ? h("button", { type: "button", class: "danger", id: "cancel-job", onclick: () => cancelJob(job.id) }, "Cancel job") : null,
    why,
    h("h2", {}, "Timeline"), timeline(job, now),
    h("div", { class: "cols" },
      h("div", {}, h("h2", {}, "State history"), table(["When", "State", "Reason"], job.history.map((e) => h("tr", {}, h("td", {}, when(e.at)), h("td", {}, stateBadge(e.to_state)), h("td", {}, e.reason))))),
      h("div", {}, h("h2", {}, "Slices"), table(["Run", "From", "To", "Kind"], job.slices.map((x) => h("tr", {}, h("td", { class: "mono small" }, x.run_id), h("td", {}, when(x.start)), h("td", {}, when(x.end)), h("td", {}, x.kind)))))),
    h("h2", {}, "Runs"),
    table(["Attempt", "Started", "Ended", "Class", "Nodes", "Slice end", "Exit", "Why it ended"], job.runs.map((r) => h("tr", {},
      h("td", { class: "num" }, r.attempt), h("td", {}, when(r.started_at)), h("td", {}, when(r.ended_at)),
      h("td", { class: "run-class", "data-began-as": r.began_as }, r.began_as !== r.run_class ? `${r.began_as}; ${r.run_class} since ${when(r.class_since)}` : r.run_class),
      h("td", { class: "small" }, r.placement.map((p) => `${p.node}[${p.gpus.join(",")}]`).join(" ")),
      h("td", { class: "slice-end" }, r.slice_end ? `${when(r.slice_end)}${r.renewals ? `, renewed ${r.renewals}×` : ""}${r.began_as !== r.run_class ? ", not renewed" : ""}` : "—"),
      h("td", { class: "num" }, r.exit_code ?? "—"), h("td", {}, r.end_reason || r.preempt_reason || "")))),
    h("h2", {}, `Charges (net ${credits(job.charged_micro)} credits)`),
    h("div", { id: "job-charges" }, chargeLinesTable(job.charge_lines, false)),
    h("h2", {}, "Output"), replicaChoice, logs, more);
}

// ---- simulation reports ---------------------------------------------------------------------------------------
async function reportsPage() {
  const reports = await api("/reports/simulations");
  return h("section", { id: "reports" },
    h("h1", {}, "Simulation reports"),
    h("p", { class: "muted" }, "Reports written by `allot simulate --out <data dir>/reports/<name>`, newest first."),
    table(["Report", "Files", "Written"], reports.map((r) => h("tr", { "data-report": r.name },
      h("td", {}, r.name || "(top level)"),
      h("td", {}, r.files.map((f, i) => [i ? " · " : "", h("a", { href: `#/reports/view/${encodeURIComponent(r.name ? `${r.name}/${f}` : f)}` }, f)])),
      h("td", {}, when(r.modified))))));
}

function reportUrl(path) {
  return `/reports/simulations/${path.split("/").map(encodeURIComponent).join("/")}`;
}

async function inlineImages(html, folder) {
  // The report's plots are files beside it, behind the API's token: fetch each and inline it as a data: URL, so the
  // sandboxed frame (an opaque origin, without the token) can show them.
  const doc = new DOMParser().parseFromString(html, "text/html");
  await Promise.all([...doc.querySelectorAll("img[src]")].map(async (img) => {
    const src = img.getAttribute("src");
    if (/^[a-z][a-z0-9+.-]*:|^\/|^#/i.test(src)) return;
    try {
      const response = await fetch(reportUrl(folder ? `${folder}/${src}` : src), { headers: { Authorization: `Bearer ${state.token}` } });
      if (!response.ok) return;
      const blob = await response.blob();
      img.setAttribute("src", await new Promise((resolve) => {
        const reader = new FileReader();
        reader.onload = () => resolve(reader.result);
        reader.readAsDataURL(blob);
      }));
    } catch { /* the image stays unresolved */ }
  }));
  return `<!doctype html>${doc.documentElement.outerHTML}`;
}

async function reportPage(path) {
  const text = await api(reportUrl(path), { raw: true });
  const folder = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  const body = path.endsWith(".html")
    ? h("iframe", { class: "report", id: "report-frame", sandbox: "allow-scripts", srcdoc: await inlineImages(text, folder), title: path })
    : h("pre", { class: "report-md", id: "report-text" }, text);
  return h("section", { id: "report", "data-hold": true }, h("p", {}, h("a", { href: "#/reports" }, "← All reports")), h("h1", {}, path), body);
}
