"""The kernel contract (kbatch._core_py and kbatch._core), on both backends.

Every test takes the `backend` fixture (tests/conftest.py) and so runs on the pure twin and on
the Cython extension; the hypothesis tests at the end call both modules directly on the same
random, truncated and bit-flipped inputs and require the same result, or the same exception
class at the same byte position with the same expected/found values.

Test inputs are built here with struct, zlib and the `crc32c` package, never with the kernels.
"""
import array
import gc
import mmap
import struct
import zlib

import crc32c as crc32c_pkg
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import load_backend
from kbatch import _core_py
from kbatch import _wire as W
from kbatch import errors as kbatch_errors
from kbatch.errors import (CorruptRecordError, InvalidRecordError, KBatchError, TruncatedDataError)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MASK64 = 2**64 - 1


# ------------------------------------------------------------------------------------ encoders
def uvarint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def varint(v: int) -> bytes:
    return uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def varlong(v: int) -> bytes:
    return uvarint(((v << 1) ^ (v >> 63)) & MASK64)


def blob(b) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def record(attrs=0, ts_delta=0, off_delta=0, key=None, value=b"", headers=(), extra=b"", length=None):
    """One v2 record (DefaultRecord.writeTo); `extra` bytes inside the body, `length` overrides."""
    body = bytes([attrs]) + varlong(ts_delta) + varint(off_delta) + blob(key) + blob(value)
    body += varint(len(headers))
    for hk, hv in headers:
        hk = hk.encode() if isinstance(hk, str) else hk
        body += varint(len(hk)) + hk + blob(hv)
    body += extra
    return varint(len(body) if length is None else length) + body


def v2_batch(records=b"", count=0, base_offset=0, ple=0, attrs=0, lod=None, first_ts=0, max_ts=0,
             pid=-1, epoch=-1, seq=-1, crc=None, length=None):
    body = struct.pack(">hiqqqhii", attrs, max(count - 1, 0) if lod is None else lod, first_ts, max_ts,
                       pid, epoch, seq, count) + records
    crc = crc32c_pkg.crc32c(body) if crc is None else crc
    length = 9 + len(body) if length is None else length
    return struct.pack(">qiibI", base_offset, length, ple, 2, crc) + body


def legacy_entry(offset, magic, attrs=0, ts=0, key=None, value=b"", crc=None, size=None):
    def lp(b):
        return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    tail = bytes([magic, attrs & 0xFF]) + (struct.pack(">q", ts) if magic == 1 else b"") + lp(key) + lp(value)
    crc = zlib.crc32(tail) if crc is None else crc
    msg = struct.pack(">I", crc) + tail
    return struct.pack(">qi", offset, len(msg) if size is None else size) + msg


# kafka-python test/record/test_records.py, "real live data from Kafka 11 broker", first batch
# (kafka-format.md §1.7): built from its documented fields, checked against its documented CRC.
REAL_V2_RECORDS = bytes.fromhex("12 00 00 00 01 06 31 32 33 00")
REAL_V2_BATCH = struct.pack(">qiibIhiqqqhii", 0, 59, 1, 2, 51946096, 0, 0, 1503229838908, 1503229838908,
                            -1, -1, -1, 1) + REAL_V2_RECORDS


def err_of(fn, *args):
    with pytest.raises(KBatchError) as ei:
        fn(*args)
    return ei.value


# ------------------------------------------------------------------------------------ CRC32C
def test_crc32c_known_vectors(backend):
    assert backend.crc32c(b"123456789") == 0xE3069283
    assert backend.crc32c(b"") == 0
    assert backend.crc32c(b"", 0xDEADBEEF) == 0xDEADBEEF
    assert backend.crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros


def test_crc32c_continuation(backend):
    a, b = b"hello, ", b"kafka record batches" * 7
    assert backend.crc32c(b, backend.crc32c(a)) == backend.crc32c(a + b) == crc32c_pkg.crc32c(a + b)


def test_crc32c_value_is_masked_to_32_bits(backend):
    data = b"abc"
    assert backend.crc32c(data, -1) == backend.crc32c(data, 0xFFFFFFFF)
    assert backend.crc32c(data, (1 << 40) | 5) == backend.crc32c(data, 5)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 63, 1000, (1 << 16) + 3])
def test_crc32c_matches_crc32c_package(backend, n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    assert backend.crc32c(data) == crc32c_pkg.crc32c(data)
    assert backend.crc32c(data[1:]) == crc32c_pkg.crc32c(data[1:])  # unaligned start


def test_crc32c_every_buffer_type(backend):
    raw = bytes(range(256)) * 5
    want = crc32c_pkg.crc32c(raw)
    m = mmap.mmap(-1, len(raw))
    m.write(raw)
    try:
        buffers = [raw, bytearray(raw), memoryview(raw), memoryview(bytearray(raw)).toreadonly(), m,
                   np.frombuffer(raw, dtype=np.uint8), np.frombuffer(raw, dtype=np.int8),
                   np.frombuffer(raw, dtype=np.uint8).reshape(10, 128), array.array("b", raw),
                   memoryview(raw).cast("c")]
        for buf in buffers:
            assert backend.crc32c(buf) == want, type(buf)
        assert backend.crc32c(memoryview(raw)[100:200]) == crc32c_pkg.crc32c(raw[100:200])
        assert backend.crc32c(np.frombuffer(raw, dtype=np.uint32)) == want  # wider items: their bytes
    finally:
        m.close()


def test_crc32c_rejects_non_buffers(backend):
    with pytest.raises(TypeError):
        backend.crc32c("text")
    with pytest.raises(TypeError):
        backend.crc32c(memoryview(bytes(10))[::2])  # not contiguous


def test_crc32c_is_hardware_is_a_bool(backend):
    assert isinstance(backend.crc32c_is_hardware(), bool)
    if backend.BACKEND == "python":
        assert backend.crc32c_is_hardware() is False


# ------------------------------------------------------------------------------------ varints
# Kafka's ByteUtilsTest (testVarintSerde / testVarlongSerde)
VARINT_VECTORS = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7E"), (-64, "7F"), (64, "80 01"), (-65, "81 01"),
    (8191, "FE 7F"), (-8192, "FF 7F"), (8192, "80 80 01"), (-8193, "81 80 01"),
    (1048575, "FE FF 7F"), (-1048576, "FF FF 7F"), (1048576, "80 80 80 01"), (-1048577, "81 80 80 01"),
    (134217727, "FE FF FF 7F"), (-134217728, "FF FF FF 7F"), (134217728, "80 80 80 80 01"),
    (-134217729, "81 80 80 80 01"), (INT32_MAX, "FE FF FF FF 0F"), (INT32_MIN, "FF FF FF FF 0F"),
]
VARLONG_VECTORS = VARINT_VECTORS + [
    (2**31, "80 80 80 80 10"), (-(2**31) - 1, "81 80 80 80 10"),
    (INT64_MAX, "FE FF FF FF FF FF FF FF FF 01"), (INT64_MIN, "FF FF FF FF FF FF FF FF FF 01"),
]


