"""Segment bytes for the reader tests: every corner of the format in one file, random segments,
and damaged copies. Shared by test_spark.py (both Spark readers) and test_spark_jvm_decoder.py
(the Java decoder alone), which compare what they read with kbatch.decode_columns.
"""
from __future__ import annotations

import gzip
import random
import struct

import cramjam
import lz4.frame
import zstandard

import kbatch
from kbatch import _wire as W
from kbatch.record.builder import build_end_txn_marker
from kbatch.record.compression import compress

DAY = 86_400_000
NOW = 1_750_000_000_000


def fix_v2(batch: bytearray) -> bytes:
    """Recompute a v2 batch's length and CRC after its bytes were edited."""
    struct.pack_into(">i", batch, W.LENGTH_OFFSET, len(batch) - W.LOG_OVERHEAD)
    struct.pack_into(">I", batch, W.CRC_OFFSET, kbatch.crc32c(bytes(batch[W.ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def reframe(batch: bytes, codec: int, packed: bytes) -> bytes:
    """An uncompressed v2 batch with its records section replaced by `packed` (that section
    compressed some other way) and the codec bits set."""
    b = bytearray(batch[:W.RECORDS_OFFSET]) + packed
    (attrs,) = struct.unpack_from(">h", b, W.ATTRIBUTES_OFFSET)
    struct.pack_into(">h", b, W.ATTRIBUTES_OFFSET, (attrs & ~W.COMPRESSION_CODEC_MASK) | codec)
    return fix_v2(b)


def records_of(batch: bytes) -> bytes:
    return batch[W.RECORDS_OFFSET:]


def _v2(base, recs, **kw):
    b = kbatch.BatchBuilder(base_offset=base, **kw)
    for r in recs:
        b.append(*r)
    return b.build()


def corner_batches() -> list:
    """Batches (base offsets increasing) with every corner the readers must agree on."""
    out = []
    off = 0

    def add(data, n):
        nonlocal off
        out.append(data)
        off += n

    hdrs = [(b"\xff\xfe\xed\xa0\x80ok\xe2\x82", b"x"), ("", None), ("trace", b""), ("\u00e9t\u00e9", b"\x00\x01")]
    # KIP-228: extended batch, -1 is a real instant, None is "no timestamp"; a non-extended batch's -1 is none
    add(_v2(off, [(-1, b"k", b"minus one"), (None, b"k", b"none"), (-(50 * 365 * DAY), None, b"1920")]), 3)
    add(_v2(off, [(-1, b"k", b"no ts"), (-5, b"k", b"neg"), (NOW, b"", b"")], timestamp_extended=False), 3)
    # beyond the microsecond range: null in the timestamp column
    add(_v2(off, [(2**62, b"far", b"future"), (-(2**62), b"far", b"past"), (W.INT64_MAX, b"max", b"v")]), 3)
    # KIP-87 tombstones: null value; the flag with a payload; empty key and value are not tombstones
    add(_v2(off, [(NOW, b"t", None), (NOW, b"t", b"last state", (), True), (NOW, b"", b"", hdrs)],
            compression=W.Compression.ZSTD), 3)
    # every codec, headers on every codec
    for codec in W.Compression:
        add(_v2(off, [(NOW + i, b"key-%d" % i, b"value-%d" % i * (i + 1), hdrs[:i % 4]) for i in range(7)],
                compression=codec), 7)
    # LogAppendTime: every record takes the batch's max timestamp
    add(_v2(off, [(None, b"lat", b"a"), (None, b"lat", b"b")], timestamp_type=W.TimestampType.LOG_APPEND_TIME,
            log_append_time=NOW - DAY, compression=W.Compression.LZ4), 2)
    # a delete-horizon batch (KIP-534: negative timestamp deltas) and offsets with gaps (compaction)
    add(_v2(off, [(NOW - 10, b"c", b"1", (), None, off + 0), (NOW - 5, b"c", b"2", (), None, off + 4)],
            delete_horizon_ms=NOW + DAY), 5)
    # framings other writers use: raw snappy (sarama), lz4 with checksums and content size, gzip in
    # two members, zstd in two frames
    plain = _v2(off, [(NOW, b"raw", b"snappy %d" % i) for i in range(5)])
    add(reframe(plain, W.Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(records_of(plain)))), 5)
    plain = _v2(off, [(NOW, b"lz4", b"checksums %d" % i * 50) for i in range(5)])
    add(reframe(plain, W.Compression.LZ4, lz4.frame.compress(
        records_of(plain), block_size=lz4.frame.BLOCKSIZE_MAX64KB, content_checksum=True, block_checksum=True,
        store_size=True, block_linked=False)), 5)
    plain = _v2(off, [(NOW, b"gz", b"member %d" % i) for i in range(6)])
    r = records_of(plain)
    add(reframe(plain, W.Compression.GZIP, gzip.compress(r[:20]) + gzip.compress(r[20:])), 6)
    plain = _v2(off, [(NOW, b"zs", b"frame %d" % i) for i in range(6)])
    r = records_of(plain)
    add(reframe(plain, W.Compression.ZSTD, zstandard.ZstdCompressor().compress(r[:17])
                + zstandard.ZstdCompressor(write_content_size=False).compress(r[17:])), 6)
    # an empty batch (compaction keeps the header of a producer's last batch)
    empty = bytearray(_v2(off, [(NOW, b"gone", b"gone")])[:W.RECORDS_OFFSET])
    struct.pack_into(">i", empty, W.RECORDS_COUNT_OFFSET, 0)
    add(fix_v2(empty), 1)
    # legacy message sets: magic 0 (lz4 with its broken header checksum), magic 1 with LogAppendTime
    for magic, codec in ((0, W.Compression.NONE), (0, W.Compression.GZIP), (0, W.Compression.LZ4),
                         (1, W.Compression.SNAPPY), (1, W.Compression.NONE), (1, W.Compression.LZ4)):
        b = kbatch.BatchBuilder(magic=magic, compression=codec, base_offset=off)
        for i in range(3):
            b.append(NOW - DAY + i, b"old-%d" % i, None if i == 2 else b"legacy")
        add(b.build(), 3)
    b = kbatch.BatchBuilder(magic=1, compression=W.Compression.GZIP, base_offset=off,
                            timestamp_type=W.TimestampType.LOG_APPEND_TIME, log_append_time=NOW - 7)
    for i in range(3):
        b.append(NOW + i, b"lat1", b"v")
    add(b.build(), 3)
    # transactions: committed, aborted, and an idempotent (non-transactional) producer between them
    for pid, commit in ((77, True), (78, False)):
        add(_v2(off, [(NOW, b"txn", b"%d" % pid)] * 3, producer_id=pid, producer_epoch=1, base_sequence=0,
                is_transactional=True, compression=W.Compression.SNAPPY), 3)
        add(_v2(off, [(NOW, b"idem", b"x")], producer_id=99, producer_epoch=0, base_sequence=off), 1)
        add(build_end_txn_marker(producer_id=pid, producer_epoch=1, commit=commit, coordinator_epoch=3,
                                 base_offset=off, timestamp=NOW), 1)
    add(_v2(off, [(NOW, b"after", b"txns")]), 1)
    return out


def corner_segment() -> bytes:
    return b"".join(corner_batches())


# ------------------------------------------------------------------------------------ random segments
def random_segment(rng: random.Random, batches: int | None = None) -> bytes:
    """Random batches: magic, codec, record count, keys, values, headers and timestamps."""
    out = []
    off = rng.randrange(0, 1000)
    for _ in range(batches if batches is not None else rng.randint(1, 6)):
        magic = rng.choice((2, 2, 2, 1, 0))
        codecs = [c for c in W.Compression if magic == 2 or c != W.Compression.ZSTD]
        kw = {"compression": rng.choice(codecs), "base_offset": off}
        if magic == 2:
            kw["timestamp_extended"] = rng.random() < 0.7
            if rng.random() < 0.2:
                kw.update(timestamp_type=W.TimestampType.LOG_APPEND_TIME, log_append_time=rng.choice((NOW, -DAY)))
        elif rng.random() < 0.3 and magic == 1:
            kw.update(timestamp_type=W.TimestampType.LOG_APPEND_TIME, log_append_time=NOW)
        b = kbatch.BatchBuilder(magic=magic, **kw)
        n = rng.randint(1, 12)
        for _ in range(n):
            ts = rng.choice((NOW + rng.randrange(-DAY, DAY), -1, None, rng.randrange(-2**63, 2**63),
                             -(rng.randrange(1, 10**12))))
            if ts is None and magic < 2:
                ts = -1
            key = rng.choice((None, b"", rng.randbytes(rng.randint(1, 20))))
            value = rng.choice((None, b"", rng.randbytes(rng.randint(1, 300))))
            headers = ()
            if magic == 2 and rng.random() < 0.4:
                headers = [(rng.choice(("h", "", "\u00e9", rng.randbytes(3))),
                            rng.choice((None, b"", rng.randbytes(5)))) for _ in range(rng.randint(1, 3))]
            tomb = rng.choice((None, None, True)) if value is not None else None
            b.append(ts, key, value, headers, tomb)
        out.append(b.build())
        off += n + rng.choice((0, 0, 3))
    return b"".join(out)


def damaged(data: bytes, rng: random.Random) -> bytes:
    """One kind of damage: a flipped bit, a cut, a record byte changed under a fixed CRC (so that
    the record checks, not the CRC, find it), an unknown codec, a wrong record count, or a size
    field changed."""
    d = bytearray(data)
    try:
        batches = list(kbatch.iter_batches(data, verify_crc=False, strict=False))
    except kbatch.KBatchError:  # damaged already: only flips and cuts
        batches = []
    kind = rng.choice(("flip", "cut", "record", "codec", "count", "size"))
    v2 = [b for b in batches if b.magic == 2]
    if kind == "flip" or (kind in ("record", "codec", "count") and not v2) or (kind == "size" and not batches):
        i = rng.randrange(len(d))
        d[i] ^= 1 << rng.randrange(8)
        return bytes(d)
    if kind == "cut":
        return bytes(d[:rng.randrange(len(d))])
    if kind == "size":
        b = rng.choice(batches)
        (size,) = struct.unpack_from(">i", d, b.position + W.SIZE_OFFSET)
        struct.pack_into(">i", d, b.position + W.SIZE_OFFSET, max(0, size + rng.choice((-7, -1, 1, 9, -size))))
        return bytes(d)
    b = rng.choice(v2)
    batch = bytearray(d[b.position:b.position + b.size_in_bytes])
    codec = b.attributes & W.COMPRESSION_CODEC_MASK
    if kind == "record" and len(batch) > W.RECORDS_OFFSET and codec <= W.Compression.ZSTD:
        if codec != W.Compression.NONE:  # damage the records inside the compression
            try:
                recs = bytearray(kbatch.record.compression.decompress(codec, batch[W.RECORDS_OFFSET:], 2))
            except kbatch.KBatchError:
                recs = bytearray(b"damaged")
            codec = W.Compression(codec)
            if recs:
                recs[rng.randrange(len(recs))] = rng.randrange(256)
            batch = bytearray(batch[:W.RECORDS_OFFSET]) + compress(codec, bytes(recs))
        else:
            i = rng.randrange(W.RECORDS_OFFSET, len(batch))
            batch[i] = rng.randrange(256)
    elif kind == "codec":
        (attrs,) = struct.unpack_from(">h", batch, W.ATTRIBUTES_OFFSET)
        struct.pack_into(">h", batch, W.ATTRIBUTES_OFFSET, (attrs & ~7) | rng.choice((5, 6, 7)))
    else:
        (count,) = struct.unpack_from(">i", batch, W.RECORDS_COUNT_OFFSET)
        struct.pack_into(">i", batch, W.RECORDS_COUNT_OFFSET, count + rng.choice((-1, 1, -count - 1)))
    return bytes(d[:b.position]) + fix_v2(batch) + bytes(d[b.position + b.size_in_bytes:])
