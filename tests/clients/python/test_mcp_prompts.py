"""The official MCP Python SDK (`mcp` from PyPI), unmodified, against jmxgate's
prompts and completions at $JMXGATE_URL/mcp, with HTTP Basic auth.

Run by tests/mcp/mcp_prompts.rs (which starts two agents and the gateway):
    .venv/bin/python -m unittest -v test_mcp_prompts

A prompt's message names the tool calls that answer its question, each with
its arguments as a JSON block: the suite runs them as an assistant would and
compares what they answer with the agents' own values. Completions are
compared with the agents' own search and list answers, less what the
caller may not see.
"""

import base64
import contextlib
import json
import os
import re
import time
import unittest

import httpx2
import requests
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation, PromptReference

GATEWAY = os.environ["JMXGATE_URL"]
MCP_URL = f"{GATEWAY}/mcp"
BIN = os.environ["JMXGATE_BIN"]
OPERATOR = (os.environ["JMXGATE_USER"], os.environ["JMXGATE_PASSWORD"])
# Reaches A only, and may not read Types' Special.
NARROW = (os.environ["JMXGATE_NARROW_USER"], os.environ["JMXGATE_NARROW_PASSWORD"])
A = os.environ["JMXGATE_TARGET_A"]
B = os.environ["JMXGATE_TARGET_B"]
AGENT = {A: os.environ["JMXGATE_AGENT_A_URL"], B: os.environ["JMXGATE_AGENT_B_URL"]}
GROUP = "suite=prompts"

TYPES = "jmxgate.test:type=Types"
PROMPTS = ["highest_heap", "threads_across_group", "what_changed_since", "inspect_attribute"]
CALL = re.compile(r"Call `(\w+)` with:\n```json\n(.*?)\n```", re.DOTALL)


def direct_value(target, request):
    """A target's agent's own value (not through the gateway)."""
    r = requests.post(AGENT[target], json=request, timeout=30)
    r.raise_for_status()
    answer = r.json()
    assert answer["status"] == 200, answer
    return answer["value"]


def basic(who):
    user, password = who
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@contextlib.asynccontextmanager
async def connect(who):
    async with httpx2.AsyncClient(headers={"Authorization": basic(who)},
                                  timeout=httpx2.Timeout(30, read=120)) as http:
        transport = streamable_http_client(MCP_URL, http_client=http)
        async with Client(transport, client_info=Implementation(name="jmxgate-prompt-tests", version="1.0.0"),
                          read_timeout_seconds=120) as client:
            await client.list_tools()
            yield client


