#!/usr/bin/env python3
"""Import cycles between anvil's modules and between its folders, from the `crate::` and
`super::` paths its code names, and imports that run up the README's layer table.

Usage: python3 scripts/module_cycles.py [SRC_DIR] [--edges | --tree] [--layers README.md]

One node per module file (src/a/b.rs and src/a/b/mod.rs are `a::b`); an edge A -> B when A's
code (its `#[cfg(test)] mod tests` left out) names an item of B. Edges from a module to one of
its ancestors are not counted: a child reaching its parent's re-exports is the usual shape of a
Rust module tree, not a layering cycle. Prints every strongly connected component of more than
one module (a cycle), one per line, and with --edges the edges inside each. With --tree,
prints the module tree instead: one line per module, indented by depth, with the first line
of its `//!` documentation.

Folders: a folder of src/ (or a single file at its top, `slo.rs`) is one node; an edge between
two when a module of one names an item of the other. A loop between folders (report ->
campaign -> gather -> report) is a cycle even when no loop of files makes it. With --layers,
the layer table of README.md (the table after the `<!-- layers -->` line; each row names its
folders in its first cell, `app/`, `slo.rs`) is the written order: every folder of src/ must
stand in it, and no folder may import one on a row above its own.
"""

import re
import sys
from pathlib import Path


def module_of(src: Path, file: Path) -> str:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    if parts and parts[0] == "bin":
        return "bin::" + "::".join(parts[1:])
    return "::".join(parts) or "crate"


def code_of(text: str) -> str:
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*[;{]", text)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"//[^\n]*", "", text)
    return text


def paths_in(code: str):
    """Every `crate::…` / `super::…` path, with `{…}` groups expanded one level deep."""
    for m in re.finditer(r"\b(crate|super)((?:::\w+)*)::\{", code):
        depth, i = 1, m.end()
        start = i
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        inner = code[start : i - 1]
        level, item, items = 0, "", []
        for ch in inner:
            if ch == "{":
                level += 1
            elif ch == "}":
                level -= 1
            if ch == "," and level == 0:
                items.append(item)
                item = ""
            else:
                item += ch
        items.append(item)
        for it in items:
            head = re.match(r"\s*(\w+(?:::\w+)*)", it)
            if head:
                yield m.group(1), (m.group(2) + "::" + head.group(1)).strip(":").split("::")
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", code):
        yield m.group(1), m.group(2).strip(":").split("::")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_edges = "--edges" in sys.argv
    src = Path(args[0] if args else "src")
    files = sorted(p for p in src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    if "--tree" in sys.argv:
        names = set(modules)
        for name in list(names):
            parts = name.split("::")
            names.update("::".join(parts[:k]) for k in range(1, len(parts)))
        for name in sorted(names, key=lambda n: (n != "crate", n)):
            text = modules[name].read_text() if name in modules else ""
            doc = next((l[3:].strip() for l in text.splitlines() if l.startswith("//!")), "")
            if name == "bin":
                doc = "the three binaries: parse, run, exit code"
            depth = 0 if name == "crate" else name.count("::")
            leaf = name.split("::")[-1]
            print(f"{'  ' * depth}{leaf:<{max(1, 28 - 2 * depth)}} {doc}")
        return
    known = set(modules)
    edges = {m: set() for m in modules}
    for mod, file in modules.items():
        code = code_of(file.read_text())
        base = [] if mod == "crate" else mod.split("::")
        for root, segs in paths_in(code):
            # `super::x` in module a::b (file a/b.rs or a/b/mod.rs) is a::x
            path = list(segs) if root == "crate" else base[:-1] + segs
            # the longest known module the path starts with
            target = None
            for k in range(len(path), 0, -1):
                cand = "::".join(path[:k])
                if cand in known:
                    target = cand
                    break
            if target is None or target == mod:
                continue
            if mod.startswith(target + "::") or target == "crate":
                continue  # reaching an ancestor
            edges[mod].add(target)

    cycles = strongly_connected(edges)
    print(f"{len(modules)} modules, {sum(len(e) for e in edges.values())} edges, {len(cycles)} cycles")
    for c in sorted(cycles):
        print("cycle: " + " <-> ".join(c))
        if show_edges:
            for a in c:
                for b in sorted(edges[a] & set(c)):
                    print(f"    {a} -> {b}")

    folders = {m: folder_of(m) for m in modules if m != "crate"}
    fedges = {f: set() for f in folders.values()}
    via = {}
    for a, targets in edges.items():
        for b in targets:
            fa, fb = folders.get(a), folders.get(b)
            if fa and fb and fa != fb:
                fedges[fa].add(fb)
                via.setdefault((fa, fb), []).append(f"{a} -> {b}")
    fcycles = strongly_connected(fedges)
    print(
        f"{len(fedges)} folders, {sum(len(e) for e in fedges.values())} folder edges, "
        f"{len(fcycles)} folder cycles"
    )
    for c in sorted(fcycles):
        print("folder cycle: " + " <-> ".join(c))
        for a in c:
            for b in sorted(fedges[a] & set(c)):
                print(f"    {a} -> {b}: {', '.join(sorted(via[(a, b)])[:3])}")

    if "--layers" in sys.argv:
        readme = Path(sys.argv[sys.argv.index("--layers") + 1])
        rows = layer_rows(readme.read_text())
        row_of = {f: i for i, names in enumerate(rows) for f in names}
        unlisted = sorted(f for f in fedges if f not in row_of)
        stale = sorted(f for f in row_of if f not in fedges)
        upward = sorted(
            (a, b) for a, bs in fedges.items() for b in bs
            if a in row_of and b in row_of and row_of[b] < row_of[a]
        )
        print(
            f"{len(rows)} layers, {len(upward)} upward imports, {len(unlisted)} folders unlisted, "
            f"{len(stale)} listed folders absent"
        )
        for f in unlisted:
            print(f"unlisted: {f} (add it to the layer table of {readme})")
        for f in stale:
            print(f"absent: {f} is in the layer table of {readme} but not in src/")
        for a, b in upward:
            print(f"upward: {a} -> {b}: {', '.join(sorted(via[(a, b)])[:3])}")


def folder_of(module: str) -> str:
    """The top folder (or top-level file) of src/ a module lives in: `report::sections::x` is
    `report`, `slo` is `slo`, a binary is `bin`."""
    return module.split("::")[0]


def layer_rows(readme: str):
    """The folders each row of the README's layer table names, top row first."""
    lines = readme.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip() == "<!-- layers -->")
    rows, seen_header = [], False
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            if seen_header:
                break
            continue
        if not seen_header:
            seen_header = True  # the header row names the columns
            continue
        first = line.split("|")[1]
        names = [n[:-1] if n.endswith("/") else n[:-3] if n.endswith(".rs") else None
                 for n in re.findall(r"`([^`]+)`", first)]
        if names and all(names):
            rows.append(names)
    return rows


def strongly_connected(edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            sccs.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [c for c in sccs if len(c) > 1]


if __name__ == "__main__":
    main()