@pytest.mark.parametrize("value,hexbytes", VARINT_VECTORS)
def test_varint_vectors(backend, value, hexbytes):
    enc = bytes.fromhex(hexbytes)
    assert backend.write_varint(value) == enc
    assert backend.sizeof_varint(value) == len(enc)
    assert backend.read_varint(enc, 0) == (value, len(enc))
    assert backend.read_varint(b"\xAA\xBB" + enc + b"\xCC", 2) == (value, 2 + len(enc))


@pytest.mark.parametrize("value,hexbytes", VARLONG_VECTORS)
def test_varlong_vectors(backend, value, hexbytes):
    enc = bytes.fromhex(hexbytes)
    assert backend.write_varlong(value) == enc
    assert backend.sizeof_varlong(value) == len(enc)
    assert backend.read_varlong(enc, 0) == (value, len(enc))
    assert backend.read_varlong(b"\x00" + enc, 1) == (value, 1 + len(enc))


def test_varint_out_of_range_is_overflow(backend):
    for fn in (backend.write_varint, backend.sizeof_varint):
        for v in (INT32_MAX + 1, INT32_MIN - 1):
            with pytest.raises(OverflowError, match="varint out of int32 range"):
                fn(v)
    for fn in (backend.write_varlong, backend.sizeof_varlong):
        for v in (INT64_MAX + 1, INT64_MIN - 1):
            with pytest.raises(OverflowError, match="varlong out of int64 range"):
                fn(v)


def test_overlong_but_valid_encodings_are_accepted(backend):
    assert backend.read_varint(b"\x80\x00", 0) == (0, 2)
    assert backend.read_varint(b"\x81\x80\x80\x80\x00", 0) == (-1, 5)
    assert backend.read_varlong(b"\x80" * 9 + b"\x00", 0) == (0, 10)


def test_high_bits_of_last_byte_are_dropped_as_in_java(backend):
    assert backend.read_varint(bytes.fromhex("FF FF FF FF 7F"), 0) == (INT32_MIN, 5)
    assert backend.read_varlong(bytes.fromhex("FF" * 9 + "7F"), 0) == (INT64_MIN, 10)


def test_varint_fifth_byte_msb_is_corrupt_at_start(backend):
    e = err_of(backend.read_varint, b"\x00\x00\x00" + b"\x80" * 5 + b"\x00", 3)
    assert type(e) is CorruptRecordError
    assert (e.position, e.expected, e.found) == (3, "at most 5 bytes", "a 5th byte with its MSB set")


def test_varlong_tenth_byte_msb_is_corrupt_at_start(backend):
    e = err_of(backend.read_varlong, b"\x00" + b"\xFF" * 10 + b"\x00", 1)
    assert type(e) is CorruptRecordError
    assert (e.position, e.expected, e.found) == (1, "at most 10 bytes", "a 10th byte with its MSB set")


@pytest.mark.parametrize("data,pos,where", [(b"", 0, 0), (b"\x80", 0, 1), (b"\x00\x80\x80", 1, 3),
                                            (b"\x01", 5, 5)])
def test_truncated_varint_and_varlong(backend, data, pos, where):
    for fn in (backend.read_varint, backend.read_varlong):
        e = err_of(fn, data, pos)
        assert type(e) is TruncatedDataError and isinstance(e, EOFError)
        assert (e.position, e.expected, e.found, e.base_offset) == (where, 1, 0, None)


def test_varint_reads_signed_byte_buffers_as_unsigned(backend):
    enc = np.frombuffer(bytes.fromhex("FE FF FF FF 0F"), dtype=np.int8)
    assert backend.read_varint(enc, 0) == (INT32_MAX, 5)


# ------------------------------------------------------------------------------------ scan
def test_scan_real_broker_v2_batch(backend):
    assert crc32c_pkg.crc32c(REAL_V2_BATCH[21:]) == 51946096  # the documented CRC
    s = backend.scan_batches(REAL_V2_BATCH)
    assert [k for k in s] == [name for name, _ in backend.SCAN_FIELDS] + ["valid_bytes"]
    for name, dt in backend.SCAN_FIELDS:
        assert s[name].dtype == np.dtype(dt) and s[name].shape == (1,), name
    row = {name: s[name][0].item() for name, _ in backend.SCAN_FIELDS}
    assert row == dict(position=0, size=71, magic=2, base_offset=0, last_offset=0, partition_leader_epoch=1,
                       crc=51946096, crc_valid=True, attributes=0, first_timestamp=1503229838908,
                       max_timestamp=1503229838908, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                       record_count=1)
    assert s["valid_bytes"] == 71
    (rec,) = backend.decode_records_v2(REAL_V2_BATCH, 61, 71, 1, 0, 1503229838908, None, 0, False)
    assert (rec.offset, rec.timestamp, rec.key, bytes(rec.value), rec.headers) == (
        0, 1503229838908, None, b"123", ())


def mixed_log():
    b0 = v2_batch(record(value=b"a") + record(off_delta=1, value=b"b"), count=2, base_offset=100,
                  ple=7, attrs=0x10, first_ts=5, max_ts=9, pid=42, epoch=3, seq=11)
    b1 = legacy_entry(102, 0, value=b"v0")
    b2 = legacy_entry(103, 1, attrs=0x08, ts=123456, key=b"k", value=b"v1")
    b3 = legacy_entry(110, 1, attrs=0x02, ts=777, value=b"compressed-wrapper")
    b4 = v2_batch(count=0, base_offset=111, lod=-1)
    return [b0, b1, b2, b3, b4]


def test_scan_mixed_magics(backend):
    parts = mixed_log()
    data = b"".join(parts)
    s = backend.scan_batches(data)
    pos = np.cumsum([0] + [len(p) for p in parts])[:-1]
    assert s["position"].tolist() == pos.tolist()
    assert s["size"].tolist() == [len(p) for p in parts]
    assert s["magic"].tolist() == [2, 0, 1, 1, 2]
    assert s["base_offset"].tolist() == [100, 102, 103, 110, 111]
    assert s["last_offset"].tolist() == [101, 102, 103, 110, 110]
    assert s["partition_leader_epoch"].tolist() == [7, -1, -1, -1, 0]
    assert s["attributes"].tolist() == [0x10, 0, 0x08, 0x02, 0]
    assert s["first_timestamp"].tolist() == [5, -1, 123456, 777, 0]
    assert s["max_timestamp"].tolist() == [9, -1, 123456, 777, 0]
    assert s["producer_id"].tolist() == [42, -1, -1, -1, -1]
    assert s["producer_epoch"].tolist() == [3, -1, -1, -1, -1]
    assert s["base_sequence"].tolist() == [11, -1, -1, -1, -1]
    assert s["record_count"].tolist() == [2, 1, 1, -1, 0]
    assert s["crc_valid"].all()
    assert s["crc"].tolist()[1] == zlib.crc32(parts[1][16:])
    assert s["valid_bytes"] == len(data)


def test_scan_start_end(backend):
    parts = mixed_log()
    data = b"".join(parts)
    s = backend.scan_batches(data, len(parts[0]), len(parts[0]) + len(parts[1]) + len(parts[2]))
    assert s["magic"].tolist() == [0, 1] and s["valid_bytes"] == len(parts[0]) + len(parts[1]) + len(parts[2])
    s = backend.scan_batches(b"\xEE" * 5 + data, 5)
    assert s["position"][0] == 5 and s["valid_bytes"] == 5 + len(data)
    s = backend.scan_batches(data, len(data))
    assert len(s["position"]) == 0 and s["valid_bytes"] == len(data)


