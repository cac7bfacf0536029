"""Log compaction (Kafka's LogCleaner) with KIP-87 tombstones and KIP-534 delete horizons.

`compact(log_dir, now_ms, ...)` rewrites the cleanable segments of one partition directory the
way a broker's cleaner does (kafka-format.md §3, §7):

* the latest record per key survives; keyless records are dropped;
* a tombstone (KIP-87 flag set, or null value) survives until its delete horizon. A kept v2 batch
  holding a tombstone without a horizon is rewritten with attribute bit 6 set and
  baseTimestamp = now + delete.retention.ms; a later pass at or after the horizon drops it.
  Legacy (magic 0/1) tombstones follow the legacy rule: kept while the segment's lastModified is
  after ``legacy_delete_horizon_ms``;
* aborted transactions' records are removed; a transaction marker gets its delete horizon on the
  first run that reads no batch of its transaction (the run that removes the data keeps the marker
  as it is, as Kafka's cleaner does: so a second run at the same ``now_ms`` may still stamp
  horizons), and goes on a run after that horizon;
* a batch emptied of records that holds its producer's last sequence is kept as a 61-byte
  header-only batch;
* survivors keep their codec, producer fields, epoch, timestamp type, extended flag and offsets;
  a rewritten v2 batch keeps the original lastOffset; a batch where nothing changes is copied byte
  for byte. Negative and extended timestamps are carried through unchanged.

Memory is bounded as Kafka's cleaner bounds it: the key map (`OffsetMap`, in the compiled core
with its pure twin: 24-byte entries of a 16-byte key digest and an offset) takes at most
``dedupe_buffer_size`` bytes (log.cleaner.dedupe.buffer.size, 128 MiB) and maps keys until it
holds slots * ``load_factor`` of them (log.cleaner.io.buffer.load.factor, 0.9). When it fills,
compaction runs in passes as the cleaner runs rounds: map from the first offset not mapped yet
until full, clean every cleanable segment starting below what was mapped (again, from the last
pass's output), go on. Records are filtered and written again by the map's record loops, with no
Python object per record; segments are read through pread windows. The active (last) segment is
not cleaned unless ``clean_active_segment=True``; nor is anything from the first open transaction on.

Segments are grouped as Kafka's cleaner groups them (Cleaner.groupSegmentsBySize), in every pass:
a group of consecutive segments grows while the summed .log sizes stay within ``segment_bytes``
(segment.bytes), the summed .index sizes and the summed .timeindex sizes each within
``segment_index_bytes`` (segment.index.bytes), and the next segment's last offset (estimated, as
Kafka does, by the base offset after it, or the first uncleanable offset) within Int.MaxValue of
the group's base offset. Each group is cleaned into ONE segment named after its first segment,
keeping the last member's lastModified, its .index/.timeindex built as the broker builds a cleaned
segment's (an entry before a batch once more than index.interval.bytes were written since the last,
a final time entry) and its .txnindex the members' entries whose aborted data this run read.

Safety, before anything is written:

* compaction holds the partition directory's `.lock` (a directory another writer or a running
  broker holds is refused, LogDirectoryLockedError);
* every segment is read in full first: CRCs, framing, and a complete last batch. A partition with
  any byte it cannot read (a corrupt or truncated batch, a file named like a segment that is not
  one, a FIFO, a directory) is refused with UncleanablePartitionError and nothing changes. Kafka's
  cleaner marks such a partition uncleanable; neither ever truncates;
* ``dry_run=True`` reads and computes everything and writes nothing (the stats say what would be
  removed and how many bytes saved); ``output_dir`` writes the compacted partition to a new
  directory and leaves the input as it is.

Files: each group's cleaned segment is written to a scratch directory inside the log directory,
its indexes rebuilt there, then moved beside the input as ``<base>.log.cleaned`` (and index files
likewise). Once every segment is written, a commit marker (``.kbatch-compaction-commit``) naming
each output segment and the input segments it replaces is written atomically; then the
``.cleaned`` files are renamed to ``.swap``, and, group by group, earliest first (Kafka's
replaceSegments order): the group's other segments are renamed to ``.deleted``, the old first
segment's indexes go, the ``.swap`` files are renamed over it, the ``.deleted`` files are removed;
then the marker goes. Before the marker exists a failure or a kill leaves the input untouched (a
writer's next open removes the new files); after it, a writer's open
(log_loader.clean_directory, also run by `compact` on entry) completes the swap from whatever
step it reached, with the marker's groups. So a crash at any point recovers to the original log
or the compacted one, never a mix or a loss. A reader that opens the directory mid-swap without
recovering it (read-only) sees a valid log: every segment it finds is whole, original or cleaned,
though a group's segments renamed to ``.deleted`` before its output landed are missing from that
view until a writer's open finishes the swap (their records are in the ``.swap`` file).

Differences from Kafka, on purpose:

* every producer seen in the log is "active" (no producer-id expiration without a broker);
* kbatch never throws on negative or extended timestamps (Kafka's MemoryRecordsBuilder would);
* the last batch of the log is kept as a header-only batch when it empties (only possible with
  ``clean_active_segment=True``), so the log end offset never moves backwards;
* the key map grows towards its budget as keys come, instead of taking it whole; keys of up to 15
  bytes are kept as themselves (no two can collide), longer ones by MD5 as Kafka keeps every key;
* all passes run in one call and commit once (Kafka commits each round and records its progress in
  cleaner-offset-checkpoint);
* header key bytes of a rewritten record are copied as they are (Kafka's cleaner decodes them as
  UTF-8 and encodes them again, which replaces invalid sequences).
"""
from __future__ import annotations

import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .. import _backend
from . import files as _files
from .. import _wire as W
from . import loader as log_loader
from .layout import BROKER
from ..record.batch import RecordBatch
from ..errors import (FileChangedError, InvalidConfigurationError, KBatchError,
                     LogDirectoryLockedError, LogWriteError, StorageError, UncleanablePartitionError)
from ..record.file_records import FileRecords, batch_at, crc_error_at, shift_error
from .cleaned_batches import _header_of, _rebuilt_v2, empty_batch_header, rebuild_batch, with_last_offset
from .cleaner_transactions import AbortedTxn, CleanedTransactionMetadata

if TYPE_CHECKING:
    from .. import _core
    from .._core import Record
    from .._typing import Buffer, PathLike
    from ..record.file_records import Window

    from ..record.batch import Batch

