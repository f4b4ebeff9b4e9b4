#!/usr/bin/env bash
# Starts the jmxgate demo: three real Jolokia agents, each its own JVM
# (orders-1 and billing-1: Jolokia 1.7.1 in embedded Jetty; orders-2: the
# Jolokia 2.6.0 JVM agent from ../shared/jolokia or JMXGATE_JOLOKIA2_DIR,
# 1.7.1 too when that jar is not there) and the gateway in front of them.
# Ctrl-C stops everything.
#
#   JMXGATE_DEMO_LISTEN  gateway address        (default 127.0.0.1:8080)
#   JMXGATE_DEMO_PORTS   the agents' three ports (default "18778 18779 18780")
#   JMXGATE_DEMO_DIR     its files: config, policy, audit, logs (default target/demo)
#   JMXGATE_DEMO_BIN     a jmxgate binary to run instead of building one
#                        (tests/manual.rs runs the demo with the test build)
#   JMXGATE_DEMO_NO_INSTALL=1  skip scripts/install-deps.sh (already run)
set -euo pipefail
cd "$(dirname "$0")/.."

listen="${JMXGATE_DEMO_LISTEN:-127.0.0.1:8080}"
read -r -a ports <<<"${JMXGATE_DEMO_PORTS:-18778 18779 18780}"
names=(orders-1 orders-2 billing-1)
apps=(orders orders billing)

[ -n "${JMXGATE_DEMO_NO_INSTALL:-}" ] || scripts/install-deps.sh
jmxgate="${JMXGATE_DEMO_BIN:-}"
if [ -z "$jmxgate" ]; then
    echo "==> building jmxgate (release)"
    cargo build --release --quiet
    jmxgate=target/release/jmxgate
fi

