"""kbatch.crc32c vs the crc32c package, side by side in one process: ns per call for small inputs
(64 B, 4 KiB), GB/s for 64 KiB, 1 MiB and 64 MiB. Checks each result first; best of 5 repetitions.

    PYTHONPATH=src .venv/bin/python bench/crc32c_sizes.py
"""
import os
import time

import crc32c as pkg

from kbatch import _core

SIZES = ((64, 200_000), (4096, 100_000), (65536, 10_000), (1 << 20, 500), (64 << 20, 3))  # (bytes, calls per repetition)


def best_seconds_per_call(fn, data, calls):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(data)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def main():
    print(f"hardware crc32c: {_core.crc32c_is_hardware()}")
    for n, calls in SIZES:
        data = os.urandom(n)
        assert _core.crc32c(data) == pkg.crc32c(data)
        ours = best_seconds_per_call(_core.crc32c, data, calls)
        peer = best_seconds_per_call(pkg.crc32c, data, calls)
        if n >= 65536:
            print(f"{n:>9} B: kbatch {n / ours / 1e9:6.2f} GB/s   crc32c pkg {n / peer / 1e9:6.2f} GB/s   "
                  f"kbatch/pkg speed {peer / ours:.2f}")
        else:
            print(f"{n:>9} B: kbatch {ours * 1e9:7.1f} ns/call   crc32c pkg {peer * 1e9:7.1f} ns/call   "
                  f"kbatch/pkg speed {peer / ours:.2f}")


if __name__ == "__main__":
    main()
