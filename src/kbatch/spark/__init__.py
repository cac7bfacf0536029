"""kbatch on Spark: the `kafka-segments` data source and helpers that run on executors.

    import kbatch.spark
    print(kbatch.spark.register(spark))               # "kafka-segments: JVM reader (...)" or Python
    df = spark.read.format("kafka-segments").load("/data/kafka-logs")

Two readers serve `kafka-segments`: a Java DataSource V2 (columnar, column pruning, filter
pushdown, Hadoop FileSystem paths) where its jar can be loaded (kbatch.spark.jar_path(), added by
register), and the Python data source everywhere else; both give the same rows and errors.
`kafka-segments-jvm` and `kafka-segments-python` name one of them explicitly.

    kbatch.spark.decode_batches(df, "content")        # raw batches in a binary column -> records
    kbatch.spark.timestamp_report(df_or_path, before_max_ms, after_max_ms, now)   # KIP-937
    kbatch.spark.offsets_for_times(path, timestamp)   # KIP-79, one task per partition

Columns everywhere are Spark's Kafka-source columns (see kbatch.columns.decode), so a job can swap
`format("kafka")` for `format("kafka-segments")` without other changes. Executors need kbatch
installed (see docs/spark.md: wheels, packed environments, spark.archives).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from .._typing import PathLike

_FEATURE = "kbatch's Spark data source (kbatch.spark)"
try:  # the `spark` extra: Spark's Python data source API (Spark >= 4) and Arrow
    import pyspark
except ModuleNotFoundError as e:
    if e.name != "pyspark":  # a broken install: what is missing is the message
        raise
    raise MissingDependencyError(_FEATURE, "pyspark", "spark", requirement=">=4.1") from e
try:
    import pyspark.sql.datasource  # noqa: F401
except ModuleNotFoundError as e:
    if e.name != "pyspark.sql.datasource":
        raise
    raise MissingDependencyError(_FEATURE, "pyspark", "spark", requirement=">=4.1",
                                 installed=pyspark.__version__) from e
try:
    import pyarrow  # noqa: F401
except ModuleNotFoundError as e:
    if e.name != "pyarrow":
        raise
    raise MissingDependencyError(_FEATURE, "pyarrow", "spark") from e

from .datasource import (NAME, PYTHON_NAME, KafkaSegmentsDataSource, KafkaSegmentsPushdownDataSource,
                         KafkaSegmentsPythonDataSource, KafkaSegmentsPythonPushdownDataSource, _to_ms, spark_schema)
from .jvm import JVM_NAME, Reader, jar_path, live_reader

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession, pushdown: bool = False, reader: str = "auto") -> Reader:
    """Register `kafka-segments` on a session and return which reader serves it (also logged).

    The Python data source is always registered (under `kafka-segments` and
    `kafka-segments-python`): it is the fallback, and writes go to it. Then the JVM reader's jar
    is added (`ADD JAR`) unless reader="python" (or KBATCH_SPARK_READER=python); where it cannot
    load (no jar in this build, a Spark Connect session, a cluster that refuses jars) the Python
    reader keeps the name and the returned Reader says why. reader="jvm" raises instead.

    pushdown=True sets `spark.sql.python.filterPushdown.enabled` (Spark's switch for Python data
    source filter pushdown) so that the Python reader prunes partitions and byte ranges from
    filters on partition, topic, offset and timestamp; the JVM reader always does.
    """
    from . import jvm

    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(KafkaSegmentsPushdownDataSource if pushdown else KafkaSegmentsDataSource)
    spark.dataSource.register(KafkaSegmentsPythonPushdownDataSource if pushdown else KafkaSegmentsPythonDataSource)
    live = jvm.load(spark, reader)
    jvm.log.info("kbatch.spark: %s", live)
    return live


def _session(spark: SparkSession | None = None) -> SparkSession:
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    s = SparkSession.getActiveSession()
    if s is None:
        raise RuntimeError("kbatch.spark: no active SparkSession; pass spark=...")
    return s


def read(path: PathLike, spark: SparkSession | None = None, **options: object) -> DataFrame:
    """spark.read.format('kafka-segments').options(**options).load(path), registering the source."""
    spark = _session(spark)
    if not live_reader(spark).is_jvm:
        register(spark, pushdown=str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true")
    return spark.read.format(NAME).options(**{k: str(v) for k, v in options.items()}).load(os.fspath(path))


# ------------------------------------------------------------------------------------ decode_batches
def decode_batches(df: DataFrame, column: str, topic: str | None = None, partition: int | None = None, *,
                   topic_col: str | None = None, partition_col: str | None = None, include_headers: bool = True,
                   batch_fields: bool = False, verify_crc: bool = True) -> DataFrame:
    """Decode a binary column holding raw record batches (any magic, any codec) with mapInArrow.

    Each row's bytes are one or more whole batches. `topic`/`partition` give constant values;
    otherwise `topic_col`/`partition_col` (default: the df's `topic`/`partition` columns when it
    has them) give each row's. Returns a DataFrame with the kafka-segments columns.
    """
    cols = set(df.columns)
    if topic is None and topic_col is None and "topic" in cols:
        topic_col = "topic"
    if partition is None and partition_col is None and "partition" in cols:
        partition_col = "partition"
    sel = [column] + [c for c in (topic_col, partition_col) if c is not None]
    out_schema = spark_schema(include_headers, batch_fields)
    # arrow.schema() always includes isTombstone after headers, as spark_schema does
    fn = _DecodeFn(column, topic, partition, topic_col, partition_col, include_headers, batch_fields, verify_crc)
    return df.select(*sel).mapInArrow(fn, out_schema)


class _DecodeFn:
    column: str
    topic: str | None
    partition: int | None
    topic_col: str | None
    partition_col: str | None
    include_headers: bool
    batch_fields: bool
    verify_crc: bool

    def __init__(self, column: str, topic: str | None, partition: int | None, topic_col: str | None,
                 partition_col: str | None, include_headers: bool, batch_fields: bool, verify_crc: bool) -> None:
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ..columns.decode import iter_record_batches

        for rb in batches:
            data = rb.column(self.column).to_pylist()
            topics = rb.column(self.topic_col).to_pylist() if self.topic_col else [self.topic] * len(data)
            parts = rb.column(self.partition_col).to_pylist() if self.partition_col else [self.partition] * len(data)
            for raw, t, p in zip(data, topics, parts):
                if raw is None:
                    continue
                yield from iter_record_batches(raw, t, None if p is None else int(p),
                                               include_headers=self.include_headers,
                                               batch_fields=self.batch_fields, verify_crc=self.verify_crc,
                                               use_threads=False)  # Spark runs a task a core already


# ------------------------------------------------------------------------------------ KIP-937 report
REPORT_SCHEMA = ("topic string, partition int, records long, noTimestamp long, tooOld long, tooNew long, "
                 "firstTooOldOffset long, firstTooNewOffset long")


def _report_partials(before_max_ms: int, after_max_ms: int,
                     now_ms: int) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def fn(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa

        from .. import _wire as W
        from ..columns.decode import timestamps_ms

        check = _check_timestamps_fn()
        # (topic, partition) -> [records, no timestamp, too old, too new, first too old offset or None,
        # first too new offset or None]: mixed ints and Nones, so to a type checker the items are Any
        acc: dict[tuple[str, int], list[Any]] = {}
        for rb in batches:
            if rb.num_rows == 0:
                continue
            ts = timestamps_ms(rb.column("timestamp"))
            off = rb.column("offset").to_numpy(zero_copy_only=False)
            topic = rb.column("topic").to_pylist()
            part = rb.column("partition").to_numpy(zero_copy_only=False)
            keys = list(zip(topic, part.tolist()))
            # group rows by (topic, partition): data-source batches hold one partition each
            groups: dict[tuple[str, int], slice | list[int]]
            if keys[0] == keys[-1] and all(k == keys[0] for k in set(keys)):
                groups = {keys[0]: slice(None)}
            else:
                rows: dict[tuple[str, int], list[int]] = {}
                for i, k in enumerate(keys):
                    rows.setdefault(k, []).append(i)
                groups = dict(rows)
            for k, idx in groups.items():
                t = ts[idx]
                o = off[idx]
                a = acc.setdefault(k, [0, 0, 0, 0, None, None])
                a[0] += len(t)
                a[1] += int(np.count_nonzero(t == W.INT64_MIN))
                first_old, n_old, _ = check(t, now_ms, before_max_ms, W.INT64_MAX, W.INT64_MIN)
                first_new, _, n_new = check(t, now_ms, W.INT64_MAX, after_max_ms, W.INT64_MIN)
                a[2] += n_old
                a[3] += n_new
                if first_old >= 0:
                    a[4] = min(x for x in (a[4], int(o[first_old])) if x is not None)
                if first_new >= 0:
                    a[5] = min(x for x in (a[5], int(o[first_new])) if x is not None)
        if acc:
            ks = list(acc)
            yield pa.RecordBatch.from_arrays(
                [pa.array([k[0] for k in ks], pa.string()), pa.array([k[1] for k in ks], pa.int32())]
                + [pa.array([acc[k][j] for k in ks], pa.int64()) for j in range(6)],
                names=["topic", "partition", "records", "noTimestamp", "tooOld", "tooNew", "firstTooOldOffset",
                       "firstTooNewOffset"])
    return fn


def _check_timestamps_fn() -> Callable[[npt.ArrayLike, int, int, int, int], tuple[int, int, int]]:
    """The vectorized KIP-937 range check: (first_bad_index, n_too_old, n_too_new).

    Uses the backend kernel (`_backend.core.check_timestamps`, same saturating arithmetic as
    kbatch.check_timestamps, DESIGN.md decision 4) over an int64 column."""
    from .. import _backend

    return _backend.core.check_timestamps


def timestamp_report(df_or_path: DataFrame | PathLike, before_max_ms: int, after_max_ms: int,
                     now: int | datetime | None = None, spark: SparkSession | None = None) -> DataFrame:
    """KIP-937 violations per topic/partition, computed on executors.

    df_or_path: a DataFrame with topic, partition, offset, timestamp columns (e.g. from
    kafka-segments), or a directory to read with kafka-segments. now: ms or datetime (default:
    the driver's clock). Returns a DataFrame: topic, partition, records, noTimestamp, tooOld,
    tooNew, firstTooOldOffset, firstTooNewOffset (null when none), sorted by topic, partition.
    A timestamp is too old when ts < now - before_max_ms and too new when ts > now + after_max_ms,
    in exact (saturating) arithmetic; "no timestamp" is never a violation.
    """
    from pyspark.sql import functions as F

    now_ms = int(time.time() * 1000) if now is None else _to_ms(now)
    if isinstance(df_or_path, (str, os.PathLike)):
        df = read(df_or_path, spark)
    else:
        df = df_or_path
    parts = df.select("topic", "partition", "offset", "timestamp").mapInArrow(
        _report_partials(int(before_max_ms), int(after_max_ms), now_ms), REPORT_SCHEMA)
    return (parts.groupBy("topic", "partition")
            .agg(*[F.sum(c).cast("long").alias(c) for c in ("records", "noTimestamp", "tooOld", "tooNew")],
                 F.min("firstTooOldOffset").alias("firstTooOldOffset"),
                 F.min("firstTooNewOffset").alias("firstTooNewOffset"))
            .orderBy("topic", "partition"))


# ------------------------------------------------------------------------------------ offsets for times
OFFSETS_SCHEMA = "topic string, partition int, offset long, timestamp long"


def offsets_for_times(path: PathLike, timestamp: int | datetime, spark: SparkSession | None = None, *,
                      topics: Iterable[str] | None = None) -> DataFrame:
    """For every partition under `path`, the first offset whose timestamp >= `timestamp` (ms or
    datetime; any int64, negative too) and that record's timestamp, as Kafka's offsetsForTimes
    (null offset/timestamp when no such record). One Spark task per partition; the lookups use
    `.timeindex` and `.index` and read only the bytes they need.
    Returns a DataFrame: topic, partition, offset, timestamp (ms)."""
    from ..log import segment_plan as _plan

    spark = _session(spark)
    target = _to_ms(timestamp) if isinstance(timestamp, datetime) else int(timestamp)
    tps = [(tp.topic, tp.partition, tp.path) for tp in _plan.list_partitions(os.fspath(path), topics)]
    if not tps:
        return spark.createDataFrame([], OFFSETS_SCHEMA)
    rdd = spark.sparkContext.parallelize(tps, len(tps)).map(lambda t: _lookup(t, target))
    return spark.createDataFrame(rdd, OFFSETS_SCHEMA).orderBy("topic", "partition")


def _lookup(t: tuple[str, int, str], target: int) -> tuple[str, int, int | None, int | None]:
    from ..log import segment_plan as _plan

    topic, partition, path = t
    tp = _plan.list_partitions(path)[0]
    found = _plan.offset_for_time(tp, target)
    return (topic, partition, None, None) if found is None else (topic, partition, found[0], found[1])


__all__ = ["register", "read", "jar_path", "live_reader", "Reader", "decode_batches", "timestamp_report",
           "offsets_for_times", "spark_schema", "KafkaSegmentsDataSource", "KafkaSegmentsPushdownDataSource",
           "KafkaSegmentsPythonDataSource", "NAME", "PYTHON_NAME", "JVM_NAME", "PUSHDOWN_CONF"]
