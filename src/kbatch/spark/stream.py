"""`spark.readStream.format("kafka-segments")` on the Python reader (a PySpark DataSourceStreamReader),
the fallback where the JVM reader's jar cannot load; `kafka-segments-python` names it anywhere.

A stream's position is, per topic-partition, the next offset to read, `{"topic": {"0": 123}}` as
Spark's Kafka source writes it (and the JVM reader's stream). Each micro-batch reads
[previous position, new position) of every partition through the batch reader's planning and
read(), so its rows are the batch reader's for those offsets. A partition is read up to its stable
end: the end of its whole batches, the high watermark of a broker's `replication-offset-checkpoint`
when it names the partition, and for read_committed the last stable offset (the JVM reader's
rules, PartitionTail). The options are the JVM stream's subset: startingOffsets,
startingTimestamp, startingOffsetsByTimestamp, maxOffsetsPerTrigger (Spark >= 4.2: the admission
control API), failOnDataLoss, includeHeaders, includeBatchFields, isolation.level, topics /
topicPattern; ending offsets are refused, as Spark's Kafka source refuses them in streams.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:  # Spark >= 4.3: availableNow in micro-batches of maxOffsetsPerTrigger (else one batch of everything)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - older pyspark
    _AvailableNow = object  # type: ignore[assignment,misc]

from ..errors import InvalidOffsetError, InvalidRequestError
from . import _plan
from .datasource import KafkaSegmentsReader, SegmentSlice, _bool, _opt

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

log = logging.getLogger("kbatch.spark")

Offsets = dict[str, dict[str, int]]
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"


def _flat(offsets: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


def _nested(flat: Mapping[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(flat.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def _limit_rows(limit: Any) -> int | None:
    """The offset count a Spark ReadLimit allows (ReadMaxRows), or None for all available."""
    rows = getattr(limit, "max_rows", None)
    if rows is None:
        rows = getattr(limit, "maxRows", None)
    return None if rows is None else int(rows)


class KafkaSegmentsStreamReader(DataSourceStreamReader, _AvailableNow):
    """Micro-batches over a growing directory of `<topic>-<partition>` logs (module docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if _opt(options, name) is not None:
                raise InvalidRequestError(f"kafka-segments: option {name} is for batch reads, not streams "
                                          "(as Spark's Kafka source)", expected="no ending option",
                                          found=_opt(options, name))
        self.reader = KafkaSegmentsReader(options, schema)
        self.fail_on_data_loss = _bool(options, "failOnDataLoss", True)
        per_trigger = _opt(options, "maxOffsetsPerTrigger")
        self.max_offsets = None if per_trigger is None else int(per_trigger)
        #: Trigger.AvailableNow: the stable ends when the query started, never passed
        self.target: dict[tuple[str, int], int] | None = None
        if self.max_offsets is not None and self.max_offsets <= 0:
            raise InvalidRequestError("kafka-segments: maxOffsetsPerTrigger must be positive", expected="> 0",
                                      found=per_trigger)

    # ------------------------------------------------------------------------------ positions
    def _partitions(self) -> dict[tuple[str, int], _plan.TopicPartition]:
        r = self.reader
        return {(tp.topic, tp.partition): tp for tp in _plan.list_partitions(r.path, r.topics, r.topic_pattern)}

    def _high_watermarks(self) -> dict[tuple[str, int], int]:
        from ..log.checkpoints import read_offset_checkpoint

        path = os.path.join(self.reader.path, REPLICATION_CHECKPOINT)
        if "://" in self.reader.path or not os.path.exists(path):
            return {}
        return read_offset_checkpoint(path)

    @staticmethod
    def _earliest(tp: _plan.TopicPartition) -> int:
        return tp.segments[0].base_offset if tp.segments else 0

    def _stable_end(self, tp: _plan.TopicPartition, hws: Mapping[tuple[str, int], int]) -> int:
        end = _plan.end_offset(tp)  # after the last whole batch: a batch being appended is not read yet
        hw = hws.get((tp.topic, tp.partition))
        if hw is not None:
            end = min(end, hw)
        if self.reader.read_committed:
            _aborted, unstable = _plan.transaction_state(tp)
            if unstable is not None:
                end = min(end, unstable)
        return max(end, self._earliest(tp))

    def initialOffset(self) -> Offsets:
        hws = self._high_watermarks()
        out = {}
        for key, tp in self._partitions().items():
            start, _end = self.reader._bounds(tp)
            out[key] = self._earliest(tp) if start is None else min(start, self._stable_end(tp, hws))
        return _nested(out)

    def _ends(self) -> dict[tuple[str, int], int]:
        hws = self._high_watermarks()
        return {key: self._stable_end(tp, hws) for key, tp in self._partitions().items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._ends()

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:
        ends = self._ends() if self.target is None else dict(self.target)
        rows = _limit_rows(limit) if limit is not None else self.max_offsets
        if rows is None or start is None:
            return _nested(ends)
        begin = _flat(start)
        behind = {k: max(0, e - begin.get(k, e)) for k, e in ends.items()}
        total = sum(behind.values())
        if total <= rows:
            return _nested(ends)
        # shared by how far behind each partition is (the Kafka source's rateLimit), at least one
        # offset for a partition that is behind, never more than `rows` in all
        out, left = {}, rows
        for k in sorted(ends):
            take = min(behind[k], left, max(1 if behind[k] else 0, behind[k] * rows // total))
            left -= take
            out[k] = begin.get(k, ends[k]) + take
        return _nested(out)

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadAllAvailable() if self.max_offsets is None else ReadMaxRows(self.max_offsets)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin, stop = _flat(start), _flat(end)
        tps = self._partitions()
        out: list[InputPartition] = []
        for key, e in sorted(stop.items()):
            tp = tps.get(key)
            if tp is None:
                self._lost(key, begin.get(key, e), e, "its directory is gone")
                continue
            s = begin.get(key, self._earliest(tp))  # a partition that appeared later: from its start
            first = self._earliest(tp)
            if s < first:
                self._lost(key, s, first, "the segments holding them were deleted before they were read")
                s = first
            if e <= s:
                continue
            aborted = _plan.transaction_state(tp, need_open=False)[0] if self.reader.read_committed else None
            out.extend(SegmentSlice(sl) for sl in _plan.plan_partition(tp, s, e, self.reader.max_bytes, aborted))
        return out

    def _lost(self, key: tuple[str, int], lo: int, hi: int, why: str) -> None:
        msg = f"kafka-segments stream: {key[0]}-{key[1]}: offsets {lo}..{hi - 1} cannot be read: {why}"
        if self.fail_on_data_loss:
            raise InvalidOffsetError(msg + " (failOnDataLoss=false goes on from the first offset still there)")
        log.warning("%s; going on (failOnDataLoss=false)", msg)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.reader.read(partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: segments are read in place."""


__all__ = ["KafkaSegmentsStreamReader"]
