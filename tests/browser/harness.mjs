// Shared by the browser tests: start the real relay binary on a free port, launch Debian's
// Chromium through playwright-core, and record anything that must fail a test (a console error,
// an uncaught exception, a request to another host).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const RELAY_BIN = process.env.RELAY_BIN || new URL("../../target/debug/relay", import.meta.url).pathname;
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
export const PASSWORD = "correct horse battery";

/// Starts `relay serve` with a fresh SQLite store; `auth: false` is open mode.
export async function startRelay({ auth = true, signup = "open" } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "relay-browser-"));
  const db = `sqlite://${dir}/relay.db`;
  let config = `bind = "127.0.0.1:0"\n[memory]\nurl = "${db}"\n`;
  if (auth) {
    // Cheap Argon2 costs keep signins fast in a debug build; production keeps the defaults.
    config += `[auth]\nurl = "${db}"\nsignup = "${signup}"\ndefault_limit = 100\nargon2_memory_kib = 256\nargon2_iterations = 1\n`;
  }
  writeFileSync(join(dir, "relay.toml"), config);
  const env = { ...process.env, RELAY_CONFIG: join(dir, "relay.toml"), RUST_LOG: "info" };
  const child = spawn(RELAY_BIN, ["serve"], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`relay did not start within 30 s:\n${log}`)), 30_000);
    const onData = (chunk) => {
      log += chunk;
      const m = log.match(/listening on (127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(`http://${m[1]}`); }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`relay exited with ${code}:\n${log}`)); });
  });
  return {
    base,
    /// `relay users …` against the same configuration, the password on standard input.
    users(args, input = "") {
      const r = spawnSync(RELAY_BIN, ["users", ...args], { cwd: dir, env, input });
      if (r.status !== 0) throw new Error(`relay users ${args.join(" ")}: ${r.stderr}`);
      return String(r.stdout);
    },
    async api(method, path, token, body) {
      const headers = {};
      if (token) headers.authorization = `Bearer ${token}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: await res.json().catch(() => null) };
    },
    async signup(email) {
      const r = await this.api("POST", "/v1/auth/signup", null, { email, password: PASSWORD });
      if (r.status !== 200) throw new Error(`signup ${email}: ${JSON.stringify(r)}`);
      return r.body.token;
    },
    async stop() {
      child.removeAllListeners("exit");
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await gone;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function launch() {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}

/// A fresh page whose problems are collected: console errors, page errors, foreign requests.
export async function openPage(browser, base, viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const origin = new URL(base).origin;
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
  page.on("request", (r) => {
    const url = new URL(r.url());
    if (url.protocol !== "data:" && url.protocol !== "blob:" && url.origin !== origin) {
      problems.push(`request to another host: ${r.url()}`);
    }
  });
  return { page, context, problems };
}

/// Polls `check` until it holds or the deadline passes; never a fixed sleep.
export async function until(what, check, ms = 10_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
