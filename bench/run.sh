#!/usr/bin/env bash
# Side-by-side load benchmark, one command: builds jmxgate, starts a real
# Jolokia agent and nginx, and measures in one run, with wrk:
#   (a) the agent directly, (b) through jmxgate, (c) through nginx proxy_pass
# for a GET read, a POST read, a 10-item bulk and a full list; then (b) and
# (c) again against a fast static backend (nginx answering a canned Jolokia
# response) to show the gateway's own cost without the JVM's limits; then
# `list` answers of about 10 MB, from a real agent with 6000 MBeans (which
# the gateway's shared cache revalidates) and from the static backend
# (fetched in full every time), with the gateway's peak RSS; then a fan-out
# bulk of 1000 items over 50 targets. jmxgate runs with Basic
# authentication, a restrictor policy and the durable audit log on.
#
# Writes bench/results.md (a markdown table) and prints it.
#   DURATION=10s CONNECTIONS=16 THREADS=2 bench/run.sh
#   AUDIT=off bench/run.sh      # the same without the audit log
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${DURATION:-10s}"
connections="${CONNECTIONS:-16}"
threads="${THREADS:-2}"

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
work="$(mktemp -d /tmp/jmxgate-bench.XXXXXX)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT

cp="$(tests/agent/classpath.sh)"
javac -nowarn -d "$work/classes" -cp "$cp" tests/agent/Launcher.java

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
agent_port=$(free_port); proxy_port=$(free_port); static_port=$(free_port); static_proxy_port=$(free_port)
big_port=$(free_port); big_proxy_port=$(free_port)
gw_port=$(free_port)

mkfifo "$work/agent.stdin"
sleep infinity >"$work/agent.stdin" & pids+=($!)
java -Xmx256m -XX:+UseParallelGC -cp "$work/classes:$cp" Launcher --port "$agent_port" --name bench \
    <"$work/agent.stdin" >"$work/agent.out" 2>"$work/agent.log" & pids+=($!)
for _ in $(seq 1 100); do grep -q READY "$work/agent.out" 2>/dev/null && break; sleep 0.2; done
grep -q READY "$work/agent.out" || { echo "agent did not start" >&2; exit 1; }
# A second agent for a large application: 6000 more MBeans, a list answer
# of about 10 MB.
java -Xmx1g -XX:+UseParallelGC -cp "$work/classes:$cp" Launcher --port "$big_port" --name big --many-mbeans 6000 \
    <"$work/agent.stdin" >"$work/big.out" 2>"$work/big.log" & pids+=($!)
for _ in $(seq 1 150); do grep -q READY "$work/big.out" 2>/dev/null && break; sleep 0.2; done
grep -q READY "$work/big.out" || { echo "the large agent did not start" >&2; exit 1; }

