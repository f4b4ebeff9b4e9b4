"""OTLP pushes shared by replicas, at fleet scale: REPLICAS replicas of
one configuration ([cluster] over a real PostgreSQL) push one
[[otlp.exports]] of TARGETS stand-in targets (default 100,000) every
INTERVAL into a real VictoriaMetrics (../shared/victoriametrics), and the
bench counts, per series, the points VictoriaMetrics holds over WINDOW
seconds. 1.00 points per series per interval is the aim: each
(export, target) pushed by its one owner; N replicas each pushing
everything would give N.

Stand-ins: the nginx of bench/otlp.py answering every target at a
loopback address of its own, with SAMPLES samples each (default 1: one
series per target). Health probes run as in production (every 10 s),
answered by the same stand-in.

Writes bench/cluster-otlp-results.md.
"""

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

os.environ.setdefault("SAMPLES", "1")
os.environ.setdefault("TARGETS", "100000")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402  (PostgreSQL)
import otlp  # noqa: E402  (the stand-in, target names and addresses)

ROOT = otlp.ROOT
BIN = otlp.BIN
TARGETS = otlp.TARGETS
REPLICAS = int(os.environ.get("REPLICAS", "4"))
INTERVAL = float(os.environ.get("INTERVAL", "30"))
WINDOW = float(os.environ.get("WINDOW", "120"))
# A push's deadline for reading its targets: the default 10 s reads about
# 2,000 stand-ins a replica here, far from its 25,000.
PUSH_TIMEOUT = float(os.environ.get("PUSH_TIMEOUT", "25"))
VM = os.path.join(ROOT, "..", "shared", "victoriametrics", "victoria-metrics")
work = otlp.work
procs = []


