"""Storage: offsets by time on real batch shapes, single lookups, appends and whole-segment reads.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_storage.py --benchmark-only

Two generated logs of KBATCH_BENCH_LOG_MB (default 300) MB each, one segment with indexes from
rebuild_indexes: 4-record batches (~920 bytes) and 1000-record batches (~118 KB), 100-200 byte
values, CreateTime out of order inside a batch and rising across batches, no leader epochs and no
leader-epoch-checkpoint (as a copied segment). Groups:
  offsets_for_times  100,000 random numpy targets vs decoding every record and numpy.searchsorted
  target list        5,000 targets as a Python list vs the same as a numpy array
  single lookup      log.offset_for(t) over rotating targets vs decoding one batch of the log to
                     Record objects (iter_batches + records); the index entries a lookup reads
  append             Log.append of 1000-record batches (none, lz4) vs plain file writes
  read               Log.batches and verify_indexes over a whole segment vs read() + iter_batches
Every benchmark checks its answers first (offsets_for_times and lookups against the decode-everything
baseline; appends by reading the log back).
"""
import os
import struct

import numpy as np
import pytest

import kbatch
from kbatch import _backend

LOG_MB = int(os.environ.get("KBATCH_BENCH_LOG_MB", "300"))
N_TARGETS = 100_000
N_LIST = 5_000
T0 = 1_700_000_000_000


def _template(n_records, value_size, compression=kbatch.Compression.NONE):
    b = kbatch.BatchBuilder(timestamp_extended=False, compression=compression)
    for i in range(n_records):
        b.append((i * 7) % n_records, b"key-%d" % i, bytes([65 + i % 26]) * value_size)  # out of order
    return b.build()


def _generate(directory, n_records, value_size):
    """One ~LOG_MB MB segment from a template with patched offsets, timestamps and CRCs."""
    os.makedirs(directory)
    tpl = bytearray(_template(n_records, value_size))
    n = LOG_MB * 1024 * 1024 // len(tpl)
    step = 10 if n_records == 4 else 2 * n_records
    with open(os.path.join(directory, f"{0:020d}.log"), "wb") as f:
        for i in range(n):
            base_ts = T0 + step * i
            struct.pack_into(">q", tpl, 0, n_records * i)
            struct.pack_into(">qq", tpl, 27, base_ts, base_ts + (3 if n_records == 4 else n_records - 1))
            struct.pack_into(">I", tpl, 17, kbatch.crc32c(memoryview(tpl)[21:]))
            f.write(tpl)
    kbatch.rebuild_indexes(directory)
    return n, step


@pytest.fixture(scope="module", params=[4, 1000], ids=["4-record", "1000-record"])
def log(request, tmp_path_factory):
    n_records = request.param
    d = str(tmp_path_factory.mktemp("bench") / "big-0")
    n, step = _generate(d, n_records, 200 if n_records == 4 else 100)
    lg = kbatch.Log.open(d)
    rng = np.random.default_rng(1)
    targets = rng.integers(T0 - 1000, T0 + step * n + 1000, N_TARGETS, dtype=np.int64)
    want = baseline_decode_and_searchsorted(lg, targets)
    yield lg, n_records, n, targets, want
    lg.close()


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


@pytest.mark.parametrize("impl", ["kbatch offsets_for_times", "decode all + searchsorted"])
def test_offsets_for_times(benchmark, log, impl):
    lg, n_records, n, targets, want = log
    benchmark.group = f"offsets_for_times {n_records}-record batches"
    if impl.startswith("kbatch"):
        got, _stamps = lg.offsets_for_times(targets)
        assert np.array_equal(got, want)
        benchmark.pedantic(lg.offsets_for_times, args=(targets,), rounds=7, iterations=1, warmup_rounds=1)
    else:
        benchmark.pedantic(baseline_decode_and_searchsorted, args=(lg, targets), rounds=2, iterations=1)
    benchmark.extra_info.update(records=n * n_records, targets=N_TARGETS, log_mb=LOG_MB)


