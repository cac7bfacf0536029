"""Iceberg tables through `pyiceberg`: its SQL catalog on SQLite by default, a REST catalog by URI.

kbatch writes the Parquet data files itself (as for Delta) and registers them with pyiceberg's
add_files (partition values from the files' statistics). Each commit is one Iceberg snapshot (an
append, or a delete and an append for --compacted) whose summary
carries `kbatch.offsets` (the [start, end) offsets per partition it added) and `kbatch.ends`
(every partition's end after it); a run reads where the table stands from the current snapshot
(walking back to the newest snapshot kbatch made, past another writer's maintenance snapshots;
when snapshot expiry removed every kbatch snapshot of that lineage, from the table property
`kbatch.ends`, set in the same catalog commit as each snapshot).
The catalog's commit is a compare-and-swap on the table's metadata: a second exporter that read the
same snapshot is refused (kbatch creates its tables with `commit.retry.num-retries=0`, and sets it
on a table that lacks it, so pyiceberg never replays an append over a newer snapshot).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError

try:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, TableAlreadyExistsError
except ModuleNotFoundError as e:
    raise MissingDependencyError("kbatch's Iceberg tables (kbatch export --format iceberg)", "pyiceberg", "tables") from e

from ._parquet import DataFile, write_files
from ._source import CommitConflict

if TYPE_CHECKING:
    import pyarrow as pa

    from ._source import PartitionPlan

RETRIES = "commit.retry.num-retries"
#: every partition's end, also kept as a table property (set in each kbatch commit): snapshot expiry
#: cannot take it away
ENDS_PROPERTY = "kbatch.ends"


#: the name kbatch loads its catalogs under: a SQL catalog keeps it in every row, so a reader's
#: `load_catalog(name, ...)` must give the same one to see the tables
CATALOG_NAME = "kbatch"


def open_catalog(catalog: str | None, warehouse: str | None, name: str = CATALOG_NAME) -> Any:
    """A pyiceberg catalog named `name`: `sqlite:///file.db` (or any SQLAlchemy URL) is its SQL
    catalog, an http(s) URI a REST catalog; None: `sqlite:///<warehouse>/catalog.db`."""
    if warehouse is not None and "://" not in warehouse:
        os.makedirs(warehouse, exist_ok=True)
        warehouse = "file://" + os.path.abspath(warehouse)
    if catalog is None:
        if warehouse is None:
            raise ValueError("an Iceberg export needs a warehouse directory or a catalog URI")
        catalog = "sqlite:///" + os.path.join(warehouse[len("file://"):], "catalog.db")
    props: dict[str, str] = {}
    if catalog.startswith(("http://", "https://")):
        props = {"type": "rest", "uri": catalog}
    else:
        props = {"type": "sql", "uri": catalog}
    if warehouse is not None:
        props["warehouse"] = warehouse
    return load_catalog(name, **props)


class IcebergTarget:
    """An Iceberg table `namespace.table` in a catalog (created on the first commit)."""

    def __init__(self, name: str, catalog: str | None, warehouse: str | None, catalog_name: str = CATALOG_NAME) -> None:
        if "." not in name:
            raise ValueError(f"an Iceberg table is named NAMESPACE.TABLE, not {name!r}")
        self.uri = name
        self.catalog = open_catalog(catalog, warehouse, catalog_name)
        self.table: Any = None
        self._state: dict[str, int] = {}
        self.create_props: dict[str, str] = {}  # kbatch's properties for a table this run creates
        self.reload()

    def reload(self) -> None:
        try:
            self.table = self.catalog.load_table(self.uri)
        except NoSuchTableError:
            self.table = None
        self._state = self._read_state()

    def _read_state(self) -> dict[str, int]:
        if self.table is None:
            return {}
        meta = self.table.metadata
        snap = self.table.current_snapshot()
        while snap is not None:
            extra = snap.summary.additional_properties if snap.summary is not None else {}
            if "kbatch.ends" in extra:
                return {k: int(v) for k, v in json.loads(extra["kbatch.ends"]).items()}
            snap = meta.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
        # no kbatch snapshot left in the current lineage (expired after another engine's rewrite): the
        # table property each kbatch commit sets in the same catalog commit
        prop = self.table.properties.get(ENDS_PROPERTY)
        return {k: int(v) for k, v in json.loads(prop).items()} if prop else {}

    def exists(self) -> bool:
        return self.table is not None

    def done(self, topic: str, partition: int) -> int | None:
        return self._state.get(f"{topic}-{partition}")

    def layout(self) -> tuple[list[str], list[str]] | None:
        """(column names, identity partition source columns) of the table; None before it exists."""
        if self.table is None:
            return None
        schema = self.table.schema()
        parts = [schema.find_column_name(f.source_id) or "" for f in self.table.spec().fields]
        return [f.name for f in schema.fields], parts

    def column_types(self) -> dict[str, pa.DataType]:
        """The table's key and value column types (none before it exists)."""
        if self.table is None:
            return {}
        arrow = self.table.schema().as_arrow()
        return {f.name: f.type for f in arrow if f.name in ("key", "value")}

    def known_ends(self) -> dict[str, int]:
        """Every partition's end, as the newest kbatch snapshot records them."""
        return dict(self._state)

    def properties(self) -> dict[str, str]:
        return {} if self.table is None else dict(self.table.properties)

    def version(self) -> int | None:
        if self.table is None:
            return None
        snap = self.table.current_snapshot()
        return None if snap is None else int(snap.snapshot_id)

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        """The data files hold every column: Iceberg takes an identity partition's value from the
        file's own statistics of that column."""
        return schema

    def _local_location(self) -> str:
        loc = str(self.table.location())
        if loc.startswith("file://"):
            return loc[len("file://"):]
        if "://" in loc:
            raise ValueError(f"{self.uri}: kbatch writes Iceberg data files to a local warehouse, not {loc}")
        return loc

    def write_files(self, plan: PartitionPlan, batches: Iterator[pa.RecordBatch], schema: pa.Schema,
                    **kwargs: Any) -> Iterator[DataFile]:
        """Parquet files under the table's data/ folder (written by kbatch, as for Delta: nulls kept as
        nulls), registered by the commit (add_files). A new table is created (its location is where
        the files go) with the first batch's types: typed key/value columns take theirs from it."""
        import itertools

        if self.table is None:
            first = next(batches, None)
            if first is None:
                return
            batches = itertools.chain([first], batches)
            self._create(pa_schema_of(first, schema), self.create_props, kwargs.get("compression", "zstd"),
                         kwargs.get("target_file_size", 128 << 20))
        self.root = os.path.join(self._local_location(), "data")
        sub = os.path.join(f"topic={plan.topic}", f"partition={plan.partition}")
        yield from write_files(self.root, sub, batches, schema, **kwargs)

    def _create(self, schema: pa.Schema, props: dict[str, str], compression: str, target_file_size: int) -> None:
        ns = self.uri.rpartition(".")[0]
        self.catalog.create_namespace_if_not_exists(ns)
        table_props = dict(props)
        table_props[RETRIES] = "0"
        table_props["write.parquet.compression-codec"] = "uncompressed" if compression == "none" else compression
        table_props["write.target-file-size-bytes"] = str(target_file_size)
        try:  # the table and its partition spec in one catalog commit: never a table without its spec
            with self.catalog.create_table_transaction(self.uri, schema=schema, properties=table_props) as tx:
                with tx.update_spec() as u:
                    u.add_identity("topic")
                    u.add_identity("partition")
        except (TableAlreadyExistsError, CommitFailedException) as e:
            raise CommitConflict(str(e)) from e
        self.table = self.catalog.load_table(self.uri)

    def commit(self, files: list[tuple[str, int, DataFile]], advanced: dict[tuple[str, int], tuple[int, int]],
               ends: dict[str, int], schema: pa.Schema, props: dict[str, str], *, overwrite: bool = False,
               before_commit: Callable[[], None] | None = None, compression: str = "zstd",
               target_file_size: int = 128 << 20) -> int:
        if self.table is None:
            self._create(schema, props, compression, target_file_size)
        if self.table.properties.get(RETRIES) != "0":
            with self.table.transaction() as tx:
                tx.set_properties({RETRIES: "0"})
            self.table = self.catalog.load_table(self.uri)
        root = os.path.join(self._local_location(), "data")
        paths = ["file://" + os.path.join(root, f.relpath) for _t, _p, f in files]
        summary = {"kbatch.offsets": json.dumps({f"{t}-{p}": [s, e] for (t, p), (s, e) in sorted(advanced.items())}),
                   "kbatch.ends": json.dumps(dict(sorted(ends.items())))}
        tx = self.table.transaction()
        try:
            if _typed_columns(schema) and self.table.schema().as_arrow() != schema:
                with tx.update_schema() as u:  # typed columns that gained fields, in the data's own commit
                    u.union_by_name(schema)
            if overwrite and self.table.current_snapshot() is not None:
                from pyiceberg.expressions import AlwaysTrue

                tx.delete(AlwaysTrue(), snapshot_properties=summary)
            if paths or not overwrite:
                tx.add_files(paths, snapshot_properties=summary, check_duplicate_files=False)
            tx.set_properties({ENDS_PROPERTY: summary["kbatch.ends"]})
            if before_commit is not None:
                before_commit()
            tx.commit_transaction()
        except CommitFailedException as e:
            raise CommitConflict(str(e)) from e
        self.reload()
        v = self.version()
        assert v is not None
        return v

    def discard(self, files: list[tuple[str, int, DataFile]]) -> None:
        root = getattr(self, "root", None)
        for _t, _p, f in files:
            if root is not None:
                try:
                    os.unlink(os.path.join(root, f.relpath))
                except OSError:
                    pass


def pa_schema_of(rb: pa.RecordBatch, schema: pa.Schema) -> pa.Schema:
    """`schema`'s columns with the types `rb` has for them."""
    import pyarrow as pa

    return pa.schema([rb.schema.field(n) for n in schema.names])


def _typed_columns(schema: pa.Schema) -> bool:
    import pyarrow as pa

    return any(not pa.types.is_binary(schema.field(n).type) for n in ("key", "value") if n in schema.names)


def snapshot_offsets(table: Any) -> list[dict[str, Any]]:
    """[{snapshot_id, timestamp_ms, offsets, ends}] of the table's kbatch snapshots, newest first."""
    out = []
    for snap in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number or 0, reverse=True):
        extra = snap.summary.additional_properties if snap.summary is not None else {}
        if "kbatch.offsets" in extra:
            out.append(dict(snapshot_id=snap.snapshot_id, timestamp_ms=snap.timestamp_ms,
                            offsets=json.loads(extra["kbatch.offsets"]), ends=json.loads(extra.get("kbatch.ends", "{}"))))
    return out
