"""Kafka's compression codecs, framed as Kafka frames them (kafka-format.md §1.6).

Every decompressor stops at `max_bytes` of output and raises DecompressionLimitError, so a
compression bomb costs at most that much memory.
"""
from __future__ import annotations

import struct
import threading
import zlib
from typing import TYPE_CHECKING, Any

import cramjam
import lz4.block
import lz4.frame
import zstandard

from .. import _wire as W
from ..errors import (CorruptRecordError, DecompressionLimitError, InvalidConfigurationError, KBatchError,
                     UnsupportedCodecError)

if TYPE_CHECKING:
    from .._typing import Buffer

Compression = W.Compression

# xerial snappy-java framing (SnappyOutputStream): magic, version 1, min compatible 1, then
# chunks of int32 BE compressed length + raw snappy block.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

LZ4_MAGIC = b"\x04\x22\x4d\x18"

# python-zstandard (de)compressors must not be shared between threads: one set per thread.
_zstd_local = threading.local()


def codec_name(codec: int) -> str:
    try:
        return Compression(codec).name.lower()
    except ValueError:
        return f"unknown({codec})"


_CODECS = tuple(Compression)  # indexed by id: a tuple lookup, not an Enum call, per batch


def codec_from_name(name: str | int) -> Compression:
    """A codec by its name as Kafka's compression.type spells it ("none"/"uncompressed", "gzip",
    "snappy", "lz4", "zstd"; any case), or a Compression / its id."""
    if isinstance(name, int):
        return check_codec(int(name), 2)
    key = str(name).strip().upper()
    if key == "UNCOMPRESSED":
        key = "NONE"
    if key not in Compression.__members__:
        raise UnsupportedCodecError("Unknown compression type", expected="none, gzip, snappy, lz4 or zstd",
                                    found=name)
    return W.Compression[key]


def check_codec(codec: int, magic: int, position: int | None = None) -> Compression:
    """The Compression member for an attributes codec id, or UnsupportedCodecError."""
    if not 0 <= codec < len(_CODECS):
        raise UnsupportedCodecError(f"Unknown compression type id: {codec}", position=position,
                                    expected="codec id 0-4", found=codec)
    c = _CODECS[codec]
    if c == Compression.ZSTD and magic < 2:
        raise UnsupportedCodecError("zstd compression is only supported by magic 2 batches", position=position,
                                    expected="magic 2", found=f"magic {magic}")
    return c


# ------------------------------------------------------------------------------------ levels
_LEVELS = {Compression.GZIP: W.GZIP_LEVELS, Compression.LZ4: W.LZ4_LEVELS, Compression.ZSTD: W.ZSTD_LEVELS}


def default_level(codec: int) -> int | None:
    """Kafka's default level for `codec` (KIP-390): gzip -1 (zlib's 6), lz4 9, zstd 3; None for
    none and snappy, which have no levels."""
    levels = _LEVELS.get(Compression(int(codec)))
    return None if levels is None else levels[2]


def check_level(codec: int, level: int | None) -> int | None:
    """`level` for `codec` as Kafka accepts it (its Compression builders' ranges: gzip 1-9 or -1,
    lz4 1-17, zstd -131072-22), Kafka's default when None. A level for none or snappy is refused."""
    codec = Compression(int(codec))
    levels = _LEVELS.get(codec)
    if level is None:
        return None if levels is None else levels[2]
    if isinstance(level, bool) or not isinstance(level, int):
        raise InvalidConfigurationError(f"Invalid {codec.name.lower()} compression level", expected="an integer",
                                        found=repr(level))
    if levels is None:
        raise InvalidConfigurationError(f"{codec.name.lower()} has no compression levels",
                                        expected="no level (None)", found=level)
    lo, hi, default = levels
    if not (lo <= level <= hi or level == default):
        extra = f" or {default}" if not lo <= default <= hi else ""
        raise InvalidConfigurationError(f"{codec.name.lower()} doesn't support the given compression level",
                                        expected=f"a level in [{lo}, {hi}]{extra}", found=level)
    return int(level)


