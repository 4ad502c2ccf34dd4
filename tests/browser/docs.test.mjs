// The reference page in real Chromium: Redoc, embedded, shows every operation of /openapi.json,
// renders the markdown, and loads nothing from another host.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { launch, openPage, startRelay, until } from "./harness.mjs";

let browser;
let relay;
before(async () => { browser = await launch(); relay = await startRelay(); });
after(async () => { await browser?.close(); await relay?.stop(); });

test("the reference page shows every operation, grouped by area, with examples", async () => {
  const doc = (await relay.api("GET", "/openapi.json")).body;
  const { page, context, problems } = await openPage(browser, relay.base);
  await page.goto(`${relay.base}/docs`);
  await until("Redoc to draw the page", () => page.locator("[data-section-id^='operation/'], [data-section-id*='/operation/']").first().isVisible(), 30_000);

  const sections = await page.locator("[data-section-id]").evaluateAll((els) => els.map((e) => e.getAttribute("data-section-id")));
  const missing = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of ["get", "post", "put", "patch", "delete"]) {
      const op = item[method];
      if (!op) continue;
      const id = `tag/${op.tags[0]}/operation/${op.operationId}`;
      if (!sections.includes(id)) missing.push(`${method.toUpperCase()} ${path} (${id})`);
    }
  }
  assert.deepEqual(missing, [], "operations the page does not show");

  // Grouped by area, in the document's order.
  for (const tag of ["accounts", "agent", "memory", "suggest", "operations"]) {
    assert.ok(sections.includes(`tag/${tag}`), `no group ${tag}`);
  }
  // Markdown rendered: backticked codes become <code>, not literal backticks.
  const text = await page.locator("#redoc").innerText();
  assert.ok(!text.includes("`signup_closed`"), "literal backticks left in the page");
  assert.ok(await page.locator("code", { hasText: "signup_closed" }).count() > 0);
  // Titles and the menu show plain words: Redoc does not render markdown there.
  const titles = await page.locator("#redoc h2").allInnerTexts();
  assert.deepEqual(titles.filter((t) => t.includes("`")), [], "titles with literal backticks");
  assert.ok(titles.includes("Every account's usage; group_by=user keys rows by email. Admins only."), "a title from a summary with code");
  const menu = await page.locator("#redoc .menu-content").innerText();
  assert.ok(!menu.includes("`"), "menu entries with literal backticks");
  // A request sample (a curl line; with a body, also the payload example) and response samples
  // for every operation. Redoc draws only the selected tab:
  // the curl line when it comes first, else the payload.
  const panels = await page.locator("[data-section-id*='/operation/']").evaluateAll((els) =>
    els.map((e) => [e.getAttribute("data-section-id"), e.innerText]));
  const bare = panels
    .filter(([, t]) => !(t.includes("Request samples") && t.includes("Response samples") && (/\bcurl\b/.test(t) || t.includes("Payload"))))
    .map(([id]) => id);
  assert.deepEqual(bare, [], "operations without request and response samples");
  assert.ok(text.includes("Use pnpm, not npm"), "the remember body's own example");
  assert.ok(text.includes("curl -X GET 'http://127.0.0.1:7711/v1/me'"), "a curl line");
  // The leg's NDJSON events as a sample stream.
  assert.ok(text.includes('"event":"start"'), "no NDJSON sample stream");
  assert.deepEqual(problems, []);
  await context.close();
});
