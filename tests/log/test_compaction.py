"""kbatch.compact: the broker's log cleaner over segment files, against a dictionary oracle.

Test logs are written with BatchBuilder straight into 20-digit segment files, so these tests do
not depend on Log.create. Every test runs on both backends (`backend` fixture).
"""
from __future__ import annotations

import os
import struct
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch import _wire as W
from kbatch.log import cleaner as compaction
from kbatch.log.cleaner import CleanerStats, OffsetMap, compact, empty_batch_header, recover, with_last_offset

DAY = 86_400_000
NOW = 1_700_000_000_000
CODECS = [kbatch.Compression.NONE, kbatch.Compression.GZIP, kbatch.Compression.LZ4, kbatch.Compression.ZSTD,
          kbatch.Compression.SNAPPY]


# ------------------------------------------------------------------------------------ log building
def write_segments(log_dir, segments):
    """segments: list of lists of batch bytes; each file is named after its first batch's base offset
    (or the `base` given as a (base, batches) tuple)."""
    os.makedirs(log_dir, exist_ok=True)
    for seg in segments:
        base, batches = seg if isinstance(seg, tuple) else (None, seg)
        if base is None:
            base = next(kbatch.iter_batches(batches[0])).base_offset
        with open(os.path.join(log_dir, f"{base:020d}.log"), "wb") as f:
            f.write(b"".join(batches))


def read_log(log_dir):
    """[(segment file name, [batch objects])] with bytes kept alive."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".log"):
            with open(os.path.join(log_dir, name), "rb") as f:
                data = f.read()
            out.append((name, list(kbatch.iter_batches(data))))
    return out


def snapshot(log_dir):
    """Every file's bytes, except the writers' `.lock` (an empty file that stays, as Kafka's does)."""
    res = {}
    for name in sorted(os.listdir(log_dir)):
        if name == ".lock":
            continue
        p = os.path.join(log_dir, name)
        if os.path.isfile(p):
            with open(p, "rb") as f:
                res[name] = f.read()
        else:
            res[name] = "<dir>"
    return res


def rec_tuple(r):
    return (r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
            r.is_tombstone, r.timestamp, tuple((k, None if v is None else bytes(v)) for k, v in r.headers))


def data_records(log_dir, aborted_offsets=frozenset()):
    """The non-control records of the log, minus offsets in `aborted_offsets`, as comparable tuples."""
    out = []
    for _name, batches in read_log(log_dir):
        for b in batches:
            if b.is_control:
                continue
            out.extend(rec_tuple(r) for r in b if r.offset not in aborted_offsets)
    return out


class LogGen:
    """Random partition with keys, tombstones (flagged with/without payload, null values), keyless
    records, negative and extended timestamps, codecs, idempotent and transactional producers
    (committed, aborted, one maybe left open), cut into several segments."""

    def __init__(self, seed, n_batches=40, n_keys=12, open_txn=False, magic2_only=True):
        self.rng = random.Random(seed)
        self.n_keys = n_keys
        self.next_offset = 0
        self.batches = []          # (bytes, info)
        self.aborted_offsets = set()
        self.txn_offsets = {}      # pid -> offsets of the open txn
        self.producers = {pid: 0 for pid in (1000, 1001, 1002)}  # pid -> next sequence
        for _ in range(n_batches):
            self._step()
        for pid in list(self.txn_offsets):
            if open_txn and pid == 1000:
                continue
            self._marker(pid, commit=self.rng.random() < 0.5)
        self.open_txn = open_txn and 1000 in self.txn_offsets

    def _record(self):
        rng = self.rng
        key = None if rng.random() < 0.05 else b"k%d" % rng.randrange(self.n_keys)
        kind = rng.random()
        tombstone = None
        if kind < 0.12:
            value = None
        elif kind < 0.2:
            value, tombstone = b"payload-%d" % rng.randrange(100), True
        else:
            value = b"v%d" % rng.randrange(10**6) * rng.randrange(1, 4)
        ts = rng.choice([NOW - rng.randrange(10**6), -rng.randrange(1, 10**12), 0, None, -(2**62)])
        headers = [("h", b"x")] if rng.random() < 0.2 else []
        return ts, key, value, headers, tombstone

    def _data_batch(self, pid=-1, transactional=False):
        rng = self.rng
        codec = rng.choice(CODECS)
        extended = rng.random() < 0.7
        lat = rng.random() < 0.1
        n = rng.randrange(1, 6)
        seq = self.producers.get(pid, -1) if pid >= 0 else -1
        b = kbatch.BatchBuilder(2, codec, self.next_offset, 1 if lat else 0, extended,
                                pid, 3 if pid >= 0 else -1, seq, transactional,
                                partition_leader_epoch=rng.randrange(5),
                                log_append_time=NOW - 5 if lat else None)
        offsets = []
        gap = 0
        for _ in range(n):
            ts, key, value, headers, tomb = self._record()
            if ts is None and not extended and rng.random() < 0.5:
                ts = 5
            offsets.append(b.append(ts, key, value, headers, tomb, offset=self.next_offset + gap))
            gap += 1
        if pid >= 0:
            self.producers[pid] = seq + gap
        self.next_offset += gap
        return b.build(), offsets

    def _marker(self, pid, commit):
        data = kbatch.build_end_txn_marker(producer_id=pid, producer_epoch=3, commit=commit, coordinator_epoch=7,
                                           base_offset=self.next_offset, timestamp=NOW)
        offsets = self.txn_offsets.pop(pid)
        if not commit:
            self.aborted_offsets.update(offsets)
        self.batches.append((data, "marker"))
        self.next_offset += 1

    def _step(self):
        rng = self.rng
        r = rng.random()
        if r < 0.5:
            data, _ = self._data_batch()
        elif r < 0.65:
            data, _ = self._data_batch(pid=1002)
        else:
            pid = rng.choice([1000, 1001])
            if pid in self.txn_offsets and rng.random() < 0.3:
                self._marker(pid, commit=rng.random() < 0.5)
                return
            data, offsets = self._data_batch(pid=pid, transactional=True)
            self.txn_offsets.setdefault(pid, []).extend(offsets)
        self.batches.append((data, "data"))

    def segments(self, n_segments):
        cuts = sorted(self.rng.sample(range(1, len(self.batches)), min(n_segments - 1, len(self.batches) - 1)))
        segs, prev = [], 0
        for c in cuts + [len(self.batches)]:
            segs.append([d for d, _ in self.batches[prev:c]])
            prev = c
        return segs


def oracle(segments, aborted_offsets, now, first_pass=True, clean_active=False):
    """Expected data records after one compaction of a log whose batches carry no horizon yet
    (first_pass) or whose tombstones' horizon has passed (first_pass=False)."""
    cleanable_n = len(segments) if clean_active else len(segments) - 1
    # an open transaction stops cleaning at the segment holding its first batch (handled by caller)
    recs = []
    for i, seg in enumerate(segments):
        for data in seg:
            for b in kbatch.iter_batches(data):
                if b.is_control:
                    continue
                for r in b:
                    recs.append((i, rec_tuple(r)))
    latest = {}
    for i, t in recs:
        if i < cleanable_n and t[1] is not None and t[0] not in aborted_offsets:
            latest[t[1]] = t[0]
    out = []
    for i, t in recs:
        if i >= cleanable_n:
            if t[0] not in aborted_offsets:  # the reader's view hides aborted data
                out.append(t)
            continue
        if t[0] in aborted_offsets or t[1] is None or latest[t[1]] != t[0]:
            continue
        if t[3] and not first_pass:
            continue
        out.append(t)
    return out


def cleanable_count(gen, segments):
    """Segments before the active one and before the one holding an open transaction's first batch."""
    n = len(segments) - 1
    if gen.open_txn:
        first = min(gen.txn_offsets[1000])
        for i, seg in enumerate(segments):
            last = max(b.last_offset for d in seg for b in kbatch.iter_batches(d))
            if last >= first:
                n = min(n, i)
                break
    return n


# ------------------------------------------------------------------------------------ unit pieces
def test_offset_map_digest_and_latest(backend):
    m = OffsetMap()
    m.put(b"a", 3)
    m.put(memoryview(b"a"), 5)
    m.put(b"x" * 40, 7)
    assert m.get(b"a") == 5 and m.get(b"x" * 40) == 7 and m.get(b"nope") == -1
    assert len(m) == 2
    m.update_latest_offset(9)
    m.update_latest_offset(4)
    assert m.latest_offset == 9


def test_empty_batch_header_is_61_bytes_and_valid(backend):
    b = kbatch.BatchBuilder(2, kbatch.Compression.LZ4, 100, 0, True, 42, 2, 17, True, partition_leader_epoch=9)
    for i in range(5):
        b.append(-1000 + i, b"k", b"v", offset=100 + i * 2)
    src = next(kbatch.iter_batches(b.build()))
    hdr = empty_batch_header(src)
    assert len(hdr) == W.RECORD_BATCH_OVERHEAD == 61
    e = next(kbatch.iter_batches(hdr))  # CRC verified
    assert (e.base_offset, e.last_offset, e.record_count, e.first_timestamp, e.max_timestamp) == (
        100, 108, 0, -1, src.max_timestamp)
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.partition_leader_epoch) == (42, 2, 17, 9)
    assert e.is_transactional and not e.is_control and e.timestamp_extended and e.compression == 0
    assert not e.has_delete_horizon and list(e) == []


