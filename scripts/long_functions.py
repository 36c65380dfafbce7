#!/usr/bin/env python3
"""Lists the C++ functions longer than --lines (120) in model/, sim/, exec/, study/, cli/ and python/,
and whether the comment block above each says why it stays whole ("Stays whole: ...").

    scripts/long_functions.py [--lines N] [--unexplained] [DIR...]

A brace-depth scan, not a parser: a function starts at a line that looks like a function header
ending in "{" (its signature may span lines) and ends where the depth returns. --unexplained lists
only the functions without the comment and exits 1 when there are any.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = re.compile(r"^\s*(?!if\b|for\b|while\b|switch\b|else\b|do\b|namespace\b|struct\b|class\b|enum\b|union\b|"
                    r"extern\b|catch\b|try\b|return\b)[^;{}()]*[\w:~<>\]\*&]+\s*\([^;]*\)\s*(const\s*)?(noexcept\s*)?"
                    r"(override\s*)?(->\s*[^{]+)?\{\s*$")


def code(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def explained(lines, start):
    i = start - 1
    while i >= 0 and lines[i].lstrip().startswith("//"):
        if "stays whole" in lines[i].lower():
            return True
        i -= 1
    return False


def long_functions(path, limit):
    lines = open(path, errors="replace").read().split("\n")
    depth, start, start_depth, name, pending = 0, None, 0, "", ""
    for i, raw in enumerate(lines):
        line = code(raw)
        if start is None:
            candidate = (pending + " " + line).strip() if pending else line
            if HEADER.match(candidate) and not re.match(r"^\s*(\}|#)", line):
                start, start_depth, name = i, depth, " ".join(candidate.split())[:100]
                header_start = i
                while header_start > 0 and pending and code(lines[header_start - 1]).strip() and \
                        not code(lines[header_start - 1]).rstrip().endswith((";", "}", "{")):
                    header_start -= 1
                start_comment = header_start
            pending = candidate if candidate.count("(") > candidate.count(")") and \
                not line.rstrip().endswith((";", "}")) else ""
        depth += line.count("{") - line.count("}")
        if start is not None and depth <= start_depth:
            n = i - start + 1
            if n > limit:
                yield n, start + 1, name, explained(lines, start_comment)
            start, pending = None, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=120)
    ap.add_argument("--unexplained", action="store_true")
    ap.add_argument("dirs", nargs="*", default=["model", "sim", "exec", "study", "cli", "python"])
    a = ap.parse_args()
    found = []
    for d in a.dirs:
        for folder, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp", ".cu", ".h")):
                    p = os.path.join(folder, f)
                    for n, line, name, why in long_functions(p, a.lines):
                        if not (a.unexplained and why):
                            found.append((n, os.path.relpath(p, ROOT), line, name, why))
    for n, p, line, name, why in sorted(found, reverse=True):
        print(f"{n:5d} {p}:{line} {'(stays whole) ' if why else ''}{name}")
    return 1 if a.unexplained and found else 0


if __name__ == "__main__":
    sys.exit(main())
