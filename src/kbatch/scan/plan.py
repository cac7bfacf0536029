"""What a scan reads: the partitions a topic selection takes under one or more paths, each one's
offsets [start, end) from the offset and time bounds (KIP-79 through the time index:
Log.offsets_for_times, kbatch.log.list_offsets) and the read path's upper bound (the high
watermark, or the last stable offset for read_committed: kbatch.log.fetch.read_log), and those
offsets cut into ranges by the planner every parallel reader shares (kbatch.log.segment_plan:
at `.index` entries, about `range_bytes` of segment bytes each)."""
from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ..errors import KBatchError
from ..log.fetch import IsolationLevel, read_log

if TYPE_CHECKING:
    from ..log.partition_files import PartitionFiles
    from ..log.unified_log import Log

#: a bound on offsets: one for every partition, or {topic: {partition: offset}} (ray.data.read_kafka's
#: form; a partition not named is unbounded there)
OffsetBound = Union[int, Mapping[str, Mapping[int, int]], None]
#: a bound on time: epoch milliseconds, or a datetime (a naive one is UTC, as ray.data.read_kafka takes it)
TimeBound = Union[int, _dt.datetime, None]
#: what scan() reads: a partition directory, a topic's or a broker's log directory, a tiered
#: layout, local or remote (s3://, gs://, ...), or several
Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

LEVELS = {"read_uncommitted": IsolationLevel.READ_UNCOMMITTED, "read_committed": IsolationLevel.READ_COMMITTED}


@dataclass(frozen=True)
class ScanRange:
    """Offsets [start_offset, end_offset) of one partition: a unit of work (a Ray read task reads
    one). end_offset None: up to where the read path stops (a read_committed read whose end is a
    transaction damage leaves undecided raises there, as read_log does)."""

    topic: str
    partition: int
    path: str
    start_offset: int
    end_offset: int | None


@dataclass(frozen=True)
class ScanPartition:
    """One partition of a scan: offsets [start_offset, end_offset) are read (its log start offset
    and the read path's upper bound at planning beside them)."""

    topic: str
    partition: int
    path: str
    start_offset: int
    end_offset: int
    log_start_offset: int
    #: the read ends at a transaction unreadable bytes leave undecided: reading it raises there
    undecided: bool = False

    @property
    def rows_at_most(self) -> int:
        return max(0, self.end_offset - self.start_offset)


def time_ms(t: TimeBound) -> int | None:
    """A time bound as epoch milliseconds (a naive datetime is UTC)."""
    if t is None:
        return None
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return (t - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // _dt.timedelta(milliseconds=1)
    if isinstance(t, bool) or not isinstance(t, int):
        raise TypeError(f"a time bound is epoch milliseconds (int) or a datetime, not {t!r}")
    return int(t)


def offset_for(bound: OffsetBound, topic: str, partition: int) -> int | None:
    """The bound of one partition."""
    if bound is None:
        return None
    if isinstance(bound, Mapping):
        per = bound.get(topic)
        return None if per is None or partition not in per else int(per[partition])
    if isinstance(bound, bool) or not isinstance(bound, int):
        raise TypeError(f"an offset bound is an int or {{topic: {{partition: offset}}}}, not {bound!r}")
    return int(bound)


def select_partitions(logs: Paths, topics: Iterable[str] | None = None, partitions: Iterable[int] | None = None, *,
                      exclude_topics: Iterable[str] | None = None,
                      include_internal: bool = False) -> list[PartitionFiles]:
    """Every partition under `logs` the topic selection takes (kbatch.log.topics: exact names,
    globs, excluded globs; internal topics only when named or asked for; a path that is itself a
    partition is always read), sorted by (topic, partition); a partition found under two paths
    is read once, from the first."""
    from ..log.partition_files import find_partition_files
    from ..log.topics import TopicSelection
    from ..log.topics import select_partitions as select

    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs)
    selection = TopicSelection.of(topics, exclude=exclude_topics, include_internal=include_internal)
    found: dict[tuple[str, int], PartitionFiles] = {}
    for p in paths:
        for part in select(find_partition_files(os.fspath(p)), os.fspath(p), selection):
            if part.topic is None or part.partition is None:
                raise KBatchError(f"{part.path}: not named <topic>-<partition>: a scan needs both")
            found.setdefault((part.topic, part.partition), part)
    want_p = None if partitions is None else set(partitions)
    return [part for (_t, p), part in sorted(found.items()) if want_p is None or p in want_p]


def resolve_offset_for_time(log: Log, t: int) -> int:
    """KIP-79: the first offset whose timestamp is >= t; the log end offset when none is."""
    hit = log.offsets_for_times(int(t))
    return log.end_offset() if hit is None else int(hit.offset)


def plan_partition(log: Log, part: PartitionFiles, *, from_offset: int | None, until_offset: int | None,
                   from_time: int | None, until_time: int | None, isolation: IsolationLevel,
                   skip_unreadable: bool) -> ScanPartition:
    """Where a scan of one partition starts and stops: the later of the offset and the time
    bound's offset (never before the log start), the earlier of the end bounds, and never past
    what the read path reads (the high watermark; read_committed: the last stable offset)."""
    assert part.topic is not None and part.partition is not None
    log_start = log.log_start_offset
    want = from_offset
    if from_time is not None:
        t_off = resolve_offset_for_time(log, from_time)
        want = t_off if want is None else max(want, t_off)
    start = log_start if want is None else max(want, log_start)
    stop = until_offset
    if until_time is not None:
        t_off = resolve_offset_for_time(log, until_time)
        stop = t_off if stop is None else min(stop, t_off)
    res = read_log(log, start, stop, isolation=isolation, skip_unreadable=skip_unreadable)
    return ScanPartition(part.topic, part.partition, part.path, start, max(start, res.upper_offset), log_start,
                         res.undecided is not None)


def plan_ranges(sp: ScanPartition, part: PartitionFiles, range_bytes: int, skip_unreadable: bool = False
                ) -> list[ScanRange]:
    """The partition's offsets cut into ranges by kbatch.log.segment_plan (the Spark readers'
    planner): one range a slice of about range_bytes segment bytes. A read that skips unreadable
    bytes is one range: where it goes on after damage (the next segment) depends on where it
    started, and a range starting past the damage would give rows the partition's read skips."""
    from ..log.segment_plan import offset_ranges, topic_partition

    if sp.end_offset <= sp.start_offset:
        cuts: list[tuple[int, int | None]] = []
    elif skip_unreadable:
        cuts = [(sp.start_offset, sp.end_offset)]
    else:
        cuts = offset_ranges(topic_partition(part), sp.start_offset, sp.end_offset, range_bytes)
    if sp.undecided:  # read on to the undecided transaction, so that the read path raises there
        cuts = cuts[:-1] + [(cuts[-1][0] if cuts else sp.start_offset, None)]
    return [ScanRange(sp.topic, sp.partition, sp.path, lo, hi) for lo, hi in cuts]


__all__ = ["ScanRange", "ScanPartition", "OffsetBound", "TimeBound", "Paths", "LEVELS", "time_ms", "offset_for",
           "select_partitions", "resolve_offset_for_time", "plan_partition", "plan_ranges"]
