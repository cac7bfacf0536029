"""Compaction throughput (kbatch.compact), run with pytest-benchmark:

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_compaction.py --benchmark-only

A generated partition of ~200 MB (KBATCH_BENCH_COMPACTION_MB; 1 GB would not fit this small
shared box comfortably) in 50 MB segments plus a small active segment: uncompressed v2 batches of
100 records, ~230-byte records, keys drawn from 10 % distinct keys, 2 % tombstones. Throughput is
MB of input per second of `compact`. Each round compacts a fresh copy (the copy is not timed).
The result is checked before timing: the output holds exactly one record per distinct key still
alive, the latest one. `python bench/bench_compaction.py` also measures peak memory in a child
process (ru_maxrss, which counts the mmap'd input pages it touched, and tracemalloc's Python-heap
peak) and writes bench/results-compaction.md.
"""
from __future__ import annotations

import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import kbatch
from kbatch import _backend
from kbatch.compaction import compact

NOW = 1_700_000_000_000
MB = int(os.environ.get("KBATCH_BENCH_COMPACTION_MB", "200"))
SEGMENT_BYTES = 50 * 1024 * 1024
RECORDS_PER_BATCH = 100
VALUE_BYTES = 200
DISTINCT = 0.10
TOMBSTONES = 0.02


def generate(log_dir, mb=MB, seed=11):
    """Write the benchmark partition; returns (total bytes, expected {key: (offset, value is None)})."""
    os.makedirs(log_dir, exist_ok=True)
    rng = random.Random(seed)
    payload = rng.randbytes(VALUE_BYTES * 4)
    approx_record = VALUE_BYTES + 30
    n_records = mb * 1024 * 1024 // approx_record
    n_keys = max(1, int(n_records * DISTINCT))
    latest = {}
    offset = 0
    total = 0
    seg_base, seg = 0, open(os.path.join(log_dir, f"{0:020d}.log"), "wb")
    seg_size = 0
    while offset < n_records:
        b = kbatch.BatchBuilder(base_offset=offset, timestamp_extended=True)
        for _ in range(RECORDS_PER_BATCH):
            k = rng.randrange(n_keys)
            key = b"key-%08d" % k
            if rng.random() < TOMBSTONES:
                value = None
            else:
                p = rng.randrange(len(payload) - VALUE_BYTES)
                value = payload[p:p + VALUE_BYTES]
            b.append(NOW - (n_records - offset), key, value)
            latest[key] = (offset, value is None)
            offset += 1
        data = b.build()
        if seg_size + len(data) > SEGMENT_BYTES:
            seg.close()
            seg_base, seg_size = offset - RECORDS_PER_BATCH, 0
            seg = open(os.path.join(log_dir, f"{seg_base:020d}.log"), "wb")
        seg.write(data)
        seg_size += len(data)
        total += len(data)
    seg.close()
    # a small active segment with keys of its own (never cleaned)
    b = kbatch.BatchBuilder(base_offset=offset)
    b.append(NOW, b"active", b"x")
    with open(os.path.join(log_dir, f"{offset:020d}.log"), "wb") as f:
        f.write(b.build())
    return total, latest


def check(log_dir, latest):
    """One record per key, the latest (tombstones kept: first pass, with a horizon)."""
    seen = {}
    for name in sorted(os.listdir(log_dir)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(log_dir, name), "rb") as f:
            for batch in kbatch.iter_batches(f.read()):
                for r in batch:
                    k = bytes(r.key)
                    assert k not in seen, k
                    seen[k] = (r.offset, r.is_tombstone)
    seen.pop(b"active")
    assert seen == latest, "compaction result differs from the dictionary oracle"


@pytest.fixture(scope="module")
def source():
    root = tempfile.mkdtemp(prefix="kbatch-bench-compaction-")
    src = os.path.join(root, "src", "bench-0")
    total, latest = generate(src)
    yield root, src, total, latest
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def core(monkeypatch):
    """The Cython core; the pure twin is a reference (its speed is in the table, not timed here)."""
    monkeypatch.setattr(_backend, "core", pytest.importorskip("kbatch._core"))
    return "cython"


def test_compaction_throughput(benchmark, source, core):
    root, src, total, latest = source
    work = os.path.join(root, "work", "bench-0")

    def fresh():
        shutil.rmtree(os.path.dirname(work), ignore_errors=True)
        shutil.copytree(src, work)
        return (), {}

    fresh()
    stats = compact(work, NOW)
    check(work, latest)
    assert stats.bytes_read == total
    benchmark.extra_info["input_mb"] = total / 2**20
    benchmark.pedantic(lambda: compact(work, NOW), setup=fresh, rounds=2, iterations=1)
    benchmark.extra_info["mb_per_s"] = total / 2**20 / benchmark.stats.stats.median


