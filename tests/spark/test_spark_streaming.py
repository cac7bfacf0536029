"""spark.readStream.format("kafka-segments"): micro-batches over growing log directories.

Each streaming answer is compared with the batch reader over the same directory at the same point
(the batch reader is held to decode_columns by test_spark.py). Pinned here: availableNow and
processingTime queries give the batch reader's rows; a checkpointed query restarted after appends,
or after its driver was SIGKILLed in the middle of a micro-batch, holds every offset exactly once;
maxOffsetsPerTrigger bounds each micro-batch; startingOffsets / startingTimestamp start where the
batch reader's options do; read_committed stops before an open transaction; a partial batch and
records above the high watermark are never read; failOnDataLoss for segments deleted before they
were read. The JVM reader serves streams (the Python source has no streaming reader): the module
skips, saying why, where its jar cannot load.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("pyspark.sql.datasource")

import kbatch  # noqa: E402

pytestmark = pytest.mark.spark

NOW = 1_750_000_000_000
FMT = "kafka-segments"
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
# small segments and a dense .index: a few hundred records span several segments and index entries
CFG = dict(segment_bytes=3000, index_interval_bytes=200)
COLS = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers", "isTombstone"]


@pytest.fixture(scope="module")
def spark(spark_session, register_on):
    s = register_on(spark_session, pushdown=False)
    if not s.kbatch_reader.is_jvm:
        pytest.skip(f"streams are read by the JVM reader, which is not live: {s.kbatch_reader.reason}")
    return s


# ---------------------------------------------------------------------------- writing logs
def _records(topic, partition, first, n):
    return [(NOW + i, b"k%d" % (i % 5), b"%s/%d/%d" % (topic.encode(), partition, i), [("h", b"%d" % i)])
            for i in range(first, first + n)]


def write(root, topic, partition, n, per_batch=10, **batch):
    """Append n records in batches of per_batch through kbatch's writer (Log.append); returns the new end."""
    path = os.path.join(root, f"{topic}-{partition}")
    cfg = kbatch.LogConfig(**CFG)
    log = kbatch.Log.open(path, cfg, writable=True) if os.path.isdir(path) else kbatch.Log.create(path, cfg,
                                                                                                  now_ms=NOW)
    try:
        first = log.end_offset()
        for b0 in range(first, first + n, per_batch):
            b = kbatch.BatchBuilder(**batch)
            for ts, k, v, h in _records(topic, partition, b0, min(per_batch, first + n - b0)):
                b.append(ts, k, v, headers=h)
            log.append(b.build(), now_ms=NOW + first + n, from_client=False)
        return log.end_offset()
    finally:
        log.close()


def append_raw(root, topic, partition, data):
    """Log data (transactional batches, markers) appended as a coordinator appends it."""
    path = os.path.join(root, f"{topic}-{partition}")
    log = kbatch.Log.open(path, kbatch.LogConfig(**CFG), writable=True)
    try:
        log.append(data, now_ms=NOW + 10_000, from_client=False)
        return log.end_offset()
    finally:
        log.close()


# ---------------------------------------------------------------------------- reading
def rows(df):
    """(topic, partition, offset, ...) tuples in order; duplicates kept, so they show."""
    return sorted(tuple(r) for r in df.select(*[c for c in COLS if c in df.columns]).collect())


def batch_rows(spark, root, **options):
    return rows(spark.read.format(FMT).options(includeHeaders="true", **options).load(root))


def stream(spark, root, **options):
    return spark.readStream.format(FMT).options(includeHeaders="true", **options).load(root)


