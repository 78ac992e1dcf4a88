"""Resource usage of every CUDA kernel of the real sm_90 build, checked against the device's limits.

    python scripts/ptxas_check.py [--build-dir build/cmake-...-cuda] [--json out.json] [--jobs N]
                                  [--regs-table FILE]

It also reads the host side of every kernel object: nvcc compiles a host call of a __device__-only function
(one the launcher calls to size a launch, say) into a call of exit(1), which ends the process without a word at
run time; no host code of kernels/cuda may reach exit.

--regs-table writes "kernel<TAB>registers" lines, the table the GPU performance model of the emulated build
reads for occupancy (MYTORCH_EMU_PTXAS=FILE; Note [GPU performance model] in kernels/emu/trace.cpp).

Reads ptxas's report of every kernel from the cuda build itself: that flavour compiles with --resource-usage and
its compiler launcher (scripts/nvcc_usage.sh) keeps each file's report beside its object. Where a report is
missing or older than its object (a build made before the launcher), it takes that file's exact nvcc command from
the build's ninja file and compiles its device code only (-cubin for sm_90, --resource-usage). From the report:
registers, spill stores and loads, stack frame, static shared memory. It fails when a kernel breaks a limit of an
sm_90 device — more than 255 registers, more than 48 KiB of static shared memory — or spills (a spill is
local-memory traffic in the inner loop: a performance cliff that must be a decision, listed in ALLOWED_SPILLS with
why). A kernel's registers times its launch bound never pass the SM's 65,536: ptxas holds a kernel with
__launch_bounds__ to it (spilling instead, which fails here), and a kernel without one is launched with at most 256
threads (kThreads), which 255 registers fit.
Needs nvcc and a configured CUDA build (scripts/setup.sh makes one where nvcc is present).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_REGISTERS = 255
MAX_STATIC_SMEM = 48 * 1024
# Kernels allowed to spill, by a substring of their demangled name, with the reason.
ALLOWED_SPILLS: dict[str, str] = {
    "backward_kernel<double, float, 512": "fp64 LayerNorm backward, a block per row: a correctness path, not a fast one",
    "backward_kernel<double, double, 512": "fp64 LayerNorm backward, a block per row: a correctness path, not a fast one",
}

ENTRY = re.compile(r"Compiling entry function '([^']+)' for 'sm_\d+a?'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


def find_build_dir() -> str:
    dirs = sorted(glob.glob(os.path.join(ROOT, "build", "cmake-*-cuda")))
    if not dirs:
        sys.exit("no CUDA build found under build/ (run scripts/setup.sh on a machine with nvcc)")
    return dirs[-1]


def nvcc_commands(build_dir: str) -> dict[str, tuple[list[str], str]]:
    """Each kernels/cuda source's nvcc command (without the launchers) and its object's path."""
    text = subprocess.run(
        ["ninja", "-C", build_dir, "-t", "commands", "mytorch_kernels"], capture_output=True, text=True, check=True
    ).stdout
    cmds = {}
    for line in text.splitlines():
        if "nvcc" not in line or " -x cu " not in line:
            continue
        argv = shlex.split(line)
        argv = argv[argv.index(next(a for a in argv if a.endswith("nvcc"))) :]  # drop the launchers
        src = argv[argv.index("-c") + 1]
        cmds[src] = (argv, os.path.join(build_dir, argv[argv.index("-o") + 1]))
    return cmds


def build_report(obj: str) -> str | None:
    """The report the build's launcher kept for `obj`, if it is as new as the object."""
    usage = obj + ".usage"
    if os.path.exists(usage) and os.path.exists(obj) and os.path.getmtime(usage) >= os.path.getmtime(obj) - 1:
        with open(usage, errors="replace") as f:
            return f.read()
    return None


def device_only(argv: list[str], out: str) -> list[str]:
    keep, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
            continue
        if a in ("-MT", "-MF", "-o"):
            skip = 1
            continue
        if a in ("-MD", "-c") or a.startswith("--generate-code") or a.startswith("-gencode"):
            continue
        keep.append(a)
    return keep + ["-arch=sm_90", "-cubin", "--resource-usage", "-o", out]