# ------------------------------------------------------------------------------------ table
_CHILD = r"""
import json, resource, sys, time, tracemalloc
import kbatch
from kbatch import _backend
from kbatch.compaction import compact
if sys.argv[2] == "python":
    import kbatch._core_py as m; _backend.core = m
trace = sys.argv[3] == "trace"
if trace:
    tracemalloc.start()
t0 = time.perf_counter()
s = compact(sys.argv[1], %d)
dt = time.perf_counter() - t0
out = {"seconds": dt, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "stats": s.as_dict()}
if trace:
    out["tracemalloc_peak"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(out))
""" % NOW


def _child(work, backend, trace):
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", _CHILD, work, backend, "trace" if trace else "-"], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    root = tempfile.mkdtemp(prefix="kbatch-bench-compaction-")
    try:
        src = os.path.join(root, "src", "bench-0")
        t0 = time.perf_counter()
        total, latest = generate(src)
        gen_s = time.perf_counter() - t0
        n_keys = len(latest)
        rows = []
        backends = ["cython", "python"] if os.environ.get("KBATCH_BENCH_PURE", "1") == "1" else ["cython"]
        for backend in backends:
            for trace in ((False, True) if backend == "cython" else (False,)):
                work = os.path.join(root, "work", "bench-0")
                shutil.rmtree(os.path.dirname(work), ignore_errors=True)
                shutil.copytree(src, work)
                res = _child(work, backend, trace)
                if not trace:
                    check(work, latest)
                rows.append((backend, trace, res))
                print(backend, trace, f"{res['seconds']:.2f}s", res.get("tracemalloc_peak"), res["maxrss_kb"],
                      file=sys.stderr)
        st = rows[0][2]["stats"]
        lines = [
            "# Compaction benchmark (kbatch.compact)",
            "",
            f"Input: generated partition of {total / 2**20:.1f} MB (~200 MB on this 2-core shared box, "
            f"not 1 GB) in {SEGMENT_BYTES // 2**20} MB segments + a 1-record active segment; uncompressed v2 "
            f"batches of {RECORDS_PER_BATCH} records, {VALUE_BYTES}-byte values, "
            f"{st['records_read']:,} records, {n_keys:,} distinct keys ({DISTINCT:.0%}), "
            f"{TOMBSTONES:.0%} tombstones. Generation took {gen_s:.1f} s.",
            "",
            "Checked before timing: the output holds exactly one record per key, the latest "
            "(dictionary oracle), and bytes_read equals the input size.",
            "",
            "Each run is a fresh child process (`python bench/bench_compaction.py`). ru_maxrss counts the "
            "mmap'd input pages the process touched (file-backed, reclaimable); tracemalloc peak is the "
            "Python heap (the offset map and per-batch objects) and is what grows with the key count. "
            "The tracemalloc run is slower because tracing costs time; its throughput is not reported.",
            "",
            "| backend | input MB | seconds | MB/s of input | peak RSS (MB) | Python heap peak (MB) | "
            "records written | bytes written (MB) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for backend in backends:
            plain = next(r for b, t, r in rows if b == backend and not t)
            traced = next((r for b, t, r in rows if b == backend and t), None)
            heap = f"{traced['tracemalloc_peak'] / 2**20:.1f}" if traced else "not measured"
            s = plain["stats"]
            lines.append(
                f"| {backend} | {total / 2**20:.1f} | {plain['seconds']:.2f} | {total / 2**20 / plain['seconds']:.1f} | "
                f"{plain['maxrss_kb'] / 1024:.0f} | {heap} | "
                f"{s['records_written']:,} | {s['bytes_written'] / 2**20:.1f} |")
        lines += [
            "",
            f"Offset-map pass: {st['map_elapsed_s']:.2f} s of the cython run. Stats of that run: "
            f"{st['batches_rebuilt']:,} batches rebuilt, {st['batches_copied']:,} copied byte for byte, "
            f"{st['superseded_records']:,} superseded records, {st['tombstones_kept']:,} tombstones kept "
            f"with a delete horizon.",
            "",
            "Where the time goes: both passes decode every record into Python objects (the Cython kernel "
            "decodes, the per-record key lookup and filter run in Python), and rebuilt batches go through "
            "BatchBuilder. A columnar decode (keys as offsets into the buffer) and a digest map in numpy "
            "would remove most of the per-record Python work.",
        ]
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results-compaction.md")
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
