"""Kafka's default producer partitioning over Arrow rows (Utils.murmur2, BuiltInPartitioner,
RoundRobinPartitioner): where the Spark writer and `kbatch import` send each row."""
from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from .. import _backend
from ..errors import InvalidRequestError


_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_topic(name: object) -> str:
    """Kafka's Topic.validate: 1 to 249 of [a-zA-Z0-9._-], not "." or ".." (a topic names a
    directory: nothing else may reach the file system)."""
    if not isinstance(name, str) or not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
        raise InvalidRequestError("Topic name is illegal", expected="1 to 249 of ASCII alphanumerics, '.', '_' and "
                                  "'-', not '.' or '..'", found=repr(name))
    return name


def murmur2(keys: pa.Array) -> npt.NDArray[np.int32] | None:
    """Kafka's Utils.murmur2 of each value of a binary key column, by the kernel (0 at a null row:
    Kafka does not hash null keys, the caller decides where they go); None for a column of the null
    type."""
    from .encode import _binary_spec

    spec = _binary_spec(keys, "key")
    return None if spec is None else np.asarray(_backend.core.murmur2(spec))


def partitions_for(keys: pa.Array, num_partitions: int, start: int = 0) -> tuple[npt.NDArray[np.int32], int]:
    """Kafka's default partitioner over a key column: toPositive(murmur2(key)) % num_partitions;
    null keys take partitions in turn from `start` (RoundRobinPartitioner). Returns (int32
    array, the next round-robin position)."""
    n = len(keys)
    hashes = murmur2(keys)
    if hashes is None:  # every key null
        every: npt.NDArray[np.int32] = ((np.arange(n, dtype=np.int64) + start) % num_partitions).astype(np.int32)
        return every, start + n
    out: npt.NDArray[np.int32] = ((hashes.astype(np.int64) & 0x7FFFFFFF) % num_partitions).astype(np.int32)
    if keys.null_count:
        nulls = np.flatnonzero(np.asarray(keys.is_null()))
        out[nulls] = (np.arange(len(nulls), dtype=np.int64) + start) % num_partitions
        start += len(nulls)
    return out, start


class Router:
    """Where rows go: the `topic` given, else each row's `topic` column; each row's `partition`
    column when there is one (a null there: the key partitioner), else the key partitioner over
    num_partitions (an error without it)."""

    def __init__(self, topic: str | None, num_partitions: int | None) -> None:
        self.topic = None if topic is None else check_topic(topic)
        self.num_partitions = num_partitions
        self.turn = 0  # the round-robin position for rows without a key

    def _hashed(self, keys: pa.Array, rows: int) -> npt.NDArray[np.int32]:
        if self.num_partitions is None:
            raise InvalidRequestError("A row needs a partition", expected="a 'partition' column or the "
                                      "numPartitions option (Kafka's key partitioner)", found="neither", row=rows)
        out, self.turn = partitions_for(keys, self.num_partitions, self.turn)
        return out

    def __call__(self, rb: pa.RecordBatch) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(topic names, each row's index into them, each row's partition)."""
        n = rb.num_rows
        names = rb.schema.names
        keys = rb.column(names.index("key")) if "key" in names else pa.nulls(n, pa.binary())
        if "partition" in names:
            col = rb.column(names.index("partition"))
            parts = np.asarray(col.fill_null(-1).cast(pa.int64()), dtype=np.int64)
            if (parts < -1).any():
                bad = int(np.flatnonzero(parts < -1)[0])
                raise InvalidRequestError("Negative partition", expected="a partition >= 0", found=int(parts[bad]),
                                          row=bad)
            if col.null_count:
                nulls = np.flatnonzero(parts < 0)
                parts[nulls] = self._hashed(keys.take(pa.array(nulls)), int(nulls[0]))
        else:
            parts = self._hashed(keys, 0).astype(np.int64)
        if self.topic is not None:
            return [self.topic], np.zeros(n, np.int64), parts
        if "topic" not in names:
            raise InvalidRequestError("No topic", expected="the 'topic' option or a 'topic' column",
                                      found="neither")
        tcol = rb.column(names.index("topic"))
        if tcol.null_count:
            raise InvalidRequestError("Null topic", expected="a topic name", found="null",
                                      row=int(np.flatnonzero(np.asarray(tcol.is_null()))[0]))
        enc = tcol.dictionary_encode()
        topics = [check_topic(t) for t in enc.dictionary.to_pylist()]
        return topics, np.asarray(enc.indices, dtype=np.int64), parts


    def groups(self, rb: pa.RecordBatch) -> Iterator[tuple[tuple[str, int], pa.RecordBatch]]:
        """Yield ((topic, partition), the rows of rb that go there, in row order)."""
        if rb.num_rows == 0:
            return
        topics, tix, parts = self(rb)
        code = tix * (1 << 32) + parts
        order = np.argsort(code, kind="stable")  # the rows of one partition together, in row order
        sorted_code = code[order]
        cuts = np.flatnonzero(sorted_code[1:] != sorted_code[:-1]) + 1
        for rows in np.split(order, cuts):
            key = (topics[int(tix[rows[0]])], int(parts[rows[0]]))
            yield key, (rb if len(rows) == rb.num_rows else rb.take(pa.array(rows)))


__all__ = ["murmur2", "partitions_for", "check_topic", "Router"]
