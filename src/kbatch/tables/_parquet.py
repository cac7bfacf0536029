"""Parquet data files for a table: rolled at a target size, named by the first offset they hold,
written whole before any commit names them (an uncommitted file is never part of the table)."""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._source import record_bytes

if TYPE_CHECKING:
    import pyarrow as pa

COMPRESSIONS = ("zstd", "snappy", "lz4", "gzip", "none")
#: a leaf column gets a dictionary when its first batch holds at most this share of distinct values
#: among its non-null ones (measured: below it the dictionary makes the file smaller; above it the
#: writer hashes every value for a dictionary that is larger than the values, or is abandoned at the
#: 1 MiB dictionary page limit, and the file grows)
DICTIONARY_DISTINCT_RATIO = 0.1
#: the rows of the first batch the decision looks at
DECISION_ROWS = 1 << 15
#: a decision made on at least this many rows holds for the topic's later files (WriterChoices)
SETTLED_ROWS = 1000


def leaf_columns(batch: pa.RecordBatch) -> Iterator[tuple[str, pa.Array]]:
    """(Parquet column path, values) of each leaf column of `batch`, as the writer names them
    (`value.ship.city`, `headers.list.element.key`); a list's values are its elements."""
    import pyarrow as pa

    def walk(path: str, arr: pa.Array) -> Iterator[tuple[str, pa.Array]]:
        t = arr.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from walk(f"{path}.{t.field(i).name}", arr.field(i))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from walk(f"{path}.list.element", arr.flatten())
        elif pa.types.is_map(t):
            yield from walk(f"{path}.key_value.key", arr.keys)
            yield from walk(f"{path}.key_value.value", arr.items)
        else:
            yield path, arr

    for name, col in zip(batch.schema.names, batch.columns):
        yield from walk(name, col)


def writer_options(batch: pa.RecordBatch) -> dict[str, Any]:
    """The ParquetWriter options of a file whose first batch is `batch`, the one place every
    kbatch Parquet file (export --format parquet, Delta, Iceberg) takes them from: a dictionary
    only on the leaf columns where it pays (few distinct values: an enum, a status, a small
    set of names), not on offsets, timestamps, ids or free text; DELTA_BINARY_PACKED on the
    integer columns that move in small steps (offsets, timestamps). Statistics stay on every column:
    readers prune row groups by them and Iceberg's add_files takes the file's metrics (and the
    identity partitions' values) from them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    dictionary: list[str] = []
    encoding: dict[str, str] = {}
    for path, arr in leaf_columns(batch.slice(0, DECISION_ROWS)):
        if pa.types.is_boolean(arr.type) or pa.types.is_null(arr.type):  # never dictionary-encoded
            continue
        valid = len(arr) - arr.null_count
        try:
            distinct = pc.count_distinct(arr).as_py()
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
            dictionary.append(path)  # a type the hash kernels do not take: the writer's default for it
            continue
        if valid and distinct <= DICTIONARY_DISTINCT_RATIO * valid:
            dictionary.append(path)
        elif _small_steps(arr):
            encoding[path] = "DELTA_BINARY_PACKED"
    options: dict[str, Any] = {"use_dictionary": dictionary}
    if encoding:
        options["column_encoding"] = encoding
    return options


def _small_steps(arr: pa.Array) -> bool:
    """An integer-backed leaf (ints, timestamps, dates, times) whose steps from value to value
    span at most half its width: offsets, timestamps, sequence numbers. DELTA_BINARY_PACKED stores
    them in a few bits each, in less time than PLAIN's 8 bytes take to compress (measured: offsets
    1.8 ms against 3.3 ms for 100,000, 5 KB against 1.5 MB); on values that jump (random ids) it
    costs 3-4x PLAIN for no size, so they stay PLAIN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_date64(t) or pa.types.is_duration(t):
        width = 64
    elif pa.types.is_time32(t) or pa.types.is_date32(t):
        width = 32
    elif pa.types.is_integer(t):
        width = max(32, t.bit_width)  # int8/int16 are INT32 in Parquet
    else:
        return False
    values = arr.drop_null()
    if len(values) < 2:
        return False
    if not pa.types.is_integer(t):
        values = values.cast(pa.int64() if width == 64 else pa.int32())
    try:
        steps = pc.min_max(pc.pairwise_diff_checked(values.cast(pa.int64())))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # steps beyond int64 (unsigned 64-bit): no
        return False
    lo, hi = steps["min"].as_py(), steps["max"].as_py()
    return lo is not None and (hi - lo).bit_length() <= width // 2


