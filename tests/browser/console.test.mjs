// The console in real Chromium against the real binary: sign in, quota, notes (search, edit,
// delete, delete-all with its dialog), sign out, open mode, and an admin changing a limit.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PASSWORD, launch, openPage, startRelay, until } from "./harness.mjs";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const noteTexts = (page) => page.locator("#note-list .note-text").allTextContents();

async function signIn(page, base, email, password = PASSWORD) {
  await page.goto(`${base}/console`);
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/// Nothing wider than the window: usable without sideways scrolling.
async function fitsWidth(page, width) {
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(scroll <= width, `page is ${scroll}px wide in a ${width}px window`);
}

describe("console with accounts", () => {
  let relay;
  before(async () => { relay = await startRelay(); });
  after(async () => { await relay.stop(); });

  for (const width of [375, 1280]) {
    test(`a user signs in, sees quota and notes, searches, edits, deletes and signs out (${width} px)`, async () => {
      const email = `ada${width}@example.com`;
      const token = await relay.signup(email);
      for (const [project, note] of [["p1", "use pnpm, not npm"], ["p2", "deploy with the blue button"], ["p1", "tests run on port 0"]]) {
        const r = await relay.api("POST", "/v1/memory/remember", token, { project_id: project, note });
        assert.equal(r.status, 200);
      }
      const { page, context, problems } = await openPage(browser, relay.base, { width, height: 800 });

      await signIn(page, relay.base, email);
      await until("the account", async () => (await page.locator("#acct-email").textContent()) === email);
      assert.equal(await page.locator("#acct-role").textContent(), "user");
      assert.equal(await page.locator("#acct-used").textContent(), "0");
      assert.equal(await page.locator("#acct-limit").textContent(), "100");
      assert.equal(await page.locator("#acct-remaining").textContent(), "100");
      assert.ok(await page.evaluate(() => sessionStorage.getItem("relay.token")), "token kept in sessionStorage");

      // Newest first, with project, kind, author and date.
      await until("three notes", async () => (await noteTexts(page)).length === 3);
      assert.deepEqual(await noteTexts(page), ["tests run on port 0", "deploy with the blue button", "use pnpm, not npm"]);
      const first = page.locator("#note-list .note").first();
      assert.equal(await first.locator(".note-project").textContent(), "project p1");
      assert.equal(await first.locator(".note-kind").textContent(), "note");
      assert.equal(await first.locator(".note-author").textContent(), "by user");
      assert.ok(await first.locator("time").getAttribute("datetime"));
      await fitsWidth(page, width);

      // The project filter, then the search box filtering as you type.
      await page.locator("#project").fill("p2");
      await page.locator("#project").dispatchEvent("change");
      await until("the p2 filter", async () => (await noteTexts(page)).join() === "deploy with the blue button");
      await page.locator("#project").fill("");
      await page.locator("#project").dispatchEvent("change");
      await until("all projects again", async () => (await noteTexts(page)).length === 3);
      await page.locator("#search").pressSequentially("pnp");
      await until("the search result", async () => (await noteTexts(page)).join() === "use pnpm, not npm");
      await page.locator("#search").fill("");
      await until("the cleared search", async () => (await noteTexts(page)).length === 3);

      // Edit one note and save it.
      const deploy = page.locator("#note-list .note", { hasText: "deploy with the blue button" });
      await deploy.getByRole("button", { name: "Edit" }).click();
      // While edited, the text sits in a textarea's value, so the item is found by its textarea.
      const editing = page.locator("#note-list .note", { has: page.locator("textarea") });
      await editing.getByRole("textbox").fill("deploy with the green button");
      await editing.getByRole("button", { name: "Save" }).click();
      await until("the edited note", async () => (await noteTexts(page)).includes("deploy with the green button"));
      let list = await relay.api("GET", "/v1/memory/list", token);
      assert.ok(list.body.items.some((n) => n.note === "deploy with the green button"), "saved on the server");

      // Delete one.
      await page.locator("#note-list .note", { hasText: "use pnpm" }).getByRole("button", { name: "Delete" }).click();
      await until("two notes", async () => (await noteTexts(page)).length === 2);
      assert.equal((await relay.api("GET", "/v1/memory/list", token)).body.total, 2);

      // Delete all: Cancel keeps everything, Delete all runs the cascade.
      await page.getByRole("button", { name: "Delete all my notes" }).click();
      const dialog = page.locator("dialog#confirm");
      await dialog.getByRole("button", { name: "Cancel" }).click();
      await until("the dialog to close", async () => !(await dialog.isVisible()));
      assert.equal((await relay.api("GET", "/v1/memory/list", token)).body.total, 2, "Cancel deletes nothing");
      assert.equal((await noteTexts(page)).length, 2);
      await page.getByRole("button", { name: "Delete all my notes" }).click();
      await dialog.getByRole("button", { name: "Delete all" }).click();
      await until("no notes", async () => (await page.locator("#notes-summary").textContent()) === "No notes yet.");
      assert.equal((await relay.api("GET", "/v1/memory/list", token)).body.total, 0);

      // Sign out: back to the form, and the console's token no longer works on the server.
      const consoleToken = await page.evaluate(() => sessionStorage.getItem("relay.token"));
      await page.getByRole("button", { name: "Sign out" }).click();
      await until("the sign-in form", () => page.getByRole("button", { name: "Sign in" }).isVisible());
      assert.equal(await page.evaluate(() => sessionStorage.getItem("relay.token")), null);
      assert.equal((await relay.api("GET", "/v1/me", consoleToken)).status, 401);
      assert.equal(await page.locator("#app").isVisible(), false);

      assert.deepEqual(problems, []);
      await context.close();
    });
  }

  test("a wrong password is shown in words", async () => {
    await relay.signup("bea@example.com");
    const { page, context, problems } = await openPage(browser, relay.base);
    await signIn(page, relay.base, "bea@example.com", "not the password");
    await until("the error", () => page.getByRole("alert").isVisible());
    assert.equal(await page.getByRole("alert").textContent(), "Wrong email or password.");
    assert.equal(await page.locator("#app").isVisible(), false);
    // The only console line allowed is Chromium's own note of the expected 401 answer.
    assert.deepEqual(problems.filter((p) => !/status of 401/.test(p)), []);
    await context.close();
  });

  test("an admin changes a user's limit, seen by that user's GET /v1/me, and deletes an account", async () => {
    relay.users(["add", "root@example.com", "--role", "admin"], `${PASSWORD}\n`);
    const bob = await relay.signup("bob@example.com");
    const gone = await relay.signup("gone@example.com");
    const { page, context, problems } = await openPage(browser, relay.base);
    await signIn(page, relay.base, "root@example.com");
    await until("the admin's account", async () => (await page.locator("#acct-limit").textContent()) === "unlimited");
    await page.getByRole("button", { name: "Users" }).click();
    const row = page.locator("#user-list .user", { hasText: "bob@example.com" });
    await until("bob's row", () => row.isVisible());
    await row.getByLabel("Limit (units").fill("7");
    await row.getByRole("button", { name: "Save" }).click();
    await until("bob's new limit", async () => (await relay.api("GET", "/v1/me", bob)).body.limit === 7);
    assert.equal((await relay.api("GET", "/v1/me", bob)).body.remaining, 7);

    const goneRow = page.locator("#user-list .user", { hasText: "gone@example.com" });
    await goneRow.getByRole("button", { name: "Delete" }).click();
    await page.locator("dialog#confirm").getByRole("button", { name: "Delete account" }).click();
    await until("the row to go", async () => (await goneRow.count()) === 0);
    assert.equal((await relay.api("GET", "/v1/me", gone)).status, 401);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("an admin's Usage view has a table per user", async () => {
    relay.users(["add", "boss@example.com", "--role", "admin"], `${PASSWORD}\n`);
    const dana = await relay.signup("dana@example.com");
    assert.equal((await leg(relay, dana)).status, 200);
    await until("dana's record", async () => (await relay.api("GET", "/v1/usage/legs", dana)).body.items.length === 1);
    const { page, context, problems } = await openPage(browser, relay.base, { width: 375, height: 800 });
    await signIn(page, relay.base, "boss@example.com");
    await until("the admin's account", async () => (await page.locator("#acct-limit").textContent()) === "unlimited");
    await page.getByRole("button", { name: "Usage" }).click();
    const users = page.locator("#usage-users th[scope=row]");
    await until("the per-user table", async () => (await users.allTextContents()).includes("dana@example.com"));
    await fitsWidth(page, 375);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("a plain user has no Users view", async () => {
    await relay.signup("carl@example.com");
    const { page, context, problems } = await openPage(browser, relay.base);
    await signIn(page, relay.base, "carl@example.com");
    await until("the account", async () => (await page.locator("#acct-email").textContent()) === "carl@example.com");
    assert.equal(await page.getByRole("button", { name: "Users" }).isVisible(), false);
    assert.deepEqual(problems, []);
    await context.close();
  });
});

/// One agent leg on the demo provider, read to its end.
async function leg(relay, token) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const r = await fetch(`${relay.base}/v1/agent/stream`, {
    method: "POST", headers, body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
  });
  await r.text();
  return r;
}

describe("console in open mode", () => {
  let relay;
  before(async () => { relay = await startRelay({ auth: false }); });
  after(async () => { await relay.stop(); });

  test("opens as local with no form", async () => {
    await relay.api("POST", "/v1/memory/remember", null, { project_id: "p1", note: "open mode note" });
    const { page, context, problems } = await openPage(browser, relay.base, { width: 375, height: 800 });
    await page.goto(`${relay.base}/console`);
    await until("the local account", async () => (await page.locator("#acct-role").textContent()) === "local");
    assert.equal(await page.getByLabel("Password", { exact: true }).isVisible(), false);
    assert.equal(await page.getByRole("button", { name: "Sign in" }).isVisible(), false);
    assert.equal(await page.getByRole("button", { name: "Sign out" }).isVisible(), false);
    assert.equal(await page.locator("#acct-limit").textContent(), "unlimited");
    await until("the note", async () => (await noteTexts(page)).join() === "open mode note");
    await fitsWidth(page, 375);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("the Usage view draws tokens per day and shows the totals and a table per model", async () => {
    assert.equal((await leg(relay)).status, 200);
    assert.equal((await leg(relay)).status, 200);
    await until("the legs' records", async () => (await relay.api("GET", "/v1/usage/legs")).body.items.length === 2);
    const totals = (await relay.api("GET", "/v1/usage")).body.totals;
    assert.ok(totals.input_tokens > 0 && totals.output_tokens > 0, JSON.stringify(totals));
    const { page, context, problems } = await openPage(browser, relay.base);
    await page.goto(`${relay.base}/console`);
    await until("the local account", async () => (await page.locator("#acct-role").textContent()) === "local");
    await page.getByRole("button", { name: "Usage" }).click();
    const region = page.getByRole("region", { name: "Usage" });
    await until("the chart's bars", async () => (await region.locator("svg rect.bar").count()) > 0);
    assert.ok(await region.getByRole("img", { name: /Tokens per day/ }).isVisible());
    // Today's bar is the last slot: uncached input and output (the demo reports no cache).
    assert.equal(await region.locator("svg rect.bar.output").count(), 1);
    assert.equal(await page.locator("#usage-legs").textContent(), "2");
    assert.equal(await page.locator("#usage-input").textContent(), totals.input_tokens.toLocaleString("en-US"));
    assert.equal(await page.locator("#usage-output").textContent(), totals.output_tokens.toLocaleString("en-US"));
    assert.equal(await page.locator("#usage-cost").textContent(), "no prices");
    assert.deepEqual(await page.locator("#usage-models th[scope=row]").allTextContents(), ["demo"]);
    assert.equal(await page.locator("#usage-users-box").isVisible(), false, "per user is for admins");
    assert.deepEqual(problems, []);
    await context.close();
  });
});
