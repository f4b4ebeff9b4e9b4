#!/usr/bin/env bash
# Replicas sharing the background work ([cluster]): 1, 2 and 4 replicas of
# one configuration over PostgreSQL, probing 100,000 stand-in targets; each
# replica's probe CPU and probes sent as a ratio to one replica's, probes
# per target per interval, RSS per target, and the time from SIGKILL of one
# of 4 to every target probed again. See bench/cluster.py.
#   TARGETS=100000 PROBE_INTERVAL=10 WINDOW=30 REPLICAS="1 2 4" \
#   [JMXGATE_BIN=<another build>] bench/cluster.sh
# Writes bench/cluster-results.md.
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/cluster-prelude.sh
exec python3 bench/cluster.py
