"""Pure-Python twin of kbatch._core: same names, signatures, results and exceptions.

This module is the reference for the kernel contract; `_core.pyx` implements the same functions
with C loops. Errors go through errors.raise_status so both backends raise the same class at the
same byte position. Positions are indexes into the buffer the kernel was given.
"""
from __future__ import annotations

import bisect
import operator
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn

import numpy as np
import numpy.typing as npt

from . import _wire as W
from .errors import (ST_BAD_COUNT, ST_BAD_MAGIC, ST_BATCH_TOO_SMALL, ST_CRC, ST_FIELD_PAST_END,
                     ST_HEADER_COUNT_TOO_LARGE, ST_NEG_HEADER_COUNT, ST_NEG_HEADER_KEY,
                     ST_PREMATURE_EOF, ST_RECORD_SIZE, ST_RECORD_TOO_LONG, ST_RECORDS_REMAINING,
                     ST_TRUNCATED, ST_VARINT_TOO_LONG, ST_VARLONG_TOO_LONG, raise_status)

if TYPE_CHECKING:
    from ._typing import BinaryColumn as _BinaryColumn
    from ._typing import Buffer, Headers, RecordTuple
    from ._typing import FilterResult as _FilterResult
    from ._typing import HeadersColumn as _HeadersColumn
    from ._typing import ValueColumn as _ValueColumn

BACKEND: Final = "python"

_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1


def _s64(v: int) -> int:
    """Wrap to a signed 64-bit value (Java long arithmetic)."""
    v = operator.index(v) & _MASK64  # numpy ints too (their & with 2**64-1 overflows)
    return v - (1 << 64) if v >> 63 else v


def _s32(v: int) -> int:
    v &= _MASK32
    return v - (1 << 32) if v >> 31 else v


def _view(data: Buffer) -> memoryview:
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1 or not mv.c_contiguous:
        mv = mv.cast("B")
    elif mv.format != "B":  # "b"/"c" too: items must read as 0..255
        mv = mv.cast("B")
    return mv


# Keys, values and header values of decoded records: read-only memoryviews of the input here;
# the compiled twin returns its lighter ByteView, which has memoryview's reading API.
ByteView = memoryview


def byte_view(data: Buffer, start: int, end: int) -> memoryview:
    """A read-only zero-copy view of data[start:end] that keeps `data` alive; 0 <= start <= end <= len."""
    mv = _view(data)
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(mv)):
        raise ValueError(f"byte_view needs integers 0 <= start <= end <= {len(mv)}, got {start!r}, {end!r}")
    return mv.toreadonly()[start:end]


# ------------------------------------------------------------------------------------ CRC32C
def _make_table() -> list[int]:
    table: list[int] = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _make_table()


def crc32c(data: Buffer, value: int = 0) -> int:
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
def read_varint(data: Buffer, pos: int) -> tuple[int, int]:
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


def read_varlong(data: Buffer, pos: int) -> tuple[int, int]:
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


def scan_batches(data: Buffer, start: int = 0, end: int = -1, verify_crc: bool = True) -> dict[str, Any]:
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
    rows: list[tuple[int, ...]] = []
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
    out: dict[str, Any] = {name: np.array([r[i] for r in rows], dtype=dt) for i, (name, dt) in enumerate(SCAN_FIELDS)}
    out["valid_bytes"] = pos
    return out


# ------------------------------------------------------------------------------------ records
class Record:
    """One decoded record. Keys and values are read-only memoryviews into the batch's bytes
    (the input buffer when uncompressed), or None. `timestamp` is None for "no timestamp".
    Pickles with bytes keys and values."""

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "is_tombstone",
                 "attributes")

    offset: int
    timestamp: int | None
    timestamp_type: int
    # read-only memoryviews from the decoders; what was given otherwise (bytes, once unpickled)
    key: Buffer | None
    value: Buffer | None
    headers: tuple[tuple[str, Buffer | None], ...]
    is_tombstone: bool
    attributes: int

    def __init__(self, offset: int, timestamp: int | None, timestamp_type: int, key: Buffer | None,
                 value: Buffer | None, headers: tuple[tuple[str, Buffer | None], ...], is_tombstone: bool,
                 attributes: int) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.is_tombstone = is_tombstone
        self.attributes = attributes

    def _astuple(self) -> tuple[Any, ...]:
        return (self.offset, self.timestamp, self.timestamp_type,
                None if self.key is None else bytes(self.key),
                None if self.value is None else bytes(self.value),
                tuple((k, None if v is None else bytes(v)) for k, v in self.headers),
                self.is_tombstone, self.attributes)

    def __reduce__(self) -> tuple[type[Record], tuple[Any, ...]]:
        # keys and values travel as bytes: views cannot leave their buffer
        return Record, self._astuple()

    def __eq__(self, other: object) -> bool:
        if not hasattr(other, "_astuple"):
            return NotImplemented
        equal: bool = self._astuple() == other._astuple()
        return equal

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        return ("Record(offset={}, timestamp={}, timestamp_type={}, key={!r}, value={!r}, headers={!r}, "
                "is_tombstone={})").format(*self._astuple()[:7])


#: one record as _walk_records_v2 yields it: (attributes, timestampDelta, offsetDelta, key, value, headers)
_Walked = tuple[int, int, int, "memoryview | None", "memoryview | None", "list[tuple[memoryview, memoryview | None]]"]


def _walk_records_v2(buf: memoryview, start: int, end: int, count: int, base_offset: int) -> Iterator[_Walked]:
    """Yield (attributes, timestampDelta, offsetDelta, key, value, [(key, value), ...]) for each of
    exactly `count` v2 records in buf[start:end]; keys, values and header keys/values are read-only
    memoryviews (None for null). Checks each record's declared length, header counts, and that
    the section holds exactly `count` records, with Kafka's rules (kafka-format.md §1.3): the
    checks and error positions every record kernel (decode_records_v2, decode_columns_v2) shares.
    """
    if count < 0:
        raise_status(ST_BAD_COUNT, start, "count >= 0", count, base_offset)
    pos = start
    for done in range(count):
        if pos >= end:
            raise_status(ST_PREMATURE_EOF, pos, f"{count} records", done, base_offset)
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
        headers: list[tuple[memoryview, memoryview | None]] = []
        for _h in range(n_headers):
            klen_pos = pos
            klen, pos = _varint_in(buf, pos, rec_end, base_offset)
            if klen < 0:
                raise_status(ST_NEG_HEADER_KEY, klen_pos, "header key size >= 0", klen, base_offset)
            if klen > rec_end - pos:
                raise_status(ST_FIELD_PAST_END, pos, klen, rec_end - pos, base_offset)
            hkey = buf[pos:pos + klen].toreadonly()
            pos += klen
            hval, pos = _bytes_in(buf, pos, rec_end, base_offset)
            headers.append((hkey, hval))
        if pos != rec_end:
            raise_status(ST_RECORD_SIZE, rec_start, f"{length} bytes in record payload",
                         f"{length - (rec_end - pos)} bytes read", base_offset)
        yield attributes, ts_delta, off_delta, key, value, headers
    if pos != end:
        raise_status(ST_RECORDS_REMAINING, pos, f"{count} records ending at byte {pos}",
                     f"{end - pos} more bytes", base_offset)


def decode_records_v2(data: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
                      log_append_time: int | None, timestamp_type: int, extended: bool) -> list[Record]:
    """Decode exactly `count` v2 records from data[start:end] into a list of Record.

    offset = base_offset + offsetDelta; timestamp = base_timestamp + timestampDelta (Java wrapping
    arithmetic), or `log_append_time` for every record when it is not None (LogAppendTime batches).
    "No timestamp" becomes None: -1 when not `extended`, Long.MIN_VALUE when `extended`.
    Checks each record's declared length, header counts, and that the section holds exactly
    `count` records, with Kafka's rules (kafka-format.md §1.3).
    """
    buf = _view(data)
    no_ts = W.NO_TIMESTAMP_EXTENDED if extended else W.NO_TIMESTAMP
    lat: int | None = None
    if log_append_time is not None:
        lat = None if log_append_time == no_ts else log_append_time
    out: list[Record] = []
    ts: int | None
    for attributes, ts_delta, off_delta, key, value, headers in _walk_records_v2(buf, start, end, count,
                                                                                 base_offset):
        if log_append_time is not None:
            ts = lat
        else:
            ts = _s64(base_timestamp + ts_delta)
            if ts == no_ts:
                ts = None
        tomb = value is None or bool(attributes & W.RECORD_TOMBSTONE_FLAG_MASK)
        hdrs = tuple((bytes(hk).decode("utf-8", "replace"), hv) for hk, hv in headers)
        out.append(Record(_s64(base_offset + off_delta), ts, timestamp_type, key, value, hdrs, tomb, attributes))
    return out


