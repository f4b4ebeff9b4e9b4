#!/bin/sh
# Starts the test launcher (tests/agent/Launcher.java: a real Jolokia 1.7.1
# agent in embedded Jetty 9) as the container's main process.
#
#   AGENT_NAME   the --name value (jmxgate.test:type=Types Name)   [agent]
#   AGENT_PORT   the port it listens on, on every interface        [8778]
#   AGENT_HOME   where the image keeps classes/ and classpath.sh   [/opt/jolokia-agent]
# Extra arguments are passed to the launcher (e.g. --user U --password P).
#
# The launcher exits as soon as its standard input reaches end-of-file (the
# tests stop it that way). A container's stdin is /dev/null unless it runs
# with `docker run -i` / compose `stdin_open: true`, so the agent would exit
# right after start-up. Instead its stdin is a FIFO opened read-write
# (`<>`): on Linux that open succeeds at once, and as the process itself
# holds a write end, reading never sees end-of-file. Unlike
# `sleep infinity | java ...`, this needs no extra process and no shell
# left running: java is PID 1 (exec), receives `docker stop`'s SIGTERM
# itself and shuts down at once, and the image runs the same under
# docker run, compose and Kubernetes, whatever their stdin settings.
set -eu

home="${AGENT_HOME:-/opt/jolokia-agent}"
cp="$(sh "$home/classpath.sh")"
fifo="${TMPDIR:-/tmp}/jolokia-agent.stdin"
rm -f "$fifo"
mkfifo "$fifo"
exec java -Xmx64m -XX:+UseSerialGC -cp "$home/classes:$cp" Launcher \
    --port "${AGENT_PORT:-8778}" --host 0.0.0.0 --name "${AGENT_NAME:-agent}" "$@" <>"$fifo"
