"""Writing logs: LogConfig, append/roll against a simulation of Kafka's rules, indexes equal to a
rebuild after close, reopen-and-continue, torn writes, retention."""
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.errors import InvalidConfigurationError, InvalidTimestampError

from support import storage_oracle as oracle

HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None, max_examples=15)
LAT = kbatch.TimestampType.LOG_APPEND_TIME


def batch(timestamps, value_size=50):
    b = kbatch.BatchBuilder(timestamp_extended=False)
    for t in timestamps:
        b.append(t, b"key", b"v" * value_size)
    return b.build()


def files(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def assert_indexes_equal_rebuild(d, interval):
    before = files(d)
    copy = d + "-copy"
    shutil.copytree(d, copy)
    kbatch.rebuild_indexes(copy, index_interval_bytes=interval)
    assert files(copy) == before
    shutil.rmtree(copy)


def test_log_config_defaults_and_properties(backend):
    c = kbatch.LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.segment_jitter_ms, c.segment_index_bytes, c.index_interval_bytes,
            c.retention_ms, c.retention_bytes, c.max_message_bytes) == (
        1073741824, 604800000, 0, 10485760, 4096, 604800000, -1, 1048588)
    assert c.message_timestamp_type == kbatch.TimestampType.CREATE_TIME and c.cleanup_policy == "delete"
    assert c.compression_type == "producer" and c.timestamp_extended is False
    c = kbatch.LogConfig.from_properties({"segment.bytes": "1024", "message.timestamp.type": "LogAppendTime",
                                          "retention_ms": 5, "cleanup.policy": "compact,delete",
                                          "compression.type": "lz4", "timestamp.extended": "true",
                                          "unclean.leader.election.enable": "false"})
    assert c.segment_bytes == 1024 and c.message_timestamp_type == LAT and c.retention_ms == 5
    assert c.cleanup_policies == {"compact", "delete"} and c.compression == kbatch.Compression.LZ4
    assert c.timestamp_extended is True and c.extra == {"unclean.leader.election.enable": "false"}
    for bad in ({"segment.bytes": "big"}, {"message.timestamp.type": "Whenever"}, {"compression.type": "brotli"},
                {"cleanup.policy": "shred"}, {"segment.ms": "0"}):
        with pytest.raises(InvalidConfigurationError):
            kbatch.LogConfig.from_properties(bad)


appends_st = st.lists(st.tuples(st.lists(st.integers(0, 2000), min_size=1, max_size=4),  # record timestamps
                                st.integers(0, 600),                                   # value size
                                st.integers(0, 300)),                                  # clock step
                      min_size=1, max_size=25)


@HYP
@given(appends=appends_st, segment_bytes=st.sampled_from([400, 1500, 5000]),
       segment_ms=st.sampled_from([1, 300, 10**6]), interval=st.sampled_from([0, 200, 4096]),
       index_bytes=st.sampled_from([24, 48, 10485760]))
def test_append_rolls_like_kafka(backend, tmp_path_factory, appends, segment_bytes, segment_ms, interval,
                                 index_bytes):
    d = str(tmp_path_factory.mktemp("w") / "t-0")
    cfg = kbatch.LogConfig(segment_bytes=segment_bytes, segment_ms=segment_ms, index_interval_bytes=interval,
                           segment_index_bytes=index_bytes)
    now = 10_000
    log = kbatch.Log.create(d, cfg, now_ms=now)
    sim = oracle.RollSimulation(cfg, now)
    for tss, vs, step in appends:
        now += step
        data = batch(tss, vs)
        first = log.end_offset()
        if len(data) > segment_bytes:  # Kafka: RecordBatchTooLargeException, nothing appended
            with pytest.raises(kbatch.RecordTooLargeError):
                log.append(data, now_ms=now)
            continue
        info = log.append(data, now_ms=now)
        assert (info.first_offset, info.last_offset) == (first, first + len(tss) - 1)
        sim.append(len(data), max(tss), first, first + len(tss) - 1, now)
        assert [s.base_offset for s in log.segments] == sim.bases()
    log.close()
    assert_indexes_equal_rebuild(d, interval)
    records = [r.timestamp for b in kbatch.Log.open(d).batches() for r in b]
    assert records == [t for tss, vs, _ in appends if len(batch(tss, vs)) <= segment_bytes for t in tss]


def test_reopen_and_continue(backend, tmp_path):
    d = str(tmp_path / "t-0")
    cfg = kbatch.LogConfig(segment_bytes=3000, index_interval_bytes=300)
    log = kbatch.Log.create(d, cfg, now_ms=0)
    for i in range(10):
        log.append(batch([100 + i, 90 + i]), now_ms=i)
    log.close()
    log = kbatch.Log.open(d, cfg, writable=True, now_ms=50)
    assert log.end_offset() == 20 and log.recovery.truncated_bytes == 0
    for i in range(10):
        log.append(batch([200 + i]), now_ms=100 + i)
    assert log.end_offset() == 30
    log.close()
    assert_indexes_equal_rebuild(d, 300)
    log = kbatch.Log.open(d)
    assert [r.offset for b in log.batches() for r in b] == list(range(30))
    assert log.offset_for(205) == kbatch.OffsetAndTimestamp(25, 205, None)