# ------------------------------------------------------------------------------------ column decode
_COLUMN_ARGS = ("starts", "ends", "counts", "base_offsets", "base_timestamps", "max_timestamps", "attributes")
_COLUMN_DTYPES = (np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int16)


def _column_arrays(starts: npt.ArrayLike, ends: npt.ArrayLike, counts: npt.ArrayLike, base_offsets: npt.ArrayLike,
                   base_timestamps: npt.ArrayLike, max_timestamps: npt.ArrayLike,
                   attributes: npt.ArrayLike) -> list[npt.NDArray[Any]]:
    """The per-batch arguments of decode_columns_v2 as contiguous 1-D numpy arrays of their dtypes
    (numpy's conversion rules, so both backends accept and refuse the same inputs), one entry
    per batch in each, else ValueError."""
    arrs = [np.ascontiguousarray(x, dtype=dt) for x, dt in zip(
        (starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes), _COLUMN_DTYPES)]
    n = len(arrs[0]) if arrs[0].ndim == 1 else -1
    for a in arrs:  # a plain loop: this runs once per kernel call, lookups of one batch included
        if a.ndim != 1 or len(a) != n:
            raise ValueError("the batch arrays " + ", ".join(_COLUMN_ARGS) + " must be 1-D with one entry per "
                             "batch, not shapes " + " ".join(str(a.shape) for a in arrs))
    return arrs


def _crc_array(crcs: npt.ArrayLike | None, nb: int) -> npt.NDArray[np.int64] | None:
    """decode_columns_v2's optional stored CRCs as a contiguous int64 array of nb entries (-1: skip)."""
    if crcs is None:
        return None
    a = np.ascontiguousarray(crcs, dtype=np.int64)
    if a.ndim != 1 or len(a) != nb:
        raise ValueError(f"crcs must be 1-D with one entry per batch ({nb}), not shape {a.shape}")
    return a


def _offsets_of(lengths: Sequence[int]) -> npt.NDArray[np.int32]:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.array(lengths, dtype=np.int64), out=out[1:])
    return out.astype(np.int32)


class ColumnsJob:
    """decode_columns_v2 in three steps (the compiled core walks without the GIL in run(), so the
    walk can run on another thread while the memory is taken and given back on the caller's):
    ColumnsJob(...) takes decode_columns_v2's arguments; run() decodes (once, never raises);
    result() raises the decode's error or returns its dict."""

    def __init__(self, data: Buffer, starts: npt.ArrayLike, ends: npt.ArrayLike, counts: npt.ArrayLike,
                 base_offsets: npt.ArrayLike, base_timestamps: npt.ArrayLike, max_timestamps: npt.ArrayLike,
                 attributes: npt.ArrayLike, include_headers: bool = True, crcs: npt.ArrayLike | None = None,
                 keys: bool = True, values: bool = True) -> None:
        self._args: tuple[Any, ...] | None = (data, starts, ends, counts, base_offsets, base_timestamps,
                                              max_timestamps, attributes, include_headers, crcs, keys, values)
        self._out: dict[str, npt.NDArray[Any]] | None = None
        self._error: BaseException | None = None
        self._ran = False

    def run(self) -> None:
        if self._ran:
            raise RuntimeError("ColumnsJob.run() runs once")
        self._ran = True
        assert self._args is not None
        try:
            self._out = decode_columns_v2(*self._args)
        except Exception as e:  # noqa: BLE001 - result() raises it, on the caller's thread
            self._error = e
        self._args = None  # the caller's buffer is not needed any more

    def result(self) -> dict[str, npt.NDArray[Any]]:
        if not self._ran:
            raise RuntimeError("ColumnsJob.result() before run()")
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


def decode_columns_v2(data: Buffer, starts: npt.ArrayLike, ends: npt.ArrayLike, counts: npt.ArrayLike,
                      base_offsets: npt.ArrayLike, base_timestamps: npt.ArrayLike, max_timestamps: npt.ArrayLike,
                      attributes: npt.ArrayLike, include_headers: bool = True,
                      crcs: npt.ArrayLike | None = None, keys: bool = True,
                      values: bool = True) -> dict[str, npt.NDArray[Any]]:
    """Decode the v2 records of many batches into Arrow-layout column arrays (kbatch.columns.decode).

    data holds each batch's (decompressed) records section at [starts[i], ends[i]); counts,
    base_offsets, base_timestamps, max_timestamps, attributes are the batches' header fields
    (attributes bit 3: LogAppendTime, every record's timestamp is max_timestamps[i]; bit 7:
    isTimestampExtended, DESIGN.md decision 1). Returns a dict of numpy arrays, one row per record:
    offset int64, timestamp int64 (ms; 0 where null), timestamp_valid bool, timestamp_type int32,
    is_tombstone bool, batch_index int32 (the batch's index in the arguments), header_offsets int32
    (n + 1: each record's headers in the header arrays; all 0 without include_headers), and the
    Arrow binary layouts key_/value_/header_key_/header_value_ offsets (int32) + data (uint8) +
    valid (bool; header keys are never null), and stats (int64: null timestamps, the smallest and
    the largest timestamp (Long.MAX_VALUE / Long.MIN_VALUE when none), null keys, null values, null
    header values). Header keys are the raw bytes (UTF-8 is checked by the caller). Each batch is checked as decode_records_v2 checks it, in order; a section outside
    the buffer raises TruncatedDataError at its start. crcs (optional, one per batch, -1 = skip):
    the stored CRC of a batch whose section lies in `data` right after its 61-byte header; it is
    checked over data[starts[i] - 40:ends[i]] (attributes to the end, kafka-format.md §1.1) before
    the batch's records, CrcMismatchError at the batch's first byte (starts[i] - 61). keys / values
    False (a projection without them): their bytes are not copied: key_data / value_data empty,
    their offsets all 0; their validity and null counts are the records' as ever.
    """
    buf = _view(data)
    include_headers = bool(include_headers)
    copied = {"key": bool(keys), "value": bool(values), "header_key": True, "header_value": True}
    arrays = _column_arrays(starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes)
    crc_a = _crc_array(crcs, len(arrays[0]))
    crc_l = None if crc_a is None else crc_a.tolist()
    cols = [a.tolist() for a in arrays]
    offs: list[int] = []
    tss: list[int] = []
    tsv: list[bool] = []
    ttypes: list[int] = []
    tombs: list[bool] = []
    bidx: list[int] = []
    key_list: list[memoryview | None] = []
    value_list: list[memoryview | None] = []
    hcounts: list[int] = []
    hkeys: list[memoryview | None] = []
    hvals: list[memoryview | None] = []
    for i, (s, e, c, bo, bt, mt, a) in enumerate(zip(*cols)):
        if s < 0 or e > len(buf) or e < s:
            raise_status(ST_TRUNCATED, s, 1, 0, bo)
        if crc_l is not None and crc_l[i] >= 0:
            if s < W.RECORD_BATCH_OVERHEAD:
                raise_status(ST_TRUNCATED, s, 1, 0, bo)
            computed = crc32c(buf[s - (W.RECORDS_OFFSET - W.ATTRIBUTES_OFFSET):e])
            if computed != crc_l[i]:
                raise_status(ST_CRC, s - W.RECORDS_OFFSET, computed, crc_l[i], bo)
        extended = bool(a & W.TIMESTAMP_EXTENDED_FLAG_MASK)
        no_ts = W.NO_TIMESTAMP_EXTENDED if extended else W.NO_TIMESTAMP
        lat = bool(a & W.TIMESTAMP_TYPE_MASK)
        for attrs, ts_delta, off_delta, key, value, headers in _walk_records_v2(buf, s, e, c, bo):
            ts = mt if lat else _s64(bt + ts_delta)
            offs.append(_s64(bo + off_delta))
            tsv.append(ts != no_ts)
            tss.append(ts if ts != no_ts else 0)
            ttypes.append(1 if lat else 0)
            tombs.append(value is None or bool(attrs & W.RECORD_TOMBSTONE_FLAG_MASK))
            bidx.append(i)
            key_list.append(key)
            value_list.append(value)
            hcounts.append(len(headers) if include_headers else 0)
            if include_headers:
                for hk, hv in headers:
                    hkeys.append(hk)
                    hvals.append(hv)
    out: dict[str, npt.NDArray[Any]] = {
        "offset": np.array(offs, dtype=np.int64),
        "timestamp": np.array(tss, dtype=np.int64),
        "timestamp_valid": np.array(tsv, dtype=np.bool_),
        "timestamp_type": np.array(ttypes, dtype=np.int32),
        "is_tombstone": np.array(tombs, dtype=np.bool_),
        "batch_index": np.array(bidx, dtype=np.int32),
        "header_offsets": _offsets_of(hcounts),
    }
    for name, blobs in (("key", key_list), ("value", value_list), ("header_key", hkeys), ("header_value", hvals)):
        kept = blobs if copied[name] else [None] * len(blobs)
        out[name + "_offsets"] = _offsets_of([0 if b is None else len(b) for b in kept])
        out[name + "_data"] = np.frombuffer(b"".join(bytes(b) for b in kept if b is not None), dtype=np.uint8)
        if name != "header_key":
            out[name + "_valid"] = np.array([b is not None for b in blobs], dtype=np.bool_)
    stamps = [t for t, ok in zip(tss, tsv) if ok]
    out["stats"] = np.array([len(tss) - len(stamps), min(stamps, default=W.INT64_MAX), max(stamps, default=W.INT64_MIN),
                             key_list.count(None), value_list.count(None), hvals.count(None)], dtype=np.int64)
    return out


