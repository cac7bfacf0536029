"""The Spark session of tests/spark: one local session for the whole run (`spark_session`), and
`spark`, the same session with kafka-segments registered for the module that asks for it.

Every module reads through `spark` (Python filter pushdown on, as test_spark.py reads) or
overrides it with `register_on(spark_session, pushdown=False)`: each module registers what it reads,
so no module depends on which ran before it. Child-process sessions (a killed query, S3A, packed
environments) build their own, and so does test_kafka_source_equality.py only in adding Spark's
Kafka source jars to this one.
"""
from __future__ import annotations

import os
import sys

import pytest

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


@pytest.fixture(scope="session")
def spark_session():
    """A local[2] session without UI, UTC, two shuffle partitions; stopped at the end of the run.
    Python workers import the kbatch under test (src/ first on their PYTHONPATH)."""
    pytest.importorskip("pyspark.sql.datasource")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName("kbatch-tests")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
         # the streaming tests read every micro-batch's progress back
         .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def registered(session, pushdown: bool):
    """kafka-segments registered on `session` (the JVM reader where its jar loads), with Spark's
    Python filter pushdown switch set to `pushdown` either way; `session.kbatch_reader` says which
    reader is live."""
    import kbatch.spark as ks

    session.conf.set(ks.PUSHDOWN_CONF, "true" if pushdown else "false")
    session.kbatch_reader = ks.register(session, pushdown=pushdown)
    return session


@pytest.fixture(scope="session")
def register_on():
    """registered(), for a module that reads kafka-segments otherwise: its own `spark` fixture is
    `register_on(spark_session, pushdown=False)`."""
    return registered


@pytest.fixture(scope="module")
def spark(spark_session):
    """The session with kafka-segments registered, Python filter pushdown on (the JVM reader always
    pushes filters down)."""
    return registered(spark_session, pushdown=True)
