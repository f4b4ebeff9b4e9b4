#!/usr/bin/env python3
"""Fleet-scale curves for jmxgate, with nginx proxy_pass beside it in the
same run (bench/scale.sh sets up the tools and calls this).

Stand-ins: one static nginx plays every agent of a large fleet. Each target
has its own loopback address (`127.x.y.z`, nginx listening on all of
them) and path (`/t<i>/jolokia`), so each has connections of its own as
in a real fleet, and gets the same canned Jolokia answer (with the
target's number as `used`), so the gateway's own cost is what is
measured; 100,000 real JVMs cannot run here. Real agents stay in bench/run.sh for the per-agent rows.

Curves:
  * targets 100 -> 100,000: start-up and reload (SIGHUP) time, idle RSS and idle CPU (health
    probes running), GET /jolokia/targets (whole list and one page of
    1000), a read fanned out to every target (time, peak RSS, answers),
    the same read reduced to the five largest (time, peak RSS);
  * bulk size 1 -> 1000 against one stand-in: jmxgate and nginx;
  * concurrent clients 1 -> 256: req/s, p50, p99 and CPU per request for
    jmxgate and nginx.
jmxgate runs with Basic authentication, a policy and the audit log on.

Writes bench/scale-results.md and bench/scale.png.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import base64
import platform
import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("JMXGATE_BIN", os.path.join(ROOT, "target/release/jmxgate"))
TARGETS = [int(n) for n in os.environ.get("TARGETS", "100 1000 10000 100000").split()]
BULKS = [int(n) for n in os.environ.get("BULKS", "1 10 100 1000").split()]
CLIENTS = [int(n) for n in os.environ.get("CLIENTS", "1 2 8 32 128 256").split()]
DURATION = os.environ.get("DURATION", "5s")
PROBE_INTERVAL = float(os.environ.get("PROBE_INTERVAL", "10"))
# health.stable_probe_interval in seconds; unset: the gateway's default.
STABLE_PROBE_INTERVAL = os.environ.get("STABLE_PROBE_INTERVAL")
# Serving threads of both proxies: nginx's worker_processes and jmxgate's
# server.workers, one per CPU for both (as each defaults to on a machine
# of its own: Debian's nginx.conf says `auto`).
WORKERS = int(os.environ.get("WORKERS", os.cpu_count() or 1))
TICKS = os.sysconf("SC_CLK_TCK")
USER, PASSWORD = "bench", "bench-password"
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

work = tempfile.mkdtemp(prefix="jmxgate-scale.")
# nginx's worker (another user) reads the canned bulk answers from here.
os.chmod(work, 0o755)
procs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_ticks(pids):
    """User and system ticks of one process or several together."""
    total = 0
    for pid in pids if isinstance(pids, list) else [pids]:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def reset_peak(pid):
    # Writing 5 resets VmHWM (Linux 4.0+), so a fan-out's own peak shows.
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def http(method, url, body=None, auth=True, timeout=600):
    req = urllib.request.Request(url, method=method, data=body)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if auth:
        req.add_header("Authorization", AUTH)
    started = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
    return time.monotonic() - started, data


CANNED = {
    "request": {"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage"},
    # `agent` and `protocol` make the stand-in's health probe answers look
    # like a version answer's.
    "value": {"agent": "stand-in", "protocol": "7.2", "used": 7527472, "max": 64880640},
    "timestamp": 1795312410,
    "status": 200,
}


def start_nginx(static_port, proxy_port):
    """The stand-in agents (static answers) and nginx proxy_pass in front
    of them, as separate processes so each one's CPU time is its own."""
    one = json.dumps(CANNED)
    # Bulk answers as files (too long for `return`); POST can't be served
    # from a file, so nginx fetches it by GET from itself.
    os.makedirs(os.path.join(work, "files"), mode=0o755, exist_ok=True)
    for k in BULKS:
        with open(os.path.join(work, "files", f"bulk{k}.json"), "w") as f:
            f.write("[" + ",".join([one] * k) + "]")
    bulks = "\n".join(
        f"        location = /bulk{k}/jolokia {{ proxy_method GET; "
        f"proxy_pass http://127.0.0.1:{static_port}/files/bulk{k}.json; }}"
        for k in BULKS
    )
    bulks += f"\n        location /files/ {{ root {work}; default_type application/json; }}"
    # Each fleet target's own heap in use: its number, so a reduction has
    # values to rank.
    varying = one.replace('"used": 7527472', '"used": $n')
    assert varying != one
    bulks += f"\n        location ~ ^/t(?<n>[0-9]+)/jolokia$ {{ return 200 '[{varying}]'; }}"
    static = f"""worker_processes 1;
worker_rlimit_nofile 262144;
pid {work}/static.pid;
error_log {work}/static-error.log warn;
events {{ worker_connections 250000; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    server {{
        listen {static_port} backlog=4096;
        default_type application/json;
{bulks}
        location / {{ return 200 '[{one}]'; }}
    }}
}}
"""
    proxy = f"""worker_processes {WORKERS};
worker_rlimit_nofile 65536;
pid {work}/proxy.pid;
error_log {work}/proxy-error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    upstream static {{ server 127.0.0.1:{static_port}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{proxy_port} backlog=4096;
        location / {{ proxy_pass http://static; proxy_http_version 1.1; proxy_set_header Connection ""; }}
    }}
}}
"""
    for name, text in (("static", static), ("proxy", proxy)):
        path = os.path.join(work, f"{name}.conf")
        with open(path, "w") as f:
            f.write(text)
        subprocess.run(["nginx", "-c", path], check=True)
    for name in ("static", "proxy"):
        pid_file = os.path.join(work, f"{name}.pid")
        for _ in range(50):
            if os.path.exists(pid_file) and open(pid_file).read().strip():
                break
            time.sleep(0.1)
    master = int(open(os.path.join(work, "proxy.pid")).read())
    workers = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    return [int(w) for w in workers]


