"""A partition's segments in offset order and the lookups over them (Kafka's LogSegments, with
the KIP-79 half of UnifiedLog.fetchOffsetByTimestamp).

`LogSegments` is a list of LogSegment (oldest first, the last one active) that also answers
"which segment": `floor` (the segment holding an offset), `higher`, `for_timestamp` (the first
segment whose largest timestamp reaches a target), and the ListOffsets answers built on them
(kafka-format.md §5.4; DESIGN.md decisions 3 and 5). A list, so that every reader that walks
`log.segments` keeps working; `Log` owns one and delegates.

`open_local` / `open_listed` open the segments a PartitionFiles names: a broker directory's
`.log` files all at once (so retention racing the open restarts the listing), or a remote or
tiered-storage listing whose objects are read by ranges when used.
"""
from __future__ import annotations

import bisect
import errno
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, overload

import numpy as np

from .. import _wire as W
from .._wire import OffsetSpec
from ..errors import FileChangedError, StorageError
from ..record.file_records import FIRST_WINDOW as segment_first_window
from .segment import LogSegment, UnreadRange

if TYPE_CHECKING:
    import numpy.typing as npt

    from .partition_files import PartitionFiles
    from .segment import SegmentSettings

_T = TypeVar("_T")

#: bulk lookup arrays: (offsets, timestamps, leader epochs), -1 where there is no answer
LookupArrays = tuple["npt.NDArray[np.int64]", "npt.NDArray[np.int64]", "npt.NDArray[np.int64]"]


class OffsetAndTimestamp(NamedTuple):
    """A lookup answer (Kafka's OffsetAndTimestamp). timestamp is None for EARLIEST / LATEST
    answers; leader_epoch is None when unknown. KIP-228: the timestamp may be negative."""

    offset: int
    timestamp: int | None
    leader_epoch: int | None = None


def answers(offsets: npt.NDArray[np.int64], stamps: npt.NDArray[np.int64],
            epochs: npt.NDArray[np.int64]) -> list[OffsetAndTimestamp | None]:
    """Bulk lookup arrays -> [OffsetAndTimestamp | None] (leader epoch None when unknown)."""
    eps: list[int | None] = (epochs.tolist() if (epochs >= 0).all()
                             else np.where(epochs >= 0, epochs, np.array(None)).tolist())
    out: list[OffsetAndTimestamp | None] = list(map(tuple.__new__, itertools.repeat(OffsetAndTimestamp),
                                                    zip(offsets.tolist(), stamps.tolist(), eps)))
    for i in np.flatnonzero(offsets < 0).tolist():
        out[i] = None
    return out


