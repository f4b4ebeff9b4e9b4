// The official MCP TypeScript SDK (@modelcontextprotocol/sdk), unmodified, as
// an MCP client of jmxgate: its `Client` and `StdioClientTransport` spawn
// `jmxgate mcp --url $JMXGATE_URL`, the stdio bridge to the gateway's /mcp.
// Run by tests/mcp/mcp.rs (which starts the agents and the gateway):
//   node --test-reporter=spec stdio.test.mjs
// Every expected value comes from the agent itself (asked directly) or from
// the gateway's own /jolokia endpoint as the same user, so a tool that
// changes an answer fails here.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

function env(name) {
    const v = process.env[name];
    if (!v) {
        throw new Error(`${name} is not set: run this through tests/mcp/mcp.rs`);
    }
    return v;
}

/** The gateway's base URL, e.g. http://127.0.0.1:PORT (no trailing slash). */
const GATEWAY = env("JMXGATE_URL");
/** The jmxgate binary (its `mcp` command is the stdio server). */
const BIN = env("JMXGATE_BIN");
/** The gateway's version (serverInfo.version). */
const VERSION = env("JMXGATE_VERSION");
/** A caller whose role may do everything but exec `repeat` on OPS. */
const OPERATOR = { user: env("JMXGATE_USER"), password: env("JMXGATE_PASSWORD") };
/** A caller whose role may only read, list, search and ask the version. */
const VIEWER = { user: env("JMXGATE_VIEWER_USER"), password: env("JMXGATE_VIEWER_PASSWORD") };
/** Two live agents' targets, and one whose agent is not there. */
const A = env("JMXGATE_TARGET_A");
const B = env("JMXGATE_TARGET_B");
const DOWN = env("JMXGATE_TARGET_DOWN");
/** Every target's labels as configured: {"name": {"key": "value"}}. */
const LABELS = JSON.parse(env("JMXGATE_TARGET_LABELS"));
/** A label selector matching A and B (not DOWN). */
const LIVE = env("JMXGATE_SELECTOR_LIVE");
/** The agents' own Jolokia URLs, for answers to compare with. */
const AGENT = { [A]: env("JMXGATE_AGENT_A_URL"), [B]: env("JMXGATE_AGENT_B_URL") };

const TYPES = "jmxgate.test:type=Types";
const OPS = "jmxgate.test:type=Operations";
const COUNTER = "jmxgate.test:type=Counter";

const ALL_TOOLS = ["describe_mbean", "execute_operation", "explain", "fleet_summary", "list_targets", "read_attributes", "search_mbeans", "write_attribute"];
const READ_TOOLS = ["describe_mbean", "explain", "fleet_summary", "list_targets", "read_attributes", "search_mbeans"];

const basicHeader = ({ user, password }) => "Basic " + Buffer.from(`${user}:${password}`).toString("base64");

/** POSTs a Jolokia request straight to a target's agent (not through the gateway). */
async function direct(target, request) {
    const r = await fetch(AGENT[target], {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(request),
    });
    assert.equal(r.status, 200, `agent of ${target} answered HTTP ${r.status}`);
    return r.json();
}

/** The value of a request the agent answers directly; fails on an error. */
async function directValue(target, request) {
    const r = await direct(target, request);
    assert.equal(r.status, 200, `agent of ${target} refused ${JSON.stringify(request)}: ${JSON.stringify(r)}`);
    return r.value;
}

/** The gateway's /jolokia answer (proxy mode) to one request, as `who`. */
async function viaJolokia(who, target, request) {
    const r = await fetch(`${GATEWAY}/jolokia`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: basicHeader(who) },
        body: JSON.stringify({ ...request, target: { url: target } }),
    });
    assert.equal(r.status, 200, `/jolokia answered HTTP ${r.status}`);
    return r.json();
}

/** How many operations the agent's Operations MBean has run (all callers). */
const invocations = (target) => directValue(target, { type: "read", mbean: COUNTER, attribute: "Invocations" });

const dir = mkdtempSync(join(tmpdir(), "jmxgate-mcp-"));
const clients = [];

/**
 * An SDK client connected through a `jmxgate mcp` child process. `url` is
 * what `--url` gets; the password goes in JMXGATE_PASSWORD, or in a file
 * given with --password-file.
 */
