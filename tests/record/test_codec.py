"""Reading magic 2 batches: real-broker vectors, every field of DESIGN.md's contract, the
attribute bits, timestamps (LogAppendTime, negative deltas, KIP-228), offsets, headers, control
records, tombstones, buffers of every kind, zero-copy views, varints and file-like truncation.

Every test takes the `backend` fixture, so it runs on the Cython core and on the pure twin.
"""
import mmap
import struct

import numpy as np
import pytest

import kbatch
from kbatch import _wire as W
from kbatch.errors import (CorruptRecordError, CrcMismatchError, InvalidRecordError, KBatchError,
                           TruncatedDataError)

from support import vectors as V


def rows(batch):
    """A batch's records as plain tuples (offset, timestamp, key, value, headers)."""
    return [(r.offset, r.timestamp, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value),
             tuple((k, None if v is None else bytes(v)) for k, v in r.headers)) for r in batch]


def header_of(b):
    return (b.base_offset, b.size_in_bytes, b.partition_leader_epoch, b.crc, b.attributes, b.last_offset,
            b.first_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch, b.base_sequence, b.record_count)


def patch(data: bytes, offset: int, fmt: str, value, *, fix_crc=True) -> bytes:
    """Overwrite a v2 header field (and recompute the CRC, so only the field is 'wrong')."""
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, W.CRC_OFFSET, kbatch.crc32c(bytes(buf[W.ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def build(records, **kw):
    b = kbatch.BatchBuilder(**kw)
    for r in records:
        b.append(*r)
    return b.build()


# ------------------------------------------------------------------------------------ vectors
def test_kafka11_broker_batches_decode_to_known_values(backend):
    data = b"".join(V.KAFKA11_V2_BATCHES)
    assert len(data) == 299
    batches = list(kbatch.iter_batches(data, verify_crc=True))
    assert [header_of(b) for b in batches] == V.KAFKA11_V2_HEADERS
    assert [rows(b) for b in batches] == V.KAFKA11_V2_RECORDS
    for raw, b in zip(V.KAFKA11_V2_BATCHES, batches):
        assert b.magic == 2
        assert b.compression == kbatch.Compression.NONE
        assert b.timestamp_type == kbatch.TimestampType.CREATE_TIME
        assert not (b.is_transactional or b.is_control or b.timestamp_extended or b.has_delete_horizon)
        # CRC-32C over [attributes, end) is the stored CRC (kafka-format.md §1.1)
        assert kbatch.crc32c(raw[W.ATTRIBUTES_OFFSET:]) == b.crc == b.compute_crc()
        assert b.is_valid()
        assert bytes(b.raw) == raw
        assert all(r.timestamp_type == kbatch.TimestampType.CREATE_TIME for r in b)
        assert not any(r.is_tombstone for r in b)


def test_kafka11_worked_example_record_bytes(backend):
    # kafka-format.md §1.7: the first batch's record is 12 00 00 00 01 06 31 32 33 00
    raw = V.KAFKA11_V2_BATCHES[0]
    assert raw[W.RECORDS_OFFSET:] == bytes.fromhex("12000000010631323300")
    assert struct.unpack_from(">i", raw, W.LENGTH_OFFSET)[0] == 59


def test_sarama_batches_decode_every_framing(backend):
    for data in (V.SARAMA_UNCOMPRESSED, V.SARAMA_GZIP, V.SARAMA_SNAPPY_RAW, V.SARAMA_LZ4):
        (b,) = kbatch.iter_batches(data)
        assert b.is_valid()
        assert rows(b) == [V.SARAMA_RECORD]
        assert b.max_timestamp == 0 and b.partition_leader_epoch == 0 and b.producer_id == 0
        assert bytes(b.records_bytes()) == V.SARAMA_RECORDS_SECTION


# ------------------------------------------------------------------------------------ buffers
def _buffers(data, tmp_path):
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    f = open(path, "rb")
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return f, mm, [data, bytearray(data), memoryview(data), mm, np.frombuffer(data, dtype=np.uint8),
                   memoryview(bytearray(data)).toreadonly()]


def test_every_buffer_type_reads_the_same(backend, tmp_path):
    data = b"".join(V.KAFKA11_V2_BATCHES + V.KAFKA10_V1_MESSAGES + V.KAFKA10_V0_MESSAGES)
    expected = [(b.magic, b.base_offset, rows(b)) for b in kbatch.iter_batches(data)]
    assert len(expected) == 12
    f, mm, bufs = _buffers(data, tmp_path)
    with f:
        for buf in bufs:
            got = [(b.magic, b.base_offset, rows(b)) for b in kbatch.iter_batches(buf, verify_crc=True)]
            assert got == expected, type(buf)
            assert kbatch.MemoryRecords(buf).valid_bytes == len(data)
        del bufs
        mm.close()


def test_magic_0_1_2_mixed_in_one_buffer(backend):
    v2_zstd = build([(10, b"k", b"v")], compression=kbatch.Compression.ZSTD, base_offset=20)
    v1_gzip = build([(5, b"a", b"1"), (6, None, b"2")], magic=1, compression=kbatch.Compression.GZIP,
                    base_offset=30)
    data = (V.KAFKA10_V0_MESSAGES[0] + V.KAFKA11_V2_BATCHES[0] + V.KAFKA10_V1_MESSAGES[0] + v2_zstd
            + v1_gzip + V.KAFKA11_V2_BATCHES[3])
    got = [(b.magic, b.compression.name, b.last_offset, rows(b)) for b in kbatch.iter_batches(data)]
    assert got == [
        (0, "NONE", 0, [(0, None, None, b"123", ())]),
        (2, "NONE", 0, [(0, 1503229838908, None, b"123", ())]),
        (1, "NONE", 0, [(0, 1503648000942, None, b"123", ())]),
        (2, "ZSTD", 20, [(20, 10, b"k", b"v", ())]),
        (1, "GZIP", 31, [(30, 5, b"a", b"1", ()), (31, 6, None, b"2", ())]),
        (2, "NONE", 0, [(0, 1535546684353, None, b"hdr", (("hkey", b"hval"),))]),
    ]


# ------------------------------------------------------------------------------------ the contract
BATCH_FIELDS = ("magic", "base_offset", "last_offset", "compression", "timestamp_type", "is_transactional",
                "is_control", "timestamp_extended", "has_delete_horizon", "producer_id", "producer_epoch",
                "base_sequence", "partition_leader_epoch", "first_timestamp", "max_timestamp", "crc",
                "size_in_bytes", "record_count")
RECORD_FIELDS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "is_tombstone")


def test_every_contract_field_of_a_v2_batch(backend):
    data = build([(1_000, b"k0", b"v0", [("a", b"1")]), (990, b"k1", None), (1_005, None, b"v2", [("n", None)])],
                 compression=kbatch.Compression.NONE, base_offset=1_000_000, producer_id=4242,
                 producer_epoch=7, base_sequence=55, is_transactional=True, partition_leader_epoch=9,
                 timestamp_extended=True)
    (b,) = kbatch.iter_batches(data)
    got = {name: getattr(b, name) for name in BATCH_FIELDS}
    assert got == dict(
        magic=2, base_offset=1_000_000, last_offset=1_000_002, compression=kbatch.Compression.NONE,
        timestamp_type=kbatch.TimestampType.CREATE_TIME, is_transactional=True, is_control=False,
        timestamp_extended=True, has_delete_horizon=False, producer_id=4242, producer_epoch=7,
        base_sequence=55, partition_leader_epoch=9, first_timestamp=1_000, max_timestamp=1_005,
        crc=struct.unpack_from(">I", data, W.CRC_OFFSET)[0], size_in_bytes=len(data), record_count=3)
    assert b.last_sequence == 57 and b.next_offset == 1_000_003 and len(b) == 3
    recs = list(b)
    assert [{f: getattr(r, f) for f in RECORD_FIELDS if f not in ("key", "value", "headers")} for r in recs] == [
        dict(offset=1_000_000, timestamp=1_000, timestamp_type=0, is_tombstone=False),
        dict(offset=1_000_001, timestamp=990, timestamp_type=0, is_tombstone=True),
        dict(offset=1_000_002, timestamp=1_005, timestamp_type=0, is_tombstone=False),
    ]
    assert rows(b) == [(1_000_000, 1_000, b"k0", b"v0", (("a", b"1"),)), (1_000_001, 990, b"k1", None, ()),
                       (1_000_002, 1_005, None, b"v2", (("n", None),))]


def test_legacy_batches_answer_the_same_contract(backend):
    data = V.KAFKA10_V1_MESSAGES[0] + V.KAFKA10_V0_MESSAGES[0]
    v1, v0 = kbatch.iter_batches(data)
    for b, magic, ttype, ts, raw in (
            (v1, 1, kbatch.TimestampType.CREATE_TIME, 1503648000942, V.KAFKA10_V1_MESSAGES[0]),
            (v0, 0, kbatch.TimestampType.NO_TIMESTAMP_TYPE, -1, V.KAFKA10_V0_MESSAGES[0])):
        got = {name: getattr(b, name) for name in BATCH_FIELDS}
        assert got == dict(magic=magic, base_offset=0, last_offset=0, compression=kbatch.Compression.NONE,
                           timestamp_type=ttype, is_transactional=False, is_control=False,
                           timestamp_extended=False, has_delete_horizon=False, producer_id=-1, producer_epoch=-1,
                           base_sequence=-1, partition_leader_epoch=-1, first_timestamp=ts, max_timestamp=ts,
                           crc=struct.unpack_from(">I", raw, 12)[0], size_in_bytes=len(raw), record_count=1)
        (r,) = b
        assert all(hasattr(r, f) for f in RECORD_FIELDS)


def test_attribute_bits(backend):
    base = build([(5, b"k", b"v")], timestamp_extended=False)
    cases = {
        0x10: dict(is_transactional=True), 0x20: dict(is_control=True), 0x40: dict(has_delete_horizon=True),
        0x80: dict(timestamp_extended=True), 0x08: dict(timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME),
        # bits 8-15: Kafka reads the attributes as (byte) getShort(21) and ignores them
        0x7F00: dict(),
    }
    flags = ("is_transactional", "is_control", "has_delete_horizon", "timestamp_extended")
    for bits, want in cases.items():
        (b,) = kbatch.iter_batches(patch(base, W.ATTRIBUTES_OFFSET, ">h", bits))
        expect = {f: want.get(f, False) for f in flags}
        expect["timestamp_type"] = want.get("timestamp_type", kbatch.TimestampType.CREATE_TIME)
        assert {f: getattr(b, f) for f in expect} == expect, hex(bits)
        assert b.compression == kbatch.Compression.NONE
        assert b.delete_horizon_ms == (5 if bits == 0x40 else None)
        assert len(list(b)) == 1
    for codec in kbatch.Compression:
        data = build([(5, b"k", b"v" * 50)], compression=codec)
        (b,) = kbatch.iter_batches(data)
        assert b.compression == codec and b.attributes & 0x07 == codec
        assert rows(b) == [(0, 5, b"k", b"v" * 50, ())]


# ------------------------------------------------------------------------------------ timestamps
def test_log_append_time_every_record_takes_max_timestamp(backend):
    data = build([(100, b"a", b"1"), (50, b"b", b"2"), (None, b"c", b"3")],
                 timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME, log_append_time=777, timestamp_extended=False)
    (b,) = kbatch.iter_batches(data)
    assert b.timestamp_type == kbatch.TimestampType.LOG_APPEND_TIME and b.attributes & 0x08
    assert b.max_timestamp == 777
    assert b.first_timestamp == 100  # the create times stay in baseTimestamp + deltas (KAFKA-5353)
    assert [(r.timestamp, r.timestamp_type) for r in b] == [(777, 1)] * 3
    # A broker turns a CreateTime batch into LogAppendTime in place: bit 3 and maxTimestamp only.
    ct = build([(100, b"a", b"1"), (150, b"b", b"2")], timestamp_extended=False)
    lat = patch(patch(ct, W.ATTRIBUTES_OFFSET, ">h", 0x08), W.MAX_TIMESTAMP_OFFSET, ">q", 9_999)
    (b,) = kbatch.iter_batches(lat)
    assert [r.timestamp for r in b] == [9_999, 9_999]
    # LogAppendTime with maxTimestamp = "no timestamp" gives None for every record
    none_lat = patch(lat, W.MAX_TIMESTAMP_OFFSET, ">q", -1)
    assert [r.timestamp for r in next(kbatch.iter_batches(none_lat))] == [None, None]


def test_negative_timestamp_deltas(backend):
    ts = [1_000_000, 999_000, 1_000_500, -5, -86_400_000]
    data = build([(t, b"k", b"v") for t in ts], timestamp_extended=True)
    (b,) = kbatch.iter_batches(data)
    assert [r.timestamp for r in b] == ts
    assert b.first_timestamp == 1_000_000 and b.max_timestamp == 1_000_500
    # the second record's delta is -1000: zigzag 1999 = CF 0F
    body = data[W.RECORDS_OFFSET:]
    second = body[1 + body[0] // 2:]
    assert second[2:4] == bytes.fromhex("cf0f")


def test_kip228_reading_rules(backend):
    # DESIGN.md decision 1, checked on hand-made bytes so the reader is tested on its own.
    plain = build([(-1, b"a", b"1"), (-2, b"b", b"2"), (0, b"c", b"3")], timestamp_extended=False)
    (b,) = kbatch.iter_batches(plain)
    assert not b.timestamp_extended and b.no_timestamp == -1
    assert [r.timestamp for r in b] == [None, -2, 0]       # bit 7 clear: -1 = no timestamp
    extended = patch(plain, W.ATTRIBUTES_OFFSET, ">h", 0x80)
    (b,) = kbatch.iter_batches(extended)
    assert b.timestamp_extended and b.no_timestamp == kbatch.NO_TIMESTAMP_EXTENDED
    assert [r.timestamp for r in b] == [-1, -2, 0]          # bit 7 set: -1 is a real instant
    # bit 7 set: Long.MIN_VALUE is "no timestamp"
    data = build([(None, b"a", b"1"), (-1, b"b", b"2"), (-(2**63) + 1, b"c", b"3")], timestamp_extended=True)
    (b,) = kbatch.iter_batches(data)
    assert b.first_timestamp == kbatch.NO_TIMESTAMP_EXTENDED
    assert [r.timestamp for r in b] == [None, -1, -(2**63) + 1]
    # ... and without bit 7, Long.MIN_VALUE is an ordinary (very old) timestamp
    (b,) = kbatch.iter_batches(patch(data, W.ATTRIBUTES_OFFSET, ">h", 0))
    assert [r.timestamp for r in b] == [-(2**63), None, -(2**63) + 1]


def test_timestamp_arithmetic_wraps_like_java(backend):
    # baseTimestamp + delta in Java long arithmetic (a delta that overflows wraps around)
    data = build([(2**63 - 1, b"a", b"1"), (-(2**63) + 1, b"b", b"2")], timestamp_extended=True)
    (b,) = kbatch.iter_batches(data)
    assert [r.timestamp for r in b] == [2**63 - 1, -(2**63) + 1]


# ------------------------------------------------------------------------------------ offsets
def test_offsets_are_base_plus_delta_even_odd_ones(backend):
    b = kbatch.BatchBuilder(base_offset=100, timestamp_extended=False)
    for off in (100, 105, 107, 2_000_000):
        b.append(1, b"k", b"v", offset=off)
    data = b.build()
    (batch,) = kbatch.iter_batches(data)
    assert [r.offset for r in batch] == [100, 105, 107, 2_000_000]
    assert batch.last_offset == 2_000_000 and batch.record_count == 4
    # a reader trusts the deltas, not base + index, and not lastOffsetDelta either
    moved = patch(data, W.BASE_OFFSET_OFFSET, ">q", 2**40, fix_crc=False)  # base offset is outside the CRC
    (batch,) = kbatch.iter_batches(moved)
    assert [r.offset for r in batch] == [2**40, 2**40 + 5, 2**40 + 7, 2**40 + 1_999_900]
    lying_last = patch(data, W.LAST_OFFSET_DELTA_OFFSET, ">i", 1)
    (batch,) = kbatch.iter_batches(lying_last)
    assert batch.last_offset == 101 and [r.offset for r in batch][-1] == 2_000_000


def test_headers_with_null_values_and_non_ascii_keys(backend):
    hdrs = [("trace", b"\x00\x01"), ("null", None), ("", b""), ("ключ", b"v"), ("trace", b"dup")]
    (b,) = kbatch.iter_batches(build([(1, b"k", b"v", hdrs)]))
    (r,) = b
    assert [(k, None if v is None else bytes(v)) for k, v in r.headers] == hdrs


def test_header_keys_that_are_not_utf8_decode_with_replacement(backend):
    # Kafka decodes header keys with new String(bytes, UTF_8): malformed input becomes U+FFFD
    (b,) = kbatch.iter_batches(build([(1, b"k", b"v", [(b"\xff\xfeok", b"x")])]))
    (r,) = b
    assert r.headers[0][0] == "\ufffd\ufffdok"


# ------------------------------------------------------------------------------------ control, tombstones
def test_control_batches_commit_and_abort(backend):
    for commit, rtype in ((True, kbatch.ControlRecordType.COMMIT), (False, kbatch.ControlRecordType.ABORT)):
        data = kbatch.build_end_txn_marker(producer_id=77, producer_epoch=3, commit=commit, coordinator_epoch=12,
                                           base_offset=500, timestamp=1_700_000_000_000)
        assert len(data) == 78 and struct.unpack_from(">i", data, 8)[0] == 66  # kafka-format.md §3
        (b,) = kbatch.iter_batches(data)
        assert b.is_control and b.is_transactional and not b.timestamp_extended
        assert (b.producer_id, b.producer_epoch, b.base_sequence, b.record_count) == (77, 3, -1, 1)
        assert b.control_records() == [kbatch.ControlRecord(500, 0, rtype, 12)]
        (r,) = b
        assert bytes(r.key) == struct.pack(">hh", 0, rtype) and bytes(r.value) == struct.pack(">hi", 0, 12)
    (data_batch,) = kbatch.iter_batches(V.KAFKA11_V2_BATCHES[0])
    assert data_batch.control_records() == []


def test_kafka_python_synthetic_control_batch(backend):
    # Its stored CRC is wrong (kafka-format.md §9): strict reading refuses it, unverified reading decodes ABORT.
    with pytest.raises(CrcMismatchError):
        list(kbatch.iter_batches(V.KAFKA_PYTHON_CONTROL_BATCH))
    (b,) = kbatch.iter_batches(V.KAFKA_PYTHON_CONTROL_BATCH, verify_crc=False)
    assert b.is_control and not b.is_transactional and not b.is_valid()
    (ctl,) = b.control_records()
    assert ctl.type == kbatch.ControlRecordType.ABORT and ctl.version == 0 and ctl.offset == 0


def test_unknown_control_type_is_unknown_not_an_error(backend):
    b = kbatch.BatchBuilder(is_control=True, producer_id=1, producer_epoch=0, is_transactional=True)
    b.append(0, struct.pack(">hh", 0, 99), b"")
    b.append(0, struct.pack(">hh", 3, 1), struct.pack(">hi", 0, 5))  # a higher version reads as v0
    (batch,) = kbatch.iter_batches(b.build())
    assert [(c.version, c.type, c.coordinator_epoch) for c in batch.control_records()] == [
        (0, kbatch.ControlRecordType.UNKNOWN, None), (3, kbatch.ControlRecordType.COMMIT, 5)]


@pytest.mark.parametrize("key, value", [(b"\x00", b""), (struct.pack(">hh", -1, 0), b""),
                                        (struct.pack(">hh", 0, 0), b"\x00\x00\x00"),
                                        (struct.pack(">hh", 0, 1), struct.pack(">hi", -1, 0))])
def test_malformed_control_records_are_invalid(backend, key, value):
    b = kbatch.BatchBuilder(is_control=True, producer_id=1, producer_epoch=0, is_transactional=True)
    b.append(0, key, value)
    (batch,) = kbatch.iter_batches(b.build())
    with pytest.raises(InvalidRecordError) as e:
        batch.control_records()
    assert isinstance(e.value, ValueError) and "expected" in str(e.value)


def test_tombstones(backend):
    data = build([(1, b"a", None), (2, b"b", b"keeps a payload", (), True), (3, b"c", b""), (4, b"d", b"x")])
    (b,) = kbatch.iter_batches(data)
    assert [(r.is_tombstone, None if r.value is None else bytes(r.value)) for r in b] == [
        (True, None), (True, b"keeps a payload"), (False, b""), (False, b"x")]
    assert [r.attributes & 0x20 for r in b] == [0x20, 0x20, 0, 0]
    # Real Kafka never sets the flag: a null value alone makes the tombstone.
    (b,) = kbatch.iter_batches(V.KAFKA11_V2_BATCHES[0])
    assert not next(iter(b)).is_tombstone
    kafka_null = patch(data, W.RECORDS_OFFSET + 1, ">B", 0)  # clear the first record's flag
    assert next(iter(next(kbatch.iter_batches(kafka_null)))).is_tombstone


# ------------------------------------------------------------------------------------ counts and bytes
def test_record_count_and_byte_accounting(backend):
    parts = [build([(i, b"k", b"v" * i) for i in range(n)], base_offset=100 * n, compression=codec)
             for n, codec in ((1, 0), (5, 1), (50, 3), (7, 4))]
    data = b"".join(parts)
    batches = list(kbatch.iter_batches(data))
    assert [b.size_in_bytes for b in batches] == [len(p) for p in parts]
    assert [b.position for b in batches] == [sum(map(len, parts[:i])) for i in range(len(parts))]
    assert [b.record_count for b in batches] == [1, 5, 50, 7] == [len(list(b)) for b in batches]
    for b, p in zip(batches, parts):
        assert b.size_in_bytes == struct.unpack_from(">i", p, W.LENGTH_OFFSET)[0] + W.LOG_OVERHEAD
    mr = kbatch.MemoryRecords(data)
    assert (mr.size_in_bytes, mr.valid_bytes, mr.truncated_bytes) == (len(data), len(data), 0)
    assert len(list(mr.records())) == 63


def test_empty_compacted_batch_header_only(backend):
    # compaction keeps 61-byte header-only batches: count 0, baseTimestamp -1 (kafka-format.md §7.1)
    data = build([(5, b"k", b"v")], base_offset=10, timestamp_extended=False)
    head = bytearray(data[:W.RECORDS_OFFSET])
    struct.pack_into(">i", head, W.LENGTH_OFFSET, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD)
    struct.pack_into(">q", head, W.BASE_TIMESTAMP_OFFSET, -1)
    struct.pack_into(">i", head, W.RECORDS_COUNT_OFFSET, 0)
    struct.pack_into(">I", head, W.CRC_OFFSET, kbatch.crc32c(bytes(head[W.ATTRIBUTES_OFFSET:])))
    (b,) = kbatch.iter_batches(bytes(head))
    assert (b.record_count, list(b), b.size_in_bytes, b.next_offset) == (0, [], 61, 11)


# ------------------------------------------------------------------------------------ zero copy
def test_keys_and_values_are_views_into_the_input(backend):
    data = bytearray(build([(1, b"key", b"value", [("h", b"hv")])]))
    (b,) = kbatch.iter_batches(data)
    (r,) = b
    assert type(r.key) is type(r.value) is type(r.headers[0][1]) is backend.ByteView
    assert r.key.readonly and memoryview(r.key).readonly
    pos = bytes(data).index(b"value")
    data[pos] = ord("V")  # the view sees the change: it is the input's memory, not a copy
    assert bytes(r.value) == b"Value"
    data[bytes(data).index(b"hv")] = ord("H")
    assert bytes(r.headers[0][1]) == b"Hv"


def test_compressed_values_are_views_into_the_decompressed_records(backend):
    data = bytearray(build([(1, b"key", b"value" * 20)], compression=kbatch.Compression.GZIP))
    (b,) = kbatch.iter_batches(data)
    (r,) = b
    assert type(r.value) is backend.ByteView and bytes(r.value) == b"value" * 20
    data[-10:] = b"\x00" * 10  # the input can change: the decompressed copy is independent
    assert bytes(r.value) == b"value" * 20


# ------------------------------------------------------------------------------------ varints
@pytest.mark.parametrize("value, enc", V.VARINTS)
def test_varint_vectors(backend, value, enc):
    assert backend.write_varint(value) == enc
    assert backend.read_varint(b"\xaa" + enc + b"\xbb", 1) == (value, 1 + len(enc))
    assert backend.sizeof_varint(value) == len(enc)


@pytest.mark.parametrize("value, enc", V.VARLONGS)
def test_varlong_vectors(backend, value, enc):
    assert backend.write_varlong(value) == enc
    assert backend.read_varlong(enc, 0) == (value, len(enc))
    assert backend.sizeof_varlong(value) == len(enc)


def test_varint_reading_follows_kafka(backend):
    # non-minimal encodings are accepted, as Kafka's ByteUtils accepts them
    assert backend.read_varint(b"\x80\x00", 0) == (0, 2)
    assert backend.read_varint(b"\x82\x80\x80\x80\x00", 0) == (1, 5)
    assert backend.read_varlong(b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 0) == (0, 10)
    # the 5th varint byte keeps only its low 4 bits (shifted << 28 into an int)
    assert backend.read_varint(b"\x80\x80\x80\x80\x7f", 0) == backend.read_varint(b"\x80\x80\x80\x80\x0f", 0)
    # overlong: 5th varint byte / 10th varlong byte with the MSB set
    with pytest.raises(CorruptRecordError, match="Varint is too long") as e:
        backend.read_varint(b"\x00" + V.INVALID_VARINT, 1)
    assert e.value.position == 1
    with pytest.raises(CorruptRecordError, match="Varlong is too long") as e:
        backend.read_varlong(V.INVALID_VARLONG, 0)
    assert e.value.position == 0
    # truncated: the data ends inside the varint
    with pytest.raises(TruncatedDataError) as e:
        backend.read_varint(b"\x80\x80", 0)
    assert e.value.position == 2 and isinstance(e.value, EOFError)
    with pytest.raises(TruncatedDataError):
        backend.read_varlong(b"\xff" * 9, 0)
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(OverflowError):
            backend.write_varint(bad)
    with pytest.raises(OverflowError):
        backend.write_varlong(2**63)


def test_non_minimal_varints_inside_records_are_accepted(backend):
    # the same record as the broker vector, every varint padded to a longer encoding
    # attributes, tsDelta 0, offsetDelta 0, key -1 (null), value 3, "123", 0 headers
    body = b"\x00" + b"\x80\x00" + b"\x80\x80\x00" + b"\x81\x00" + b"\x86\x80\x00" + b"123" + b"\x80\x00"
    assert len(body) * 2 < 0x80
    rec = bytes([len(body) * 2 | 0x80, 0x00]) + body  # the length, non-minimal too
    head = bytearray(V.KAFKA11_V2_BATCHES[0][:W.RECORDS_OFFSET])
    struct.pack_into(">i", head, W.LENGTH_OFFSET, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(rec))
    data = bytes(head) + rec
    data = patch(data, W.RECORDS_COUNT_OFFSET, ">i", 1)
    (b,) = kbatch.iter_batches(data)
    assert rows(b) == V.KAFKA11_V2_RECORDS[0]


# ------------------------------------------------------------------------------------ file-like mode
def test_truncated_last_batch_is_reported_at_every_cut(backend):
    data = b"".join(V.KAFKA11_V2_BATCHES)
    ends = [71, 147, 218, 299]
    for cut in range(len(data)):
        valid = max([0] + [e for e in ends if e <= cut])
        mr = kbatch.MemoryRecords(data[:cut])
        assert (mr.valid_bytes, mr.truncated_bytes) == (valid, cut - valid), cut
        lenient = list(kbatch.iter_batches(data[:cut], strict=False))
        assert len(lenient) == ends.index(valid) + 1 if valid else not lenient
        assert len(list(mr)) == len(lenient)  # MemoryRecords iterates leniently
        if cut == valid:
            assert len(list(kbatch.iter_batches(data[:cut]))) == len(lenient)
            continue
        with pytest.raises(TruncatedDataError) as e:
            list(kbatch.iter_batches(data[:cut], strict=True))
        assert isinstance(e.value, EOFError) and e.value.position == valid
        assert f"found {cut - valid} bytes" in str(e.value) and f"at byte {valid}" in str(e.value)


def test_errors_say_expected_found_position_and_base_offset(backend):
    data = bytearray(build([(1, b"k", b"v")], base_offset=4321))
    data[-1] ^= 0xFF
    with pytest.raises(CrcMismatchError) as e:
        list(kbatch.iter_batches(bytes(data)))
    err = e.value
    assert isinstance(err, KBatchError) and isinstance(err, ValueError) and err.error_code == 2
    assert err.position == 0 and err.base_offset == 4321
    msg = str(err)
    assert "expected crc" in msg and "found stored crc" in msg and "at byte 0" in msg and "base offset 4321" in msg
    assert f"stored crc = {err.stored}" in msg and f"computed crc = {err.computed}" in msg
