"""The `kafka-segments` Spark data source (PySpark Python data source API, Spark >= 4.1).

    spark.read.format("kafka-segments").load("/data/kafka-logs")
    spark.read.format("kafka-segments").load("s3://bucket/logs/")     # gs://, hdfs://, fsspec URIs too

reads a directory of `<topic>-<partition>/` folders of segments (or a tiered-storage layout:
kbatch.log.layout) with Spark's Kafka-source columns (kbatch.columns.decode). Remote paths are listed on the
driver and read by ranges on executors (credentials from the executors' environment or
profiles, as the filesystem library finds them). One input partition per segment, or per byte range of a large segment
split at batch boundaries from its `.index`; `read()` yields pyarrow.RecordBatch objects of up
to `rowsPerBatch` rows, never per-row tuples.

Options (names as Spark's Kafka source where it has one):
  topics / subscribe            comma-separated topic names
  topicPattern / subscribePattern  regex on topic names (full match)
  includeInternalTopics         "true" reads internal topics (__consumer_offsets,
                                __transaction_state, __cluster_metadata, _schemas, any `__`
                                name) that no `topics` names (default false: left out, as
                                Kafka's exclude.internal.topics; kbatch.log.topics)
  startingOffsets / endingOffsets  "earliest" / "latest" / JSON {"topic": {"0": 23, "1": -2}}
                                (-2 earliest, -1 latest; ending offsets are exclusive)
  startingTimestamp / endingTimestamp  ms since the epoch, for every partition (any int64)
  startingOffsetsByTimestamp / endingOffsetsByTimestamp  JSON {"topic": {"0": ts}}
                                (timestamps resolve through .timeindex/.index to the first
                                offset with timestamp >= ts, as Kafka's offsetsForTimes; none
                                found = the partition's end)
  includeHeaders                "true" adds the headers column (default false, as Spark)
  includeBatchFields            "true" adds producerId, producerEpoch, baseSequence,
                                isTransactional, isControl
  failOnDataLoss                "false": a bad segment range is skipped from the bad batch on,
                                logged (file, byte position, reason), instead of failing the job
  badRecordsPath                a directory: skip bad ranges as failOnDataLoss=false does and
                                write one JSON report per skipped range there (path, topic,
                                partition, skippedFrom, skippedTo, baseOffset, errorClass, error)
  maxPartitionBytes             split segments larger than this (default 64 MiB)
  rowsPerBatch                  rows per Arrow batch (default 32768)
  verifyCrc                     "false" skips CRC checks (default true)
  isolation.level               "read_committed" leaves out the records of aborted transactions
                                (from `.txnindex`, or from the log's ABORT markers where a
                                segment has no `.txnindex`), as a Kafka consumer does;
                                "read_uncommitted" (the default, as Spark's Kafka source) keeps
                                them. Control records are never rows.
  pushdown                      "true" uses the reader with filter pushdown (needs
                                spark.sql.python.filterPushdown.enabled, which
                                kbatch.spark.register(spark, pushdown=True) sets)

Column selection: Spark does not prune a Python data source's columns, so every column the
source returns crosses from the Python worker to the JVM. A schema given before load selects
columns (any subset of the full schema, any order, same types), and only those are sent:

    spark.read.format("kafka-segments").schema("key binary, value binary, offset long").load(dir)
"""
from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, EqualTo, GreaterThan,
                                    GreaterThanOrEqual, In, InputPartition, LessThan, LessThanOrEqual)
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, ShortType, StringType,
                               StructField, StructType, TimestampType)

from ..columns import decode as A
from ..log.files import atomic_write
from ..errors import FileChangedError, InvalidOffsetError, InvalidRequestError, KBatchError
from ..log.fetch import UnreadableDataError, UnreadableRange, partial_tail_ignored
from ..log import segment_plan as _plan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.datasource import DataSourceWriter, Filter

    from .._typing import Buffer

log = logging.getLogger("kbatch.spark")

NAME = "kafka-segments"
PYTHON_NAME = "kafka-segments-python"
DEFAULT_MAX_PARTITION_BYTES = 64 * 1024 * 1024
DEFAULT_ROWS_PER_BATCH = 32768


