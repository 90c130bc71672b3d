#!/usr/bin/env python3
"""ptxas report gate (no GPU needed): compiles every kernels/cuda/*.cu for each architecture with
`-Xptxas -v` and fails on any spill, local memory or stack frame in a kernel, or on registers above
the kernel's limit. Prints one row per (kernel, architecture).

usage: ptxas_gate.py NVCC PROJECT_ROOT ARCH[,ARCH...] FILE.cu [FILE.cu ...]
"""
import re
import subprocess
import sys

# Registers per thread above which a kernel fails the gate: at 128 a 256-thread block still fits
# twice on an SM (64K registers); a kernel that needs more must say so here, with the reason.
DEFAULT_MAX_REGISTERS = 128
MAX_REGISTERS = {}

ENTRY = re.compile(r"Compiling entry function '(\S+)' for '(sm_\d+)'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
LMEM = re.compile(r"(\d+) bytes lmem")


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return names


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    nvcc, root, archs, files = argv[1], argv[2], argv[3].split(","), argv[4:]
    gencode = []
    for a in archs:
        gencode += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    rows, failures = [], []
    for f in files:
        cmd = [nvcc, "-std=c++17", "-c", "-o", "/dev/null", f"-I{root}", *gencode, "-Xptxas", "-v"]
        p = subprocess.run(cmd + [f], capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stdout + p.stderr, file=sys.stderr)
            failures.append(f"{f}: nvcc failed")
            continue
        kernel = arch = None
        stack = spills = lmem = 0
        for line in (p.stdout + p.stderr).splitlines():
            if m := ENTRY.search(line):
                kernel, arch = m.group(1), m.group(2)
                stack = spills = lmem = 0
            elif kernel and (m := PROPS.search(line)):
                stack, spills = int(m.group(1)), int(m.group(2)) + int(m.group(3))
            elif kernel and (m := USED.search(line)):
                if m2 := LMEM.search(line):
                    lmem = int(m2.group(1))
                rows.append((f.split("/")[-1], kernel, arch, int(m.group(1)), stack, spills, lmem))
                kernel = None
    if not rows and not failures:
        failures.append("no kernel found in " + " ".join(files))
    names = demangle([r[1] for r in rows])
    print(f"{'file':<18} {'arch':<6} {'regs':>4} {'stack':>5} {'spill':>5} {'lmem':>5}  kernel")
    for (fname, mangled, arch, regs, stack, spills, lmem), name in zip(rows, names):
        short = name.split("(")[0]
        limit = MAX_REGISTERS.get(short, DEFAULT_MAX_REGISTERS)
        print(f"{fname:<18} {arch:<6} {regs:>4} {stack:>5} {spills:>5} {lmem:>5}  {short}")
        if spills or lmem or stack:
            failures.append(f"{short} ({arch}): {spills} B spilled, {lmem} B local memory, {stack} B stack frame")
        if regs > limit:
            failures.append(f"{short} ({arch}): {regs} registers > limit {limit}")
    print(f"{len(rows)} kernel builds checked; {len(failures)} failures")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
