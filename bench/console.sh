#!/usr/bin/env bash
# The console's fleet page at fleet scale, one command: TARGETS stand-in
# targets (one nginx answering every agent, as in bench/scale.sh, probed
# every PROBE_INTERVAL seconds), each console view asked ROUNDS times with
# Basic authentication and the audit log on, next to the JSON target list
# (`/jolokia/targets?limit=100`) in the same run. See bench/console.py.
#   TARGETS="1000 10000 100000" ROUNDS=200 PROBE_INTERVAL=10 [JMXGATE_BIN=<another build>] bench/console.sh
# Writes bench/console-results.md; about 3 minutes with the defaults, after the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v nginx >/dev/null || {
    echo "==> installing nginx-light"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
}
echo "==> building (release)"
cargo build --release --quiet
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec python3 bench/console.py
