"""readStream on the Python reader (KafkaSegmentsStreamReader in kbatch.spark.datasource), the fallback where the JVM reader's jar
cannot load: the JVM stream's tests of test_spark_streaming.py run again against
`kafka-segments-python` (its batch reader is the reference, itself held to decode_columns by
test_spark.py), plus the admission limit and the options streams refuse. The default run keeps the
core (availableNow, a restart after appends, maxOffsetsPerTrigger, read_committed, refusals);
KBATCH_SPARK_STREAM_FULL=1 adds the rest of the JVM stream's tests (processing-time triggers,
starting positions, the high watermark, data loss), about two more minutes on the 2-core box."""
import json
import os

import pytest

pytest.importorskip("pyspark.sql.datasource")

import test_spark_streaming as S  # noqa: E402  (tests/spark is on sys.path while pytest collects it)
from test_spark_streaming import root  # noqa: E402,F401  (the fixture: three partitions of two topics)

pytestmark = pytest.mark.spark
FULL = os.environ.get("KBATCH_SPARK_STREAM_FULL", "").strip() not in ("", "0")
full_tier = pytest.mark.skipif(not FULL, reason="the longer Python-stream tier runs with KBATCH_SPARK_STREAM_FULL=1")


@pytest.fixture(scope="module")
def spark(spark_session, register_on):
    return register_on(spark_session, pushdown=False)


@pytest.fixture(autouse=True)
def python_reader(monkeypatch):
    monkeypatch.setattr(S, "FMT", "kafka-segments-python")


def test_available_now_equals_batch_read(spark, root, tmp_path):
    S.test_available_now_equals_batch_read(spark, root, tmp_path)


def test_restart_after_append_continues_exactly_once(spark, root, tmp_path):
    S.test_restart_after_append_continues_exactly_once(spark, root, tmp_path)


@full_tier
def test_processing_time_follows_a_growing_directory(spark, root):
    S.test_processing_time_follows_a_growing_directory(spark, root)


@full_tier
def test_starting_offsets_json_and_timestamp(spark, root, tmp_path):
    S.test_starting_offsets_json_and_timestamp(spark, root, tmp_path)


def test_read_committed_stops_before_an_open_transaction(spark, tmp_path):
    S.test_read_committed_stops_before_an_open_transaction(spark, tmp_path)


@full_tier
def test_partial_batch_and_high_watermark_are_never_passed(spark, tmp_path):
    S.test_partial_batch_and_high_watermark_are_never_passed(spark, tmp_path)


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark, root):
    q = S.to_memory(S.stream(spark, root, maxOffsetsPerTrigger="30"), "py_capped", availableNow=True)
    q.awaitTermination()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 30
    assert sum(sizes) == 235 and len(sizes) >= 8  # ceil(235 / 30)
    assert S.rows(spark.table("py_capped")) == S.batch_rows(spark, root)


@full_tier
def test_fail_on_data_loss(spark, root, tmp_path):
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")
    first = S.run_available_now(spark, S.stream(spark, root), ckpt, sink)
    S.write(root, "orders", 0, 200)
    log_start = S._delete_segments_below(root, "orders-0", 250)
    q = (S.stream(spark, root).writeStream.format("parquet").option("checkpointLocation", ckpt)
         .option("path", sink).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="deleted before they were read"):
        q.awaitTermination()
    got = S.run_available_now(spark, S.stream(spark, root, failOnDataLoss="false"), ckpt, sink)
    assert got == sorted(first + [r for r in S.batch_rows(spark, root) if r[:2] == ("orders", 0) and r[2] >= 120])
    assert min(r[2] for r in got if r[:2] == ("orders", 0) and r[2] >= 120) == log_start


@pytest.mark.parametrize("option,value,says", [
    ("endingOffsets", json.dumps({"orders": {"0": 5}}), "endingOffsets is for batch reads"),
    ("minOffsetsPerTrigger", "10", "minOffsetsPerTrigger needs the JVM reader"),
])
def test_options_a_python_stream_refuses(spark, root, option, value, says):
    df = S.stream(spark, root, **{option: value})
    with pytest.raises(Exception, match=says):
        q = df.writeStream.format("memory").queryName("py_refused_" + option).trigger(availableNow=True).start()
        q.awaitTermination()


@pytest.mark.parametrize("layout", ["local_tiered", "aiven"])
def test_tiered_layout_gaining_segments_streams_exactly_once(spark, tmp_path, layout):
    """A tiered-storage layout (the ones kbatch.log.layout and the batch reader know) gains segment
    objects over time, as uploads add them: an availableNow query reads what is there, a rerun from
    its checkpoint reads exactly the new segments, and the sink equals a batch read of the layout,
    which equals the broker directory the segments came from."""
    from support.tiered import make_aiven, make_local_tiered

    make = {"local_tiered": make_local_tiered, "aiven": make_aiven}[layout]
    broker = str(tmp_path / "broker")
    os.makedirs(broker)
    S.write(broker, "orders", 0, 400)
    src = os.path.join(broker, "orders-0")
    n_segments = sum(1 for f in os.listdir(src) if f.endswith(".log"))
    assert n_segments >= 4
    tiered = str(tmp_path / "tiered")
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")

    make(src, tiered, "orders", 0, upto=2)
    first = S.run_available_now(spark, S.stream(spark, tiered), ckpt, sink)
    assert first and first == S.batch_rows(spark, tiered)

    make(src, tiered, "orders", 0, upto=n_segments)   # the remote tier gains the other segments
    got = S.run_available_now(spark, S.stream(spark, tiered), ckpt, sink)
    assert len(set(S.keys(got))) == len(got)           # nothing twice
    assert got == S.batch_rows(spark, tiered) == S.batch_rows(spark, broker)
    assert len(got) > len(first)
