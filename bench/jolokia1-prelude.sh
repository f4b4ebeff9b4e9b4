# Sourced by bench/real-products.sh and bench/otel-rules.sh (with $name set
# to the script's): the release build (or $JMXGATE_BIN), a work directory
# removed on exit with the processes started into $pids, free_port, and
# Jolokia 1.7.1 as a -javaagent jar at $work/jolokia1.jar (as
# tests/real_products builds it).
bin="${JMXGATE_BIN:-}"
if [ -z "$bin" ]; then
    echo "==> building (release)" >&2
    cargo build --release --quiet
    bin=target/release/jmxgate
fi

work="$(mktemp -d "/tmp/jmxgate-$name.XXXXXX")"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cp_v1="$(tests/agent/classpath.sh)"
mkdir -p "$work/agent"
javac -nowarn -d "$work/agent" -cp "$cp_v1" tests/agent/Jolokia1JvmAgent.java
printf 'Premain-Class: Jolokia1JvmAgent\nClass-Path: %s\n' "${cp_v1//:/ }" >"$work/manifest.txt"
jar --create --file "$work/jolokia1.jar" --manifest "$work/manifest.txt" -C "$work/agent" .