@pytest.mark.parametrize("impl", ["kbatch list", "kbatch numpy array"])
def test_target_list(benchmark, log, impl):
    lg, n_records, _n, targets, want = log
    benchmark.group = f"target list {n_records}-record batches"
    arr = targets[:N_LIST]
    lst = arr.tolist()
    got = lg.offsets_for_times(lst)
    assert [-1 if h is None else h.offset for h in got] == want[:N_LIST].tolist()
    arg = lst if impl == "kbatch list" else arr
    benchmark.pedantic(lg.offsets_for_times, args=(arg,), rounds=7, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(targets=N_LIST)


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


def _probes(lg, targets, want, monkeypatch):
    """Index entries read per lookup (both indexes), with each answer checked."""
    counter = CountingSearch(_backend.core.index_search)
    real_core = _backend.core

    class Patched:
        def __getattr__(self, name):
            return counter if name == "index_search" else getattr(real_core, name)

    monkeypatch.setattr(_backend, "core", Patched())
    per_lookup = []
    try:
        for t, w in zip(targets.tolist(), want.tolist()):
            counter.slots = []
            hit = lg.offset_for(t)
            assert (hit.offset if hit else -1) == w
            per_lookup.append(len(counter.slots))
    finally:
        monkeypatch.setattr(_backend, "core", real_core)
    return per_lookup


@pytest.mark.parametrize("impl", ["kbatch offset_for", "decode one batch"])
def test_single_lookup(benchmark, log, impl, monkeypatch):
    lg, n_records, _n, targets, want = log
    benchmark.group = f"single lookup {n_records}-record batches"
    seg = lg.segments[0]
    if impl == "decode one batch":
        first = next(kbatch.iter_batches(seg.log.read(0, 1 << 20)))
        raw = bytes(first.raw)

        def decode_one():
            for b in kbatch.iter_batches(raw):
                return b.records()

        assert len(decode_one()) == n_records
        benchmark.pedantic(decode_one, rounds=200, iterations=1, warmup_rounds=5)
        return
    per_lookup = _probes(lg, targets[:200], want[:200], monkeypatch)
    it = iter(targets.tolist() * 10)
    benchmark.pedantic(lambda: lg.offset_for(next(it)), rounds=2000, iterations=1, warmup_rounds=20)
    entries = seg.offset_index.entries + seg.time_index.entries
    benchmark.extra_info.update({"index entries": entries,
                                 "index entries read": f"{np.mean(per_lookup):.1f} mean, {max(per_lookup)} max",
                                 "log2 entries per index": f"{np.log2(max(entries / 2, 1)):.1f}"})


def test_latest_without_epoch_checkpoint(benchmark, log):
    """LATEST on a read-only log without a leader-epoch-checkpoint: the last batch, not every header."""
    lg, n_records, n, _targets, _want = log
    benchmark.group = f"single lookup {n_records}-record batches"

    def latest():
        fresh = kbatch.Log.open(lg.directory)  # nothing cached: the first LATEST of a log
        try:
            return fresh.offset_for(kbatch.LATEST)
        finally:
            fresh.close()

    assert latest() == (n * n_records, None, None)
    benchmark.pedantic(latest, rounds=20, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(what="Log.open + offset_for(LATEST)")


@pytest.mark.parametrize("codec", [kbatch.Compression.NONE, kbatch.Compression.LZ4], ids=["none", "lz4"])
@pytest.mark.parametrize("impl", ["kbatch Log.append", "plain file writes"])
def test_append(benchmark, tmp_path, impl, codec):
    """The appends alone: each round's Log (or file) is created before and closed after the timing."""
    benchmark.group = "append 100 batches of 1000 records"
    data = _template(1000, 100, codec)
    n_batches = 100
    opened = []

    def setup():
        while opened:
            opened.pop().close()
        d = str(tmp_path / f"a{len(os.listdir(tmp_path))}" / "t-0")
        if impl.startswith("kbatch"):
            opened.append(kbatch.Log.create(d, kbatch.LogConfig(), now_ms=0))
        else:
            os.makedirs(d)
            opened.append(open(os.path.join(d, "plain.bin"), "wb", buffering=0))
        return (opened[-1],), {}

    def append_all(lg):
        for _ in range(n_batches):
            lg.append(data, now_ms=1000)

    def plain(f):
        for _ in range(n_batches):
            f.write(data)

    (lg,), _ = setup()
    if impl.startswith("kbatch"):
        append_all(lg)
        lg.close()
        with kbatch.Log.open(lg.directory) as check:
            assert [r.offset for b in check.batches() for r in b][-1] == 1000 * n_batches - 1
    benchmark.pedantic(append_all if impl.startswith("kbatch") else plain, setup=setup, rounds=7, iterations=1)
    while opened:
        opened.pop().close()
    benchmark.extra_info.update(records=1000 * n_batches, bytes=len(data) * n_batches, codec=codec.name)


def _scan_with_log(d):
    """Every batch of the log through Log.batches (headers + CRC, no record decoding)."""
    lg = kbatch.Log.open(d)
    try:
        n = last = 0
        for b in lg.batches(verify_crc=True):
            n += 1
            last = b.last_offset
        return n, last
    finally:
        lg.close()


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


@pytest.mark.parametrize("impl", ["kbatch Log.batches", "kbatch verify_indexes", "read() + iter_batches"])
def test_read(benchmark, log, impl):
    lg, n_records, n, _targets, _want = log
    if n_records != 4:
        pytest.skip("one log shape is enough for whole-segment reads")
    benchmark.group = "read a whole segment"
    d = lg.directory
    size = sum(s.size for s in lg.segments)
    assert _scan_with_log(d) == (n, 4 * n - 1) == _scan_plain_read(d)
    fn = {"kbatch Log.batches": _scan_with_log, "kbatch verify_indexes": _verify,
          "read() + iter_batches": _scan_plain_read}[impl]
    fn(d)  # warm
    benchmark.pedantic(fn, args=(d,), rounds=5, iterations=1)
    benchmark.extra_info["bytes"] = size
