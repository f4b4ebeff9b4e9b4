#!/usr/bin/env bash
# The gateway's CPU per sample under OpenTelemetry's JMX rules, next to
# jmx_exporter's rules, on the same JVM in one run: Debian's tomcat10 with a
# Jolokia 1.7.1 agent (tests/agent/Jolokia1JvmAgent.java), one gateway with
# three modules: OpenTelemetry's shipped `tomcat` and `jvm` files, jmx_exporter's
# example tomcat.yml (../shared/prometheus), and jmx_exporter's no-rules default
# export. SCRAPES scrapes of each, in turn, one after another as Prometheus
# makes them; the gateway's CPU (utime+stime from /proc) is read around each.
# Prints, per module, the samples a scrape gives, the gateway's CPU per scrape
# and per sample, and each module's CPU per sample as a ratio of jmx_exporter's
# example's. (tests/real_products checks the answers; no test times them.)
#   SCRAPES=40 bench/otel-rules.sh
#   JMXGATE_BIN=target/debug/jmxgate bench/otel-rules.sh   # no release build
set -euo pipefail
cd "$(dirname "$0")/.."

scrapes="${SCRAPES:-40}"
exporter_dir="${JMXGATE_JMX_EXPORTER_DIR:-../shared/prometheus}"
rules_example="$exporter_dir/examples/tomcat.yml"
for f in "$rules_example" /usr/share/tomcat10/bin/bootstrap.jar; do
    [ -f "$f" ] || { echo "otel-rules: no $f (scripts/install-deps.sh, ../shared/prometheus)" >&2; exit 1; }
done
case "$scrapes" in
    '' | *[!0-9]* | 0) echo "otel-rules: SCRAPES must be a positive number, not '$scrapes'" >&2; exit 1 ;;
esac

name=otel-rules
# shellcheck source=bench/jolokia1-prelude.sh
. bench/jolokia1-prelude.sh

base="$work/tomcat"
mkdir -p "$base"/{conf,logs,temp,work,webapps/ROOT}
tomcat_port=$(free_port); jolokia_port=$(free_port); gw_port=$(free_port)
printf '<Server port="-1" shutdown="SHUTDOWN"><Service name="Catalina"><Connector port="%s" address="127.0.0.1" protocol="HTTP/1.1"/><Engine name="Catalina" defaultHost="localhost"><Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false"/></Engine></Service></Server>\n' \
    "$tomcat_port" >"$base/conf/server.xml"
cp /etc/tomcat10/web.xml "$base/conf/web.xml"
echo '<p>jmxgate</p>' >"$base/webapps/ROOT/index.html"
java -Xmx128m -XX:+UseSerialGC \
    "-javaagent:$work/jolokia1.jar=port=$jolokia_port,host=127.0.0.1" \
    -Dcatalina.home=/usr/share/tomcat10 "-Dcatalina.base=$base" "-Djava.io.tmpdir=$base/temp" \
    -cp /usr/share/tomcat10/bin/bootstrap.jar:/usr/share/tomcat10/bin/tomcat-juli.jar \
    org.apache.catalina.startup.Bootstrap start >"$base/tomcat.log" 2>&1 &
pids+=($!)

{ cat "$rules_example"; echo; echo 'excludeJvmMetrics: true'; } >"$work/tomcat.yml"
echo '{}' >"$work/none.yml"
cat >"$work/gateway.toml" <<TOML
[server]
listen = "127.0.0.1:$gw_port"
[[targets]]
name = "tomcat"
url = "http://127.0.0.1:$jolokia_port/jolokia"
[[prometheus.modules]]
name = "otel"
otel_rules = ["tomcat", "jvm"]
[[prometheus.modules]]
name = "jmx_exporter"
rules_file = "$work/tomcat.yml"
[[prometheus.modules]]
name = "default"
rules_file = "$work/none.yml"
TOML
"$bin" serve --config "$work/gateway.toml" 2>"$work/gateway.log" &
gw_pid=$!; pids+=($gw_pid)
up=
for _ in $(seq 1 240); do
    if curl -sf -o /dev/null "http://127.0.0.1:$tomcat_port/" &&
        curl -sf -o /dev/null "http://127.0.0.1:$jolokia_port/jolokia/version" &&
        curl -s -o /dev/null "http://127.0.0.1:$gw_port/"; then
        up=1; break
    fi
    sleep 0.5
done
[ -n "$up" ] || { echo "otel-rules: Tomcat did not start in 120 s:" >&2; tail -20 "$base/tomcat.log" >&2; exit 1; }

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$gw_pid/stat"; }
url() { echo "http://127.0.0.1:$gw_port/prometheus?target=tomcat&module=$1"; }
# One scrape: its samples (not the gateway's own families) into $work/$1.samples,
# the gateway's CPU ticks it took into $work/$1.ticks.
scrape() {
    local before after
    before=$(cpu)
    curl -s -H 'X-Prometheus-Scrape-Timeout-Seconds: 10' "$(url "$1")" >"$work/$1.last"
    after=$(cpu)
    echo $((after - before)) >>"$work/$1.ticks"
    grep -v '^#' "$work/$1.last" | grep -vc '^jmx_scrape_\|^jmxgate_scrape_' >>"$work/$1.samples"
}
modules=(otel jmx_exporter default)
for m in "${modules[@]}"; do for _ in 1 2 3; do scrape "$m"; done; : >"$work/$m.ticks"; : >"$work/$m.samples"; done # warm-up
for i in $(seq 1 "$scrapes"); do
    # Each module first in turn.
    for k in 0 1 2; do scrape "${modules[$(((i + k) % 3))]}"; done
done
for m in "${modules[@]}"; do
    if grep -q '^jmx_scrape_error{target="tomcat"} 1' "$work/$m.last"; then
        echo "otel-rules: the $m module's scrape failed:" >&2; cat "$work/$m.last" >&2; exit 1
    fi
done
sum() { awk '{s+=$1} END {print s}' "$1"; }
ex_ticks=$(sum "$work/jmx_exporter.ticks"); ex_samples=$(sum "$work/jmx_exporter.samples")
echo "Tomcat 10 ($(dpkg-query -W -f='${Version}' tomcat10)) through Jolokia 1.7.1, $scrapes scrapes of each module, $(nproc) CPUs, $("$bin" --version 2>/dev/null || echo jmxgate):"
echo
echo '| module | samples per scrape | gateway CPU per scrape | gateway CPU per sample | per sample / jmx_exporter example |'
echo '|---|---:|---:|---:|---:|'
for m in "${modules[@]}"; do
    t=$(sum "$work/$m.ticks"); s=$(sum "$work/$m.samples")
    awk -v m="$m" -v t="$t" -v s="$s" -v n="$scrapes" -v hz="$ticks" -v et="$ex_ticks" -v es="$ex_samples" 'BEGIN {
        name = (m == "otel") ? "OpenTelemetry tomcat + jvm" : (m == "jmx_exporter") ? "jmx_exporter example tomcat.yml" : "jmx_exporter default export";
        per = t / hz / s * 1e6; anchor = et / hz / es * 1e6;
        printf "| %s | %.0f | %.1f ms | %.1f µs | %.2f |\n", name, s / n, t / hz / n * 1000, per, per / anchor }'
done
