"""Reading a partition directory: offsets_for_times against the brute-force oracle (random logs:
out-of-order CreateTime, LogAppendTime, negative extended timestamps, empty segments, many
segments, targets before and after everything), the special targets, and KIP-79 errors."""
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.errors import (InvalidRequestError, UnknownTopicOrPartitionError,
                           UnsupportedForMessageFormatError)

from support import storage_oracle as oracle

HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=20)
LAT = kbatch.TimestampType.LOG_APPEND_TIME

batch_st = st.tuples(
    st.lists(st.one_of(st.integers(-500, 5000), st.none()), min_size=1, max_size=5),
    st.sampled_from(["kafka", "extended", "lat"]),
    st.integers(0, 400),
)
segment_st = st.lists(batch_st, max_size=8)
MTIME_MS = 3000  # the mtime given to every .log, so the fallback is deterministic


def build_log(directory, segments, epoch=5):
    os.makedirs(directory, exist_ok=True)
    off = 0
    for specs in segments:
        data = b""
        base = off
        for tss, kind, vs in specs:
            if kind == "lat":
                b = kbatch.BatchBuilder(base_offset=off, timestamp_type=LAT, log_append_time=abs(tss[0] or 0),
                                        timestamp_extended=False, partition_leader_epoch=epoch)
            else:
                b = kbatch.BatchBuilder(base_offset=off, timestamp_extended=kind == "extended",
                                        partition_leader_epoch=epoch)
            for t in tss:
                b.append(None if kind == "kafka" and t == -1 else t, b"k", b"x" * vs)
            data += b.build()
            off += len(tss)
        p = os.path.join(directory, f"{base:020d}.log")
        with open(p, "wb") as f:
            f.write(data)
    kbatch.rebuild_indexes(directory, index_interval_bytes=300)
    for n in os.listdir(directory):
        if n.endswith(".log"):
            os.utime(os.path.join(directory, n), ns=(MTIME_MS * 10**6, MTIME_MS * 10**6))
    return off


def as_tuple(hit):
    return None if hit is None else (hit.offset, hit.timestamp, hit.leader_epoch)


@HYP
@given(segments=st.lists(segment_st, min_size=1, max_size=5),
       targets=st.lists(st.integers(-600, 6000), min_size=1, max_size=15))
def test_offsets_for_times_matches_the_oracle(backend, tmp_path_factory, segments, targets):
    d = str(tmp_path_factory.mktemp("logs") / "t-0")
    build_log(d, segments)
    segs = oracle.log_segments(d)
    targets = targets + [-(2**63), 2**63 - 1]
    log = kbatch.Log.open(d)
    try:
        got = log.offsets_for_times(targets)
        want = [oracle.brute_offset_for_time(segs, t) for t in targets]
        assert [as_tuple(g) for g in got] == want
        offs, stamps = log.offsets_for_times(np.array(targets, dtype=np.int64))
        assert offs.tolist() == [-1 if w is None else w[0] for w in want]
        assert [s for s, w in zip(stamps.tolist(), want) if w is not None] == [w[1] for w in want if w is not None]
        best = oracle.brute_max_timestamp(segs)
        mt = log.offset_for(kbatch.MAX_TIMESTAMP)
        assert (None if mt is None else (mt.offset, mt.timestamp)) == (None if best is None else (best[1], best[0]))
    finally:
        log.close()


def test_dense_numpy_targets_take_the_header_pass(backend, tmp_path):
    d = str(tmp_path / "t-0")
    segs_spec = [[([(j * 37 + i * 11) % 3000 for i in range(4)], "kafka", 200) for j in range(60)]]
    build_log(d, segs_spec)
    segs = oracle.log_segments(d)
    targets = np.arange(-10, 3100, 7, dtype=np.int64)
    log = kbatch.Log.open(d)
    assert len(targets) * 8 >= log.segments[0].offset_index.entries  # the dense path is the one tested
    offs, stamps = log.offsets_for_times(targets)
    want = [oracle.brute_offset_for_time(segs, int(t)) for t in targets]
    assert offs.tolist() == [-1 if w is None else w[0] for w in want]
    assert [s for s, w in zip(stamps.tolist(), want) if w] == [w[1] for w in want if w]
    log.close()


