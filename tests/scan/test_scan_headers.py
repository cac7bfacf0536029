"""kbatch.scan.headers (issue 41): a narrow projection (topic, partition, offset, timestamp,
timestampType) of ranges whose sealed segments the header summary's cache covers is built from the
cached verified headers and timestamps, and gives the decode path's rows exactly: over the
read-path matrix (tests/support/read_path_cases.py: transactions, damage, indexes) and compacted
random logs (offset gaps, empty batches, codecs, LogAppendTime, missing timestamps), at both
isolation levels, whole partitions and ranges cut small; a cold cache decodes."""
from __future__ import annotations

import logging
import os

import pytest

import kbatch
from kbatch.log.summary import SummaryCache, summarize
from support import read_path_cases as C

pa = pytest.importorskip("pyarrow")

NARROW = ["topic", "partition", "offset", "timestamp", "timestampType"]
LEVELS = sorted(C.ISOLATION)


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return C.build_all(str(tmp_path_factory.mktemp("scan-headers")))


def warm(part: str, cache: SummaryCache) -> None:
    log = kbatch.Log.open(part)
    try:
        summarize(log, cache=cache, skip_unreadable=True)
    finally:
        log.close()


def outcome(part: str, cache, isolation: str, columns=NARROW, **kw):
    """(rows, or the error's type and message; how many ranges came from the cache)."""
    with kbatch.scan(part, isolation=isolation, columns=columns, summary_cache=cache, **kw) as s:
        try:
            t = s.to_table()
            got = (t.schema, t.to_pylist())
        except kbatch.KBatchError as e:
            got = (type(e).__name__, str(e))
        return got, s.stats.ranges_from_headers


def compare(part: str, cache: SummaryCache, **kw) -> int:
    from_headers = 0
    for iso in LEVELS:
        want, none = outcome(part, False, iso, **kw)
        got, n = outcome(part, cache, iso, **kw)
        assert none == 0
        assert got == want, (part, iso)
        from_headers += n
    return from_headers


def test_matrix_rows_are_the_decode_paths(parts, tmp_path):
    cache = SummaryCache(str(tmp_path / "cache"))
    cold = sum(compare(parts[c], cache) for c in sorted(C.CASES))
    assert cold == 0  # nothing cached yet: every range decoded
    answered = 0
    for case in sorted(C.CASES):
        warm(parts[case], cache)
        answered += compare(parts[case], cache)
        answered += compare(parts[case], cache, range_bytes=300, columns=["offset", "timestamp"])
        for lo, hi in ((1, None), (3, 7), (5, 40)):  # inside batches: their records cut
            answered += compare(parts[case], cache, from_offset=lo, until_offset=hi)
        compare(parts[case], cache, columns=["partition", "key"])  # not narrow: decoded, the same
    assert answered > 0, "no range of the matrix was answered from the cache"


@pytest.mark.parametrize("seed", [1, 2])
def test_compacted_logs(tmp_path, seed):
    from kbatch.log.cleaner import compact
    from log.test_compaction import LogGen, write_segments

    d = tmp_path / f"t{seed}-0"
    write_segments(d, LogGen(seed, n_batches=40, open_txn=seed % 2 == 0).segments(4))
    kbatch.rebuild_indexes(d)
    cache = SummaryCache(str(tmp_path / "cache"))
    warm(str(d), cache)
    assert compare(str(d), cache) + compare(str(d), cache, range_bytes=300) > 0
    assert compare(str(d), cache, from_offset=7, until_offset=95, columns=["timestampType", "offset"]) > 0
    compact(d, 1_700_000_000_000, delete_retention_ms=86_400_000)
    warm(str(d), cache)
    compare(str(d), cache)  # gaps: those ranges decode
    compare(str(d), cache, range_bytes=300)


def _active_ranges(d: str, cache: SummaryCache, isolation: str) -> int:
    """Ranges answered from the cache that read the active segment."""
    log = kbatch.Log.open(d)
    try:
        active = log.segments[-1].base_offset
    finally:
        log.close()
    with kbatch.scan(d, isolation=isolation, columns=NARROW, summary_cache=cache, from_offset=active) as s:
        s.to_table()
        return s.stats.ranges_from_headers


@pytest.mark.parametrize("open_txn", [False, True], ids=["closed", "open-txn"])
def test_active_segment_prefix_and_appended_tail(tmp_path, open_txn):
    """The active segment's verified prefix answers from the cache; bytes appended since (a whole
    batch, then a torn one) are read and checked, their timestamps walked: the same rows."""
    from log.test_compaction import LogGen, write_segments

    every = [b for seg in LogGen(11, n_batches=40, open_txn=open_txn).segments(1) for b in seg]
    n = len(every) // 4
    active = every[2 * n:]
    k = len(active) // 3
    d = tmp_path / "t-0"
    write_segments(d, [every[:n], every[n:2 * n], active[:k]])
    kbatch.rebuild_indexes(d)
    path = os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".log"))[-1])
    cache = SummaryCache(str(tmp_path / "cache"))
    warm(str(d), cache)
    assert compare(str(d), cache) > 0
    assert sum(_active_ranges(str(d), cache, iso) for iso in LEVELS) > 0
    with open(path, "ab") as f:   # appended since the prefix was remembered: read, not re-warmed
        f.write(b"".join(active[k:-2]))
    assert compare(str(d), cache) > 0
    assert compare(str(d), cache, from_offset=5, until_offset=60, columns=["offset", "timestamp"]) >= 0
    assert sum(_active_ranges(str(d), cache, iso) for iso in LEVELS) > 0
    with open(path, "ab") as f:   # a torn tail batch: not a row
        f.write(active[-2][:len(active[-2]) // 2])
    compare(str(d), cache)
