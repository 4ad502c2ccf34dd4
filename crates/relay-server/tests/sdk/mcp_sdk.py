"""Drives Relay's /mcp with the official Python MCP SDK (`mcp` on PyPI) and prints what it saw.

Usage: mcp_sdk.py MODE  (MODE: `legacy` = initialize at the SDK's newest handshake version,
`auto` = server/discover at 2026-07-28). Environment: RELAY_URL, RELAY_TOKEN (optional),
RELAY_PROJECT, MCP_CLIENT_NAME. Prints one JSON object on stdout; tests/api/mcp_sdk.rs checks it.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation


def content_text(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def main(mode):
    headers = {"x-relay-project": os.environ["RELAY_PROJECT"]}
    if os.environ.get("RELAY_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["RELAY_TOKEN"]
    out = {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(os.environ["RELAY_URL"] + "/mcp", http_client=http)
        info = Implementation(name=os.environ.get("MCP_CLIENT_NAME", "sdk-test"), version="1.0")
        async with Client(transport, mode=mode, client_info=info, cache=None) as client:
            out["protocol_version"] = client.protocol_version
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            out["descriptions"] = {t.name: t.description for t in tools.tools}
            saved = await client.call_tool("remember", {"note": "build with cargo build --release (" + mode + ")"})
            out["remember"] = {"error": saved.is_error, "text": content_text(saved), "structured": saved.structured_content}
            await client.call_tool("remember", {"note": "tests need PostgreSQL on port 5432 (" + mode + ")"})
            recalled = await client.call_tool("recall", {})
            out["recall"] = {"error": recalled.is_error, "structured": recalled.structured_content}
            found = await client.call_tool("search_notes", {"query": "PostgreSQL port", "limit": 5})
            out["search"] = {"error": found.is_error, "structured": found.structured_content}
            note_id = saved.structured_content["id"]
            gone = await client.call_tool("forget", {"id": note_id})
            out["forget"] = {"error": gone.is_error, "text": content_text(gone)}
            again = await client.call_tool("forget", {"id": note_id})
            out["forget_again"] = {"error": again.is_error, "text": content_text(again)}
            empty = await client.call_tool("remember", {"note": "   "})
            out["remember_empty"] = {"error": empty.is_error, "text": content_text(empty)}
            try:
                await client.call_tool("launch_missiles", {})
                out["unknown_tool"] = "answered"
            except Exception as e:  # the SDK raises the JSON-RPC error
                out["unknown_tool"] = str(e)
            after = await client.call_tool("recall", {})
            out["recall_after"] = after.structured_content
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