def stop_nginx():
    for name in ("static", "proxy"):
        pid_file = os.path.join(work, f"{name}.pid")
        if os.path.exists(pid_file):
            try:
                os.kill(int(open(pid_file).read()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


def target_host(i):
    """Each stand-in target at an address of its own on loopback (all of
    127.0.0.0/8 is local): like a real fleet, each has its own
    connections, which one shared address would pool together."""
    return f"127.{1 + i // 65536}.{i // 256 % 256}.{i % 256}"


def gateway_config(port, static_port, n, directory, bulk_targets=False):
    hash_ = subprocess.run(
        [BIN, "hash-password"], input=PASSWORD + "\n", capture_output=True, text=True, check=True
    ).stdout.strip()
    with open(os.path.join(directory, "users.toml"), "w") as f:
        f.write(f'[[users]]\nname = "{USER}"\npassword_hash = "{hash_}"\nroles = ["bench"]\n')
    with open(os.path.join(directory, "policy.xml"), "w") as f:
        f.write(
            "<restrict><deny><mbean><name>java.lang:type=Runtime</name>"
            "<attribute>SystemProperties</attribute></mbean></deny></restrict>\n"
        )
    # The fleet as an inventory file, as a fleet of this size is kept.
    with open(os.path.join(directory, "fleet.json"), "w") as f:
        json.dump(
            [
                {
                    "name": f"t-{i}",
                    "url": f"http://{target_host(i)}:{static_port}/t{i}/jolokia",
                    "labels": {"env": "bench", "shard": f"s{i % 16}"},
                }
                for i in range(1, n + 1)
            ],
            f,
        )
    extra = "".join(
        f'\n[[targets]]\nname = "bulk{k}"\nurl = "http://127.0.0.1:{static_port}/bulk{k}/jolokia"\n'
        for k in BULKS
        if bulk_targets
    )
    config = f"""[server]
listen = "127.0.0.1:{port}"
workers = {WORKERS}
auth = ["basic"]
max_bulk_items = 2000
max_targets_per_item = {max(n, 1)}
[log]
format = "text"
filter = "warn,jmxgate=info,jmxgate::audit=warn"
[health]
probe_interval = "{0 if bulk_targets else PROBE_INTERVAL:g}s"
{f'stable_probe_interval = "{float(STABLE_PROBE_INTERVAL):g}s"' if STABLE_PROBE_INTERVAL and not bulk_targets else ""}
[auth.basic]
users_file = "users.toml"
[audit]
dir = "audit"
[[roles]]
name = "bench"
targets = ["*"]
policy = "policy.xml"
[[inventory]]
targets_file = "fleet.json"
{extra}"""
    path = os.path.join(directory, "gateway.toml")
    with open(path, "w") as f:
        f.write(config)
    return path


def start_gateway(config, directory):
    log = open(os.path.join(directory, "gateway.log"), "w+")
    started = time.monotonic()
    p = subprocess.Popen([BIN, "serve", "-c", config], stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    while True:
        log.seek(0)
        if "listening on" in log.read():
            break
        if p.poll() is not None:
            log.seek(0)
            sys.exit("the gateway did not start:\n" + log.read())
        time.sleep(0.01)
    return p, time.monotonic() - started


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def wait_probed(gw, name, within=600):
    """Until the first probe round has reached `name` (the fleet's last)."""
    deadline = time.monotonic() + within
    # The page after the target before `name` (fleet order) is `name`.
    i = int(name.split("-")[1])
    url = f"{gw}/jolokia/targets?limit=1" + (f"&after=t-{i - 1}" if i > 1 else "")
    while time.monotonic() < deadline:
        _, data = http("GET", url)
        value = json.loads(data)["value"]
        if value and value[0]["health"]["state"] != "unknown":
            return
        time.sleep(0.2)
    sys.exit(f"the first probe round did not reach {name} within {within} s")


def fleet_row(n, static_port):
    directory = os.path.join(work, f"fleet-{n}")
    os.makedirs(directory)
    port = free_port()
    config = gateway_config(port, static_port, n, directory)
    p, startup = start_gateway(config, directory)
    gw = f"http://127.0.0.1:{port}"
    first_round_started = time.monotonic()
    wait_probed(gw, f"t-{n}")
    first_round = time.monotonic() - first_round_started
    # Idle: one whole later round, whose probes are spread over the
    # interval, once the fleet is stable (3 answers in a row: the first
    # round and two more), from when it starts.
    time.sleep(max(0.0, 3 * PROBE_INTERVAL - first_round) + 0.5)
    t0 = cpu_ticks(p.pid)
    time.sleep(PROBE_INTERVAL)
    idle_cpu = (cpu_ticks(p.pid) - t0) / TICKS / PROBE_INTERVAL * 100
    rss_idle = status_kb(p.pid, "VmRSS")
    list_s, data = http("GET", gw + "/jolokia/targets")
    listed = len(json.loads(data)["value"])
    page_s, data = http("GET", gw + "/jolokia/targets?limit=1000")
    assert len(json.loads(data)["value"]) == min(n, 1000)
    reset_peak(p.pid)
    rss_before = status_kb(p.pid, "VmRSS")
    body = json.dumps(
        {"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
         "target": {"url": "t-*"}, "config": {"ignoreErrors": True}}
    ).encode()
    fan_s, data = http("POST", gw + "/jolokia", body)
    data_fan = data
    answer = json.loads(data)
    values = answer.get("value") or {}
    failed = sum(1 for v in values.values() if isinstance(v, dict) and "error" in v)
    peak = status_kb(p.pid, "VmHWM")
    # Again: the first fan-out (on each serving worker) also makes what
    # each target keeps once used, which stays. Which worker serves a
    # request is not ours to choose: the least of three more is what a
    # fan-out holds in flight.
    warm_peak, rss_before_warm = least_peak(p, gw, body)
    reload_s = reload_fleet(p, gw, directory)
    stop(p)
    # The same read reduced to the five largest, folded as answers arrive,
    # in a gateway of its own: memory the fan-out's allocator kept would
    # hide what the reduction needs.
    p, _ = start_gateway(config, directory)
    wait_probed(gw, f"t-{n}")
    reset_peak(p.pid)
    rss_before_reduce = status_kb(p.pid, "VmRSS")
    reduced_body = json.dumps(
        {"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage",
         "target": {"url": "t-*"}, "reduce": {"op": "top", "n": 5, "path": "used"}}
    ).encode()
    reduce_s, data = http("POST", gw + "/jolokia", reduced_body)
    reduced = json.loads(data)
    reduce_peak = status_kb(p.pid, "VmHWM")
    warm_reduce_peak, rss_before_warm_reduce = least_peak(p, gw, reduced_body)
    top = [e["value"] for e in reduced["value"]["result"]]
    assert top == sorted(top, reverse=True) and top[0] == n, reduced["value"]["result"]
    stop(p)
    row = {
        "targets": n, "startup_s": startup, "first_probe_round_s": first_round,
        "rss_idle_mb": rss_idle / 1024, "idle_cpu_pct": idle_cpu,
        "list_s": list_s, "listed": listed, "page_s": page_s,
        "fanout_s": fan_s, "fanout_answered": len(values) - failed, "fanout_failed": failed,
        "fanout_status": answer.get("status"), "fanout_peak_extra_mb": (peak - rss_before) / 1024,
        "answer_mb": len(data_fan) / 1e6,
        "fanout_warm_peak_extra_mb": (warm_peak - rss_before_warm) / 1024,
        "reduce_warm_peak_extra_mb": (warm_reduce_peak - rss_before_warm_reduce) / 1024,
        # What a target in flight costs beyond the answer's own bytes (the
        # second fan-out: the first also sets up connection pools).
        "fanout_bytes_per_target": max(0, (warm_peak - rss_before_warm) * 1024 - len(data_fan)) / n,
        "reduce_bytes_per_target": (warm_reduce_peak - rss_before_warm_reduce) * 1024 / n,
        "reduce_s": reduce_s, "reduce_counted": reduced["value"]["count"],
        "reduce_peak_extra_mb": (reduce_peak - rss_before_reduce) / 1024,
        "reload_s": reload_s,
    }
    print(f"  {n:>6} targets: start {startup:.2f} s, first probe round {first_round:.1f} s, "
          f"idle RSS {rss_idle / 1024:.0f} MB, idle CPU {idle_cpu:.1f} %, "
          f"/targets {list_s * 1000:.0f} ms ({listed}), page {page_s * 1000:.1f} ms, "
          f"fan-out {fan_s:.2f} s ({len(values) - failed} answered, {failed} failed), "
          f"+{(peak - rss_before) / 1024:.0f} MB peak, again +{row['fanout_warm_peak_extra_mb']:.0f} MB "
          f"({row['fanout_bytes_per_target']:.0f} B per target beyond the {len(data_fan) / 1e6:.1f} MB answer); "
          f"top 5 of all {reduce_s:.2f} s (+{(reduce_peak - rss_before_reduce) / 1024:.0f} MB peak, again "
          f"+{row['reduce_warm_peak_extra_mb']:.0f} MB, {row['reduce_bytes_per_target']:.0f} B "
          f"per target); reload {reload_s:.2f} s", flush=True)
    return row


def least_peak(p, gw, body, times=3):
    """The request `times` more, each from a reset peak: (peak, RSS before)
    of the one that added least."""
    runs = []
    for _ in range(times):
        reset_peak(p.pid)
        before = status_kb(p.pid, "VmRSS")
        http("POST", gw + "/jolokia", body)
        runs.append((status_kb(p.pid, "VmHWM") - before, before))
    added, before = min(runs)
    return before + added, before


def reload_fleet(p, gw, directory):
    """A reload of the whole fleet: the inventory file rewritten with one
    target's labels changed, then SIGHUP; the time until the gateway logs
    the reload, checked to have taken the change."""
    path = os.path.join(directory, "fleet.json")
    with open(path) as f:
        fleet = json.load(f)
    fleet[0]["labels"]["reloaded"] = "yes"
    with open(path + ".new", "w") as f:
        json.dump(fleet, f)
    os.replace(path + ".new", path)
    log_path = os.path.join(directory, "gateway.log")
    with open(log_path) as f:
        before = f.read().count("configuration reloaded")
    started = time.monotonic()
    p.send_signal(signal.SIGHUP)
    while True:
        with open(log_path) as f:
            if f.read().count("configuration reloaded") > before:
                break
        if time.monotonic() - started > 60:
            sys.exit("the gateway did not log a reload within 60 s")
        time.sleep(0.005)
    took = time.monotonic() - started
    _, data = http("GET", gw + "/jolokia/targets?limit=1")
    first = json.loads(data)["value"][0]
    assert first["labels"].get("reloaded") == "yes", f"the reload did not take the change: {first}"
    return took


def wrk_lua(body, auth):
    """A wrk script whose every request differs (`@N@` in the body becomes
    a per-thread counter), so the gateway's sharing of identical reads in
    flight does not make its work smaller than nginx's."""
    path = os.path.join(work, f"wrk-{time.monotonic_ns()}.lua")
    with open(path, "w") as f:
        f.write('wrk.method = "POST"\n')
        f.write(f"template = {json.dumps(body)}\n")
        f.write('wrk.headers["Content-Type"] = "application/json"\n')
        if auth:
            f.write(f'wrk.headers["Authorization"] = "{AUTH}"\n')
        f.write(
            "init = function(args) math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16)) "
            "counter = math.random(1, 1000000000) end\n"
            "request = function() counter = counter + 1 "
            "return wrk.format(nil, nil, nil, (string.gsub(template, '@N@', tostring(counter)))) end\n"
        )
    return path


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)", text or "")
    if not m:
        return None
    v = float(m.group(1))
    return {"us": v / 1000, "ms": v, "s": v * 1000}[m.group(2)]


def check_ok(url, body, auth):
    """One request first: every item must succeed, or the numbers below
    would measure errors."""
    _, data = http("POST", url, body.replace("@N@", "0").encode(), auth=auth)
    answers = json.loads(data)
    answers = answers if isinstance(answers, list) else [answers]
    bad = [a for a in answers if a.get("status") != 200]
    if bad:
        sys.exit(f"{url}: {len(bad)} of {len(answers)} items failed, e.g. {bad[0]}")


def wrk(url, body, connections, pid, auth):
    check_ok(url, body, auth)
    script = wrk_lua(body, auth)
    threads = min(2, connections)
    t0 = cpu_ticks(pid)
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{DURATION}", "--timeout", "5s",
         "--latency", "-s", script, url],
        capture_output=True, text=True,
    ).stdout
    t1 = cpu_ticks(pid)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    n = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = to_ms(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = to_ms(re.search(r"\s99%\s+(\S+)", out).group(1))
    if "Non-2xx" in out:
        print(f"warning: non-2xx answers from {url}", file=sys.stderr)
    cpu_us = (t1 - t0) / TICKS * 1e6 / n if n else None
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99, "cpu_us": cpu_us}


