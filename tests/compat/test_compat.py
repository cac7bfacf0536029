"""kbatch.compat: drop-in record classes for kafka-python and aiokafka.

Behavioural equivalence: the same inputs through the client's own classes and through the
drop-in give equal results, equal bytes and the same exception class (and, for kafka-python,
message). Every test runs on both kbatch backends.
"""
import array
import struct
import sys
import zlib
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch._backend as _backend
import kbatch.compat as compat

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

import aiokafka.record.default_records as a_d  # noqa: E402
import aiokafka.record.memory_records as a_m  # noqa: E402
import kafka.record.default_records as k_d  # noqa: E402
import kafka.record.memory_records as k_m  # noqa: E402
from aiokafka.errors import CorruptRecordException  # noqa: E402
from kafka.errors import CorruptRecordError  # noqa: E402

from kbatch.compat import aiokafka as A  # noqa: E402
from kbatch.compat import kafka_python as K  # noqa: E402

# `backend` (tests/conftest.py): every test runs on both kbatch backends, installed as
# kbatch._backend.core, which kbatch.compat looks up at call time.


# kafka-python test/record/test_records.py: "real live data from Kafka 11 broker"
REAL_V2 = bytes([
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 59, 0, 0, 0, 1, 2, 3, 24, 95, 112, 0, 0, 0, 0, 0, 0, 0, 0, 1, 94, 3,
    94, 58, 60, 0, 0, 1, 94, 3, 94, 58, 60, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 0, 0, 0, 1, 18, 0, 0, 0, 1, 6, 49, 50, 51, 0,
    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 59, 0, 0, 0, 1, 2, 122, 145, 167, 39, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    94, 3, 94, 58, 60, 0, 0, 1, 94, 3, 94, 58, 60, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 0, 0, 0, 1, 18, 0, 0, 0, 1, 6, 49, 50, 51, 0,
    0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 59, 0, 0, 0, 1, 2, 169, 110, 33, 236, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    94, 3, 94, 58, 60, 0, 0, 1, 94, 3, 94, 58, 60, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 0, 0, 0, 1, 18, 0, 0, 0, 1, 6, 49, 50, 51, 0,
])


# ------------------------------------------------------------------------------- helpers
def _rec(r):
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers), r.checksum)


def _batch_fields(b):
    names = ["base_offset", "magic", "crc", "attributes", "compression_type", "timestamp_type",
             "is_transactional", "is_control_batch", "last_offset_delta", "first_timestamp",
             "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "next_offset"]
    if b.magic < 2:
        names = ["base_offset", "magic", "crc", "attributes", "compression_type", "timestamp_type",
                 "next_offset"]
    return tuple(getattr(b, n, None) for n in names)


def consume(memory_records_cls, data, check_crc=True):
    """What a fetcher does: batches, CRC check, records. Returns the events and the error."""
    out = []
    try:
        m = memory_records_cls(data)
        while m.has_next():
            b = m.next_batch()
            out.append(("batch", _batch_fields(b)))
            if check_crc:
                out.append(("crc", b.validate_crc()))
            for r in b:
                out.append(_rec(r) + ((r.size_in_bytes,) if hasattr(r, "size_in_bytes") else ()))
    except Exception as e:  # noqa: BLE001 - compared below
        return out, (type(e), str(e) if isinstance(e, (CorruptRecordError,)) else None)
    return out, None


def k_build(builder_cls, magic, records, batch_size=1 << 20, transactional=False, pid=-1, epoch=-1, seq=-1):
    b = builder_cls(magic, 0, batch_size, transactional=transactional, producer_id=pid, producer_epoch=epoch,
                    base_sequence=seq)
    metas = []
    for ts, key, value, headers in records:
        try:
            m = b.append(ts, key, value, headers)
        except Exception as e:  # noqa: BLE001
            metas.append(type(e))
            continue
        metas.append(None if m is None else (m.offset, m.size, m.timestamp, m.crc))
    b.close()
    return bytes(b.buffer()), metas, b.size_in_bytes()


def a_build(builder_cls, records, batch_size=1 << 20, transactional=0):
    b = builder_cls(2, 0, transactional, -1, -1, -1, batch_size)
    metas = []
    for i, (ts, key, value, headers) in enumerate(records):
        try:
            m = b.append(i, ts, key, value, headers)
        except Exception as e:  # noqa: BLE001
            metas.append(type(e))
            continue
        metas.append(None if m is None else (m.offset, m.size, m.timestamp, m.crc))
    return bytes(b.build()), metas, b.size()


header = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8)))
record = st.tuples(
    st.integers(min_value=0, max_value=2**41),
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.lists(header, max_size=3),
)
records_st = st.lists(record, min_size=1, max_size=12)
HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def mutate(data: bytes, how):
    kind, a, b = how
    if not data:
        return data
    a %= len(data)
    if kind == 0:
        return data[:a]
    buf = bytearray(data)
    if kind == 1:
        buf[a] ^= 1 << (b % 8)
    else:
        buf[a] = b % 256
    if kind == 3 and len(buf) > 21:  # fix the CRC so the record parser sees the damage
        crc = _backend.core.crc32c(bytes(buf[21:struct.unpack_from(">i", buf, 8)[0] + 12]))
        struct.pack_into(">I", buf, 17, crc)
    return bytes(buf)


