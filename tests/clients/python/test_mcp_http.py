"""The official MCP Python SDK (`mcp` from PyPI), unmodified, against jmxgate's
MCP server over Streamable HTTP at $JMXGATE_URL/mcp, with HTTP Basic auth.

Run by tests/mcp/mcp.rs (which starts the agents and the gateway):
    .venv/bin/python -m unittest -v test_mcp_http

Every expected value comes from the agent itself (asked directly) or from
the gateway's own /jolokia endpoint as the same user, so a tool that changes
an answer fails here.
"""

import asyncio
import base64
import contextlib
import functools
import json
import os
import unittest
import urllib.parse
import warnings

import httpx2
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation, ResourceTemplateReference
from mcp_types.jsonrpc import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

GATEWAY = os.environ["JMXGATE_URL"]
MCP_URL = f"{GATEWAY}/mcp"
VERSION = os.environ["JMXGATE_VERSION"]
OPERATOR = (os.environ["JMXGATE_USER"], os.environ["JMXGATE_PASSWORD"])
VIEWER = (os.environ["JMXGATE_VIEWER_USER"], os.environ["JMXGATE_VIEWER_PASSWORD"])
A = os.environ["JMXGATE_TARGET_A"]
B = os.environ["JMXGATE_TARGET_B"]
DOWN = os.environ["JMXGATE_TARGET_DOWN"]
LABELS = json.loads(os.environ["JMXGATE_TARGET_LABELS"])
LIVE = os.environ["JMXGATE_SELECTOR_LIVE"]
AGENT = {A: os.environ["JMXGATE_AGENT_A_URL"], B: os.environ["JMXGATE_AGENT_B_URL"]}

TYPES = "jmxgate.test:type=Types"
OPS = "jmxgate.test:type=Operations"
COUNTER = "jmxgate.test:type=Counter"

ALL_TOOLS = ["describe_mbean", "execute_operation", "explain", "fleet_summary", "list_targets", "read_attributes",
             "search_mbeans", "write_attribute"]
READ_TOOLS = ["describe_mbean", "explain", "fleet_summary", "list_targets", "read_attributes", "search_mbeans"]


def basic(who):
    user, password = who
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def direct(target, request):
    """A target's agent's own answer (not through the gateway)."""
    r = requests.post(AGENT[target], json=request, timeout=30)
    r.raise_for_status()
    return r.json()


def direct_value(target, request):
    answer = direct(target, request)
    assert answer["status"] == 200, answer
    return answer["value"]


def via_jolokia(who, target, request):
    """The gateway's /jolokia answer (proxy mode) to one request, as `who`."""
    r = requests.post(f"{GATEWAY}/jolokia", json={**request, "target": {"url": target}},
                      headers={"Authorization": basic(who)}, timeout=30)
    assert r.status_code == 200, r.status_code
    return r.json()


def explained(who, item):
    """The gateway's /jmxgate/explain entry for one item, as `who`."""
    r = requests.post(f"{GATEWAY}/jmxgate/explain", json=item, headers={"Authorization": basic(who)}, timeout=30)
    assert r.status_code == 200, r.status_code
    return r.json()


def invocations(target):
    """How many operations the agent's Operations MBean has run (all callers)."""
    return direct_value(target, {"type": "read", "mbean": COUNTER, "attribute": "Invocations"})


@contextlib.asynccontextmanager
async def connect(who, statuses=None, headers=None, mode="auto", **client_options):
    """An SDK client of the gateway's /mcp, authenticating with a Basic
    header; the HTTP statuses it gets are appended to `statuses`;
    `client_options` go to the SDK's Client (a logging callback, say)."""

    async def record(response):
        if statuses is not None:
            statuses.append(response.status_code)

    all_headers = {} if who is None else {"Authorization": basic(who)}
    all_headers.update(headers or {})
    async with httpx2.AsyncClient(headers=all_headers, timeout=httpx2.Timeout(30, read=120),
                                  event_hooks={"response": [record]}) as http:
        transport = streamable_http_client(MCP_URL, http_client=http)
        async with Client(transport, client_info=Implementation(name="jmxgate-mcp-tests", version="1.0.0"),
                          read_timeout_seconds=120, mode=mode, **client_options) as client:
            yield client


def text_of(result):
    return "\n".join(c.text for c in result.content if c.type == "text")


