"""Philox4x32-10 in numpy, from its definition: the tests' reference for the device's random kernels (Note [Philox
layout] in kernels/include/mytorch/random.h)."""

import numpy as np

_M32 = np.uint64(0xFFFFFFFF)


def philox_blocks(seed: int, lane: int, blocks: np.ndarray) -> list:
    """The four 32-bit words (as uint64 arrays) of Philox4x32-10 with key `seed` on counters (block, lane): the
    block in the counter's low 64 bits, the lane (random.h's PhiloxLane) in its high word."""
    block = blocks.astype(np.uint64)
    c = [block & _M32, block >> np.uint64(32), np.full(block.size, lane, np.uint64), np.zeros(block.size, np.uint64)]
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for _ in range(10):
        p0, p1 = c[0] * np.uint64(0xD2511F53), c[2] * np.uint64(0xCD9E8D57)
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0),
            p1 & _M32,
            (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
            p0 & _M32,
        ]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c


def philox_words(seed: int, lane: int, w0: int, count: int) -> np.ndarray:
    """Words w0 .. w0 + count - 1 of a lane's stream, word w being word w % 4 of block w // 4."""
    b0, b1 = w0 // 4, (w0 + count + 3) // 4
    words = np.stack(philox_blocks(seed, lane, np.arange(b0, b1)), axis=1).reshape(-1)
    return words[w0 - 4 * b0 : w0 - 4 * b0 + count]
