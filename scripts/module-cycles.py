#!/usr/bin/env python3
"""Lists groups of top-level modules of relay-server that import each other.

A group is a strongly connected component (more than one module) of the graph whose nodes are the
top-level modules declared in `crates/relay-server/src/lib.rs` and whose edges are `crate::X`
references (in `use crate::X`, `use crate::{X, ...}` and paths such as `crate::X::f()`) from a file
of one module to another. Prints nothing and exits 0 when there is none; prints one line per group
and exits 1 otherwise. Python 3 standard library only, so CI runs it without installs.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "crates" / "relay-server" / "src"
TEST_BLOCK = re.compile(r"^#\[cfg\(test\)\]\s*\n\s*mod tests\b", re.M)


def top_modules():
    text = (ROOT / "lib.rs").read_text()
    return re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M)


def module_of(path, mods):
    rel = path.relative_to(ROOT)
    first = rel.parts[0]
    name = first[:-3] if first.endswith(".rs") else first
    return name if name in mods else None


def references(text, mods):
    # Comments and test modules do not make a dependency of the shipped code.
    text = re.sub(r"//[^\n]*", "", text)
    cut = TEST_BLOCK.search(text)
    if cut:
        text = text[: cut.start()]
    found = set(re.findall(r"\bcrate::(\w+)", text))
    # `use crate::{a, b::{c, d}, ...}`: the first name of every entry at the top of the braces.
    for m in re.finditer(r"\bcrate::\{", text):
        depth, entry_start = 1, True
        for ch_index in range(m.end(), len(text)):
            ch = text[ch_index]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
            elif ch == "," and depth == 1:
                entry_start = True
            elif entry_start and depth == 1 and not ch.isspace():
                name = re.match(r"\w+", text[ch_index:])
                if name:
                    found.add(name.group(0))
                entry_start = False
    return {m for m in found if m in mods}


def components(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    mods = set(top_modules())
    edges = {}
    for path in ROOT.rglob("*.rs"):
        src = module_of(path, mods)
        if src is None:
            continue
        text = path.read_text()
        parts = path.relative_to(ROOT).parts
        if len(parts) == 1 or parts[1:] == ("mod.rs",):
            # In a top-level module's own file (`memory.rs`, `agent/mod.rs`), `super::` is the
            # crate root.
            text = re.sub(r"\bsuper::", "crate::", text)
        for dst in references(text, mods):
            if dst != src:
                edges.setdefault(src, set()).add(dst)
    groups = [g for g in components(mods, edges) if len(g) > 1]
    for g in sorted(groups):
        print("{" + ", ".join(g) + "}")
    return 1 if groups else 0


if __name__ == "__main__":
    sys.exit(main())
