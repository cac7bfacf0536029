"""KIP-87 tombstones (DESIGN.md decision 2) through the codec, the columns and the cleaner.

v2 record attribute bit 5 (0x20) is the tombstone flag. A record is a tombstone when the flag is
set or its value is null; writers set the flag for every null value, accept a tombstone with a
value, and reject a null value explicitly marked "not a tombstone". Magic 0/1: tombstone = null
value, and a tombstone with a value is written with a null value.
"""
from __future__ import annotations

import os
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch import _backend
from kbatch import _wire as W
from kbatch.log.cleaner import compact

NOW = 1_700_000_000_000
DAY = 86_400_000


def _one(data):
    (b,) = list(kbatch.iter_batches(data))
    return b


def _record_attribute_bytes(data):
    """The attributes byte of each record of an uncompressed v2 batch, read from the wire."""
    core = _backend.core
    b = _one(data)
    pos = W.RECORDS_OFFSET
    out = []
    for _ in range(b.record_count):
        length, p = core.read_varint(data, pos)
        out.append(data[p])
        pos = p + length
    return out


def _clear_record_flags(data):
    """Kafka-written bytes: the same batch with every record attributes byte 0 and the CRC redone."""
    core = _backend.core
    buf = bytearray(data)
    b = _one(data)
    pos = W.RECORDS_OFFSET
    for _ in range(b.record_count):
        length, p = core.read_varint(buf, pos)
        buf[p] = 0
        pos = p + length
    struct.pack_into(">I", buf, W.CRC_OFFSET, core.crc32c(bytes(buf[W.ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def test_writer_sets_flag_for_null_values_and_explicit_tombstones(backend):
    b = kbatch.BatchBuilder(timestamp_extended=False)
    b.append(1, b"a", b"v")                    # live
    b.append(2, b"b", None)                    # null value -> flagged
    b.append(3, b"c", b"last-words", tombstone=True)  # tombstone carrying a value (KIP-87)
    b.append(4, b"d", b"", tombstone=None)     # empty value is not a tombstone
    data = b.build()
    assert _record_attribute_bytes(data) == [0, W.RECORD_TOMBSTONE_FLAG_MASK, W.RECORD_TOMBSTONE_FLAG_MASK, 0]
    recs = list(_one(data))
    assert [(r.is_tombstone, None if r.value is None else bytes(r.value)) for r in recs] == [
        (False, b"v"), (True, None), (True, b"last-words"), (False, b"")]
    # the batch-level bit 5 (isControl) is untouched by record tombstones
    assert not _one(data).is_control


def test_null_value_marked_not_tombstone_is_rejected(backend):
    b = kbatch.BatchBuilder()
    with pytest.raises(kbatch.InvalidRecordError) as ei:
        b.append(1, b"k", None, tombstone=False)
    assert ei.value.expected and ei.value.found
    for magic in (0, 1):
        with pytest.raises(kbatch.InvalidRecordError):
            kbatch.BatchBuilder(magic=magic).append(1, b"k", None, tombstone=False)


def test_kafka_bytes_null_value_without_flag_is_a_tombstone(backend):
    b = kbatch.BatchBuilder(timestamp_extended=False)
    b.append(1, b"k", None)
    b.append(2, b"j", b"v")
    kafka = _clear_record_flags(b.build())
    assert _record_attribute_bytes(kafka) == [0, 0]
    r0, r1 = _one(kafka)
    assert r0.is_tombstone and r0.value is None and not r1.is_tombstone


@pytest.mark.parametrize("codec", [kbatch.Compression.GZIP, kbatch.Compression.LZ4, kbatch.Compression.ZSTD,
                                   kbatch.Compression.SNAPPY])
def test_flag_survives_compression(backend, codec):
    b = kbatch.BatchBuilder(compression=codec)
    b.append(1, b"k", b"payload", tombstone=True)
    b.append(2, b"k", None)
    b.append(3, b"k", b"x")
    assert [(r.is_tombstone, r.attributes) for r in _one(b.build())] == [(True, 0x20), (True, 0x20), (False, 0)]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_tombstone_is_null_value_and_down_conversion_drops_payload(backend, magic):
    b = kbatch.BatchBuilder(magic=magic)
    b.append(1, b"a", None)
    b.append(2, b"b", b"payload", tombstone=True)
    b.append(3, b"c", b"v")
    recs = [r for batch in kbatch.iter_batches(b.build()) for r in batch]
    assert [(r.is_tombstone, r.value if r.value is None else bytes(r.value)) for r in recs] == [
        (True, None), (True, None), (False, b"v")]


def test_columns_carry_is_tombstone(backend):
    b = kbatch.BatchBuilder()
    b.append(1, b"a", None)
    b.append(2, b"b", b"p", tombstone=True)
    b.append(3, b"c", b"v")
    legacy = kbatch.BatchBuilder(magic=1, base_offset=3)
    legacy.append(4, b"d", None)
    table = kbatch.decode_columns(b.build() + legacy.build(), topic="t", partition=0)
    assert table.column("isTombstone").to_pylist() == [True, True, False, True]
    assert table.column("value").to_pylist() == [None, b"p", b"v", None]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=4)), st.booleans()), min_size=1, max_size=40),
       st.integers(1, 9))
