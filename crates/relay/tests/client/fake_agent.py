#!/usr/bin/env python3
"""A stand-in for `claude` and `codex` in the launcher tests (tests/client/launch.rs).

Installed on PATH under both names. It records its argv and the environment it was given in
$FAKE_RECORD (JSON), and with $FAKE_NOTE set it does what the real agent does with the MCP server
it was handed: reads the server's URL and headers from what it was launched with (Claude Code's
--mcp-config file, Codex's -c overrides), initialises a session and calls `remember`.
"""

import json
import os
import stat
import sys
import tomllib
import urllib.request

name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
record = {
    "name": name,
    "argv": args,
    "env": {
        k: os.environ.get(k)
        for k in [
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_CUSTOM_HEADERS",
            "ANTHROPIC_API_KEY",
            "RELAY_TOKEN",
        ]
    },
}

if name == "claude":
    path = args[args.index("--mcp-config") + 1]
    record["mcp_config_path"] = path
    record["mcp_config_mode"] = oct(stat.S_IMODE(os.stat(path).st_mode))
    with open(path) as f:
        config = json.load(f)
    record["mcp_config"] = config
    server = config["mcpServers"]["relay"]
    url, headers, client = server["url"], dict(server["headers"]), "claude-code"
else:
    overrides, it = {}, iter(args)
    for a in it:
        if a == "-c":
            key, _, value = next(it).partition("=")
            overrides[key] = tomllib.loads("v = " + value)["v"]
    record["overrides"] = overrides
    server = overrides["mcp_servers.relay"]
    url, headers, client = server["url"], dict(server["http_headers"]), "codex-mcp-client"
    headers["Authorization"] = "Bearer " + os.environ[server["bearer_token_env_var"]]


def post(body, session=None):
    h = {**headers, "content-type": "application/json", "accept": "application/json, text/event-stream"}
    if session:
        h["mcp-session-id"] = session
        h["mcp-protocol-version"] = "2025-06-18"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=h, method="POST")
    with urllib.request.urlopen(req) as r:
        return r.headers.get("mcp-session-id"), r.read().decode()


note = os.environ.get("FAKE_NOTE")
if note:
    session, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    _, answer = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "remember", "arguments": {"note": note}}}, session)
    record["remember"] = answer

with open(os.environ["FAKE_RECORD"], "w") as f:
    json.dump(record, f)
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
