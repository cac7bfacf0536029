"""Log.append_table: Arrow rows into a log through the encode_columns kernel and Log.append."""
import numpy as np
import pyarrow as pa
import pytest

import kbatch
from kbatch import Compression, LogConfig
from kbatch.columns import decode as A

NOW = 1_700_000_000_000


def rows_table(n, start=0, value=100, **extra):
    cols = {"key": pa.array([b"k%d" % i for i in range(start, start + n)]),
            "value": pa.array([b"v" * value] * n),
            "timestamp": pa.array(np.arange(start, start + n) + NOW, pa.timestamp("ms"))}
    cols.update(extra)
    return pa.table(cols)


def read_all(path):
    log = kbatch.Log.open(path)
    return kbatch.decode_columns(b"".join(bytes(s.log.buffer()) for s in log.segments))


def test_append_table_equals_encoding_then_append(backend, tmp_path):
    t = rows_table(3000)
    a = kbatch.Log.create(tmp_path / "a-0")
    info = a.append_table(t, NOW)
    a.close()
    b = kbatch.Log.create(tmp_path / "b-0")
    b.append(kbatch.encode_columns(t, timestamp_extended=False), NOW, from_client=False)
    b.close()
    assert (tmp_path / "a-0" / ("0" * 20 + ".log")).read_bytes() == (tmp_path / "b-0" / ("0" * 20 + ".log")).read_bytes()
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2999, 3000)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW + 2999, 2999)


def test_offsets_come_from_the_log_end_and_segments_roll(backend, tmp_path):
    path = tmp_path / "t-0"
    log = kbatch.Log.create(path, LogConfig(segment_bytes=64 * 1024))
    log.append_table(rows_table(1000))
    t = rows_table(2000, start=1000, offset=pa.array(np.arange(2000) * 7 + 5))  # an offset column is not read
    info = log.append_table(t)
    assert (info.first_offset, info.last_offset) == (1000, 2999)
    log.close()
    assert len(kbatch.Log.open(path).segments) > 3
    assert kbatch.verify_indexes(path).ok
    back = read_all(path)
    assert back.column("offset").to_pylist() == list(range(3000))
    assert back.column("key").to_pylist() == [b"k%d" % i for i in range(3000)]
    assert A.timestamps_ms(back.column("timestamp")).tolist() == list(range(NOW, NOW + 3000))
    assert kbatch.Log.open(path).offset_for(NOW + 1234).offset == 1234


def test_topic_codec_and_log_append_time(backend, tmp_path):
    log = kbatch.Log.create(tmp_path / "c-0", LogConfig(compression_type="lz4", message_timestamp_type="LogAppendTime"))
    info = log.append_table(rows_table(500), NOW + 10**6)
    assert not info.rebuilt and info.log_append_time == NOW + 10**6  # encoded as the topic wants: appended in place
    log.close()
    batches = list(kbatch.Log.open(tmp_path / "c-0").batches())
    assert {b.compression for b in batches} == {Compression.LZ4}
    assert set(A.timestamps_ms(read_all(tmp_path / "c-0").column("timestamp")).tolist()) == {NOW + 10**6}


def test_streamed_input_and_empty_tables(backend, tmp_path):
    log = kbatch.Log.create(tmp_path / "s-0")
    reader = pa.RecordBatchReader.from_batches(rows_table(1).schema, rows_table(2500).to_batches(max_chunksize=300))
    assert log.append_table(reader).record_count == 2500
    empty = log.append_table(rows_table(0))
    assert empty.record_count == 0 and log.end_offset() == 2500
    log.close()
    assert read_all(tmp_path / "s-0").num_rows == 2500


def files(d) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file() and p.name != ".lock"}


def two_part_table(n_good=500):
    """Rows whose later part KIP-937 refuses (a week old, with before.max.ms one hour)."""
    old = pa.array(np.full(500, NOW - 7 * 86_400_000), pa.timestamp("ms"))
    return pa.concat_tables([rows_table(n_good), rows_table(500, timestamp=old)])


@pytest.mark.parametrize("segment_bytes,rolled_before", [(1 << 20, False), (20_000, False), (20_000, True)])
def test_a_refused_piece_takes_the_ones_before_out_again(backend, tmp_path, monkeypatch, segment_bytes,
                                                         rolled_before):
    """A failed call leaves the files as they were: the pieces (Log.append calls) before the refused
    one are truncated away, across the segments they rolled, and the log goes on from where it was
    (in one segment; across rolls; from an empty active segment a roll() started)."""
    monkeypatch.setattr(kbatch.columns.encode, "APPEND_PIECE_BYTES", 12_000)
    d = tmp_path / "r-0"
    log = kbatch.Log.create(d, LogConfig(message_timestamp_before_max_ms=3_600_000, segment_bytes=segment_bytes,
                                         index_interval_bytes=1000))
    log.append_table(rows_table(300), NOW)
    if rolled_before:
        log.roll()
    before, segments = files(d), len(log.segments)
    with pytest.raises(kbatch.InvalidTimestampError) as e:
        log.append_table(two_part_table(), NOW, records_per_batch=30)  # pieces of three 30-record batches
    assert "append_table appended nothing" in str(e.value) and "offsets 300..299" not in str(e.value)
    assert not hasattr(e.value, "appended")
    assert files(d) == before and log.end_offset() == 300 and len(log.segments) == segments
    assert log.append_table(rows_table(10), NOW).first_offset == 300  # the log takes appends again
    log.close()
    assert kbatch.verify_indexes(d, index_interval_bytes=1000).matches_rebuild
    assert read_all(d).column("offset").to_pylist() == list(range(310))


