// The console's admin views: Users (create, search, role, limits and budgets, recent calls,
// delete) and Agent settings (Claude Code's managed settings for everyone or one account, checked
// as JSON before they are saved). Uses `api`, `ApiError`, `el`, `$`, `act`, `confirmDialog`, `quota`,
// `has`, `cell`, `loadAccount`, `showTab` and `state` of console.js, `count` and `usd` of usage.js, `callTime`
// and `showUserRequests` of requests.js.
"use strict";

const USERS_PAGE = 50;
const RECENT_CALLS = 10;

// ---- users

async function loadUsers() {
  const q = $("user-search").value.trim();
  const search = q ? "&q=" + encodeURIComponent(q) : "";
  const page = await api("GET", `/v1/admin/users?limit=${USERS_PAGE}&offset=${state.usersPage * USERS_PAGE}${search}`);
  state.usersTotal = page.total;
  $("user-list").replaceChildren(...page.items.map(userItem));
  $("user-emails").replaceChildren(...page.items.map((u) => el("option", { value: u.email })));
  const pages = Math.max(1, Math.ceil(page.total / USERS_PAGE));
  const noun = `account${page.total === 1 ? "" : "s"}`;
  $("users-summary").textContent = q ? `${page.total} ${noun} match “${q}”` : `${page.total} ${noun}`;
  $("users-page").textContent = `Page ${state.usersPage + 1} of ${pages}`;
  $("users-prev").disabled = state.usersPage === 0;
  $("users-next").disabled = state.usersPage + 1 >= pages;
}

const budget = (n, fmt) => (n === null || n === undefined || n < 0 ? "unlimited" : fmt(n));

/// A number input of a budget: the current value when the listing has it, else empty (unchanged).
function budgetInput(value, step) {
  const input = el("input", { type: "number", min: -1, step, placeholder: "unchanged" });
  if (value !== undefined && value !== null) input.value = String(value);
  input.dataset.was = input.value;
  return input;
}

function userItem(u) {
  const path = "/v1/admin/users/" + encodeURIComponent(u.email);
  const role = el("select", {}, el("option", { value: "user", textContent: "user" }), el("option", { value: "admin", textContent: "admin" }));
  role.value = u.role;
  const limit = el("input", { type: "number", min: -1, step: 1, value: String(u.limit) });
  const tokens = budgetInput(u.token_budget, 1);
  const spend = has(u, "spend_budget_usd") ? budgetInput(u.spend_budget_usd, "0.01") : null;
  const save = el("button", { type: "button", className: "primary", textContent: "Save" });
  const reset = el("button", { type: "button", textContent: "Reset usage" });
  const calls = el("button", { type: "button", textContent: "Recent calls", ariaExpanded: "false" });
  const settings = el("button", { type: "button", textContent: "Agent settings" });
  const del = el("button", { type: "button", className: "danger", textContent: "Delete" });
  const facts = [`Used ${u.used} unit${u.used === 1 ? "" : "s"}`, `Remaining ${quota(u.remaining)}`];
  if (has(u, "tokens_used")) facts.push(`Tokens this month ${count(u.tokens_used)} of ${budget(u.token_budget, count)}`);
  if (has(u, "spend_used_usd")) facts.push(`Spend this month ${usd(u.spend_used_usd)} of ${budget(u.spend_budget_usd, usd)}`);
  if (has(u, "allowed_models")) facts.push("Models " + (u.allowed_models === null ? "all" : u.allowed_models.join(", ") || "none"));
  const fields = el("div", { className: "user-fields" },
    el("label", {}, "Role", role),
    el("label", {}, "Limit (units, -1 unlimited)", limit),
    el("label", {}, "Token budget (per month, -1 unlimited)", tokens),
    spend ? el("label", {}, "Spend budget (USD per month, -1 unlimited)", spend) : null);
  const recent = el("div", { className: "recent" });
  recent.hidden = true;
  const li = el("li", { className: "user" },
    el("strong", { className: "user-email", textContent: u.email }),
    el("div", { className: "meta user-facts" }, ...facts.map((f) => el("span", { textContent: f }))),
    fields, el("div", { className: "row" }, save, reset, calls, settings, del), recent);
  li.dataset.email = u.email;
  save.addEventListener("click", () => act(async () => {
    const change = { role: role.value };
    if (role.value !== "admin") change.limit = Number(limit.value);
    if (tokens.value !== "" && tokens.value !== tokens.dataset.was) change.token_budget = Number(tokens.value);
    if (spend && spend.value !== "" && spend.value !== spend.dataset.was) change.spend_budget_usd = Number(spend.value);
    await api("PATCH", path, change);
    await Promise.all([loadUsers(), loadAccount()]);
  }));
  reset.addEventListener("click", () => act(async () => {
    await api("PATCH", path, { reset_usage: true });
    await Promise.all([loadUsers(), loadAccount()]);
  }));
  calls.addEventListener("click", () => act(async () => {
    if (!recent.hidden) { recent.hidden = true; calls.ariaExpanded = "false"; return; }
    await showRecentCalls(recent, u.email);
    recent.hidden = false;
    calls.ariaExpanded = "true";
  }));
  settings.addEventListener("click", () => act(() => openSettings(u.email)));
  del.addEventListener("click", async () => {
    const ok = await confirmDialog(`Delete the account ${u.email} and every note it stored? This cannot be undone.`, "Delete account");
    if (ok) await act(async () => { await api("DELETE", path); await loadUsers(); });
  });
  return li;
}

