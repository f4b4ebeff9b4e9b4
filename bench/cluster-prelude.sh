# Sourced by bench/cluster.sh and bench/cluster-otlp.sh: what both need
# before their Python half runs (nginx for the stand-ins, PostgreSQL for
# membership, the release build, descriptors for 100,000 targets).
command -v nginx >/dev/null || {
    echo "==> installing nginx-light"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
}
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || {
    echo "==> installing postgresql"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}
echo "==> building (release)"
cargo build --release --quiet
# 100,000 targets' probe connections need descriptors.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