_SCRATCH_PREFIX = log_loader.SCRATCH_PREFIX
_INDEX_SUFFIXES = log_loader.SWAPPED_SUFFIXES
_CLEANED = log_loader.CLEANED
_SWAP = log_loader.SWAP
DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes
_COPIED_FILES = ("partition.metadata", "leader-epoch-checkpoint")  # copied as they are by output_dir

# BatchRetention (MemoryRecords.RecordFilter.BatchRetention)
DELETE = "DELETE"
DELETE_EMPTY = "DELETE_EMPTY"
RETAIN_EMPTY = "RETAIN_EMPTY"


def _checkpoint(step: str) -> None:
    """Called at each step of a compaction (tests replace it to simulate a crash there)."""
    _files.crash_point(f"compact:{step}")


# ------------------------------------------------------------------------------------------
@dataclass
class CleanerStats:
    """What a compaction read and wrote (Kafka's CleanerStats, plus tombstone and txn counts)."""

    segments_cleaned: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    distinct_keys: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    batches_read: int = 0
    batches_written: int = 0
    batches_copied: int = 0          # written byte for byte
    batches_rebuilt: int = 0         # records removed and/or delete horizon stamped
    empty_batches_written: int = 0   # 61-byte header-only batches kept for producer state
    records_read: int = 0
    records_written: int = 0
    invalid_records: int = 0         # keyless records (dropped)
    superseded_records: int = 0      # a later record has the same key
    tombstones_kept: int = 0
    tombstones_removed: int = 0      # past their delete horizon
    delete_horizons_set: int = 0     # batches newly stamped with a horizon
    aborted_records_removed: int = 0
    control_batches_removed: int = 0
    truncated_bytes: int = 0         # always 0: a partition with a partial batch is refused
    first_uncleanable_offset: int | None = None
    dry_run: bool = False            # nothing was written; the counts say what a run would do
    output_dir: str | None = None    # where the compacted copy went (None: in place)
    elapsed_s: float = 0.0
    map_elapsed_s: float = 0.0
    passes: int = 0                  # map-and-clean passes (more than one when the key map filled)
    buffer_utilization: float = 0.0  # the fullest the key map got, of its slots (Kafka's bufferUtilization)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def bytes_saved(self) -> int:
        return self.bytes_read - self.bytes_written

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_written


def OffsetMap(memory: int = W.DEFAULT_DEDUPE_BUFFER_SIZE,
              load_factor: float = W.DEFAULT_DEDUPE_LOAD_FACTOR) -> _core.OffsetMap:
    """The cleaner's key -> latest offset map of the live backend (kbatch._core.OffsetMap, or its
    pure twin): 24-byte entries (a 16-byte key digest: short keys as themselves, longer ones by
    MD5 as Kafka's SkimpyOffsetMap keys them; an offset) within `memory` bytes
    (log.cleaner.dedupe.buffer.size), mapping keys while fewer than slots * load_factor
    (log.cleaner.io.buffer.load.factor) are held."""
    return _backend.core.OffsetMap(memory, load_factor)


# ------------------------------------------------------------------------------------------
@dataclass
class _Segment:
    base_offset: int
    path: str
    size: int
    mtime_ns: int
    records: FileRecords       # opened once: the bytes read are those of this file, whatever happens later
    cleanable: bool = False
    end_offset: int = 0        # the next segment's base offset (the log end offset for the last)
    cleaned: bool = False      # the output of an earlier pass, not the input


class _Counts:
    """What cleaning one segment read, removed and wrote (merged into CleanerStats by pass)."""

    READ = ("batches_read", "bytes_read", "records_read")
    WRITTEN = ("batches_written", "batches_copied", "batches_rebuilt", "empty_batches_written", "records_written",
               "bytes_written", "tombstones_kept")
    REMOVED = ("invalid_records", "superseded_records", "tombstones_removed", "delete_horizons_set",
               "aborted_records_removed", "control_batches_removed")
    __slots__ = READ + WRITTEN + REMOVED
    batches_read: int
    bytes_read: int
    records_read: int
    batches_written: int
    batches_copied: int
    batches_rebuilt: int
    empty_batches_written: int
    records_written: int
    bytes_written: int
    tombstones_kept: int
    invalid_records: int
    superseded_records: int
    tombstones_removed: int
    delete_horizons_set: int
    aborted_records_removed: int
    control_batches_removed: int

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)


@dataclass
class _ProducerState:
    last_data_offset: int | None = None
    epoch: int = W.NO_PRODUCER_EPOCH


@dataclass
class _LogScan:
    """What a header-level walk of the whole log finds (the broker's producer state and .txnindex)."""

    aborted: list[AbortedTxn] = field(default_factory=list)
    producers: dict[int, _ProducerState] = field(default_factory=dict)
    open_txn_first_offset: dict[int, int] = field(default_factory=dict)
    last_batch_offset: int = -1


class _Discard:
    """The output of a dry run: counts what would be written."""

    def write(self, data: bytes | memoryview) -> int:
        return len(data)


def _horizon(now_ms: int, delete_retention_ms: int) -> int:
    return max(W.INT64_MIN, min(W.INT64_MAX, now_ms + delete_retention_ms))


