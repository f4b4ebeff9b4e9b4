"""The official MCP Python SDK (`mcp` from PyPI), unmodified, against
`jmxgate mcp`, the stdio bridge, in each way the SDK connects: `auto` (the
default: `server/discover` at protocol 2026-07-28, what FastMCP's and the
Inspector's modern modes do), a pinned 2026-07-28, and `legacy` (the
`initialize` handshake). The bridge's own session to the gateway is one
protocol; the local client's may be another, and every answer must still
satisfy the local one.

Run by tests/mcp/mcp.rs (which starts the agents and the gateway):
    .venv/bin/python -m unittest -v test_mcp_stdio
"""

import contextlib
import json
import os
import unittest

import requests
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

GATEWAY = os.environ["JMXGATE_URL"]
BIN = os.environ["JMXGATE_BIN"]
OPERATOR = (os.environ["JMXGATE_USER"], os.environ["JMXGATE_PASSWORD"])
VIEWER = (os.environ["JMXGATE_VIEWER_USER"], os.environ["JMXGATE_VIEWER_PASSWORD"])
A = os.environ["JMXGATE_TARGET_A"]
AGENT_A = os.environ["JMXGATE_AGENT_A_URL"]
TYPES = "jmxgate.test:type=Types"

ALL_TOOLS = ["describe_mbean", "execute_operation", "explain", "fleet_summary", "list_targets", "read_attributes",
             "search_mbeans", "write_attribute"]
READ_TOOLS = ["describe_mbean", "explain", "fleet_summary", "list_targets", "read_attributes", "search_mbeans"]
MODES = ["auto", "2026-07-28", "legacy"]


def direct_value(request):
    r = requests.post(AGENT_A, json=request, timeout=30)
    r.raise_for_status()
    answer = r.json()
    assert answer["status"] == 200, answer
    return answer["value"]


@contextlib.asynccontextmanager
async def bridge(who, mode, extra_args=()):
    """A `jmxgate mcp` process for `who`, and an SDK client of it."""
    user, password = who
    env = {"JMXGATE_URL": f"{GATEWAY}/jolokia", "JMXGATE_USER": user, "JMXGATE_PASSWORD": password,
           "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=BIN, args=["mcp", *extra_args], env=env)
    async with Client(params, client_info=Implementation(name="jmxgate-stdio-tests", version="1.0.0"),
                      read_timeout_seconds=60, mode=mode) as client:
        yield client


class McpOverStdioBridge(unittest.IsolatedAsyncioTestCase):
    async def test_every_connect_mode_lists_and_calls_tools(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                async with bridge(OPERATOR, mode) as client:
                    if mode == "legacy":
                        self.assertLess(client.protocol_version, "2026-07-28")
                    else:
                        self.assertEqual(client.protocol_version, "2026-07-28")
                    listed = await client.list_tools()
                    self.assertEqual(sorted(t.name for t in listed.tools), ALL_TOOLS)
                    result = await client.call_tool(
                        "read_attributes", {"target": A, "mbean": TYPES, "attributes": ["Name", "Int"]})
                    self.assertFalse(result.is_error, result)
                    values = result.structured_content["results"][0]["values"]
                    self.assertEqual(values["Name"], direct_value({"type": "read", "mbean": TYPES, "attribute": "Name"}))
                    self.assertEqual(values["Int"], direct_value({"type": "read", "mbean": TYPES, "attribute": "Int"}))
                    # A tool error is a result too, in every mode.
                    failed = await client.call_tool("read_attributes", {"target": A, "mbean": "no such name"})
                    self.assertTrue(failed.is_error)
                    self.assertIn("ObjectName", "\n".join(c.text for c in failed.content if c.type == "text"))

    async def test_each_caller_sees_its_own_tools(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                async with bridge(VIEWER, mode) as client:
                    listed = await client.list_tools()
                    self.assertEqual(sorted(t.name for t in listed.tools), READ_TOOLS)
                    with self.assertRaises(MCPError):
                        await client.call_tool("write_attribute",
                                               {"target": A, "mbean": TYPES, "attribute": "Name", "value": "x"})

    async def test_the_output_schema_holds_for_the_answers(self):
        # The SDK validates structured content against a listed tool's
        # outputSchema (in every mode): a mismatch fails the call.
        async with bridge(OPERATOR, "auto") as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            for name in READ_TOOLS:
                self.assertIsNotNone(listed[name].output_schema, name)
            described = await client.call_tool("describe_mbean", {"target": A, "mbean": TYPES})
            self.assertFalse(described.is_error, described)
            listed_names = {a["name"] for a in described.structured_content["attributes"]}
            self.assertIn("Name", listed_names)


if __name__ == "__main__":
    unittest.main()
