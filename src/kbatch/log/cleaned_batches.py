"""The batches a cleaner writes (MemoryRecords.filterTo's output): a header-only batch for an
emptied one (empty_batch_header), a v2 batch's lastOffset overridden (with_last_offset), a batch
rebuilt from the records kept, by BatchBuilder (rebuild_batch) or from the OffsetMap kernel's
records section (_rebuilt_v2), keeping codec, producer fields, epoch, flags and lastOffset."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from .. import _backend
from .. import _wire as W
from ..errors import InvalidRecordError
from ..record.builder import BatchBuilder
from ..record.compression import compress

if TYPE_CHECKING:
    from .. import _core
    from .._core import Record
    from ..record.batch import Batch

    #: a batch's header fields _rebuilt_v2 keeps (_header_of)
    _V2Header = tuple[int, int, int, int, int, int, int, int]

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")


def empty_batch_header(batch: Batch) -> bytes:
    """The 61-byte header-only batch Kafka keeps for an emptied batch (DefaultRecordBatch
    .writeEmptyHeader): count 0, no codec, baseTimestamp -1, the original maxTimestamp,
    lastOffset, producer fields, epoch and flags (kbatch keeps the extended flag too)."""
    attrs = batch.attributes & (W.TIMESTAMP_TYPE_MASK | W.TRANSACTIONAL_FLAG_MASK | W.CONTROL_FLAG_MASK
                                | W.TIMESTAMP_EXTENDED_FLAG_MASK)
    header = bytearray(_V2_HEADER.pack(
        batch.base_offset, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD, batch.partition_leader_epoch,
        W.MAGIC_VALUE_V2, 0, attrs, batch.last_offset - batch.base_offset, W.NO_TIMESTAMP, batch.max_timestamp,
        batch.producer_id, batch.producer_epoch, batch.base_sequence, 0))
    struct.pack_into(">I", header, W.CRC_OFFSET, _backend.core.crc32c(header[W.ATTRIBUTES_OFFSET:]))
    return bytes(header)


def with_last_offset(data: bytes, last_offset: int) -> bytes:
    """A v2 batch with lastOffsetDelta set so that lastOffset = `last_offset` (Kafka's
    MemoryRecordsBuilder.overrideLastOffset), CRC recomputed over [21, end)."""
    base: int = struct.unpack_from(">q", data, W.BASE_OFFSET_OFFSET)[0]
    delta: int = struct.unpack_from(">i", data, W.LAST_OFFSET_DELTA_OFFSET)[0]
    if base + delta == last_offset:
        return data
    if not 0 <= last_offset - base <= W.INT32_MAX:
        raise InvalidRecordError("lastOffset does not fit the batch", position=W.LAST_OFFSET_DELTA_OFFSET,
                                 base_offset=base, expected=f"{base} <= lastOffset <= {base + W.INT32_MAX}",
                                 found=last_offset)
    buf = bytearray(data)
    struct.pack_into(">i", buf, W.LAST_OFFSET_DELTA_OFFSET, last_offset - base)
    struct.pack_into(">I", buf, W.CRC_OFFSET, _backend.core.crc32c(memoryview(buf)[W.ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def rebuild_batch(batch: Batch, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """Write `records` (a subset of `batch`'s, in order) as a batch with `batch`'s codec, producer
    fields, epoch, timestamp type and extended flag, the records' own offsets and timestamps, and
    (v2) the original lastOffset. `delete_horizon_ms` stamps bit 6 and the base timestamp."""
    v2 = batch.magic == 2
    lat = batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME
    b = BatchBuilder(
        batch.magic, batch.compression, records[0].offset if not v2 else batch.base_offset,
        batch.timestamp_type if batch.magic else W.TimestampType.CREATE_TIME,
        batch.timestamp_extended, batch.producer_id, batch.producer_epoch, batch.base_sequence,
        batch.is_transactional, is_control=batch.is_control, partition_leader_epoch=batch.partition_leader_epoch,
        log_append_time=batch.max_timestamp if lat else None,
        delete_horizon_ms=delete_horizon_ms if v2 else None)
    for r in records:
        b.append(r.timestamp, r.key, r.value, r.headers, True if r.is_tombstone else None, offset=r.offset)
    data = b.build()
    return with_last_offset(data, batch.last_offset) if v2 else data


def _header_of(batch: Batch) -> _V2Header:
    """The header fields _rebuilt_v2 keeps, of a RecordBatch."""
    return (batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.attributes, batch.max_timestamp,
            batch.producer_id, batch.producer_epoch, batch.base_sequence)


def _rebuilt_v2(header: _V2Header, filtered: _core._FilterResult) -> bytes:
    """The v2 batch holding the records OffsetMap.filter_records_v2 kept of a batch, as
    rebuild_batch writes them with BatchBuilder (but for a null value without the KIP-87 flag,
    which keeps its attributes 0 as Kafka's cleaner writes it): the batch's base offset, codec (Kafka's default
    level), producer fields, epoch, timestamp type, extended flag and lastOffset; the base
    timestamp and max timestamp of the kept records (LogAppendTime: the batch's), the horizon.
    header: the batch's (base offset, last offset, leader epoch, attributes, max timestamp,
    producer id, producer epoch, base sequence)."""
    base, last, ple, attrs, batch_max, pid, epoch, seq = header
    section, count, base_ts, max_ts, horizon = filtered[0], filtered[1], filtered[6], filtered[7], filtered[8]
    assert section is not None  # the kernel's new records section (None: the batch is kept as it is)
    attrs &= (W.COMPRESSION_CODEC_MASK | W.TIMESTAMP_TYPE_MASK | W.TRANSACTIONAL_FLAG_MASK | W.CONTROL_FLAG_MASK
              | W.TIMESTAMP_EXTENDED_FLAG_MASK)
    if horizon is not None:
        attrs |= W.DELETE_HORIZON_FLAG_MASK
    codec = attrs & W.COMPRESSION_CODEC_MASK
    body = compress(codec, section, 2) if codec else section
    if attrs & W.TIMESTAMP_TYPE_MASK:
        max_ts = batch_max
    head = bytearray(_V2_HEADER.pack(
        base, W.RECORD_BATCH_OVERHEAD - W.LOG_OVERHEAD + len(body), ple, W.MAGIC_VALUE_V2, 0, attrs, last - base,
        base_ts, max_ts, pid, epoch, seq, count))
    crc32c = _backend.core.crc32c
    struct.pack_into(">I", head, W.CRC_OFFSET, crc32c(body, crc32c(memoryview(head)[W.ATTRIBUTES_OFFSET:])))
    return bytes(head) + body


__all__ = ["empty_batch_header", "with_last_offset", "rebuild_batch"]
