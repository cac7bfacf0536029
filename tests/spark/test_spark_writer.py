"""df.write.format("kafka-segments"): Kafka's key partitioner, task logs joined at commit, nothing
visible from failed jobs or failed/speculative attempts, append and overwrite."""
import os

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark.sql.datasource")

import kbatch  # noqa: E402
from kbatch.columns import decode as A  # noqa: E402
from kbatch.log import segment_plan as _plan  # noqa: E402
from kbatch.spark import writer as Wr  # noqa: E402

pytestmark = pytest.mark.spark

NOW = 1_750_000_000_000
FORMAT = "kafka-segments"  # the writer is reached by the short name, as users reach it


def rows(n, start=0):
    """An Arrow table with kbatch's columns: headers, null keys, tombstones with payloads, nulls."""
    i = np.arange(start, start + n)
    return pa.table({
        "key": pa.array([None if k % 17 == 0 else b"key-%d" % k for k in i], pa.binary()),
        "value": pa.array([None if k % 23 == 0 else b"value-%d" % k for k in i], pa.binary()),
        "timestamp": pa.array((i + NOW) * 1000, pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "n", "value": b"%d" % k}] if k % 5 == 0 else None for k in i], A.HEADER_TYPE),
        "isTombstone": pa.array([True if k % 29 == 0 else None for k in i], pa.bool_()),
    })


def read_partitions(path):
    """{(topic, partition): decoded table in offset order}, checking each directory's indexes."""
    out = {}
    for tp in _plan.list_partitions(path):
        assert kbatch.verify_indexes(tp.path).ok
        data = b"".join(open(s.path, "rb").read() for s in tp.segments)
        out[(tp.topic, tp.partition)] = kbatch.decode_columns(data, tp.topic, tp.partition)
    assert not os.path.exists(os.path.join(path, Wr.STAGING))
    return out


def test_key_partitioner_and_read_back(spark, tmp_path):
    path = str(tmp_path / "out")
    t = rows(3000)
    df = spark.createDataFrame(t).repartition(4)
    df.write.format(FORMAT).mode("append").option("topic", "orders").option("numPartitions", 3) \
        .option("segment.bytes", 32 * 1024).save(path)
    parts = read_partitions(path)
    assert sorted(parts) == [("orders", 0), ("orders", 1), ("orders", 2)]
    got = pa.concat_tables(parts.values())
    assert got.num_rows == 3000
    for (_t, p), tab in parts.items():
        assert tab.column("offset").to_pylist() == list(range(tab.num_rows))  # tasks joined without gaps
        keys = [k for k in tab.column("key").to_pylist() if k is not None]
        assert all((kbatch.spark.writer.partitions_for(pa.array([k]), 3)[0][0]) == p for k in keys)
    # every row once, with its fields
    want = {r["timestamp"]: r for r in A.decode_columns(kbatch.encode_columns(t)).to_pylist()}
    for r in got.to_pylist():
        w = want.pop(r["timestamp"])
        assert (r["key"], r["value"], r["headers"], r["isTombstone"]) == (w["key"], w["value"], w["headers"],
                                                                          w["isTombstone"])
    assert not want
    # and the reader reads it
    assert spark.read.format(FORMAT).load(path).count() == 3000


def test_partition_column_round_trip(spark, tmp_path):
    src, out = str(tmp_path / "src"), str(tmp_path / "copy")
    for p in range(2):
        log = kbatch.Log.create(os.path.join(src, f"events-{p}"), kbatch.LogConfig(segment_bytes=16 * 1024))
        log.append_table(rows(700, start=1000 * p))
        log.close()
    df = spark.read.format(FORMAT).option("includeHeaders", "true").load(src)
    df.write.format(FORMAT).mode("append").option("segment.bytes", 16 * 1024).save(out)  # topic, partition columns
    a, b = read_partitions(src), read_partitions(out)
    assert sorted(a) == sorted(b)
    for k in a:  # offsets, order and fields kept (the reader's tasks come in offset order)
        for name in ("offset", "key", "value", "timestamp", "headers", "isTombstone"):
            assert a[k].column(name).equals(b[k].column(name)), (k, name)


def test_failed_job_leaves_nothing_visible(spark, tmp_path):
    path = str(tmp_path / "out")
    t = rows(400)
    bad = pa.table({"key": [b"x"], "value": pa.array([None], pa.binary()), "isTombstone": [False]})
    df = spark.createDataFrame(pa.concat_tables([t.select(["key", "value", "isTombstone"]), bad])).repartition(3)
    with pytest.raises(Exception, match="must be a tombstone"):
        df.write.format(FORMAT).mode("append").option("topic", "t").option("numPartitions", 2).save(path)
    assert os.listdir(path) == []  # no partition directory, no staging left


