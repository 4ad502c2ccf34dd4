// The console's layout at a phone's width (375 px) and a desktop's (1280 px), measured rather than
// looked at: each view is screenshotted (target/browser-screenshots) and its boxes compared, so a
// card off centre, a control outside the window, two boxes on top of each other, text cut off or
// a word set one letter per line fails the test.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PASSWORD, launch, layoutProblems, offCentre, openPage, startRelay, until } from "./harness.mjs";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/// One agent leg on the demo provider in a project, read to its end.
async function leg(relay, token, project = "p-layout") {
  const r = await fetch(`${relay.base}/v1/agent/stream`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], project_id: project }),
  });
  await r.text();
  assert.equal(r.status, 200);
}

describe("console layout", () => {
  let relay;
  let admin;
  before(async () => {
    relay = await startRelay();
    relay.users(["add", "layout-admin@example.com", "--role", "admin"], `${PASSWORD}\n`);
    admin = (await relay.api("POST", "/v1/auth/signin", null, { email: "layout-admin@example.com", password: PASSWORD })).body.token;
    // Another account with a long email, legs and notes, so that tables and lists have rows.
    const long = await relay.signup("a-rather-long-address.for-wrapping@example-company.com");
    for (const note of ["use pnpm, not npm", "the deploy button is the blue one"]) {
      await relay.api("POST", "/v1/memory/remember", admin, { project_id: "p-layout", note });
    }
    await leg(relay, admin);
    await leg(relay, long, "another-project");
    await until("the legs' records", async () => (await relay.api("GET", "/v1/admin/usage/legs", admin)).body.items.length === 2);
  });
  after(async () => { await relay.stop(); });

  for (const width of [375, 1280]) {
    test(`every view is laid out without overlap, clipping or one-letter lines (${width} px)`, async () => {
      const { page, context, problems } = await openPage(browser, relay.base, { width, height: 800 });
      await page.goto(`${relay.base}/console`);
      await until("the sign-in form", () => page.getByLabel("Email", { exact: true }).isVisible());
      // The sign-in card sits in the middle of the window.
      assert.ok(await offCentre(page, "#signin") < 2, `sign-in card off centre by ${await offCentre(page, "#signin")}px`);
      assert.deepEqual(await layoutProblems(page, `signin-${width}`), []);

      await page.getByLabel("Email", { exact: true }).fill("layout-admin@example.com");
      await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
      await page.getByRole("button", { name: "Sign in" }).click();
      await until("the notes", async () => (await page.locator("#note-list .note").count()) === 2);
      assert.deepEqual(await layoutProblems(page, `notes-${width}`), []);

      await page.getByRole("button", { name: "Usage", exact: true }).click();
      await until("the per-user table", async () => (await page.locator("#usage-users th[scope=row]").count()) === 2);
      // The admin's own figures and everyone's are each labelled for what they are.
      assert.equal(await page.locator("#usage-mine-title").textContent(), "Your usage");
      assert.match(await page.locator("#usage-users-box h3").textContent(), /Every account/);
      assert.deepEqual(await layoutProblems(page, `usage-${width}`), []);

      await page.getByRole("button", { name: "Requests" }).click();
      await until("the admin's call", async () => (await page.locator("#req-rows tr[data-request-id]").count()) === 1);
      await page.getByLabel("Whose").selectOption("everyone");
      await until("everyone's calls", async () => (await page.locator("#req-rows tr[data-request-id]").count()) === 2);
      assert.deepEqual(await layoutProblems(page, `requests-${width}`), []);

      await page.getByRole("button", { name: "API keys" }).click();
      await until("the keys view", () => page.getByRole("button", { name: "Create key" }).isVisible());
      assert.deepEqual(await layoutProblems(page, `keys-${width}`), []);

      await page.getByRole("button", { name: "Users", exact: true }).click();
      await until("the user rows", async () => (await page.locator("#user-list .user").count()) === 2);
      await page.locator("summary", { hasText: "Create user" }).click();
      const longRow = page.locator("#user-list .user", { hasText: "a-rather-long-address" });
      await longRow.getByRole("button", { name: "Recent calls" }).click();
      await until("the recent calls", async () => (await longRow.locator(".recent tbody tr").count()) === 1);
      assert.deepEqual(await layoutProblems(page, `users-${width}`), []);

      await page.locator("#tab-settings").click();
      await until("the editor", () => page.getByLabel("Settings (JSON object)").isVisible());
      assert.deepEqual(await layoutProblems(page, `settings-${width}`), []);
      assert.deepEqual(problems.filter((p) => !/status of 404/.test(p)), []);
      await context.close();
    });
  }
});
