"""Both Spark readers against the read path (kbatch.log.fetch.read_log), on the partitions of
tests/support/partitions.py: transactions committed, aborted and open, with and without
`.txnindex`, and damage (a torn middle segment, a bad length field, a CRC failure; the same in the
active segment, where only a partial last batch is what Kafka ignores).

For each directory, each isolation level and each reader (the JVM one, `kafka-segments-jvm`, and
the Python one, `kafka-segments-python`):

- failOnDataLoss=true (the default): the same records as read_log (offset, key, value, timestamp),
  or, where read_log raises UnreadableDataError, a failed job whose message names the same bytes
  and offsets (UnreadableRange's words: "<file>: N bytes from byte P could not be read").
- failOnDataLoss=false with badRecordsPath: the same records as read_log(skip_unreadable=True),
  and one report per range read_log lists in `unreadable` (file, first byte).

The directories are tests/support/read_path_cases.py's matrix, which
tests/system/test_read_path_differential.py holds every other reader to. One Spark session for the
module (issue 28: one read path, the Java reader implementing the same rules).
"""
import json
import os

import pytest

pytest.importorskip("pyspark.sql.datasource")

from kbatch.log.fetch import IsolationLevel  # noqa: E402

from support import read_path_cases as C  # noqa: E402

pytestmark = pytest.mark.spark

READERS = {"python": "kafka-segments-python", "jvm": "kafka-segments-jvm"}
CASES = C.SPARK_CASES
ISOLATION = C.ISOLATION
_expected = C.expected


@pytest.fixture(scope="module")
def spark(spark_session, register_on):
    return register_on(spark_session, pushdown=False)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """case -> (root directory for Spark, the partition directory `t-0` under it)."""
    out = {}
    for name, build in C.CASES.items():  # every case: the default leg below reads the others too
        root = str(tmp_path_factory.mktemp(name))
        part = os.path.join(root, "t-0")
        build(part)
        out[name] = (root, part)
    return out


@pytest.fixture(scope="module", params=sorted(READERS))
def fmt(request, spark):
    if request.param == "jvm" and not spark.kbatch_reader.is_jvm:
        pytest.skip(f"the JVM reader is not live: {spark.kbatch_reader.reason}")
    return READERS[request.param]


def _rows(df):
    out = [(r["offset"], None if r["key"] is None else bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]), r["ts"])
           for r in df.selectExpr("offset", "key", "value", "unix_millis(timestamp) AS ts").collect()]
    return sorted(out)


def _read(spark, fmt, root, isolation, **options):
    return spark.read.format(fmt).option("isolation.level", isolation).options(**options).load(root)


@pytest.mark.parametrize("isolation", sorted(ISOLATION))
@pytest.mark.parametrize("case", sorted(CASES))
def test_spark_readers_follow_the_read_path(spark, fmt, dirs, case, isolation, tmp_path):
    root, part = dirs[case]
    level = ISOLATION[isolation]

    # failOnDataLoss=true (the default): the same records, or a failed job naming the same bytes
    want, stopped, _met = _expected(part, level, skip=False)
    if stopped is None:
        assert _rows(_read(spark, fmt, root, isolation)) == sorted(want)
    else:
        with pytest.raises(Exception) as ei:
            _read(spark, fmt, root, isolation).count()
        msg = str(ei.value)
        named = f"{stopped.path}: {stopped.size} bytes from byte {stopped.position} could not be read"
        assert named in msg, (named, msg[-3000:])
        assert f"{stopped.offsets()} are in or behind them" in msg, msg[-3000:]

    # failOnDataLoss=false, with badRecordsPath: the same records, a report per unreadable range
    want, stopped, met = _expected(part, level, skip=True)
    assert stopped is None
    reports = str(tmp_path / "reports")
    got = _rows(_read(spark, fmt, root, isolation, failOnDataLoss="false", badRecordsPath=reports))
    assert got == sorted(want)
    seen = []
    if os.path.isdir(reports):
        for name in sorted(os.listdir(reports)):
            if name.endswith(".json"):
                with open(os.path.join(reports, name)) as f:
                    rep = json.load(f)
                seen.append((rep["path"], rep["skippedFrom"]))
    assert sorted(seen) == sorted((r.path, r.position) for r in met)