mutation = st.tuples(st.integers(0, 3), st.integers(0, 1 << 16), st.integers(0, 255))


# ------------------------------------------------------------------------------- kafka-python
def test_real_broker_bytes_kafka_python(backend):
    assert consume(K.MemoryRecords, REAL_V2) == consume(k_m.MemoryRecords, REAL_V2)
    m = K.MemoryRecords(REAL_V2)
    recs = [r for b in m for r in b]
    ts = struct.unpack_from(">q", REAL_V2, 27)[0]
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in recs] == [
        (i, None, b"123", ts, []) for i in range(3)]
    assert m.valid_bytes() == len(REAL_V2)


@HYP
@given(records=records_st, magic=st.sampled_from([0, 1, 2]), size=st.sampled_from([1 << 20, 120]))
def test_kafka_python_builder_identical(backend, records, magic, size):
    if magic < 2:
        records = [(ts, k, v, []) for ts, k, v, _h in records]
    orig = k_build(k_m.MemoryRecordsBuilder, magic, records, size)
    new = k_build(K.MemoryRecordsBuilder, magic, records, size)
    assert new == orig


@HYP
@given(records=records_st, how=st.lists(mutation, max_size=2), check=st.booleans())
def test_kafka_python_decode_equivalent(backend, records, how, check):
    data = k_build(k_m.MemoryRecordsBuilder, 2, records)[0] * 2
    for h in how:
        data = mutate(data, h)
    assert consume(K.MemoryRecords, data, check) == consume(k_m.MemoryRecords, data, check)


def test_kafka_python_type_checks_and_full(backend):
    for cls in (k_d.DefaultRecordBatchBuilder, K.DefaultRecordBatchBuilder):
        b = cls(magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1,
                base_sequence=-1, batch_size=100)
        with pytest.raises(TypeError):
            b.append("0", 1, b"k", b"v", [])
        with pytest.raises(TypeError):
            b.append(0, 1.5, b"k", b"v", [])
        with pytest.raises(TypeError):
            b.append(0, 1, "k", b"v", [])
        with pytest.raises(TypeError):
            b.append(0, 1, b"k", 5, [])
        assert b.append(0, 1, b"k", b"v" * 200, []) is not None  # the first record always fits
        assert b.append(1, 2, b"k", b"v", []) is None
    assert K.DefaultRecordBatchBuilder.estimate_size_in_bytes(b"k", b"v", [("h", None)]) == \
        k_d.DefaultRecordBatchBuilder.estimate_size_in_bytes(b"k", b"v", [("h", None)])


def test_kafka_python_timestamp_none_and_metadata(backend):
    b = K.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    m = b.append(0, None, None, b"v", [])
    assert isinstance(m, k_d.DefaultRecordMetadata) and m.timestamp > 1_600_000_000_000
    assert m.crc is None and repr(m).startswith("DefaultRecordMetadata(offset=0")


def test_kafka_python_records_are_its_class_with_slot_reads(backend):
    b = k_d.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    b.append(0, 5, b"k", b"v", [("h", b"x")])
    b.append(1, 6, None, None, [])
    data = bytes(b.build())
    mine, theirs = list(K.MemoryRecords(data).next_batch()), list(k_m.MemoryRecords(data).next_batch())
    fields = ("size_in_bytes", "offset", "timestamp", "timestamp_type", "key", "value", "headers", "checksum")
    for r, o in zip(mine, theirs):
        assert isinstance(r, k_d.DefaultRecord) and type(r).__name__ == "DefaultRecord"
        assert repr(r) == repr(o) and r.validate_crc() is True
        assert [getattr(r, f) for f in fields] == [getattr(o, f) for f in fields]
        for f in fields:
            with pytest.raises(AttributeError):  # read-only, as kafka-python's properties
                setattr(r, f, 1)
    if backend.BACKEND == "cython":  # the compiled factory: properties read as slot members
        assert type(type(mine[0]).__dict__["offset"]).__name__ == "member_descriptor"


