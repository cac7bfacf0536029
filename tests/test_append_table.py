"""Log.append_table: Arrow rows into a log through the encode_columns kernel and Log.append."""
import numpy as np
import pyarrow as pa
import pytest

import kbatch
from kbatch import Compression, LogConfig
from kbatch import arrow as A

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


def test_a_refused_piece_keeps_the_ones_before_and_says_so(backend, tmp_path, monkeypatch):
    """Each Log.append call is all or nothing; append_table reports what the calls before the
    refused one appended (KIP-937: the second piece's timestamps are too old)."""
    monkeypatch.setattr(kbatch.arrow_encode, "APPEND_PIECE_BYTES", 50_000)
    log = kbatch.Log.create(tmp_path / "r-0", LogConfig(message_timestamp_before_max_ms=3_600_000))
    old = pa.array(np.full(500, NOW - 7 * 86_400_000), pa.timestamp("ms"))
    t = pa.concat_tables([rows_table(500), rows_table(500, timestamp=old)])
    with pytest.raises(kbatch.InvalidTimestampError) as e:
        log.append_table(t, NOW, records_per_batch=100)  # pieces of four 100-record batches
    assert (e.value.appended.first_offset, e.value.appended.record_count) == (0, 400)
    assert "stay appended" in str(e.value)
    assert log.end_offset() == e.value.appended.last_offset + 1
    log.append_table(rows_table(10), NOW)  # the log takes appends again
    log.close()
    assert kbatch.verify_indexes(tmp_path / "r-0").ok


def test_bad_rows_are_refused_before_anything_is_written(backend, tmp_path):
    log = kbatch.Log.create(tmp_path / "b-0")
    t = pa.table({"value": [b"a", None], "isTombstone": [False, False]})
    with pytest.raises(kbatch.InvalidRecordError, match="at row 1"):
        log.append_table(t)
    assert log.end_offset() == 0 and log.size == 0
