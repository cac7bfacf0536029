"""Writing batches (BatchBuilder, build_end_txn_marker): Kafka-identical bytes, every magic and
codec, producer fields, transactions, headers, tombstones (DESIGN.md decision 2), the
isTimestampExtended flag (decision 1), LogAppendTime, control batches, and what a builder refuses.

Reference bytes come from kafka-python's builders, which write what Kafka's Java builder writes
for uncompressed batches, apart from the quirks each test names.
"""
import struct
import zlib

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder as KpV2Builder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

import kbatch
from kbatch import _wire as W
from kbatch.record.compression import decompress
from kbatch.record.legacy import parse_message
from kbatch.errors import (InvalidOffsetError, InvalidRecordError, UnsupportedCodecError,
                           UnsupportedForMessageFormatError)

RECORDS = [
    (1_600_000_000_000, b"key-0", b"value-0", []),
    (1_600_000_000_007, None, b"", [("h1", b"x"), ("h2", None)]),
    (1_599_999_999_000, b"k" * 200, b"v" * 300, []),          # negative delta, 2-byte lengths
    (1_600_000_000_007, b"", b"\x00\xff", [("", b"")]),
    (1_700_000_000_000, b"late", b"far delta", [("unicode-ключ", b"\x80" * 130)]),
]


def kbatch_v2(records, **kw):
    b = kbatch.BatchBuilder(magic=2, **kw)
    for ts, k, v, h in records:
        b.append(ts, k, v, h)
    return b.build()


def kafka_python_v2(records, compression=0, producer=(-1, -1, -1), transactional=False):
    b = KpV2Builder(magic=2, compression_type=compression, is_transactional=transactional, producer_id=producer[0],
                    producer_epoch=producer[1], base_sequence=producer[2], batch_size=1 << 22)
    for i, (ts, k, v, h) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=h)
    return bytes(b.build())


def diff_positions(a: bytes, b: bytes):
    assert len(a) == len(b)
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


# ------------------------------------------------------------------------------------ Kafka-identical bytes
@pytest.mark.parametrize("n", [1, 2, 5])
def test_uncompressed_v2_is_byte_identical_to_kafka(backend, n):
    # kafka-python's quirk: it writes partitionLeaderEpoch 0 where Kafka's producer writes -1
    # (NO_PARTITION_LEADER_EPOCH, kbatch's default); pass 0 to compare the rest byte for byte.
    ours = kbatch_v2(RECORDS[:n], timestamp_extended=False, partition_leader_epoch=0)
    assert ours == kafka_python_v2(RECORDS[:n])
    assert kbatch_v2(RECORDS[:n], timestamp_extended=False)[12:16] == b"\xff\xff\xff\xff"


def test_producer_fields_and_transactional_are_byte_identical(backend):
    ours = kbatch_v2(RECORDS, timestamp_extended=False, partition_leader_epoch=0, producer_id=123456789012,
                     producer_epoch=17, base_sequence=2_000_000_000, is_transactional=True)
    assert ours == kafka_python_v2(RECORDS, producer=(123456789012, 17, 2_000_000_000), transactional=True)
    assert struct.unpack_from(">qhi", ours, W.PRODUCER_ID_OFFSET) == (123456789012, 17, 2_000_000_000)
    assert struct.unpack_from(">h", ours, W.ATTRIBUTES_OFFSET)[0] == W.TRANSACTIONAL_FLAG_MASK


def test_timestamp_extended_is_on_by_default_and_only_sets_bit_7(backend):
    plain = kbatch_v2(RECORDS, timestamp_extended=False)
    extended = kbatch_v2(RECORDS)
    assert struct.unpack_from(">h", extended, W.ATTRIBUTES_OFFSET)[0] == W.TIMESTAMP_EXTENDED_FLAG_MASK
    assert diff_positions(plain, extended) == [17, 18, 19, 20, 22]  # the CRC and the attributes' low byte
    (b,) = kbatch.iter_batches(extended)
    assert b.timestamp_extended and [r.timestamp for r in b] == [r[0] for r in RECORDS]


def test_no_timestamp_is_minus_one_or_long_min_value(backend):
    for ext, sentinel in ((False, -1), (True, -(2**63))):
        data = kbatch_v2([(None, b"k", b"v", [])], timestamp_extended=ext)
        assert struct.unpack_from(">qq", data, W.BASE_TIMESTAMP_OFFSET) == (sentinel, sentinel)
        (b,) = kbatch.iter_batches(data)
        assert [r.timestamp for r in b] == [None]
    with pytest.raises(ValueError, match="no timestamp"):
        kbatch.BatchBuilder().append(-(2**63), b"k", b"v")
    with pytest.raises(OverflowError):
        kbatch.BatchBuilder().append(2**63, b"k", b"v")