/// The account's last calls, under its row, and a way to all of them in the Requests view.
async function showRecentCalls(box, email) {
  const page = await api("GET", `/v1/admin/usage/legs?limit=${RECENT_CALLS}&user=${encodeURIComponent(email)}`);
  const all = el("button", { type: "button", textContent: "All calls in Requests" });
  all.addEventListener("click", () => act(() => showUserRequests(email)));
  const rows = page.items.map((r) => el("tr", {},
    cell("th", "Time", callTime(r.at), { scope: "row" }),
    cell("td", "Model", r.model, { className: "text" }),
    cell("td", "Status", r.status),
    cell("td", "Tokens", count(r.input_tokens + r.output_tokens)),
    cell("td", "Cost", usd(r.cost_usd))));
  box.replaceChildren(
    el("h3", { textContent: "Recent calls" }),
    rows.length
      ? el("div", { className: "table-box" }, el("table", { className: "usage-table stack" },
        el("thead", {}, el("tr", {}, ...["Time", "Model", "Status", "Tokens", "Cost"].map((h) => el("th", { scope: "col", textContent: h })))),
        el("tbody", {}, ...rows)))
      : el("p", { className: "muted", textContent: "No calls in the ledger." }),
    el("div", { className: "row" }, all));
}

async function createUser() {
  const form = $("create-user");
  if (!form.reportValidity()) return;
  const body = { email: $("new-email").value.trim(), password: $("new-password").value, role: $("new-role").value };
  if ($("new-limit").value !== "") body.limit = Number($("new-limit").value);
  if ($("new-tokens").value !== "") body.token_budget = Number($("new-tokens").value);
  const created = await api("POST", "/v1/admin/users", body);
  form.reset();
  $("create-done").textContent = `Created ${created.user.email}. Give them the password; they can sign in now.`;
  $("create-done").hidden = false;
  $("user-search").value = "";
  state.usersPage = 0;
  await loadUsers();
}

// ---- agent settings: `settings.email` is the account edited, "" for everyone's document.

const settings = { email: "" };

function settingsPath() {
  return settings.email
    ? "/v1/admin/users/" + encodeURIComponent(settings.email) + "/agent-settings"
    : "/v1/admin/agent-settings";
}

/// The editor's text as a settings object, or why it is not one.
function parseSettings(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: "Not valid JSON: " + err.message };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { error: "The settings must be one JSON object, like {\"env\": {\"KEY\": \"value\"}}." };
  }
  return { value };
}

function checkSettings() {
  const { error } = parseSettings($("settings-json").value);
  $("settings-invalid").textContent = error || "";
  $("settings-invalid").hidden = !error;
  $("settings-save").disabled = Boolean(error);
  return !error;
}

async function loadSettings() {
  const one = $("settings-for").value === "user";
  $("settings-email-box").hidden = !one;
  settings.email = one ? $("settings-email").value.trim() : "";
  const whose = settings.email ? settings.email : "everyone";
  $("settings-whose").textContent = settings.email ? `Editing the document of ${settings.email}` : "Editing the document for everyone";
  if (one && !settings.email) {
    $("settings-status").textContent = "Enter an account's email, then Load.";
    $("settings-editor").hidden = true;
    return;
  }
  $("settings-editor").hidden = false;
  try {
    const doc = await api("GET", settingsPath());
    $("settings-json").value = JSON.stringify(doc.settings, null, 2);
    $("settings-status").textContent = `Stored for ${whose}, checksum ${doc.checksum}.`;
    $("settings-delete").disabled = false;
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 404) throw err;
    $("settings-json").value = "{\n}";
    $("settings-status").textContent = settings.email
      ? `${settings.email} has no document of its own (or no such account): the one for everyone applies.`
      : "No document for everyone yet.";
    $("settings-delete").disabled = true;
  }
  checkSettings();
}

async function saveSettings() {
  if (!checkSettings()) return;
  const { value } = parseSettings($("settings-json").value);
  const doc = await api("PUT", settingsPath(), value);
  $("settings-json").value = JSON.stringify(doc.settings, null, 2);
  $("settings-status").textContent = `Saved for ${settings.email || "everyone"}, checksum ${doc.checksum}.`;
  $("settings-delete").disabled = false;
}

async function deleteSettings() {
  const whose = settings.email ? `the document of ${settings.email}` : "the document for everyone";
  if (!(await confirmDialog(`Delete ${whose}? Agents stop receiving it at their next start.`, "Delete"))) return;
  await api("DELETE", settingsPath());
  await loadSettings();
}

/// The editor on one account's document (the Users view's "Agent settings").
function openSettings(email) {
  $("settings-for").value = "user";
  $("settings-email").value = email;
  return showTab("settings");
}

let userSearchTimer = 0;

document.addEventListener("DOMContentLoaded", () => {
  $("users-prev").addEventListener("click", () => { state.usersPage -= 1; act(loadUsers); });
  $("users-next").addEventListener("click", () => { state.usersPage += 1; act(loadUsers); });
  $("user-search").addEventListener("input", () => {
    clearTimeout(userSearchTimer);
    userSearchTimer = setTimeout(() => { state.usersPage = 0; act(loadUsers); }, 150);
  });
  $("create-user").addEventListener("submit", (e) => { e.preventDefault(); act(createUser); });
  $("settings-scope").addEventListener("submit", (e) => { e.preventDefault(); act(loadSettings); });
  $("settings-for").addEventListener("change", () => act(loadSettings));
  $("settings-json").addEventListener("input", checkSettings);
  $("settings-save").addEventListener("click", () => act(saveSettings));
  $("settings-delete").addEventListener("click", () => act(deleteSettings));
});