# ------------------------------------------------------------------------------------ compress
def compress(codec: int, data: Buffer, magic: int = 2, level: int | None = None) -> bytes:
    """Compress `data` the way Kafka's producer frames it for `codec`, at Kafka's `level` for that
    codec (check_level; None: Kafka's default)."""
    codec = check_codec(codec, magic)
    given = check_level(codec, level)
    if codec == Compression.NONE:
        return bytes(data)
    mv = memoryview(data).cast("B")  # no copy of the input
    if codec == Compression.GZIP:
        c = zlib.compressobj(W.GZIP_LEVELS[2] if given is None else given, zlib.DEFLATED, 31)  # -1: zlib's 6
        return c.compress(mv) + c.flush()
    if codec == Compression.SNAPPY:
        framed = bytearray(XERIAL_HEADER)
        for i in range(0, len(mv), XERIAL_BLOCK_SIZE) or [0]:
            block = cramjam.snappy.compress_raw(mv[i:i + XERIAL_BLOCK_SIZE])
            framed += struct.pack(">i", len(block))
            framed += block
        return bytes(framed)
    if codec == Compression.LZ4:
        frame = _lz4_frame(mv, W.LZ4_LEVELS[2] if given is None else given)
        if magic == 0:
            # KAFKA-3160: magic 0 used a header checksum over magic+FLG+BD; keep writing it so old
            # readers (and Kafka's own v0 reader) see what they expect.
            frame = frame[:6] + bytes([(xxh32(frame[0:6]) >> 8) & 0xFF]) + frame[7:]
        return frame
    # ZSTD: streaming frame without content size, as zstd-jni's output stream writes it
    zlevel = W.ZSTD_LEVELS[2] if given is None else given
    cache: dict[int, zstandard.ZstdCompressor] = _zstd_local.__dict__.setdefault("compressors", {})
    z = cache.get(zlevel)
    if z is None:
        z = cache[zlevel] = zstandard.ZstdCompressor(level=zlevel, write_content_size=False)
    return z.compress(mv)


_LZ4_BLOCK = 64 * 1024
_LZ4_HEADER = LZ4_MAGIC + bytes([0x60, 0x40, 0x82])  # FLG, BD (64 KiB blocks), header checksum
_LZ4_UNCOMPRESSED = 0x80000000


def _lz4_frame(data: Buffer, level: int) -> bytes:
    """Kafka's lz4 frame, block by block as Lz4BlockOutputStream writes it: independent 64 KiB
    blocks, each compressed with lz4-java's fast compressor at Kafka's default level 9 (liblz4's
    LZ4_compress_default: lz4.block's default mode) and with its high-compression one at any other
    level; a block that does not shrink is stored as it is (size high bit set); no checksums, no
    content size. (lz4.frame's own fast path compresses blocks differently, so it is not used.)"""
    mv = memoryview(data).cast("B")
    out = bytearray(_LZ4_HEADER)
    fast = level == W.LZ4_LEVELS[2]
    for i in range(0, len(mv), _LZ4_BLOCK):
        raw = mv[i:i + _LZ4_BLOCK]
        if fast:
            block = lz4.block.compress(raw, store_size=False)
        else:
            block = lz4.block.compress(raw, mode="high_compression", compression=level, store_size=False)
        if len(block) >= len(raw):
            out += struct.pack("<I", len(raw) | _LZ4_UNCOMPRESSED)
            out += raw
        else:
            out += struct.pack("<I", len(block))
            out += block
    out += b"\x00\x00\x00\x00"  # EndMark
    return bytes(out)


# ------------------------------------------------------------------------------------ decompress
def decompress(codec: int, data: Buffer, magic: int = 2, max_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES,
               position: int | None = None) -> bytes:
    """Decompress a Kafka-framed payload; raise DecompressionLimitError beyond `max_bytes`."""
    codec = check_codec(codec, magic, position)
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return _gunzip(data, max_bytes, position)
        if codec == Compression.SNAPPY:
            return _unsnappy(data, max_bytes, position)
        if codec == Compression.LZ4:
            return _unlz4(data, magic, max_bytes, position)
        return _unzstd(data, max_bytes, position)
    except KBatchError as e:
        raise e.at(position=position)
    except Exception as e:  # the libraries raise their own types; present one kbatch error
        raise CorruptRecordError(f"Invalid {codec_name(codec)} compressed data", position=position,
                                 expected=f"a valid {codec_name(codec)} stream", found=str(e)) from e


def relocate(err: KBatchError, batch_position: int, base_offset: int) -> KBatchError:
    """Point an error found inside a batch's decompressed bytes at the batch itself.

    Positions in decompressed data are not positions in the input; the error keeps the inner
    position in its message and takes the batch's position and base offset.
    """
    if err.position is not None:
        err.reason += f" (at byte {err.position} of the decompressed records of the batch at byte {batch_position})"
        err.position = batch_position
    return err.at(position=batch_position, base_offset=base_offset)


def _too_big(max_bytes: int, position: int | None) -> DecompressionLimitError:
    return DecompressionLimitError("Decompressed batch exceeds the decompression limit", position=position,
                                   expected=f"at most {max_bytes} decompressed bytes", found="more")


def _gunzip(data: Buffer, max_bytes: int, position: int | None) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while rest:
        d = zlib.decompressobj(31)
        out += d.decompress(rest, max_bytes + 1 - len(out))
        if len(out) > max_bytes:
            raise _too_big(max_bytes, position)
        if not d.eof:
            if d.unconsumed_tail:  # stopped by max_length
                raise _too_big(max_bytes, position)
            raise CorruptRecordError("Truncated gzip stream", position=position, expected="gzip trailer",
                                     found="end of data")
        rest = d.unused_data  # GZIPInputStream reads concatenated members
        if rest and rest[:2] != b"\x1f\x8b":
            break  # trailing garbage after a member is ignored, as GZIPInputStream does
    return bytes(out)


