#!/usr/bin/env bash
# OTLP pushes shared by replicas at fleet scale: REPLICAS (4) replicas over
# a real PostgreSQL push one export of TARGETS (100,000) stand-in targets
# every INTERVAL (30 s) into a real VictoriaMetrics; points per series per
# interval counted there (1.00 is the aim). See bench/cluster_otlp.py.
#   [TARGETS=100000] [REPLICAS=4] [INTERVAL=30] [WINDOW=120] bench/cluster-otlp.sh
# Writes bench/cluster-otlp-results.md.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x ../shared/victoriametrics/victoria-metrics ] || { echo "../shared/victoriametrics/victoria-metrics is missing" >&2; exit 1; }
. bench/cluster-prelude.sh
exec python3 bench/cluster_otlp.py