def test_special_targets(backend, tmp_path):
    d = str(tmp_path / "t-0")
    n = build_log(d, [[([10, 30, 20], "kafka", 5)], [([30, 5], "kafka", 5), ([7], "lat", 5)]], epoch=3)
    log = kbatch.Log.open(d)
    assert log.beginning_offset() == 0 and log.end_offset() == n == 6
    assert log.offset_for(kbatch.EARLIEST) == kbatch.OffsetAndTimestamp(0, None, 3)
    assert log.offset_for(kbatch.LATEST) == kbatch.OffsetAndTimestamp(6, None, 3)
    # the max (30) is first reached in segment 0, at its record with offset 1
    assert log.offset_for(kbatch.MAX_TIMESTAMP) == kbatch.OffsetAndTimestamp(1, 30, 3)
    # enum members are never integers: -1 is a timestamp (first record with ts >= -1)
    assert log.offset_for(-1) == kbatch.OffsetAndTimestamp(0, 10, 3)
    assert log.offsets_for_times([kbatch.LATEST, 21, 31]) == [kbatch.OffsetAndTimestamp(6, None, 3),
                                                              kbatch.OffsetAndTimestamp(1, 30, 3), None]
    with pytest.raises(TypeError):
        log.offset_for("soon")
    log.close()


def test_mtime_fallback_selects_a_segment_without_timestamps(backend, tmp_path):
    d = str(tmp_path / "t-0")
    build_log(d, [[([None, None], "kafka", 5)], [([100, 200], "kafka", 5)]])
    log = kbatch.Log.open(d)
    # segment 0 has no timestamps: its largest timestamp is its mtime (3000), so any target <= 3000
    # picks it and finds nothing, as a broker answers
    assert log.segments[0].largest_timestamp == MTIME_MS
    assert log.offset_for(150) is None
    os.utime(log.segments[0].log.path, ns=(10**6, 10**6))  # mtime 1 ms
    assert kbatch.Log.open(d).offset_for(150) == kbatch.OffsetAndTimestamp(3, 200, 5)
    log.close()


def test_open_ignores_other_broker_files(backend, tmp_path):
    d = tmp_path / "orders-3"
    build_log(str(d), [[([1, 2], "kafka", 5)], [([3], "kafka", 5)]])
    for name in ("leader-epoch-checkpoint", "partition.metadata", "00000000000000000002.snapshot",
                 "00000000000000000000.log.deleted", "00000000000000000001.log.cleaned",
                 "00000000000000000001.log.swap", "00000000000000000002.index.swap"):
        (d / name).write_bytes(b"0\n1\n0 0\n")
    log = kbatch.Log.open(d)
    assert log.topic == "orders" and log.partition == 3
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert [r.offset for b in log.batches() for r in b] == [0, 1, 2]
    log.close()
    with pytest.raises(UnknownTopicOrPartitionError):
        kbatch.Log.open(tmp_path / "nope-0")


def test_multi_partition_offsets_for_times_and_kip79_errors(backend, tmp_path):
    build_log(str(tmp_path / "a-0"), [[([10, 20], "kafka", 5)]])
    build_log(str(tmp_path / "a-1"), [[([15], "kafka", 5)]])
    legacy = kbatch.BatchBuilder(magic=0)
    legacy.append(None, b"k", b"v")
    os.makedirs(tmp_path / "old-0")
    (tmp_path / "old-0" / "00000000000000000000.log").write_bytes(legacy.build())
    res = kbatch.offsets_for_times({("a", 0): 11, ("a", 1): kbatch.LATEST, ("old", 0): kbatch.EARLIEST},
                                   log_dir=tmp_path)
    assert res[("a", 0)] == kbatch.OffsetAndTimestamp(1, 20, 5)
    assert res[("a", 1)] == kbatch.OffsetAndTimestamp(1, None, 5)
    assert res[("old", 0)] == kbatch.OffsetAndTimestamp(0, None, None)
    res = kbatch.offsets_for_times([(("a", 0), 11), (("a", 0), 12), (("a", 1), 5), (("a", 1), 5),
                                    (("old", 0), 0), (("zzz", 0), 0)], log_dir=tmp_path)
    assert isinstance(res[("a", 0)], InvalidRequestError) and res[("a", 0)].error_code == 42
    assert res[("a", 1)] == kbatch.OffsetAndTimestamp(0, 15, 5)  # same target twice is fine
    assert isinstance(res[("old", 0)], UnsupportedForMessageFormatError) and res[("old", 0)].error_code == 43
    assert isinstance(res[("zzz", 0)], UnknownTopicOrPartitionError)


