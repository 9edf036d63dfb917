#!/usr/bin/env python3
"""The dependency circles between the files of one source folder (default src/model).

A node is a source file `x.c` together with its header `x.h` (a header with no `.c` of its
own is a node by itself). A depends on B when A's `.c` or `.h` includes B's header, or when
A's object file uses a symbol that B's object file defines (a call, a table such as
ATTENTION_OPS). Prints every strongly connected component of more than one node, largest
first: a circle means no file of it can be read, built or changed without the others.

    scripts/include_graph.py [--folder src/model] [--objects build/CMakeFiles/tinylm_objects.dir]
                             [--edges]
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def nodes_of(folder):
    names = sorted(f for f in os.listdir(folder) if f.endswith((".c", ".h")))
    return sorted({os.path.splitext(f)[0] for f in names}), names


def include_edges(folder, names, nodes):
    edges = set()
    for f in names:
        text = open(os.path.join(folder, f), encoding="utf-8", errors="replace").read()
        a = os.path.splitext(f)[0]
        for inc in INCLUDE.findall(text):
            base = os.path.basename(inc)
            # "model/config.h" from inside src/model names the same file as "config.h"
            if inc != base and not inc.startswith(os.path.basename(os.path.normpath(folder)) + "/"):
                continue
            b = os.path.splitext(base)[0]
            if b in nodes and b != a:
                edges.add((a, b, "include"))
    return edges


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDRB":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def symbol_edges(folder, objects, nodes):
    defs, uses = {}, {}
    rel = os.path.normpath(folder)
    for n in nodes:
        obj = os.path.join(objects, rel, n + ".c.o")
        if os.path.exists(obj):
            d, u = symbols(obj)
            uses[n] = u
            for s in d:
                defs[s] = n
    edges = set()
    for a, used in uses.items():
        for s in used:
            b = defs.get(s)
            if b and b != a:
                edges.add((a, b, "symbol"))
    return edges


def sccs(nodes, adj):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(adj.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root), on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w), on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", default="src/model")
    ap.add_argument("--objects", default="build/CMakeFiles/tinylm_objects.dir",
                    help="where the folder's object files are (their symbols give the call edges)")
    ap.add_argument("--edges", action="store_true", help="also list the edges inside each circle")
    args = ap.parse_args()
    if not os.path.isdir(args.folder):
        sys.exit(f"include_graph: {args.folder}: no such folder")
    nodes, names = nodes_of(args.folder)
    edges = include_edges(args.folder, names, set(nodes))
    if os.path.isdir(args.objects):
        edges |= symbol_edges(args.folder, args.objects, nodes)
    else:
        print(f"include_graph: {args.objects}: no object files, include edges only", file=sys.stderr)
    adj = {}
    for a, b, _ in edges:
        adj.setdefault(a, set()).add(b)
    comps = sorted((c for c in sccs(nodes, adj) if len(c) > 1), key=len, reverse=True)
    print(f"{len(nodes)} files, {len(edges)} edges; largest circle: {len(comps[0]) if comps else 1} file(s)")
    for c in comps:
        print(f"  {len(c)}: {' '.join(c)}")
        if args.edges:
            inside = set(c)
            for a, b, kind in sorted(edges):
                if a in inside and b in inside:
                    print(f"      {a} -> {b} ({kind})")


if __name__ == "__main__":
    main()
