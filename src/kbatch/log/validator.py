"""Broker-side validation and offset assignment (Kafka's LogValidator): KIP-32, KIP-228, KIP-937.

`LogValidator.validate(data, now_ms)` applies every per-batch and per-record check a broker applies
to a produce request (kafka-format.md §4), with the KIP-937 timestamp rule on EVERY record.
`validate_and_assign(...)` also assigns offsets, stamps LogAppendTime and converts the batch to the
topic's magic and codec, in place where the bytes allow it (§4.2 item 6), as Kafka does.

Where kbatch knowingly differs from Kafka (DESIGN.md):
- decision 4: timestamp bounds are computed in exact arithmetic, saturated to int64, so an
  extreme negative timestamp is "too old", never "in the future" as Java's wrapping makes it;
- decision 1: bit 7 (isTimestampExtended) is honoured on read; a validator with
  `timestamp_extended=True` is a KIP-228 "new broker" and up-converts batches to the extended form;
  reserved attribute bits (7-15) are preserved when a batch is rewritten in place (Kafka clears them);
- a magic 1 message's own CreateTime timestamp is never rewritten (Kafka's in-place path would
  rewrite a negative one to -1); LogAppendTime offsets of the max timestamp name the first record
  holding it, as ListOffsets answers, not the batch's last offset.
"""
from __future__ import annotations

import logging
import operator
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from .. import _backend
from .. import _wire as W
from ..record.batch import RecordBatch
from ..record.file_records import iter_batches
from ..record.builder import BatchBuilder
from ..record.compression import check_level, decompress
from ..errors import (InvalidConfigurationError, InvalidOffsetError, InvalidRecordError, InvalidTimestampError, KBatchError, RecordTooLargeError,
                     UnsupportedForMessageFormatError)
from ..record.legacy import LegacyRecordBatch, parse_message

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any, NoReturn, SupportsInt

    import numpy.typing as npt

    from .._core import Record
    from .._typing import Buffer
    from ..record.batch import Batch

log = logging.getLogger("kbatch.log.validator")
_TIMESTAMP = operator.attrgetter("timestamp")

LONG_MAX = W.INT64_MAX
# Migration aid: Kafka 4.0 rejects CreateTime more than 1 h ahead by default (after.max.ms = 3600000).
FUTURE_WARN_MS = 3_600_000

INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_U32 = struct.Struct(">I")
_LEGACY_CRC_AT = W.LOG_OVERHEAD + W.LEGACY_CRC_OFFSET             # 12
_LEGACY_MAGIC_AT = W.LOG_OVERHEAD + W.LEGACY_MAGIC_OFFSET         # 16
_LEGACY_ATTRS_AT = W.LOG_OVERHEAD + W.LEGACY_ATTRIBUTES_OFFSET    # 17
_LEGACY_TS_AT = W.LOG_OVERHEAD + W.LEGACY_TIMESTAMP_OFFSET        # 18


# ------------------------------------------------------------------------------------ kernel facade
class TimestampCheck(NamedTuple):
    """Result of `check_timestamps`: where the first out-of-range timestamp is and how many there are."""

    first_bad_index: int   # -1 when every timestamp is in range
    too_old: int           # ts < lower_bound
    too_new: int           # ts > upper_bound
    lower_bound: int       # now - before_max_ms, saturated to int64
    upper_bound: int       # now + after_max_ms, saturated to int64

    @property
    def ok(self) -> bool:
        return self.first_bad_index < 0

    @property
    def bad(self) -> int:
        return self.too_old + self.too_new


def _int64(name: str, value: SupportsInt) -> int:
    v = int(value)
    if not W.INT64_MIN <= v <= W.INT64_MAX:
        raise ValueError(f"{name} must fit in an int64, not {v}")
    return v


def _limit(name: str, value: SupportsInt) -> int:
    v = _int64(name, value)
    if v < 0:  # Kafka's configs are atLeast(0)
        raise ValueError(f"{name} must be >= 0, not {v}")
    return v


def _as_int64_column(timestamps: Any, no_timestamp: int | None) -> npt.NDArray[np.int64]:
    """A contiguous int64 numpy column from numpy, pyarrow (nulls -> no_timestamp) or a sequence."""
    if type(timestamps).__module__.startswith("pyarrow"):
        import pyarrow as pa
        import pyarrow.compute as pc

        col = timestamps.cast(pa.int64()) if timestamps.type != pa.int64() else timestamps
        if col.null_count:
            if no_timestamp is None:
                raise ValueError("null timestamps need a no_timestamp value to stand for them")
            col = pc.fill_null(col, no_timestamp)
        timestamps = col.to_numpy()
    arr = np.asarray(timestamps)
    if arr.ndim != 1:
        raise ValueError(f"timestamps must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != np.int64:
        if arr.dtype.kind not in "iu" and arr.size:
            raise TypeError(f"timestamps must be integers (ms), got dtype {arr.dtype}")
        if arr.dtype == np.uint64 and arr.size and int(arr.max()) > W.INT64_MAX:
            raise ValueError("timestamps must fit in an int64")
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr)