def test_torn_write_is_truncated_on_open(backend, tmp_path, caplog):
    d = str(tmp_path / "t-0")
    cfg = kbatch.LogConfig(index_interval_bytes=100)
    log = kbatch.Log.create(d, cfg, now_ms=0)
    for i in range(5):
        log.append(batch([i, i + 1], 200), now_ms=i)
    log.flush()
    seg_path = log.active_segment.log.path
    good_size = os.path.getsize(seg_path)
    # a crash in the middle of writing the next batch, before any index entry for it
    with open(seg_path, "ab") as f:
        f.write(batch([9, 9, 9], 200)[:150])
    del log
    with caplog.at_level("WARNING", logger="kbatch.log"):
        log = kbatch.Log.open(d, cfg, writable=True, now_ms=10)
    assert log.recovery.truncated_bytes == 150 and "partial batch" in log.recovery.truncation_reason
    assert "Truncated 150 bytes" in caplog.text
    assert os.path.getsize(seg_path) == good_size and log.end_offset() == 10
    log.append(batch([50]), now_ms=20)
    log.close()
    assert_indexes_equal_rebuild(d, 100)
    assert [r.offset for b in kbatch.Log.open(d).batches() for r in b] == list(range(11))


def test_corrupt_index_is_rebuilt_on_open(backend, tmp_path):
    d = str(tmp_path / "t-0")
    cfg = kbatch.LogConfig(segment_bytes=2000, index_interval_bytes=100)
    log = kbatch.Log.create(d, cfg, now_ms=0)
    for i in range(20):
        log.append(batch([i], 200), now_ms=i)
    log.close()
    first_index = os.path.join(d, "00000000000000000000.index")
    good = open(first_index, "rb").read()
    with open(first_index, "wb") as f:
        f.write(good[:-5])
    log = kbatch.Log.open(d, cfg, writable=True)
    assert 0 in log.recovery.rebuilt_indexes
    log.close()
    assert open(first_index, "rb").read() == good


def test_rejected_append_leaves_the_log_unchanged(backend, tmp_path):
    d = str(tmp_path / "t-0")
    cfg = kbatch.LogConfig(message_timestamp_before_max_ms=1000)
    log = kbatch.Log.create(d, cfg, now_ms=0)
    log.append(batch([10_000]), now_ms=10_000)
    before = files(d)
    with pytest.raises(InvalidTimestampError):
        log.append(batch([10_500, 1]), now_ms=10_600)
    assert files(d) == before and log.end_offset() == 1
    log.close()


def test_log_append_time_is_stamped(backend, tmp_path):
    d = str(tmp_path / "t-0")
    log = kbatch.Log.create(d, kbatch.LogConfig(message_timestamp_type="LogAppendTime"), now_ms=0)
    info = log.append(batch([1, 2, 3]), now_ms=777)
    assert info.max_timestamp == 777
    assert [r.timestamp for b in log.batches() for r in b] == [777, 777, 777]
    assert log.offset_for(700) == kbatch.OffsetAndTimestamp(0, 777, None)
    log.close()


@HYP
@given(appends=appends_st, retention_ms=st.sampled_from([-1, 0, 500, 1500]),
       retention_bytes=st.sampled_from([-1, 0, 1000, 4000]), later=st.integers(0, 3000))
def test_retention_like_kafka(backend, tmp_path_factory, appends, retention_ms, retention_bytes, later):
    d = str(tmp_path_factory.mktemp("r") / "t-0")
    cfg = kbatch.LogConfig(segment_bytes=1200, segment_ms=10**9, retention_ms=retention_ms,
                           retention_bytes=retention_bytes)
    now = 0
    log = kbatch.Log.create(d, cfg, now_ms=now)
    sim = oracle.RollSimulation(cfg, now)
    for tss, vs, step in appends:
        now += step
        data = batch(tss, min(vs, 200))
        first = log.end_offset()
        log.append(data, now_ms=now)
        sim.append(len(data), max(tss), first, first + len(tss) - 1, now)
    now += later
    mtimes = {s.base_offset: s.last_modified_ms() for s in log.segments}
    want = sim.delete_old(now, mtimes)
    gone = log.delete_old_segments(now_ms=now)
    assert [g.base_offset for g in gone] == want
    assert [s.base_offset for s in log.segments] == sim.bases()
    assert log.beginning_offset() == log.segments[0].base_offset
    assert len(log.segments) >= 1
    assert sorted(n for n in os.listdir(d) if n.endswith(".log")) == [f"{b:020d}.log" for b in sim.bases()]
    log.close()
