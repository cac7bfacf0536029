"""Magic 0 and 1 message sets (kafka-format.md §2): broker vectors, CRC-32, compressed wrappers
with their inner offsets and timestamps, and Kafka's quirks (wrapper offset 0, LogAppendTime)."""
import struct
import zlib

import pytest

import kbatch
from kbatch import _wire as W
from kbatch.record.compression import compress
from kbatch.errors import CrcMismatchError, InvalidRecordError

from support import vectors as V


def message(offset, magic, value, key=None, ts=-1, attrs=0) -> bytes:
    """One legacy log entry `offset | size | crc magic attributes [timestamp] key value`."""
    body = struct.pack(">bB", magic, attrs) + (struct.pack(">q", ts) if magic else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def wrapper(offset, magic, codec, inner: bytes, ts=-1, ts_bit=0) -> bytes:
    return message(offset, magic, compress(codec, inner, magic), ts=ts, attrs=codec | ts_bit)


def rows(data, **kw):
    return [(r.offset, r.timestamp, r.timestamp_type, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value)) for b in kbatch.iter_batches(data, **kw) for r in b]


def test_kafka10_v1_messages(backend):
    data = b"".join(V.KAFKA10_V1_MESSAGES)
    batches = list(kbatch.iter_batches(data))
    assert [(b.magic, b.offset, b.size_in_bytes, b.crc, b.timestamp) for b in batches] == [
        (1, off, size, crc, ts) for off, size, crc, ts, _ in V.KAFKA10_V1_EXPECTED]
    assert rows(data) == [(off, ts, 0, None, value) for off, _, _, ts, value in V.KAFKA10_V1_EXPECTED]
    for raw, b in zip(V.KAFKA10_V1_MESSAGES, batches):
        # CRC-32 (zlib, not Castagnoli) over [magic, end) (kafka-format.md §2.1)
        assert zlib.crc32(raw[W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:]) == b.crc == b.compute_crc()
        assert b.is_valid() and b.timestamp_type == kbatch.TimestampType.CREATE_TIME
        assert b.compression == kbatch.Compression.NONE and b.attributes == 0


def test_kafka10_v0_messages(backend):
    data = b"".join(V.KAFKA10_V0_MESSAGES)
    batches = list(kbatch.iter_batches(data))
    assert [(b.magic, b.offset, b.size_in_bytes, b.crc) for b in batches] == [
        (0, off, size, crc) for off, size, crc, _ in V.KAFKA10_V0_EXPECTED]
    assert rows(data) == [(off, None, -1, None, value) for off, _, _, value in V.KAFKA10_V0_EXPECTED]
    assert all(b.timestamp_type == kbatch.TimestampType.NO_TIMESTAMP_TYPE and b.max_timestamp == -1
               for b in batches)
    mr = kbatch.MemoryRecords(data + b"\x00" * 4)  # kafka-python's own check: 114 bytes, 110 valid
    assert (mr.size_in_bytes, mr.valid_bytes, mr.truncated_bytes) == (114, 110, 4)


def test_v1_timestamps_minus_one_is_none_other_negatives_are_real(backend):
    data = message(0, 1, b"a", ts=-1) + message(1, 1, b"b", ts=-2) + message(2, 1, b"c", ts=-(2**63))
    assert [r[1] for r in rows(data)] == [None, -2, -(2**63)]


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_magic0_wrapper_inner_offsets_are_absolute(backend, codec):
    inner = message(100, 0, b"x") + message(101, 0, b"y", key=b"k") + message(102, 0, None, key=b"t")
    data = wrapper(102, 0, codec, inner)
    (b,) = kbatch.iter_batches(data)
    assert (b.magic, b.compression, b.last_offset, b.base_offset, b.record_count) == (0, codec, 102, 100, 3)
    assert rows(data) == [(100, None, -1, None, b"x"), (101, None, -1, b"k", b"y"), (102, None, -1, b"t", None)]
    assert [r.is_tombstone for r in b] == [False, False, True]


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_magic1_wrapper_inner_offsets_are_relative(backend, codec):
    inner = message(0, 1, b"x", ts=10) + message(1, 1, b"y", ts=30) + message(2, 1, b"z", ts=20)
    data = wrapper(1002, 1, codec, inner, ts=30)
    (b,) = kbatch.iter_batches(data)
    assert (b.last_offset, b.base_offset, b.record_count, b.next_offset) == (1002, 1000, 3, 1003)
    # CreateTime wrapper: each inner message keeps its own timestamp
    assert rows(data) == [(1000, 10, 0, None, b"x"), (1001, 30, 0, None, b"y"), (1002, 20, 0, None, b"z")]