def test_with_last_offset_patches_delta_and_crc(backend):
    b = kbatch.BatchBuilder(base_offset=10)
    b.append(1, b"k", b"v", offset=11)
    data = with_last_offset(b.build(), 15)
    batch = next(kbatch.iter_batches(data))
    assert batch.last_offset == 15 and [r.offset for r in batch] == [11]
    with pytest.raises(kbatch.KBatchError):
        with_last_offset(data, 9)


# ------------------------------------------------------------------------------------ behaviour
def _b(base, recs, **kw):
    b = kbatch.BatchBuilder(base_offset=base, **kw)
    for r in recs:
        b.append(*r)
    return b.build()


def test_latest_per_key_keyless_dropped_active_untouched(tmp_path, backend):
    d = tmp_path / "t-0"
    s0 = [_b(0, [(1, b"a", b"1"), (2, b"b", b"2"), (3, None, b"x")]), _b(3, [(4, b"a", b"3")])]
    s1 = [_b(4, [(5, b"a", b"4"), (6, None, b"y")])]
    write_segments(d, [s0, s1])
    active_before = (d / "00000000000000000004.log").read_bytes()
    stats = compact(d, NOW)
    assert isinstance(stats, CleanerStats)
    assert stats.invalid_records == 1 and stats.superseded_records == 1 and stats.segments_cleaned == 1
    got = data_records(d)
    assert [(o, k, v) for o, k, v, *_ in got] == [(1, b"b", b"2"), (3, b"a", b"3"), (4, b"a", b"4"), (5, None, b"y")]
    assert (d / "00000000000000000004.log").read_bytes() == active_before
    # the second batch lost nothing: byte for byte
    assert s0[1] in (d / "00000000000000000000.log").read_bytes()
    # rewritten first batch keeps its original lastOffset, base offset and fields
    first = read_log(d)[0][1][0]
    assert (first.base_offset, first.last_offset) == (0, 2)


def test_clean_active_segment_option(tmp_path, backend):
    d = tmp_path / "t-0"
    write_segments(d, [[_b(0, [(1, b"a", b"1")])], [_b(1, [(2, b"a", b"2"), (3, b"a", b"3")])]])
    d1 = tmp_path / "t-1"
    write_segments(d1, [[_b(0, [(1, b"a", b"1")])], [_b(1, [(2, b"a", b"2"), (3, b"a", b"3")])]])
    compact(d, NOW, clean_active_segment=True)
    assert [(o, v) for o, _k, v, *_ in data_records(d)] == [(2, b"3")]
    # both segments in one group: one segment, named after the first
    assert [n for n, _ in read_log(d)] == ["00000000000000000000.log"]
    compact(d1, NOW, clean_active_segment=True, segment_bytes=1)  # one to one
    assert data_records(d1) == data_records(d)
    # the first segment emptied; the file (base offset) stays
    assert read_log(d1)[0] == ("00000000000000000000.log", [])


