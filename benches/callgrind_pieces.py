#!/usr/bin/env python3
"""Split a callgrind profile of `examples/instructions` into pieces.

Usage: callgrind_pieces.py PROFILE CALLS [BINARY]

PROFILE must be written with --compress-strings=no --compress-pos=no (and
--dump-line=yes, the default). Inlined code is attributed to its own source
line, so each instruction is charged to the Rust function whose body holds
that line: for the crate's own files, the nearest `fn` above the line; for the
standard library, its file. Prints instructions and locked instructions
(callgrind's Ge, "global bus events") per call for each piece, and every line
that executed a locked instruction. With BINARY, also lists each function that
executed instructions (profile written with --demangle=no) and the lock-prefixed
instructions its machine code holds (objdump), taken or not.
"""
import collections
import os
import re
import subprocess
import sys

FN = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+)?(?:unsafe\s+)?fn\s+(\w+)")
_fn_cache = {}


def enclosing_fn(path, line):
    if path not in _fn_cache:
        try:
            _fn_cache[path] = open(path).read().splitlines()
        except OSError:
            _fn_cache[path] = None
    lines = _fn_cache[path]
    if lines is None:
        return None
    for i in range(min(line, len(lines)) - 1, -1, -1):
        m = FN.match(lines[i])
        if m:
            return m.group(1)
    return "?"


def piece(path, line):
    if "/library/" in path:  # the standard library, by file
        return "std: " + path.split("/library/", 1)[1]
    if "/registry/src/" in path:  # a dependency, by crate and function
        crate_path = path.split("/registry/src/", 1)[1].split("/", 1)[1]
        return f"dep: {crate_path.split('/')[0]}: {enclosing_fn(path, line)}"
    if line == 0:
        return "(no source line: moves, spills)"
    name = enclosing_fn(path, line)
    short = os.path.relpath(path) if os.path.isabs(path) else path
    short = short.replace("examples/../", "")
    return f"{short}: {name}" if name else short


def main():
    profile, calls = sys.argv[1], int(sys.argv[2])
    events = None
    cost = collections.defaultdict(lambda: [0, 0])
    locked_lines = collections.Counter()
    fl = fi = fn = None
    skip = False
    fn_cost = collections.Counter()
    for raw in open(profile):
        s = raw.rstrip("\n")
        if not s:
            continue
        if s.startswith("events:"):
            events = s.split()[1:]
        elif s.startswith("fl="):
            fl, fi = s[3:], None
        elif s.startswith(("fi=", "fe=")):
            fi = s[3:]
        elif s.startswith("fn="):
            fi, fn = None, s[3:]
        elif s.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
        elif s[0].isdigit():
            if skip:
                skip = False
                continue
            parts = [int(x) for x in s.split()]
            f = fi or fl
            c = cost[(f, parts[0])]
            c[0] += parts[1]
            fn_cost[fn] += parts[1]
            if len(parts) > 2 and events and "Ge" in events:
                c[1] += parts[2]
                if parts[2]:
                    locked_lines[(f, parts[0])] += parts[2]
    pieces = collections.defaultdict(lambda: [0, 0])
    for (f, l), (ir, ge) in cost.items():
        p = pieces[piece(f, l)]
        p[0] += ir
        p[1] += ge
    total = sum(v[0] for v in pieces.values())
    total_ge = sum(v[1] for v in pieces.values())
    print(f"| piece | Ir/call | locked/call |")
    print(f"|---|---|---|")
    for name, (ir, ge) in sorted(pieces.items(), key=lambda kv: -kv[1][0]):
        if ir / calls >= 0.5 or ge:
            print(f"| {name} | {ir / calls:.1f} | {ge / calls:.2f} |")
    print(f"| total | {total / calls:.1f} | {total_ge / calls:.2f} |")
    for (f, l), ge in locked_lines.most_common():
        print(f"locked instruction at {piece(f, l)} (line {l}): {ge / calls:.2f}/call")

    if len(sys.argv) > 3:
        print()
        print("| function executed (self Ir/call) | instructions in its code | lock-prefixed |")
        print("|---|---|---|")
        for sym, ir in fn_cost.most_common():
            if not ir:
                continue
            asm = subprocess.run(
                ["objdump", "-d", "--no-show-raw-insn", f"--disassemble={sym}", sys.argv[3]],
                capture_output=True, text=True,
            ).stdout.splitlines()
            code = [a for a in asm if re.match(r"^\s+[0-9a-f]+:\t", a)]
            locked = [a.split("\t", 1)[1].strip() for a in code if re.search(r"\block\b|\txchg", a)]
            pretty = subprocess.run(["c++filt", "-p", sym], capture_output=True, text=True).stdout.strip() or sym
            pretty = re.sub(r"::h[0-9a-f]{16}$", "", pretty)
            print(f"| `{pretty}` ({ir / calls:.1f}) | {len(code)} | {len(locked)}: {'; '.join(f'`{l}`' for l in locked[:4])}{' ...' if len(locked) > 4 else ''} |")


if __name__ == "__main__":
    main()
