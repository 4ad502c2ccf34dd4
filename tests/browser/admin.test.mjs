// The console's admin and ledger views in real Chromium against the real binary: creating,
// finding and budgeting accounts, a user's recent calls, the Requests view with its filters,
// paging and everyone's calls, the Agent settings editor, adding notes, and the Account card.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PASSWORD, launch, openPage, startRelay, until } from "./harness.mjs";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function signIn(page, base, email, password = PASSWORD) {
  await page.goto(`${base}/console`);
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await until("the account", async () => (await page.locator("#acct-email").textContent()) === email);
}

/// One agent leg on the demo provider, read to its end.
async function leg(relay, token, project) {
  const r = await fetch(`${relay.base}/v1/agent/stream`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], project_id: project }),
  });
  await r.text();
  assert.equal(r.status, 200);
}

const requestRows = (page) => page.locator("#req-rows tr[data-request-id]");

describe("console for admins and the ledger", () => {
  let relay;
  before(async () => {
    relay = await startRelay({ signup: "closed" });
    relay.users(["add", "root@example.com", "--role", "admin"], `${PASSWORD}\n`);
  });
  after(async () => { await relay.stop(); });

  test("notes: the empty state says how notes arrive, and the form adds one to a typed or chosen project", async () => {
    relay.users(["add", "nora@example.com"], `${PASSWORD}\n`);
    const { page, context, problems } = await openPage(browser, relay.base, { width: 375, height: 800 });
    await signIn(page, relay.base, "nora@example.com");
    await until("the empty state", () => page.locator("#notes-empty").isVisible());
    const help = await page.locator("#notes-empty").textContent();
    for (const words of ["relay agent", "remember", "relay claude", "POST /v1/memory/remember"]) assert.ok(help.includes(words), words);
    await page.getByLabel("New note").fill("run the tests with cargo nextest");
    await page.locator("#new-project").fill("p-typed");
    await page.getByRole("button", { name: "Add note" }).click();
    await until("the new note", async () => (await page.locator("#note-list .note-text").allTextContents()).join() === "run the tests with cargo nextest");
    assert.equal(await page.locator("#notes-empty").isVisible(), false);
    assert.equal(await page.locator("#note-list .note-project").first().textContent(), "project p-typed");
    // The project is offered next time; a second note goes to it without typing.
    assert.deepEqual(await page.locator("#projects option").evaluateAll((os) => os.map((o) => o.value)), ["p-typed"]);
    await page.getByLabel("New note").fill("second note");
    await page.getByRole("button", { name: "Add note" }).click();
    await until("two notes", async () => (await page.locator("#note-list .note").count()) === 2);
    const token = (await relay.api("POST", "/v1/auth/signin", null, { email: "nora@example.com", password: PASSWORD })).body.token;
    const stored = (await relay.api("GET", "/v1/memory/list?project_id=p-typed", token)).body;
    assert.deepEqual(stored.items.map((n) => n.note), ["run the tests with cargo nextest", "second note"]);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the Account card shows units, tokens and spend with their periods and resets", async () => {
    relay.users(["add", "acct@example.com", "--limit", "40"], `${PASSWORD}\n`);
    const root = (await relay.api("POST", "/v1/auth/signin", null, { email: "root@example.com", password: PASSWORD })).body.token;
    assert.equal((await relay.api("PATCH", "/v1/admin/users/acct@example.com", root, { token_budget: 5000 })).status, 200);
    const token = (await relay.api("POST", "/v1/auth/signin", null, { email: "acct@example.com", password: PASSWORD })).body.token;
    await leg(relay, token);
    // The ledger counts the leg's tokens off its path, within a flush.
    const me = await until("the month's tokens", async () => {
      const body = (await relay.api("GET", "/v1/me", token)).body;
      return body.tokens_used > 0 && body;
    });
    const { page, context, problems } = await openPage(browser, relay.base);
    await signIn(page, relay.base, "acct@example.com");
    await until("the tokens", async () => (await page.locator("#acct-tokens-used").textContent()) === me.tokens_used.toLocaleString("en-US"));
    assert.ok(me.tokens_used > 0);
    assert.equal(await page.locator("#acct-limit").textContent(), "40");
    assert.equal(await page.locator("#acct-tokens-budget").textContent(), "5,000");
    assert.equal(await page.locator("#acct-tokens-remaining").textContent(), (5000 - me.tokens_used).toLocaleString("en-US"));
    // Budgets count per calendar month (UTC): the reset is the first of the next month.
    const now = new Date();
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
    const reset = me.tokens_resets_at ?? me.budget_resets_at;
    assert.equal(await page.locator("#acct-tokens-reset").textContent(), reset ? await page.evaluate((t) => when(t), reset) : `${next} 00:00 UTC`);
    // Fields a server may not have are shown when it sends them and left out when it does not.
    assert.equal(await page.locator("#acct-units-reset-box").isVisible(), "quota_resets_at" in me);
    if ("quota_resets_at" in me) {
      assert.equal(await page.locator("#acct-units-reset").textContent(), me.quota_resets_at === null ? "never" : await page.evaluate((t) => when(t), me.quota_resets_at));
    }
    // This server sends the spend (issue 40): the box is shown with it.
    assert.ok("spend_budget_usd" in me && "spend_used_usd" in me, JSON.stringify(me));
    assert.equal(await page.locator("#acct-spend-box").isVisible(), true);
    assert.equal(await page.locator("#acct-spend-used").textContent(), "$" + Number(me.spend_used_usd).toFixed(2));
    assert.equal(await page.locator("#acct-spend-budget").textContent(), me.spend_budget_usd < 0 ? "unlimited" : "$" + Number(me.spend_budget_usd).toFixed(2));
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("an admin creates a user with limits, finds it by search, sets its budget and sees its recent calls", async () => {
    const { page, context, problems } = await openPage(browser, relay.base);
    await signIn(page, relay.base, "root@example.com");
    await page.getByRole("button", { name: "Users", exact: true }).click();
    await page.locator("summary", { hasText: "Create user" }).click();
    const form = page.locator("#create-user");
    await form.getByLabel("New user's email").fill("newbie@example.com");
    await form.getByLabel("Initial password").fill("a new password");
    await form.getByLabel("Role").selectOption("user");
    await form.getByLabel("Limit (units)").fill("12");
    await form.getByLabel("Token budget").fill("3000");
    await form.getByRole("button", { name: "Create user" }).click();
    await until("the confirmation", async () => /Created newbie@example.com/.test(await page.locator("#create-done").textContent()));
    // The account exists with what the form said, and its owner signs in with that password.
    const signin = await relay.api("POST", "/v1/auth/signin", null, { email: "newbie@example.com", password: "a new password" });
    assert.equal(signin.status, 200);
    const newbie = signin.body.token;
    let me = (await relay.api("GET", "/v1/me", newbie)).body;
    assert.equal(me.limit, 12);
    assert.equal(me.token_budget, 3000);

    // A taken email is said in words.
    await form.getByLabel("New user's email").fill("newbie@example.com");
    await form.getByLabel("Initial password").fill("another password");
    await form.getByRole("button", { name: "Create user" }).click();
    await until("the error", () => page.getByRole("alert").isVisible());
    assert.match(await page.getByRole("alert").textContent(), /already exists/);

    // The search box narrows the list to the matching emails.
    await page.getByLabel("Search users").fill("newb");
    await until("one match", async () => (await page.locator("#user-list .user-email").allTextContents()).join() === "newbie@example.com");
    assert.match(await page.locator("#users-summary").textContent(), /^1 account match/);
    await page.getByLabel("Search users").fill("nobody-has-this");
    await until("no match", async () => (await page.locator("#user-list .user").count()) === 0);
    await page.getByLabel("Search users").fill("NEWBIE");
    const row = page.locator("#user-list .user", { hasText: "newbie@example.com" });
    await until("the row again", () => row.isVisible());

    // Per-user budget: shown where the listing has it, saved through PATCH.
    await row.getByLabel("Token budget").fill("4500");
    await row.getByRole("button", { name: "Save" }).click();
    await until("the new budget", async () => (await relay.api("GET", "/v1/me", newbie)).body.token_budget === 4500);
    const listed = (await relay.api("GET", "/v1/admin/users?q=newbie", (await relay.api("POST", "/v1/auth/signin", null, { email: "root@example.com", password: PASSWORD })).body.token)).body.items[0];
    if ("allowed_models" in listed) {
      await until("the models fact", async () => /Models /.test(await row.locator(".user-facts").textContent()));
    }

    // The user's recent calls, under the row, then all of them in Requests.
    await leg(relay, newbie, "p-newbie");
    await until("the record", async () => (await relay.api("GET", "/v1/usage/legs", newbie)).body.items.length === 1);
    await row.getByRole("button", { name: "Recent calls" }).click();
    await until("one recent call", async () => (await row.locator(".recent tbody tr").count()) === 1);
    assert.equal(await row.locator(".recent tbody td").first().textContent(), "demo");
    await row.getByRole("button", { name: "All calls in Requests" }).click();
    await until("the Requests view", () => page.getByRole("region", { name: "Requests" }).isVisible());
    assert.equal(await page.getByLabel("Whose").inputValue(), "everyone");
    assert.equal(await page.locator("#req-user").inputValue(), "newbie@example.com");
    await until("newbie's call", async () => (await requestRows(page).count()) === 1);
    assert.equal(await requestRows(page).first().locator(".req-account").textContent(), "newbie@example.com");
    me = (await relay.api("GET", "/v1/me", newbie)).body;
    assert.deepEqual(problems.filter((p) => !/status of 409/.test(p)), []);
    await context.close();
  });

  test("Requests: a user's calls with model, status and project filters and pages; an admin switches to everyone's", async () => {
    relay.users(["add", "rita@example.com"], `${PASSWORD}\n`);
    const rita = (await relay.api("POST", "/v1/auth/signin", null, { email: "rita@example.com", password: PASSWORD })).body.token;
    for (let i = 0; i < 27; i += 1) await leg(relay, rita, i < 2 ? "p-two" : "p-many");
    await until("27 records", async () => (await relay.api("GET", "/v1/usage/legs?limit=100", rita)).body.items.length === 27);
    const newest = (await relay.api("GET", "/v1/usage/legs?limit=100", rita)).body.items;

    const { page, context, problems } = await openPage(browser, relay.base, { width: 375, height: 800 });
    await signIn(page, relay.base, "rita@example.com");
    await page.getByRole("button", { name: "Requests" }).click();
    await until("the first page", async () => (await requestRows(page).count()) === 25);
    // Newest first, each with its time, model, route, status, tokens, cost and duration.
    assert.equal(await requestRows(page).first().getAttribute("data-request-id"), newest[0].request_id);
    const first = requestRows(page).first();
    assert.equal(await first.locator(".req-model").evaluate((e) => e.firstChild.textContent), "demo");
    assert.equal(await first.locator(".req-route").textContent(), "agent");
    assert.equal(await first.locator(".req-status").textContent(), "ok");
    assert.equal(await first.locator(".req-tokens").textContent(),
      `${newest[0].input_tokens.toLocaleString("en-US")} / ${newest[0].output_tokens.toLocaleString("en-US")}`);
    assert.equal(await first.locator(".req-cost").textContent(), "no prices");
    assert.match(await first.locator(".req-duration").textContent(), /^\d+(\.\d)? m?s$/);
    assert.equal(await page.getByLabel("Whose").isVisible(), false, "only admins choose whose calls");
    // Paging: the older page holds the last two; Newer goes back.
    assert.equal(await page.getByRole("button", { name: "Newer" }).isDisabled(), true);
    await page.getByRole("button", { name: "Older" }).click();
    await until("the second page", async () => (await requestRows(page).count()) === 2);
    assert.equal(await requestRows(page).last().getAttribute("data-request-id"), newest[26].request_id);
    assert.equal(await page.getByRole("button", { name: "Older" }).isDisabled(), true);
    await page.getByRole("button", { name: "Newer" }).click();
    await until("the first page again", async () => (await requestRows(page).count()) === 25);
    // Filters: a project, a status nothing has, a model.
    await page.locator("#req-project").fill("p-two");
    await page.getByRole("button", { name: "Filter" }).click();
    await until("p-two's calls", async () => (await requestRows(page).count()) === 2);
    await page.getByLabel("Status").selectOption("error");
    await until("no errors", async () => (await page.locator("#req-rows").textContent()) === "No calls match.");
    await page.getByLabel("Status").selectOption("ok");
    await until("p-two's ok calls", async () => (await requestRows(page).count()) === 2);
    await page.locator("#req-project").fill("");
    await page.locator("#req-model").fill("no-such-model");
    await page.getByRole("button", { name: "Filter" }).click();
    await until("no such model", async () => (await requestRows(page).count()) === 0);
    await page.locator("#req-model").fill("demo");
    await page.getByRole("button", { name: "Filter" }).click();
    await until("demo's calls", async () => (await requestRows(page).count()) === 25);
    await context.close();

    // An admin sees their own calls, then everyone's, with each call's account.
    const admin = await openPage(browser, relay.base);
    await signIn(admin.page, relay.base, "root@example.com");
    await admin.page.getByRole("button", { name: "Requests" }).click();
    await until("the admin's own (none)", async () => (await admin.page.locator("#req-rows").textContent()) === "No calls match.");
    await admin.page.getByLabel("Whose").selectOption("everyone");
    await until("everyone's calls", async () => (await requestRows(admin.page).count()) === 25);
    assert.ok((await admin.page.locator("#req-rows .req-account").allTextContents()).includes("rita@example.com"));
    await admin.page.locator("#req-user").fill("rita@example.com");
    await admin.page.locator("#req-project").fill("p-two");
    await admin.page.getByRole("button", { name: "Filter" }).click();
    await until("rita's p-two calls", async () => (await requestRows(admin.page).count()) === 2);
    assert.deepEqual(problems, []);
    assert.deepEqual(admin.problems, []);
    await admin.context.close();
  });

  test("the Agent settings editor checks JSON before saving, for everyone and for one account", async () => {
    relay.users(["add", "sam@example.com"], `${PASSWORD}\n`);
    const sam = (await relay.api("POST", "/v1/auth/signin", null, { email: "sam@example.com", password: PASSWORD })).body.token;
    const root = (await relay.api("POST", "/v1/auth/signin", null, { email: "root@example.com", password: PASSWORD })).body.token;
    const { page, context, problems } = await openPage(browser, relay.base);
    await signIn(page, relay.base, "root@example.com");
    await page.locator("#tab-settings").click();
    await until("the shared document (none yet)", async () => /No document for everyone yet/.test(await page.locator("#settings-status").textContent()));
    const editor = page.getByLabel("Settings (JSON object)");

    // Not JSON, then JSON that is not an object: said at once, and nothing is sent.
    await editor.fill('{"env": {"A": "1"');
    await until("the JSON error", () => page.locator("#settings-invalid").isVisible());
    assert.match(await page.locator("#settings-invalid").textContent(), /^Not valid JSON/);
    assert.equal(await page.getByRole("button", { name: "Save" }).isDisabled(), true);
    await editor.fill("[1, 2]");
    await until("the object error", async () => /must be one JSON object/.test(await page.locator("#settings-invalid").textContent()));
    assert.equal((await relay.api("GET", "/v1/admin/agent-settings", root)).status, 404, "nothing saved");

    // A valid object is saved for everyone and reaches the user's agents.
    await editor.fill('{"env": {"TEAM": "blue"}}');
    await until("valid", async () => !(await page.locator("#settings-invalid").isVisible()));
    await page.getByRole("button", { name: "Save" }).click();
    await until("saved", async () => /^Saved for everyone, checksum sha256:/.test(await page.locator("#settings-status").textContent()));
    assert.deepEqual((await relay.api("GET", "/v1/admin/agent-settings", root)).body.settings, { env: { TEAM: "blue" } });
    assert.deepEqual((await relay.api("GET", "/managed/settings", sam)).body.settings, { env: { TEAM: "blue" } });

    // One account's own document replaces the shared one for it.
    await page.getByLabel("Applies to").selectOption("user");
    await page.getByLabel("Account email").fill("sam@example.com");
    await page.getByRole("button", { name: "Load" }).click();
    await until("sam has none", async () => /sam@example.com has no document of its own/.test(await page.locator("#settings-status").textContent()));
    await editor.fill('{"env": {"TEAM": "red"}, "model": "sonnet"}');
    await page.getByRole("button", { name: "Save" }).click();
    await until("saved for sam", async () => /^Saved for sam@example.com/.test(await page.locator("#settings-status").textContent()));
    assert.deepEqual((await relay.api("GET", "/managed/settings", sam)).body.settings, { env: { TEAM: "red" }, model: "sonnet" });
    assert.deepEqual((await relay.api("GET", "/v1/admin/agent-settings", root)).body.settings, { env: { TEAM: "blue" } });

    // Delete asks first; then the shared document applies to sam again.
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.locator("dialog#confirm").getByRole("button", { name: "Delete" }).click();
    await until("sam's gone", async () => (await relay.api("GET", "/v1/admin/users/sam@example.com/agent-settings", root)).status === 404);
    assert.deepEqual((await relay.api("GET", "/managed/settings", sam)).body.settings, { env: { TEAM: "blue" } });

    // The Users view opens the editor on one account.
    await page.getByRole("button", { name: "Users", exact: true }).click();
    const row = page.locator("#user-list .user", { hasText: "sam@example.com" });
    await row.getByRole("button", { name: "Agent settings" }).click();
    await until("the editor on sam", async () => (await page.locator("#settings-whose").textContent()) === "Editing the document of sam@example.com");
    assert.deepEqual(problems.filter((p) => !/status of 404/.test(p)), []);
    await context.close();
  });
});
