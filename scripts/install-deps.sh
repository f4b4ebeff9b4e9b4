#!/usr/bin/env bash
# Installs what jmxgate's demo and tests need from Debian, only if missing:
# Java 17 and a real Jolokia 1.7.1 agent (jolokia-core in embedded Jetty 9).
set -euo pipefail

packages=(libjolokia-core-java libjetty9-java libservlet-api-java)
command -v javac >/dev/null 2>&1 || packages+=(openjdk-17-jdk-headless)

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
