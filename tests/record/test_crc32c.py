"""CRC-32C on both backends against the `crc32c` package: every length around the hardware
path's block boundaries (3 streams of 256 and of 16384 bytes, combined), every alignment, random
lengths up to 100k, and continuation across arbitrary split points."""
import crc32c as crc32c_pkg
import numpy as np

from conftest import load_backend

SHORT, LONG = 256, 16384  # bytes per stream of _crc32c.h's short and long blocks
RNG = np.random.default_rng(2024)
DATA = RNG.integers(0, 256, 3 * LONG * 2 + 3 * SHORT * 3 + 64, dtype=np.uint8).tobytes()


def boundary_lengths(limit):
    out = set(range(0, 80))
    for block in (3 * SHORT, 3 * LONG):
        for k in (1, 2, 3):
            for d in range(-9, 10):
                out.add(k * block + d)
    out.update((3 * LONG + 3 * SHORT + d) for d in range(-9, 10))
    return sorted(n for n in out if 0 <= n <= limit)


def test_lengths_around_block_boundaries_and_alignments(backend):
    limit = len(DATA) - 8 if backend.BACKEND == "cython" else 3 * SHORT + 16  # the pure twin is slow
    for n in boundary_lengths(limit):
        for align in range(8):
            chunk = DATA[align:align + n]
            assert backend.crc32c(chunk) == crc32c_pkg.crc32c(chunk), (n, align)


def test_random_lengths_up_to_100k(backend):
    cy = backend.BACKEND == "cython"
    data = RNG.integers(0, 256, 100_008, dtype=np.uint8).tobytes()
    for n in RNG.integers(0, 100_001 if cy else 3_000, 60 if cy else 8).tolist():
        align = int(RNG.integers(0, 8))
        view = memoryview(data)[align:align + n]
        assert backend.crc32c(view) == crc32c_pkg.crc32c(view), (n, align)


def test_continuation_at_any_split(backend):
    n = 3 * LONG + 3 * SHORT + 13 if backend.BACKEND == "cython" else 3 * SHORT + 13
    data = DATA[:n]
    want = crc32c_pkg.crc32c(data)
    for cut in sorted({0, 1, 7, SHORT, 3 * SHORT - 1, 3 * SHORT, n // 2, n - 1, n} & set(range(n + 1))):
        assert backend.crc32c(data[cut:], backend.crc32c(data[:cut])) == want, cut


def test_cython_matches_the_pure_twin():
    cy, py = load_backend("cython"), load_backend("python")
    for n in (0, 1, 767, 768, 769, 2 * 768 + 5, 3000):
        for align in (0, 3):
            chunk = DATA[align:align + n]
            assert cy.crc32c(chunk, 12345) == py.crc32c(chunk, 12345), (n, align)



FOLD_BLOCK, FOLD_MIN = 256, 1024  # _crc32c.h's folding path: 256 bytes a step, from 1024 bytes


def test_every_path_this_cpu_has():
    """Each CRC-32C path of the compiled core (software, the crc32 instruction, carry-less
    multiply folding where the CPU has AVX-512 VPCLMULQDQ) against the `crc32c` package: lengths
    around the folding path's threshold and step and the crc32 path's blocks, every alignment,
    random lengths, continuation from a value."""
    cy = load_backend("cython")
    lengths = set(boundary_lengths(len(DATA) - 8))
    for base in [FOLD_MIN + k * FOLD_BLOCK for k in range(6)] + [FOLD_MIN // 2, 3 * LONG + FOLD_BLOCK]:
        lengths.update(base + d for d in range(-17, 18))
    data = RNG.integers(0, 256, 200_008, dtype=np.uint8).tobytes()
    randoms = RNG.integers(0, 200_001, 40).tolist()
    paths = cy._crc32c_paths()
    assert paths[:2] == [0, 1] or paths == [0]
    previous = cy._crc32c_limit(paths[-1])
    try:
        for path in paths:
            cy._crc32c_limit(path)
            for n in sorted(lengths):
                for align in (0, 1, 5) if path else (0,):
                    chunk = DATA[align:align + n]
                    assert cy.crc32c(chunk) == crc32c_pkg.crc32c(chunk), (path, n, align)
            for n in randoms:
                view = memoryview(data)[3:3 + n]
                assert cy.crc32c(view, 0xDEADBEEF) == crc32c_pkg.crc32c(view, 0xDEADBEEF), (path, n)
    finally:
        cy._crc32c_limit(previous)