def test_kafka_python_only_plain_slot_properties_become_members():
    class Rec:
        __slots__ = ("_a", "_b")

        @property
        def a(self):
            return self._a

        @property
        def b(self):
            return self._b + 1  # computes: stays a property

        @property
        def c(self):
            return self._a if self._b else None

    assert K._returns_slot(Rec.a, "_a") and not K._returns_slot(Rec.a, "_b")
    assert not K._returns_slot(Rec.b, "_b") and not K._returns_slot(Rec.c, "_a")
    assert not K._returns_slot(property(lambda self: self._a, lambda self, v: None), "_a")


def _control_batch(key, value=b"\x00\x00\x00\x00\x00\x05", pid=7, lat=False):
    b = k_d.DefaultRecordBatchBuilder(2, 0, 1, pid, 0, 0, 1 << 20)
    b.append(0, 123, key, value, [])
    data = bytearray(b.build())
    attrs = struct.unpack_from(">h", data, 21)[0] | 0x20 | (0x08 if lat else 0)
    struct.pack_into(">h", data, 21, attrs)
    struct.pack_into(">I", data, 17, _backend.core.crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize("key", [b"\x00\x00\x00\x01", b"\x00\x00\x00\x00", b"\x00\x01"])
def test_kafka_python_control_records(backend, key):
    data = _control_batch(key)
    assert consume(K.MemoryRecords, data) == consume(k_m.MemoryRecords, data)
    if len(key) == 4:
        (rec,) = list(K.MemoryRecords(data).next_batch())
        assert isinstance(rec, k_d.ControlRecord)
        assert rec.commit == (key[-1] == 1) and rec.abort == (key[-1] == 0)


def test_kafka_python_log_append_time(backend):
    b = k_d.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i in range(3):
        b.append(i, 100 + i, None, b"v", [])
    data = bytearray(b.build())
    struct.pack_into(">h", data, 21, 0x08)
    struct.pack_into(">q", data, 35, 999)
    struct.pack_into(">I", data, 17, _backend.core.crc32c(bytes(data[21:])))
    data = bytes(data)
    got = consume(K.MemoryRecords, data)
    assert got == consume(k_m.MemoryRecords, data)
    assert [r[1] for r in got[0][2:]] == [999, 999, 999]


def test_kafka_python_compressed_roundtrip(backend):
    import kafka.codec as kc

    for codec, ok in ((1, kc.has_gzip), (2, kc.has_snappy), (3, kc.has_lz4), (4, kc.has_zstd)):
        if not ok():
            continue  # kafka-python raises UnsupportedCodecError there, drop-in or not
        b = K.MemoryRecordsBuilder(2, codec, 1 << 20)
        for i in range(50):
            b.append(i, b"key", b"value" * 10, [("h", b"x")])
        b.close()
        data = bytes(b.buffer())
        assert data[21 + 1] & 0x07 == codec
        assert consume(K.MemoryRecords, data) == consume(k_m.MemoryRecords, data)


def test_kafka_python_legacy_roundtrip(backend):
    for magic in (0, 1):
        data = k_build(K.MemoryRecordsBuilder, magic, [(10, b"k", b"v", []), (11, None, None, [])])[0]
        assert consume(K.MemoryRecords, data) == consume(k_m.MemoryRecords, data)
        assert zlib.crc32(data[16:]) != 0


def test_kafka_python_min_slice_error(backend):
    data = struct.pack(">qi", 0, 5) + b"\x00" * 5
    with pytest.raises(CorruptRecordError) as e1:
        k_m.MemoryRecords(data).next_batch()
    with pytest.raises(CorruptRecordError) as e2:
        K.MemoryRecords(data).next_batch()
    assert str(e1.value) == str(e2.value)


# ------------------------------------------------------------------------------- aiokafka
def test_real_broker_bytes_aiokafka(backend):
    assert consume(A.MemoryRecords, REAL_V2) == consume(a_m.MemoryRecords, REAL_V2)


@HYP
@given(records=records_st, size=st.sampled_from([1 << 20, 120]))
def test_aiokafka_builder_identical(backend, records, size):
    assert a_build(A.DefaultRecordBatchBuilder, records, size) == a_build(a_d.DefaultRecordBatchBuilder, records, size)


@HYP
@given(records=records_st, how=st.lists(mutation, max_size=2), check=st.booleans())
def test_aiokafka_decode_equivalent(backend, records, how, check):
    data = a_build(a_d.DefaultRecordBatchBuilder, records)[0] * 2
    for h in how:
        data = mutate(data, h)
    # corrupt records fall back to aiokafka's live reader: same records, same exceptions
    assert_aiokafka_consume_equivalent(data, check)


def _aiokafka_reads_past_end(data):
    """Whether aiokafka's compiled MemoryRecords meets a batch it reads as v2 (by byte 16 of the
    buffer) whose slice is shorter than the v2 header and ends less than a header before the
    buffer's end: its DefaultRecordBatch then takes the header from memory past the buffer
    (undefined contents)."""
    if not A._LIVE_MR_COMPILED or len(data) < 17:
        return False
    magic = data[16] - 256 if data[16] >= 128 else data[16]
    pos = 0
    while len(data) - pos >= 12:
        length = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + length
        if length < 14 or end > len(data):
            return False
        if magic >= 2 and end - pos < A._V2_HEADER and pos + A._V2_HEADER > len(data):
            return True
        pos = end
    return False


def assert_aiokafka_consume_equivalent(data, check=True):
    got = consume(A.MemoryRecords, data, check)
    want = consume(a_m.MemoryRecords, data, check)
    if got != want and _aiokafka_reads_past_end(data):
        # where aiokafka reads past the buffer the drop-in raises CorruptRecordException from that
        # next_batch() instead; everything before it is the same
        events, err = got
        assert err == (CorruptRecordException, None)
        assert want[0][:len(events)] == events and want[0][len(events)][0] == "batch"
        return
    assert got == want


def test_aiokafka_offsets_past_int64(backend):
    """base offset -2**63 (bit 7 of byte 0 flipped) and a record's offset delta that takes it
    below int64: aiokafka's compiled reader wraps; the drop-in hands the batch to it."""
    records = [(0, None, None, []), (8192, None, b"\x00", [("", b"\x00" * 8), ("0", b"\x00" * 4)]),
               (134217728, None, None, [])]
    data = a_build(a_d.DefaultRecordBatchBuilder, records)[0] * 2
    for h in [(1, 0, 7), (1, 102, 0)]:
        data = mutate(data, h)
    assert_aiokafka_consume_equivalent(data, False)


def _a_legacy(magic, records, codec=0):
    import aiokafka.record.legacy_records as a_l

    b = a_l.LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, ts if magic else None, key, value)
    return bytes(b.build())