def check_timestamps(timestamps: npt.ArrayLike, now_ms: int, before_max_ms: int = LONG_MAX, after_max_ms: int = LONG_MAX,
                     no_timestamp: int | None = W.NO_TIMESTAMP) -> TimestampCheck:
    """KIP-937's range check over a whole column of timestamps at once.

    timestamps: int64 numpy array (or anything numpy/pyarrow can turn into one; Arrow nulls count
    as `no_timestamp`). A value equal to `no_timestamp` is skipped, as Kafka skips -1; pass
    `kbatch.NO_TIMESTAMP_EXTENDED` for extended batches, or None to check every value.
    Bad = ts < now - before_max_ms or ts > now + after_max_ms, in exact arithmetic (DESIGN.md 4).
    """
    now = _int64("now_ms", now_ms)
    before = _limit("before_max_ms", before_max_ms)
    after = _limit("after_max_ms", after_max_ms)
    arr = _as_int64_column(timestamps, no_timestamp)
    core = _backend.core
    first, n_old, n_new = core.check_timestamps(arr, now, before, after, no_timestamp)
    lo, hi = core.timestamp_bounds(now, before, after)
    return TimestampCheck(int(first), int(n_old), int(n_new), int(lo), int(hi))


# ------------------------------------------------------------------------------------ results
class RecordError(NamedTuple):
    """One rejected record. `record_index` is Kafka's RecordError.batchIndex (index in its batch)."""

    batch_index: int
    record_index: int
    offset: int
    message: str

    def kafka_repr(self) -> str:
        return f"RecordError(batchIndex={self.record_index}, message='{self.message}')"


@dataclass(frozen=True)
class ValidationResult:
    """What `LogValidator.validate` saw. Timestamps are record timestamps (None: no record had one)."""

    batch_count: int
    record_count: int
    no_timestamp_count: int          # records with "no timestamp" (skipped by the range check)
    max_timestamp: int | None
    offset_of_max_timestamp: int | None   # offset (as in the input) of the first record holding it
    lower_bound: int                 # the accepted range [lower_bound, upper_bound] (CreateTime topics)
    upper_bound: int
    future_warning_batches: int      # batches that logged the one-hour-ahead WARN
    validated_bytes: int


