#!/usr/bin/env python3
"""The measuring half of bench/kubernetes.sh (which starts the API server and
the agent and sets the environment read here); prints a markdown report."""

import concurrent.futures
import http.client
import json
import os
import socket
import ssl
import statistics
import subprocess
import threading
import time
import urllib.request

WORK = os.environ["WORK"]
API_PORT = int(os.environ["API_PORT"])
AGENT_PORT = int(os.environ["AGENT_PORT"])
PODS = int(os.environ["PODS"])
CHANGES = float(os.environ["CHANGES"])
CHURN = float(os.environ["CHURN"])
GATEWAY = os.environ["GATEWAY"]
NS = "bench"
TICK = os.sysconf("SC_CLK_TCK")

TOKEN = open(f"{WORK}/api/tokens.csv").read().split(",")[0]
CONTEXT = ssl.create_default_context(cafile=f"{WORK}/api/certs/apiserver.crt")
local = threading.local()


def api(method, path, body=None, content_type="application/json", raw=False):
    """One API server call on this thread's kept-alive connection."""
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = local.conn = http.client.HTTPSConnection("127.0.0.1", API_PORT, context=CONTEXT, timeout=120)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type}
    data = json.dumps(body).encode() if body is not None else None
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read()
    except (http.client.HTTPException, OSError):
        local.conn = None
        raise
    if resp.status >= 300 and resp.status != 404:
        raise RuntimeError(f"{method} {path}: {resp.status} {text[:300]!r}")
    return text if raw else json.loads(text)


def pod(name, port, labels):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "jvm", "image": "none", "ports": [{"name": "jolokia", "containerPort": port}]}]},
    }


def running(name, ip, ready=True):
    status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    api("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", {"status": status},
        "application/merge-patch+json")


def stand_in_ip(i):
    return f"127.1.{i // 250}.{i % 250 + 1}"


def make_pod(i):
    api("POST", f"/api/v1/namespaces/{NS}/pods", pod(f"p-{i}", 8778, {"app": "bench"}))
    running(f"p-{i}", stand_in_ip(i))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def targets_known(port):
    status, body = http_get(port, "/jolokia/version")
    if status != 200:
        return -1
    return json.loads(body)["value"].get("info", {}).get("jmxgate", {}).get("targets", 0)


def start_gateway(name, pod_selector):
    port = free_port()
    config = f"{WORK}/{name}.toml"
    with open(config, "w") as f:
        f.write(f"""[server]
listen = "127.0.0.1:{port}"
[health]
probe_interval = "0s"
[[discovery.kubernetes]]
kubeconfig = "{WORK}/api/kubeconfig"
namespaces = ["{NS}"]
pod_selector = "{pod_selector}"
# The stand-in Pods' IPs are loopback addresses, refused unless listed.
allowed_networks = ["127.0.0.0/8"]
""")
    log = open(f"{WORK}/{name}.log", "w")
    started = time.monotonic()
    proc = subprocess.Popen([GATEWAY, "serve", "--config", config], stdout=log, stderr=log)
    return proc, port, started


def wait_for(what, check, limit=300):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = check()
        if got is not None:
            return got
        time.sleep(0.02)
    raise SystemExit(f"gave up waiting for {what} after {limit} s; see {WORK}/*.log")