def result_for(results, target):
    found = [r for r in results if r["target"] == target]
    assert len(found) == 1, f"one result for {target} in {results}"
    return found[0]


def by_key(items):
    return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))


def with_clients(test):
    """Runs a test with `self.operator` and `self.viewer` connected. In the
    test's own task: the SDK's (anyio's) scopes must be left in the task
    that entered them, and asyncSetUp/asyncTearDown run in tasks of their
    own."""

    @functools.wraps(test)
    async def run(self):
        async with connect(OPERATOR) as operator, connect(VIEWER) as viewer:
            self.operator, self.viewer = operator, viewer
            # Output schemas are checked by the SDK for tools it has listed.
            await operator.list_tools()
            await viewer.list_tools()
            await test(self)

    return run


class McpOverStreamableHttp(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls):
        # Writable attributes back to their initial values (the agents may
        # have served an earlier run).
        for t in (A, B):
            direct_value(t, {"type": "exec", "mbean": OPS, "operation": "reset"})

    async def ok(self, client, name, arguments):
        """The structured content of a successful tool result; its text
        content must be the same JSON."""
        r = await client.call_tool(name, arguments)
        self.assertFalse(r.is_error, f"{name} {arguments} failed: {text_of(r)}")
        self.assertIsInstance(r.structured_content, dict, r)
        self.assertEqual(json.loads(text_of(r)), r.structured_content, f"{name}: text and structuredContent differ")
        return r.structured_content

    async def tool_error(self, client, name, arguments):
        """The text of a tool result with isError: true."""
        r = await client.call_tool(name, arguments)
        self.assertTrue(r.is_error, f"{name} {arguments} should fail: {r}")
        text = text_of(r)
        self.assertTrue(text, r)
        return text

    @with_clients
    async def test_initialize(self):
        for client in (self.operator, self.viewer):
            # The SDK's default ("auto") probes server/discover first.
            self.assertIn(client.protocol_version, MODERN_PROTOCOL_VERSIONS + HANDSHAKE_PROTOCOL_VERSIONS)
            self.assertEqual(client.server_info.name, "jmxgate")
            # Change subscriptions where they can be kept (2026-07-28's
            # subscriptions/listen); none on the stateless handshake.
            resources = client.server_capabilities.resources
            modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            self.assertEqual((bool(resources.subscribe), bool(resources.list_changed)), (modern, modern), resources)
            self.assertEqual(client.server_info.version, VERSION)
            self.assertIsNotNone(client.server_capabilities.tools)

    @with_clients
    async def test_tools_per_role(self):
        tools = {t.name: t for t in (await self.operator.list_tools()).tools}
        self.assertEqual(sorted(tools), ALL_TOOLS)
        for name in READ_TOOLS:
            self.assertTrue(tools[name].annotations.read_only_hint, name)
        for name in ("write_attribute", "execute_operation"):
            self.assertFalse(tools[name].annotations.read_only_hint, name)
            self.assertTrue(tools[name].annotations.destructive_hint, name)
        for t in tools.values():
            self.assertEqual(t.input_schema["type"], "object", t.name)
        self.assertEqual(sorted(tools["read_attributes"].input_schema.get("required", [])), ["mbean", "target"])
        self.assertIn("value", tools["write_attribute"].input_schema["properties"])

        viewer = (await self.viewer.list_tools()).tools
        self.assertEqual(sorted(t.name for t in viewer), READ_TOOLS)
        for t in viewer:
            self.assertNotEqual(t.annotations.destructive_hint, True, t.name)

    @with_clients
    async def test_list_targets(self):
        versions = {t: direct_value(t, {"type": "version"}) for t in (A, B)}
        # The gateway's health probes run in the background.
        for _ in range(100):
            everything = await self.ok(self.viewer, "list_targets", {})
            up = {t["name"] for t in everything["targets"] if t["health"] == "up"}
            if {A, B} <= up:
                break
            await asyncio.sleep(0.1)
        self.assertEqual(everything["count"], len(everything["targets"]))
        self.assertEqual(sorted(t["name"] for t in everything["targets"]), sorted(LABELS))
        for t in everything["targets"]:
            self.assertEqual(t["labels"], LABELS[t["name"]], t)
            self.assertIn(t["health"], ("up", "down", "unknown"), t)
            if t["name"] in (A, B):
                self.assertEqual(t["health"], "up", t)
                self.assertEqual(t["agent"]["version"], versions[t["name"]]["agent"], t)
                self.assertEqual(t["agent"]["protocol"], versions[t["name"]]["protocol"], t)
            else:
                self.assertNotEqual(t["health"], "up", t)
        live = await self.ok(self.operator, "list_targets", {"selector": LIVE})
        self.assertEqual(sorted(t["name"] for t in live["targets"]), sorted([A, B]))

    @with_clients
    async def test_search_mbeans(self):
        pattern = "jmxgate.test:*"
        one = await self.ok(self.viewer, "search_mbeans", {"target": A, "pattern": pattern})
        self.assertEqual(len(one["results"]), 1, one)
        self.assertEqual(sorted(result_for(one["results"], A)["mbeans"]),
                         sorted(direct_value(A, {"type": "search", "mbean": pattern})))
        group = await self.ok(self.operator, "search_mbeans", {"target": "*", "pattern": "jmxgate.test:type=Pattern,*"})
        self.assertEqual(sorted(r["target"] for r in group["results"]), sorted([A, B, DOWN]))
        for t in (A, B):
            self.assertEqual(sorted(result_for(group["results"], t)["mbeans"]),
                             sorted(direct_value(t, {"type": "search", "mbean": "jmxgate.test:type=Pattern,*"})))
        dead = result_for(group["results"], DOWN)
        self.assertGreaterEqual(dead["status"], 400, dead)
        self.assertIsInstance(dead["error"], str, dead)

    @with_clients
    async def test_describe_mbean(self):
        info = direct_value(A, {"type": "list", "path": "jmxgate.test/type=Operations"})
        d = await self.ok(self.operator, "describe_mbean", {"target": A, "mbean": OPS})
        self.assertEqual((d["target"], d["mbean"], d["description"]), (A, OPS, info["desc"]))
        expected = [
            {"name": name, "description": o["desc"], "returns": o["ret"],
             "arguments": [{"name": a["name"], "type": a["type"], "description": a["desc"]} for a in o["args"]]}
            for name, ops in info["op"].items()
            for o in (ops if isinstance(ops, list) else [ops])
        ]
        got = [
            {"name": o["name"], "description": o["description"], "returns": o["returns"],
             "arguments": [{"name": a["name"], "type": a["type"], "description": a["description"]}
                           for a in o["arguments"]]}
            for o in d["operations"]
        ]
        self.assertEqual(by_key(got), by_key(expected))
        self.assertEqual(len([o for o in d["operations"] if o["name"] == "add"]), 3)

        types = direct_value(A, {"type": "list", "path": "jmxgate.test/type=Types"})
        t = await self.ok(self.viewer, "describe_mbean", {"target": A, "mbean": TYPES})
        self.assertEqual(
            by_key([{"name": a["name"], "type": a["type"], "description": a["description"],
                     "writable": a["writable"]} for a in t["attributes"]]),
            by_key([{"name": n, "type": a["type"], "description": a["desc"], "writable": a["rw"]}
                    for n, a in types["attr"].items()]))

    @with_clients
    async def test_read_attributes(self):
        attributes = ["Int", "Name", "LongMax", "Double", "Nested", "Tabular"]
        r = await self.ok(self.viewer, "read_attributes", {"target": A, "mbean": TYPES, "attributes": attributes})
        values = result_for(r["results"], A)["values"]
        self.assertEqual(values, direct_value(A, {"type": "read", "mbean": TYPES, "attribute": attributes}))
        # Long.MAX_VALUE, exactly (no trip through a double).
        self.assertEqual(values["LongMax"], 9223372036854775807)
        self.assertEqual(values["Name"], A)
        pattern = "jmxgate.test:type=Pattern,name=b"
        r = await self.ok(self.operator, "read_attributes", {"target": A, "mbean": pattern})
        self.assertEqual(result_for(r["results"], A)["values"], direct_value(A, {"type": "read", "mbean": pattern}))
        group = await self.ok(self.viewer, "read_attributes", {"target": LIVE, "mbean": TYPES, "attributes": ["Name"]})
        self.assertEqual(sorted(r["target"] for r in group["results"]), sorted([A, B]))
        for t in (A, B):
            self.assertEqual(result_for(group["results"], t)["values"], {"Name": t})

    @with_clients
    async def test_one_target_answers_as_a_group_of_one(self):
        # The viewer may not read Special; NoSuch exists nowhere. Each
        # fails alone, in one shape whichever agent generation answered,
        # whether the target is named or selected.
        # The denied one names the rule that decided, as the viewer's own
        # /jmxgate/explain words it: no second call to learn why.
        attributes = ["Name", "Special", "NoSuch"]
        expected_name = direct_value(A, {"type": "read", "mbean": TYPES, "attribute": "Name"})
        own = explained(VIEWER, {"type": "read", "mbean": TYPES, "attribute": "Special", "target": {"url": A}})
        self.assertEqual(own["decision"], "deny", own)
        special_rule = own["rule"]
        self.assertTrue(special_rule.startswith("role viewer: "), own)
        for target in (A, A + "*"):
            r = await self.ok(self.viewer, "read_attributes", {"target": target, "mbean": TYPES, "attributes": attributes})
            values = result_for(r["results"], A)["values"]
            self.assertEqual(values["Name"], expected_name, target)
            self.assertEqual(sorted(values["Special"]), ["denied_by", "error", "error_type"], f"{target}: {values}")
            self.assertEqual(values["Special"]["denied_by"], special_rule, target)
            self.assertEqual(sorted(values["NoSuch"]), ["error", "error_type"], f"{target}: {values}")
            for attribute in ("Special", "NoSuch"):
                self.assertIn(attribute, values[attribute]["error"], target)
            self.assertEqual(values["Special"]["error_type"], "java.lang.SecurityException", target)
        # A pattern read names it per MBean and attribute.
        r = await self.ok(self.viewer, "read_attributes", {"target": A, "mbean": TYPES + ",*", "attributes": ["Special", "Name"]})
        self.assertEqual(result_for(r["results"], A)["values"][TYPES]["Special"]["denied_by"], special_rule, r)
        # Only denied attributes, or a denied and a missing one: still in
        # place, and the same entry by name and by selector.
        for attributes in (["Special"], ["Special", "NoSuch"]):
            entries = []
            for target in (A, A + "*"):
                r = await self.ok(self.viewer, "read_attributes",
                                  {"target": target, "mbean": TYPES, "attributes": attributes})
                entry = result_for(r["results"], A)
                for attribute in attributes:
                    self.assertIn("error", entry["values"][attribute], f"{target}: {entry}")
                self.assertEqual(entry["values"]["Special"]["denied_by"], special_rule, entry)
                self.assertEqual(entry["values"]["Special"]["error_type"], "java.lang.SecurityException", entry)
                entries.append(entry)
            self.assertEqual(entries[0], entries[1], attributes)
        # What the operator may read is there for the operator.
        r = await self.ok(self.operator, "read_attributes", {"target": A, "mbean": TYPES, "attributes": ["Special"]})
        self.assertEqual(result_for(r["results"], A)["values"]["Special"],
                         direct_value(A, {"type": "read", "mbean": TYPES, "attribute": "Special"}))

    @with_clients
    async def test_resources_are_the_targets_and_their_mbeans(self):
        listed = await self.viewer.list_resources()
        self.assertEqual(sorted(r.name for r in listed.resources), sorted(LABELS))
        for r in listed.resources:
            self.assertEqual(str(r.uri), "jmxgate://targets/" + urllib.parse.quote(r.name, safe="-._~"), r)
            self.assertEqual(r.mime_type, "application/json", r)
        templates = await self.viewer.list_resource_templates()
        self.assertEqual(sorted(t.uri_template for t in templates.resource_templates),
                         ["jmxgate://targets/{target}", "jmxgate://targets/{target}/mbeans/{mbean}"])
        # A target: its labels and the MBeans the agent has (the viewer's
        # policy hides none), each with the URI that reads it.
        target_uri = next(str(r.uri) for r in listed.resources if r.name == A)
        read = await self.viewer.read_resource(target_uri)
        [content] = read.contents
        self.assertEqual((str(content.uri), content.mime_type), (target_uri, "application/json"))
        target = json.loads(content.text)
        self.assertEqual((target["target"], target["labels"]), (A, LABELS[A]), target)
        self.assertEqual(sorted(m["name"] for m in target["mbeans"]),
                         sorted(direct_value(A, {"type": "search", "mbean": "*:*"})))
        # The templates' arguments complete to the viewer's targets, then
        # to the MBeans on the one chosen.
        ref = ResourceTemplateReference(type="ref/resource", uri="jmxgate://targets/{target}/mbeans/{mbean}")
        targets = await self.viewer.complete(ref, {"name": "target", "value": A})
        self.assertIn(A, targets.completion.values)
        mbeans = await self.viewer.complete(ref, {"name": "mbean", "value": "jmxgate.test:type=Ty"}, {"target": A})
        self.assertEqual(mbeans.completion.values, [TYPES])
        # An MBean: what describe_mbean says of it.
        [types] = [m for m in target["mbeans"] if m["name"] == TYPES]
        read = await self.viewer.read_resource(types["uri"])
        described = await self.ok(self.viewer, "describe_mbean", {"target": A, "mbean": TYPES})
        self.assertEqual(json.loads(read.contents[0].text), described)
        # Names that are no resource of the gateway's, or no target of
        # the caller's: not found, in words (-32002 until protocol
        # 2026-07-28 retired it for invalid params, SEP-2164).
        not_found = INVALID_PARAMS if self.viewer.protocol_version in MODERN_PROTOCOL_VERSIONS else -32002
        for uri in ("jmxgate://targets/no-such-target", "test://static-text",
                    "jmxgate://targets/" + urllib.parse.quote(A) + "/mbeans/"):
            with self.assertRaises(MCPError, msg=uri) as refused:
                await self.viewer.read_resource(uri)
            self.assertEqual(refused.exception.error.code, not_found, uri)
            self.assertTrue(refused.exception.error.message, uri)

    async def test_a_caller_who_asks_is_told_of_its_calls(self):
        told = []

        async def on_log(params):
            told.append(params)

        async with connect(VIEWER, logging_callback=on_log, log_level="info") as viewer, \
                connect(OPERATOR, logging_callback=on_log) as silent:
            if viewer.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await viewer.set_logging_level("info")
            await viewer.list_tools()
            await silent.list_tools()
            await self.ok(silent, "read_attributes", {"target": A, "mbean": TYPES, "attributes": ["Name"]})
            self.assertEqual(told, [], "a caller who asked for no level is told nothing")
            await self.ok(viewer, "read_attributes", {"target": A, "mbean": TYPES, "attributes": ["Name"]})
            await self.ok(viewer, "read_attributes", {"target": A, "mbean": TYPES, "attributes": ["Name", "Special"]})
            await viewer.call_tool("read_attributes", {"target": "no-such-target", "mbean": TYPES})
        self.assertEqual([(t.level, t.logger, t.data["tool"], t.data["outcome"]) for t in told], [
            ("info", "jmxgate", "read_attributes", "ok"),
            ("warning", "jmxgate", "read_attributes", "partly failed"),
            ("error", "jmxgate", "read_attributes", "failed"),
        ], told)
        self.assertIn("no such target", told[2].data["error"])
        for t in told:
            self.assertIsInstance(t.data["request_id"], str, t)
        self.assertEqual(len({t.data["request_id"] for t in told}), 3, "each call its own request id")

    @with_clients
    async def test_explain(self):
        # Per target, the decision and the deciding role and rule, as the
        # caller's own /jmxgate/explain gives them.
        for args, item in [
            ({"type": "read", "mbean": TYPES, "attribute": "Special"},
             {"type": "read", "mbean": TYPES, "attribute": "Special"}),
            ({"type": "write", "mbean": TYPES, "attribute": "Name"},
             {"type": "write", "mbean": TYPES, "attribute": "Name", "value": None}),
            ({"type": "read", "mbean": TYPES, "attribute": "Name"},
             {"type": "read", "mbean": TYPES, "attribute": "Name"}),
        ]:
            e = await self.ok(self.viewer, "explain", {"target": LIVE, **args})
            own = explained(VIEWER, {**item, "target": {"url": LIVE}})
            self.assertEqual(
                sorted((r["target"], r["decision"], r["rule"]) for r in e["results"]),
                sorted((t["target"], t["decision"], t["rule"]) for t in own["targets"]), args)
            self.assertEqual(sorted(r["target"] for r in e["results"]), sorted([A, B]), e)
            self.assertEqual(e["decision"], own["decision"], e)
            for r in e["results"]:
                self.assertTrue(r["rule"].startswith("role viewer: "), r)
        denied = await self.ok(self.viewer, "explain", {"target": A, "type": "read", "mbean": TYPES, "attribute": "Special"})
        self.assertEqual(denied["decision"], "deny", denied)
        self.assertIn("Special", denied["results"][0]["rule"])
        allowed = await self.ok(self.viewer, "explain", {"target": A, "type": "read", "mbean": TYPES, "attribute": "Name"})
        self.assertEqual((allowed["decision"], allowed["results"][0]["roles"]), ("allow", ["viewer"]), allowed)
        text = await self.tool_error(self.viewer, "explain", {"target": A, "type": "exec", "mbean": OPS})
        self.assertEqual(text, "explain: type exec needs `operation`")

    @with_clients
    async def test_describe_says_what_the_caller_may_do(self):
        t = await self.ok(self.viewer, "describe_mbean", {"target": A, "mbean": TYPES})
        attributes = {a["name"]: a for a in t["attributes"]}
        self.assertFalse(attributes["Special"]["you_may_read"])
        self.assertTrue(attributes["Name"]["you_may_read"])
        self.assertTrue(attributes["Name"]["writable"])
        self.assertFalse(attributes["Name"]["you_may_write"], "the viewer's <commands> has no write")
        types = await self.ok(self.operator, "describe_mbean", {"target": A, "mbean": TYPES})
        for a in types["attributes"]:
            self.assertEqual(a["you_may_write"], a["writable"], a)
        o = await self.ok(self.operator, "describe_mbean", {"target": A, "mbean": OPS})
        by_signature = {op["signature"]: op for op in o["operations"]}
        self.assertIn("add(int,int)", by_signature)
        for signature, op in by_signature.items():
            self.assertEqual(signature, op["name"] + "(" + ",".join(a["type"] for a in op["arguments"]) + ")")
            self.assertEqual(op["you_may_execute"], op["name"] != "repeat", signature)
        # A signature from describe runs as it is.
        add = await self.ok(self.operator, "execute_operation",
                            {"target": A, "mbean": OPS, "operation": "add(int,int)", "arguments": [2, 3]})
        self.assertEqual(add["result"], 5)

    @with_clients
    async def test_an_agents_error_type_is_kept(self):
        request = {"type": "exec", "mbean": OPS, "operation": "noSuchOperation"}
        expected = via_jolokia(OPERATOR, A, request)
        self.assertNotEqual(expected["status"], 200, expected)
        text = await self.tool_error(self.operator, "execute_operation",
                                     {"target": A, "mbean": OPS, "operation": "noSuchOperation"})
        self.assertIn(expected["error_type"], text)
        self.assertIn(A, text)

    @with_clients
    async def test_schemas_type_every_input(self):
        for t in (await self.operator.list_tools()).tools:
            for name, prop in t.input_schema["properties"].items():
                where = f"{t.name}.{name}"
                self.assertTrue("type" in prop or "anyOf" in prop, f"{where} has no type")
                if prop.get("type") == "array":
                    self.assertIn("items", prop, f"{where} has no items")
                self.assertTrue(prop.get("description"), f"{where} has no description")
            self.assertEqual(t.output_schema["type"], "object", t.name)

    @with_clients
    async def test_fleet_summary(self):
        # Distinct values on the two live agents; what is expected is what
        # the agents themselves then answer.
        for t, v in ((A, 11), (B, 31)):
            direct_value(t, {"type": "write", "mbean": TYPES, "attribute": "Int", "value": v})
        try:
            ints = {t: direct_value(t, {"type": "read", "mbean": TYPES, "attribute": "Int"}) for t in (A, B)}
            args = {"target": LIVE, "mbean": TYPES, "attribute": "Int"}
            top = await self.ok(self.viewer, "fleet_summary", {**args, "op": "top", "n": 1})
            best = sorted(ints, key=lambda t: (-ints[t], t))[0]
            self.assertEqual(top["result"], [{"target": best, "value": ints[best]}])
            self.assertEqual((top["count"], top["errors"], top["op"]), (2, [], "top"))
            total = await self.ok(self.viewer, "fleet_summary", {**args, "op": "sum"})
            self.assertEqual(total["result"], sum(ints.values()))
            low = await self.ok(self.viewer, "fleet_summary", {**args, "op": "min"})
            worst = sorted(ints, key=lambda t: (ints[t], t))[0]
            self.assertEqual(low["result"], {"target": worst, "value": ints[worst]})
            # Every target of the suite: the dead one is listed, not fatal.
            every = await self.ok(self.viewer, "fleet_summary", {**args, "target": "*", "op": "avg"})
            self.assertEqual(every["result"], sum(ints.values()) / 2)
            self.assertEqual(every["count"], 2)
            self.assertEqual([(e["count"], e["targets"]) for e in every["errors"]], [(1, [DOWN])])
            self.assertEqual(every["failed"], 1)
            # Text values: grouped, each with who answered it.
            names = {t: direct_value(t, {"type": "read", "mbean": TYPES, "attribute": "Name"}) for t in (A, B)}
            grouped = await self.ok(self.viewer, "fleet_summary", {**args, "attribute": "Name", "op": "group"})
            self.assertEqual(sorted((g["value"], g["targets"]) for g in grouped["result"]),
                             sorted((n, [t]) for t, n in names.items()))
            # Heap in use, by an inner path.
            heap = await self.ok(self.viewer, "fleet_summary",
                                 {"target": LIVE, "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
                                  "path": "used", "op": "top", "n": 2})
            self.assertEqual(sorted(e["target"] for e in heap["result"]), sorted([A, B]))
            self.assertTrue(all(isinstance(e["value"], int) and e["value"] > 0 for e in heap["result"]), heap)
            text = await self.tool_error(self.viewer, "fleet_summary", {**args, "target": A, "op": "sum"})
            self.assertIn("give a selector", text)
        finally:
            for t in (A, B):
                direct_value(t, {"type": "exec", "mbean": OPS, "operation": "reset"})

    @with_clients
    async def test_write_attribute(self):
        before = direct_value(B, {"type": "read", "mbean": TYPES, "attribute": "Name"})
        w = await self.ok(self.operator, "write_attribute",
                          {"target": B, "mbean": TYPES, "attribute": "Name", "value": "py ✓ written"})
        self.assertEqual(w, {"target": B, "mbean": TYPES, "attribute": "Name", "previous": before})
        self.assertEqual(direct_value(B, {"type": "read", "mbean": TYPES, "attribute": "Name"}), "py ✓ written")
        m = await self.ok(self.operator, "write_attribute",
                          {"target": B, "mbean": TYPES, "attribute": "Map", "value": {"three": 3}})
        self.assertEqual(m["previous"], {"one": 1, "two": 2})
        self.assertEqual(direct_value(B, {"type": "read", "mbean": TYPES, "attribute": "Map"}), {"three": 3})
        direct_value(B, {"type": "exec", "mbean": OPS, "operation": "reset"})

    @with_clients
    async def test_execute_operation(self):
        for operation, arguments in [("add(int,int)", [40, 2]), ("add(long,long,long)", [1, 2, 9007199254740993]),
                                     ("echo", ["grüß dich"])]:
            r = await self.ok(self.operator, "execute_operation",
                              {"target": A, "mbean": OPS, "operation": operation, "arguments": arguments})
            self.assertEqual(r, {"target": A, "mbean": OPS, "operation": operation,
                                 "result": direct_value(A, {"type": "exec", "mbean": OPS, "operation": operation,
                                                            "arguments": arguments})})
        expected = via_jolokia(OPERATOR, A, {"type": "exec", "mbean": OPS, "operation": "fail"})
        text = await self.tool_error(self.operator, "execute_operation", {"target": A, "mbean": OPS, "operation": "fail"})
        self.assertIn(A, text)
        self.assertIn(expected["error"], text)

    @with_clients
    async def test_denied_call_has_the_policys_wording(self):
        request = {"type": "exec", "mbean": OPS, "operation": "repeat", "arguments": ["ab", 2]}
        expected = via_jolokia(OPERATOR, A, request)
        self.assertEqual(expected["status"], 403, expected)
        before = invocations(A)
        text = await self.tool_error(self.operator, "execute_operation",
                                     {"target": A, "mbean": OPS, "operation": "repeat", "arguments": ["ab", 2]})
        self.assertIn(A, text)
        self.assertIn(expected["error"], text)
        # The deciding role and rule, as /jmxgate/explain names them.
        own = explained(OPERATOR, {**request, "target": {"url": A}})
        self.assertEqual(own["decision"], "deny", own)
        self.assertTrue(own["rule"].startswith("role operator: "), own)
        self.assertTrue(text.endswith(f"; denied by {own['rule']}"), text)
        self.assertEqual(invocations(A), before, "the denied operation ran at the agent")

    @with_clients
    async def test_bad_arguments(self):
        text = await self.tool_error(self.operator, "describe_mbean", {"target": A})
        self.assertIn("mbean", text)
        text = await self.tool_error(self.operator, "read_attributes", {"target": A, "mbean": "::not a name"})
        self.assertIn("::not a name", text)
        text = await self.tool_error(self.operator, "execute_operation",
                                     {"target": LIVE, "mbean": OPS, "operation": "reset"})
        self.assertIn("target", text.lower())
        text = await self.tool_error(self.operator, "write_attribute",
                                     {"target": A, "mbean": TYPES, "attribute": 5, "value": 1})
        self.assertIn("invalid type", text)
        with self.assertRaises(MCPError):
            await self.operator.call_tool("no_such_tool", {})

    @with_clients
    async def test_viewer_cannot_write(self):
        before = invocations(A)
        for name, arguments in [("write_attribute", {"target": A, "mbean": TYPES, "attribute": "Int", "value": 1}),
                                ("execute_operation", {"target": A, "mbean": OPS, "operation": "noArgs"})]:
            # Not offered to the viewer's role: said so, not "unknown".
            with self.assertRaises(MCPError) as refused:
                await self.viewer.call_tool(name, arguments)
            self.assertIn(f'"{name}" is not allowed for your roles (role viewer)', str(refused.exception))
        self.assertEqual(direct_value(A, {"type": "read", "mbean": TYPES, "attribute": "Int"}), 42)
        self.assertEqual(invocations(A), before)

    @with_clients
    async def test_big_result_is_truncated(self):
        r = await self.operator.call_tool("search_mbeans", {"target": A})
        self.assertFalse(r.is_error, text_of(r)[:300])
        r = await self.operator.call_tool(
            "execute_operation", {"target": A, "mbean": OPS, "operation": "echo", "arguments": ["y" * 150_000]})
        self.assertFalse(r.is_error, text_of(r)[:300])
        self.assertIsInstance(r.structured_content.get("truncated"), str, str(r.structured_content)[:300])
        self.assertLessEqual(len(json.dumps(r.structured_content)), 70_000)


