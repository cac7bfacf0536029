"""A topic (or a log directory, or any set of partitions) as one Arrow table, as a Kafka consumer
would read it: `kbatch.read_topic`, kbatch.scan's read gathered into one table (the read path
decides which batches count, aborted transactions and the last stable offset; decode_columns'
kernel decodes them). For data larger than memory, kbatch.scan streams the same rows."""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


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
    from ..scan import scan

    with scan(logs, topics=topics, partitions=partitions, exclude_topics=exclude_topics,
              include_internal=include_internal, from_offset=from_offset, until_offset=until_offset,
              from_time=from_time, until_time=until_time, isolation=isolation, include_headers=include_headers) as s:
        return s.to_table()


__all__ = ["read_topic"]
