"""Columns both ways (issue 18), peers side by side in one process. Results: bench/results-columns.md.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_columns.py --benchmark-only \
        --benchmark-group-by=group --benchmark-columns=min,median,rounds

Workload as bench_codec: v2 batches of 1000 records, 12-byte keys, 100-byte values; one header
on every 10th record in the decode and append groups (headers on costs what they carry).
  encode       Arrow table -> batches: kbatch.encode_columns vs aiokafka's and kafka-python's
               builders and BatchBuilder (build_batch, one kernel call a batch), per codec, every
               codec at Kafka's default level (the peers' gzip and aiokafka's lz4 set to it) and
               the output bytes recorded (KBATCH_BENCH_BATCHES batches, default 85, ~10 MB)
  encode large the same, uncompressed, over a table of KBATCH_BENCH_LARGE_BATCHES batches (default
               600, ~74 MB out: new memory each call, faulted in), vs aiokafka's builder
  decode       decode_columns on one thread (CRC checked, headers on) vs aiokafka record objects
               (CRC checked, key/value/timestamp/headers read) vs a single-thread memory copy of
               the same bytes into a buffer that exists (numpy.copyto) and into a new one
               (numpy.copy), on a segment larger than the caches (KBATCH_BENCH_SEGMENT_MB, default
               128); and decode_columns on its threads (use_threads=True, one a CPU) beside them
  append       Log.append_table of a table vs Log.append of the same batches already built vs
               plain file writes of those bytes (none, lz4, zstd; KBATCH_BENCH_APPEND_BATCHES
               batches of 1000 records, default 300)
  spark-write  df.write.format("kafka-segments") vs df.write.parquet of the same rows
               (KBATCH_BENCH_SPARK_ROWS, default 200,000, local[2]); only with pyspark
Every bench checks its result against a reference first. bench/conftest.py prints each group's
peer/kbatch ratios (> 1: kbatch is faster) at the end.
"""
import importlib
import os
import shutil
import sys

import numpy as np
import pyarrow as pa
import pytest

import kbatch
from kbatch import Compression
from kbatch.columns.decode import HEADER_TYPE

aiokafka_mr = pytest.importorskip("aiokafka.record.memory_records")
aiokafka_dr = importlib.import_module("aiokafka.record.default_records")
kafka_dr = pytest.importorskip("kafka.record.default_records")

N_RECORDS = 1000
N_BATCHES = int(os.environ.get("KBATCH_BENCH_BATCHES", "85"))
SEGMENT_MB = int(os.environ.get("KBATCH_BENCH_SEGMENT_MB", "128"))
SPARK_ROWS = int(os.environ.get("KBATCH_BENCH_SPARK_ROWS", "200000"))
BASE_TS = 1_700_000_000_000
CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


def records(n_batches, headers=False):
    return [[(BASE_TS + b * N_RECORDS + i, b"key-%08d" % i, bytes([(b + i) % 251]) * 100,
              [("trace", b"%08d" % i)] if headers and i % 10 == 0 else [])
             for i in range(N_RECORDS)] for b in range(n_batches)]


def as_table(recs) -> pa.Table:
    flat = [r for batch in recs for r in batch]
    return pa.table({
        "key": pa.array([r[1] for r in flat], pa.binary()),
        "value": pa.array([r[2] for r in flat], pa.binary()),
        "timestamp": pa.array([r[0] for r in flat], pa.timestamp("ms", tz="UTC")),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[3]] or None for r in flat], HEADER_TYPE),
    })


RECORDS = records(N_BATCHES)
TABLE = as_table(RECORDS)


# ------------------------------------------------------------------------------------ encode
def kbatch_encode_columns(codec):
    return kbatch.encode_columns(TABLE, records_per_batch=N_RECORDS, timestamp_extended=False, compression=codec)


def kbatch_build_batch(codec):
    return [kbatch.build_batch([r[:3] for r in recs], timestamp_extended=False, compression=codec)
            for recs in RECORDS]