def spark_schema(include_headers: bool = False, batch_fields: bool = False) -> StructType:
    """Spark's Kafka-source schema (+ isTombstone, + batch fields on request)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType(
            [StructField("key", StringType()), StructField("value", BinaryType())]))))
    fields.append(StructField("isTombstone", BooleanType()))
    if batch_fields:
        fields += [StructField("producerId", LongType()), StructField("producerEpoch", ShortType()),
                   StructField("baseSequence", IntegerType()), StructField("isTransactional", BooleanType()),
                   StructField("isControl", BooleanType())]
    return StructType(fields)


_BATCH_FIELDS = ("producerId", "producerEpoch", "baseSequence", "isTransactional", "isControl")


def _columns(schema: StructType) -> list[str]:
    """The columns of a user-given schema (`.schema(...)` before `.load`), checked against the
    source's full schema: a subset, in any order, with the same types. Only those columns are sent
    from the Python workers to the JVM (Python data sources get no column pruning from Spark)."""
    full = {f.name: f.dataType for f in spark_schema(True, True).fields}
    names = schema.fieldNames()
    for f in schema.fields:
        if f.name not in full:
            raise InvalidRequestError(f"kafka-segments: unknown column {f.name!r} in the given schema",
                                      expected=f"columns of {', '.join(full)}", found=f.name)
        if f.dataType != full[f.name]:
            raise InvalidRequestError(f"kafka-segments: column {f.name!r} has the wrong type in the given schema",
                                      expected=full[f.name].simpleString(), found=f.dataType.simpleString())
    if len(set(names)) != len(names) or not names:
        raise InvalidRequestError("kafka-segments: the given schema needs distinct columns",
                                  expected="at least one column, each once", found=", ".join(names))
    return names


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = _opt(options, name)
    if v is None:
        return default
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _opt(options: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        if n in options and options[n] not in (None, ""):
            return options[n]
        low = n.lower()
        for k, v in options.items():
            if k.lower() == low and v not in (None, ""):
                return v
    return None


def _json_option(name: str, text: str) -> dict[tuple[str, int], int]:
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise InvalidRequestError(f"kafka-segments: option {name} is not valid JSON ({e})",
                                  expected='{"topic": {"0": 23}}', found=text) from None
    if not isinstance(obj, dict) or not all(isinstance(v, dict) for v in obj.values()):
        raise InvalidRequestError(f"kafka-segments: option {name} must map topic -> partition -> value",
                                  expected='{"topic": {"0": 23}}', found=text)
    return {(t, int(p)): int(v) for t, parts in obj.items() for p, v in parts.items()}


def _to_ms(value: datetime | int | str) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
    return int(value)


class SegmentSlice(InputPartition):
    """A picklable input partition: one byte range of one segment file."""

    def __init__(self, s: _plan.Slice) -> None:
        super().__init__(None)
        self.topic, self.partition, self.path = s.topic, s.partition, s.path
        self.start, self.end, self.file_size = s.start, s.end, s.file_size
        self.start_offset, self.end_offset = s.start_offset, s.end_offset
        self.aborted = s.aborted
        self.next_base = s.next_base
        self.lookback = s.lookback

    def __repr__(self) -> str:
        return (f"SegmentSlice({self.path}[{self.start}:{self.end}], offsets "
                f"[{self.start_offset}, {self.end_offset}))")


class KafkaSegmentsReader(DataSourceReader):
    """Plans slices on the driver, decodes them with kbatch.columns.decode on executors."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = dict(options)
        path = _opt(self.options, "path")
        if not path:
            raise InvalidRequestError("kafka-segments needs a path: spark.read.format('kafka-segments').load(dir)",
                                      expected="a directory of <topic>-<partition> folders", found=None)
        self.path: str = path
        self.columns = _columns(schema)
        self.include_headers = "headers" in self.columns
        self.batch_fields = any(c in _BATCH_FIELDS for c in self.columns)
        self.tombstone = "isTombstone" in self.columns
        self.read_committed = _isolation(self.options)
        # None: read() yields every column it builds, in order (the source's own schema)
        built = [f.name for f in A.schema(self.include_headers, self.batch_fields, self.tombstone)]
        self.select: list[str] | None = None if self.columns == built else self.columns
        self.bad_records_path = _opt(self.options, "badRecordsPath")
        self.fail_on_data_loss = (_bool(self.options, "failOnDataLoss", True) and not _bool(
            self.options, "skipBadSegments", False) and self.bad_records_path is None)
        self.verify_crc = _bool(self.options, "verifyCrc", True)
        self.max_bytes = int(_opt(self.options, "maxPartitionBytes") or DEFAULT_MAX_PARTITION_BYTES)
        self.rows_per_batch = int(_opt(self.options, "rowsPerBatch") or DEFAULT_ROWS_PER_BATCH)
        topics = _opt(self.options, "topics", "subscribe")
        self.topics: set[str] | None = None if topics is None else {t.strip() for t in topics.split(",") if t.strip()}
        self.topic_pattern = _opt(self.options, "topicPattern", "subscribePattern")
        self.include_internal = _bool(self.options, "includeInternalTopics", False)
        # narrowed by pushed filters
        self.partitions_in: set[int] | None = None
        self.offset_lo: int | None = None         # inclusive
        self.offset_hi: int | None = None         # exclusive
        self.ts_lo: int | None = None             # ms, inclusive: rows before the first offset with ts >= ts_lo are skipped

    # -------------------------------------------------------------------------------- planning
    def _bounds(self, tp: _plan.TopicPartition) -> tuple[int | None, int | None]:
        o = self.options
        key = (tp.topic, tp.partition)
        start: int | None = None  # None: earliest / latest
        end: int | None = None
        start_ts = _opt(o, "startingTimestamp")
        start_by_ts = _opt(o, "startingOffsetsByTimestamp")
        start_offs = _opt(o, "startingOffsets")
        if start_ts is not None:
            start = self._offset_for_time(tp, int(start_ts))
        elif start_by_ts is not None:
            m = _json_option("startingOffsetsByTimestamp", start_by_ts)
            if key in m:
                start = self._offset_for_time(tp, m[key])
        elif start_offs is not None and start_offs.strip().lower() not in ("earliest",):
            if start_offs.strip().lower() == "latest":
                start = _plan.end_offset(tp)
            else:
                v = _json_option("startingOffsets", start_offs).get(key, -2)
                start = None if v == -2 else (_plan.end_offset(tp) if v == -1 else v)
        end_ts = _opt(o, "endingTimestamp")
        end_by_ts = _opt(o, "endingOffsetsByTimestamp")
        end_offs = _opt(o, "endingOffsets")
        if end_ts is not None:
            end = self._offset_for_time(tp, int(end_ts))
        elif end_by_ts is not None:
            m = _json_option("endingOffsetsByTimestamp", end_by_ts)
            if key in m:
                end = self._offset_for_time(tp, m[key])
        elif end_offs is not None and end_offs.strip().lower() != "latest":
            v = _json_option("endingOffsets", end_offs).get(key, -1)
            end = None if v == -1 else v
        if self.offset_lo is not None:
            start = self.offset_lo if start is None else max(start, self.offset_lo)
        if self.offset_hi is not None:
            end = self.offset_hi if end is None else min(end, self.offset_hi)
        if self.ts_lo is not None:
            t = self._offset_for_time(tp, self.ts_lo)
            start = t if start is None else max(start, t)
        return start, end

    @staticmethod
    def _offset_for_time(tp: _plan.TopicPartition, ts: int) -> int:
        found = _plan.offset_for_time(tp, ts)
        return _plan.end_offset(tp) if found is None else found[0]

    def partitions(self) -> list[SegmentSlice]:
        out: list[SegmentSlice] = []
        for tp in _plan.list_partitions(self.path, self.topics, self.topic_pattern, require_partitions=True,
                                          include_internal=self.include_internal):
            if self.partitions_in is not None and tp.partition not in self.partitions_in:
                continue
            start, end = self._bounds(tp)
            aborted: list[_plan.Aborted] | None = None
            if self.read_committed:  # the read path's rule: stop at the last stable offset (kbatch.log.fetch)
                aborted, unstable = _plan.transaction_state(tp, skip_unreadable=not self.fail_on_data_loss)
                if unstable is not None:
                    undecided = (_plan.undecided_at(tp, unstable) if self.fail_on_data_loss and
                                 (end is None or unstable < end) else None)
                    if undecided is not None:  # damage hiding a marker is no LSO: fail, as read_log raises
                        raise UnreadableDataError(f"kafka-segments: {tp.topic}-{tp.partition}: {undecided}",
                                                  position=undecided.position)
                    end = unstable if end is None else min(end, unstable)
            if start is not None and end is not None and end <= start:
                continue
            out.extend(SegmentSlice(s) for s in _plan.plan_partition(tp, start, end, self.max_bytes, aborted))
        return out or [SegmentSlice(_plan.Slice("", 0, "", 0, 0, 0, 0, 0))]

    # -------------------------------------------------------------------------------- reading
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from ..columns.decode import iter_record_batches

        assert isinstance(partition, SegmentSlice)  # what partitions() planned
        if not partition.path or partition.end <= partition.start:
            return
        committed = self.read_committed and partition.aborted is not None
        select = self.select
        if committed and select is None and (not self.batch_fields or not self.tombstone):
            select = self.columns  # the batch fields read_committed needs are not the query's
        # local: a read-only map of the slice; remote (s3://, gs://, hdfs://...): one ranged request of it
        with _slice(partition.path, partition.start, partition.end, partition.file_size) as data:
            # a partial batch at the end of the range is ignored only at the end of the last (active)
            # segment (kbatch.log.fetch's rule); in a middle segment it is unreadable bytes
            at_eof = partition.end >= partition.file_size and partial_tail_ignored(partition.next_base)
            lo = _plan.INT64_MIN if partition.start_offset is None else partition.start_offset
            hi = _plan.INT64_MAX if partition.end_offset is None else partition.end_offset
            # a consumer checks every batch's CRC, control batches too (kbatch.log.fetch does): the
            # rows before a marker whose CRC fails are read, then the marker is the bad batch
            bad = _control_crc_failure(data, lo, hi) if self.verify_crc else None
            # a base offset out of order (no CRC covers it) is damage from that batch on (the read path's rule)
            disorder = _offset_order_failure(data, lo, hi, partition.next_base, _last_before(partition))
            if disorder is not None and (bad is None or (disorder.position or 0) < (bad.position or 0)):
                bad = disorder
            body = data if bad is None else memoryview(data)[:bad.position]
            # only the columns the schema selects are built (headers, batch fields, isTombstone)
            gen: Iterator[pa.RecordBatch] = iter_record_batches(
                body, partition.topic, partition.partition, include_headers=self.include_headers,
                batch_fields=self.batch_fields or committed, include_control=committed,
                tombstone=self.tombstone, verify_crc=self.verify_crc, strict=not at_eof or bad is not None,
                start_offset=partition.start_offset, end_offset=partition.end_offset,
                chunk_rows=self.rows_per_batch, use_threads=False)  # Spark runs a task a core already
            try:
                if committed:
                    assert partition.aborted is not None  # committed says so
                    _plan.check_markers(body, 0, partition.aborted, lo, hi, self.verify_crc)
                    gen = _committed(gen, partition.aborted)
                for rb in gen:
                    yield rb if select is None else rb.select(select)
                if bad is not None:
                    raise bad
            except KBatchError as e:
                self._bad_range(partition, e, data)

    def _bad_range(self, partition: SegmentSlice, e: KBatchError, data: Buffer) -> None:
        """A bad batch in the slice: fail (positions in the file, the file, bytes and offsets
        named as kbatch.log.fetch.UnreadableRange names them), or skip the rest of the slice, log
        it once and, with badRecordsPath, report it."""
        from ..record.file_records import iter_batches

        at = e.position  # in the slice's bytes
        last = None
        if at is not None and not isinstance(e, FileChangedError):
            for b in iter_batches(memoryview(data)[:at], verify_crc=False, strict=False):
                last = b.last_offset
        e.update(shift=partition.start, reason=f"{e.reason} [kafka-segments: {partition.path}]")
        if e.position is not None and not isinstance(e, FileChangedError):
            hole = UnreadableRange(partition.path, e.position, partition.file_size - e.position, last,
                                   partition.next_base, type(e).__name__)
            e.update(reason=f"{e.reason}; {hole}")
        if self.fail_on_data_loss or isinstance(e, FileChangedError):
            raise e
        log.warning("kafka-segments: skipping the rest of %s from byte %s to %s (failOnDataLoss=false): %s",
                    partition.path, e.position, partition.end, e)
        if self.bad_records_path is not None:
            _report_skipped(self.bad_records_path, partition, e)