# nginx: a proxy to the agent, a static canned answer, and a proxy to that.
canned='{"request":{"type":"read","mbean":"java.lang:type=Memory","attribute":"HeapMemoryUsage"},"value":{"init":67108864,"committed":64880640,"max":64880640,"used":7527472},"timestamp":1795312410,"status":200}'
bulk_canned="[$(printf '%s,' $(for _ in $(seq 1 10); do echo "$canned"; done) | sed 's/,$//')]"
cat >"$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    upstream agent { server 127.0.0.1:$agent_port; keepalive 32; }
    upstream static { server 127.0.0.1:$static_port; keepalive 32; }
    upstream big { server 127.0.0.1:$big_port; keepalive 32; }
    server {
        listen 127.0.0.1:$proxy_port;
        location / { proxy_pass http://agent; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
    server {
        listen 127.0.0.1:$static_port;
        default_type application/json;
        location /bulk { return 200 '$bulk_canned'; }
        # POST is not allowed on a static file: fetch it by GET internally.
        location = /biglist { proxy_method GET; proxy_pass http://127.0.0.1:$static_port/biglist.json; }
        location = /biglist.json { root $work; default_type application/json; }
        location / { return 200 '$canned'; }
    }
    server {
        listen 127.0.0.1:$big_proxy_port;
        location / { proxy_pass http://big; proxy_http_version 1.1; proxy_set_header Connection ""; }
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
nginx -c "$work/nginx.conf"

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
} >"$work/gateway.toml"
target/release/jmxgate serve --config "$work/gateway.toml" 2>"$work/gateway.log" & gw_pid=$!; pids+=($gw_pid)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$gw_port/" && break; sleep 0.1; done

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
    } >"$f"
    echo "$f"
}

results="$work/rows.txt"
: >"$results"
# run LABEL SCENARIO URL METHOD BODY AUTH
run() {
    local script out rps p50 p99
    script=$(lua "$4" "$5" "${6:-}")
    # One request first: connection pools and credential caches warm up
    # outside the measurement.
    local warm=(-s -o /dev/null -X "$4" -H 'Content-Type: application/json')
    [ -n "${6:-}" ] && warm+=(-H "Authorization: $6")
    [ -n "$5" ] && warm+=(--data-binary "$5")
    curl "${warm[@]}" "$3" || true
    out=$(wrk -t"$threads" -c"$connections" -d"$duration" --timeout "${wrk_timeout:-2s}" --latency -s "$script" "$3" 2>&1)
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    if grep -q "Non-2xx" <<<"$out"; then
        echo "warning: $1 $2 had non-2xx answers" >&2
    fi
    printf '%s|%s|%s|%s|%s\n' "$2" "$1" "$rps" "$p50" "$p99" >>"$results"
    printf '  %-14s %-34s %10s req/s  p50 %-9s p99 %s\n' "$2" "$1" "$rps" "$p50" "$p99"
}

A="http://127.0.0.1:$agent_port/jolokia"
G="http://127.0.0.1:$gw_port/jolokia/targets/agent"
N="http://127.0.0.1:$proxy_port/jolokia"
echo "==> JVM agent backend (wrk -t$threads -c$connections -d$duration)"
for scenario in "GET read" "POST read" "POST bulk of 10" "POST full list"; do
    case "$scenario" in
        "GET read") m=GET; body=""; suffix="$read_path" ;;
        "POST read") m=POST; body="$read_body"; suffix="" ;;
        "POST bulk of 10") m=POST; body="$bulk_body"; suffix="" ;;
        "POST full list") m=POST; body="$list_body"; suffix="" ;;
    esac
    run "agent directly" "$scenario" "$A$suffix" "$m" "$body"
    run "jmxgate (auth+policy+audit)" "$scenario" "$G$suffix" "$m" "$body" "$auth"
    run "nginx proxy_pass" "$scenario" "$N$suffix" "$m" "$body"
done

# Moderate load: two clients, each waiting for its answer; what a request
# costs in latency when the machine is not saturated.
echo "==> JVM agent backend, moderate load (wrk -t1 -c2)"
saved=("$threads" "$connections"); threads=1; connections=2
run "agent directly" "POST read, 2 clients" "$A" POST "$read_body"
run "jmxgate (auth+policy+audit)" "POST read, 2 clients" "$G" POST "$read_body" "$auth"
run "nginx proxy_pass" "POST read, 2 clients" "$N" POST "$read_body"
threads="${saved[0]}"; connections="${saved[1]}"

echo "==> static backend (nginx answering a canned response)"
run "static directly" "POST read" "http://127.0.0.1:$static_port/jolokia" POST "$read_body"
run "jmxgate (auth+policy+audit)" "POST read" "http://127.0.0.1:$gw_port/jolokia/targets/static" POST "$read_body" "$auth"
run "nginx proxy_pass" "POST read" "http://127.0.0.1:$static_proxy_port/jolokia" POST "$read_body"
run "static directly" "POST bulk of 10" "http://127.0.0.1:$static_port/bulk" POST "$bulk_body"
run "jmxgate (auth+policy+audit)" "POST bulk of 10" "http://127.0.0.1:$gw_port/jolokia/targets/static-bulk" POST "$bulk_body" "$auth"
run "nginx proxy_pass" "POST bulk of 10" "http://127.0.0.1:$static_proxy_port/bulk" POST "$bulk_body"

