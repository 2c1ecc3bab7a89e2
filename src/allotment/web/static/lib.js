// Allotment dashboard, part 1 of 3: the API client, DOM and SVG builders, formatting and shared widgets.
// Owns: talking to the API with the bearer token; building elements from text only (never HTML strings).
// Must not: know about pages or routes.
"use strict";

const TOKEN_KEY = "allot.token";
const REFRESH_MS = 5000;
const PAGE = 50;
const state = {
  token: localStorage.getItem(TOKEN_KEY), me: null, parents: {}, timer: null, busy: false, cursors: {}, node: null,
  pointing: false, // the pointer rests on something clickable: auto-refresh waits, so the click lands
  shown: 0, // counts route() calls: a page still loading when the user moved on must not replace the newer one
};

// ---- API ------------------------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, { method = "GET", body, raw = false } = {}) {
  const headers = { Accept: raw ? "*/*" : "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) {
    let parsed;
    try { parsed = JSON.parse(text); } catch { parsed = { message: text || response.statusText }; }
    if (response.status === 401 && state.me) {
      logout("Your token is no longer valid: log in again.");
    }
    throw new ApiError(response.status, parsed);
  }
  return raw ? text : JSON.parse(text);
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.append(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

// ---- DOM helpers ----------------------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function table(headers, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, "nothing here"))));
}

function flash(message, kind = "info") {
  const box = document.getElementById("flash");
  box.replaceChildren(h("div", { class: `flash ${kind}` }, message));
  if (kind !== "error") setTimeout(() => { if (box.textContent === message) box.replaceChildren(); }, 6000);
}

// ---- formatting -----------------------------------------------------------------------------------------------
function credits(micro) {
  const v = micro / 1e6;
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 1 || v === 0 ? 2 : 4;
  return v.toLocaleString("en-GB", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function pad(n) { return String(n).padStart(2, "0"); }

function when(t) {
  if (t === null || t === undefined) return "—";
  const d = new Date(t * 1000);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
}

function span(seconds) {
  const s_ = Math.max(0, Math.round(seconds));
  if (s_ < 60) return `${s_}s`;
  const m = Math.floor(s_ / 60);
  if (m < 60) return `${m}m`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${m % 60}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

function relative(t, now) {
  if (t === null || t === undefined) return "";
  return t >= now ? `in ${span(t - now)}` : `${span(now - t)} ago`;
}

function percent(x) { return `${Math.round(x * 100)}%`; }

function stateBadge(st) { return h("span", { class: `badge st-${st}` }, st); }
function jobLink(id) { return h("a", { href: `#/jobs/${encodeURIComponent(id)}`, class: "mono" }, id); }
function budgetLink(name) { return h("a", { href: `#/budgets/${encodeURIComponent(name)}` }, name); }
