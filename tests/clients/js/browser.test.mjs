// jolokia.js and @jolokia.js/simple, unmodified, in headless Chromium on a
// page from another origin than the gateway. Run by tests/clients/real_clients.rs:
//   node --test-reporter=spec browser.test.mjs
// The gateway's role policy admits the origins http://localhost:* (<cors>);
// the same page served as http://127.0.0.1:PORT is a denied origin.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

import { chromium } from "playwright-core";

import {
    A, GATEWAY, GATEWAY_PROTOCOL, OPS, PASSWORD, TYPES, USER,
    agentIsV2, basicHeader, directValue, virtualUrl,
} from "./common.mjs";

const require = createRequire(import.meta.url);
const LIB = {
    "/lib/jolokia.mjs": require.resolve("jolokia.js").replace(/jolokia\.cjs$/, "jolokia.mjs"),
    "/lib/jolokia-simple.mjs": require.resolve("@jolokia.js/simple").replace(/jolokia-simple\.cjs$/, "jolokia-simple.mjs"),
};

// The page loads the libraries as ES modules, as an application would.
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>jolokia.js through jmxgate</title>
<script type="importmap">
{"imports": {"jolokia.js": "/lib/jolokia.mjs", "@jolokia.js/simple": "/lib/jolokia-simple.mjs"}}
</script>
<script type="module">
import Jolokia from "jolokia.js";
import "@jolokia.js/simple";
window.Jolokia = Jolokia;
document.body.dataset.ready = "yes";
</script></head><body>jolokia.js test page</body></html>`;

let server;
let port;
let context;
let userDataDir;
/** Every preflight Chromium sent, with the gateway's answer, from CDP. */
const preflights = [];

before(async () => {
    server = createServer((req, res) => {
        const path = new URL(req.url, "http://x").pathname;
        if (path === "/") {
            res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
            res.end(PAGE);
        } else if (LIB[path]) {
            res.writeHead(200, { "Content-Type": "text/javascript; charset=utf-8" });
            res.end(readFileSync(LIB[path]));
        } else {
            res.writeHead(404);
            res.end();
        }
    });
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = server.address().port;
    userDataDir = mkdtempSync(join(tmpdir(), "jmxgate-chromium-"));
    context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
        headless: true,
        args: [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
        ],
    });
});

after(async () => {
    await context?.close();
    server?.close();
    if (userDataDir) {
        rmSync(userDataDir, { recursive: true, force: true });
    }
});

/** A page of the given origin with jolokia.js loaded, and CDP watching its network. */
async function openPage(origin) {
    const page = await context.newPage();
    page.on("console", (m) => console.log(`[page ${origin}] ${m.type()}: ${m.text()}`));
    const cdp = await context.newCDPSession(page);
    await cdp.send("Network.enable");
    const pending = new Map();
    cdp.on("Network.requestWillBeSent", (e) => {
        if (e.request.method === "OPTIONS" || e.type === "Preflight") {
            pending.set(e.requestId, { origin, url: e.request.url, headers: e.request.headers });
        }
    });
    cdp.on("Network.responseReceived", (e) => {
        const p = pending.get(e.requestId);
        if (p) {
            preflights.push({ ...p, status: e.response.status, responseHeaders: lower(e.response.headers) });
        }
    });
    await page.goto(`${origin}/`);
    await page.waitForSelector("body[data-ready=yes]", { timeout: 10000 });
    assert.equal(await page.evaluate(() => location.origin), origin);
    return page;
}

const lower = (h) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

const allowedOrigin = () => `http://localhost:${port}`;
const deniedOrigin = () => `http://127.0.0.1:${port}`;

