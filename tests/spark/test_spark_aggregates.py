"""The JVM reader's aggregate pushdown (issue 40): COUNT(*), COUNT grouped by topic and/or
partition, MIN/MAX(offset) and MAX(timestamp), answered on the driver from batch headers, equal to
the same query with pushdown off (`pushDownAggregates=false`: Spark reads the rows) on

- the read-path matrix (tests/support/read_path_cases.py: transactions open, committed, aborted,
  with and without `.txnindex`, and damage), both isolation levels, failOnDataLoss true and false;
- the corner segment (tests/support/segment_corpus.py: every codec, magic 0/1, a delete-horizon
  batch, compaction's gaps and empty batch, LogAppendTime, timestamps beyond Spark's range);
- a topic compacted by kbatch.compact, and real brokers' directories (tests/data/brokers, with the
  compacted `__consumer_offsets` and KRaft metadata);
- offset options, pushed filters (partition, offset ranges) and a file appended to between two
  queries (a remembered summary must not answer for a changed file).

The physical plan says whether it was pushed: a LocalTableScan (the answer) and no BatchScan when
pushed; when a filter stays in Spark, or the session conf turns it off, the rows are read.
One Spark session (tests/spark/conftest.py); a few dozen small queries.
"""
from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark.sql.datasource")

import kbatch  # noqa: E402

from support import read_path_cases as C  # noqa: E402
from support import segment_corpus  # noqa: E402

pytestmark = pytest.mark.spark

FMT = "kafka-segments-jvm"


@pytest.fixture(scope="module")
def spark(spark_session, register_on):
    s = register_on(spark_session, pushdown=False)
    if not s.kbatch_reader.is_jvm:
        pytest.skip(f"the JVM reader is not live: {s.kbatch_reader.reason}")
    return s


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """One root holding every read-path case as its own topic (`<case>-0`), and one per failing case."""
    root = str(tmp_path_factory.mktemp("agg-matrix"))
    parts = C.build_all(root, sorted(C.SPARK_CASES))
    return root, parts


def _frame(spark, root, push=True, **options):
    return (spark.read.format(FMT).option("pushDownAggregates", "true" if push else "false")
            .options(**options).load(root))


def _q_global(df):
    from pyspark.sql import functions as F

    r = df.agg(F.count("*"), F.min("offset"), F.max("offset"), F.max("timestamp"), F.count("partition")).collect()
    return [tuple(x) for x in r]


def _q_grouped(df):
    from pyspark.sql import functions as F

    r = (df.groupBy("topic", "partition")
         .agg(F.count("*"), F.min("offset"), F.max("offset"), F.max("timestamp")).collect())
    return sorted(tuple(x) for x in r)


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _pushed(df) -> bool:
    p = _plan(df)
    return "LocalTableScan" in p and "BatchScan" not in p


def _outcome(q, df):
    """The answer, or the error's first line (a failed read fails the same way either way)."""
    try:
        return "ok", q(df)
    except Exception as e:  # noqa: BLE001 - compared, not swallowed
        return "error", type(e).__name__


def _same(spark, root, q, expect_pushed=None, **options):
    pushed_df = _frame(spark, root, **options)
    got = _outcome(q, pushed_df)
    want = _outcome(q, _frame(spark, root, push=False, **options))
    assert got == want, (options, got, want)
    if expect_pushed is not None and got[0] == "ok":
        assert _pushed(q_frame(q, pushed_df)) == expect_pushed, _plan(q_frame(q, pushed_df))
    return got


def q_frame(q, df):
    """The DataFrame a query collects (for its plan)."""
    from pyspark.sql import functions as F

    if q is _q_global:
        return df.agg(F.count("*"), F.min("offset"), F.max("offset"), F.max("timestamp"), F.count("partition"))
    if q is _q_grouped:
        return df.groupBy("topic", "partition").agg(F.count("*"), F.min("offset"), F.max("offset"),
                                                     F.max("timestamp"))
    return df.groupBy("partition").count()


def test_readable_cases_are_answered_from_headers(spark, matrix):
    """Every case the read path reads whole, as topics of one root: each topic's figures pushed
    equal to the rows' (read_committed: aborted transactions and markers out, stopped at the LSO)."""
    root, _parts = matrix
    readable = sorted(set(C.SPARK_CASES) - C.FAILING)
    got = {}
    for isolation in sorted(C.ISOLATION):
        got[isolation] = _same(spark, root, _q_grouped, expect_pushed=True, topics=",".join(readable),
                               **{"isolation.level": isolation})
        assert got[isolation][0] == "ok" and len(got[isolation][1]) == len(readable)
    ru = {(r[0], r[1]): r[2] for r in got["read_uncommitted"][1]}
    assert any(r[2] < ru[(r[0], r[1])] for r in got["read_committed"][1])  # transactions were left out


