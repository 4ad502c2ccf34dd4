// The Relay console: account, notes and (for admins) users, over the public JSON API.
// The token lives in sessionStorage and goes out as a Bearer header: no cookies, so a foreign
// page cannot make the browser act for the user. No framework and no build step: the file the
// binary embeds is the file that runs.
"use strict";

const TOKEN_KEY = "relay.token";
const NOTES_PAGE = 50;
const LIST_MAX = 200; // the list endpoint's own maximum
const USERS_PAGE = 50;

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

async function loadAccount() {
  const me = await api("GET", "/v1/me");
  state.me = me;
  $("acct-email").textContent = me.email || "local (open mode)";
  $("acct-role").textContent = me.role;
  $("acct-used").textContent = String(me.used);
  $("acct-limit").textContent = quota(me.limit);
  $("acct-remaining").textContent = quota(me.remaining);
  $("who").textContent = me.auth ? me.email : "local";
  $("tab-users").hidden = me.role !== "admin";
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
  $("notes-page").textContent = `Page ${state.notesPage + 1} of ${pages}`;
  $("notes-prev").disabled = state.notesPage === 0;
  $("notes-next").disabled = state.notesPage + 1 >= pages;
  const projects = $("projects");
  const known = new Set([...projects.options].map((o) => o.value));
  for (const n of items) {
    if (!known.has(n.project_id)) { projects.append(el("option", { value: n.project_id })); known.add(n.project_id); }
  }
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

// ---- users (admins)

async function loadUsers() {
  const page = await api("GET", `/v1/admin/users?limit=${USERS_PAGE}&offset=${state.usersPage * USERS_PAGE}`);
  state.usersTotal = page.total;
  $("user-list").replaceChildren(...page.items.map(userItem));
  const pages = Math.max(1, Math.ceil(page.total / USERS_PAGE));
  $("users-summary").textContent = `${page.total} account${page.total === 1 ? "" : "s"}`;
  $("users-page").textContent = `Page ${state.usersPage + 1} of ${pages}`;
  $("users-prev").disabled = state.usersPage === 0;
  $("users-next").disabled = state.usersPage + 1 >= pages;
}

function userItem(u) {
  const path = "/v1/admin/users/" + encodeURIComponent(u.email);
  const role = el("select", {}, el("option", { value: "user", textContent: "user" }), el("option", { value: "admin", textContent: "admin" }));
  role.value = u.role;
  const limit = el("input", { type: "number", min: -1, step: 1, value: String(u.limit) });
  const save = el("button", { type: "button", className: "primary", textContent: "Save" });
  const reset = el("button", { type: "button", textContent: "Reset usage" });
  const del = el("button", { type: "button", className: "danger", textContent: "Delete" });
  const fields = el("div", { className: "user-fields" },
    el("label", {}, "Role", role),
    el("label", {}, "Limit (-1 is unlimited)", limit),
    el("div", { className: "muted user-used", textContent: "Used " + u.used }),
    el("div", { className: "muted", textContent: "Remaining " + quota(u.remaining) }));
  const li = el("li", { className: "user" },
    el("strong", { className: "user-email", textContent: u.email }),
    fields, el("div", { className: "row" }, save, reset, del));
  li.dataset.email = u.email;
  save.addEventListener("click", () => act(async () => {
    const change = { role: role.value };
    if (role.value !== "admin") change.limit = Number(limit.value);
    await api("PATCH", path, change);
    await Promise.all([loadUsers(), loadAccount()]);
  }));
  reset.addEventListener("click", () => act(async () => {
    await api("PATCH", path, { reset_usage: true });
    await Promise.all([loadUsers(), loadAccount()]);
  }));
  del.addEventListener("click", async () => {
    const ok = await confirmDialog(`Delete the account ${u.email} and every note it stored? This cannot be undone.`, "Delete account");
    if (ok) await act(async () => { await api("DELETE", path); await loadUsers(); });
  });
  return li;
}

// ---- wiring

async function act(fn) {
  showError(null);
  try { await fn(); } catch (err) { showError(err); }
}

function showTab(name) {
  for (const tab of ["notes", "usage", "keys", "users"]) {
    $(tab).hidden = name !== tab;
    $("tab-" + tab).setAttribute("aria-pressed", String(name === tab));
  }
  // `loadUsage` is usage.js's, `loadKeys` keys.js's.
  if (name === "keys") return loadKeys();
  return name === "users" ? loadUsers() : name === "usage" ? loadUsage() : loadNotes();
}

async function start() {
  $("signin").hidden = true;
  await loadAccount();
  $("signout").hidden = openMode;
  $("app").hidden = false;
  state.notesPage = 0;
  state.allNotes = null;
  await showTab("notes");
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
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { state.notesPage = 0; act(loadNotes); }, 150);
  });
  $("project").addEventListener("change", () => { state.notesPage = 0; act(refreshNotes); });
  $("notes-prev").addEventListener("click", () => { state.notesPage -= 1; act(loadNotes); });
  $("notes-next").addEventListener("click", () => { state.notesPage += 1; act(loadNotes); });
  $("users-prev").addEventListener("click", () => { state.usersPage -= 1; act(loadUsers); });
  $("users-next").addEventListener("click", () => { state.usersPage += 1; act(loadUsers); });
  $("delete-all").addEventListener("click", deleteAll);
  // Open mode has no accounts: the console opens as `local` without a form. Otherwise a token
  // kept in this tab's sessionStorage resumes the session; without one, the form.
  if (openMode || sessionStorage.getItem(TOKEN_KEY)) {
    act(start);
  } else {
    signedOut();
  }
});