def _last_before(partition: SegmentSlice) -> int | None:
    """The last offset of the batch that ends where the slice starts (from the bytes since the
    planned lookback, a batch boundary), or None when it is not known."""
    from ..record.file_records import iter_batches

    back = partition.lookback
    if back is None or back >= partition.start:
        return None
    last: int | None = None
    end = back
    try:
        with _slice(partition.path, back, partition.start, partition.file_size) as data:
            for b in iter_batches(data, verify_crc=False, strict=False):
                last, end = b.last_offset, back + b.position + b.size_in_bytes
    except KBatchError:
        return None
    return last if end == partition.start else None


def _offset_order_failure(data: Buffer, lo: int, hi: int, next_base: int | None,
                          prev: int | None = None) -> KBatchError | None:
    """A CorruptRecordError at the first batch of `data` reaching offsets [lo, hi) whose offsets
    break the log's order (kbatch.log.fetch.offset_disorder, positions in `data`), or None. Only
    headers are scanned; a framing error ends the look (the decode meets it)."""
    import numpy as np

    from ..errors import CorruptRecordError
    from ..log.fetch import offset_disorder
    from ..record.file_records import scan_buffer

    try:
        for s in scan_buffer(data):
            n = len(s["position"])
            if not n:
                continue
            reach = np.flatnonzero(s["last_offset"] >= lo)
            a = int(reach[0]) if len(reach) else n
            hit = offset_disorder(s, a, prev, next_base)
            beyond = np.flatnonzero(s["base_offset"][a:] >= hi)
            b = a + int(beyond[0]) if len(beyond) else n
            if hit is not None and hit[0] <= b:
                return CorruptRecordError(hit[1], position=int(s["position"][hit[0]]))
            if len(beyond):
                return None
            prev = int(s["last_offset"][n - 1])
    except KBatchError:
        return None
    return None


