// Shared by the browser tests: start the real relay binary on a free port, launch Debian's
// Chromium through playwright-core, and record anything that must fail a test (a console error,
// an uncaught exception, a request to another host).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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

/// Where screenshots go: `$SCREENSHOTS`, else `target/browser-screenshots` of the repository.
export const SCREENSHOTS = process.env.SCREENSHOTS || new URL("../../target/browser-screenshots", import.meta.url).pathname;

/// Takes a full-page screenshot (kept for a person to look at) and measures the page's laid-out
/// boxes: every visible text or control must sit inside the window's width, no two of them may
/// overlap, no text may be cut off by its own box, and no word may stand one letter per line.
/// Returns the problems found, each naming the elements; `[]` when the layout is sound.
export async function layoutProblems(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  return page.evaluate(() => {
    const problems = [];
    const width = document.documentElement.clientWidth;
    const describe = (e) => {
      const id = e.id ? `#${e.id}` : "";
      const cls = e.classList.length ? "." + [...e.classList].join(".") : "";
      const text = (e.textContent || e.value || "").trim().replace(/\s+/g, " ").slice(0, 30);
      return `${e.tagName.toLowerCase()}${id}${cls} "${text}"`;
    };
    const visible = (e) => {
      const r = e.getBoundingClientRect();
      if (r.width < 1 || r.height < 1) return false;
      const s = getComputedStyle(e);
      return s.visibility !== "hidden" && s.display !== "none" && Number(s.opacity) > 0;
    };
    // The boxes a reader sees: elements with text of their own, and controls.
    const leaves = [...document.querySelectorAll("body *")].filter((e) => {
      if (e.closest("dialog:not([open]), [hidden], script, style, datalist, option, title, svg *")) return false;
      if (!visible(e)) return false;
      if (["INPUT", "SELECT", "TEXTAREA", "BUTTON", "svg", "IMG"].includes(e.tagName)) return true;
      return [...e.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    });
    for (const e of leaves) {
      const r = e.getBoundingClientRect();
      if (r.left < -0.5 || r.right > width + 0.5) problems.push(`outside the window (${Math.round(r.left)}..${Math.round(r.right)} of ${width}px): ${describe(e)}`);
      // Text cut off by its own box (overflow hidden or clip), not by a scroll container.
      const s = getComputedStyle(e);
      if (s.overflowX !== "visible" && !["INPUT", "SELECT", "TEXTAREA"].includes(e.tagName) && e.scrollWidth > e.clientWidth + 1) {
        problems.push(`text cut off (${e.scrollWidth}px in ${e.clientWidth}px): ${describe(e)}`);
      }
      // One letter per line: a text of several letters broken into nearly as many lines.
      for (const n of e.childNodes) {
        const text = n.nodeType === Node.TEXT_NODE ? n.textContent.trim() : "";
        if (text.length < 4) continue;
        const range = document.createRange();
        range.selectNodeContents(n);
        const lines = new Set([...range.getClientRects()].filter((q) => q.width > 0).map((q) => Math.round(q.top))).size;
        if (lines > 1 && text.length / lines < 3) problems.push(`${lines} lines for ${text.length} letters: ${describe(e)}`);
      }
    }
    for (let i = 0; i < leaves.length; i += 1) {
      for (let j = i + 1; j < leaves.length; j += 1) {
        const [a, b] = [leaves[i], leaves[j]];
        if (a.contains(b) || b.contains(a)) continue;
        // Per line box, so that two words of one paragraph are not taken for overlapping.
        for (const p of a.getClientRects()) {
          for (const q of b.getClientRects()) {
            const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
            const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
            if (w > 1 && h > 1) problems.push(`overlap ${Math.round(w)}x${Math.round(h)}px: ${describe(a)} and ${describe(b)}`);
          }
        }
      }
    }
    return problems;
  });
}

/// The horizontal centre of an element against the window's, in pixels (0 when centred).
export async function offCentre(page, selector) {
  return page.evaluate((sel) => {
    const r = document.querySelector(sel).getBoundingClientRect();
    return Math.abs((r.left + r.right) / 2 - document.documentElement.clientWidth / 2);
  }, selector);
}
