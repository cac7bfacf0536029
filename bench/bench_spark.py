"""Spark read paths side by side in one session, and column decoding in one process.

Side by side (the issue 17 table), rounds interleaved, wall time and CPU seconds of the JVM and its
Python workers:

    PYTHONPATH=src .venv/bin/python bench/bench_spark.py --records 2000000 --rounds 5

paths: the JVM reader (`kafka-segments-jvm`), Spark's Parquet read of the same rows, the Python
source (`kafka-segments-python`, with a schema of the 4 columns the queries use), and binaryFile +
mapInArrow decoding with aiokafka; queries: count, an offset + timestamp filter, and an aggregate
that reads every value. Every path's answer is checked against decode_columns before timing.

pytest-benchmark (`python3 dev.py bench`), the same paths one query each plus decode alone:

    KBATCH_BENCH_RECORDS=2000000 PYTHONPATH=src .venv/bin/python -m pytest bench/bench_spark.py --benchmark-only

Data: KBATCH_BENCH_RECORDS records (default 2,000,000, the issues' scale: at 200,000 a Spark job's
fixed cost of about 0.1 s is most of every path's time) in 2 partitions of
one segment each with broker-identical .index/.timeindex (kbatch.rebuild_indexes), uncompressed v2
batches of 200 records, 16-byte keys, 100-byte values, one header on every 10th record.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import pyarrow as pa
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import kbatch  # noqa: E402
from kbatch import BatchBuilder  # noqa: E402

N = int(os.environ.get("KBATCH_BENCH_RECORDS", "2000000"))
PER_BATCH = 200
FOUR_COLUMNS = "key binary, value binary, offset long, timestamp timestamp"
NOW = 1_750_000_000_000
SEGMENT = "0" * 20 + ".log"
WORKER_BACKEND = {}  # the kbatch backend the Spark session's Python workers run (bench/conftest.py)


# ------------------------------------------------------------------------------------ data
def write_segments(root: str, n: int) -> str:
    per_part = n // 2
    for p in range(2):
        d = os.path.join(root, f"bench-{p}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, SEGMENT), "wb") as f:
            for base in range(0, per_part, PER_BATCH):
                b = BatchBuilder(base_offset=base, timestamp_extended=False)
                for i in range(base, min(base + PER_BATCH, per_part)):
                    b.append(NOW + i, b"key-%012d" % i, (b"%08d" % i) * 12 + b"abcd",
                             headers=[("h", b"x")] if i % 10 == 0 else ())
                f.write(b.build())
        kbatch.rebuild_indexes(d)
    return root


def filter_bounds(n: int):
    """The filter query's offset range and timestamp bound: a tenth of each partition."""
    per = n // 2
    return int(per * 0.6), int(per * 0.7), NOW + int(per * 0.65)


def expected(root: str, n: int) -> dict:
    """Each query's answer, from decode_columns."""
    lo, hi, ts = filter_bounds(n)
    out = {"count": 0, "filter": [0, 0], "values": [0, 0, 0, 0]}
    for p in range(2):
        t = kbatch.decode_columns(open(os.path.join(root, f"bench-{p}", SEGMENT), "rb").read(), "bench", p,
                                  include_headers=False)
        off = t["offset"].to_numpy()
        tsm = t["timestamp"].cast(pa.int64()).to_numpy() // 1000
        lens = pa.compute.binary_length(t["value"]).to_numpy()
        out["count"] += t.num_rows
        sel = (off >= lo) & (off < hi) & (tsm >= ts)
        out["filter"][0] += int(sel.sum())
        out["filter"][1] += int(off[sel].sum())
        out["values"][0] += t.num_rows
        out["values"][1] += int(lens.sum())
        out["values"][2] += int(off.sum())
        out["values"][3] = max(out["values"][3], int(tsm.max()))
    return out


# ------------------------------------------------------------------------------------ Spark
def session(driver_memory: str = "4g"):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE, os.path.join(os.path.dirname(HERE), "src"),
                                                os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", driver_memory)  # binaryFile holds whole files
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import kbatch.spark as ks

    s.kbatch_reader = ks.register(s, pushdown=True)
    return s


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


