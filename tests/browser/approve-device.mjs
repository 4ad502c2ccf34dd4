// Approves an agent's sign-in in Chromium as its user would: opens the URL the agent handed to
// `$BROWSER` (Relay's /device?user_code=…), signs in with Email and Password, checks the code and
// the client it shows, clicks Approve and waits for "Approved". Not a test of its own (the runner
// takes *.test.mjs): crates/relay/tests/client/claude_login.rs runs it between the real Claude
// Code's `/login` and its poll for the tokens.
//
//   node approve-device.mjs URL EMAIL  (the password on standard input; screenshots in $SCREENSHOTS)
//
// Prints one JSON line: what the page showed ({code, client, agent, account, title, text,
// problems}); exits 1 with the reason when a step fails.
import { readFileSync } from "node:fs";
import { launch, layoutProblems, openPage, until } from "./harness.mjs";

const [url, email] = process.argv.slice(2);
const password = readFileSync(0, "utf8").split("\n")[0];
const browser = await launch();
try {
  const { page, context, problems } = await openPage(browser, new URL(url).origin, { width: 1280, height: 800 });
  await page.goto(url);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await until("the code", async () => ((await page.locator("#confirm-code").textContent()) || "").length > 0);
  const shown = {
    code: await page.locator("#confirm-code").textContent(),
    client: await page.locator("#confirm-client").textContent(),
    agent: await page.locator("#confirm-agent").textContent(),
    account: await page.locator("#confirm-account").textContent(),
  };
  problems.push(...(await layoutProblems(page, "claude-code-device-confirm")));
  await page.getByRole("button", { name: "Approve" }).click();
  await until("Approved", async () => (await page.locator("#done-title").textContent()) === "Approved");
  shown.title = await page.locator("#done-title").textContent();
  shown.text = await page.locator("#done-text").textContent();
  problems.push(...(await layoutProblems(page, "claude-code-device-approved")));
  shown.problems = problems;
  console.log(JSON.stringify(shown));
  await context.close();
} catch (e) {
  console.error(`approve-device: ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
