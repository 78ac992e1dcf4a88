"""moe_unpermute (the moe_combine kernel) on wide rows, the receiving side of expert-parallel combine: 515 tokens x
8 slots over 3500 bfloat16 rows of 7168 (DeepSeek-V3's hidden size), one thread, against the CPU reference in the
same process through the harness's interleaved rounds (ratio = CPU time / mytorch time).

    python benchmarks/moe_combine_wide.py
"""

import statistics

import torch

import mytorch
from mytorch.testing.bench import measure


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(3500, 7168, generator=g).bfloat16()
    pos, w = torch.randint(0, 3500, (515, 8), generator=g), torch.rand(515, 8, generator=g)
    d = [t.to("mytorch") for t in (rows, pos, w)]
    calls = {
        "mytorch": (lambda: mytorch.ops.moe_unpermute(*d), torch.mytorch.synchronize),
        "cpu": (lambda: mytorch.ops.moe_unpermute(rows, pos, w), lambda: None),
    }
    st = measure(calls, 9)
    ratio = statistics.median(c / m for c, m in zip(st["cpu"].wall, st["mytorch"].wall))
    print(
        f"moe_unpermute, 515 x 8 slots of 7168-wide bfloat16 rows, 1 thread: mytorch {st['mytorch'].median * 1e3:.2f} "
        f"ms, CPU reference {st['cpu'].median * 1e3:.2f} ms, ratio {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
