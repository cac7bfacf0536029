"""`--compacted`: the log-cleaner view of each partition as one table version that replaces the
table's content: per key, the record with the highest offset; a key whose latest record is a
tombstone (a null value, or KIP-87's tombstone flag) is left out; records of aborted transactions
and control records never count (the read path, read_committed by default); records without a key
are left out (a compacted topic has none). No delete files: the version is a plain overwrite.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ._parquet import WriterChoices
from ._source import CommitConflict, PartitionExport, PartitionPlan, iter_rows, plan_partition, table_schema

if TYPE_CHECKING:
    import pyarrow as pa

    from ..log.fetch import IsolationLevel
    from ._typed import Typing


def latest_per_key(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """The rows a log cleaner keeps of one partition's rows (with `isTombstone`), as `schema`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batches:
        return schema.empty_table()
    t = pa.Table.from_batches(batches)
    t = t.filter(pc.is_valid(t["key"]))
    last = t.group_by("key").aggregate([("offset", "max")])
    t = t.filter(pc.is_in(t["offset"], value_set=last["offset_max"]))
    t = t.filter(pc.and_(pc.is_valid(t["value"]), pc.invert(t["isTombstone"])))
    return t.select(schema.names).sort_by("offset")


def run_compacted(target: Any, parts: list[tuple[str, int, str]], logs_open: dict[tuple[str, int], Any],
                  result: Any, level: IsolationLevel, typing: Typing, *, include_headers: bool, until_offset: int | None,
                  until_time: int | None, compression: str, target_file_size: int, props: dict[str, str],
                  before_commit: Any = None) -> None:
    schema = table_schema(include_headers)
    file_schema = target.file_schema(schema)
    files: list[tuple[str, int, Any]] = []
    advanced: dict[tuple[str, int], tuple[int, int]] = {}
    ends: dict[str, int] = {}
    result.partitions = []
    choices: dict[str, WriterChoices] = {}  # a topic's partitions share its files' writer options
    try:
        for t, p, d in parts:
            pl: PartitionPlan = plan_partition(logs_open[(t, p)], t, p, d, None, from_offset=None,
                                               until_offset=until_offset, from_time=None, until_time=until_time,
                                               isolation=level)
            kept = latest_per_key(list(iter_rows(pl, level, include_headers, tombstone=True)), schema)

            def rows(kept: pa.Table = kept) -> Iterator[pa.RecordBatch]:
                yield from kept.to_batches()

            counters: dict[str, int] = {}
            # the cleaner's view is picked on the framed bytes (keys compared as bytes), then typed
            kept_rows = typing.rows(t, rows(), counters) if typing else rows()
            for f in target.write_files(pl, kept_rows, file_schema, target_file_size=target_file_size,
                                        compression=compression, counters=None if typing else counters,
                                        choices=choices.setdefault(t, WriterChoices())):
                files.append((t, p, f))
            advanced[(t, p)] = (pl.start, pl.end)
            ends[pl.key] = pl.end
            result.partitions.append(PartitionExport(t, p, pl.start, pl.end, kept.num_rows,
                                                     counters.get("record_bytes", 0), pl.lost, None))
    except BaseException:
        target.discard(files)
        raise
    try:
        result.version = target.commit(files, advanced, ends, typing.schema(schema), props, overwrite=True,
                                       before_commit=before_commit, compression=compression,
                                       target_file_size=target_file_size)
    except CommitConflict:  # certainly not committed (any other error: the files stay, orphans at worst)
        target.discard(files)
        raise
    result.commits += 1