async function connect(who, { url = GATEWAY, passwordFile = false } = {}) {
    const childEnv = { ...getDefaultEnvironment(), JMXGATE_USER: who.user, NO_COLOR: "1", RUST_BACKTRACE: "0" };
    const args = ["mcp", "--url", url];
    if (passwordFile) {
        const file = join(dir, `${who.user}.password`);
        writeFileSync(file, `${who.password}\n`, { mode: 0o600 });
        args.push("--password-file", file);
    } else {
        childEnv.JMXGATE_PASSWORD = who.password;
    }
    const transport = new StdioClientTransport({ command: BIN, args, env: childEnv, stderr: "pipe" });
    let stderr = "";
    transport.stderr.on("data", (d) => { stderr += d; });
    const client = new Client({ name: "jmxgate-mcp-tests", version: "1.0.0" });
    client.stderr = () => stderr;
    clients.push(client);
    await client.connect(transport);
    return client;
}

let operator;
let viewer;

before(async () => {
    // Writable attributes back to their initial values (the agents may have
    // served an earlier run).
    for (const t of [A, B]) {
        await directValue(t, { type: "exec", mbean: OPS, operation: "reset" });
    }
    // The operator through the gateway's base URL and JMXGATE_PASSWORD, the
    // viewer through the /mcp URL and --password-file.
    operator = await connect(OPERATOR);
    viewer = await connect(VIEWER, { url: `${GATEWAY}/mcp`, passwordFile: true });
    // Output schemas are checked by the SDK only for tools it has listed.
    await operator.listTools();
    await viewer.listTools();
});

after(async () => {
    for (const c of clients) {
        await c.close().catch(() => {});
    }
    rmSync(dir, { recursive: true, force: true });
});

const textOf = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

/**
 * The structured content of a successful tool result; its text content
 * must be the same JSON.
 */
async function ok(client, name, args) {
    const r = await client.callTool({ name, arguments: args });
    assert.notEqual(r.isError, true, `${name} ${JSON.stringify(args)} failed: ${textOf(r)}\n${client.stderr()}`);
    assert.equal(typeof r.structuredContent, "object", `${name}: no structuredContent: ${JSON.stringify(r)}`);
    assert.deepEqual(JSON.parse(textOf(r)), r.structuredContent, `${name}: text and structuredContent differ`);
    return r.structuredContent;
}

