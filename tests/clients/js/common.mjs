// What the suites share: the environment tests/clients/real_clients.rs sets, and a
// way to ask an agent directly (to compare the gateway's answers with).

export function env(name) {
    const v = process.env[name];
    if (!v) {
        throw new Error(`${name} is not set: run this through tests/clients/real_clients.rs`);
    }
    return v;
}

/** The gateway's base URL, e.g. http://127.0.0.1:PORT (no trailing slash). */
export const GATEWAY = env("JMXGATE_URL");
export const USER = env("JMXGATE_USER");
export const PASSWORD = env("JMXGATE_PASSWORD");
/** Targets: A and B are different agents; SLOW is A with a 1 s request_timeout. */
export const A = env("JMXGATE_TARGET_A");
export const B = env("JMXGATE_TARGET_B");
export const SLOW = env("JMXGATE_TARGET_SLOW");
/** Agent A's own Jolokia URL, for answers to compare with. */
export const AGENT_A = env("JMXGATE_AGENT_A_URL");
/** The protocol version the gateway itself speaks (its own `version` answer). */
export const GATEWAY_PROTOCOL = env("JMXGATE_PROTOCOL");

export const TYPES = "jmxgate.test:type=Types";
export const OPS = "jmxgate.test:type=Operations";

export const basicHeader = (user, password) =>
    "Basic " + Buffer.from(`${user}:${password}`).toString("base64");

/** The virtual agent URL of a target. */
export const virtualUrl = (target) => `${GATEWAY}/jolokia/targets/${target}`;

/** POSTs a request straight to agent A (not through the gateway). */
export async function direct(request) {
    const r = await fetch(AGENT_A, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(request),
    });
    if (r.status !== 200) {
        throw new Error(`agent answered HTTP ${r.status}`);
    }
    return r.json();
}

/** The value of a request agent A answers directly; fails on an error. */
export async function directValue(request) {
    const r = await direct(request);
    if (r.status !== 200) {
        throw new Error(`agent refused ${JSON.stringify(request)}: ${JSON.stringify(r)}`);
    }
    return r.value;
}

/**
 * Whether agent A is a Jolokia 2.x agent, as it says itself. Where the
 * generations answer differently by design, the suites expect each one's
 * own behaviour.
 */
export async function agentIsV2() {
    const version = await directValue({ type: "version" });
    return version.agent.startsWith("2.");
}
