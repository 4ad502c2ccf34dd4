// The device sign-in page (/device): a person signs in, checks the code an agent's terminal shows,
// and approves or denies it. Same rules as the console: the token lives in this tab's
// sessionStorage and goes out as a Bearer header with JSON bodies, so another site cannot post
// for the user; a code in the link is shown, never approved without the click (RFC 8628 §5.4).
"use strict";

const TOKEN_KEY = "relay.token";
const $ = (id) => document.getElementById(id);
let code = new URLSearchParams(location.search).get("user_code") || "";

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

function describe(err) {
  if (!(err instanceof ApiError)) return "Cannot reach the server: " + err.message;
  switch (err.code) {
    case "invalid_credentials": return "Wrong email or password.";
    case "rate_limited": return "Too many attempts: locked for " + (err.retryAfter || "a few") + " seconds. Try again after that.";
    case "not_found": return "This code is unknown, already used or expired. Check the code in your terminal, or start the sign-in again there.";
    default: return err.message;
  }
}

function showError(err) {
  const box = $("error");
  if (!err) { box.hidden = true; box.textContent = ""; return; }
  box.textContent = typeof err === "string" ? err : describe(err);
  box.hidden = false;
}

function show(id) {
  for (const s of ["signin", "enter", "confirm", "done"]) $(s).hidden = s !== id;
}

function signedOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  $("who").textContent = "";
  show("signin");
  $("email").focus();
}

async function next() {
  if (!sessionStorage.getItem(TOKEN_KEY)) { signedOut(); return; }
  let me;
  try {
    me = await api("GET", "/v1/me");
  } catch (err) {
    if (err.status === 401) { signedOut(); return; }
    showError(err);
    return;
  }
  $("who").textContent = me.email;
  if (!code) { show("enter"); $("code").focus(); return; }
  try {
    const request = await api("GET", "/v1/device/" + encodeURIComponent(code));
    $("confirm-code").textContent = request.user_code;
    $("confirm-client").textContent = request.surface || "(not given)";
    $("confirm-agent").textContent = request.user_agent || "(not given)";
    $("confirm-account").textContent = me.email;
    showError(null);
    show("confirm");
  } catch (err) {
    if (err.status === 401) { signedOut(); return; }
    showError(err);
    code = "";
    show("enter");
  }
}

async function decide(approve) {
  showError(null);
  for (const b of [$("approve"), $("deny")]) b.disabled = true;
  try {
    await api("POST", "/v1/device/" + encodeURIComponent(code), { approve });
    $("done-title").textContent = approve ? "Approved" : "Denied";
    $("done-text").textContent = approve
      ? "The device is signed in. You can go back to your terminal."
      : "The sign-in was refused. You can close this page.";
    show("done");
  } catch (err) {
    showError(err);
    if (err.status === 401) signedOut();
  } finally {
    for (const b of [$("approve"), $("deny")]) b.disabled = false;
  }
}

$("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  showError(null);
  try {
    const session = await api("POST", "/v1/auth/signin", { email: $("email").value, password: $("password").value });
    sessionStorage.setItem(TOKEN_KEY, session.token);
    $("password").value = "";
    await next();
  } catch (err) {
    showError(err);
  }
});

$("enter-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  code = $("code").value.trim();
  await next();
});

$("approve").addEventListener("click", () => decide(true));
$("deny").addEventListener("click", () => decide(false));

next();