@pytest.mark.parametrize("cut", [1, 17, 18, 44, 61])
def test_scan_truncated_tail_gives_valid_bytes(backend, cut):
    parts = mixed_log()
    data = b"".join(parts)
    s = backend.scan_batches(data[:len(data) - cut])
    assert len(s["position"]) == 4 and s["valid_bytes"] == len(data) - len(parts[-1])


def test_scan_size_below_overhead_is_corrupt(backend):
    data = REAL_V2_BATCH + struct.pack(">qi", 5, 13) + bytes(13)
    e = err_of(backend.scan_batches, data)
    assert type(e) is CorruptRecordError
    assert (e.position, e.expected, e.found, e.base_offset) == (71, "size >= 14", 13, 5)
    e = err_of(backend.scan_batches, struct.pack(">qi", 9, -1) + bytes(20))  # negative size
    assert (e.position, e.found) == (0, -1)


def test_scan_v2_below_batch_overhead_is_corrupt(backend):
    data = struct.pack(">qiib", 8, 48, 0, 2) + bytes(48 - 5)  # total 60 < 61
    e = err_of(backend.scan_batches, data)
    assert type(e) is CorruptRecordError
    assert (e.position, e.expected, e.found, e.base_offset) == (0, "size >= 61", 60, 8)


def test_scan_v1_below_overhead_is_corrupt(backend):
    data = struct.pack(">qi", 3, 21) + bytes([0, 0, 0, 0, 1]) + bytes(16)  # magic 1, size 21
    e = err_of(backend.scan_batches, data)
    assert (e.position, e.expected, e.found, e.base_offset) == (0, "size >= 22", 21, 3)


def test_scan_bad_magic(backend):
    data = REAL_V2_BATCH + struct.pack(">qiib", 77, 20, 0, 3) + bytes(15)
    e = err_of(backend.scan_batches, data)
    assert type(e) is CorruptRecordError
    assert (e.position, e.expected, e.found, e.base_offset) == (71 + 16, "magic 0, 1 or 2", 3, 77)
    e = err_of(backend.scan_batches, struct.pack(">qiib", 1, 20, 0, -1) + bytes(15))
    assert e.found == -1


def test_scan_bad_magic_past_the_end_is_only_truncation(backend):
    data = REAL_V2_BATCH + struct.pack(">qiib", 77, 200, 0, 3) + bytes(15)
    assert backend.scan_batches(data)["valid_bytes"] == 71


def test_scan_crc_flip(backend):
    parts = mixed_log()
    for i, at in ((0, 70), (1, 20), (2, 30)):
        bad = bytearray(b"".join(parts))
        pos = sum(len(p) for p in parts[:i])
        bad[pos + at] ^= 0x01
        s = backend.scan_batches(bad)
        assert s["crc_valid"].tolist() == [j != i for j in range(5)]
        assert backend.scan_batches(bad, verify_crc=False)["crc_valid"].all()


def test_scan_empty_and_short(backend):
    for data in (b"", bytes(17)):
        s = backend.scan_batches(data)
        assert s["valid_bytes"] == 0 and all(len(s[n]) == 0 for n, _ in backend.SCAN_FIELDS)


def test_scan_buffer_types(backend):
    data = b"".join(mixed_log())
    want = backend.scan_batches(data)
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.int8)):
        got = backend.scan_batches(buf)
        assert all(np.array_equal(got[n], want[n]) for n, _ in backend.SCAN_FIELDS)


# ------------------------------------------------------------------------------------ records
def decode(backend, section, count, base_offset=0, base_ts=1000, lat=None, ttype=0, extended=False, pre=b""):
    data = pre + section
    return backend.decode_records_v2(data, len(pre), len(data), count, base_offset, base_ts, lat, ttype, extended)


def test_decode_fields(backend):
    sec = (record(key=b"k1", value=b"v1", headers=[("h1", b"x"), ("h2", None)])
           + record(attrs=0x20, ts_delta=-5, off_delta=-2, key=None, value=b"", headers=[("\xe9", b"")])
           + record(ts_delta=INT64_MAX, off_delta=INT32_MAX, value=None))
    recs = decode(backend, sec, 3, base_offset=10, base_ts=1000, ttype=0, pre=b"garbage")
    r0, r1, r2 = recs
    assert (r0.offset, r0.timestamp, r0.timestamp_type, bytes(r0.key), bytes(r0.value)) == (10, 1000, 0, b"k1", b"v1")
    assert [(k, None if v is None else bytes(v)) for k, v in r0.headers] == [("h1", b"x"), ("h2", None)]
    assert type(r0.headers) is tuple and type(r0.headers[0]) is tuple
    assert (r0.is_tombstone, r0.attributes) == (False, 0)
    assert (r1.offset, r1.timestamp, r1.key, bytes(r1.value)) == (8, 995, None, b"")
    assert (r1.is_tombstone, r1.attributes) == (True, 0x20)  # KIP-87 flag, non-null value
    assert r1.headers[0][0] == "\xe9"
    assert (r2.offset, r2.timestamp, r2.value, r2.is_tombstone) == (
        10 + INT32_MAX, 1000 + INT64_MAX - 2**64, None, True)  # Java long wrap


def test_decode_keys_are_readonly_views_of_the_input(backend):
    data = bytearray(b"xx" + record(key=b"key", value=b"value", headers=[("h", b"hv")]))
    (r,) = backend.decode_records_v2(data, 2, len(data), 1, 0, 0, None, 0, False)
    for mv in (r.key, r.value, r.headers[0][1]):
        assert type(mv) is backend.ByteView and mv.readonly and mv.format == "B" and mv.obj is data
        assert memoryview(mv).readonly
    assert r.key is r.key
    with pytest.raises(BufferError):
        data.extend(b"more")  # the records still export the buffer
    del data
    gc.collect()
    assert bytes(r.key) == b"key" and bytes(r.value) == b"value"  # and keep it alive


def test_input_changed_after_decoding_is_never_read_out_of_bounds(backend):
    data = bytearray(record(key=b"k", value=b"v", headers=[("a", b"1"), ("b", b"2")]))
    (r,) = backend.decode_records_v2(data, 0, len(data), 1, 0, 0, None, 0, False)
    data[data.index(b"\x02a")] = 0x7E  # the first header key's length, now 63: past the record
    try:
        headers = r.headers  # built on first access by the cython backend
    except RuntimeError:
        assert backend.BACKEND == "cython"
    else:
        assert len(headers) == 2
    assert bytes(r.key) == b"k" and bytes(r.value) == b"v"


def test_decode_offsets_wrap(backend):
    (r,) = decode(backend, record(off_delta=1), 1, base_offset=INT64_MAX)
    assert r.offset == INT64_MIN