def test_tombstone_horizon_stamped_then_dropped(tmp_path, backend):
    d = tmp_path / "t-0"
    recs = [(-5, b"a", b"1"), (10, b"a", None), (-(2**62), b"b", b"p", (), True), (None, b"c", b"3")]
    src = _b(0, recs, compression=kbatch.Compression.ZSTD, producer_id=-1)
    write_segments(d, [[src], [_b(4, [(1, b"z", b"z")])]])
    s1 = compact(d, NOW, delete_retention_ms=DAY)
    assert s1.delete_horizons_set == 1 and s1.tombstones_kept == 2
    (b,) = read_log(d)[0][1]
    assert b.has_delete_horizon and b.delete_horizon_ms == b.first_timestamp == NOW + DAY
    assert b.compression == kbatch.Compression.ZSTD and b.timestamp_extended
    assert (b.base_offset, b.last_offset) == (0, 3)
    # record timestamps unchanged (deltas recomputed against the horizon, negative ones too)
    assert [(r.offset, r.timestamp, r.is_tombstone, r.value) for r in b] == [
        (1, 10, True, None), (2, -(2**62), True, b"p"), (3, None, False, b"3")]
    assert b.max_timestamp == 10
    # before the horizon: nothing changes
    before = snapshot(d)
    s2 = compact(d, NOW + DAY - 1)
    assert snapshot(d) == before and s2.batches_copied == 1 and s2.batches_rebuilt == 0
    # at the horizon: tombstones go, the horizon stays on the rebuilt batch
    s3 = compact(d, NOW + DAY)
    assert s3.tombstones_removed == 2
    (b,) = read_log(d)[0][1]
    assert [(r.offset, r.value) for r in b] == [(3, b"3")] and b.delete_horizon_ms == NOW + DAY


def test_legacy_tombstones_use_segment_mtime_rule(tmp_path, backend):
    d = tmp_path / "t-0"
    old = [_b(0, [(1, b"a", b"1"), (2, b"a", None), (3, b"b", b"2")], magic=1)]
    new = [_b(3, [(4, b"c", None)], magic=1)]
    write_segments(d, [old, new, [_b(4, [(5, b"z", b"z")])]])
    t_new = NOW // 1000
    os.utime(d / "00000000000000000000.log", (t_new - 3 * 86400, t_new - 3 * 86400))
    os.utime(d / "00000000000000000003.log", (t_new, t_new))
    compact(d, NOW, delete_retention_ms=DAY)
    got = [(o, k, v) for o, k, v, *_ in data_records(d)]
    # old segment (older than the last cleaned one by > retention): its tombstone is dropped;
    # the newer segment's tombstone stays; the active segment is untouched
    assert got == [(2, b"b", b"2"), (3, b"c", None), (4, b"z", b"z")]
    # the two cleaned segments are one group: its segment keeps the last member's mtime (Kafka:
    # cleaned.lastModified = segments.last.lastModified), so the rule stays stable across passes
    assert not (d / "00000000000000000003.log").exists()
    assert int(os.stat(d / "00000000000000000000.log").st_mtime) == t_new
    d1 = tmp_path / "t-1"  # one to one: each keeps its own
    write_segments(d1, [old, new, [_b(4, [(5, b"z", b"z")])]])
    os.utime(d1 / "00000000000000000000.log", (t_new - 3 * 86400, t_new - 3 * 86400))
    os.utime(d1 / "00000000000000000003.log", (t_new, t_new))
    compact(d1, NOW, delete_retention_ms=DAY, segment_bytes=1)
    assert data_records(d1) == data_records(d)
    assert int(os.stat(d1 / "00000000000000000000.log").st_mtime) == t_new - 3 * 86400


def test_transactions_aborted_removed_markers_follow_horizon(tmp_path, backend):
    d = tmp_path / "t-0"
    pid_a, pid_c = 7, 8
    tx = dict(is_transactional=True, producer_epoch=1)
    batches = [
        _b(0, [(1, b"k", b"aborted")], producer_id=pid_a, base_sequence=0, **tx),
        _b(1, [(1, b"k", b"committed")], producer_id=pid_c, base_sequence=0, **tx),
        kbatch.build_end_txn_marker(producer_id=pid_a, producer_epoch=1, commit=False, coordinator_epoch=0,
                                    base_offset=2),
        kbatch.build_end_txn_marker(producer_id=pid_c, producer_epoch=1, commit=True, coordinator_epoch=0,
                                    base_offset=3),
        _b(4, [(2, b"k", b"later")]),
        _b(5, [(3, b"j", b"x")], producer_id=pid_a, base_sequence=1, **tx),
        _b(6, [(3, b"j", b"y")], producer_id=pid_a, base_sequence=2, **tx),
        kbatch.build_end_txn_marker(producer_id=pid_a, producer_epoch=1, commit=True, coordinator_epoch=0,
                                    base_offset=7),
    ]
    write_segments(d, [batches, [_b(8, [(9, b"z", b"z")])]])
    s = compact(d, NOW)
    assert s.aborted_records_removed == 1
    b = read_log(d)[0][1]
    # offset 0 (aborted) gone; 1 superseded, but it is pid_c's last data batch: header only (61 bytes);
    # 5 superseded and not its producer's last: gone
    assert [(x.base_offset, x.last_offset, x.record_count, x.is_control) for x in b] == [
        (1, 1, 0, False), (2, 2, 1, True), (3, 3, 1, True), (4, 4, 1, False), (6, 6, 1, False), (7, 7, 1, True)]
    # this run read the ABORT marker's transaction's batch (and removed it): as Kafka's cleaner, it keeps
    # the marker as it is; the COMMIT markers' transactions still hold a batch (the header-only one, and
    # offset 6): no horizon
    assert [x.has_delete_horizon for x in b if x.is_control] == [False, False, False]
    assert b[0].producer_id == pid_c and b[0].size_in_bytes == 61
    assert [rec_tuple(r)[:3] for x in b for r in x if not x.is_control] == [(4, b"k", b"later"), (6, b"j", b"y")]
    # the next run reads no batch of the aborted transaction: its marker gets the horizon
    compact(d, NOW)
    b = read_log(d)[0][1]
    assert [x.has_delete_horizon for x in b if x.is_control] == [True, False, False]
    # then idempotent at the same clock
    before = snapshot(d)
    compact(d, NOW)
    assert snapshot(d) == before
    # after the horizon, the emptied transactions' markers go
    s2 = compact(d, NOW + DAY)
    b = read_log(d)[0][1]
    assert s2.control_batches_removed == 1
    assert [(x.base_offset, x.is_control) for x in b] == [(1, False), (3, True), (4, False), (6, False), (7, True)]


