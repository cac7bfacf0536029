"""Both stream readers (`kafka-segments-jvm`, `kafka-segments-python`) against the read path on the
damage issue 38 named: a transaction whose marker may be in a torn sealed segment (read_committed
used to stop at its first offset for ever, as at a last stable offset) and a forged base offset
(readers used to stop silently or give an offset twice). With failOnDataLoss=true the query fails
naming the bytes read_log names; with false it gives read_log(skip_unreadable=True)'s records.
The batch readers are held to the same cases by test_spark_read_path.py.
"""
import os

import pytest

pytest.importorskip("pyspark.sql.datasource")

from support import read_path_cases as C  # noqa: E402

pytestmark = pytest.mark.spark

READERS = {"python": "kafka-segments-python", "jvm": "kafka-segments-jvm"}
CASES = {"txn-markers-torn": "read_committed", "forged-base-high": "read_uncommitted",
         "forged-base-low": "read_uncommitted"}


@pytest.fixture(scope="module")
def spark(spark_session, register_on):
    return register_on(spark_session, pushdown=False)


@pytest.fixture(scope="module", params=sorted(READERS))
def fmt(request, spark):
    if request.param == "jvm" and not spark.kbatch_reader.is_jvm:
        pytest.skip(f"the JVM reader is not live: {spark.kbatch_reader.reason}")
    return READERS[request.param]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    out = {}
    for case in CASES:
        root = str(tmp_path_factory.mktemp(case))
        C.CASES[case](os.path.join(root, "t-0"))
        out[case] = root
    return out


def _stream(spark, fmt, root, tmp, isolation, fail):
    df = (spark.readStream.format(fmt).option("isolation.level", isolation)
          .option("failOnDataLoss", "true" if fail else "false").load(root))
    q = (df.writeStream.format("parquet").option("checkpointLocation", str(tmp / "ckpt"))
         .option("path", str(tmp / "sink")).trigger(availableNow=True).start())
    try:
        q.awaitTermination(300)
    finally:
        q.stop()
    return q


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stream_names_the_damage_or_skips_it_as_the_read_path_does(spark, fmt, dirs, case, tmp_path):
    root, isolation = dirs[case], CASES[case]
    part = os.path.join(root, "t-0")
    level = C.ISOLATION[isolation]
    _want, stopped, _met = C.expected(part, level, skip=False)
    assert stopped is not None, "the read path stops in each of these cases"
    named = f"{stopped.path}: {stopped.size} bytes from byte {stopped.position} could not be read"
    with pytest.raises(Exception) as ei:
        q = _stream(spark, fmt, root, tmp_path / "strict", isolation, fail=True)
        if q.exception() is not None:
            raise Exception(str(q.exception()))
    assert named in str(ei.value), str(ei.value)[-3000:]

    want, _stop, _met = C.expected(part, level, skip=True)
    q = _stream(spark, fmt, root, tmp_path / "skip", isolation, fail=False)
    assert q.exception() is None
    got = sorted((r["offset"], bytes(r["value"])) for r in spark.read.parquet(str(tmp_path / "skip" / "sink"))
                 .select("offset", "value").collect())
    assert got == sorted((o, v) for o, _k, v, _ts in want)
