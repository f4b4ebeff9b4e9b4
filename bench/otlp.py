#!/usr/bin/env python3
"""The OTLP export next to the Prometheus door, one run (bench/otlp.sh
sets up the tools and calls this): the same fleet's samples, made by the
same rules file, either pushed by an `[[otlp.exports]]` every INTERVAL or
scraped through `/prometheus` once per target every INTERVAL, as a
Prometheus with one scrape job over the fleet would. Each door runs in a
gateway of its own (the export configured in one, not in the other), and
each gateway's CPU (utime + stime) and memory (VmHWM, VmRSS) is read from
/proc.

Stand-ins: the agents are not JVMs. One nginx plays all TARGETS of them,
each target at a loopback address and path of its own
(`http://127.x.y.z:<port>/t<00001>/jolokia`, so each has connections of its
own, as in a real fleet), answering canned Jolokia JSON: nginx looks at
the request body (a `map` of `$request_body`) to tell the gateway's list,
list revalidation (`ifModifiedSince`, answered 304 as an agent does when
no MBean came or went), bulk read, `StartTime` read and version apart, and
answers each with a file. The bulk read's answer gives SAMPLES numeric
values (MBeans of bench/otlp-rules.yml's `standin.app` domain); their
counters and busy gauges take one of six sets of values, by the tens digit
of nginx's clock second, so consecutive rounds (15 s apart) see changed
values and the rules are matched again for them as with a live JVM; and
one of a hundred sets by the target's number, so targets side by side in
an OTLP request don't gzip into each other as copies would. The
OTLP receiver is this script's own HTTP server (it answers 200 and counts
bytes): the gateway is what is measured, not a backend.

Phases, each door in its own gateway:
  * OTLP: the export's first push (at start-up) warms up (lists, plans);
    idle CPU is read between it and the second; then PUSHES pushes are
    measured, each from just before its tick to just before the next one
    (the last until the receiver has had all of its requests).
  * Prometheus: one scrape of every target as fast as SCRAPERS clients go
    (warm-up, unmeasured); IDLE seconds of idle CPU; then PUSHES rounds,
    each of one scrape per target, spread evenly over INTERVAL (as
    Prometheus spreads a job's targets), with Prometheus's headers
    (Accept, Accept-Encoding: gzip, X-Prometheus-Scrape-Timeout-Seconds).
A round's CPU is the gateway's CPU over its time less the idle rate over
the same time; CPU per sample divides the rounds' sum by the samples they
delivered (points the receiver took; samples of scrapes without error).

Writes bench/otlp-results.md.
"""

import base64
import datetime
import gzip
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("JMXGATE_BIN", os.path.join(ROOT, "target/release/jmxgate"))
TARGETS = int(os.environ.get("TARGETS", "1000"))
SAMPLES = int(os.environ.get("SAMPLES", "500"))
PUSHES = int(os.environ.get("PUSHES", "4"))


def seconds(text):
    m = re.fullmatch(r"\s*([\d.]+)\s*(ms|s|m)?\s*", text)
    if not m:
        sys.exit(f"not a duration: {text!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[m.group(2)]


INTERVAL = seconds(os.environ.get("INTERVAL", "15s"))
IDLE = seconds(os.environ.get("IDLE", "8s"))
OTLP_TIMEOUT = seconds(os.environ.get("OTLP_TIMEOUT", "10s"))
SCRAPERS = int(os.environ.get("SCRAPERS", "16"))
AUDIT = os.environ.get("AUDIT", "on") != "off"
RULES = os.path.join(ROOT, "bench", "otlp-rules.yml")
TICKS = os.sysconf("SC_CLK_TCK")
USER, PASSWORD = "prometheus", "bench-password"
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
# What Prometheus 2.x sends with a scrape (its default scrape_timeout 10 s).
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.53.0",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
    "Authorization": AUTH,
}
# Clock value of every canned answer (seconds): the list's `produced`.
AGENT_CLOCK = 1795312410
JVM_START_MS = 1795300000000

work = tempfile.mkdtemp(prefix="jmxgate-otlp.")
os.chmod(work, 0o755)  # nginx's worker (another user) reads the canned answers
procs = []