def test_open_transaction_stops_cleaning(tmp_path, backend):
    d = tmp_path / "t-0"
    s0 = [_b(0, [(1, b"a", b"1")]), _b(1, [(1, b"a", b"2")], producer_id=5, producer_epoch=0,
                                           base_sequence=0, is_transactional=True)]
    s1 = [_b(2, [(1, b"a", b"3")])]
    s2 = [_b(3, [(1, b"a", b"4")])]
    write_segments(d, [s0, s1, s2])
    before = snapshot(d)
    s = compact(d, NOW)
    assert s.segments_cleaned == 0 and s.first_uncleanable_offset == 1
    assert snapshot(d) == before


def test_corrupt_input_raises_and_leaves_log(tmp_path, backend):
    d = tmp_path / "t-0"
    bad = bytearray(_b(0, [(1, b"a", b"1"), (2, b"a", b"2")]))
    bad[-1] ^= 0xFF
    write_segments(d, [(0, [bytes(bad)]), [_b(2, [(1, b"z", b"z")])]])
    before = snapshot(d)
    with pytest.raises(kbatch.UncleanablePartitionError) as ei:
        compact(d, NOW)
    assert isinstance(ei.value.__cause__, kbatch.CrcMismatchError)
    assert ei.value.position == 0 and "00000000000000000000.log" in str(ei.value)
    assert snapshot(d) == before


# ------------------------------------------------------------------------------------ oracle
def _check_fields_kept(segments, log_dir, previous_max=None, empty_max=True):
    """Every output batch is an input batch byte for byte, or keeps its identity fields.

    An emptied (header-only) batch keeps the maxTimestamp of the batch it was cleaned from, as
    Kafka's writeEmptyHeader does: after a second pass that is the first pass's rebuilt batch,
    whose max comes from its retained records (`previous_max`: base offset -> max timestamp)."""
    by_base = {}
    for seg in segments:
        for data in seg:
            for b in kbatch.iter_batches(data):
                by_base[b.base_offset] = (b, bytes(b.raw))
    for _name, batches in read_log(log_dir):
        for b in batches:
            src, raw = by_base[b.base_offset]
            if bytes(b.raw) == raw:
                continue
            assert b.last_offset == src.last_offset
            for f in ("producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch",
                      "timestamp_type", "timestamp_extended", "is_transactional", "is_control"):
                assert getattr(b, f) == getattr(src, f), f
            if b.record_count:
                assert b.compression == src.compression
            else:
                expected_max = (previous_max or {}).get(b.base_offset, src.max_timestamp)
                assert b.size_in_bytes == 61 and (b.max_timestamp == expected_max or not empty_max)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32), n_segments=st.integers(1, 5), open_txn=st.booleans())
def test_random_logs_match_dictionary_oracle(tmp_path_factory, backend, seed, n_segments, open_txn):
    gen = LogGen(seed, n_batches=30, open_txn=open_txn)
    segments = gen.segments(n_segments)
    d = tmp_path_factory.mktemp("log") / "topic-0"
    write_segments(d, segments)
    kbatch.rebuild_indexes(d)
    n_clean = cleanable_count(gen, segments)
    expect_segments = segments[:n_clean] + [sum(segments[n_clean:], [])] if n_clean < len(segments) else segments
    aborted = gen.aborted_offsets
    # pass 1: latest per key, tombstones kept (with a horizon), aborted + keyless gone
    compact(d, NOW, delete_retention_ms=DAY)
    got = data_records(d, aborted)
    assert got == oracle(expect_segments, aborted, NOW, first_pass=True, clean_active=False)
    assert not set(r[0] for r in data_records(d)) & {o for o in aborted if o < _first_unclean(segments, n_clean)}
    _check_fields_kept(segments, d)
    assert kbatch.verify_indexes(d).ok  # cleaned segments come with rebuilt indexes
    first_unclean = _first_unclean(segments, n_clean)
    for _name, batches in read_log(d):  # the cleaned part (one segment per group)
        for b in batches:
            if b.last_offset < first_unclean and any(r.is_tombstone for r in b) and not b.is_control:
                assert b.delete_horizon_ms == NOW + DAY
    # a second run at the same clock stamps horizons on the markers whose transactions the first
    # emptied (as Kafka's cleaner, a run after); the records stay; a third changes nothing
    compact(d, NOW, delete_retention_ms=DAY)
    assert data_records(d, aborted) == got
    before = snapshot(d)
    compact(d, NOW, delete_retention_ms=DAY)
    assert snapshot(d) == before
    # pass 2 past the horizon: tombstones gone from the cleaned part
    pass1_max = {b.base_offset: b.max_timestamp for _name, batches in read_log(d) for b in batches}
    compact(d, NOW + DAY, delete_retention_ms=DAY)
    assert data_records(d, aborted) == oracle(expect_segments, aborted, NOW, first_pass=False)
    _check_fields_kept(segments, d, pass1_max)
    compact(d, NOW + DAY, delete_retention_ms=DAY)  # markers emptied by the run before get their horizon
    assert data_records(d, aborted) == oracle(expect_segments, aborted, NOW, first_pass=False)
    before = snapshot(d)
    compact(d, NOW + DAY, delete_retention_ms=DAY)
    assert snapshot(d) == before


def test_a_marker_that_bumps_the_epoch_ends_the_producers_last_data_batch(tmp_path, backend):
    """Kafka 4 (KIP-890, transactions v2) writes each marker with the producer's epoch bumped; the
    broker's producer state then forgets the old epoch's batches, so its LogCleaner keeps no
    header-only batch for a superseded last data batch (Kafka 4.4.0's cleaner, seen in
    tests/system/test_real_kafka_writes.py); with the same epoch it keeps one."""
    for marker_epoch, kept in ((14, []), (13, [(1, 0)])):
        d = tmp_path / f"e{marker_epoch}" / "t-0"
        tx = dict(is_transactional=True, producer_id=5)
        write_segments(d, [[
            _b(0, [(1, b"k", b"old")]),
            _b(1, [(1, b"k", b"in txn")], producer_epoch=13, base_sequence=0, **tx),
            kbatch.build_end_txn_marker(producer_id=5, producer_epoch=marker_epoch, commit=True,
                                        coordinator_epoch=0, base_offset=2),
            _b(3, [(2, b"k", b"newest")]),
        ], [_b(4, [(3, b"z", b"z")])]])
        compact(d, NOW)
        b = read_log(d)[0][1]
        assert [(x.base_offset, x.record_count) for x in b if x.producer_id == 5 and not x.is_control] == kept