class WriterChoices:
    """writer_options decided once per schema and reused for every file after the first: one
    topic's partitions share their values' shape, and hashing each file's first batch again costs
    as much as dictionary-encoding it (8 ms for a 33,000-row batch of 16 leaf columns). A first
    batch under SETTLED_ROWS rows decides for its own file only (a few rows say little about the
    rest). Callers keep one per topic."""

    def __init__(self) -> None:
        self.known: dict[pa.Schema, dict[str, Any]] = {}

    def options(self, batch: pa.RecordBatch) -> dict[str, Any]:
        found = self.known.get(batch.schema)
        if found is None:
            found = writer_options(batch)
            if batch.num_rows >= SETTLED_ROWS:
                self.known[batch.schema] = found
        return found


@dataclass
class DataFile:
    """One Parquet file written for a partition: its path relative to the table root, size, rows and
    the min/max of `offset` and `timestamp` (in epoch milliseconds; None when all are null)."""

    relpath: str
    size: int
    rows: int
    min_offset: int
    max_offset: int
    min_ts: int | None
    max_ts: int | None
    null_ts: int


def write_files(root: str, subdir: str, batches: Iterator[pa.RecordBatch],
                schema: pa.Schema, *, target_file_size: int, compression: str,
                counters: dict[str, int] | None = None, choices: WriterChoices | None = None
                ) -> Iterator[DataFile]:
    """Write `batches` (projected onto `schema`'s columns) into Parquet files under root/subdir, a
    new file once one reaches `target_file_size` bytes or the batches' types change; yield each
    file when it is closed. `choices`: the writer options decided for the topic so far (shared by
    its partitions); None: decided here."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    codec = None if compression == "none" else compression
    os.makedirs(os.path.join(root, subdir), exist_ok=True)
    names = schema.names
    writer: Any = None
    f: Any = None
    rel = ""
    stats: dict[str, Any] = {}
    open_schema: pa.Schema | None = None
    choices = choices if choices is not None else WriterChoices()

    def close() -> DataFile:
        writer.close()
        f.flush()
        os.fsync(f.fileno())
        f.close()
        return DataFile(rel, os.path.getsize(os.path.join(root, rel)), stats["rows"], stats["min_o"], stats["max_o"],
                        stats["min_t"], stats["max_t"], stats["null_t"])

    try:
        for rb in batches:
            if counters is not None:
                counters["record_bytes"] = counters.get("record_bytes", 0) + record_bytes(rb)
            # the batch's own types: typed key/value columns may widen within a run (a file has one schema)
            rb_schema = pa.schema([rb.schema.field(n) for n in names])
            rb = pa.RecordBatch.from_arrays([rb.column(rb.schema.get_field_index(n)) for n in names], schema=rb_schema)
            if writer is not None and open_schema != rb_schema:
                yield close()
                writer = None
            offsets = rb.column(names.index("offset"))
            ts = rb.column(names.index("timestamp")).cast(pa.int64())
            if writer is None:
                first = int(offsets[0].as_py())
                rel = os.path.join(subdir, f"part-{first:020d}-{uuid.uuid4().hex[:12]}.parquet")
                f = open(os.path.join(root, rel), "wb")
                writer = pq.ParquetWriter(f, rb_schema, compression=codec, **choices.options(rb))
                open_schema = rb_schema
                stats = dict(rows=0, min_o=first, max_o=first, min_t=None, max_t=None, null_t=0)
            writer.write_batch(rb)
            stats["rows"] += rb.num_rows
            stats["max_o"] = int(offsets[-1].as_py())
            mm = pc.min_max(ts)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if lo is not None:
                stats["min_t"] = lo // 1000 if stats["min_t"] is None else min(stats["min_t"], lo // 1000)
                stats["max_t"] = hi // 1000 if stats["max_t"] is None else max(stats["max_t"], hi // 1000)
            stats["null_t"] += ts.null_count
            if f.tell() >= target_file_size:
                yield close()
                writer = None
        if writer is not None:
            yield close()
            writer = None
    finally:
        if writer is not None:  # an error mid-file: the partial file is no one's
            try:
                writer.close()
                f.close()
            finally:
                try:
                    os.unlink(os.path.join(root, rel))
                except OSError:
                    pass