def test_append_continues_offsets_and_overwrite_replaces(spark, tmp_path):
    path = str(tmp_path / "out")

    def write(t, mode):
        spark.createDataFrame(t).coalesce(1).write.format(FORMAT).mode(mode).option("topic", "t") \
            .option("numPartitions", 1).save(path)

    write(rows(100), "append")
    write(rows(50, start=100), "append")
    (t0,) = read_partitions(path).values()
    assert t0.column("offset").to_pylist() == list(range(150))
    write(rows(10, start=500), "overwrite")
    (t1,) = read_partitions(path).values()
    assert t1.column("offset").to_pylist() == list(range(10))
    assert A.timestamps_ms(t1.column("timestamp")).tolist() == list(range(NOW + 500, NOW + 510))


class _Ctx:
    def __init__(self, task, attempt):
        self.task, self.attempt = task, attempt

    def partitionId(self):
        return self.task

    def taskAttemptId(self):
        return self.attempt


def test_commit_uses_only_the_chosen_attempts(tmp_path, monkeypatch):
    """The protocol without a cluster: task 0's first attempt fails after writing a batch, its
    retry succeeds; task 1 runs twice (speculation) and Spark keeps one message. The commit
    joins only the chosen attempts' logs, and removes every attempt's staging."""
    import pyspark

    from kbatch.spark.datasource import KafkaSegmentsDataSource

    path = str(tmp_path / "out")
    os.makedirs(path)
    t = rows(600)
    schema = pyspark.sql.types.StructType.fromJson(
        {"type": "struct", "fields": [{"name": n, "type": "binary", "nullable": True, "metadata": {}}
                                      for n in ("key", "value")]})
    w = KafkaSegmentsDataSource({"path": path, "topic": "t", "numPartitions": "2"}).writer(schema, False)
    w = pickle_roundtrip(w)  # tasks get a pickled copy

    def run(task, attempt, table, fail_after=None):
        monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Ctx(task, attempt)))

        def batches():
            for k, rb in enumerate(table.to_batches(max_chunksize=100)):
                if fail_after is not None and k == fail_after:
                    raise RuntimeError("executor lost")
                yield rb
        return w.write(batches())

    with pytest.raises(RuntimeError):
        run(0, 1, t.slice(0, 300), fail_after=2)
    m0 = run(0, 2, t.slice(0, 300))
    m1 = run(1, 3, t.slice(300))
    run(1, 4, t.slice(300))  # the speculative copy; its message is dropped
    assert len(os.listdir(w.job_dir)) == 4
    w.commit([m0, m1])
    got = pa.concat_tables(read_partitions(path).values())
    assert sorted(A.timestamps_ms(got.column("timestamp")).tolist()) == list(range(NOW, NOW + 600))
    assert sorted(os.listdir(path)) == ["t-0", "t-1"]


def pickle_roundtrip(obj):
    import pickle

    return pickle.loads(pickle.dumps(obj))


def test_partitioner_is_kafkas_murmur2():
    """toPositive(murmur2(key)) % n, Kafka's default partitioner (kafka-python's published
    vectors for 1000 partitions; null keys round-robin)."""
    keys = pa.array([b"", b"a", b"ab", b"abc", b"123456789", b"\x00 ", None, None], pa.binary())
    parts, turn = Wr.partitions_for(keys, 1000, start=7)
    assert parts.tolist() == [681, 524, 434, 107, 566, 742, 7, 8] and turn == 9


# ------------------------------------------------------------------------------------ late tasks, other writers
def _job(path, overwrite=False, partitions=3):
    """A writer as the driver makes it, and the pickled copy a task gets."""
    import pyspark

    from kbatch.spark.datasource import KafkaSegmentsDataSource

    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}}
              for n, t in (("key", "binary"), ("value", "binary"), ("partition", "integer"))]
    schema = pyspark.sql.types.StructType.fromJson({"type": "struct", "fields": fields})
    options = {"path": path, "topic": "t", "numPartitions": str(partitions)}
    w = KafkaSegmentsDataSource(options).writer(schema, overwrite)
    return w, pickle_roundtrip(w)


def _task(monkeypatch, w, task, batches, attempt=None):
    import pyspark

    attempt = 100 + task if attempt is None else attempt
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Ctx(task, attempt)))
    return w.write(iter(batches))


def _in(partition, n=50, start=0):
    return rows(n, start).select(["key", "value"]).append_column(
        "partition", pa.array([partition] * n, pa.int32())).to_batches()[0]


def _tree(path):
    """Every file of the partition directories under `path` (the writers' .lock files aside)."""
    out = {}
    for d, dirs, names in os.walk(path):
        dirs[:] = [x for x in dirs if x != Wr.STAGING]
        for n in names:
            if n != ".lock":
                with open(os.path.join(d, n), "rb") as f:
                    out[os.path.relpath(os.path.join(d, n), path)] = f.read()
    return out


