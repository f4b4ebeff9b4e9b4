"""FastMCP 4.2.3 (PyPI), unmodified, in its default connect mode, against
`jmxgate mcp`, the stdio bridge. Its default mode discovers protocol
2026-07-28, where every answer needs a `resultType`: before the bridge gave
one, every tools/list and tools/call failed here.

Run by tests/mcp/mcp.rs (which starts the agents and the gateway):
    .venv/bin/python -m unittest -v test_fastmcp_stdio
"""

import json
import os
import unittest
import urllib.request

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

GATEWAY = os.environ["JMXGATE_URL"]
BIN = os.environ["JMXGATE_BIN"]
OPERATOR = (os.environ["JMXGATE_USER"], os.environ["JMXGATE_PASSWORD"])
A = os.environ["JMXGATE_TARGET_A"]
AGENT_A = os.environ["JMXGATE_AGENT_A_URL"]
TYPES = "jmxgate.test:type=Types"
ALL_TOOLS = ["describe_mbean", "execute_operation", "explain", "fleet_summary", "list_targets", "read_attributes",
             "search_mbeans", "write_attribute"]


def direct_value(request):
    r = urllib.request.Request(AGENT_A, data=json.dumps(request).encode(),
                               headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=30) as answer:
        value = json.load(answer)
    assert value["status"] == 200, value
    return value["value"]


def client():
    user, password = OPERATOR
    env = {"JMXGATE_URL": GATEWAY, "JMXGATE_USER": user, "JMXGATE_PASSWORD": password,
           "PATH": os.environ.get("PATH", "")}
    return Client(StdioTransport(command=BIN, args=["mcp"], env=env, keep_alive=False))


class FastMcpThroughTheBridge(unittest.IsolatedAsyncioTestCase):
    async def test_default_mode_lists_and_calls(self):
        async with client() as c:
            self.assertEqual(c.protocol_version, "2026-07-28")
            tools = await c.list_tools()
            self.assertEqual(sorted(t.name for t in tools), ALL_TOOLS)
            result = await c.call_tool("read_attributes", {"target": A, "mbean": TYPES, "attributes": ["Name"]})
            self.assertEqual(result.structured_content["results"][0]["values"]["Name"],
                             direct_value({"type": "read", "mbean": TYPES, "attribute": "Name"}))
            with self.assertRaises(ToolError) as refused:
                await c.call_tool("describe_mbean", {"target": A, "mbean": "not a name"})
            self.assertIn("ObjectName", str(refused.exception))


if __name__ == "__main__":
    unittest.main()