def find_timestamps_v2(data: Buffer, starts: npt.ArrayLike, ends: npt.ArrayLike, counts: npt.ArrayLike,
                       base_offsets: npt.ArrayLike, base_timestamps: npt.ArrayLike, max_timestamps: npt.ArrayLike,
                       attributes: npt.ArrayLike, target_batches: npt.ArrayLike, targets: npt.ArrayLike,
                       starting_offset: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For each target: the first record of batch target_batches[j] with a timestamp, an offset >=
    starting_offset and a timestamp >= targets[j] (kafka-format.md §5.4, one batch) -> two int64
    arrays (offsets, timestamps), offset -1 and timestamp -1 where that batch has none.

    The batch arrays are decode_columns_v2's; every batch given is walked and checked as
    decode_columns_v2 checks it, in order, before any answer (so callers pass only the batches
    they search), but keys, values and headers are skipped, not copied. LogAppendTime batches:
    every record's timestamp is max_timestamps[i]. target_batches must be in [0, batches).
    """
    buf = _view(data)
    cols = [a.tolist() for a in _column_arrays(starts, ends, counts, base_offsets, base_timestamps,
                                               max_timestamps, attributes)]
    tb = np.ascontiguousarray(target_batches, dtype=np.int64)
    tt = np.ascontiguousarray(targets, dtype=np.int64)
    start_off = operator.index(starting_offset)
    if not W.INT64_MIN <= start_off <= W.INT64_MAX:
        raise OverflowError(f"starting_offset out of int64 range: {start_off}")
    if tb.ndim != 1 or tt.ndim != 1 or len(tb) != len(tt):
        raise ValueError("target_batches and targets must be 1-D with one entry per target, not shapes "
                         f"{tb.shape} {tt.shape}")
    if len(tb) and (tb.min() < 0 or tb.max() >= len(cols[0])):
        raise ValueError(f"target_batches must be in [0, {len(cols[0])})")
    runs: list[tuple[list[int], list[int], list[int]]] = []  # per batch: (running max timestamps, offsets,
    # timestamps) where the running max rises
    for s, e, c, bo, bt, mt, a in zip(*cols):
        if s < 0 or e > len(buf) or e < s:
            raise_status(ST_TRUNCATED, s, 1, 0, bo)
        no_ts = W.NO_TIMESTAMP_EXTENDED if a & W.TIMESTAMP_EXTENDED_FLAG_MASK else W.NO_TIMESTAMP
        lat = bool(a & W.TIMESTAMP_TYPE_MASK)
        run: list[int] = []
        offs: list[int] = []
        stamps: list[int] = []
        for _attrs, ts_delta, off_delta, _k, _v, _h in _walk_records_v2(buf, s, e, c, bo):
            ts = mt if lat else _s64(bt + ts_delta)
            off = _s64(bo + off_delta)
            if ts != no_ts and off >= start_off and (not run or ts > run[-1]):
                run.append(ts)
                offs.append(off)
                stamps.append(ts)
        runs.append((run, offs, stamps))
    out_off = np.full(len(tt), -1, dtype=np.int64)
    out_ts = np.full(len(tt), W.NO_TIMESTAMP, dtype=np.int64)
    for j, (b, t) in enumerate(zip(tb.tolist(), tt.tolist())):
        run, offs, stamps = runs[b]
        k = bisect.bisect_left(run, t)
        if k < len(run):
            out_off[j], out_ts[j] = offs[k], stamps[k]
    return out_off, out_ts


def record_fields_v2(data: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int,
                     max_timestamp: int, attributes: int
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The fields LogValidator checks of each record of one v2 records section (data[start:end),
    `count` records, checked as decode_records_v2 checks them): (offsets, timestamps, key_valid),
    int64, int64 and bool arrays. A timestamp is base_timestamp + its delta (wrapping), or
    max_timestamp in a LogAppendTime batch (attributes bit 3); "no timestamp" stays the batch's
    sentinel (-1, or Long.MIN_VALUE with the extended bit). Keys, values and headers are checked,
    not copied."""
    buf = _view(data)
    start, end, count = operator.index(start), operator.index(end), operator.index(count)
    base_offset = _int64("base_offset", base_offset)
    base_timestamp, max_timestamp = _int64("base_timestamp", base_timestamp), _int64("max_timestamp", max_timestamp)
    lat = bool(operator.index(attributes) & W.TIMESTAMP_TYPE_MASK)
    if start < 0 or end > len(buf) or end < start:
        raise_status(ST_TRUNCATED, start, 1, 0, base_offset)
    offs: list[int] = []
    stamps: list[int] = []
    keys: list[bool] = []
    for _a, ts_delta, off_delta, key, _v, _h in _walk_records_v2(buf, start, end, count, base_offset):
        offs.append(_s64(base_offset + off_delta))
        stamps.append(max_timestamp if lat else _s64(base_timestamp + ts_delta))
        keys.append(key is not None)
    return (np.array(offs, dtype=np.int64), np.array(stamps, dtype=np.int64), np.array(keys, dtype=np.bool_))


def _varint_in(buf: memoryview, pos: int, limit: int, base_offset: int) -> tuple[int, int]:
    """read_varint bounded by `limit` (a record or section end) instead of the buffer end."""
    try:
        return read_varint(buf[:limit], pos)
    except Exception as e:  # noqa: BLE001 - re-located only
        raise e.at(base_offset=base_offset) if hasattr(e, "at") else e


def _varlong_in(buf: memoryview, pos: int, limit: int, base_offset: int) -> tuple[int, int]:
    try:
        return read_varlong(buf[:limit], pos)
    except Exception as e:  # noqa: BLE001
        raise e.at(base_offset=base_offset) if hasattr(e, "at") else e


def _bytes_in(buf: memoryview, pos: int, limit: int, base_offset: int) -> tuple[memoryview | None, int]:
    """A varint length then that many bytes; any negative length is null (Kafka's Utils.readBytes)."""
    n, pos = _varint_in(buf, pos, limit, base_offset)
    if n < 0:
        return None, pos
    if n > limit - pos:
        raise_status(ST_FIELD_PAST_END, pos, f"{n} bytes", f"{limit - pos} bytes left in record", base_offset)
    return buf[pos:pos + n].toreadonly(), pos + n


# ------------------------------------------------------------------------------------ timestamps
def check_timestamps(timestamps: npt.ArrayLike, now_ms: int, before_max_ms: int, after_max_ms: int,
                     no_timestamp: int | None) -> tuple[int, int, int]:
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


def timestamp_bounds(now_ms: int, before_max_ms: int, after_max_ms: int) -> tuple[int, int]:
    """[now - before, now + after], saturated to the int64 range."""
    lo = max(W.INT64_MIN, min(W.INT64_MAX, now_ms - before_max_ms))
    hi = max(W.INT64_MIN, min(W.INT64_MAX, now_ms + after_max_ms))
    return lo, hi


# ------------------------------------------------------------------------------------ index search
_KEY_FORMATS = {0: ">i", 1: ">q"}  # 0: offset index (int32 relative offset), 1: time index (int64)


def index_search(data: Buffer, entry_size: int, key_kind: Literal[0, 1], target: int, n_entries: int) -> int:
    """Slot of the largest entry whose key <= target in a sorted index, or -1 when none.

    key_kind 0 = `.index` (key: int32 relative offset), 1 = `.timeindex` (key: int64 timestamp).
    Entries are big-endian; the key is at the start of each entry.
    """
    buf = _view(data)
    fmt = _KEY_FORMATS[key_kind]
    if n_entries * entry_size > len(buf):
        raise_status(ST_TRUNCATED, len(buf), n_entries * entry_size, len(buf))
    lo, hi = 0, n_entries - 1
    first: int = struct.unpack_from(fmt, buf, 0)[0] if n_entries else 0
    if n_entries == 0 or first > target:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if struct.unpack_from(fmt, buf, mid * entry_size)[0] <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def index_search_many(data: Buffer, entry_size: int, key_kind: Literal[0, 1], targets: Iterable[int] | npt.ArrayLike,
                      n_entries: int) -> npt.NDArray[np.int64]:
    """index_search for each of many targets (any order); returns an int64 numpy array."""
    t = np.asarray(targets, dtype=np.int64)
    return np.array([index_search(data, entry_size, key_kind, int(x), n_entries) for x in t.tolist()],
                    dtype=np.int64)


# ------------------------------------------------------------------------------------ record encoding
from .errors import InvalidOffsetError, InvalidRecordError  # noqa: E402 (kernels appended below)


def _blob(v: Buffer | None) -> bytes | None:
    """Any bytes-like object's bytes (never bytes(int)), or None."""
    return None if v is None else bytes(memoryview(v))


def _int64(name: str, v: int) -> int:
    v = operator.index(v)
    if not W.INT64_MIN <= v <= W.INT64_MAX:
        raise OverflowError(f"{name} out of int64 range: {v}")
    return v


def _put_varint(out: bytearray, n: int) -> None:
    """Append the zigzag varint of `n` (int64 range), minimal, as Kafka writes it."""
    u = ((n << 1) ^ (n >> 63)) & _MASK64
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


_Blob = bytes | memoryview | None  # a key, value or header value as the encoders hold it


def _put_record(out: bytearray, body: bytearray, tombstone: bool, ts_delta: int, offset_delta: int, key: _Blob,
                value: _Blob, headers: Sequence[tuple[bytes | memoryview, _Blob]]) -> None:
    """One v2 record onto `out` as DefaultRecord.writeTo lays it out: its length, then attributes,
    deltas, key, value and headers (`body` is scratch space, reused between calls)."""
    del body[:]
    body.append(W.RECORD_TOMBSTONE_FLAG_MASK if tombstone else 0)
    _put_varint(body, ts_delta)
    _put_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            body.append(1)  # varint -1
        else:
            _put_varint(body, len(blob))
            body += blob
    _put_varint(body, len(headers))
    for hk, hv in headers:
        _put_varint(body, len(hk))
        body += hk
        if hv is None:
            body.append(1)
        else:
            _put_varint(body, len(hv))
            body += hv
    _put_varint(out, len(body))
    out += body


def encode_records_v2(records: Iterable[RecordTuple], base_offset: int, last_offset: int | None,
                      base_timestamp: int | None, extended: bool) -> tuple[bytes, int, int, int, int | None]:
    """Encode magic 2 records as Kafka's DefaultRecord.writeTo lays them out (the records section).

    Each record is a tuple of BatchBuilder.append's arguments: (timestamp, key, value[, headers
    [, tombstone[, offset]]]), with append's rules and errors: timestamp None = "no timestamp"
    (-1, or Long.MIN_VALUE when `extended`, which then may not be passed as a number); tombstone
    None = "value is None", True sets record attribute bit 5 (DESIGN.md decision 2), False with a
    null value is refused; offset None = the previous offset + 1 (the first: base_offset); offsets
    increase, are >= base_offset, within base_offset + Int32.MAX and in the int64 range.
    `last_offset` is the offset before these records (None: there is none); `base_timestamp`
    None = the first record's timestamp; the three are int64. Returns (section, count,
    base_timestamp, max_timestamp, last_offset); max_timestamp starts at "no timestamp" and rises
    only on a strictly greater timestamp, as Kafka's builder does. When any record is refused,
    nothing is returned.
    """
    base_offset = _int64("base_offset", base_offset)
    last_offset = None if last_offset is None else _int64("last_offset", last_offset)
    base_timestamp = None if base_timestamp is None else _int64("base_timestamp", base_timestamp)
    no_ts = W.NO_TIMESTAMP_EXTENDED if extended else W.NO_TIMESTAMP
    out = bytearray()
    body = bytearray()
    max_ts = no_ts
    count = 0
    for rec in records:
        n = len(rec)
        if not 3 <= n <= 6:
            raise TypeError(f"a record is (timestamp, key, value[, headers[, tombstone[, offset]]]), not {n} values")
        timestamp, key, value = rec[0], rec[1], rec[2]
        headers: Headers = rec[3] if n > 3 else ()  # type: ignore[misc]  # a 4+-tuple's 4th item
        tombstone: bool | None = rec[4] if n > 4 else None  # type: ignore[misc]
        offset: int | None = rec[5] if n > 5 else None  # type: ignore[misc]
        if offset is None:
            offset = base_offset if last_offset is None else last_offset + 1
        else:
            offset = operator.index(offset)
            if last_offset is not None and offset <= last_offset:
                raise InvalidOffsetError("Illegal offset, offsets must increase", expected=f"> {last_offset}",
                                         found=offset)
        if offset < base_offset:
            raise InvalidOffsetError("Illegal offset, below the base offset", expected=f">= {base_offset}",
                                     found=offset)
        if offset > W.INT64_MAX:
            raise InvalidOffsetError("Illegal offset, beyond the int64 range", expected=f"<= {W.INT64_MAX}",
                                     found=offset)
        if offset - base_offset > W.INT32_MAX:
            raise InvalidOffsetError("Offset delta does not fit in an int32", expected=f"<= {W.INT32_MAX}",
                                     found=offset - base_offset)
        if timestamp is None:
            ts = no_ts
        else:
            ts = int(timestamp)
            if not W.INT64_MIN <= ts <= W.INT64_MAX:
                raise OverflowError(f"timestamp out of int64 range: {ts}")
            if extended and ts == W.NO_TIMESTAMP_EXTENDED:
                raise ValueError("Long.MIN_VALUE is the 'no timestamp' value of an extended batch; pass None")
        if tombstone is False and value is None:
            raise InvalidRecordError("A record with a null value must be a tombstone (KIP-87)",
                                     expected="a value, or tombstone=True/None", found="null value, tombstone=False")
        hdrs: list[tuple[bytes, bytes | None]] = []
        for hk, hv in headers or ():
            if hk is None:
                raise InvalidRecordError("Null header keys are not permitted", expected="str", found=None)
            hdrs.append((hk.encode("utf-8") if isinstance(hk, str) else bytes(memoryview(hk)), _blob(hv)))
        key_bytes, value_bytes = _blob(key), _blob(value)
        if base_timestamp is None:
            base_timestamp = ts
        if ts > max_ts:
            max_ts = ts
        _put_record(out, body, value is None if tombstone is None else tombstone,
                    _s64(ts - base_timestamp),  # Java long arithmetic: the delta wraps
                    offset - base_offset, key_bytes, value_bytes, hdrs)
        last_offset = offset
        count += 1
    return bytes(out), count, no_ts if base_timestamp is None else base_timestamp, max_ts, last_offset


class RecordsEncoderV2:
    """encode_records_v2 a record (append) or a list (extend) at a time, keeping the state between
    calls: what BatchBuilder writes magic 2 records with.

    base_timestamp stays None until the first record (unless given); last_offset is None until
    then (unless given); max_timestamp starts at "no timestamp". A refused record, or a refused
    list, leaves the encoder as it was. section() is every record so far, encoded.
    """

    def __init__(self, base_offset: int, last_offset: int | None = None, base_timestamp: int | None = None,
                 extended: bool = False) -> None:
        self.base_offset = _int64("base_offset", base_offset)
        self.last_offset = None if last_offset is None else _int64("last_offset", last_offset)
        self.base_timestamp = None if base_timestamp is None else _int64("base_timestamp", base_timestamp)
        self.extended = bool(extended)
        self.max_timestamp = W.NO_TIMESTAMP_EXTENDED if self.extended else W.NO_TIMESTAMP
        self.count = 0
        self._parts: list[bytes] = []

    def append(self, timestamp: int | None, key: Buffer | None, value: Buffer | None, headers: Headers = (),
               tombstone: bool | None = None, offset: int | None = None) -> int:
        """Encode one record (BatchBuilder.append's arguments); returns its offset."""
        self.extend(((timestamp, key, value, headers, tombstone, offset),))
        assert self.last_offset is not None  # the record's
        return self.last_offset

    def extend(self, records: Iterable[RecordTuple]) -> None:
        section, n, base_ts, max_ts, last = encode_records_v2(records, self.base_offset, self.last_offset,
                                                              self.base_timestamp, self.extended)
        if n:
            self._parts.append(section)
            self.count += n
            self.base_timestamp = base_ts
            self.last_offset = last
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts

    def section(self) -> bytes:
        return b"".join(self._parts)


# ------------------------------------------------------------------------------------ column encode
# ColumnsEncoderV2: Arrow columns -> magic 2 batches, the inverse of decode_columns_v2. The
# compiled twin (_encode_kernel.pxi) reads the same Arrow buffers with no Python object per row.
from .errors import InvalidRequestError, RecordTooLargeError  # noqa: E402

# what went wrong with a row; both backends raise through _raise_encode
EC_NULL_VALUE = 1         # a null value whose isTombstone is false
EC_NULL_HEADER_KEY = 2    # a header with a null key
EC_NULL_HEADER = 3        # a null element in a headers list
EC_NO_TIMESTAMP = 4       # Long.MIN_VALUE given as a timestamp of an extended batch
EC_NULL_OFFSET = 5        # a null in the offset column
EC_OFFSET_ORDER = 6       # an offset not above the one before (a: previous, b: found)
EC_RECORD_TOO_LARGE = 7   # a record that does not fit a batch alone (a: batch bytes, b: the limit)
EC_BAD_ARRAY = 8          # Arrow buffers that contradict themselves (a: column code, b: element)
EC_OFFSET_RANGE = 9       # the next offset would pass Long.MAX_VALUE

# column codes for EC_BAD_ARRAY
ENCODE_COLUMNS = ("key", "value", "timestamp", "isTombstone", "headers", "headers.key", "headers.value", "offset")


def _raise_encode(code: int, row: int, a: int = 0, b: int = 0) -> NoReturn:
    """The exception for an encoder error code at table row `row`. Never returns."""
    if code == EC_NULL_VALUE:
        raise InvalidRecordError("A record with a null value must be a tombstone (KIP-87)",
                                 expected="a value, or isTombstone true or null", found="null value, isTombstone false",
                                 row=row)
    if code == EC_NULL_HEADER_KEY:
        raise InvalidRecordError("Null header keys are not permitted", expected="a header key", found="null", row=row)
    if code == EC_NULL_HEADER:
        raise InvalidRecordError("Null headers are not permitted", expected="a (key, value) struct", found="null",
                                 row=row)
    if code == EC_NO_TIMESTAMP:
        raise InvalidRecordError("Long.MIN_VALUE is the 'no timestamp' value of an extended batch",
                                 expected="a null timestamp for 'no timestamp'", found=W.INT64_MIN, row=row)
    if code == EC_NULL_OFFSET:
        raise InvalidOffsetError("Null offset", expected="an offset", found="null", row=row)
    if code == EC_OFFSET_ORDER:
        raise InvalidOffsetError("Illegal offset, offsets must increase", expected=f"> {a}", found=b, row=row)
    if code == EC_RECORD_TOO_LARGE:
        raise RecordTooLargeError("The record does not fit in a batch of max_batch_bytes",
                                  expected=f"a batch <= {b} bytes", found=f"{a} bytes", row=row)
    if code == EC_OFFSET_RANGE:
        raise InvalidOffsetError("Illegal offset, beyond the int64 range", expected=f"<= {W.INT64_MAX}",
                                 found=W.INT64_MAX + 1, row=row)
    if code == EC_BAD_ARRAY:
        raise InvalidRequestError(f"Malformed Arrow column {ENCODE_COLUMNS[a]!r}",
                                  expected="offsets that rise within the data buffer and buffers covering every "
                                           "element", found=f"element {b}", row=row)
    raise InvalidRequestError(f"Unknown encoder error {code}", row=row)


def _bit(bitmap: npt.NDArray[np.uint8], i: int) -> bool:
    return bool(bitmap[i >> 3] >> (i & 7) & 1)


class _Col:
    """One Arrow array as the encoder reads it (see ColumnsEncoderV2.encode): element i is at
    `origin + i` of the buffers; None validity = no nulls."""

    __slots__ = ("offsets", "data", "valid", "origin", "length", "code")

    def __init__(self, spec: _BinaryColumn | _ValueColumn, binary: bool, length: int, code: int, row: int) -> None:
        self.offsets: npt.NDArray[Any] | None
        self.data: npt.NDArray[Any]
        if binary:
            offsets, data, valid, origin, length = spec  # type: ignore[misc]  # a _BinaryColumn when binary
            self.offsets = np.ascontiguousarray(offsets)
            self.data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
            if self.offsets.dtype not in (np.int32, np.int64) or self.offsets.ndim != 1:
                raise TypeError(f"the offsets of {ENCODE_COLUMNS[code]} must be a 1-D int32 or int64 array")
        else:
            data, valid, origin = spec  # type: ignore[misc]  # a _ValueColumn otherwise
            self.offsets = None
            self.data = np.ascontiguousarray(data, dtype=np.uint8 if code in (3, 4) else np.int64).reshape(-1)
        self.valid = None if valid is None else np.ascontiguousarray(valid, dtype=np.uint8).reshape(-1)
        self.origin = operator.index(origin)
        self.length = operator.index(length)
        self.code = code
        end = self.origin + self.length
        if self.origin < 0 or self.length < 0:
            _raise_encode(EC_BAD_ARRAY, row, code, 0)
        if self.valid is not None and len(self.valid) * 8 < end:
            _raise_encode(EC_BAD_ARRAY, row, code, self.length)
        if binary and self.offsets is not None and len(self.offsets) < end + 1:
            _raise_encode(EC_BAD_ARRAY, row, code, self.length)
        if not binary and len(self.data) * (8 if code == 3 else 1) < end:  # 3: isTombstone, a bitmap
            _raise_encode(EC_BAD_ARRAY, row, code, self.length)

    def null(self, i: int) -> bool:
        return self.valid is not None and not _bit(self.valid, self.origin + i)

    def blob(self, i: int, row: int) -> bytes | None:
        """Element i's bytes, or None when null."""
        if self.null(i):
            return None
        assert self.offsets is not None  # a binary column's
        lo, hi = int(self.offsets[self.origin + i]), int(self.offsets[self.origin + i + 1])
        if not 0 <= lo <= hi <= len(self.data):
            _raise_encode(EC_BAD_ARRAY, row, self.code, i)
        return self.data[lo:hi].tobytes()


#: encode_setup's answer: (n, divisor, key, value, timestamp, tombstone, offset, headers list, headers
#: struct, header keys, header values)
_Setup = tuple[int, int, "_Col | None", "_Col | None", "_Col | None", "_Col | None", "_Col | None", "_Col | None",
               "_Col | None", "_Col | None", "_Col | None"]


def encode_setup(n: int, ts_divisor: int, key: _BinaryColumn | None, value: _BinaryColumn | None,
                 timestamp: _ValueColumn | None, tombstone: _ValueColumn | None, headers: _HeadersColumn | None,
                 offset: _ValueColumn | None, row0: int) -> _Setup:
    """ColumnsEncoderV2.encode's arguments checked and read as _Col objects, in the order both
    backends check them: (n, divisor, key, value, timestamp, tombstone, offset, headers list,
    headers struct, header keys, header values); None for an absent column."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    div = operator.index(ts_divisor)
    if div not in (1, 1000, 1000000):
        raise ValueError(f"ts_divisor must be 1, 1000 or 1000000, not {div}")
    kc = None if key is None else _Col(key, True, n, 0, row0)
    vc = None if value is None else _Col(value, True, n, 1, row0)
    tc = None if timestamp is None else _Col(timestamp, False, n, 2, row0)
    bc = None if tombstone is None else _Col(tombstone, False, n, 3, row0)
    oc = None if offset is None else _Col(offset, False, n, 7, row0)
    hl = hs = hk = hv = None
    if headers is not None:
        lo_, lvalid, lorigin, svalid, sorigin, slength, hkey, hval = headers
        hl = _Col((lo_, np.zeros(0, np.uint8), lvalid, lorigin, n), True, n, 4, row0)
        hs = _Col((np.zeros(0, np.uint8), svalid, sorigin), False, 0, 4, row0)  # validity only
        hs.length = operator.index(slength)
        if hs.length < 0 or (hs.valid is not None and len(hs.valid) * 8 < hs.origin + hs.length):
            _raise_encode(EC_BAD_ARRAY, row0, 4, hs.length)
        # None: every header key (value) null, as the compiled twin reads it
        hk = None if hkey is None else _Col(hkey, True, hs.length, 5, row0)
        hv = None if hval is None else _Col(hval, True, hs.length, 6, row0)
    return n, div, kc, vc, tc, bc, oc, hl, hs, hk, hv


class ColumnsEncoderV2:
    """Arrow columns -> magic 2 record batches (the inverse of decode_columns_v2), row by row in
    order, batch after batch; what kbatch.encode_columns runs on.

    ColumnsEncoderV2(base_offset, attributes, records_per_batch, max_batch_bytes, producer_id,
    producer_epoch, base_sequence, partition_leader_epoch, log_append_time):
      attributes: the batches' attributes (codec bits 0-2, timestamp type bit 3, transactional
        bit 4, isTimestampExtended bit 7; DESIGN.md decision 1); with codec 0 the batches come
        out finished (CRC filled in); with a codec the records section is left plain, batchLength
        counts it and the CRC is 0: the caller compresses each section, then sets both.
      records_per_batch, max_batch_bytes: a batch closes before the row that would make it hold
        more records, or more bytes (61-byte header + records), than these; a row that cannot fit
        in a batch alone raises RecordTooLargeError. A batch also closes before an offset delta
        beyond Int32.MAX.
      base_sequence: the first batch's; each next batch's is the previous + its record count,
        wrapping past Int32.MAX to 0 as Kafka's producer does (NO_SEQUENCE stays -1).
      log_append_time: maxTimestamp of LogAppendTime batches (bit 3), required with it.

    encode(n, key, value, timestamp, ts_divisor, tombstone, headers, offset) -> (data, ends)
    encodes n rows; data holds every batch closed by them (whole batches), ends[k] the end of
    batch k in data (int64). The last batch stays open for the next call; flush() closes it and
    returns it the same way. Byte for byte what BatchBuilder writes for the same records
    (append(timestamp, key, value, headers, tombstone, offset) per row, one builder per batch).

    Columns (Arrow buffers as numpy arrays; element i of an array is at `origin + i`; validity is
    Arrow's bitmap, LSB first, None when the array has no nulls; None for a whole column: every
    row null):
      key, value: (offsets int32|int64, data uint8, validity, origin, length) (binary/string)
      timestamp: (values int64, validity, origin): a row's timestamp is floor(value / ts_divisor)
        ms (1 for ms, 1000 for us, 1000000 for ns); null = "no timestamp" (-1, or Long.MIN_VALUE
        with bit 7, which then may not be given as a value)
      tombstone: (values bitmap uint8, validity, origin): true sets record attribute bit 5
        (KIP-87: a tombstone may keep its value); null = "the value is null"; false with a null
        value is refused (DESIGN.md decision 2)
      headers: (list_offsets int32|int64, list_validity, list_origin, struct_validity,
        struct_origin, struct_length, key, value): row i's headers are the struct elements
        list_offsets[list_origin+i] .. list_offsets[list_origin+i+1]; key and value are binary
        columns as above over the struct's elements (their origin already includes the
        struct's); null or empty list = no headers; a null element or key is refused
      offset: (values int64, validity, origin): each row's offset; offsets must increase. None:
        the previous row's + 1, base_offset for the first.
    A refused row leaves the encoder as it was before the call; errors name the row (counted
    over every call) and are the same on both backends.
    """

    def __init__(self, base_offset: int, attributes: int, records_per_batch: int, max_batch_bytes: int,
                 producer_id: int = W.NO_PRODUCER_ID, producer_epoch: int = W.NO_PRODUCER_EPOCH,
                 base_sequence: int = W.NO_SEQUENCE, partition_leader_epoch: int = W.NO_PARTITION_LEADER_EPOCH,
                 log_append_time: int | None = None) -> None:
        self.base_offset = _int64("base_offset", base_offset)
        self.attributes = _ranged("attributes", attributes, 0, 0x7FFF)
        self.records_per_batch = _ranged("records_per_batch", records_per_batch, 1, W.INT32_MAX)
        self.max_batch_bytes = _ranged("max_batch_bytes", max_batch_bytes, W.RECORD_BATCH_OVERHEAD + 7,
                                       W.INT32_MAX)
        self.producer_id = _int64("producer_id", producer_id)
        self.producer_epoch = _ranged("producer_epoch", producer_epoch, -(2**15), 2**15 - 1)
        self.base_sequence = _ranged("base_sequence", base_sequence, W.INT32_MIN, W.INT32_MAX)
        self.partition_leader_epoch = _ranged("partition_leader_epoch", partition_leader_epoch, W.INT32_MIN,
                                              W.INT32_MAX)
        lat = bool(self.attributes & W.TIMESTAMP_TYPE_MASK)
        if lat and log_append_time is None:
            raise ValueError("a LogAppendTime batch (attributes bit 3) needs log_append_time")
        self.log_append_time = None if log_append_time is None else _int64("log_append_time", log_append_time)
        self.extended = bool(self.attributes & W.TIMESTAMP_EXTENDED_FLAG_MASK)
        self.no_timestamp = W.NO_TIMESTAMP_EXTENDED if self.extended else W.NO_TIMESTAMP
        self.rows = 0                   # rows encoded, over every call
        self.last_offset: int | None = None  # the offset of the last row encoded
        self.sequence = self.base_sequence  # the open (or next) batch's base sequence
        self._section = bytearray()     # the open batch's records
        self._count = 0
        # the open batch's base offset, base timestamp, max timestamp, last offset (0 while none is open)
        self._base_off = self._base_ts = self._max_ts = self._last = 0

    def _state(self) -> tuple[int, int | None, int, bytes, int, int, int, int, int]:
        return (self.rows, self.last_offset, self.sequence, bytes(self._section), self._count, self._base_off,
                self._base_ts, self._max_ts, self._last)

    def _restore(self, s: tuple[int, int | None, int, bytes, int, int, int, int, int]) -> None:
        (self.rows, self.last_offset, self.sequence, section, self._count, self._base_off, self._base_ts,
         self._max_ts, self._last) = s
        self._section = bytearray(section)

    def encode(self, n: int, key: _BinaryColumn | None, value: _BinaryColumn | None, timestamp: _ValueColumn | None,
               ts_divisor: int, tombstone: _ValueColumn | None, headers: _HeadersColumn | None,
               offset: _ValueColumn | None, final: bool = False) -> tuple[bytes, npt.NDArray[np.int64]]:
        cols = encode_setup(n, ts_divisor, key, value, timestamp, tombstone, headers, offset, self.rows)
        saved = self._state()
        try:
            return self._encode(*cols, bool(final))
        except BaseException:
            self._restore(saved)
            raise

    def _encode(self, n: int, div: int, kc: _Col | None, vc: _Col | None, tc: _Col | None, bc: _Col | None,
                oc: _Col | None, hl: _Col | None, hs: _Col | None, hk: _Col | None, hv: _Col | None,
                final: bool) -> tuple[bytes, npt.NDArray[np.int64]]:
        row0 = self.rows
        out = bytearray()
        ends: list[int] = []
        for i in range(n):
            row = row0 + i
            k = None if kc is None else kc.blob(i, row)
            v = None if vc is None else vc.blob(i, row)
            if tc is None or tc.null(i):
                ts = self.no_timestamp
            else:
                ts = int(tc.data[tc.origin + i]) // div
                if self.extended and ts == W.NO_TIMESTAMP_EXTENDED:
                    _raise_encode(EC_NO_TIMESTAMP, row)
            if bc is None or bc.null(i):
                tomb = v is None
            else:
                tomb = _bit(bc.data, bc.origin + i)
                if not tomb and v is None:
                    _raise_encode(EC_NULL_VALUE, row)
            hdrs: list[tuple[bytes, bytes | None]] = []
            if hl is not None and not hl.null(i):
                assert hl.offsets is not None and hs is not None  # encode_setup makes them together
                a, b = int(hl.offsets[hl.origin + i]), int(hl.offsets[hl.origin + i + 1])
                if not 0 <= a <= b <= hs.length:
                    _raise_encode(EC_BAD_ARRAY, row, 4, i)
                for j in range(a, b):
                    if hs.valid is not None and not _bit(hs.valid, hs.origin + j):
                        _raise_encode(EC_NULL_HEADER, row)
                    hkey = None if hk is None else hk.blob(j, row)
                    if hkey is None:
                        _raise_encode(EC_NULL_HEADER_KEY, row)
                    hdrs.append((hkey, None if hv is None else hv.blob(j, row)))
            if oc is not None:
                if oc.null(i):
                    _raise_encode(EC_NULL_OFFSET, row)
                off = int(oc.data[oc.origin + i])
                if self.last_offset is not None and off <= self.last_offset:
                    _raise_encode(EC_OFFSET_ORDER, row, self.last_offset, off)
            elif self.last_offset is None:
                off = self.base_offset
            elif self.last_offset == W.INT64_MAX:
                _raise_encode(EC_OFFSET_RANGE, row)
            else:
                off = self.last_offset + 1
            self._add(out, ends, row, ts, k, v, hdrs, tomb, off)
        self.rows = row0 + n
        if final and self._count:
            self._close(out, ends)
        return bytes(out), np.array(ends, dtype=np.int64)

    def _add(self, out: bytearray, ends: list[int], row: int, ts: int, k: bytes | None, v: bytes | None,
             hdrs: list[tuple[bytes, bytes | None]], tomb: bool, off: int) -> None:
        """Put one record in the open batch, closing it first when the record does not belong."""
        if self._count and (self._count >= self.records_per_batch or off - self._base_off > W.INT32_MAX):
            self._close(out, ends)
        base_ts = ts if not self._count else self._base_ts
        base_off = off if not self._count else self._base_off
        rec = bytearray()
        _put_record(rec, bytearray(), tomb, _s64(ts - base_ts), off - base_off, k, v, hdrs)
        if W.RECORD_BATCH_OVERHEAD + len(self._section) + len(rec) > self.max_batch_bytes:
            if not self._count:
                _raise_encode(EC_RECORD_TOO_LARGE, row, W.RECORD_BATCH_OVERHEAD + len(rec), self.max_batch_bytes)
            self._close(out, ends)
            self._add(out, ends, row, ts, k, v, hdrs, tomb, off)  # deltas from the new batch's base
            return
        if not self._count:
            self._base_off, self._base_ts, self._max_ts = off, ts, self.no_timestamp
        self._section += rec
        self._count += 1
        if ts > self._max_ts:
            self._max_ts = ts
        self._last = off
        self.last_offset = off

    def _close(self, out: bytearray, ends: list[int]) -> None:
        lat = bool(self.attributes & W.TIMESTAMP_TYPE_MASK)
        header = bytearray(_V2_HEADER.pack(
            self._base_off, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(self._section),
            self.partition_leader_epoch, 2, 0, self.attributes, self._last - self._base_off, self._base_ts,
            self.log_append_time if lat else self._max_ts, self.producer_id, self.producer_epoch, self.sequence,
            self._count))
        if not self.attributes & W.COMPRESSION_CODEC_MASK:
            struct.pack_into(">I", header, W.CRC_OFFSET, crc32c(self._section, crc32c(header[W.ATTRIBUTES_OFFSET:])))
        out += header
        out += self._section
        ends.append(len(out))
        if self.sequence >= 0:
            self.sequence = W.increment_sequence(self.sequence, self._count)
        self._section = bytearray()
        self._count = 0

    def flush(self) -> tuple[bytes, npt.NDArray[np.int64]]:
        """Close the open batch: (data, ends) as encode returns them (empty when none is open)."""
        out = bytearray()
        ends: list[int] = []
        if self._count:
            self._close(out, ends)
        return bytes(out), np.array(ends, dtype=np.int64)

    @property
    def pending(self) -> int:
        """Rows in the open batch."""
        return self._count


def _ranged(name: str, v: int, lo: int, hi: int) -> int:
    v = operator.index(v)
    if not lo <= v <= hi:
        raise OverflowError(f"{name} must be in [{lo}, {hi}], not {v}")
    return v


# ------------------------------------------------------------------------------------ key partitioner
def _murmur2_one(data: bytes) -> int:
    """Kafka's Utils.murmur2 (int32 arithmetic), the hash of its default key partitioner."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & _MASK32
    for i in range(0, length - length % 4, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & _MASK32
        k ^= k >> 24
        k = (k * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k
    tail, rest = length - length % 4, length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return _s32(h)


def murmur2(keys: _BinaryColumn) -> npt.NDArray[np.int32]:
    """Kafka's murmur2 of every element of a binary column (offsets, data, validity, origin, length;
    see ColumnsEncoderV2) -> int32 array; 0 where the element is null (the caller decides where
    null keys go: Kafka's partitioner does not hash them)."""
    c = _Col(keys, True, keys[4], 0, 0)
    out = np.zeros(c.length, dtype=np.int32)
    for i in range(c.length):
        blob = c.blob(i, i)
        if blob is not None:
            out[i] = _murmur2_one(blob)
    return out


# ------------------------------------------------------------------------------------ compaction key map
# OffsetMap: the log cleaner's key -> latest offset map, bounded like Kafka's SkimpyOffsetMap (a
# fixed memory budget of 24-byte entries: a 16-byte key digest and an offset; full at
# slots * load factor entries, when the cleaner stops mapping and cleans what it has mapped).
# The compiled twin keeps the entries in an open-addressing table in C; this one in a dict of
# the same digests, so both agree on every answer, on the size and on when the map is full.
import hashlib  # noqa: E402

from . import errors as _errors_mod  # noqa: E402


def md5(data: Buffer) -> bytes:
    """MD5 of a buffer (the digest long keys are kept by; the compiled twin has its own in C)."""
    return hashlib.md5(_view(data)).digest()


def key_digest(key: Buffer) -> bytes:
    """The 16 bytes an OffsetMap keeps for a key: a key of up to 15 bytes as itself after a byte
    holding its length + 1 (no two such keys share a digest); a longer key as its MD5 (Kafka's
    digest) with the first byte's top bit set, so the two kinds never meet."""
    b = bytes(key)
    if len(b) < 16:
        return bytes((len(b) + 1,)) + b + bytes(15 - len(b))
    d = bytearray(hashlib.md5(b).digest())
    d[0] |= 0x80
    return bytes(d)


class OffsetMap:
    """Key -> latest offset for the log cleaner, memory-bounded as Kafka's SkimpyOffsetMap.

    memory: bytes of entries (Kafka's log.cleaner.dedupe.buffer.size for one cleaner thread);
    slots = memory // 24; the cleaner maps keys while size < capacity = int(slots * load_factor)
    (log.cleaner.io.buffer.load.factor) and cleans what it mapped when the map is full. put()
    refuses a new key only when every slot is taken (SkimpyOffsetMap.put's requirement).
    """

    def __init__(self, memory: int = W.DEFAULT_DEDUPE_BUFFER_SIZE,
                 load_factor: float = W.DEFAULT_DEDUPE_LOAD_FACTOR) -> None:
        memory = operator.index(memory)
        load_factor = float(load_factor)
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load_factor must be in (0, 1], not {load_factor}")
        slots = max(0, memory) // W.OFFSET_MAP_ENTRY_SIZE
        if int(slots * load_factor) < 1:
            raise _errors_mod.InvalidConfigurationError(
                "The offset map is too small to hold even one key (Kafka: increase log.cleaner.dedupe.buffer.size "
                "or decrease log.cleaner.threads)", expected=f"at least {W.OFFSET_MAP_ENTRY_SIZE} bytes at this load "
                f"factor", found=f"{memory} bytes")
        self.memory = memory
        self.load_factor = load_factor
        self.slots = slots
        self.capacity = int(slots * load_factor)
        self._map: dict[bytes, int] = {}  # key digest -> latest offset
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        """No more keys are mapped in this round (size >= capacity)."""
        return len(self._map) >= self.capacity

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def put(self, key: Buffer, offset: int) -> None:
        d = key_digest(key)
        if d not in self._map and len(self._map) >= self.slots:
            raise OverflowError("Attempt to add a new entry to a full offset map")
        self._map[d] = _int64("offset", offset)

    def get(self, key: Buffer) -> int:
        """The latest offset for `key`, or -1."""
        return self._map.get(key_digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        offset = _int64("offset", offset)
        if offset > self.latest_offset:
            self.latest_offset = offset

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    def map_records_v2(self, data: Buffer, start: int, end: int, count: int, base_offset: int,
                       start_offset: int) -> tuple[int, bool]:
        """Put the key of every record of one v2 records section (data[start:end), `count` records,
        checked as decode_records_v2 checks them) whose offset >= start_offset, in order, while the
        map is not full (Cleaner.buildOffsetMapForSegment). Returns (records read, full): full
        means a keyed record found the map full and was not put; the records after it are not read
        (their checks included). Keyless records are read and not put."""
        buf = _view(data)
        start, end, count = operator.index(start), operator.index(end), operator.index(count)
        base_offset, start_offset = _int64("base_offset", base_offset), _int64("start_offset", start_offset)
        if start < 0 or end > len(buf) or end < start:
            raise_status(ST_TRUNCATED, start, 1, 0, base_offset)
        read = 0
        for _a, _tsd, off_delta, key, _v, _h in _walk_records_v2(buf, start, end, count, base_offset):
            off = _s64(base_offset + off_delta)
            if key is not None and off >= start_offset:
                if len(self._map) >= self.capacity:
                    return read, True
                self._map[key_digest(key)] = off
            read += 1
        return read, False

    def filter_records_v2(self, data: Buffer, start: int, end: int, count: int, base_offset: int,
                          base_timestamp: int, max_timestamp: int, attributes: int, delete_horizon: int | None,
                          keep_tombstones: bool, new_horizon: int) -> _FilterResult:
        """The cleaner's record filter over one v2 data batch's records section (Cleaner's
        shouldRetainRecord), and the kept records written again when the batch must be rebuilt.

        A record is kept when its offset is past latest_offset; else it needs a key (keyless:
        invalid), the latest offset for that key (else superseded), and, when it is a tombstone
        (record attribute bit 5 or a null value, KIP-87), keep_tombstones. attributes are the
        batch's (timestamp type, extended flag); delete_horizon is the batch's (None: no bit 6);
        new_horizon is stamped when a tombstone is kept in a batch without one.
        Returns (section or None, kept, superseded, invalid, tombstones_removed, tombstones_kept,
        base_timestamp, max_timestamp, horizon): section is None when every record is kept and no
        horizon is stamped (the batch is copied as it is) or when none is kept; otherwise the kept
        records written again (record attributes: bit 5 as the record had it, so a null value
        without the flag stays as Kafka's cleaner writes it, 0; timestamp deltas from `horizon` when there is one, else from the first kept record;
        every length written canonically), with that base timestamp, the largest kept timestamp
        (from "no timestamp" up, rising only when strictly greater) and the horizon written.
        """
        buf = _view(data)
        start, end, count = operator.index(start), operator.index(end), operator.index(count)
        base_offset = _int64("base_offset", base_offset)
        base_timestamp, max_timestamp = _int64("base_timestamp", base_timestamp), _int64("max_timestamp", max_timestamp)
        attrs = operator.index(attributes)
        delete_horizon = None if delete_horizon is None else _int64("delete_horizon", delete_horizon)
        new_horizon = _int64("new_horizon", new_horizon)
        if start < 0 or end > len(buf) or end < start:
            raise_status(ST_TRUNCATED, start, 1, 0, base_offset)
        lat = bool(attrs & W.TIMESTAMP_TYPE_MASK)
        no_ts = W.NO_TIMESTAMP_EXTENDED if attrs & W.TIMESTAMP_EXTENDED_FLAG_MASK else W.NO_TIMESTAMP
        latest = self.latest_offset
        kept: list[tuple[bool, int, int, memoryview | None, memoryview | None,
                         list[tuple[memoryview, memoryview | None]]]] = []
        superseded, invalid, tomb_removed, tomb_kept, n = 0, 0, 0, 0, 0
        for a, ts_delta, off_delta, key, value, headers in _walk_records_v2(buf, start, end, count, base_offset):
            n += 1
            off = _s64(base_offset + off_delta)
            tomb = bool(a & W.RECORD_TOMBSTONE_FLAG_MASK) or value is None
            if off <= latest:
                if key is None:
                    invalid += 1
                    continue
                if off < self._map.get(key_digest(key), -1):
                    superseded += 1
                    continue
                if tomb and not keep_tombstones:
                    tomb_removed += 1
                    continue
            if tomb:
                tomb_kept += 1
            ts = max_timestamp if lat else _s64(base_timestamp + ts_delta)
            # written again with its own flag bit: a null value without the flag (Kafka's form) stays 0
            kept.append((bool(a & W.RECORD_TOMBSTONE_FLAG_MASK), ts, off_delta, key, value, headers))
        horizon = delete_horizon if delete_horizon is not None or not tomb_kept else new_horizon
        result = (len(kept), superseded, invalid, tomb_removed, tomb_kept)
        if not kept or (len(kept) == n and horizon == delete_horizon):
            return (None, *result, base_timestamp, max_timestamp, delete_horizon)
        base_ts = kept[0][1] if horizon is None else horizon
        max_ts = no_ts
        out = bytearray()
        body = bytearray()
        for flag, ts, off_delta, key, value, headers in kept:
            if ts > max_ts:
                max_ts = ts
            _put_record(out, body, flag, _s64(ts - base_ts), off_delta, key, value, headers)
        return (bytes(out), *result, base_ts, max_ts, horizon)



# ------------------------------------------------------------------------------------ grep
# kbatch grep's kernel (the Cython one is _grep_kernel.pxi)
#: where grep_records_v2 looks (a mask): keys, values, every header's value, the values of the
#: headers `header_names` names
GREP_KEY = 1
GREP_VALUE = 2
GREP_HEADERS = 4
GREP_NAMED_HEADERS = 8


def grep_records_v2(data: Buffer, start: int, end: int, count: int, base_offset: int, needle: Buffer,
                    fields: int, header_names: Iterable[Buffer] = ()) -> list[int]:
    """The rows (0-based record indexes) of the `count` v2 records in data[start:end] that hold
    `needle` inside a selected field: fields is a mask of GREP_KEY, GREP_VALUE, GREP_HEADERS
    (every header's value) and GREP_NAMED_HEADERS (the values of headers whose key is one of
    `header_names`, bytes). Null fields hold nothing; an occurrence across two fields, or in a
    length varint, is in none. The section is checked as decode_records_v2 checks it, with its
    errors."""
    buf = _view(data)
    pat = bytes(needle)
    names = {bytes(x) for x in header_names}
    if not pat:
        raise ValueError("grep_records_v2: the needle is empty (it would match every field)")
    start, end, count = operator.index(start), operator.index(end), operator.index(count)
    mask = operator.index(fields) & 0xF
    if start < 0 or end > len(buf) or end < start:
        raise_status(ST_TRUNCATED, start, 1, 0, base_offset)
    rows: list[int] = []
    for i, (_a, _t, _o, key, value, headers) in enumerate(
            _walk_records_v2(buf, start, end, count, base_offset)):
        found = ((mask & GREP_KEY and key is not None and pat in bytes(key))
                 or (mask & GREP_VALUE and value is not None and pat in bytes(value)))
        for hk, hv in headers:
            if found:
                break
            if hv is not None and (mask & GREP_HEADERS or (mask & GREP_NAMED_HEADERS and bytes(hk) in names)):
                found = pat in bytes(hv)
        if found:
            rows.append(i)
    return rows


def grep_sections_v2(data: Buffer, starts: npt.ArrayLike, ends: npt.ArrayLike, counts: npt.ArrayLike,
                     base_offsets: npt.ArrayLike, needle: Buffer, fields: int,
                     header_names: Iterable[Buffer] = ()) -> list[tuple[int, list[int]]]:
    """grep_records_v2 over many records sections of one buffer (a scan window's uncompressed v2
    batches: data[starts[k]:ends[k]], counts[k] records, base_offsets[k]), in one call: [(k, rows)]
    for the sections that hold a match, in order. The first section that is not sound raises its
    error (decode_records_v2's)."""
    pat = bytes(needle)
    names = [bytes(x) for x in header_names]
    if not pat:
        raise ValueError("grep_sections_v2: the needle is empty (it would match every field)")
    cols = [np.asarray(c, dtype=np.int64).reshape(-1).tolist() for c in (starts, ends, counts, base_offsets)]
    if len({len(c) for c in cols}) > 1:
        raise ValueError("grep_sections_v2: starts, ends, counts and base_offsets differ in length")
    found: list[tuple[int, list[int]]] = []
    for k, (s, e, n, base) in enumerate(zip(*cols)):
        rows = grep_records_v2(data, s, e, n, base, pat, fields, names)
        if rows:
            found.append((k, rows))
    return found
