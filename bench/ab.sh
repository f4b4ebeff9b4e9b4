#!/usr/bin/env bash
# A/B of two jmxgate builds in one run (bench/ab.py): the bulk-size and
# concurrent-client curves, each build in turn, rounds alternating.
#   A=<build before> [B=<build after, default target/release/jmxgate>] \
#   [ROUNDS=2] [BULKS="1 10 100"] [CLIENTS="1 8 64"] [DURATION=3s] bench/ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${A:?A=<path of the build to compare against>}"
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx-light)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -z "${B:-}" ]; then
    cargo build --release --quiet
    export B=target/release/jmxgate
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec python3 bench/ab.py