def _raw_snappy_len(block: bytes) -> int:
    n, shift = 0, 0
    for i, b in enumerate(block[:5]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise CorruptRecordError("Invalid snappy block length preamble")


def _unsnappy(buf: Buffer, max_bytes: int, position: int | None) -> bytes:
    data = bytes(buf)
    if not data.startswith(XERIAL_MAGIC):  # raw block, as snappy-java's SnappyInputStream accepts
        if _raw_snappy_len(data) > max_bytes:
            raise _too_big(max_bytes, position)
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(XERIAL_HEADER):
        raise CorruptRecordError("Truncated xerial snappy header", position=position,
                                 expected=f"{len(XERIAL_HEADER)} bytes", found=f"{len(data)} bytes")
    out = bytearray()
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        if len(data) - pos < 4:
            raise CorruptRecordError("Truncated xerial snappy chunk length", position=position,
                                     expected="4 bytes", found=f"{len(data) - pos} bytes")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or n > len(data) - pos:
            raise CorruptRecordError("Invalid xerial snappy chunk length", position=position,
                                     expected=f"0..{len(data) - pos}", found=n)
        block = data[pos:pos + n]
        pos += n
        if len(out) + _raw_snappy_len(block) > max_bytes:
            raise _too_big(max_bytes, position)
        out += cramjam.snappy.decompress_raw(block)
    return bytes(out)


def _unlz4(buf: Buffer, magic: int, max_bytes: int, position: int | None) -> bytes:
    data = bytes(buf)
    if len(data) < 7 or data[:4] != LZ4_MAGIC:
        raise CorruptRecordError("Invalid lz4 frame", position=position, expected="magic 04 22 4D 18",
                                 found=data[:4].hex(" "))
    flg = data[4]
    if not flg & 0x20:
        raise CorruptRecordError("Dependent block stream is unsupported", position=position,
                                 expected="independent lz4 blocks", found=f"FLG {flg:#04x}")
    if magic == 0:
        # Kafka skips the header checksum for magic 0 (it wrote a wrong one); repair it so the
        # library accepts the frame.
        hc_at = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        if len(data) > hc_at:
            data = data[:hc_at] + bytes([(xxh32(data[4:hc_at]) >> 8) & 0xFF]) + data[hc_at + 1:]
    # Kafka stops at the first EndMark; bytes after it are ignored.
    d = lz4.frame.LZ4FrameDecompressor()
    return _bounded(d, data, 0, max_bytes, position, _LZ4_RATIO_SHIFT, "lz4")[0]


def _unzstd(buf: Buffer, max_bytes: int, position: int | None) -> bytes:
    # Streaming, frame after frame (zstd-jni's input stream reads across frames); frames written
    # by Kafka carry no content size, so one-shot decompression is not an option.
    data = bytes(buf)
    local = _zstd_local.__dict__
    dctx: zstandard.ZstdDecompressor = local.get("dctx") or local.setdefault("dctx", zstandard.ZstdDecompressor())
    parts: list[bytes] = []
    pos = total = 0
    while pos < len(data):
        out, pos = _bounded(dctx.decompressobj(), data, pos, max_bytes - total, position, _ZSTD_RATIO_SHIFT,
                            "zstd")
        total += len(out)
        parts.append(out)
    return b"".join(parts)


# Worst-case expansion of one input byte, as a shift: lz4 sequences reach ~255:1, a zstd RLE
# block 128 KiB from 4 bytes (32768:1). Input is fed in steps that cannot expand past what is
# left of the limit (plus one block), so a bomb never allocates much more than `max_bytes`.
_LZ4_RATIO_SHIFT = 8
_ZSTD_RATIO_SHIFT = 15
_MIN_STEP = 64


def _bounded(d: Any, data: bytes, pos: int, max_bytes: int, position: int | None, ratio_shift: int,
             name: str) -> tuple[bytes, int]:
    """Decompress the one frame at data[pos:] with the streaming decompressor `d` (lz4 or zstd:
    decompress(), eof, unused_data) under `max_bytes`. Returns (output, position after the frame)."""
    parts: list[bytes] = []
    total, n = 0, len(data)
    while not d.eof:
        if pos >= n:
            raise CorruptRecordError(f"Truncated {name} frame", position=position, expected=f"{name} end of frame",
                                     found="end of data")
        step = max(_MIN_STEP, (max_bytes - total) >> ratio_shift)
        out = d.decompress(data[pos:pos + step])
        pos = min(pos + step, n)
        total += len(out)
        if total > max_bytes:
            raise _too_big(max_bytes, position)
        parts.append(out)
    return b"".join(parts), pos - len(d.unused_data or b"")  # lz4 says None for none


# ------------------------------------------------------------------------------------ xxhash32
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, for the lz4 frame header checksum (a few bytes per batch; not a hot path)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while i + 16 <= n:
            for j in range(4):
                (w,) = struct.unpack_from("<I", data, i + 4 * j)
                v[j] = (_rotl((v[j] + w * _P2) & _M, 13) * _P1) & _M
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 4 <= n:
        (w,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + w * _P3) & _M, 17) * _P4) & _M
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M, 11) * _P1) & _M
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h