def load_rows(static_port, proxy_port, nginx_workers):
    directory = os.path.join(work, "load")
    os.makedirs(directory)
    port = free_port()
    config = gateway_config(port, static_port, 1, directory, bulk_targets=True)
    p, _ = start_gateway(config, directory)
    gw = f"http://127.0.0.1:{port}"
    # `@N@`: a counter per request (see wrk_lua).
    read = {"type": "read", "mbean": "java.lang:type=Memory,bench=@N@", "attribute": "HeapMemoryUsage"}
    bulk_rows, client_rows = [], []
    for k in BULKS:
        body = json.dumps([read] * k)
        g = wrk(f"{gw}/jolokia/targets/bulk{k}/", body, 16, p.pid, True)
        x = wrk(f"http://127.0.0.1:{proxy_port}/bulk{k}/jolokia", body, 16, nginx_workers, False)
        bulk_rows.append({"bulk": k, "jmxgate": g, "nginx": x})
        print(f"  bulk {k:>4}: jmxgate {g['rps']:>8.0f} req/s p50 {g['p50_ms']:.2f} ms | "
              f"nginx {x['rps']:>8.0f} req/s p50 {x['p50_ms']:.2f} ms", flush=True)
    for c in CLIENTS:
        body = json.dumps(read)
        g = wrk(f"{gw}/jolokia/targets/t-1/", body, c, p.pid, True)
        x = wrk(f"http://127.0.0.1:{proxy_port}/t1/jolokia", body, c, nginx_workers, False)
        client_rows.append({"clients": c, "jmxgate": g, "nginx": x})
        print(f"  {c:>3} clients: jmxgate {g['rps']:>8.0f} req/s p50 {g['p50_ms']:.2f} ms "
              f"p99 {g['p99_ms']:.2f} ms CPU {g['cpu_us']:.0f} us | nginx {x['rps']:>8.0f} req/s "
              f"p50 {x['p50_ms']:.2f} ms p99 {x['p99_ms']:.2f} ms CPU {x['cpu_us']:.0f} us", flush=True)
    stop(p)
    return bulk_rows, client_rows