def test_decode_log_append_time(backend):
    sec = record(ts_delta=5) + record(ts_delta=-7, off_delta=1)
    recs = decode(backend, sec, 2, base_ts=1000, lat=424242, ttype=1)
    assert [(r.timestamp, r.timestamp_type) for r in recs] == [(424242, 1)] * 2
    # LAT equal to "no timestamp" reads as None, whatever the deltas say
    assert [r.timestamp for r in decode(backend, sec, 2, lat=-1, extended=False)] == [None, None]
    assert [r.timestamp for r in decode(backend, sec, 2, lat=INT64_MIN, extended=True)] == [None, None]
    assert [r.timestamp for r in decode(backend, sec, 2, lat=-1, extended=True)] == [-1, -1]


def test_decode_no_timestamp_extended_and_not(backend):
    sec = record(ts_delta=0) + record(ts_delta=1)
    assert [r.timestamp for r in decode(backend, sec, 2, base_ts=-1)] == [None, 0]
    assert [r.timestamp for r in decode(backend, sec, 2, base_ts=-1, extended=True)] == [-1, 0]
    assert [r.timestamp for r in decode(backend, sec, 2, base_ts=INT64_MIN, extended=True)] == [None, INT64_MIN + 1]
    assert [r.timestamp for r in decode(backend, sec, 2, base_ts=INT64_MIN)] == [INT64_MIN, INT64_MIN + 1]


def test_decode_empty_section(backend):
    assert decode(backend, b"", 0) == []


def test_decode_header_key_invalid_utf8_is_replaced(backend):
    (r,) = decode(backend, record(headers=[(b"a\xffb", None)]), 1)
    assert r.headers == (("a\ufffdb", None),)


def test_decode_numpy_arguments(backend):
    sec = record(ts_delta=3, off_delta=2, value=b"v")
    want = decode(backend, sec, 1, base_offset=5, base_ts=10)
    got = backend.decode_records_v2(np.frombuffer(sec, dtype=np.int8), np.int64(0), np.int64(len(sec)),
                                    np.int32(1), np.int64(5), np.int64(10), None, 0, np.bool_(False))
    assert got == want


def test_decode_signed_byte_buffer_reads_attributes_unsigned(backend):
    sec = record(attrs=0xFF, value=b"v")
    (r,) = backend.decode_records_v2(np.frombuffer(sec, dtype=np.int8), 0, len(sec), 1, 0, 0, None, 0, False)
    assert r.attributes == 0xFF and r.is_tombstone


# one named test per corruption mode: class, position, expected, found, base offset
def corrupt(backend, section, count, pre=b"PRE"):
    data = pre + section
    with pytest.raises(KBatchError) as ei:
        backend.decode_records_v2(data, len(pre), len(data), count, 77, 0, None, 0, False)
    e = ei.value
    return type(e), e.position - len(pre), e.expected, e.found, e.base_offset


def test_corrupt_negative_count(backend):
    assert corrupt(backend, record(), -1) == (InvalidRecordError, 0, "count >= 0", -1, 77)


def test_corrupt_record_length_past_end(backend):
    body = record(value=b"abc")[1:]
    sec = record() + varint(len(body)) + body[:-1]  # the second record is one byte short
    assert corrupt(backend, sec, 2) == (InvalidRecordError, len(record()), f"record length <= {len(body) - 1}",
                                        len(body), 77)


def test_corrupt_negative_record_length(backend):
    assert corrupt(backend, varint(-3) + bytes(8), 1) == (InvalidRecordError, 0, "record length <= 8", -3, 77)


def test_corrupt_empty_record(backend):
    assert corrupt(backend, varint(0) + record(), 2) == (InvalidRecordError, 1, 1, 0, 77)


def test_corrupt_field_past_end(backend):
    # key says 10 bytes; 2 remain in the record
    body = bytes([0]) + varlong(0) + varint(0) + varint(10) + b"ab"
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (InvalidRecordError, len(sec) - 2, "10 bytes",
                                        "2 bytes left in record", 77)


def test_corrupt_header_key_past_end(backend):
    body = bytes([0]) + varlong(0) + varint(0) + blob(None) + blob(b"v") + varint(1) + varint(5) + b"abc"
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (InvalidRecordError, len(sec) - 3, 5, 3, 77)


def test_corrupt_negative_header_key(backend):
    body = bytes([0]) + varlong(0) + varint(0) + blob(None) + blob(b"v") + varint(1) + varint(-1) + b"xx"
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (InvalidRecordError, len(sec) - 3, "header key size >= 0", -1, 77)


def test_corrupt_negative_header_count(backend):
    body = bytes([0]) + varlong(0) + varint(0) + blob(None) + blob(b"v") + varint(-2)
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (InvalidRecordError, len(sec), "header count >= 0", -2, 77)


def test_corrupt_header_count_too_large(backend):
    body = bytes([0]) + varlong(0) + varint(0) + blob(None) + blob(b"v") + varint(3) + b"\x00\x00"
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (InvalidRecordError, len(sec) - 2, "header count <= 2", 3, 77)


def test_corrupt_record_size_mismatch(backend):
    r = record(value=b"v", extra=b"\x00\x00")
    n = len(r) - 1
    assert corrupt(backend, r, 1) == (InvalidRecordError, 0, f"{n} bytes in record payload",
                                      f"{n - 2} bytes read", 77)


def test_corrupt_bytes_remaining(backend):
    sec = record() + record() + b"\x00"
    assert corrupt(backend, sec, 2) == (InvalidRecordError, len(sec) - 1,
                                        f"2 records ending at byte {len(sec) - 1 + 3}", "1 more bytes", 77)


def test_corrupt_premature_eof(backend):
    sec = record() + record()
    assert corrupt(backend, sec, 3) == (InvalidRecordError, len(sec), "3 records", 2, 77)


def test_corrupt_truncated_varint_in_record(backend):
    body = bytes([0]) + b"\x80\x80"  # timestamp delta runs into the record's end
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (TruncatedDataError, len(sec), 1, 0, 77)


def test_corrupt_overlong_varint_in_record(backend):
    body = bytes([0]) + varlong(0) + b"\x80\x80\x80\x80\x80\x00"
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (CorruptRecordError, 2 + 1, "at most 5 bytes",
                                        "a 5th byte with its MSB set", 77)


def test_corrupt_overlong_varlong_in_record(backend):
    body = bytes([0]) + b"\xff" * 10 + b"\x00"
    sec = varint(len(body)) + body
    assert corrupt(backend, sec, 1) == (CorruptRecordError, 2, "at most 10 bytes",
                                        "a 10th byte with its MSB set", 77)


def test_corrupt_error_message_names_batch(backend):
    with pytest.raises(InvalidRecordError, match=r"premature EOF.*at byte 0, in batch with base offset 5"):
        backend.decode_records_v2(b"", 0, 0, 1, 5, 0, None, 0, False)


# ------------------------------------------------------------------------------------ Record
def test_record_equality_hash_repr_across_backends(backend):
    other = _core_py if backend.BACKEND == "cython" else load_backend("cython")
    args = (5, 1000, 0, memoryview(b"k"), memoryview(b"v"), (("h", memoryview(b"x")), ("n", None)), False, 0)
    a, b = backend.Record(*args), other.Record(*args)
    assert a == b and b == a and not (a != b) and not (b != a)
    assert hash(a) == hash(b) and repr(a) == repr(b)
    assert a._astuple() == (5, 1000, 0, b"k", b"v", (("h", b"x"), ("n", None)), False, 0)
    c = backend.Record(6, *args[1:])
    assert a != c and c != b
    assert a != "not a record" and (a == 5) is False
    assert (a.offset, a.timestamp, a.timestamp_type, bytes(a.key), bytes(a.value), a.is_tombstone,
            a.attributes) == (5, 1000, 0, b"k", b"v", False, 0)
    assert repr(a) == ("Record(offset=5, timestamp=1000, timestamp_type=0, key=b'k', value=b'v', "
                       "headers=(('h', b'x'), ('n', None)), is_tombstone=False)")


