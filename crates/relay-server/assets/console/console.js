// The Relay console: account, notes, usage, requests, API keys and (for admins) users and agent
// settings, over the public JSON API.
// The token lives in sessionStorage and goes out as a Bearer header: no cookies, so a foreign
// page cannot make the browser act for the user. No framework and no build step: the file the
// binary embeds is the file that runs.
"use strict";

const TOKEN_KEY = "relay.token";
const NOTES_PAGE = 50;
const LIST_MAX = 200; // the list endpoint's own maximum
const TABS = ["notes", "usage", "requests", "keys", "users", "settings"];

const $ = (id) => document.getElementById(id);
const openMode = document.body.dataset.mode === "open";
const state = { me: null, notesPage: 0, notesTotal: 0, allNotes: null, usersPage: 0, usersTotal: 0 };

class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

async function api(method, path, body) {
  const headers = { accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.authorization = "Bearer " + token;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new ApiError(res.status, data.error || "", data.message || res.statusText, res.headers.get("retry-after"));
  }
  return data;
}

// API errors in words a person can act on; the server's own message otherwise.
function describe(err) {
  if (!(err instanceof ApiError)) return "Cannot reach the server: " + err.message;
  switch (err.code) {
    case "invalid_credentials": return "Wrong email or password.";
    case "rate_limited": return "Too many attempts: locked for " + (err.retryAfter || "a few") + " seconds. Try again after that.";
    case "signup_closed": return "Sign-ups are closed on this server; ask an operator for an account.";
    case "email_taken": return "An account with this email already exists: sign in instead.";
    case "unauthorized": return "Your session has ended: sign in again.";
    case "forbidden": return "You are not allowed to do that.";
    case "store_unavailable": return "The store is unavailable right now; try again shortly.";
    default: return err.message;
  }
}

function showError(err) {
  const box = $("error");
  if (!err) { box.hidden = true; box.textContent = ""; return; }
  box.textContent = typeof err === "string" ? err : describe(err);
  box.hidden = false;
  if (err instanceof ApiError && err.code === "unauthorized" && !openMode) signedOut();
}

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

/// A table cell that carries its column's name, which the narrow layout shows above the value.
function cell(tag, label, text, props) {
  const c = el(tag, { textContent: text, ...(props || {}) });
  c.dataset.label = label;
  return c;
}

function confirmDialog(text, okLabel) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = okLabel;
    dialog.returnValue = "";
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

// ---- sign in and out

function signedOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.me = null;
  $("app").hidden = true;
  $("signout").hidden = true;
  $("who").textContent = "";
  $("signin").hidden = false;
  $("password").value = "";
  $("email").focus();
}

async function credentials(path) {
  const form = $("signin-form");
  if (!form.reportValidity()) return;
  showError(null);
  try {
    const session = await api("POST", path, { email: $("email").value, password: $("password").value });
    sessionStorage.setItem(TOKEN_KEY, session.token);
    $("password").value = "";
    await start();
  } catch (err) {
    showError(err);
  }
}

async function signOut() {
  try {
    await api("POST", "/v1/auth/signout", {});
  } catch (err) {
    // The token is dropped either way; an unreachable server cannot keep it alive in this tab.
  }
  showError(null);
  signedOut();
}

// ---- account

function quota(n) { return n < 0 ? "unlimited" : String(n); }

