"""A partition's log (Kafka's UnifiedLog): what a partition does, open, append, roll, retain,
truncate, close; the rest delegates to the rooms beside it.

- `Log.open(dir)` reads a `<topic>-<partition>` directory (which files: partition_files) and
  changes nothing on disk: missing, corrupt or contradicted indexes are rebuilt in memory, bytes
  that are not complete batches are reported in `Log.problems`. It opens every segment's .log at
  once (log_segments.open_local) and reads those files through pread, so a concurrent writer's
  retention or compaction leaves it with a consistent old view, and a truncation gives a kbatch
  error, never SIGBUS.
- `Log.open(dir, config, writable=True)` / `Log.create(dir, config)` open for writing: the
  directory's `.lock` is taken (a second writer, in this process or another, or a running
  broker holding the log directory is refused), leftovers of interrupted writes are removed
  (loader), and the log is recovered like a broker recovers it (recovery;
  checkpoints.RecoveryCheckpoint says how much).
- `log.segments` is a LogSegments (log_segments): the ordered segments and the KIP-79 lookups
  over them (kafka-format.md §5.4, DESIGN.md decisions 3 and 5); `read` is the read path every
  reader takes (fetch); truncation is log_truncation's, the config log_config's, the index tools
  index_tools'.
- writing follows UnifiedLog.append / maybeRoll / deleteOldSegments (§6.3); an append is all or
  nothing (a failed write is cut back off and the Log stays usable).
"""
from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from . import files as _files
from .. import _fs
from .. import _wire as W
from . import loader as log_loader
from .._wire import OffsetSpec
from .checkpoints import RecoveryCheckpoint
from ..errors import (InvalidRequestError, KBatchError, RecordTooLargeError, StorageError, UnknownTopicOrPartitionError,
                     UnsupportedForMessageFormatError)
from . import producer_state as _txns
from .index_tools import (IndexVerification, SegmentIndexReport, rebuild_indexes, rebuild_segment_indexes,
                          verify_indexes)
from .list_offsets import check_target, lookup_many
from .log_config import LogConfig
from .log_segments import LogSegments, OffsetAndTimestamp, open_listed, open_local
from .partition_files import PartitionFiles, check_partition_dir
from .log_retention import DeletedSegment
from .loader import RecoveryReport

if TYPE_CHECKING:
    from ..record.batch import Batch
    from types import TracebackType

    import numpy.typing as npt

    from .._typing import Buffer, PathLike, TableLike
    from .leader_epoch import LeaderEpochFileCache
    from ..record.file_records import Window
    from .fetch import FetchResult
    from .segment import SegmentMark, SegmentSettings, UnreadRange
    from .validator import AppendInfo, LogValidator

    #: an offsets_for_times target: an int64 timestamp or EARLIEST / LATEST / MAX_TIMESTAMP
    Target = int | np.integer[Any] | OffsetSpec
from ..record.batch import scan_headers
from ..record.file_records import batch_at, crc_error_at
from .segment import LogSegment

logger = logging.getLogger("kbatch.log")


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else int(now_ms)


