// The console's Requests view: the caller's recent calls from the usage ledger (time, route, model,
// status, tokens, cost, duration), filtered by model, status and project, a page at a time; admins
// can switch to every account's and narrow to one. Uses `api`, `el`, `$`, `act`, `cell` and `state` of
// console.js, `count` and `usd` of usage.js.
"use strict";

const REQUESTS_PAGE = 25;
// The cursors of the pages before the one shown, so that "Newer" can go back.
const requests = { cursors: [], cursor: null, next: null };

function requestsQuery() {
  const params = new URLSearchParams({ limit: String(REQUESTS_PAGE) });
  for (const [id, key] of [["req-model", "model"], ["req-status", "status"], ["req-project", "project_id"]]) {
    const v = $(id).value.trim();
    if (v) params.set(key, v);
  }
  const everyone = $("req-scope").value === "everyone";
  if (everyone && $("req-user").value.trim()) params.set("user", $("req-user").value.trim());
  if (requests.cursor) params.set("cursor", requests.cursor);
  return (everyone ? "/v1/admin/usage/legs?" : "/v1/usage/legs?") + params;
}

const duration = (ms) => (ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s");

async function loadRequests() {
  const admin = state.me && state.me.role === "admin";
  $("req-scope-box").hidden = !admin;
  if (!admin) $("req-scope").value = "mine";
  const everyone = $("req-scope").value === "everyone";
  $("req-user-box").hidden = !everyone;
  $("req-account-col").hidden = !everyone;
  const page = await api("GET", requestsQuery());
  requests.next = page.next;
  const cols = everyone ? 7 : 6;
  const rows = page.items.map((r) => {
    const model = cell("td", "Model and route", r.model, { className: "text req-model" });
    model.append(el("span", { className: "sub req-route", textContent: r.route }));
    const row = el("tr", {},
      cell("th", "Time", callTime(r.at), { scope: "row" }),
      everyone ? cell("td", "Account", r.email || "", { className: "text req-account" }) : null,
      model,
      cell("td", "Status", r.status, { className: "req-status" }),
      cell("td", "Tokens in / out", `${count(r.input_tokens)} / ${count(r.output_tokens)}${r.estimated ? " (est.)" : ""}`, { className: "req-tokens" }),
      cell("td", "Cost", usd(r.cost_usd), { className: "req-cost" }),
      cell("td", "Duration", duration(r.duration_ms), { className: "req-duration" }));
    row.dataset.requestId = r.request_id;
    return row;
  });
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colSpan: cols, className: "muted", textContent: "No calls match." })));
  $("req-rows").replaceChildren(...rows);
  const first = requests.cursors.length * REQUESTS_PAGE + 1;
  $("req-page").textContent = page.items.length ? `Calls ${first}–${first + page.items.length - 1}, newest first` : "";
  $("req-newer").disabled = requests.cursors.length === 0;
  $("req-older").disabled = !page.next;
  await fillModelChoices(everyone);
}

/// A call's time, short enough for a table cell: `Nov 27, 08:03:45` in the browser's zone.
function callTime(at) {
  return new Date(at * 1000).toLocaleString("en-US", { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

/// The models and projects of the last 30 days, offered in the filters' lists.
async function fillModelChoices(everyone) {
  const base = everyone ? "/v1/admin/usage" : "/v1/usage";
  const [models, projects] = await Promise.all([
    api("GET", base + "?group_by=model"),
    api("GET", base + "?group_by=project"),
  ]);
  const options = (rows) => rows.filter((r) => r.key).map((r) => el("option", { value: r.key }));
  $("req-models").replaceChildren(...options(models.rows));
  $("req-projects").replaceChildren(...options(projects.rows));
}

/// The next load starts at the newest page.
function restartRequests() {
  requests.cursors = [];
  requests.cursor = null;
}

/// Back to the newest page, with the filters as they are now.
function requestsFromStart() {
  restartRequests();
  return loadRequests();
}

/// The Requests view of one account's calls, for an admin (the Users view's "Recent calls").
function showUserRequests(email) {
  $("req-scope").value = "everyone";
  $("req-user").value = email;
  for (const id of ["req-model", "req-status", "req-project"]) $(id).value = "";
  restartRequests();
  return showTab("requests");
}

document.addEventListener("DOMContentLoaded", () => {
  $("req-filters").addEventListener("submit", (e) => { e.preventDefault(); act(requestsFromStart); });
  for (const id of ["req-scope", "req-status"]) $(id).addEventListener("change", () => act(requestsFromStart));
  $("req-older").addEventListener("click", () => act(() => {
    requests.cursors.push(requests.cursor);
    requests.cursor = requests.next;
    return loadRequests();
  }));
  $("req-newer").addEventListener("click", () => act(() => {
    requests.cursor = requests.cursors.pop() || null;
    return loadRequests();
  }));
});