def test_max_timestamp_starts_at_no_timestamp_like_javas_builder(backend):
    # Java's builder starts maxTimestamp at -1 and raises it only on a strictly greater value;
    # kafka-python starts it at the first record's timestamp (its quirk: -5 here).
    data = kbatch_v2([(-5, b"k", b"v", [])], timestamp_extended=False, partition_leader_epoch=0)
    kp = kafka_python_v2([(-5, b"k", b"v", [])])
    assert struct.unpack_from(">q", data, W.MAX_TIMESTAMP_OFFSET)[0] == -1
    assert struct.unpack_from(">q", kp, W.MAX_TIMESTAMP_OFFSET)[0] == -5
    assert [p for p in diff_positions(data, kp) if not W.CRC_OFFSET <= p < W.CRC_OFFSET + 4] == [42]  # -1 vs -5
    # extended batches start at Long.MIN_VALUE, so negative timestamps do raise it
    ext = kbatch_v2([(-5, b"k", b"v", []), (-9, b"k", b"v", [])])
    assert struct.unpack_from(">q", ext, W.MAX_TIMESTAMP_OFFSET)[0] == -5


def test_null_values_differ_from_kafka_only_by_the_tombstone_flag(backend):
    # DESIGN.md decision 2: a kbatch writer always sets record attribute bit 5 for a null value;
    # real Kafka writes 0 there (and ignores the byte on read).
    recs = [(1, b"a", None, []), (2, b"b", b"v", []), (3, b"c", None, [("h", None)])]
    ours = kbatch_v2(recs, timestamp_extended=False, partition_leader_epoch=0)
    theirs = kafka_python_v2(recs)
    flags, pos = [], W.RECORDS_OFFSET
    for _ in recs:  # each record's attributes byte follows its (one-byte) length
        flags.append(pos + 1)
        pos += 1 + ours[pos] // 2
    assert [ours[p] for p in flags] == [0x20, 0x00, 0x20] and [theirs[p] for p in flags] == [0, 0, 0]
    assert diff_positions(ours, theirs) == [17, 18, 19, 20, flags[0], flags[2]]
    # both read back as tombstones
    for data in (ours, theirs):
        assert [r.is_tombstone for r in next(kbatch.iter_batches(data))] == [True, False, True]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_legacy_is_byte_identical_to_kafka(backend, magic):
    kp = KpLegacyBuilder(magic=magic, compression_type=0, batch_size=1 << 22)
    b = kbatch.BatchBuilder(magic=magic)
    for i, (ts, k, v, _h) in enumerate(RECORDS):
        kp.append(i, timestamp=ts, key=k, value=v)
        b.append(ts, k, v)
    assert b.build() == bytes(kp.build())


@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_legacy_inner_set_matches_kafka(backend, magic):
    # kafka-python's wrapper quirks: offset 0 and timestamp 0 (Kafka writes the last offset and,
    # for CreateTime, the max timestamp). The inner message set is the same bytes.
    kp = KpLegacyBuilder(magic=magic, compression_type=1, batch_size=1 << 22)
    b = kbatch.BatchBuilder(magic=magic, compression=kbatch.Compression.GZIP)
    for i, (ts, k, v, _h) in enumerate(RECORDS):
        kp.append(i, timestamp=ts, key=k, value=v)
        b.append(ts, k, v)
    ours, theirs = b.build(), bytes(kp.build())
    inner = [decompress(1, bytes(parse_message(d, W.LOG_OVERHEAD, len(d))[5]), magic) for d in (ours, theirs)]
    assert inner[0] == inner[1]
    (w,) = kbatch.iter_batches(ours)
    assert w.offset == 4 and w.timestamp == (max(r[0] for r in RECORDS) if magic else -1)


# ------------------------------------------------------------------------------------ every magic and codec
@pytest.mark.parametrize("magic, codec", [(m, c) for m in (0, 1, 2) for c in range(5) if not (m < 2 and c == 4)])
def test_every_magic_and_codec_round_trips(backend, magic, codec):
    b = kbatch.BatchBuilder(magic=magic, compression=codec, base_offset=1_000)
    for ts, k, v, h in RECORDS:
        b.append(ts, k, v, h if magic == 2 else ())
    data = b.build()
    batches = list(kbatch.iter_batches(data))
    # one batch, or one log entry per message for uncompressed legacy sets
    assert len(batches) == (len(RECORDS) if magic < 2 and not codec else 1)
    assert {(b.compression, b.magic) for b in batches} == {(codec, magic)}
    got = [(r.offset, r.timestamp, r.key and bytes(r.key), r.value and bytes(r.value)) for b in batches for r in b]
    assert got == [(1_000 + i, ts if magic else None, k and bytes(k), v and bytes(v))
                   for i, (ts, k, v, _h) in enumerate(RECORDS)]
    if magic == 2 and codec:
        plain = kbatch.BatchBuilder(magic=2, base_offset=1_000)
        for ts, k, v, h in RECORDS:
            plain.append(ts, k, v, h)
        # the compressed records section decompresses to the uncompressed one
        assert bytes(batches[0].records_bytes()) == plain.build()[W.RECORDS_OFFSET:]


