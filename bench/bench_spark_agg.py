"""Issue 40 at 10 M rows: Spark aggregates answered from batch headers (the JVM reader's
`SupportsPushDownAggregates`) against Parquet, cold and warm, and key-only scans on two topics.

    KBATCH_BENCH_SCALE_RECORDS=10000000 PYTHONPATH=src .venv/bin/python bench/bench_spark_agg.py

Data: the `bench_spark.py scale` broker directory (made once into ~/.cache/kbatch/bench-spark/ or
KBATCH_BENCH_CACHE, reused), whose topic `scale` is produced there the first time, plus a second
topic `users` produced into the same broker the first time: 16-byte keys of 200,000 users, ~230 B
JSON values, a header on every tenth record, 8 partitions of 256 MiB segments (the issue's "other
topic"). Parquet (snappy) copies of both are made once beside them.

Cold = the JVM reader's remembered segment summaries dropped before the query (the JVM is warm:
every query ran once before timing); warm = remembered from the run before. Parquet's time is the
same query on its copy. Every answer is checked against the same query with pushdown disabled
(`pushDownAggregates=false`), and against Parquet's, before anything is timed. The table goes to
bench/results-spark-agg.md.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import bench_spark as bs  # noqa: E402

USERS_TOPIC = "users"
USERS_KEYS = 200_000
USERS_SEGMENT_BYTES = 256 << 20
PARTS = bs.SCALE_PARTITIONS


def users_key(i: int) -> bytes:
    return b"user-%011d" % ((i * 7919) % USERS_KEYS)  # 16 bytes


def users_value(i: int) -> bytes:
    """JSON, 200-260 bytes (~230 on average)."""
    return (b'{"id":%d,"user":"user-%011d","country":"%s","amount":%d.%02d,"items":%d,"status":"%s",'
            b'"note":"%s"}' % (i, (i * 7919) % USERS_KEYS, bs.COUNTRIES[i % len(bs.COUNTRIES)].encode(), i % 997,
                               i % 100, 1 + i % 9, (b"paid", b"shipped", b"open")[i % 3], b"y" * (85 + i % 60)))


def produce_users(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(USERS_TOPIC, PARTS, 1, config={"segment.bytes": str(USERS_SEGMENT_BYTES)})
    admin.create_topics([topic])[USERS_TOPIC].result(120)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "batch.num.messages": bs.SCALE_PER_BATCH,
                  "batch.size": 4 << 20, "compression.type": "none", "acks": 1, "enable.idempotence": False,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    errors = []

    def done(err, _msg):
        if err is not None:
            errors.append(str(err))

    header = [("trace", b"0123456789abcdef")]
    for i in range(n):
        part = (i // bs.SCALE_PER_BATCH) % PARTS
        while True:
            try:
                p.produce(USERS_TOPIC, users_value(i), users_key(i), partition=part, timestamp=bs.SCALE_T0 + i,
                          headers=header if i % 10 == 0 else None, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(1800)
    assert left == 0 and not errors, (left, errors[:3])


def broker_with_topics(n: int):
    """The scale broker (topic `scale` produced the first time), with `users` produced the first time."""
    broker = bs.scale_broker(n)
    stamp = os.path.join(bs.scale_cache(n), "users-produced.json")
    if not os.path.exists(stamp):
        t0 = time.perf_counter()
        produce_users(broker.bootstrap, n)
        with open(stamp, "w") as f:
            json.dump({"records": n, "seconds": time.perf_counter() - t0}, f)
    return broker


def parquet_copy(spark, log_dir: str, topic: str, n: int) -> str:
    path = os.path.join(bs.scale_cache(n), f"{topic}.parquet" if topic != bs.SCALE_TOPIC else "rows.parquet")
    if not os.path.isdir(path):
        (spark.read.format("kafka-segments-jvm").option("topics", topic).load(log_dir)
         .select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
         .write.option("compression", "snappy").parquet(path + ".tmp"))
        os.rename(path + ".tmp", path)
    return path


def queries() -> dict:
    """name -> (query, whether it is an aggregate the JVM reader answers from headers)."""
    from pyspark.sql import functions as F

    def count(df):
        return df.count()

    def by_partition(df):
        return sorted(tuple(r) for r in df.groupBy("partition").count().collect())

    def max_ts(df):
        return df.agg(F.max("timestamp")).collect()[0][0]

    def key_top3(df):
        r = df.groupBy("key").count().orderBy(F.desc("count"), "key").limit(3).collect()
        return [(bytes(x["key"]), x["count"]) for x in r]

    return {"count": (count, True), "count by partition": (by_partition, True),
            "max(timestamp)": (max_ts, True), "groupBy(key) top 3": (key_top3, False)}


def forget(spark) -> None:
    spark.sparkContext._jvm.kbatch.spark.SegmentSummaries.forget()


def pushed(df) -> bool:
    return "pushedAggregates" in df._jdf.queryExecution().executedPlan().toString() or \
        "LocalTableScan" in df._jdf.queryExecution().executedPlan().toString()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench_spark_agg.py")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data-only", action="store_true", help="produce the cached topics and stop")
    ap.add_argument("--key-scan", action="store_true",
                    help="what bounds a key-only scan: the key column alone into Spark's noop sink, and groupBy(key), "
                         "JVM reader (CRC on and off, offset only) vs Parquet, wall and JVM CPU seconds")
    args = ap.parse_args(argv)
    n = bs.scale_records()
    load0 = os.getloadavg()[0]
    os.makedirs(bs.scale_cache(n), exist_ok=True)
    broker = broker_with_topics(n)
    try:
        if args.data_only:
            return 0
        spark = bs.session(os.environ.get("KBATCH_BENCH_DRIVER_MEMORY", "3g"))
        spark.conf.set("spark.sql.shuffle.partitions", "8")
        if not spark.kbatch_reader.is_jvm:
            print(f"the JVM reader is not live: {spark.kbatch_reader.reason}", file=sys.stderr)
            return 1
        time.sleep(6)  # the broker checkpoints its high watermark every 5 s: the live directory is read up to it
        log_dir = str(broker.log_dir)
        pq = {t: parquet_copy(spark, log_dir, t, n) for t in (bs.SCALE_TOPIC, USERS_TOPIC)}
        if args.key_scan:
            print(key_scan(spark, log_dir, pq, args.rounds))
            return 0
        qs = queries()
        pid = bs.jvm_pid(spark)

        def jvm(topic, push=True, trust=False):
            return (spark.read.format("kafka-segments-jvm").option("topics", topic)
                    .option("pushDownAggregates", str(push).lower())
                    .option("trustHeaders", str(trust).lower()).load(log_dir))

        runs = {}  # (topic, query, path) -> [(wall, cpu)]
        # trusted first: each cold path forgets every summary, and warm needs the verified ones just made
        paths = ("JVM reader, cold, trustHeaders", "JVM reader, cold", "JVM reader, warm", "Parquet")
        for topic in (bs.SCALE_TOPIC, USERS_TOPIC):
            for qname, (q, agg) in qs.items():
                ref = q(jvm(topic, push=False))
                forget(spark)
                got = {"jvm": q(jvm(topic)), "parquet": q(spark.read.parquet(pq[topic]))}
                if agg:
                    got["trusted"] = q(jvm(topic, trust=True))
                    assert got["trusted"] == ref, (topic, qname, got, ref)
                assert got["jvm"] == ref == got["parquet"], (topic, qname, got, ref)
        print("answers equal (pushed, not pushed, Parquet)", flush=True)
        for _ in range(args.rounds):
            for topic in (bs.SCALE_TOPIC, USERS_TOPIC):
                for qname, (q, agg) in qs.items():
                    for path in paths if agg else ("JVM reader, warm", "Parquet"):
                        if path == "Parquet":
                            frame = spark.read.parquet(pq[topic])
                        else:
                            if "cold" in path:
                                forget(spark)
                            frame = jvm(topic, trust=path.endswith("trustHeaders"))
                        c0, t0 = bs._tree_cpu(pid), time.perf_counter()
                        q(frame)
                        t1, c1 = time.perf_counter(), bs._tree_cpu(pid)
                        runs.setdefault((topic, qname, path), []).append((t1 - t0, c1 - c0))
        text = table(runs, n, args.rounds)
        print(text)
        spark.stop()
        write(text, n, load0)
    finally:
        broker.stop()
    return 0


def key_scan(spark, log_dir: str, pq: dict, rounds: int) -> str:
    """The key-only scan taken apart: how many input partitions, and what the key column costs
    beyond the offsets, with and without CRC checks, against Parquet's key column."""
    from pyspark.sql import functions as F

    pid = bs.jvm_pid(spark)
    lines = ["| topic | scan | input partitions | wall min s | JVM CPU s (min) |", "|---|---|---:|---:|---:|"]
    for topic in (bs.SCALE_TOPIC, USERS_TOPIC):
        def jvm(**o):
            return spark.read.format("kafka-segments-jvm").option("topics", topic).options(**o).load(log_dir)

        cases = {
            "JVM reader: key -> noop": lambda: jvm().select("key"),
            "JVM reader: key -> noop, verifyCrc=false": lambda: jvm(verifyCrc="false").select("key"),
            "JVM reader: offset -> noop": lambda: jvm().select("offset"),
            "Parquet: key -> noop": lambda: spark.read.parquet(pq[topic]).select("key"),
            "JVM reader: groupBy(key)": lambda: jvm().groupBy("key").count(),
            "Parquet: groupBy(key)": lambda: spark.read.parquet(pq[topic]).groupBy("key").count(),
        }
        runs = {k: [] for k in cases}
        for _ in range(rounds):
            for name, make in cases.items():
                df = make()
                c0, t0 = bs._tree_cpu(pid), time.perf_counter()
                if "groupBy" in name:
                    df.orderBy(F.desc("count")).limit(3).collect()
                else:
                    df.write.format("noop").mode("overwrite").save()
                runs[name].append((time.perf_counter() - t0, bs._tree_cpu(pid) - c0))
        for name, v in runs.items():
            parts = "" if "groupBy" in name else cases[name]().rdd.getNumPartitions()
            lines.append(f"| {topic} | {name} | {parts} | {min(x[0] for x in v):.2f} | {min(x[1] for x in v):.2f} |")
    return "\n".join(lines)


