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
    """CPU seconds (user + system) of a process and all its descendants, from /proc."""
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
        total += (int(fields[11]) + int(fields[12])) / tick
    except OSError:
        pass
    while todo:
        for cpid, fields in children.get(todo.pop(), []):
            total += (int(fields[11]) + int(fields[12])) / tick
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
    sys.exit(main())
