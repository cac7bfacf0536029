"""A topic (or a log directory, or any set of partitions) as one Arrow table, as a Kafka consumer
would read it: `kbatch.read_topic`. The same rows a table export writes (the read path decides
which batches count, aborted transactions and the last stable offset; decode_columns' kernel
decodes them), without a table format: for a notebook, DuckDB or pandas."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..log.fetch import IsolationLevel
from ._source import iter_rows, plan_partition, table_schema

if TYPE_CHECKING:
    import pyarrow as pa

_LEVELS = {"read_uncommitted": IsolationLevel.READ_UNCOMMITTED, "read_committed": IsolationLevel.READ_COMMITTED}


def read_topic(logs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
               topics: Iterable[str] | None = None, partitions: Iterable[int] | None = None,
               from_offset: int | None = None, until_offset: int | None = None, from_time: int | None = None,
               until_time: int | None = None, isolation: str = "read_uncommitted",
               include_headers: bool = True, exclude_topics: Iterable[str] | None = None,
               include_internal: bool = False) -> pa.Table:
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
    do (`exclude.internal.topics`); a path that is itself a partition is always read."""
    import pyarrow as pa

    from ..log.unified_log import Log
    from . import _partitions

    if isolation not in _LEVELS:
        raise ValueError(f"isolation must be read_uncommitted or read_committed, not {isolation!r}")
    level = _LEVELS[isolation]
    pieces: list[pa.RecordBatch] = []
    for topic, partition, path in _partitions(logs, topics, partitions, exclude_topics=exclude_topics,
                                               include_internal=include_internal):
        log = Log.open(path)
        try:
            plan = plan_partition(log, topic, partition, path, None, from_offset=from_offset,
                                  until_offset=until_offset, from_time=from_time, until_time=until_time,
                                  isolation=level)
            pieces.extend(iter_rows(plan, level, include_headers=include_headers))
        finally:
            log.close()
    schema = table_schema(include_headers)
    return pa.Table.from_batches([rb.cast(schema) if rb.schema != schema else rb for rb in pieces], schema=schema)


__all__ = ["read_topic"]