def test_decoded_records_equal_across_backends(backend):
    sec = record(key=b"k", value=b"v", headers=[("a", b"1")]) + record(off_delta=1, value=None)
    other = _core_py if backend.BACKEND == "cython" else load_backend("cython")
    assert decode(backend, sec, 2) == decode(other, sec, 2)
    assert {*decode(backend, sec, 2)} == {*decode(other, sec, 2)}


# ------------------------------------------------------------------------------------ timestamps
def test_timestamp_bounds_saturate(backend):
    assert backend.timestamp_bounds(100, 10, 20) == (90, 120)
    assert backend.timestamp_bounds(0, INT64_MAX, INT64_MAX) == (-INT64_MAX, INT64_MAX)
    assert backend.timestamp_bounds(-10, INT64_MAX, 0) == (INT64_MIN, -10)
    assert backend.timestamp_bounds(INT64_MAX, -5, 5) == (INT64_MAX, INT64_MAX)
    assert backend.timestamp_bounds(2**70, 0, 0) == (INT64_MAX, INT64_MAX)


def test_check_timestamps_boundaries(backend):
    now, before, after = 1_000_000, 1000, 500
    lo, hi = now - before, now + after
    ts = np.array([lo, hi, now, lo - 1, hi + 1, -1, INT64_MIN, INT64_MAX], dtype=np.int64)
    assert backend.check_timestamps(ts[:3], now, before, after, -1) == (-1, 0, 0)
    assert backend.check_timestamps(ts, now, before, after, -1) == (3, 2, 2)
    assert backend.check_timestamps(ts, now, before, after, INT64_MIN) == (3, 2, 2)  # -1 counts, MIN not
    assert backend.check_timestamps(ts, now, before, after, 0) == (3, 3, 2)  # both count
    assert backend.check_timestamps(ts[4:], now, before, after, -1) == (0, 1, 2)


def test_check_timestamps_wrap_case(backend):
    # now=0, before=MAX: lo = -MAX, so Long.MIN_VALUE is too old (a wrapping check calls it new)
    ts = np.array([INT64_MIN], dtype=np.int64)
    assert backend.check_timestamps(ts, 0, INT64_MAX, INT64_MAX, -1) == (0, 1, 0)
    assert backend.check_timestamps(ts, 0, INT64_MAX, INT64_MAX, INT64_MIN) == (-1, 0, 0)
    ts = np.array([INT64_MAX, INT64_MIN + 1], dtype=np.int64)
    assert backend.check_timestamps(ts, 0, INT64_MAX, INT64_MAX, -1) == (-1, 0, 0)


def test_check_timestamps_inputs(backend):
    assert backend.check_timestamps([], 0, 0, 0, -1) == (-1, 0, 0)
    assert backend.check_timestamps([5, 50, 500], 50, 0, 0, -1) == (0, 1, 1)
    strided = np.arange(20, dtype=np.int64)[::3]  # 0 3 6 9 12 15 18
    assert backend.check_timestamps(strided, 10, 2, 2, -1) == (0, 3, 2)
    assert backend.check_timestamps(np.arange(10, dtype=np.int32), 5, 1, 1, -1) == (0, 4, 3)


def test_check_timestamps_random_vs_numpy(backend):
    rng = np.random.default_rng(1)
    ts = rng.integers(-50, 50, 10_000, dtype=np.int64)
    ts[rng.integers(0, len(ts), 300)] = -1
    lo, hi = -20, 30
    live = ts != -1
    old, new = live & (ts < lo), live & (ts > hi)
    bad = np.flatnonzero(old | new)
    want = (int(bad[0]) if len(bad) else -1, int(old.sum()), int(new.sum()))
    assert backend.check_timestamps(ts, 0, 20, 30, -1) == want


# ------------------------------------------------------------------------------------ index search
def make_index(keys, kind, rng):
    if kind == 0:
        return b"".join(struct.pack(">ii", k, int(rng.integers(0, 1 << 30))) for k in keys), 8
    return b"".join(struct.pack(">qi", k, int(rng.integers(0, 1 << 30))) for k in keys), 12


def oracle(keys, target):
    slots = [i for i, k in enumerate(keys) if k <= target]
    return slots[-1] if slots else -1


@pytest.mark.parametrize("kind", [0, 1])
def test_index_search_vs_oracle(backend, kind):
    rng = np.random.default_rng(kind)
    big = 2**31 - 1 if kind == 0 else 2**62
    keys = sorted(int(k) for k in rng.integers(-big, big, 300))
    keys[10:14] = [keys[10]] * 4  # duplicates
    keys.sort()
    data, es = make_index(keys, kind, rng)
    targets = ([keys[0] - 1, keys[0], keys[-1], keys[-1] + 1, keys[10], INT64_MIN, INT64_MAX]
               + [int(t) for t in rng.integers(-big, big, 200)])
    for n in (len(keys), 37, 1, 0):
        want = [oracle(keys[:n], t) for t in targets]
        assert [backend.index_search(data, es, kind, t, n) for t in targets] == want
        got = backend.index_search_many(data, es, kind, targets, n)
        assert got.dtype == np.int64 and got.tolist() == want
    assert backend.index_search(data, es, kind, 2**80, len(keys)) == len(keys) - 1
    assert backend.index_search(data, es, kind, -(2**80), len(keys)) == -1


def test_index_search_larger_entries_and_buffers(backend):
    keys = [1, 5, 9]
    data = b"".join(struct.pack(">q", k) + b"\xEE" * 8 for k in keys)  # 16-byte entries
    assert [backend.index_search(data, 16, 1, t, 3) for t in (0, 1, 6, 100)] == [-1, 0, 1, 2]
    assert backend.index_search_many(np.frombuffer(data, dtype=np.uint8), 16, 1, [6, 0], 3).tolist() == [1, -1]
    assert backend.index_search(bytearray(data), 16, 1, 9, 3) == 2


def test_index_search_truncated(backend):
    data = bytes(8 * 3 + 5)
    for call in (lambda: backend.index_search(data, 8, 0, 0, 4),
                 lambda: backend.index_search_many(data, 8, 0, [0], 4)):
        with pytest.raises(TruncatedDataError) as ei:
            call()
        e = ei.value
        assert (e.position, e.expected, e.found) == (29, 32, 29)


def test_index_search_bad_kind_and_empty_targets(backend):
    with pytest.raises(KeyError):
        backend.index_search(bytes(8), 8, 2, 0, 1)
    assert backend.index_search_many(b"", 8, 9, [], 10).tolist() == []  # nothing to look up