#: damage in a middle segment, in the active one, and a transaction marker's CRC
DAMAGED = ("crc-middle", "crc-active", "txn-markers-torn")


def test_damaged_cases_give_the_reads_answer_or_its_error(spark, matrix):
    """Damage: nothing is answered from headers; the read fails as it fails (failOnDataLoss=true)
    or skips what it skips (false) either way."""
    root, _parts = matrix
    for case in DAMAGED:
        assert case in C.FAILING
        got = _same(spark, root, _q_global, topics=case)
        assert got[0] == "error", case
    failing = ",".join(sorted(C.FAILING & set(C.SPARK_CASES)))
    got = _same(spark, root, _q_grouped, topics=failing, failOnDataLoss="false")
    assert got[0] == "ok"
    assert not _pushed(q_frame(_q_grouped, _frame(spark, root, topics=failing, failOnDataLoss="false")))


def test_offset_options_and_pushed_filters(spark, matrix):
    """Offset ranges cut batches (boundary batches are decoded); partition and offset filters are
    exact, so the aggregate over them is still pushed; a timestamp or key filter stays in Spark and
    nothing is pushed (the rows are read: the same answer by construction)."""
    from pyspark.sql import functions as F

    root, _parts = matrix
    t = "txn-closed"
    for opts in ({"startingOffsets": '{"%s": {"0": 3}}' % t, "endingOffsets": '{"%s": {"0": 11}}' % t},
                 {"startingOffsets": "latest"}, {"endingOffsets": '{"%s": {"0": 1}}' % t,
                                                 "isolation.level": "read_committed"}):
        _same(spark, root, _q_global, expect_pushed=True, topics=t, **opts)
    opts = {"topics": t, "isolation.level": "read_committed"}
    for cond in (F.col("offset").between(4, 13), (F.col("partition") == 0) & (F.col("offset") > 7)):
        df = _frame(spark, root, **opts).where(cond)
        assert _q_global(df) == _q_global(_frame(spark, root, push=False, **opts).where(cond)), cond
        assert _pushed(q_frame(_q_global, df)), _plan(q_frame(_q_global, df))
    for cond in (F.col("timestamp") > F.timestamp_millis(F.lit(0)), F.col("key").isNotNull()):
        df = q_frame(_q_global, _frame(spark, root, **opts).where(cond))
        assert not _pushed(df), (cond, _plan(df))


def test_switches_turn_it_off(spark, matrix):
    """Session conf spark.kbatch.pushDownAggregates=false, options pushdown=false and
    verifyCrc=false, and aggregates that need records: the rows are read."""
    from pyspark.sql import functions as F

    root, _parts = matrix
    df = _frame(spark, root, topics="txn-closed")
    assert _pushed(df.groupBy("partition").count())
    spark.conf.set("spark.kbatch.pushDownAggregates", "false")
    try:
        assert not _pushed(_frame(spark, root, topics="txn-closed").groupBy("partition").count())
    finally:
        spark.conf.unset("spark.kbatch.pushDownAggregates")
    for opts in ({"pushdown": "false"}, {"verifyCrc": "false"}):
        assert not _pushed(_frame(spark, root, topics="txn-closed", **opts).groupBy("partition").count())
    for agg in (F.min("timestamp"), F.count("key"), F.countDistinct("offset")):
        assert not _pushed(_frame(spark, root, topics="txn-closed").agg(agg))
    assert not _pushed(_frame(spark, root, topics="txn-closed").groupBy("key").count())


def _corner_and_compacted(root: str) -> None:
    part = os.path.join(root, "corner-0")
    os.makedirs(part)
    with open(os.path.join(part, "0" * 20 + ".log"), "wb") as f:
        f.write(segment_corpus.corner_segment())
    kbatch.rebuild_indexes(part)
    # a compacted topic: keys overwritten and deleted over three segments, then cleaned as a broker does
    part = os.path.join(root, "compacted-0")
    t0 = 1_700_000_000_000
    log = kbatch.Log.create(part, kbatch.LogConfig(segment_bytes=2000, index_interval_bytes=100), now_ms=t0)
    try:
        for i in range(0, 300, 3):
            b = kbatch.BatchBuilder(base_offset=i)
            for k in range(i, i + 3):  # CreateTime out of order inside a batch
                b.append(t0 + k * 1000 - (5000 if k % 3 == 1 else 0), b"key-%d" % (k % 23),
                         None if k % 11 == 0 else b"value-%d" % k)
            log.append(b.build(), now_ms=t0, from_client=False)
    finally:
        log.close()
    kbatch.compact(part, now_ms=t0 + 300_000, delete_retention_ms=100_000)