def _existing(path, *partitions):
    for p in partitions:
        log = kbatch.Log.create(os.path.join(path, f"t-{p}"))
        log.append_table(rows(20, start=1000 * p))
        log.close()


def test_a_task_still_running_after_abort_leaves_nothing(tmp_path, monkeypatch):
    """The job fails (another task did) while this task is still writing: abort returns, then the
    task meets a partition it has no log for yet. It must not bring the staging directory back
    (Log.create's makedirs did, which made test_failed_job_leaves_nothing_visible fail under
    load); it finds its job gone, removes what it wrote and fails."""
    path = str(tmp_path / "out")
    os.makedirs(path)
    driver, w = _job(path)

    def batches():
        yield _in(0)
        driver.abort([])
        yield _in(0, start=50)   # its open log: the files are gone with the job
        yield _in(1)             # a new log: nothing may be created
    with pytest.raises(kbatch.KBatchError, match="after the job was committed or aborted"):
        _task(monkeypatch, w, 0, batches())
    assert os.listdir(path) == []
    with pytest.raises(kbatch.KBatchError, match="after the job was committed or aborted"):
        _task(monkeypatch, w, 1, [_in(2)])  # an attempt that starts only now writes nothing
    assert os.listdir(path) == []


def test_a_speculative_copy_finishing_after_the_commit_leaves_nothing(tmp_path, monkeypatch):
    path = str(tmp_path / "out")
    os.makedirs(path)
    driver, w = _job(path)
    m0 = _task(monkeypatch, w, 0, [_in(0), _in(1)])

    def late_copy():
        yield _in(0)
        driver.commit([m0])     # Spark took the first attempt's message
        yield _in(2)
    with pytest.raises(kbatch.KBatchError, match="after the job was committed or aborted"):
        _task(monkeypatch, w, 0, late_copy(), attempt=7)
    assert sorted(os.listdir(path)) == ["t-0", "t-1"]
    assert sum(t.num_rows for t in read_partitions(path).values()) == 100


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_partition_another_writer_holds_refuses_the_commit_before_anything_changes(tmp_path, monkeypatch,
                                                                                      overwrite):
    """Every partition directory the commit would change is locked first: one held by another
    writer refuses the whole commit (LogDirectoryLockedError) with every partition as it was,
    where the commit used to append to t-0 (or move a held t-1 away) before meeting the lock."""
    path = str(tmp_path / "out")
    _existing(path, 0, 1)
    driver, w = _job(path, overwrite=overwrite)
    msg = _task(monkeypatch, w, 0, [_in(0), _in(1), _in(2)])
    before = _tree(path)
    holder = kbatch.Log.open(os.path.join(path, "t-1"), writable=True)
    try:
        with pytest.raises(kbatch.LogDirectoryLockedError):
            driver.commit([msg])
    finally:
        holder.close()
    assert _tree(path) == before and sorted(os.listdir(path)) == ["t-0", "t-1"]


def test_a_new_partition_appears_with_its_lock_held(tmp_path, monkeypatch):
    """No writer can get in between a partition appearing and the commit being done with it."""
    path = str(tmp_path / "out")
    _existing(path, 0)
    driver, w = _job(path, overwrite=True)
    msg = _task(monkeypatch, w, 0, [_in(0), _in(1)])
    seen = []

    def spy(real):
        def move(src, dst, *a, **kw):
            real(src, dst, *a, **kw)
            if os.path.dirname(os.fspath(dst)) == path and os.path.basename(os.fspath(dst)).startswith("t-"):
                try:
                    kbatch.Log.open(dst, writable=True).close()
                    seen.append((os.path.basename(dst), "free"))
                except kbatch.LogDirectoryLockedError:
                    seen.append((os.path.basename(dst), "locked"))
        return move
    monkeypatch.setattr(os, "rename", spy(os.rename))
    monkeypatch.setattr(os, "replace", spy(os.replace))
    driver.commit([msg])
    monkeypatch.undo()
    assert seen == [("t-0", "locked"), ("t-1", "locked")]
    assert sum(t.num_rows for t in read_partitions(path).values()) == 100


def test_a_failed_commit_puts_back_what_it_changed(tmp_path, monkeypatch):
    """The last step fails (the rename of t-2 into place): the append to t-0 is truncated back and
    t-1, already renamed in, goes again; the staging directory goes too."""
    path = str(tmp_path / "out")
    _existing(path, 0)
    driver, w = _job(path)
    msg = _task(monkeypatch, w, 0, [_in(0), _in(1), _in(2)])
    before = _tree(path)
    real = os.rename

    def rename(src, dst, *a, **kw):
        if os.fspath(dst) == os.path.join(path, "t-2"):
            raise OSError(28, "No space left on device")
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="No space"):
        driver.commit([msg])
    monkeypatch.undo()
    assert _tree(path) == before and sorted(os.listdir(path)) == ["t-0"]