def test_txnindex_keeps_only_aborts_whose_transaction_this_run_read(tmp_path, backend):
    """A cleaned segment's .txnindex holds the aborted transactions whose ABORT marker the run kept
    because it read their batches (Kafka's cleanedIndex): kept on the run that removes the data,
    gone on the next. A stale entry would make a read_committed consumer (a broker serving the
    partition: tests/system/test_real_kafka_writes.py) skip the producer's later committed batches."""
    d = tmp_path / "t-0"
    tx = dict(is_transactional=True, producer_id=9, producer_epoch=0)
    write_segments(d, [[
        _b(0, [(1, b"k", b"aborted")], base_sequence=0, **tx),
        kbatch.build_end_txn_marker(producer_id=9, producer_epoch=0, commit=False, coordinator_epoch=0,
                                    base_offset=1),
        _b(2, [(2, b"j", b"committed")], base_sequence=1, **tx),
        kbatch.build_end_txn_marker(producer_id=9, producer_epoch=0, commit=True, coordinator_epoch=0,
                                    base_offset=3),
    ], [_b(4, [(3, b"z", b"z")])]])
    kbatch.rebuild_indexes(d)
    txn_file = d / f"{0:020d}.txnindex"

    def aborts() -> list[tuple[int, int, int]]:
        data = txn_file.read_bytes()
        return [struct.unpack_from(">qqq", data, i + 2) for i in range(0, len(data), 34)]

    assert aborts() == [(9, 0, 1)]
    compact(d, NOW)  # removes the aborted record, keeps its marker and the entry
    assert aborts() == [(9, 0, 1)]
    compact(d, NOW)  # the marker gets its horizon; no batch of that transaction read: no entry
    assert aborts() == []
    out = tmp_path / "copy" / "t-0"
    compact(d, NOW + DAY, output_dir=out)  # the same into a new directory
    compact(d, NOW + DAY)  # past the horizon: the ABORT marker goes
    assert (out / f"{0:020d}.txnindex").read_bytes() == txn_file.read_bytes() == b""
    with kbatch.Log.open(d) as log:
        assert [b.is_control for b in log.batches()].count(True) == 1  # the COMMIT marker stays
        got = [(r.offset, bytes(r.value)) for _b, r in log.read(isolation=1).records()]
    assert got == [(2, b"committed"), (4, b"z")]


def _first_unclean(segments, n_clean):
    if n_clean >= len(segments):
        return 2**63
    return next(kbatch.iter_batches(segments[n_clean][0])).base_offset


# ------------------------------------------------------------------------------------ crash safety
def _steps(tmp_path, segments):
    seen = []
    d = tmp_path / "probe" / "t-0"
    write_segments(d, segments)
    orig = compaction._checkpoint
    compaction._checkpoint = seen.append
    try:
        compact(d, NOW)
    finally:
        compaction._checkpoint = orig
    return seen, data_records(d)


class _Crash(Exception):
    pass


def _compact_stopped_at(monkeypatch, d, step: str, **kw) -> None:
    """compact(d, NOW, **kw) killed (an exception from its checkpoint hook) at `step`."""
    def crash(s):
        if s == step:
            raise _Crash(s)
    monkeypatch.setattr(compaction, "_checkpoint", crash)
    with pytest.raises(_Crash):
        compact(d, NOW, **kw)
    monkeypatch.setattr(compaction, "_checkpoint", lambda s: None)


def test_kill_at_every_step_leaves_a_readable_log(tmp_path, backend, monkeypatch):
    gen = LogGen(1234, n_batches=30)
    segments = gen.segments(4)
    steps, compacted = _steps(tmp_path, segments)
    assert "mapped" in steps and "swapping" in steps and any(s.startswith("swap-in:") for s in steps)
    original = None
    for i, step in enumerate(steps):
        d = tmp_path / f"run{i}" / "t-0"
        write_segments(d, segments)
        kbatch.rebuild_indexes(d)
        before = snapshot(d)
        original = data_records(d)

        _compact_stopped_at(monkeypatch, d, step)
        if steps.index(step) < steps.index("committed"):
            assert snapshot(d) == before, step  # input untouched, no stray files
        # readable at any point, and consistent: either the original or a partly compacted log
        view = data_records(d)
        assert view == original or len(view) <= len(original)
        recover(d)
        after_recover = data_records(d)
        assert after_recover in (original, compacted), step
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap")) or n.startswith(".kbatch")]
        assert kbatch.verify_indexes(d).ok, step
        compact(d, NOW)
        assert data_records(d) == compacted, step


def test_failure_while_writing_removes_new_files(tmp_path, backend, monkeypatch):
    d = tmp_path / "t-0"
    write_segments(d, LogGen(99).segments(3))
    before = snapshot(d)

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(compaction.LogCleaner, "_write_indexes", boom)
    with pytest.raises(OSError):
        compact(d, NOW)
    assert snapshot(d) == before


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_compressed_wrapper_rebuilt_with_codec(tmp_path, backend, magic):
    d = tmp_path / "t-0"
    src = _b(0, [(1, b"a", b"1"), (-7, b"b", b"2"), (3, b"a", b"3"), (4, None, b"x")], magic=magic,
             compression=kbatch.Compression.GZIP)
    write_segments(d, [(0, [src]), [_b(4, [(5, b"z", b"z")], magic=magic)]])
    compact(d, NOW)
    (b,) = read_log(d)[0][1]
    assert b.magic == magic and b.compression == kbatch.Compression.GZIP
    got = [(r.offset, r.timestamp, bytes(r.value)) for r in b]
    assert got == [(1, None if magic == 0 else -7, b"2"), (2, None if magic == 0 else 3, b"3")]


def test_log_open_for_writing_finishes_an_interrupted_compaction(tmp_path, backend, monkeypatch):
    """Log.open with a config runs the same recovery as a broker's LogLoader: no .cleaned/.swap
    left behind, and the log is the original or the compacted one."""
    segments = LogGen(99, n_batches=20).segments(3)
    steps, compacted = _steps(tmp_path, segments)
    step = next(s for s in steps if s.startswith("swap-in:"))
    d = tmp_path / "crashed" / "t-0"
    write_segments(d, segments)
    kbatch.rebuild_indexes(d)
    original = data_records(d)

    _compact_stopped_at(monkeypatch, d, step)
    assert [n for n in os.listdir(d) if n.endswith(".swap")]
    log = kbatch.Log.open(d, kbatch.LogConfig(), writable=True)
    log.close()
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap")) or n.startswith(".kbatch-cleaner")]
    assert data_records(d) in (original, compacted)