def aiokafka_build(codec):
    out = []
    for recs in RECORDS:
        bb = aiokafka_dr.DefaultRecordBatchBuilder(2, int(codec), 0, -1, -1, -1, 1 << 22)
        append = bb.append
        for i, (ts, k, v, _h) in enumerate(recs):
            append(i, ts, k, v, [])
        out.append(bytes(bb.build()))
    return out


def kafka_python_build(codec):
    out = []
    for recs in RECORDS:
        bb = kafka_dr.DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 22)
        append = bb.append
        for i, (ts, k, v, _h) in enumerate(recs):
            append(i, ts, k, v, [])
        out.append(bytes(bb.build()))
    return out


def _rebased(batches):
    """Peers build every batch at base offset 0 (as a producer does); give them their offsets."""
    return b"".join(int(b * N_RECORDS).to_bytes(8, "big") + bytes(x)[8:] for b, x in enumerate(batches))


@pytest.fixture
def kafka_levels(monkeypatch):
    """The peers' codecs at Kafka's default levels, kbatch's defaults: lz4 level 9 is lz4's fast
    compressor (aiokafka writes its high-compression level 9 unless told), gzip level 6 (both peers
    write 9); zstd 3 and kafka-python's lz4 are the defaults already."""
    import aiokafka.codec as ac
    import kafka.codec as kc

    for mod in {sys.modules[aiokafka_dr.DefaultRecordBatchBuilder.__module__], aiokafka_dr}:
        monkeypatch.setattr(mod, "lz4_encode", lambda p: ac.lz4_encode(p, 0), raising=False)
        monkeypatch.setattr(mod, "gzip_encode", lambda p: ac.gzip_encode(p, 6), raising=False)
    monkeypatch.setattr(kafka_dr, "gzip_encode", lambda p: kc.gzip_encode(p, 6))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("impl", ["kbatch encode_columns", "kbatch build_batch", "aiokafka", "kafka-python"])