@contextlib.asynccontextmanager
async def bridge(who, mode):
    """`jmxgate mcp` (the stdio bridge) for `who`, and an SDK client of it."""
    user, password = who
    env = {"JMXGATE_URL": GATEWAY, "JMXGATE_USER": user, "JMXGATE_PASSWORD": password,
           "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=BIN, args=["mcp"], env=env)
    async with Client(params, client_info=Implementation(name="jmxgate-prompt-tests", version="1.0.0"),
                      read_timeout_seconds=60, mode=mode) as client:
        yield client


def calls_of(prompt_result):
    """The (tool, arguments) pairs a prompt's message names, in order."""
    self_check = len(prompt_result.messages) == 1 and prompt_result.messages[0].role == "user"
    assert self_check, prompt_result
    text = prompt_result.messages[0].content.text
    calls = [(tool, json.loads(arguments)) for tool, arguments in CALL.findall(text)]
    assert calls, text
    return text, calls


class PromptsAndCompletions(unittest.IsolatedAsyncioTestCase):
    async def run_calls(self, client, calls):
        """Each call's structured content, as an assistant would get it."""
        answers = []
        for tool, arguments in calls:
            r = await client.call_tool(tool, arguments)
            text = "\n".join(c.text for c in r.content if c.type == "text")
            self.assertFalse(r.is_error, f"{tool} {arguments}: {text}")
            answers.append(r.structured_content)
        return answers

    async def complete(self, client, prompt, argument, value, context=None):
        r = await client.complete(PromptReference(type="ref/prompt", name=prompt),
                                  {"name": argument, "value": value}, context)
        return r.completion

    async def test_the_prompts_are_listed(self):
        async with connect(OPERATOR) as client:
            self.assertIsNotNone(client.server_capabilities.prompts)
            self.assertIsNotNone(client.server_capabilities.completions)
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            self.assertEqual(sorted(prompts), sorted(PROMPTS))
            for p in prompts.values():
                self.assertTrue(p.description and p.title, p)
                self.assertTrue(p.arguments, p)
            required = {a.name for a in prompts["inspect_attribute"].arguments if a.required}
            self.assertEqual(required, {"target", "mbean"})

    async def test_highest_heap(self):
        async with connect(OPERATOR) as client:
            text, calls = calls_of(await client.get_prompt("highest_heap", {"target": GROUP, "n": "2"}))
            self.assertIn(GROUP, text)
            ranked, limits = await self.run_calls(client, calls)
            self.assertEqual(ranked["op"], "top")
            self.assertEqual(sorted(r["target"] for r in ranked["result"]), sorted([A, B]), ranked)
            values = [r["value"] for r in ranked["result"]]
            self.assertEqual(values, sorted(values, reverse=True), ranked)
            # Heap limits don't move: each is the agent's own.
            for r in limits["results"]:
                own = direct_value(r["target"], {"type": "read", "mbean": "java.lang:type=Memory",
                                                 "attribute": "HeapMemoryUsage", "path": "max"})
                self.assertEqual(r["values"]["HeapMemoryUsage"]["max"], own, r)

    async def test_threads_across_group(self):
        async with connect(OPERATOR) as client:
            _, calls = calls_of(await client.get_prompt("threads_across_group", {"target": GROUP}))
            before = {t: direct_value(t, {"type": "read", "mbean": "java.lang:type=Threading",
                                          "attribute": "PeakThreadCount"}) for t in (A, B)}
            total, top, peak = await self.run_calls(client, calls)
            self.assertEqual((total["op"], total["count"]), ("sum", 2), total)
            self.assertEqual(sorted(r["target"] for r in top["result"]), sorted([A, B]), top)
            # A peak never falls: the highest is at least what each had.
            self.assertGreaterEqual(peak["result"]["value"], max(before.values()), peak)

    async def test_what_changed_since(self):
        async with connect(OPERATOR) as client:
            text, calls = calls_of(await client.get_prompt("what_changed_since", {"since": "1day", "target": GROUP}))
            starts, versions, health = await self.run_calls(client, calls)
            threshold = int(re.search(r"above (\d+)", text).group(1))
            self.assertAlmostEqual(threshold / 1000, time.time() - 86400, delta=600)
            for r in starts["result"]:
                own = direct_value(r["target"], {"type": "read", "mbean": "java.lang:type=Runtime",
                                                 "attribute": "StartTime"})
                self.assertEqual(r["value"], own, r)
                self.assertGreater(r["value"], threshold, "both agents started within the day")
            grouped = {g["value"]: sorted(g["targets"]) for g in versions["result"]}
            own = {}
            for t in (A, B):
                v = direct_value(t, {"type": "read", "mbean": "java.lang:type=Runtime", "attribute": "VmVersion"})
                own.setdefault(v, []).append(t)
            self.assertEqual(grouped, {v: sorted(ts) for v, ts in own.items()})
            self.assertEqual(sorted(t["name"] for t in health["targets"]), sorted([A, B]))

            # A time, not a duration: the same threshold in milliseconds.
            text, _ = calls_of(await client.get_prompt("what_changed_since", {"since": "2026-01-02T03:04:05Z"}))
            self.assertIn("above 1767323045000", text)

    async def test_inspect_attribute(self):
        async with connect(NARROW) as client:
            _, calls = calls_of(await client.get_prompt(
                "inspect_attribute", {"target": A, "mbean": TYPES, "attribute": "Name"}))
            described, read = await self.run_calls(client, calls)
            self.assertIn("Name", [a["name"] for a in described["attributes"]])
            own = direct_value(A, {"type": "read", "mbean": TYPES, "attribute": "Name"})
            self.assertEqual(read["results"][0]["values"]["Name"], own, read)

    async def test_bad_prompt_arguments_are_errors_that_say_why(self):
        async with connect(NARROW) as client:
            cases = [
                ("highest_heap", {"target": "nothing-here-*"}, "matches no target you may reach"),
                ("highest_heap", {"target": GROUP, "n": "0"}, "`n` must be"),
                ("highest_heap", {"target": A}, "is one target's name"),
                ("what_changed_since", {"target": GROUP}, "`since` is required"),
                ("what_changed_since", {"since": "last week"}, "neither a time"),
                ("inspect_attribute", {"target": A, "mbean": "java.lang:type=*"}, "is a pattern"),
                ("inspect_attribute", {"target": A, "mbean": TYPES, "colour": "red"}, "no argument"),
                ("no_such_prompt", {}, "unknown prompt"),
            ]
            for name, arguments, says in cases:
                with self.assertRaises(MCPError, msg=f"{name} {arguments}") as caught:
                    await client.get_prompt(name, arguments)
                self.assertIn(says, str(caught.exception), f"{name} {arguments}")
            # A target the caller doesn't reach reads as one that doesn't
            # exist: nothing about B is revealed.
            said = {}
            for target in (B, "no-such-target"):
                with self.assertRaises(MCPError) as caught:
                    await client.get_prompt("inspect_attribute", {"target": target, "mbean": TYPES})
                said[target] = str(caught.exception).replace(target, "T")
            self.assertEqual(said[B], said["no-such-target"])
            self.assertIn("that you may reach", said[B])

    async def test_target_completion_offers_what_the_caller_reaches(self):
        async with connect(OPERATOR) as operator, connect(NARROW) as narrow:
            everything = await self.complete(operator, "highest_heap", "target", "")
            for expected in (A, B, "*", GROUP, "side=a", "side=b"):
                self.assertIn(expected, everything.values)
            self.assertEqual(everything.total, len(everything.values))
            self.assertFalse(everything.has_more)
            # Typed text narrows: a prefix of A's name.
            prefix = A[: len(A) - 1]
            narrowed = await self.complete(operator, "highest_heap", "target", prefix)
            self.assertEqual(narrowed.values[:2], sorted([A, B]))
            # One target's name only, for a one-target prompt.
            one = await self.complete(operator, "inspect_attribute", "target", "")
            self.assertEqual(sorted(one.values), sorted([A, B]))
            # The narrow caller sees A alone.
            mine = await self.complete(narrow, "inspect_attribute", "target", "")
            self.assertEqual(mine.values, [A])
            mine = await self.complete(narrow, "highest_heap", "target", "side=")
            self.assertEqual(mine.values, ["side=a"])

    async def test_mbean_and_attribute_completion_come_from_the_agent(self):
        async with connect(OPERATOR) as operator, connect(NARROW) as narrow:
            typed = "jmxgate.test:type=T"
            got = await self.complete(operator, "inspect_attribute", "mbean", typed, {"target": A})
            own = direct_value(A, {"type": "search", "mbean": "jmxgate.test:*"})
            expected = sorted(n for n in own if n.lower().startswith(typed.lower()))
            self.assertTrue(expected, own)
            self.assertEqual(got.values[: len(expected)], expected)
            # Without a target chosen, nothing to offer yet.
            none = await self.complete(operator, "inspect_attribute", "mbean", typed)
            self.assertEqual(none.values, [])
            # A target the caller doesn't reach completes to nothing.
            hidden = await self.complete(narrow, "inspect_attribute", "mbean", typed, {"target": B})
            self.assertEqual(hidden.values, [])

            listed = direct_value(A, {"type": "list", "path": "jmxgate.test/type=Types"})
            attributes = sorted(listed["attr"])
            context = {"target": A, "mbean": TYPES}
            got = await self.complete(operator, "inspect_attribute", "attribute", "", context)
            self.assertEqual(got.values, attributes)
            got = await self.complete(narrow, "inspect_attribute", "attribute", "", context)
            self.assertEqual(got.values, [a for a in attributes if a != "Special"])
            got = await self.complete(narrow, "inspect_attribute", "attribute", "spec", context)
            self.assertEqual(got.values, [])
            got = await self.complete(operator, "inspect_attribute", "attribute", "int", context)
            starting = sorted(a for a in attributes if a.lower().startswith("int"))
            self.assertEqual(got.values[: len(starting)], starting)

    async def test_completion_of_what_has_no_candidates(self):
        async with connect(OPERATOR) as client:
            n = await self.complete(client, "highest_heap", "n", "")
            self.assertEqual(n.values, [])
            for prompt, argument, says in [("no_such_prompt", "target", "no prompt"),
                                           ("highest_heap", "mbean", "has no argument")]:
                with self.assertRaises(MCPError) as caught:
                    await self.complete(client, prompt, argument, "")
                self.assertIn(says, str(caught.exception))

    async def test_the_stdio_bridge_passes_prompts_and_completions_on(self):
        async with connect(NARROW) as direct:
            listed = (await direct.list_prompts()).prompts
            prompt = await direct.get_prompt("inspect_attribute", {"target": A, "mbean": TYPES})
            attributes = await self.complete(direct, "inspect_attribute", "attribute", "",
                                             {"target": A, "mbean": TYPES})
        # The bridge's session to the gateway is one protocol; the local
        # client's may be another: each mode gets the gateway's answers.
        for mode in ["auto", "legacy"]:
            with self.subTest(mode=mode):
                async with bridge(NARROW, mode) as client:
                    self.assertIsNotNone(client.server_capabilities.prompts)
                    self.assertIsNotNone(client.server_capabilities.completions)
                    self.assertEqual((await client.list_prompts()).prompts, listed)
                    got = await client.get_prompt("inspect_attribute", {"target": A, "mbean": TYPES})
                    self.assertEqual(got.messages, prompt.messages)
                    self.assertEqual(await self.complete(client, "inspect_attribute", "attribute", "",
                                                         {"target": A, "mbean": TYPES}), attributes)
                    with self.assertRaises(MCPError) as caught:
                        await client.get_prompt("inspect_attribute", {"target": B, "mbean": TYPES})
                    self.assertIn("that you may reach", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
