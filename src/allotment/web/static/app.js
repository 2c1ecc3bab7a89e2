// Allotment dashboard, part 3 of 3: the login page (token kept in localStorage), hash routing and auto-refresh.
// Must not: hold page content (pages.js) or talk HTTP other than through api() (lib.js).
"use strict";

// ---- session --------------------------------------------------------------------------------------------------
function logout(message) {
  localStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.me = null;
  if (message) flash(message, "error");
  route();
}

function renderLogin(view) {
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  const token = h("input", { id: "login-token", type: "password", autocomplete: "off", placeholder: "allot_…" });
  const user = h("input", { id: "login-user", type: "text", autocomplete: "username", placeholder: "user name" });
  const error = h("p", { class: "error", id: "login-error" });
  const form = h("form", { class: "card login", id: "login-form" },
    h("h1", {}, "Log in to Allotment"),
    h("label", {}, "API token", token),
    h("p", { class: "muted small" }, "`allot login --json` prints one (its token), or ask an administrator; it stays in this browser until you log out."),
    h("details", {}, h("summary", {}, "Local server with open login"),
      h("label", {}, "User", user),
      h("p", { class: "muted small" }, "Only a server started with --open-login issues tokens without credentials.")),
    error,
    h("button", { type: "submit", id: "login-submit" }, "Log in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    try {
      let secret = token.value.trim();
      if (!secret) {
        if (!user.value.trim()) throw new Error("give an API token (or a user name on an open-login server)");
        const made = await api("/auth/login", { method: "POST", body: { user: user.value.trim(), name: "dashboard" } });
        secret = made.secret;
      }
      state.token = secret;
      await api("/auth/me");
      state.me = null;
      localStorage.setItem(TOKEN_KEY, secret);
      route();
    } catch (e) {
      state.token = null;
      error.textContent = e.status === 401 ? "That token is not valid (unknown, expired or revoked)." : e.message;
    }
  });
  view.replaceChildren(form);
}

function roleText(me) {
  if (me.admin) return "administrator";
  if (me.operator) return "operator";
  const roles = Object.entries(me.roles).map(([b, r]) => `${r} of ${b}`);
  return roles.join(", ") || "no budget";
}

// ---- routing --------------------------------------------------------------------------------------------------
const PAGES = [
  [/^\/?$/, "overview", () => overviewPage()],
  [/^\/budgets\/?$/, "budgets", () => budgetsPage()],
  [/^\/budgets\/([^/]+)$/, "budgets", (m) => budgetPage(decodeURIComponent(m[1]))],
  [/^\/queue\/?$/, "queue", () => queuePage()],
  [/^\/fleet\/?$/, "fleet", () => fleetPage()],
  [/^\/jobs\/([^/]+)$/, "queue", (m) => jobPage(decodeURIComponent(m[1]))],
  [/^\/reports\/?$/, "reports", () => reportsPage()],
  [/^\/reports\/view\/(.*)$/, "reports", (m) => reportPage(decodeURIComponent(m[1]))],
];

function hashPath() {
  const raw = location.hash.replace(/^#/, "");
  const [path, q] = raw.split("?");
  return { path: path || "/", params: new URLSearchParams(q || "") };
}

async function route() {
  const view = document.getElementById("view");
  const mine = ++state.shown;
  clearInterval(state.timer);
  if (!state.token) { renderLogin(view); return; }
  try {
    if (!state.me) {
      state.me = await api("/auth/me");
      const tree = await api("/budgets");
      state.parents = Object.fromEntries(tree.budgets.map((b) => [b.name, b.parent]));
    }
  } catch (e) {
    if (e.status !== 401) view.replaceChildren(h("p", { class: "error" }, e.message));
    return;
  }
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("who").replaceChildren(
    h("strong", { id: "me-user" }, state.me.user), " · ", h("span", { class: "muted" }, roleText(state.me)));
  const { path } = hashPath();
  const found = PAGES.map(([re, nav, fn]) => [path.match(re), nav, fn]).find(([m]) => m);
  if (!found) { view.replaceChildren(h("p", { class: "error" }, `No page ${path}`)); return; }
  const [match, nav, fn] = found;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.nav === nav);
  const draw = async (first) => {
    if (state.busy && !first) return;
    state.busy = true;
    try {
      const content = await fn(match);
      if (mine !== state.shown) return; // the user went elsewhere while this page loaded
      // Replace the page only when it changed, so what the user is about to click stays where it is.
      if (first || !view.firstElementChild || view.firstElementChild.outerHTML !== content.outerHTML) {
        view.replaceChildren(content);
      }
      view.dataset.loadedAt = String(Date.now());
    } catch (e) {
      if (e.status !== 401) view.replaceChildren(h("p", { class: "error", id: "page-error" }, e.message));
    } finally {
      state.busy = false;
    }
  };
  if (document.activeElement && view.contains(document.activeElement)) document.activeElement.blur();
  await draw(true);
  if (mine !== state.shown) return; // a newer route() owns the view and the refresh timer
  state.timer = setInterval(() => {
    const focused = document.activeElement && view.contains(document.activeElement) && document.activeElement.tagName !== "BODY";
    if (!document.hidden && !focused && !state.pointing && !view.querySelector("[data-hold]")) draw(false);
  }, REFRESH_MS);
}

function refreshNow() { route(); }

async function serverNow() {
  // The server's clock (the engine's), which a simulated or test deployment may run apart from the browser's.
  return (await api("/health")).time;
}

// ---- start ----------------------------------------------------------------------------------------------------
document.addEventListener("pointerover", (ev) => {
  state.pointing = Boolean(ev.target.closest && ev.target.closest("#view button, #view a, #view input, #view summary"));
});
window.addEventListener("hashchange", () => { state.node = null; state.cursors = {}; route(); });
document.getElementById("logout").addEventListener("click", () => logout());
route();
