"""Storage benchmarks: offsets_for_times on a large generated log, index pages touched by single
lookups, and append throughput. Every benchmark checks its answer before timing it.

Run: PYTHONPATH=src .venv/bin/python -m pytest bench/bench_storage.py --benchmark-only -s
KBATCH_BENCH_LOG_MB (default 300) sets the size of the generated log.
"""
import os
import struct

import numpy as np
import pytest

import kbatch
from kbatch import _backend

LOG_MB = int(os.environ.get("KBATCH_BENCH_LOG_MB", "300"))
N_TARGETS = 100_000
RESULTS = {}


def _template(n_records, value_size, compression=kbatch.Compression.NONE):
    b = kbatch.BatchBuilder(timestamp_extended=False, compression=compression)
    for i in range(n_records):
        b.append((i * 7) % n_records, b"key-%d" % i, bytes([65 + i % 26]) * value_size)  # out of order
    return b.build()


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    """One ~LOG_MB MB segment of 4-record batches (~920 bytes each), CreateTime slightly out of
    order inside batches, rising across batches. Built from a template with patched offsets,
    timestamps and CRCs so generation stays fast."""
    d = str(tmp_path_factory.mktemp("bench") / "big-0")
    os.makedirs(d)
    tpl = bytearray(_template(4, 200))
    n = LOG_MB * 1024 * 1024 // len(tpl)
    path = os.path.join(d, f"{0:020d}.log")
    t0 = 1_700_000_000_000
    with open(path, "wb") as f:
        for i in range(n):
            base_ts = t0 + 10 * i
            struct.pack_into(">q", tpl, 0, 4 * i)
            struct.pack_into(">qq", tpl, 27, base_ts, base_ts + 3)
            struct.pack_into(">I", tpl, 17, kbatch.crc32c(memoryview(tpl)[21:]))
            f.write(tpl)
    kbatch.rebuild_indexes(d)
    log = kbatch.Log.open(d)
    rng = np.random.default_rng(1)
    targets = rng.integers(t0 - 1000, t0 + 10 * n + 1000, N_TARGETS, dtype=np.int64)
    yield log, targets, n
    log.close()


def baseline_decode_and_searchsorted(log, targets):
    """Decode every record's timestamp, then first record with ts >= t by running max + searchsorted."""
    ts, offs = [], []
    for b in log.batches(verify_crc=False):
        for r in b:
            ts.append(r.timestamp)
            offs.append(r.offset)
    ts = np.array(ts, dtype=np.int64)
    offs = np.array(offs, dtype=np.int64)
    j = np.searchsorted(np.maximum.accumulate(ts), targets, side="left")
    found = j < len(ts)
    out = np.full(len(targets), -1, dtype=np.int64)
    out[found] = offs[j[found]]
    return out


def test_offsets_for_times_vs_decode_everything(benchmark, big_log):
    log, targets, n = big_log
    want = baseline_decode_and_searchsorted(log, targets)
    got, _stamps = log.offsets_for_times(targets)
    assert np.array_equal(got, want)
    import time
    t = time.perf_counter()
    baseline_decode_and_searchsorted(log, targets)
    base_s = time.perf_counter() - t
    benchmark.pedantic(log.offsets_for_times, args=(targets,), rounds=3, iterations=1)
    ours = benchmark.stats.stats.mean
    RESULTS["offsets_for_times"] = (n, base_s, ours)
    print(f"\n{LOG_MB} MB, {n} batches, {4 * n} records, {N_TARGETS} targets, backend {_backend.core.BACKEND}: "
          f"decode+searchsorted {base_s:.2f} s, offsets_for_times {ours:.3f} s, ratio {base_s / ours:.1f}x")


class CountingSearch:
    """index_search that records the entry slots it reads (a pure bisection, checked against the
    backend kernel's answer)."""

    def __init__(self, real):
        self.real = real
        self.slots = []

    def __call__(self, data, entry_size, key_kind, target, n):
        fmt = ">i" if key_kind == 0 else ">q"
        lo, hi = 0, n - 1
        self.slots.append(0)
        if n == 0 or struct.unpack_from(fmt, data, 0)[0] > target:
            ans = -1
        else:
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                self.slots.append(mid)
                if struct.unpack_from(fmt, data, mid * entry_size)[0] <= target:
                    lo = mid
                else:
                    hi = mid - 1
            ans = lo
        assert ans == self.real(data, entry_size, key_kind, target, n)
        return ans


