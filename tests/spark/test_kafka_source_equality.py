"""kafka-segments against Spark's own Kafka source (spark-sql-kafka-0-10) on a real Kafka 4.4.0 broker.

Kafka's Java producers write a topic with several segments per partition (gzip, lz4, null keys,
tombstones, headers with null values), a LogAppendTime topic, and a transactional topic (two
transactional producers, committed and aborted, interleaved with an idempotent one). Then:

- `format("kafka")` reads it from the broker (batch, and streaming availableNow into Parquet), under
  read_uncommitted and read_committed (`kafka.isolation.level`);
- the broker is stopped (a clean shutdown) and `format("kafka-segments")` reads its own log
  directory, batch and availableNow, with `isolation.level` the same;
- `kbatch serve` is started read-only over that log directory and `format("kafka")` reads it again.

Every path must give the same rows: key, value, topic, partition, offset, timestamp,
timestampType, headers (includeHeaders). Spark's Kafka source comes from Maven Central
(tools/spark_jars.py, at pyspark's version or the newest release before it); the module skips,
saying why, when Maven Central, the Kafka broker jars or the JVM reader cannot be had.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark.sql.datasource")

from support.kafka_broker import KafkaBroker, KafkaUnavailable, kafka_dist  # noqa: E402
from support.paths import tool_module  # noqa: E402
from support.kafka_driver import JavaDriver, Send, abort, begin, commit, create_topics, flush, produce  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
VERSION = "4.4.0"
TOPICS = ("plain", "lat", "txn")
COLS = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers"]
T0 = 1_760_000_000_000
SERVE_START_TIMEOUT_S = 120


def spark_jars_module():
    return tool_module("spark_jars")


def produce_all(driver: JavaDriver, bootstrap: str) -> int:
    rng = random.Random(30)

    def headers(i):
        return [] if i % 4 == 1 else [("n", b"%d" % i), ("empty", None), ("n", b"again")][: 1 + i % 3]

    # Kafka 4 refuses segment.bytes below 1 MiB: segments roll by message time (segment.ms against
    # the records' own timestamps, a minute apart every 60 records of a partition)
    roll = {"segment.ms": "60000"}
    actions = [create_topics([("plain", 3, roll), ("lat", 1, {"message.timestamp.type": "LogAppendTime"}),
                              ("txn", 2, roll)])]
    steps = []
    for i in range(600):
        key = None if i % 7 == 0 else b"user-%d" % rng.randrange(40)
        value = None if i % 11 == 0 else json.dumps({"i": i, "pad": "x" * rng.randrange(80)}).encode()
        steps.append(Send("plain", i % 3, key, value, T0 + i * 1000, headers(i), p=i // 100 % 2))
        if i % 25 == 24:
            steps.append(flush(i // 100 % 2))
    actions.append(produce([{"compression.type": "gzip", "linger.ms": "5"},
                            {"compression.type": "lz4", "enable.idempotence": "true", "linger.ms": "5"}], steps))
    actions.append(produce([{"compression.type": "none"}],
                           [Send("lat", 0, b"k%d" % i, b"v%d" % i, T0, headers(i)) for i in range(50)]))
    steps = []
    n = 0
    for round_ in range(12):
        steps += [begin(0), begin(1)]
        for _ in range(rng.randrange(3, 12)):
            p = rng.choice((0, 0, 1, 2))
            steps.append(Send("txn", rng.randrange(2), b"t%d" % n, b"txn value %d" % n, T0 + n * 20_000, headers(n),
                              p=p))
            n += 1
        steps.append(flush(2))
        steps.append(abort(0) if round_ % 3 == 1 else commit(0))
        steps.append(abort(1) if round_ % 4 == 2 else commit(1))
    actions.append(produce([{"transactional.id": "eq-a", "compression.type": "zstd", "linger.ms": "5"},
                            {"transactional.id": "eq-b", "compression.type": "none", "linger.ms": "5"},
                            {"enable.idempotence": "true", "compression.type": "snappy", "linger.ms": "5"}], steps))
    driver.run(bootstrap, actions)
    return 600 + 50 + n


@pytest.fixture(scope="module")
def jars():
    sj = spark_jars_module()
    try:
        return sj.spark_kafka_jars()
    except sj.SparkJarsError as e:
        pytest.skip(f"Spark's Kafka source cannot be had: {e}")


@pytest.fixture(scope="module")
def spark(spark_session, register_on, jars):
    # ADD JAR, not spark.jars: the run's one session is already up
    for jar in jars:
        spark_session.sql(f"ADD JAR '{jar}'")
    s = register_on(spark_session, pushdown=False)
    if not s.kbatch_reader.is_jvm:
        pytest.skip(f"the JVM reader is not live: {s.kbatch_reader.reason}")
    return s


@pytest.fixture(scope="module")
def broker_data(tmp_path_factory):
    """The broker's log directory after the broker stopped, and what `format("kafka")` read from the
    broker while it ran (filled by the first test that needs it)."""
    try:
        dist = kafka_dist(VERSION)
        driver = JavaDriver(dist)
    except KafkaUnavailable as e:
        pytest.skip(f"real Kafka: Kafka {VERSION}: {e}")
    broker = KafkaBroker(dist, tmp_path_factory.mktemp("kafka-eq-"))
    broker.start()
    try:
        produced = produce_all(driver, broker.bootstrap)
        yield {"broker": broker, "produced": produced, "from_broker": {}}
    finally:
        broker.close()


def rows(df):
    return sorted(tuple(r) for r in df.select(*COLS).collect())


def kafka_batch(spark, bootstrap, isolation):
    return rows(spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", ",".join(TOPICS)).option("startingOffsets", "earliest")
                .option("endingOffsets", "latest").option("includeHeaders", "true")
                .option("kafka.isolation.level", isolation).load())


def available_now(spark, df, tmp: Path):
    q = (df.writeStream.format("parquet").option("checkpointLocation", str(tmp / "ckpt"))
         .option("path", str(tmp / "sink")).trigger(availableNow=True).start())
    q.awaitTermination(600)
    assert not q.isActive, "availableNow did not finish within 600 s"
    assert q.exception() is None
    return rows(spark.read.parquet(str(tmp / "sink")))


def kafka_stream(spark, bootstrap, isolation, tmp):
    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", ",".join(TOPICS)).option("startingOffsets", "earliest")
          .option("includeHeaders", "true").option("kafka.isolation.level", isolation).load())
    return available_now(spark, df, tmp)


def segments(spark, fmt_reader, isolation, log_dir):
    return fmt_reader.format("kafka-segments").option("topics", ",".join(TOPICS)).option("includeHeaders", "true") \
        .option("isolation.level", isolation).load(str(log_dir))


@pytest.fixture(scope="module")
def read_from_broker(spark, broker_data, tmp_path_factory):
    """format("kafka") from the running broker, batch and availableNow, both isolation levels;
    then the broker stops cleanly so its log directory is complete and still."""
    out = broker_data["from_broker"]
    if not out:
        broker = broker_data["broker"]
        for iso in ("read_uncommitted", "read_committed"):
            out[("batch", iso)] = kafka_batch(spark, broker.bootstrap, iso)
            out[("stream", iso)] = kafka_stream(spark, broker.bootstrap, iso, tmp_path_factory.mktemp(f"k-{iso}-"))
        broker.stop()
        assert broker.clean_shutdown_file.exists(), broker.log_text(since_start=True)[-3000:]
    return out


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_kafka_segments_on_the_broker_log_dir_equals_spark_kafka_source(spark, broker_data, read_from_broker,
                                                                        isolation, tmp_path):
    from_kafka = read_from_broker[("batch", isolation)]
    assert read_from_broker[("stream", isolation)] == from_kafka
    log_dir = broker_data["broker"].log_dir
    batch = rows(segments(spark, spark.read, isolation, log_dir))
    assert batch == from_kafka
    streamed = available_now(spark, segments(spark, spark.readStream, isolation, log_dir), tmp_path)
    assert streamed == from_kafka
    # the data is what the test means it to be: every topic, headers, tombstones, LogAppendTime,
    # and under read_committed fewer rows (aborted transactions)
    assert {r[0] for r in from_kafka} == set(TOPICS)
    assert any(r[4] is None for r in from_kafka) and any(r[3] is None for r in from_kafka)
    assert any(r[7] and any(h[1] is None for h in r[7]) for r in from_kafka)
    assert {r[6] for r in from_kafka if r[0] == "lat"} == {1}
    txn = [r for r in from_kafka if r[0] == "txn"]
    if isolation == "read_committed":
        assert len(txn) < len([r for r in read_from_broker[("batch", "read_uncommitted")] if r[0] == "txn"])
    else:
        assert len(from_kafka) == broker_data["produced"]


def serve(log_dir: Path):
    proc = subprocess.Popen([sys.executable, "-m", "kbatch.cli", "serve", str(log_dir), "--listen", "127.0.0.1:0",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=SRC))
    import select

    ready, _, _ = select.select([proc.stdout], [], [], SERVE_START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        raise AssertionError(f"kbatch serve did not say it listens: {proc.communicate(timeout=30)}")
    return proc, json.loads(line)["bootstrap"]


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_spark_kafka_source_against_kbatch_serve_equals_the_broker(spark, broker_data, read_from_broker, isolation,
                                                                   tmp_path):
    proc, bootstrap = serve(broker_data["broker"].log_dir)
    try:
        assert kafka_batch(spark, bootstrap, isolation) == read_from_broker[("batch", isolation)]
        assert kafka_stream(spark, bootstrap, isolation, tmp_path) == read_from_broker[("batch", isolation)]
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