def demangle(names: list[str]) -> dict[str, str]:
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return dict(zip(names, r.stdout.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def parse(report: str) -> list[dict]:
    kernels, cur = [], None
    for line in report.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = {"symbol": m.group(1), "registers": 0, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0}
            kernels.append(cur)
            continue
        if cur is None:
            continue
        m = PROPS.search(line)
        if m:
            cur["stack"], cur["spill_stores"], cur["spill_loads"] = (int(g) for g in m.groups())
        m = USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            cur["smem"] = int(m.group(2) or 0)
    return kernels


def host_exit_calls(objects: list[str]) -> list[str]:
    """The functions of these host objects that call exit: the stubs nvcc makes for __device__-only functions
    called from host code."""
    found = []
    for obj in objects:
        undefined = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, check=True).stdout.split()
        if "exit" not in undefined:
            continue  # no call of exit at all (the common case: nm is fast, a disassembly is not)
        text = subprocess.run(["objdump", "-dr", "-C", obj], capture_output=True, text=True, check=True).stdout
        current = "?"
        for line in text.splitlines():
            m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
            if m:
                current = m.group(1)
            elif re.search(r"R_X86_64_PLT32\s+exit-0x4", line):
                found.append(f"{os.path.basename(obj)}: {current}")
    return sorted(set(found))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", default="")
    p.add_argument("--json", default="")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--regs-table", default="", help="kernel<TAB>registers lines for MYTORCH_EMU_PTXAS")
    args = p.parse_args()
    build_dir = args.build_dir or find_build_dir()
    cmds = nvcc_commands(build_dir)
    if not cmds:
        sys.exit(f"no nvcc commands in {build_dir}")
    tmp = tempfile.mkdtemp(prefix="ptxas-")

    results = {src: parse(rep) for src, (_, obj) in cmds.items() if (rep := build_report(obj)) is not None}
    again = {src: argv for src, (argv, _) in sorted(cmds.items()) if src not in results}

    def run(item):
        src, argv = item
        out = os.path.join(tmp, os.path.basename(src) + ".cubin")
        r = subprocess.run(device_only(argv, out), capture_output=True, text=True, cwd=build_dir)
        return src, r

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for src, r in pool.map(run, again.items()):
            if r.returncode != 0:
                sys.exit(f"nvcc failed on {src}:\n{r.stderr[-3000:]}")
            results[src] = parse(r.stderr + r.stdout)
    print(f"reports of {len(cmds) - len(again)} files from the build, {len(again)} compiled again for their report")
    names = demangle([k["symbol"] for ks in results.values() for k in ks])
    problems, rows = [], []
    for src, ks in results.items():
        for k in ks:
            k["kernel"] = names.get(k["symbol"], k["symbol"])
            k["source"] = os.path.relpath(src, ROOT)
            where = f"{k['source']}: {k['kernel'][:120]}"
            if k["registers"] > MAX_REGISTERS:
                problems.append(f"{where}: {k['registers']} registers > {MAX_REGISTERS}")
            if k["smem"] > MAX_STATIC_SMEM:
                problems.append(f"{where}: {k['smem']} bytes of static shared memory > {MAX_STATIC_SMEM}")
            if (k["spill_stores"] or k["spill_loads"]) and not any(s in k["kernel"] for s in ALLOWED_SPILLS):
                problems.append(f"{where}: spills ({k['spill_stores']} bytes stored, {k['spill_loads']} loaded)")
            rows.append(k)
    rows.sort(key=lambda k: (-k["registers"], k["kernel"]))
    print(f"{len(rows)} kernels in {len(results)} files (sm_90); the ten with the most registers:")
    print(f"{'regs':>5} {'smem':>7} {'stack':>6} {'spill':>6}  kernel")
    for k in rows[:10]:
        print(
            f"{k['registers']:>5} {k['smem']:>7} {k['stack']:>6} {k['spill_stores']:>6}  {k['source']}: {k['kernel'][:100]}"
        )
    print(
        f"most registers {max(k['registers'] for k in rows)}, most static shared memory "
        f"{max(k['smem'] for k in rows)} bytes, kernels that spill: {sum(1 for k in rows if k['spill_stores'])}"
    )
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kernels": rows, "problems": problems}, f, indent=1)
    objects = sorted(glob.glob(os.path.join(build_dir, "CMakeFiles", "mytorch_kernels.dir", "kernels", "cuda", "*.o")))
    for stub in host_exit_calls(objects):
        problems.append(f"host code calls a __device__-only function (nvcc made it exit(1)): {stub}")
    print(f"host side of {len(objects)} kernel objects read for exit(1) stubs")
    if args.regs_table:
        with open(args.regs_table, "w") as f:
            f.writelines(f"{k['kernel']}\t{k['registers']}\n" for k in rows)
    if problems:
        print("\n".join(["FAILED:"] + problems))
        sys.exit(1)
    print("ok: every kernel is within the sm_90 limits")


if __name__ == "__main__":
    main()