def _control_crc_failure(data: Buffer, lo: int, hi: int) -> KBatchError | None:
    """The CrcMismatchError of the first control batch of `data` with offsets reaching [lo, hi)
    whose CRC fails (positions in `data`), or None. Only headers are scanned and only control
    batches checked (the decode checks the others); a framing error ends the look, the decode
    meets it."""
    import numpy as np

    from .. import _wire as W
    from ..record.file_records import batch_at, crc_error_at, scan_buffer

    try:
        for s in scan_buffer(data):
            ctrl = ((s["magic"] == 2) & ((s["attributes"] & W.CONTROL_FLAG_MASK) != 0) & (s["last_offset"] >= lo)
                    & (s["base_offset"] < hi))
            for i in np.flatnonzero(ctrl).tolist():
                b = batch_at(s, i)
                if b.compute_crc() != b.crc:
                    return crc_error_at(s, i)
    except KBatchError:
        return None
    return None


def _isolation(options: Mapping[str, str]) -> bool:
    """True for isolation.level=read_committed (also Spark's Kafka-source spelling kafka.isolation.level)."""
    v = _opt(options, "isolation.level", "kafka.isolation.level", "isolationLevel")
    if v is None:
        return False
    v = str(v).strip().lower()
    if v not in ("read_committed", "read_uncommitted"):
        raise InvalidRequestError("kafka-segments: unknown isolation.level",
                                  expected="read_uncommitted or read_committed", found=v)
    return v == "read_committed"


