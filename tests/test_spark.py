"""The kafka-segments data source and kbatch.spark helpers, in one small local Spark session."""
import json
import os
import shutil
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark.sql.datasource")

import kbatch  # noqa: E402
from kbatch import arrow as A  # noqa: E402
from kbatch import demo  # noqa: E402
from kbatch.spark import _plan  # noqa: E402

pytestmark = pytest.mark.spark

NOW = 1_750_000_000_000


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    os.environ["PYTHONPATH"] = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("kbatch-tests")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import kbatch.spark as ks

    ks.register(s, pushdown=True)  # sets the pushdown switch; option pushdown=false picks the plain reader
    yield s
    s.stop()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("segments") / "logs")
    demo.generate(root, records=3000, now_ms=NOW, segment_bytes=24 * 1024)
    return root


def local_table(root, include_headers=True, batch_fields=False) -> pa.Table:
    """decode_columns over every segment, in (topic, partition, offset) order."""
    parts = []
    for tp in _plan.list_partitions(root):
        for seg in tp.segments:
            with open(seg.path, "rb") as f:
                parts.append(kbatch.decode_columns(f.read(), tp.topic, tp.partition, include_headers=include_headers,
                                                   batch_fields=batch_fields, strict=False))
    return _sorted(pa.concat_tables(parts))


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


def spark_table(df) -> pa.Table:
    return _sorted(df.toArrow())


def _same(spark_t: pa.Table, local_t: pa.Table):
    assert spark_t.num_rows == local_t.num_rows
    assert spark_t.column_names == local_t.column_names
    for name in local_t.column_names:
        a, b = spark_t[name].combine_chunks(), local_t[name].combine_chunks()
        if pa.types.is_timestamp(b.type):
            a, b = a.cast(pa.int64()), b.cast(pa.int64())
        assert a.to_pylist() == b.to_pylist(), name


def test_dataframe_equals_decode_columns(spark, data_dir):
    df = spark.read.format("kafka-segments").options(includeHeaders="true", includeBatchFields="true",
                                                     pushdown="false").load(data_dir)
    assert [f.name for f in df.schema][:8] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                 "timestampType", "headers"]
    assert df.schema["timestamp"].dataType.typeName() == "timestamp"
    assert df.schema["key"].dataType.typeName() == "binary"
    _same(spark_table(df), local_table(data_dir, True, True))


def test_headers_off_by_default_and_control_rows_absent(spark, data_dir):
    df = spark.read.format("kafka-segments").load(data_dir)
    assert "headers" not in df.columns and "isTombstone" in df.columns
    counts = {(r["topic"], r["partition"]): r["count"] for r in df.groupBy("topic", "partition").count().collect()}
    assert counts[("payments", 0)] == 90  # 3 transactions x 30 records; the 3 markers are not rows


def test_large_segments_split_at_batch_boundaries(spark, data_dir):
    base = spark.read.format("kafka-segments").option("pushdown", "false").load(data_dir)
    small = spark.read.format("kafka-segments").options(maxPartitionBytes="20000", pushdown="false").load(data_dir)
    assert small.rdd.getNumPartitions() > base.rdd.getNumPartitions()
    _same(spark_table(small), spark_table(base))


def test_offset_ranges_match_spark_filter(spark, data_dir):
    starting = json.dumps({"orders": {"0": 100, "1": -2}, "legacy": {"0": 60}})
    ending = json.dumps({"orders": {"0": 2500, "2": 40}})
    ranged = spark.read.format("kafka-segments").options(
        startingOffsets=starting, endingOffsets=ending, pushdown="false").load(data_dir)
    full = spark.read.format("kafka-segments").option("pushdown", "false").load(data_dir)
    expect = full.where(
        "(topic = 'orders' and partition = 0 and offset >= 100 and offset < 2500) or "
        "(topic = 'orders' and partition = 1) or (topic = 'orders' and partition = 2 and offset < 40) or "
        "(topic = 'legacy' and offset >= 60) or topic = 'payments'")
    _same(spark_table(ranged), spark_table(expect))


