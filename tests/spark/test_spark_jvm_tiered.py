"""The JVM reader over tiered-storage layouts (kbatch.log.layout: Kafka's LocalTieredStorage and
Aiven's tiered-storage, built by support.tiered from a broker directory), held to the Python reader,
to kbatch.log.fetch (Log.read) and to the records the broker directory was written with.

One broker partition of several segments holds plain records, a committed and an aborted
transaction (with the `.txnindex` a broker writes); its copies are read in batch (read_uncommitted,
read_committed, an offset range, a starting timestamp through the time index), with a fileset cut
short (no manifest / no time index: left out, as the Python side leaves it out), and as a stream
over a copy that gains segment objects (availableNow twice: exactly once). Refusals (duplicate
copies; Aiven's compressed, encrypted or chunk-transformed segments) name the object on both
readers. KBATCH_SPARK_STREAM_FULL=1 adds the same growing stream on the Python reader and a
read_committed stream.
"""
import json
import os
import shutil

import pytest

pytest.importorskip("pyspark.sql.datasource")

import kbatch  # noqa: E402
from kbatch.log import layout  # noqa: E402

import test_spark_streaming as S  # noqa: E402  (tests/spark is on sys.path while pytest collects it)
from test_spark_streaming import spark  # noqa: E402,F401  (the module's session: skips where the JVM reader is not live)
from support.tiered import _uuid, make_aiven, make_local_tiered  # noqa: E402

pytestmark = pytest.mark.spark
FULL = os.environ.get("KBATCH_SPARK_STREAM_FULL", "").strip() not in ("", "0")

JVM, PY = "kafka-segments-jvm", "kafka-segments-python"
MAKERS = {"local_tiered": make_local_tiered, "aiven": make_aiven}
TOPIC = "orders"


# ---------------------------------------------------------------------------- what the broker holds
def _built():
    """(offset, key, value, timestamp ms, headers, aborted) of every record the broker directory is
    written with below (markers excluded), as the writes make them."""
    out = []
    for o in range(0, 60):
        out.append((o, b"k%d" % (o % 5), b"orders/0/%d" % o, S.NOW + o, (("h", b"%d" % o),), False))
    for i in range(10):   # pid 1, committed; marker at 70
        out.append((60 + i, b"t", b"txn-1-%d" % i, S.NOW + 5000 + i, (), False))
    for i in range(12):   # pid 2, aborted; marker at 83
        out.append((71 + i, b"t", b"txn-2-%d" % i, S.NOW + 5000 + i, (), True))
    for o in range(84, 164):
        out.append((o, b"k%d" % (o % 5), b"orders/0/%d" % o, S.NOW + o, (("h", b"%d" % o),), False))
    return out


BUILT = _built()
END = 164


def expected(committed=False, lo=0, hi=END):
    return [(TOPIC, 0) + r[:5] for r in BUILT if lo <= r[0] < hi and not (committed and r[5])]


def _append(part, data):
    cfg = kbatch.LogConfig(segment_bytes=1200, index_interval_bytes=200)   # segments of a few batches
    log = (kbatch.Log.open(part, cfg, writable=True) if os.path.isdir(part)
           else kbatch.Log.create(part, cfg, now_ms=S.NOW))
    try:
        log.append(data, now_ms=S.NOW + 10_000, from_client=False)
        return log.end_offset()
    finally:
        log.close()


def _plain(part, first, n, per_batch=10):
    for b0 in range(first, first + n, per_batch):
        b = kbatch.BatchBuilder()
        for ts, k, v, h in S._records(TOPIC, 0, b0, min(per_batch, first + n - b0)):
            b.append(ts, k, v, headers=h)
        end = _append(part, b.build())
    return end


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tiered-src") / "broker")
    part = os.path.join(root, f"{TOPIC}-0")
    _plain(part, 0, 60)                                                   # 0-59
    _append(part, S._txn(1, 10, 0) + S._marker(1, True))                  # 60-69, marker 70
    _append(part, S._txn(2, 12, 0) + S._marker(2, False))                 # 71-82 aborted, marker 83
    assert _plain(part, 84, 80) == END                                    # 84-163
    d = os.path.join(root, f"{TOPIC}-0")
    logs = sorted(f for f in os.listdir(d) if f.endswith(".log"))
    assert len(logs) >= 5
    assert any(os.path.getsize(os.path.join(d, f[:-4] + ".txnindex")) for f in logs
               if os.path.exists(os.path.join(d, f[:-4] + ".txnindex")))     # the abort is indexed
    return d