def markdown(fleet, bulks, clients):
    lines = [
        f"# Fleet-scale curves\n",
        f"Measured {datetime.date.today()} on {os.cpu_count()} cores ({platform.machine()}) by "
        "`bench/scale.sh`, jmxgate (release) with Basic authentication, a policy and the audit log "
        f"on, next to nginx proxy_pass in the same run; both serve with {WORKERS} worker(s) "
        "(`server.workers`, `worker_processes`), and a proxy's CPU is all of its workers' together.\n",
        "**Stand-ins:** the agents of the target curve are not JVMs. One static nginx answers every "
        "target at its own loopback address and path (`http://127.x.y.z:<port>/t<i>/jolokia`, so each has "
        "connections of its own) with the same canned Jolokia answer (its `used` the target's number, so a reduction has values to rank), because 100,000 JVMs "
        "cannot run on one machine; the gateway's own cost is what these rows show. Real agents are "
        "in `bench/results.md` (bench/run.sh).\n",
        "## Targets\n",
        f"| targets | start-up | reload (SIGHUP) | first probe round | idle RSS | idle CPU (probes every {PROBE_INTERVAL:g} s) | "
        "`GET /jolokia/targets` (all) | one page of 1000 | read fanned out to all | answered | "
        "peak RSS added by the fan-out: first, again (answer size; in flight per target beyond it) | "
        "the same read reduced to the top 5 | peak RSS added by the reduction: first, again (per target) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in fleet:
        lines.append(
            f"| {r['targets']:,} | {r['startup_s']:.2f} s | {r['reload_s']:.2f} s | {r['first_probe_round_s']:.1f} s | "
            f"{r['rss_idle_mb']:.0f} MB | {r['idle_cpu_pct']:.1f} % | {r['list_s'] * 1000:.0f} ms | "
            f"{r['page_s'] * 1000:.1f} ms | {r['fanout_s']:.2f} s | "
            f"{r['fanout_answered']:,} of {r['targets']:,} | {r['fanout_peak_extra_mb']:.0f}, "
            f"{r['fanout_warm_peak_extra_mb']:.0f} MB ({r['answer_mb']:.1f} MB; {r['fanout_bytes_per_target']:.0f} B) | "
            f"{r['reduce_s']:.2f} s | {r['reduce_peak_extra_mb']:.0f}, {r['reduce_warm_peak_extra_mb']:.0f} MB "
            f"({r['reduce_bytes_per_target']:.0f} B) |"
        )
    lines += [
        "\n## Bulk size (one stand-in that fetches each bulk answer from itself over a new connection, so it sets the pace; 16 connections; the target's `max_in_flight` 8)\n",
        "| items | jmxgate req/s | nginx req/s | jmxgate / nginx | jmxgate p50 | nginx p50 |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in bulks:
        g, x = r["jmxgate"], r["nginx"]
        lines.append(f"| {r['bulk']} | {g['rps']:,.0f} | {x['rps']:,.0f} | {g['rps'] / x['rps']:.2f} | "
                     f"{g['p50_ms']:.2f} ms | {x['p50_ms']:.2f} ms |")
    lines += [
        "\n## Concurrent clients (a read of one stand-in)\n",
        "| clients | jmxgate req/s | nginx req/s | jmxgate / nginx | p50 jmxgate, nginx | "
        "p99 jmxgate, nginx | CPU per request jmxgate, nginx | CPU ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in clients:
        g, x = r["jmxgate"], r["nginx"]
        lines.append(
            f"| {r['clients']} | {g['rps']:,.0f} | {x['rps']:,.0f} | {g['rps'] / x['rps']:.2f} | "
            f"{g['p50_ms']:.2f}, {x['p50_ms']:.2f} ms | {g['p99_ms']:.2f}, {x['p99_ms']:.2f} ms | "
            f"{g['cpu_us']:.0f}, {x['cpu_us']:.0f} µs | {g['cpu_us'] / x['cpu_us']:.2f} |"
        )
    lines.append("\n![Fleet-scale curves](scale.png)\n")
    return "\n".join(lines)


def plot(fleet, bulks, clients, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 3, figsize=(15, 8))
    n = [r["targets"] for r in fleet]
    for a, key, label in (
        (ax[0][0], "rss_idle_mb", "idle RSS (MB)"),
        (ax[0][1], "startup_s", "start-up, reload, target list (s)"),
        (ax[0][2], "fanout_s", "read fanned out to all targets (s)"),
    ):
        a.plot(n, [r[key] for r in fleet], "o-", label="jmxgate" if key != "startup_s" else "start-up (s)")
        a.set_xscale("log")
        a.set_xlabel("targets (stand-ins)")
        a.set_title(label)
        a.grid(True, alpha=0.3)
    ax[0][1].plot(n, [r["reload_s"] for r in fleet], "^-.", label="reload (s)")
    ax[0][1].plot(n, [r["list_s"] for r in fleet], "s--", label="GET /jolokia/targets (s)")
    ax[0][1].legend()
    k = [r["bulk"] for r in bulks]
    a = ax[1][0]
    for who, style in (("jmxgate", "o-"), ("nginx", "s--")):
        a.plot(k, [r[who]["rps"] for r in bulks], style, label=who)
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("items per bulk request")
    a.set_title("req/s by bulk size")
    a.legend()
    a.grid(True, alpha=0.3)
    c = [r["clients"] for r in clients]
    for a, key, title in ((ax[1][1], "rps", "req/s by concurrent clients"),
                          (ax[1][2], "cpu_us", "CPU per request (µs)")):
        for who, style in (("jmxgate", "o-"), ("nginx", "s--")):
            a.plot(c, [r[who][key] for r in clients], style, label=who)
        a.set_xscale("log", base=2)
        a.set_xlabel("concurrent clients")
        a.set_title(title)
        a.legend()
        a.grid(True, alpha=0.3)
    p = ax[1][1].twinx()
    for who, style in (("jmxgate", "o:"), ("nginx", "s:")):
        p.plot(c, [r[who]["p50_ms"] for r in clients], style, alpha=0.5, label=f"{who} p50 (ms)")
    p.set_ylabel("p50 (ms, dotted)")
    fig.suptitle("jmxgate at fleet scale (stand-in agents: one static nginx), nginx proxy_pass beside it")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    static_port, proxy_port = free_port(), free_port()
    try:
        nginx_workers = start_nginx(static_port, proxy_port)
        print("==> targets (stand-ins)", flush=True)
        fleet = [fleet_row(n, static_port) for n in TARGETS]
        print("==> bulk size and concurrent clients", flush=True)
        bulks, clients = load_rows(static_port, proxy_port, nginx_workers)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        stop_nginx()
    out = os.environ.get("OUT", os.path.join(ROOT, "bench"))
    with open(os.path.join(out, "scale-results.json"), "w") as f:
        json.dump({"targets": fleet, "bulk": bulks, "clients": clients}, f, indent=1)
    text = markdown(fleet, bulks, clients)
    with open(os.path.join(out, "scale-results.md"), "w") as f:
        f.write(text)
    plot(fleet, bulks, clients, os.path.join(out, "scale.png"))
    print(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