def test_magic1_wrapper_offset_zero_quirk(backend):
    # "The outer offset may be 0 if this is produce data from certain versions of librdkafka":
    # Kafka then takes the inner offsets as they are.
    inner = message(0, 1, b"x", ts=1) + message(1, 1, b"y", ts=2) + message(2, 1, b"z", ts=3)
    assert [r[0] for r in rows(wrapper(0, 1, 1, inner, ts=3))] == [0, 1, 2]
    # kafka-python writes exactly this: wrapper offset 0, timestamp 0, relative inner offsets
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    kp = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(3):
        kp.append(i, timestamp=100 + i, key=None, value=b"v%d" % i)
    data = bytes(kp.build())
    (b,) = kbatch.iter_batches(data)
    assert b.offset == 0 and b.timestamp == 0
    assert rows(data) == [(i, 100 + i, 0, None, b"v%d" % i) for i in range(3)]


def test_magic1_wrapper_offset_below_last_inner_offset_is_invalid(backend):
    inner = message(0, 1, b"x", ts=1) + message(1, 1, b"y", ts=2) + message(5, 1, b"z", ts=3)
    (b,) = kbatch.iter_batches(wrapper(3, 1, 1, inner, ts=3))
    with pytest.raises(InvalidRecordError, match="wrapper offset") as e:
        list(b)
    assert e.value.base_offset == 3 and "expected >= 5, found 3" in str(e.value)


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_magic1_log_append_time_wrapper_timestamp_applies_to_inner(backend, codec):
    # The broker's in-place path rewrites only the wrapper's timestamp and attributes.
    inner = message(0, 1, b"x", ts=10) + message(1, 1, b"y", ts=30)
    data = wrapper(41, 1, codec, inner, ts=5_000, ts_bit=W.LEGACY_TIMESTAMP_TYPE_MASK)
    (b,) = kbatch.iter_batches(data)
    assert b.timestamp_type == kbatch.TimestampType.LOG_APPEND_TIME and b.max_timestamp == 5_000
    assert rows(data) == [(40, 5_000, 1, None, b"x"), (41, 5_000, 1, None, b"y")]


def test_builder_legacy_log_append_time(backend):
    for codec in (0, 1):
        b = kbatch.BatchBuilder(magic=1, compression=codec, timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME,
                                log_append_time=999, base_offset=7)
        b.append(1, b"a", b"1")
        b.append(2, b"b", b"2")
        assert rows(b.build()) == [(7, 999, 1, b"a", b"1"), (8, 999, 1, b"b", b"2")]


def test_inner_crc_is_checked_in_compressed_sets(backend):
    inner = bytearray(message(0, 1, b"x", ts=1) + message(1, 1, b"y", ts=2))
    inner[-1] ^= 1  # corrupt the second inner message; the wrapper CRC stays right
    data = wrapper(1, 1, 1, bytes(inner), ts=2)
    (b,) = kbatch.iter_batches(data)
    assert b.is_valid()
    with pytest.raises(CrcMismatchError, match="Inner record") as e:
        list(b)
    assert e.value.base_offset == 1
    assert [r[4] for r in rows(data, verify_crc=False)] == [b"x", bytes([ord("y") ^ 1])]


def test_null_wrapper_value_is_invalid(backend):
    with pytest.raises(InvalidRecordError, match="null value"):
        list(next(kbatch.iter_batches(message(0, 1, None, ts=1, attrs=1))))


def test_partial_trailing_inner_entry_is_ignored(backend):
    inner = message(0, 1, b"x", ts=1) + message(1, 1, b"y", ts=2)
    assert [r[4] for r in rows(wrapper(1, 1, 1, inner + inner[:20], ts=2))] == [b"x", b"y"]


def test_legacy_tombstone_is_a_null_value(backend):
    for magic in (0, 1):
        b = kbatch.BatchBuilder(magic=magic)
        b.append(1, b"k", None)
        b.append(2, b"k", b"payload", tombstone=True)  # KIP-87 down-conversion: written as null
        b.append(3, b"k", b"")
        got = [(r.is_tombstone, None if r.value is None else bytes(r.value))
               for batch in kbatch.iter_batches(b.build()) for r in batch]
        assert got == [(True, None), (True, None), (False, b"")]


def test_wrapper_attributes_for_mixed_magic_inner_messages(backend):
    # a v0 inner message inside a v1 wrapper has no timestamp
    inner = message(0, 0, b"old") + message(1, 1, b"new", ts=5)
    assert rows(wrapper(1, 1, 1, inner, ts=5)) == [(0, None, 0, None, b"old"), (1, 5, 0, None, b"new")]