# ------------------------------------------------------------------------------------ a bounded key map
SMALL_MAP = 24 * 12  # 12 slots, 10 keys at Kafka's load factor: a pass maps a few batches


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32), n_segments=st.integers(2, 5), open_txn=st.booleans())
def test_a_full_key_map_cleans_in_passes_to_the_same_records(tmp_path_factory, backend, seed, n_segments, open_txn):
    """With a key map too small for the partition's keys, compaction runs several passes as
    Kafka's cleaner runs rounds (map until full, clean what was mapped, go on from there), and
    ends with the records a map holding every key gives, then and after the horizon."""
    gen = LogGen(seed, n_batches=50, n_keys=40, open_txn=open_txn)
    segments = gen.segments(n_segments)
    root = tmp_path_factory.mktemp("passes")
    big, small = root / "big" / "t-0", root / "small" / "t-0"
    write_segments(big, segments)
    write_segments(small, segments)
    want = compact(big, NOW, delete_retention_ms=DAY)
    got = compact(small, NOW, delete_retention_ms=DAY, dedupe_buffer_size=SMALL_MAP)
    assert data_records(small) == data_records(big)
    if want.distinct_keys > 10:
        assert got.passes > 1 and got.distinct_keys <= 10 and got.buffer_utilization <= 10 / 12
    assert want.passes == (1 if want.segments_cleaned else 0)
    for f in ("records_read", "bytes_read", "batches_read", "records_written", "segments_cleaned"):
        assert getattr(got, f) == getattr(want, f), f
    assert got.records_removed == want.records_removed
    assert kbatch.verify_indexes(small).ok
    # (an emptied batch keeps the max timestamp of the batch an earlier pass rebuilt, as across Kafka's rounds)
    _check_fields_kept(segments, small, empty_max=False)
    # converged after a second run at the same time (which may stamp horizons on emptied
    # transactions' markers, as Kafka's next round would): a third changes nothing
    compact(small, NOW, delete_retention_ms=DAY, dedupe_buffer_size=SMALL_MAP)
    before = snapshot(small)
    compact(small, NOW, delete_retention_ms=DAY, dedupe_buffer_size=SMALL_MAP)
    assert snapshot(small) == before
    compact(big, NOW + DAY, delete_retention_ms=DAY)
    compact(small, NOW + DAY, delete_retention_ms=DAY, dedupe_buffer_size=SMALL_MAP)
    assert data_records(small) == data_records(big)


def test_passes_in_a_dry_run_and_into_an_output_directory(tmp_path, backend):
    segments = LogGen(77, n_batches=50, n_keys=40).segments(4)
    d = tmp_path / "t-0"
    write_segments(d, segments)
    before = snapshot(d)
    dry = compact(d, NOW, dry_run=True, dedupe_buffer_size=SMALL_MAP)
    assert snapshot(d) == before and dry.passes > 1 and dry.dry_run
    out = compact(d, NOW, output_dir=tmp_path / "out" / "t-0", dedupe_buffer_size=SMALL_MAP)
    logs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    logs = [logs[0], logs[-1]]  # the cleaned segments, one group; the active one
    assert snapshot(d) == before and sorted(os.listdir(tmp_path / "out" / "t-0")) == sorted(
        logs + [n.replace(".log", s) for n in logs for s in (".index", ".timeindex")])
    real = compact(d, NOW, dedupe_buffer_size=SMALL_MAP)
    assert data_records(d) == data_records(tmp_path / "out" / "t-0")
    for f in ("records_read", "records_written", "bytes_written", "superseded_records", "passes"):
        assert getattr(dry, f) == getattr(out, f) == getattr(real, f), f


def test_a_key_map_smaller_than_one_batch_is_refused(tmp_path, backend):
    d = tmp_path / "t-0"
    b = kbatch.BatchBuilder()
    for i in range(5):
        b.append(NOW, b"k%d" % i, b"v")
    tail = kbatch.BatchBuilder(base_offset=5)
    tail.append(NOW, b"z", b"v")
    write_segments(d, [[b.build()], [tail.build()]])
    before = snapshot(d)
    with pytest.raises(kbatch.InvalidConfigurationError, match="key map is too small"):
        compact(d, NOW, dedupe_buffer_size=24 * 3)
    assert snapshot(d) == before
    with pytest.raises(kbatch.InvalidConfigurationError, match="too small"):
        compact(d, NOW, dedupe_buffer_size=10)
    assert snapshot(d) == before


def test_kill_at_every_step_of_several_passes(tmp_path, backend, monkeypatch):
    segments = LogGen(4321, n_batches=24, n_keys=30).segments(3)
    seen = []
    d = tmp_path / "probe" / "t-0"
    write_segments(d, segments)
    monkeypatch.setattr(compaction, "_checkpoint", seen.append)
    assert compact(d, NOW, dedupe_buffer_size=SMALL_MAP).passes > 1
    compacted = data_records(d)
    for i, step in enumerate(dict.fromkeys(seen)):
        d = tmp_path / f"run{i}" / "t-0"
        write_segments(d, segments)
        before, original = snapshot(d), data_records(d)

        _compact_stopped_at(monkeypatch, d, step, dedupe_buffer_size=SMALL_MAP)
        if seen.index(step) < seen.index("committed"):
            assert snapshot(d) == before, step
        recover(d)
        assert data_records(d) in (original, compacted), step
        compact(d, NOW, dedupe_buffer_size=SMALL_MAP)
        assert data_records(d) == compacted, step


# ------------------------------------------------------------------------------------ grouping (Kafka's groupSegmentsBySize)
def _one_batch_segments(bases, n_records=3):
    """One segment per base offset, each one batch of `n_records` distinct keys (nothing to remove)."""
    segs = []
    for base in bases:
        b = kbatch.BatchBuilder(base_offset=base)
        for i in range(n_records):
            b.append(NOW, b"k%d-%d" % (base, i), b"v")
        segs.append((base, [b.build()]))
    return segs


def _groups(d, **kw):
    c = compaction.LogCleaner(d, NOW, **kw)
    try:
        c.scan()
        return [[s.base_offset for s in g] for g in c.group_segments(c.cleanable)]
    finally:
        c.close()


