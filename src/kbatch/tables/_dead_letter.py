"""The dead-letter table of a typed export (`on_decode_error="dead-letter"`): records whose key or
value did not decode, raw, with the error, in a table of the same format beside the export's
(`<table>_dead_letter`; kbatch.tables.dead_letter_name).

Columns: the Kafka source's (key, value, topic, partition, offset, timestamp, timestampType[,
headers]: the bytes as they are in the log), then `schema_id` (the id in the failing key's or
value's header, null when it has none) and `error` (what did not decode and why, with the offset).
Exactly once across reruns: the dead-letter table is committed just before the export's own commit,
recording per partition (a txn appId / the kbatch.ends snapshot property, as the export's table
does) the end of the offsets it holds letters for; a rerun that reads those offsets again (the
export's commit never landed) leaves out the letters below that end.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._source import CommitConflict

if TYPE_CHECKING:
    import pyarrow as pa

    from ._parquet import DataFile
    from ._source import PartitionPlan


def dead_letter_schema(include_headers: bool) -> pa.Schema:
    import pyarrow as pa

    from ._source import table_schema

    return table_schema(include_headers).append(pa.field("schema_id", pa.int32())).append(pa.field("error", pa.string()))


class DeadLetters:
    """Letters of one export run into `target` (a DeltaTarget or IcebergTarget)."""

    def __init__(self, target: Any, include_headers: bool) -> None:
        self.target = target
        self.schema = dead_letter_schema(include_headers)
        self.pending: list[tuple[str, int, DataFile]] = []
        self.advanced: dict[tuple[str, int], tuple[int, int]] = {}
        self.target.create_props = {"kbatch.deadLetter": "true"}

    def write(self, plan: PartitionPlan, batches: list[pa.RecordBatch], *, compression: str) -> int:
        """Write the partition's letters (those a committed earlier run did not already hold) as data
        files; the number of records they hold for this run (rows that left the export's table)."""
        import pyarrow as pa

        if not batches:
            return 0
        n = sum(b.num_rows for b in batches)
        done = self.target.done(plan.topic, plan.partition)
        rows = [b.select(self.schema.names).cast(self.schema) for b in batches]
        if done is not None:  # an earlier run committed these letters, not the export's rows: not again
            import pyarrow.compute as pc

            rows = [b.filter(pc.greater_equal(b.column(b.schema.get_field_index("offset")), pa.scalar(done, pa.int64())))
                    for b in rows]
            rows = [b for b in rows if b.num_rows]
        if rows:
            for f in self.target.write_files(plan, iter(rows), self.target.file_schema(self.schema),
                                             target_file_size=128 << 20, compression=compression):
                self.pending.append((plan.topic, plan.partition, f))
        lo, hi = plan.start, plan.end
        self.advanced[(plan.topic, plan.partition)] = (lo, hi)
        return int(n)

    def commit(self, advanced: dict[tuple[str, int], tuple[int, int]]) -> None:
        """Commit the letters written for partitions the export is about to commit."""
        mine = {k: v for k, v in self.advanced.items() if k in advanced}
        if not mine:
            return
        files = [f for f in self.pending if (f[0], f[1]) in mine]
        ends = dict(self.target.known_ends())
        for (t, p), (_s, e) in mine.items():
            ends[f"{t}-{p}"] = e
        try:
            self.target.commit(files, mine, ends, self.schema, self.target.create_props)
        except CommitConflict:
            self.target.discard(files)
            raise
        self.pending = [f for f in self.pending if (f[0], f[1]) not in mine]
        for k in mine:
            del self.advanced[k]

    def discard(self) -> None:
        self.target.discard(self.pending)
        self.pending, self.advanced = [], {}