def test_reading_never_writes(backend, tmp_path):
    d = tmp_path / "t-0"
    build_log(str(d), [[([1, 2], "kafka", 5)]])
    os.unlink(d / "00000000000000000000.index")
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(kbatch.build_batch([(3, b"k", b"v")], base_offset=2)[:30])  # a torn last batch
    before = sorted((n, (d / n).read_bytes()) for n in os.listdir(d))
    log = kbatch.Log.open(d)
    assert log.offset_for(2) == kbatch.OffsetAndTimestamp(1, 2, 5)
    assert log.end_offset() == 2
    log.close()
    assert sorted((n, (d / n).read_bytes()) for n in os.listdir(d)) == before


def test_dense_numpy_targets_mixed_codecs_and_lat(backend, tmp_path):
    """The header pass answers uncompressed v2 batches with the find_timestamps_v2 kernel and
    the others batch by batch: both agree with single lookups (and the oracle)."""
    d = str(tmp_path / "t-0")
    os.makedirs(d)
    data, off = b"", 0
    for j in range(40):
        codec = kbatch.Compression.LZ4 if j % 3 == 1 else kbatch.Compression.NONE
        if j % 5 == 4:
            b = kbatch.BatchBuilder(base_offset=off, timestamp_type=LAT, log_append_time=100 * j + 50,
                                    compression=codec, partition_leader_epoch=j)
        else:
            b = kbatch.BatchBuilder(base_offset=off, compression=codec, partition_leader_epoch=j)
        for i in range(4):
            b.append(None if (i + j) % 7 == 0 else 100 * j + (i * 37) % 90, b"k", b"v" * 50)
        data += b.build()
        off += 4
    with open(os.path.join(d, f"{0:020d}.log"), "wb") as f:
        f.write(data)
    kbatch.rebuild_indexes(d, index_interval_bytes=300)
    segs = oracle.log_segments(d)
    targets = np.arange(-10, 4100, 3, dtype=np.int64)
    log = kbatch.Log.open(d)
    try:
        offs, stamps = log.offsets_for_times(targets)
        want = [oracle.brute_offset_for_time(segs, int(t)) for t in targets]
        assert offs.tolist() == [-1 if w is None else w[0] for w in want]
        assert [s for s, w in zip(stamps.tolist(), want) if w] == [w[1] for w in want if w]
        seg = log.segments[0]
        for start in (0, 41, 97):
            o, ts, ep = seg.find_offsets_by_timestamps(targets, start)
            single = [seg.find_offset_by_timestamp(int(t), start) for t in targets]
            assert o.tolist() == [-1 if h is None else h.offset for h in single]
            assert [(t, e) for t, e, h in zip(ts.tolist(), ep.tolist(), single) if h] == \
                [(h.timestamp, h.leader_epoch) for h in single if h]
    finally:
        log.close()


def _big_batches_log(d, n_batches=30, per_batch=48):
    """Batches of many records (single lookups walk them with the find_timestamps_v2 kernel):
    out-of-order CreateTime with records without a timestamp, extended negative timestamps,
    LogAppendTime and lz4 batches (those go through Record objects)."""
    os.makedirs(d)
    data, off = b"", 0
    for j in range(n_batches):
        kind = j % 5
        if kind == 3:
            b = kbatch.BatchBuilder(base_offset=off, timestamp_type=LAT, log_append_time=1000 * j + 500,
                                    timestamp_extended=False, partition_leader_epoch=j)
        else:
            b = kbatch.BatchBuilder(base_offset=off, timestamp_extended=kind == 2, partition_leader_epoch=j,
                                    compression=kbatch.Compression.LZ4 if kind == 4 else kbatch.Compression.NONE)
        for i in range(per_batch):
            ts = 1000 * j + (i * 37) % 900 - (1500 if kind == 2 else 0)
            b.append(None if kind == 0 and i % 9 == 0 else ts, b"key-%d" % i, b"v" * (i % 13),
                     headers=[("h", b"x")] if i % 4 == 0 else ())
        data += b.build()
        off += per_batch
    with open(os.path.join(d, f"{0:020d}.log"), "wb") as f:
        f.write(data)
    kbatch.rebuild_indexes(d, index_interval_bytes=500)
    return off