@dataclass(frozen=True)
class AppendInfo:
    """What `LogValidator.validate_and_assign` appended (Kafka's LogAppendInfo / ValidationResult).

    max_timestamp follows the time index's rules: it starts at -1 (Long.MIN_VALUE for extended
    output, DESIGN.md decision 5) and offset_of_max_timestamp is -1 when no record beats it.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int | None      # the stamped time for LogAppendTime topics, else None
    rebuilt: bool                    # True when any batch was re-built (conversion / recompression)
    record_count: int
    batch_count: int                 # batches in the output
    validated_bytes: int             # input bytes validated
    size_in_bytes: int               # output bytes

    @staticmethod
    def merge(infos: Sequence[AppendInfo]) -> AppendInfo:
        """One AppendInfo for several consecutive appends (Log.append_table's pieces)."""
        first, last = infos[0], infos[-1]
        best = first
        for info in infos[1:]:
            if info.offset_of_max_timestamp >= 0 and (best.offset_of_max_timestamp < 0
                                                      or info.max_timestamp > best.max_timestamp):
                best = info
        return AppendInfo(first.first_offset, last.last_offset, best.max_timestamp, best.offset_of_max_timestamp,
                          last.log_append_time, any(i.rebuilt for i in infos), sum(i.record_count for i in infos),
                          sum(i.batch_count for i in infos), sum(i.validated_bytes for i in infos),
                          sum(i.size_in_bytes for i in infos))


class _Checked:
    """One validated input batch and what assignment needs from it."""

    __slots__ = ("index", "batch", "_records", "offsets", "ts", "missing", "inner_offsets")

    def __init__(self, index: int, batch: Batch, records: Sequence[Record] | None, offsets: npt.NDArray[np.int64],
                 ts: npt.NDArray[np.int64], missing: int, inner_offsets: list[tuple[int, int]] | None) -> None:
        self.index = index
        self.batch = batch
        self._records = records       # None: decoded on first use (the v2 checks read columns)
        self.offsets = offsets        # int64 column of the records' offsets as in the input
        self.ts = ts                  # int64 column, "no timestamp" as the batch's sentinel
        self.missing = missing        # number of records without a timestamp
        self.inner_offsets = inner_offsets  # legacy compressed: raw inner offsets, else None

    @property
    def records(self) -> Sequence[Record]:
        if self._records is None:
            self._records = self.batch.records()
        return self._records

    def __len__(self) -> int:
        return len(self.ts)

    def release(self) -> None:
        self._records = None
        self.batch.release_records()


def _entry_offset(batch: Batch) -> int:
    """The offset Kafka's messages name a batch by: baseOffset (v2), the log entry's offset (legacy)."""
    return batch.offset if isinstance(batch, LegacyRecordBatch) else batch.base_offset


def _record_repr(batch: Batch, rec: Record) -> str:
    raw = batch.no_timestamp if rec.timestamp is None else rec.timestamp
    klen = 0 if rec.key is None else len(rec.key)
    vlen = 0 if rec.value is None else len(rec.value)
    if batch.magic >= 2:
        return f"DefaultRecord(offset={rec.offset}, timestamp={raw}, key={klen} bytes, value={vlen} bytes)"
    return (f"LegacyRecord(magic={batch.magic}, offset={rec.offset}, timestamp={raw}, key={klen} bytes, "
            f"value={vlen} bytes)")


# ------------------------------------------------------------------------------------ validator
class LogValidator:
    """A topic's validation policy, as a broker's LogValidator applies it.

    timestamp_type: the topic's message.timestamp.type (CreateTime / LogAppendTime).
    before_max_ms / after_max_ms: KIP-937 bounds (default Long.MAX_VALUE, as Kafka 3.6-3.9).
    difference_max_ms: the deprecated symmetric bound, used for either of the two above left at
      Long.MAX_VALUE (Kafka 3.6-3.9's LogConfig rule).
    compacted: cleanup.policy=compact (records need a key).
    max_message_bytes: the largest batch accepted (default 1048588).
    magic / compression: the topic's message format and codec; compression=None keeps the
      producer's codec (compression.type=producer).
    compression_level: the topic codec's level (Kafka's compression.<codec>.level; None: its default).
    timestamp_extended: behave as a KIP-228 "new broker": write extended batches (bit 7), turning a
      non-extended batch's -1 ("no timestamp") into Long.MIN_VALUE.
    monotonic_log_append_time: stamp max(last stamped time, now) (KIP-32), so LogAppendTime never
      goes backwards when the clock does.
    allow_drop_headers: down-conversion below magic 2 drops headers instead of refusing.
    topic_partition: named in error messages as Kafka names it ("in topic partition t-0").
    """

    def __init__(self, timestamp_type: W.TimestampType = W.TimestampType.CREATE_TIME, before_max_ms: int = LONG_MAX,
                 after_max_ms: int = LONG_MAX, *, difference_max_ms: int | None = None, compacted: bool = False,
                 max_message_bytes: int = W.DEFAULT_MAX_MESSAGE_BYTES, magic: int = W.CURRENT_MAGIC_VALUE,
                 compression: W.Compression | None = None, compression_level: int | None = None,
                 timestamp_extended: bool = False,
                 monotonic_log_append_time: bool = False, allow_drop_headers: bool = False,
                 topic_partition: str | None = None,
                 max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
        self.timestamp_type = W.TimestampType(timestamp_type)
        if self.timestamp_type == W.TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("a topic's timestamp type is CREATE_TIME or LOG_APPEND_TIME")
        self.before_max_ms_config = _limit("before_max_ms", before_max_ms)
        self.after_max_ms_config = _limit("after_max_ms", after_max_ms)
        self.difference_max_ms = None if difference_max_ms is None else _limit("difference_max_ms",
                                                                               difference_max_ms)
        self.compacted = bool(compacted)
        self.max_message_bytes = int(max_message_bytes)
        if magic not in (0, 1, 2):
            raise ValueError(f"magic must be 0, 1 or 2, not {magic}")
        self.magic = magic
        self.compression = None if compression is None else W.Compression(compression)
        # the topic codec's level (compression.<codec>.level); a "producer" topic rebuilds at the
        # producer codec's default level (Kafka's BrokerCompressionType.targetCompression)
        if self.compression is None and compression_level is not None:
            raise InvalidConfigurationError("A compression level needs a topic codec", expected="compression set",
                                            found="compression=None (the producer's codec)")
        self.compression_level = None if self.compression is None else check_level(self.compression,
                                                                                   compression_level)
        self.timestamp_extended = bool(timestamp_extended)
        self.monotonic_log_append_time = bool(monotonic_log_append_time)
        self.allow_drop_headers = bool(allow_drop_headers)
        self.topic_partition = topic_partition
        self.max_decompressed_bytes = max_decompressed_bytes
        self.last_log_append_time = W.NO_TIMESTAMP

    # -- effective configuration (LogConfig.getMessageTimestampBeforeMaxMs / AfterMaxMs)
    @property
    def before_max_ms(self) -> int:
        if self.before_max_ms_config == LONG_MAX and self.difference_max_ms is not None:
            return self.difference_max_ms
        return self.before_max_ms_config

    @property
    def after_max_ms(self) -> int:
        if self.after_max_ms_config == LONG_MAX and self.difference_max_ms is not None:
            return self.difference_max_ms
        return self.after_max_ms_config

    def bounds(self, now_ms: int) -> tuple[int, int]:
        """The accepted CreateTime range [now - before, now + after], saturated (DESIGN.md 4)."""
        return _backend.core.timestamp_bounds(_int64("now_ms", now_ms), self.before_max_ms, self.after_max_ms)

    def __repr__(self) -> str:
        return (f"LogValidator(timestamp_type={self.timestamp_type.name}, before_max_ms={self.before_max_ms}, "
                f"after_max_ms={self.after_max_ms}, compacted={self.compacted}, magic={self.magic}, "
                f"compression={'producer' if self.compression is None else self.compression.name}, "
                f"timestamp_extended={self.timestamp_extended})")

    # -- public
    def validate(self, data: Buffer, now_ms: int, *, from_client: bool = True) -> ValidationResult:
        """Check `data` as a broker checks an append; raise the first failing batch's error.

        from_client=True: `data` is a produce request (Kafka's AppendOrigin.CLIENT): one batch when
        it is magic 2 or compressed, baseOffset 0, no control batches, a sequence with a producer id.
        from_client=False: `data` is log data (a segment): any number of batches of any magic,
        offsets must increase; only the batch-local checks and the record checks apply.
        Records are decoded one batch at a time, so memory stays bounded on large segments.
        """
        now = _int64("now_ms", now_ms)
        lo, hi = self.bounds(now)
        n_batches = n_records = n_missing = warned = 0
        best = None  # (timestamp, offset)
        for chk in self._checked(data, now, from_client):
            n_batches += 1
            n_records += len(chk)
            n_missing += chk.missing
            found = _column_max(chk)
            if found is not None and (best is None or found[0] > best[0]):
                best = (found[0], int(chk.offsets[found[1]]))
            warned += self._maybe_warn_future(chk, now, found)
            chk.release()  # free this batch's records before the next one decodes (cache-friendly)
        mv = memoryview(data)
        return ValidationResult(n_batches, n_records, n_missing, None if best is None else best[0],
                                None if best is None else best[1], lo, hi, warned, mv.nbytes)

    def validate_and_assign(self, data: Buffer, next_offset: int, now_ms: int, *,
                            partition_leader_epoch: int | None = None,
                            from_client: bool = True) -> tuple[bytes, AppendInfo]:
        """Validate, then assign offsets from `next_offset` and convert to the topic's format.

        Returns (bytes to append, AppendInfo). Batches keep their bytes and are patched in place
        (baseOffset, partitionLeaderEpoch, maxTimestamp and the timestamp-type bit, CRC only when a
        covered field changed) when the magic and codec are kept; otherwise they are rebuilt.
        partition_leader_epoch: written into magic 2 batches; None leaves it as sent.
        """
        out, info = self._assign(data, next_offset, now_ms, partition_leader_epoch, from_client)
        return (out if type(out) is bytes else bytes(out)), info

    def _assign(self, data: Buffer, next_offset: int, now_ms: int, partition_leader_epoch: int | None,
                from_client: bool) -> tuple[bytes | bytearray, AppendInfo]:
        """validate_and_assign's work; the output may be a bytearray (Log.append writes it as it is):
        when every batch is patched in place, the input is copied once and patched there."""
        now = _int64("now_ms", now_ms)
        next_offset = _int64("next_offset", next_offset)
        ple = None if partition_leader_epoch is None else int(partition_leader_epoch)
        # offsets are re-assigned here, so they need not increase (Kafka checks that only for
        # appends that keep their offsets)
        checked = list(self._checked(data, now, from_client, monotonic=False))
        lat = self.timestamp_type == W.TimestampType.LOG_APPEND_TIME
        stamp = None
        if lat:
            stamp = max(now, self.last_log_append_time) if self.monotonic_log_append_time else now
        groups = [checked] if from_client else [[c] for c in checked]
        first_offset = next_offset
        rebuilt = False
        tracker = _MaxTracker()
        in_place = [self._in_place(group) for group in groups]
        result: bytes | bytearray
        if all(in_place):  # the input's bytes, copied once and patched batch by batch (no rebuild moves them)
            result = bytearray(memoryview(data).cast("B"))
            for chk in checked:
                next_offset = self._patch(chk, next_offset, stamp, ple, tracker, result)[1]
        else:
            out: list[bytes | bytearray] = []
            for group, keep in zip(groups, in_place):
                if keep:
                    for chk in group:
                        patched, next_offset = self._patch(chk, next_offset, stamp, ple, tracker)
                        out.append(patched)
                else:
                    rebuilt = True
                    built, next_offset = self._rebuild(group, next_offset, stamp, ple, tracker)
                    out.append(built)
            result = b"".join(out)
        n_out = self._check_output_sizes(result) if rebuilt else len(checked)
        for chk in checked:  # accepted: now the migration WARN
            self._maybe_warn_future(chk, now, _column_max(chk))
        if stamp is not None:  # a LogAppendTime topic (stamp is set exactly then)
            self.last_log_append_time = stamp
            max_ts, off_max = stamp, (first_offset if next_offset > first_offset else -1)
            if self.magic == 0:
                max_ts, off_max = W.NO_TIMESTAMP, -1
        elif tracker.value is None:  # magic 0 only: no timestamps at all
            max_ts, off_max = W.NO_TIMESTAMP, -1
        else:
            max_ts, off_max = tracker.value, tracker.offset
        info = AppendInfo(first_offset, next_offset - 1, max_ts, off_max, stamp, rebuilt,
                          sum(len(c) for c in checked), n_out, memoryview(data).nbytes, len(result))
        return result, info

    # -- validation
    def _where(self) -> str:
        return f" in topic partition {self.topic_partition}" if self.topic_partition else ""

    def _checked(self, data: Buffer, now: int, from_client: bool, monotonic: bool = True) -> Iterator[_Checked]:
        """Yield a _Checked per batch, raising the first batch-level or record-level failure."""
        before, after = self.before_max_ms, self.after_max_ms
        lo, hi = _backend.core.timestamp_bounds(now, before, after)
        first = None
        prev_last = None
        index = -1
        for index, batch in enumerate(iter_batches(data, True, strict=True,
                                                   max_decompressed_bytes=self.max_decompressed_bytes)):
            if first is None:
                first = batch
            elif from_client and (first.magic >= 2 or first.compression != W.Compression.NONE
                                  or batch.compression != W.Compression.NONE):
                raise InvalidRecordError("Compressed outer record has more than one batch", position=batch.position,
                                         base_offset=batch.base_offset, expected="one batch",
                                         found=f"a batch at index {index}")
            self._check_batch(batch, first, from_client, prev_last if monotonic else None)
            prev_last = batch.last_offset
            yield self._check_records(index, batch, now, before, after, lo, hi)
        if first is None:
            raise InvalidRecordError("Record batch has no batches at all", position=0,
                                     expected="at least one batch", found=f"{memoryview(data).nbytes} bytes")

    def _check_batch(self, batch: Batch, first: Batch, from_client: bool, prev_last: int | None) -> None:
        where = self._where()
        pos, base = batch.position, _entry_offset(batch)
        if batch.size_in_bytes > self.max_message_bytes:
            raise RecordTooLargeError(f"The record batch size in the append is {batch.size_in_bytes} bytes which "
                                      f"exceeds the maximum configured value of {self.max_message_bytes}{where}",
                                      position=pos, base_offset=base,
                                      expected=f"<= {self.max_message_bytes} bytes", found=batch.size_in_bytes)
        if from_client:
            if batch.magic != first.magic:
                raise InvalidRecordError(f"Batch magic {batch.magic} is not the same as the first batch's magic "
                                         f"byte {first.magic}{where}", position=pos + W.MAGIC_OFFSET,
                                         base_offset=base, expected=f"magic {first.magic}", found=batch.magic)
            if batch.magic >= 2:
                if batch.base_offset != 0:
                    raise InvalidRecordError(f"The baseOffset of the record batch in the append{where} should be 0, "
                                             f"but it is {batch.base_offset}", position=pos, base_offset=base,
                                             expected="baseOffset 0", found=batch.base_offset)
                from_offsets = batch.last_offset - batch.base_offset + 1
                if from_offsets <= 0:
                    raise InvalidRecordError(f"Batch has an invalid offset range: [{batch.base_offset}, "
                                             f"{batch.last_offset}]{where}", position=pos + W.LAST_OFFSET_DELTA_OFFSET,
                                             base_offset=base, expected="lastOffsetDelta >= 0",
                                             found=from_offsets - 1)
                if batch.record_count <= 0:
                    raise InvalidRecordError(f"Invalid reported count for record batch: {batch.record_count}{where}",
                                             position=pos + W.RECORDS_COUNT_OFFSET, base_offset=base,
                                             expected="count > 0", found=batch.record_count)
                if from_offsets != batch.record_count:
                    raise InvalidRecordError(f"Inconsistent batch offset range [{batch.base_offset}, "
                                             f"{batch.last_offset}] and count of records {batch.record_count}{where}",
                                             position=pos + W.RECORDS_COUNT_OFFSET, base_offset=base,
                                             expected=f"count {from_offsets}", found=batch.record_count)
            if batch.is_control:
                raise InvalidRecordError(f"Clients are not allowed to write control records{where}",
                                         position=pos + W.ATTRIBUTES_OFFSET, base_offset=base,
                                         expected="a data batch", found="a control batch")
            if batch.producer_id >= 0 and batch.base_sequence < 0:
                raise InvalidRecordError(f"Invalid sequence number {batch.base_sequence} in record batch with "
                                         f"producerId {batch.producer_id}{where}",
                                         position=pos + W.BASE_SEQUENCE_OFFSET, base_offset=base,
                                         expected="baseSequence >= 0", found=batch.base_sequence)
        elif prev_last is not None and batch.last_offset <= prev_last:
            raise InvalidOffsetError("Out of order offsets", position=pos, base_offset=base,
                                     expected=f"last offset > {prev_last}", found=batch.last_offset)
        if batch.is_transactional and self.magic < 2:
            raise UnsupportedForMessageFormatError(f"Transactional records cannot be used with magic version "
                                                   f"{self.magic}", position=pos, base_offset=base,
                                                   expected="magic 2", found=f"magic {self.magic}")
        if batch.producer_id >= 0 and self.magic < 2:
            raise UnsupportedForMessageFormatError(f"Idempotent records cannot be used with magic version "
                                                   f"{self.magic}", position=pos, base_offset=base,
                                                   expected="magic 2", found=f"magic {self.magic}")

    def _check_records(self, index: int, batch: Batch, now: int, before: int, after: int, lo: int,
                       hi: int) -> _Checked:
        no_ts = batch.no_timestamp
        cols = v2_record_fields(batch) if isinstance(batch, RecordBatch) else None
        records: Sequence[Record] | _LazyRecords
        if cols is not None:  # the record-fields kernel: no Record object, no key or value copied
            records = _LazyRecords(batch)
            offsets, ts, key_valid = cols
            n = len(ts)
            missing = int(np.count_nonzero(ts == no_ts))
            key_null = ~key_valid
        else:
            records = batch.records()
            n = len(records)
            try:  # the common case: every record has a timestamp
                ts = np.fromiter(map(_TIMESTAMP, records), np.int64, n)
                missing = 0
            except TypeError:  # None: "no timestamp", as the batch's sentinel so the kernel skips it
                tl = list(map(_TIMESTAMP, records))
                missing = tl.count(None)
                ts = np.array([no_ts if t is None else t for t in tl], dtype=np.int64)
            offsets = np.fromiter((r.offset for r in records), np.int64, n)
            key_null = np.fromiter((r.key is None for r in records), np.bool_, n)
        inner = None
        errors = []  # (record index, is_timestamp_error, message)
        if isinstance(batch, LegacyRecordBatch) and batch.attributes & W.LEGACY_COMPRESSION_CODEC_MASK:
            inner = self._inner_entries(batch)
            for i, (_off, imagic) in enumerate(inner):
                if imagic != batch.magic:
                    errors.append((i, False, f"Record {_record_repr(batch, records[i])}'s magic does not match "
                                             f"outer magic {batch.magic}{self._where()}"))
        bad_key = set()
        if self.compacted:
            for i in np.flatnonzero(key_null).tolist():
                if i not in bad_key:
                    bad_key.add(i)
                    errors.append((i, False, f"Compacted topic cannot accept message without key{self._where()}"))
        bad_key.update(e[0] for e in errors)
        lat_batch = batch.timestamp_type == W.TimestampType.LOG_APPEND_TIME
        lat_msg = "Invalid timestamp type in message {}. Producer should not set timestamp type to LogAppendTime."
        if self.timestamp_type == W.TimestampType.CREATE_TIME:
            first, _n_old, _n_new = _backend.core.check_timestamps(ts, now, before, after, no_ts)
            if first >= 0:
                for i in range(first, n):
                    t = int(ts[i])
                    if (t < lo or t > hi) and not (missing and t == no_ts) and i not in bad_key:
                        errors.append((i, True, f"Timestamp {t} of message with offset {int(offsets[i])} is out "
                                                f"of range. The timestamp should be within [{lo}, {hi}]"))
            if lat_batch and missing:
                for i in range(n):
                    if ts[i] == no_ts and i not in bad_key:
                        errors.append((i, True, lat_msg.format(_record_repr(batch, records[i]))))
        elif lat_batch:
            for i in range(n):
                if i not in bad_key:
                    errors.append((i, True, lat_msg.format(_record_repr(batch, records[i]))))
        if errors:
            self._raise_record_errors(index, batch, records, errors, lo, hi)
        return _Checked(index, batch, records if isinstance(records, list) else None, offsets, ts, missing, inner)

    def _inner_entries(self, batch: LegacyRecordBatch) -> list[tuple[int, int]]:
        """(inner offset, inner magic) of each message in a legacy wrapper (decoding already checked them)."""
        buf = batch._buf
        mpos = batch.position + W.LOG_OVERHEAD
        _crc, magic, _a, _ts, _key, value = parse_message(buf, mpos, batch.position + batch.size_in_bytes,
                                                          batch.offset)
        # a wrapper's value is its compressed inner set (decoding the batch already checked it is there)
        inner = decompress(batch.compression, cast("Buffer", value), magic, self.max_decompressed_bytes, mpos)
        out = []
        p, n = 0, len(inner)
        while n - p >= W.LOG_OVERHEAD:
            off, size = struct.unpack_from(">qi", inner, p)
            if size > n - p - W.LOG_OVERHEAD:
                break
            out.append((off, struct.unpack_from(">b", inner, p + W.MAGIC_OFFSET)[0]))
            p += W.LOG_OVERHEAD + size
        return out

    def _raise_record_errors(self, index: int, batch: Batch, records: Sequence[Record] | _LazyRecords,
                             errors: list[tuple[int, bool, str]], lo: int, hi: int) -> NoReturn:
        errors.sort(key=lambda e: e[0])
        record_errors = [RecordError(index, i, records[i].offset, msg) for i, _t, msg in errors]
        base = _entry_offset(batch)
        n_ts = sum(1 for e in errors if e[1])
        if n_ts:
            raise InvalidTimestampError(INVALID_TIMESTAMP_MESSAGE, record_errors, position=batch.position,
                                        base_offset=base, expected=f"timestamps within [{lo}, {hi}]"
                                        if self.timestamp_type == W.TimestampType.CREATE_TIME
                                        else "CreateTime batches", found=f"{n_ts} invalid of {len(records)} records")
        shown = ", ".join(e.kafka_repr() for e in record_errors[:3])
        err = InvalidRecordError(f"One or more records have been rejected due to {len(record_errors)} record errors "
                                 f"in total, and only showing the first three errors at most: [{shown}]",
                                 position=batch.position, base_offset=base, expected="records that pass validation",
                                 found=f"{len(record_errors)} rejected of {len(records)} records")
        err.record_errors = record_errors  # as InvalidTimestampError carries them
        raise err

    def _maybe_warn_future(self, chk: _Checked, now: int, found: tuple[int, int] | None) -> int:
        """One WARN per accepted CreateTime batch holding a record more than an hour ahead of now."""
        if self.timestamp_type != W.TimestampType.CREATE_TIME or found is None or found[0] - now <= FUTURE_WARN_MS:
            return 0
        _f, _o, n_new = _backend.core.check_timestamps(chk.ts, now, LONG_MAX, FUTURE_WARN_MS,
                                                       chk.batch.no_timestamp if chk.missing else None)
        b = chk.batch
        log.warning("Batch %d at byte %d (base offset %d) has %d record(s) with a CreateTime more than one hour "
                    "ahead of now (%d); the largest is %d. Kafka 4.0 rejects these by default "
                    "(message.timestamp.after.max.ms = %d).", chk.index, b.position,
                    _entry_offset(b), n_new, now, found[0], FUTURE_WARN_MS)
        return 1

    # -- assignment
    def _in_place(self, group: list[_Checked]) -> bool:
        """Kafka's rule for patching bytes instead of re-building (LogValidator, §4.2 item 6)."""
        first = group[0].batch
        source = W.Compression.NONE
        for chk in group:
            if chk.batch.compression != W.Compression.NONE:
                source = chk.batch.compression
        target = source if self.compression is None else self.compression
        if source == W.Compression.NONE and target == W.Compression.NONE:
            in_place = all(c.batch.magic == self.magic for c in group)
        else:
            in_place = source == target and first.magic == self.magic and self.magic != W.MAGIC_VALUE_V0
            if source == W.Compression.NONE and first.is_control:
                in_place = True  # control batches are never compressed
            if in_place and first.magic == 1:
                # clients that get v1 inner offsets wrong are rebuilt rather than rejected (Kafka)
                expected = 0
                for chk in group:
                    for r in chk.records:
                        if r.offset != expected:
                            return False
                        expected += 1
        if in_place and self.timestamp_type == W.TimestampType.CREATE_TIME:
            for chk in group:
                b = chk.batch
                if b.timestamp_type == W.TimestampType.LOG_APPEND_TIME and (b.magic >= 2 or b.compression):
                    # A producer's LogAppendTime batch was validated on its max timestamp. Clearing the
                    # bit in place would expose create times nobody checked (Kafka does just that);
                    # rebuilding writes the validated timestamp into every record.
                    return False
        if in_place and self.timestamp_extended and self.timestamp_type == W.TimestampType.CREATE_TIME:
            # KIP-228 up-conversion of -1 to Long.MIN_VALUE changes the deltas: rebuild
            for chk in group:
                if chk.batch.magic >= 2 and not chk.batch.timestamp_extended and chk.missing:
                    return False
        return in_place

    def _patch(self, chk: _Checked, next_offset: int, stamp: int | None, ple: int | None,
               tracker: _MaxTracker, into: bytearray | None = None) -> tuple[bytearray, int]:
        """The batch with its offsets assigned and fields patched: a copy of its bytes, or (when
        `into` holds the whole input) patched where it is in `into` (which is returned then)."""
        b = chk.batch
        if into is None:
            chunk, at = bytearray(b.raw), 0
        else:
            chunk, at = into, b.position
        if b.magic >= 2:
            delta = b.last_offset - b.base_offset
            _Q.pack_into(chunk, at + W.BASE_OFFSET_OFFSET, next_offset)
            if ple is not None:
                _I.pack_into(chunk, at + W.PARTITION_LEADER_EPOCH_OFFSET, ple)
            attrs = b.attributes
            new_attrs = attrs
            extended = b.timestamp_extended
            if self.timestamp_extended and not extended:
                # KIP-228 new broker. Safe in place: _in_place sent CreateTime batches holding -1 to a
                # rebuild; under LogAppendTime the records' own create times are not read.
                new_attrs |= W.TIMESTAMP_EXTENDED_FLAG_MASK
                extended = True
            if stamp is not None:
                new_attrs |= W.TIMESTAMP_TYPE_MASK
                new_max = stamp
            else:
                new_attrs &= ~W.TIMESTAMP_TYPE_MASK
                start = W.NO_TIMESTAMP_EXTENDED if extended else W.NO_TIMESTAMP
                new_max, j = _batch_max(chk, start)
                tracker.offer(new_max, -1 if j < 0 else next_offset + int(chk.offsets[j]) - b.base_offset)
            if new_attrs != attrs or new_max != b.max_timestamp:
                _H.pack_into(chunk, at + W.ATTRIBUTES_OFFSET, _s16(new_attrs))
                _Q.pack_into(chunk, at + W.MAX_TIMESTAMP_OFFSET, new_max)
                _U32.pack_into(chunk, at + W.CRC_OFFSET, _backend.core.crc32c(
                    memoryview(chunk)[at + W.ATTRIBUTES_OFFSET:at + b.size_in_bytes]))
            return chunk, next_offset + delta + 1
        n = len(chk)
        last = next_offset + n - 1
        _Q.pack_into(chunk, at + W.OFFSET_OFFSET, last)
        if isinstance(b, LegacyRecordBatch) and b.magic == 1:
            attrs = b.attributes
            if stamp is not None:
                new_attrs, new_ts = attrs | W.LEGACY_TIMESTAMP_TYPE_MASK, stamp
            else:
                new_attrs = attrs & ~W.LEGACY_TIMESTAMP_TYPE_MASK
                if attrs & W.LEGACY_COMPRESSION_CODEC_MASK:
                    new_ts, j = _batch_max(chk, W.NO_TIMESTAMP)
                    tracker.offer(new_ts, -1 if j < 0 else next_offset + j)
                else:
                    new_ts = b.timestamp  # the message's own timestamp: never rewritten
                    tracker.offer(new_ts, next_offset if new_ts > W.NO_TIMESTAMP else -1)
            if new_attrs != attrs or new_ts != b.timestamp:
                chunk[at + _LEGACY_ATTRS_AT] = new_attrs
                _Q.pack_into(chunk, at + _LEGACY_TS_AT, new_ts)
                _U32.pack_into(chunk, at + _LEGACY_CRC_AT,
                               zlib.crc32(memoryview(chunk)[at + _LEGACY_MAGIC_AT:at + b.size_in_bytes]))
        return chunk, last + 1

    def _rebuild(self, group: list[_Checked], next_offset: int, stamp: int | None, ple: int | None,
                 tracker: _MaxTracker) -> tuple[bytes | bytearray, int]:
        first = group[0].batch
        to_magic = self.magic
        source = W.Compression.NONE
        for chk in group:
            if chk.batch.compression != W.Compression.NONE:
                source = chk.batch.compression
        target = source if self.compression is None else self.compression
        extended = to_magic >= 2 and (self.timestamp_extended or any(c.batch.timestamp_extended for c in group))
        lat = stamp is not None
        builder = BatchBuilder(
            to_magic, target, next_offset, W.TimestampType.LOG_APPEND_TIME if lat else W.TimestampType.CREATE_TIME,
            extended, first.producer_id, first.producer_epoch, first.base_sequence, first.is_transactional,
            is_control=first.is_control,
            partition_leader_epoch=(W.NO_PARTITION_LEADER_EPOCH if to_magic < 2 else ple if ple is not None
                                    else first.partition_leader_epoch),
            log_append_time=stamp, compression_level=self.compression_level if target == self.compression else None)
        start = W.NO_TIMESTAMP_EXTENDED if extended else W.NO_TIMESTAMP
        best, best_off = start, -1
        offset = next_offset
        for chk in group:
            b = chk.batch
            for r in chk.records:
                headers = r.headers
                if headers and to_magic < 2:
                    if not self.allow_drop_headers:
                        raise UnsupportedForMessageFormatError(
                            f"Magic v{to_magic} does not support record headers", position=b.position,
                            base_offset=b.base_offset, expected="records without headers (or allow_drop_headers=True)",
                            found=f"{len(headers)} header(s) on the record at offset {r.offset}")
                    headers = ()
                ts = r.timestamp
                if extended and ts == W.NO_TIMESTAMP_EXTENDED:
                    raise UnsupportedForMessageFormatError(
                        f"Timestamp {ts} is the 'no timestamp' value of an extended batch and cannot be written "
                        "as a real timestamp", position=b.position, base_offset=b.base_offset,
                        expected="a timestamp above Long.MIN_VALUE", found=ts)
                if ts == W.NO_TIMESTAMP and to_magic == 1 and b.timestamp_extended:
                    raise UnsupportedForMessageFormatError(
                        "Timestamp -1 (1969-12-31T23:59:59.999Z) cannot be written in magic 1, where -1 means "
                        "no timestamp", position=b.position, base_offset=b.base_offset,
                        expected="magic 2 with the extended timestamp bit", found=f"magic {to_magic}")
                builder.append(ts, r.key, r.value, headers, tombstone=r.is_tombstone, offset=offset)
                if to_magic >= 1 and not lat and ts is not None and ts > best:
                    best, best_off = ts, offset
                offset += 1
        if not lat and to_magic >= 1:
            tracker.offer(best, best_off)
        return builder.build(), offset

    def _check_output_sizes(self, data: bytes | bytearray) -> int:
        s = _backend.core.scan_batches(data, 0, -1, False)
        sizes = s["size"]
        if len(sizes) and int(sizes.max()) > self.max_message_bytes:
            i = int(sizes.argmax())
            raise RecordTooLargeError(f"The converted record batch size is {int(sizes[i])} bytes which exceeds the "
                                      f"maximum configured value of {self.max_message_bytes}{self._where()}",
                                      position=int(s["position"][i]), base_offset=int(s["base_offset"][i]),
                                      expected=f"<= {self.max_message_bytes} bytes", found=int(sizes[i]))
        return len(sizes)


class _LazyRecords:
    """batch.records(), decoded only when an error message or a rebuild needs the objects."""

    __slots__ = ("batch",)

    def __init__(self, batch: Batch) -> None:
        self.batch = batch

    def __getitem__(self, i: int) -> Record:
        return self.batch.records()[i]

    def __iter__(self) -> Iterator[Record]:
        return iter(self.batch.records())

    def __len__(self) -> int:
        return self.batch.record_count


def v2_record_fields(batch: RecordBatch) -> tuple[Any, Any, Any]:
    """(offsets, timestamps, key_valid) of one v2 batch's records from the record_fields_v2 kernel
    ("no timestamp" as the batch's sentinel; keys and values are checked, not copied), or raise:
    batch.records() then raises the canonical error (positions inside compressed data mapped to
    the batch)."""
    attrs = batch.attributes
    try:
        if attrs & W.COMPRESSION_CODEC_MASK:
            buf = batch.records_bytes()
            start, end = 0, len(buf)
        else:
            buf = batch._buf
            at = batch.position - batch._origin
            start, end = at + W.RECORDS_OFFSET, at + batch.size_in_bytes
        fields: tuple[Any, Any, Any] = _backend.core.record_fields_v2(
            buf, start, end, batch.record_count, batch.base_offset, batch.first_timestamp, batch.max_timestamp, attrs)
        return fields
    except KBatchError:
        batch.records()  # raises the same problem, located as the object API locates it
        raise


class _MaxTracker:
    """Largest timestamp so far and the offset of the first record holding it (strictly greater wins)."""

    __slots__ = ("value", "offset")

    def __init__(self) -> None:
        self.value: int | None = None
        self.offset = -1

    def offer(self, value: int, offset: int) -> None:
        if self.value is None:
            self.value, self.offset = value, offset
        elif value > self.value:
            self.value, self.offset = value, offset
        elif self.offset < 0 and value == self.value and offset >= 0:
            self.offset = offset


def _s16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def _column_max(chk: _Checked) -> tuple[int, int] | None:
    """(max timestamp, record index) over records that have one, or None."""
    ts = chk.ts
    n = len(ts)
    if n == 0 or chk.missing == n:
        return None
    if not chk.missing:
        j = int(ts.argmax())
        return int(ts[j]), j
    keep = np.flatnonzero(ts != chk.batch.no_timestamp)
    j = int(keep[int(ts[keep].argmax())])
    return int(ts[j]), j


def _batch_max(chk: _Checked, start: int) -> tuple[int, int]:
    """Kafka's running max from `start` (strictly greater): (value, record index or -1)."""
    found = _column_max(chk)
    if found is None or found[0] <= start:
        return start, -1
    return found
