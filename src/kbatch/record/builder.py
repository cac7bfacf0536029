"""Writing record batches (Kafka's MemoryRecordsBuilder) for magic 0, 1 and 2.

Uncompressed magic 2 output with timestamp_extended=False is byte-identical to what Kafka's own
builder writes for the same records (null values aside: kbatch always sets the KIP-87 tombstone
flag on them, DESIGN.md decision 2).
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import _backend
from .. import _wire as W
from .compression import check_codec, check_level, compress
from ..errors import InvalidOffsetError, InvalidRecordError, UnsupportedForMessageFormatError
from .control import control_key, end_txn_marker_value

if TYPE_CHECKING:
    from .._typing import Buffer, Headers, RecordTuple

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")


def _blob(v: Buffer | None) -> bytes | None:
    return None if v is None else bytes(memoryview(v))  # any bytes-like; never bytes(int)


class BatchBuilder:
    """Build one batch (magic 2) or one message set (magic 0/1).

    append(timestamp, key, value, headers=(), tombstone=None, offset=None):
      timestamp: int ms (negative allowed, KIP-228) or None for "no timestamp";
      tombstone: None = "value is None"; True marks a tombstone (a v2 tombstone may keep a value,
      KIP-87); False with a null value is rejected.
    extend(records): append each (timestamp, key, value[, headers[, tombstone[, offset]]]) tuple;
      for magic 2 the whole list is encoded in one kernel call (build_batch uses it).
    build() -> bytes.
    compression_level: Kafka's level for the codec (gzip 1-9 or -1, lz4 1-17, zstd -131072-22);
      None means Kafka's default (gzip -1 = zlib's 6, lz4 9 = lz4's fast compressor, zstd 3).
    """

    def __init__(self, magic: int = 2, compression: W.Compression = W.Compression.NONE, base_offset: int = 0,
                 timestamp_type: W.TimestampType = W.TimestampType.CREATE_TIME, timestamp_extended: bool = True,
                 producer_id: int = W.NO_PRODUCER_ID, producer_epoch: int = W.NO_PRODUCER_EPOCH,
                 base_sequence: int = W.NO_SEQUENCE, is_transactional: bool = False, *,
                 is_control: bool = False, partition_leader_epoch: int = W.NO_PARTITION_LEADER_EPOCH,
                 log_append_time: int | None = None, delete_horizon_ms: int | None = None,
                 compression_level: int | None = None) -> None:
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
        # Kafka's level scale for the codec (KIP-390), its default when None; checked here, not at build()
        self.compression_level = check_level(self.compression, compression_level)
        if magic == 2:
            # records are encoded as they come; append is the encoder's own (compiled) method, so
            # a record costs no Python frame of ours
            self._encoder = _backend.core.RecordsEncoderV2(base_offset, None, delete_horizon_ms,
                                                          self.timestamp_extended)
            self.append = self._encoder.append  # type: ignore[method-assign]  # same signature, compiled
        else:
            self._messages: list[tuple[int, int, bytes | None, bytes | None]] = []  # encoded by build()
            self._last_offset: int | None = None

    @property
    def no_timestamp(self) -> int:
        return W.NO_TIMESTAMP_EXTENDED if self.timestamp_extended else W.NO_TIMESTAMP

    def __len__(self) -> int:
        return self._encoder.count if self.magic == 2 else len(self._messages)

    def append(self, timestamp: int | None, key: Buffer | None, value: Buffer | None, headers: Headers = (),
               tombstone: bool | None = None, offset: int | None = None) -> int:
        """Add a record; returns its offset. A refused record leaves the builder as it was.
        (A magic 2 builder's instances use their encoder's append directly: the same rules.)"""
        if self.magic == 2:
            return self._encoder.append(timestamp, key, value, headers, tombstone, offset)
        return self._append_legacy(timestamp, key, value, headers, tombstone, offset)

    def extend(self, records: Iterable[RecordTuple]) -> None:
        """Add (timestamp, key, value[, headers[, tombstone[, offset]]]) tuples, in order. Magic 2
        encodes them in one kernel call (the fast way to build a batch), and a refused record
        refuses them all; magic 0/1 appends them one by one."""
        if self.magic == 2:
            self._encoder.extend(records if type(records) in (list, tuple) else list(records))
        else:
            for rec in records:
                self._append_legacy(*rec)

    def _append_legacy(self, timestamp: int | None, key: Buffer | None, value: Buffer | None,
                       headers: Headers = (), tombstone: bool | None = None, offset: int | None = None) -> int:
        """Magic 0/1: encode_records_v2's offset, timestamp and tombstone rules (no int32 offset
        deltas here), then the KIP-87 down-conversion: a tombstone is a null value."""
        last = self._last_offset
        if offset is None:
            offset = self.base_offset if last is None else last + 1
        elif last is not None and offset <= last:
            raise InvalidOffsetError("Illegal offset, offsets must increase", expected=f"> {last}", found=offset)
        elif offset < self.base_offset:
            raise InvalidOffsetError("Illegal offset, below the base offset", expected=f">= {self.base_offset}",
                                     found=offset)
        ts = W.NO_TIMESTAMP if timestamp is None else int(timestamp)
        if not W.INT64_MIN <= ts <= W.INT64_MAX:
            raise OverflowError(f"timestamp out of int64 range: {ts}")
        if tombstone is False and value is None:
            raise InvalidRecordError("A record with a null value must be a tombstone (KIP-87)",
                                     expected="a value, or tombstone=True/None", found="null value, tombstone=False")
        if headers:
            raise UnsupportedForMessageFormatError(f"Magic v{self.magic} does not support record headers",
                                                   expected="magic 2", found=f"magic {self.magic}")
        self._messages.append((offset, ts, _blob(key), None if tombstone else _blob(value)))
        self._last_offset = offset
        return offset

    # ------------------------------------------------------------------------------------ v2
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
        enc = self._encoder
        assert enc.last_offset is not None and enc.base_timestamp is not None  # build() checked len(self)
        body = enc.section()
        lat = self.timestamp_type == W.TimestampType.LOG_APPEND_TIME
        if self.compression != W.Compression.NONE:
            body = compress(self.compression, body, 2, self.compression_level)
        header = bytearray(_V2_HEADER.pack(
            self.base_offset, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(body), self.partition_leader_epoch,
            2, 0, self._attributes(), enc.last_offset - self.base_offset, enc.base_timestamp,
            self.log_append_time if lat else enc.max_timestamp, self.producer_id, self.producer_epoch,
            self.base_sequence, enc.count))
        crc = _backend.core.crc32c(body, _backend.core.crc32c(header[W.ATTRIBUTES_OFFSET:]))
        struct.pack_into(">I", header, W.CRC_OFFSET, crc)
        return bytes(header) + body

    # ------------------------------------------------------------------------------------ legacy
    def _message(self, magic: int, attrs: int, ts: int, key: bytes | None, value: bytes | None) -> bytes:
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
        lat_ts = W.NO_TIMESTAMP if self.log_append_time is None else self.log_append_time  # set when lat
        for offset, ts, key, value in self._messages:
            if magic == 0:
                ts = W.NO_TIMESTAMP
            elif lat:
                ts = lat_ts
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
        wrapper_ts = lat_ts if lat else max_ts
        msg = self._message(magic, int(self.compression) | ts_bit, wrapper_ts, None, wrapped)
        return struct.pack(">qi", self._last_offset, len(msg)) + msg

    def build(self) -> bytes:
        """The batch bytes (empty bytes when nothing was appended, as Kafka's builder)."""
        if not len(self):
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


def build_batch(records: Iterable[RecordTuple], **kwargs: Any) -> bytes:
    """Convenience: BatchBuilder(**kwargs) with each (timestamp, key, value[, headers]) appended."""
    b = BatchBuilder(**kwargs)
    b.extend(records)
    return b.build()
