"""What a table export reads from one partition: the offsets to read and the rows they hold.

The offsets come from the read path (kbatch.log.fetch.read_log): it decides which batches a
consumer with the isolation level sees, which data batches belong to aborted transactions, where
read_committed stops (the last stable offset) and which bytes could not be read. The rows are then
decoded column-wise (kbatch.columns.decode.iter_record_batches) from the byte span of each segment
those batches occupy, less the offsets of aborted batches; control batches are never rows.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING


from ..errors import KBatchError
from ..log.fetch import IsolationLevel, read_log

if TYPE_CHECKING:
    import pyarrow as pa

    from ..log.unified_log import Log


class DataLossError(KBatchError):
    """Offsets a table had not yet received are gone from the log (retention deleted them)."""


@dataclass
class PartitionExport:
    """What one run did for one partition: offsets [start, end) read, `rows` written; `lost`: offsets
    [lo, hi) retention removed before the table had them; `error`: why the partition was not
    advanced (None: it was), `error_offset` the offset it names (else where the partition stays)."""

    topic: str
    partition: int
    start: int
    end: int
    rows: int
    record_bytes: int
    lost: tuple[int, int] | None
    previous_end: int | None
    error: str | None = None
    error_offset: int | None = None


def table_schema(include_headers: bool = True) -> pa.Schema:
    """The table's columns: the Kafka source's (kbatch.columns.decode.schema without isTombstone)."""
    from ..columns.decode import schema

    return schema(include_headers, False, False)


class CommitConflict(Exception):
    """Another writer committed to the same partitions first (the table's commit protocol said so)."""


@dataclass
class PartitionPlan:
    """One partition's share of an export run: offsets [start, end) are read; `done` is the next
    offset the table had before this run (None: the table never held this partition)."""

    topic: str
    partition: int
    path: str
    log: Log
    done: int | None
    start: int
    end: int
    lost: tuple[int, int] | None = None   # offsets [lo, hi) the table never saw that the log no longer has
    undecided: bool = False   # the read ends at a transaction unreadable bytes leave undecided (it raises there)
    rows: int = 0
    record_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.topic}-{self.partition}"


def resolve_offset_for_time(log: Log, t: int) -> int:
    """KIP-79: the first offset whose timestamp is >= t; the log end offset when none is."""
    hit = log.offsets_for_times(int(t))
    return log.end_offset() if hit is None else int(hit.offset)


def plan_partition(log: Log, topic: str, partition: int, path: str, done: int | None, *,
                   from_offset: int | None, until_offset: int | None, from_time: int | None,
                   until_time: int | None, isolation: IsolationLevel) -> PartitionPlan:
    """Where this run starts and stops for one partition. A table that already holds offsets up to
    `done` is resumed from there (never before: no offset is written twice); retention that removed
    offsets past `done` (or past an explicit from-offset) is reported in `lost`."""
    log_start = log.log_start_offset
    want = from_offset
    if from_time is not None:
        t_off = resolve_offset_for_time(log, from_time)
        want = t_off if want is None else max(want, t_off)
    lost: tuple[int, int] | None = None
    if done is not None:
        start = done if want is None else max(done, want)
    else:
        start = log_start if want is None else want
    if start < log_start:
        lost = (start, log_start)
        start = log_start
    stop = until_offset
    if until_time is not None:
        t_off = resolve_offset_for_time(log, until_time)
        stop = t_off if stop is None else min(stop, t_off)
    res = read_log(log, start, stop, isolation=isolation)
    end = max(start, res.upper_offset)
    # a read_committed end that is a transaction damage leaves undecided is no LSO: iter_rows reads
    # on to it, so that the read path raises there (the table is never "up to date" past damage)
    return PartitionPlan(topic, partition, path, log, done, start, end, lost, undecided=res.undecided is not None)


def iter_rows(plan: PartitionPlan, isolation: IsolationLevel, include_headers: bool = True,
              tombstone: bool = False) -> Iterator[pa.RecordBatch]:
    """The rows of offsets [plan.start, plan.end) as Arrow record batches (key, value, topic,
    partition, offset, timestamp, timestampType[, headers]), in offset order: what a consumer of
    `isolation` reads (FetchResult.record_batches). Raises UnreadableDataError (before yielding
    anything) where the read path meets bytes it cannot read."""
    if plan.end <= plan.start and not plan.undecided:
        return
    res = read_log(plan.log, plan.start, None if plan.undecided else plan.end, isolation=isolation)
    for rb in res.record_batches(plan.topic, plan.partition, check_first=True, include_headers=include_headers,
                                 tombstone=tombstone):
        plan.rows += rb.num_rows
        yield rb


def record_bytes(rb: pa.RecordBatch) -> int:
    """Keys + values (+ header keys and values) bytes of a record batch: what the benchmark counts."""
    import pyarrow.compute as pc

    total = 0
    for name in ("key", "value"):
        col = rb.column(rb.schema.get_field_index(name))
        total += int(pc.sum(pc.binary_length(col)).as_py() or 0)
    i = rb.schema.get_field_index("headers")
    if i >= 0:
        flat = pc.list_flatten(rb.column(i))
        if len(flat):
            total += int(pc.sum(pc.binary_length(pc.struct_field(flat, "key"))).as_py() or 0)
            total += int(pc.sum(pc.binary_length(pc.struct_field(flat, "value"))).as_py() or 0)
    return total
