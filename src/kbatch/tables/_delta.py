"""Delta Lake tables through the `deltalake` package (delta-rs).

kbatch writes the Parquet files itself, then commits them in one Delta transaction with, for every
partition the commit advances, a `txn` action (SetTransaction) whose appId is
`kbatch:<topic>:<partition>` and whose version is the next Kafka offset the table does not hold.
The txn actions are part of the table's state (kept across checkpoints), so a rerun reads where
each partition stands with `DeltaTable.transaction_version(appId)`. Two writers that advance the
same partition conflict in Delta's commit protocol (a concurrent update of the same appId): the
second commit is refused, its files are never part of the table. The commitInfo of each commit also
carries `kbatch.offsets` (the [start, end) offsets per partition it added) and `kbatch.ends` (every
partition's end after it), read back with `DeltaTable.history()`.
"""
from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError

try:
    import deltalake
    from deltalake import CommitProperties, DeltaTable, Transaction
    from deltalake.exceptions import CommitFailedError, TableNotFoundError
    from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
except ModuleNotFoundError as e:
    raise MissingDependencyError("kbatch's Delta tables (kbatch export --format delta)", "deltalake", "tables") from e

from ._parquet import DataFile, write_files
from ._source import CommitConflict

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa

    from ._source import PartitionPlan

APP_PREFIX = "kbatch:"
ISOLATION_KEY = "kbatch.isolationLevel"
COMPACTED_KEY = "kbatch.compacted"


def app_id(topic: str, partition: int) -> str:
    return f"{APP_PREFIX}{topic}:{partition}"


