"""kbatch.log.summary (issue 40): every figure the header walk gives equals what a full read
gives (kbatch.log.fetch.read_log, records decoded one by one), over the read-path matrix
(tests/support/read_path_cases.py: transactions, damage, indexes), offset ranges, compacted logs
(gaps, empty batches, delete horizons, aborted transactions removed), random logs with every
codec, LogAppendTime, negative and missing timestamps, and real broker data; the CRC cache is
used only for an unchanged sealed segment; trust_headers misses a flipped bit inside a record,
the default does not."""
from __future__ import annotations

import logging
import os
import random
import shutil

import numpy as np
import pytest

import kbatch
from kbatch.log.fetch import IsolationLevel, UnreadableDataError, read_log
from kbatch.log.summary import SummaryCache, batch_facts, histogram, summarize

from support import read_path_cases as C

CASES = sorted(C.CASES)
BROKERS = os.path.join(os.path.dirname(__file__), "..", "data", "brokers")


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return C.build_all(str(tmp_path_factory.mktemp("summary")))


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def truth(part, isolation, skip, lo=None, hi=None):
    """(records as (offset, timestamp), producers {(pid, epoch): records}, the range it stopped at,
    every range met) by read_log, record by record."""
    log = kbatch.Log.open(part)
    try:
        res = read_log(log, log.beginning_offset() if lo is None else lo, hi, isolation=isolation, skip_unreadable=skip)
        rows, prods, stop = [], {}, None
        try:
            for b, r in res.records():
                rows.append((r.offset, r.timestamp))
                if b.magic >= 2 and b.producer_id >= 0:
                    k = (b.producer_id, b.producer_epoch)
                    prods[k] = prods.get(k, 0) + 1
        except UnreadableDataError as e:
            stop = e.range
        truth.problems = res.problems()  # what else the read says (an index the log contradicts, ...)
        return rows, prods, stop, list(res.unreadable)
    finally:
        log.close()


def figures(rows):
    offs = [o for o, _t in rows]
    ts = [t for _o, t in rows if t is not None]
    return dict(records=len(rows), first_offset=offs[0] if offs else None, last_offset=offs[-1] if offs else None,
                min_timestamp=min(ts) if ts else None, max_timestamp=max(ts) if ts else None,
                records_without_timestamp=len(rows) - len(ts))


def got_figures(rs):
    return {k: getattr(rs, k) for k in ("records", "first_offset", "last_offset", "min_timestamp", "max_timestamp",
                                        "records_without_timestamp")}


def check_equal(part, lo=None, hi=None, skip=True, **kw):
    """summarize(part) against read_log at both isolation levels; returns the summary."""
    want = {n: truth(part, iso, skip, lo, hi) for n, iso in C.ISOLATION.items()}
    problems = truth(part, IsolationLevel.READ_UNCOMMITTED, skip, lo, hi) and truth.problems
    log = kbatch.Log.open(part)
    try:
        try:
            s = summarize(log, lo, hi, skip_unreadable=skip, cache=False, **kw)
        except UnreadableDataError as e:
            stops = [want[n][2] for n in ("read_uncommitted", "read_committed") if want[n][2] is not None]
            assert not skip and stops and e.range == stops[0]
            return None
        for n in C.ISOLATION:
            rows, prods, stop, met = want[n]
            assert stop is None, (n, stop)
            rs = s.level(n)
            assert got_figures(rs) == figures(rows), n
            assert {(p.producer_id, p.producer_epoch): p.records for p in rs.producers if p.records} == prods, n
            assert [str(u) for u in rs.unreadable] == [str(u) for u in met], n
        assert s.problems == problems
        return s
    finally:
        log.close()


# ------------------------------------------------------------------------------------ the read-path matrix
@pytest.mark.parametrize("skip", [True, False], ids=["skip", "strict"])
@pytest.mark.parametrize("case", CASES)
def test_matrix_whole_log_and_ranges(parts, case, skip):
    check_equal(parts[case], skip=skip)
    log = kbatch.Log.open(parts[case])
    end = log.end_offset()
    log.close()
    rng = random.Random(case)
    for _ in range(3):
        lo, hi = sorted(rng.sample(range(0, end + 2), 2))
        check_equal(parts[case], lo, hi, skip=skip)