def _a_v2(records, codec=0):
    b = a_d.DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, ts, key, value, [])
    return bytes(b.build())


def test_aiokafka_batch_class_follows_first_magic(backend):
    """aiokafka's compiled MemoryRecords picks every batch's class by byte 16 of the whole buffer
    (the first batch's magic): a v2 batch after a legacy one is read as legacy and the other way
    round, and a batch whose own magic byte is damaged is still read as v2."""
    v2 = _a_v2([(0, None, b"\x00" * 12), (5, b"k", b"v")])
    v1 = _a_legacy(1, [(7, b"k", b"value")])
    v0 = _a_legacy(0, [(None, b"key", None)])
    flipped = bytearray(v2)
    flipped[16] = 0  # the regression: the second batch's magic 2 -> 0, aiokafka still reads v2
    for data in (v2 + bytes(flipped), v2 + v1, v1 + v2, v0 + v2, v2 + v0 + v2, v1 + v0, v0 + v1,
                 bytes(flipped) + v2):
        assert_aiokafka_consume_equivalent(data, False)
        assert_aiokafka_consume_equivalent(data, True)
    if A._LIVE_MR_COMPILED:
        m = A.MemoryRecords(v2 + bytes(flipped))
        m.next_batch()
        b = m.next_batch()
        assert isinstance(b, A.DefaultRecordBatch) and b.magic == 0
        assert [(r.offset, r.value) for r in b] == [(0, b"\x00" * 12), (1, b"v")]


@pytest.mark.parametrize("arg", [bytearray(REAL_V2), memoryview(REAL_V2), type("B", (bytes,), {})(REAL_V2), "x" * 30])
def test_aiokafka_memory_records_argument_type(backend, arg):
    def run(cls):
        try:
            return consume(cls, arg)  # consume() keeps the class; the message is compared here
        except Exception as e:  # noqa: BLE001
            return type(e), str(e)

    def construct(cls):
        try:
            cls(arg)
        except Exception as e:  # noqa: BLE001
            return type(e), str(e)

    assert run(A.MemoryRecords) == run(a_m.MemoryRecords)
    assert construct(A.MemoryRecords) == construct(a_m.MemoryRecords)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4, 5, 7])
