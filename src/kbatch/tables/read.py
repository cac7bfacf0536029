"""A topic (or a log directory, or any set of partitions) as one Arrow table, as a Kafka consumer
would read it: `kbatch.read_topic`, kbatch.scan's read gathered into one table (the read path
decides which batches count, aborted transactions and the last stable offset; decode_columns'
kernel decodes them). For data larger than memory, kbatch.scan streams the same rows."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def read_topic(logs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
               topics: Iterable[str] | None = None, partitions: Iterable[int] | None = None,
               from_offset: int | None = None, until_offset: int | None = None, from_time: int | None = None,
               until_time: int | None = None, isolation: str = "read_uncommitted",
               include_headers: bool = True, exclude_topics: Iterable[str] | None = None,
               include_internal: bool = False, key_schema: Any = None, value_schema: Any = None,
               on_decode_error: Any = "fail") -> pa.Table:
    """The records of every partition under `logs` (a partition directory, a topic's or a broker's
    log directory, or several) as one pyarrow Table in Spark's Kafka-source columns, partition by
    partition in offset order.

    Bounds apply to every partition: offsets [from_offset, until_offset), and by time the KIP-79
    rule (from the first offset whose timestamp >= from_time, up to the first whose timestamp >=
    until_time). `isolation` is the consumer's: read_uncommitted (every data record, as Kafka's
    Java consumer by default) or read_committed (aborted transactions left out, stopping at the
    last stable offset). Bytes the read path cannot read raise UnreadableDataError naming file,
    byte and offsets (a partial batch at the end of a partition's last segment is ignored, as
    Kafka does).

    Topics: `topics` are exact names or globs (`orders-*`), `exclude_topics` globs. Internal
    topics (`__consumer_offsets`, `__transaction_state`, `__cluster_metadata`, `_schemas`, any
    `__` name) are left out unless named exactly or `include_internal=True`, as Kafka's consumers
    do (`exclude.internal.topics`); a path that is itself a partition is always read.

    key_schema/value_schema: typed columns instead of bytes, as decode_columns' (a kbatch.values
    format, or "json-plain" / "json-plain:SCHEMA_FILE" for unframed JSON values), one type for
    the whole table; on_decode_error: as decode_columns' ("fail": the first undecodable value, in
    row order, raises naming its topic, partition and offset; "null"; or a callable (row, error))."""
    from ..scan import scan

    with scan(logs, topics=topics, partitions=partitions, exclude_topics=exclude_topics,
              include_internal=include_internal, from_offset=from_offset, until_offset=until_offset,
              from_time=from_time, until_time=until_time, isolation=isolation, include_headers=include_headers) as s:
        table = s.to_table()
    # typed over the whole table at once (one type for the whole table), not range by range as scan's
    return _typed(table, key_schema, value_schema, on_decode_error)


def _typed(table: pa.Table, key_schema: Any, value_schema: Any, on_decode_error: Any) -> pa.Table:
    """read_topic's key/value columns typed by their formats (kbatch.values.rules' rule)."""
    import pyarrow as pa

    from ..values import PlainJson
    from ..values.plain_json import plain_spec

    if on_decode_error not in ("fail", "null", None) and not callable(on_decode_error):
        raise ValueError(f"on_decode_error must be 'fail', 'null' or a callable (row, error), not {on_decode_error!r}")
    for name, fmt in (("key", key_schema), ("value", value_schema)):
        if fmt is None:
            continue
        if isinstance(fmt, str):
            if not plain_spec(fmt):
                raise ValueError(f"{name}_schema={fmt!r}: a string names plain JSON (json-plain or "
                                 f"json-plain:SCHEMA_FILE); give a kbatch.values format for Avro, JSON Schema and "
                                 f"Protobuf (value_format(kind, schemas))")
            fmt = PlainJson.from_spec(fmt)

        def located(row: int, error: Any) -> None:  # the row's topic and partition: a table of many
            raise error.located(topic=table.column("topic")[row].as_py(),
                                partition=table.column("partition")[row].as_py())
        handler = (located if on_decode_error in ("fail", None) else
                   (lambda row, error: None) if on_decode_error == "null" else on_decode_error)
        typed = fmt.decode_column(table.column(name), table.column("offset"), name, on_error=handler)
        table = table.set_column(table.schema.get_field_index(name), pa.field(name, typed.type), typed)
    return table


__all__ = ["read_topic"]