def main():
    api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    print(f"==> writing {PODS} Pods and their status", flush=True, file=os.sys.stderr)
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(make_pod, range(PODS)))
    written = time.monotonic() - t

    # The anchor: one plain LIST of the same Pods.
    lists = []
    for _ in range(3):
        t = time.monotonic()
        body = api("GET", f"/api/v1/namespaces/{NS}/pods", raw=True)
        lists.append(time.monotonic() - t)
    list_seconds = statistics.median(lists)

    # The same gateway with a selector that picks no Pod: its RSS is the base.
    base, base_port, _ = start_gateway("base", "app=nothing")
    wait_for("the base gateway", lambda: True if targets_known(base_port) == 0 else None)
    time.sleep(3)
    base_rss = rss_kib(base.pid)
    base.terminate()
    base.wait()

    print("==> discovering them", flush=True, file=os.sys.stderr)
    gw, port, started = start_gateway("gateway", "app in (bench,live)")
    wait_for("every target", lambda: True if targets_known(port) >= PODS else None)
    known_seconds = time.monotonic() - started
    time.sleep(3)
    rss = rss_kib(gw.pid)
    per_target = (rss - base_rss) * 1024 / PODS

    print(f"==> {CHANGES:g} Pod changes a second for {CHURN:g} s", flush=True, file=os.sys.stderr)
    api_pids = [int(p) for p in open(f"{WORK}/api/pids").read().split()]
    gw_cpu = cpu_seconds(gw.pid)
    api_cpu = sum(cpu_seconds(p) for p in api_pids)
    t0 = time.monotonic()
    k = 0
    while time.monotonic() - t0 < CHURN:
        due = t0 + k / CHANGES
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        api("PATCH", f"/api/v1/namespaces/{NS}/pods/p-{k % PODS}",
            {"metadata": {"labels": {"generation": str(k)}}}, "application/merge-patch+json")
        k += 1
    # The last changes' debounce, then the window closes.
    time.sleep(0.5)
    window = time.monotonic() - t0
    gw_share = (cpu_seconds(gw.pid) - gw_cpu) / window
    api_share = (sum(cpu_seconds(p) for p in api_pids) - api_cpu) / window
    rss_after_churn = rss_kib(gw.pid)

    print("==> Pods turning Ready and deleted", flush=True, file=os.sys.stderr)
    first_answers, gone = [], []
    for n in range(5):
        name = f"live-{n}"
        api("POST", f"/api/v1/namespaces/{NS}/pods", pod(name, AGENT_PORT, {"app": "live"}))
        path = f"/jolokia/targets/{NS}.{name}/version"
        t = time.monotonic()
        running(name, "127.0.1.1")

        def answered():
            status, body = http_get(port, path)
            return True if status == 200 and json.loads(body).get("status") == 200 else None

        wait_for(f"{name}'s first answer", answered, limit=120)
        first_answers.append(time.monotonic() - t)
        t = time.monotonic()
        api("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
        wait_for(f"{name}'s target gone", lambda: True if http_get(port, path)[0] == 404 else None, limit=120)
        gone.append(time.monotonic() - t)
    gw.terminate()
    gw.wait()

    ms = lambda s: f"{s * 1000:.0f} ms"
    print(f"""# Kubernetes discovery at scale

{PODS} Pods in one namespace of a real kube-apiserver 1.20.2 (etcd 3.4, this
machine: {os.cpu_count()} CPUs), written in {written:.0f} s. The Pods are stand-ins
(127.1.x.y, nothing listens; health probes off); the Pods timed for a first
answer run a real Jolokia 1.7.1 agent. One run of `bench/kubernetes.sh`.

| measure | jmxgate | anchor | ratio | aim |
|---|---|---|---|---|
| start to all {PODS} targets known | {known_seconds:.2f} s | one LIST of the Pods: {list_seconds:.2f} s ({len(body) / 1e6:.1f} MB) | {known_seconds / list_seconds:.1f}× | ≤ 10 s |
| RSS per discovered target, 3 s after all known | {per_target / 1024:.2f} KiB | gateway picking no Pod: {base_rss / 1024:.0f} MiB; with them: {rss / 1024:.0f} MiB | | ≤ 3 KB |
| the same after the changes below | {(rss_after_churn - base_rss) / PODS:.2f} KiB | with them: {rss_after_churn / 1024:.0f} MiB | | ≤ 3 KB |
| CPU at {CHANGES:g} Pod changes/s ({k} in {window:.0f} s) | {gw_share * 100:.1f} % of a core | API server + etcd: {api_share * 100:.1f} % | {gw_share / api_share if api_share else 0:.2f}× | < 5 % |
| Pod Ready → first answer through the gateway (median of 5) | {ms(statistics.median(first_answers))} | | | ≤ 1 s |
| Pod deleted → its target gone (median of 5) | {ms(statistics.median(gone))} | | | ≤ 1 s |

Changes are handed to the gateway {200} ms after the first of a burst
(`DEBOUNCE`), so both latencies include that wait.""")


if __name__ == "__main__":
    main()
