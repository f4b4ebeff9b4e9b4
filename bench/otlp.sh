#!/usr/bin/env bash
# The OTLP export next to the Prometheus door, one command: TARGETS
# stand-in agents of SAMPLES samples each (one nginx answering canned
# Jolokia JSON, bench/otlp-rules.yml making the samples), pushed over OTLP
# every INTERVAL by an [[otlp.exports]] in one gateway, and scraped
# through /prometheus once per target every INTERVAL in another, PUSHES
# rounds each after a warm-up round: the gateway's CPU and RSS per round,
# CPU per sample, and bytes on the wire per point. See bench/otlp.py.
#   TARGETS=1000 SAMPLES=500 PUSHES=4 INTERVAL=15s IDLE=8s OTLP_TIMEOUT=10s \
#   SCRAPERS=16 AUDIT=on [JMXGATE_BIN=<another build>] bench/otlp.sh
# Writes bench/otlp-results.md; about 2.5 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v nginx >/dev/null || {
    echo "==> installing nginx-light"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
}
echo "==> building (release)"
cargo build --release --quiet
# A connection per stand-in target, and the scrapers'.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec python3 bench/otlp.py
