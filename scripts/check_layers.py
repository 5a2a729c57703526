#!/usr/bin/env python3
"""Checks that pg_dp's source tree is built in layers: folders import only the folders below them, and
no files import each other in a circle.

    python3 scripts/check_layers.py            # prints the import graph's summary, exits 1 on a violation

It reads each crate's `mod`, `use` and path lines (`crate::folder::file`, `super::file`): a file
imports a file when it names it. The layers, from the bottom up, are the LAYERS lists below; a folder
may import its own folder and the ones listed before it. Files at a crate's root (lib.rs, error.rs,
...) sit below every folder, except lib.rs, which sits above them all.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CRATES = {
    # the SQL layer (crate pg_dp), bottom to top; aggregates and releases are two rooms of the top floor
    "src": ["pg", "settings", "catalog", "protection", "query", "budget", "execution", ["aggregates", "releases"]],
    # the pure core (crate pg_dp_core), bottom to top
    "core/src": ["noise", "accounting", "mechanisms", "release"],
}


def rank_of(layers):
    ranks = {}
    for i, layer in enumerate(layers):
        for name in layer if isinstance(layer, list) else [layer]:
            ranks[name] = i
    return ranks


def files_of(src):
    out = {}
    for dirpath, _, names in os.walk(os.path.join(ROOT, src)):
        for n in names:
            if n.endswith(".rs"):
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, os.path.join(ROOT, src)).replace(os.sep, "/")
                out[rel] = full
    return out


def module_of(rel):
    """('folder', 'file') of a source file: ('', 'lib') for lib.rs, ('query', 'mod') for a folder's mod.rs."""
    parts = rel[:-3].split("/")
    if len(parts) == 1:
        return "", parts[0]
    return parts[0], parts[1]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def imports(rel, text, modules):
    """The files `rel` names: crate::folder::file, crate::file (root files), super::file (its folder)."""
    folder, _ = module_of(rel)
    code = strip_comments(text)
    found = set()
    # use crate::{a, b::c} and use super::{a, b}: expand groups into paths
    for prefix, group in re.findall(r"\b(crate|super)::\{([^;]*?)\}", code, flags=re.S):
        for item in re.split(r",", group):
            item = item.strip()
            if item:
                code += f"\n{prefix}::{item}"
    folders = {m[0] for m in modules if m[0]}
    for a, b in re.findall(r"\$?crate::([a-z_0-9]+)(?:::([a-z_0-9]+))?", code):
        if (a, b) in modules:
            found.add((a, b))
        elif a in folders:
            found.add((a, "mod"))  # a name the folder's mod.rs re-exports
        elif ("", a) in modules:
            found.add(("", a))
    for a in re.findall(r"\bsuper::([a-z_0-9]+)", code):
        if (folder, a) in modules:
            found.add((folder, a))
    found.discard(module_of(rel))
    return found


def circles(graph):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def name(m):
    return f"{m[0]}/{m[1]}.rs" if m[0] else f"{m[1]}.rs"


def check(src, layers):
    ranks = rank_of(layers)
    files = files_of(src)
    modules = {module_of(rel): rel for rel in files}
    graph, upward = {}, []
    for rel, full in sorted(files.items()):
        me = module_of(rel)
        with open(full, encoding="utf-8") as f:
            deps = imports(rel, f.read(), modules)
        # a folder's mod.rs declares its files: not an import
        if me[1] == "mod":
            deps = {d for d in deps if d[0] != me[0]}
        if me == ("", "lib"):
            deps = set()  # the crate root declares every layer
        graph[me] = sorted(deps)
        for d in deps:
            mine = ranks.get(me[0], -1) if me[0] else -1
            theirs = ranks.get(d[0], -1) if d[0] else -1
            if me[0] and me[0] not in ranks:
                upward.append(f"{name(me)} is in folder {me[0]}, which is no layer")
            elif theirs > mine or (theirs == mine and d[0] != me[0]):
                upward.append(f"{name(me)} -> {name(d)}")
    rings = circles(graph)
    per_folder = {}
    for m in modules:
        if m[1] != "mod":
            per_folder[m[0] or "(root)"] = per_folder.get(m[0] or "(root)", 0) + 1
    arrows = sum(len(v) for v in graph.values())
    print(f"{src}: {len(modules)} files, {arrows} imports; files per folder: "
          + ", ".join(f"{k} {v}" for k, v in sorted(per_folder.items())))
    print(f"  upward or sideways imports: {len(upward)}")
    for u in upward:
        print(f"    {u}")
    print(f"  circles: {len(rings)}")
    for r in rings:
        print("    " + " <-> ".join(name(m) for m in r))
    return len(upward) + len(rings)


def main():
    bad = 0
    for src, layers in CRATES.items():
        bad += check(src, layers)
    print("layers: ok" if bad == 0 else f"layers: {bad} violation(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
