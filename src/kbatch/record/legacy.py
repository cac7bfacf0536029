"""Magic 0 and 1 message sets (Kafka's LegacyRecord and AbstractLegacyRecordBatch).

A legacy "batch" is one log entry `offset | size | message`; a compressed entry (a wrapper)
holds a nested message set in its value (kafka-format.md §2).
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .. import _backend
from .. import _wire as W
from .compression import check_codec, decompress, relocate
from ..errors import CorruptRecordError, CrcMismatchError, InvalidRecordError, KBatchError

if TYPE_CHECKING:
    from .._core import ByteView, Record
    from .control import ControlRecord

_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")


def parse_message(buf: memoryview | bytes, mpos: int, mend: int, base_offset: int | None = None
                  ) -> tuple[int, int, int, int, ByteView | None, ByteView | None]:
    """Parse one legacy message in buf[mpos:mend] -> (crc, magic, attributes, timestamp, key, value).

    timestamp is the raw field (-1 for magic 0). Key/value are read-only views or None.
    """
    crc, magic, attrs = struct.unpack_from(">IbB", buf, mpos)
    if magic not in (0, 1):
        raise CorruptRecordError("Invalid magic found in record", position=mpos + W.LEGACY_MAGIC_OFFSET,
                                 base_offset=base_offset, expected="magic 0 or 1", found=magic)
    overhead = W.RECORD_OVERHEAD_V1 if magic else W.RECORD_OVERHEAD_V0
    if mend - mpos < overhead:
        raise CorruptRecordError("Legacy message is smaller than its overhead", position=mpos,
                                 base_offset=base_offset, expected=f">= {overhead} bytes", found=mend - mpos)
    if magic:
        (ts,) = struct.unpack_from(">q", buf, mpos + W.LEGACY_TIMESTAMP_OFFSET)
        p = mpos + W.LEGACY_KEY_SIZE_OFFSET_V1
    else:
        ts = W.NO_TIMESTAMP
        p = mpos + W.LEGACY_KEY_SIZE_OFFSET_V0
    key, p = _sized(buf, p, mend, base_offset)
    value, p = _sized(buf, p, mend, base_offset)
    if p != mend:
        raise CorruptRecordError("Legacy message size does not match its fields", position=p,
                                 base_offset=base_offset, expected=f"message end at byte {mend}", found=f"byte {p}")
    return crc, magic, attrs, ts, key, value


def _sized(buf: memoryview | bytes, p: int, mend: int, base_offset: int | None) -> tuple[ByteView | None, int]:
    if mend - p < 4:
        raise CorruptRecordError("Truncated legacy message", position=p, base_offset=base_offset,
                                 expected="4-byte length", found=f"{mend - p} bytes")
    (n,) = _I32.unpack_from(buf, p)
    p += 4
    if n < 0:
        return None, p
    if n > mend - p:
        raise CorruptRecordError("Legacy message field runs past the message", position=p - 4,
                                 base_offset=base_offset, expected=f"<= {mend - p} bytes", found=n)
    return _backend.core.byte_view(buf, p, p + n), p + n


class LegacyRecordBatch:
    """One magic 0/1 log entry: a single message, or a compressed wrapper of inner messages."""

    __slots__ = ("_buf", "position", "size_in_bytes", "magic", "offset", "crc", "attributes", "timestamp",
                 "max_decompressed_bytes", "verify_crc", "_records", "_origin")
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    timestamp_extended = False
    producer_id = W.NO_PRODUCER_ID
    producer_epoch = W.NO_PRODUCER_EPOCH
    base_sequence = W.NO_SEQUENCE
    last_sequence = W.NO_SEQUENCE
    partition_leader_epoch = W.NO_PARTITION_LEADER_EPOCH
    delete_horizon_ms: int | None = None
    no_timestamp = W.NO_TIMESTAMP

    def __init__(self, buf: memoryview, position: int, size: int, magic: int, offset: int, crc: int,
                 attributes: int, timestamp: int, max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES,
                 verify_crc: bool = True, origin: int = 0) -> None:
        self._buf = buf
        self._origin = origin  # file position of buf[0] when buf is a window (see RecordBatch)
        self.position = position
        self.size_in_bytes = size
        self.magic = magic
        self.offset = offset
        self.crc = crc
        self.attributes = attributes
        self.timestamp = timestamp
        self.max_decompressed_bytes = max_decompressed_bytes
        self.verify_crc = verify_crc
        self._records: list[Record] | None = None

    @property
    def compression(self) -> W.Compression:
        return check_codec(self.attributes & W.LEGACY_COMPRESSION_CODEC_MASK, self.magic,
                           self.position + W.LOG_OVERHEAD + W.LEGACY_ATTRIBUTES_OFFSET)

    @property
    def timestamp_type(self) -> W.TimestampType:
        if self.magic == 0:
            return W.TimestampType.NO_TIMESTAMP_TYPE
        return W.TimestampType(1 if self.attributes & W.LEGACY_TIMESTAMP_TYPE_MASK else 0)

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def base_offset(self) -> int:
        if self.attributes & W.LEGACY_COMPRESSION_CODEC_MASK:
            recs = self.records()
            return recs[0].offset if recs else self.offset
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def first_timestamp(self) -> int:
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def record_count(self) -> int:
        return len(self.records()) if self.attributes & W.LEGACY_COMPRESSION_CODEC_MASK else 1

    @property
    def raw(self) -> memoryview:
        at = self.position - self._origin
        return self._buf[at:at + self.size_in_bytes]

    def compute_crc(self) -> int:
        at = self.position - self._origin
        return zlib.crc32(self._buf[at + W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET:at + self.size_in_bytes])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise CrcMismatchError(stored=self.crc, computed=computed, position=self.position,
                                   base_offset=self.offset)

    def records(self) -> list[Record]:
        if self._records is None:
            self._records = self._decode()
        return self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __len__(self) -> int:
        return self.record_count

    def release_records(self) -> None:
        """Drop the decoded records this batch caches (they are decoded again when asked for)."""
        self._records = None

    def control_records(self) -> list[ControlRecord]:
        return []

    def _decode(self) -> list[Record]:
        Record = _backend.core.Record
        mpos = self.position - self._origin + W.LOG_OVERHEAD
        mend = self.position - self._origin + self.size_in_bytes
        try:
            _crc, magic, attrs, ts, key, value = parse_message(self._buf, mpos, mend, self.offset)
        except KBatchError as e:
            if self._origin:
                e.update(shift=self._origin)
            raise
        mpos += self._origin
        ttype = self.timestamp_type
        codec = self.compression
        if codec == W.Compression.NONE:
            t = None if ts == W.NO_TIMESTAMP else ts
            return [Record(self.offset, t, ttype, key, value, (), value is None, attrs)]
        if value is None:
            raise InvalidRecordError("Found invalid compressed record set with null value", position=mpos,
                                     base_offset=self.offset, expected="a compressed value", found="null")
        try:
            inner = memoryview(decompress(codec, value, magic, self.max_decompressed_bytes, mpos)).toreadonly()
        except KBatchError as e:
            raise e.at(base_offset=self.offset)
        try:
            entries = self._inner_entries(inner)
        except KBatchError as e:
            raise relocate(e, self.position, self.offset)
        if magic > 0:
            # magic 1: inner offsets are relative; the wrapper carries the absolute last offset.
            last_inner = entries[-1][0]
            if self.offset == 0:  # produce data from some librdkafka versions (Kafka's comment)
                base = 0
            else:
                if self.offset < last_inner:
                    raise InvalidRecordError("Found invalid wrapper offset in compressed v1 message set",
                                             position=self.position, base_offset=self.offset,
                                             expected=f">= {last_inner}", found=self.offset)
                base = self.offset - last_inner
        else:
            base = 0
        lat = magic > 0 and attrs & W.LEGACY_TIMESTAMP_TYPE_MASK
        out = []
        for ioff, imagic, iattrs, its, ikey, ival in entries:
            t = ts if lat else its
            if imagic == 0:
                t = W.NO_TIMESTAMP
            out.append(Record(base + ioff, None if t == W.NO_TIMESTAMP else t, ttype, ikey, ival, (), ival is None,
                              iattrs))
        return out

    def _inner_entries(self, inner: bytes | memoryview) -> list[tuple[Any, ...]]:
        """The inner messages of a decompressed wrapper value; positions are inner positions."""
        entries = []
        p = 0
        n = len(inner)
        while n - p >= W.LOG_OVERHEAD:  # a partial trailing inner entry is ignored, as Kafka does
            ioff, isize = _ENTRY.unpack_from(inner, p)
            if isize < W.RECORD_OVERHEAD_V0:
                raise CorruptRecordError("Inner message size is smaller than the minimum overhead", position=p,
                                         expected=f">= {W.RECORD_OVERHEAD_V0}", found=isize)
            if isize > n - p - W.LOG_OVERHEAD:
                break
            ms, me = p + W.LOG_OVERHEAD, p + W.LOG_OVERHEAD + isize
            icrc, imagic, iattrs, its, ikey, ival = parse_message(inner, ms, me)
            if iattrs & W.LEGACY_COMPRESSION_CODEC_MASK:
                raise InvalidRecordError("Inner messages must not be compressed",
                                         position=ms + W.LEGACY_ATTRIBUTES_OFFSET, expected="codec none",
                                         found=iattrs & W.LEGACY_COMPRESSION_CODEC_MASK)
            if self.verify_crc:
                computed = zlib.crc32(inner[ms + W.LEGACY_MAGIC_OFFSET:me])
                if computed != icrc:
                    raise CrcMismatchError("Inner record is corrupt", stored=icrc, computed=computed, position=p)
            entries.append((ioff, imagic, iattrs, its, ikey, ival))
            p = me
        if not entries:
            raise InvalidRecordError("Found invalid compressed record set with no inner records",
                                     expected="at least one inner message", found="none")
        return entries

    def __repr__(self) -> str:
        return (f"LegacyRecordBatch(magic={self.magic}, offset={self.offset}, compression={self.compression.name}, "
                f"position={self.position}, size={self.size_in_bytes})")