test("allowed origin: requests with Basic credentials pass the CORS preflight", async () => {
    const page = await openPage(allowedOrigin());
    const agentName = await directValue({ type: "read", mbean: TYPES, attribute: "Name" });
    // 1.7.1 lists down to one operation (domain/MBean/op/name); 2.x takes at
    // most three path segments (domain/MBean/op) and refuses a fourth as a
    // bad request, so its operations are listed one level up.
    const v2 = await agentIsV2();
    const listPath = v2 ? "jmxgate.test/type=Operations/op" : "jmxgate.test/type=Operations/op/sleep";
    const out = await page.evaluate(async ({ url, gateway, user, password, TYPES, OPS, listPath }) => {
        const Jolokia = window.Jolokia;
        // jolokia.js's own username/password options (window.btoa), sent as
        // an Authorization header: that needs a preflight.
        const j = new Jolokia({ url, username: user, password });
        const r = {};
        r.version = await j.version();
        r.getRead = await j.request({ type: "read", mbean: TYPES, attribute: "Name" }, { method: "get" });
        r.postRead = await j.request({ type: "read", mbean: TYPES, attribute: "Name" }, { method: "post" });
        r.oldInt = await j.setAttribute(TYPES, "Int", 4711);
        r.newInt = await j.getAttribute(TYPES, "Int");
        r.sum = await j.execute(OPS, "add(int,int)", 40, 2);
        r.search = await j.search("jmxgate.test:type=Pattern,*");
        r.list = await j.list(listPath);
        r.bulk = await j.request([
            { type: "read", mbean: TYPES, attribute: "Int" },
            { type: "read", mbean: "jmxgate.test:type=Nowhere", attribute: "X" },
        ]);
        // Error callbacks by index.
        const errors = [];
        await j.request({ type: "read", mbean: "jmxgate.test:type=Nowhere", attribute: "X" },
            { success: () => {}, error: (e) => errors.push(e), fetchError: (resp, reason) => errors.push({ fetchError: String(reason) }) });
        r.errors = errors;
        // credentials: "include" needs Access-Control-Allow-Credentials and the echoed origin.
        const withCookies = new Jolokia({ url, username: user, password, credentials: "include" });
        r.included = await withCookies.getAttribute(TYPES, "Double");
        // The gateway's own version, by the plain /jolokia URL.
        r.gatewayVersion = await new Jolokia({ url: gateway + "/jolokia", username: user, password }).version();
        // Without credentials: a 401 the page can read, thanks to CORS headers on it.
        const anonymous = new Jolokia({ url });
        r.anonymous = await anonymous.request({ type: "version" }).then(() => "resolved", (e) => (e instanceof Response ? e.status : String(e)));
        return r;
    }, { url: virtualUrl(A), gateway: GATEWAY, user: USER, password: PASSWORD, TYPES, OPS, listPath });

    assert.equal(out.version.agent, (await directValue({ type: "version" })).agent);
    assert.equal(out.getRead.value, agentName);
    assert.equal(out.postRead.value, agentName);
    assert.equal(out.newInt, 4711);
    assert.equal(await directValue({ type: "read", mbean: TYPES, attribute: "Int" }), 4711, "the write reached the agent");
    assert.notEqual(out.oldInt, 4711);
    assert.equal(out.sum, 42);
    // The names as the agent writes them (1.7.1: keys in canonical order,
    // 2.x: in the order they were registered with).
    const patterns = await directValue({ type: "search", mbean: "jmxgate.test:type=Pattern,*" });
    assert.equal(patterns.length, 2, JSON.stringify(patterns));
    assert.ok(patterns.every((n) => /^jmxgate\.test:.*type=Pattern/.test(n)), JSON.stringify(patterns));
    assert.deepEqual([...out.search].sort(), [...patterns].sort());
    assert.deepEqual(out.list, await directValue({ type: "list", path: listPath }));
    assert.equal((v2 ? out.list.sleep : out.list).args[0].name, "millis", JSON.stringify(out.list));
    assert.deepEqual(out.bulk.map((r) => r.status), [200, 404]);
    assert.equal(out.bulk[0].value, 4711);
    assert.equal(out.errors.length, 1, JSON.stringify(out.errors));
    assert.equal(out.errors[0].status, 404);
    assert.equal(out.included, 3.14159);
    assert.equal(out.gatewayVersion.protocol, GATEWAY_PROTOCOL);
    assert.equal(out.anonymous, 401);

    // Chromium really preflighted, and the gateway admitted the origin.
    const mine = preflights.filter((p) => p.origin === allowedOrigin());
    assert.ok(mine.length > 0, "no preflight seen");
    for (const p of mine) {
        assert.equal(p.status, 200, JSON.stringify(p));
        assert.equal(p.responseHeaders["access-control-allow-origin"], allowedOrigin(), JSON.stringify(p));
        assert.equal(p.responseHeaders["access-control-allow-credentials"], "true");
        assert.match(lower(p.headers)["access-control-request-headers"] ?? "", /authorization/);
        assert.match(p.responseHeaders["access-control-allow-headers"] ?? "", /authorization/i);
    }
    await page.close();
});