def _committed(gen: Iterable[pa.RecordBatch], aborted: list[_plan.Aborted]) -> Iterator[pa.RecordBatch]:
    """read_committed: leave out control rows and the rows of aborted transactions."""
    import pyarrow as pa

    for rb in gen:
        pid = rb.column("producerId").to_numpy(zero_copy_only=False)
        txn = rb.column("isTransactional").to_numpy(zero_copy_only=False)
        ctrl = rb.column("isControl").to_numpy(zero_copy_only=False)
        off = rb.column("offset").to_numpy(zero_copy_only=False)
        drop = ctrl | _plan.aborted_mask(pid, txn, off, aborted)
        if drop.any():
            rb = rb.filter(pa.array(~drop))
        if rb.num_rows:
            yield rb


@contextmanager
def _slice(path: str, start: int, end: int, file_size: int) -> Iterator[bytes]:
    """Bytes [start, end) of a segment: one pread of a local file, one ranged request of a remote
    object. Not a memory map: a file truncated under a map kills the worker with SIGBUS, while a
    short pread is a kbatch FileChangedError naming the file and position."""
    yield _plan.read_range(path, start, end, file_size)


def _report_skipped(directory: str, partition: SegmentSlice, e: KBatchError) -> None:
    """One JSON file per skipped range under `directory` (written whole, then renamed into place,
    so a reader never sees half a report): spark.read.json(directory) lists them."""
    report = {"path": partition.path, "topic": partition.topic, "partition": partition.partition,
              "skippedFrom": e.position, "skippedTo": partition.end, "sliceStart": partition.start,
              "baseOffset": e.base_offset, "errorClass": type(e).__name__, "error": str(e)}
    os.makedirs(directory, exist_ok=True)
    atomic_write(os.path.join(directory, f"kafka-segments-{uuid.uuid4().hex}.json"),
                 (json.dumps(report) + "\n").encode())


