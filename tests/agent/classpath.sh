#!/bin/sh
# Prints the classpath (colon-separated jars) needed to compile and run
# tests/agent/Launcher.java: Jolokia 1.7.1 core + embedded Jetty 9.4.
# Override the jar directory with JMXGATE_JAVA_DIR (default /usr/share/java).
# Exits 1 with a message naming the missing Debian package if a jar is absent.
dir="${JMXGATE_JAVA_DIR:-/usr/share/java}"
cp=""
missing=0
for entry in \
    jolokia-core:libjolokia-core-java \
    json-simple:libjson-simple-java \
    servlet-api:libservlet-api-java \
    jetty9-server:libjetty9-java \
    jetty9-servlet:libjetty9-java \
    jetty9-security:libjetty9-java \
    jetty9-http:libjetty9-java \
    jetty9-io:libjetty9-java \
    jetty9-util:libjetty9-java
do
    jar="${entry%%:*}"
    pkg="${entry#*:}"
    path="$dir/$jar.jar"
    if [ ! -r "$path" ]; then
        echo "classpath.sh: missing $path (install Debian package '$pkg': apt-get install -y $pkg)" >&2
        missing=1
        continue
    fi
    cp="${cp:+$cp:}$path"
done
[ "$missing" -eq 0 ] || exit 1
printf '%s\n' "$cp"