def test_matrix_partition_facts_match_the_batches(parts):
    """batches, bytes, control batches, commits/aborts, codecs: the batches a read_uncommitted read walks."""
    for case in ("txn-closed", "txn-open-no-txnindex", "crc-middle", "dl-old-broker"):
        log = kbatch.Log.open(parts[case])
        try:
            s = summarize(log, skip_unreadable=True, cache=False)
            fbs = [fb.batch for fb in read_log(log, log.beginning_offset(), skip_unreadable=True).batches()]
            assert s.batches == len(fbs)
            assert s.bytes == sum(b.size_in_bytes for b in fbs)
            assert s.control_batches == sum(1 for b in fbs if b.is_control)
            kinds = [r.key is not None and bytes(r.key)[3] for b in fbs if b.is_control for r in b]
            assert s.commits + s.aborts == len(kinds)
            facts = list(batch_facts(log, skip_unreadable=True, cache=False))
            assert [(f.position, f.base_offset, f.last_offset, f.record_count) for f in facts] == \
                [(b.position, b.base_offset, b.last_offset, b.record_count) for b in fbs]
            assert all(f.crc_ok for f in facts)
        finally:
            log.close()


def test_read_committed_stops_at_the_lso_and_leaves_aborted_out(parts):
    log = kbatch.Log.open(parts["txn-open"])
    try:
        s = summarize(log, cache=False)
        assert s.last_stable_offset < s.high_watermark
        assert s.read_committed.upper_offset == s.last_stable_offset
        assert s.read_committed.records < s.read_uncommitted.records
    finally:
        log.close()
    log = kbatch.Log.open(parts["txn-closed"])
    try:
        s = summarize(log, cache=False)
        assert s.read_committed.aborted_batches > 0 and s.aborts > 0
    finally:
        log.close()


