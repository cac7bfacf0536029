"""Truncating a Log (UnifiedLog.truncateTo / truncateFullyAndStartAt), crash-safe: what is to be
done is written down first (loader.Truncation), so a kill at any later step leaves a log that the
next writer's open truncates the rest of the way. `plan` checks that the log can end at the target
(kbatch refuses an offset inside a batch, where Kafka would cut the batch and report the offset);
`truncate` carries it out on an open Log; `forget` removes a note nothing needs any more."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidOffsetError, StorageError
from ..record.file_records import crc_error_at
from . import files as _files
from . import loader as log_loader
from .checkpoints import RecoveryCheckpoint
from .log_segments import LogSegments
from .recovery import resume_active
from .index_build import build_indexes
from .segment import LogSegment

if TYPE_CHECKING:
    from .partition_log import PartitionLog

logger = logging.getLogger("kbatch.log")


def truncate(log: PartitionLog, target: int, keep_segment_at_target: bool, written: bool = False) -> bool:
    """Log.truncate_to; keep_segment_at_target=False also deletes a segment that starts at the
    target (an undo of appends that rolled); written: the Truncation file is already there."""
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
        raise TypeError(f"a truncation target is an int offset, not {target!r}")
    target = int(target)
    log._ongoing = None  # read again from what is left, when a transactional batch comes
    if target < 0:
        raise InvalidOffsetError("Cannot truncate to a negative offset", expected="an offset >= 0", found=target)
    end = log.end_offset()
    if target >= end:
        log.leader_epoch_cache.truncate_from_end(end)  # an epoch entry past the end (Kafka does this too)
        if written:
            forget(log, target)
        return False
    note, cut = plan(log.segments, target, keep_segment_at_target)
    if not written:
        note.write(log.directory)  # from here on, a kill is finished by the next writer's open
    kept = len(note.kept_bases([s.base_offset for s in log.segments]))
    try:
        for seg in log.segments[max(kept - 1, 0):]:
            seg.release()  # nothing written on the way out: the holding segment is reopened below
        log.segments = LogSegments(log.segments[:max(kept - 1, 0)])
        log_loader.truncate_segments(log.directory, note, cut)
        log_loader.truncate_epochs(log.leader_epoch_cache, note)
        if log._recovery_point is None or log._recovery_point > target:
            RecoveryCheckpoint(target, clean_shutdown=False).write(log.directory)
            log._recovery_point = target
        log.segments.append(reactivate(log, _files.list_segment_bases(log.directory)[-1]))
        log.log_start_offset = target if note.fully else min(log.log_start_offset, target)
        log._next_offset = target
        log_loader.Truncation.remove(log.directory)
    except BaseException as e:  # the note stays: the next writer's open finishes the truncation
        log._failed = (f"truncating to offset {target} was interrupted ({e}); reopening the log for writing "
                       f"finishes the truncation")
        logger.error("%s: %s", log.directory, log._failed)
        if isinstance(e, OSError) and not isinstance(e, StorageError):
            raise _files.write_error(e, log.directory, f"truncating to offset {target}") from e
        raise
    return True


def plan(segments: LogSegments, target: int, keep_segment_at_target: bool) -> tuple[log_loader.Truncation, int | None]:
    """(loader.Truncation, where to cut the last segment kept or None) for truncating to `target`;
    checks that the log can end there and that the bytes kept in that segment are valid batches (it
    becomes the active segment again). Changes nothing."""
    note = log_loader.Truncation(target, keep_segment_at_target)
    kept = note.kept_bases([s.base_offset for s in segments])
    if not kept:
        return note._replace(fully=True), None
    seg = segments[len(kept) - 1]
    prev_last: int | None = None
    cut: int | None = None
    gen = seg.log.scan(0, verify_crc=True, reuse=True)
    try:
        while cut is None:
            try:
                s = next(gen)
            except StopIteration as stop:
                cut = stop.value  # no batch reaches the target: cut any partial tail
                break
            cols = zip(*(s[k].tolist() for k in ("position", "base_offset", "last_offset", "crc_valid")))
            for i, (pos, base, last, ok) in enumerate(cols):
                if last >= target:
                    if base < target:
                        raise InvalidOffsetError(
                            f"Cannot truncate to offset {target}: it is inside the batch holding offsets "
                            f"{base}..{last} in {seg.path('.log')}", position=pos, base_offset=base,
                            expected=f"a batch boundary ({base} or {last + 1})", found=target)
                    cut = pos
                    break
                if not ok:
                    raise crc_error_at(s, i)
                prev_last = last
    finally:
        gen.close()
    end = seg.base_offset if prev_last is None else prev_last + 1
    if end != target:
        raise InvalidOffsetError(f"Cannot truncate to offset {target}: the log would end at {end} (no batch starts "
                                 f"there right after the one before)", expected=f"an offset where the log can end, "
                                 f"such as {end}", found=target)
    return note, cut


def reactivate(log: PartitionLog, base: int) -> LogSegment:
    """Open segment `base` as the active one after a truncation, its append state resumed from
    its bytes as a writer's open resumes the active segment (no close-time time entry)."""
    cfg = log.config
    seg = LogSegment.open(log.directory, base, writable=True, index_interval_bytes=cfg.index_interval_bytes,
                          max_index_size=cfg.segment_index_bytes, created_ms=int(time.time() * 1000))
    try:
        resume_active(seg, build_indexes(seg.log, base, cfg.index_interval_bytes, verify_crc=False), cfg,
                      log._jitter())
    except BaseException:
        seg.release()
        raise
    return seg


def forget(log: PartitionLog, target: int) -> None:
    """Remove the truncation note nothing needs any more. If that fails the Log stops writing:
    a note left behind would take later appends away at the next open."""
    try:
        log_loader.Truncation.remove(log.directory)
    except OSError as e:
        log._failed = f"the truncation note to offset {target} could not be removed ({e})"
        logger.error("%s: %s", log.directory, log._failed)
        if isinstance(e, StorageError):
            raise
        raise _files.write_error(e, log.directory, "removing the truncation note") from e


__all__ = ["truncate", "plan", "reactivate", "forget"]