def test_aiokafka_short_v2_slice_in_buffer(backend, codec):
    """A slice shorter than the v2 header that aiokafka's compiled reader reads as v2, with the
    header inside the buffer (taken from the bytes that follow): same batch fields, and iterating
    gives aiokafka's own error (its lengths come out negative) whatever codec the header names."""
    v2 = _a_v2([(0, None, None)])
    short = bytearray(_a_legacy(0, [(None, b"\x01", None)]))
    assert len(short) < A._V2_HEADER
    data = bytearray(v2 + bytes(short) + v2)
    data[len(v2) + 22] = (data[len(v2) + 22] & ~7) | codec  # the attributes the header is read with
    data = bytes(data)
    for check in (False, True):
        got = consume(A.MemoryRecords, data, check)
        assert got == consume(a_m.MemoryRecords, data, check)
        if A._LIVE_MR_COMPILED:
            assert got[1] is not None


def test_aiokafka_producer_state_and_types(backend):
    metas = []
    for cls in (a_d.DefaultRecordBatchBuilder, A.DefaultRecordBatchBuilder):
        b = cls(2, 0, 0, -1, -1, -1, 1 << 20)
        b.set_producer_state(5, 1, 10)
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (5, 1, 10)
        with pytest.raises(TypeError):
            b.append("0", 1, b"k", b"v", [])
        with pytest.raises(TypeError):
            b.append(0, 1, "k", b"v", [])
        assert b.append(0, 2.7, b"k", b"v", []).timestamp == 2  # the Cython builder truncates floats
        m = b.append(0, 1, b"k", b"v", [])
        metas.append((m.offset, m.size, m.timestamp, m.crc, bytes(b.build())))
    assert metas[0] == metas[1] and metas[0][:4] == (0, 9, 1, None)
    assert A.DefaultRecordBatchBuilder.size_of(b"k", b"v", []) == a_d.DefaultRecordBatchBuilder.size_of(b"k", b"v", [])


class _BytesSub(bytes):
    pass


class _StrSub(str):
    pass


class _TupleSub(tuple):
    pass


class _ListSub(list):
    pass


class _IndexOnly:  # __index__ without __int__: not an integer to aiokafka's compiled builder
    def __index__(self):
        return 3


_AIO_APPEND_CASES = {
    "float offset": (1.7, 1, b"k", b"v", []), "bool offset": (True, 1, b"k", b"v", []),
    "str ts": (0, "1", b"k", b"v", []), "huge ts": (0, 1 << 70, b"k", b"v", []),
    "huge offset": (1 << 63, 1, b"k", b"v", []), "None ts": (0, None, b"k", None, []),
    "negative ts": (0, -1, None, b"v", []), "memoryview key": (0, 1, memoryview(b"abcd").cast("B", (2, 2)), b"v", []),
    "strided key": (0, 1, memoryview(b"abcd")[::2], b"v", []), "tuple headers": (0, 1, b"k", b"v", ()),
    "None headers": (0, 1, b"k", b"v", None), "list header": (0, 1, b"k", b"v", [["a", b"b"]]),
    "3-tuple header": (0, 1, b"k", b"v", [("a", b"b", 1)]), "bytes header key": (0, 1, b"k", b"v", [(b"a", b"b")]),
    "None header key": (0, 1, b"k", b"v", [(None, b"b")]), "bytearray header value": (0, 1, b"k", b"v", [("a", bytearray(b"b"))]),
    "bytes subclass header value": (0, 1, b"k", b"v", [("a", _BytesSub(b"b"))]),
    "surrogate header key": (0, 1, b"k", b"v", [("\udc80", b"b")]),
    # which check comes first: offset, then the headers' type, then timestamp, key, value, headers
    "huge offset, tuple headers": (1 << 63, 1, b"k", b"v", ()), "str ts, tuple headers": (0, "1", b"k", b"v", ()),
    "str key, huge ts": (0, 1 << 63, "k", b"v", []), "strided key, str value": (0, 1, memoryview(b"ab")[::2], "v", []),
    "str key, strided value": (0, 1, "k", memoryview(b"ab")[::2], []),
    "None header key, bytearray value": (0, 1, b"k", b"v", [(None, bytearray(b"b"))]),
    "surrogate header key, then bytes key": (0, 1, b"k", b"v", [("\udc80", b"b"), (b"a", b"b")]),
    # any C-contiguous buffer is read as its bytes; exact types for headers
    "bytes subclass key": (0, 1, _BytesSub(b"k"), b"v", []), "array value": (0, 1, None, array.array("h", [1, -2]), []),
    "2-D value": (0, 1, None, memoryview(b"abcdef").cast("B", (3, 2)), []),
    "Fortran-order value": (0, 1, None, memoryview(b"abcdef").cast("B", (3, 2))[::-1], []),
    "1-element strided key": (0, 1, memoryview(b"ab")[::2], None, []), "str key": (0, 1, "k", None, []),
    "memoryview header value": (0, 1, None, None, [("a", memoryview(b"b"))]), "None header": (0, 1, None, None, [None]),
    "1-tuple header": (0, 1, None, None, [("a",)]), "list subclass headers": (0, 1, None, None, _ListSub()),
    "str subclass header key": (0, 1, None, None, [(_StrSub("a"), b"")]),
    "tuple subclass header": (0, 1, None, None, [_TupleSub(("a", b""))]),
    # C int64 conversions: __int__ (not __index__), truncating; int64 wrap-around of the delta
    "Fraction offset": (Fraction(7, 2), 1, None, None, []), "Decimal ts": (0, Decimal("-2.5"), None, None, []),
    "__index__ offset": (_IndexOnly(), 1, None, None, []), "NaN ts": (0, float("nan"), None, None, []),
    "min int64 ts": (0, -(1 << 63), None, None, []), "max int64 offset": ((1 << 63) - 1, 1, None, None, []),
}


