"""The streaming reader: a Scan's planned ranges read one after the other through the read path
(kbatch.log.fetch.read_log -> FetchResult.record_batches), as Arrow record batches.

Memory: a range is read a scan window at a time (kbatch.record.file_records.WINDOW) and decoded a
chunk at a time (kbatch.columns.decode: about `chunk_bytes` of records a chunk, a few chunks decoded
ahead on the decode threads); `max_bytes_in_flight` sets the chunk size so that the window being
read, the one before it and the chunks in flight stay within it, whatever the topic's size.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import KBatchError
from ..log.fetch import IsolationLevel, read_log
from .plan import ScanPartition, ScanRange

if TYPE_CHECKING:
    import pyarrow as pa

    from ..log.unified_log import Log

#: the default budget of a scan's buffers (the scan windows and the decoded chunks in flight)
DEFAULT_MAX_BYTES_IN_FLIGHT = 64 * 1024 * 1024
#: the least budget: two scan windows (the one read and the one before it, 16 MiB each) and room
#: for chunks
MIN_MAX_BYTES_IN_FLIGHT = 40 * 1024 * 1024
#: segment bytes a planned range covers, about (a Ray read task reads one)
DEFAULT_RANGE_BYTES = 128 * 1024 * 1024
#: the columns a scan gives (kbatch.columns.decode.schema without isTombstone: the Kafka source's)
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def chunk_bytes_for(max_bytes_in_flight: int) -> int:
    """The decode chunk size a budget allows: the budget less two scan windows (the one read and
    the one before it), shared by the chunks in flight (the one yielded, the one assembled and
    those decoded ahead: one a decode thread, at most 8), each with its decoded columns (about
    twice its records' bytes for small records)."""
    import os

    from ..record.file_records import WINDOW

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    in_flight = min(cpus, 8) + 2
    return max(1 << 20, (max_bytes_in_flight - 2 * WINDOW) // (2 * in_flight))


@dataclass
class ScanStats:
    """What a scan's readers did so far: the read path's batches and the bytes they span in the
    segments (an index lookup's skipped bytes are never counted), the Arrow record batches and
    rows given, and how many arrays of each column the decoder built (a projection's other columns
    are never built)."""

    ranges_read: int = 0
    batches_read: int = 0
    bytes_read: int = 0
    record_batches: int = 0
    rows: int = 0
    columns_built: Counter[str] = field(default_factory=Counter)
    #: ranges answered from the header summary's cache (kbatch.scan.headers), not decoded
    ranges_from_headers: int = 0


@dataclass(frozen=True)
class ReadOptions:
    """How ranges are read (picklable: a Ray read task gets a copy)."""

    isolation: IsolationLevel
    columns: tuple[str, ...]
    include_headers: bool = True
    key_schema: Any = None
    value_schema: Any = None
    on_decode_error: Any = "fail"
    skip_unreadable: bool = False
    verify_crc: bool = True
    max_bytes_in_flight: int = DEFAULT_MAX_BYTES_IN_FLIGHT
    #: the header summary's cache (kbatch.log.summary.SummaryCache, a directory, True: its default
    #: directory, False/None: never): a narrow projection (kbatch.scan.headers.NARROW) of a range
    #: whose segments it covers (sealed, and the active one's verified prefix) is built from it
    summary_cache: Any = True

    def decoded(self) -> tuple[str, ...]:
        """The columns the decoder builds: those asked for, and the offsets (the read path drops
        aborted rows by offset)."""
        return tuple(c for c in COLUMNS if c in self.columns or c == "offset")


def binary_schema(columns: tuple[str, ...] | list[str], include_headers: bool = True) -> pa.Schema:
    """The schema of a scan of these columns without key_schema / value_schema (binary keys and
    values): known without reading or planning anything."""
    import pyarrow as pa

    from ..columns.decode import schema

    full = schema(include_headers, False, False)
    return pa.schema([full.field(c) for c in columns])


def read_range(log: Log, r: ScanRange, opts: ReadOptions, stats: ScanStats | None = None
               ) -> Generator[pa.RecordBatch, None, None]:
    """The rows of one planned range as the read path gives them (FetchResult.record_batches):
    control batches never, aborted transactions' records not under read_committed, unreadable
    bytes raising UnreadableDataError where they are met (after the rows before them) unless
    skip_unreadable; only opts.columns (and the offsets) are built. A narrow projection of a range
    the header summary's cache covers is built from it (kbatch.scan.headers: the same rows)."""
    cache = _summary_cache(opts)
    if cache is not None:
        from ..columns.decode import schema
        from .headers import cached_range

        got = cached_range(log, r, opts.columns, opts.isolation, cache, schema(True, False, False))
        if got is not None:
            rbs, batches, nbytes = got
            if stats is not None:
                stats.ranges_read += 1
                stats.ranges_from_headers += 1
                stats.batches_read += batches
                stats.bytes_read += nbytes
            for rb in rbs:
                if stats is not None:
                    stats.record_batches += 1
                    stats.rows += rb.num_rows
                    stats.columns_built.update(rb.schema.names)
                yield rb
            return
    res = read_log(log, r.start_offset, r.end_offset, isolation=opts.isolation,
                   skip_unreadable=opts.skip_unreadable, verify_crc=opts.verify_crc)
    try:
        for rb in res.record_batches(r.topic, r.partition, include_headers=opts.include_headers, tombstone=False,
                                     key_schema=opts.key_schema, value_schema=opts.value_schema,
                                     on_decode_error=opts.on_decode_error, columns=opts.decoded(),
                                     chunk_bytes=chunk_bytes_for(opts.max_bytes_in_flight)):
            if stats is not None:
                stats.record_batches += 1
                stats.rows += rb.num_rows
                stats.columns_built.update(rb.schema.names)
            yield rb
    finally:
        if stats is not None:
            stats.ranges_read += 1
            stats.batches_read += res.batches_read
            stats.bytes_read += res.bytes_read


def _summary_cache(opts: ReadOptions) -> Any:
    """The SummaryCache a range may be answered from, or None (not a narrow projection, no cache,
    or a read that skips damage or trusts CRCs: those are decoded)."""
    from ..log.summary import SummaryCache, default_cache_dir
    from .headers import answerable

    c = opts.summary_cache
    if not c or opts.skip_unreadable or not opts.verify_crc or not answerable(opts.columns):
        return None
    if isinstance(c, SummaryCache):
        return c
    d = default_cache_dir() if c is True else str(c)
    return None if d is None else SummaryCache(d)


class Scan:
    """A planned scan (kbatch.scan): its partitions and ranges, its schema, and readers over it.
    Each to_reader() (or iteration) is a fresh read of the planned ranges; the partitions' Logs
    stay open until close() (a context manager closes them too)."""

    def __init__(self, partitions: list[ScanPartition], ranges: list[ScanRange], opts: ReadOptions,
                 logs: dict[str, Log], limit: int | None) -> None:
        self.partitions = partitions
        self.ranges = ranges
        self.options = opts
        self.limit = limit
        self.stats = ScanStats()
        self._logs = logs
        self._schema: pa.Schema | None = None

    # ---- what it reads
    @property
    def columns(self) -> tuple[str, ...]:
        return self.options.columns

    @property
    def max_bytes_in_flight(self) -> int:
        return self.options.max_bytes_in_flight

    @property
    def schema(self) -> pa.Schema:
        """The record batches' schema: the Kafka source's columns asked for (key and value typed by
        key_schema / value_schema: the first record batch's types, found by decoding it)."""
        if self._schema is None:
            binary = self._binary_schema()
            if self.options.key_schema is None and self.options.value_schema is None:
                self._schema = binary
            else:
                gen = self._batches(None, ScanStats())
                try:
                    first = next(gen, None)
                finally:
                    gen.close()  # its files' reads end here, not at garbage collection
                self._schema = binary if first is None else first.schema
        return self._schema

    def _binary_schema(self) -> pa.Schema:
        return binary_schema(self.options.columns, self.options.include_headers)

    # ---- reading
    def log(self, r: ScanRange | ScanPartition) -> Log:
        """The partition's Log (opened on first use)."""
        lg = self._logs.get(r.path)
        if lg is None:
            from ..log.unified_log import Log

            lg = self._logs[r.path] = Log.open(r.path)
        return lg

    def _batches(self, limit: int | None, stats: ScanStats) -> Generator[pa.RecordBatch, None, None]:
        left = limit
        want = list(self.options.columns)
        schema = self._schema
        for r in self.ranges:
            if left is not None and left <= 0:
                return
            gen = read_range(self.log(r), r, self.options, stats)
            try:
                for rb in gen:
                    if left is not None:
                        if left <= 0:
                            break
                        if rb.num_rows > left:
                            rb = rb.slice(0, left)
                        left -= rb.num_rows
                    rb = rb.select(want) if rb.schema.names != want else rb
                    if schema is not None and rb.schema != schema:
                        rb = _cast(rb, schema)
                    yield rb
            finally:
                gen.close()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        """The planned ranges' rows, range after range (a partition's in offset order), at most
        `limit` rows."""
        schema = self.schema
        self._schema = schema
        return self._batches(self.limit, self.stats)

    def to_reader(self, *, close: bool = False) -> pa.RecordBatchReader:
        """A pyarrow.RecordBatchReader over a fresh read (DuckDB, Polars, pyarrow.dataset take one).
        close: the scan's Logs are closed when the reader is done (a scan read once)."""
        import pyarrow as pa

        schema = self.schema
        return pa.RecordBatchReader.from_batches(schema, self._closing(iter(self)) if close else iter(self))

    def _closing(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from batches
        finally:
            self.close()

    def to_table(self) -> pa.Table:
        """Every row in one pyarrow.Table."""
        import pyarrow as pa

        return pa.Table.from_batches(list(self), schema=self.schema)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream protocol: a fresh reader (DuckDB and Polars read a Scan as a table)."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    # ---- its resources
    def close(self) -> None:
        for lg in self._logs.values():
            lg.close()
        self._logs.clear()

    def __enter__(self) -> Scan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Scan({len(self.partitions)} partitions, {len(self.ranges)} ranges, columns={list(self.columns)}, "
                f"limit={self.limit}, max_bytes_in_flight={self.max_bytes_in_flight})")


def _cast(rb: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A later range's typed batch in the scan's schema (its first batch's types)."""
    import pyarrow as pa

    try:
        return rb.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        raise KBatchError(f"a range's rows decode to {rb.schema}, the scan's first rows to {schema}, and one cannot "
                          f"be cast to the other ({e}): give the format a reader schema (subject= or "
                          f"reader_schema=) so that every range has one type") from None
