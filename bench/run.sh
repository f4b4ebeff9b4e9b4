#!/usr/bin/env bash
# Side-by-side load benchmark, one command: builds jmxgate, starts a real
# Jolokia agent and nginx, and measures in one run, with wrk:
#   (a) the agent directly, (b) through jmxgate, (c) through nginx proxy_pass
# for a GET read, a POST read, a 10-item bulk and a full list; then (b) and
# (c) again against a fast static backend (nginx answering a canned Jolokia
# response) to show the gateway's own cost without the JVM's limits, next
# to a bare hyper pass-through that does no work (examples/passthrough.rs,
# the floor of any gateway built on the same parts); then
# `list` answers of about 10 MB, from a real agent with 6000 MBeans (which
# the gateway's shared cache revalidates) and from the static backend
# (fetched in full every time), with the gateway's peak RSS; then a fan-out
# bulk of 1000 items over 50 targets; then a Jolokia 2.6.0 agent (from
# ../shared/jolokia or JMXGATE_JOLOKIA2_DIR; skipped without it), whose
# kept-alive connections stall 44 ms per answer: directly with keep-alive,
# directly with Connection: close, through jmxgate and through nginx, at 1
# and 16 clients; then Prometheus scrapes of a JVM with about 5,000
# readable values (600 MBeans, bench/exporter-rules.yml) through the
# gateway's /prometheus next to jmx_exporter's own agent in the same JVM
# (../shared/prometheus or JMXGATE_JMX_EXPORTER_JAR; skipped without it),
# and of 100 targets through one selector. jmxgate runs with Basic
# authentication, a restrictor policy and the durable audit log on.
#
# The JVM agent is warmed up first (WARMUP seconds per request kind), and
# each comparison runs in ROUNDS rounds of alternating order; the table
# shows the mean of the rounds.
#
# Writes bench/results.md (a markdown table) and prints it.
#   DURATION=6s ROUNDS=2 WARMUP=5 BIG_SECONDS=20 CONNECTIONS=16 THREADS=2 WORKERS=<CPUs> bench/run.sh
# WORKERS: serving threads of both proxies (jmxgate's server.workers,
# nginx's worker_processes); a proxy's CPU is all its workers' together.
#   AUDIT=off bench/run.sh      # the same without the audit log
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${DURATION:-6s}"
rounds="${ROUNDS:-2}"
warmup="${WARMUP:-5}"
big_seconds="${BIG_SECONDS:-20}" # the 6000-MBean agent's runs and pauses
connections="${CONNECTIONS:-16}"
threads="${THREADS:-2}"
workers="${WORKERS:-$(nproc)}"

scripts/install-deps.sh
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx-light)
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

echo "==> building (release)"
cargo build --release --quiet
cargo build --release --quiet --example passthrough
work="$(mktemp -d /tmp/jmxgate-bench.XXXXXX)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for f in "$work/nginx.pid" "$work/nginx-static.pid"; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