def test_encode(benchmark, impl, codec, kafka_levels):
    benchmark.group = f"encode {codec.name.lower()}"
    fn = {"kbatch encode_columns": kbatch_encode_columns, "kbatch build_batch": kbatch_build_batch,
          "aiokafka": aiokafka_build, "kafka-python": kafka_python_build}[impl]
    out = fn(codec)
    data = _rebased(out) if isinstance(out, list) else out
    if impl == "kafka-python":  # it writes partitionLeaderEpoch 0 where Kafka's producer writes -1
        data = b"".join(x[:12] + b"\xff\xff\xff\xff" + x[16:] for x in
                        (bytes(memoryview(data)[b.position:b.position + b.size_in_bytes])
                         for b in kbatch.iter_batches(data)))
    if codec == Compression.NONE:
        assert data == kbatch_encode_columns(codec)  # byte-identical batches
    got = kbatch.decode_columns(data, include_headers=False)
    assert got.num_rows == N_RECORDS * N_BATCHES
    assert got["value"].combine_chunks().equals(TABLE["value"].combine_chunks())
    assert got["offset"].to_pylist()[-1] == N_RECORDS * N_BATCHES - 1
    slow = impl == "kafka-python" or codec == Compression.GZIP
    benchmark.pedantic(fn, args=(codec,), rounds=3 if slow else 15, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update({"records": N_RECORDS * N_BATCHES, "bytes": len(data), "output bytes": len(data)})


LARGE_BATCHES = int(os.environ.get("KBATCH_BENCH_LARGE_BATCHES", "600"))


@pytest.fixture(scope="module")
def large():
    recs = records(LARGE_BATCHES)
    return recs, as_table(recs)


@pytest.mark.benchmark(group="encode none large")
@pytest.mark.parametrize("impl", ["kbatch encode_columns", "aiokafka"])
def test_encode_large(benchmark, large, impl):
    """encode_columns of a table whose output (~74 MB) is larger than the caches and than malloc's
    reuse threshold: each call's output is new memory, faulted in (issue 42)."""
    recs, table = large

    def kb():
        return kbatch.encode_columns(table, records_per_batch=N_RECORDS, timestamp_extended=False)

    def aio():
        out = []
        for batch in recs:
            bb = aiokafka_dr.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 22)
            for i, (ts, k, v, _h) in enumerate(batch):
                bb.append(i, ts, k, v, [])
            out.append(bytes(bb.build()))
        return out
    fn = kb if impl.startswith("kbatch") else aio
    data = fn()
    if impl == "aiokafka":
        assert _rebased(data) == kb()
    benchmark.pedantic(fn, rounds=7, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(records=LARGE_BATCHES * N_RECORDS, bytes=len(kb()))


# ------------------------------------------------------------------------------------ decode
@pytest.fixture(scope="module")
def segment():
    one = kbatch.build_batch(records(1, headers=True)[0], timestamp_extended=False)
    n = max(1, SEGMENT_MB * 1_000_000 // len(one))
    data = b"".join(int(b * N_RECORDS).to_bytes(8, "big") + one[8:] for b in range(n))
    return data, n * N_RECORDS


def kbatch_decode(data, use_threads=False):
    return kbatch.decode_columns(data, "t", 0, include_headers=True, verify_crc=True, use_threads=use_threads)


def aiokafka_objects(data):
    mr = aiokafka_mr.MemoryRecords(data)
    n = 0
    while True:
        b = mr.next_batch()
        if b is None:
            return n
        assert b.validate_crc()
        for r in b:
            r.key, r.value, r.timestamp, r.headers
            n += 1


@pytest.mark.benchmark(group="decode")
@pytest.mark.parametrize("impl", ["kbatch decode_columns", "kbatch decode_columns (threads)", "aiokafka objects",
                                  "memcpy into a buffer", "memcpy into a new buffer"])
def test_decode(benchmark, segment, impl):
    data, n = segment
    src = np.frombuffer(data, np.uint8)
    dst = np.empty_like(src)
    fn = {"kbatch decode_columns": lambda: kbatch_decode(data),
          "kbatch decode_columns (threads)": lambda: kbatch_decode(data, use_threads=True),
          "aiokafka objects": lambda: aiokafka_objects(data),
          "memcpy into a buffer": lambda: np.copyto(dst, src), "memcpy into a new buffer": lambda: src.copy()}[impl]
    if impl.startswith("kbatch decode_columns"):
        t = fn()
        assert t.num_rows == n and t["headers"].null_count == n - n // 10
        assert t["offset"].to_pylist()[-1] == n - 1
    elif impl == "aiokafka objects":
        assert fn() == n
    rounds = 3 if impl == "aiokafka objects" else 11
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(bytes=len(data), records=n)
    if impl == "kbatch decode_columns (threads)":
        from kbatch.columns.decode import _decode_pool

        pool = _decode_pool()
        benchmark.extra_info["threads"] = 1 if pool is None else pool[1] + 1  # the decode threads and the caller


# ------------------------------------------------------------------------------------ append
APPEND_CODECS = [Compression.NONE, Compression.LZ4, Compression.ZSTD]
APPEND_BATCHES = int(os.environ.get("KBATCH_BENCH_APPEND_BATCHES", "300"))


@pytest.mark.parametrize("codec", APPEND_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("impl", ["kbatch append_table", "kbatch append (batches built)", "plain file writes"])
def test_append(benchmark, tmp_path, impl, codec):
    """The appends alone: the Log is created before and closed after each timed round (creating
    and closing fsync index and checkpoint files, a fixed cost plain writes do not have)."""
    benchmark.group = f"append {codec.name.lower()}"
    recs = records(APPEND_BATCHES, headers=True)
    table = as_table(recs)
    batches = [kbatch.build_batch(r, timestamp_extended=False, compression=codec) for r in recs]
    cfg = kbatch.LogConfig(compression_type="producer")
    state = {"n": 0, "open": None}

    def setup():
        if state["open"] is not None:
            state["open"].close()
        state["n"] += 1
        d = str(tmp_path / f"r{state['n']}" / "t-0")
        if impl == "plain file writes":
            os.makedirs(d)
            state["open"] = open(os.path.join(d, "0" * 20 + ".log"), "wb", buffering=0)
        else:
            state["open"] = kbatch.Log.create(d, cfg, now_ms=0)
        return (state["open"],), {}

    def append_table(log):
        log.append_table(table, BASE_TS, compression=codec, records_per_batch=N_RECORDS)

    def append_batches(log):
        for b in batches:
            log.append(b, BASE_TS)

    def plain(f):
        for b in batches:
            f.write(b)

    fn = {"kbatch append_table": append_table, "kbatch append (batches built)": append_batches,
          "plain file writes": plain}[impl]
    args, _ = setup()
    fn(*args)
    args[0].close()
    state["open"] = None
    d = str(tmp_path / f"r{state['n']}" / "t-0")
    if impl != "plain file writes":
        assert kbatch.Log.open(d).end_offset() == APPEND_BATCHES * N_RECORDS
    want = b"".join(batches) if impl == "plain file writes" else _rebased(batches)
    assert open(os.path.join(d, "0" * 20 + ".log"), "rb").read() == want  # the same bytes on disk
    benchmark.pedantic(fn, setup=setup, rounds=5, iterations=1)
    if state["open"] is not None:
        state["open"].close()
    size = sum(len(b) for b in batches)
    benchmark.extra_info.update(records=APPEND_BATCHES * N_RECORDS, bytes=size, codec=codec.name)
    shutil.rmtree(tmp_path, ignore_errors=True)


# ------------------------------------------------------------------------------------ spark-write
@pytest.fixture(scope="module")
def spark():
    """bench_spark's session (one Spark session per run: its JVM and workers are set up once, with
    the JVM reader's jar and the bench directory on the workers' path; bench_spark stops it)."""
    pytest.importorskip("pyspark.sql.datasource")
    from bench_spark import session
    from conftest import worker_backend

    s = session(os.environ.get("KBATCH_BENCH_DRIVER_MEMORY", "4g"))
    s.kbatch_worker_backend = worker_backend(s)
    yield s


@pytest.fixture(scope="module")
def spark_rows(spark):
    n = SPARK_ROWS
    t = pa.table({"key": pa.array([b"key-%08d" % i for i in range(n)]),
                  "value": pa.array([bytes([i % 251]) * 100 for i in range(n)]),
                  "timestamp": pa.array(np.arange(n) + BASE_TS, pa.timestamp("ms", tz="UTC"))})
    return spark.createDataFrame(t).repartition(2).cache()


@pytest.mark.benchmark(group="spark-write")
@pytest.mark.parametrize("impl", ["kbatch kafka-segments", "parquet"])
def test_spark_write(benchmark, spark, spark_rows, tmp_path, impl):
    df = spark_rows
    assert df.count() == SPARK_ROWS
    runs = [0]

    def write():
        runs[0] += 1
        path = str(tmp_path / f"w{runs[0]}")
        if impl == "parquet":
            df.write.parquet(path)
        else:
            df.write.format("kafka-segments").mode("append").option("topic", "t").option("numPartitions", 2).save(path)
        return path

    path = write()
    if impl == "parquet":
        assert spark.read.parquet(path).count() == SPARK_ROWS
    else:
        assert spark.read.format("kafka-segments").load(path).count() == SPARK_ROWS
    benchmark.pedantic(write, rounds=3, iterations=1)
    benchmark.extra_info.update(records=SPARK_ROWS, worker_backend=spark.kbatch_worker_backend)