/** The text of a tool result with isError: true. */
async function toolError(client, name, args) {
    const r = await client.callTool({ name, arguments: args });
    assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should fail: ${JSON.stringify(r)}`);
    const text = textOf(r);
    assert.ok(text.length > 0, `${name}: an error without text: ${JSON.stringify(r)}`);
    return text;
}

/** The one result entry for `target` in a fan-out answer's `results`. */
function resultFor(results, target) {
    const found = results.filter((r) => r.target === target);
    assert.equal(found.length, 1, `one result for ${target} in ${JSON.stringify(results)}`);
    return found[0];
}

const sorted = (xs) => [...xs].sort();
const byKey = (xs) => [...xs].sort((p, q) => JSON.stringify(p).localeCompare(JSON.stringify(q)));

test("initialize: the server is jmxgate, at the gateway's version, and offers tools", () => {
    for (const client of [operator, viewer]) {
        const info = client.getServerVersion();
        assert.equal(info.name, "jmxgate", JSON.stringify(info));
        assert.equal(info.version, VERSION, JSON.stringify(info));
        assert.ok(client.getServerCapabilities()?.tools, JSON.stringify(client.getServerCapabilities()));
    }
});

test("tools/list: the operator sees all eight tools, with input schemas and hints", async () => {
    const { tools } = await operator.listTools();
    assert.deepEqual(sorted(tools.map((t) => t.name)), ALL_TOOLS);
    const tool = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const t of tools) {
        assert.ok(t.description && t.description.length > 20, `${t.name} has a description`);
        assert.equal(t.inputSchema.type, "object", t.name);
    }
    const required = (name) => sorted(tool[name].inputSchema.required ?? []);
    assert.deepEqual(required("list_targets"), []);
    assert.deepEqual(required("search_mbeans"), ["target"]);
    assert.deepEqual(required("describe_mbean"), ["mbean", "target"]);
    assert.deepEqual(required("read_attributes"), ["mbean", "target"]);
    for (const p of ["target", "mbean", "attribute", "value"]) {
        assert.ok(p in tool.write_attribute.inputSchema.properties, `write_attribute takes ${p}`);
    }
    for (const p of ["target", "mbean", "operation", "arguments"]) {
        assert.ok(p in tool.execute_operation.inputSchema.properties, `execute_operation takes ${p}`);
    }
    for (const name of READ_TOOLS) {
        assert.equal(tool[name].annotations?.readOnlyHint, true, `${name} is read-only: ${JSON.stringify(tool[name].annotations)}`);
    }
    for (const name of ["write_attribute", "execute_operation"]) {
        assert.equal(tool[name].annotations?.readOnlyHint, false, name);
        assert.equal(tool[name].annotations?.destructiveHint, true, name);
    }
});

test("tools/list: a caller who may neither write nor exec sees no destructive tool", async () => {
    const { tools } = await viewer.listTools();
    assert.deepEqual(sorted(tools.map((t) => t.name)), READ_TOOLS);
    for (const t of tools) {
        assert.notEqual(t.annotations?.destructiveHint, true, t.name);
    }
});

test("list_targets: names, labels, health and agent versions", async () => {
    const versions = {};
    for (const t of [A, B]) {
        versions[t] = await directValue(t, { type: "version" });
    }
    // The gateway's health probes run in the background: wait until both
    // live agents have been seen.
    let all;
    for (let i = 0; ; i++) {
        all = await ok(operator, "list_targets", {});
        const up = all.targets.filter((t) => t.health === "up").map((t) => t.name);
        if ((up.includes(A) && up.includes(B)) || i >= 100) {
            break;
        }
        await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(all.count, all.targets.length);
    assert.deepEqual(sorted(all.targets.map((t) => t.name)), sorted(Object.keys(LABELS)));
    for (const t of all.targets) {
        assert.deepEqual(t.labels, LABELS[t.name], `labels of ${t.name}`);
        assert.ok(["up", "down", "unknown"].includes(t.health), JSON.stringify(t));
    }
    for (const name of [A, B]) {
        const t = all.targets.find((x) => x.name === name);
        assert.equal(t.health, "up", JSON.stringify(t));
        assert.equal(t.agent.version, versions[name].agent, JSON.stringify(t));
        assert.equal(t.agent.protocol, versions[name].protocol, JSON.stringify(t));
    }
    assert.notEqual(all.targets.find((x) => x.name === DOWN).health, "up");

    const live = await ok(operator, "list_targets", { selector: LIVE });
    assert.deepEqual(sorted(live.targets.map((t) => t.name)), sorted([A, B]));
    assert.equal(live.count, 2);
    const one = await ok(viewer, "list_targets", { selector: `*${B.slice(-2)}` });
    assert.deepEqual(one.targets.map((t) => t.name), [B]);
});

test("search_mbeans: one target, a default pattern, and a selector with a failing target", async () => {
    const pattern = "jmxgate.test:*";
    const one = await ok(operator, "search_mbeans", { target: A, pattern });
    assert.equal(one.results.length, 1, JSON.stringify(one));
    assert.equal(one.results[0].target, A);
    assert.deepEqual(sorted(one.results[0].mbeans), sorted(await directValue(A, { type: "search", mbean: pattern })));

    const everything = await ok(viewer, "search_mbeans", { target: A });
    const names = resultFor(everything.results, A).mbeans;
    for (const n of ["java.lang:type=Runtime", TYPES, OPS, "jmxgate.extra:type=Secretive"]) {
        assert.ok(names.includes(n), `${n} in the default *:* search`);
    }

    const patterns = "jmxgate.test:type=Pattern,*";
    const group = await ok(operator, "search_mbeans", { target: LIVE, pattern: patterns });
    assert.deepEqual(sorted(group.results.map((r) => r.target)), sorted([A, B]));
    for (const t of [A, B]) {
        assert.deepEqual(sorted(resultFor(group.results, t).mbeans), sorted(await directValue(t, { type: "search", mbean: patterns })));
    }

    // A glob over every name: the dead target is an entry with its error,
    // the others answer as usual.
    const globbed = await ok(operator, "search_mbeans", { target: "*", pattern: patterns });
    assert.deepEqual(sorted(globbed.results.map((r) => r.target)), sorted([A, B, DOWN]));
    const dead = resultFor(globbed.results, DOWN);
    assert.equal(typeof dead.status, "number", JSON.stringify(dead));
    assert.ok(dead.status >= 400, JSON.stringify(dead));
    assert.equal(typeof dead.error, "string", JSON.stringify(dead));
    assert.equal(resultFor(globbed.results, A).mbeans.length, 2);
});

/** The agent's `list` of one MBean in the tool's shape. */
async function describedByAgent(target, mbean) {
    const [domain, props] = [mbean.slice(0, mbean.indexOf(":")), mbean.slice(mbean.indexOf(":") + 1)];
    const info = await directValue(target, { type: "list", path: `${domain}/${props}` });
    const operations = Object.entries(info.op ?? {}).flatMap(([name, o]) =>
        (Array.isArray(o) ? o : [o]).map((x) => ({
            name,
            description: x.desc ?? null,
            returns: x.ret ?? null,
            arguments: (x.args ?? []).map((a) => ({ name: a.name ?? null, type: a.type ?? null, description: a.desc ?? null })),
        })));
    const attributes = Object.entries(info.attr ?? {}).map(([name, a]) => ({
        name, type: a.type ?? null, description: a.desc ?? null, writable: a.rw ?? false,
    }));
    return { description: info.desc ?? null, operations: byKey(operations), attributes: byKey(attributes) };
}

/** A tool's describe_mbean answer reduced to the fields the agent's list has. */
function comparableDescription(d) {
    return {
        description: d.description,
        operations: byKey(d.operations.map((o) => ({
            name: o.name,
            description: o.description,
            returns: o.returns,
            arguments: o.arguments.map((a) => ({ name: a.name, type: a.type, description: a.description })),
        }))),
        attributes: byKey(d.attributes.map((a) => ({ name: a.name, type: a.type, description: a.description, writable: a.writable }))),
    };
}

test("describe_mbean: attributes, operations and overloads as the agent lists them", async () => {
    for (const mbean of [OPS, TYPES]) {
        const d = await ok(operator, "describe_mbean", { target: A, mbean });
        assert.equal(d.target, A);
        assert.equal(d.mbean, mbean);
        assert.deepEqual(comparableDescription(d), await describedByAgent(A, mbean), mbean);
    }
    const ops = await ok(viewer, "describe_mbean", { target: B, mbean: OPS });
    const adds = ops.operations.filter((o) => o.name === "add");
    assert.equal(adds.length, 3, "add has three overloads");
    assert.deepEqual(sorted(adds.map((o) => o.arguments.map((a) => a.type).join(","))),
        ["int,int", "java.lang.String,java.lang.String", "long,long,long"]);
    const repeat = ops.operations.find((o) => o.name === "repeat");
    assert.deepEqual(repeat.arguments.map((a) => a.name), ["s", "times"]);
    const types = await ok(viewer, "describe_mbean", { target: B, mbean: TYPES });
    const attr = Object.fromEntries(types.attributes.map((a) => [a.name, a]));
    assert.equal(attr.Int.writable, true);
    assert.equal(attr.Name.writable, true);
    assert.equal(attr.LongMax.writable, false);
    assert.equal(attr.Int.type, "int");
});

test("read_attributes: some, all, and across a selector, equal to the agent's values", async () => {
    const attributes = ["Int", "Name", "LongMax", "Double", "Composite", "IntArray"];
    const some = await ok(operator, "read_attributes", { target: A, mbean: TYPES, attributes });
    assert.equal(some.results.length, 1, JSON.stringify(some));
    const values = resultFor(some.results, A).values;
    assert.deepEqual(values, await directValue(A, { type: "read", mbean: TYPES, attribute: attributes }));
    assert.equal(values.Name, A, "the agent names itself after its target");

    const pattern = "jmxgate.test:type=Pattern,name=a";
    const all = await ok(viewer, "read_attributes", { target: A, mbean: pattern });
    assert.deepEqual(resultFor(all.results, A).values, await directValue(A, { type: "read", mbean: pattern }));
    assert.deepEqual(resultFor(all.results, A).values, { Value: "value-a", Level: 1 });

    const group = await ok(viewer, "read_attributes", { target: LIVE, mbean: TYPES, attributes: ["Name", "Int"] });
    assert.deepEqual(sorted(group.results.map((r) => r.target)), sorted([A, B]));
    for (const t of [A, B]) {
        assert.deepEqual(resultFor(group.results, t).values, { Name: t, Int: 42 });
    }
});

test("write_attribute: the previous value back, the new one at the agent", async () => {
    const before = await directValue(A, { type: "read", mbean: TYPES, attribute: "Name" });
    const value = "written by MCP / é ✓";
    const w = await ok(operator, "write_attribute", { target: A, mbean: TYPES, attribute: "Name", value });
    assert.deepEqual(w, { target: A, mbean: TYPES, attribute: "Name", previous: before });
    assert.equal(await directValue(A, { type: "read", mbean: TYPES, attribute: "Name" }), value);
    // A number, and a structured value.
    const int = await ok(operator, "write_attribute", { target: A, mbean: TYPES, attribute: "Int", value: 7 });
    assert.equal(int.previous, 42);
    assert.equal(await directValue(A, { type: "read", mbean: TYPES, attribute: "Int" }), 7);
    const list = await ok(operator, "write_attribute", { target: A, mbean: TYPES, attribute: "StringArray", value: ["u", "v"] });
    assert.deepEqual(list.previous, ["a", "b", "c"]);
    assert.deepEqual(await directValue(A, { type: "read", mbean: TYPES, attribute: "StringArray" }), ["u", "v"]);
    // B was not touched.
    assert.equal(await directValue(B, { type: "read", mbean: TYPES, attribute: "Int" }), 42);
    await directValue(A, { type: "exec", mbean: OPS, operation: "reset" });
});

test("write_attribute: a read-only attribute fails at the agent, with its error", async () => {
    const request = { type: "write", mbean: TYPES, attribute: "LongMax", value: 1 };
    const expected = await viaJolokia(OPERATOR, A, request);
    assert.notEqual(expected.status, 200, JSON.stringify(expected));
    const text = await toolError(operator, "write_attribute", { target: A, mbean: TYPES, attribute: "LongMax", value: 1 });
    assert.ok(text.includes(A), text);
    assert.ok(text.includes(expected.error), `${text}\nshould hold the agent's error: ${expected.error}`);
});