def log(text):
    print(text, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


# ---------------------------------------------------------------- stand-ins

# The MBean kinds of the stand-in agents: (type, name pattern, attributes
# as (name, Java type, changes between rounds)). Beans are made kind after
# kind until SAMPLES attributes are listed.
KINDS = [
    ("RequestProcessor", "http-nio-{i}", [
        ("RequestCount", "long", True), ("ErrorCount", "long", True), ("BytesReceived", "long", True),
        ("BytesSent", "long", True), ("ProcessingTime", "long", True), ("MaxTime", "long", True),
        ("ActiveRequests", "int", True), ("QueueLength", "int", True)]),
    ("ThreadPool", "pool-{i}", [
        ("CurrentThreadCount", "int", True), ("CurrentThreadsBusy", "int", True), ("MaxThreads", "int", False),
        ("KeepAliveCount", "int", True), ("ConnectionCount", "long", True), ("CompletedTaskCount", "long", True)]),
    ("Cache", "cache-{i}", [
        ("Hits", "long", True), ("Misses", "long", True), ("Evictions", "long", True), ("Puts", "long", True),
        ("Size", "long", True), ("HitRatio", "double", True), ("MaxSize", "long", False)]),
    ("DataSource", "ds-{i}", [
        ("NumActive", "int", True), ("NumIdle", "int", True), ("MaxTotal", "int", False),
        ("WaitCount", "long", True), ("BorrowedCount", "long", True), ("CreatedCount", "long", True),
        ("MeanBorrowWaitTimeMillis", "double", True)]),
]
VARIANTS = 6  # sets of values over time, by the tens digit of nginx's clock second
GROUPS = 100  # sets of values across the fleet, by the last two digits of a target's number


def stand_in_beans():
    beans, n, counts = [], 0, {}
    while n < SAMPLES:
        for kind, pattern, attributes in KINDS:
            if n >= SAMPLES:
                break
            i = counts.get(kind, 0)
            counts[kind] = i + 1
            take = attributes[: SAMPLES - n]
            beans.append((f"type={kind},name={pattern.format(i=i)}", kind, take))
            n += len(take)
    return beans


def value_of(b, a, java_type, changes, group, variant):
    """Attribute a of bean b, on a target of `group`, at time `variant`."""
    base = (1000 + 7919 * b + 104729 * a) * (1 + group) + 31 * group
    if java_type == "double":
        return round(0.5 + ((b + a + group) % 40) / 100 + group / 10000 + (variant / 1000 if changes else 0), 5)
    return base + (variant * (37 + a + group) if changes else 0)


def write_stand_in(files):
    beans = stand_in_beans()
    listed = {}
    for name, kind, attributes in beans:
        listed[name] = {
            "desc": f"A stand-in {kind}",
            "class": f"com.example.standin.{kind}",
            "attr": {a: {"type": t, "desc": f"{kind} {a}", "rw": False} for a, t, _ in attributes},
            "op": {},
        }
    answers = {
        "list": [{"request": {"type": "list"}, "value": {"standin.app": listed},
                  "timestamp": AGENT_CLOCK, "status": 200}],
        "notmodified": [{"request": {"type": "list"}, "timestamp": AGENT_CLOCK, "status": 304}],
        "start": [{"request": {"mbean": "java.lang:type=Runtime", "attribute": "StartTime", "type": "read"},
                   "value": JVM_START_MS, "timestamp": AGENT_CLOCK, "status": 200}],
        "version": [{"request": {"type": "version"},
                     "value": {"agent": "stand-in", "protocol": "7.2", "config": {}, "info": {}},
                     "timestamp": AGENT_CLOCK, "status": 200}],
    }
    for g in range(GROUPS):
        for v in range(VARIANTS):
            answers[f"read-{g:02d}-{v}"] = [
                {"request": {"mbean": f"standin.app:{name}", "attribute": [a for a, _, _ in attributes],
                             "type": "read"},
                 "value": {a: value_of(b, i, t, c, g, v) for i, (a, t, c) in enumerate(attributes)},
                 "timestamp": AGENT_CLOCK, "status": 200}
                for b, (name, _, attributes) in enumerate(beans)
            ]
    os.makedirs(files, mode=0o755, exist_ok=True)
    sizes = {}
    for kind, answer in answers.items():
        path = os.path.join(files, f"{kind}.json")
        with open(path, "w") as f:
            json.dump(answer, f, separators=(",", ":"))
        os.chmod(path, 0o644)
        sizes[kind] = os.path.getsize(path)
    return len(beans), sizes


def start_stand_in(port):
    """One nginx for every target: the front (all addresses) tells the
    request kinds apart by their body and fetches the answer from a file
    server beside it (POST can't be answered from a file)."""
    files_port = free_port()
    files = os.path.join(work, "files")
    beans, sizes = write_stand_in(files)
    conf = f"""worker_processes 1;
worker_rlimit_nofile 65536;
pid {work}/standin.pid;
error_log {work}/standin-error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    # The gateway's requests, by what they ask (the first match counts).
    map $request_body $standin_kind {{
        ~ifModifiedSince notmodified;
        "~\\"type\\":\\"list\\"" list;
        ~StartTime start;
        "~\\"type\\":\\"version\\"" version;
        default read-$standin_group-$standin_variant;
    }}
    # A hundred sets of values across the fleet, by the target's number.
    map $uri $standin_group {{
        "~^/t\\d*(?<group>\\d\\d)/jolokia$" $group;
        default 00;
    }}
    # Six sets of values, one per ten seconds of the minute.
    map $time_iso8601 $standin_variant {{
        "~T\\d\\d:\\d\\d:(?<tens>\\d)" $tens;
        default 0;
    }}
    upstream files {{ server 127.0.0.1:{files_port}; keepalive 64; }}
    server {{
        listen {port} backlog=4096;
        client_body_buffer_size 1m;
        client_max_body_size 16m;
        location / {{
            proxy_pass http://files;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_method GET;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Standin-Kind $standin_kind;
        }}
    }}
    server {{
        listen 127.0.0.1:{files_port};
        default_type application/json;
        location / {{ root {files}; rewrite ^ /$http_x_standin_kind.json break; }}
    }}
}}
"""
    path = os.path.join(work, "standin.conf")
    with open(path, "w") as f:
        f.write(conf)
    subprocess.run(["nginx", "-c", path], check=True)
    pid_file = os.path.join(work, "standin.pid")
    for _ in range(50):
        if os.path.exists(pid_file) and open(pid_file).read().strip():
            break
        time.sleep(0.1)
    return beans, sizes


def stop_stand_in():
    pid_file = os.path.join(work, "standin.pid")
    if os.path.exists(pid_file):
        try:
            os.kill(int(open(pid_file).read()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass


def target_host(i):
    """Each stand-in target at an address of its own on loopback."""
    return f"127.{1 + i // 65536}.{i // 256 % 256}.{i % 256}"


def target_name(i):
    return f"standin-{i:05d}"


# ------------------------------------------------------------ OTLP receiver


class Received:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []  # (monotonic time, body bytes, decompressed bytes, header bytes)
        self.problems = []

    def snapshot(self):
        with self.lock:
            return list(self.requests)


received = Received()


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        encoding = self.headers.get("Content-Encoding", "")
        try:
            raw = len(gzip.decompress(body)) if encoding == "gzip" else len(body)
        except OSError as e:
            raw = 0
            received.problems.append(f"a body that is not gzip: {e}")
        if self.path != "/v1/metrics":
            received.problems.append(f"a POST to {self.path}")
        header_bytes = len(self.requestline) + 2 + len(str(self.headers))
        with received.lock:
            received.requests.append((time.monotonic(), n, raw, header_bytes))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def start_receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


# ----------------------------------------------------------------- gateway


def gateway_config(directory, port, admin_port, standin_port, receiver_port=None):
    hash_ = subprocess.run(
        [BIN, "hash-password"], input=PASSWORD + "\n", capture_output=True, text=True, check=True
    ).stdout.strip()
    with open(os.path.join(directory, "users.toml"), "w") as f:
        f.write(f'[[users]]\nname = "{USER}"\npassword_hash = "{hash_}"\nroles = ["metrics"]\n')
    with open(os.path.join(directory, "fleet.json"), "w") as f:
        json.dump(
            [
                {"name": target_name(i), "url": f"http://{target_host(i)}:{standin_port}/t{i:05d}/jolokia",
                 "labels": {"env": "bench", "app": "standin"}}
                for i in range(1, TARGETS + 1)
            ],
            f,
        )
    export = ""
    if receiver_port:
        export = f"""
[[otlp.exports]]
name = "bench"
endpoint = "http://127.0.0.1:{receiver_port}"
protocol = "http/protobuf"
interval = "{INTERVAL:g}s"
timeout = "{OTLP_TIMEOUT:g}s"
targets = "standin-*"
module = "standin"
role = "metrics"
service_name_label = "app"
"""
    config = f"""[server]
listen = "127.0.0.1:{port}"
auth = ["basic"]
[admin]
listen = "127.0.0.1:{admin_port}"
[log]
format = "text"
filter = "warn,jmxgate=info,jmxgate::audit=warn"
# No health probes: they are the same with either door, and idle CPU is
# then the gateway's own.
[health]
probe_interval = "0s"
[auth.basic]
users_file = "users.toml"
{'[audit]' + chr(10) + 'dir = "audit"' if AUDIT else ''}
# The export's role and the scraper's: every stand-in, and one selector
# may reach them all (the export's `targets` is one selector).
[[roles]]
name = "metrics"
targets = ["*"]
max_targets_per_item = {max(TARGETS, 100)}
[[inventory]]
targets_file = "fleet.json"
[[prometheus.modules]]
name = "standin"
rules_file = "{RULES}"
{export}"""
    path = os.path.join(directory, "gateway.toml")
    with open(path, "w") as f:
        f.write(config)
    return path


def start_gateway(config, directory):
    log_path = os.path.join(directory, "gateway.log")
    out = open(log_path, "w+")
    p = subprocess.Popen([BIN, "serve", "-c", config], stdout=out, stderr=subprocess.STDOUT, cwd=directory)
    procs.append(p)
    while True:
        out.seek(0)
        if "listening on" in out.read():
            break
        if p.poll() is not None:
            out.seek(0)
            sys.exit("the gateway did not start:\n" + out.read())
        time.sleep(0.01)
    return p, time.monotonic()


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def warnings_in(directory):
    with open(os.path.join(directory, "gateway.log")) as f:
        return [line.rstrip() for line in f if " WARN " in line or " ERROR " in line]


METRIC = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def admin_metrics(admin_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=60) as r:
        text = r.read().decode()
    rows = []
    for line in text.splitlines():
        m = METRIC.match(line)
        if m and not line.startswith("#"):
            rows.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return rows


def total(rows, name, **labels):
    return sum(v for n, ls, v in rows if n == name and all(ls.get(k) == x for k, x in labels.items()))


def by_label(rows, name, label):
    out = {}
    for n, ls, v in rows:
        if n == name:
            out[ls.get(label, "")] = out.get(ls.get(label, ""), 0) + v
    return out


def rounds_cpu(ticks, idle_rate):
    """CPU seconds of each round between consecutive (time, ticks)
    samples, less the idle rate over the round's time."""
    return [(c1 - c0) / TICKS - idle_rate * (t1 - t0) for (t0, c0), (t1, c1) in zip(ticks, ticks[1:])]


# -------------------------------------------------------------- OTLP phase


def otlp_phase(standin_port, receiver_port):
    directory = os.path.join(work, "otlp")
    os.makedirs(directory)
    port, admin = free_port(), free_port()
    config = gateway_config(directory, port, admin, standin_port, receiver_port)
    p, t0 = start_gateway(config, directory)  # the export's first tick is at start-up
    rss_start = status_kb(p.pid, "VmRSS")
    per_push = TARGETS * SAMPLES
    # Push 1: the warm-up (every list fetched, every plan made).
    give_up = t0 + INTERVAL + OTLP_TIMEOUT + 30
    while True:
        rows = admin_metrics(admin)
        if total(rows, "jmxgate_otlp_points_total", export="bench", outcome="sent") >= per_push:
            break
        if time.monotonic() > give_up or p.poll() is not None:
            return {"failed": "the first push did not deliver all of its points",
                    "points": by_label(rows, "jmxgate_otlp_points_total", "outcome"),
                    "pushes": by_label(rows, "jmxgate_otlp_pushes_total", "outcome"),
                    "warnings": warnings_in(directory)[:10]}
        time.sleep(0.25)
    first_done = time.monotonic()
    cold_cpu_ms = cpu_ticks(p.pid) * 1000 / TICKS
    first = received.snapshot()
    requests_per_push = len(first)
    log(f"  push 1 (warm-up): {requests_per_push} requests, {sum(r[1] for r in first):,} bytes gzip, "
        f"sent {first_done - t0:.1f} s after start-up, {cold_cpu_ms:.0f} ms of CPU since start-up")
    # Idle: between the first push and the second.
    idle_from, idle_to = first_done + 1.0, t0 + INTERVAL - 1.5
    idle_rate = None
    if idle_to - idle_from >= 2:
        time.sleep(max(0.0, idle_from - time.monotonic()))
        c = cpu_ticks(p.pid)
        time.sleep(max(0.0, idle_to - time.monotonic()))
        idle_rate = (cpu_ticks(p.pid) - c) / TICKS / (idle_to - idle_from)
    else:
        log("  (the first push took too long to measure idle CPU before the second)")
    rss_idle = status_kb(p.pid, "VmRSS")
    before = admin_metrics(admin)
    # Each push's CPU: from just before its tick (start-up + k intervals)
    # to just before the next one; the last ends once the receiver has had
    # all of its requests (as many as the first push's).
    bounds = [t0 + k * INTERVAL - 0.8 for k in range(1, PUSHES + 2)]
    ticks = []
    for b in bounds[:-1]:
        time.sleep(max(0.0, b - time.monotonic()))
        ticks.append((time.monotonic(), cpu_ticks(p.pid)))
    want = requests_per_push * (1 + PUSHES)
    deadline = t0 + (1 + PUSHES) * INTERVAL + OTLP_TIMEOUT + 20
    while time.monotonic() < bounds[-1] or (
        len(received.snapshot()) < want and time.monotonic() < deadline and p.poll() is None
    ):
        time.sleep(0.05)
    ticks.append((time.monotonic(), cpu_ticks(p.pid)))
    hwm, rss_end = status_kb(p.pid, "VmHWM"), status_kb(p.pid, "VmRSS")
    after = admin_metrics(admin)
    stop(p)
    got = received.snapshot()[requests_per_push:]
    diff = lambda name, **ls: total(after, name, **ls) - total(before, name, **ls)  # noqa: E731
    pushes_ok = diff("jmxgate_otlp_pushes_total", export="bench", outcome="delivered")
    points = diff("jmxgate_otlp_points_total", export="bench", outcome="sent")
    # Each push: from its tick to its last request received.
    push_times = []
    for k in range(1, PUSHES + 1):
        tick = t0 + k * INTERVAL
        mine = [r for r in got if tick - 0.5 <= r[0] < tick + INTERVAL - 0.5]
        if mine:
            push_times.append(max(r[0] for r in mine) - tick)
    per_round = rounds_cpu(ticks, idle_rate or 0)
    window = ticks[-1][0] - ticks[0][0]
    cpu_s = sum(per_round)
    exchanges = diff("jmxgate_agent_exchanges_total")
    return {
        "rounds": pushes_ok,
        "points": points,
        "points_failed": diff("jmxgate_otlp_points_total", export="bench", outcome="failed")
        + diff("jmxgate_otlp_points_total", export="bench", outcome="dropped"),
        "targets_failed": diff("jmxgate_otlp_pushes_total", export="bench", outcome="target_failed"),
        "skipped": diff("jmxgate_otlp_pushes_total", export="bench", outcome="skipped"),
        "cpu_ms_per_round": cpu_s * 1000 / max(pushes_ok, 1),
        "cpu_ms_rounds": [c * 1000 for c in per_round],
        "cpu_us_per_sample": cpu_s * 1e6 / max(points, 1),
        "idle_pct": None if idle_rate is None else idle_rate * 100,
        "rss_warm_mb": rss_idle / 1024,
        "window_s": window,
        "cold_cpu_ms": cold_cpu_ms,
        "rss_start_mb": rss_start / 1024,
        "rss_peak_mb": hwm / 1024,
        "rss_end_mb": rss_end / 1024,
        "requests": len(got),
        "requests_per_round": len(got) / max(pushes_ok, 1),
        "wire_bytes": sum(r[1] for r in got),
        "header_bytes": sum(r[3] for r in got),
        "raw_bytes": sum(r[2] for r in got),
        "largest_request": max((r[1] for r in got), default=0),
        "largest_raw": max((r[2] for r in got), default=0),
        "push_times": push_times,
        "exchanges_per_target_round": exchanges / TARGETS / max(pushes_ok, 1),
        "receiver_problems": received.problems[:5],
        "warnings": warnings_in(directory)[:10],
    }


# -------------------------------------------------------- Prometheus phase


SAMPLES_LINE = re.compile(rb'^jmxgate_scrape_samples\{[^}]*\} (\S+)', re.M)
ERROR_LINE = re.compile(rb'^jmx_scrape_error\{[^}]*\} (\S+)', re.M)
FAILED_ATTRS = re.compile(rb'^jmxgate_scrape_failed_attributes\{[^}]*\} (\S+)', re.M)


class Scrapes:
    """Scrapes of /prometheus?target=<one>&module=standin, each at its due
    time, by SCRAPERS clients with a kept-alive connection each."""

    def __init__(self, port):
        self.port = port
        self.lock = threading.Lock()
        self.results = []
        self.kept = {}

    def run(self, jobs, keep_bodies_of=()):
        """jobs: (due monotonic time, target number), in order."""
        jobs = iter(jobs)
        keep = set(keep_bodies_of)

        def client():
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            while True:
                with self.lock:
                    job = next(jobs, None)
                if job is None:
                    conn.close()
                    return
                due, i = job
                late = time.monotonic() - due
                if late < 0:
                    time.sleep(-late)
                    late = 0.0
                started = time.monotonic()
                try:
                    conn.request("GET", f"/prometheus?target={target_name(i)}&module=standin",
                                 headers=PROMETHEUS_HEADERS)
                    r = conn.getresponse()
                    body = r.read()
                    status, ctype, encoding = r.status, r.getheader("Content-Type", ""), r.getheader(
                        "Content-Encoding", "")
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                    status, ctype, encoding, body = 0, "", "", str(e).encode()
                took = time.monotonic() - started
                if encoding == "gzip":
                    plain = gzip.decompress(body)
                else:
                    plain = body
                m = SAMPLES_LINE.search(plain)
                e = ERROR_LINE.search(plain)
                fa = FAILED_ATTRS.search(plain)
                row = {
                    "status": status, "bytes": len(body), "plain_bytes": len(plain), "type": ctype,
                    "encoding": encoding, "seconds": took, "late": late,
                    "samples": int(float(m.group(1))) if m else 0,
                    "lines": sum(1 for line in plain.splitlines() if line and not line.startswith(b"#")),
                    "error": e is None or float(e.group(1)) != 0 or (fa is not None and float(fa.group(1)) != 0),
                }
                with self.lock:
                    self.results.append(row)
                    if i in keep:
                        self.kept[i] = plain

        threads = [threading.Thread(target=client) for _ in range(SCRAPERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out, self.results = self.results, []
        return out


def prometheus_phase(standin_port):
    directory = os.path.join(work, "prometheus")
    os.makedirs(directory)
    port, admin = free_port(), free_port()
    config = gateway_config(directory, port, admin, standin_port)
    p, _ = start_gateway(config, directory)
    rss_start = status_kb(p.pid, "VmRSS")
    scrapes = Scrapes(port)
    c0 = cpu_ticks(p.pid)
    t = time.monotonic()
    warm = scrapes.run([(t, i) for i in range(1, TARGETS + 1)])
    cold_cpu_ms = (cpu_ticks(p.pid) - c0) * 1000 / TICKS
    bad = [r for r in warm if r["status"] != 200 or r["error"] or r["samples"] != SAMPLES]
    log(f"  warm-up: {len(warm)} scrapes in {time.monotonic() - t:.1f} s, {cold_cpu_ms:.0f} ms of CPU; "
        f"{len(bad)} not 200 with {SAMPLES} samples and no error")
    if bad:
        stop(p)
        return {"failed": f"{len(bad)} warm-up scrapes went wrong, e.g. {bad[0]}",
                "warnings": warnings_in(directory)[:10]}
    time.sleep(1.0)
    c = cpu_ticks(p.pid)
    time.sleep(IDLE)
    idle_rate = (cpu_ticks(p.pid) - c) / TICKS / IDLE
    rss_warm = status_kb(p.pid, "VmRSS")
    before = admin_metrics(admin)
    start = time.monotonic() + 0.5
    jobs = [(start + r * INTERVAL + (i - 1) * INTERVAL / TARGETS, i)
            for r in range(PUSHES) for i in range(1, TARGETS + 1)]
    # Each round's CPU: from its start to the next one's; the last ends
    # when its last scrape has been answered.
    ticks = []

    def sample_rounds():
        for r in range(PUSHES):
            time.sleep(max(0.0, start + r * INTERVAL - time.monotonic()))
            ticks.append((time.monotonic(), cpu_ticks(p.pid)))

    sampler = threading.Thread(target=sample_rounds)
    sampler.start()
    keep = range(1, min(TARGETS, 20) + 1)
    rows = scrapes.run(jobs, keep_bodies_of=keep)
    sampler.join()
    ticks.append((time.monotonic(), cpu_ticks(p.pid)))
    hwm, rss_end = status_kb(p.pid, "VmHWM"), status_kb(p.pid, "VmRSS")
    after = admin_metrics(admin)
    stop(p)
    per_round = rounds_cpu(ticks, idle_rate)
    window = ticks[-1][0] - ticks[0][0]
    cpu_s = sum(per_round)
    samples = sum(r["samples"] for r in rows if r["status"] == 200 and not r["error"])
    # Prometheus asks for gzip; what an answer would be, gzipped (Go's
    # default level, 6, as client_golang compresses), whether or not the
    # gateway compressed it.
    kept = list(scrapes.kept.values())
    ratio = sum(len(gzip.compress(b, 6)) for b in kept) / max(sum(len(b) for b in kept), 1)
    took = sorted(r["seconds"] for r in rows)
    exchanges = total(after, "jmxgate_agent_exchanges_total") - total(before, "jmxgate_agent_exchanges_total")
    return {
        "rounds": PUSHES,
        "scrapes": len(rows),
        "scrapes_bad": sum(1 for r in rows if r["status"] != 200 or r["error"] or r["samples"] != SAMPLES),
        "samples": samples,
        "lines_per_scrape": statistics.mean(r["lines"] for r in rows),
        "cpu_ms_per_round": cpu_s * 1000 / PUSHES,
        "cpu_ms_rounds": [c * 1000 for c in per_round],
        "cpu_us_per_sample": cpu_s * 1e6 / max(samples, 1),
        "idle_pct": idle_rate * 100,
        "rss_warm_mb": rss_warm / 1024,
        "window_s": window,
        "cold_cpu_ms": cold_cpu_ms,
        "rss_start_mb": rss_start / 1024,
        "rss_peak_mb": hwm / 1024,
        "rss_end_mb": rss_end / 1024,
        "wire_bytes": sum(r["bytes"] for r in rows),
        "plain_bytes": sum(r["plain_bytes"] for r in rows),
        "gzip_ratio": ratio,
        "encodings": sorted({r["encoding"] or "identity" for r in rows}),
        "types": sorted({r["type"] for r in rows}),
        "p50_ms": took[len(took) // 2] * 1000 if took else 0,
        "p99_ms": took[min(len(took) - 1, int(len(took) * 0.99))] * 1000 if took else 0,
        "late_max_s": max((r["late"] for r in rows), default=0),
        "exchanges_per_target_round": exchanges / TARGETS / PUSHES,
        "warnings": warnings_in(directory)[:10],
    }


# ------------------------------------------------------------------ report


def markdown(o, pr, beans, sizes):
    when = datetime.date.today().isoformat()
    cpus = os.cpu_count()
    lines = [
        "# OTLP export next to Prometheus scrapes",
        "",
        f"Measured {when} on {cpus} cores ({platform.machine()}) by `bench/otlp.sh`: jmxgate (release) with "
        f"Basic authentication{', the audit log' if AUDIT else ''} and no health probes "
        f"(`health.probe_interval = \"0s\"`, the same for both doors), {TARGETS:,} targets of "
        f"{SAMPLES} samples each (bench/otlp-rules.yml over {beans} MBeans), every {INTERVAL:g} s, "
        f"{PUSHES} rounds measured after one warm-up round; each door in a gateway of its own.",
        "",
        f"**Stand-ins:** the {TARGETS:,} agents are not JVMs. One nginx answers every target at its own "
        "loopback address and path (`http://127.x.y.z:<port>/t<00001>/jolokia`) with canned Jolokia JSON, "
        "chosen by what the request body asks: the MBean list "
        f"({sizes['list']:,} bytes; revalidations answered 304 as an agent does when no MBean came or went), "
        f"one bulk read of {beans} MBeans ({sizes['read-00-0']:,} bytes), `StartTime`. Counters and busy gauges "
        "take another value every ten seconds, so each round's values differ from the last one's, and targets "
        f"have one of {GROUPS} sets of values (by their number), so neighbours in a request differ too. The OTLP "
        "receiver is the bench's own HTTP server (200 to everything, bytes counted). Real agents are in "
        "`bench/results.md`.",
        "",
    ]
    failed = [f"- {name}: {r['failed']}" for name, r in (("OTLP", o), ("Prometheus", pr)) if "failed" in r]
    if failed:
        lines += ["**Not measured:**", ""] + failed + [""]
        for name, r in (("OTLP", o), ("Prometheus", pr)):
            if "failed" in r:
                lines.append(f"{name} details: `{json.dumps({k: v for k, v in r.items() if k != 'failed'})}`")
        return "\n".join(lines) + "\n"

    def ms(v):
        return f"{v:,.0f} ms"

    def us(v):
        return f"{v:.2f} µs"

    def mb(v):
        return f"{v:,.0f} MB"

    def spread(values):
        return f"{min(values):,.0f}-{max(values):,.0f}" if values else "-"

    per_point = o["wire_bytes"] / max(o["points"], 1)
    per_point_raw = o["raw_bytes"] / max(o["points"], 1)
    per_sample = pr["wire_bytes"] / max(pr["samples"], 1)
    per_sample_gz = pr["plain_bytes"] * pr["gzip_ratio"] / max(pr["samples"], 1)
    compressed = pr["encodings"] != ["identity"]
    push_times = o["push_times"]
    rows = [
        ("rounds measured", f"{o['rounds']:.0f} pushes", f"{pr['rounds']} rounds of {TARGETS:,} scrapes", ""),
        ("samples per round",
         f"{o['points'] / max(o['rounds'], 1):,.0f} points",
         f"{pr['samples'] / pr['rounds']:,.0f} samples (+{pr['lines_per_scrape'] - SAMPLES:.0f} gateway gauges per target)",
         ""),
        ("agent exchanges per target and round", f"{o['exchanges_per_target_round']:.2f}",
         f"{pr['exchanges_per_target_round']:.2f}", ""),
        ("**gateway CPU per round** (idle subtracted; the rounds' least and most)",
         f"{ms(o['cpu_ms_per_round'])} ({spread(o['cpu_ms_rounds'])})",
         f"{ms(pr['cpu_ms_per_round'])} ({spread(pr['cpu_ms_rounds'])})",
         f"**{o['cpu_ms_per_round'] / pr['cpu_ms_per_round']:.2f}**"),
        ("**gateway CPU per sample**", us(o["cpu_us_per_sample"]), us(pr["cpu_us_per_sample"]),
         f"**{o['cpu_us_per_sample'] / pr['cpu_us_per_sample']:.2f}**"),
        (f"share of a core at one round per {INTERVAL:g} s",
         f"{o['cpu_ms_per_round'] / 10 / INTERVAL:.1f} %", f"{pr['cpu_ms_per_round'] / 10 / INTERVAL:.1f} %", ""),
        ("gateway idle CPU (subtracted)", "-" if o["idle_pct"] is None else f"{o['idle_pct']:.2f} %",
         f"{pr['idle_pct']:.2f} %", ""),
        ("first (cold) round's CPU", f"{ms(o['cold_cpu_ms'])} (start-up included)", ms(pr["cold_cpu_ms"]), ""),
        ("peak RSS (VmHWM)", mb(o["rss_peak_mb"]), mb(pr["rss_peak_mb"]),
         f"{o['rss_peak_mb'] / pr['rss_peak_mb']:.2f}"),
        ("RSS after start-up → after the warm-up round → after the rounds",
         f"{mb(o['rss_start_mb'])} → {mb(o['rss_warm_mb'])} → {mb(o['rss_end_mb'])}",
         f"{mb(pr['rss_start_mb'])} → {mb(pr['rss_warm_mb'])} → {mb(pr['rss_end_mb'])}", ""),
        ("requests per round",
         f"{o['requests_per_round']:.0f} POSTs to the receiver (largest {o['largest_request'] / 1e6:.2f} MB gzip, "
         f"{o['largest_raw'] / 2**20:.2f} MiB before)",
         f"{TARGETS:,} GETs, answered in {pr['p50_ms']:.0f} ms (p50), {pr['p99_ms']:.0f} ms (p99)", ""),
        ("time a round takes",
         (f"{min(push_times):.1f}-{max(push_times):.1f} s from the tick to the last request received "
          f"(the export's `timeout` for reading its targets: {OTLP_TIMEOUT:g} s)" if push_times else "-"),
         f"spread over {INTERVAL:g} s by the scraper (latest start {pr['late_max_s'] * 1000:.0f} ms late)", ""),
        ("**bytes on the wire per point / sample** (bodies)",
         f"{per_point:.2f} B (protobuf, gzip; {per_point_raw:.1f} B before gzip)",
         f"{per_sample:.1f} B ({'gzip' if compressed else 'uncompressed: the door answered without compression'}"
         f"{'' if compressed else f'; gzip would make it {per_sample_gz:.1f} B'})",
         f"{per_point / per_sample:.2f}"),
    ]
    lines += [
        f"| {TARGETS:,} stand-in targets × {SAMPLES} samples, every {INTERVAL:g} s | OTLP export (push) | "
        "Prometheus door (one scrape per target) | OTLP / Prometheus |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += [
        "",
        f"Answer format of the Prometheus door with Prometheus's `Accept`: {', '.join(pr['types'])}; "
        f"`Content-Encoding` of its answers to `Accept-Encoding: gzip`: {', '.join(pr['encodings'])}. "
        f"OTLP request headers: {o['header_bytes'] / max(o['points'], 1):.3f} B per point more.",
    ]
    ratio = o["cpu_us_per_sample"] / pr["cpu_us_per_sample"]
    lines += [
        "",
        "**How to read this.** Both doors did the same work each round: every stand-in's "
        f"{SAMPLES} values read and made into samples by the same rules file, the export once per push for "
        "the whole fleet (a `list` revalidation, one bulk read and a `StartTime` read per target, then "
        "protobuf, gzip and POSTs), the door once per scrape (the `list` revalidation and the bulk read, "
        "then the text answer). *Gateway CPU per round* is the gateway process's user and system time "
        "(`/proc/<pid>/stat`) over each round less its idle rate; divided by the samples delivered it is "
        "*CPU per sample*, and the last column is the export's over the door's: below 1.00 the export "
        "costs less per sample than the Prometheus door. Set the ratio against the rounds' least and "
        "most: a ratio within the rounds' spread is a tie. "
        f"Here it is {ratio:.2f}: "
        + ("the aim, no more CPU per sample than the Prometheus door, is met"
           if ratio <= 1.0 else "the export costs more per sample than the Prometheus door")
        + (" (by less than the spread of the rounds)." if abs(ratio - 1) * pr["cpu_ms_per_round"]
           < (max(pr["cpu_ms_rounds"]) - min(pr["cpu_ms_rounds"])) + (max(o["cpu_ms_rounds"]) - min(o["cpu_ms_rounds"]))
           else ".")
        + " *Peak RSS* is the process's high-water mark over its whole life, the warm-up round included. "
        "For either door most of it is what is kept per target between rounds (its `list` answer, the plan "
        "made from it and the rule mappings remembered, bounded by `prometheus.plan_cache_bytes`); the "
        "export adds what one push holds at once, every target's samples and their protobuf encoding. "
        "*Bytes on the wire* count bodies only: the export's gzipped protobuf per point, the door's "
        "answer per sample as it was sent (and what gzip would make of it). A Prometheus server's own "
        f"CPU for {TARGETS:,} scrapes a round and a receiver's for the pushes are not in these numbers.",
    ]
    extra = []
    if o["targets_failed"] or o["points_failed"] or o["skipped"]:
        extra.append(f"OTLP: {o['targets_failed']:.0f} target failures, {o['points_failed']:.0f} points "
                     f"failed or dropped, {o['skipped']:.0f} pushes skipped in the measured rounds.")
    if pr["scrapes_bad"]:
        extra.append(f"Prometheus: {pr['scrapes_bad']} of {pr['scrapes']} scrapes not 200 with {SAMPLES} "
                     "samples and no error.")
    for name, r in (("OTLP", o), ("Prometheus", pr)):
        if r["warnings"]:
            extra.append(f"{name} gateway's log warnings: " + "; ".join(f"`{w[:200]}`" for w in r["warnings"][:3]))
    if o["receiver_problems"]:
        extra.append("Receiver: " + "; ".join(o["receiver_problems"]))
    if extra:
        lines += [""] + extra
    return "\n".join(lines) + "\n"


def main():
    if shutil.which("nginx") is None:
        sys.exit("nginx is needed (bench/otlp.sh installs nginx-light)")
    standin_port = free_port()
    o = pr = None
    try:
        beans, sizes = start_stand_in(standin_port)
        server, receiver_port = start_receiver()
        log(f"==> stand-ins: {TARGETS:,} targets on one nginx, {beans} MBeans and {SAMPLES} samples each; "
            f"answers {', '.join(f'{k} {v:,} B' for k, v in sizes.items() if not k.startswith('read-') or k == 'read-00-0')}")
        log(f"==> OTLP export every {INTERVAL:g} s: 1 warm-up push, then {PUSHES} measured")
        o = otlp_phase(standin_port, receiver_port)
        log("  " + json.dumps(o))
        log(f"==> Prometheus door: 1 warm-up round, {IDLE:g} s idle, then {PUSHES} rounds of "
            f"{TARGETS:,} scrapes over {INTERVAL:g} s each")
        pr = prometheus_phase(standin_port)
        log("  " + json.dumps(pr))
        server.shutdown()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        stop_stand_in()
    text = markdown(o, pr, beans, sizes)
    out = os.environ.get("OUT", os.path.join(ROOT, "bench"))
    with open(os.path.join(out, "otlp-results.md"), "w") as f:
        f.write(text)
    print()
    print(text)
    if "failed" in o or "failed" in pr:
        sys.exit(f"the gateways' logs and audit files are kept in {work}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