def copy_of(broker, tmp_path, kind, upto=None):
    root = str(tmp_path / kind)
    part = MAKERS[kind](broker, root, TOPIC, 0, upto=upto)
    return root, part


# ---------------------------------------------------------------------------- reading
def rows(df):
    sel = df.selectExpr("topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "headers")
    return sorted((r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value), r.ts,
                   tuple((h.key, bytes(h.value)) for h in r.headers or ())) for r in sel.collect())


def read(spark, fmt, path, **options):
    return spark.read.format(fmt).options(includeHeaders="true", **options).load(path)


def fetched(part, committed=False, lo=None, hi=None):
    """kbatch.log.fetch over the tiered partition (Log.read): what a consumer gets."""
    log = kbatch.Log.open(part)
    try:
        return sorted((TOPIC, 0, r.offset, bytes(r.key), bytes(r.value), r.timestamp,
                       tuple((k, bytes(v)) for k, v in r.headers))
                      for _b, r in log.read(lo, hi, isolation=int(committed)).records())
    finally:
        log.close()


def both(spark, path, **options):
    """The JVM reader's rows, asserted equal to the Python reader's."""
    got = rows(read(spark, JVM, path, **options))
    assert got == rows(read(spark, PY, path, **options)), options
    return got


# ---------------------------------------------------------------------------- batch
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_jvm_batch_reads_of_a_tiered_copy_equal_python_fetch_and_the_records(spark, broker, tmp_path, kind):
    root, part = copy_of(broker, tmp_path, kind)
    assert layout.list_segments(part).layout != layout.BROKER
    assert fetched(part) == expected()
    assert fetched(part, committed=True) == expected(committed=True)

    assert both(spark, root) == expected()
    assert rows(read(spark, JVM, part)) == expected()    # the partition folder itself, as a root
    assert both(spark, root, **{"isolation.level": "read_committed"}) == expected(committed=True)
    # offset ranges: options and a pushed-down filter, planned from the offset index
    ranges = {"startingOffsets": json.dumps({TOPIC: {"0": 37}}), "endingOffsets": json.dumps({TOPIC: {"0": 121}})}
    assert both(spark, root, **ranges) == expected(lo=37, hi=121) == fetched(part, lo=37, hi=121)
    assert (both(spark, root, **ranges, **{"isolation.level": "read_committed"})
            == expected(committed=True, lo=37, hi=121) == fetched(part, True, 37, 121))
    jvm_where = rows(read(spark, JVM, root).where("offset >= 65 AND offset < 90"))
    assert jvm_where == rows(read(spark, PY, root).where("offset >= 65 AND offset < 90")) == expected(lo=65, hi=90)
    # a starting timestamp through the time index: the first offset with a timestamp >= it on
    assert both(spark, root, startingTimestamp=str(S.NOW + 40)) == expected(lo=40)
    assert both(spark, root, startingTimestamp=str(S.NOW + 150)) == expected(lo=60)  # the transaction's stamps
    assert len(layout.list_segments(part).segments) == len([f for f in os.listdir(broker) if f.endswith(".log")])


@pytest.mark.parametrize("kind,cut", [("aiven", ".rsm-manifest"), ("local_tiered", ".timeindex")])
def test_an_incomplete_fileset_is_left_out_by_both_readers(spark, broker, tmp_path, kind, cut):
    """An upload cut short (Aiven's plugin writes the manifest last): the fileset is left out and
    named in `problems`; both readers read the segments before it (a stream or a later read picks
    it up once complete)."""
    root, part = copy_of(broker, tmp_path, kind)
    stems = sorted((f[:-4] for f in os.listdir(part) if f.endswith(".log")), key=lambda n: int(n.split("-")[0]))
    last = stems[-1]   # the newest upload (LocalTieredStorage's offsets are not zero-padded)
    os.remove(os.path.join(part, last + cut))
    listing = layout.list_segments(part)
    assert [p for p in listing.problems if "incomplete tiered copy" in p and last in p and cut in p]
    base = int(last.split("-")[0])
    assert both(spark, root) == expected(hi=base) == fetched(part)
    assert both(spark, root, **{"isolation.level": "read_committed"}) == expected(committed=True, hi=base)


