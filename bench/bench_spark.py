"""Spark read paths and column decoding, side by side in one session / one process.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_spark.py --benchmark-only -q \
        --benchmark-group-by=group --benchmark-columns=min,median,rounds

Data (modest, this box is small): KBATCH_BENCH_RECORDS records (default 200,000) in 2 partitions
of uncompressed v2 batches of 200 records, 16-byte keys, 100-byte values, one header on every
10th record. Every bench checks its result against decode_columns before timing.

Groups:
  spark-read      rows through the kafka-segments data source vs Spark reading the same rows
                  from Parquet vs binaryFile + mapInArrow decoding with aiokafka
  decode          decode_columns alone vs aiokafka's record objects, MB/s of segment bytes
"""
import os
import sys

import pyarrow as pa
import pytest

import kbatch
from kbatch import BatchBuilder

pytest.importorskip("pyspark.sql.datasource")
aiokafka_records = pytest.importorskip("aiokafka.record.memory_records")

N = int(os.environ.get("KBATCH_BENCH_RECORDS", "200000"))
PER_BATCH = 200
FOUR_COLUMNS = "key binary, value binary, offset long, timestamp timestamp"
NOW = 1_750_000_000_000


@pytest.fixture(scope="session")
def segdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-segments")
    per_part = N // 2
    for p in range(2):
        d = root / f"bench-{p}"
        d.mkdir()
        out = bytearray()
        for base in range(0, per_part, PER_BATCH):
            b = BatchBuilder(base_offset=base, timestamp_extended=False)
            for i in range(base, min(base + PER_BATCH, per_part)):
                b.append(NOW + i, b"key-%012d" % i, (b"%08d" % i) * 12 + b"abcd",
                         headers=[("h", b"x")] if i % 10 == 0 else ())
            out += b.build()
        (d / ("0" * 20 + ".log")).write_bytes(bytes(out))
    return str(root)


@pytest.fixture(scope="session")
def spark(segdir):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    here = os.path.dirname(os.path.abspath(__file__))  # workers import this module for mapInArrow
    os.environ["PYTHONPATH"] = os.pathsep.join([here, os.path.join(os.path.dirname(here), "src"),
                                                os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", os.environ.get("KBATCH_BENCH_DRIVER_MEMORY", "4g"))  # binaryFile holds whole files
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import kbatch.spark as ks

    ks.register(s)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def parquet_path(spark, segdir, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("bench-parquet") / "rows.parquet")
    spark.read.format("kafka-segments").load(segdir).write.parquet(path)
    return path


def _aiokafka_decode(batches):
    """mapInArrow body: raw segment files -> (key, value, offset, timestamp) via aiokafka objects."""
    from aiokafka.record.memory_records import MemoryRecords

    for rb in batches:
        for content in rb.column("content").to_pylist():
            mr = MemoryRecords(content)
            keys, values, offsets, tss = [], [], [], []
            while True:
                batch = mr.next_batch()
                if batch is None:
                    break
                for r in batch:
                    keys.append(r.key)
                    values.append(r.value)
                    offsets.append(r.offset)
                    tss.append(r.timestamp * 1000)
                if len(offsets) >= 32768:
                    yield _rows(keys, values, offsets, tss)
                    keys, values, offsets, tss = [], [], [], []
            if offsets:
                yield _rows(keys, values, offsets, tss)


def _rows(keys, values, offsets, tss):
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(offsets, pa.int64()),
         pa.array(tss, pa.timestamp("us", tz="UTC"))], names=["key", "value", "offset", "timestamp"])


def _agg(df):
    from pyspark.sql import functions as F

    r = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("v"), F.sum("offset").alias("o"),
               F.max("timestamp").alias("t")).collect()[0]
    return r["n"], r["v"], r["o"], r["t"]


def _expected(segdir):
    n = v = o = 0
    for p in range(2):
        data = open(os.path.join(segdir, f"bench-{p}", "0" * 20 + ".log"), "rb").read()
        t = kbatch.decode_columns(data, "bench", p, include_headers=False)
        n += t.num_rows
        v += sum(len(x) for x in t["value"].to_pylist())
        o += sum(t["offset"].to_pylist())
    return n, v, o


@pytest.mark.benchmark(group="spark-read")
def test_read_kafka_segments(benchmark, spark, segdir):
    df = spark.read.format("kafka-segments").load(segdir)
    assert _agg(df)[:3] == _expected(segdir)
    benchmark.pedantic(lambda: _agg(df), rounds=3, iterations=1)
    benchmark.extra_info["rows"] = N


@pytest.mark.benchmark(group="spark-read")
def test_read_kafka_segments_4_columns(benchmark, spark, segdir):
    """The columns the aggregate and the aiokafka path use, selected with a schema (Spark does not
    prune a Python data source's columns; Parquet's reader prunes by itself)."""
    df = spark.read.format("kafka-segments").schema(FOUR_COLUMNS).load(segdir)
    assert _agg(df)[:3] == _expected(segdir)
    benchmark.pedantic(lambda: _agg(df), rounds=3, iterations=1)
    benchmark.extra_info["rows"] = N


@pytest.mark.benchmark(group="spark-read")
def test_read_parquet_same_rows(benchmark, spark, segdir, parquet_path):
    df = spark.read.parquet(parquet_path)
    assert _agg(df)[:3] == _expected(segdir)
    benchmark.pedantic(lambda: _agg(df), rounds=3, iterations=1)
    benchmark.extra_info["rows"] = N


@pytest.mark.benchmark(group="spark-read")
def test_read_binaryfile_mapinarrow_aiokafka(benchmark, spark, segdir):
    df = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").option("pathGlobFilter", "*.log")
          .load(segdir).select("content")
          .mapInArrow(_aiokafka_decode, "key binary, value binary, offset bigint, timestamp timestamp"))
    assert _agg(df)[:3] == _expected(segdir)
    benchmark.pedantic(lambda: _agg(df), rounds=3, iterations=1)
    benchmark.extra_info["rows"] = N


@pytest.fixture(scope="session")
def segment_bytes(segdir):
    return open(os.path.join(segdir, "bench-0", "0" * 20 + ".log"), "rb").read()


@pytest.mark.benchmark(group="decode")
def test_decode_columns(benchmark, segment_bytes):
    t = kbatch.decode_columns(segment_bytes, "bench", 0)
    assert t.num_rows == N // 2
    benchmark(lambda: kbatch.decode_columns(segment_bytes, "bench", 0))
    benchmark.extra_info["MB"] = len(segment_bytes) / 1e6
    benchmark.extra_info["backend"] = kbatch.BACKEND


@pytest.mark.benchmark(group="decode")
def test_aiokafka_record_objects(benchmark, segment_bytes):
    from aiokafka.record.memory_records import MemoryRecords

    def run():
        mr = MemoryRecords(segment_bytes)
        out = []
        while True:
            b = mr.next_batch()
            if b is None:
                return out
            for r in b:
                out.append((r.offset, r.timestamp, r.key, r.value, r.headers))

    rows = run()
    t = kbatch.decode_columns(segment_bytes, "bench", 0)
    assert [r[3] for r in rows[:1000]] == t["value"].to_pylist()[:1000] and len(rows) == t.num_rows
    benchmark(run)
    benchmark.extra_info["MB"] = len(segment_bytes) / 1e6
