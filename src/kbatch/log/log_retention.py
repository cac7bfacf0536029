"""Retention (UnifiedLog.deleteOldSegments, kafka-format.md §6.3): time- then size-based, oldest
first, stopping at the first segment that stays; never past the high watermark; a log whose every
segment goes rolls first, so an empty active segment remains."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ..errors import StorageError
from . import files as _files

if TYPE_CHECKING:
    from .segment import LogSegment
    from .partition_log import PartitionLog


class DeletedSegment(NamedTuple):
    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    reason: str


def delete_old_segments(log: PartitionLog, now: int) -> list[DeletedSegment]:
    """Time- then size-based retention, oldest first, stopping at the first survivor; returns
    the DeletedSegment list. Only with cleanup.policy containing "delete"."""
    if "delete" not in log.config.cleanup_policies:
        return []
    deleted: list[DeletedSegment] = []
    if log.config.retention_ms >= 0:
        deleted += _delete_where(log, lambda seg: now - seg.largest_timestamp > log.config.retention_ms,
                                 "retention.ms", now)
    if log.config.retention_bytes >= 0 and log.size >= log.config.retention_bytes:
        diff = [log.size - log.config.retention_bytes]

        def breached(seg: LogSegment) -> bool:
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False

        deleted += _delete_where(log, breached, "retention.bytes", now)
    return deleted


def _delete_where(log: PartitionLog, predicate: Callable[[LogSegment], bool], reason: str, now: int) -> list[DeletedSegment]:
    deletable: list[LogSegment] = []
    high_watermark = log.end_offset()
    for i, seg in enumerate(log.segments):
        nxt = log.segments[i + 1] if i + 1 < len(log.segments) else None
        if nxt is None and seg.size == 0:
            break
        upper = nxt.base_offset if nxt is not None else high_watermark
        if not (high_watermark >= upper and predicate(seg)):
            break
        deletable.append(seg)
    if not deletable:
        return []
    if len(deletable) == len(log.segments):
        log.roll(now_ms=now)
    out: list[DeletedSegment] = []
    for seg in deletable:
        next_base = log.segments[log.segments.index(seg) + 1].base_offset
        info = DeletedSegment(seg.base_offset, next_base, seg.size, seg.largest_timestamp, reason)
        try:
            seg.delete_files()   # the .log goes first: from then on the segment is gone
        except OSError as e:
            raise StorageError(f"deleting segment {seg.path('.log')} failed ({e})", path=log.directory,
                               errno=e.errno) from e
        finally:
            if not os.path.exists(seg.path(".log")):
                log.segments.remove(seg)
                log.log_start_offset = max(log.log_start_offset, log.segments[0].base_offset)
        out.append(info)
    log.leader_epoch_cache.truncate_from_start(log.log_start_offset)
    _files.fsync_dir(log.directory)
    return out


__all__ = ["DeletedSegment", "delete_old_segments"]
