"""Pure-Python twin of kbatch._core: same names, signatures, results and exceptions.

This module is the reference for the kernel contract; `_core.pyx` implements the same functions
with C loops. Errors go through errors.raise_status so both backends raise the same class at the
same byte position. Positions are indexes into the buffer the kernel was given.
"""
from __future__ import annotations

import operator
import struct
import zlib

import numpy as np

from . import _wire as W
from .errors import (ST_BAD_COUNT, ST_BAD_MAGIC, ST_BATCH_TOO_SMALL, ST_FIELD_PAST_END,
                     ST_HEADER_COUNT_TOO_LARGE, ST_NEG_HEADER_COUNT, ST_NEG_HEADER_KEY,
                     ST_PREMATURE_EOF, ST_RECORD_SIZE, ST_RECORD_TOO_LONG, ST_RECORDS_REMAINING,
                     ST_TRUNCATED, ST_VARINT_TOO_LONG, ST_VARLONG_TOO_LONG, raise_status)

BACKEND = "python"

_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1


def _s64(v: int) -> int:
    """Wrap to a signed 64-bit value (Java long arithmetic)."""
    v = operator.index(v) & _MASK64  # numpy ints too (their & with 2**64-1 overflows)
    return v - (1 << 64) if v >> 63 else v


def _s32(v: int) -> int:
    v &= _MASK32
    return v - (1 << 32) if v >> 31 else v


def _view(data) -> memoryview:
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1 or not mv.c_contiguous:
        mv = mv.cast("B")
    elif mv.format != "B":  # "b"/"c" too: items must read as 0..255
        mv = mv.cast("B")
    return mv


# ------------------------------------------------------------------------------------ CRC32C
def _make_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _make_table()


