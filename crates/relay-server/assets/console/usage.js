// The console's Usage view: tokens per UTC day for the last 30 days (uncached input, cached input,
// output), drawn here as inline SVG (no library, nothing from another host), the totals and cost,
// a table per model and, for admins, every account's per user (labelled as such, below the
// caller's own). Uses `api`, `el`, `cell`, `$` and `state` of console.js.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const USAGE_DAYS = 30;
const DAY_MS = 86_400_000;
const SERIES = [
  ["uncached", "Uncached input", (r) => Math.max(r.input_tokens - r.cached_input_tokens, 0)],
  ["cached", "Cached input", (r) => r.cached_input_tokens],
  ["output", "Output", (r) => r.output_tokens],
];

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children) node.append(c);
  return node;
}

const utcDay = (ms) => new Date(ms).toISOString().slice(0, 10);
const count = (n) => Number(n).toLocaleString("en-US");
const usd = (c) => (c === null || c === undefined ? "no prices" : "$" + c.toFixed(4));

async function loadUsage() {
  const now = Date.now();
  const range = `from=${utcDay(now - (USAGE_DAYS - 1) * DAY_MS)}&to=${utcDay(now)}`;
  const [byDay, byModel] = await Promise.all([
    api("GET", `/v1/usage?${range}&group_by=day`),
    api("GET", `/v1/usage?${range}&group_by=model`),
  ]);
  drawChart(byDay, now);
  const t = byDay.totals;
  $("usage-legs").textContent = count(t.legs);
  $("usage-input").textContent = count(t.input_tokens);
  $("usage-cached").textContent = count(t.cached_input_tokens);
  $("usage-output").textContent = count(t.output_tokens);
  $("usage-cost").textContent = usd(t.cost_usd);
  fillTable($("usage-models"), byModel.rows);
  const admin = state.me && state.me.role === "admin";
  $("usage-users-box").hidden = !admin;
  if (admin) fillTable($("usage-users"), (await api("GET", `/v1/admin/usage?${range}&group_by=user`)).rows);
}

/// One stacked bar per day, oldest on the left; days without legs stay empty.
function drawChart(report, now) {
  const byKey = new Map(report.rows.map((r) => [r.key, r]));
  const days = [];
  for (let i = USAGE_DAYS - 1; i >= 0; i -= 1) days.push(utcDay(now - i * DAY_MS));
  const totals = days.map((d) => {
    const r = byKey.get(d);
    return r ? SERIES.reduce((s, [, , f]) => s + f(r), 0) : 0;
  });
  const max = Math.max(1, ...totals);
  const [w, h, pad] = [600, 180, 20];
  const slot = w / USAGE_DAYS;
  const chart = svg("svg", { id: "usage-svg", viewBox: `0 0 ${w} ${h + pad}`, role: "img",
    "aria-label": `Tokens per day, ${days[0]} to ${days[days.length - 1]}` });
  chart.append(svg("line", { x1: 0, y1: h, x2: w, y2: h, class: "axis" }));
  days.forEach((day, i) => {
    const r = byKey.get(day);
    if (!r) return;
    let y = h;
    for (const [cls, label, f] of SERIES) {
      const n = f(r);
      if (n <= 0) continue;
      const bar = Math.max(1, (n / max) * (h - 4));
      y -= bar;
      chart.append(svg("rect", { x: i * slot + 2, y, width: slot - 4, height: bar, class: `bar ${cls}` },
        svg("title", {}, `${day}: ${count(n)} ${label.toLowerCase()} tokens`)));
    }
  });
  chart.append(svg("text", { x: 0, y: h + pad - 4, class: "tick" }, days[0]));
  chart.append(svg("text", { x: w, y: h + pad - 4, class: "tick end" }, days[days.length - 1]));
  $("usage-chart").replaceChildren(chart);
}

function fillTable(body, rows) {
  body.replaceChildren(...rows.map((r) => el("tr", {},
    el("th", { scope: "row", textContent: r.key === null ? "(no project)" : r.key }),
    cell("td", "Legs", count(r.legs)),
    cell("td", "Input", count(r.input_tokens)),
    cell("td", "Cached", count(r.cached_input_tokens)),
    cell("td", "Output", count(r.output_tokens)),
    cell("td", "Cost", usd(r.cost_usd)))));
  if (rows.length === 0) body.append(el("tr", {}, el("td", { colSpan: 6, className: "muted", textContent: "No legs in the last 30 days." })));
}