test("execute_operation: overloads by signature, plain names, no arguments", async () => {
    const cases = [
        ["add(int,int)", [2, 3]],
        ["add(long,long,long)", [1, 2, 3]],
        ["add(java.lang.String,java.lang.String)", ["a", "b"]],
        ["echo", ["héllo wörld"]],
        ["arrayLength", [["x", "y", "z"]]],
    ];
    for (const [operation, args] of cases) {
        const r = await ok(operator, "execute_operation", { target: A, mbean: OPS, operation, arguments: args });
        assert.deepEqual(r, {
            target: A, mbean: OPS, operation,
            result: await directValue(A, { type: "exec", mbean: OPS, operation, arguments: args }),
        });
    }
    const none = await ok(operator, "execute_operation", { target: B, mbean: OPS, operation: "noArgs" });
    assert.equal(none.result, "ok");
    assert.equal(none.target, B);
});

test("execute_operation: an operation that throws is an error result with the agent's message", async () => {
    const expected = await viaJolokia(OPERATOR, A, { type: "exec", mbean: OPS, operation: "fail" });
    assert.equal(expected.status, 500, JSON.stringify(expected));
    const text = await toolError(operator, "execute_operation", { target: A, mbean: OPS, operation: "fail" });
    assert.ok(text.includes(A), text);
    assert.ok(text.includes(expected.error), `${text}\nshould hold: ${expected.error}`);
    assert.ok(text.includes("deliberate failure"), text);
});