@pytest.mark.parametrize("case", sorted(_AIO_APPEND_CASES))
def test_aiokafka_builder_argument_quirks(backend, case):
    """Odd arguments: same metadata, bytes or exception class as aiokafka's live builder."""
    args = _AIO_APPEND_CASES[case]

    def run(cls):
        b = cls(2, 0, 0, -1, -1, -1, 1 << 20)
        try:
            b.append(0, 5, None, b"first", [])  # a first record with another timestamp
            m = b.append(*args)
            if args[1] is None:  # the clock: compare the delta-free parts only
                return type(m), m.offset, m.size
            return type(m).__name__, m.offset, m.size, m.timestamp, m.crc, bytes(b.build())
        except Exception as e:  # noqa: BLE001
            return type(e)

    assert run(A.DefaultRecordBatchBuilder) == run(a_d.DefaultRecordBatchBuilder)


def _mostly(usual, odd):
    """usual three times in four, else odd: each append then mixes plain and odd arguments."""
    return st.integers(0, 3).flatmap(lambda i: odd if i == 0 else usual)


_odd_int = _mostly(st.integers(-3, 1 << 40), st.one_of(
    st.integers(-(1 << 64), 1 << 64), st.floats(), st.booleans(),
    st.sampled_from([Fraction(7, 2), Decimal("-2.5"), _IndexOnly(), "1"])))
_odd_buffer = _mostly(st.one_of(st.none(), st.binary(max_size=6)), st.one_of(
    st.binary(max_size=6).map(bytearray), st.binary(max_size=6).map(_BytesSub), st.binary(max_size=6).map(memoryview),
    st.binary(min_size=1, max_size=6).map(lambda b: memoryview(b)[::2]),
    st.binary(min_size=1, max_size=3).map(lambda b: memoryview(b * 2).cast("B", (2, len(b)))),
    st.binary(min_size=2, max_size=6).map(lambda b: memoryview(b * 2).cast("B", (2, len(b)))[::-1]),
    st.lists(st.integers(-99, 99), max_size=3).map(lambda v: array.array("h", v)), st.sampled_from(["s", 5])))
_odd_header = _mostly(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), st.one_of(
    st.tuples(st.one_of(st.just("\udc80"), st.binary(max_size=2), st.none(), st.text(max_size=2).map(_StrSub)),
              st.one_of(st.none(), st.binary(max_size=2))),
    st.tuples(st.text(max_size=2), _odd_buffer),
    st.tuples(st.text(max_size=2), st.one_of(st.none(), st.binary(max_size=3))).map(list),
    st.tuples(st.text(max_size=2), st.none()).map(_TupleSub), st.none(), st.just(("a",)), st.just(("a", b"", 1))))
_odd_headers = _mostly(st.lists(_odd_header, max_size=3), st.one_of(
    st.lists(_odd_header, max_size=2).map(tuple), st.builds(_ListSub), st.none()))


@HYP
@given(appends=st.lists(st.tuples(_odd_int, _odd_int, _odd_buffer, _odd_buffer,
                                  _odd_headers), min_size=1, max_size=5),
       batch_size=st.sampled_from([1 << 20, 100, 0]), codec=st.sampled_from([0, 5]))