def test_timestamp_ranges_resolve_like_offsets_for_times(spark, data_dir):
    start, end = NOW - 18 * 3_600_000, NOW - 6 * 3_600_000
    ranged = spark.read.format("kafka-segments").options(
        startingTimestamp=str(start), endingTimestamp=str(end), pushdown="false").load(data_dir)
    local = local_table(data_dir, include_headers=False)
    keep = []
    for (topic, part) in sorted({(t, p) for t, p in zip(local["topic"].to_pylist(), local["partition"].to_pylist())}):
        m = pc.and_(pc.equal(local["topic"], topic), pc.equal(local["partition"], part))
        t = local.filter(m)
        ts = A.timestamps_ms(t["timestamp"])
        off = t["offset"].to_numpy()
        # Kafka's offsetsForTimes: first offset with ts >= target; the range is [start, end)
        lo = off[ts >= start].min() if (ts >= start).any() else None
        hi = off[ts >= end].min() if (ts >= end).any() else None
        if lo is None:
            continue
        sel = off >= lo
        if hi is not None:
            sel &= off < hi
        keep.append(t.filter(pa.array(sel)))
    _same(spark_table(ranged), _sorted(pa.concat_tables(keep)))


def test_pushdown_gives_the_same_rows_as_spark_filtering(spark, data_dir):
    where = ("partition in (0, 2) and offset >= 500 and offset <= 1700 and topic = 'orders' "
             "and timestamp >= timestamp_millis({})".format(NOW - 20 * 3_600_000))
    pushed = spark.read.format("kafka-segments").load(data_dir).where(where)
    plain = spark.read.format("kafka-segments").option("pushdown", "false").load(data_dir).where(where)
    plan = pushed._jdf.queryExecution().executedPlan().toString()
    assert "offset" not in plan.split("BatchScan")[0] or "500" not in plan.split("BatchScan")[0]
    p, q = spark_table(pushed), spark_table(plain)
    assert p.num_rows > 0
    _same(p, q)
    # fewer input partitions: partition 1 and the other topics are pruned at planning time
    assert pushed.rdd.getNumPartitions() < plain.rdd.getNumPartitions()


def test_topics_and_pattern(spark, data_dir):
    a = spark.read.format("kafka-segments").option("topics", "payments,legacy").load(data_dir)
    b = spark.read.format("kafka-segments").option("topicPattern", "pay.*|leg.*").load(data_dir)
    assert sorted({r["topic"] for r in a.select("topic").distinct().collect()}) == ["legacy", "payments"]
    assert a.count() == b.count() == 90 + 225


def test_bad_segment_named_with_byte_position(spark, data_dir, tmp_path):
    bad = str(tmp_path / "bad")
    shutil.copytree(os.path.join(data_dir, "orders-1"), os.path.join(bad, "orders-1"))
    seg = sorted(f for f in os.listdir(os.path.join(bad, "orders-1")) if f.endswith(".log"))[1]
    path = os.path.join(bad, "orders-1", seg)
    batches = list(kbatch.iter_batches(open(path, "rb").read()))
    victim = batches[3]
    with open(path, "r+b") as f:
        f.seek(victim.position + victim.size_in_bytes - 3)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    df = spark.read.format("kafka-segments").load(bad)
    with pytest.raises(Exception) as ei:
        df.count()
    msg = str(ei.value)
    assert seg in msg and f"at byte {victim.position}" in msg and "crc" in msg.lower()
    skipped = spark.read.format("kafka-segments").option("failOnDataLoss", "false").load(bad)
    rows = skipped.count()
    total = spark.read.format("kafka-segments").load(os.path.join(data_dir, "orders-1")).count()
    before_bad = sum(len(x) for x in batches[:3])
    assert total - sum(len(x) for x in batches) + before_bad == rows
    # badRecordsPath: the same skipping, and a report per skipped range the job can read back
    reports = str(tmp_path / "reports")
    reported = spark.read.format("kafka-segments").option("badRecordsPath", reports).load(bad)
    assert reported.count() == rows
    (rep,) = [r.asDict() for r in spark.read.json(reports).collect()]
    assert (rep["path"], rep["topic"], rep["partition"]) == (path, "orders", 1)
    assert (rep["skippedFrom"], rep["skippedTo"], rep["baseOffset"]) == (
        victim.position, os.path.getsize(path), victim.base_offset)
    assert rep["errorClass"] == "CrcMismatchError" and seg in rep["error"]