def test_single_lookup_touches_log_n_index_pages(benchmark, big_log, monkeypatch):
    log, targets, n = big_log
    seg = log.segments[0]
    counter = CountingSearch(_backend.core.index_search)
    real_core = _backend.core

    class Patched:
        def __getattr__(self, name):
            return counter if name == "index_search" else getattr(real_core, name)

    monkeypatch.setattr(_backend, "core", Patched())
    per_lookup = []
    for t in targets[:200].tolist():
        counter.slots = []
        hit = log.offset_for(t)
        assert (hit.offset if hit else -1) == baseline_one(log, t)
        per_lookup.append(len(counter.slots))
    monkeypatch.setattr(_backend, "core", real_core)
    entries = seg.offset_index.entries + seg.time_index.entries
    pages = lambda es, k: len({(s * es) // 4096 for s in k})  # noqa: E731
    benchmark(log.offset_for, int(targets[0]))
    RESULTS["single"] = (seg.offset_index.entries, seg.time_index.entries, max(per_lookup),
                         float(np.mean(per_lookup)), benchmark.stats.stats.mean)
    print(f"\nindex entries: .index {seg.offset_index.entries}, .timeindex {seg.time_index.entries}; "
          f"entries read per lookup (both indexes): max {max(per_lookup)}, mean {np.mean(per_lookup):.1f}; "
          f"log2(entries) = {np.log2(max(entries, 1)):.1f}; single lookup {benchmark.stats.stats.mean * 1e6:.0f} us; "
          f"pages <= {pages(12, range(0, 1))} per probe")


def baseline_one(log, t):
    seg = log.segments[0]
    hit = seg.log.search_for_timestamp(t, 0, 0)
    return hit.offset if hit else -1


@pytest.mark.parametrize("codec", [kbatch.Compression.NONE, kbatch.Compression.LZ4])
def test_append_throughput(benchmark, tmp_path, codec):
    data = _template(1000, 100, codec)
    n_batches = 100
    total = len(data) * n_batches
    counter = [0]

    def append_all():
        counter[0] += 1
        d = str(tmp_path / f"a{codec}-{counter[0]}" / "t-0")
        log = kbatch.Log.create(d, kbatch.LogConfig(), now_ms=0)
        for _ in range(n_batches):
            log.append(data, now_ms=1000)
        log.close()
        return d

    def plain_writes():
        counter[0] += 1
        p = str(tmp_path / f"plain-{codec}-{counter[0]}.log")
        with open(p, "wb", buffering=0) as f:
            for _ in range(n_batches):
                f.write(data)
        return p

    d = append_all()
    assert [r.offset for b in kbatch.Log.open(d).batches() for r in b][-1] == 1000 * n_batches - 1
    import time
    t = time.perf_counter()
    for _ in range(3):
        plain_writes()
    plain = (time.perf_counter() - t) / 3
    benchmark.pedantic(append_all, rounds=3, iterations=1)
    ours = benchmark.stats.stats.mean
    RESULTS[f"append-{codec.name}"] = (total, ours, plain)
    print(f"\nappend {codec.name}: {total / ours / 1e6:.1f} MB/s, {1000 * n_batches / ours:,.0f} records/s; "
          f"plain writes {total / plain / 1e6:.1f} MB/s; ratio {ours / plain:.1f}x slower")


def _scan_with_log(d):
    """Every batch of the log through Log.batches (headers + CRC, no record decoding)."""
    log = kbatch.Log.open(d)
    try:
        n = last = 0
        for b in log.batches(verify_crc=True):
            n += 1
            last = b.last_offset
        return n, last
    finally:
        log.close()


def _scan_plain_read(d):
    """Reference in the same run: read each .log whole into memory, then iter_batches over the bytes."""
    n = last = 0
    for name in sorted(os.listdir(d)):
        if name.endswith(".log"):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            for b in kbatch.iter_batches(data, verify_crc=True, strict=False):
                n += 1
                last = b.last_offset
    return n, last


def _verify(d):
    v = kbatch.verify_indexes(d)
    assert v.ok, str(v)
    return v


@pytest.mark.parametrize("what", ["Log.batches", "verify_indexes", "plain read + iter_batches"])
def test_read_throughput(benchmark, big_log, what):
    """Reading a whole segment from disk (page cache warm): Log.batches, verify_indexes, and a
    plain whole-file read + iter_batches as the in-run reference the ratios are taken against."""
    log, _targets, n = big_log
    d = log.directory
    size = sum(s.size for s in log.segments)
    assert _scan_with_log(d) == (n, 4 * n - 1) == _scan_plain_read(d)
    fn = {"Log.batches": _scan_with_log, "verify_indexes": _verify, "plain read + iter_batches": _scan_plain_read}[what]
    fn(d)  # warm
    benchmark.pedantic(fn, args=(d,), rounds=5, iterations=1)
    benchmark.extra_info["bytes"] = size
    RESULTS[f"read-{what}"] = (size, benchmark.stats.stats.min)
    print(f"\n{what}: {size / benchmark.stats.stats.min / 1e9:.2f} GB/s (min of 5), {size} bytes")
