#!/usr/bin/env python3
"""The layout's aims (docs/ARCHITECTURE.md, "The dependency rule"), checked from the tree.

Each aim is a number read off src/ and a bound. An aim in PENDING is one the
house does not meet yet: it is reported, not failed, and once it is met the
check fails until it is taken out of PENDING, so a met aim stays met.

Usage: scripts/check-layout.py [SRC]   (exit 1 when an aim is broken)
"""
import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")

# The phases' folder holds phases only: a door or a job gets a room of its own.
PHASE_FOLDERS = {"authenticate", "authorize", "dispatch"}
# Aims not met yet (issue 56); none now.
PENDING = set()


def rust_files():
    for root, _, names in os.walk(SRC):
        for n in sorted(names):
            if n.endswith(".rs"):
                yield os.path.join(root, n)


def module_of(path):
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel) if rel not in (["lib"], ["main"]) else ()


def without_tests(text):
    """The file's text before its `#[cfg(test)] mod …` (tests sit at the end)."""
    return re.split(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod \w+", text)[0]


files = {p: open(p, encoding="utf-8").read() for p in rust_files()}
modules = {module_of(p): p for p in files}
results = []  # (aim, ok, detail)


def aim(name, ok, detail):
    results.append((name, ok, detail))


# 1. No door folder beside the phase folders.
pipeline = os.path.join(SRC, "pipeline")
strays = sorted(d for d in os.listdir(pipeline) if os.path.isdir(os.path.join(pipeline, d)) and d not in PHASE_FOLDERS)
aim("phases_apart", not strays, "folders in src/pipeline/ that are not phases: %s" % (", ".join(strays) or "none"))

# 2. The authorize facts and the audit caller each built in at most 2 places.
facts = sum(len(re.findall(r"\bRequestFacts\s*\{", without_tests(t))) for p, t in files.items())
who = sum(len(re.findall(r"\b(?:audit::)?Who\s*\{", without_tests(t))) for p, t in files.items()
          if not p.endswith(os.path.join("audit", "record.rs")))
aim("facts_and_callers", facts <= 2 and who <= 2, "RequestFacts built at %d places, audit::Who at %d (at most 2 each)" % (facts, who))

# 3. The gateway type's methods in at most 8 files.
impl_files = sorted(os.path.relpath(p, SRC) for p, t in files.items()
                    if re.search(r"^impl(?:<[^>]*>)? (?:[\w:]+::)?Gateway\b(?!\w)", without_tests(t), re.M))
aim("gateway_methods", len(impl_files) <= 8, "Gateway's methods in %d files (at most 8): %s" % (len(impl_files), ", ".join(impl_files)))

# 4. No file over 1,200 lines.
big = sorted("%s (%d)" % (os.path.relpath(p, SRC), t.count("\n")) for p, t in files.items() if t.count("\n") > 1200)
aim("file_size", not big, "files over 1,200 lines: %s" % (", ".join(big) or "none"))

# 5. No function over 150 lines (tests aside).
long = []
for p, t in files.items():
    if os.path.basename(p) == "tests.rs":
        continue
    lines = without_tests(t).split("\n")
    for n, line in enumerate(lines):
        f = re.match(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:const\s+)?fn\s+(\w+)", line)
        if f and not line.rstrip().endswith(";"):
            end = next((k for k in range(n + 1, len(lines)) if re.match(r"^%s\}\s*$" % f.group(1), lines[k])), None)
            if end is not None and end - n + 1 > 150:
                long.append("%s:%d %s (%d lines)" % (os.path.relpath(p, SRC), n + 1, f.group(2), end - n + 1))
aim("function_size", not long, "functions over 150 lines: %s" % ("; ".join(long) or "none"))

# 6. No circle between the top-level modules of src/.
edges = {m: set() for m in modules}


def resolve(path):
    for i in range(len(path), -1, -1):
        if tuple(path[:i]) in modules:
            return tuple(path[:i])
    return ()


for m, p in modules.items():
    text = without_tests(files[p])
    for g in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
        parts = g.group(2).strip(":").split("::")
        base = [] if g.group(1) == "crate" else list(m[:-1])
        while parts and parts[0] == "super":
            parts, base = parts[1:], base[:-1]
        target = resolve(base + parts)
        if target not in (m, ()):
            edges[m].add(target)
    for g in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+(crate|super)::\{([^;]*)\};", text, re.M):
        base = [] if g.group(1) == "crate" else list(m[:-1])
        for item in re.split(r",\s*", g.group(2)):
            parts = [re.sub(r"[{}\s].*", "", x) for x in item.strip().split("::") if x and x != "{"]
            target = resolve(base + parts)
            if target not in (m, ()):
                edges[m].add(target)
top = {}
for m, targets in edges.items():
    if m:
        top.setdefault(m[0], set()).update(t[0] for t in targets if t and t[0] != m[0])


def circles(graph):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


top_circles = circles(top)
aim("top_level_circles", not top_circles,
    "circles between top-level modules: %s" % ("; ".join(" <-> ".join(c) for c in top_circles) or "none"))

broken = False
for name, ok, detail in results:
    if name in PENDING:
        if ok:
            print("check-layout: %s is met now: take it out of PENDING in %s" % (name, __file__))
            broken = True
        else:
            print("check-layout: pending (issue 56) %s: %s" % (name, detail))
    elif ok:
        print("check-layout: ok %s" % name)
    else:
        print("check-layout: BROKEN %s: %s" % (name, detail))
        broken = True
sys.exit(1 if broken else 0)
