#!/usr/bin/env python3
"""Checks the layering of DESIGN.md §3: core <- comm <- zero <- runtime; launcher uses core only.

Two checks, both against the same rules (LAYERS below):
  includes   every #include "x/..." in core/, comm/, zero/, runtime/, launcher/ names a folder that
             the including folder may use, plus the finer rules inside comm/ and launcher/ that
             keep their libraries' links one-way (FINER below);
  links      the CMake target graph (cmake --graphviz, from a fresh configure of the tree in a
             temporary folder) links no library to one of a layer it may not use, has no cycle,
             and the launcher links no CUDA, NCCL or MPI.
A violation prints file:line (or target -> target), the forbidden edge and the allowed set;
exit status 1 then, 0 when clean, 2 for a usage or configure error.

  scripts/check_layering.py [--source DIR] [--includes-only] [--dot FILE] [-- CMAKE_ARGS...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Folder (layer) -> folders it may include and link. "ds" is the generated ds/config.h.
LAYERS = {
    "core": {"core", "ds"},
    "comm": {"core", "comm", "ds"},
    "zero": {"core", "comm", "zero", "ds"},
    "runtime": {"core", "comm", "zero", "runtime", "ds"},
    "launcher": {"core", "launcher", "ds"},
}

# Inside a layer, by path prefix of the including file: include prefixes it may not use, and why.
# These mirror the link order of the libraries in comm/CMakeLists.txt and launcher/CMakeLists.txt.
COMM_BACKENDS = ("comm/gloo/", "comm/mpi/", "comm/nccl/")
FINER = [
    # (applies to files matching, except files matching, forbidden include prefixes, reason,
    #  prefixes allowed even though a forbidden one matches)
    (r"^comm/store/", None, ("comm/",), "comm/store/ (ds_comm_store) sits under the rest of comm",
     ("comm/store/",)),
    (r"^comm/[^/]+$", r"^comm/(registry|bootstrap)\.(h|cc)$", COMM_BACKENDS,
     "ds_comm_base is below the backends; only registry.cc and bootstrap.cc (ds_comm) pick one",
     ()),
    (r"^comm/(gloo|mpi|nccl)/", None, ("comm/registry.h", "comm/bootstrap.h"),
     "backends are below ds_comm (registry, bootstrap)", ()),
    (r"^launcher/[^/]+$", r"^launcher/main\.cc$", ("launcher/agent/", "launcher/ssh/"),
     "the front end (ds_launcher) is below agent/ and ssh/ (but for ssh/ssh_config.h); only "
     "main.cc calls into them", ("launcher/ssh/ssh_config.h",)),
    (r"^launcher/ssh/ssh_config\.", None, ("launcher/",),
     "ssh/ssh_config (ds_launcher_ssh_config) is below the front end and the rest of ssh/",
     ("launcher/ssh/ssh_config.h",)),
]

# CMake targets -> layer. Targets not named here (tests, benchmarks, imported libraries) are free,
# except that no target of any layer may be in a cycle.
TARGET_LAYERS = [
    (r"^ds_core$", "core"),
    (r"^ds_comm($|_)", "comm"),
    (r"^ds_zero($|_)", "zero"),
    (r"^(ds_rt_.*|ds_runtime|dsrt)$", "runtime"),
    (r"^(ds_launcher.*|dsrun)$", "launcher"),
]
# Imported libraries the launcher may not link: a head node needs no CUDA, NCCL or MPI (or gloo).
LAUNCHER_FORBIDDEN_EXTERNAL = re.compile(r"^(CUDA::|MPI::|gloo$)|nccl", re.IGNORECASE)

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh", ".hpp", ".cpp")


def include_violations(source):
    found = []
    for layer in LAYERS:
        for root, _, files in os.walk(os.path.join(source, layer)):
            for name in sorted(files):
                if name.endswith(SOURCE_EXT):
                    path = os.path.join(root, name)
                    found += file_violations(path, os.path.relpath(path, source), layer)
    return found


def file_violations(path, rel, layer):
    found = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if not m or "/" not in m.group(1):
                continue
            target = m.group(1)
            top = target.split("/", 1)[0]
            if top not in LAYERS and top != "ds":
                continue  # a system or third-party header (fmt/, gloo/, yaml-cpp/, ...)
            if top not in LAYERS[layer]:
                found.append(f"{rel}:{lineno}: forbidden include {layer} -> {top} "
                             f"(#include \"{target}\"); {layer} may include "
                             f"{', '.join(sorted(LAYERS[layer]))} only")
                continue
            for applies, unless, forbidden, why, allowed in FINER:
                if not re.search(applies, rel) or (unless and re.search(unless, rel)):
                    continue
                if target.startswith(forbidden) and not target.startswith(allowed):
                    found.append(f"{rel}:{lineno}: forbidden include {rel} -> {target}: {why}")
    return found


def target_layer(name):
    for pattern, layer in TARGET_LAYERS:
        if re.search(pattern, name):
            return layer
    return None


def parse_dot(path):
    """Returns (edges as (from, to) target names) from a cmake --graphviz file."""
    labels, edges = {}, []
    node_re = re.compile(r'^\s*"([^"]+)"\s*\[\s*label\s*=\s*"([^"]*)"')
    edge_re = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = edge_re.match(line)
            if m:
                edges.append((m.group(1), m.group(2)))
                continue
            m = node_re.match(line)
            if m:
                labels[m.group(1)] = m.group(2)
    return [(labels.get(a, a), labels.get(b, b)) for a, b in edges]


def link_violations(edges):
    found = []
    for a, b in sorted(set(edges)):
        la, lb = target_layer(a), target_layer(b)
        if la is None:
            continue
        if lb is not None and lb not in LAYERS[la]:
            found.append(f"target {a} -> {b}: forbidden link {la} -> {lb}; {la} may link "
                         f"{', '.join(sorted(LAYERS[la] - {'ds'}))} only")
        if la == "launcher" and lb is None and LAUNCHER_FORBIDDEN_EXTERNAL.search(b):
            found.append(f"target {a} -> {b}: the launcher may not link CUDA, NCCL, MPI or gloo")
    return found + cycle_violations(edges)


def cycle_violations(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                found.append("link cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def configure_graph(source, cmake_args, workdir):
    dot = os.path.join(workdir, "targets.dot")
    cmd = ["cmake", "-S", source, "-B", os.path.join(workdir, "build"), f"--graphviz={dot}",
           "-DDS_BUILD_TESTS=OFF"] + cmake_args
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout)
        raise SystemExit(f"check_layering: configure for the link graph failed: {' '.join(cmd)}")
    return dot


def main():
    argv = sys.argv[1:]
    cmake_args = []
    if "--" in argv:
        cmake_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", default=os.path.join(os.path.dirname(__file__), ".."))
    p.add_argument("--includes-only", action="store_true", help="skip the link graph")
    p.add_argument("--dot", help="use this cmake --graphviz file instead of configuring")
    args = p.parse_args(argv)
    source = os.path.abspath(args.source)
    if not os.path.isfile(os.path.join(source, "core", "CMakeLists.txt")):
        p.error(f"{source} is not the dsrun source tree")

    problems = include_violations(source)
    checked = "includes"
    if not args.includes_only:
        with tempfile.TemporaryDirectory(prefix="ds-layering-") as tmp:
            dot = args.dot or configure_graph(source, cmake_args, tmp)
            edges = parse_dot(dot)
            if not any(target_layer(a) for a, _ in edges):
                raise SystemExit(f"check_layering: no dsrun target in {dot}")
            problems += link_violations(edges)
        checked = "includes and link graph"
    for line in problems:
        print(f"check_layering: {line}")
    if problems:
        print(f"check_layering: {len(problems)} violation(s) of DESIGN.md §3 "
              "(core <- comm <- zero <- runtime; launcher uses core only)")
        return 1
    print(f"check_layering: {checked} follow DESIGN.md §3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
