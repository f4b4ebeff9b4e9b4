#!/usr/bin/env bash
# Fleet-scale curves, one command: targets 100 -> 100,000 (start-up, idle
# RSS and CPU, GET /jolokia/targets, a read fanned out to all), bulk size
# 1 -> 1000 and concurrent clients 1 -> 256, for jmxgate with nginx
# proxy_pass beside it in the same run. The agents of the target curve are
# stand-ins (one static nginx); see bench/scale.py.
#   TARGETS="100 1000 10000 100000" BULKS="1 10 100 1000" CLIENTS="1 2 8 32 128 256" \
#   DURATION=5s PROBE_INTERVAL=10 WORKERS=<CPUs> [JMXGATE_BIN=<another build>] bench/scale.sh
# Writes bench/scale-results.md, bench/scale-results.json and bench/scale.png.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx-light)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# matplotlib for the plot, pinned, in a venv of its own.
venv=bench/.venv
if ! cmp -s bench/requirements.txt "$venv/.installed-requirements.txt"; then
    echo "==> Python venv in $venv (matplotlib)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r bench/requirements.txt
    cp bench/requirements.txt "$venv/.installed-requirements.txt"
fi
echo "==> building (release)"
cargo build --release --quiet
# 100,000 targets' fan-out and the probes' connections need descriptors.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec "$venv/bin/python" bench/scale.py