def test_compressed_v2_header_stays_plain(backend):
    data = kbatch_v2(RECORDS, compression=kbatch.Compression.LZ4, producer_id=5, producer_epoch=1, base_sequence=0)
    head = struct.unpack_from(">qiibIhiqqqhii", data)
    assert head[0] == 0 and head[1] == len(data) - 12 and head[5] == 0x83 and head[6] == 4
    assert head[-1] == len(RECORDS)
    assert data[W.RECORDS_OFFSET:W.RECORDS_OFFSET + 7] == bytes.fromhex("04224d18604082")


# ------------------------------------------------------------------------------------ tombstones
def test_explicit_tombstones(backend):
    b = kbatch.BatchBuilder()
    b.append(1, b"a", None)                         # null value: a tombstone, flag set
    b.append(2, b"b", b"why: retention", tombstone=True)  # KIP-87: a tombstone may keep a value
    b.append(3, b"c", b"v", tombstone=False)
    b.append(4, b"d", b"")                          # empty is not null
    with pytest.raises(InvalidRecordError, match="must be a tombstone") as e:
        b.append(5, b"e", None, tombstone=False)
    assert isinstance(e.value, ValueError)
    assert len(b) == 4  # the refused record left nothing behind
    (batch,) = kbatch.iter_batches(b.build())
    assert [(r.is_tombstone, r.attributes) for r in batch] == [(True, 0x20), (True, 0x20), (False, 0), (False, 0)]


# ------------------------------------------------------------------------------------ LogAppendTime, horizons
def test_log_append_time_batches(backend):
    b = kbatch.BatchBuilder(timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME, log_append_time=5_000,
                            timestamp_extended=False)
    b.append(10, b"a", b"1")
    b.append(20, b"b", b"2")
    data = b.build()
    assert struct.unpack_from(">hiqq", data, W.ATTRIBUTES_OFFSET) == (0x08, 1, 10, 5_000)
    assert [r.timestamp for r in next(kbatch.iter_batches(data))] == [5_000, 5_000]
    with pytest.raises(ValueError, match="log_append_time"):
        kbatch.BatchBuilder(timestamp_type=kbatch.TimestampType.LOG_APPEND_TIME)


def test_delete_horizon_batches(backend):
    b = kbatch.BatchBuilder(delete_horizon_ms=2_000_000, timestamp_extended=False)
    b.append(1_000, b"a", None)
    b.append(1_500, b"b", b"v")
    (batch,) = kbatch.iter_batches(b.build())
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 2_000_000 == batch.first_timestamp
    assert [r.timestamp for r in batch] == [1_000, 1_500]  # negative deltas against the horizon
    assert batch.max_timestamp == 1_500


# ------------------------------------------------------------------------------------ control batches
def test_end_txn_marker_bytes(backend):
    data = kbatch.build_end_txn_marker(producer_id=9, producer_epoch=2, commit=True, coordinator_epoch=5,
                                       base_offset=40, timestamp=1_000, partition_leader_epoch=3)
    header = struct.pack(">qiib", 40, 66, 3, 2)
    rest = struct.pack(">hiqqqhii", 0x30, 0, 1_000, 1_000, 9, 2, -1, 1)
    # 17 bytes with its length (kafka-format.md §3): length 16, attributes, deltas, key, value, 0 headers
    record = bytes([32, 0, 0, 0, 8]) + struct.pack(">hh", 0, 1) + bytes([12]) + struct.pack(">hi", 0, 5) + b"\x00"
    crc = kbatch.crc32c(rest + record)
    assert data == header + struct.pack(">I", crc) + rest + record
    ext = kbatch.build_end_txn_marker(producer_id=9, producer_epoch=2, commit=False, coordinator_epoch=5,
                                      timestamp_extended=True)
    (b,) = kbatch.iter_batches(ext)
    assert b.timestamp_extended and b.control_records()[0].type == kbatch.ControlRecordType.ABORT


