"""One streaming reader of Kafka's own files: `kbatch.scan(path, ...)` plans a read of a directory
of partitions (local or remote, any layout kbatch.log.layout reads) and gives its rows as Arrow
record batches, a window at a time, through the read path (kbatch.log.fetch): the rows a Kafka
consumer with that isolation level reads, and the read path's error where bytes cannot be read.

    import kbatch
    s = kbatch.scan("/var/kafka-logs", topics=["orders"], from_time=t0, until_time=t1,
                    columns=["key", "offset"], isolation="read_committed")
    s.schema, s.partitions, s.ranges          # what it will read
    reader = s.to_reader()                     # a pyarrow.RecordBatchReader (each call a fresh read)
    s.stats                                    # batches and bytes read, columns built

`kbatch.read_topic` is this read into one table; the engine adapters (kbatch.polars,
kbatch.duckdb, kbatch.ray) read through it. docs/engines.md is the guide.
"""
from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .plan import (LEVELS, OffsetBound, Paths, ScanPartition, ScanRange, TimeBound, offset_for, plan_partition,
                   plan_ranges, select_partitions, time_ms)
from .reader import (COLUMNS, DEFAULT_MAX_BYTES_IN_FLIGHT, DEFAULT_RANGE_BYTES, MIN_MAX_BYTES_IN_FLIGHT, ReadOptions,
                     Scan, ScanStats, binary_schema, read_range)

if TYPE_CHECKING:
    from ..log.unified_log import Log


def scan(logs: Paths, *, topics: Iterable[str] | None = None, partitions: Iterable[int] | None = None,
         exclude_topics: Iterable[str] | None = None, include_internal: bool = False,
         from_offset: OffsetBound = None, until_offset: OffsetBound = None, from_time: TimeBound = None,
         until_time: TimeBound = None, isolation: str = "read_uncommitted", columns: Sequence[str] | None = None,
         limit: int | None = None, include_headers: bool = True, key_schema: Any = None, value_schema: Any = None,
         on_decode_error: Any = "fail", max_bytes_in_flight: int = DEFAULT_MAX_BYTES_IN_FLIGHT,
         range_bytes: int = DEFAULT_RANGE_BYTES, skip_unreadable: bool = False, verify_crc: bool = True,
         summary_cache: Any = True) -> Scan:
    """Plan a read of every partition under `logs` (a partition directory, a topic's or a broker's
    log directory, a tiered-storage layout, local or s3://, gs://, ...; or several).

    Topics: `topics` exact names or globs, `exclude_topics` globs, internal topics only when named
    or `include_internal` (as kbatch.read_topic). Bounds, on every partition: offsets
    [from_offset, until_offset) (an int, or {topic: {partition: offset}}), and by time (epoch ms or
    a datetime, naive = UTC) KIP-79's rule through the time index: from the first offset whose
    timestamp >= from_time up to the first whose timestamp >= until_time. `isolation`: the
    consumer's, read_uncommitted or read_committed (aborted transactions left out, stopping at the
    last stable offset). `columns`: the Kafka source's columns to give (COLUMNS; the others are
    never built: a key-only scan never makes a value array nor decodes a value), `limit`: at most
    that many rows. key_schema / value_schema: kbatch.values formats for typed key / value columns
    (on_decode_error as decode_columns'). `max_bytes_in_flight` (default 64 MiB, at least 40 MiB)
    bounds the reader's buffers whatever the topic's size; `range_bytes` the segment bytes of a
    planned range (kbatch.log.segment_plan's cuts at `.index` entries). Bytes the read path cannot
    read raise UnreadableDataError where a reader meets them, unless `skip_unreadable` (then each
    partition is one range, read as one read_log skipping them). `summary_cache`: the header
    summary's cache (kbatch.log.summary.SummaryCache, a directory, True: its default, False):
    a scan of only topic/partition/offset/timestamp/timestampType answers a range whose segments
    it covers (sealed ones whole, the active one's verified prefix) from their cached verified
    headers and timestamps, reading no record but those appended since (kbatch.scan.headers; the
    same rows)."""
    if isolation not in LEVELS:
        raise ValueError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
    level = LEVELS[isolation]
    names = [c for c in COLUMNS if include_headers or c != "headers"]
    cols = tuple(names if columns is None else columns)
    bad = [c for c in cols if c not in names]
    if bad or not cols or len(set(cols)) != len(cols):
        raise ValueError(f"columns must be distinct names of {', '.join(names)}, not {list(cols)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a row count >= 0, not {limit!r}")
    if max_bytes_in_flight < MIN_MAX_BYTES_IN_FLIGHT:
        raise ValueError(f"max_bytes_in_flight must be at least {MIN_MAX_BYTES_IN_FLIGHT} (two 16 MiB scan windows "
                         f"and the chunks decoded from them), not {max_bytes_in_flight}")
    if range_bytes < 1:
        raise ValueError(f"range_bytes must be positive, not {range_bytes}")
    t_from, t_until = time_ms(from_time), time_ms(until_time)
    opts = ReadOptions(level, cols, include_headers, key_schema, value_schema, on_decode_error, skip_unreadable,
                       verify_crc, max_bytes_in_flight, summary_cache)
    from ..log.unified_log import Log

    logs_open: dict[str, Log] = {}
    planned: list[ScanPartition] = []
    ranges: list[ScanRange] = []
    try:
        for part in select_partitions(logs, topics, partitions, exclude_topics=exclude_topics,
                                      include_internal=include_internal):
            assert part.topic is not None and part.partition is not None
            log = logs_open[part.path] = Log.open(part.path)
            sp = plan_partition(log, part, from_offset=offset_for(from_offset, part.topic, part.partition),
                                until_offset=offset_for(until_offset, part.topic, part.partition),
                                from_time=t_from, until_time=t_until, isolation=level,
                                skip_unreadable=skip_unreadable)
            planned.append(sp)
            ranges.extend(plan_ranges(sp, part, range_bytes, skip_unreadable))
    except BaseException:
        for lg in logs_open.values():
            lg.close()
        raise
    return Scan(planned, ranges, opts, logs_open, limit)


class _ScanModule(types.ModuleType):
    """kbatch.scan is this package and its function at once: `kbatch.scan(path)` plans a scan."""

    def __call__(self, *args: Any, **kwargs: Any) -> Scan:
        return scan(*args, **kwargs)


sys.modules[__name__].__class__ = _ScanModule
__signature__ = inspect.signature(scan)  # what help() and the API reference show for kbatch.scan(...)

__all__ = ["scan", "Scan", "ScanStats", "ScanRange", "ScanPartition", "ReadOptions", "read_range", "binary_schema", "COLUMNS",
           "DEFAULT_MAX_BYTES_IN_FLIGHT", "DEFAULT_RANGE_BYTES", "MIN_MAX_BYTES_IN_FLIGHT", "select_partitions"]
