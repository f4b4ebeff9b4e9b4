#!/usr/bin/env python3
"""The console's fleet page (`/console/`) at fleet scale, next to the JSON
target list in the same run (bench/console.sh sets up the tools and calls
this).

Stand-ins, as in bench/scale.py (whose helpers this uses): one static
nginx answers every target at its own loopback address, because 100,000
JVMs cannot run here; the targets are probed, so their states are real.
Each view is asked ROUNDS times after three warm-ups, one at a time over a
new connection, with Basic authentication, a policy and the audit log on
(every console page is an audit record): the median and 90th percentile
of its time, and the gateway's CPU per request. The anchor is
`/jolokia/targets?limit=100`, the same hundred rows as JSON; each view's
ratio is to it.

Writes bench/console-results.md.
"""
import datetime
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402  (its helpers: stand-ins, gateway, measuring)

TARGETS = [int(n) for n in os.environ.get("TARGETS", "1000 10000 100000").split()]
ROUNDS = int(os.environ.get("ROUNDS", "200"))


def views(n):
    """(label, path): the anchor first."""
    return [
        ("`/jolokia/targets?limit=100` (anchor)", "/jolokia/targets?limit=100"),
        ("fleet page (first 100)", "/console/"),
        ("grouped by a label (16 groups)", "/console/?group=shard"),
        ("a page deep in the fleet", f"/console/?after=t-{max(1, n - 150)}"),
        ("text filter (one name)", f"/console/?q=t-{n // 2}"),
        ("selector (1 in 16)", "/console/?selector=shard%3Ds3"),
    ]


def idle_rate(p, seconds=2.0):
    """The gateway's CPU seconds per second with nothing asked (its health
    probes), taken out of what the requests cost."""
    t0 = scale.cpu_ticks(p.pid)
    time.sleep(seconds)
    return (scale.cpu_ticks(p.pid) - t0) / scale.TICKS / seconds


def measure(p, gw, path):
    for _ in range(3):
        scale.http("GET", gw + path)
    idle = idle_rate(p)
    times = []
    size = 0
    t0 = scale.cpu_ticks(p.pid)
    started = time.monotonic()
    for _ in range(ROUNDS):
        took, data = scale.http("GET", gw + path)
        times.append(took)
        size = len(data)
    spent = (scale.cpu_ticks(p.pid) - t0) / scale.TICKS - idle * (time.monotonic() - started)
    cpu = max(0.0, spent) / ROUNDS
    times.sort()
    return {
        "p50_ms": statistics.median(times) * 1000,
        "p90_ms": times[int(0.9 * (len(times) - 1))] * 1000,
        "cpu_ms": cpu * 1000,
        "bytes": size,
    }


def fleet_rows(n, static_port):
    directory = os.path.join(scale.work, f"console-{n}")
    os.makedirs(directory)
    port = scale.free_port()
    config = scale.gateway_config(port, static_port, n, directory)
    p, _ = scale.start_gateway(config, directory)
    gw = f"http://127.0.0.1:{port}"
    scale.wait_probed(gw, f"t-{n}")
    rows = [(label, measure(p, gw, path)) for label, path in views(n)]
    scale.stop(p)
    anchor = rows[0][1]
    for label, r in rows:
        print(f"  {n:>6} targets: {label}: p50 {r['p50_ms']:.1f} ms, p90 {r['p90_ms']:.1f} ms, "
              f"CPU {r['cpu_ms']:.2f} ms, {r['bytes']:,} B, "
              f"{r['p50_ms'] / anchor['p50_ms']:.2f} x the anchor", flush=True)
    return n, rows


def markdown(results):
    when = datetime.date.today().isoformat()
    cores = os.cpu_count()
    out = [
        "# The console's fleet page at fleet scale",
        "",
        f"Measured {when} on {cores} cores ({platform.machine()}) by `bench/console.sh`: jmxgate "
        f"(release) with Basic authentication, a policy and the audit log on; {ROUNDS} requests per "
        "view, one at a time, after three warm-ups. The targets are stand-ins (one static nginx "
        "answers every agent; see `bench/scale-results.md`), probed every "
        f"{scale.PROBE_INTERVAL:g} s, so their states are real.",
        "",
        "The anchor is the JSON target list's page of 100 (`/jolokia/targets?limit=100`), the "
        "rows a console page shows; *ratio* is a view's median time over the anchor's in the "
        "same gateway at the same size. CPU is the gateway's per request, less what it spends idle "
        "(its probes) over the same time.",
        "",
    ]
    for n, rows in results:
        anchor = rows[0][1]
        out += [
            f"## {n:,} targets",
            "",
            "| view | p50 | p90 | ratio (p50 / anchor) | gateway CPU per request | answer |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label, r in rows:
            out.append(
                f"| {label} | {r['p50_ms']:.1f} ms | {r['p90_ms']:.1f} ms | "
                f"{r['p50_ms'] / anchor['p50_ms']:.2f} | {r['cpu_ms']:.2f} ms | {r['bytes']:,} B |"
            )
        out.append("")
    out += [
        "How to read it: the anchor finds its 100 rows and stops. A console page also counts the",
        "states (up, down, not yet probed; per group when grouped) of every target the viewer",
        "reaches, and a text filter looks at every name and label: that walk is what grows with",
        "the fleet. A page deep in the fleet costs what the first does: it starts at its `after`.",
        "",
    ]
    return "\n".join(out)


def main():
    static_port, proxy_port = scale.free_port(), scale.free_port()
    try:
        scale.start_nginx(static_port, proxy_port)
        results = [fleet_rows(n, static_port) for n in TARGETS]
    finally:
        for p in scale.procs:
            if p.poll() is None:
                p.kill()
        scale.stop_nginx()
    text = markdown(results)
    out = os.environ.get("OUT", os.path.join(scale.ROOT, "bench"))
    with open(os.path.join(out, "console-results.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
