"""Kafka partitions as lakehouse tables: `export_table` backfills log directories into a Delta table
(`deltalake`) or an Iceberg table (`pyiceberg`), exactly once and resumable (docs/tables.md).

    from kbatch.tables import export_table
    result = export_table("/data/kafka-logs", "orders_delta", format="delta")
    result = export_table("/data/kafka-logs", "kafka.orders", format="iceberg",
                          catalog="sqlite:///catalog.db", warehouse="warehouse/")

Rows have the Kafka source's columns (key, value, topic, partition, offset, timestamp,
timestampType, headers), read through the read path (kbatch.log.fetch): under read_committed (the
default) records of aborted transactions and control records never reach a table, and reading
stops at the last stable offset. Each commit records, in the table's own metadata, the offsets per
partition it holds; a run starts each partition where the table ends, so a rerun appends only
what is new and a killed run leaves nothing a rerun duplicates.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import KBatchError
from ..log.fetch import IsolationLevel
from ._parquet import COMPRESSIONS, WriterChoices, writer_options
from ._typed import TypeChangeError
from ._source import (CommitConflict, DataLossError, PartitionExport, PartitionPlan, iter_rows, plan_partition,
                      table_schema)

if TYPE_CHECKING:
    import pyarrow as pa

    from ..values import SchemaSource, ValueFormat
    from ._parquet import DataFile
    from ._typed import Typing

FORMATS = ("delta", "iceberg")
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
DEFAULT_COMMIT_BYTES = 1024 * 1024 * 1024
#: a test hook, "<where>:<seconds>" or "<where>:@<path>" (wait until the file exists, 300 s at
#: most): where is "files" (after the run's first data file is written) or "commitN" (the Nth
#: commit of the run, its files written, before the commit itself; "commit" is "commit1"). It says
#: "kbatch: test pause at <where>" on stderr first.
PAUSE_ENV = "KBATCH_TABLES_TEST_PAUSE"
_pauses: dict[str, int] = {}


@dataclass
class ExportResult:
    """export_table's answer: the table, its version (Delta) or snapshot id (Iceberg) after the run
    (None: nothing committed), the partitions and the commits made."""

    table: str
    format: str
    version: int | None
    partitions: list[PartitionExport] = field(default_factory=list)
    commits: int = 0
    problems: list[str] = field(default_factory=list)
    #: records whose key or value did not decode: written to the dead-letter table (on_decode_error
    #: "dead-letter"; not counted in rows) or kept with a null key/value ("null")
    dead_letters: int = 0
    nulled: int = 0
    #: the dead-letter table (on_decode_error="dead-letter"): `<table>_dead_letter`
    dead_letter_table: str | None = None

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def record_bytes(self) -> int:
        return sum(p.record_bytes for p in self.partitions)

    @property
    def lost(self) -> list[PartitionExport]:
        return [p for p in self.partitions if p.lost is not None]


def _pause(where: str) -> None:
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    _pauses[where] = n = _pauses.get(where, 0) + 1
    point, _, how = spec.partition(":")
    if point not in (f"{where}{n}", where if n == 1 else None):
        return
    sys.stderr.write(f"kbatch: test pause at {point}\n")
    sys.stderr.flush()
    if how.startswith("@"):
        deadline = time.monotonic() + 300
        while not os.path.exists(how[1:]) and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        time.sleep(float(how or "60"))


def _partitions(logs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], topics: Iterable[str] | None,
                partitions: Iterable[int] | None, *, exclude_topics: Iterable[str] | None = None,
                include_internal: bool = False) -> list[tuple[str, int, str]]:
    """(topic, partition, directory) of every partition under `logs` the topic selection takes
    (kbatch.log.topics: exact names, globs, excluded globs; internal topics only when named or
    asked for; a path that is itself a partition is always read)."""
    from ..scan import select_partitions

    out: list[tuple[str, int, str]] = []
    for part in select_partitions(logs, topics, partitions, exclude_topics=exclude_topics,
                                  include_internal=include_internal):
        assert part.topic is not None and part.partition is not None  # select_partitions refuses others
        out.append((part.topic, part.partition, part.path))
    return out


def error_offset(e: KBatchError, start: int | None) -> int | None:
    """The offset an error names (a value's record, a batch, the first offset behind unreadable
    bytes), else `start` (where the partition stays)."""
    offset = getattr(e, "offset", None)
    if isinstance(offset, int):
        return offset
    rng = getattr(e, "range", None)
    if rng is not None and getattr(rng, "after_offset", None) is not None:
        return int(rng.after_offset) + 1
    return e.base_offset if e.base_offset is not None else start


def _open_target(fmt: str, to: str, catalog: str | None, warehouse: str | None, catalog_name: str = "kbatch") -> Any:
    if fmt == "delta":
        from ._delta import DeltaTarget

        return DeltaTarget(to)
    if fmt == "iceberg":
        from ._iceberg import IcebergTarget

        return IcebergTarget(to, catalog, warehouse, catalog_name)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def export_table(logs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], to: str, *,
                 format: str = "delta", catalog: str | None = None, warehouse: str | None = None,
                 topics: Iterable[str] | None = None, partitions: Iterable[int] | None = None,
                 from_offset: int | None = None, until_offset: int | None = None,
                 from_time: int | None = None, until_time: int | None = None,
                 isolation: str | int | IsolationLevel = IsolationLevel.READ_COMMITTED,
                 include_headers: bool = True, target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
                 compression: str = "zstd", fail_on_data_loss: bool = False, compacted: bool = False,
                 commit_bytes: int = DEFAULT_COMMIT_BYTES, retries: int = 3,
                 key_schema: ValueFormat | str | None = None, value_schema: ValueFormat | str | None = None,
                 schemas: SchemaSource | str | os.PathLike[str] | None = None,
                 exclude_topics: Iterable[str] | None = None, include_internal: bool = False,
                 catalog_name: str = "kbatch", on_decode_error: str = "fail") -> ExportResult:
    """Append what the table does not hold yet of the partitions under `logs` to the table `to`
    (a directory for Delta; `namespace.table` for Iceberg, with `catalog` a URI, default
    `sqlite:///<warehouse>/catalog.db`, and `warehouse` a directory).

    Offsets: each partition starts where the table ends (else at `from_offset`/`from_time`, else
    the log start) and stops at `until_offset`/`until_time` (KIP-79: the first offset whose
    timestamp >= T), the last stable offset under read_committed, or the log end. Offsets the
    table never held that retention removed are in `result.lost` (`fail_on_data_loss`: raise
    DataLossError before writing anything). Commits come every `commit_bytes` of record bytes, each
    recording the offsets it holds; another writer's commit to the same partitions in between
    makes this run read the table again and go on from there (`retries` times).
    `compacted=True`: the log-cleaner view (latest record per key) replaces the table's content.
    key_schema/value_schema: typed columns instead of bytes for Confluent-framed keys/values, a
    kbatch.values format, or its name ("avro", "json", "protobuf") with `schemas` (a schema
    source, or what open_schemas takes): each value is read with its own writer schema, the column
    the union of their fields (kbatch.values.rules), unless a reader schema is pinned
    ("avro:SUBJECT@VERSION", or a format with reader_schema=); the table records which, and refuses
    a later run that reads with another. The table's column type widens by field name as schemas
    evolve (docs/tables.md, "Typed columns"). Plain (unframed) JSON values: "json-plain" (the
    schema inferred from each topic's first values) or "json-plain:SCHEMA_FILE", no `schemas`
    (docs/schemas.md, "Plain JSON values").
    on_decode_error: "fail" (a key/value that does not decode stops its partition, not advanced),
    "null" (the row is written with a null key/value), "dead-letter" (the raw record and the error
    go to the table `<to>_dead_letter`, exactly once across reruns, and not into `to`).
    Topics: `topics` are exact names or globs (`orders-*`), `exclude_topics` globs; internal
    topics (`__consumer_offsets`, `__transaction_state`, `__cluster_metadata`, `_schemas`, any
    `__` name: kbatch.log.topics) only when named exactly or with `include_internal`.
    `catalog_name`: the name pyiceberg's catalog is loaded under (a SQL catalog keeps it in its
    rows: read the table back with `load_catalog(catalog_name, ...)`).
    """
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
    level = isolation if isinstance(isolation, IsolationLevel) else (
        IsolationLevel.parse(isolation) if isinstance(isolation, str) else IsolationLevel(isolation))
    from ._typed import Typing

    typing = Typing(key_schema, value_schema, schemas, format, on_decode_error)
    if on_decode_error == "dead-letter" and compacted:
        raise ValueError("on_decode_error='dead-letter' is for append exports: a compacted run takes 'fail' or 'null'")
    parts = _partitions(logs, topics, partitions, exclude_topics=exclude_topics, include_internal=include_internal)
    target = _open_target(format, to, catalog, warehouse, catalog_name)
    letters = None
    if on_decode_error == "dead-letter":
        from ._dead_letter import DeadLetters

        letters = DeadLetters(_open_target(format, dead_letter_name(format, to), catalog, warehouse,
                                        catalog_name), include_headers)
    from ..log.unified_log import Log

    logs_open: dict[tuple[str, int], Log] = {}
    try:
        for t, p, d in parts:
            logs_open[(t, p)] = Log.open(d)
        return _attempts(target, to, format, parts, logs_open, level, retries, typing, letters,
                         include_headers=include_headers,
                         from_offset=from_offset, until_offset=until_offset, from_time=from_time,
                         until_time=until_time, target_file_size=target_file_size, compression=compression,
                         fail_on_data_loss=fail_on_data_loss, compacted=compacted, commit_bytes=commit_bytes)
    finally:
        for log in logs_open.values():
            log.close()


def _attempts(target: Any, to: str, format: str, parts: list[tuple[str, int, str]], logs_open: dict[tuple[str, int], Any],
              level: IsolationLevel, retries: int, typing: Typing, letters: Any, *, include_headers: bool,
              from_offset: int | None,
              until_offset: int | None, from_time: int | None, until_time: int | None, target_file_size: int,
              compression: str, fail_on_data_loss: bool, compacted: bool, commit_bytes: int) -> ExportResult:
    result = ExportResult(to, format, target.version())
    if letters is not None:
        result.dead_letter_table = letters.target.uri
    for attempt in range(retries + 1):
        try:
            _run(target, parts, logs_open, result, level, typing, letters, include_headers=include_headers,
                 from_offset=from_offset, until_offset=until_offset, from_time=from_time, until_time=until_time,
                 target_file_size=target_file_size, compression=compression, fail_on_data_loss=fail_on_data_loss,
                 compacted=compacted, commit_bytes=commit_bytes)
            return result
        except _Conflict:
            if attempt == retries:
                raise KBatchError(f"{to}: other writers kept committing to the same partitions; "
                                  f"{result.commits} commit(s) made, run again to go on") from None
            target.reload()
            if letters is not None:
                letters.discard()
                letters.target.reload()
    return result  # pragma: no cover


class _Conflict(Exception):
    pass


def _check_isolation(target: Any, level: IsolationLevel, compacted: bool, include_headers: bool = True,
                     typing: Typing | None = None) -> dict[str, str]:
    name = level.name.lower()
    layout = target.layout()
    if layout is not None:
        columns, partition_by = layout
        want = table_schema(include_headers).names
        if sorted(columns) != sorted(want) or list(partition_by) != ["topic", "partition"]:
            raise KBatchError(f"{target.uri}: the table has columns {columns} partitioned by {list(partition_by)}; "
                              f"this run writes {want} partitioned by ['topic', 'partition'] (headers on or off "
                              f"as when the table was created, and a table kbatch made)")
    props = target.properties()
    have = props.get("kbatch.isolationLevel")
    if have is not None and have != name:
        raise KBatchError(f"{target.uri}: the table was written with isolation level {have}, not {name}: "
                          f"mixing them would put aborted records beside committed ones")
    was = props.get("kbatch.compacted")
    if was is not None and (was == "true") != compacted:
        raise KBatchError(f"{target.uri}: the table is {'a compacted snapshot' if was == 'true' else 'an append table'}"
                          f"; {'--compacted' if compacted else 'an append export'} cannot write into it")
    props_out = {"kbatch.isolationLevel": name, "kbatch.compacted": "true" if compacted else "false"}
    if typing:
        from ._typed import READER_PROPERTY

        rule = typing.props()
        had = props.get(READER_PROPERTY)
        if had is not None and had != rule[READER_PROPERTY]:
            raise KBatchError(f"{target.uri}: the table's typed columns read values with {had}; this run reads with "
                              f"{rule[READER_PROPERTY]} (\"writer\": each value's writer schema; \"reader:<hash>\": a "
                              f"pinned reader schema; \"json-plain:...\": plain JSON's given or inferred schema): "
                              f"the same bytes would read differently in one table. Export with the table's rule, or "
                              f"into a new table")
        props_out.update(rule)
    return props_out


def _run(target: Any, parts: list[tuple[str, int, str]], logs_open: dict[tuple[str, int], Any],
         result: ExportResult, level: IsolationLevel, typing: Typing, letters: Any, *, include_headers: bool,
         from_offset: int | None,
         until_offset: int | None, from_time: int | None, until_time: int | None, target_file_size: int,
         compression: str, fail_on_data_loss: bool, compacted: bool, commit_bytes: int) -> None:
    props = _check_isolation(target, level, compacted, include_headers, typing)
    typing.start(target.column_types())
    target.create_props = props
    if compacted:
        from ._compacted import run_compacted

        run_compacted(target, parts, logs_open, result, level, typing, include_headers=include_headers,
                      until_offset=until_offset, until_time=until_time, compression=compression,
                      target_file_size=target_file_size, props=props, before_commit=lambda: _pause("commit"))
        result.nulled = typing.nulled
        return
    plans: list[PartitionPlan] = []
    for t, p, d in parts:
        plans.append(plan_partition(logs_open[(t, p)], t, p, d, target.done(t, p), from_offset=from_offset,
                                    until_offset=until_offset, from_time=from_time, until_time=until_time,
                                    isolation=level))
    lost = [pl for pl in plans if pl.lost is not None]
    if lost and fail_on_data_loss:
        raise DataLossError("; ".join(f"{pl.key}: offsets {pl.lost[0]}..{pl.lost[1] - 1} were deleted from the log "
                                      f"(retention) before the table held them" for pl in lost if pl.lost))
    base_schema = table_schema(include_headers)
    file_schema = target.file_schema(base_schema)
    ends: dict[str, int] = dict(target.known_ends())  # every partition the table holds, not only this run's
    for pl in plans:
        if pl.done is not None:
            ends[pl.key] = pl.done
    pending: list[tuple[str, int, DataFile]] = []
    advanced: dict[tuple[str, int], tuple[int, int]] = {}
    pending_bytes = 0
    result.partitions = [PartitionExport(pl.topic, pl.partition, pl.start, pl.start, 0, 0, pl.lost, pl.done)
                         for pl in plans]
    by_key = {(r.topic, r.partition): r for r in result.partitions}
    first_pause = True
    choices: dict[str, WriterChoices] = {}  # a topic's partitions share its files' writer options

    def commit() -> None:
        nonlocal pending, advanced, pending_bytes
        if not advanced:
            return
        for (t, p), (_s, end) in advanced.items():
            ends[f"{t}-{p}"] = end
        try:
            if letters is not None:  # first: a crash before the table's commit leaves letters a rerun does not repeat
                letters.commit(advanced)
            version = target.commit(pending, advanced, dict(ends), typing.schema(base_schema), props,
                                    before_commit=lambda: _pause("commit"), compression=compression,
                                    target_file_size=target_file_size)
        except CommitConflict as e:  # certainly not committed: the files are no one's
            target.discard(pending)
            raise _Conflict() from e
        result.nulled = typing.nulled
        # any other error leaves the files: the commit may have landed (they are orphans at worst)
        result.version = version
        result.commits += 1
        for (t, p), (_s, end) in advanced.items():
            by_key[(t, p)].end = end
        pending, advanced, pending_bytes = [], {}, 0

    for pl in plans:
        if pl.end <= pl.start:
            continue
        counters: dict[str, int] = {}
        r = by_key[(pl.topic, pl.partition)]
        mine: list[tuple[str, int, DataFile]] = []
        rows = iter_rows(pl, level, include_headers)
        if typing:  # record bytes are counted on the framed bytes, before the columns are typed
            rows = typing.rows(pl.topic, rows, counters)
        try:
            for f in target.write_files(pl, rows, file_schema, target_file_size=target_file_size,
                                        compression=compression, counters=None if typing else counters,
                                        choices=choices.setdefault(pl.topic, WriterChoices())):
                mine.append((pl.topic, pl.partition, f))
                if first_pause:
                    first_pause = False
                    _pause("files")
        except TypeChangeError:  # the table's columns cannot take this run's types: nothing is committed
            target.discard(pending + mine)
            raise
        except KBatchError as e:  # bytes (or values) it cannot read: this partition stays where it was, the others go on
            if _source_down(e):  # a schema source that cannot answer: every partition would fail alike
                target.discard(pending + mine)
                raise
            target.discard(mine)
            typing.dead_letters.pop((pl.topic, pl.partition), None)
            result.problems.append(f"{pl.key}: {e} (the partition was not advanced)")
            r.error, r.error_offset = str(e), error_offset(e, pl.start)
            continue
        except CommitConflict as e:  # another writer created the table first (Iceberg creates it before its files)
            target.discard(pending + mine)
            raise _Conflict() from e
        except BaseException:
            target.discard(pending + mine)
            raise
        pending += mine
        advanced[(pl.topic, pl.partition)] = (pl.start, pl.end)
        dead = 0
        if letters is not None:
            dead = letters.write(pl, typing.dead_letters.pop((pl.topic, pl.partition), []), compression=compression)
            result.dead_letters += dead
        r.rows = pl.rows - dead
        r.record_bytes = counters.get("record_bytes", 0)
        pending_bytes += r.record_bytes
        if pending_bytes >= commit_bytes:
            commit()
    commit()


def dead_letter_name(format: str, to: str) -> str:
    """The dead-letter table of table `to`: a sibling directory `<to>_dead_letter` (Delta), or
    `namespace.<table>_dead_letter` in the same catalog (Iceberg)."""
    return to.rstrip("/" + os.sep) + "_dead_letter"


def _source_down(e: Exception) -> bool:
    from ..values.sources import SchemaSourceUnavailable

    return isinstance(e, SchemaSourceUnavailable)


__all__ = ["export_table", "ExportResult", "PartitionExport", "DataLossError", "TypeChangeError", "table_schema",
           "FORMATS", "COMPRESSIONS", "WriterChoices", "writer_options"]
