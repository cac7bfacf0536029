"""A writer's open recovers the log as a broker does after its last shutdown (LogLoader /
LogSegment.recover; checkpoints.RecoveryCheckpoint says how much): the segments to recover are
read in full, CRCs checked, and re-indexed when their indexes differ; other inactive segments get
missing or failing indexes rebuilt; the active segment is always re-read, a torn or corrupt tail
cut at the end of its last valid batch, and its append state resumed (`resume_active`, which a
truncation's reactivated segment shares). `.txnindex` files of recovered segments are rewritten
from their ABORT markers."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .. import _wire as W
from ..errors import CorruptRecordError
from . import files as _files
from . import producer_state as _txns
from .checkpoints import RecoveryCheckpoint
from .index import OffsetIndex, TimeIndex
from .index_tools import read_or_none
from . import loader as log_loader
from .loader import RecoveryReport
from .index_build import MaxTimestampTracker, build_indexes
from .segment import LogSegment

if TYPE_CHECKING:
    from .log_config import LogConfig
    from .partition_files import PartitionFiles
    from .index_build import IndexBuild
    from .segment import SegmentSettings
    from .partition_log import PartitionLog

    L = TypeVar("L", bound=PartitionLog)

logger = logging.getLogger("kbatch.log")


def resume_active(seg: LogSegment, built: IndexBuild, config: LogConfig, roll_jitter_ms: int) -> None:
    """Make `seg` the active segment again, its append state resumed from `built` (its bytes'
    indexes): writable indexes holding those entries, no close-time time entry until it is
    rolled or closed, the bytes since the last index entry, its roll jitter."""
    tidx = built.timeindex[:-W.TIME_INDEX_ENTRY_SIZE] if built.final_time_entry else built.timeindex
    oi = OffsetIndex.writable(seg.path(".index"), seg.base_offset, max_index_size=config.segment_index_bytes,
                              entries=built.index)
    ti = TimeIndex.writable(seg.path(".timeindex"), seg.base_offset, max_index_size=config.segment_index_bytes,
                            entries=tidx)
    seg.use_indexes(oi, ti, MaxTimestampTracker(built.max_timestamp, built.offset_of_max_timestamp))
    seg.bytes_since_last_index_entry = built.valid_bytes - built.last_indexed_position
    seg.roll_jitter_ms = roll_jitter_ms


def load_writable(cls: Callable[[str, list[LogSegment], LogConfig, bool, _files.DirLock], L], files: PartitionFiles,
                  cfg: LogConfig, seg_kw: SegmentSettings) -> L:
    """Log.open(..., writable=True) of a local broker directory (LogLoader.load): the `.lock`
    taken, leftovers of interrupted writes removed (loader.clean_directory), every segment opened
    (an empty directory gets its first), the log recovered, the epoch cache trimmed to it."""
    from .log_segments import open_local

    path = files.path
    lock = _files.DirLock.acquire(path, "open the log for writing")
    segments: list[LogSegment] = []
    try:
        cleaned = tuple(log_loader.clean_directory(path))
        checkpoint = RecoveryCheckpoint.read(path)
        segments = open_local(files, seg_kw, writable_last=True)
        if not segments:
            segments = [LogSegment.create(path, 0, **seg_kw)]
            _files.fsync_dir(path)
        log = cls(path, segments, cfg, True, lock)
        log._load_log_start_offset()
        recover(log, checkpoint, cleaned)
        # LogLoader: the epoch cache follows the recovered log's start and end
        cache = log.leader_epoch_cache
        cache.truncate_from_end(log.end_offset())
        cache.truncate_from_start(log.log_start_offset)
    except BaseException:
        for seg in segments:
            seg.release()  # nothing is written on the way out of a failed open
        lock.release()
        raise
    return log


def recover(log: PartitionLog, checkpoint: RecoveryCheckpoint, cleaned: tuple[str, ...] = ()) -> None:
    """Broker-style recovery of a Log opened for writing (see the module docstring); sets
    log.recovery (a RecoveryReport) and writes the recovery point at the new log end."""
    interval = log.config.index_interval_bytes
    rebuilt: list[int] = []
    recovered: list[int] = []
    to_recover = set(checkpoint.segments_to_recover([s.base_offset for s in log.segments]))
    for seg in log.segments[:-1]:
        if seg.base_offset in to_recover:
            _recover_inactive(seg, interval, rebuilt)
            recovered.append(seg.base_offset)
            continue
        seg.offset_index  # reads the index files, or builds them in memory and says why
        if seg.index_problem is not None:
            built = build_indexes(seg.log, seg.base_offset, interval)
            _files.atomic_write(seg.path(".index"), built.index)
            _files.atomic_write(seg.path(".timeindex"), built.timeindex)
            logger.warning("Rebuilt indexes of segment %s: %s", seg.path(".log"), seg.index_problem)
            rebuilt.append(seg.base_offset)
            seg.index_problem = None
    seg = log.segments[-1]
    built = build_indexes(seg.log, seg.base_offset, interval, stop_on_error=True)
    recovered.append(seg.base_offset)
    cut = 0
    reason: str | None = None
    if built.valid_bytes < seg.size:
        reason = (str(built.error) if built.error is not None
                  else seg.log.incomplete(built.valid_bytes, "the segment"))
        cut = seg.log.truncate_to(built.valid_bytes)
        logger.warning("Truncated %d bytes at byte %d of %s during recovery: %s", cut, built.valid_bytes,
                       seg.path(".log"), reason)
    if [read_or_none(seg.path(s)) for s in (".index", ".timeindex")] != [built.index, built.timeindex]:
        rebuilt.append(seg.base_offset)
    resume_active(seg, built, log.config, log._jitter())
    next_offset = seg.base_offset if built.last_offset is None else built.last_offset + 1
    log._next_offset = next_offset
    recover_txn_indexes(log, set(recovered))
    seg.flush()
    log.recovery = RecoveryReport(cut, reason, tuple(rebuilt), tuple(recovered), tuple(cleaned))
    # everything below the log end offset is now checked and on disk: the next unclean open
    # starts from here; a crash from now on is an unclean shutdown
    RecoveryCheckpoint(next_offset, clean_shutdown=False).write(log.directory)
    log._recovery_point = next_offset


def _recover_inactive(seg: LogSegment, interval: int, rebuilt: list[int]) -> None:
    """An inactive segment from the recovery point on: read in full; invalid bytes refuse the open
    (Kafka would truncate there and delete every later segment); indexes rewritten when they differ."""
    built = build_indexes(seg.log, seg.base_offset, interval, stop_on_error=True)
    if built.error is not None or built.valid_bytes < seg.size:
        why = built.error or seg.log.incomplete(built.valid_bytes, "the segment")
        raise CorruptRecordError(
            f"Segment {seg.path('.log')} holds invalid bytes from byte {built.valid_bytes} ({why}), and "
            f"later segments follow it. Kafka's recovery would truncate it there and delete every later "
            f"segment; kbatch changes nothing: check it with `kbatch verify`, then repair or move the "
            f"segments after it", position=built.valid_bytes,
            expected="complete, valid batches up to the next segment", found=str(why))
    if [read_or_none(seg.path(x)) for x in (".index", ".timeindex")] != [built.index, built.timeindex]:
        _files.atomic_write(seg.path(".index"), built.index)
        _files.atomic_write(seg.path(".timeindex"), built.timeindex)
        logger.warning("Rewrote the indexes of recovered segment %s", seg.path(".log"))
        rebuilt.append(seg.base_offset)
    seg.use_indexes(OffsetIndex(seg.base_offset, built.index, max_index_size=seg.max_index_size),
                    TimeIndex(seg.base_offset, built.timeindex, max_index_size=seg.max_index_size),
                    MaxTimestampTracker(built.max_timestamp, built.offset_of_max_timestamp))


def recover_txn_indexes(log: PartitionLog, recovered: set[int]) -> list[int]:
    """LogSegment.recover's `.txnindex` half: a recovered segment's file is rewritten from the
    ABORT markers it holds (the transactions' first offsets and the last stable offsets need
    the transactions still open before it, so then every earlier segment's headers are read
    too). A recovered segment with no ABORT marker keeps no entries. Returns the bases rewritten."""
    segs = [seg for seg in log.segments if seg.base_offset in recovered]
    probe = _txns.follow_segments(seg.windows() for seg in segs)[0]
    if not any(probe) and not any(seg.files.has(".txnindex") for seg in segs):
        return []
    per_segment, ongoing = _txns.follow_segments((seg.windows() for seg in log.segments), log._ongoing_at_start())
    log._ongoing = ongoing
    changed: list[int] = []
    for seg, want in zip(log.segments, per_segment):
        if seg.base_offset not in recovered:
            continue
        path = seg.path(".txnindex")
        have = read_or_none(path)
        data = _txns.txn_index_bytes(want)
        if have == data or (have is None and not want):
            continue
        _files.atomic_write(path, data)
        seg._txn_index = None  # read again
        logger.warning("Rewrote the transaction index of recovered segment %s (%d aborted transactions)",
                       seg.path(".log"), len(want))
        changed.append(seg.base_offset)
    return changed


__all__ = ["RecoveryReport", "load_writable", "recover", "recover_txn_indexes", "resume_active"]
