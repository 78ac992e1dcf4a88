"""The emulated CUDA build's source rewrite (Note [CUDA emulation] in include/mytorch_emu/cuda.h).

    python rewrite_cu.py SRC.cu OUT.cpp

Turns the two constructs of CUDA C++ that a header cannot express into calls of the emulator, keeping every
line where it was (a `#line` directive names the original file, so diagnostics and fault reports point at it):

  kernel<T, 4><<<grid, block, shm, stream>>>(args)
      -> ::mytorch::emu::launcher(kernel<T, 4>, "kernel<T, 4>", "file.cu", LINE, grid, block, shm, stream)(args)
  extern __shared__ [__align__(N)] T name[];
      -> T* name = ::mytorch::emu::dynamic_shared<T>();
  __shared__ T name[A][B];
      -> auto& name = ::mytorch::emu::block_shared<T[A][B]>([] {});

Included .cuh files are rewritten the same way (the build rewrites every .cu and .cuh into one folder).
"""

import os
import re
import sys

EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>, ]+?)\s+(\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\]]+\])+)\s*;")


def _kernel_start(text: str, end: int) -> int:
    """Start of the kernel expression that ends just before `end` (an identifier, maybe qualified, maybe with
    template arguments)."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def rewrite(text: str, path: str) -> str:
    name = os.path.basename(path)
    text = EXTERN_SHARED.sub(
        lambda m: f"{m.group(1)}* {m.group(2)} = ::mytorch::emu::dynamic_shared<{m.group(1)}>();", text
    )
    text = STATIC_SHARED.sub(
        lambda m: f"auto& {m.group(2)} = ::mytorch::emu::block_shared<{m.group(1)}{m.group(3)}>([] {{}});", text
    )
    out = []
    pos = 0
    while True:
        lt = text.find("<<<", pos)
        if lt < 0:
            out.append(text[pos:])
            break
        gt = text.find(">>>", lt)
        if gt < 0:
            raise SystemExit(f"{path}: '<<<' without '>>>'")
        start = _kernel_start(text, lt)
        kernel = text[start:lt].strip()
        config = text[lt + 3 : gt].strip()
        line = text.count("\n", 0, lt) + 1
        if "\n" in text[start:gt]:
            raise SystemExit(f"{path}:{line}: a launch spread over several lines is not rewritten; keep it on one")
        out.append(text[pos:start])
        label = kernel.replace('"', "'")
        out.append(f'::mytorch::emu::launcher({kernel}, "{label}", "{name}", {line}, {config})')
        pos = gt + 3
    return f'#line 1 "{os.path.abspath(path)}"\n' + "".join(out)


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        result = rewrite(f.read(), src)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    tmp = dst + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(result)
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
