#!/usr/bin/env bash
# How long a Prometheus scrape of a real Tomcat takes through the gateway
# and a Jolokia 1.7.1 agent, next to jmx_exporter's own scrape of the same
# JVM (tests/real_products checks the answers; no test may time them on
# a busy CI machine, so the timing lives here). Debian's tomcat10 with
# jmx_exporter's agent (../shared/prometheus or JMXGATE_JMX_EXPORTER_JAR)
# and Jolokia 1.7.1 in embedded Jetty (tests/agent/Jolokia1JvmAgent.java)
# in one JVM, once with jmx_exporter's example tomcat.yml and once with no
# rules; SCRAPES scrapes each way, one after another and alternating, with
# `X-Prometheus-Scrape-Timeout-Seconds: 10` as Prometheus sends it.
# Prints the mean and worst time of each and the ratio gateway / jmx_exporter.
#   SCRAPES=20 bench/real-products.sh
#   JMXGATE_BIN=target/debug/jmxgate bench/real-products.sh   # no release build
set -euo pipefail
cd "$(dirname "$0")/.."

scrapes="${SCRAPES:-20}"
exporter_jar="${JMXGATE_JMX_EXPORTER_JAR:-../shared/prometheus/jmx_prometheus_javaagent-1.6.0.jar}"
rules_example="$(dirname "$exporter_jar")/examples/tomcat.yml"
for f in "$exporter_jar" "$rules_example" /usr/share/tomcat10/bin/bootstrap.jar; do
    [ -f "$f" ] || { echo "real-products: no $f (scripts/install-deps.sh, ../shared/prometheus)" >&2; exit 1; }
done
case "$scrapes" in
    '' | *[!0-9]* | 0) echo "real-products: SCRAPES must be a positive number, not '$scrapes'" >&2; exit 1 ;;
esac

name=real-products
# shellcheck source=bench/jolokia1-prelude.sh
. bench/jolokia1-prelude.sh

# mean and max of the seconds in a file, one a line
stats() { awk '{s+=$1; if ($1>m) m=$1} END {printf "%.3f %.3f\n", s/NR, m}' "$1"; }

run() { # name rules-file
    local name="$1" rules="$2" base="$work/run-$1"
    mkdir -p "$base"/{conf,logs,temp,work,webapps/ROOT}
    local tomcat_port exporter_port jolokia_port gw_port
    tomcat_port=$(free_port); exporter_port=$(free_port); jolokia_port=$(free_port); gw_port=$(free_port)
    printf '<Server port="-1" shutdown="SHUTDOWN"><Service name="Catalina"><Connector port="%s" address="127.0.0.1" protocol="HTTP/1.1"/><Engine name="Catalina" defaultHost="localhost"><Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false"/></Engine></Service></Server>\n' \
        "$tomcat_port" >"$base/conf/server.xml"
    cp /etc/tomcat10/web.xml "$base/conf/web.xml"
    echo '<p>jmxgate</p>' >"$base/webapps/ROOT/index.html"
    java -Xmx128m -XX:+UseSerialGC \
        "-javaagent:$exporter_jar=127.0.0.1:$exporter_port:$rules" \
        "-javaagent:$work/jolokia1.jar=port=$jolokia_port,host=127.0.0.1" \
        -Dcatalina.home=/usr/share/tomcat10 "-Dcatalina.base=$base" "-Djava.io.tmpdir=$base/temp" \
        -cp /usr/share/tomcat10/bin/bootstrap.jar:/usr/share/tomcat10/bin/tomcat-juli.jar \
        org.apache.catalina.startup.Bootstrap start >"$base/tomcat.log" 2>&1 &
    local tomcat_pid=$!; pids+=($tomcat_pid)
    cat >"$base/gateway.toml" <<TOML
[server]
listen = "127.0.0.1:$gw_port"
[[targets]]
name = "tomcat"
url = "http://127.0.0.1:$jolokia_port/jolokia"
[[prometheus.modules]]
name = "default"
rules_file = "$rules"
TOML
    "$bin" serve --config "$base/gateway.toml" 2>"$base/gateway.log" &
    local gw_pid=$!; pids+=($gw_pid)
    local up=
    for _ in $(seq 1 240); do
        if curl -sf -o /dev/null "http://127.0.0.1:$tomcat_port/" &&
            curl -sf -o /dev/null "http://127.0.0.1:$exporter_port/metrics" &&
            curl -sf -o /dev/null "http://127.0.0.1:$jolokia_port/jolokia/version" &&
            curl -s -o /dev/null "http://127.0.0.1:$gw_port/"; then
            up=1; break
        fi
        sleep 0.5
    done
    [ -n "$up" ] || { echo "real-products: Tomcat ($name) did not start in 120 s:" >&2; tail -20 "$base/tomcat.log" >&2; exit 1; }
    local gw_url="http://127.0.0.1:$gw_port/prometheus?target=tomcat"
    local ex_url="http://127.0.0.1:$exporter_port/metrics"
    scrape() { curl -s -o /dev/null -w '%{time_total}\n' -H 'X-Prometheus-Scrape-Timeout-Seconds: 10' "$1"; }
    for _ in 1 2 3; do scrape "$gw_url" >/dev/null; scrape "$ex_url" >/dev/null; done # warm-up
    : >"$base/gw.times"; : >"$base/ex.times"
    for i in $(seq 1 "$scrapes"); do
        if [ $((i % 2)) -eq 0 ]; then
            scrape "$gw_url" >>"$base/gw.times"; scrape "$ex_url" >>"$base/ex.times"
        else
            scrape "$ex_url" >>"$base/ex.times"; scrape "$gw_url" >>"$base/gw.times"
        fi
    done
    local errors
    errors=$(curl -s -H 'X-Prometheus-Scrape-Timeout-Seconds: 10' "$gw_url" | grep '^jmx_scrape_error' || true)
    read -r gw_mean gw_max < <(stats "$base/gw.times")
    read -r ex_mean ex_max < <(stats "$base/ex.times")
    printf '| %s | %s s (worst %s) | %s s (worst %s) | %.2f | %s |\n' "$name" "$ex_mean" "$ex_max" "$gw_mean" "$gw_max" \
        "$(awk -v a="$gw_mean" -v b="$ex_mean" 'BEGIN {print (b > 0 ? a / b : 0)}')" "$errors"
    kill "$gw_pid" "$tomcat_pid" 2>/dev/null || true
    wait "$gw_pid" "$tomcat_pid" 2>/dev/null || true
}

{ cat "$rules_example"; echo; echo 'excludeJvmMetrics: true'; } >"$work/tomcat.yml"
echo 'excludeJvmMetrics: true' >"$work/none.yml"
echo "Tomcat 10 ($(dpkg-query -W -f='${Version}' tomcat10)) through Jolokia 1.7.1, $scrapes scrapes each way, $(nproc) CPUs, $("$bin" --version 2>/dev/null || echo jmxgate):"
echo
echo '| rules | jmx_exporter /metrics | jmxgate /prometheus | gateway / jmx_exporter | gateway says |'
echo '|---|---|---|---|---|'
run tomcat.yml "$work/tomcat.yml"
run none "$work/none.yml"