test("allowed origin: the scheduler polls through the gateway", async () => {
    const page = await openPage(allowedOrigin());
    const out = await page.evaluate(async ({ url, user, password, TYPES }) => {
        const j = new window.Jolokia({ url, username: user, password });
        const values = [];
        const handle = j.register({ success: (r) => values.push(r.value), error: (e) => values.push({ error: e.status }) },
            { type: "read", mbean: TYPES, attribute: "Counter" });
        j.start(200);
        await new Promise((r) => setTimeout(r, 400));
        await j.setAttribute(TYPES, "Counter", 99);
        await new Promise((r) => setTimeout(r, 800));
        j.stop();
        await new Promise((r) => setTimeout(r, 1000)); // polls in flight land
        j.unregister(handle);
        return { values, running: j.isRunning(), jobs: j.jobs() };
    }, { url: virtualUrl(A), user: USER, password: PASSWORD, TYPES });
    assert.ok(out.values.length >= 3, JSON.stringify(out));
    assert.ok(out.values.every((v) => typeof v === "number"), JSON.stringify(out));
    assert.equal(out.values.at(-1), 99);
    assert.equal(out.running, false);
    assert.deepEqual(out.jobs, []);
    await page.close();
});

test("denied origin: the browser refuses, and nothing is written", async () => {
    const page = await openPage(deniedOrigin());
    const before = await directValue({ type: "read", mbean: TYPES, attribute: "Name" });
    const out = await page.evaluate(async ({ url, user, password, TYPES, OPS }) => {
        const j = new window.Jolokia({ url, username: user, password });
        const outcome = (p) => p.then((v) => ({ resolved: v }), (e) => ({ rejected: e instanceof Response ? e.status : `${e.name}: ${e.message}` }));
        return {
            read: await outcome(j.request({ type: "read", mbean: TYPES, attribute: "Name" }, { method: "get" })),
            write: await outcome(j.request({ type: "write", mbean: TYPES, attribute: "Name", value: "from-a-denied-origin" }, { method: "post" })),
            exec: await outcome(j.execute(OPS, "echo", "x")),
            // No credentials, a "simple" GET: sent without a preflight, but
            // the answer has no CORS headers, so the page can't read it.
            anonymous: await outcome(new window.Jolokia({ url }).request({ type: "version" }, { method: "get" })),
        };
    }, { url: virtualUrl(A), user: USER, password: PASSWORD, TYPES, OPS });
    for (const [what, o] of Object.entries(out)) {
        assert.ok(o.rejected && /TypeError: Failed to fetch/.test(o.rejected), `${what}: ${JSON.stringify(o)}`);
    }
    assert.equal(await directValue({ type: "read", mbean: TYPES, attribute: "Name" }), before, "the write never reached the agent");
    const mine = preflights.filter((p) => p.origin === deniedOrigin());
    assert.ok(mine.length > 0, "no preflight seen");
    for (const p of mine) {
        assert.equal(p.responseHeaders["access-control-allow-origin"], undefined, JSON.stringify(p));
    }
    await page.close();
});

test("the preflight answers, as seen without a browser", async () => {
    const ask = async (origin) => {
        const r = await fetch(virtualUrl(A) + "/", {
            method: "OPTIONS",
            headers: { Origin: origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type" },
        });
        return { status: r.status, origin: r.headers.get("access-control-allow-origin"), headers: r.headers.get("access-control-allow-headers") };
    };
    const allowed = await ask("http://localhost:1234");
    assert.deepEqual(allowed, { status: 200, origin: "http://localhost:1234", headers: "authorization,content-type" });
    const denied = await ask("http://127.0.0.1:1234");
    assert.equal(denied.origin, null);
    // A credentialed request from an admitted origin carries the headers too.
    const r = await fetch(virtualUrl(A) + "/version", { headers: { Origin: "http://localhost:1", Authorization: basicHeader(USER, PASSWORD) } });
    assert.equal(r.headers.get("access-control-allow-origin"), "http://localhost:1");
    assert.equal(r.headers.get("access-control-allow-credentials"), "true");
});