def test_a_full_disk_in_a_later_piece_takes_the_earlier_ones_out(backend, tmp_path, monkeypatch):
    """ENOSPC on the fourth Log.append of the call: LogWriteError, and the three before are gone."""
    import errno
    import os

    monkeypatch.setattr(kbatch.columns.encode, "APPEND_PIECE_BYTES", 12_000)
    d = tmp_path / "f-0"
    log = kbatch.Log.create(d, LogConfig(segment_bytes=30_000))
    log.append_table(rows_table(100), NOW)
    before = files(d)
    real, calls = os.pwrite, []

    def pwrite(fd, data, offset):
        if len(data) > 3000:  # a batch (Log.append writes one at a time)
            calls.append(offset)
            if len(calls) == 10:  # the first batch of the fourth piece
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)
    monkeypatch.setattr(os, "pwrite", pwrite)
    with pytest.raises(kbatch.LogWriteError) as e:
        log.append_table(rows_table(1000), NOW, records_per_batch=30)
    monkeypatch.undo()
    assert e.value.errno == errno.ENOSPC and len(calls) == 10
    assert files(d) == before and log.end_offset() == 100
    log.close()


def test_a_kill_in_the_middle_recovers_to_where_the_call_started(backend, tmp_path, monkeypatch):
    """The log end to come back to is written down before the first piece, so a process that dies
    after some pieces (here: the state it leaves, the Log never closed) reopens without them."""
    monkeypatch.setattr(kbatch.columns.encode, "APPEND_PIECE_BYTES", 12_000)
    d = tmp_path / "k-0"
    log = kbatch.Log.create(d, LogConfig(segment_bytes=30_000))
    log.append_table(rows_table(100), NOW)
    log.flush()
    before = files(d)
    real = kbatch.Log.append

    def dies_in_the_fourth(self, *a, **kw):
        if self.end_offset() >= 100 + 3 * 90:
            raise SystemExit("killed")
        return real(self, *a, **kw)
    monkeypatch.setattr(kbatch.Log, "append", dies_in_the_fourth)
    monkeypatch.setattr(kbatch.log.unified_log.AppendGroup, "__exit__", lambda *a: False)  # no undo: the process is gone
    with pytest.raises(SystemExit):
        log.append_table(rows_table(1000), NOW, records_per_batch=30)
    assert log.end_offset() == 370
    for seg in log.segments:  # what a kill leaves: the files, no close, the lock dropped with the process
        seg.release()
    log._lock.release()
    monkeypatch.undo()
    log = kbatch.Log.open(d, LogConfig(segment_bytes=30_000), writable=True)
    assert log.end_offset() == 100 and files(d) == before
    log.close()


def test_bad_rows_are_refused_before_anything_is_written(backend, tmp_path):
    log = kbatch.Log.create(tmp_path / "b-0")
    t = pa.table({"value": [b"a", None], "isTombstone": [False, False]})
    with pytest.raises(kbatch.InvalidRecordError, match="at row 1"):
        log.append_table(t)
    assert log.end_offset() == 0 and log.size == 0


def test_a_note_that_cannot_be_removed_stops_the_log(backend, tmp_path, monkeypatch):
    """If the undo note of a call that succeeded cannot be removed, the Log stops taking writes
    (later appends would be taken away at the next open) and the call fails; a reopen undoes it."""
    import errno

    from kbatch.log import loader as log_loader

    monkeypatch.setattr(kbatch.columns.encode, "APPEND_PIECE_BYTES", 12_000)
    d = tmp_path / "n-0"
    log = kbatch.Log.create(d)
    log.append_table(rows_table(100), NOW)

    def remove(_log_dir):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(log_loader.Truncation, "remove", staticmethod(remove))
    with pytest.raises(kbatch.LogWriteError, match="truncation note"):
        log.append_table(rows_table(1000), NOW, records_per_batch=30)
    with pytest.raises(kbatch.StorageError, match="stopped accepting writes"):
        log.append_table(rows_table(1), NOW)
    monkeypatch.undo()
    log.close()
    log = kbatch.Log.open(d, writable=True)
    assert log.end_offset() == 100
    log.close()