# ------------------------------------------------------------------------------------ what a builder refuses
def test_builder_refusals(backend):
    with pytest.raises(UnsupportedForMessageFormatError, match="headers"):
        kbatch.BatchBuilder(magic=1).append(1, b"k", b"v", headers=[("h", b"v")])
    with pytest.raises(InvalidRecordError, match="Null header keys"):
        kbatch.BatchBuilder().append(1, b"k", b"v", headers=[(None, b"v")])
    with pytest.raises(UnsupportedCodecError, match="zstd"):
        kbatch.BatchBuilder(magic=1, compression=kbatch.Compression.ZSTD)
    with pytest.raises(UnsupportedCodecError, match="Unknown compression type id: 5"):
        kbatch.BatchBuilder(compression=5)
    with pytest.raises(UnsupportedForMessageFormatError):
        kbatch.BatchBuilder(magic=1, producer_id=5)
    with pytest.raises(UnsupportedForMessageFormatError):
        kbatch.BatchBuilder(magic=0, is_transactional=True)
    with pytest.raises(ValueError):
        kbatch.BatchBuilder(magic=3)
    with pytest.raises(ValueError):
        kbatch.BatchBuilder(magic=1, timestamp_type=kbatch.TimestampType.NO_TIMESTAMP_TYPE)
    b = kbatch.BatchBuilder(base_offset=10)
    b.append(1, b"k", b"v", offset=12)
    with pytest.raises(InvalidOffsetError):
        b.append(1, b"k", b"v", offset=12)
    with pytest.raises(InvalidOffsetError):
        kbatch.BatchBuilder(base_offset=10).append(1, b"k", b"v", offset=9)
    with pytest.raises(InvalidOffsetError):
        kbatch.BatchBuilder().append(1, b"k", b"v", offset=2**31)
    assert kbatch.BatchBuilder().build() == b""


def test_magic0_ignores_timestamps_and_type(backend):
    b = kbatch.BatchBuilder(magic=0)
    assert b.timestamp_type == kbatch.TimestampType.NO_TIMESTAMP_TYPE and not b.timestamp_extended
    b.append(123, b"k", b"v")
    data = b.build()
    assert len(data) == W.LOG_OVERHEAD + W.RECORD_OVERHEAD_V0 + 2
    assert zlib.crc32(data[16:]) == struct.unpack_from(">I", data, 12)[0]


def test_sequence_numbers(backend):
    b = kbatch.BatchBuilder(producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    for i in range(4):
        b.append(i, b"k", b"v")
    (batch,) = kbatch.iter_batches(b.build())
    assert (batch.base_sequence, batch.last_sequence) == (2**31 - 2, 1)  # wraps from Int32.MAX to 0


# ------------------------------------------------------------------------------------ the bulk path
def test_extend_and_build_batch_equal_the_append_loop(backend):
    recs = [(ts, k, v, h) for ts, k, v, h in RECORDS] + [(None, b"n", None), (5, None, b"t", (), True)]
    for kw in (dict(), dict(timestamp_extended=False, compression=kbatch.Compression.GZIP, base_offset=9)):
        one = kbatch.BatchBuilder(**kw)
        for r in recs:
            one.append(*r)
        many = kbatch.BatchBuilder(**kw)
        many.extend(recs[:3])
        many.extend(iter(recs[3:]))  # any iterable
        assert one.build() == many.build() == kbatch.build_batch(recs, **kw)
        assert len(many) == len(recs)


def test_extend_refuses_all_or_nothing(backend):
    b = kbatch.BatchBuilder()
    b.append(1, b"a", b"1")
    before = b.build()
    with pytest.raises(InvalidRecordError):
        b.extend([(2, b"b", b"2"), (3, b"c", None, (), False)])
    with pytest.raises(InvalidOffsetError):
        b.extend([(2, b"b", b"2", (), None, 7), (3, b"c", b"3", (), None, 7)])
    with pytest.raises(TypeError):
        b.extend([(2, b"b")])
    with pytest.raises(TypeError):
        b.extend([(2, b"b", 5)])  # not bytes-like (bytes(5) would be five zero bytes)
    assert b.build() == before and len(b) == 1


def test_encode_records_v2_kernel(backend):
    section, count, base_ts, max_ts, last = backend.encode_records_v2(
        [(100, b"k", b"v"), (90, None, None, [("h", None)]), (None, b"x", b"y", (), True, 12)], 10, None, None, False)
    assert (count, base_ts, max_ts, last) == (3, 100, 100, 12)
    recs = backend.decode_records_v2(section, 0, len(section), 3, 10, 100, None, 0, False)
    assert [(r.offset, r.timestamp, r.is_tombstone) for r in recs] == [(10, 100, False), (11, 90, True), (12, None, True)]
    # continuing: the offset after `last_offset`, deltas against the given base timestamp
    section2, *rest = backend.encode_records_v2([(101, b"k", b"v")], 10, 12, 100, False)
    assert rest == [1, 100, 101, 13]
    assert backend.encode_records_v2([], 0, None, None, True) == (b"", 0, -(2**63), -(2**63), None)