TARGETS = {  # (query, path) -> Parquet's time / the path's time at least
    ("count", "JVM reader, warm"): 1.0, ("count", "JVM reader, cold"): 0.4,
    ("count", "JVM reader, cold, trustHeaders"): 0.4, ("count by partition", "JVM reader, cold, trustHeaders"): 0.4,
    ("max(timestamp)", "JVM reader, cold, trustHeaders"): 0.4,
    ("count by partition", "JVM reader, warm"): 1.0, ("count by partition", "JVM reader, cold"): 0.4,
    ("max(timestamp)", "JVM reader, warm"): 1.0, ("max(timestamp)", "JVM reader, cold"): 0.4,
}


def table(runs: dict, n: int, rounds: int) -> str:
    lines = [f"{n:,} rows per topic in {PARTS} partitions, local[2], spark.sql.shuffle.partitions=8, min of "
             f"{rounds} interleaved rounds; CPU s = Spark's JVM (median); ratio = Parquet's wall time / the path's "
             "(> 1: the JVM reader is faster)", "",
             "| topic | query | path | wall min ms | CPU s | vs Parquet (wall) | target | met |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for (topic, qname, path), ts in runs.items():
        w, c = min(x[0] for x in ts), statistics.median(x[1] for x in ts)
        pq = min(x[0] for x in runs[(topic, qname, "Parquet")])
        target = TARGETS.get((qname, path))
        if qname.startswith("groupBy") and path != "Parquet":
            target = 1.0 if topic == bs.SCALE_TOPIC else 0.8
        ratio = pq / w
        met = "" if target is None or path == "Parquet" else ("yes" if ratio >= target else "**no**")
        lines.append(f"| {topic} | {qname} | {path} | {w * 1e3:,.0f} | {c:.2f} | {ratio:.2f}x | "
                     f"{'' if target is None or path == 'Parquet' else f'{target:.1f}x'} | {met} |")
    return "\n".join(lines)


def write(text: str, n: int, load0: float) -> None:
    import report

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"Generated by `KBATCH_BENCH_SCALE_RECORDS={n} bench/bench_spark_agg.py` (commit {report.commit()}, "
            f"{now}) from one run. Machine: {report.machine()} Load average {load0:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end (shared with other work: read the ratios). Every answer was "
            "checked equal to the same query with pushDownAggregates=false and to Parquet's before timing.")
    body = ["# Spark aggregates from batch headers, and key-only scans (issue 40)", "", head, "", text, ""]
    notes = os.path.join(HERE, "notes", "spark-agg.md")
    if os.path.exists(notes):
        body += ["### Notes", "", open(notes, encoding="utf-8").read().strip(), ""]
    with open(os.path.join(HERE, "results-spark-agg.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(body))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
