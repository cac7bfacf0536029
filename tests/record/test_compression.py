"""Kafka's compression framing (kafka-format.md §1.6): gzip members, xerial and raw snappy, Kafka's
lz4 frame and the magic-0 header checksum, streaming zstd, and the decompressed-size limit."""
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

import kbatch
from kbatch.record import compression as C
from kbatch.errors import CorruptRecordError, DecompressionLimitError, RecordTooLargeError, UnsupportedCodecError

from support import vectors as V

PAYLOAD = b"".join(b"record %d with some repeated text; " % i for i in range(3000))  # ~100 KB


# ------------------------------------------------------------------------------------ every codec
@pytest.mark.parametrize("codec", list(kbatch.Compression))
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_round_trip(codec, magic):
    if codec == kbatch.Compression.ZSTD and magic < 2:
        pytest.skip("zstd needs magic 2")
    for payload in (b"", b"x", PAYLOAD):
        assert C.decompress(codec, C.compress(codec, payload, magic), magic) == payload
        assert C.decompress(codec, memoryview(bytearray(C.compress(codec, payload, magic))), magic) == payload


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_ids(codec):
    with pytest.raises(UnsupportedCodecError, match=f"Unknown compression type id: {codec}") as e:
        C.decompress(codec, b"anything", 2, position=61)
    assert e.value.position == 61 and isinstance(e.value, ValueError) and e.value.error_code == 76


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_a_corrupt_record_error(codec):
    for junk in (b"", b"\x01", b"\xff" * 64, bytes(range(256))):
        if codec in (1,) and junk == b"":
            assert C.decompress(codec, junk) == b""  # an empty gzip stream holds no members
            continue
        if codec == 4 and junk == b"":
            assert C.decompress(codec, junk) == b""  # no zstd frames: nothing to read
            continue
        with pytest.raises(CorruptRecordError):
            C.decompress(codec, junk, 2, position=7)


# ------------------------------------------------------------------------------------ gzip
def test_gzip_reads_concatenated_members_and_ignores_trailing_bytes():
    a, b = C.compress(1, b"first member "), C.compress(1, b"second member")
    assert a[:3] == b"\x1f\x8b\x08"  # an RFC 1952 member, as GZIPOutputStream writes
    assert C.decompress(1, a + b) == b"first member second member"
    assert C.decompress(1, a + b"\x00\x00garbage") == b"first member "  # GZIPInputStream stops there
    with pytest.raises(CorruptRecordError, match="Truncated gzip"):
        C.decompress(1, a[:-4])


# ------------------------------------------------------------------------------------ snappy
def test_snappy_writes_xerial_framing():
    out = C.compress(2, PAYLOAD)
    assert out[:16] == V.XERIAL_SNAPPY_HEADER
    pos, chunks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)  # big-endian chunk length, then a raw block
        chunks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert [len(c) for c in chunks] == [32768, 32768, 32768, len(PAYLOAD) - 3 * 32768]
    assert b"".join(chunks) == PAYLOAD


def test_snappy_reads_raw_and_xerial():
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert C.decompress(2, raw) == PAYLOAD  # unframed, as sarama writes (SnappyInputStream accepts it)
    assert C.decompress(2, V.SARAMA_SNAPPY_RAW[61:]) == V.SARAMA_RECORDS_SECTION
    from aiokafka.codec import snappy_encode
    assert C.decompress(2, snappy_encode(PAYLOAD)) == PAYLOAD  # another writer's xerial framing
    with pytest.raises(CorruptRecordError, match="chunk length"):
        C.decompress(2, V.XERIAL_SNAPPY_HEADER + struct.pack(">i", 1000) + b"\x00" * 10)
    with pytest.raises(CorruptRecordError, match="xerial snappy header"):
        C.decompress(2, V.XERIAL_SNAPPY_HEADER[:12])


# ------------------------------------------------------------------------------------ lz4
def test_lz4_writes_kafkas_frame_header():
    out = C.compress(3, PAYLOAD, 2)
    assert out[:7] == V.LZ4_KAFKA_HEADER == C.compress(3, b"", 1)[:7]
    assert out[-4:] == b"\x00\x00\x00\x00"  # EndMark, no content checksum
    # FLG 0x60 / BD 0x40: independent 64 KiB blocks, as Kafka's Lz4BlockOutputStream writes
    (first,) = struct.unpack_from("<I", out, 7)
    assert (first & 0x7FFFFFFF) <= 65536


def test_lz4_magic0_broken_header_checksum_both_ways():
    broken = C.compress(3, PAYLOAD, 0)
    assert broken[:7] == V.LZ4_KAFKA_HEADER_MAGIC0  # HC over magic+FLG+BD (KAFKA-3160)
    assert C.decompress(3, broken, 0) == PAYLOAD
    correct = C.compress(3, PAYLOAD, 2)
    assert C.decompress(3, correct, 0) == PAYLOAD  # Kafka skips the check for magic 0
    for magic in (1, 2):  # ... and verifies it for magic 1 and 2
        with pytest.raises(CorruptRecordError, match="lz4"):
            C.decompress(3, broken, magic)