def frames(spark, root: str, parquet: str) -> dict:
    """Each path as a function making its DataFrame (key, value, offset, timestamp). Every query
    gets a new DataFrame: Spark 4.3 keeps a Python source's pushed-down plan on the DataFrame and
    would reuse it for the next query on the same one (docs/spark.md, known issues)."""
    return {
        "JVM reader (kafka-segments-jvm)": lambda: spark.read.format("kafka-segments-jvm").load(root),
        "Spark Parquet, same rows": lambda: spark.read.parquet(parquet),
        "Python source, 4-column schema": lambda: (spark.read.format("kafka-segments-python").schema(FOUR_COLUMNS)
                                                   .load(root)),
        "binaryFile + mapInArrow + aiokafka": lambda: (
            spark.read.format("binaryFile").option("recursiveFileLookup", "true").option("pathGlobFilter", "*.log")
            .load(root).select("content")
            .mapInArrow(_aiokafka_decode, "key binary, value binary, offset bigint, timestamp timestamp")),
    }


def queries(n: int) -> dict:
    from pyspark.sql import functions as F

    lo, hi, ts = filter_bounds(n)

    def count(df):
        return df.count()

    def filtered(df):
        r = (df.where((F.col("offset") >= lo) & (F.col("offset") < hi) & (F.col("timestamp") >= F.timestamp_millis(
            F.lit(ts)))).agg(F.count("*").alias("n"), F.sum("offset").alias("o")).collect()[0])
        return [r["n"], r["o"]]

    def values(df):
        r = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("v"), F.sum("offset").alias("o"),
                   F.max("timestamp").alias("t")).collect()[0]
        return [r["n"], r["v"], r["o"], int(r["t"].timestamp() * 1000)]

    return {"count": count, "filter": filtered, "values": values}


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and all its descendants, from /proc; a descendant
    that exited and was reaped counts through its parent's cutime + cstime (else a Python worker
    ending between two readings would make the difference negative)."""
    tick = os.sysconf("SC_CLK_TCK")
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append((int(p), fields))
            except OSError:
                continue
    total, todo = 0.0, [pid]
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15]) / tick
    except OSError:
        pass
    while todo:
        for cpid, fields in children.get(todo.pop(), []):
            total += sum(int(x) for x in fields[11:15]) / tick
            todo.append(cpid)
    return total


def jvm_pid(spark) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def side_by_side(spark, root: str, parquet: str, n: int, rounds: int) -> list:
    """Interleaved rounds: for each query, every path once per round. Returns result rows."""
    exp = expected(root, n)
    dfs = frames(spark, root, parquet)
    qs = queries(n)
    pid = jvm_pid(spark)
    for qname, q in qs.items():  # check every answer first (also warms each path up)
        for pname, df in dfs.items():
            got = q(df())
            assert got == exp[qname], (qname, pname, got, exp[qname])
    times = {(q, p): [] for q in qs for p in dfs}
    for _ in range(rounds):
        for qname, q in qs.items():
            for pname, df in dfs.items():
                frame = df()
                c0, t0 = _tree_cpu(pid), time.perf_counter()
                q(frame)
                t1, c1 = time.perf_counter(), _tree_cpu(pid)
                times[(qname, pname)].append((t1 - t0, c1 - c0))
    out = []
    for qname in qs:
        for pname in dfs:
            walls = [w for w, _ in times[(qname, pname)]]
            cpus = [c for _, c in times[(qname, pname)]]
            out.append({"query": qname, "path": pname, "min": min(walls), "median": statistics.median(walls),
                        "cpu": statistics.median(cpus), "rows_per_s": n / min(walls)})
    return out


def table(rows: list, n: int) -> str:
    lines = [f"{n:,} rows, local[2]; wall min / median, CPU = JVM + Python workers (median); ratios are "
             "the other path's time / the JVM reader's (> 1: the JVM reader is faster)", "",
             "| query | path | min ms | median ms | rows/s (min) | CPU s | JVM reader vs it (wall, min) | (CPU) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = next(x for x in rows if x["query"] == r["query"] and x["path"].startswith("JVM"))
        lines.append(f"| {r['query']} | {r['path']} | {r['min'] * 1e3:,.0f} | {r['median'] * 1e3:,.0f} | "
                     f"{r['rows_per_s'] / 1e6:.1f} M | {r['cpu']:.2f} | {r['min'] / ref['min']:.2f}x | "
                     f"{r['cpu'] / max(ref['cpu'], 1e-9):.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to write the data (default: a temporary directory)")
    args = ap.parse_args(argv)
    tmp = args.dir or tempfile.mkdtemp(prefix="kbatch-bench-spark-")
    root = os.path.join(tmp, "segments")
    if not os.path.isdir(root):
        write_segments(root, args.records)
    spark = session()
    print(spark.kbatch_reader, flush=True)
    from conftest import worker_backend

    workers = worker_backend(spark)
    if workers != "cython":  # the Python paths' figures would be the pure twin's: refuse them
        print(f"Spark's Python workers run kbatch's {workers} backend, not cython: no figures", file=sys.stderr)
        return 1
    if not spark.kbatch_reader.is_jvm:
        print("the JVM reader is not live: nothing to compare", file=sys.stderr)
        return 1
    parquet = os.path.join(tmp, "rows.parquet")
    if not os.path.isdir(parquet):
        spark.read.format("kafka-segments-python").load(root).write.parquet(parquet)
    rows = side_by_side(spark, root, parquet, args.records, args.rounds)
    print(table(rows, args.records))
    spark.stop()
    return 0


# ------------------------------------------------------------------------------------ at scale (issue 30)
# A topic produced into a real Kafka 4.4.0 broker by librdkafka (confluent-kafka), then read by
# Spark's Kafka source from the broker and by the JVM reader from the broker's own log directory
# (live: up to the high watermark in replication-offset-checkpoint), beside Parquet of the same rows
# and the Python reader; queries and streaming as the issue lists them. The broker's directory and
# the Parquet copy are made once into a cache outside the repository:
#
#     PYTHONPATH=src .venv/bin/python bench/bench_spark.py scale                        # 1,000,000 rows
#     KBATCH_BENCH_SCALE_RECORDS=10000000 PYTHONPATH=src .venv/bin/python bench/bench_spark.py scale
SCALE_TOPIC = "scale"
SCALE_PARTITIONS = 8
SCALE_KEYS = 200_000
SCALE_PER_BATCH = 1000
SCALE_T0 = 1_760_000_000_000
COUNTRIES = ("DE", "FR", "US", "BR", "IN", "JP", "NG", "CA", "AU", "ES", "IT", "MX")


def scale_records() -> int:
    return int(os.environ.get("KBATCH_BENCH_SCALE_RECORDS", "1000000"))


def scale_cache(n: int) -> str:
    base = os.environ.get("KBATCH_BENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kbatch",
                                                                "bench-spark")
    return os.path.join(base, f"scale-{n}-{SCALE_PARTITIONS}p")


def scale_key(i: int) -> bytes:
    return b"user-%06d" % ((i * 7919) % SCALE_KEYS)


def scale_value(i: int) -> bytes:
    """JSON-like, 180-230 bytes: what an order event looks like."""
    return (b'{"id":%d,"user":"user-%06d","country":"%s","amount":%d.%02d,"items":%d,"status":"%s",'
            b'"note":"%s"}' % (i, (i * 7919) % SCALE_KEYS, COUNTRIES[i % len(COUNTRIES)].encode(), i % 997, i % 100,
                               1 + i % 9, (b"paid", b"shipped", b"open")[i % 3], b"x" * (40 + i % 50)))


def scale_broker(n: int):
    """The broker over the cached work directory, started; the topic produced into it the first time."""
    import json as _json

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    from support.kafka_broker import KafkaBroker, kafka_dist

    work = os.path.join(scale_cache(n), "broker")
    broker = KafkaBroker(kafka_dist("4.4.0"), work, config={"log.segment.bytes": str(1 << 30)})
    broker.start()
    stamp = os.path.join(scale_cache(n), "produced.json")
    if not os.path.exists(stamp):
        t0 = time.perf_counter()
        produce_scale(broker.bootstrap, n)
        with open(stamp, "w") as f:
            _json.dump({"records": n, "seconds": time.perf_counter() - t0}, f)
    return broker


def produce_scale(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(SCALE_TOPIC, SCALE_PARTITIONS, 1)])[SCALE_TOPIC].result(120)
    # runs of 1000 records per partition, batch.num.messages 1000: batches of up to 1000 records
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "batch.num.messages": SCALE_PER_BATCH,
                  "batch.size": 4 << 20, "compression.type": "none", "acks": 1, "enable.idempotence": False,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    errors = []

    def done(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i in range(n):
        part = (i // SCALE_PER_BATCH) % SCALE_PARTITIONS
        while True:
            try:
                p.produce(SCALE_TOPIC, scale_value(i), scale_key(i), partition=part, timestamp=SCALE_T0 + i,
                          on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(1800)
    assert left == 0 and not errors, (left, errors[:3])


def scale_frames(spark, broker, parquet: str) -> dict:
    kafka_opts = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": SCALE_TOPIC,
                  "startingOffsets": "earliest", "endingOffsets": "latest"}
    log_dir = str(broker.log_dir)
    return {
        "JVM reader (kafka-segments-jvm)": lambda: (spark.read.format("kafka-segments-jvm")
                                                    .option("topics", SCALE_TOPIC).load(log_dir)),
        "Spark Kafka source (broker)": lambda: spark.read.format("kafka").options(**kafka_opts).load(),
        "Spark Parquet, same rows": lambda: spark.read.parquet(parquet),
        "Python reader (kafka-segments-python)": lambda: (spark.read.format("kafka-segments-python")
                                                          .option("topics", SCALE_TOPIC).load(log_dir)),
    }


def scale_queries(n: int) -> dict:
    from pyspark.sql import functions as F

    lo = SCALE_T0 + int(n * 0.45)
    hi = lo + n // 10

    def count(df):
        return df.count()

    def ts_filter(df):  # a tenth of the rows by time
        r = (df.where((F.col("timestamp") >= F.timestamp_millis(F.lit(lo)))
                      & (F.col("timestamp") < F.timestamp_millis(F.lit(hi))))
             .agg(F.count("*").alias("n"), F.sum("offset").alias("o")).collect()[0])
        return [r["n"], r["o"]]

    def value_lengths(df):
        return df.agg(F.sum(F.length("value"))).collect()[0][0]

    def json_field(df):
        r = (df.select(F.get_json_object(F.col("value").cast("string"), "$.country").alias("c"))
             .groupBy("c").count().collect())
        return sorted((x["c"], x["count"]) for x in r)

    def key_top3(df):
        r = df.groupBy("key").count().orderBy(F.desc("count"), "key").limit(3).collect()
        return [(bytes(x["key"]), x["count"]) for x in r]

    return {"count": count, "filter 10% by time": ts_filter, "sum(length(value))": value_lengths,
            "get_json_object": json_field, "groupBy(key) top 3": key_top3}


def scale_streaming(spark, frames_by_path: dict, tmp: str, broker, rounds: int) -> list:
    """availableNow into a Parquet sink from the start of the topic: records/s, kafka-segments vs kafka."""
    import shutil

    out = []
    streams = {
        "JVM reader (kafka-segments)": lambda: (spark.readStream.format("kafka-segments")
                                                .option("topics", SCALE_TOPIC).load(str(broker.log_dir))),
        "Spark Kafka source (broker)": lambda: (spark.readStream.format("kafka")
                                                .option("kafka.bootstrap.servers", broker.bootstrap)
                                                .option("subscribe", SCALE_TOPIC)
                                                .option("startingOffsets", "earliest").load()),
    }
    pid = jvm_pid(spark)
    times = {k: [] for k in streams}
    counts = {}
    for r in range(rounds):
        for name, make in streams.items():
            d = os.path.join(tmp, f"stream-{r}-{len(name)}")
            shutil.rmtree(d, ignore_errors=True)
            c0, b0, t0 = _tree_cpu(pid), _tree_cpu(broker.proc.pid), time.perf_counter()
            q = (make().select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
                 .writeStream.format("parquet").option("checkpointLocation", d + "/ck").option("path", d + "/sink")
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            t1, c1, b1 = time.perf_counter(), _tree_cpu(pid), _tree_cpu(broker.proc.pid)
            assert q.exception() is None, q.exception()
            counts[name] = spark.read.parquet(d + "/sink").count()
            times[name].append((t1 - t0, c1 - c0, b1 - b0))
            shutil.rmtree(d, ignore_errors=True)
    assert len(set(counts.values())) == 1, counts
    for name, ts in times.items():
        w = min(x[0] for x in ts)
        out.append({"path": name, "min": w, "cpu": statistics.median(x[1] for x in ts),
                    "broker_cpu": statistics.median(x[2] for x in ts), "records": counts[name]})
    return out


def scale_main(argv) -> int:
    import shutil

    ap = argparse.ArgumentParser(prog="bench_spark.py scale")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stream-rounds", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma-separated path words to leave out (e.g. Python)")
    args = ap.parse_args(argv)
    n = scale_records()
    load0 = os.getloadavg()[0]
    os.makedirs(scale_cache(n), exist_ok=True)
    broker = scale_broker(n)
    try:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
        import spark_jars

        jars = spark_jars.spark_kafka_jars()
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(map(str, jars))} pyspark-shell"
        spark = session(os.environ.get("KBATCH_BENCH_DRIVER_MEMORY", "4g"))
        if not spark.kbatch_reader.is_jvm:
            print(f"the JVM reader is not live: {spark.kbatch_reader.reason}", file=sys.stderr)
            return 1
        # the broker checkpoints its high watermark every 5 s: the live directory is read up to it
        time.sleep(6)
        parquet = os.path.join(scale_cache(n), "rows.parquet")
        if not os.path.isdir(parquet):
            (spark.read.format("kafka-segments-jvm").option("topics", SCALE_TOPIC).load(str(broker.log_dir))
             .select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
             .write.option("compression", "snappy").parquet(parquet + ".tmp"))
            os.rename(parquet + ".tmp", parquet)
        skip = [w for w in args.skip.split(",") if w]
        dfs = {k: v for k, v in scale_frames(spark, broker, parquet).items() if not any(w in k for w in skip)}
        qs = scale_queries(n)
        pid, bpid = jvm_pid(spark), broker.proc.pid
        answers = {}
        for qname, q in qs.items():  # every answer first: the Kafka source's is the reference
            for pname, df in dfs.items():
                answers[(qname, pname)] = q(df())
            ref = answers[(qname, "Spark Kafka source (broker)")]
            for pname in dfs:
                assert answers[(qname, pname)] == ref, (qname, pname, answers[(qname, pname)], ref)
        assert answers[("count", "Spark Kafka source (broker)")] == n
        print("answers equal on every path", flush=True)
        times = {(q, p): [] for q in qs for p in dfs}
        for _ in range(args.rounds):
            for qname, q in qs.items():
                for pname, df in dfs.items():
                    frame = df()
                    c0, b0, t0 = _tree_cpu(pid), _tree_cpu(bpid), time.perf_counter()
                    q(frame)
                    t1, c1, b1 = time.perf_counter(), _tree_cpu(pid), _tree_cpu(bpid)
                    times[(qname, pname)].append((t1 - t0, c1 - c0, b1 - b0))
        tmp = tempfile.mkdtemp(prefix="kbatch-bench-stream-")
        streaming = scale_streaming(spark, dfs, tmp, broker, args.stream_rounds)
        shutil.rmtree(tmp, ignore_errors=True)
        text = scale_table(times, streaming, n, args.rounds)
        print(text)
        spark.stop()
        write_scale_results(text, times, streaming, n, load0)
    finally:
        broker.stop()
    return 0


SCALE_TARGETS = [  # issue 30: (question, peer path, query or None for every query but count, threshold)
    (">= 10x Spark's Kafka source (same rows, same cores)", "Spark Kafka source (broker)", None, 10.0),
    (">= 1.0x Parquet on every query but count", "Spark Parquet, same rows", "all but count", 1.0),
    ("count >= 0.5x Parquet", "Spark Parquet, same rows", "count", 0.5),
]


def write_scale_results(text: str, times: dict, streaming: list, n: int, load0: float) -> None:
    """bench/results-spark-scale.md: this run's tables, the issue's targets against them, and the
    prose of bench/notes/spark-scale.md; the "At scale" section of results-spark.md and README.md
    is rewritten from it (as bench/report.py writes it in a full run)."""
    import datetime

    import report

    jvm = "JVM reader (kafka-segments-jvm)"
    wall = {k: min(x[0] for x in v) for k, v in times.items()}
    cpu = {k: statistics.median(x[1] + (x[2] if "Kafka source" in k[1] else 0.0) for x in v)
           for k, v in times.items()}
    qs = list(dict.fromkeys(q for q, _ in times))
    rows = ["| target | query | peer time / JVM reader's time: wall (CPU) | met |", "|---|---|---|---|"]
    for question, peer, which, threshold in SCALE_TARGETS:
        for q in qs:
            if (which == "count") != (q == "count") and which is not None:
                continue
            if (q, peer) not in wall:
                continue
            r_w, r_c = wall[(q, peer)] / wall[(q, jvm)], cpu[(q, peer)] / max(cpu[(q, jvm)], 1e-9)
            rows.append(f"| {question} | {q} | {r_w:.2f}x ({r_c:.2f}x) | {'yes' if r_w >= threshold else '**no**'} |")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"Generated by `KBATCH_BENCH_SCALE_RECORDS={n} bench/bench_spark.py scale` (commit {report.commit()}, "
            f"{now}) from one run. Machine: {report.machine()} Load average {load0:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end (shared with other work: read the ratios and the CPU "
            "seconds). Every path's answer to every query was checked equal to Spark's Kafka source's, and "
            f"count to the {n:,} records produced, before anything was timed.")
    notes = os.path.join(HERE, "notes", "spark-scale.md")
    body = ["# Spark at scale: the JVM reader, Spark's Kafka source, Parquet and the Python reader", "", head, "",
            text, "", "### Targets (issue 30)", "", *rows, ""]
    if os.path.exists(notes):
        body += ["### Notes", "", open(notes, encoding="utf-8").read().strip(), ""]
    with open(os.path.join(HERE, "results-spark-scale.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(body))
    # the "At scale" section that closes README.md and results-spark.md, from the file just written
    for name in ("README.md", "results-spark.md"):
        path = os.path.join(HERE, name)
        if not os.path.exists(path):
            continue
        before, found, _ = open(path, encoding="utf-8").read().partition("## At scale: ")
        if found:
            with open(path, "w", encoding="utf-8") as f:
                f.write(before + "\n".join(report.separate_run("spark")).rstrip() + "\n")


def scale_table(times: dict, streaming: list, n: int, rounds: int) -> str:
    jvm = "JVM reader (kafka-segments-jvm)"
    lines = [f"{n:,} rows in {SCALE_PARTITIONS} partitions, local[2], min of {rounds} interleaved rounds; CPU s = "
             "Spark's JVM + its Python workers (median), broker CPU s beside it for the Kafka source; ratio = "
             "the path's time / the JVM reader's (> 1: the JVM reader is faster)", "",
             "| query | path | wall min ms | CPU s | broker CPU s | JVM reader vs it (wall) | (CPU) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    queries_ = list(dict.fromkeys(q for q, _ in times))
    for q in queries_:
        ref = times[(q, jvm)]
        ref_w, ref_c = min(x[0] for x in ref), statistics.median(x[1] for x in ref)
        for (qq, p), ts in times.items():
            if qq != q:
                continue
            w, c, b = min(x[0] for x in ts), statistics.median(x[1] for x in ts), statistics.median(x[2] for x in ts)
            if "Kafka source" not in p:  # the broker works only for the Kafka source (else it idles)
                b = 0.0
            lines.append(f"| {q} | {p} | {w * 1e3:,.0f} | {c:.2f} | {b:.2f} | {w / ref_w:.2f}x | "
                         f"{(c + b) / max(ref_c, 1e-9):.2f}x |")
    lines += ["", "| streaming, availableNow -> Parquet | wall s | records/s | CPU s | broker CPU s |",
              "|---|---:|---:|---:|---:|"]
    for r in streaming:
        lines.append(f"| {r['path']} | {r['min']:.1f} | {r['records'] / r['min'] / 1e6:.2f} M | {r['cpu']:.1f} | "
                     f"{r['broker_cpu']:.1f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ pytest-benchmark
@pytest.fixture(scope="session")
def segdir(tmp_path_factory):
    return write_segments(str(tmp_path_factory.mktemp("bench-segments")), N)


@pytest.fixture(scope="session")
def spark(segdir):
    pytest.importorskip("pyspark.sql.datasource")
    pytest.importorskip("aiokafka.record.memory_records")
    s = session(os.environ.get("KBATCH_BENCH_DRIVER_MEMORY", "4g"))
    from conftest import worker_backend

    WORKER_BACKEND["spark"] = worker_backend(s)  # recorded with each figure; a pure-backend one is refused
    yield s
    s.stop()


@pytest.fixture(scope="session")
def spark_paths(spark, segdir, tmp_path_factory):
    if not spark.kbatch_reader.is_jvm:
        pytest.skip(f"the JVM reader is not live: {spark.kbatch_reader.reason}")
    parquet = str(tmp_path_factory.mktemp("bench-parquet") / "rows.parquet")
    spark.read.format("kafka-segments-python").load(segdir).write.parquet(parquet)
    return frames(spark, segdir, parquet), expected(segdir, N), queries(N)


@pytest.mark.parametrize("query", ["count", "filter", "values"])
@pytest.mark.parametrize("impl", ["kbatch JVM reader", "kbatch Python source", "Parquet", "aiokafka binaryFile"])
def test_spark_read(benchmark, spark, spark_paths, impl, query):
    """One query through one path: wall time by pytest-benchmark, CPU seconds (the JVM and its Python
    workers, from /proc) per round beside it."""
    dfs, exp, qs = spark_paths
    word = {"kbatch JVM reader": "JVM", "kbatch Python source": "Python", "Parquet": "Parquet",
            "aiokafka binaryFile": "binaryFile"}[impl]  # each path's frame, by a word of its name
    df = [d for name, d in dfs.items() if word in name.replace(",", " ").split()][0]
    assert qs[query](df()) == exp[query]
    pid, cpus = jvm_pid(spark), []

    def run():
        frame = df()
        c0 = _tree_cpu(pid)
        qs[query](frame)
        cpus.append(_tree_cpu(pid) - c0)

    benchmark.group = f"spark-read {query}"
    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["records"] = N
    benchmark.extra_info["cpu_s_median"] = statistics.median(cpus)
    benchmark.extra_info["worker_backend"] = WORKER_BACKEND["spark"]


@pytest.fixture(scope="session")
def segment_bytes(segdir):
    return open(os.path.join(segdir, "bench-0", SEGMENT), "rb").read()


@pytest.mark.benchmark(group="decode")
def test_decode_columns(benchmark, segment_bytes):
    t = kbatch.decode_columns(segment_bytes, "bench", 0)
    assert t.num_rows == N // 2
    benchmark(lambda: kbatch.decode_columns(segment_bytes, "bench", 0))
    benchmark.extra_info["bytes"] = len(segment_bytes)
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
    benchmark.extra_info["bytes"] = len(segment_bytes)


if __name__ == "__main__":
    sys.exit(scale_main(sys.argv[2:]) if sys.argv[1:2] == ["scale"] else main())
