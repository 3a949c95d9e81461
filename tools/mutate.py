#!/usr/bin/python3
"""Mutant schemata of the reference kernels (issue 20 item 5): every eligible site of the generic kernel
sources, mutated at once and selected at run time.

    /usr/bin/python3 tools/mutate.py --source-dir . --out build/release/mutants \
        --tu pact/kernels/cpu/reference.cpp -- <compile flags of the translation unit>

Parses the translation unit with libclang (Debian's python3-clang-14) and, in every file it includes
from pact/kernels/cpu/ whose name starts with generic_, rewrites each site

    operator swaps       a + b -> a - b, a * b -> a / b, a += b -> a -= b, && <-> ||
    comparison flips     a < b -> a <= b, a > b -> a >= b, a == b -> a != b (and back)
    off-by-one constants an integer literal n -> n + 1
    constant changes     a floating literal x -> 2x (0 -> 1)

as a schema, `(::pact_mut(ID) ? (MUTATED) : (ORIGINAL))`, nested sites rendered inside one another.
pact_mut (pact/verify/mutation.hpp) records that the site was reached and says whether mutant ID is the
active one, so the one build holds every mutant. Sites the compiler refuses in their mutated form
(constant expressions: template arguments, constexpr, static_assert) are found by compiling the schemata
with -fsyntax-only and dropped, and listed as such. Writes OUT/overlay/<path> for each rewritten file and
the translation unit, and OUT/mutants.json: per mutant its id, file, line, column, kind, original and
mutated text. Dropped statements are not generated (a void/expression schema would need the statement
form); the mutants are of the reference provider's source (the native SIMD variants are not mutated).
"""

import argparse
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
import clang.cindex as ci  # noqa: E402

ci.Config.set_library_file("/usr/lib/llvm-14/lib/libclang-14.so.1")

SWAPS = {"+": "-", "-": "+", "*": "/", "/": "*", "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=",
         "!=": "==", "&&": "||", "||": "&&", "+=": "-=", "-=": "+=", "*=": "/=", "/=": "*="}
KINDS = {"+": "operator", "-": "operator", "*": "operator", "/": "operator", "&&": "operator", "||": "operator",
         "+=": "operator", "-=": "operator", "*=": "operator", "/=": "operator"}


class Site:
    def __init__(self, path, lo, hi, line, col):
        self.path, self.lo, self.hi, self.line, self.col = path, lo, hi, line, col
        self.mutants = []  # (id, kind, original, mutated-template) where the template renders children


def collect(tu, wanted):
    """Sites in the wanted files: binary and compound-assignment operators, integer and float literals."""
    sites = {}
    texts = {p: open(p, "rb").read().decode() for p in wanted}

    def visit(c):
        loc = c.location
        path = os.path.realpath(loc.file.name) if loc.file else None
        if path in wanted:
            text = texts[path]
            lo, hi = c.extent.start.offset, c.extent.end.offset
            if c.extent.start.file and os.path.realpath(c.extent.start.file.name) == path and 0 <= lo < hi:
                if c.kind in (ci.CursorKind.BINARY_OPERATOR, ci.CursorKind.COMPOUND_ASSIGNMENT_OPERATOR):
                    kids = list(c.get_children())
                    if len(kids) == 2:
                        l_hi, r_lo = kids[0].extent.end.offset, kids[1].extent.start.offset
                        between = text[l_hi:r_lo]
                        op = between.strip()
                        if op in SWAPS and lo <= l_hi <= r_lo <= hi:
                            at = l_hi + between.index(op)
                            kind = KINDS.get(op, "comparison")
                            sites.setdefault((path, lo, hi), Site(path, lo, hi, loc.line, loc.column)).mutants.append(
                                ("op", kind, op, SWAPS[op], at, at + len(op)))
                elif c.kind == ci.CursorKind.INTEGER_LITERAL:
                    lit = text[lo:hi]
                    m = re.fullmatch(r"(\d+)([uUlL]*)", lit)
                    if m:
                        new = str(int(m.group(1)) + 1) + m.group(2)
                        sites.setdefault((path, lo, hi), Site(path, lo, hi, loc.line, loc.column)).mutants.append(
                            ("lit", "off_by_one", lit, new, lo, hi))
                elif c.kind == ci.CursorKind.FLOATING_LITERAL:
                    lit = text[lo:hi]
                    m = re.fullmatch(r"([0-9.]+(?:[eE][-+]?\d+)?)([fFlL]?)", lit)
                    if m:
                        v = float(m.group(1))
                        new = repr(2 * v if v != 0 else 1.0) + m.group(2)
                        sites.setdefault((path, lo, hi), Site(path, lo, hi, loc.line, loc.column)).mutants.append(
                            ("lit", "constant", lit, new, lo, hi))
        for k in c.get_children():
            visit(k)

    visit(tu.cursor)
    return list(sites.values()), texts