# ------------------------------------------------------------------------------------ the log
class Log:
    """A partition directory of segments (see the module docstring)."""

    def __init__(self, directory: PathLike, segments: list[LogSegment] | LogSegments, config: LogConfig | None, writable: bool,
                 lock: _files.DirLock | None = None) -> None:
        self.directory = os.fspath(directory)
        parsed = _files.parse_partition_dir(self.directory)
        self.topic: str | None
        self.partition: int | None
        self.topic, self.partition = parsed if parsed else (None, None)
        self.config = config or LogConfig()
        self.writable = writable
        self.segments = segments if isinstance(segments, LogSegments) else LogSegments(segments)
        self.log_start_offset = segments[0].base_offset if segments else 0
        self.recovery = RecoveryReport(0, None, ())
        self._rng = random.Random()
        self._validator: LogValidator | None = None
        self._next_offset: int | None = None
        self._lock = lock
        self._failed: str | None = None            # why writing stopped (a write that could not be undone)
        self._recovery_point: int | None = None    # what the checkpoint file says (writers)
        self.partition_leader_epoch: int | None = None  # written into appended batches when set
        self._epoch_cache: LeaderEpochFileCache | None = None  # loaded on first use
        self.layout = "broker"              # or a tiered-storage layout (kbatch.log.layout)
        self._listing_problems: list[str] = []  # tiered copies left out when the directory was listed
        self._group: AppendGroup | None = None  # the all-or-nothing group open on this Log, if any
        self._ongoing: _txns.OngoingTxns | None = None  # open transactions at the log end (writers; on first use)

    # ---- opening
    @classmethod
    def open(cls, path: PathLike, config: LogConfig | None = None, *, writable: bool = False,
             now_ms: int | None = None) -> "Log":
        """Open a partition directory: read-only (nothing on disk changes) unless writable=True.

        Writing takes the directory's `.lock` (LogDirectoryLockedError when another writer or a
        running broker holds it), cleans up what interrupted writes left, and recovers as a broker
        does after the last shutdown (see checkpoints.RecoveryCheckpoint)."""
        files = PartitionFiles.of(path)
        path = files.path
        if not _fs.isdir(path):
            raise UnknownTopicOrPartitionError("No such log directory", expected="a partition directory",
                                               found=path)
        cfg = config or LogConfig()
        seg_kw: SegmentSettings = dict(index_interval_bytes=cfg.index_interval_bytes,
                                      max_index_size=cfg.segment_index_bytes, created_ms=_now(now_ms))
        if not files.remote:
            check_partition_dir(path, writable)
        if not files.is_local_broker:
            if writable:
                raise StorageError("object storage and tiered-storage copies are read-only for kbatch: Log.open(path) "
                                   "reads them; write to a local partition directory", path=path)
            return cls._open_listed(files, cfg, seg_kw)
        if not writable:
            log = cls(path, open_local(files, seg_kw), cfg, False)
            log._load_log_start_offset()
            return log
        from .recovery import load_writable

        return load_writable(cls, files, cfg, seg_kw)

    @classmethod
    def _open_listed(cls, files: PartitionFiles, cfg: LogConfig, seg_kw: SegmentSettings) -> "Log":
        """A read-only Log over a remote directory or a tiered-storage layout (kbatch.log.layout)."""
        from .layout import BROKER

        log = cls(files.path, open_listed(files, seg_kw), cfg, False)
        log.topic, log.partition = files.topic, files.partition
        log.layout = files.layout
        log._listing_problems = files.problems
        for p in files.problems:
            logger.warning("%s", p)
        if files.layout == BROKER:
            log._load_log_start_offset()
        return log

    def _load_log_start_offset(self) -> None:
        """max(the log-start-offset-checkpoint entry, the first segment's base) (loader.log_start_offset)."""
        if self.segments:
            self.log_start_offset = log_loader.log_start_offset(self.directory, self.topic, self.partition,
                                                                self.segments[0].base_offset)

    @classmethod
    def create(cls, path: PathLike, config: LogConfig | None = None, *, now_ms: int | None = None) -> "Log":
        """Create an empty partition directory (or fail if it already holds segments), open for writing."""
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        if _files.list_segment_bases(path):
            raise InvalidRequestError("Log directory already holds segments", expected="an empty directory",
                                      found=path)
        return cls.open(path, config or LogConfig(), writable=True, now_ms=now_ms)

    def _jitter(self) -> int:
        j = self.config.segment_jitter_ms
        return 0 if j == 0 else self._rng.randrange(min(j, self.config.segment_ms))

    # ---- facts
    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    @property
    def problems(self) -> list[str]:
        """What this Log could not read or had to work around: index entries the log contradicts
        (answers then came from a scan) and bytes that are not complete batches. Empty when every
        answer so far came from data read in full."""
        return self._listing_problems + self.segments.problems

    def beginning_offset(self) -> int:
        """The log start offset (EARLIEST)."""
        return self.log_start_offset

    def end_offset(self) -> int:
        """The log end offset: the next offset to be written (LATEST)."""
        if self._next_offset is None:
            self._next_offset = self.segments[-1].read_next_offset() if self.segments else 0
        return self._next_offset

    @property
    def size(self) -> int:
        return self.segments.size

    def batches(self, verify_crc: bool = True) -> Iterator[Batch]:
        """Every complete batch, segment by segment. Bytes at the end of a segment that are not a
        complete batch end that segment's batches and are reported in `problems`."""
        for seg in self.segments:
            for s in seg.windows(verify_crc=verify_crc):
                ok = s["crc_valid"].tolist()
                for i in range(len(ok)):
                    if verify_crc and not ok[i]:
                        raise crc_error_at(s, i)
                    yield batch_at(s, i)

    def read(self, start_offset: int | None = None, end_offset: int | None = None, *,
             isolation: int = 0, verify_crc: bool = True, skip_unreadable: bool = False) -> FetchResult:
        """What a Kafka consumer with `isolation` (0 read_uncommitted, 1 read_committed) sees from
        `start_offset` (the log start when None) up to `end_offset` (exclusive): kbatch.log.fetch's
        read_log, the read path every reader takes. `.records()` gives (batch, record) pairs;
        `.batches()` FetchedBatch items with control batches; `.aborted`, `.last_stable_offset`,
        `.unreadable`. Bytes it cannot read raise UnreadableDataError (but a partial batch at the
        end of the last segment, which Kafka ignores)."""
        from .fetch import read_log

        start = self.beginning_offset() if start_offset is None else start_offset
        return read_log(self, start, end_offset, isolation=isolation, verify_crc=verify_crc,
                        skip_unreadable=skip_unreadable)

    def magic(self) -> int | None:
        """The message format of the newest batch (None for an empty log)."""
        return self.segments.magic()

    # ---- lookups (KIP-79: LogSegments answers, list_offsets shapes many targets)
    def offset_for(self, target: int | np.integer[Any] | OffsetSpec) -> OffsetAndTimestamp | None:
        """One ListOffsets answer: an int64 timestamp (first record with ts >= target) or
        EARLIEST / LATEST / MAX_TIMESTAMP."""
        segs = self.segments
        if isinstance(target, OffsetSpec):
            if target is OffsetSpec.EARLIEST:
                return OffsetAndTimestamp(self.log_start_offset, None, self._epoch_at_start())
            if target is OffsetSpec.LATEST:
                return OffsetAndTimestamp(self.end_offset(), None, self._epoch_at_end())
            return segs.stable(segs.max_timestamp)
        t = check_target(target)
        return segs.stable(lambda: segs.offset_for_time(t, self.log_start_offset))

    def unread_for(self, target: int | np.integer[Any] | OffsetSpec,
                   answer: OffsetAndTimestamp | None) -> list[UnreadRange]:
        """The byte ranges this Log found it could not read (so far) that could have held the
        answer to a lookup of `target` that gave `answer`: for a timestamp, a range before the
        answer (anywhere, when there is none) whose records a checked .timeindex entry after it
        does not bound below the target, and not below the log start offset; for LATEST and
        MAX_TIMESTAMP, every range; for EARLIEST, none. Empty when the answer is the one Kafka
        would give over a log that could be read in full."""
        return self.segments.unread_for(target, answer, self.log_start_offset)

    @overload
    def offsets_for_times(self, targets: npt.NDArray[np.integer[Any]]
                          ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
    @overload
    def offsets_for_times(self, targets: int | OffsetSpec) -> OffsetAndTimestamp | None: ...
    @overload
    def offsets_for_times(self, targets: Iterable[int | OffsetSpec]) -> list[OffsetAndTimestamp | None]: ...

    def offsets_for_times(self, targets: Any) -> Any:
        """Answers for many targets.

        A list/tuple (any iterable) gives a list of OffsetAndTimestamp | None in the same order
        (targets may be ints or OffsetSpec members); its timestamps go through the same bulk
        lookup as a numpy array's. A numpy array of int64 timestamps gives two int64 arrays
        (offsets, timestamps); offsets is -1 where no record has a timestamp >= the target, and the
        timestamp there is meaningless (any int64 is a valid timestamp, so mask with offsets >= 0).
        """
        return lookup_many(self, targets)

    # ---- leader epochs (LeaderEpochFileCache)
    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """The partition's LeaderEpochFileCache: its leader-epoch-checkpoint when the file exists;
        otherwise what a broker's recovery of these batches assigns (kept in memory for a
        read-only log, written to the file for a writable one)."""
        from .leader_epoch import load_cache

        if self._epoch_cache is None:
            self._epoch_cache = load_cache(self.directory, self.layout == "broker", self.writable, self.segments)
        return self._epoch_cache

    def _epochs_from_batches(self) -> bool:
        """A read-only log without a leader-epoch-checkpoint: its epoch cache is built from the batches."""
        from .checkpoints import LEADER_EPOCH_CHECKPOINT

        return not self.writable and not os.path.exists(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT))

    def _epoch_at_start(self) -> int | None:
        """EARLIEST's epoch (leader_epoch.epoch_at_start: from the cache, or the first batches)."""
        from .leader_epoch import epoch_at_start

        cache = None if self._epochs_from_batches() else self.leader_epoch_cache
        return epoch_at_start(self.segments, self.log_start_offset, cache)

    def _epoch_at_end(self) -> int | None:
        """LATEST's epoch (leader_epoch.epoch_at_end: from the cache, or the last batch)."""
        from .leader_epoch import epoch_at_end

        return epoch_at_end(self.segments, None if self._epochs_from_batches() else self.leader_epoch_cache)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int | None = None) -> None:
        """Record that `epoch` starts at `start_offset` (default: the log end offset), as a broker does
        when it becomes leader (UnifiedLog.maybeAssignEpochStartOffset); later appends carry it."""
        self._check_writable()
        self.partition_leader_epoch = int(epoch)
        self.leader_epoch_cache.assign(int(epoch), self.end_offset() if start_offset is None else int(start_offset))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """OffsetForLeaderEpoch: (epoch, end offset) for the largest cached epoch <= `epoch`, or None."""
        found_epoch, offset = self.leader_epoch_cache.end_offset_for(int(epoch), self.end_offset())
        return None if offset < 0 else (found_epoch, offset)

    # ---- writing
    def _check_writable(self) -> None:
        if not self.writable:
            raise KBatchError(f"log {self.directory} is open read-only",
                              expected="Log.open(path, config, writable=True) or Log.create(path, config)",
                              found="read-only")
        if self._failed is not None:
            raise StorageError(f"the log stopped accepting writes: {self._failed}; reopen it (Log.open(..., "
                               f"writable=True)) to recover", path=self.directory)

    def append(self, data: Buffer, now_ms: int | None = None, *, from_client: bool | None = None) -> AppendInfo:
        """Validate `data` (LogValidator: offsets from the log end, timestamps checked or stamped per
        config, whole-batch rejection), roll when Kafka's rules say so, append, index.
        Returns the validator's AppendInfo. Any number of batches per call.

        All or nothing: when writing fails (disk full, the file size limit, a short write) the
        call raises LogWriteError and the files and the Log are as they were before it (a roll it
        started is undone too), so the Log takes appends again once there is space.

        from_client: True applies a produce request's rules (Kafka's AppendOrigin.CLIENT: one
        batch, base offset 0, no control batches); False accepts log data as a coordinator or
        replica appends it (transaction markers, many batches). None: True for a single batch."""
        self._check_writable()
        now = _now(now_ms)
        if self._validator is None:
            tp = f"{self.topic}-{self.partition}" if self.topic is not None else None
            self._validator = self.config.validator(tp)
        if from_client is None:
            from_client = sum(len(s["position"]) for s in scan_headers(memoryview(data))) <= 1
        out, info = self._validator._assign(data, self.end_offset(), now, self.partition_leader_epoch, from_client)
        if not out:
            return info
        rows = [s for s in scan_headers(memoryview(out))]
        for s in rows:
            for size in s["size"].tolist():
                if size > self.config.segment_bytes:
                    raise RecordTooLargeError("Batch is larger than the segment size",
                                              expected=f"<= {self.config.segment_bytes} bytes (segment.bytes)",
                                              found=f"{size} bytes")
        active = self.active_segment
        before = active.mark()
        epochs_before = self.leader_epoch_cache.entries()
        if self._ongoing is None and any(
                (a & W.TRANSACTIONAL_FLAG_MASK) and m >= 2 and p >= 0 for s in rows
                for a, m, p in zip(s["attributes"].tolist(), s["magic"].tolist(), s["producer_id"].tolist())):
            self._ongoing = self._load_ongoing()
        ongoing_before = None if self._ongoing is None else self._ongoing.copy()
        txn_before = len(active.txn_index) if self._ongoing is not None else None
        new_seg = None
        try:
            seg = active
            if active.should_roll(now_ms=now, max_timestamp_in_messages=info.max_timestamp,
                                  max_offset_in_messages=info.last_offset, messages_size=len(out),
                                  max_segment_bytes=self.config.segment_bytes,
                                  max_segment_ms=self.config.segment_ms):
                new_seg = self._start_segment(info.first_offset, now)
                seg = new_seg or active
            mv = memoryview(out)
            for s in rows:
                for pos, size, last, max_ts, magic, attrs in zip(*(s[k].tolist() for k in (
                        "position", "size", "last_offset", "max_timestamp", "magic", "attributes"))):
                    seg.append_batch(mv[pos:pos + size], last, max_ts, magic, attrs)
            aborted = [] if self._ongoing is None else _txns.follow_appended(out, rows, self._ongoing)
            for txn in aborted:  # UnifiedLog.append: the segment appended to indexes each aborted transaction
                seg.txn_index.append(txn)
            self._assign_epochs(rows)  # may write leader-epoch-checkpoint: part of the all-or-nothing
        except BaseException as e:
            self._ongoing = ongoing_before
            if txn_before is not None and len(active.txn_index) > txn_before:
                active.txn_index.truncate_entries(txn_before)
            self._undo(active, before, new_seg, e)
            self.leader_epoch_cache._entries = list(epochs_before)  # its file was replaced atomically or not at all
            if isinstance(e, OSError) and not isinstance(e, StorageError):
                raise _files.write_error(e, self.directory, "appending") from e
            raise
        if new_seg is not None:
            self._finish_roll(active, new_seg)
        self._next_offset = info.last_offset + 1
        return info

    def append_table(self, table: TableLike, now_ms: int | None = None, *, compression: W.Compression | None = None,
                     compression_level: int | None = None, records_per_batch: int | None = None) -> AppendInfo:
        """Append the rows of a pyarrow Table / RecordBatch / RecordBatchReader (decode_columns'
        columns; or an iterable of record batches) as magic 2 batches written by the encode_columns
        kernel (kbatch.columns.encode.encode_for_append) and handed, whole batches at a time, to append,
        all or nothing (one AppendGroup). Returns the AppendInfo of all of it."""
        return _append_table(self, table, now_ms, compression=compression, compression_level=compression_level,
                            records_per_batch=records_per_batch)

    def _load_ongoing(self) -> _txns.OngoingTxns:
        """The open transactions at the log end (producer_state.ongoing_at_end)."""
        return _txns.ongoing_at_end(self.directory, self.segments)

    def _ongoing_at_start(self) -> _txns.OngoingTxns:
        """The transactions open at the first segment's base offset (producer_state.ongoing_at_start)."""
        return _txns.ongoing_at_start(self.directory, self.segments)

    def _assign_epochs(self, rows: Iterable[Window]) -> None:
        """UnifiedLog.append: each v2 batch assigns (its leader epoch, its base offset). (Kafka clears
        the cache after an append in an older format; Log always writes magic 2.)"""
        cache = self.leader_epoch_cache
        for s in rows:
            for ple, base in zip(s["partition_leader_epoch"].tolist(), s["base_offset"].tolist()):
                if ple >= 0:
                    cache.assign(ple, base)

    def _start_segment(self, expected_next_offset: int | None, now: int) -> LogSegment | None:
        """The first half of a roll: the old segment's final time entry and the new segment's
        files. None when the active segment is empty and already at that offset."""
        new_offset = max(expected_next_offset or 0, self.end_offset())
        old = self.active_segment
        if old.base_offset == new_offset and old.size == 0:
            old.created_ms = now
            return None
        old.on_become_inactive()
        seg = LogSegment.create(self.directory, new_offset, index_interval_bytes=self.config.index_interval_bytes,
                                max_index_size=self.config.segment_index_bytes, created_ms=now,
                                roll_jitter_ms=self._jitter())
        return seg

    def _finish_roll(self, old: LogSegment, new: LogSegment) -> None:
        self.segments.append(new)
        old.become_read_only()
        _files.fsync_dir(self.directory)

    def _undo(self, active: LogSegment, before: SegmentMark, new_seg: LogSegment | None, cause: BaseException) -> None:
        """Put the files back as they were before a failed write; if that fails too, stop writing."""
        try:
            if new_seg is not None:
                new_seg.delete_files()
                _files.fsync_dir(self.directory)
            active.rollback(before)
        except BaseException as e2:
            self._failed = f"undoing a failed write ({cause}) failed too ({e2})"
            logger.error("%s: %s", self.directory, self._failed)

    def roll(self, expected_next_offset: int | None = None, *, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset); the old one
        gets its final time-index entry. An empty active segment at that offset is kept."""
        self._check_writable()
        now = _now(now_ms)
        active = self.active_segment
        before = active.mark()
        try:
            seg = self._start_segment(expected_next_offset, now)
        except BaseException as e:
            self._undo(active, before, None, e)
            if isinstance(e, OSError) and not isinstance(e, StorageError):
                raise _files.write_error(e, self.directory, "rolling a new segment") from e
            raise
        if seg is None:
            return active
        self._finish_roll(active, seg)
        return seg

    def flush(self) -> None:
        """fsync the active segment and move the recovery point to the log end offset (the
        checkpoint file is rewritten only when the point moved)."""
        if self.writable and self._failed is None:
            self.active_segment.flush()
            if self._recovery_point != self.end_offset():
                RecoveryCheckpoint(self.end_offset(), clean_shutdown=False).write(self.directory)
                self._recovery_point = self.end_offset()

    def update_config(self, config: LogConfig) -> None:
        """A topic config changed while the log is open (UnifiedLog.updateConfig): appends from now
        on are validated, and segments rolled, by `config`."""
        self.config = config
        self._validator = None

    def close(self) -> None:
        """Final time-index entry on the active segment, flush, record a clean shutdown, release
        the files and the directory lock."""
        try:
            clean = self.writable and self._failed is None
            for seg in self.segments:
                seg.close()
            if clean:
                RecoveryCheckpoint(self.end_offset(), clean_shutdown=True).write(self.directory)
        finally:
            self.writable = False
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> Log:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- retention (§6.3: log_retention)
    def delete_old_segments(self, now_ms: int | None = None) -> list[DeletedSegment]:
        """Time- then size-based retention, oldest first, stopping at the first survivor; returns
        the DeletedSegment list. Only with cleanup.policy containing "delete"."""
        from .log_retention import delete_old_segments

        self._check_writable()
        return delete_old_segments(self, _now(now_ms))

    # ---- truncation (UnifiedLog.truncateTo)
    def truncate_to(self, offset: int) -> bool:
        """Remove every record at and after `offset`, as UnifiedLog.truncateTo does: segments with
        a base offset above it are deleted, the segment holding it is cut where the batch starting
        at `offset` starts (its indexes trimmed), the leader-epoch cache drops entries starting at
        or after it (truncate_from_end), the recovery point and the log end offset come down to it.
        An offset below the first segment's base empties the log, which starts again there
        (truncateFullyAndStartAt: the epoch cache is cleared). An offset at or past the log end
        changes nothing but the epoch cache's entries past the end, and returns False, as Kafka does.

        kbatch differs from Kafka in one place: `offset` must be where the log can end (the start of
        a batch that follows the one before it without a gap, one past a batch's last offset, or a
        segment's base offset). Kafka cuts the whole batch holding a mid-batch offset yet reports the
        offset as the log end, which a restart then contradicts; kbatch raises InvalidOffsetError
        naming where the log could end, and changes nothing.

        Crash-safe: what is to be done is written down first (log_loader.Truncation); a kill at any
        later step leaves a log that the next writer's open truncates the rest of the way, so it
        recovers to the old end or to `offset`, never between. Returns True."""
        self._check_writable()
        return self._truncate(offset, keep_segment_at_target=True)

    def _truncate(self, target: int, keep_segment_at_target: bool, written: bool = False) -> bool:
        """truncate_to; keep_segment_at_target=False also deletes a segment that starts at the
        target (an undo of appends that rolled); written: the Truncation file is already there."""
        from .log_truncation import truncate

        return truncate(self, target, keep_segment_at_target, written)

    def _forget_truncation(self, target: int) -> None:
        from .log_truncation import forget

        forget(self, target)

    def undo_appends(self, start: int, *, keep_segment_at_start: bool) -> None:
        """Take back every record appended from offset `start` on (a group of appends spanning several
        calls, undone after a later step failed, as the Spark writer's commit and `kbatch import`
        do): truncate_to, except that a segment starting at `start` goes too unless it was there
        before the appends (keep_segment_at_start)."""
        self._check_writable()
        self._truncate(start, keep_segment_at_target=keep_segment_at_start)

    def abandon(self) -> None:
        """Let go of the segment files and the directory's lock without writing anything (after a
        close that failed, e.g. a late task whose directory is gone)."""
        for seg in self.segments:
            seg.release()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def append_group(self) -> AppendGroup:
        """Several appends made one, all or nothing even across a kill (append_table, `kbatch
        import`, the Spark writer's commit): see AppendGroup."""
        self._check_writable()
        return AppendGroup(self)

    @property
    def failed(self) -> str | None:
        """Why this Log stopped accepting writes (a failed write it could not undo), or None; a
        reopen for writing recovers."""
        return self._failed

    def __repr__(self) -> str:
        return (f"Log({self.directory!r}, segments={len(self.segments)}, start={self.log_start_offset}, "
                f"writable={self.writable})")


# ------------------------------------------------------------------------------------ appends made one
class AppendGroup:
    """Appends made all or nothing (Log.append_table), even across a kill:

        with log.append_group() as group:
            for piece, more in pieces:
                group.append(piece, now_ms, more=more)

    Before the first append that others will follow, the log end to come back to is written down
    (a log_loader.Truncation, so a kill from then on recovers to it); when the block fails, what
    the earlier appends wrote is truncated away (Log._truncate), or, when the Log stopped writing
    (a write it could not undo), the note stays for the next writer's open to do that; when the
    block succeeds the note goes.

    A group opened inside another on the same Log (an append_table call inside `kbatch import`'s
    group, which spans all its calls to one partition) is part of the outer one and does nothing
    itself: the outer group's start is where a failure comes back to."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.outer = log._group
        self.start = log.end_offset()
        # an empty active segment at the start stays; a segment a roll started goes with the undo
        self.plan = log_loader.Truncation(self.start, any(s.base_offset == self.start for s in log.segments))
        self.written = False

    @property
    def keep_segment_at_target(self) -> bool:
        """Whether an undo keeps a segment starting at `start` (one that was there, empty, before)."""
        return self.plan.keep_segment_at_target

    def before_append(self, more: bool) -> None:
        """Called before each append; `more`: another append of the group follows this one."""
        if more and not self.written and self.outer is None:
            self.plan.write(self.log.directory)
            self.written = True

    def append(self, data: Buffer, now_ms: int | None = None, *, more: bool) -> AppendInfo:
        """before_append(more), then Log.append of whole batches (validated and assigned as a broker does)."""
        self.before_append(more)
        return self.log.append(data, now_ms, from_client=False)

    def commit(self) -> None:
        """The group succeeded: the note goes, the records stay (what a `with` block's end does)."""
        self.__exit__(None, None, None)

    def rollback(self, exc: BaseException) -> None:
        """The group failed with `exc`: what its appends wrote is taken out again (or, when the Log
        stopped writing, left for the next writer's open to take out)."""
        self.__exit__(type(exc), exc, exc.__traceback__)

    def __enter__(self) -> AppendGroup:
        if self.outer is None:
            self.log._group = self
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        log = self.log
        if self.outer is not None:
            return
        log._group = None
        if exc is None:
            if self.written:
                log._forget_truncation(self.start)
            return
        if log._failed is not None:  # the state in memory is not to be trusted: a reopen undoes it all
            return
        if log.end_offset() != self.start or self.written:
            try:
                log._truncate(self.start, self.plan.keep_segment_at_target, written=self.written)
            except BaseException as e2:
                from ..errors import LogWriteError

                raise LogWriteError(f"{exc} (and taking out what the earlier appends of the call wrote failed too: "
                                    f"{e2}; reopening the log for writing finishes that)", path=log.directory) from exc


def _append_table(log: Log, table: TableLike, now_ms: int | None = None, *, compression: W.Compression | None = None,
                 compression_level: int | None = None, records_per_batch: int | None = None) -> AppendInfo:
    """Log.append_table: the table's rows encoded (kbatch.columns.encode.encode_for_append) at the
    topic's codec and level unless told otherwise, appended in one AppendGroup."""
    import time

    from ..columns.encode import encode_for_append
    from .validator import AppendInfo

    cfg = log.config
    codec = compression if compression is not None else (cfg.compression or W.Compression.NONE)
    if compression_level is None and compression is None:
        compression_level = cfg.compression_level  # the topic's codec at the topic's level
    pieces = encode_for_append(table, compression=codec, compression_level=compression_level,
                               max_batch_bytes=cfg.max_message_bytes, segment_bytes=cfg.segment_bytes,
                               timestamp_extended=cfg.timestamp_extended, records_per_batch=records_per_batch)
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    infos: list[AppendInfo] = []
    try:
        with log.append_group() as group:
            for piece, more in pieces:
                infos.append(group.append(piece, now, more=more))
    except KBatchError as e:
        if infos and log._failed is None and log._group is None:  # (inside an outer group, that one undoes)
            done = AppendInfo.merge(infos)
            e.update(reason=e.reason + f" (append_table appended nothing: the {done.record_count} records the "
                     f"calls before took, offsets {done.first_offset}..{done.last_offset}, were taken out again; "
                     f"the log ends at {done.first_offset} as before)")
        raise
    if not infos:  # no rows: nothing appended (Log.append refuses empty input, as Kafka does)
        end = log.end_offset()
        return AppendInfo(end, end - 1, W.NO_TIMESTAMP, -1, None, False, 0, 0, 0, 0)
    return AppendInfo.merge(infos)


# ------------------------------------------------------------------------------------ KIP-79 over a log dir
def offsets_for_times(targets: Mapping[tuple[str, int], Target] | Iterable[tuple[tuple[str, int], Target]],
                      log_dir: PathLike) -> dict[tuple[str, int], OffsetAndTimestamp | KBatchError | None]:
    """ListOffsets over a directory of `<topic>-<partition>` folders.

    targets: {(topic, partition): target} or a list of ((topic, partition), target) pairs (so one
    partition can be named twice). A target is an int64 timestamp or EARLIEST / LATEST /
    MAX_TIMESTAMP. Returns {(topic, partition): OffsetAndTimestamp | None | KBatchError}:
    InvalidRequestError (42) for a partition named twice with different targets,
    UnsupportedForMessageFormatError (43) for a timestamp target on magic 0 data,
    UnknownTopicOrPartitionError (3) for a partition without a directory.
    """
    pairs = list(targets.items()) if isinstance(targets, Mapping) else list(targets)
    wanted: dict[tuple[str, int], Target] = {}
    dupes: set[tuple[str, int]] = set()
    for named, target in pairs:
        tp = (str(named[0]), int(named[1]))
        if tp in wanted and not _same_target(wanted[tp], target):
            dupes.add(tp)
        wanted.setdefault(tp, target)
    out: dict[tuple[str, int], OffsetAndTimestamp | KBatchError | None] = {}
    for tp, target in wanted.items():
        if tp in dupes:
            out[tp] = InvalidRequestError("Partition is named more than once with different targets",
                                          expected="one target per partition", found=f"{tp[0]}-{tp[1]}")
            continue
        path = _fs.join(log_dir if _fs.is_remote(log_dir) else os.fspath(log_dir), f"{tp[0]}-{tp[1]}")
        try:
            log = Log.open(path)
            try:
                if not isinstance(target, OffsetSpec) and log.magic() == W.MAGIC_VALUE_V0:
                    raise UnsupportedForMessageFormatError(
                        f"Cannot search offsets based on timestamp because message format version for "
                        f"partition {tp[0]}-{tp[1]} is 0 which is smaller than 1",
                        expected="magic >= 1", found="magic 0")
                out[tp] = log.offset_for(target)
            finally:
                log.close()
        except KBatchError as e:
            out[tp] = e
    return out


def _same_target(a: Target, b: Target) -> bool:
    if isinstance(a, OffsetSpec) or isinstance(b, OffsetSpec):
        return a is b
    return int(a) == int(b)


__all__ = ["Log", "LogConfig", "AppendGroup", "OffsetAndTimestamp", "offsets_for_times", "rebuild_indexes", "verify_indexes",
           "rebuild_segment_indexes",
           "IndexVerification", "SegmentIndexReport", "RecoveryReport", "DeletedSegment"]