# ------------------------------------------------------------------------------------------
class LogCleaner:
    """Compacts one partition directory. `clean()` runs the whole round and returns CleanerStats.

    Steps: `scan()` (producer state, aborted transactions, first uncleanable offset), then passes
    of `build_offset_map()` and `clean_segment()` per cleanable segment into a scratch directory,
    as Kafka's cleaner runs rounds: a pass maps keys from the first offset not mapped yet until
    the map is full (or the cleanable range is mapped), then cleans every cleanable segment that
    starts below the end of what it mapped (the segments of earlier passes again, from their
    cleaned bytes), in groups of consecutive segments (group_segments), one output segment per
    group with its indexes. Then the cleaned segments are swapped in (.cleaned -> .swap; the
    group's other segments -> .deleted; .swap renamed over the first; .deleted removed).
    """

    def __init__(self, log_dir: PathLike, now_ms: int, delete_retention_ms: int = 86_400_000, *,
                 clean_active_segment: bool = False, legacy_delete_horizon_ms: int | None = None,
                 index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES, verify_crc: bool = True,
                 max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES,
                 dedupe_buffer_size: int = W.DEFAULT_DEDUPE_BUFFER_SIZE,
                 load_factor: float = W.DEFAULT_DEDUPE_LOAD_FACTOR, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 segment_index_bytes: int = W.DEFAULT_SEGMENT_INDEX_BYTES) -> None:
        self.log_dir = os.fspath(log_dir)
        if not os.path.isdir(self.log_dir):
            raise FileNotFoundError(f"not a log directory: {self.log_dir}")
        self.now_ms = int(now_ms)
        self.delete_retention_ms = int(delete_retention_ms)
        if self.delete_retention_ms < 0:
            raise ValueError(f"delete_retention_ms must be >= 0, not {delete_retention_ms}")
        self.clean_active_segment = clean_active_segment
        for name, value in (("segment_bytes", segment_bytes), ("segment_index_bytes", segment_index_bytes)):
            if not 0 < value <= W.INT32_MAX:
                raise InvalidConfigurationError(f"{name} must be a positive int32", expected=f"1..{W.INT32_MAX}",
                                                found=value)
        self.segment_bytes = int(segment_bytes)
        self.segment_index_bytes = int(segment_index_bytes)
        self.legacy_delete_horizon_ms = legacy_delete_horizon_ms
        self.index_interval_bytes = index_interval_bytes
        self.verify_crc = verify_crc
        self.max_decompressed_bytes = max_decompressed_bytes
        self.stats = CleanerStats()
        self.map = OffsetMap(dedupe_buffer_size, load_factor)
        self.segments: list[_Segment] = []
        self.scan_result: _LogScan | None = None
        self._written: dict[int, _Counts] = {}   # base offset -> the written counts of its last cleaning
        self._opened: list[FileRecords] = []     # FileRecords of cleaned segments read by a later pass

    # -- helpers
    def _uncleanable(self, what: str, cause: BaseException | None = None) -> UncleanablePartitionError:
        kw: dict[str, int | None] = {}
        if isinstance(cause, KBatchError):
            kw = dict(position=cause.position, base_offset=cause.base_offset)
        return UncleanablePartitionError(
            f"Partition {self.log_dir} cannot be compacted: {what}; nothing was changed (Kafka's cleaner marks such "
            f"a partition uncleanable and never truncates; `kbatch verify` shows the damage)", **kw)

    def _windows(self, segment: _Segment) -> Iterator[Window]:
        """Every window of batch headers of a segment, in order (a reused buffer: nothing of a window
        is kept once the next is asked for); a byte that is not part of a complete, valid batch
        raises UncleanablePartitionError (compaction must not drop what it cannot read)."""
        name = os.path.basename(segment.path)
        gen = segment.records.scan(0, self.verify_crc, reuse=True)
        try:
            while True:
                try:
                    s = next(gen)
                except StopIteration as stop:
                    if stop.value < segment.size:
                        raise self._uncleanable(
                            f"segment {name} ends with {segment.size - stop.value} bytes from byte {stop.value} that "
                            f"are not a complete batch ({segment.records.incomplete(stop.value, 'the segment')})"
                        ) from None
                    return
                if self.verify_crc and not s["crc_valid"].all():
                    raise crc_error_at(s, int(np.flatnonzero(~s["crc_valid"])[0]))
                yield s
        except (UncleanablePartitionError, FileChangedError):
            raise
        except KBatchError as e:
            if isinstance(e, StorageError):
                raise
            raise self._uncleanable(f"segment {name} cannot be read: {e}", e) from e

    def _batch(self, s: Window, i: int) -> Batch:
        return batch_at(s, i, self.max_decompressed_bytes)

    def _section(self, s: Window, i: int, pos: int, size: int,
                 attrs: int) -> tuple[Buffer, int, int, Batch | None]:
        """(buffer, start, end) of a v2 batch's records section: in the window when uncompressed,
        else decompressed (with the RecordBatch, to locate an error in it)."""
        if not attrs & W.COMPRESSION_CODEC_MASK:
            at = pos - s["origin"]
            return s["buf"], at + W.RECORDS_OFFSET, at + size, None
        batch = self._batch(s, i)
        assert isinstance(batch, RecordBatch)  # a v2 batch's row
        data = batch.records_bytes()
        return data, 0, len(data), batch

    def _kernel_error(self, e: KBatchError, s: Window, i: int, batch: Batch | None) -> KBatchError:
        """A record kernel's error -> the error decoding the batch reports (file positions)."""
        if batch is None:
            return shift_error(e, s["origin"])
        batch.records()  # a compressed batch: the object decoder raises it, located at the batch
        return e

    def _list_segments(self) -> list[_Segment]:
        from .partition_files import PartitionFiles

        segs: list[_Segment] = []
        try:
            for files in PartitionFiles(self.log_dir, BROKER).segments:  # compaction works on local broker dirs
                base, path = files.base_offset, files.path(_files.LOG_SUFFIX)
                assert base is not None  # a broker listing names every segment by its base offset
                try:
                    records = FileRecords(path)
                except StorageError as e:
                    raise self._uncleanable(f"{os.path.basename(path)} is named like a segment but {e.reason}",
                                            e) from e
                st = os.fstat(records._fd_or_raise())
                segs.append(_Segment(base, path, st.st_size, st.st_mtime_ns, records))
        except BaseException:
            for seg in segs:
                seg.records.close()
            raise
        return segs

    def close(self) -> None:
        for seg in self.segments:
            seg.records.close()
        for records in self._opened:
            records.close()
        self._opened = []

    # -- step 1
    def scan(self) -> _LogScan:
        """Walk every batch header of the whole log: producer state (last data offset and epoch per
        producer), aborted transactions (ABORT markers per producer, as .txnindex holds them), and
        transactions still open at the end of the log."""
        self.segments = self._list_segments()
        res = _LogScan()
        for seg in self.segments:
            for s in self._windows(seg):
                cols = [s[k].tolist() for k in ("magic", "attributes", "producer_id", "producer_epoch", "base_offset",
                                                "last_offset")]
                if cols[0]:
                    res.last_batch_offset = cols[5][-1]
                for i, (magic, attrs, pid, epoch, base, last) in enumerate(zip(*cols)):
                    if magic < 2 or pid < 0:
                        continue
                    st = res.producers.get(pid)
                    if st is None:
                        st = res.producers[pid] = _ProducerState()
                    if epoch != st.epoch:
                        # a new epoch (Kafka 4's transactions bump it with every marker, KIP-890): the
                        # old epoch's batches no longer count (ProducerStateEntry.new_epoch), so no
                        # data batch is kept for the producer's last sequence, only its marker
                        st.last_data_offset = None
                    st.epoch = epoch
                    if attrs & W.CONTROL_FLAG_MASK:
                        controls = self._batch(s, i).control_records()
                        if controls and controls[0].type in (W.ControlRecordType.ABORT, W.ControlRecordType.COMMIT):
                            first = res.open_txn_first_offset.pop(pid, None)
                            if first is not None and controls[0].type == W.ControlRecordType.ABORT:
                                res.aborted.append(AbortedTxn(pid, first, last))
                    else:
                        st.last_data_offset = last
                        if attrs & W.TRANSACTIONAL_FLAG_MASK and pid not in res.open_txn_first_offset:
                            res.open_txn_first_offset[pid] = base
        first_uncleanable = W.INT64_MAX
        if res.open_txn_first_offset:
            first_uncleanable = min(res.open_txn_first_offset.values())
        if self.segments and not self.clean_active_segment:
            first_uncleanable = min(first_uncleanable, self.segments[-1].base_offset)
        ends = [s.base_offset for s in self.segments[1:]] + [res.last_batch_offset + 1]
        for seg, end in zip(self.segments, ends):
            seg.cleanable = end <= first_uncleanable
            seg.end_offset = end
            if not seg.cleanable:
                break
        self.stats.first_uncleanable_offset = None if first_uncleanable == W.INT64_MAX else first_uncleanable
        self.scan_result = res
        return res

    @property
    def cleanable(self) -> list[_Segment]:
        return [s for s in self.segments if s.cleanable]

    # -- step 2
    def build_offset_map(self, sources: list[_Segment] | None = None, start_offset: int = 0) -> bool:
        """Key -> latest offset from `start_offset` on, over the cleanable segments (`sources`: their
        current bytes), skipping aborted transactions, until the map is full (Kafka's
        buildOffsetMap). Returns whether it filled; map.latest_offset is then the last offset of
        the last batch mapped whole, else the end of the last segment mapped."""
        t0 = time.perf_counter()
        self.map.clear()
        omap = self.map
        stats = self.stats
        # the aborted transactions that reach the offsets mapped (Kafka: collectAbortedTransactions(start, end)):
        # the markers of earlier ones are not read again
        assert self.scan_result is not None  # scan() first
        txn = CleanedTransactionMetadata([a for a in self.scan_result.aborted if a.last_offset >= start_offset])
        for seg in (self.cleanable if sources is None else sources):
            if seg.end_offset <= start_offset:
                continue
            _checkpoint(f"map:{seg.base_offset}")
            for s in self._windows(seg):
                buf, origin = s["buf"], s["origin"]
                cols = [s[k].tolist() for k in ("position", "size", "magic", "attributes", "base_offset", "last_offset",
                                                "record_count", "producer_id")]
                read = n_bytes = 0
                latest = omap.latest_offset
                data: Buffer
                batch: Batch | None
                for i, (pos, size, magic, attrs, base, last, count, pid) in enumerate(zip(*cols)):
                    if last < start_offset:
                        continue
                    if magic < 2 or attrs & W.CONTROL_FLAG_MASK:
                        omap.latest_offset = latest
                        full = self._map_object_batch(self._batch(s, i), txn, start_offset)
                    elif txn.on_data_batch(last, bool(attrs & W.TRANSACTIONAL_FLAG_MASK), pid):
                        read += count  # an aborted batch's keys are not mapped
                        full = False
                    else:
                        if attrs & W.COMPRESSION_CODEC_MASK:
                            data, start, end, batch = self._section(s, i, pos, size, attrs)
                        else:
                            data, start, end, batch = buf, pos - origin + W.RECORDS_OFFSET, pos - origin + size, None
                        try:
                            n, full = omap.map_records_v2(data, start, end, count, base, start_offset)
                        except KBatchError as e:
                            raise self._kernel_error(e, s, i, batch) from None
                        read += n
                    if full:
                        omap.latest_offset = latest
                        stats.map_records_read += read
                        stats.map_bytes_read += n_bytes
                        self._map_done(t0)
                        return True
                    latest = last if last > latest else latest
                    n_bytes += size
                omap.latest_offset = latest
                stats.map_records_read += read
                stats.map_bytes_read += n_bytes
            omap.update_latest_offset(seg.end_offset - 1)  # offsets missing at the end of a segment
        self._map_done(t0)
        return False

    def _map_object_batch(self, batch: Batch, txn: CleanedTransactionMetadata, start_offset: int) -> bool:
        """build_offset_map for a legacy or control batch, through its records."""
        if batch.is_control:
            txn.on_control_batch_read(batch)
            self.stats.map_records_read += 1
            return False
        if txn.on_batch_read(batch):
            return False
        omap = self.map
        for r in batch.records():
            if r.key is not None and r.offset >= start_offset:
                if omap.full:
                    return True
                omap.put(r.key, r.offset)
            self.stats.map_records_read += 1
        return False

    def _map_done(self, t0: float) -> None:
        self.stats.distinct_keys = max(self.stats.distinct_keys, len(self.map))
        self.stats.buffer_utilization = max(self.stats.buffer_utilization, self.map.utilization)
        self.stats.map_elapsed_s += time.perf_counter() - t0

    # -- step 3
    def _legacy_horizon(self) -> int:
        """Kafka's legacy rule compares each segment's lastModified with (lastModified of the last
        cleaned segment) - delete.retention.ms. Without a cleaner checkpoint, kbatch takes the last
        cleanable segment as "the last cleaned segment"."""
        if self.legacy_delete_horizon_ms is not None:
            return self.legacy_delete_horizon_ms
        cleanable = self.cleanable
        if not cleanable:
            return 0
        return cleanable[-1].mtime_ns // 1_000_000 - self.delete_retention_ms

    def _is_last_of_producer(self, batch: Batch) -> bool:
        assert self.scan_result is not None  # scan() first
        st = self.scan_result.producers.get(batch.producer_id)
        if st is None:
            return False
        if st.last_data_offset is not None:
            return batch.last_offset == st.last_data_offset
        return batch.is_control and batch.producer_epoch == st.epoch

    def clean_segment(self, seg: _Segment, out: IO[bytes] | _Discard, txn: CleanedTransactionMetadata,
                      legacy_horizon: int) -> None:
        """Filter one segment's batches into the open file `out` (Kafka's cleanInto + filterTo).
        Data batches of magic 2 go through the key map's record filter (no Record objects);
        control and legacy batches through their records."""
        assert self.scan_result is not None  # scan() first
        st = _Counts()
        now = self.now_ms
        new_horizon = _horizon(now, self.delete_retention_ms)
        last_log_offset = self.scan_result.last_batch_offset
        producers = self.scan_result.producers
        filter_records = self.map.filter_records_v2
        write = out.write
        data: bytes | memoryview | None
        src: Buffer
        batch: Batch | None
        for s in self._windows(seg):
            buf, origin = s["buf"], s["origin"]
            cols = [s[k].tolist() for k in ("position", "size", "magic", "attributes", "base_offset", "last_offset",
                                            "record_count", "producer_id", "first_timestamp", "max_timestamp",
                                            "partition_leader_epoch", "producer_epoch", "base_sequence")]
            for i, (pos, size, magic, attrs, base, last, count, pid, first_ts, max_ts, ple, epoch,
                    seq) in enumerate(zip(*cols)):
                if magic < 2 or attrs & W.CONTROL_FLAG_MASK:
                    data = self._clean_object_batch(self._batch(s, i), st, txn, legacy_horizon, seg)
                    if data is not None:
                        write(data)
                        st.batches_written += 1
                        st.bytes_written += len(data)
                    continue
                st.batches_read += 1
                st.bytes_read += size
                st.records_read += count
                transactional = bool(attrs & W.TRANSACTIONAL_FLAG_MASK)
                if txn.on_data_batch(last, transactional, pid):  # aborted: its records go
                    data = self._clean_object_batch(self._batch(s, i), st, txn, legacy_horizon, seg, aborted=True)
                    if data is not None:
                        write(data)
                        st.batches_written += 1
                        st.bytes_written += len(data)
                    continue
                horizon = first_ts if attrs & W.DELETE_HORIZON_FLAG_MASK else None
                at = pos - origin
                if attrs & W.COMPRESSION_CODEC_MASK:
                    src, start, end, batch = self._section(s, i, pos, size, attrs)
                else:
                    src, start, end, batch = buf, at + W.RECORDS_OFFSET, at + size, None
                try:
                    (section, kept, superseded, invalid, tomb_removed, tomb_kept, base_ts, max_kept,
                     out_horizon) = filter_records(src, start, end, count, base, first_ts, max_ts, attrs, horizon,
                                                   horizon is None or now < horizon, new_horizon)
                except KBatchError as e:
                    raise self._kernel_error(e, s, i, batch) from None
                st.superseded_records += superseded
                st.invalid_records += invalid
                st.tombstones_removed += tomb_removed
                if kept:
                    st.tombstones_kept += tomb_kept
                    if section is None:
                        data = buf[at:at + size]
                        st.batches_copied += 1
                    else:
                        if out_horizon != horizon:
                            st.delete_horizons_set += 1
                        data = _rebuilt_v2((base, last, ple, attrs, max_ts, pid, epoch, seq),
                                           (section, kept, superseded, invalid, tomb_removed, tomb_kept, base_ts,
                                            max_kept, out_horizon))
                        st.batches_rebuilt += 1
                    st.records_written += kept
                else:
                    p = producers.get(pid) if pid >= 0 else None
                    if not ((p is not None and p.last_data_offset == last)
                            or (self.clean_active_segment and last == last_log_offset)):
                        continue  # DELETE_EMPTY
                    if count == 0:  # RETAIN_EMPTY: the producer's last sequence, or the log end
                        data = buf[at:at + size]
                        st.batches_copied += 1
                    else:
                        data = empty_batch_header(batch if batch is not None else self._batch(s, i))
                        st.empty_batches_written += 1
                write(data)
                st.batches_written += 1
                st.bytes_written += len(data)
        self._count(seg, st)

    def _clean_object_batch(self, batch: Batch, st: _Counts, txn: CleanedTransactionMetadata, legacy_horizon: int,
                            seg: _Segment, aborted: bool = False) -> bytes | memoryview | None:
        """clean_segment for a legacy, control or aborted batch, through its records: the bytes to
        write, or None."""
        now = self.now_ms
        omap = self.map
        v2 = batch.magic == 2
        horizon = batch.delete_horizon_ms
        if batch.is_control or batch.magic < 2:
            st.batches_read += 1
            st.bytes_read += batch.size_in_bytes
            st.records_read += batch.record_count
        # checkBatchRetention
        if batch.is_control:
            can_discard = txn.on_control_batch_read(batch)
            discard_records = can_discard and horizon is not None and horizon <= now
        elif batch.magic < 2:
            can_discard = aborted = txn.on_batch_read(batch)
            discard_records = can_discard
        else:
            can_discard = discard_records = aborted  # on_data_batch said so
        if v2 and batch.producer_id >= 0 and self._is_last_of_producer(batch):
            retention = RETAIN_EMPTY
        elif v2 and self.clean_active_segment and self.scan_result is not None \
                and batch.last_offset == self.scan_result.last_batch_offset:
            retention = RETAIN_EMPTY  # keep the log end offset
        elif discard_records:
            retention = DELETE
        else:
            retention = DELETE_EMPTY
        marker_for_empty_txn = can_discard and batch.is_control
        if retention == DELETE:
            if batch.is_control:
                st.control_batches_removed += 1
            if aborted:
                st.aborted_records_removed += batch.record_count
            return None
        records = batch.records()
        retain_legacy_deletes = seg.mtime_ns // 1_000_000 > legacy_horizon
        retained: list[Record] = []
        for r in records:
            if discard_records:
                if aborted:
                    st.aborted_records_removed += 1
                continue
            if batch.is_control or r.offset > omap.latest_offset:
                retained.append(r)
                continue
            key = r.key
            if key is None:
                st.invalid_records += 1
                continue
            if r.offset < omap.get(key):
                st.superseded_records += 1
                continue
            if r.is_tombstone:
                keep = (horizon is None or now < horizon) if v2 else retain_legacy_deletes
                if not keep:
                    st.tombstones_removed += 1
                    continue
            retained.append(r)
        if retained:
            n_tombs = 0 if batch.is_control else sum(1 for r in retained if r.is_tombstone)
            st.tombstones_kept += n_tombs
            need_horizon = v2 and (n_tombs > 0 or marker_for_empty_txn) and horizon is None
            data: bytes | memoryview
            if len(retained) == len(records) and not need_horizon:
                data = batch.raw
                st.batches_copied += 1
            else:
                if need_horizon:
                    horizon = _horizon(now, self.delete_retention_ms)
                    st.delete_horizons_set += 1
                data = rebuild_batch(batch, retained, horizon)
                st.batches_rebuilt += 1
            st.records_written += len(retained)
            return data
        if retention == RETAIN_EMPTY:
            if batch.record_count == 0:
                data = batch.raw
                st.batches_copied += 1
            else:
                data = empty_batch_header(batch)
                st.empty_batches_written += 1
            return data
        if batch.is_control:
            st.control_batches_removed += 1
        return None

    def _count(self, seg: _Segment, st: "_Counts") -> None:
        """Add a segment's cleaning to the stats: what it removed; what it read when these were the
        input's bytes (not an earlier pass's output); what it wrote, replacing an earlier pass's."""
        stats = self.stats
        for name in _Counts.REMOVED:
            setattr(stats, name, getattr(stats, name) + getattr(st, name))
        if not seg.cleaned:
            for name in _Counts.READ:
                setattr(stats, name, getattr(stats, name) + getattr(st, name))
        self._written[seg.base_offset] = st

    def _finish_counts(self) -> None:
        for name in _Counts.WRITTEN:
            setattr(self.stats, name, sum(getattr(st, name) for st in self._written.values()))

    # -- step 4
    def _write_indexes(self, scratch: str, base: int) -> None:
        from .unified_log import rebuild_segment_indexes

        rebuild_segment_indexes(_files.segment_path(scratch, base, _files.LOG_SUFFIX), self.index_interval_bytes)

    def _write_group(self, group: list[_Segment], covers: list[int], directory: str,
                     txn: CleanedTransactionMetadata, legacy_horizon: int) -> str:
        """The cleaned .log of a group of consecutive segments in `directory`, ONE segment named
        after the first (Kafka's cleanSegments), fsynced, with its indexes rebuilt as the broker
        builds a cleaned segment's; it keeps the last member's lastModified (Kafka:
        segments.last.lastModified). `covers`: the input segments it replaces (for .txnindex).
        Returns its path."""
        base = group[0].base_offset
        path = _files.segment_path(directory, base, _files.LOG_SUFFIX)
        with open(path, "xb") as out:
            for seg in group:
                self.clean_segment(seg, out, txn, legacy_horizon)
            out.flush()
            os.fsync(out.fileno())
        self._write_indexes(directory, base)
        self._write_txn_index(covers, base, directory, txn)
        mtime = group[-1].mtime_ns
        for suffix in (_files.LOG_SUFFIX, *_INDEX_SUFFIXES):
            target = _files.segment_path(directory, base, suffix)
            if suffix != _files.TXN_INDEX_SUFFIX or os.path.exists(target):
                os.utime(target, ns=(mtime, mtime))
        return path

    def _write_txn_index(self, covers: list[int], base: int, directory: str, txn: CleanedTransactionMetadata) -> None:
        """The cleaned segment's .txnindex: the input segments' (`covers`) entries whose ABORT
        marker this run kept because it read batches of their transaction (Kafka's cleanedIndex).
        A marker kept only for its horizon, or gone, loses its entry: a read_committed consumer
        would otherwise take the producer's later batches for aborted ones. None written when no
        input segment had a .txnindex."""
        size = W.TXN_INDEX_ENTRY_SIZE  # version, producer id, first, last (the marker), last stable offset
        kept: list[bytes] = []
        found = False
        for b in covers:
            try:
                with open(_files.segment_path(self.log_dir, b, _files.TXN_INDEX_SUFFIX), "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            found = True
            kept += [data[i:i + size] for i in range(0, len(data) - size + 1, size)
                     if struct.unpack_from(">qqq", data, i + 2)[::2] in txn.indexed_aborts]
        if not found:
            return
        with open(_files.segment_path(directory, base, _files.TXN_INDEX_SUFFIX), "xb") as out:
            out.write(b"".join(kept))
            out.flush()
            os.fsync(out.fileno())

    def _index_sizes(self, seg: _Segment) -> tuple[int, int]:
        """(offset index bytes, time index bytes) of a segment, as the broker counts them for
        grouping (OffsetIndex/TimeIndex.sizeInBytes: entries * entry size): its index files' sizes,
        or, for the log's last segment (whose files may be preallocated) or a missing or torn index
        file, the entries an index rebuild makes."""
        from .segment import build_indexes

        last = self.segments[-1].base_offset if self.segments else -1
        directory = os.path.dirname(seg.path)
        sizes = []
        for suffix, entry in ((_files.INDEX_SUFFIX, W.OFFSET_INDEX_ENTRY_SIZE),
                              (_files.TIME_INDEX_SUFFIX, W.TIME_INDEX_ENTRY_SIZE)):
            try:
                n = os.path.getsize(_files.segment_path(directory, seg.base_offset, suffix))
            except OSError:
                n = -1
            if n < 0 or n % entry or (seg.base_offset == last and not seg.cleaned):
                built = build_indexes(seg.records, seg.base_offset, self.index_interval_bytes)
                return len(built.index), len(built.timeindex)
            sizes.append(n)
        return sizes[0], sizes[1]

    def group_segments(self, segments: list[_Segment]) -> list[list[_Segment]]:
        """Consecutive segments grouped as Kafka's cleaner groups them (Cleaner.groupSegmentsBySize):
        a group takes the next segment while the summed log sizes stay within segment_bytes
        (segment.bytes), the summed offset index sizes and, apart, the summed time index sizes
        within segment_index_bytes (segment.index.bytes), and the next segment's last offset (the
        base offset of the one after it less one, or the first uncleanable offset less one for the
        last) stays within Int.MaxValue of the group's base offset (not checked for an empty
        segment). Each group is cleaned into one segment."""
        limit = self.stats.first_uncleanable_offset
        if limit is None:
            limit = self.segments[-1].end_offset if self.segments else 0
        sizes = [self._index_sizes(s) for s in segments]
        groups: list[list[_Segment]] = []
        i = 0
        while i < len(segments):
            group = [segments[i]]
            log_size, index_size, time_size = segments[i].size, sizes[i][0], sizes[i][1]
            i += 1
            while i < len(segments):
                seg = segments[i]
                last = (segments[i + 1].base_offset if i + 1 < len(segments) else limit) - 1
                if (log_size + seg.size > self.segment_bytes
                        or index_size + sizes[i][0] > self.segment_index_bytes
                        or time_size + sizes[i][1] > self.segment_index_bytes
                        or (seg.size and last - group[0].base_offset > W.INT32_MAX)):
                    break
                group.append(seg)
                log_size += seg.size
                index_size += sizes[i][0]
                time_size += sizes[i][1]
                i += 1
            groups.append(group)
        return groups

    def _merge_written(self, group: list[_Segment]) -> None:
        """The written counts of a group's members become its output's."""
        merged = _Counts()
        for seg in group:
            st = self._written.pop(seg.base_offset)
            for name in _Counts.WRITTEN:
                setattr(merged, name, getattr(merged, name) + getattr(st, name))
        self._written[group[0].base_offset] = merged

    def _passes(self, cleanable: list[_Segment], directory: str | None) -> list[tuple[str, list[int]]]:
        """Clean `cleanable` in passes (see the class doc) into `directory` (None: a dry run, which
        writes nothing there; the passes before the last write to a temporary directory). Each pass
        groups the segments it cleans (group_segments) and writes one segment per group.
        Returns (the cleaned .log's path, the input base offsets it replaces) per output segment
        (none for a dry run)."""
        assert self.scan_result is not None  # scan() first
        sources = list(cleanable)
        covers: dict[int, list[int]] = {s.base_offset: [s.base_offset] for s in sources}
        start = 0
        tmp: str | None = None
        try:
            while True:
                self.stats.passes += 1
                full = self.build_offset_map(sources, start)
                _checkpoint("mapped")
                end = self.map.latest_offset + 1
                if full and end <= start:
                    raise InvalidConfigurationError(
                        "The cleaner's key map is too small: it filled before one batch was mapped whole",
                        expected=f"more than {self.map.capacity} keys (dedupe_buffer_size, Kafka's "
                                 f"log.cleaner.dedupe.buffer.size)", found=f"a batch at offset {start} with more")
                txn = CleanedTransactionMetadata(self.scan_result.aborted)
                legacy_horizon = self._legacy_horizon()
                target = directory
                if directory is None and full:
                    if tmp is None:
                        tmp = tempfile.mkdtemp(prefix="kbatch-compact-dry-run-")
                    target = tmp
                # Kafka: log.logSegments(0, endOffset), grouped
                todo = [s for s in sources if not full or s.base_offset < end]
                outputs: list[_Segment] = []
                for group in self.group_segments(todo):
                    _checkpoint(f"clean:{group[0].base_offset}")
                    if target is None:
                        for seg in group:
                            self.clean_segment(seg, _Discard(), txn, legacy_horizon)
                        self._merge_written(group)
                        outputs.append(group[0])
                        continue
                    merged = sorted(b for seg in group for b in covers.pop(seg.base_offset))
                    covers[group[0].base_offset] = merged
                    outputs.append(self._clean_into(group, merged, target, txn, legacy_horizon))
                sources = outputs + sources[len(todo):]
                if not full:
                    break
                start = end
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        self._finish_counts()
        self.stats.segments_cleaned = len(cleanable)
        return [] if directory is None else [(s.path, covers[s.base_offset]) for s in sources]

    def _clean_into(self, group: list[_Segment], covers: list[int], directory: str, txn: CleanedTransactionMetadata,
                    legacy_horizon: int) -> _Segment:
        """One group of a pass, cleaned into directory/<first base>.log with its indexes. When a
        member is an earlier pass's output (which this pass is reading: its open file keeps it),
        the group is written under a pass directory first; the earlier outputs of the other members
        go and it is renamed over the first's."""
        base = group[0].base_offset
        reused = any(s.cleaned for s in group)
        work = directory if not reused else os.path.join(directory, f"pass-{self.stats.passes}")
        os.makedirs(work, exist_ok=True)
        self._write_group(group, covers, work, txn, legacy_horizon)
        self._merge_written(group)
        if work != directory:
            for seg in group[1:]:
                if seg.cleaned:
                    for suffix in (_files.LOG_SUFFIX, *_INDEX_SUFFIXES):
                        _unlink(_files.segment_path(directory, seg.base_offset, suffix))
            for suffix in (_files.LOG_SUFFIX, *_INDEX_SUFFIXES):
                src = _files.segment_path(work, base, suffix)
                if os.path.exists(src):
                    os.replace(src, _files.segment_path(directory, base, suffix))
                else:
                    _unlink(_files.segment_path(directory, base, suffix))
        path = _files.segment_path(directory, base, _files.LOG_SUFFIX)
        records = FileRecords(path)
        self._opened.append(records)
        return _Segment(base, path, records.size_in_bytes, group[-1].mtime_ns, records, True, group[-1].end_offset,
                        cleaned=True)

    def clean(self, *, dry_run: bool = False, output_dir: PathLike | None = None) -> CleanerStats:
        """The whole round. dry_run: read and compute, write nothing. output_dir: write the
        compacted partition there (a new or empty directory) and leave the input as it is."""
        t0 = time.perf_counter()
        self.stats.dry_run = dry_run
        lock: _files.DirLock | None = None
        try:
            if not dry_run and output_dir is None:
                lock = _files.DirLock.acquire(self.log_dir, "compact")
                log_loader.clean_directory(self.log_dir, checkpoint=_checkpoint)  # finish an interrupted one first
            try:
                self._round(dry_run, output_dir)
            except (UncleanablePartitionError, LogDirectoryLockedError, LogWriteError, FileChangedError,
                    InvalidConfigurationError):
                raise
            except StorageError as e:
                raise self._uncleanable(str(e), e) from e
            except KBatchError as e:
                raise self._uncleanable(f"a batch cannot be read: {e}", e) from e
            except OSError as e:
                if isinstance(e, FileNotFoundError) and e.filename and str(e.filename).startswith(self.log_dir):
                    raise FileChangedError(f"{e.filename} vanished during compaction; nothing was changed",
                                           path=self.log_dir) from e
                raise LogWriteError(f"compaction failed writing ({e}); nothing was changed", path=self.log_dir,
                                    errno=e.errno) from e
        finally:
            self.close()
            if lock is not None:
                lock.release()
        self.stats.elapsed_s = time.perf_counter() - t0
        return self.stats

    def _round(self, dry_run: bool, output_dir: PathLike | None) -> None:
        self.scan()
        _checkpoint("scanned")
        cleanable = self.cleanable
        if output_dir is not None:
            self._write_copy(os.fspath(output_dir), cleanable)
            return
        if not cleanable:
            return
        if dry_run:
            self._passes(cleanable, None)
            return
        scratch = os.path.join(self.log_dir, f"{_SCRATCH_PREFIX}{os.getpid()}")
        created: list[str] = []  # .cleaned / .swap files this run made (removed on failure)
        swapping = False
        try:
            shutil.rmtree(scratch, ignore_errors=True)
            os.mkdir(scratch)
            groups: dict[int, list[int]] = {}
            for path, covers in self._passes(cleanable, scratch):
                base = covers[0]
                groups[base] = covers
                for suffix in (_files.LOG_SUFFIX, *_INDEX_SUFFIXES):
                    src = _files.segment_path(scratch, base, suffix)
                    if suffix == _files.TXN_INDEX_SUFFIX and not os.path.exists(src):
                        continue  # no input had one
                    dst = _files.segment_path(self.log_dir, base, suffix + _CLEANED)
                    os.replace(src, dst)
                    created.append(dst)
            _files.fsync_dir(self.log_dir)
            _checkpoint("cleaned")
            # the commit point: once the marker (naming each group) exists, a crash is completed, not undone
            log_loader.write_commit_marker(self.log_dir, groups)
            swapping = True
            _checkpoint("committed")
            # .cleaned -> .swap, earliest first
            for path in list(created):
                swap = path[: -len(_CLEANED)] + _SWAP
                os.replace(path, swap)
                _checkpoint(f"swap-rename:{os.path.basename(swap)}")
            _files.fsync_dir(self.log_dir)
            _checkpoint("swapping")
            log_loader.complete_swaps(self.log_dir, checkpoint=_checkpoint, groups=groups)
            _unlink(os.path.join(self.log_dir, log_loader.COMMIT_MARKER))
            _files.fsync_dir(self.log_dir)
        except BaseException:
            if not swapping:
                for path in created:
                    _unlink(path)
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _write_copy(self, output_dir: str, cleanable: list[_Segment]) -> None:
        """The compacted partition as a new directory: cleaned segments rewritten, the others
        copied byte for byte (as far as this run read them), indexes rebuilt, partition.metadata,
        leader-epoch-checkpoint, .snapshot and the other segments' .txnindex files copied. Staged beside the target and
        renamed into place, so a failure leaves no partial output."""
        src = os.path.realpath(self.log_dir)
        dst = os.path.realpath(output_dir)
        if dst == src or dst.startswith(src + os.sep):
            raise self._uncleanable(f"the output directory {output_dir} is the input or inside it")
        if os.path.lexists(dst) and (not os.path.isdir(dst) or os.listdir(dst)):
            raise LogWriteError("the output directory must not exist or be empty", path=output_dir)
        parent = os.path.dirname(dst)
        os.makedirs(parent, exist_ok=True)
        stage = os.path.join(parent, f".{os.path.basename(dst)}.kbatch-compact-{os.getpid()}")
        shutil.rmtree(stage, ignore_errors=True)
        os.mkdir(stage)
        try:
            if cleanable:
                self._passes(cleanable, stage)
                for name in os.listdir(stage):  # what passes before the last wrote first
                    if name.startswith("pass-"):
                        shutil.rmtree(os.path.join(stage, name), ignore_errors=True)
            cleaned = {s.base_offset for s in cleanable}
            for seg in self.segments:
                if seg.base_offset in cleaned:
                    continue
                path = _files.segment_path(stage, seg.base_offset, _files.LOG_SUFFIX)
                with open(path, "xb") as out:
                    pos = 0
                    while pos < seg.size:
                        chunk = seg.records.read(pos, min(16 << 20, seg.size - pos))
                        out.write(chunk)
                        pos += len(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                self._write_indexes(stage, seg.base_offset)
                os.utime(path, ns=(seg.mtime_ns, seg.mtime_ns))
            for name in sorted(os.listdir(self.log_dir)):
                if name in _COPIED_FILES or name.endswith((_files.TXN_INDEX_SUFFIX, ".snapshot")):
                    parsed = _files.parse_segment_file_name(name)
                    if parsed is not None and parsed[0] in cleaned:
                        continue  # a cleaned group's .txnindex was written with it (_write_txn_index)
                    p = os.path.join(self.log_dir, name)
                    # a cleaned segment's .txnindex was written with it (_write_txn_index)
                    if os.path.isfile(p) and not os.path.exists(os.path.join(stage, name)):
                        shutil.copy2(p, os.path.join(stage, name))
            _files.fsync_dir(stage)
            if os.path.isdir(dst):
                os.rmdir(dst)
            os.rename(stage, dst)
            _files.fsync_dir(parent)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        self.stats.output_dir = dst


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def recover(log_dir: PathLike) -> None:
    """Finish or undo an interrupted compaction, as a broker's LogLoader does (log_loader.clean_directory),
    holding the directory's lock: `.cleaned` files and scratch directories are deleted; `.swap`
    files (written only once every cleaned segment was complete) are renamed over their originals,
    the other segments of their group (as the commit marker names it) removed first."""
    with _files.DirLock.acquire(log_dir, "recover"):
        log_loader.clean_directory(log_dir)


def compact(log_dir: PathLike, now_ms: int, delete_retention_ms: int = 86_400_000, *, clean_active_segment: bool = False,
            legacy_delete_horizon_ms: int | None = None,
            index_interval_bytes: int = W.DEFAULT_INDEX_INTERVAL_BYTES, verify_crc: bool = True,
            max_decompressed_bytes: int = W.DEFAULT_MAX_DECOMPRESSED_BYTES, dry_run: bool = False,
            output_dir: PathLike | None = None, dedupe_buffer_size: int = W.DEFAULT_DEDUPE_BUFFER_SIZE,
            load_factor: float = W.DEFAULT_DEDUPE_LOAD_FACTOR, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
            segment_index_bytes: int = W.DEFAULT_SEGMENT_INDEX_BYTES) -> CleanerStats:
    """Compact the partition directory `log_dir` as a broker's log cleaner does (see module doc).

    now_ms: the cleaner's clock (delete horizons are now_ms + delete_retention_ms; tombstones and
    markers whose horizon is <= now_ms go). clean_active_segment: also clean the last segment.
    legacy_delete_horizon_ms: override the legacy (magic 0/1) tombstone horizon.
    dry_run: write nothing; the stats say what a run would remove (records_removed, bytes_saved).
    output_dir: write the compacted partition to this new (or empty) directory instead.
    dedupe_buffer_size / load_factor: the key map's memory and how full it gets before a pass
    cleans what it mapped (Kafka's log.cleaner.dedupe.buffer.size, for one cleaner thread, and
    log.cleaner.io.buffer.load.factor): more distinct keys than that take more passes.
    segment_bytes / segment_index_bytes: the topic's segment.bytes and segment.index.bytes; as
    Kafka's cleaner does, consecutive segments are cleaned into one while their summed sizes fit.
    Returns CleanerStats. The input files are never modified in place; a partition that cannot be
    read in full raises UncleanablePartitionError and nothing changes.
    """
    return LogCleaner(log_dir, now_ms, delete_retention_ms, clean_active_segment=clean_active_segment,
                      legacy_delete_horizon_ms=legacy_delete_horizon_ms,
                      index_interval_bytes=index_interval_bytes, verify_crc=verify_crc,
                      max_decompressed_bytes=max_decompressed_bytes, dedupe_buffer_size=dedupe_buffer_size,
                      load_factor=load_factor, segment_bytes=segment_bytes,
                      segment_index_bytes=segment_index_bytes).clean(dry_run=dry_run, output_dir=output_dir)


__all__ = ["compact", "recover", "LogCleaner", "CleanerStats", "OffsetMap", "CleanedTransactionMetadata",
           "AbortedTxn", "empty_batch_header", "with_last_offset", "rebuild_batch"]