def test_aiokafka_builder_odd_arguments(backend, appends, batch_size, codec):
    """Any mix of argument types through append, size_in_bytes and size_of, then build: same
    metadata, sizes, bytes and exception classes as aiokafka's live builder."""
    def call(f, *args):
        try:
            r = f(*args)
        except Exception as e:  # noqa: BLE001
            return type(e)
        return (r.offset, r.size, r.timestamp) if isinstance(r, a_d.DefaultRecordMetadata) else r

    def run(cls):
        b = cls(2, codec, 0, -1, -1, -1, batch_size)
        out = []
        for args in appends:
            out += [call(b.append, *args), call(b.size_in_bytes, *args), call(cls.size_of, *args[2:]),
                    call(cls.estimate_size_in_bytes, *args[2:]), b.size()]
        out.append(call(lambda: bytes(b.build())))
        return out

    assert run(A.DefaultRecordBatchBuilder) == run(a_d.DefaultRecordBatchBuilder)


_AIO_CTOR_CASES = {
    "float magic": (2.5, 0, 0, -1, -1, -1, 100), "magic past char": (300, 0, 0, -1, -1, -1, 100),
    "magic 1": (1, 0, 0, -1, -1, -1, 100), "codec 9": (2, 9, 0, -1, -1, -1, 100),
    "transactional 5": (2, 0, 5, -1, -1, -1, 100), "transactional True": (2, 0, True, -1, -1, -1, 100),
    "epoch past int16": (2, 0, 0, -1, 1 << 15, -1, 100), "sequence past int32": (2, 0, 0, -1, -1, 1 << 31, 100),
    "None producer id": (2, 0, 0, None, -1, -1, 100), "__index__ producer id": (2, 0, 0, _IndexOnly(), -1, -1, 100),
    "float producer id": (2, 0, 0, 7.9, -1, -1, 100), "float batch size": (2, 0, 0, -1, -1, -1, 100.0),
    "__index__ batch size": (2, 0, 0, -1, -1, -1, _IndexOnly()), "huge batch size": (2, 0, 0, -1, -1, -1, 1 << 63),
}


@pytest.mark.parametrize("case", sorted(_AIO_CTOR_CASES))
def test_aiokafka_builder_constructor_quirks(backend, case):
    """The constructor's C-typed arguments (char, int16, int32, int64, Py_ssize_t), then
    set_producer_state's: same state, bytes or exception class as aiokafka's live builder."""
    args = _AIO_CTOR_CASES[case]

    def run(cls):
        try:
            b = cls(*args)
            out = [b.append(0, 1, None, b"v", []).size, (b.producer_id, b.producer_epoch, b.base_sequence)]
            try:
                b.set_producer_state(*args[3:6])
                out.append((b.producer_id, b.producer_epoch, b.base_sequence))
            except Exception as e:  # noqa: BLE001
                out.append(type(e))
            return out + [bytes(b.build())]
        except Exception as e:  # noqa: BLE001
            return type(e)

    assert run(A.DefaultRecordBatchBuilder) == run(a_d.DefaultRecordBatchBuilder)


def test_aiokafka_builder_size_rule_and_state(backend):
    """Full-batch rule (offset 0 always fits, else refused at >= batch_size), first timestamp -1,
    compression, build() twice, sizes."""
    def run(cls):
        out = []
        b = cls(2, 1, 1, 7, 1, 3, 150)
        for off, ts in ((5, -1), (0, -1), (1, 10), (2, 3), (0, 4), (3, 5)):
            m = b.append(off, ts, b"k" * 10, b"v" * 30, [("h", b"x")])
            out.append(None if m is None else (m.offset, m.size, m.timestamp))
            out.append(b.size())
        out.append(b.size_in_bytes(1, 2, b"k", None, []))
        out.append((cls.size_of(b"k", b"v", [("h", None)]), cls.estimate_size_in_bytes(None, b"v", [])))
        first = b.build()
        data = bytes(first)
        out.append((b.build() is first, len(data), data[:27], data[35:61]))  # the gzip bytes hold a time
        return out

    assert run(A.DefaultRecordBatchBuilder) == run(a_d.DefaultRecordBatchBuilder)
    if A._LIVE_BUILDER_COMPILED and backend.BACKEND == "python":  # the twin of the compiled builder runs
        assert type(A.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 100)) is A._CompiledTwin
    m = A.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 100).append(0, 1, None, None, [])
    assert type(m) is a_d.DefaultRecordMetadata and repr(m).startswith("DefaultRecordMetadata(offset=0")


