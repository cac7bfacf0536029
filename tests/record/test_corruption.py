"""One named test per corruption mode, at the batch level: what kbatch raises (a KBatchError that
is also the fitting builtin), where (byte position, batch base offset), and what it says.

Batches are made by hand around a records section with a correct CRC, so each test breaks exactly
one thing. Every test runs on both backends.
"""
import struct
import time
import tracemalloc
import zlib

import pytest
from crc32c import crc32c  # an independent CRC-32C for the hand-made batches

import kbatch
from kbatch import _wire as W
from kbatch.record.compression import compress
from kbatch.errors import (CorruptRecordError, CrcMismatchError, DecompressionLimitError, InvalidRecordError,
                           KBatchError, TruncatedDataError, UnsupportedCodecError)

BASE = 5_000  # every hand-made batch's base offset, so messages can be checked for it


def varint(n: int) -> bytes:
    return kbatch._backend.core.write_varint(n)


def record(body_after_attributes: bytes, attributes: int = 0) -> bytes:
    body = bytes([attributes]) + body_after_attributes
    return varint(len(body)) + body


def simple_record(offset_delta=0, value=b"v", ts_delta=0) -> bytes:
    """attributes 0, ts delta, offset delta, null key, value, no headers."""
    return record(kbatch._backend.core.write_varlong(ts_delta) + varint(offset_delta) + varint(-1)
                  + varint(len(value)) + value + varint(0))


def v2(section: bytes, count: int, *, attributes=0, length_delta=0, base_offset=BASE) -> bytes:
    """A magic 2 batch around `section` (already compressed if the codec says so), CRC correct."""
    head = bytearray(struct.pack(">qiibIhiqqqhii", base_offset, 49 + len(section) + length_delta, -1, 2, 0,
                                 attributes, max(count - 1, 0), 1_000, 1_000, -1, -1, -1, count))
    crc = crc32c(bytes(head[W.ATTRIBUTES_OFFSET:]) + section)
    struct.pack_into(">I", head, W.CRC_OFFSET, crc)
    return bytes(head) + section