# ---------------------------------------------------------------------------- refusals
def _refused(spark, path, *words):
    for fmt in (JVM, PY):
        with pytest.raises(Exception) as ei:
            read(spark, fmt, path).collect()
        msg = str(ei.value)
        assert "UnsupportedLayoutError" in msg or fmt == PY, (fmt, msg)
        for w in words:
            assert w in msg, (fmt, w, msg)


@pytest.mark.parametrize("extra,says", [
    ({"compression": True}, "compressed chunks"),
    ({"encryption": {"dataKeyAndAAD": "x"}}, "encrypted by the tiered-storage plugin"),
    ({"chunkIndex": {"type": "variable", "originalChunkSize": 4194304, "transformedChunkSize": 4194320}},
     "the segment's chunks are transformed"),
])
def test_transformed_aiven_segments_are_refused_naming_the_manifest(spark, broker, tmp_path, extra, says):
    d = make_aiven(broker, str(tmp_path / "t"), TOPIC, 0, upto=1, **extra)
    (manifest,) = [f for f in os.listdir(d) if f.endswith(".rsm-manifest")]
    _refused(spark, str(tmp_path / "t"), says, manifest)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_two_copies_of_one_start_offset_are_refused(spark, broker, tmp_path, kind):
    root, part = copy_of(broker, tmp_path, kind, upto=2)
    (stem,) = [f[:-4] for f in os.listdir(part) if f.endswith(".log") and int(f.split("-")[0]) == 0]
    again = stem.replace(stem.split("-", 1)[1], _uuid(99))
    for f in os.listdir(part):
        if f.startswith(stem + "."):
            shutil.copy(os.path.join(part, f), os.path.join(part, again + f[len(stem):]))
    _refused(spark, root, "two copies of the segment starting at offset 0", stem, again)


# ---------------------------------------------------------------------------- streaming
def _stream_grows(spark, broker, tmp_path, kind, fmt, **options):
    """An availableNow query over a copy of two segments, then again (same checkpoint) once the copy
    holds them all: exactly the records once, equal to a batch read and to what was written."""
    bases = sorted(int(f[:20]) for f in os.listdir(broker) if f.endswith(".log"))
    root, part = copy_of(broker, tmp_path, kind, upto=2)
    ckpt, sink = str(tmp_path / "ckpt"), str(tmp_path / "sink")
    committed = options.get("isolation.level") == "read_committed"

    def run():
        df = spark.readStream.format(fmt).options(includeHeaders="true", **options).load(root)
        q = (df.writeStream.format("parquet").option("checkpointLocation", ckpt).option("path", sink)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None
        return rows(spark.read.parquet(sink))

    first = run()
    assert first == expected(committed, hi=bases[2])           # the two segments copied so far
    MAKERS[kind](broker, str(tmp_path / kind), TOPIC, 0, upto=len(bases))   # the copy gains the others
    got = run()
    assert len({r[:3] for r in got}) == len(got)              # nothing twice
    assert got == expected(committed) == fetched(part, committed)
    assert got == both(spark, root, **options)
    assert S.checkpoint_offsets(ckpt) == {TOPIC: {"0": END}}
    return got


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_jvm_stream_over_a_growing_tiered_copy_reads_each_record_once(spark, broker, tmp_path, kind):
    _stream_grows(spark, broker, tmp_path, kind, JVM)


@pytest.mark.skipif(not FULL, reason="the longer tiered-stream legs run with KBATCH_SPARK_STREAM_FULL=1")
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_python_and_read_committed_streams_over_a_growing_tiered_copy(spark, broker, tmp_path, kind):
    jvm = _stream_grows(spark, broker, tmp_path / "jvm", kind, JVM, **{"isolation.level": "read_committed"})
    assert jvm == expected(committed=True)
    py = _stream_grows(spark, broker, tmp_path / "py", kind, PY)
    assert py == expected()