def run_available_now(spark, df, ckpt, sink):
    """An availableNow query into a Parquet sink (exactly-once with its checkpoint); the sink's rows."""
    q = (df.writeStream.format("parquet").option("checkpointLocation", ckpt).option("path", sink)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    return rows(spark.read.parquet(sink))


def to_memory(df, name, **trigger):
    return df.writeStream.format("memory").queryName(name).trigger(**trigger).start()


def checkpoint_offsets(ckpt):
    """The source offsets of the last batch in a query's checkpoint (offsets/<n>, last line)."""
    d = os.path.join(ckpt, "offsets")
    last = max((f for f in os.listdir(d) if f.isdigit()), key=int)
    with open(os.path.join(d, last)) as f:
        return json.loads(f.read().strip().splitlines()[-1])


def keys(rs):
    return [(r[0], r[1], r[2]) for r in rs]


@pytest.fixture
def root(tmp_path):
    r = str(tmp_path / "logs")
    os.makedirs(r)
    write(r, "orders", 0, 120)
    write(r, "orders", 1, 75, compression=kbatch.Compression.LZ4)
    write(r, "payments", 0, 40, per_batch=7)
    return r


# ---------------------------------------------------------------------------- tests
def test_available_now_equals_batch_read(spark, root, tmp_path):
    got = run_available_now(spark, stream(spark, root), str(tmp_path / "ckpt"), str(tmp_path / "sink"))
    assert got == batch_rows(spark, root)
    assert len(got) == 235
    # the checkpoint holds the next offset of every partition, in the Kafka source's JSON layout
    assert checkpoint_offsets(str(tmp_path / "ckpt")) == {"orders": {"0": 120, "1": 75}, "payments": {"0": 40}}


def test_processing_time_follows_a_growing_directory(spark, root):
    q = to_memory(stream(spark, root), "grow", processingTime="200 milliseconds")
    try:
        q.processAllAvailable()
        assert rows(spark.table("grow")) == batch_rows(spark, root)
        write(root, "orders", 0, 33)             # appended, rolling segments
        write(root, "orders", 2, 12)             # a partition that appears later
        write(root, "audit", 0, 5, per_batch=2)  # and a topic
        q.processAllAvailable()
        assert rows(spark.table("grow")) == batch_rows(spark, root)
        assert len(rows(spark.table("grow"))) == 235 + 33 + 12 + 5
    finally:
        q.stop()


def test_restart_after_append_continues_exactly_once(spark, root, tmp_path):
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")
    first = run_available_now(spark, stream(spark, root), ckpt, sink)
    write(root, "orders", 1, 50)
    write(root, "payments", 3, 9)
    got = run_available_now(spark, stream(spark, root), ckpt, sink)
    assert got == batch_rows(spark, root)
    assert len(set(keys(got))) == len(got) == len(first) + 59
    assert checkpoint_offsets(ckpt) == {"orders": {"0": 120, "1": 125}, "payments": {"0": 40, "3": 9}}
    # nothing new: a third run adds nothing
    assert run_available_now(spark, stream(spark, root), ckpt, sink) == got


KILLED_QUERY = textwrap.dedent("""
    import os, sys, time
    from pyspark.sql import SparkSession, functions as F
    from pyspark.sql.types import LongType
    import kbatch.spark as ks

    root, ckpt, sink, marker, block_at = sys.argv[1:6]
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    assert ks.register(spark).is_jvm

    @F.udf(LongType())
    def gate(offset):
        if offset == int(block_at):   # in the middle of a micro-batch: tell the test, then wait for the kill
            with open(marker + ".part", "w") as f:
                f.write(str(os.getpid()))
            os.rename(marker + ".part", marker)
            time.sleep(3600)
        return offset

    df = spark.readStream.format("kafka-segments").option("includeHeaders", "true") \\
        .option("maxOffsetsPerTrigger", "40").load(root)
    cols = [gate("offset").alias(c) if c == "offset" else c for c in df.columns]
    q = (df.select(*cols).writeStream
         .format("parquet").option("checkpointLocation", ckpt).option("path", sink)
         .trigger(processingTime="100 milliseconds").start())
    q.awaitTermination()
""")


def test_driver_killed_mid_batch_restarts_exactly_once(spark, root, tmp_path):
    ckpt, sink, marker = str(tmp_path / "ckpt"), str(tmp_path / "sink"), str(tmp_path / "blocked")
    script = tmp_path / "query.py"
    script.write_text(KILLED_QUERY)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    # orders-0 offset 100 is read in a later micro-batch (40 offsets each over three partitions)
    proc = subprocess.Popen([sys.executable, str(script), root, ckpt, sink, marker, "100"], env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a measurement
        while not os.path.exists(marker):
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the query never reached the gate"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM
        proc.wait()
        if os.path.exists(marker):  # PySpark's worker daemon runs in its own process group: end the gated worker
            pid = int(open(marker).read())
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"pyspark" in f.read():  # still that worker, not a reused pid
                        os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass
    batches = sorted(int(f) for f in os.listdir(os.path.join(ckpt, "offsets")) if f.isdigit())
    committed = sorted(int(f) for f in os.listdir(os.path.join(ckpt, "commits")) if f.isdigit())
    assert committed and batches[-1] not in committed  # killed inside a planned, uncommitted batch
    write(root, "orders", 0, 25)  # more data arrives while the query is down
    got = run_available_now(spark, stream(spark, root), ckpt, sink)
    assert got == batch_rows(spark, root)
    assert len(set(keys(got))) == len(got) == 235 + 25


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark, root):
    q = to_memory(stream(spark, root, maxOffsetsPerTrigger="30"), "capped", availableNow=True)
    q.awaitTermination()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 30
    assert sum(sizes) == 235 and len(sizes) >= 8  # ceil(235 / 30)
    # the source's metrics, as the Kafka source's: how far each micro-batch left the query behind
    behind = [int(p["sources"][0]["metrics"]["maxOffsetsBehindLatest"]) for p in q.recentProgress
              if p["numInputRows"]]
    assert behind[0] > 0 and behind[-1] == 0 and behind == sorted(behind, reverse=True)
    assert rows(spark.table("capped")) == batch_rows(spark, root)


def test_starting_offsets_json_and_timestamp(spark, root, tmp_path):
    start = json.dumps({"orders": {"0": 57, "1": -1}, "payments": {"0": -2}})
    got = run_available_now(spark, stream(spark, root, startingOffsets=start), str(tmp_path / "c1"),
                            str(tmp_path / "s1"))
    assert got == batch_rows(spark, root, startingOffsets=start)
    assert len(got) == (120 - 57) + 0 + 40
    ts = str(NOW + 60)
    got = run_available_now(spark, stream(spark, root, startingTimestamp=ts), str(tmp_path / "c2"),
                            str(tmp_path / "s2"))
    assert got == batch_rows(spark, root, startingTimestamp=ts)
    assert len(got) == 60 + 15 + 0
    by_ts = json.dumps({"orders": {"0": NOW + 100}})
    got = run_available_now(spark, stream(spark, root, startingOffsetsByTimestamp=by_ts), str(tmp_path / "c3"),
                            str(tmp_path / "s3"))
    assert got == batch_rows(spark, root, startingOffsetsByTimestamp=by_ts)


def test_starting_offsets_latest_reads_only_what_arrives(spark, root):
    q = to_memory(stream(spark, root, startingOffsets="latest"), "latest", processingTime="200 milliseconds")
    try:
        q.processAllAvailable()
        assert spark.table("latest").count() == 0
        write(root, "payments", 0, 6)
        q.processAllAvailable()
        assert keys(rows(spark.table("latest"))) == [("payments", 0, o) for o in range(40, 46)]
    finally:
        q.stop()


def _txn(pid, n, first_value, seq=0):
    b = kbatch.BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    for i in range(n):
        b.append(NOW + 5000 + i, b"t", b"txn-%d-%d" % (pid, first_value + i))
    return b.build()


def _marker(pid, commit):
    return kbatch.build_end_txn_marker(producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0,
                                       timestamp=NOW + 6000)


def test_read_committed_stops_before_an_open_transaction(spark, tmp_path):
    root = str(tmp_path / "logs")
    os.makedirs(root)
    write(root, "t", 0, 10)                                      # 0-9
    append_raw(root, "t", 0, _txn(1, 3, 0) + _marker(1, True))   # 10-12 committed, marker 13
    append_raw(root, "t", 0, _txn(2, 4, 0) + _marker(2, False))  # 14-17 aborted, marker 18
    write(root, "t", 0, 5)                                       # 19-23
    append_raw(root, "t", 0, _txn(3, 2, 0))                      # 24-25: open
    write(root, "t", 0, 6)                                       # 26-31 plain, after the open transaction
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")
    got = run_available_now(spark, stream(spark, root, **{"isolation.level": "read_committed"}), ckpt, sink)
    assert [o for _, _, o in keys(got)] == list(range(0, 13)) + list(range(19, 24))
    assert checkpoint_offsets(ckpt) == {"t": {"0": 24}}  # the last stable offset
    # read_uncommitted reads on to the end, aborted records included, markers never
    unc = run_available_now(spark, stream(spark, root), str(tmp_path / "c2"), str(tmp_path / "s2"))
    assert [o for _, _, o in keys(unc)] == [o for o in range(32) if o not in (13, 18)]
    # the transaction commits: the restarted query reads it and what followed, exactly once
    append_raw(root, "t", 0, _txn(3, 1, 2, seq=2) + _marker(3, True))  # 32, marker 33
    got = run_available_now(spark, stream(spark, root, **{"isolation.level": "read_committed"}), ckpt, sink)
    assert got == batch_rows(spark, root, **{"isolation.level": "read_committed"})
    assert [o for _, _, o in keys(got)] == list(range(0, 13)) + list(range(19, 33))


def test_partial_batch_and_high_watermark_are_never_passed(spark, tmp_path):
    root = str(tmp_path / "logs")
    os.makedirs(root)
    write(root, "live", 0, 30)
    seg = sorted(f for f in os.listdir(os.path.join(root, "live-0")) if f.endswith(".log"))[-1]
    b = kbatch.BatchBuilder(base_offset=30)
    for ts, k, v, h in _records("live", 0, 30, 10):
        b.append(ts, k, v, headers=h)
    whole = b.build()
    with open(os.path.join(root, "live-0", seg), "ab") as f:  # a writer in the middle of an append
        f.write(whole[: len(whole) // 2])
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")
    got = run_available_now(spark, stream(spark, root), ckpt, sink)
    assert [o for _, _, o in keys(got)] == list(range(30))
    with open(os.path.join(root, "live-0", seg), "ab") as f:  # the append completes
        f.write(whole[len(whole) // 2:])
    # a broker's high watermark: records above it are not committed to the replicas yet
    with open(os.path.join(root, "replication-offset-checkpoint"), "w") as f:
        f.write("0\n1\nlive 0 35\n")
    got = run_available_now(spark, stream(spark, root), ckpt, sink)
    assert [o for _, _, o in keys(got)] == list(range(35))
    os.remove(os.path.join(root, "replication-offset-checkpoint"))
    got = run_available_now(spark, stream(spark, root), ckpt, sink)
    assert got == batch_rows(spark, root)
    assert len(set(keys(got))) == len(got) == 40


def _delete_segments_below(root, tp, offset):
    """Retention: remove the segments (and their indexes) that end at or below offset."""
    d = os.path.join(root, tp)
    bases = sorted(int(f[:20]) for f in os.listdir(d) if f.endswith(".log"))
    gone = [b for b, nxt in zip(bases, bases[1:]) if nxt <= offset]
    for b in gone:
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            p = os.path.join(d, "%020d%s" % (b, suffix))
            if os.path.exists(p):
                os.remove(p)
    return bases[len(gone)]


def test_fail_on_data_loss(spark, root, tmp_path):
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")
    first = run_available_now(spark, stream(spark, root), ckpt, sink)
    write(root, "orders", 0, 200)  # 120-319, several new segments
    log_start = _delete_segments_below(root, "orders-0", 250)  # deleted before the query read them
    assert 120 < log_start <= 250
    q = (stream(spark, root).writeStream.format("parquet").option("checkpointLocation", ckpt)
         .option("path", sink).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="deleted before they were read"):
        q.awaitTermination()
    got = run_available_now(spark, stream(spark, root, failOnDataLoss="false"), ckpt, sink)
    assert got == sorted(first + [r for r in batch_rows(spark, root) if r[:2] == ("orders", 0) and r[2] >= 120])
    assert min(r[2] for r in got if r[:2] == ("orders", 0) and r[2] >= 120) == log_start


@pytest.mark.parametrize("fail", [True, False], ids=["failOnDataLoss", "skip"])
def test_segments_deleted_under_a_running_query(spark, root, tmp_path, fail):
    name = "loss_" + str(fail).lower()
    q = to_memory(stream(spark, root, failOnDataLoss=str(fail).lower()), name, processingTime="100 milliseconds")
    try:
        q.processAllAvailable()
        first = rows(spark.table(name))
        # orders-0 grows by 200 records and retention removes segments the query has not read yet;
        # made in a copy and swapped in under the running query
        staging = str(tmp_path / "staging")
        shutil.copytree(os.path.join(root, "orders-0"), os.path.join(staging, "orders-0"))
        write(staging, "orders", 0, 200)
        log_start = _delete_segments_below(staging, "orders-0", 250)
        os.rename(os.path.join(root, "orders-0"), str(tmp_path / "orders-0.old"))
        os.rename(os.path.join(staging, "orders-0"), os.path.join(root, "orders-0"))
        if fail:
            with pytest.raises(Exception, match="deleted before they were read|are gone"):
                q.processAllAvailable()
        else:
            q.processAllAvailable()
            new = [r for r in batch_rows(spark, root) if r[:2] == ("orders", 0) and r[2] >= 120]
            assert new[0][2] == log_start
            assert rows(spark.table(name)) == sorted(first + new)
    finally:
        q.stop()


def test_batch_options_refused_in_a_stream(spark, root):
    with pytest.raises(Exception, match="endingOffsets is for batch reads"):
        q = to_memory(stream(spark, root, endingOffsets="latest"), "refused", availableNow=True)
        q.awaitTermination()


def test_min_offsets_per_trigger_waits_for_enough_data(spark, root, tmp_path):
    # 235 offsets are waiting, fewer than asked for, and the delay (an hour) has not passed: no batch
    opts = dict(minOffsetsPerTrigger="1000", maxTriggerDelay="1h")
    q = to_memory(stream(spark, root, **opts), "waiting", processingTime="200 milliseconds")
    try:
        q.processAllAvailable()
        assert spark.table("waiting").count() == 0
    finally:
        q.stop()
    # availableNow reads everything there is whatever the minimum
    got = run_available_now(spark, stream(spark, root, **opts), str(tmp_path / "ckpt"), str(tmp_path / "sink"))
    assert got == batch_rows(spark, root)


BROKERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "brokers")


@pytest.mark.parametrize("era", sorted(d for d in os.listdir(BROKERS) if os.path.isdir(os.path.join(BROKERS, d))))
def test_real_brokers_directories_up_to_their_high_watermarks(spark, tmp_path, era):
    """Log directories real brokers wrote (tests/data/brokers): a stream reads each partition up to
    the high watermark in the broker's own replication-offset-checkpoint, the batch reader's rows."""
    root = os.path.join(BROKERS, era)
    hw = {}
    path = os.path.join(root, "replication-offset-checkpoint")
    if os.path.exists(path):
        with open(path) as f:
            lines = f.read().split("\n")
        for line in lines[2:2 + int(lines[1])]:
            topic, partition, offset = line.split()
            hw[(topic, int(partition))] = int(offset)
    # some eras hold records only in __consumer_offsets: internal topics are asked for (left out by default)
    got = run_available_now(spark, stream(spark, root, includeInternalTopics="true"), str(tmp_path / "ckpt"),
                            str(tmp_path / "sink"))
    expected = [r for r in batch_rows(spark, root, includeInternalTopics="true") if r[2] < hw.get((r[0], r[1]), 1 << 62)]
    assert got == expected
    assert len(got) > 0