def test_a_given_schema_selects_columns(spark, data_dir):
    full = spark_table(spark.read.format("kafka-segments").options(includeHeaders="true", pushdown="false")
                       .load(data_dir))
    df = (spark.read.format("kafka-segments").schema("offset long, value binary, topic string, partition int, "
                                                     "headers array<struct<key: string, value: binary>>")
          .option("pushdown", "false").load(data_dir))
    assert df.columns == ["offset", "value", "topic", "partition", "headers"]
    got = spark_table(df)
    assert got.num_rows == full.num_rows
    for name in df.columns:
        assert got[name].to_pylist() == full[name].to_pylist(), name
    for bad, word in (("offset long, nope binary", "unknown column"), ("offset int", "wrong type")):
        with pytest.raises(Exception, match=word):
            spark.read.format("kafka-segments").schema(bad).load(data_dir).count()


def test_decode_batches_over_binary_column(spark, data_dir):
    import kbatch.spark as ks

    seg = sorted(f for f in os.listdir(os.path.join(data_dir, "legacy-0")) if f.endswith(".log"))[0]
    data = open(os.path.join(data_dir, "legacy-0", seg), "rb").read()
    rows = [(bytes(b.raw),) for b in kbatch.iter_batches(data)]
    df = spark.createDataFrame(rows, "raw binary")
    out = ks.decode_batches(df, "raw", topic="legacy", partition=0)
    expect = kbatch.decode_columns(data, "legacy", 0)
    _same(spark_table(out), _sorted(expect))


def test_timestamp_report(spark, data_dir):
    import kbatch.spark as ks

    before, after = 7 * 86_400_000, 3_600_000
    rep = {(r["topic"], r["partition"]): r for r in ks.timestamp_report(data_dir, before, after, NOW, spark).collect()}
    local = local_table(data_dir, include_headers=False)
    for (topic, part), r in rep.items():
        t = local.filter(pc.and_(pc.equal(local["topic"], topic), pc.equal(local["partition"], part)))
        ts = A.timestamps_ms(t["timestamp"])
        off = t["offset"].to_numpy()
        has = ts != kbatch.NO_TIMESTAMP_EXTENDED
        old = has & (ts < NOW - before)
        new = has & (ts > NOW + after)
        assert r["records"] == t.num_rows
        assert (r["tooOld"], r["tooNew"]) == (int(old.sum()), int(new.sum()))
        assert r["firstTooOldOffset"] == (int(off[old].min()) if old.any() else None)
        assert r["firstTooNewOffset"] == (int(off[new].min()) if new.any() else None)
    assert rep[("orders", 0)]["tooNew"] > 0 and rep[("orders", 0)]["tooOld"] > 0


def test_offsets_for_times_on_executors(spark, data_dir):
    import kbatch.spark as ks

    local = local_table(data_dir, include_headers=False)
    for target in (NOW - 12 * 3_600_000, -(10**12), NOW + 10 * 86_400_000):
        got = {(r["topic"], r["partition"]): (r["offset"], r["timestamp"])
               for r in ks.offsets_for_times(data_dir, target, spark).collect()}
        for (topic, part), (o, t) in got.items():
            tt = local.filter(pc.and_(pc.equal(local["topic"], topic), pc.equal(local["partition"], part)))
            ts = A.timestamps_ms(tt["timestamp"])
            off = tt["offset"].to_numpy()
            ok = (ts >= target) & (ts != kbatch.NO_TIMESTAMP_EXTENDED)
            if not ok.any():
                assert (o, t) == (None, None)
            else:
                i = int(np.argmin(np.where(ok, off, np.iinfo(np.int64).max)))
                assert (o, t) == (int(off[i]), int(ts[i]))
