"""Compaction (kbatch.compact) against the dictionary cleaner it replaced (issue 22), side by side.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_compaction.py --benchmark-only

A generated partition of KBATCH_BENCH_COMPACTION_MB MB (default 1024, issue 5's size) in 50 MB
segments plus a small active segment: uncompressed v2 batches of 100 records, ~230-byte records,
keys drawn from 10 % distinct keys (`key-%08d`, 12 bytes), 2 % tombstones. Throughput is MB of input
per second. Each round compacts a fresh copy (the copy is not timed). Before timing, each cleaner's
output is checked against a dictionary oracle: exactly one record per key, the latest. Peak memory
(VmHWM) is measured once per cleaner in a child process of its own.

The "dict cleaner" is the algorithm kbatch ran before issue 22, condensed to this log (no
transactions, no legacy batches): the same pread windows, records decoded to objects, a Python dict
from a 16-byte key digest to the latest offset, kept records rebuilt with BatchBuilder.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import pytest

import kbatch
from kbatch.log.cleaner import compact, rebuild_batch

NOW = 1_700_000_000_000
MB = int(os.environ.get("KBATCH_BENCH_COMPACTION_MB", "1024"))
SEGMENT_BYTES = 50 * 1024 * 1024
RECORDS_PER_BATCH = 100
VALUE_BYTES = 200
DISTINCT = 0.10
TOMBSTONES = 0.02
DAY = 86_400_000


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


def dict_cleaner(log_dir, now_ms=NOW, delete_retention_ms=DAY):
    """kbatch's cleaner before issue 22, for this bench's log: a dict of 16-byte key digests (a key
    of up to 16 bytes as itself, longer ones by MD5), every record decoded to an object in both
    passes, rebuilt batches through BatchBuilder, tombstones kept with a new delete horizon. Every
    segment but the last is cleaned; each cleaned file replaces its original."""
    from kbatch.log.segment import FileRecords

    def digest(key):
        b = bytes(key)
        return b if len(b) <= 16 else hashlib.md5(b).digest()

    names = sorted(n for n in os.listdir(log_dir) if n.endswith(".log"))[:-1]
    latest = {}
    for name in names:
        records = FileRecords(os.path.join(log_dir, name))
        for batch in records.batches(0, verify_crc=True):
            for r in batch.records():
                if r.key is not None:
                    latest[digest(r.key)] = r.offset
        records.close()
    horizon = now_ms + delete_retention_ms
    for name in names:
        path = os.path.join(log_dir, name)
        records = FileRecords(path)
        with open(path + ".cleaned", "wb") as out:
            for batch in records.batches(0, verify_crc=True):
                kept = [r for r in batch.records() if r.key is not None and r.offset >= latest[digest(r.key)]]
                need_horizon = any(r.is_tombstone for r in kept) and batch.delete_horizon_ms is None
                if kept and len(kept) == batch.record_count and not need_horizon:
                    out.write(batch.raw)
                elif kept:
                    out.write(rebuild_batch(batch, kept, horizon if need_horizon else batch.delete_horizon_ms))
        records.close()
        os.replace(path + ".cleaned", path)
        kbatch.rebuild_indexes(path)
    return len(latest)


CLEANERS = {"kbatch compact": lambda d: compact(d, NOW), "dict cleaner (before issue 22)": dict_cleaner}


@pytest.fixture(scope="module")
def source():
    root = tempfile.mkdtemp(prefix="kbatch-bench-compaction-")
    src = os.path.join(root, "src", "bench-0")
    total, latest = generate(src)
    yield root, src, total, latest
    shutil.rmtree(root, ignore_errors=True)


_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
import bench_compaction as B
t0 = time.perf_counter()
B.CLEANERS[sys.argv[2]](sys.argv[1])
# VmHWM: this process's own peak (ru_maxrss would carry the forking parent's across exec)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"seconds": time.perf_counter() - t0, "maxrss_kb": hwm}))
"""


def peak_rss_mb(work, impl) -> float:
    """A cleaner's peak resident memory, alone in a fresh child process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", _CHILD, work, impl, os.path.dirname(os.path.abspath(__file__))],
                       env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["maxrss_kb"] / 1024


@pytest.mark.benchmark(group="compaction")
@pytest.mark.parametrize("impl", list(CLEANERS))
def test_compaction(benchmark, source, impl):
    root, src, total, latest = source
    work = os.path.join(root, "work", "bench-0")

    def fresh():
        shutil.rmtree(os.path.dirname(work), ignore_errors=True)
        shutil.copytree(src, work)
        return (work,), {}

    fresh()
    res = CLEANERS[impl](work)
    check(work, latest)
    if impl.startswith("kbatch"):
        assert res.bytes_read == total and res.passes == 1
    fresh()
    rss = peak_rss_mb(work, impl)
    benchmark.pedantic(CLEANERS[impl], setup=fresh, rounds=2 if impl.startswith("kbatch") else 1, iterations=1)
    benchmark.extra_info.update({"bytes": total, "input MB": round(total / 2**20, 1), "peak RSS MB": round(rss),
                                 "distinct keys": len(latest)})
