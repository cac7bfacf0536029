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
                counters: dict[str, int] | None = None) -> Iterator[DataFile]:
    """Write `batches` (projected onto `schema`'s columns) into Parquet files under root/subdir, a
    new file once one reaches `target_file_size` bytes or the batches' types change; yield each
    file when it is closed."""
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
                writer = pq.ParquetWriter(f, rb_schema, compression=codec)
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