test("execute_operation: a call the policy denies never reaches the agent; the error is the gateway's", async () => {
    const request = { type: "exec", mbean: OPS, operation: "repeat", arguments: ["ab", 2] };
    const expected = await viaJolokia(OPERATOR, A, request);
    assert.equal(expected.status, 403, JSON.stringify(expected));
    const before = await invocations(A);
    const text = await toolError(operator, "execute_operation", { target: A, mbean: OPS, operation: "repeat", arguments: ["ab", 2] });
    assert.ok(text.includes(A), text);
    assert.ok(text.includes(expected.error), `${text}\nshould hold the policy's wording: ${expected.error}`);
    assert.equal(await invocations(A), before, "the denied operation ran at the agent");
});

test("bad arguments are error results that name the problem", async () => {
    const missing = await toolError(operator, "read_attributes", { target: A });
    assert.match(missing, /mbean/, missing);
    const wrongType = await toolError(operator, "read_attributes", { target: A, mbean: TYPES, attributes: "Int" });
    assert.match(wrongType, /invalid type/, wrongType);
    const malformed = await toolError(operator, "describe_mbean", { target: A, mbean: "not an object name" });
    assert.match(malformed, /not an object name|ObjectName|object name/i, malformed);
    // write and exec take one target, never a group.
    const before = await invocations(A);
    const selector = await toolError(operator, "write_attribute", { target: LIVE, mbean: TYPES, attribute: "Int", value: 1 });
    assert.match(selector, /target/i, selector);
    const glob = await toolError(operator, "execute_operation", { target: "*", mbean: OPS, operation: "noArgs" });
    assert.match(glob, /target/i, glob);
    assert.equal(await directValue(A, { type: "read", mbean: TYPES, attribute: "Int" }), 42);
    assert.equal(await invocations(A), before);
    const nowhere = await toolError(operator, "describe_mbean", { target: "no-such-target", mbean: TYPES });
    assert.match(nowhere, /no-such-target/, nowhere);
});