cp="$(tests/agent/classpath.sh)"
javac -nowarn -d "$work/classes" -cp "$cp" tests/agent/*.java

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
agent_port=$(free_port); proxy_port=$(free_port); static_port=$(free_port); static_proxy_port=$(free_port)
big_port=$(free_port); big_proxy_port=$(free_port)
gw_port=$(free_port); floor_port=$(free_port)

mkfifo "$work/agent.stdin"
sleep infinity >"$work/agent.stdin" & pids+=($!)
java -Xmx256m -XX:+UseParallelGC -cp "$work/classes:$cp" Launcher --port "$agent_port" --name bench \
    <"$work/agent.stdin" >"$work/agent.out" 2>"$work/agent.log" & agent_pid=$!; pids+=($agent_pid)
for _ in $(seq 1 100); do grep -q READY "$work/agent.out" 2>/dev/null && break; sleep 0.2; done
grep -q READY "$work/agent.out" || { echo "agent did not start" >&2; exit 1; }
# A second agent for a large application: 6000 more MBeans, a list answer
# of about 10 MB.
java -Xmx1g -XX:+UseParallelGC -cp "$work/classes:$cp" Launcher --port "$big_port" --name big --many-mbeans 6000 \
    <"$work/agent.stdin" >"$work/big.out" 2>"$work/big.log" & pids+=($!)
for _ in $(seq 1 150); do grep -q READY "$work/big.out" 2>/dev/null && break; sleep 0.2; done
grep -q READY "$work/big.out" || { echo "the large agent did not start" >&2; exit 1; }

# The JVM the Prometheus scrapes read: 600 MBeans of about eight values,
# with jmx_exporter's agent beside Jolokia when its jar is there.
exporter_jar="${JMXGATE_JMX_EXPORTER_JAR:-../shared/prometheus/jmx_prometheus_javaagent-1.6.0.jar}"
prom_port=$(free_port); exporter_port=$(free_port)
exporter_agent=()
if [ -f "$exporter_jar" ]; then
    exporter_agent=(-javaagent:"$exporter_jar=127.0.0.1:$exporter_port:$PWD/bench/exporter-rules.yml")
else
    echo "note: no $exporter_jar; the jmx_exporter column is skipped (set JMXGATE_JMX_EXPORTER_JAR)" >&2
fi
java -Xmx512m -XX:+UseParallelGC "${exporter_agent[@]}" -cp "$work/classes:$cp" Launcher --port "$prom_port" \
    --name prom --many-mbeans 600 <"$work/agent.stdin" >"$work/prom.out" 2>"$work/prom.log" & prom_pid=$!; pids+=($prom_pid)
for _ in $(seq 1 150); do grep -q READY "$work/prom.out" 2>/dev/null && break; sleep 0.2; done
grep -q READY "$work/prom.out" || { echo "the Prometheus agent did not start" >&2; exit 1; }

# A Jolokia 2.6.0 JVM agent with the same test MBeans.
jolokia2_jar="${JMXGATE_JOLOKIA2_DIR:-../shared/jolokia}/jolokia-agent-jvm-2.6.0.jar"
agent2_port=$(free_port); agent2_proxy_port=$(free_port)
if [ -f "$jolokia2_jar" ]; then
    java -Xmx256m -XX:+UseParallelGC \
        -javaagent:"$jolokia2_jar=port=$agent2_port,host=127.0.0.1,discoveryEnabled=false" \
        -cp "$work/classes" Agent2 --name bench2 \
        <"$work/agent.stdin" >"$work/agent2.out" 2>"$work/agent2.log" & pids+=($!)
    for _ in $(seq 1 100); do grep -q READY "$work/agent2.out" 2>/dev/null && break; sleep 0.2; done
    grep -q READY "$work/agent2.out" || { echo "the Jolokia 2.6.0 agent did not start" >&2; exit 1; }
else
    echo "note: no $jolokia2_jar; the Jolokia 2.x rows are skipped (set JMXGATE_JOLOKIA2_DIR)" >&2
    jolokia2_jar=""
fi

# nginx twice, as separate processes so that each one's CPU time is its
# own: the static backend (a canned answer), and the proxy in front of the
# agents and of that backend.
canned='{"request":{"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage"},"value":{"init":67108864,"committed":64880640,"max":64880640,"used":7527472},"timestamp":1795312410,"status":200}'
bulk_canned="[$(printf '%s,' $(for _ in $(seq 1 10); do echo "$canned"; done) | sed 's/,$//')]"
cat >"$work/nginx-static.conf" <<NGINX
worker_processes 1;
pid $work/nginx-static.pid;
error_log $work/nginx-static-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$static_port;
        default_type application/json;
        location /bulk { return 200 '$bulk_canned'; }
        # POST is not allowed on a static file: fetch it by GET internally.
        location = /biglist { proxy_method GET; proxy_pass http://127.0.0.1:$static_port/biglist.json; }
        location = /biglist.json { root $work; default_type application/json; }
        location / { return 200 '$canned'; }
    }
}
NGINX
cat >"$work/nginx.conf" <<NGINX
worker_processes $workers;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    upstream agent { server 127.0.0.1:$agent_port; keepalive 32; }
    upstream static { server 127.0.0.1:$static_port; keepalive 32; }
    upstream big { server 127.0.0.1:$big_port; keepalive 32; }
    upstream agent2 { server 127.0.0.1:$agent2_port; keepalive 32; }
    server {
        listen 127.0.0.1:$proxy_port;
        location / { proxy_pass http://agent; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
    server {
        listen 127.0.0.1:$big_proxy_port;
        location / { proxy_pass http://big; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
    server {
        listen 127.0.0.1:$agent2_proxy_port;
        location / { proxy_pass http://agent2; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
    server {
        listen 127.0.0.1:$static_proxy_port;
        location / { proxy_pass http://static; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
NGINX
# A list answer of about 10 MB: 40 domains of 100 MBeans with 20 attributes.
python3 - "$work/biglist.json" <<'PY'
import json, sys
attr = {"rw": False, "type": "long", "desc": "an attribute of a large application"}
value = {f"app.domain{d}": {f"name=bean{b},type=Component": {"attr": {f"Attribute{a}": attr for a in range(27)},
         "class": "com.example.Component", "desc": "a component"} for b in range(100)} for d in range(40)}
json.dump({"request": {"type": "list"}, "value": value, "timestamp": 1795312410, "status": 200}, open(sys.argv[1], "w"))
PY
# nginx's workers run as another user: let them read the file.
chmod 755 "$work" && chmod 644 "$work/biglist.json"
nginx -c "$work/nginx-static.conf"
nginx -c "$work/nginx.conf"
for _ in $(seq 1 50); do [ -s "$work/nginx.pid" ] && break; sleep 0.1; done
nginx_workers=$(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')

# jmxgate with authentication, a policy and the audit log.
hash=$(echo 'bench-password' | target/release/jmxgate hash-password)
cat >"$work/users.toml" <<TOML
[[users]]
name = "bench"
password_hash = "$hash"
roles = ["bench"]
TOML
cat >"$work/policy.xml" <<'XML'
<restrict>
  <deny><mbean><name>java.lang:type=Runtime</name><attribute>SystemProperties</attribute></mbean></deny>
</restrict>
XML
{
    cat <<TOML
[server]
listen = "127.0.0.1:$gw_port"
workers = $workers
auth = ["basic"]
max_bulk_items = 2000
[log]
format = "quiet"
[auth.basic]
users_file = "users.toml"
$( [ "${AUDIT:-on}" = off ] || printf '[audit]\ndir = "audit"\n' )
[[roles]]
name = "bench"
targets = ["*"]
policy = "policy.xml"
[[targets]]
name = "agent"
url = "http://127.0.0.1:$agent_port/jolokia"
[[targets]]
name = "big"
url = "http://127.0.0.1:$big_port/jolokia"
[[targets]]
name = "agent2"
url = "http://127.0.0.1:$agent2_port/jolokia"
[[targets]]
name = "static"
url = "http://127.0.0.1:$static_port/jolokia"
[[targets]]
name = "static-bulk"
url = "http://127.0.0.1:$static_port/bulk"
[[targets]]
name = "static-biglist"
url = "http://127.0.0.1:$static_port/biglist"
TOML
    for i in $(seq 0 49); do
        printf '[[targets]]\nname = "fan-%02d"\nurl = "http://127.0.0.1:%s/jolokia/fan%02d"\n' "$i" "$agent_port" "$i"
    done
    cat <<TOML
[[targets]]
name = "prom"
url = "http://127.0.0.1:$prom_port/jolokia"
[[prometheus.modules]]
name = "bench"
rules_file = "$PWD/bench/exporter-rules.yml"
[[prometheus.modules]]
name = "default"
rules_file = "$work/empty-rules.yml"
TOML
    # 100 targets for one selector: a stand-in fleet, each a path of the
    # one small agent (a real agent each would need 100 JVMs here).
    for i in $(seq 0 99); do
        printf '[[targets]]\nname = "fleet-%02d"\nurl = "http://127.0.0.1:%s/jolokia/fleet%02d"\n' "$i" "$agent_port" "$i"
    done
} >"$work/gateway.toml"
echo '{}' >"$work/empty-rules.yml"
target/release/jmxgate serve --config "$work/gateway.toml" 2>"$work/gateway.log" & gw_pid=$!; pids+=($gw_pid)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$gw_port/" && break; sleep 0.1; done

target/release/examples/passthrough "127.0.0.1:$floor_port" "http://127.0.0.1:$static_port" \
    2>"$work/passthrough.log" & floor_pid=$!; pids+=($floor_pid)

auth="Basic $(printf 'bench:bench-password' | base64)"
read_path='/read/java.lang:type=Memory/HeapMemoryUsage'
read_body='{"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage"}'
bulk_body="[$(printf '%s,' $(for _ in $(seq 1 10); do echo "$read_body"; done) | sed 's/,$//')]"
list_body='{"type":"list"}'

lua() { # method body [auth]
    local f="$work/$RANDOM.lua"
    {
        echo "wrk.method = \"$1\""
        [ -n "$2" ] && printf 'wrk.body = [==[%s]==]\n' "$2"
        echo 'wrk.headers["Content-Type"] = "application/json"'
        [ -n "${3:-}" ] && echo "wrk.headers[\"Authorization\"] = \"$3\""
        [ -n "${close_connection:-}" ] && echo 'wrk.headers["Connection"] = "close"'
    } >"$f"
    echo "$f"
}

results="$work/rows.txt"
: >"$results"
# CPU time (user + system) the processes in $1 have used, in clock ticks.
cpu_ticks() {
    local pid total=0
    for pid in $1; do total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done
    echo "$total"
}
ticks_per_s=$(getconf CLK_TCK)
# measure BACKEND SCENARIO LABEL URL METHOD BODY AUTH [PID]: one wrk run,
# one row; with PID, also that process's CPU time per request.
measure() {
    local script out rps p50 p99 n t0 t1 cpu=-
    script=$(lua "$5" "$6" "${7:-}")
    [ -n "${8:-}" ] && t0=$(cpu_ticks "$8")
    out=$(wrk -t"$threads" -c"$connections" -d"$duration" --timeout "${wrk_timeout:-2s}" --latency -s "$script" "$4" 2>&1)
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    n=$(awk '/requests in/ {print $1}' <<<"$out")
    if [ -n "${8:-}" ] && [ "${n:-0}" -gt 0 ]; then
        t1=$(cpu_ticks "$8")
        cpu=$(( (t1 - t0) * 1000000 / ticks_per_s / n ))
    fi
    if grep -q "Non-2xx" <<<"$out"; then
        echo "warning: $3 $2 had non-2xx answers" >&2
    fi
    printf '%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$rps" "$p50" "$p99" "$cpu" >>"$results"
    printf '  %-6s %-36s %-28s %10s req/s  p50 %-9s p99 %-9s CPU %s us/req\n' "$1" "$2" "$3" "$rps" "$p50" "$p99" "$cpu"
}
# compare BACKEND SCENARIO METHOD BODY DIRECT_URL GATEWAY_URL NGINX_URL
# [FLOOR_URL]: the three (or four, with the bare pass-through) side by
# side, in rounds of alternating order (direct, gateway, nginx, then back),
# so that drift on a noisy machine (JIT, other load) does not favour
# whichever runs last. The table shows the mean.
compare() {
    local round i label url auth order u pid
    for u in "$5" "$6" "$7" ${8:+"$8"}; do # pools and caches warm up unmeasured
        local warm=(-s -o /dev/null -X "$3" -H 'Content-Type: application/json' -H "Authorization: $auth_header")
        [ -n "$4" ] && warm+=(--data-binary "$4")
        curl "${warm[@]}" "$u" || true
    done
    for round in $(seq 1 "$rounds"); do
        order=(0 1 2 ${8:+3}); [ $((round % 2)) -eq 0 ] && order=(${8:+3} 2 1 0)
        for i in "${order[@]}"; do
            case $i in
                0) label="$1 directly"; url="$5"; auth=""; pid="" ;;
                1) label="jmxgate (auth+policy+audit)"; url="$6"; auth="$auth_header"; pid="$gw_pid" ;;
                2) label="nginx proxy_pass"; url="$7"; auth=""; pid="$nginx_workers" ;;
                3) label="hyper pass-through"; url="$8"; auth=""; pid="$floor_pid" ;;
            esac
            measure "$1" "$2" "$label" "$url" "$3" "$4" "$auth" "$pid"
            if [ -n "${pause:-}" ]; then sleep "$pause"; fi
        done
    done
}
auth_header="$auth"

A="http://127.0.0.1:$agent_port/jolokia"
G="http://127.0.0.1:$gw_port/jolokia/targets/agent"
N="http://127.0.0.1:$proxy_port/jolokia"
# The JVM compiles its hot paths in the first seconds of load: warm every
# request kind up first, or whichever variant runs first pays for it.
echo "==> warming up the JVM agent (${warmup}s per request kind)"
for spec in "GET|$read_path|" "POST||$read_body" "POST||$bulk_body" "POST||$list_body"; do
    IFS='|' read -r m suffix body <<<"$spec"
    wrk -t"$threads" -c"$connections" -d"${warmup}s" -s "$(lua "$m" "$body")" "$A$suffix" >/dev/null 2>&1
done
echo "==> JVM agent backend (wrk -t$threads -c$connections -d$duration, $rounds rounds)"
compare agent "GET read" GET "" "$A$read_path" "$G$read_path" "$N$read_path"
compare agent "POST read" POST "$read_body" "$A" "$G" "$N"
compare agent "POST bulk of 10" POST "$bulk_body" "$A" "$G" "$N"
compare agent "POST full list" POST "$list_body" "$A" "$G" "$N"

# Moderate load: two clients, each waiting for its answer; what a request
# costs in latency when the machine is not saturated.
echo "==> JVM agent backend, moderate load (wrk -t1 -c2)"
saved=("$threads" "$connections"); threads=1; connections=2
compare agent "POST read, 2 clients" POST "$read_body" "$A" "$G" "$N"
threads="${saved[0]}"; connections="${saved[1]}"

echo "==> static backend (nginx answering a canned response)"
S="http://127.0.0.1:$static_port"
GS="http://127.0.0.1:$gw_port/jolokia/targets"
NS="http://127.0.0.1:$static_proxy_port"
F="http://127.0.0.1:$floor_port"
compare static "POST read" POST "$read_body" "$S/jolokia" "$GS/static" "$NS/jolokia" "$F/jolokia"
compare static "POST bulk of 10" POST "$bulk_body" "$S/bulk" "$GS/static-bulk" "$NS/bulk" "$F/bulk"

rss_small_kb=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")
# The large agent's list: the gateway answers from its shared cache after
# a cheap revalidation, every client's answer pointing at the same copy.
# The JVM needs seconds per answer: one round of longer runs, a longer
# timeout, and a pause after each run for the answers still being computed.
saved=("$duration" "$connections" "$rounds"); duration="${big_seconds}s"; connections=8; rounds=1; wrk_timeout=60s; pause="$big_seconds"
echo "==> JVM agent with 6000 MBeans, 10 MB list answers (wrk -c$connections -d$duration)"
compare agent "POST full list, 6000 MBeans (10 MB)" POST "$list_body" \
    "http://127.0.0.1:$big_port/jolokia" "$GS/big" "http://127.0.0.1:$big_proxy_port/jolokia"
duration="${saved[0]}"; connections="${saved[1]}"; rounds="${saved[2]}"; unset wrk_timeout pause
rss_shared_kb=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")
echo "==> static backend, 10 MB list answers (wrk -c$connections)"
compare static "POST list, 10 MB answer" POST "$list_body" "$S/biglist" "$GS/static-biglist" "$NS/biglist"
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")

# Fan-out: 1000 items over 50 targets; target i's group includes one exec
# of sleep(delay_i), delays 10 ms .. 500 ms, so the slowest agent answers
# after 500 ms. Concurrent dispatch finishes near 500 ms; sequential would
# take the sum (12.75 s).
echo "==> fan-out: 1000 items over 50 targets"
python3 - "$work/fanout.json" <<'PY'
import json, sys
items = []
for i in range(50):
    t = {"url": "fan-%02d" % i}
    delay = 10 + i * 10
    items.append({"type": "exec", "mbean": "jmxgate.test:type=Operations", "operation": "sleep", "arguments": [delay], "target": t})
    items += [{"type": "read", "mbean": "jmxgate.test:type=Types", "attribute": "Name", "target": t}] * 19
json.dump(items, open(sys.argv[1], "w"))
PY
fan_times=()
for _ in 1 2 3; do
    t=$(curl -s -o "$work/fanout.out" -w '%{time_total}' -H "Authorization: $auth" -H 'Content-Type: application/json' \
        --data-binary @"$work/fanout.json" "http://127.0.0.1:$gw_port/jolokia")
    fan_times+=("$t")
done
ok=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(sum(1 for r in a if r.get("status")==200), len(a))' "$work/fanout.out")
fan_best=$(printf '%s\n' "${fan_times[@]}" | sort -n | head -1)
echo "  answers with status 200: $ok; times: ${fan_times[*]} s"

# Prometheus: sequential scrapes (as Prometheus makes them), each timed;
# the CPU the gateway and the JVM spend per scrape.
scrape_rows="$work/scrapes.txt"
: >"$scrape_rows"
# scrape LABEL URL COUNT JVM_PID [AUTH]: mean seconds per scrape, gateway
# and JVM CPU ms per scrape, samples in the last answer.
scrape() {
    local i t total=0 g0 g1 j0 j1 samples
    local args=(-s -o "$work/scrape.out" -w '%{time_total}')
    [ -n "${5:-}" ] && args+=(-H "Authorization: $5")
    curl "${args[@]}" "$2" >/dev/null # plans, caches and the JIT warm up unmeasured
    curl "${args[@]}" "$2" >/dev/null
    g0=$(cpu_ticks "$gw_pid"); j0=$(cpu_ticks "$4")
    for i in $(seq 1 "$3"); do
        t=$(curl "${args[@]}" "$2")
        total=$(python3 -c "print($total + $t)")
    done
    g1=$(cpu_ticks "$gw_pid"); j1=$(cpu_ticks "$4")
    samples=$(grep -c '^[a-zA-Z_]' "$work/scrape.out" || true)
    printf '%s|%s|%s|%s|%s\n' "$1" "$(python3 -c "print($total / $3)")" \
        "$(( (g1 - g0) * 1000 / ticks_per_s / $3 ))" "$(( (j1 - j0) * 1000 / ticks_per_s / $3 ))" "$samples" >>"$scrape_rows"
    tail -1 "$scrape_rows"
}
echo "==> Prometheus: a JVM with about 5,000 values, 20 scrapes each way"
P="http://127.0.0.1:$gw_port/prometheus"
if [ ${#exporter_agent[@]} -gt 0 ]; then
    scrape "jmx_exporter /metrics (in the JVM)" "http://127.0.0.1:$exporter_port/metrics" 20 "$prom_pid"
fi
scrape "jmxgate /prometheus" "$P?target=prom&module=bench" 20 "$prom_pid" "$auth"
if [ ${#exporter_agent[@]} -gt 0 ]; then
    scrape "jmx_exporter /metrics (in the JVM)" "http://127.0.0.1:$exporter_port/metrics" 20 "$prom_pid"
fi
scrape "jmxgate /prometheus" "$P?target=prom&module=bench" 20 "$prom_pid" "$auth"
echo "==> Prometheus: 100 targets through one selector (default module), 5 scrapes"
scrape "jmxgate /prometheus?target=fleet-* (100 targets)" "$P?target=fleet-*" 5 "$agent_pid" "$auth"

if [ -n "$jolokia2_jar" ]; then
    A2="http://127.0.0.1:$agent2_port/jolokia"
    G2="http://127.0.0.1:$gw_port/jolokia/targets/agent2"
    N2="http://127.0.0.1:$agent2_proxy_port/jolokia"
    read2_path='/read/jmxgate.test:type=Types/Name'
    echo "==> Jolokia 2.6.0 agent: warming up (${warmup}s, fresh connections)"
    close_connection=1 wrk -t1 -c4 -d"${warmup}s" -s "$(close_connection=1 lua GET "")" "$A2$read2_path" >/dev/null 2>&1 || true
    saved=("$threads" "$connections")
    for clients in 1 16; do
        threads=1; connections=$clients
        [ "$clients" -gt 1 ] && threads=2
        echo "==> Jolokia 2.6.0 agent, $clients client(s)"
        compare agent2 "GET read, $clients client(s)" GET "" "$A2$read2_path" "$G2$read2_path" "$N2$read2_path"
        for round in $(seq 1 "$rounds"); do
            close_connection=1 measure agent2 "GET read, $clients client(s)" "agent2 directly, Connection: close" "$A2$read2_path" GET ""
        done
    done
    threads="${saved[0]}"; connections="${saved[1]}"
fi

python3 - "$results" "$rss_kb" "$fan_best" "$ok" "$duration" "$connections" "$threads" "$rss_small_kb" "$rss_shared_kb" "$rounds" "$workers" "$scrape_rows" >bench/results.md <<'PY'
import sys, datetime, platform, os, re
rss_kb, fan_best, ok, duration, conns, threads, rss_small_kb, rss_shared_kb, rounds = sys.argv[2:11]
def ms(t):  # wrk's 745.00us / 1.54ms / 5.42s
    n, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", t).groups()
    return float(n) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
def show(v):
    return f"{v * 1000:.0f}us" if v < 1 else f"{v:.2f}ms" if v < 1000 else f"{v / 1000:.2f}s"
runs = {}  # (backend, scenario) -> label -> [(rps, p50, p99)], in first-seen order
for line in open(sys.argv[1]):
    if line.strip():
        backend, scen, label, rps, p50, p99, cpu = line.strip().split("|")
        runs.setdefault((backend, scen), {}).setdefault(label, []).append(
            (float(rps), ms(p50), ms(p99), None if cpu == "-" else float(cpu)))
print(f"Measured {datetime.date.today()} on {os.cpu_count()} cores ({platform.machine()}), "
      f"wrk -t{threads} -c{conns} -d{duration}, the mean of {rounds} rounds in alternating order "
      f"(one round for the 6000-MBean agent) after a JVM warm-up; jmxgate with Basic auth, a policy and "
      f"{'the durable audit log' if os.environ.get('AUDIT', 'on') != 'off' else 'no audit log'}; "
      f"jmxgate and nginx with {sys.argv[11]} worker(s) each, a proxy's CPU being all its workers'.\n")
print("| backend | request | directly | jmxgate | nginx proxy_pass | jmxgate / nginx | CPU per request: jmxgate, nginx |")
print("|---|---|---|---|---|---|---|")
def mean(rs):
    if not rs:
        return None
    cpus = [r[3] for r in rs if r[3] is not None]
    return tuple(sum(r[i] for r in rs) / len(rs) for i in range(3)) + (sum(cpus) / len(cpus) if cpus else None,)
def cell(v):
    return f"{v[0]:,.0f} req/s, p50 {show(v[1])}, p99 {show(v[2])}" if v else "-"
for (backend, scen), by_label in runs.items():
    direct = mean(by_label.get(f"{backend} directly", []))
    gw = mean(by_label.get("jmxgate (auth+policy+audit)", []))
    ng = mean(by_label.get("nginx proxy_pass", []))
    ratio = f"{gw[0] / ng[0]:.2f}" if gw and ng and ng[0] else "-"
    cpu = f"{gw[3]:,.0f} us, {ng[3]:,.0f} us" if gw and ng and gw[3] is not None and ng[3] is not None else "-"
    name = {"agent": "JVM agent", "agent2": "Jolokia 2.6.0"}.get(backend, backend)
    print(f"| {name} | {scen} | {cell(direct)} | {cell(gw)} | {cell(ng)} | {ratio} | {cpu} |")
closes = [f"{scen}: {cell(mean(by_label[f'{backend} directly, Connection: close']))}"
          for (backend, scen), by_label in runs.items()
          if f"{backend} directly, Connection: close" in by_label]
if closes:
    print("\nJolokia 2.6.0 directly with a fresh connection per request (`Connection: close`), "
          "next to the keep-alive column above (where each answer stalls on a delayed ACK): "
          + "; ".join(closes) + ".")
floors = []
for (backend, scen), by_label in runs.items():
    fl, ng = mean(by_label.get("hyper pass-through", [])), mean(by_label.get("nginx proxy_pass", []))
    if fl and ng and ng[0]:
        floors.append(f"{scen}: {fl[0]:,.0f} req/s, {fl[0] / ng[0]:.2f} of nginx, "
                      + (f"{fl[3]:,.0f} us of CPU per request" if fl[3] is not None else "CPU not measured"))
if floors:
    print("\nFloor: a bare hyper pass-through that does no work (examples/passthrough.rs: same runtime, "
          "HTTP server and client as jmxgate; no auth, parsing, policy or audit) against the same static backend: "
          + "; ".join(floors) + ".")
print(f"\nGateway peak RSS: {int(rss_small_kb) / 1024:.0f} MiB before the 10 MB list answers, "
      f"{int(rss_shared_kb) / 1024:.0f} MiB after those of the large agent (shared cache), "
      f"{int(rss_kb) / 1024:.0f} MiB after those of the static backend (fetched in full every time).")
print(f"\nFan-out: a bulk of 1000 items over 50 targets whose slowest answers after 500 ms: "
      f"{float(fan_best) * 1000:.0f} ms ({float(fan_best) / 0.5:.2f} x the slowest agent's delay); "
      f"{ok.split()[0] if ' ' in ok else ok} items answered with status 200.")
scrapes = {}
for line in open(sys.argv[12]):
    if line.strip():
        label, secs, gw_ms, jvm_ms, samples = line.strip().split("|")
        scrapes.setdefault(label, []).append((float(secs), int(gw_ms), int(jvm_ms), int(samples)))
if scrapes:
    print("\nPrometheus scrapes, one after another as Prometheus makes them (the mean over the runs; "
          "CPU per scrape in the gateway and in the scraped JVM(s)):\n")
    print("| scrape | time per scrape | samples | gateway CPU per scrape | JVM CPU per scrape |")
    print("|---|---|---|---|---|")
    for label, rs in scrapes.items():
        n = len(rs)
        secs, gw, jvm = (sum(r[i] for r in rs) / n for i in range(3))
        gw_cell = "-" if label.startswith("jmx_exporter") else f"{gw:.0f} ms"
        print(f"| {label} | {secs * 1000:.0f} ms | {rs[-1][3]:,} | {gw_cell} | {jvm:.0f} ms |")
    ref = scrapes.get("jmx_exporter /metrics (in the JVM)")
    ours = scrapes.get("jmxgate /prometheus")
    if ref and ours:
        r = sum(x[0] for x in ref) / len(ref)
        o = sum(x[0] for x in ours) / len(ours)
        print(f"\nThrough the gateway a scrape of the 5,000-value JVM takes {o / r:.2f} x jmx_exporter's own "
              f"(same JVM, same rules file; its count includes client_java's own jvm_* samples).")
PY
echo
cat bench/results.md