rss_small_kb=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")
# The large agent's list: the gateway answers from its shared cache after
# a cheap revalidation, every client's answer pointing at the same copy.
# The JVM needs seconds per answer: longer runs, a longer timeout, and a
# pause after each run for the answers still being computed.
saved=("$duration" "$connections"); duration=20s; connections=8; wrk_timeout=60s
echo "==> JVM agent with 6000 MBeans, 10 MB list answers (wrk -c$connections -d$duration)"
big="POST full list, 6000 MBeans (10 MB)"
run "agent directly" "$big" "http://127.0.0.1:$big_port/jolokia" POST "$list_body"; sleep 20
run "jmxgate (auth+policy+audit)" "$big" "http://127.0.0.1:$gw_port/jolokia/targets/big" POST "$list_body" "$auth"; sleep 20
run "nginx proxy_pass" "$big" "http://127.0.0.1:$big_proxy_port/jolokia" POST "$list_body"; sleep 20
duration="${saved[0]}"; connections="${saved[1]}"; unset wrk_timeout
rss_shared_kb=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")
echo "==> static backend, 10 MB list answers (wrk -c$connections)"
run "static directly" "POST list, 10 MB answer" "http://127.0.0.1:$static_port/biglist" POST "$list_body"
run "jmxgate (auth+policy+audit)" "POST list, 10 MB answer" "http://127.0.0.1:$gw_port/jolokia/targets/static-biglist" POST "$list_body" "$auth"
run "nginx proxy_pass" "POST list, 10 MB answer" "http://127.0.0.1:$static_proxy_port/biglist" POST "$list_body"
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

python3 - "$results" "$rss_kb" "$fan_best" "$ok" "$duration" "$connections" "$threads" "$rss_small_kb" "$rss_shared_kb" >bench/results.md <<'PY'
import sys, datetime, platform, os
rows = [l.strip().split("|") for l in open(sys.argv[1]) if l.strip()]
rss_kb, fan_best, ok, duration, conns, threads, rss_small_kb, rss_shared_kb = sys.argv[2:10]
print(f"Measured {datetime.date.today()} on {os.cpu_count()} cores ({platform.machine()}), one run, "
      f"wrk -t{threads} -c{conns} -d{duration}; jmxgate with Basic auth, a policy and "
      f"{'the durable audit log' if os.environ.get('AUDIT', 'on') != 'off' else 'no audit log'}.\n")
print("| backend | request | directly | jmxgate | nginx proxy_pass | jmxgate / nginx |")
print("|---|---|---|---|---|---|")
groups = []
for scen, label, rps, p50, p99 in rows:
    if label in ("agent directly", "static directly"):
        groups.append({"backend": "JVM agent" if label == "agent directly" else "static", "scen": scen})
    groups[-1][label] = (float(rps), p50, p99)
def cell(v):
    return f"{v[0]:,.0f} req/s, p50 {v[1]}, p99 {v[2]}" if v else "-"
for g in groups:
    direct = g.get("agent directly") or g.get("static directly")
    gw, ng = g.get("jmxgate (auth+policy+audit)"), g.get("nginx proxy_pass")
    ratio = f"{gw[0] / ng[0]:.2f}" if gw and ng and ng[0] else "-"
    print(f"| {g['backend']} | {g['scen']} | {cell(direct)} | {cell(gw)} | {cell(ng)} | {ratio} |")
print(f"\nGateway peak RSS: {int(rss_small_kb) / 1024:.0f} MiB before the 10 MB list answers, "
      f"{int(rss_shared_kb) / 1024:.0f} MiB after those of the large agent (shared cache), "
      f"{int(rss_kb) / 1024:.0f} MiB after those of the static backend (fetched in full every time).")
print(f"\nFan-out: a bulk of 1000 items over 50 targets whose slowest answers after 500 ms: "
      f"{float(fan_best) * 1000:.0f} ms ({float(fan_best) / 0.5:.2f} x the slowest agent's delay); "
      f"{ok.split()[0] if ' ' in ok else ok} items answered with status 200.")
PY
echo
cat bench/results.md