def legacy(offset, magic, value, attrs=0, key=None, ts=1) -> bytes:
    body = struct.pack(">bB", magic, attrs) + (struct.pack(">q", ts) if magic else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def read_all(data, **kw):
    return [list(b) for b in kbatch.iter_batches(data, **kw)]


def raises(cls, data, *, builtin=ValueError, position=None, base_offset=BASE, match=None, **kw) -> KBatchError:
    with pytest.raises(cls, match=match) as e:
        read_all(data, **kw)
    err = e.value
    assert isinstance(err, KBatchError) and isinstance(err, builtin)
    if position is not None:
        assert err.position == position, str(err)
    assert err.base_offset == base_offset, str(err)
    msg = str(err)
    if err.position is not None:
        assert f"at byte {err.position}" in msg
    if base_offset is not None:
        assert f"base offset {base_offset}" in msg
    return err


GOOD = v2(simple_record(0) + simple_record(1), 2)
PREFIX = kbatch.build_batch([(1, b"k", b"v")], base_offset=1)  # a good batch in front: positions are not 0
P = len(PREFIX)


def test_good_batch_reads():
    assert [[(r.offset, bytes(r.value)) for r in b] for b in kbatch.iter_batches(PREFIX + GOOD)] == [
        [(1, b"v")], [(BASE, b"v"), (BASE + 1, b"v")]]


# ------------------------------------------------------------------------------------ checksums
def test_bad_crc_v2(backend):
    data = bytearray(PREFIX + GOOD)
    data[-2] ^= 0x01  # the last value byte
    err = raises(CrcMismatchError, bytes(data), position=P, match="Record is corrupt")
    assert err.stored == struct.unpack_from(">I", GOOD, W.CRC_OFFSET)[0] and err.computed != err.stored
    assert "expected crc" in str(err) and "found stored crc" in str(err)
    assert len(read_all(bytes(data), verify_crc=False)[1]) == 2  # unverified reading still decodes
    # fields outside the CRC (base offset, length, leader epoch, magic) are not covered
    epoch = bytearray(GOOD)
    epoch[W.PARTITION_LEADER_EPOCH_OFFSET] ^= 0x7F
    assert len(read_all(bytes(epoch))[0]) == 2


@pytest.mark.parametrize("magic", [0, 1])
def test_bad_crc_legacy(backend, magic):
    data = bytearray(PREFIX + legacy(BASE, magic, b"value"))
    data[-1] ^= 0x01
    err = raises(CrcMismatchError, bytes(data), position=P)
    assert err.computed == zlib.crc32(bytes(data[P + 16:]))  # CRC-32 over [magic, end)


def test_bad_crc_legacy_inner_message(backend):
    inner = bytearray(legacy(0, 1, b"a") + legacy(1, 1, b"b"))
    inner[-1] ^= 0x01
    data = PREFIX + legacy(BASE, 1, compress(1, bytes(inner), 1), attrs=1)
    raises(CrcMismatchError, data, position=P, match="Inner record is corrupt")


# ------------------------------------------------------------------------------------ lengths
def test_lying_length_too_small(backend):
    for size in (0, 13, -5):  # below the smallest legacy message: corrupt, not a truncation
        data = bytearray(PREFIX + GOOD)
        struct.pack_into(">i", data, P + W.LENGTH_OFFSET, size)
        raises(CorruptRecordError, bytes(data), position=P, match="smaller than the minimum", strict=False)
    data = bytearray(PREFIX + GOOD)  # a magic 2 batch below its 61-byte overhead
    struct.pack_into(">i", data, P + W.LENGTH_OFFSET, 40)
    raises(CorruptRecordError, bytes(data), position=P, match="smaller than the minimum")


def test_lying_length_in_the_middle_is_not_called_a_partial_batch(backend):
    """A length field that runs past the end with a whole, valid batch behind it is a bad length
    field in the middle of the data, said so (issue 28), not "a partial batch at the end"."""
    data = bytearray(PREFIX + GOOD + GOOD)
    struct.pack_into(">i", data, P + W.LENGTH_OFFSET, 2 * len(GOOD) + 100)
    err = raises(TruncatedDataError, bytes(data), builtin=EOFError, position=P, base_offset=None,
                 match="runs past its end")
    assert str(err).startswith(f"batch length {2 * len(GOOD) + 100} at byte {P} of the data runs past its end "
                               f"({P + 2 * len(GOOD)} bytes), but a valid batch starts at byte {P + len(GOOD)}: "
                               f"a bad length field, not a partial batch"), str(err)
    assert "partial batch at the end" not in str(err)


def test_lying_length_too_large_past_the_end(backend):
    data = bytearray(PREFIX + GOOD)
    struct.pack_into(">i", data, P + W.LENGTH_OFFSET, len(GOOD) + 100)
    err = raises(TruncatedDataError, bytes(data), builtin=EOFError, position=P, base_offset=None,
                 match="a partial batch at the end of the data")
    assert (f"batch length {len(GOOD) + 100} at byte {P} runs past its end ({P + len(GOOD)} bytes; "
            f"{len(GOOD) - 12} of the {len(GOOD) + 100} bytes are there)") in str(err)
    assert len(read_all(bytes(data), strict=False)) == 1  # file-like mode stops before it
    mr = kbatch.MemoryRecords(bytes(data))
    assert (mr.valid_bytes, mr.truncated_bytes) == (P, len(GOOD))


def test_lying_length_too_large_swallows_the_next_batch(backend):
    data = bytearray(GOOD + GOOD)
    struct.pack_into(">i", data, W.LENGTH_OFFSET, len(GOOD) * 2 - 12)  # length is outside the CRC
    raises(CrcMismatchError, bytes(data), position=0)
    raises(InvalidRecordError, bytes(data), verify_crc=False, position=len(GOOD),
           match="records still remaining")


def test_length_shorter_than_the_records(backend):
    section = simple_record(0) + simple_record(1)
    cut = v2(section[:-3], 2)  # the CRC is right for the shorter batch: the records are what is wrong
    raises(InvalidRecordError, cut, position=61 + len(simple_record(0)), match="runs past the end of the batch")


# ------------------------------------------------------------------------------------ varints
def test_truncated_varint(backend):
    # the records section ends inside a record's length varint
    data = PREFIX + v2(simple_record(0) + b"\x80", 2)
    raises(TruncatedDataError, data, builtin=EOFError, position=P + 61 + len(simple_record(0)) + 1)
    # a field's varint runs past the end of its record (the record's length cuts it)
    body = b"\x00" + b"\x80\x80"  # attributes, then a timestamp delta that never ends
    data = PREFIX + v2(varint(len(body)) + body, 1)
    raises(TruncatedDataError, data, builtin=EOFError, position=P + 61 + 1 + len(body))


def test_overlong_varint(backend):
    # the record length: five bytes with the MSB set in the 5th (Kafka: "Varint is too long")
    data = PREFIX + v2(b"\xff\xff\xff\xff\xff\x01" + simple_record(0), 1)
    raises(CorruptRecordError, data, position=P + 61, match="Varint is too long")
    # the offset delta inside a record
    body = b"\x00" + b"\x00" + b"\x80\x80\x80\x80\x80\x00" + varint(-1) + varint(-1) + varint(0)
    raises(CorruptRecordError, PREFIX + v2(varint(len(body)) + body, 1), position=P + 61 + 1 + 2,
           match="Varint is too long")


def test_overlong_varlong(backend):
    body = b"\x00" + b"\x80" * 9 + b"\x81\x00" + varint(0) + varint(-1) + varint(-1) + varint(0)
    data = PREFIX + v2(varint(len(body)) + body, 1)
    raises(CorruptRecordError, data, position=P + 61 + 1 + 1, match="Varlong is too long")


def test_non_minimal_varints_are_not_corruption(backend):
    body = b"\x00" + b"\x80\x00" + b"\x80\x00" + b"\x81\x00" + b"\x82\x00" + b"v" + b"\x80\x00"
    (batch,) = read_all(v2(varint(len(body)) + body, 1))
    assert [(r.offset, r.timestamp, bytes(r.value)) for r in batch] == [(BASE, 1_000, b"v")]


# ------------------------------------------------------------------------------------ record counts
def test_count_mismatch_more_records_than_declared(backend):
    data = PREFIX + v2(simple_record(0) + simple_record(1) + simple_record(2), 2)
    raises(InvalidRecordError, data, position=P + 61 + 2 * len(simple_record(0)),
           match="Incorrect declared batch size, records still remaining")


def test_count_mismatch_fewer_records_than_declared(backend):
    data = PREFIX + v2(simple_record(0) + simple_record(1), 3)
    raises(InvalidRecordError, data, position=P + 61 + 2 * len(simple_record(0)),
           match="Incorrect declared batch size, premature EOF")


@pytest.mark.parametrize("extra", [1, -1])
def test_count_mismatch_in_a_compressed_batch(backend, extra):
    section = simple_record(0) + simple_record(1)
    data = PREFIX + v2(compress(1, section), 2 + extra, attributes=1)
    err = raises(InvalidRecordError, data, position=P, match="Incorrect declared batch size")
    assert "decompressed records" in str(err)  # the position inside the decompressed bytes is named


def test_negative_record_count(backend):
    data = PREFIX + v2(simple_record(0), -1)
    raises(InvalidRecordError, data, match="Found invalid record count")


# ------------------------------------------------------------------------------------ records
def test_record_size_mismatch(backend):
    body = b"\x00\x00\x00\x01\x02v\x00" + b"\x00\x00"  # two bytes the fields do not use
    data = PREFIX + v2(varint(len(body)) + body, 1)
    raises(InvalidRecordError, data, position=P + 61, match="Invalid record size")


def test_field_runs_past_its_record(backend):
    body = b"\x00\x00\x00\x01" + varint(50) + b"v\x00"
    raises(InvalidRecordError, PREFIX + v2(varint(len(body)) + body, 1), match="runs past the end of the record")


def test_negative_header_count(backend):
    body = b"\x00\x00\x00\x01\x02v" + varint(-2)
    raises(InvalidRecordError, PREFIX + v2(varint(len(body)) + body, 1), match="number of record headers")


def test_header_count_larger_than_the_record(backend):
    body = b"\x00\x00\x00\x01\x02v" + varint(100) + b"\x00\x00"
    raises(InvalidRecordError, PREFIX + v2(varint(len(body)) + body, 1), match="number of record headers")


def test_negative_header_key_length(backend):
    body = b"\x00\x00\x00\x01\x02v" + varint(1) + varint(-1) + varint(-1)
    raises(InvalidRecordError, PREFIX + v2(varint(len(body)) + body, 1),
           position=P + 61 + 1 + 7, match="Invalid negative header key size")


# ------------------------------------------------------------------------------------ codecs
@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_id(backend, codec):
    data = PREFIX + v2(simple_record(0), 1, attributes=codec)
    (_, batch) = kbatch.iter_batches(data)  # the header reads; the codec fails where it is needed
    assert batch.attributes & 7 == codec
    err = raises(UnsupportedCodecError, data, position=P + W.ATTRIBUTES_OFFSET, base_offset=None,
                 match=f"Unknown compression type id: {codec}")
    assert err.error_code == 76
    raises(UnsupportedCodecError, PREFIX + legacy(BASE, 1, b"x", attrs=codec), base_offset=None,
           position=P + 12 + 5, match=f"Unknown compression type id: {codec}")


def test_zstd_in_magic_1(backend):
    data = PREFIX + legacy(BASE, 1, compress(4, legacy(0, 1, b"x")), attrs=4)
    raises(UnsupportedCodecError, data, base_offset=None, match="zstd compression is only supported by magic 2")


BOMB = 8 * 1024 * 1024  # decompressed size of each bomb; the limit below is 64 KiB


def _bomb_section(codec):
    zeros = b"\x00" * BOMB
    if codec == 2:  # xerial: one 32 KiB chunk, repeated (snappy's own ratio is only ~20:1)
        chunk = compress(2, zeros[:32768])[16:]
        return compress(2, b"")[:16] + chunk * (BOMB // 32768)
    return compress(codec, zeros)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb(backend, codec):
    section = _bomb_section(codec)
    assert len(section) < BOMB // 20
    data = PREFIX + v2(section, 1, attributes=codec)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        err = raises(DecompressionLimitError, data, position=P + 61, max_decompressed_bytes=64 * 1024,
                     match="exceeds the decompression limit", verify_crc=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(err, ValueError) and err.error_code == 10
    assert peak < 8 * 1024 * 1024 and time.perf_counter() - t0 < 5  # it stopped early, not after inflating


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_decompression_bomb_in_a_legacy_wrapper(backend, codec):
    inner = legacy(0, 1, b"\x00" * BOMB)
    data = PREFIX + legacy(BASE, 1, compress(codec, inner, 1), attrs=codec)
    raises(DecompressionLimitError, data, position=P + 12, max_decompressed_bytes=64 * 1024)


# ------------------------------------------------------------------------------------ magic, legacy wrappers
@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_bad_magic(backend, magic):
    data = bytearray(PREFIX + GOOD)
    data[P + W.MAGIC_OFFSET] = magic
    err = raises(CorruptRecordError, bytes(data), position=P + W.MAGIC_OFFSET, match="Invalid magic")
    assert "expected magic 0, 1 or 2" in str(err)


def test_inner_compressed_message_in_legacy_wrapper(backend):
    nested = legacy(0, 1, compress(1, legacy(0, 1, b"x"), 1), attrs=1)
    data = PREFIX + legacy(BASE, 1, compress(1, nested, 1), attrs=1)
    err = raises(InvalidRecordError, data, position=P, match="Inner messages must not be compressed")
    assert "at byte 17 of the decompressed records" in str(err)  # the inner attributes byte


def test_empty_legacy_wrapper(backend):
    for magic in (0, 1):
        data = PREFIX + legacy(BASE, magic, compress(1, b"", magic), attrs=1)
        raises(InvalidRecordError, data, position=P, match="no inner records")


def test_legacy_message_fields_past_its_size(backend):
    msg = bytearray(legacy(BASE, 1, b"value"))
    struct.pack_into(">i", msg, len(msg) - 9, 50)  # the value length, now past the message end
    struct.pack_into(">I", msg, 12, zlib.crc32(bytes(msg[16:])))
    raises(CorruptRecordError, PREFIX + bytes(msg), match="runs past the message")