test("an unknown tool is a JSON-RPC error", async () => {
    await assert.rejects(operator.callTool({ name: "drop_all_tables", arguments: {} }), (e) => {
        assert.ok(e instanceof McpError, String(e));
        return true;
    });
});

test("the viewer cannot write or execute, even by calling the unlisted tools", async () => {
    const before = await invocations(A);
    for (const [name, args] of [
        ["write_attribute", { target: A, mbean: TYPES, attribute: "Int", value: 1 }],
        ["execute_operation", { target: A, mbean: OPS, operation: "reset" }],
    ]) {
        let result;
        try {
            result = await viewer.callTool({ name, arguments: args });
        } catch (e) {
            assert.ok(e instanceof McpError, String(e));
            continue;
        }
        assert.equal(result.isError, true, `${name} as viewer: ${JSON.stringify(result)}`);
    }
    assert.equal(await directValue(A, { type: "read", mbean: TYPES, attribute: "Int" }), 42);
    assert.equal(await invocations(A), before);
    // Reading is what the viewer may do.
    const r = await ok(viewer, "read_attributes", { target: A, mbean: TYPES, attributes: ["Int"] });
    assert.deepEqual(resultFor(r.results, A).values, { Int: 42 });
});

test("a big result is cut to the cap and says so", async () => {
    const big = "x".repeat(200_000);
    const r = await operator.callTool({ name: "execute_operation", arguments: { target: A, mbean: OPS, operation: "echo", arguments: [big] } });
    assert.notEqual(r.isError, true, textOf(r).slice(0, 500));
    assert.equal(typeof r.structuredContent?.truncated, "string", JSON.stringify(r.structuredContent).slice(0, 500));
    assert.ok(JSON.stringify(r.structuredContent).length <= 70_000, `${JSON.stringify(r.structuredContent).length} bytes`);
    assert.ok(textOf(r).length <= 70_000, `${textOf(r).length} bytes of text`);
});

test("a wrong password: the bridge gets no tools and says why", async () => {
    await assert.rejects(async () => {
        const c = await connect({ user: OPERATOR.user, password: "not-the-password" });
        await c.listTools();
    });
    // `jmxgate mcp` ends, having said so on its standard error.
    const bridge = clients.at(-1);
    for (let i = 0; i < 50 && !bridge.stderr().includes("401"); i++) {
        await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(bridge.stderr(), /401/, bridge.stderr());
});