class LogSegments(list[LogSegment]):
    """The segments of one partition, oldest first (see the module docstring)."""

    # ---- which segment
    @property
    def active(self) -> LogSegment:
        """The last segment (the one appends go to)."""
        return self[-1]

    def base_offsets(self) -> list[int]:
        return [s.base_offset for s in self]

    def floor_index(self, offset: int) -> int:
        """The index of the last segment whose base offset is <= `offset` (0 when none is)."""
        return max(0, bisect.bisect_right(self.base_offsets(), offset) - 1)

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= `offset` (Kafka's floorSegment)."""
        i = bisect.bisect_right(self.base_offsets(), offset) - 1
        return self[i] if i >= 0 else None

    def higher(self, offset: int) -> LogSegment | None:
        """The first segment with a base offset > `offset` (Kafka's higherSegment)."""
        i = bisect.bisect_right(self.base_offsets(), offset)
        return self[i] if i < len(self) else None

    def next_base(self, i: int) -> int | None:
        """The base offset of the segment after segment i (None for the last one)."""
        return self[i + 1].base_offset if i + 1 < len(self) else None

    @property
    def size(self) -> int:
        return sum(s.size for s in self)

    @property
    def problems(self) -> list[str]:
        return [p for s in self for p in s.problems]

    def for_timestamp(self, t: int) -> LogSegment | None:
        """The first segment (offset order) whose largestTimestamp >= t (UnifiedLog)."""
        for seg in self:
            if seg.largest_timestamp >= t:
                return seg
        return None

    def largest_timestamps(self) -> npt.NDArray[np.int64]:
        return np.array([s.largest_timestamp for s in self], dtype=np.int64)

    # ---- reading the last batches
    @overload
    @staticmethod
    def last_headers(seg: LogSegment, column: str) -> int | None: ...
    @overload
    @staticmethod
    def last_headers(seg: LogSegment, column: tuple[str, ...]) -> tuple[int, ...] | None: ...

    @staticmethod
    def last_headers(seg: LogSegment, column: str | tuple[str, ...]) -> int | tuple[int, ...] | None:
        """The given header column's value (a tuple of columns: a tuple of values) for the
        segment's last batch that can be read, None when it has none; read from the last index
        entry on (past bytes that cannot be read, as the lookups read: LogSegment.lookup_windows)."""
        def run() -> int | tuple[int, ...] | None:
            last: int | tuple[int, ...] | None = None
            for s in seg.lookup_windows(seg.last_entry_position(), segment_first_window):
                if len(s["position"]):
                    last = (int(s[column][-1]) if isinstance(column, str)
                            else tuple(int(s[c][-1]) for c in column))
            return last
        return seg._guarded(run)

    def magic(self) -> int | None:
        """The message format of the newest batch (None when there is none)."""
        for seg in reversed(self):
            last = self.last_headers(seg, "magic")
            if last is not None:
                return last
        return None

    # ---- lookups (KIP-79)
    def stable(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a lookup again when a segment stopped trusting its indexes during it (its facts,
        such as its largest timestamp, may have changed which segment answers)."""
        for _ in range(len(self) + 1):
            before = sum(s.indexes_from_scan for s in self)
            out = fn(*args)
            if sum(s.indexes_from_scan for s in self) == before:
                return out
        return out

    def offset_for_time(self, t: int, log_start_offset: int) -> OffsetAndTimestamp | None:
        """The first record at or after the log start with a timestamp >= t (one int64 target)."""
        seg = self.for_timestamp(t)
        if seg is None:
            return None
        hit = seg.find_offset_by_timestamp(t, log_start_offset)
        return None if hit is None else OffsetAndTimestamp(hit.offset, hit.timestamp, hit.leader_epoch)

    def offsets_for_times_array(self, targets: npt.ArrayLike, log_start_offset: int) -> LookupArrays:
        """offset_for_time for an array of int64 targets: segments answer the targets that fall to
        them, by one header pass when they are many (dense), by index lookups when few."""
        given = np.asarray(targets)
        if given.dtype.kind not in "iu":
            raise TypeError(f"numpy targets must be integer timestamps, not {given.dtype}")
        flat = given.astype(np.int64).ravel()
        offsets = np.full(len(flat), -1, dtype=np.int64)
        stamps = np.full(len(flat), W.NO_TIMESTAMP, dtype=np.int64)
        epochs = np.full(len(flat), -1, dtype=np.int64)
        if not self or not len(flat):
            return offsets, stamps, epochs
        largest = np.maximum.accumulate(self.largest_timestamps())
        which = np.searchsorted(largest, flat, side="left")  # first segment with largest >= t
        for si in np.flatnonzero(np.bincount(which, minlength=len(self) + 1)[:len(self)]).tolist():
            sel = np.flatnonzero(which == si)
            seg = self[si]
            if len(sel) * 8 >= seg.offset_index.entries:  # dense: one header pass over the segment
                offsets[sel], stamps[sel], epochs[sel] = seg.find_offsets_by_timestamps(flat[sel], log_start_offset)
            else:  # sparse: index lookups, O(log n) each
                for i in sel.tolist():
                    hit = seg.find_offset_by_timestamp(int(flat[i]), log_start_offset)
                    if hit is not None:
                        offsets[i], stamps[i] = hit.offset, hit.timestamp
                        epochs[i] = -1 if hit.leader_epoch is None else hit.leader_epoch
        return offsets, stamps, epochs

    def max_timestamp(self) -> OffsetAndTimestamp | None:
        """MAX_TIMESTAMP (KIP-734): the segment with the largest max timestamp (first on ties),
        then the first record in the batch holding it whose timestamp equals it."""
        best: LogSegment | None = None
        best_ts = 0
        for seg in self:
            ts = seg.max_timestamp_so_far
            if ts is not None and (best is None or ts > best_ts):
                best, best_ts = seg, ts
        if best is None:
            return None
        hit = best.max_timestamp_and_offset()
        return None if hit is None else OffsetAndTimestamp(hit.offset, hit.timestamp, hit.leader_epoch)

    def unread_for(self, target: int | np.integer[Any] | OffsetSpec, answer: OffsetAndTimestamp | None,
                   log_start_offset: int) -> list[UnreadRange]:
        """The byte ranges found unreadable (so far) that could have held the answer to a lookup
        of `target` that gave `answer` (see Log.unread_for)."""
        last = self[-1] if self else None
        ranges = [(seg, u) for seg in self for u in seg.unread
                  if not (seg is last and u.partial and u.before_offset is None)]  # Kafka ignores a partial tail
        if target is OffsetSpec.EARLIEST:
            return []
        if isinstance(target, OffsetSpec):
            return [u for _seg, u in ranges]
        t = int(target)
        out: list[UnreadRange] = []
        for seg, u in ranges:
            if u.before_offset is not None and u.before_offset <= log_start_offset:
                continue  # wholly below the log start: no answer can come from there
            if answer is not None and (u.after_offset if u.after_offset is not None else seg.base_offset) >= answer.offset:
                continue  # after the answer
            if u.bound is not None and u.bound <= t:
                continue  # the index says its records are all older than the target
            out.append(u)
        return out


# ------------------------------------------------------------------------------------ opening
def raise_open_files_limit() -> bool:
    """Raise this process's soft limit on open files to the hard limit (as a broker's start script
    asks for); True if that gave more room."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            return True
    except (ImportError, ValueError, OSError):
        pass
    return False


def open_local(files: PartitionFiles, seg_kw: SegmentSettings, writable_last: bool = False,
               attempts: int = 5) -> LogSegments:
    """Open every segment's .log of a local broker directory now, so the Log keeps reading these
    files whatever retention or compaction does later. A segment deleted between listing and
    opening (a retention race) makes the listing start again; non-regular files named like
    segments raise StorageError."""
    path = files.path
    for attempt in range(attempts):
        bases = files.relist().base_offsets
        segs = LogSegments()
        try:
            for i, b in enumerate(bases):
                segs.append(LogSegment.open(path, b, **seg_kw, writable=writable_last and i == len(bases) - 1))
            return segs
        except FileNotFoundError as e:
            for seg in segs:
                seg.release()
            if attempt == attempts - 1:
                raise FileChangedError(f"segments kept disappearing while the log was opened ({e.filename}); "
                                       f"is retention running with a very short retention.ms?", path=path) from None
        except OSError as e:
            for seg in segs:
                seg.release()
            if e.errno != errno.EMFILE or attempt == attempts - 1 or not raise_open_files_limit():
                if e.errno == errno.EMFILE:
                    raise StorageError(f"too many open files: a Log keeps the .log of each of its {len(bases)} segments "
                                       f"open; raise the limit (ulimit -n)", path=path, errno=e.errno) from None
                raise
        except BaseException:
            for seg in segs:
                seg.release()
            raise
    return LogSegments()


def open_listed(files: PartitionFiles, seg_kw: SegmentSettings) -> LogSegments:
    """The segments of a remote directory or a tiered-storage layout: one listing names every
    segment and its files' sizes; objects are read by ranges when used."""
    segments = LogSegments()
    try:
        for f in files.segments:
            if f.base_offset is None:  # a listing names segments by their base offsets
                raise StorageError("a segment without a base offset", path=f.path(".log"))
            segments.append(LogSegment(files.path, f.base_offset, files=f, **seg_kw))
    except BaseException:
        for seg in segments:
            seg.release()
        raise
    return segments


__all__ = ["LogSegments", "OffsetAndTimestamp", "answers", "open_local", "open_listed", "raise_open_files_limit"]