# ------------------------------------------------------------------------------------ differential
def outcome(fn, *args, view_type=memoryview):
    """What a kernel did: its result, normalized; or its exception's class and location.
    Keys and values must be read-only views of `view_type` (the backend's ByteView)."""
    try:
        res = fn(*args)
    except KBatchError as e:
        return ("raise", type(e), e.position, e.expected, e.found, e.base_offset, str(e))
    except Exception as e:  # noqa: BLE001 - the class is what must match
        return ("raise", type(e))
    if isinstance(res, list):
        for r in res:
            for mv in (r.key, r.value):
                assert mv is None or (type(mv) is view_type and memoryview(mv).readonly)
        return ("ok", [r._astuple() for r in res])
    if isinstance(res, dict):
        return ("ok", {k: (v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v for k, v in res.items()})
    if isinstance(res, np.ndarray):
        return ("ok", res.dtype.str, res.tolist())
    if isinstance(res, tuple) and any(isinstance(v, np.ndarray) for v in res):
        return ("ok", [(v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v for v in res])
    return ("ok", res)


def same(name, *args):
    cy = load_backend("cython")
    want = outcome(getattr(_core_py, name), *args)
    got = outcome(getattr(cy, name), *args, view_type=cy.ByteView)
    assert got == want, (name, args)
    return want


def mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for kind, where, val in ops:
        if not b:
            break
        i = where % len(b)
        if kind == "flip":
            b[i] ^= 1 << (val % 8)
        elif kind == "set":
            b[i] = val % 256
        elif kind == "cut":
            del b[i:]
        else:  # "ins"
            b.insert(i, val % 256)
    return bytes(b)


MUTATIONS = st.lists(st.tuples(st.sampled_from(["flip", "set", "cut", "ins"]), st.integers(0, 10**6),
                               st.integers(0, 255)), max_size=3)
SMALL_OR_WIDE64 = st.integers(-300, 300) | st.integers(INT64_MIN, INT64_MAX)
SMALL_OR_WIDE32 = st.integers(-300, 300) | st.integers(INT32_MIN, INT32_MAX)
RECORDS = st.lists(st.builds(
    record, attrs=st.integers(0, 255), ts_delta=SMALL_OR_WIDE64, off_delta=SMALL_OR_WIDE32,
    key=st.none() | st.binary(max_size=6), value=st.none() | st.binary(max_size=6),
    headers=st.lists(st.tuples(st.binary(max_size=4), st.none() | st.binary(max_size=4)), max_size=3)),
    max_size=5)
DIFF = settings(suppress_health_check=[HealthCheck.too_slow])


@DIFF
@given(data=st.binary(max_size=12), pos=st.integers(-14, 14))
def test_diff_varints(data, pos):
    same("read_varint", data, pos)
    same("read_varlong", data, pos)


@DIFF
@given(data=st.binary(max_size=10), kind=st.sampled_from(["bytes", "bytearray", "view", "readonly view", "signed",
                                                           "strided", "int16"]),
       start=st.integers(-3, 13) | st.sampled_from([2**70, 1.0, None]), end=st.integers(-3, 13))
def test_diff_byte_view(data, kind, start, end):
    """Every input the legacy decoder's fast path sees (read-only byte memoryviews) and the rest."""
    buf = {"bytes": data, "bytearray": bytearray(data), "view": memoryview(bytearray(data)),
           "readonly view": memoryview(data), "signed": memoryview(data).cast("b"),
           "strided": memoryview(data)[::2], "int16": memoryview(data[:len(data) // 2 * 2]).cast("h")}[kind]
    got = same("byte_view", buf, start, end)
    if got[0] == "ok" and got[1] is not None:
        assert bytes(got[1]) == bytes(memoryview(buf).cast("B") if memoryview(buf).c_contiguous
                                      else bytes(buf))[start:end]


@DIFF
@given(value=st.integers(-(2**64), 2**64) | st.sampled_from([INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX]))
def test_diff_write_varints(value):
    for name in ("write_varint", "write_varlong", "sizeof_varint", "sizeof_varlong"):
        same(name, value)


@DIFF
@given(records=RECORDS, ops=MUTATIONS, pre=st.binary(max_size=3), post=st.binary(max_size=3),
       count_delta=st.sampled_from([0, 0, 0, -1, 1, -100]), base_offset=SMALL_OR_WIDE64,
       base_ts=SMALL_OR_WIDE64 | st.just(-1), lat=st.none() | st.sampled_from([-1, INT64_MIN, 5]),
       extended=st.booleans(), end_delta=st.sampled_from([0, 0, 0, -1, 1, 50]),
       kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_diff_decode_records(records, ops, pre, post, count_delta, base_offset, base_ts, lat, extended,
                             end_delta, kind):
    section = mutate(b"".join(records), ops)
    data = pre + section + post
    start, end = len(pre), len(pre) + len(section) + end_delta
    same("decode_records_v2", kind(data), start, end, len(records) + count_delta, base_offset, base_ts, lat, 1,
         extended)


@DIFF
@given(records=st.lists(RECORDS, min_size=1, max_size=4), legacy=st.lists(st.tuples(
    st.integers(0, 1), st.integers(0, 255), st.none() | st.binary(max_size=5)), max_size=3),
    ops=MUTATIONS, start=st.integers(-2, 40), end=st.integers(-2, 10**4), verify=st.booleans(),
    kind=st.sampled_from([bytes, bytearray]))
def test_diff_scan_batches(records, legacy, ops, start, end, verify, kind):
    parts = [v2_batch(b"".join(r), count=len(r), base_offset=7 * i) for i, r in enumerate(records)]
    parts += [legacy_entry(100 + i, magic, attrs, 1234, None, value) for i, (magic, attrs, value) in enumerate(legacy)]
    data = mutate(b"".join(parts), ops)
    same("scan_batches", kind(data), start, end, verify)
    same("scan_batches", kind(data))


@DIFF
@given(records=RECORDS, ops=MUTATIONS)
def test_diff_batch_roundtrip(records, ops):
    """scan, then decode each batch the scan found, as the batch layer does."""
    data = mutate(v2_batch(b"".join(records), count=len(records), base_offset=3), ops)
    s = same("scan_batches", data)
    if s[0] == "ok":
        cols = s[1]
        for i in range(len(cols["position"][1])):
            pos, size = cols["position"][1][i], cols["size"][1][i]
            same("decode_records_v2", data, pos + 61, pos + size, cols["record_count"][1][i],
                 cols["base_offset"][1][i], cols["first_timestamp"][1][i], None, 0, False)


@DIFF
@given(ts=st.lists(SMALL_OR_WIDE64 | st.sampled_from([INT64_MIN, INT64_MAX, -1]), max_size=30),
       now=st.integers(-2**64, 2**64) | st.integers(-100, 100), before=st.integers(-2**64, 2**64) | st.integers(-100, 100),
       after=st.integers(-2**64, 2**64) | st.integers(-100, 100),
       no_ts=st.sampled_from([-1, INT64_MIN, 0, 2**64]))
def test_diff_check_timestamps(ts, now, before, after, no_ts):
    arr = np.array(ts, dtype=np.int64)
    same("check_timestamps", arr, now, before, after, no_ts)
    same("timestamp_bounds", now, before, after)


@DIFF
@given(data=st.binary(max_size=80), entry_size=st.sampled_from([8, 12, 4, 9, 3, 0]), kind=st.sampled_from([0, 1]),
       targets=st.lists(SMALL_OR_WIDE64 | st.integers(-2**65, 2**65), max_size=6), n=st.integers(-1, 12))
def test_diff_index_search(data, entry_size, kind, targets, n):
    """Random (so mostly unsorted) indexes: both backends probe in the same order."""
    for t in targets:
        same("index_search", data, entry_size, kind, t, n)
    same("index_search_many", data, entry_size, kind,
         [t for t in targets if INT64_MIN <= t <= INT64_MAX], n)


@DIFF
@given(batches=st.lists(st.tuples(RECORDS, st.sampled_from([0, 0x08, 0x80, 0x88]), SMALL_OR_WIDE64,
                                  SMALL_OR_WIDE64 | st.sampled_from([-1, INT64_MIN]),
                                  st.sampled_from([-1, INT64_MIN, 5]), st.sampled_from([0, 0, 0, -1, 1, -100])),
                        max_size=4),
       ops=MUTATIONS, pre=st.binary(max_size=3), end_delta=st.sampled_from([0, 0, 0, -1, 1, 50]),
       headers=st.booleans(), kind=st.sampled_from([bytes, bytearray, memoryview]),
       copy=st.sampled_from([(True, True), (True, False), (False, True), (False, False)]))
def test_diff_decode_columns(batches, ops, pre, end_delta, headers, kind, copy):
    """decode_columns_v2 over several record sections (random, truncated, bit-flipped; LAT and
    extended batches), copying keys and values or stepping over them (a projection): the same
    arrays, or the same error at the same position, on both backends."""
    data, starts, ends, counts, bases, bts, mts, attrs = pre, [], [], [], [], [], [], []
    for recs, a, base, bt, mt, count_delta in batches:
        starts.append(len(data))
        data += b"".join(recs)
        ends.append(len(data))
        counts.append(max(len(recs) + count_delta, -1))
        bases.append(base)
        bts.append(bt)
        mts.append(mt)
        attrs.append(a)
    data = mutate(data, ops)
    if ends:
        ends[-1] += end_delta
    cols = [np.array(starts, np.int64), np.array(ends, np.int64), np.array(counts, np.int32),
            np.array(bases, np.int64), np.array(bts, np.int64), np.array(mts, np.int64), np.array(attrs, np.int16)]
    same("decode_columns_v2", kind(data), *cols, headers, None, *copy)


@DIFF
@given(batches=st.lists(st.tuples(st.lists(st.tuples(st.none() | st.binary(max_size=6), st.none() | st.binary(max_size=9)),
                                           min_size=1, max_size=4),
                                  st.sampled_from([0, 0x80])), min_size=1, max_size=3),
       ops=MUTATIONS, skip=st.lists(st.booleans(), min_size=3, max_size=3), headers=st.booleans())
def test_diff_decode_columns_with_crcs(batches, ops, skip, headers):
    """decode_columns_v2 checking each batch's stored CRC before its records (crcs, -1 = skip) over
    real, then bit-flipped, truncated or grown batches: the same arrays, or the same error at the
    same position, on both backends."""
    from kbatch import BatchBuilder

    data, starts, ends, counts, bases, bts, mts, attrs, crcs = b"", [], [], [], [], [], [], [], []
    for i, (recs, a) in enumerate(batches):
        b = BatchBuilder(base_offset=10 * i, timestamp_extended=bool(a))
        for k, v in recs:
            b.append(1_000 + i, k, v)
        one = b.build()
        base, _len, _ple, _magic, crc, at, _lod, bt, mt, _pid, _ep, _seq, count = struct.unpack_from(
            ">qiibIhiqqqhii", one)
        starts.append(len(data) + 61)
        data += one
        ends.append(len(data))
        counts.append(count)
        bases.append(base)
        bts.append(bt)
        mts.append(mt)
        attrs.append(at)
        crcs.append(-1 if skip[i] else crc)
    data = mutate(data, ops)
    cols = [np.array(x, dt) for x, dt in ((starts, np.int64), (ends, np.int64), (counts, np.int32),
                                          (bases, np.int64), (bts, np.int64), (mts, np.int64), (attrs, np.int16))]
    same("decode_columns_v2", data, *cols, headers, np.array(crcs, np.int64))


def same_on_every_walk(*args):
    """decode_columns_v2 on each record walk this CPU runs (generic, AVX2) against the pure twin."""
    cy = load_backend("cython")
    walks = cy._decode_columns_walks()
    previous = cy._decode_columns_walk_limit(walks[-1])
    try:
        for walk in walks:
            cy._decode_columns_walk_limit(walk)
            same("decode_columns_v2", *args)
    finally:
        cy._decode_columns_walk_limit(previous)


def one_batch_section(recs):
    """(data, the 7 header columns, crcs) of one v2 batch holding `recs` (raw records)."""
    data = v2_batch(b"".join(recs), count=len(recs), base_offset=7, first_ts=1_000)
    _base, _len, _ple, _magic, crc = struct.unpack_from(">qiibI", data)
    cols = [np.array([x], dt) for x, dt in ((61, np.int64), (len(data), np.int64), (len(recs), np.int32),
                                            (7, np.int64), (1_000, np.int64), (1_000, np.int64), (0, np.int16))]
    return data, cols, np.array([crc], np.int64)


def test_decode_columns_every_key_and_value_size_on_every_walk():
    """Keys and values of every size from 0 to 300 bytes (each copy path: byte loop, 4/8/16-byte
    pairs, 32-byte steps with an overlapping tail, a plain copy past 256), nulls between them, and
    the same bytes cut at each record boundary: the same arrays on every walk as the pure twin."""
    recs = [record(off_delta=i, ts_delta=i, key=bytes(range(i % 256))[:i] + b"k" * max(0, i - 256),
                   value=None if i % 7 == 3 else bytes((i + j) % 256 for j in range(300 - i)),
                   headers=[("h", b"v" * (i % 40))] if i % 5 == 0 else [])
            for i in range(301)]
    data, cols, crcs = one_batch_section(recs)
    for headers in (True, False):
        same_on_every_walk(data, *cols, headers, crcs)
    cut = 61 + len(b"".join(recs[:150])) + 3  # inside a record: the same error on every walk
    same_on_every_walk(data[:cut], *cols[:1], np.array([cut], np.int64), *cols[2:], True)


@DIFF
@given(recs=st.lists(st.tuples(st.none() | st.binary(max_size=40) | st.binary(min_size=200, max_size=300),
                               st.none() | st.binary(max_size=40) | st.binary(min_size=30, max_size=300)),
                     min_size=1, max_size=6),
       ops=MUTATIONS, headers=st.booleans(), check_crc=st.booleans())
def test_diff_decode_columns_long_fields_on_every_walk(recs, ops, headers, check_crc):
    """Long keys and values (the 32-byte copy steps), then bit flips, cuts and insertions: the same
    arrays, or the same error at the same position, on every walk and the pure twin."""
    data, cols, crcs = one_batch_section([record(off_delta=i, key=k, value=v) for i, (k, v) in enumerate(recs)])
    data = mutate(data, ops)
    same_on_every_walk(data, *cols, headers, crcs if check_crc else None)


def test_columns_job_is_decode_columns_in_three_steps(backend):
    """ColumnsJob: arguments and buffers, run() (here on another thread, as decode_columns' threads
    run it), result() on this one: decode_columns_v2's dict, or its error from result() (run()
    never raises); run() once only, result() only after it, and the same each call."""
    import threading

    recs = [record(off_delta=i, ts_delta=i, key=b"k%d" % i, value=b"v" * (i * 9), headers=[("h", b"x")] * (i % 3))
            for i in range(40)]
    data, cols, crcs = one_batch_section(recs)
    want = outcome(backend.decode_columns_v2, data, *cols, True, crcs)
    job = backend.ColumnsJob(data, *cols, True, crcs)
    with pytest.raises(RuntimeError):
        job.result()
    t = threading.Thread(target=job.run)
    t.start()
    t.join(30)
    assert outcome(job.result) == want and job.result() is job.result()
    with pytest.raises(RuntimeError):
        job.run()
    bad = bytearray(data)
    bad[100] ^= 1  # the stored CRC no longer matches
    job = backend.ColumnsJob(bytes(bad), *cols, True, crcs)
    job.run()
    with pytest.raises(kbatch_errors.CrcMismatchError) as ei:
        job.result()
    assert ei.value.position == 0
    with pytest.raises(kbatch_errors.CrcMismatchError):
        job.result()


def test_decode_columns_argument_shapes(backend):
    one = [np.zeros(1, np.int64)] * 7
    with pytest.raises(ValueError):
        backend.decode_columns_v2(b"", *one[:6], np.zeros(2, np.int16))
    with pytest.raises(ValueError):
        backend.decode_columns_v2(b"", *one[:6], np.zeros((1, 1), np.int16))
    out = backend.decode_columns_v2(b"", *[[]] * 7)
    assert out["offset"].tolist() == [] and out["key_offsets"].tolist() == [0]
    with pytest.raises(TruncatedDataError) as ei:  # a section outside the buffer
        backend.decode_columns_v2(b"\x00" * 4, [2], [9], [0], [7], [0], [0], [0])
    assert (ei.value.position, ei.value.base_offset) == (2, 7)


@DIFF
@given(batches=st.lists(st.tuples(RECORDS, st.sampled_from([0, 0x08, 0x80, 0x88]), st.integers(-5, 5) | SMALL_OR_WIDE64,
                                  st.integers(-5, 5) | SMALL_OR_WIDE64 | st.sampled_from([-1, INT64_MIN]),
                                  st.sampled_from([-1, INT64_MIN, 5]), st.sampled_from([0, 0, 0, 0, -1, 1])),
                        min_size=1, max_size=4),
       ops=MUTATIONS, targets=st.lists(st.tuples(st.integers(0, 3), st.integers(-400, 400) | SMALL_OR_WIDE64),
                                       max_size=8),
       start=st.integers(-5, 300) | st.sampled_from([INT64_MIN, INT64_MAX]))
def test_diff_find_timestamps(batches, ops, targets, start):
    """find_timestamps_v2 over random, truncated and bit-flipped sections: the same answers, or
    the same error at the same position, on both backends."""
    data, starts, ends, counts, bases, bts, mts, attrs = b"", [], [], [], [], [], [], []
    for recs, a, base, bt, mt, count_delta in batches:
        starts.append(len(data))
        data += b"".join(recs)
        ends.append(len(data))
        counts.append(max(len(recs) + count_delta, -1))
        bases.append(base)
        bts.append(bt)
        mts.append(mt)
        attrs.append(a)
    data = mutate(data, ops)
    tb = [b % len(batches) for b, _t in targets]
    same("find_timestamps_v2", data, starts, ends, counts, bases, bts, mts, attrs, tb, [t for _b, t in targets],
         start)


@DIFF
@given(recs=RECORDS, ops=MUTATIONS, count_delta=st.sampled_from([0, 0, 0, -1, 1, -100, 2**31]),
       base=SMALL_OR_WIDE64, bt=SMALL_OR_WIDE64, mt=SMALL_OR_WIDE64, attrs=st.sampled_from([0, 0x08, 0x80, 0x88]),
       start=st.integers(-2, 3), end_delta=st.integers(-3, 2))
def test_diff_record_fields(recs, ops, count_delta, base, bt, mt, attrs, start, end_delta):
    """record_fields_v2 over random, truncated and bit-flipped sections: the same arrays, or the
    same error at the same position, on both backends."""
    sec = mutate(b"".join(recs), ops)
    same("record_fields_v2", sec, start, len(sec) + end_delta, len(recs) + count_delta, base, bt, mt, attrs)


def test_record_fields_are_decodes(backend):
    recs = [record(ts_delta=d, off_delta=i, key=None if i == 2 else b"k%d" % i, value=None if i == 1 else b"v")
            for i, d in enumerate([5, -1001, 9, 7])]
    sec = b"".join(recs)
    for attrs in (0, 0x08, 0x80):
        offs, stamps, keys = backend.record_fields_v2(sec, 0, len(sec), 4, 100, 1000, 1012, attrs)
        cols = backend.decode_columns_v2(sec, [0], [len(sec)], [4], [100], [1000], [1012], [attrs], False)
        assert offs.tolist() == cols["offset"].tolist() == [100, 101, 102, 103]
        no_ts = -(2**63) if attrs & 0x80 else -1
        want = [t if v else no_ts for t, v in zip(cols["timestamp"].tolist(), cols["timestamp_valid"].tolist())]
        assert stamps.tolist() == want and keys.tolist() == cols["key_valid"].tolist() == [True, True, False, True]
    assert stamps.dtype == np.int64 and keys.dtype == np.bool_


def test_find_timestamps_first_record_at_or_after(backend):
    # out of order timestamps, a "no timestamp" record, offsets below the start
    recs = [record(ts_delta=d, off_delta=i) for i, d in enumerate([5, 1, 9, 7, 12])]
    recs.insert(2, record(ts_delta=-1001, off_delta=5))  # base 1000 - 1001 = -1: none (not extended)
    sec = b"".join(recs)
    args = (sec, [0], [len(sec)], [6], [100], [1000], [1012], [0])
    offs, stamps = backend.find_timestamps_v2(*args, [0] * 6, [0, 1005, 1006, 1009, 1012, 1013], 0)
    assert offs.tolist() == [100, 100, 102, 102, 104, -1]
    assert stamps.tolist() == [1005, 1005, 1009, 1009, 1012, -1]
    offs, _ = backend.find_timestamps_v2(*args, [0, 0], [0, 1013], 101)
    assert offs.tolist() == [101, -1]
    lat = args[:7] + ([0x08],)  # LogAppendTime: every record has the batch max timestamp
    offs, stamps = backend.find_timestamps_v2(*lat, [0, 0], [1012, 1013], 102)
    assert (offs.tolist(), stamps.tolist()) == ([105, -1], [1012, -1])  # record order: 100 101 105 102
    with pytest.raises(ValueError):
        backend.find_timestamps_v2(*args, [1], [0], 0)
    with pytest.raises(InvalidRecordError):  # every record is checked, even past an answer
        backend.find_timestamps_v2(sec, [0], [len(sec)], [5], [100], [1000], [1012], [0], [], [], 0)