def test_groups_follow_kafkas_size_index_and_offset_rules(tmp_path, backend):
    d = tmp_path / "t-0"
    write_segments(d, _one_batch_segments([0, 3, 6, 9, 12]))
    size = os.path.getsize(d / f"{0:020d}.log")
    assert _groups(d) == [[0, 3, 6, 9]]  # segment.bytes 1 GiB: the cleanable segments, one group
    assert _groups(d, segment_bytes=2 * size) == [[0, 3], [6, 9]]
    assert _groups(d, segment_bytes=3 * size - 1) == [[0, 3], [6, 9]]
    assert _groups(d, segment_bytes=3 * size) == [[0, 3, 6], [9]]
    assert _groups(d, segment_bytes=2 * size - 1) == [[0], [3], [6], [9]]
    # the summed .index sizes, and apart the summed .timeindex sizes, within segment.index.bytes
    # (.index bytes 24, 8, 8, 0; .timeindex bytes 12, 12, 36, 0)
    for base, (n_index, n_time) in {0: (3, 1), 3: (1, 1), 6: (1, 3), 9: (0, 0)}.items():
        (d / f"{base:020d}.index").write_bytes(b"\0" * 8 * n_index)
        (d / f"{base:020d}.timeindex").write_bytes(b"\0" * 12 * n_time)
    assert _groups(d, segment_index_bytes=31) == [[0], [3], [6], [9]]  # 24 + 8 .index bytes > 31
    assert _groups(d, segment_index_bytes=32) == [[0, 3], [6], [9]]  # 6 alone has 36 .timeindex bytes
    assert _groups(d, segment_index_bytes=36) == [[0, 3], [6, 9]]  # 24 + 8 + 8 .index bytes > 36
    assert _groups(d, segment_index_bytes=60) == [[0, 3, 6, 9]]


def test_groups_keep_offsets_within_int32_of_the_base(tmp_path, backend):
    """A segment joins a group only when its last offset (the next segment's base offset less
    one; for the last one grouped, the first uncleanable offset less one) is within Int.MaxValue
    of the group's base offset; an empty segment joins whatever its offsets."""
    big = 2**31
    d = tmp_path / "t-0"
    write_segments(d, _one_batch_segments([0, 10, big + 5, big + 20]))
    # 10's last offset estimate is big + 4; big + 5's is big + 19 (the active base less one)
    assert _groups(d) == [[0], [10], [big + 5]]
    d2 = tmp_path / "t-1"
    write_segments(d2, _one_batch_segments([0, 10, big - 5, big + 7]))
    assert _groups(d2) == [[0, 10], [big - 5]]  # big - 6 is within reach of 0; big + 6 is not
    d3 = tmp_path / "t-2"
    write_segments(d3, _one_batch_segments([10, 12, big + 10, big + 20]))
    assert _groups(d3) == [[10, 12], [big + 10]]  # 12's estimate is big + 9: 2**31 - 1 past 10
    d4 = tmp_path / "t-3"
    write_segments(d4, _one_batch_segments([10, 12, big + 11, big + 20]))
    assert _groups(d4) == [[10], [12], [big + 11]]  # big + 10: one past
    (d / f"{10:020d}.log").write_bytes(b"")  # empty: no offset check
    assert _groups(d) == [[0, 10], [big + 5]]


@pytest.mark.parametrize("seed", [3, 17, 29])
def test_a_group_is_one_segment_with_the_bytes_of_its_members_cleaned(tmp_path, backend, seed):
    """Each group becomes one segment named after its first member, holding exactly the bytes
    cleaning the members one by one writes, in order; its indexes are those a rebuild makes; the
    records are the dictionary oracle's."""
    gen = LogGen(seed, n_batches=60, n_keys=15)
    segments = gen.segments(6)
    one, grouped, halves = tmp_path / "one" / "t-0", tmp_path / "grouped" / "t-0", tmp_path / "halves" / "t-0"
    for d in (one, grouped, halves):
        write_segments(d, segments)
    kbatch.rebuild_indexes(one)
    sizes = [os.path.getsize(one / n) for n in sorted(os.listdir(one)) if n.endswith(".log")]
    compact(one, NOW, segment_bytes=1)  # every segment alone (none is empty)
    compact(grouped, NOW)
    limit = max(sum(sizes[i:i + 2]) for i in range(len(sizes) - 1))
    stats = compact(halves, NOW, segment_bytes=limit)
    logs_one = sorted(n for n in os.listdir(one) if n.endswith(".log"))
    assert len(logs_one) == len(segments)
    n_cleanable = cleanable_count(gen, segments)
    assert sorted(n for n in os.listdir(grouped) if n.endswith(".log")) == [logs_one[0]] + logs_one[n_cleanable:]
    for d in (grouped, halves):
        assert data_records(d) == data_records(one)
        assert kbatch.verify_indexes(d).ok
        logs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
        for i, name in enumerate(logs):
            members = [n for n in logs_one if name <= n < (logs[i + 1] if i + 1 < len(logs) else "~")]
            assert (d / name).read_bytes() == b"".join((one / n).read_bytes() for n in members), name
            if name >= logs_one[min(n_cleanable, len(logs_one) - 1)] and n_cleanable < len(logs_one):
                continue  # not cleaned
            rebuilt = tmp_path / "rebuilt" / name
            rebuilt.parent.mkdir(exist_ok=True)
            rebuilt.write_bytes((d / name).read_bytes())
            kbatch.rebuild_indexes(rebuilt, W.DEFAULT_INDEX_INTERVAL_BYTES)
            for suffix in (".index", ".timeindex"):
                assert (d / name.replace(".log", suffix)).read_bytes() == \
                    rebuilt.with_suffix(suffix).read_bytes(), (name, suffix)
            rebuilt.unlink()
    assert stats.segments_cleaned == n_cleanable
    assert not [n for n in os.listdir(grouped) if n.endswith((".deleted", ".swap", ".cleaned"))]


def test_grouped_output_directory_and_dry_run(tmp_path, backend):
    segments = LogGen(5, n_batches=40).segments(4)
    d = tmp_path / "t-0"
    write_segments(d, segments)
    before = snapshot(d)
    dry = compact(d, NOW, dry_run=True)
    out = compact(d, NOW, output_dir=tmp_path / "out" / "t-0")
    assert snapshot(d) == before
    logs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    assert sorted(n for n in os.listdir(tmp_path / "out" / "t-0") if n.endswith(".log")) == [logs[0], logs[-1]]
    real = compact(d, NOW)
    assert sorted(n for n in os.listdir(d) if n.endswith(".log")) == [logs[0], logs[-1]]
    assert all((tmp_path / "out" / "t-0" / n).read_bytes() == (d / n).read_bytes() for n in os.listdir(d)
               if n.endswith((".log", ".index", ".timeindex", ".txnindex")))
    assert data_records(d) == data_records(tmp_path / "out" / "t-0")
    for f in ("records_read", "records_written", "bytes_written", "batches_written", "superseded_records"):
        assert getattr(dry, f) == getattr(out, f) == getattr(real, f), f


