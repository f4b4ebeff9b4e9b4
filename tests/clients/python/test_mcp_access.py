"""Just-in-time access through MCP with the official Python SDK (`mcp` from
PyPI), unmodified: the assistant asks for a role and checks its request; a
person approves over the HTTP API; the grant then holds on /mcp. And four-eyes:
an operation refused with jmxgate.ApprovalRequired names its request, which the
assistant can follow, and runs once approved.

Run by tests/access/access_requests.rs (which starts the agents and the gateway):
    .venv/bin/python -m unittest -v test_mcp_access
"""

import base64
import contextlib
import json
import os
import re
import unittest

import httpx2
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

GATEWAY = os.environ["JMXGATE_URL"]
PASSWORD = os.environ["JMXGATE_PASSWORD"]
AGENT = os.environ["JMXGATE_AGENT_ORDERS_URL"]
LOGGING = "java.util.logging:type=Logging"


def basic(user):
    return "Basic " + base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()


@contextlib.asynccontextmanager
async def connect(user):
    async with httpx2.AsyncClient(headers={"Authorization": basic(user)},
                                  timeout=httpx2.Timeout(30, read=120)) as http:
        transport = streamable_http_client(f"{GATEWAY}/mcp", http_client=http)
        async with Client(transport, client_info=Implementation(name="jmxgate-access-tests", version="1.0.0"),
                          read_timeout_seconds=120) as client:
            await client.list_tools()
            yield client


def approve(user, request_id):
    """A person approves, over the HTTP API (no tool approves)."""
    r = requests.post(f"{GATEWAY}/jmxgate/access/requests/{request_id}/approve", json={"comment": "ok"},
                      headers={"Authorization": basic(user)}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def level_on_agent():
    r = requests.post(AGENT, json={"type": "exec", "mbean": LOGGING, "operation": "getLoggerLevel",
                                   "arguments": ["global"]}, timeout=30)
    return r.json()["value"]


def text_of(result):
    return "\n".join(c.text for c in result.content if c.type == "text")


class AccessThroughMcp(unittest.IsolatedAsyncioTestCase):
    async def ok(self, client, name, arguments):
        r = await client.call_tool(name, arguments)
        self.assertFalse(r.is_error, f"{name} {arguments} failed: {text_of(r)}")
        self.assertEqual(json.loads(text_of(r)), r.structured_content)
        return r.structured_content

    async def error(self, client, name, arguments):
        r = await client.call_tool(name, arguments)
        self.assertTrue(r.is_error, f"{name} {arguments} should fail: {r}")
        return text_of(r)

    async def test_the_assistant_asks_a_person_approves(self):
        gc = {"target": "orders-1", "mbean": "java.lang:type=Memory", "operation": "gc"}
        async with connect("dev") as dev, connect("lead1") as lead:
            tools = {t.name for t in (await dev.list_tools()).tools}
            self.assertIn("request_access", tools)
            self.assertIn("access_request_status", tools)
            # A reviewer's assistant gets no tool to ask or approve with.
            lead_tools = {t.name for t in (await lead.list_tools()).tools}
            self.assertNotIn("request_access", lead_tools)
            self.assertFalse([t for t in lead_tools | tools if "approve" in t])

            # Read-only until approved: no execute_operation offered.
            self.assertNotIn("execute_operation", tools)
            bad = await self.error(dev, "request_access", {"role": "ops", "duration": "soon"})
            self.assertIn("duration", bad)
            refused = await self.error(dev, "request_access", {"role": "ops", "duration": "2h", "reason": "x"})
            self.assertIn("max_duration", refused)

            asked = await self.ok(dev, "request_access",
                                  {"role": "ops", "duration": "30m", "targets": "orders-*", "reason": "INC-77"})
            self.assertEqual(asked["state"], "pending")
            self.assertIn("approver", asked["next"])
            status = await self.ok(dev, "access_request_status", {"id": asked["id"]})
            self.assertEqual(status["state"], "pending")

            # The role needs two leads.
            approve("lead1", asked["id"])
            approve("lead2", asked["id"])
            status = await self.ok(dev, "access_request_status", {"id": asked["id"]})
            self.assertEqual(status["state"], "approved")
            self.assertEqual(sorted(r["reviewer"] for r in status["reviews"]), ["lead1", "lead2"])

        # A new session sees the grant: execute_operation is offered and runs.
        async with connect("dev") as dev:
            tools = {t.name for t in (await dev.list_tools()).tools}
            self.assertIn("execute_operation", tools)
            await self.ok(dev, "execute_operation", gc)
            mine = await self.ok(dev, "access_request_status", {})
            self.assertIn(asked["id"], [r["id"] for r in mine["requests"]])

    async def test_an_operation_waiting_for_two_approvals_runs_once(self):
        item = {"target": "orders-1", "mbean": LOGGING, "operation": "setLoggerLevel",
                "arguments": ["global", "WARNING"]}
        async with connect("oncall") as oncall:
            tools = {t.name for t in (await oncall.list_tools()).tools}
            self.assertIn("access_request_status", tools)
            self.assertNotIn("request_access", tools)
            refused = await self.error(oncall, "execute_operation", item)
            self.assertIn("jmxgate.ApprovalRequired", refused)
            request_id = re.search(r"ar-[0-9a-f]+", refused).group(0)
            status = await self.ok(oncall, "access_request_status", {"id": request_id})
            self.assertEqual(status["kind"], "item")
            self.assertEqual(status["item"]["arguments"], ["global", "WARNING"])
            self.assertNotEqual(level_on_agent(), "WARNING")

            approve("lead1", request_id)
            self.assertIn("jmxgate.ApprovalRequired", await self.error(oncall, "execute_operation", item))
            approve("lead2", request_id)
            await self.ok(oncall, "execute_operation", item)
            self.assertEqual(level_on_agent(), "WARNING")
            again = await self.error(oncall, "execute_operation", item)
            self.assertIn("jmxgate.ApprovalRequired", again)
            self.assertNotIn(request_id, again)


if __name__ == "__main__":
    unittest.main()
