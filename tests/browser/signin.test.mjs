// The pages agents' sign-in needs, in real Chromium against the real binary: the device
// verification page (/device: sign in, check the code, Approve or Deny, and a page on another
// origin cannot decide for the user) and the console's API keys page (create, copy once, revoke).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PASSWORD, launch, layoutProblems, openPage, startRelay, until } from "./harness.mjs";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const form = (fields) => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", "user-agent": "claude-cli/2.1.332 (external, cli)" },
  body: new URLSearchParams(fields).toString(),
});

/// An agent starts the device flow, as Claude Code's `/login` does.
async function startDevice(relay) {
  const r = await fetch(`${relay.base}/oauth/device_authorization`, form({ surface: "claude_code" }));
  assert.equal(r.status, 200);
  return r.json();
}

/// The agent's poll for its tokens.
async function poll(relay, deviceCode) {
  const r = await fetch(`${relay.base}/oauth/token`,
    form({ grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: deviceCode }));
  return { status: r.status, body: await r.json() };
}

describe("agents' sign-in pages", () => {
  let relay;
  before(async () => {
    relay = await startRelay({ signup: "closed" });
    relay.users(["add", "dev@example.com"], `${PASSWORD}\n`);
  });
  after(async () => { await relay.stop(); });

  for (const width of [375, 1280]) {
    test(`/device: sign in, see the code and the client, Approve, and the agent gets its tokens (${width} px)`, async () => {
      const device = await startDevice(relay);
      const { page, context, problems } = await openPage(browser, relay.base, { width, height: 800 });
      await page.goto(device.verification_uri_complete);
      await page.getByLabel("Email").fill("dev@example.com");
      await page.getByLabel("Password").fill(PASSWORD);
      await page.getByRole("button", { name: "Sign in" }).click();
      await until("the code", async () => (await page.locator("#confirm-code").textContent()) === device.user_code);
      assert.equal(await page.locator("#confirm-client").textContent(), "claude_code");
      assert.match(await page.locator("#confirm-agent").textContent(), /claude-cli\/2\.1\.332/);
      assert.equal(await page.locator("#confirm-account").textContent(), "dev@example.com");
      assert.deepEqual(await layoutProblems(page, `device-confirm-${width}`), []);
      // A pre-filled code waits for the click (RFC 8628 §5.4).
      assert.equal((await poll(relay, device.device_code)).body.error, "authorization_pending");
      await page.getByRole("button", { name: "Approve" }).click();
      await until("Approved", async () => (await page.locator("#done-title").textContent()) === "Approved");
      assert.match(await page.locator("#done-text").textContent(), /go back to your terminal/);
      assert.deepEqual(await layoutProblems(page, `device-approved-${width}`), []);
      const tokens = await poll(relay, device.device_code);
      assert.equal(tokens.status, 200);
      assert.equal(tokens.body.email, "dev@example.com");
      assert.equal((await relay.api("GET", "/v1/me", tokens.body.access_token)).body.email, "dev@example.com");
      assert.deepEqual(problems, []);
      await context.close();
    });
  }

  test("/device: a typed code, then Deny; the agent is refused", async () => {
    const device = await startDevice(relay);
    const { page, context, problems } = await openPage(browser, relay.base, { width: 375, height: 800 });
    await page.goto(`${relay.base}/device`);
    await page.getByLabel("Email").fill("dev@example.com");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await until("the code field", () => page.getByLabel("Code").isVisible());
    // Case and dashes do not matter.
    await page.getByLabel("Code").fill(device.user_code.toLowerCase().replace("-", ""));
    await page.getByRole("button", { name: "Continue" }).click();
    await until("the code", async () => (await page.locator("#confirm-code").textContent()) === device.user_code);
    await page.getByRole("button", { name: "Deny" }).click();
    await until("Denied", async () => (await page.locator("#done-title").textContent()) === "Denied");
    assert.equal((await poll(relay, device.device_code)).body.error, "access_denied");
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("/device: a page on another origin can neither approve with a form post nor read the answer", async () => {
    const device = await startDevice(relay);
    const token = (await relay.api("POST", "/v1/auth/signin", null, { email: "dev@example.com", password: PASSWORD })).body.token;
    // `localhost` is another origin than `127.0.0.1` for the browser, though the same server.
    const foreign = relay.base.replace("127.0.0.1", "localhost");
    const { page, context } = await openPage(browser, foreign);
    await page.goto(`${foreign}/healthz`);
    const outcome = await page.evaluate(async ({ base, code, token }) => {
      // A simple (no-preflight) post, as a form on any site can send: refused before any handler.
      await fetch(`${base}/v1/device/${code}`, { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: '{"approve":true}' });
      // A JSON post with the token (which a foreign page could not even know) needs a preflight Relay does not grant.
      try {
        await fetch(`${base}/v1/device/${code}`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: '{"approve":true}' });
        return "sent";
      } catch (e) {
        return "blocked";
      }
    }, { base: relay.base, code: device.user_code, token });
    assert.equal(outcome, "blocked");
    assert.equal((await poll(relay, device.device_code)).body.error, "authorization_pending", "still waiting for the user");
    const direct = await fetch(`${relay.base}/v1/device/${device.user_code}`, { method: "POST", headers: { "content-type": "text/plain", authorization: `Bearer ${token}` }, body: '{"approve":true}' });
    assert.equal(direct.status, 415);
    await context.close();
  });

  test("API keys: create one, copy it once, use it, and revoke it", async () => {
    const { page, context, problems } = await openPage(browser, relay.base, { width: 375, height: 800 });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: relay.base });
    await page.goto(`${relay.base}/console`);
    await page.getByLabel("Email", { exact: true }).fill("dev@example.com");
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("button", { name: "API keys" }).click();
    await until("no keys", async () => (await page.locator("#keys-summary").textContent()) === "No keys yet.");
    await page.getByLabel("Name").fill("ci runner");
    await page.getByLabel("Expires in days").fill("30");
    await page.getByRole("button", { name: "Create key" }).click();
    await until("the new key", () => page.locator("#key-new").isVisible());
    const key = await page.locator("#key-value").textContent();
    assert.match(key, /^rlk_/);
    await page.getByRole("button", { name: "Copy" }).click();
    await until("Copied", async () => (await page.getByRole("button", { name: "Copied" }).count()) === 1);
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key);
    assert.deepEqual(await layoutProblems(page, "keys-created-375"), []);
    // The key works as a bearer token, and is listed by name and prefix only.
    assert.equal((await relay.api("GET", "/v1/me", key)).body.email, "dev@example.com");
    const item = page.locator("#key-list li", { hasText: "ci runner" });
    await until("the listed key", () => item.isVisible());
    const prefix = await item.locator("code").textContent();
    assert.ok(key.startsWith(prefix.replace("…", "")), `${prefix} is the key's start`);
    assert.ok(!(await page.locator("#key-list").textContent()).includes(key), "the list never shows the key");
    // Done: the key leaves the page and is not shown again.
    await page.getByRole("button", { name: "Done" }).click();
    assert.equal(await page.locator("#key-new").isVisible(), false);
    assert.ok(!(await page.content()).includes(key), "the key is gone from the page");
    // Revoke asks first, then the key stops working.
    await item.getByRole("button", { name: "Revoke" }).click();
    await page.locator("dialog#confirm").getByRole("button", { name: "Revoke" }).click();
    await until("no keys again", async () => (await page.locator("#keys-summary").textContent()) === "No keys yet.");
    assert.equal((await relay.api("GET", "/v1/me", key)).status, 401);
    assert.deepEqual(problems, []);
    await context.close();
  });
});
