#!/usr/bin/env python3
"""A/B of two jmxgate builds in one run: the bulk-size and concurrent-client
curves of bench/scale.py (a read of one stand-in, bulks against one
stand-in; nginx proxy_pass beside them), each build in turn, rounds
alternating, so both see the same machine.

    A=<build before> B=<build after> [ROUNDS=2] [BULKS="1 10 100"]
    [CLIENTS="1 8 64"] [DURATION=3s] bench/ab.sh

Prints a table of B's rate and CPU per request relative to A's.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("BULKS", "1 10 100")
os.environ.setdefault("CLIENTS", "1 8 64")
os.environ.setdefault("DURATION", "3s")
import scale  # noqa: E402  (its settings come from the environment above)

A, B = os.environ["A"], os.environ["B"]
ROUNDS = int(os.environ.get("ROUNDS", "2"))


def mean(rows, key, what):
    return sum(r[key][what] for r in rows) / len(rows)


def main():
    static_port, proxy_port = scale.free_port(), scale.free_port()
    runs = {A: [], B: []}
    try:
        nginx_workers = scale.start_nginx(static_port, proxy_port)
        for n in range(ROUNDS):
            for build in ([A, B] if n % 2 == 0 else [B, A]):
                scale.BIN = build
                # load_rows makes its directory afresh.
                shutil.rmtree(os.path.join(scale.work, "load"), ignore_errors=True)
                print(f"==> round {n + 1}: {build}", flush=True)
                runs[build].append(scale.load_rows(static_port, proxy_port, nginx_workers))
    finally:
        for p in scale.procs:
            if p.poll() is None:
                p.kill()
        scale.stop_nginx()
    lines = [
        f"A/B on {os.cpu_count()} cores, {ROUNDS} rounds alternating, wrk {scale.DURATION} per point: "
        f"A = `{A}`, B = `{B}`.\n",
        "| curve | point | A req/s | B req/s | B / A | A / nginx | B / nginx | CPU per request A, B |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for curve, index, key in (("bulk size", 0, "bulk"), ("clients", 1, "clients")):
        points = [r[key] for r in runs[A][0][index]]
        for i, point in enumerate(points):
            a = [run[index][i] for run in runs[A]]
            b = [run[index][i] for run in runs[B]]
            a_rps, b_rps = mean(a, "jmxgate", "rps"), mean(b, "jmxgate", "rps")
            a_x, b_x = mean(a, "nginx", "rps"), mean(b, "nginx", "rps")
            a_cpu, b_cpu = mean(a, "jmxgate", "cpu_us"), mean(b, "jmxgate", "cpu_us")
            lines.append(
                f"| {curve} | {point} | {a_rps:,.0f} | {b_rps:,.0f} | {b_rps / a_rps:.2f} | "
                f"{a_rps / a_x:.2f} | {b_rps / b_x:.2f} | {a_cpu:.0f}, {b_cpu:.0f} µs |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    out = os.environ.get("OUT")
    if out:
        with open(out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