def _ts(ms: int) -> str:
    import datetime as dt

    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class DeltaTarget:
    """A Delta table at a local directory (created on the first commit)."""

    PARTITION_BY = ["topic", "partition"]

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.root = uri
        self.storage_options = storage_options
        self.dt: DeltaTable | None = None
        #: folders this target created (root, topic=, partition=), parents first: a discard removes
        #: the empty ones, so a failed first export leaves no folders without a _delta_log
        self.made: list[str] = []
        self.reload()

    def reload(self) -> None:
        try:
            self.dt = DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            self.dt = None

    def exists(self) -> bool:
        return self.dt is not None

    def done(self, topic: str, partition: int) -> int | None:
        """The next offset of this partition the table does not hold (None: it holds none)."""
        if self.dt is None:
            return None
        return self.dt.transaction_version(app_id(topic, partition))

    def layout(self) -> tuple[list[str], list[str]] | None:
        """(column names, partition columns) of the table; None before it exists."""
        if self.dt is None:
            return None
        return [f.name for f in self.dt.schema().fields], list(self.dt.metadata().partition_columns)

    def column_types(self) -> dict[str, pa.DataType]:
        """The table's key and value column types (none before it exists)."""
        import pyarrow as pa

        if self.dt is None:
            return {}
        arrow = pa.schema(self.dt.schema().to_arrow())
        return {f.name: f.type for f in arrow if f.name in ("key", "value")}

    def _evolve(self, schema: pa.Schema) -> None:
        """Typed columns that gained fields: one schema change (ADD COLUMN of the merged struct)
        before the data commit; Delta's own check refuses anything else."""
        assert self.dt is not None
        want = deltalake.Schema.from_arrow(schema)
        have = {f.name: f.to_json() for f in self.dt.schema().fields}
        changed = [f for f in want.fields if f.name in have and f.to_json() != have[f.name]]
        if changed:
            self.dt.alter.add_columns(changed)
            self.reload()

    def known_ends(self) -> dict[str, int]:
        """Every partition's end as the newest kbatch commit's commitInfo records them (for
        `kbatch.ends`; where each partition stands is read from its txn appId, not from here)."""
        if self.dt is None:
            return {}
        for h in self.dt.history(limit=100):
            if "kbatch.ends" in h:
                return {str(k): int(v) for k, v in json.loads(h["kbatch.ends"]).items()}
        return {}

    def properties(self) -> dict[str, str]:
        """kbatch's table properties (isolation level, compacted): JSON in the table's description
        (Delta's configuration takes only the keys the protocol knows)."""
        if self.dt is None:
            return {}
        try:
            found = json.loads(self.dt.metadata().description or "{}")
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def version(self) -> int | None:
        return None if self.dt is None else self.dt.version()

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        """The columns the data files hold: the partition columns live in the paths and the log."""
        return schema.remove(schema.get_field_index("partition")).remove(schema.get_field_index("topic"))

    def write_files(self, plan: PartitionPlan, batches: Iterator[pa.RecordBatch], schema: pa.Schema,
                    **kwargs: Any) -> Iterator[DataFile]:
        sub = os.path.join(f"topic={plan.topic}", f"partition={plan.partition}")
        d = self.root
        for part in ("", f"topic={plan.topic}", f"partition={plan.partition}"):
            d = os.path.join(d, part) if part else d
            if not os.path.isdir(d):
                os.makedirs(d, exist_ok=True)
                self.made.append(d)
        return write_files(self.root, sub, batches, schema, **kwargs)

    def commit(self, files: list[tuple[str, int, DataFile]], advanced: dict[tuple[str, int], tuple[int, int]],
               ends: dict[str, int], schema: pa.Schema, props: dict[str, str], *, overwrite: bool = False,
               before_commit: Callable[[], None] | None = None, **_kwargs: Any) -> int:
        """Commit the files (topic, partition, file) and the partitions' new ends in one transaction
        (overwrite: the table's files are replaced). Raises CommitConflict when another writer
        advanced one of these partitions first."""
        now = int(time.time() * 1000)
        adds = []
        for topic, partition, f in files:
            stats: dict[str, Any] = {"numRecords": f.rows,
                                     "minValues": {"offset": f.min_offset}, "maxValues": {"offset": f.max_offset},
                                     "nullCount": {"offset": 0, "timestamp": f.null_ts}}
            if f.min_ts is not None and f.max_ts is not None:
                stats["minValues"]["timestamp"] = _ts(f.min_ts)
                stats["maxValues"]["timestamp"] = _ts(f.max_ts)
            adds.append(AddAction(f.relpath.replace(os.sep, "/"), f.size, {"topic": topic, "partition": str(partition)},
                                  now, True, json.dumps(stats)))
        meta = {"kbatch.offsets": json.dumps({f"{t}-{p}": [s, e] for (t, p), (s, e) in sorted(advanced.items())}),
                "kbatch.ends": json.dumps(dict(sorted(ends.items())))}
        txns = [Transaction(app_id(t, p), e, now) for (t, p), (_s, e) in sorted(advanced.items())]
        cp = CommitProperties(custom_metadata=meta, app_transactions=txns, max_commit_retries=0)
        if before_commit is not None:
            before_commit()
        try:
            if self.dt is None:
                create_table_with_add_actions(self.uri, deltalake.Schema.from_arrow(schema), adds, mode="error",
                                              partition_by=self.PARTITION_BY, description=json.dumps(props),
                                              storage_options=self.storage_options, commit_properties=cp)
            else:
                self._evolve(schema)
                assert self.dt is not None
                actions: list[AddAction | RemoveAction] = list(adds)
                self.dt.create_write_transaction(actions, "overwrite" if overwrite else "append", schema,
                                                 partition_by=self.PARTITION_BY, commit_properties=cp)
        except CommitFailedError as e:
            raise CommitConflict(str(e)) from e
        except Exception as e:
            if self.dt is None:  # another writer created the table first?
                self.reload()
                if self.dt is not None:
                    raise CommitConflict(str(e)) from e
            raise
        self.reload()
        assert self.dt is not None
        return self.dt.version()

    def discard(self, files: list[tuple[str, int, DataFile]]) -> None:
        for _t, _p, f in files:
            try:
                os.unlink(os.path.join(self.root, f.relpath))
            except OSError:
                pass
        for d in reversed(self.made):  # children first; a folder that holds anything stays
            try:
                os.rmdir(d)
            except OSError:
                continue
            self.made.remove(d)


def history_offsets(uri: str) -> list[dict[str, Any]]:
    """[{version, timestamp, offsets: {"T-P": [start, end]}, ends: {"T-P": end}}] of the table's
    kbatch commits, newest first (from commitInfo)."""
    out = []
    for h in DeltaTable(uri).history():
        if "kbatch.offsets" in h:
            out.append(dict(version=h.get("version"), timestamp=h.get("timestamp"),
                            offsets=json.loads(h["kbatch.offsets"]), ends=json.loads(h.get("kbatch.ends", "{}"))))
    return out