def test_lz4_other_writers_framing_is_read():
    # sarama: FLG 0x64 (content checksum), BD 0x70 (4 MiB blocks)
    assert C.decompress(3, V.SARAMA_LZ4[61:]) == V.SARAMA_RECORDS_SECTION
    with_size = lz4.frame.compress(PAYLOAD, store_size=True, content_checksum=True, block_linked=False)
    assert C.decompress(3, with_size) == PAYLOAD
    assert C.decompress(3, with_size, 0) == PAYLOAD  # the magic-0 repair handles the content size field
    linked = lz4.frame.compress(PAYLOAD, block_linked=True)
    with pytest.raises(CorruptRecordError, match="Dependent block stream is unsupported"):
        C.decompress(3, linked)


def test_lz4_reads_only_the_first_frame():
    two = C.compress(3, b"first", 2) + C.compress(3, b"second", 2)
    assert C.decompress(3, two) == b"first"  # Lz4BlockInputStream stops at the first EndMark
    with pytest.raises(CorruptRecordError, match="Truncated lz4"):
        C.decompress(3, C.compress(3, PAYLOAD)[:-10])


def test_xxh32_matches_published_values_and_lz4_headers():
    assert C.xxh32(b"") == 0x02CC5D05
    assert C.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F  # python-xxhash's README
    for kw in (dict(), dict(store_size=True), dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True)):
        frame = lz4.frame.compress(b"abc", **kw)
        hc_at = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[hc_at] == (C.xxh32(frame[4:hc_at]) >> 8) & 0xFF


# ------------------------------------------------------------------------------------ zstd
def test_zstd_frames_carry_no_content_size_and_stream_across_frames():
    out = C.compress(4, PAYLOAD)
    assert zstandard.get_frame_parameters(out).content_size == zstandard.CONTENTSIZE_UNKNOWN
    with pytest.raises(zstandard.ZstdError):  # why one-shot decompression is not an option
        zstandard.ZstdDecompressor().decompress(out)
    assert C.decompress(4, out) == PAYLOAD
    sized = zstandard.ZstdCompressor(write_content_size=True).compress(b"sized")
    assert C.decompress(4, out + sized + out) == PAYLOAD + b"sized" + PAYLOAD
    streamed = zstandard.ZstdCompressor().compressobj()
    chunked = streamed.compress(PAYLOAD[:5000]) + streamed.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    chunked += streamed.compress(PAYLOAD[5000:]) + streamed.flush()
    assert C.decompress(4, chunked) == PAYLOAD


def test_zstd_truncated_or_trailing_garbage_is_corrupt():
    out = C.compress(4, PAYLOAD)
    for cut in (len(out) - 1, len(out) // 2, 5):
        with pytest.raises(CorruptRecordError, match="zstd"):
            C.decompress(4, out[:cut])
    with pytest.raises(CorruptRecordError, match="zstd"):
        C.decompress(4, out + b"\x01\x02\x03\x04")


# ------------------------------------------------------------------------------------ the limit
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompressed_size_limit_is_exact(codec):
    data = C.compress(codec, PAYLOAD)
    assert C.decompress(codec, data, 2, len(PAYLOAD)) == PAYLOAD
    with pytest.raises(DecompressionLimitError) as e:
        C.decompress(codec, data, 2, len(PAYLOAD) - 1, position=61)
    err = e.value
    assert isinstance(err, RecordTooLargeError) and isinstance(err, ValueError) and err.error_code == 10
    assert err.position == 61 and f"at most {len(PAYLOAD) - 1} decompressed bytes" in str(err)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_limit_applies_across_frames_members_and_chunks(codec):
    piece = C.compress(codec, PAYLOAD)
    if codec == 2:
        many = piece + piece[16:] * 3  # more xerial chunks
    elif codec == 3:
        pytest.skip("lz4: Kafka reads only the first frame")
    else:
        many = piece * 4  # gzip members / zstd frames
    assert C.decompress(codec, many, 2, 4 * len(PAYLOAD)) == PAYLOAD * 4
    with pytest.raises(DecompressionLimitError):
        C.decompress(codec, many, 2, 3 * len(PAYLOAD) + 10)


def test_zlib_level_and_codec_names():
    assert C.codec_name(4) == "zstd" and C.codec_name(6) == "unknown(6)"
    fast, best = C.compress(1, PAYLOAD, level=1), C.compress(1, PAYLOAD, level=9)
    assert zlib.decompress(fast, 31) == zlib.decompress(best, 31) == PAYLOAD
