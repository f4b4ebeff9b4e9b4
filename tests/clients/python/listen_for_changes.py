"""Listens for changes (`subscriptions/listen`, protocol 2026-07-28) with the
official MCP Python SDK through jmxgate's /mcp, as $JMXGATE_USER (Basic):
to the resources $JMXGATE_WATCH names (comma-separated URIs) and to the
resource list. Prints `listening <the URIs the gateway accepted, as JSON>`
once acknowledged, then one JSON line per event, and ends after
$JMXGATE_EVENTS events. Run by tests/mcp/mcp.rs, which makes the changes.
"""

import asyncio
import base64
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


async def main():
    user, password = os.environ["JMXGATE_USER"], os.environ["JMXGATE_PASSWORD"]
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    watch = os.environ["JMXGATE_WATCH"].split(",")
    wanted = int(os.environ["JMXGATE_EVENTS"])
    async with httpx2.AsyncClient(headers={"Authorization": auth}, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(os.environ["JMXGATE_URL"] + "/mcp", http_client=http)
        async with Client(transport, client_info=Implementation(name="jmxgate-listen-test", version="1.0.0"),
                          read_timeout_seconds=300) as client:
            if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                sys.exit(f"subscriptions/listen needs 2026-07-28, got {client.protocol_version}")
            async with client.listen(resource_subscriptions=watch, resources_list_changed=True) as sub:
                honored = sorted(sub.honored.resource_subscriptions or [])
                print("listening", json.dumps(honored), "list" if sub.honored.resources_list_changed else "", flush=True)
                seen = 0
                async for event in sub:
                    print(json.dumps({"event": type(event).__name__, "uri": getattr(event, "uri", None)}), flush=True)
                    seen += 1
                    if seen >= wanted:
                        return


asyncio.run(main())