def test_commit_marker_names_the_groups_and_an_unreadable_one_is_refused(tmp_path, backend):
    from kbatch.errors import CorruptCheckpointError
    from kbatch.log import loader

    d = tmp_path / "t-0"
    d.mkdir()
    loader.write_commit_marker(d, {0: [0, 5, 9], 20: [20]})
    assert loader.read_commit_marker(d) == {0: [0, 5, 9], 20: [20]}
    (d / loader.COMMIT_MARKER).write_bytes(b"")  # as kbatch wrote it before grouping: one to one
    assert loader.read_commit_marker(d) == {}
    (d / loader.COMMIT_MARKER).write_bytes(b"kbatch-compaction 1\ngroup 5 0\n")
    with pytest.raises(CorruptCheckpointError):
        loader.read_commit_marker(d)
    (d / loader.COMMIT_MARKER).unlink()
    assert loader.read_commit_marker(d) is None


@pytest.mark.parametrize("grouping", ["one-group", "pairs"])
def test_kill_at_every_step_of_a_grouped_swap(tmp_path, backend, monkeypatch, grouping):
    """compact() stopped at every step (the .deleted renames and removals of a many-to-one swap
    included): the input untouched before the commit; after it, readable as it is, and recover()
    (a writer's open) ends with the compacted log, every index verified."""
    gen = LogGen(2024, n_batches=40, n_keys=10)
    segments = gen.segments(5)
    probe = tmp_path / "probe" / "t-0"
    write_segments(probe, segments)
    sizes = [os.path.getsize(probe / n) for n in sorted(os.listdir(probe)) if n.endswith(".log")]
    kw = {} if grouping == "one-group" else {"segment_bytes": max(sum(sizes[i:i + 2]) for i in range(len(sizes) - 1))}
    seen = []
    monkeypatch.setattr(compaction, "_checkpoint", seen.append)
    compact(probe, NOW, **kw)
    monkeypatch.setattr(compaction, "_checkpoint", lambda s: None)
    compacted = data_records(probe)
    assert sum(n.endswith(".log") for n in os.listdir(probe)) < len(segments)
    assert any(s.startswith("delete-replaced:") for s in seen) and any(s.startswith("delete-deleted:") for s in seen)
    for i, step in enumerate(seen):
        d = tmp_path / f"run{i}" / "t-0"
        write_segments(d, segments)
        kbatch.rebuild_indexes(d)
        before, original = snapshot(d), data_records(d)

        _compact_stopped_at(monkeypatch, d, step, **kw)
        if i < seen.index("committed"):
            assert snapshot(d) == before, step
        view = data_records(d)  # read-only, before recovery: whole segments, nothing invented
        assert set(view) <= set(original) | set(compacted), step
        recover(d)
        assert data_records(d) == (original if i < seen.index("committed") else compacted), step
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap", ".deleted")) or n.startswith(".kbatch")]
        assert kbatch.verify_indexes(d).ok, step
        compact(d, NOW, **kw)
        assert data_records(d) == compacted, step


def test_a_swap_without_its_group_replaces_the_segments_within_its_offsets(tmp_path, backend):
    """A `.swap` no kbatch marker names (a broker's cleaner killed mid-swap, or kbatch's empty
    marker from before grouping) replaces, as Kafka's LogLoader decides, every segment whose base
    offset is within [its base, its next offset): none is left overlapping it."""
    segments = LogGen(11, n_batches=40).segments(4)
    done = tmp_path / "done" / "t-0"
    write_segments(done, segments)
    compact(done, NOW)
    logs = sorted(n for n in os.listdir(done) if n.endswith(".log"))
    assert len(logs) == 2
    for marker in (None, b""):
        d = tmp_path / f"crashed-{marker is None}" / "t-0"
        write_segments(d, segments)
        kbatch.rebuild_indexes(d)
        (d / (logs[0] + ".swap")).write_bytes((done / logs[0]).read_bytes())
        if marker is not None:
            from kbatch.log import loader
            (d / loader.COMMIT_MARKER).write_bytes(marker)
        recover(d)
        assert sorted(n for n in os.listdir(d) if n.endswith(".log")) == logs
        assert (d / logs[0]).read_bytes() == (done / logs[0]).read_bytes()
        assert data_records(d) == data_records(done)
        assert not [n for n in os.listdir(d) if n.endswith((".swap", ".deleted"))]
        assert kbatch.verify_indexes(d).ok


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32), n_segments=st.integers(2, 6), segment_bytes=st.integers(1, 4000),
       segment_index_bytes=st.integers(1, 200), small_map=st.booleans())
def test_any_grouping_keeps_the_records_and_the_bytes(tmp_path_factory, backend, seed, n_segments, segment_bytes,
                                                      segment_index_bytes, small_map):
    """Whatever segment.bytes and segment.index.bytes group, in one pass or several: the records of
    a one-to-one compaction, each output the bytes of its members' one-to-one outputs in order,
    indexes verified."""
    gen = LogGen(seed, n_batches=40, n_keys=30)
    segments = gen.segments(n_segments)
    root = tmp_path_factory.mktemp("any-grouping")
    one, grouped = root / "one" / "t-0", root / "grouped" / "t-0"
    write_segments(one, segments)
    write_segments(grouped, segments)
    kbatch.rebuild_indexes(grouped)
    kw = {"dedupe_buffer_size": SMALL_MAP} if small_map else {}
    compact(one, NOW, segment_bytes=1, segment_index_bytes=1, **kw)
    compact(grouped, NOW, segment_bytes=segment_bytes, segment_index_bytes=segment_index_bytes, **kw)
    assert data_records(grouped) == data_records(one)
    assert kbatch.verify_indexes(grouped).ok
    if not small_map:  # (with passes, a group's later pass reads the earlier pass's output of its members)
        logs_one = sorted(n for n in os.listdir(one) if n.endswith(".log"))
        logs = sorted(n for n in os.listdir(grouped) if n.endswith(".log"))
        for i, name in enumerate(logs):
            members = [n for n in logs_one if name <= n < (logs[i + 1] if i + 1 < len(logs) else "~")]
            assert (grouped / name).read_bytes() == b"".join((one / n).read_bytes() for n in members), name