def test_is_tombstone_column_bits(backend, recs, chunk_rows):
    """The isTombstone column (packed to Arrow's bitmap from the kernel's bytes) holds each
    record's flag, for any row count and chunking (the last byte of a bitmap partly used)."""
    data, expect = b"", []
    for i in range(0, len(recs), 7):
        b = kbatch.BatchBuilder(base_offset=i)
        for value, tomb in recs[i:i + 7]:
            b.append(7, b"k", value, tombstone=True if tomb else None)
            expect.append(value is None or tomb)
        data += b.build()
    col = kbatch.decode_columns(data, chunk_rows=chunk_rows).column("isTombstone")
    assert col.type == pa.bool_() and col.null_count == 0
    assert col.to_pylist() == expect


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.sampled_from([None, True, False])),
                min_size=1, max_size=20),
       st.sampled_from([0, 1, 2, 3, 4]))
def test_is_tombstone_is_flag_or_null(backend, recs, codec):
    b = kbatch.BatchBuilder(compression=codec)
    expect = []
    for value, tomb in recs:
        if value is None and tomb is False:
            tomb = None
        b.append(7, b"k", value, tombstone=tomb)
        expect.append(value is None or bool(tomb))
    got = list(_one(b.build()))
    assert [r.is_tombstone for r in got] == expect
    assert [bool(r.attributes & W.RECORD_TOMBSTONE_FLAG_MASK) for r in got] == expect


def _seg(d, batches):
    os.makedirs(d, exist_ok=True)
    base = _one(batches[0]).base_offset
    with open(os.path.join(d, f"{base:020d}.log"), "wb") as f:
        f.write(b"".join(batches))


def test_cleaner_treats_flag_and_null_alike_and_keeps_record_attributes(tmp_path, backend):
    d = str(tmp_path / "t-0")
    b = kbatch.BatchBuilder(timestamp_extended=False)
    b.append(1, b"old", b"x")
    b.append(2, b"nul", None)             # Kafka-style: flag cleared below
    b.append(3, b"old", b"y")
    kafka = _clear_record_flags(b.build())
    f = kbatch.BatchBuilder(base_offset=3)
    f.append(-4, b"flag", b"reason", tombstone=True)  # a tombstone with a payload, negative timestamp
    _seg(d, [kafka, f.build()])
    tail = kbatch.BatchBuilder(base_offset=4)
    tail.append(5, b"z", b"z")
    _seg(d, [tail.build()])
    s = compact(d, NOW, delete_retention_ms=DAY)
    assert s.tombstones_kept == 2 and s.delete_horizons_set == 2
    with open(os.path.join(d, f"{0:020d}.log"), "rb") as fh:
        a, t = list(kbatch.iter_batches(fh.read()))
    assert a.delete_horizon_ms == t.delete_horizon_ms == NOW + DAY
    # the rebuilt null value keeps attributes 0, as a broker's LogCleaner writes it (a real one is the
    # oracle in tests/system/test_real_kafka_writes.py); the flagged tombstone keeps its flag
    assert [(r.offset, r.is_tombstone, r.attributes) for r in a] == [(1, True, 0), (2, False, 0)]
    assert [r.attributes for r in t] == [0x20]
    assert a.last_offset == 2
    (r,) = list(t)
    assert (r.offset, r.timestamp, r.is_tombstone, bytes(r.value)) == (3, -4, True, b"reason")
    compact(d, NOW + DAY, delete_retention_ms=DAY)
    with open(os.path.join(d, f"{0:020d}.log"), "rb") as fh:
        batches = list(kbatch.iter_batches(fh.read()))
    assert [(r.offset, bytes(r.value)) for x in batches for r in x] == [(2, b"y")]
