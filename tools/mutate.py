#!/usr/bin/python3
"""Mutant schemata of the CPU kernels (issue 20 item 5): every eligible site of the kernel sources, mutated
at once and selected at run time.

    /usr/bin/python3 tools/mutate.py --source-dir . --out build/release/mutants \
        --tu pact/kernels/cpu/reference.cpp [--tu pact/kernels/cpu/native.cpp --tu .../vector_ops.cpp ...] -- <flags>

Parses each translation unit with libclang (Debian's python3-clang-14) and, in the unit itself and every
file it includes from pact/kernels/cpu/ named generic_*.inc, native_*.inc or gemm_ops.inc (a file two
units include is rewritten once), rewrites each site

    operator swaps       a + b -> a - b, a * b -> a / b, a += b -> a -= b, && <-> ||
    comparison flips     a < b -> a <= b, a > b -> a >= b, a == b -> a != b (and back)
    off-by-one constants an integer literal n -> n + 1
    constant changes     a floating literal x -> 2x (0 -> 1)
    dropped statements   a call, assignment or increment written as a statement of a block -> nothing

as a schema, `(::pact_mut(ID) ? (MUTATED) : (ORIGINAL))`, nested sites rendered inside one another.
pact_mut (pact/verify/mutation.hpp) records that the site was reached and says whether mutant ID is the
active one, so the one build holds every mutant. Sites the compiler refuses in their mutated form
(constant expressions: template arguments, constexpr, static_assert) are found by compiling the schemata
with -fsyntax-only and dropped, and listed as such. Writes OUT/overlay/<path> for each rewritten file and
translation unit, and OUT/mutants.json: per mutant its id, file, line, column, kind, original and mutated
text (a dropped statement's original is the statement, whitespace collapsed, and its mutated text empty).
The half provider is not mutated. The SIMD variants' translation units (vector_ops.cpp, gemm.cpp, conv_direct.cpp)
are rewritten like any other unit named with --tu: intrinsics take their operands as schemata too (all of
them compile so at -O3; a site the compiler refused mutated would be dropped like the constant expressions).
"""

import argparse
import json
import os
import re
import shutil
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


def collect(tu, wanted, sites, texts):
    """Adds the sites of `tu` in the wanted files (binary and compound-assignment operators, integer and
    float literals) to `sites`, keyed by extent: a file two translation units include is collected once."""
    for p in wanted:
        if p not in texts:
            texts[p] = open(p, "rb").read().decode()

    def add(path, lo, hi, line, col, mutant):
        site = sites.setdefault((path, lo, hi), Site(path, lo, hi, line, col))
        if mutant not in site.mutants:
            site.mutants.append(mutant)

    def visit(c, in_block):
        loc = c.location
        path = os.path.realpath(loc.file.name) if loc.file else None
        if path in wanted:
            text = texts[path]
            lo, hi = c.extent.start.offset, c.extent.end.offset
            if c.extent.start.file and os.path.realpath(c.extent.start.file.name) == path and 0 <= lo < hi:
                if in_block and droppable(c, text[lo:hi]) and written_as_statement(text, lo, hi):
                    shown = " ".join(text[lo:hi].split())
                    shown = shown if len(shown) <= 80 else shown[:77] + "..."
                    add(path, lo, hi, loc.line, loc.column, ("drop", "dropped_statement", shown, "", lo, hi))
                if c.kind in (ci.CursorKind.BINARY_OPERATOR, ci.CursorKind.COMPOUND_ASSIGNMENT_OPERATOR):
                    kids = list(c.get_children())
                    if len(kids) == 2:
                        l_hi, r_lo = kids[0].extent.end.offset, kids[1].extent.start.offset
                        between = text[l_hi:r_lo]
                        op = between.strip()
                        if op in SWAPS and lo <= l_hi <= r_lo <= hi:
                            at = l_hi + between.index(op)
                            kind = KINDS.get(op, "comparison")
                            add(path, lo, hi, loc.line, loc.column, ("op", kind, op, SWAPS[op], at, at + len(op)))
                elif c.kind == ci.CursorKind.INTEGER_LITERAL:
                    lit = text[lo:hi]
                    m = re.fullmatch(r"(\d+)([uUlL]*)", lit)
                    if m:
                        new = str(int(m.group(1)) + 1) + m.group(2)
                        add(path, lo, hi, loc.line, loc.column, ("lit", "off_by_one", lit, new, lo, hi))
                elif c.kind == ci.CursorKind.FLOATING_LITERAL:
                    lit = text[lo:hi]
                    m = re.fullmatch(r"([0-9.]+(?:[eE][-+]?\d+)?)([fFlL]?)", lit)
                    if m:
                        v = float(m.group(1))
                        new = repr(2 * v if v != 0 else 1.0) + m.group(2)
                        add(path, lo, hi, loc.line, loc.column, ("lit", "constant", lit, new, lo, hi))
        elif path is not None:
            return  # a header's declarations: the wanted .inc files are included by wanted files only
        block = c._kind_id == ci.CursorKind.COMPOUND_STMT.value  # .kind refuses kinds the bindings lack (OpenMP)
        for k in c.get_children():
            visit(k, block)

    visit(tu.cursor, False)