def test_the_matrix_has_damage_and_transactions(dirs):
    """The directories are what their names say: read_log fails on the middle-segment damage and
    the CRC failures, ignores the active segment's partial last batch, and read_committed leaves
    records out of the transactional ones."""
    fails = {c for c in CASES if _expected(dirs[c][1], IsolationLevel.READ_UNCOMMITTED, False)[1] is not None}
    assert fails == C.FAILING & set(CASES)
    for c in C.TRANSACTIONAL:
        rc = _expected(dirs[c][1], IsolationLevel.READ_COMMITTED, False)[0]
        ru = _expected(dirs[c][1], IsolationLevel.READ_UNCOMMITTED, False)[0]
        assert len(rc) < len(ru), c


@pytest.mark.parametrize("case", sorted(CASES))
def test_split_segments_keep_the_verdict(spark, fmt, dirs, case):
    """Segments split into several input partitions at `.index` entries (maxPartitionBytes=200):
    the same records as read_log, or a failed job naming the same bytes (failOnDataLoss=true).
    (With failOnDataLoss=false a split reader goes on at the next input partition of the same
    segment, where read_log goes on at the next segment: not compared here.)"""
    root, part = dirs[case]
    want, stopped, _met = _expected(part, IsolationLevel.READ_UNCOMMITTED, skip=False)
    df = _read(spark, fmt, root, "read_uncommitted", maxPartitionBytes="200")
    if stopped is None:
        assert _rows(df) == sorted(want)
        return
    with pytest.raises(Exception) as ei:
        df.count()
    assert f"{stopped.path}: {stopped.size} bytes from byte {stopped.position} could not be read" in str(ei.value)


@pytest.mark.parametrize("case, said", [
    ("bad-length-middle", "a bad length field, not a partial batch"),
    ("torn-middle", "a partial batch at the end of"),
])
def test_failed_job_says_what_the_bytes_are(spark, fmt, dirs, case, said):
    """Both readers say what follows the last whole batch as kbatch.record.batch.incomplete_batch
    says it: a bad length field with a valid batch behind it is not called a truncated tail."""
    root, part = dirs[case]
    _want, stopped, _met = _expected(part, IsolationLevel.READ_UNCOMMITTED, skip=False)
    assert stopped is not None and said in stopped.reason, stopped.reason
    with pytest.raises(Exception) as ei:
        _read(spark, fmt, root, "read_uncommitted").count()
    assert said in str(ei.value), str(ei.value)[-3000:]
    assert "Truncated batch at the end of the data" not in str(ei.value)


@pytest.mark.parametrize("case", sorted(set(C.CASES) - set(CASES)))
def test_spark_readers_default_leg_on_every_other_case(spark, fmt, dirs, case):
    """The cases the full test leaves to KBATCH_READ_PATH_FULL=1 (damaged_logs.py's), read by both
    readers with the defaults (read_uncommitted, failOnDataLoss=true): the same records as read_log,
    or a failed job naming the same bytes and offsets. So both Spark readers meet every fixture of
    the matrix in every run; the full tier adds the other isolation level and failOnDataLoss=false."""
    root, part = dirs[case]
    want, stopped, _met = _expected(part, IsolationLevel.READ_UNCOMMITTED, skip=False)
    df = _read(spark, fmt, root, "read_uncommitted")
    if stopped is None:
        assert _rows(df) == sorted(want)
        return
    with pytest.raises(Exception) as ei:
        df.count()
    msg = str(ei.value)
    assert f"{stopped.path}: {stopped.size} bytes from byte {stopped.position} could not be read" in msg, msg[-3000:]
    assert f"{stopped.offsets()} are in or behind them" in msg, msg[-3000:]


def test_a_directory_without_partitions_is_an_error_not_an_empty_read(spark, fmt, tmp_path):
    """A batch read of a directory holding no partition folder (a path one level off, a layout
    not recognised) says so in both readers' words; a topic filter that matches none of the
    partitions is an empty read, as Kafka's source reads a topic without records."""
    root = tmp_path / "not-a-log-dir"
    (root / "orders").mkdir(parents=True)
    (root / "notes.txt").write_text("hi")
    with pytest.raises(Exception) as ei:
        spark.read.format(fmt).load(str(root)).count()
    assert (f"kafka-segments: no partition folders under {root}: expected <topic>-<partition> folders or a "
            "tiered-storage layout (docs/remote.md), found notes.txt, orders") in str(ei.value), str(ei.value)[-2000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Exception, match="found an empty directory"):
        spark.read.format(fmt).load(str(empty)).count()
    part = tmp_path / "log" / "t-0"
    C.CASES["txn-closed"](str(part))
    assert spark.read.format(fmt).option("topics", "other").load(str(tmp_path / "log")).count() == 0