def http_get(url, timeout=120):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def start_victoria():
    port = otlp.free_port()
    data = os.path.join(work, "vm")
    p = subprocess.Popen(
        [VM, f"-storageDataPath={data}", f"-httpListenAddr=127.0.0.1:{port}",
         "-opentelemetry.usePrometheusNaming", "-search.latencyOffset=0s", "-loggerLevel=ERROR",
         "-search.maxExportSeries=1000000", "-search.maxSeries=1000000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    for _ in range(600):
        try:
            http_get(f"http://127.0.0.1:{port}/health", timeout=1)
            return port
        except OSError:
            time.sleep(0.1)
    sys.exit("VictoriaMetrics did not start")


def replica_config(i, pg, vm_port):
    """bench/cluster.py's replica, probing every 10 s, with the export."""
    directory = os.path.join(work, f"gw-{i}")
    os.makedirs(directory, exist_ok=True)
    export = f"""[[roles]]
name = "metrics"
targets = ["*"]
max_targets_per_item = {TARGETS}
[[prometheus.modules]]
name = "standin"
rules_file = "{otlp.RULES}"
[[otlp.exports]]
name = "vm"
endpoint = "http://127.0.0.1:{vm_port}/opentelemetry"
interval = "{INTERVAL:g}s"
timeout = "{PUSH_TIMEOUT:g}s"
targets = "standin-*"
module = "standin"
role = "metrics"
"""
    path, admin = cluster.replica_config(
        i, pg, directory, probe_interval=10,
        cluster_keys=f"wait_for_members = {REPLICAS}",
        fleet=f"{work}/fleet.json", extra=export)
    return path, admin, directory


def write_fleet(standin_port):
    with open(os.path.join(work, "fleet.json"), "w") as f:
        json.dump(
            [
                {"name": otlp.target_name(i),
                 "url": f"http://{otlp.target_host(i)}:{standin_port}/t{i:05d}/jolokia",
                 "labels": {"env": "bench", "app": "standin"}}
                for i in range(1, TARGETS + 1)
            ],
            f,
        )


def series_points(vm_port, start, end):
    """Points per series between start and end (Unix seconds), by target."""
    q = urllib.parse.urlencode({"match[]": '{__name__=~"standin_.*"}', "start": f"{start:.3f}",
                                "end": f"{end:.3f}"})
    http_get(f"http://127.0.0.1:{vm_port}/internal/force_flush")
    body = http_get(f"http://127.0.0.1:{vm_port}/api/v1/export?{q}", timeout=600)
    points = {}
    for line in body.splitlines():
        if line.strip():
            s = json.loads(line)
            key = (s["metric"].get("service_instance_id"), s["metric"]["__name__"])
            points.setdefault(key, []).extend(s["timestamps"])
    return points


def per_interval(timestamps):
    """Points per interval of one series: its points over the intervals
    its first and last span (one pusher: 1.00; two each interval: 2.00),
    whatever the window's edges cut."""
    span = (max(timestamps) - min(timestamps)) / 1000 / INTERVAL
    return len(timestamps) / (round(span) + 1)


def otlp_counters(admins):
    """`jmxgate_otlp_*_total` summed over the replicas, by their labels."""
    sums = {}
    for admin in admins:
        text = http_get(f"http://127.0.0.1:{admin}/metrics").decode()
        for line in text.splitlines():
            if line.startswith(("jmxgate_otlp_points_total", "jmxgate_otlp_pushes_total")):
                series, value = line.rsplit(" ", 1)
                sums[series] = sums.get(series, 0.0) + float(value)
    return sums


def main():
    pg = cluster.start_postgres()
    vm_port = start_victoria()
    standin_port = otlp.free_port()
    otlp.start_stand_in(standin_port)
    write_fleet(standin_port)
    replicas = []
    for i in range(REPLICAS):
        config, admin, directory = replica_config(i, pg, vm_port)
        log = open(os.path.join(directory, "gateway.log"), "w")
        p = subprocess.Popen([BIN, "serve", "-c", config], stdout=log, stderr=subprocess.STDOUT,
                             cwd=directory)
        procs.append(p)
        replicas.append((p, admin))
    cluster.wait_members([a for _, a in replicas], REPLICAS)
    # Two intervals to warm up (each target's list and plan), then the window.
    time.sleep(INTERVAL * 2 + 5)
    start = time.time()
    time.sleep(WINDOW)
    end = time.time()
    counters = otlp_counters([a for _, a in replicas])
    counts = series_points(vm_port, start, end)
    per = sorted(per_interval(ts) for ts in counts.values())
    targets_seen = len({k[0] for k in counts})
    mean = sum(per) / len(per) if per else 0.0
    over = sum(1 for p in per if p > 1.2)
    rows = {
        "series": len(counts),
        "targets_seen": targets_seen,
        "mean": mean,
        "min": per[0] if per else 0.0,
        "median": per[len(per) // 2] if per else 0.0,
        "max": per[-1] if per else 0.0,
        "over": over,
    }
    print(json.dumps(rows), flush=True)
    text = f"""# OTLP pushes shared by replicas

`bench/cluster-otlp.sh`: {REPLICAS} replicas with `[cluster] membership = "postgres"` (a real
PostgreSQL), one `[[otlp.exports]]` of {TARGETS:,} stand-in targets ({otlp.SAMPLES} sample each:
one nginx answering every target at its own loopback address, bench/otlp.py's stand-in) every
{INTERVAL:g} s into a real VictoriaMetrics, health probes every 10 s; points counted per series
over {WINDOW:g} s after two intervals of warm-up (a series' points over the intervals its first
and last point span), on 2 CPUs, everything on one machine.

| series in VictoriaMetrics | targets seen | points per series per interval: mean | min | median | max | series above 1.2 |
|---|---|---|---|---|---|---|
| {rows['series']:,} | {targets_seen:,} | **{mean:.2f}** | {rows['min']:.2f} | {rows['median']:.2f} | {rows['max']:.2f} | {over:,} |

1.00 is the aim: each (export, target) pushed by its one owner; {REPLICAS} replicas each pushing
every target would give {REPLICAS}.00. Below 1.00: pushes that ran late or missed an interval.
Each export's `timeout` (its deadline for reading its targets) is {PUSH_TIMEOUT:g} s here.

The replicas' counters at the window's end, summed:

```text
""" + "\n".join(f"{k} {v:g}" for k, v in sorted(counters.items())) + """
```
"""
    with open(os.path.join(ROOT, "bench", "cluster-otlp-results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        otlp.stop_stand_in()
        for g in cluster.groups:
            g.terminate()