class KafkaSegmentsPushdownReader(KafkaSegmentsReader):
    """The reader with filter pushdown on partition, topic, offset (exact) and timestamp (a
    lower bound resolves through the time index; Spark still applies timestamp filters)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if self._push(f):
                continue
            yield f

    def _push(self, f: Filter) -> bool:
        """True when the filter is fully applied by the reader."""
        attribute: tuple[str, ...] = getattr(f, "attribute", ())  # a Not has its child's
        col = attribute[0] if len(attribute) == 1 else None
        v: Any = getattr(f, "value", None)  # a literal of any type (pyspark's Filter.value is Any)
        if col == "partition":
            values: set[int] | None = None
            if isinstance(f, EqualTo):
                values = {int(v)}
            elif isinstance(f, In):
                values = {int(x) for x in v if x is not None}
            if values is not None:
                self.partitions_in = values if self.partitions_in is None else self.partitions_in & values
                return True
            return False
        if col == "topic":
            names: set[str] | None = None
            if isinstance(f, EqualTo):
                names = {v}
            elif isinstance(f, In):
                names = {x for x in v if x is not None}
            if names is not None:
                self.topics = names if self.topics is None else self.topics & names
                return True
            return False
        if col == "offset":
            if isinstance(f, EqualTo):
                self._offsets(int(v), int(v) + 1)
            elif isinstance(f, GreaterThan):
                self._offsets(int(v) + 1, None)
            elif isinstance(f, GreaterThanOrEqual):
                self._offsets(int(v), None)
            elif isinstance(f, LessThan):
                self._offsets(None, int(v))
            elif isinstance(f, LessThanOrEqual):
                self._offsets(None, int(v) + 1)
            elif isinstance(f, In):
                vals = [int(x) for x in v if x is not None]
                if vals:
                    self._offsets(min(vals), max(vals) + 1)
                return False  # the range is a superset; Spark keeps the exact test
            else:
                return False
            return True
        if col == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)) and v is not None:
            ms = _to_ms(v)  # floor to ms: rows with ts > v or ts >= v all have ts_ms >= floor(v)
            self.ts_lo = ms if self.ts_lo is None else max(self.ts_lo, ms)
            return False
        return False

    def _offsets(self, lo: int | None, hi: int | None) -> None:
        if lo is not None:
            self.offset_lo = lo if self.offset_lo is None else max(self.offset_lo, lo)
        if hi is not None:
            self.offset_hi = hi if self.offset_hi is None else min(self.offset_hi, hi)



# ------------------------------------------------------------------------------------ streams
# spark.readStream on the Python reader: the fallback where the JVM reader's jar cannot load
# (`kafka-segments-python` names it anywhere). A stream's position is, per topic-partition, the next
# offset to read, {"topic": {"0": 123}} as Spark's Kafka source (and the JVM reader's stream) writes
# it. Each micro-batch reads [previous position, new position) of every partition through the batch
# reader's planning and read(), so its rows are the batch reader's for those offsets. A partition is
# read up to its stable end: the end of its whole batches, the high watermark of a broker's
# replication-offset-checkpoint when it names the partition, and for read_committed the last stable
# offset (the JVM reader's rules, PartitionTail). Options: the JVM stream's, less
# minOffsetsPerTrigger / maxTriggerDelay (refused); ending offsets are refused, as Spark's Kafka
# source refuses them in streams.
try:  # Spark >= 4.3: availableNow in micro-batches of maxOffsetsPerTrigger (else one batch of everything)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - older pyspark
    _AvailableNow = object  # type: ignore[assignment,misc]


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
        for name in ("minOffsetsPerTrigger", "maxTriggerDelay"):
            if _opt(options, name) is not None:
                raise InvalidRequestError(f"kafka-segments: option {name} needs the JVM reader (the Python "
                                          "reader's stream has no trigger delay)", expected="no " + name,
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
        return {(tp.topic, tp.partition): tp for tp in _plan.list_partitions(r.path, r.topics, r.topic_pattern,
                                                                                  include_internal=r.include_internal)}

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
            _aborted, unstable = _plan.transaction_state(tp, skip_unreadable=not self.fail_on_data_loss)
            if unstable is not None:
                undecided = _plan.undecided_at(tp, unstable) if self.fail_on_data_loss else None
                if undecided is not None and unstable < end:  # damage hiding a marker is no LSO (kbatch.log.fetch)
                    raise UnreadableDataError(f"kafka-segments stream: {tp.topic}-{tp.partition}: {undecided}",
                                              position=undecided.position)
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
            aborted = (_plan.transaction_state(tp, need_open=False, skip_unreadable=not self.fail_on_data_loss)[0]
                       if self.reader.read_committed else None)
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


class KafkaSegmentsDataSource(DataSource):
    """`spark.read.format("kafka-segments").load(dir)`; see the module docstring for options."""

    pushdown = False

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return spark_schema(_bool(self.options, "includeHeaders", False),
                            _bool(self.options, "includeBatchFields", False))

    def reader(self, schema: StructType) -> KafkaSegmentsReader:
        if _bool(self.options, "pushdown", self.pushdown):
            return KafkaSegmentsPushdownReader(self.options, schema)
        return KafkaSegmentsReader(self.options, schema)

    def streamReader(self, schema: StructType) -> KafkaSegmentsStreamReader:
        """spark.readStream.format("kafka-segments"): KafkaSegmentsStreamReader (where the JVM
        reader, which serves streams when its jar is loaded, is not live; or `kafka-segments-python`)."""
        return KafkaSegmentsStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """df.write.format("kafka-segments"): kbatch.spark.writer (the encode_columns kernel)."""
        from .writer import KafkaSegmentsWriter

        return KafkaSegmentsWriter(self.options, schema, overwrite)


class KafkaSegmentsPushdownDataSource(KafkaSegmentsDataSource):
    """Same source, with the pushdown reader by default (registered by register(pushdown=True))."""

    pushdown = True


class KafkaSegmentsPythonDataSource(KafkaSegmentsDataSource):
    """The Python reader under its own name, `kafka-segments-python`, so it can be asked for while
    the JVM reader serves `kafka-segments` (tests run every query on both)."""

    @classmethod
    def name(cls) -> str:
        return PYTHON_NAME


class KafkaSegmentsPythonPushdownDataSource(KafkaSegmentsPythonDataSource):
    pushdown = True


__all__ = ["KafkaSegmentsDataSource", "KafkaSegmentsPushdownDataSource", "KafkaSegmentsPythonDataSource",
           "KafkaSegmentsPythonPushdownDataSource", "KafkaSegmentsReader", "KafkaSegmentsPushdownReader",
           "SegmentSlice", "KafkaSegmentsStreamReader", "spark_schema", "NAME", "PYTHON_NAME"]
