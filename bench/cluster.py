#!/usr/bin/env python3
"""Replicas sharing the background work ([cluster]), measured: 1, 2 and 4
`jmxgate serve` replicas of one configuration, their members in a real
PostgreSQL, probing TARGETS stand-in targets every PROBE_INTERVAL seconds.

Stand-ins: one static nginx plays every agent (as bench/scale.py: each
target at a loopback address of its own, 127.x.y.z), and logs every probe
with its time and target address. A fleet of 100,000 JVMs can't run here;
what is measured is the gateway's side.

Per replica count N, over WINDOW seconds once the members agree:
  * each replica's CPU time per second and probes sent per second
    (jmxgate_health_probes_total{result="sent"}), with their ratio to one
    replica's (1/N is the aim);
  * the probes the stand-ins received per target per interval (1.0: each
    target probed once, not once per replica);
  * RSS per replica and per target.
At N = 4, one replica is SIGKILLed: the time until every target has been
probed again after the kill (its share waits for its lease to end:
lease_duration plus one renewal plus up to one probe interval).

Writes bench/cluster-results.md.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402  (the stand-ins, ports and /proc readers)

TARGETS = int(os.environ.get("TARGETS", "100000"))
PROBE_INTERVAL = float(os.environ.get("PROBE_INTERVAL", "10"))
WINDOW = float(os.environ.get("WINDOW", "30"))
REPLICAS = [int(n) for n in os.environ.get("REPLICAS", "1 2 4").split()]
LEASE, RENEW = "15s", "5s"
BIN = scale.BIN
work = scale.work
procs = []
# Process groups stopped at the end (runuser's child is PostgreSQL itself).
groups = []


def start_postgres():
    """A throwaway PostgreSQL (Debian's), as the `postgres` user when root."""
    bindir = sorted(os.listdir("/usr/lib/postgresql"))[-1]
    bindir = f"/usr/lib/postgresql/{bindir}/bin"
    pgdir = tempfile.mkdtemp(prefix="jmxgate-bench-pg.")
    as_owner = []
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "postgres:postgres", pgdir], check=True)
        as_owner = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(pgdir, "data")
    subprocess.run(as_owner + [f"{bindir}/initdb", "-D", data, "-U", "bench", "--auth=trust"],
                   check=True, stdout=subprocess.DEVNULL)
    port = scale.free_port()
    p = subprocess.Popen(as_owner + [f"{bindir}/postgres", "-D", data, "-p", str(port),
                                     "-c", "listen_addresses=127.0.0.1", "-k", pgdir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    groups.append(p)
    for _ in range(600):
        try:
            import socket
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"postgres://bench@127.0.0.1:{port}/postgres"
        except OSError:
            time.sleep(0.1)
    sys.exit("PostgreSQL did not start")


def start_stand_ins():
    """One static nginx answering every target's version probe, logging
    the time and target address of each."""
    port = scale.free_port()
    answer = json.dumps([scale.CANNED])
    log = os.path.join(work, "probes.log")
    conf = f"""daemon on;
worker_processes 1;
pid {work}/standins.pid;
error_log {work}/standins-error.log;
events {{ worker_connections 65536; }}
http {{
    log_format probe '$msec $server_addr';
    access_log {log} probe buffer=1m flush=1s;
    keepalive_requests 1000000;
    server {{
        listen {port} backlog=4096;
        location / {{ default_type application/json; return 200 '{answer}'; }}
    }}
}}
"""
    path = os.path.join(work, "standins.conf")
    with open(path, "w") as f:
        f.write(conf)
    subprocess.run(["nginx", "-c", path], check=True)
    return port, log


def stop_stand_ins():
    pid_file = os.path.join(work, "standins.pid")
    if os.path.exists(pid_file):
        try:
            os.kill(int(open(pid_file).read()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass


def replica_config(i, pg, directory, *, probe_interval=None, cluster_keys=None,
                   fleet="fleet.json", extra=""):
    """Replica i's configuration file in directory and its admin port: the
    [cluster] over PostgreSQL at pg, probes every probe_interval seconds,
    the inventory file fleet; cluster_keys and extra sections as given
    (bench/cluster_otlp.py adds its export)."""
    admin = scale.free_port()
    interval = PROBE_INTERVAL if probe_interval is None else probe_interval
    if cluster_keys is None:
        cluster_keys = f'lease_duration = "{LEASE}"\nrenew_interval = "{RENEW}"'
    text = f"""[server]
listen = "127.0.0.1:0"
[admin]
listen = "127.0.0.1:{admin}"
[log]
format = "text"
filter = "warn,jmxgate=info,jmxgate::audit=warn"
[health]
probe_interval = "{interval:g}s"
stable_probe_interval = "{interval:g}s"
[cluster]
membership = "postgres"
url = "{pg}"
replica_id = "gw-{i}"
{cluster_keys}
[[inventory]]
targets_file = "{fleet}"
{extra}"""
    path = os.path.join(directory, f"gw-{i}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path, admin


def admin_get(admin, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}{path}", timeout=60) as r:
        return r.read().decode()


def probes_sent(admin):
    text = admin_get(admin, "/metrics")
    m = re.search(r'^jmxgate_health_probes_total\{result="sent"\} (\S+)', text, re.M)
    return float(m.group(1)) if m else 0.0


def wait_members(admins, n, within=600):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            views = [json.loads(admin_get(a, "/cluster")) for a in admins]
            if all(len(v["members"]) == n and v["duties"]["state"] == "active" for v in views):
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"{n} replicas did not agree on their members within {within} s")


def log_lines_since(log, offset):
    """Probe log lines written after byte `offset`, and the new offset."""
    with open(log) as f:
        f.seek(offset)
        text = f.read()
        return text.splitlines(), f.tell()


def run(n, port, pg, log, directory):
    replicas = []
    for i in range(n):
        config, admin = replica_config(i, pg, directory)
        out = open(os.path.join(directory, f"gw-{i}.log"), "w")
        p = subprocess.Popen([BIN, "serve", "-c", config], stdout=out, stderr=subprocess.STDOUT,
                             cwd=directory)
        procs.append(p)
        replicas.append((p, admin))
    admins = [a for _, a in replicas]
    wait_members(admins, n)
    # One whole round after the members agree: the first round's burst
    # (every replica probes all before it sees the others) is over.
    time.sleep(PROBE_INTERVAL * 2)
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    before = [(scale.cpu_ticks(p.pid), probes_sent(a)) for p, a in replicas]
    started, wall_start = time.monotonic(), time.time()
    time.sleep(WINDOW)
    elapsed, wall_end = time.monotonic() - started, time.time()
    after = [(scale.cpu_ticks(p.pid), probes_sent(a)) for p, a in replicas]
    time.sleep(2.5)  # nginx's log buffer, flushed every second
    lines, _ = log_lines_since(log, offset)
    lines = [line for line in lines if wall_start <= float(line.split()[0]) < wall_end]
    per_replica = [
        {
            "cpu": (a[0] - b[0]) / scale.TICKS / elapsed,
            "probes_per_s": (a[1] - b[1]) / elapsed,
            "rss_kb": scale.status_kb(p.pid, "VmRSS"),
        }
        for (p, _), b, a in zip(replicas, before, after)
    ]
    received = len(lines) / (TARGETS * elapsed / PROBE_INTERVAL)
    row = {"replicas": n, "per_replica": per_replica, "probes_per_target_interval": received}
    if n == 4:
        victim, _ = replicas[0]
        offset = os.path.getsize(log)
        victim.kill()
        killed = time.monotonic()
        seen = set()
        reprobed = None
        while time.monotonic() - killed < 300:
            time.sleep(1)
            lines, offset = log_lines_since(log, offset)
            seen.update(line.split()[1] for line in lines if " " in line)
            if len(seen) >= TARGETS:
                reprobed = time.monotonic() - killed
                break
        row["reprobed_after_kill_s"] = reprobed
        replicas = replicas[1:]
    for p, _ in replicas:
        scale.stop(p)
    return row


def markdown(rows):
    one = rows[0]["per_replica"][0] if rows and rows[0]["replicas"] == 1 else None
    out = [
        "# Replicas sharing the background work",
        "",
        f"`bench/cluster.sh`: {TARGETS:,} stand-in targets (one static nginx, each target at its "
        f"own loopback address), health probes every {PROBE_INTERVAL:g} s (stable targets too), "
        f"members in a real PostgreSQL, lease {LEASE}, renewal {RENEW}; measured over "
        f"{WINDOW:g} s per replica count on {os.cpu_count()} CPUs, everything on one machine.",
        "",
        "| replicas | CPU per replica (mean) | ratio to 1 replica | probes sent/s per replica (mean) | "
        "ratio to 1 replica | probes per target per interval (all replicas) | RSS per replica | RSS per target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        reps = r["per_replica"]
        cpu = sum(x["cpu"] for x in reps) / len(reps)
        sent = sum(x["probes_per_s"] for x in reps) / len(reps)
        rss = sum(x["rss_kb"] for x in reps) / len(reps)
        ratio = lambda v, base: f"{v / base:.2f}" if base else "-"  # noqa: E731
        out.append(
            f"| {r['replicas']} | {cpu * 100:.1f}% | {ratio(cpu, one['cpu'] if one else 0)} "
            f"(1/N = {1 / r['replicas']:.2f}) | {sent:,.0f} | {ratio(sent, one['probes_per_s'] if one else 0)} | "
            f"{r['probes_per_target_interval']:.2f} | {rss / 1024:.0f} MiB | {rss * 1024 / TARGETS:,.0f} B |"
        )
    for r in rows:
        if "reprobed_after_kill_s" in r:
            t = r["reprobed_after_kill_s"]
            out += [
                "",
                f"One of 4 SIGKILLed: every target probed again after "
                + (f"**{t:.1f} s**" if t is not None else "more than 300 s")
                + f" (the aim: within lease_duration + renew_interval + one probe interval = "
                f"{15 + 5 + PROBE_INTERVAL:g} s).",
            ]
    out += [
        "",
        "CPU is each replica's own (user and system) per second of the window; the probes are "
        "`jmxgate_health_probes_total{result=\"sent\"}`; the probes per target per interval are "
        "what the stand-ins logged (1.00: each target once per interval whatever the replica count).",
        "",
    ]
    return "\n".join(out)


def main():
    port, log = start_stand_ins()
    pg = start_postgres()
    directory = os.path.join(work, "gateways")
    os.makedirs(directory)
    with open(os.path.join(directory, "fleet.json"), "w") as f:
        json.dump([{"name": f"t-{i}", "url": f"http://{scale.target_host(i)}:{port}/t{i}/jolokia"}
                   for i in range(1, TARGETS + 1)], f)
    rows = []
    try:
        for n in REPLICAS:
            print(f"==> {n} replica(s), {TARGETS:,} targets", flush=True)
            row = run(n, port, pg, log, directory)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in groups:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        stop_stand_ins()
    text = markdown(rows)
    with open(os.path.join(scale.ROOT, "bench", "cluster-results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