# The expression statements a dropped-statement mutant removes: calls, assignments and increments written
# as statements of a block (a for loop's step and a condition are not statements of a block).
ASSIGNMENTS = ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=")


def written_as_statement(text, lo, hi):
    """True when text[lo:hi] stands in the source as a statement of its own: `;` after it, and before it the
    end of another statement, a block's `{` or a label's `:`. A statement a macro expands to (its extent is
    the macro's invocation, or lies in its definition) fails this and is not dropped."""
    after = text[hi:].lstrip(" \t\n")
    before = text[max(0, lo - 4000):lo].rstrip(" \t\n")
    while True:  # comments between the previous statement and this one
        line_start = before.rfind("\n") + 1
        if "//" in before[line_start:]:
            before = before[:line_start + before[line_start:].index("//")].rstrip(" \t\n")
        elif before.endswith("*/") and "/*" in before:
            before = before[:before.rindex("/*")].rstrip(" \t\n")
        else:
            break
    return after.startswith(";") and before.endswith(("{", ";", "}", ":")) and not before.endswith("::")


def droppable(c, text):
    try:
        kind = c.kind
    except ValueError:  # a kind these bindings do not know (an OpenMP directive): not an expression
        return False
    if kind == ci.CursorKind.UNEXPOSED_EXPR:  # a call whose result is a temporary with a destructor
        kids = list(c.get_children())
        return len(kids) == 1 and kids[0].extent.start.offset == c.extent.start.offset and \
            kids[0].extent.end.offset == c.extent.end.offset and droppable(kids[0], text)
    if kind in (ci.CursorKind.CALL_EXPR, ci.CursorKind.COMPOUND_ASSIGNMENT_OPERATOR):
        return True
    if kind == ci.CursorKind.BINARY_OPERATOR:
        kids = list(c.get_children())
        if len(kids) != 2:
            return False
        at = kids[0].extent.end.offset - c.extent.start.offset
        to = kids[1].extent.start.offset - c.extent.start.offset
        return 0 <= at <= to and text[at:to].strip() in ASSIGNMENTS
    if kind == ci.CursorKind.UNARY_OPERATOR:
        return text.startswith(("++", "--")) or text.endswith(("++", "--"))
    return False


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
    # A dropped statement wraps the site's other schemata: `(::pact_mut(ID) ? (void)0 : (void)(...))`, an
    # expression of type void whatever the statement's type, so the schema stays an expression statement.
    for (form, kind, before, after, a, b) in sorted(s.mutants, key=lambda m: m[0] == "drop"):
        key = (s.path, a, b, after)
        if key in dropped:
            continue
        mid = ids[key]
        if form == "drop":
            expr = "(::pact_mut(%d) ? (void)0 : (void)%s)" % (mid, expr)
            continue
        mutated = render(text, sites, s.lo, a, dropped, ids) + after + render(text, sites, b, s.hi, dropped, ids)
        expr = "(::pact_mut(%d) ? (%s) : %s)" % (mid, mutated, expr)
    return expr


