"""Writing record batches (Kafka's MemoryRecordsBuilder) for magic 0, 1 and 2.

Uncompressed magic 2 output with timestamp_extended=False is byte-identical to what Kafka's own
builder writes for the same records (null values aside: kbatch always sets the KIP-87 tombstone
flag on them, DESIGN.md decision 2).
"""
from __future__ import annotations

import struct
import zlib

from . import _backend
from . import _wire as W
from .compression import check_codec, compress
from .errors import InvalidOffsetError, InvalidRecordError, UnsupportedForMessageFormatError
from .records import control_key, end_txn_marker_value

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_MASK64 = (1 << 64) - 1


def _wrap64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


def _blob(v):
    return None if v is None else bytes(v)


class BatchBuilder:
    """Build one batch (magic 2) or one message set (magic 0/1).

    append(timestamp, key, value, headers=(), tombstone=None, offset=None):
      timestamp: int ms (negative allowed, KIP-228) or None for "no timestamp";
      tombstone: None = "value is None"; True marks a tombstone (a v2 tombstone may keep a value,
      KIP-87); False with a null value is rejected.
    build() -> bytes.
    """

    def __init__(self, magic: int = 2, compression: int = W.Compression.NONE, base_offset: int = 0,
                 timestamp_type: int = W.TimestampType.CREATE_TIME, timestamp_extended: bool = True,
                 producer_id: int = W.NO_PRODUCER_ID, producer_epoch: int = W.NO_PRODUCER_EPOCH,
                 base_sequence: int = W.NO_SEQUENCE, is_transactional: bool = False, *,
                 is_control: bool = False, partition_leader_epoch: int = W.NO_PARTITION_LEADER_EPOCH,
                 log_append_time: int | None = None, delete_horizon_ms: int | None = None,
                 compression_level: int | None = None):
        if magic not in (0, 1, 2):
            raise ValueError(f"magic must be 0, 1 or 2, not {magic}")
        self.magic = magic
        self.compression = check_codec(int(compression), magic)
        self.base_offset = base_offset
        self.timestamp_type = W.TimestampType(timestamp_type)
        if magic == 0:
            self.timestamp_type = W.TimestampType.NO_TIMESTAMP_TYPE
        elif self.timestamp_type == W.TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError(f"magic {magic} needs CREATE_TIME or LOG_APPEND_TIME")
        self.timestamp_extended = bool(timestamp_extended) and magic == 2
        if magic < 2 and (producer_id != W.NO_PRODUCER_ID or is_transactional or is_control):
            raise UnsupportedForMessageFormatError(
                "Idempotent, transactional and control batches need magic 2", expected="magic 2",
                found=f"magic {magic}")
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        if self.timestamp_type == W.TimestampType.LOG_APPEND_TIME and log_append_time is None:
            raise ValueError("a LOG_APPEND_TIME batch needs log_append_time")
        self.log_append_time = log_append_time
        self.delete_horizon_ms = delete_horizon_ms
        self.compression_level = compression_level
        self._records = []  # (offset, timestamp raw, key, value, headers, attributes)
        self._last_offset = None

    @property
    def no_timestamp(self) -> int:
        return W.NO_TIMESTAMP_EXTENDED if self.timestamp_extended else W.NO_TIMESTAMP

    def __len__(self):
        return len(self._records)

    def append(self, timestamp, key, value, headers=(), tombstone=None, offset=None) -> int:
        """Add a record; returns its offset."""
        if offset is None:
            offset = self.base_offset if self._last_offset is None else self._last_offset + 1
        elif self._last_offset is not None and offset <= self._last_offset:
            raise InvalidOffsetError("Illegal offset, offsets must increase", expected=f"> {self._last_offset}",
                                     found=offset)
        elif offset < self.base_offset:
            raise InvalidOffsetError("Illegal offset, below the base offset", expected=f">= {self.base_offset}",
                                     found=offset)
        if self.magic == 2 and offset - self.base_offset > W.INT32_MAX:
            raise InvalidOffsetError("Offset delta does not fit in an int32", expected=f"<= {W.INT32_MAX}",
                                     found=offset - self.base_offset)
        if timestamp is None:
            ts = self.no_timestamp
        else:
            ts = int(timestamp)
            if not W.INT64_MIN <= ts <= W.INT64_MAX:
                raise OverflowError(f"timestamp out of int64 range: {ts}")
            if self.timestamp_extended and ts == W.NO_TIMESTAMP_EXTENDED:
                raise ValueError("Long.MIN_VALUE is the 'no timestamp' value of an extended batch; pass None")
        if tombstone is False and value is None:
            raise InvalidRecordError("A record with a null value must be a tombstone (KIP-87)",
                                     expected="a value, or tombstone=True/None", found="null value, tombstone=False")
        is_tomb = value is None if tombstone is None else bool(tombstone)
        headers = tuple(headers or ())
        if headers and self.magic < 2:
            raise UnsupportedForMessageFormatError(f"Magic v{self.magic} does not support record headers",
                                                   expected="magic 2", found=f"magic {self.magic}")
        hdrs = []
        for hk, hv in headers:
            if hk is None:
                raise InvalidRecordError("Null header keys are not permitted", expected="str", found=None)
            hdrs.append((hk.encode("utf-8") if isinstance(hk, str) else bytes(hk), _blob(hv)))
        attrs = 0
        if self.magic < 2:
            if is_tomb:
                value = None  # KIP-87 downgrade rule: legacy tombstones are null values
        elif is_tomb:
            attrs |= W.RECORD_TOMBSTONE_FLAG_MASK
        self._records.append((offset, ts, _blob(key), _blob(value), hdrs, attrs))
        self._last_offset = offset
        return offset

    # ------------------------------------------------------------------------------------ v2
    def _v2_body(self):
        recs = self._records
        base_offset = self.base_offset
        core = _backend.core
        base_ts = self.delete_horizon_ms if self.delete_horizon_ms is not None else (
            recs[0][1] if recs else self.no_timestamp)
        out = bytearray()
        max_ts = self.no_timestamp
        for offset, ts, key, value, hdrs, attrs in recs:
            if ts > max_ts:
                max_ts = ts
            body = bytearray((attrs,))
            body += core.write_varlong(_wrap64(ts - base_ts))
            body += core.write_varint(offset - base_offset)
            for blob in (key, value):
                if blob is None:
                    body += b"\x01"
                else:
                    body += core.write_varint(len(blob))
                    body += blob
            body += core.write_varint(len(hdrs))
            for hk, hv in hdrs:
                body += core.write_varint(len(hk))
                body += hk
                if hv is None:
                    body += b"\x01"
                else:
                    body += core.write_varint(len(hv))
                    body += hv
            out += core.write_varint(len(body))
            out += body
        return bytes(out), base_ts, max_ts

    def _attributes(self) -> int:
        a = int(self.compression)
        if self.timestamp_type == W.TimestampType.LOG_APPEND_TIME:
            a |= W.TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            a |= W.TRANSACTIONAL_FLAG_MASK
        if self.is_control:
            a |= W.CONTROL_FLAG_MASK
        if self.delete_horizon_ms is not None:
            a |= W.DELETE_HORIZON_FLAG_MASK
        if self.timestamp_extended:
            a |= W.TIMESTAMP_EXTENDED_FLAG_MASK
        return a

    def _build_v2(self) -> bytes:
        body, base_ts, max_ts = self._v2_body()
        if self.timestamp_type == W.TimestampType.LOG_APPEND_TIME:
            max_ts = self.log_append_time
        if self.compression != W.Compression.NONE:
            body = compress(self.compression, body, 2, self.compression_level)
        last_delta = self._last_offset - self.base_offset
        header = bytearray(_V2_HEADER.pack(
            self.base_offset, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(body), self.partition_leader_epoch,
            2, 0, self._attributes(), last_delta, base_ts, max_ts, self.producer_id, self.producer_epoch,
            self.base_sequence, len(self._records)))
        crc = _backend.core.crc32c(body, _backend.core.crc32c(header[W.ATTRIBUTES_OFFSET:]))
        struct.pack_into(">I", header, W.CRC_OFFSET, crc)
        return bytes(header) + body

    # ------------------------------------------------------------------------------------ legacy
    def _message(self, magic: int, attrs: int, ts: int, key, value) -> bytes:
        body = bytearray(struct.pack(">bB", magic, attrs))
        if magic == 1:
            body += struct.pack(">q", ts)
        for blob in (key, value):
            if blob is None:
                body += b"\xff\xff\xff\xff"
            else:
                body += struct.pack(">i", len(blob)) + blob
        return struct.pack(">I", zlib.crc32(body)) + bytes(body)

    def _build_legacy(self) -> bytes:
        magic = self.magic
        lat = self.timestamp_type == W.TimestampType.LOG_APPEND_TIME
        ts_bit = W.LEGACY_TIMESTAMP_TYPE_MASK if lat else 0
        out = bytearray()
        max_ts = W.NO_TIMESTAMP
        entries = []
        for offset, ts, key, value, _h, _a in self._records:
            if magic == 0:
                ts = W.NO_TIMESTAMP
            elif lat:
                ts = self.log_append_time
            max_ts = max(max_ts, ts)
            entries.append((offset, self._message(magic, ts_bit, ts, key, value)))
        if self.compression == W.Compression.NONE:
            for offset, msg in entries:
                out += struct.pack(">qi", offset, len(msg)) + msg
            return bytes(out)
        inner = bytearray()
        for i, (offset, msg) in enumerate(entries):
            rel = offset if magic == 0 else offset - self.base_offset  # v1: relative inner offsets
            inner += struct.pack(">qi", rel, len(msg)) + msg
        wrapped = compress(self.compression, inner, magic, self.compression_level)
        wrapper_ts = self.log_append_time if lat else max_ts
        msg = self._message(magic, int(self.compression) | ts_bit, wrapper_ts, None, wrapped)
        return struct.pack(">qi", self._last_offset, len(msg)) + msg

    def build(self) -> bytes:
        """The batch bytes (empty bytes when nothing was appended, as Kafka's builder)."""
        if not self._records:
            return b""
        return self._build_v2() if self.magic == 2 else self._build_legacy()


def build_end_txn_marker(*, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                         base_offset: int = 0, timestamp: int = 0,
                         partition_leader_epoch: int = W.NO_PARTITION_LEADER_EPOCH,
                         timestamp_extended: bool = False) -> bytes:
    """A transaction marker batch (COMMIT or ABORT) as MemoryRecords.writeEndTransactionalMarker writes it."""
    b = BatchBuilder(2, W.Compression.NONE, base_offset, W.TimestampType.CREATE_TIME, timestamp_extended,
                     producer_id, producer_epoch, W.NO_SEQUENCE, True, is_control=True,
                     partition_leader_epoch=partition_leader_epoch)
    rtype = W.ControlRecordType.COMMIT if commit else W.ControlRecordType.ABORT
    b.append(timestamp, control_key(rtype), end_txn_marker_value(coordinator_epoch))
    return b.build()


def build_batch(records, **kwargs) -> bytes:
    """Convenience: BatchBuilder(**kwargs) with each (timestamp, key, value[, headers]) appended."""
    b = BatchBuilder(**kwargs)
    for r in records:
        b.append(*r)
    return b.build()
