#!/usr/bin/env bash
# Kubernetes discovery at scale, one command: starts the real API server of
# ../shared/kubernetes (kube-apiserver 1.20.2 over Debian's etcd), writes
# PODS Pods (default 10,000) with their status as a kubelet would, and
# measures jmxgate (release build) discovering them:
#   - time from the gateway's start to every target known, next to one
#     plain LIST of the same Pods from the API server (what any watcher
#     must at least do) as the anchor;
#   - RSS per discovered target (against the same gateway whose selector
#     picks no Pod);
#   - CPU at CHANGES Pod changes a second (a label each), next to the API
#     server's own CPU for the same changes;
#   - time from a Pod turning Ready to its first answer through the
#     gateway, and from a Pod's deletion to its target's 404.
# The PODS Pods are stand-ins (10,000 JVMs can't run here): their IPs are
# 127.1.x.y addresses where nothing listens, so health probes are off.
# The Pods whose first answer is timed are real: a Jolokia 1.7.1 agent on
# 127.0.1.1.
#
# Writes bench/kubernetes-results.md and prints it.
#   PODS=10000 CHANGES=10 SECONDS_OF_CHURN=30 bench/kubernetes.sh
set -euo pipefail
cd "$(dirname "$0")/.."

pods="${PODS:-10000}"
changes="${CHANGES:-10}"
churn="${SECONDS_OF_CHURN:-30}"

scripts/install-deps.sh
echo "==> building (release)"
[ -n "${GATEWAY:-}" ] || cargo build --release --quiet

work="$(mktemp -d /tmp/jmxgate-bench-k8s.XXXXXX)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$work/api/pids" ] && kill $(cat "$work/api/pids") 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api_port=$(free_port); etcd_port=$(free_port)
echo "==> starting the API server"
APISERVER_PORT=$api_port ETCD_PORT=$etcd_port ../shared/kubernetes/run-apiserver.sh "$work/api" >/dev/null

echo "==> starting a Jolokia 1.7.1 agent on 127.0.1.1"
cp="$(tests/agent/classpath.sh)"
javac -nowarn -d "$work/classes" -cp "$cp" tests/agent/*.java
mkfifo "$work/agent.stdin"
sleep infinity >"$work/agent.stdin" & pids+=($!)
java -Xmx64m -XX:+UseSerialGC -XX:-UsePerfData -cp "$work/classes:$cp" Launcher --host 127.0.1.1 --name live \
    <"$work/agent.stdin" >"$work/agent.out" 2>"$work/agent.log" & pids+=($!)
for _ in $(seq 1 100); do grep -q READY "$work/agent.out" 2>/dev/null && break; sleep 0.2; done
agent_port=$(sed -n 's/^READY port=//p' "$work/agent.out")
[ -n "$agent_port" ] || { echo "agent did not start; see $work/agent.log" >&2; exit 1; }

WORK="$work" API_PORT="$api_port" AGENT_PORT="$agent_port" PODS="$pods" CHANGES="$changes" \
    CHURN="$churn" GATEWAY="${GATEWAY:-target/release/jmxgate}" python3 bench/kubernetes.py | tee bench/kubernetes-results.md