def test_aiokafka_records_read_only_and_fallback_midway(backend):
    recs = [(10 + i, b"k%d" % i, b"v", [("h", b"x")] if i % 2 else []) for i in range(6)]
    data = bytearray(a_build(a_d.DefaultRecordBatchBuilder, recs)[0])
    got = list(A.MemoryRecords(bytes(data)).next_batch())
    assert [(r.offset, r.key, r.headers) for r in got] == [(i, b"k%d" % i, [("h", b"x")] if i % 2 else [])
                                                            for i in range(6)]
    with pytest.raises(AttributeError):
        got[0].offset = 5
    assert got[0].checksum is None and repr(got[0]).startswith("DefaultRecord(offset=0, timestamp=10")
    # corrupt the 4th record's key length: the first 3 come from kbatch, then aiokafka's reader raises
    pos = 61
    for _ in range(3):
        pos += 1 + data[pos] // 2
    data[pos + 4] = 0x7E
    before = compat.STATS["fallback_batches"]
    assert consume(A.MemoryRecords, bytes(data), False) == consume(a_m.MemoryRecords, bytes(data), False)
    assert consume(A.MemoryRecords, bytes(data), False)[1] is not None
    assert compat.STATS["fallback_batches"] > before


def test_aiokafka_control_batch(backend):
    data = _control_batch(b"\x00\x00\x00\x01")
    got = consume(A.MemoryRecords, data)
    assert got == consume(a_m.MemoryRecords, data)
    (rec,) = list(A.MemoryRecords(data).next_batch())
    assert A.ControlRecord.parse(rec.key) == A.COMMIT_MARKER


# ------------------------------------------------------------------------------- install
def test_install_unknown_and_missing_client(monkeypatch):
    with pytest.raises(ValueError):
        compat.install("confluent")
    monkeypatch.setitem(sys.modules, "kafka", None)  # import kafka -> ImportError
    with pytest.raises(compat.ClientNotInstalledError, match="pip install kafka-python") as e:
        compat.install("kafka-python")
    assert isinstance(e.value, ImportError)


def test_install_kafka_python_end_to_end(backend):
    import kafka.consumer.fetcher as fetcher
    import kafka.producer.record_accumulator as acc
    from kafka.structs import TopicPartition

    tp = TopicPartition("t", 0)
    orig_mr = fetcher.MemoryRecords

    def produce_and_fetch():
        ra = acc.RecordAccumulator(batch_size=1 << 16, message_version=2)
        for i in range(5):
            ra.append(tp, 1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"x")], now=0)
        (batch,) = list(ra._batches[tp])
        batch.records.close()
        data = bytes(batch.records.buffer())
        pr = fetcher.Fetcher.PartitionRecords(0, tp, fetcher.MemoryRecords(data))
        return data, [(r.offset, r.key, r.value, r.headers) for r in pr.take()]

    before = dict(compat.STATS)
    data0, recs0 = produce_and_fetch()
    assert compat.STATS == before  # not installed: kbatch is not used
    compat.install("kafka-python")
    try:
        assert fetcher.MemoryRecords is K.MemoryRecords and acc.MemoryRecordsBuilder is K.MemoryRecordsBuilder
        assert k_m.MemoryRecords is K.MemoryRecords
        data1, recs1 = produce_and_fetch()
        assert compat.STATS["built_records"] - before["built_records"] == 5
        assert compat.STATS["decoded_records"] - before["decoded_records"] == 5
    finally:
        compat.uninstall("kafka-python")
    assert fetcher.MemoryRecords is orig_mr and acc.MemoryRecordsBuilder is k_m.MemoryRecordsBuilder
    assert not compat.installed("kafka-python")
    assert (data1, recs1) == (data0, recs0)
    assert recs1[0] == (0, b"k0", b"v0", [("h", b"x")])


def test_install_aiokafka_end_to_end(backend):
    import aiokafka.consumer.fetcher as fetcher
    import aiokafka.producer.message_accumulator as acc
    from aiokafka.structs import TopicPartition

    tp = TopicPartition("t", 0)

    def produce_and_fetch():
        bb = acc.BatchBuilder(1 << 16, 0)
        for i in range(5):
            bb.append(timestamp=1.0 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
        data = bytes(bb._build())
        pr = fetcher.PartitionRecords(tp, fetcher.MemoryRecords(data), [], 0, None, None, True, 0)
        return data, [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in pr]

    before = dict(compat.STATS)
    data0, recs0 = produce_and_fetch()
    assert compat.STATS == before
    compat.install("aiokafka")
    try:
        assert fetcher.MemoryRecords is A.MemoryRecords
        assert acc.DefaultRecordBatchBuilder is A.DefaultRecordBatchBuilder
        data1, recs1 = produce_and_fetch()
        assert compat.STATS["built_records"] - before["built_records"] == 5
        assert compat.STATS["decoded_records"] - before["decoded_records"] == 5
    finally:
        compat.uninstall("aiokafka")
    assert fetcher.MemoryRecords is a_m.MemoryRecords
    assert acc.DefaultRecordBatchBuilder is a_d.DefaultRecordBatchBuilder
    assert (data1, recs1) == (data0, recs0)