/// A reset time (Unix seconds or an ISO string) as `2026-12-01 00:00 UTC`.
function when(t) {
  const d = new Date(typeof t === "number" ? t * 1000 : t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

/// The start of the next calendar month (UTC), when budgets counted per month start again.
function nextMonth() {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
}

const has = (o, key) => Object.prototype.hasOwnProperty.call(o, key);
const dollars = (n) => "$" + Number(n).toFixed(2);

async function loadAccount() {
  const me = await api("GET", "/v1/me");
  state.me = me;
  $("acct-email").textContent = me.email || "local (open mode)";
  $("acct-role").textContent = me.role;
  $("acct-used").textContent = String(me.used);
  $("acct-limit").textContent = quota(me.limit);
  $("acct-remaining").textContent = quota(me.remaining);
  // Units count per month or over the account's life, as the server says; older servers say nothing.
  const unitsPeriod = has(me, "quota_resets_at");
  $("acct-units-reset-box").hidden = !unitsPeriod;
  $("acct-units-period").textContent = unitsPeriod ? (me.quota_resets_at === null ? "over the account's life" : "this month (UTC)") : "";
  if (unitsPeriod) $("acct-units-reset").textContent = me.quota_resets_at === null ? "never" : when(me.quota_resets_at);
  $("acct-tokens-used").textContent = Number(me.tokens_used || 0).toLocaleString("en-US");
  $("acct-tokens-budget").textContent = me.token_budget < 0 ? "unlimited" : Number(me.token_budget).toLocaleString("en-US");
  $("acct-tokens-remaining").textContent = me.tokens_remaining < 0 ? "unlimited" : Number(me.tokens_remaining).toLocaleString("en-US");
  $("acct-tokens-reset").textContent = when(me.tokens_resets_at || me.budget_resets_at || nextMonth());
  const spend = has(me, "spend_budget_usd");
  $("acct-spend-box").hidden = !spend;
  if (spend) {
    const left = me.spend_budget_usd < 0 ? -1 : Math.max(0, me.spend_budget_usd - (me.spend_used_usd || 0));
    $("acct-spend-used").textContent = dollars(me.spend_used_usd || 0);
    $("acct-spend-budget").textContent = me.spend_budget_usd < 0 ? "unlimited" : dollars(me.spend_budget_usd);
    $("acct-spend-remaining").textContent = left < 0 ? "unlimited" : dollars(left);
    $("acct-spend-reset").textContent = when(me.spend_resets_at || nextMonth());
  }
  $("who").textContent = me.auth ? me.email : "local";
  $("tab-users").hidden = me.role !== "admin";
  $("tab-settings").hidden = me.role !== "admin";
  $("tab-keys").hidden = !me.auth;
  return me;
}

// ---- notes: newest first, NOTES_PAGE a page; the list endpoint answers oldest first, so a page is
// read from the end and reversed.

function projectFilter() {
  const p = $("project").value.trim();
  return p ? "&project_id=" + encodeURIComponent(p) : "";
}

async function fetchAllNotes() {
  const all = [];
  for (let offset = 0; ; offset += LIST_MAX) {
    const page = await api("GET", `/v1/memory/list?limit=${LIST_MAX}&offset=${offset}${projectFilter()}`);
    all.push(...page.items);
    if (page.items.length < LIST_MAX || all.length >= page.total) break;
  }
  return all.reverse();
}

async function loadNotes() {
  const query = $("search").value.trim().toLowerCase();
  let items;
  let total;
  if (query) {
    if (!state.allNotes) state.allNotes = await fetchAllNotes();
    const hits = state.allNotes.filter((n) => n.note.toLowerCase().includes(query));
    total = hits.length;
    items = hits.slice(state.notesPage * NOTES_PAGE, (state.notesPage + 1) * NOTES_PAGE);
  } else {
    total = (await api("GET", "/v1/memory/list?limit=0" + projectFilter())).total;
    const end = total - state.notesPage * NOTES_PAGE;
    const start = Math.max(0, end - NOTES_PAGE);
    items = end > 0
      ? (await api("GET", `/v1/memory/list?limit=${end - start}&offset=${start}${projectFilter()}`)).items.reverse()
      : [];
  }
  state.notesTotal = total;
  renderNotes(items, query);
}

function renderNotes(items, query) {
  const list = $("note-list");
  list.replaceChildren(...items.map(noteItem));
  const pages = Math.max(1, Math.ceil(state.notesTotal / NOTES_PAGE));
  $("notes-summary").textContent = state.notesTotal === 0
    ? (query ? "No note matches the search." : "No notes yet.")
    : `${state.notesTotal} note${state.notesTotal === 1 ? "" : "s"}${query ? " match" : ""}, newest first`;
  $("notes-empty").hidden = state.notesTotal !== 0 || Boolean(query);
  $("notes-page").textContent = `Page ${state.notesPage + 1} of ${pages}`;
  $("notes-prev").disabled = state.notesPage === 0;
  $("notes-next").disabled = state.notesPage + 1 >= pages;
  knowProjects(items.map((n) => n.project_id));
}

/// Offers these projects in the Project lists (the filter's and the new note's).
function knowProjects(ids) {
  const projects = $("projects");
  const known = new Set([...projects.options].map((o) => o.value));
  for (const id of ids) {
    if (id && !known.has(id)) { projects.append(el("option", { value: id })); known.add(id); }
  }
  if (!$("new-project").value && projects.options.length) $("new-project").value = projects.options[0].value;
}

/// The caller's projects as the ledger knows them (the projects its agents worked in), beside
/// those of the notes on screen.
async function loadProjects() {
  const report = await api("GET", "/v1/usage?group_by=project");
  knowProjects(report.rows.map((r) => r.key));
}

async function addNote() {
  const form = $("add-note");
  if (!form.reportValidity()) return;
  const project = $("new-project").value.trim();
  await api("POST", "/v1/memory/remember", { project_id: project, note: $("new-note").value });
  $("new-note").value = "";
  knowProjects([project]);
  state.notesPage = 0;
  await refreshNotes();
}

function noteItem(n) {
  const text = el("p", { className: "note-text", textContent: n.note });
  const meta = el("div", { className: "meta" },
    el("span", { className: "note-project", textContent: "project " + n.project_id }),
    el("span", { className: "note-kind", textContent: n.mem_type }),
    el("span", { className: "note-author", textContent: "by " + n.author }),
    el("time", { dateTime: new Date(n.created_at * 1000).toISOString(), textContent: new Date(n.created_at * 1000).toLocaleString() }));
  const edit = el("button", { type: "button", textContent: "Edit" });
  const del = el("button", { type: "button", className: "danger", textContent: "Delete" });
  const actions = el("div", { className: "row" }, edit, del);
  const li = el("li", { className: "note" }, text, meta, actions);
  li.dataset.id = n.id;
  edit.addEventListener("click", () => {
    const area = el("textarea", { value: n.note, rows: 3 });
    area.setAttribute("aria-label", "Note text");
    const save = el("button", { type: "button", className: "primary", textContent: "Save" });
    const cancel = el("button", { type: "button", textContent: "Cancel" });
    text.replaceWith(area);
    actions.replaceChildren(save, cancel);
    area.focus();
    cancel.addEventListener("click", () => refreshNotes());
    save.addEventListener("click", () => act(async () => {
      await api("PATCH", "/v1/memory/" + encodeURIComponent(n.id), { content: area.value });
      await refreshNotes();
    }));
  });
  del.addEventListener("click", () => act(async () => {
    await api("DELETE", "/v1/memory/" + encodeURIComponent(n.id));
    await refreshNotes();
  }));
  return li;
}

async function refreshNotes() {
  state.allNotes = null;
  await loadNotes();
}

async function deleteAll() {
  const ok = await confirmDialog("Delete every note you have, in every project? This cannot be undone.", "Delete all");
  if (!ok) return;
  await act(async () => {
    await api("DELETE", "/v1/memory/all");
    state.notesPage = 0;
    await refreshNotes();
  });
}

// ---- wiring

async function act(fn) {
  showError(null);
  try { await fn(); } catch (err) { showError(err); }
}

function showTab(name) {
  for (const tab of TABS) {
    $(tab).hidden = name !== tab;
    $("tab-" + tab).setAttribute("aria-pressed", String(name === tab));
  }
  // Each view's loader lives in its own file: usage.js, requests.js, keys.js, admin.js.
  const load = { usage: loadUsage, requests: loadRequests, keys: loadKeys, users: loadUsers, settings: loadSettings };
  return (load[name] || loadNotes)();
}

async function start() {
  $("signin").hidden = true;
  await loadAccount();
  $("signout").hidden = openMode;
  $("app").hidden = false;
  state.notesPage = 0;
  state.allNotes = null;
  await showTab("notes");
  await loadProjects();
}

let searchTimer = 0;

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", (e) => { e.preventDefault(); credentials("/v1/auth/signin"); });
  $("signup").hidden = document.body.dataset.signup !== "open";
  $("signup").addEventListener("click", () => credentials("/v1/auth/signup"));
  $("signout").addEventListener("click", signOut);
  $("tab-notes").addEventListener("click", () => act(() => showTab("notes")));
  $("tab-users").addEventListener("click", () => act(() => { state.usersPage = 0; return showTab("users"); }));
  $("tab-usage").addEventListener("click", () => act(() => showTab("usage")));
  $("tab-keys").addEventListener("click", () => act(() => showTab("keys")));
  $("tab-requests").addEventListener("click", () => act(() => { restartRequests(); return showTab("requests"); }));
  $("tab-settings").addEventListener("click", () => act(() => showTab("settings")));
  $("add-note").addEventListener("submit", (e) => { e.preventDefault(); act(addNote); });
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { state.notesPage = 0; act(loadNotes); }, 150);
  });
  $("project").addEventListener("change", () => { state.notesPage = 0; act(refreshNotes); });
  $("notes-prev").addEventListener("click", () => { state.notesPage -= 1; act(loadNotes); });
  $("notes-next").addEventListener("click", () => { state.notesPage += 1; act(loadNotes); });
  $("delete-all").addEventListener("click", deleteAll);
  // Open mode has no accounts: the console opens as `local` without a form. Otherwise a token
  // kept in this tab's sessionStorage resumes the session; without one, the form.
  if (openMode || sessionStorage.getItem(TOKEN_KEY)) {
    act(start);
  } else {
    signedOut();
  }
});