class McpConnections(unittest.IsolatedAsyncioTestCase):
    async def test_wrong_password_is_a_401(self):
        statuses = []
        with self.assertRaises(Exception):
            async with connect((OPERATOR[0], "not-the-password"), statuses) as client:
                await client.list_tools()
        self.assertIn(401, statuses)
        self.assertNotIn(200, statuses)

    async def test_no_credentials_is_a_401(self):
        statuses = []
        with self.assertRaises(Exception):
            async with connect(None, statuses) as client:
                await client.list_tools()
        self.assertIn(401, statuses)
        self.assertNotIn(200, statuses)

    async def test_the_initialize_handshake_of_earlier_protocol_versions(self):
        async with connect(VIEWER, mode="legacy") as client:
            self.assertIn(client.protocol_version, HANDSHAKE_PROTOCOL_VERSIONS)
            self.assertEqual(client.session.initialize_result.server_info.name, "jmxgate")
            self.assertEqual(client.session.initialize_result.server_info.version, VERSION)
            tools = await client.list_tools()
            self.assertEqual(sorted(t.name for t in tools.tools), READ_TOOLS)
            r = await client.call_tool("read_attributes", {"target": B, "mbean": TYPES, "attributes": ["Name"]})
            self.assertFalse(r.is_error, text_of(r))
            self.assertEqual(r.structured_content, {"results": [{"target": B, "values": {"Name": B}}]})

    async def test_right_password_works(self):
        statuses = []
        async with connect(OPERATOR, statuses) as client:
            tools = await client.list_tools()
        self.assertEqual(sorted(t.name for t in tools.tools), ALL_TOOLS)
        self.assertNotIn(401, statuses)


if __name__ == "__main__":
    unittest.main()
