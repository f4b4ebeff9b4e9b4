#!/usr/bin/env bash
# Runs jmxgate's whole test suite on a fresh Debian machine with Rust:
# installs what is missing, checks formatting and lints, then runs every
# test (unit and integration, the latter against real Jolokia agents: the
# integration suites once with 1.7.1 agents, once with 2.6.0 agents).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

# A clean clone gains nothing from incremental caches, and they are most of
# a debug build's size: CI builds without them.
if [ -n "${CI:-}" ]; then
    export CARGO_INCREMENTAL=0
fi
# The linker dies with SIGBUS, not a message, when the disk fills up mid-link.
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt $((5 * 1024 * 1024)) ]; then
    echo "test: warning: only $((free_kb / 1024)) MB free here; the test build needs about 4 GB (more with incremental caches)" >&2
fi

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
# The layout's aims (docs/ARCHITECTURE.md, "The dependency rule").
echo "==> scripts/check-layout.py"
python3 scripts/check-layout.py
scripts/lint-deploy.sh
# The manual as a book; mdbook says WARN for what it builds around (a link
# it can't follow, a missing file), which fails here.
echo "==> mdbook build docs"
book_log=$(mdbook build docs 2>&1) || { echo "$book_log"; exit 1; }
echo "$book_log"
if grep -q "WARN\|ERROR" <<<"$book_log"; then
    echo "test: mdbook warned while building the manual (above)" >&2
    exit 1
fi
command -v cargo-nextest >/dev/null 2>&1 || {
    echo "==> installing cargo-nextest"
    cargo install cargo-nextest --locked --quiet
}
echo "==> cargo test --doc"
cargo test --doc --quiet
# Each test runs in its own process, so agents a test started never outlive it.
echo "==> cargo nextest run (agents: Jolokia 1.7.1)"
cargo nextest run --no-fail-fast 2>&1
# The integration suites again, their agents now Jolokia 2.6.0 JVM agents
# (but real_products, which runs both generations itself, and fleet's
# kubernetes_discovery and kubernetes_manifests, whose pods' agents are
# 1.7.1 on their own addresses, manual, whose demo picks its own, and
# cluster, whose agents are counting stand-ins).
jar="${JMXGATE_JOLOKIA2_DIR:-../shared/jolokia}/jolokia-agent-jvm-2.6.0.jar"
generations=(1.7.1)
if [ -f "$jar" ]; then
    generations+=(2.6.0)
    echo "==> cargo nextest run -E 'kind(test) & !binary(real_products) & !(binary(fleet) & test(/^kubernetes_(discovery|manifests)::/)) & !binary(manual) & !binary(cluster)' (agents: Jolokia 2.6.0)"
    JMXGATE_TEST_AGENT=2.6.0 cargo nextest run --no-fail-fast -E 'kind(test) & !binary(real_products) & !(binary(fleet) & test(/^kubernetes_(discovery|manifests)::/)) & !binary(manual) & !binary(cluster)' 2>&1
else
    echo "==> skipped: the integration suites against Jolokia 2.6.0 (no $jar)"
fi
# The suites that compare the gateway's answers with the agent's own, once
# more with every caller under a role with a policy (JMXGATE_TEST_ROLES,
# see tests/common/mod.rs): the role-filtered paths must answer the same.
compared='(binary(jolokia) & test(/^(protocol_through_gateway|fleet_fan_out|shared_answers_and_limits)::/)) | (binary(clients) & test(/^real_clients::/))'
for g in "${generations[@]}"; do
    echo "==> answer comparisons under a role with a policy (agents: Jolokia $g)"
    JMXGATE_TEST_ROLES=1 JMXGATE_TEST_AGENT="$g" cargo nextest run --no-fail-fast -E "$compared" 2>&1
done