@pytest.mark.parametrize("start_offset", [0, 1237])
def test_single_list_and_numpy_lookups_agree_on_large_batches(backend, tmp_path, start_offset):
    """A single lookup walks an uncompressed CreateTime batch of many records with the kernel
    (no Record objects); a list of targets goes through the bulk lookup: both equal the oracle,
    epochs included, also with the log start offset inside a batch."""
    from kbatch.log import checkpoints as C

    root = tmp_path / "logs"
    d = str(root / "t-0")
    _big_batches_log(d)
    C.write_offset_checkpoint(root / "log-start-offset-checkpoint", {("t", 0): start_offset})
    segs = oracle.log_segments(d)
    targets = list(range(-2000, 31000, 97)) + [-(2**63), 2**63 - 1]
    log = kbatch.Log.open(d)
    try:
        assert log.beginning_offset() == start_offset
        want = [oracle.brute_offset_for_time(segs, t, start_offset) for t in targets]
        assert [as_tuple(log.offset_for(t)) for t in targets] == want
        assert [as_tuple(h) for h in log.offsets_for_times(targets)] == want
        assert [as_tuple(h) for h in log.offsets_for_times(tuple(np.int64(t) for t in targets))] == want
        mixed = log.offsets_for_times([kbatch.EARLIEST] + targets[:5] + [kbatch.LATEST])
        assert [as_tuple(h) for h in mixed[1:-1]] == want[:5]
        assert mixed[0].offset == start_offset and mixed[-1].offset == log.end_offset()
        offs, stamps = log.offsets_for_times(np.array(targets, dtype=np.int64))
        assert offs.tolist() == [-1 if w is None else w[0] for w in want]
        assert log.problems == []
    finally:
        log.close()


def test_list_targets_are_checked_like_single_ones(backend, tmp_path):
    d = str(tmp_path / "t-0")
    build_log(d, [[([10, 30, 20], "kafka", 5)]])
    log = kbatch.Log.open(d)
    try:
        assert log.offsets_for_times([]) == []
        assert log.offsets_for_times(iter([15, 25])) == [log.offset_for(15), log.offset_for(25)]
        for bad in ([1, True], [1, 2.5], [1, "x"], [np.float64(3)]):
            with pytest.raises(TypeError):
                log.offsets_for_times(bad)
        for bad in ([2**63], [1, -(2**63) - 1]):
            with pytest.raises(InvalidRequestError, match="int64"):
                log.offsets_for_times(bad)
    finally:
        log.close()


def test_a_corrupt_record_in_a_large_batch_is_reported_where_the_objects_report_it(backend, tmp_path, monkeypatch):
    """The kernel path of a single lookup and the Record-object path raise the same error class at
    the same file position (not the position inside the read window)."""
    from kbatch.log import segment

    d = str(tmp_path / "t-0")
    _big_batches_log(d, n_batches=10)
    path = os.path.join(d, f"{0:020d}.log")
    raw = bytearray(open(path, "rb").read())
    batches = list(kbatch.iter_batches(bytes(raw)))
    victim = batches[6]  # kind 1: plain CreateTime
    at = victim.position + 61 + 30  # inside its records, the CRC made to match: a batch that frames and
    raw[at:at + 6] = b"\xff" * 6     # passes its CRC check but whose records do not decode
    struct.pack_into(">I", raw, victim.position + 17, kbatch.crc32c(bytes(raw[victim.position + 21:
                                                                            victim.position + victim.size_in_bytes])))
    open(path, "wb").write(bytes(raw))
    errors = []
    for min_records in (segment._KERNEL_MIN_RECORDS, 10**9):
        monkeypatch.setattr(segment, "_KERNEL_MIN_RECORDS", min_records)
        log = kbatch.Log.open(d)
        try:
            with pytest.raises(kbatch.KBatchError) as e:
                log.offset_for(6000 + 500)
            errors.append((type(e.value), e.value.position, e.value.base_offset))
            assert str(e.value).startswith(path + ": ")  # the message names the file (issue 28 item 5)
        finally:
            log.close()
    assert errors[0] == errors[1] and victim.position < errors[0][1] < victim.position + victim.size_in_bytes