work="${JMXGATE_DEMO_DIR:-target/demo}"
mkdir -p "$work/classes"
cp="$(tests/agent/classpath.sh)"
echo "==> compiling the agent launcher"
javac -nowarn -d "$work/classes" -cp "$cp" tests/agent/*.java

jolokia2_jar="${JMXGATE_JOLOKIA2_DIR:-../shared/jolokia}/jolokia-agent-jvm-2.6.0.jar"
[ -f "$jolokia2_jar" ] || echo "note: no $jolokia2_jar; every demo agent runs Jolokia 1.7.1" >&2
generation=()
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

config="$work/gateway.toml"
cat >"$work/demo-policy.xml" <<'XML'
<restrict>
  <!-- The demo role may do everything except these. -->
  <deny>
    <mbean>
      <name>jmxgate.test:type=Operations</name>
      <operation>fail</operation>
      <operation>reset</operation>
    </mbean>
  </deny>
</restrict>
XML
cat >"$config" <<TOML
# Written by scripts/demo.sh
[server]
listen = "$listen"
default_target = "orders-1"

[target_defaults]
request_timeout = "10s"

[access]
anonymous_role = "demo"

[[roles]]
name = "demo"
targets = ["*"]
policy = "demo-policy.xml"

[audit]
dir = "audit"
TOML

for i in 0 1 2; do
    fifo="$work/agent-$i.stdin"
    rm -f "$fifo" && mkfifo "$fifo"
    # The launcher stops when its stdin closes: keep it open with sleep.
    sleep infinity >"$fifo" &
    pids+=($!)
    if [ "$i" -eq 1 ] && [ -f "$jolokia2_jar" ]; then
        java -Xmx64m -XX:+UseSerialGC \
            -javaagent:"$jolokia2_jar=port=${ports[$i]},host=127.0.0.1,discoveryEnabled=false" \
            -cp "$work/classes" Agent2 --name "${names[$i]}" <"$fifo" >"$work/agent-$i.out" 2>"$work/agent-$i.log" &
        generation[$i]="Jolokia 2.6.0"
    else
        java -Xmx64m -XX:+UseSerialGC -cp "$work/classes:$cp" Launcher \
            --port "${ports[$i]}" --name "${names[$i]}" <"$fifo" >"$work/agent-$i.out" 2>"$work/agent-$i.log" &
        generation[$i]="Jolokia 1.7.1"
    fi
    pids+=($!)
    cat >>"$config" <<TOML

[[targets]]
name = "${names[$i]}"
url = "http://127.0.0.1:${ports[$i]}/jolokia"
labels = { env = "demo", app = "${apps[$i]}" }
TOML
done

for i in 0 1 2; do
    for _ in $(seq 1 100); do
        grep -q READY "$work/agent-$i.out" 2>/dev/null && break
        sleep 0.2
    done
    grep -q READY "$work/agent-$i.out" || { echo "agent ${names[$i]} did not start; see $work/agent-$i.log" >&2; exit 1; }
    echo "==> agent ${names[$i]} (${generation[$i]}) ready on port ${ports[$i]}"
done

"$jmxgate" check-config "$config"
base="http://$listen/jolokia"
cat <<TEXT

jmxgate demo is starting on $base (config: $config). Paste these:

  # the gateway's own version
  curl -s $base/version
  # one agent through its virtual URL (orders-2: ${generation[1]})
  curl -s $base/targets/orders-2/read/java.lang:type=Memory/HeapMemoryUsage
  # protocol 8.2's config: the gateway's own, then orders-2's
  curl -s $base/config
  curl -s $base/targets/orders-2/config
  # the default target (orders-1), GET grammar with an inner path
  curl -s $base/read/jmxgate.test:type=Types/Nested/level1/level2/leaf
  # a bulk across three agents in proxy mode, answered in order
  curl -s -H 'Content-Type: application/json' $base -d '[
    {"type":"read","mbean":"jmxgate.test:type=Types","attribute":"Name","target":{"url":"orders-1"}},
    {"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"add(int,int)","arguments":[2,3],"target":{"url":"billing-1"}},
    {"type":"search","mbean":"java.lang:type=GarbageCollector,*","target":{"url":"service:jmx:jolokia://127.0.0.1:${ports[1]}/jolokia"}},
    {"type":"read","mbean":"java.lang:type=Runtime","attribute":"Uptime","target":{"url":"not-in-the-fleet"}}]'
  # one read answered by every agent of a group (label selector or glob)
  curl -s -H 'Content-Type: application/json' $base -d '{"type":"read","mbean":"java.lang:type=Threading","attribute":"ThreadCount","target":{"url":"app=orders"}}'
  # one answer about the group: the two JVMs with the most heap in use
  curl -s -H 'Content-Type: application/json' $base -d '{"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage","path":"used","target":{"url":"*"},"reduce":{"op":"top","n":2}}'
  JMXGATE_URL=$base $jmxgate read --target '*' java.lang:type=Runtime Uptime --min
  # Prometheus metrics of every JVM of a group (jmx_exporter's default export)
  curl -s 'http://$listen/prometheus?target=app=orders' | head -20
  # the targets you may reach, with health, latency and agent version
  curl -s $base/targets
  # the command-line client
  JMXGATE_URL=$base $jmxgate read --target orders-2 java.lang:type=Memory HeapMemoryUsage
  JMXGATE_URL=$base $jmxgate list --target billing-1 jmxgate.test
  # denied by the demo policy (status 403), and never run on the agent
  curl -s $base/targets/billing-1/exec/jmxgate.test:type=Operations/reset
  # what the gateway would decide, without running anything
  curl -s http://$listen/jmxgate/explain -d '{"type":"exec","mbean":"jmxgate.test:type=Operations","operation":"reset","target":{"url":"orders-2"}}'
  # an AI assistant's door (MCP): the tools, then one call; or run
  # "$jmxgate mcp --url $base" as a stdio MCP server
  curl -s http://$listen/mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
  curl -s http://$listen/mcp -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_attributes","arguments":{"target":"app=orders","mbean":"java.lang:type=Threading","attributes":["ThreadCount"]}}}'
  # the audit trail, and its hash chain
  $jmxgate audit query $work/audit
  $jmxgate audit verify $work/audit

Ctrl-C stops the gateway and the agents.
TEXT
"$jmxgate" serve --config "$config"
