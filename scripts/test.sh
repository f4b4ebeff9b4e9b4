#!/usr/bin/env bash
# Runs jmxgate's whole test suite on a fresh Debian machine with Rust:
# installs what is missing, checks formatting and lints, then runs every
# test (unit and integration, the latter against real Jolokia agents).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
scripts/lint-deploy.sh
command -v cargo-nextest >/dev/null 2>&1 || {
    echo "==> installing cargo-nextest"
    cargo install cargo-nextest --locked --quiet
}
echo "==> cargo test --doc"
cargo test --doc --quiet
# Each test runs in its own process, so agents a test started never outlive it.
echo "==> cargo nextest run"
cargo nextest run --no-fail-fast 2>&1