def render(text, sites, lo, hi, dropped, ids):
    """text[lo:hi] with every outermost kept site inside rendered as its schema."""
    inner = sorted((s for s in sites if lo <= s.lo and s.hi <= hi and (s.lo, s.hi) != (lo, hi)),
                   key=lambda s: (s.lo, -s.hi))
    out, at = [], lo
    for s in inner:
        if s.lo < at:
            continue  # nested in a site already rendered
        out.append(text[at:s.lo])
        out.append(schema(text, sites, s, dropped, ids))
        at = s.hi
    out.append(text[at:hi])
    return "".join(out)


def schema(text, sites, s, dropped, ids):
    original = render(text, sites, s.lo, s.hi, dropped, ids)
    expr = "(" + original + ")"
    for (form, kind, before, after, a, b) in s.mutants:
        key = (s.path, a, b, after)
        if key in dropped:
            continue
        mid = ids[key]
        mutated = render(text, sites, s.lo, a, dropped, ids) + after + render(text, sites, b, s.hi, dropped, ids)
        expr = "(::pact_mut(%d) ? (%s) : %s)" % (mid, mutated, expr)
    return expr


def write(out_dir, source_dir, tu_path, sites, texts, dropped, ids):
    written = {}
    for path, text in texts.items():
        rel = os.path.relpath(path, source_dir)
        here = [s for s in sites if s.path == path]
        body = render(text, here, 0, len(text), dropped, ids)
        dest = os.path.join(out_dir, "overlay", rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(body)
        written[path] = dest
    rel = os.path.relpath(tu_path, source_dir)
    dest = os.path.join(out_dir, "overlay", rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(tu_path) as f, open(dest, "w") as g:
        g.write('#include "pact/verify/mutation.hpp"\n' + f.read())
    return written, dest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tu", required=True)
    ap.add_argument("--compiler", default="g++")
    ap.add_argument("flags", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    flags = [f for f in a.flags if f != "--"]
    source_dir = os.path.realpath(a.source_dir)
    tu_path = os.path.realpath(os.path.join(source_dir, a.tu))
    kernel_dir = os.path.join(source_dir, "pact", "kernels", "cpu")
    wanted = {os.path.join(kernel_dir, n) for n in os.listdir(kernel_dir) if n.startswith("generic_")}
    index = ci.Index.create()
    tu = index.parse(tu_path, args=["-x", "c++"] + [f for f in flags if not f.startswith("-W")])
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        sys.exit("libclang could not parse %s: %s" % (tu_path, errors[0]))
    sites, texts = collect(tu, wanted)
    ids, n = {}, 0
    for s in sorted(sites, key=lambda s: (s.path, s.lo, -s.hi)):
        for (form, kind, before, after, lo, hi) in s.mutants:
            n += 1
            ids[(s.path, lo, hi, after)] = n
    dropped = {}
    overlay_root = os.path.join(a.out, "overlay")
    for attempt in range(12):
        written, tu_out = write(a.out, source_dir, tu_path, sites, texts, dropped, ids)
        cmd = [a.compiler, "-fsyntax-only", "-I" + overlay_root] + flags + [tu_out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            break
        # Each error names a line of a rewritten file; the schemata on it (or, for an error inside a schema
        # that spans lines, on the nearest line above that has one) are the mutants to drop.
        rewritten = {os.path.realpath(v): open(v).read().split("\n") for v in list(written.values()) + [tu_out]}
        by_id = {v: k for k, v in ids.items()}
        found = set()
        for m in re.finditer(r"^(.*?):(\d+):\d+: error", r.stderr, re.M):
            lines = rewritten.get(os.path.realpath(m.group(1)))
            if lines is None:
                continue
            for at in range(int(m.group(2)) - 1, max(int(m.group(2)) - 12, -1), -1):
                hits = [int(x) for x in re.findall(r"pact_mut\((\d+)\)", lines[at])]
                if hits:
                    found.update(hits)
                    break
        if not found:
            sys.exit("the schemata do not compile, and no error names a mutated line:\n" + r.stderr[-4000:])
        for mid in found:
            dropped[by_id[mid]] = "does not compile mutated (a constant expression)"
    else:
        sys.exit("the schemata still do not compile after 12 rounds of dropping sites")
    mutants = []
    for s in sites:
        for (form, kind, before, after, lo, hi) in s.mutants:
            key = (s.path, lo, hi, after)
            row = {"id": ids[key], "file": os.path.relpath(s.path, source_dir), "line": s.line, "column": s.col,
                   "kind": kind, "original": before, "mutated": after}
            if key in dropped:
                row["dropped"] = dropped[key]
            mutants.append(row)
    mutants.sort(key=lambda r: r["id"])
    with open(os.path.join(a.out, "mutants.json"), "w") as f:
        json.dump({"schema": "pact.mutants.v1", "translation_unit": a.tu, "mutants": mutants}, f, indent=0)
    kept = sum(1 for m in mutants if "dropped" not in m)
    print("%d mutants at %d sites, %d dropped (constant expressions), %d kept" %
          (len(mutants), len(sites), len(mutants) - kept, kept))


if __name__ == "__main__":
    main()
