#!/usr/bin/env python3
"""Suggestion latency from history: N sequential POST /v1/suggest over one keep-alive connection.

Usage: scripts/suggest_latency.py HOST:PORT [N]   (open mode, or RELAY_TOKEN for a Bearer token)
Prints p50/p90/p99 in milliseconds, client-side (includes the client's own overhead).
"""
import http.client, json, os, sys, time

host, port = sys.argv[1].split(":")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
recent = [f"cargo test -p crate{i} --release" for i in range(150)] + [
    "git status", "git commit -m wip", "git push origin main", "docker compose up -d", "kubectl get pods",
] * 10
body = json.dumps({"partial": "git pu", "cwd": "/home/me/proj", "recent": recent})
headers = {"content-type": "application/json"}
if os.environ.get("RELAY_TOKEN"):
    headers["authorization"] = "Bearer " + os.environ["RELAY_TOKEN"]
conn = http.client.HTTPConnection(host, int(port))
samples = []
for i in range(n + 100):
    t = time.perf_counter()
    conn.request("POST", "/v1/suggest", body, headers)
    r = conn.getresponse()
    data = r.read()
    dt = (time.perf_counter() - t) * 1000
    assert r.status == 200 and json.loads(data)["suggestion"] == "git push origin main", data
    if i >= 100:  # warm-up excluded
        samples.append(dt)
samples.sort()
pct = lambda p: samples[min(len(samples) - 1, int(len(samples) * p))]
print(f"suggest from history: {n} requests, {len(recent)} recent lines, body {len(body)} bytes")
print(f"p50 {pct(0.50):.3f} ms  p90 {pct(0.90):.3f} ms  p99 {pct(0.99):.3f} ms  max {samples[-1]:.3f} ms")
