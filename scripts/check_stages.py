#!/usr/bin/env python3
"""Checks that every include runs down the stages, never up (docs/design.md §2).

The stages, lowest first, each a folder whose public headers lie in its include/ folder:
  model:  core < topology < layout < scenario < schedule < cost < strategy
  sim:    sees model
  exec:   program < measurement < backends < api, each sees model; never sim or study
  study:  sees model and sim; never exec
  cli, python: see everything
A source file may include the public headers of its own stage and of the stages below it (and the
private headers of its own folder). The CMake targets enforce the same order (a later stage's
include folder is not on an earlier one's path); this script names each offending include with its
file and line, so a reviewer sees it without a build.

    scripts/check_stages.py [ROOT]      # exit 1 and one line per offence when an include runs up
    scripts/check_stages.py --self-test # the checker finds an include planted upwards
"""
import os
import re
import sys
import tempfile

MODEL = ["core", "topology", "layout", "scenario", "schedule", "cost", "strategy"]
EXEC = ["program", "measurement", "backends", "api"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"(reshard/(model|exec|sim|study)/[^"]+)"')


def stage_of(path):
    """(area, level) of a source file by its folder; None for files the rule does not cover."""
    parts = path.replace(os.sep, "/").split("/")
    if parts[0] == "model" and len(parts) > 1 and parts[1] in MODEL:
        return ("model", MODEL.index(parts[1]))
    if parts[0] == "exec" and len(parts) > 1 and parts[1] in EXEC:
        return ("exec", EXEC.index(parts[1]))
    if parts[0] in ("sim", "study"):
        return (parts[0], 0)
    return None


def header_homes(root):
    """Public header include path -> (area, level) of the stage that owns it."""
    homes = {}
    for area, levels in (("model", MODEL), ("exec", EXEC)):
        for level, name in enumerate(levels):
            base = os.path.join(root, area, name, "include")
            for d, _, files in os.walk(base):
                for f in files:
                    homes[os.path.relpath(os.path.join(d, f), base).replace(os.sep, "/")] = (area, level)
    for area in ("sim", "study"):
        base = os.path.join(root, area, "include")
        for d, _, files in os.walk(base):
            for f in files:
                homes[os.path.relpath(os.path.join(d, f), base).replace(os.sep, "/")] = (area, 0)
    return homes


def allowed(src, dst):
    """Whether a file of stage `src` may include a header of stage `dst`."""
    (sa, sl), (da, dl) = src, dst
    if da == "model":
        return sa != "model" or dl <= sl
    if sa == "model":
        return False
    if sa == "exec":
        return da == "exec" and dl <= sl
    if sa == "sim":
        return da == "sim"
    if sa == "study":
        return da in ("sim", "study")
    return True


def offences(root):
    homes = header_homes(root)
    out = []
    for top in ("model", "exec", "sim", "study"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".hpp", ".h", ".cu")):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                src = stage_of(rel)
                if src is None:
                    continue
                with open(path, encoding="utf-8") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        dst = homes.get(m.group(1))
                        if dst is None:
                            out.append(f"{rel}:{lineno}: includes {m.group(1)}, a header no stage has")
                        elif not allowed(src, dst):
                            names = {"model": MODEL, "exec": EXEC}
                            s = src[0] + ("/" + names[src[0]][src[1]] if src[0] in names else "")
                            t = dst[0] + ("/" + names[dst[0]][dst[1]] if dst[0] in names else "")
                            out.append(f"{rel}:{lineno}: {s} includes {m.group(1)} of {t}, a later or unrelated stage")
    return out


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as fh:
                fh.write(text)
        write("model/core/include/reshard/model/units.hpp", "")
        write("model/cost/include/reshard/model/cost.hpp", '#include "reshard/model/units.hpp"\n')
        write("model/core/src/units.cpp", '#include "reshard/model/units.hpp"\n')
        write("sim/include/reshard/sim/sim.hpp", '#include "reshard/model/cost.hpp"\n')
        write("exec/program/include/reshard/exec/program.hpp", '#include "reshard/model/cost.hpp"\n')
        if offences(root):
            print("self-test: a clean tree reported offences:", offences(root))
            return 1
        write("model/core/src/bad.cpp", '#include "reshard/model/cost.hpp"\n')  # core -> cost: up
        write("exec/program/src/bad.cpp", '#include "reshard/sim/sim.hpp"\n')  # exec -> sim: unrelated
        found = offences(root)
        if len(found) != 2 or "model/core/src/bad.cpp:1" not in found[0] + found[1]:
            print("self-test: the planted includes were not both found:", found)
            return 1
    print("self-test: the checker finds an include that runs up a stage, and one into an unrelated stage")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = offences(root)
    for o in found:
        print(o)
    if found:
        print(f"{len(found)} include(s) run up the stages (docs/design.md §2)")
        return 1
    print("every include runs down the stages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
