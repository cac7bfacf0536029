"""Appends made one, all or nothing even across a kill (Log.append_table, `kbatch import`, the
Spark writer's commit): AppendGroup writes down the log end to come back to (a loader.Truncation)
before the first of several appends, and takes back what they wrote when the group fails."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _wire as W
from ..errors import KBatchError
from . import loader as log_loader

if TYPE_CHECKING:
    from types import TracebackType

    from .._typing import Buffer, TableLike
    from .unified_log import Log
    from .validator import AppendInfo


def append_table(log: Log, table: TableLike, now_ms: int | None = None, *, compression: W.Compression | None = None,
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


__all__ = ["AppendGroup", "append_table"]