def crc32c(data, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of any buffer, continuing from `value` (like zlib.crc32)."""
    crc = (value & _MASK32) ^ 0xFFFFFFFF
    table = _CRC_TABLE
    for b in bytes(_view(data)):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c_is_hardware() -> bool:
    """Whether crc32c runs on a CPU instruction (never, in the pure backend)."""
    return False


# ------------------------------------------------------------------------------------ varints
def read_varint(data, pos: int):
    """Decode a zigzag varint (int32) at `pos` as Kafka's ByteUtils.readVarint does.

    Returns (value, next_pos). Non-minimal encodings are accepted; a 5th byte with its MSB set is
    rejected; the 5th byte's bits beyond 32 are dropped, as in Java.
    """
    buf = _view(data)
    n = len(buf)
    raw = 0
    for i in range(5):
        if pos + i >= n:
            raise_status(ST_TRUNCATED, pos + i, 1, 0)
        b = buf[pos + i]
        if i == 4:
            if b & 0x80:
                raise_status(ST_VARINT_TOO_LONG, pos, "at most 5 bytes", "a 5th byte with its MSB set")
            raw |= (b << 28) & _MASK32
            pos += 5
            break
        raw |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            pos += i + 1
            break
    raw &= _MASK32
    return _s32((raw >> 1) ^ -(raw & 1)), pos


def read_varlong(data, pos: int):
    """Decode a zigzag varlong (int64) at `pos` as Kafka's ByteUtils.readVarlong does."""
    buf = _view(data)
    n = len(buf)
    raw = 0
    shift = 0
    i = pos
    while True:
        if i >= n:
            raise_status(ST_TRUNCATED, i, 1, 0)
        b = buf[i]
        i += 1
        if b & 0x80:
            raw |= (b & 0x7F) << shift
            shift += 7
            if shift > 63:
                raise_status(ST_VARLONG_TOO_LONG, pos, "at most 10 bytes", "a 10th byte with its MSB set")
        else:
            raw |= b << shift
            break
    raw &= _MASK64
    return _s64((raw >> 1) ^ -(raw & 1)), i


def _write_unsigned(u: int) -> bytes:
    out = bytearray()
    while u & ~0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """Minimal zigzag encoding of an int32."""
    if not W.INT32_MIN <= value <= W.INT32_MAX:
        raise OverflowError(f"varint out of int32 range: {value}")
    return _write_unsigned(((value << 1) ^ (value >> 31)) & _MASK32)


def write_varlong(value: int) -> bytes:
    """Minimal zigzag encoding of an int64."""
    if not W.INT64_MIN <= value <= W.INT64_MAX:
        raise OverflowError(f"varlong out of int64 range: {value}")
    return _write_unsigned(((value << 1) ^ (value >> 63)) & _MASK64)


def sizeof_varint(value: int) -> int:
    return len(write_varint(value))


def sizeof_varlong(value: int) -> int:
    return len(write_varlong(value))


# ------------------------------------------------------------------------------------ batch scan
SCAN_FIELDS = (
    ("position", np.int64), ("size", np.int64), ("magic", np.int8), ("base_offset", np.int64),
    ("last_offset", np.int64), ("partition_leader_epoch", np.int32), ("crc", np.uint32),
    ("crc_valid", np.bool_), ("attributes", np.int16), ("first_timestamp", np.int64),
    ("max_timestamp", np.int64), ("producer_id", np.int64), ("producer_epoch", np.int16),
    ("base_sequence", np.int32), ("record_count", np.int32),
)

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # base offset .. records count, 61 bytes
_LEGACY_HEAD = struct.Struct(">qiIbb")        # offset, size, crc, magic, attributes


def scan_batches(data, start: int = 0, end: int = -1, verify_crc: bool = True) -> dict:
    """Read every batch header in data[start:end] into numpy columns (one row per batch).

    Works for magic 0, 1 and 2 mixed. Stops without error, as Kafka's FileLogInputStream does,
    when fewer than 17 bytes remain or the last batch runs past `end`; `valid_bytes` says where
    the complete batches end (an absolute position). Raises for a size below the format's
    overhead or a magic outside 0..2. With verify_crc, `crc_valid` holds the CRC check
    (CRC-32C over [21, end) for v2, CRC-32 over [magic, end) for legacy); otherwise all True.
    For legacy entries base_offset = last_offset = the entry's offset, record_count is 1 for a
    plain message and -1 for a compressed wrapper (unknown without decompressing).
    """
    buf = _view(data)
    if end < 0 or end > len(buf):
        end = len(buf)
    rows = []
    pos = start
    while end - pos > W.HEADER_SIZE_UP_TO_MAGIC:
        offset, size = struct.unpack_from(">qi", buf, pos)
        if size < W.RECORD_OVERHEAD_V0:
            raise_status(ST_BATCH_TOO_SMALL, pos, f"size >= {W.RECORD_OVERHEAD_V0}", size, offset)
        total = size + W.LOG_OVERHEAD
        if total > end - pos:
            break
        magic = buf[pos + W.MAGIC_OFFSET]
        if magic > 127:
            magic -= 256
        if magic == 2:
            if total < W.RECORD_BATCH_OVERHEAD:
                raise_status(ST_BATCH_TOO_SMALL, pos, f"size >= {W.RECORD_BATCH_OVERHEAD}", total, offset)
            (base, _len, ple, _m, crc, attrs, lod, first_ts, max_ts, pid, epoch, seq,
             count) = _V2_HEADER.unpack_from(buf, pos)
            ok = (not verify_crc) or crc32c(buf[pos + W.ATTRIBUTES_OFFSET:pos + total]) == crc
            rows.append((pos, total, 2, base, _s64(base + lod), ple, crc, ok, attrs, first_ts,
                         max_ts, pid, epoch, seq, count))
        elif magic in (0, 1):
            _o, _s, crc, _m, attrs = _LEGACY_HEAD.unpack_from(buf, pos)
            if magic == 1:
                if size < W.RECORD_OVERHEAD_V1:
                    raise_status(ST_BATCH_TOO_SMALL, pos, f"size >= {W.RECORD_OVERHEAD_V1}", size, offset)
                (ts,) = struct.unpack_from(">q", buf, pos + W.LOG_OVERHEAD + W.LEGACY_TIMESTAMP_OFFSET)
            else:
                ts = W.NO_TIMESTAMP
            ok = (not verify_crc) or (
                zlib.crc32(buf[pos + W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:pos + total]) == crc)
            count = -1 if attrs & W.LEGACY_COMPRESSION_CODEC_MASK else 1
            rows.append((pos, total, magic, offset, offset, -1, crc, ok, attrs, ts, ts, -1, -1, -1,
                         count))
        else:
            raise_status(ST_BAD_MAGIC, pos + W.MAGIC_OFFSET, "magic 0, 1 or 2", magic, offset)
        pos += total
    out = {name: np.array([r[i] for r in rows], dtype=dt) for i, (name, dt) in enumerate(SCAN_FIELDS)}
    out["valid_bytes"] = pos
    return out


# ------------------------------------------------------------------------------------ records
class Record:
    """One decoded record. Keys and values are read-only memoryviews into the batch's bytes
    (the input buffer when uncompressed), or None. `timestamp` is None for "no timestamp"."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "is_tombstone",
                 "attributes")

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers, is_tombstone, attributes):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.is_tombstone = is_tombstone
        self.attributes = attributes

    def _astuple(self):
        return (self.offset, self.timestamp, self.timestamp_type,
                None if self.key is None else bytes(self.key),
                None if self.value is None else bytes(self.value),
                tuple((k, None if v is None else bytes(v)) for k, v in self.headers),
                self.is_tombstone, self.attributes)

    def __eq__(self, other):
        if not hasattr(other, "_astuple"):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __hash__(self):
        return hash(self._astuple())

    def __repr__(self):
        return ("Record(offset={}, timestamp={}, timestamp_type={}, key={!r}, value={!r}, headers={!r}, "
                "is_tombstone={})").format(*self._astuple()[:7])


def decode_records_v2(data, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
                      log_append_time, timestamp_type: int, extended: bool):
    """Decode exactly `count` v2 records from data[start:end] into a list of Record.

    offset = base_offset + offsetDelta; timestamp = base_timestamp + timestampDelta (Java wrapping
    arithmetic), or `log_append_time` for every record when it is not None (LogAppendTime batches).
    "No timestamp" becomes None: -1 when not `extended`, Long.MIN_VALUE when `extended`.
    Checks each record's declared length, header counts, and that the section holds exactly
    `count` records, with Kafka's rules (kafka-format.md §1.3).
    """
    buf = _view(data)
    if count < 0:
        raise_status(ST_BAD_COUNT, start, "count >= 0", count, base_offset)
    no_ts = W.NO_TIMESTAMP_EXTENDED if extended else W.NO_TIMESTAMP
    lat = None
    if log_append_time is not None:
        lat = None if log_append_time == no_ts else log_append_time
    out = []
    pos = start
    for _ in range(count):
        if pos >= end:
            raise_status(ST_PREMATURE_EOF, pos, f"{count} records", len(out), base_offset)
        rec_start = pos
        length, pos = _varint_in(buf, pos, end, base_offset)
        if length < 0 or length > end - pos:
            raise_status(ST_RECORD_TOO_LONG, rec_start, f"record length <= {end - pos}", length, base_offset)
        rec_end = pos + length
        if rec_end - pos < 1:
            raise_status(ST_FIELD_PAST_END, pos, 1, 0, base_offset)
        attributes = buf[pos]
        pos += 1
        ts_delta, pos = _varlong_in(buf, pos, rec_end, base_offset)
        off_delta, pos = _varint_in(buf, pos, rec_end, base_offset)
        key, pos = _bytes_in(buf, pos, rec_end, base_offset)
        value, pos = _bytes_in(buf, pos, rec_end, base_offset)
        n_headers, pos = _varint_in(buf, pos, rec_end, base_offset)
        if n_headers < 0:
            raise_status(ST_NEG_HEADER_COUNT, pos, "header count >= 0", n_headers, base_offset)
        if n_headers > rec_end - pos:
            raise_status(ST_HEADER_COUNT_TOO_LARGE, pos, f"header count <= {rec_end - pos}", n_headers,
                         base_offset)
        headers = []
        for _h in range(n_headers):
            klen_pos = pos
            klen, pos = _varint_in(buf, pos, rec_end, base_offset)
            if klen < 0:
                raise_status(ST_NEG_HEADER_KEY, klen_pos, "header key size >= 0", klen, base_offset)
            if klen > rec_end - pos:
                raise_status(ST_FIELD_PAST_END, pos, klen, rec_end - pos, base_offset)
            hkey = bytes(buf[pos:pos + klen]).decode("utf-8", "replace")
            pos += klen
            hval, pos = _bytes_in(buf, pos, rec_end, base_offset)
            headers.append((hkey, hval))
        if pos != rec_end:
            raise_status(ST_RECORD_SIZE, rec_start, f"{length} bytes in record payload",
                         f"{length - (rec_end - pos)} bytes read", base_offset)
        if lat is not None or log_append_time is not None:
            ts = lat
        else:
            ts = _s64(base_timestamp + ts_delta)
            if ts == no_ts:
                ts = None
        tomb = value is None or bool(attributes & W.RECORD_TOMBSTONE_FLAG_MASK)
        out.append(Record(_s64(base_offset + off_delta), ts, timestamp_type, key, value, tuple(headers),
                          tomb, attributes))
    if pos != end:
        raise_status(ST_RECORDS_REMAINING, pos, f"{count} records ending at byte {pos}",
                     f"{end - pos} more bytes", base_offset)
    return out


def _varint_in(buf, pos, limit, base_offset):
    """read_varint bounded by `limit` (a record or section end) instead of the buffer end."""
    try:
        return read_varint(buf[:limit], pos)
    except Exception as e:  # noqa: BLE001 - re-located only
        raise e.at(base_offset=base_offset) if hasattr(e, "at") else e


def _varlong_in(buf, pos, limit, base_offset):
    try:
        return read_varlong(buf[:limit], pos)
    except Exception as e:  # noqa: BLE001
        raise e.at(base_offset=base_offset) if hasattr(e, "at") else e


def _bytes_in(buf, pos, limit, base_offset):
    """A varint length then that many bytes; any negative length is null (Kafka's Utils.readBytes)."""
    n, pos = _varint_in(buf, pos, limit, base_offset)
    if n < 0:
        return None, pos
    if n > limit - pos:
        raise_status(ST_FIELD_PAST_END, pos, f"{n} bytes", f"{limit - pos} bytes left in record", base_offset)
    return buf[pos:pos + n].toreadonly(), pos + n


# ------------------------------------------------------------------------------------ timestamps
def check_timestamps(timestamps, now_ms: int, before_max_ms: int, after_max_ms: int, no_timestamp: int):
    """KIP-937 range check over an int64 column, without wrapping (DESIGN.md decision 4).

    A timestamp equal to `no_timestamp` is skipped. Bad = ts < now - before_max_ms (too old) or
    ts > now + after_max_ms (too new), in exact arithmetic. Returns
    (first_bad_index or -1, n_too_old, n_too_new).
    """
    ts = np.asarray(timestamps, dtype=np.int64)
    lo, hi = timestamp_bounds(now_ms, before_max_ms, after_max_ms)
    first, n_old, n_new = -1, 0, 0
    for i, t in enumerate(ts.tolist()):
        if t == no_timestamp:
            continue
        if t < lo:
            n_old += 1
        elif t > hi:
            n_new += 1
        else:
            continue
        if first < 0:
            first = i
    return first, n_old, n_new


def timestamp_bounds(now_ms: int, before_max_ms: int, after_max_ms: int):
    """[now - before, now + after], saturated to the int64 range."""
    lo = max(W.INT64_MIN, min(W.INT64_MAX, now_ms - before_max_ms))
    hi = max(W.INT64_MIN, min(W.INT64_MAX, now_ms + after_max_ms))
    return lo, hi


# ------------------------------------------------------------------------------------ index search
_KEY_FORMATS = {0: ">i", 1: ">q"}  # 0: offset index (int32 relative offset), 1: time index (int64)


def index_search(data, entry_size: int, key_kind: int, target: int, n_entries: int) -> int:
    """Slot of the largest entry whose key <= target in a sorted index, or -1 when none.

    key_kind 0 = `.index` (key: int32 relative offset), 1 = `.timeindex` (key: int64 timestamp).
    Entries are big-endian; the key is at the start of each entry.
    """
    buf = _view(data)
    fmt = _KEY_FORMATS[key_kind]
    if n_entries * entry_size > len(buf):
        raise_status(ST_TRUNCATED, len(buf), n_entries * entry_size, len(buf))
    lo, hi = 0, n_entries - 1
    if n_entries == 0 or struct.unpack_from(fmt, buf, 0)[0] > target:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if struct.unpack_from(fmt, buf, mid * entry_size)[0] <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def index_search_many(data, entry_size: int, key_kind: int, targets, n_entries: int):
    """index_search for each of many targets (any order); returns an int64 numpy array."""
    t = np.asarray(targets, dtype=np.int64)
    return np.array([index_search(data, entry_size, key_kind, int(x), n_entries) for x in t.tolist()],
                    dtype=np.int64)
