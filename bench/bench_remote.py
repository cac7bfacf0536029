"""Remote reads: a time lookup on a segment in S3 (moto's server on loopback, tests/support/s3server.py),
kbatch's ranged reads against what a reader without them does: download the object with pyarrow
and search it (kbatch's own scan over the downloaded bytes, so only the I/O differs). Both answers
are checked against the local log first; bytes fetched per lookup are printed beside the times.

Run: .venv/bin/python -m pytest bench/bench_remote.py --benchmark-only -s
KBATCH_BENCH_REMOTE_MB (default 64) sets the segment size. Loopback has no latency and no
bandwidth limit to speak of, so the ratios here are the least a real object store gives.
"""
import os
import sys

import numpy as np
import pytest

import kbatch
from kbatch import _fs

pytest.importorskip("moto.server", reason="moto[server] (the S3 test server) is not installed")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from s3server import S3Server, environment  # noqa: E402

MB = int(os.environ.get("KBATCH_BENCH_REMOTE_MB", "64"))
T0 = 1_750_000_000_000


@pytest.fixture(scope="module")
def remote_segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("remote") / "clicks-0"
    d.mkdir()
    ts, off, total = T0, 0, 0
    with open(d / "00000000000000000000.log", "wb") as f:
        while total < MB << 20:
            b = kbatch.BatchBuilder(base_offset=off)
            for i in range(10):
                b.append(ts, b"user-%d" % ((off + i) % 5000), b"v" * 390)
                ts += 7
            data = b.build()
            f.write(data)
            total += len(data)
            off += 10
    kbatch.rebuild_indexes(str(d))
    os.unlink(d / ".lock")
    server = S3Server()
    try:
        with environment(server.env()):
            server.bucket("bench")
            uri = server.upload_tree(str(d), "bench", "logs/clicks-0")
            yield str(d), uri, ts
    finally:
        server.stop()


def _kbatch_lookup(uri, target):
    log = kbatch.Log.open(uri)
    try:
        return log.offset_for(target)
    finally:
        log.close()


def _download_lookup(uri, target):
    """Without ranged reads: fetch the whole segment, then search it in memory."""
    from kbatch.log.segment import _batch_at, first_record_at_or_after, scan_buffer

    fs, path = _fs.resolve(uri + "/00000000000000000000.log")
    with fs.open_input_stream(path) as f:
        data = f.read()
    for s in scan_buffer(data):
        for i in np.flatnonzero(s["max_timestamp"] >= target).tolist():
            hit = first_record_at_or_after(_batch_at(s, i), target)
            if hit is not None:
                return hit
    return None


@pytest.mark.benchmark(group="remote time lookup")
@pytest.mark.parametrize("impl", ["kbatch ranged reads", "download + search"])
def test_remote_time_lookup(benchmark, remote_segment, impl):
    local_dir, uri, t_end = remote_segment
    target = T0 + (t_end - T0) * 3 // 4
    want = kbatch.Log.open(local_dir).offset_for(target)
    fn = _kbatch_lookup if impl.startswith("kbatch") else _download_lookup
    got = fn(uri, target)
    assert (got.offset, got.timestamp) == (want.offset, want.timestamp)
    before = _fs.io_stats()
    fn(uri, target)
    fetched = _fs.io_stats()["bytes"] - before["bytes"] if impl.startswith("kbatch") else os.path.getsize(
        os.path.join(local_dir, "00000000000000000000.log"))
    benchmark.pedantic(fn, args=(uri, target), rounds=5, iterations=1)
    benchmark.extra_info["bytes_fetched"] = fetched
    print(f"\n{impl}: {fetched} bytes fetched per lookup on a {MB} MiB segment, "
          f"{benchmark.stats.stats.min * 1e3:.1f} ms (min of 5)")