def write(out_dir, source_dir, tu_paths, sites, texts, dropped, ids):
    """Every rewritten file under OUT/overlay; each translation unit first includes the switch."""
    written = {}
    for path in sorted({s.path for s in sites} | set(tu_paths)):
        text = texts.get(path)
        if text is None:
            text = open(path).read()
        here = [s for s in sites if s.path == path]
        body = render(text, here, 0, len(text), dropped, ids)
        if path in tu_paths:
            body = '#include "pact/verify/mutation.hpp"\n' + body
        dest = os.path.join(out_dir, "overlay", os.path.relpath(path, source_dir))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(body)
        written[path] = dest
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tu", required=True, action="append", help="a translation unit to rewrite (repeatable)")
    ap.add_argument("--compiler", default="g++")
    ap.add_argument("flags", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    flags = [f for f in a.flags if f != "--"]
    source_dir = os.path.realpath(a.source_dir)
    tu_paths = [os.path.realpath(os.path.join(source_dir, t)) for t in a.tu]
    kernel_dir = os.path.join(source_dir, "pact", "kernels", "cpu")
    # The kernels' own sources: the generic kernels (reference and native), the native provider's includes
    # and the translation units themselves.
    wanted = {os.path.join(kernel_dir, n) for n in os.listdir(kernel_dir)
              if n.endswith(".inc") and (n.startswith("generic_") or n.startswith("native_") or n == "gemm_ops.inc")}
    wanted |= set(tu_paths)
    index = ci.Index.create()
    sites_by_key, texts = {}, {}
    for tu_path in tu_paths:
        tu = index.parse(tu_path, args=["-x", "c++"] + [f for f in flags if not f.startswith("-W")])
        errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
        if errors:
            sys.exit("libclang could not parse %s: %s" % (tu_path, errors[0]))
        collect(tu, wanted, sites_by_key, texts)
    sites = list(sites_by_key.values())
    ids, n = {}, 0
    for s in sorted(sites, key=lambda s: (s.path, s.lo, -s.hi)):
        for (form, kind, before, after, lo, hi) in s.mutants:
            n += 1
            ids[(s.path, lo, hi, after)] = n
    dropped = {}
    overlay_root = os.path.join(a.out, "overlay")
    shutil.rmtree(overlay_root, ignore_errors=True)  # no file of an earlier run may shadow a source
    # Dropping a mutant only restores original text, so a translation unit that compiles keeps compiling:
    # each round checks the ones that failed the round before.
    failing = list(tu_paths)
    for attempt in range(16):
        written = write(a.out, source_dir, tu_paths, sites, texts, dropped, ids)
        failures, still = [], []
        for tu_path in failing:
            cmd = [a.compiler, "-fsyntax-only", "-I" + overlay_root] + flags + [written[tu_path]]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(r.stderr)
                still.append(tu_path)
        failing = still
        if not failures:
            break
        stderr = "\n".join(failures)
        # Each error names a line of a rewritten file; the schemata on it (or, for an error inside a schema
        # that spans lines, on the nearest line above that has one) are the mutants to drop.
        rewritten = {os.path.realpath(v): open(v).read().split("\n") for v in written.values()}
        by_id = {v: k for k, v in ids.items()}
        found = set()
        for m in re.finditer(r"^(.*?):(\d+):\d+: error", stderr, re.M):
            lines = rewritten.get(os.path.realpath(m.group(1)))
            if lines is None:
                continue
            for at in range(int(m.group(2)) - 1, max(int(m.group(2)) - 12, -1), -1):
                hits = [int(x) for x in re.findall(r"pact_mut\((\d+)\)", lines[at])]
                if hits:
                    found.update(hits)
                    break
        if not found:
            sys.exit("the schemata do not compile, and no error names a mutated line:\n" + stderr[-4000:])
        for mid in found:
            dropped[by_id[mid]] = "does not compile mutated (a constant expression)"
    else:
        sys.exit("the schemata still do not compile after 16 rounds of dropping sites")
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
        json.dump({"schema": "pact.mutants.v1", "translation_units": a.tu, "mutants": mutants}, f, indent=0)
    kept = sum(1 for m in mutants if "dropped" not in m)
    print("%d mutants at %d sites, %d dropped (constant expressions), %d kept" %
          (len(mutants), len(sites), len(mutants) - kept, kept))


if __name__ == "__main__":
    main()