# ------------------------------------------------------------------------------------ compacted and random logs
def _loggen(tmp_path, seed, n_segments, open_txn):
    from log.test_compaction import LogGen, write_segments

    gen = LogGen(seed, n_batches=40, open_txn=open_txn)
    d = tmp_path / f"t{seed}-0"
    write_segments(d, gen.segments(n_segments))
    kbatch.rebuild_indexes(d)
    return d


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_logs_then_compacted(tmp_path, backend, seed):
    """Codecs, LogAppendTime, negative / extended / missing timestamps, idempotent and
    transactional producers; then the cleaner's output: offset gaps, empty batches (stale
    maxTimestamp), delete horizons in baseTimestamp, aborted transactions removed."""
    from kbatch.log.cleaner import compact

    d = _loggen(tmp_path, seed, 3, open_txn=seed % 2 == 0)
    end = kbatch.Log.open(d)
    hw = end.end_offset()
    end.close()
    check_equal(str(d))
    for lo, hi in ((1, hw - 1), (hw // 2, None), (0, hw // 3)):
        check_equal(str(d), lo, hi)
    compact(d, 1_700_000_000_000, delete_retention_ms=86_400_000)
    s = check_equal(str(d))
    compact(d, 1_700_000_000_000 + 2 * 86_400_000, delete_retention_ms=86_400_000)
    s = check_equal(str(d))
    assert s is not None
    for lo, hi in ((1, hw - 1), (hw // 2, None)):
        check_equal(str(d), lo, hi)


def test_compacted_figures_say_what_fell_back(tmp_path):
    from kbatch.log.cleaner import compact

    d = _loggen(tmp_path, 11, 3, open_txn=False)
    compact(d, 1_700_000_000_000, delete_retention_ms=0)
    s = check_equal(str(d))
    assert s.fallbacks  # CreateTime batches of several records: the timestamps walk
    assert "min_timestamp" in s.fallbacks
    log = kbatch.Log.open(d)
    try:
        fast = summarize(log, timestamps=False, cache=False)
    finally:
        log.close()
    assert fast.read_uncommitted.min_timestamp is None or "min_timestamp" in fast.omitted
    assert "min_timestamp" in fast.omitted and fast.read_uncommitted.records_without_timestamp is None
    assert fast.read_uncommitted.records == s.read_uncommitted.records
    # the max from headers, but where a header has no clear one (this generator writes invalid
    # negative timestamps below -1, which a v2 header's -1 hides): then omitted, never guessed
    assert (fast.read_uncommitted.max_timestamp == s.read_uncommitted.max_timestamp) != (
        "max_timestamp" in fast.omitted)


# ------------------------------------------------------------------------------------ real brokers
def _broker_partitions(tmp_path):
    import lzma

    out = []
    for era in sorted(os.listdir(BROKERS)):
        src = os.path.join(BROKERS, era)
        if not os.path.isdir(src):
            continue
        dst = tmp_path / era
        shutil.copytree(src, dst)
        for root, _dirs, files in os.walk(dst):
            for f in files:
                if f.endswith(".xz"):
                    p = os.path.join(root, f)
                    with lzma.open(p) as z, open(p[:-3], "wb") as o:
                        o.write(z.read())
                    os.unlink(p)
        for name in sorted(os.listdir(dst)):
            p = dst / name
            if p.is_dir() and any(f.endswith(".log") for f in os.listdir(p)):
                out.append(str(p))
    return out


def test_real_broker_data(tmp_path):
    parts = _broker_partitions(tmp_path)
    assert len(parts) >= 6
    for p in parts:
        s = check_equal(p)
        assert s is not None and s.read_uncommitted.records > 0


# ------------------------------------------------------------------------------------ histogram
@pytest.mark.parametrize("case", ["txn-open", "txn-closed", "dl-old-broker", "torn-active"])
def test_histogram_counts_the_records_own_timestamps(parts, case):
    for iso in C.ISOLATION.values():
        rows = truth(parts[case], iso, True)[0]
        for bucket in (1, 1000, 60_000):
            want: dict[int, int] = {}
            for _o, t in rows:
                if t is not None:
                    want[t - t % bucket] = want.get(t - t % bucket, 0) + 1
            log = kbatch.Log.open(parts[case])
            try:
                got, s = histogram(log, bucket, isolation=iso, skip_unreadable=True, cache=False)
            finally:
                log.close()
            assert got == want
            assert sum(got.values()) + s.level(iso).records_without_timestamp == len(rows)


def test_histogram_random_log(tmp_path, backend):
    d = _loggen(tmp_path, 21, 2, open_txn=True)
    for iso in C.ISOLATION.values():
        rows = truth(str(d), iso, True)[0]
        want: dict[int, int] = {}
        for _o, t in rows:
            if t is not None:
                want[t - t % 60_000] = want.get(t - t % 60_000, 0) + 1
        log = kbatch.Log.open(d)
        try:
            got, _s = histogram(log, 60_000, isolation=iso, cache=False)
        finally:
            log.close()
        assert got == want


# ------------------------------------------------------------------------------------ CRC, cache, trust
def _flip_inside_record(part):
    """Flip a byte of a record value in the middle of the first (sealed) segment: only the CRC sees it."""
    from support import partitions as P

    seg = P.segment_logs(part)[0]
    rows = P.batch_positions(seg)
    pos = rows[len(rows) // 2][0]
    nxt = rows[len(rows) // 2 + 1][0]
    with open(seg, "r+b") as f:
        f.seek(nxt - 3)
        b = f.read(1)
        f.seek(nxt - 3)
        f.write(bytes([b[0] ^ 0x01]))
    return seg, pos


def test_a_flipped_byte_is_found_by_default_not_by_trust_headers(tmp_path):
    from support import partitions as P

    part = str(tmp_path / "t-0")
    P.plain(part)
    seg, pos = _flip_inside_record(part)
    log = kbatch.Log.open(part)
    try:
        with pytest.raises(UnreadableDataError) as ei:
            summarize(log, cache=False)
        assert ei.value.range.path == seg and ei.value.range.position == pos
        trusted = summarize(log, trust_headers=True, cache=False)
        assert trusted.crc == "trusted" and not trusted.unreadable
        assert trusted.read_uncommitted.records == 200  # it counts the damaged batch as good
    finally:
        log.close()


def test_cache_remembers_sealed_segments_and_is_never_trusted_blindly(tmp_path):
    from support import partitions as P

    part = str(tmp_path / "t-0")
    P.plain(part)
    cache = SummaryCache(str(tmp_path / "cache"))
    n_segs = len(P.segment_logs(part))
    log = kbatch.Log.open(part)
    try:
        first = summarize(log, cache=cache)
        assert first.cached_segments == 0 and first.scanned_segments == n_segs
        headers = [f for f in os.listdir(cache.directory) if not f.endswith(".ts.bin")]
        sealed = [f for f in headers if not f.endswith(".prefix.bin")]
        assert len(sealed) == n_segs - 1 and len(headers) == n_segs   # the active segment: its prefix
        assert first.scanned_bytes == log.size and first.cached_bytes == 0
        again = summarize(log, cache=cache)
        assert again.cached_segments == n_segs and again.scanned_segments == 0
        assert again.cached_bytes == log.size and again.scanned_bytes == 0
        counters = ("cached_segments", "scanned_segments", "cached_bytes", "scanned_bytes")
        assert again.to_dict() | {k: first.to_dict()[k] for k in counters} == first.to_dict()
    finally:
        log.close()
    # a changed file (same size, bytes flipped inside a record, mtime moved): scanned and checked again
    seg, pos = _flip_inside_record(part)
    st = os.stat(seg)
    os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    log = kbatch.Log.open(part)
    try:
        with pytest.raises(UnreadableDataError) as ei:
            summarize(log, cache=cache)
        assert ei.value.range.position == pos
    finally:
        log.close()
    # the same change with the mtime put back: the last batch header check still tells... only when
    # the change reaches it; a damaged cache entry is ignored, never trusted
    for name in os.listdir(cache.directory):
        with open(os.path.join(cache.directory, name), "r+b") as f:
            f.seek(os.path.getsize(f.name) // 2)   # inside a member (zip checks its CRC-32)
            f.write(b"garbage!")
    shutil.rmtree(part)
    P.plain(part)
    log = kbatch.Log.open(part)
    try:
        s = summarize(log, cache=cache)
        assert s.cached_segments == 0 and s.read_uncommitted.records == 200
    finally:
        log.close()


def test_cache_entry_for_another_file_content_is_ignored(tmp_path):
    """An entry whose identity matches but whose last batch header differs (a file rewritten in
    place with its mtime restored) is not used."""
    from support import partitions as P

    part = str(tmp_path / "t-0")
    P.plain(part)
    cache = SummaryCache(str(tmp_path / "cache"))
    log = kbatch.Log.open(part)
    try:
        summarize(log, cache=cache)
    finally:
        log.close()
    seg = P.segment_logs(part)[0]
    rows = P.batch_positions(seg)
    st = os.stat(seg)
    with open(seg, "r+b") as f:   # the last batch's producer epoch byte (in its header, under the CRC)
        f.seek(rows[-1][0] + 51)
        b = f.read(1)
        f.seek(rows[-1][0] + 51)
        f.write(bytes([b[0] ^ 0x01]))
    os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))
    log = kbatch.Log.open(part)
    try:
        with pytest.raises(UnreadableDataError):
            summarize(log, cache=cache)
    finally:
        log.close()


def test_default_cache_dir_env(monkeypatch, tmp_path):
    from kbatch.log.summary import default_cache_dir

    monkeypatch.setenv("KBATCH_SUMMARY_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == str(tmp_path / "c")
    monkeypatch.setenv("KBATCH_SUMMARY_CACHE", "off")
    assert default_cache_dir() is None
    monkeypatch.delenv("KBATCH_SUMMARY_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == os.path.join(str(tmp_path / "x"), "kbatch", "summaries")


def test_facts_fields(parts):
    log = kbatch.Log.open(parts["txn-closed"])
    try:
        facts = list(batch_facts(log, isolation="read_committed", cache=False))
    finally:
        log.close()
    assert any(f.aborted for f in facts) and any(f.is_control for f in facts)
    assert all(f.segment.endswith(".log") and f.size > 0 for f in facts)
    data = [f for f in facts if f.producer_id >= 0 and not f.is_control]
    assert all(f.last_sequence == f.base_sequence + f.last_offset - f.base_offset for f in data)
    assert np.all(np.diff([f.base_offset for f in facts]) > 0)


# ------------------------------------------------------------------------------------ the header-only scan
def _drain(gen):
    cols, err = [], None
    while True:
        try:
            cols.append({k: np.array(v) for k, v in next(gen).items() if isinstance(v, np.ndarray)})
        except StopIteration as stop:
            return cols, stop.value, None
        except kbatch.KBatchError as e:
            return cols, None, (type(e), str(e), e.position)


@pytest.mark.parametrize("case", CASES)
def test_header_only_scan_is_the_scan(parts, case, monkeypatch, backend):
    """trust_headers reads only the batch headers of large batches (_hop_scan): the same columns,
    the same end and the same error at the same byte as the scan that reads every byte."""
    from kbatch.log import summary as S

    monkeypatch.setattr(S, "_HOP_MIN_BATCH", 0)
    log = kbatch.Log.open(parts[case])
    try:
        for seg in log.segments:
            for start in (0, *[int(p) for p in list(_first_positions(seg))[1:3]]):
                want_cols, want_end, want_err = _drain(seg.log.scan(start, False))
                got_cols, got_end, got_err = _drain(S._hop_scan(seg, start))
                assert (got_end, got_err) == (want_end, want_err)
                cat = lambda cs, k: np.concatenate([c[k] for c in cs]) if cs else np.zeros(0)  # noqa: E731
                for k in ("position", "size", "magic", "base_offset", "last_offset", "record_count", "attributes",
                          "max_timestamp", "producer_id", "base_sequence", "crc"):
                    assert cat(got_cols, k).tolist() == cat(want_cols, k).tolist(), k
        check_equal(parts[case], trust_headers=True) if case not in C.FAILING else None
    finally:
        log.close()


def _first_positions(seg):
    gen = seg.log.scan(0, False)
    try:
        return next(gen)["position"]
    except (StopIteration, kbatch.KBatchError):
        return []
    finally:
        gen.close()


def test_cache_remembers_the_timestamps_walk(tmp_path):
    """The timestamps of a verified sealed segment's CreateTime batches are remembered: a second
    summary and histogram give the same answers without walking them; a damaged entry is ignored."""
    d = _loggen(tmp_path, 31, 4, open_txn=False)
    cache = SummaryCache(str(tmp_path / "cache"))
    log = kbatch.Log.open(d)
    try:
        first = summarize(log, cache=cache).to_dict()
        h1 = histogram(log, 60_000, cache=cache)[0]
        assert [f for f in os.listdir(cache.directory) if f.endswith(".ts.bin")]
        calls = []
        import kbatch.log.summary as S

        real = S._fields_of
        S._fields_of = lambda s, j: calls.append(int(s["base_offset"][j])) or real(s, j)
        try:
            again = summarize(log, cache=cache).to_dict()
            h2 = histogram(log, 60_000, cache=cache)[0]
        finally:
            S._fields_of = real
        for k in ("cached_segments", "scanned_segments", "cached_bytes", "scanned_bytes"):
            first.pop(k), again.pop(k)
        assert again == first and h2 == h1
        # no batch was walked again: a sealed segment's and the active segment's verified prefix's
        # timestamps come from the cache
        assert not calls
        for name in os.listdir(cache.directory):
            if name.endswith(".ts.bin"):
                with open(os.path.join(cache.directory, name), "r+b") as f:
                    f.seek(60)
                    f.write(b"\xff" * 16)
        zero = {"cached_segments": 0, "scanned_segments": 0, "cached_bytes": 0, "scanned_bytes": 0}
        assert summarize(log, cache=cache).to_dict() | zero == first | zero
    finally:
        log.close()


class _Seg:
    """What _hop_scan uses of a LogSegment: its .log and size."""

    def __init__(self, path):
        from kbatch.record.file_records import FileRecords

        self.log = FileRecords(path)
        self.size = self.log.size_in_bytes


def test_header_only_scan_is_the_scan_on_random_bytes(tmp_path_factory, monkeypatch):
    """Random segments (v2 batches of any size and codec, legacy entries, then a byte of a header
    changed or the file cut anywhere): the header-only scan gives the scan's columns, end and error."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kbatch.log import summary as S

    monkeypatch.setattr(S, "_HOP_MIN_BATCH", 0)
    d = tmp_path_factory.mktemp("hop")

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(st.integers(1, 30), st.sampled_from([0, 1, 2]), st.booleans()), min_size=1, max_size=12),
           st.integers(0, 10**6), st.integers(0, 255), st.integers(0, 3))
    def run(batches, where, value, how):
        data = b""
        off = 0
        for n, magic, codec in batches:
            b = kbatch.BatchBuilder(magic=magic, base_offset=off,
                                    compression=kbatch.Compression.GZIP if codec else kbatch.Compression.NONE)
            for i in range(n):
                b.append(1_700_000_000_000 + i, b"k%d" % i, b"v" * (i * 7))
            data += b.build()
            off += n
        at = where % len(data)
        if how == 1:
            data = data[:at]
        elif how == 2:
            data = data[:at] + bytes([value]) + data[at + 1:]
        p = d / f"{len(data)}-{at}-{value}-{how}.log"
        p.write_bytes(data)
        seg = _Seg(str(p))
        try:
            want_cols, want_end, want_err = _drain(seg.log.scan(0, False))
            got_cols, got_end, got_err = _drain(S._hop_scan(seg, 0))
        finally:
            seg.log.close()
        assert (got_end, got_err) == (want_end, want_err)
        cat = lambda cs, k: np.concatenate([c[k] for c in cs]).tolist() if cs else []  # noqa: E731
        for k in ("position", "size", "magic", "base_offset", "last_offset", "record_count", "attributes",
                  "first_timestamp", "max_timestamp", "producer_id", "crc"):
            assert cat(got_cols, k) == cat(want_cols, k), k

    run()


@pytest.mark.parametrize("case", ["txn-closed", "dl-old-broker", "dl-missing-index"])
def test_time_range_is_the_lookups_offsets(parts, case):
    """start_time / end_time: from the first record at or after each (ListOffsets, as cat's s@T / e@T)."""
    log = kbatch.Log.open(parts[case])
    try:
        ts = sorted({t for _o, t in truth(parts[case], IsolationLevel.READ_UNCOMMITTED, True)[0] if t is not None})
        for t0, t1 in ((ts[len(ts) // 4], ts[3 * len(ts) // 4]), (ts[0] - 1, ts[-1] + 1), (ts[-1] + 1, None)):
            lo = log.offset_for(t0)
            hi = log.offset_for(t1) if t1 is not None else None
            by_time = summarize(log, start_time=t0, end_time=t1, skip_unreadable=True, cache=False).to_dict()
            by_offset = summarize(log, lo.offset if lo is not None else log.end_offset(),
                                  hi.offset if hi is not None else None, skip_unreadable=True, cache=False).to_dict()
            for d in (by_time, by_offset):   # what was read for the answer depends on what the Log knew
                d.pop("scanned_bytes"), d.pop("scanned_segments")
            assert by_time == by_offset
            check_equal(parts[case], lo.offset if lo is not None else log.end_offset(),
                        hi.offset if hi is not None else None)
    finally:
        log.close()


def test_segment_facts_lists_every_batch_and_goes_on(parts):
    from kbatch.log.summary import segment_facts
    from support import partitions as P

    for case, bad_crc, damaged in (("crc-middle", 1, 0), ("bad-length-middle", 0, 1), ("torn-active", 0, 0),
                                   ("txn-closed", 0, 0)):
        log = kbatch.Log.open(parts[case])
        try:
            damage = []
            facts = list(segment_facts(log, cache=False, damage=damage))
            trusted = list(segment_facts(log, trust_headers=True, cache=False))
        finally:
            log.close()
        assert sum(1 for f in facts if f.crc_ok is False) == bad_crc, case
        assert len(damage) == damaged, case
        assert [f[:14] for f in trusted] == [f[:14] for f in facts] and all(f.crc_ok is None for f in trusted)
        on_disk = [(seg, pos) for seg in P.segment_logs(parts[case]) for pos, _b, _l in P.batch_positions(seg)]
        if not damaged:
            assert [(f.segment, f.position) for f in facts] == on_disk[:len(facts)], case


def test_without_memory_for_the_second_level(parts, tmp_path, monkeypatch):
    """Past _MEMO_ROWS the second isolation level reads the headers again (the answers do not
    change) and sealed segments are still cached."""
    from kbatch.log import summary as S

    monkeypatch.setattr(S, "_MEMO_ROWS", 0)
    check_equal(parts["txn-closed"])
    cache = SummaryCache(str(tmp_path / "c"))
    log = kbatch.Log.open(parts["txn-closed"])
    try:
        summarize(log, cache=cache)
        again = summarize(log, cache=cache)
        assert again.cached_segments == len(log.segments) and again.cached_bytes == log.size
    finally:
        log.close()
