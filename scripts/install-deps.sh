#!/usr/bin/env bash
# Installs what jmxgate's demo and tests need, only if missing: from Debian,
# Java 17 and a real Jolokia 1.7.1 agent (jolokia-core in embedded Jetty 9),
# Chromium, rsyslog with its GnuTLS driver (the syslog collector of
# tests/audit/audit_syslog.rs), Prometheus (the scraper of tests/prometheus.rs) and
# Tomcat 10, ZooKeeper and ActiveMQ (with Jetty 9, the products of tests/real_products/);
# etcd (under the shared kube-apiserver of tests/fleet/kubernetes_discovery.rs)
# and kubectl (tests/fleet/kubernetes_manifests.rs applies docker/kubernetes/);
# the real Jolokia and MCP clients of tests/clients/ (npm ci there, and a
# Python venv with the PyPI clients); mdbook, for the manual in docs/.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libjolokia-core-java libjetty9-java libservlet-api-java chromium rsyslog rsyslog-gnutls prometheus etcd-server postgresql haproxy)
command -v javac >/dev/null 2>&1 || packages+=(openjdk-17-jdk-headless)
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
python3 -c 'import ensurepip' >/dev/null 2>&1 || packages+=(python3-venv)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The real products of tests/real_products/, each started by the test as a
# plain java process from the package's jars: Tomcat 10, ZooKeeper, ActiveMQ.
# Their services must not start (no systemd in a container; the tests run
# their own): a policy-rc.d that forbids every start, for this install only
# (an existing one is left as it is).
products=(tomcat10 zookeeper activemq)
missing=()
for p in "${products[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing Debian packages (services not started): ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        trap '$SUDO rm -f "$policy"' EXIT
        printf '#!/bin/sh\n# install-deps.sh: no service starts while it installs.\nexit 101\n' | $SUDO tee "$policy" >/dev/null
        $SUDO chmod 755 "$policy"
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ -n "$(trap -p EXIT)" ]; then
        $SUDO rm -f "$policy"
        trap - EXIT
    fi
fi

# npm ci in a client directory, as its package-lock.json says; again only
# when the lock file changes.
npm_ci() {
    if ! cmp -s "$1/package-lock.json" "$1/node_modules/.installed-lock.json"; then
        echo "==> npm ci in $1"
        (cd "$1" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
        cp "$1/package-lock.json" "$1/node_modules/.installed-lock.json"
    fi
}

# jolokia.js, @jolokia.js/simple and playwright-core, as locked; again
# whenever package-lock.json changes. (playwright-core fetches no browser:
# the tests drive Debian's Chromium.)
js=tests/clients/js
# playwright-core (the Chromium driver of the browser suite) needs Node 20+;
# Debian bookworm's own nodejs is 18.
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
    echo "install-deps: tests/clients/js needs Node.js 20 or later (playwright-core); found $(node --version 2>/dev/null || echo none)." >&2
    echo "install-deps: install a newer nodejs (Debian trixie's, or NodeSource's) and run this again." >&2
    exit 1
fi
npm_ci "$js"

# The official MCP TypeScript SDK of tests/mcp/mcp.rs, as locked
# (tests/clients/mcp/package.json); again whenever package-lock.json changes.
mcp=tests/clients/mcp
npm_ci "$mcp"

# A client directory's .venv, as its requirements.txt pins it; again only
# when requirements.txt changes.
venv_from() {
    if ! cmp -s "$1/requirements.txt" "$1/.venv/.installed-requirements.txt"; then
        echo "==> Python venv in $1/.venv"
        rm -rf "$1/.venv"
        python3 -m venv "$1/.venv"
        "$1/.venv/bin/pip" install -q --disable-pip-version-check -r "$1/requirements.txt"
        cp "$1/requirements.txt" "$1/.venv/.installed-requirements.txt"
    fi
}

# The Python clients (the Jolokia client and the official MCP SDK).
venv_from tests/clients/python
# FastMCP, in a venv of its own (its pins differ from the one above).
venv_from tests/clients/fastmcp
# A real OTLP/gRPC receiver (grpcio with the OpenTelemetry protos).
venv_from tests/clients/otlp-grpc

# Jolokia 2.x JVM agents (no Debian package): taken from ../shared/jolokia
# beside the repository, or JMXGATE_JOLOKIA2_DIR. Elsewhere download
# org.jolokia:jolokia-agent-jvm:<version>:javaagent from Maven Central into
# a directory and point JMXGATE_JOLOKIA2_DIR at it.
jolokia2="${JMXGATE_JOLOKIA2_DIR:-../shared/jolokia}"
for v in 2.6.0 2.6.1-SNAPSHOT; do
    jar="$jolokia2/jolokia-agent-jvm-$v.jar"
    if [ -f "$jar" ]; then
        echo "==> Jolokia $v agent: $jar"
    elif [ -n "${CI:-}" ]; then
        echo "install-deps: no Jolokia $v agent at $jar (CI needs ../shared/jolokia)" >&2
        exit 1
    else
        echo "==> no Jolokia $v agent at $jar: its tests will be skipped (set JMXGATE_JOLOKIA2_DIR)"
    fi
done

# jmx_exporter's Java agent, the reference tests/prometheus.rs compares
# the Prometheus door with: ../shared/prometheus beside the repository, or
# JMXGATE_JMX_EXPORTER_JAR (a released jmx_prometheus_javaagent jar serves).
exporter_jar="${JMXGATE_JMX_EXPORTER_JAR:-../shared/prometheus/jmx_prometheus_javaagent-1.6.0.jar}"
if [ -f "$exporter_jar" ]; then
    echo "==> jmx_exporter agent: $exporter_jar"
elif [ -n "${CI:-}" ]; then
    echo "install-deps: no jmx_exporter agent at $exporter_jar (CI needs ../shared/prometheus)" >&2
    exit 1
else
    echo "==> no jmx_exporter agent at $exporter_jar: the comparisons with it will be skipped (set JMXGATE_JMX_EXPORTER_JAR)"
fi

# The Hawtio console of tests/console/hawtio.rs: @hawtio/react with React,
# PatternFly 6 and react-router, esbuild and playwright-core, as locked
# (tests/clients/hawtio/package.json); again whenever package-lock.json
# changes. The bundle itself is built by the test (tests/clients/hawtio/build.mjs).
hawtio=tests/clients/hawtio
npm_ci "$hawtio"

# The OpenID Connect provider of the OIDC tests: panva's oidc-provider as
# locked (tests/clients/oidc/package.json); again whenever package-lock.json
# changes. The tests start tests/clients/oidc/provider.mjs themselves.
oidc=tests/clients/oidc
npm_ci "$oidc"

# mdbook, which builds the manual in docs/ as a book (scripts/test.sh builds
# it and fails on a warning). Not packaged by Debian: from crates.io, at the
# version the book was written for, without its preview server.
mdbook_version=0.5.4
if ! mdbook --version 2>/dev/null | grep -qx "mdbook v$mdbook_version"; then
    echo "==> installing mdbook $mdbook_version"
    cargo install mdbook --version "$mdbook_version" --locked --no-default-features --features search --quiet
fi