def test_corner_segment_compacted_topic_and_real_brokers(spark, tmp_path):
    from log.test_broker_data import BROKER_DIRS, broker_copy

    root = str(tmp_path / "corner")
    os.makedirs(root)
    _corner_and_compacted(root)
    for iso in ("read_uncommitted", "read_committed"):
        got = _same(spark, root, _q_grouped, expect_pushed=True, **{"isolation.level": iso})
        assert got[0] == "ok" and len(got[1]) == 2
    for name in BROKER_DIRS:
        broker = str(broker_copy(name, tmp_path))
        got = _same(spark, broker, _q_grouped, expect_pushed=True, includeInternalTopics="true")
        assert got[0] == "ok" and got[1], name


def test_a_remembered_summary_never_answers_for_a_changed_file(spark, tmp_path):
    """Count, append to the active segment, count again: the new records are counted (the file's
    length is in the key); a sealed segment rewritten with other batches is walked again."""
    part = tmp_path / "grow" / "g-0"
    t0 = 1_700_000_000_000
    log = kbatch.Log.create(str(part), kbatch.LogConfig(segment_bytes=600), now_ms=t0)
    try:
        for i in range(40):
            b = kbatch.BatchBuilder(base_offset=i * 2)
            b.append(t0 + i, b"k", b"v" * 20)
            b.append(t0 + 1 + i, b"k", b"w" * 20)
            log.append(b.build(), now_ms=t0, from_client=False)
    finally:
        log.close()
    root = str(tmp_path / "grow")
    first = _same(spark, root, _q_global, expect_pushed=True)
    assert first[1][0][0] == 80
    log = kbatch.Log.open(str(part), writable=True, now_ms=t0)
    try:
        b = kbatch.BatchBuilder(base_offset=80)
        b.append(1_800_000_000_000, b"k", b"late")
        log.append(b.build(), now_ms=t0, from_client=False)
    finally:
        log.close()
    again = _same(spark, root, _q_global, expect_pushed=True)
    assert again[1][0][0] == 81 and again[1][0][2] == 80


def test_trusted_headers_answer_as_the_read_on_readable_cases(spark, matrix):
    """trustHeaders=true (no CRCs, batches hopped over by their lengths): every readable case of
    the matrix, both isolation levels, pushed and equal to the rows."""
    root, _parts = matrix
    readable = sorted(set(C.SPARK_CASES) - C.FAILING)
    for isolation in sorted(C.ISOLATION):
        got = _same(spark, root, _q_grouped, expect_pushed=True, topics=",".join(readable), trustHeaders="true",
                    **{"isolation.level": isolation})
        assert got[0] == "ok" and len(got[1]) == len(readable)


def test_a_flipped_bit_in_a_record_is_caught_by_default_and_missed_with_trusted_headers(spark, tmp_path):
    """A bit flipped inside a record value of a sealed segment: by default the count is the read's
    CRC error (nothing answered from headers); with trustHeaders=true the header answers, counting
    the damaged batch as good: what the opt-in misses (docs/spark.md)."""
    part = tmp_path / "flip" / "f-0"
    t0 = 1_700_000_000_000
    log = kbatch.Log.create(str(part), kbatch.LogConfig(segment_bytes=600), now_ms=t0)
    try:
        for i in range(20):
            b = kbatch.BatchBuilder(base_offset=i * 2)
            b.append(t0 + i, b"k", b"v" * 20)
            b.append(t0 + 1 + i, b"k", b"w" * 20)
            log.append(b.build(), now_ms=t0, from_client=False)
    finally:
        log.close()
    first = sorted(p for p in os.listdir(part) if p.endswith(".log"))[0]
    with open(part / first, "r+b") as f:
        data = f.read()
        at = data.index(b"w" * 20) + 5
        f.seek(at)
        f.write(bytes([data[at] ^ 0x10]))
    root = str(tmp_path / "flip")
    from pyspark.sql import functions as F

    def count(df):
        return df.agg(F.count("*")).collect()[0][0]

    with pytest.raises(Exception, match="(?i)corrupt|crc"):
        count(_frame(spark, root))
    trusted = _frame(spark, root, trustHeaders="true")
    assert _pushed(trusted.agg(F.count("*")))
    assert count(trusted) == 40
