"""The JVM reader: kbatch's Java DataSource V2 for `kafka-segments`, shipped as a jar in the wheel.

Two readers serve the one name. The Java one (java/kafka-segments in the repository, built by
Maven at install time) reads segments on the JVM into columnar batches, with column
pruning and filter pushdown; the Python one (datasource.py) works wherever kbatch imports. A JVM
DataSourceRegister of a short name takes precedence over a Python data source of the same name,
so once the jar is on the session's class path `format("kafka-segments")` is the JVM reader.

    kbatch.spark.register(spark)      # adds the jar (ADD JAR) and says which reader is live
    kbatch.spark.jar_path()           # for spark-submit --jars / spark.jars on a cluster

KBATCH_SPARK_READER=auto|jvm|python (or register(spark, reader=...)) picks: `jvm` fails loudly
when the jar cannot be loaded, `python` leaves the jar out.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("kbatch.spark")

JVM_CLASS = "kbatch.spark.KafkaSegmentsSource"
JVM_NAME = "kafka-segments-jvm"
JAR_NAME = "kbatch-kafka-segments.jar"
READERS = ("auto", "jvm", "python")


@dataclass(frozen=True)
class Reader:
    """Which reader serves `kafka-segments` in a session: kind "jvm" or "python", the jar (JVM),
    and why (for the Python reader: why the JVM one is not live)."""

    kind: str
    jar: str | None
    reason: str

    @property
    def is_jvm(self) -> bool:
        return self.kind == "jvm"

    def __str__(self) -> str:
        if self.is_jvm:
            return f"kafka-segments: JVM reader ({self.reason})"
        return f"kafka-segments: Python reader ({self.reason})"


#: what gives a build from source the jar (java/maven.py says the same at build time)
FIX = ("install a JDK 17+ and Maven (Debian/Ubuntu: apt-get install -y openjdk-17-jdk-headless maven) and "
       "reinstall kbatch from source, e.g. pip install --force-reinstall --no-deps '.[spark]' in a checkout")


def why_no_jar() -> str:
    """Why this installation has no jar, as its build recorded it (jars/NO_JAR.txt, java/maven.py)."""
    try:
        why = (Path(__file__).resolve().parent / "jars" / "NO_JAR.txt").read_text().strip()
    except OSError:
        why = ""
    return why or "it was built without a JDK or Maven"


def jar_path() -> str | None:
    """The JVM reader's jar inside this installation, or None when this build has none (built
    without a JDK or Maven; see docs/spark.md and why_no_jar()). For spark-submit:
    `--jars $(python -c 'import kbatch.spark; print(kbatch.spark.jar_path())')`."""
    p = Path(__file__).resolve().parent / "jars" / JAR_NAME
    return str(p) if p.is_file() else None


def _jvm_of(spark: SparkSession) -> tuple[Any, Any]:
    """(py4j gateway view, Java session) of a classic session; None for Spark Connect (py4j's
    objects have no types: Any)."""
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None) if hasattr(spark, "_jsparkSession") else None
    return (jvm, spark._jsparkSession) if jvm is not None else (None, None)


def provider_class(spark: SparkSession, name: str = "kafka-segments") -> str | None:
    """The JVM class Spark resolves the short name to, or None when only a Python data source has it."""
    jvm, jsession = _jvm_of(spark)
    if jvm is None:
        return None
    try:
        cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, jsession.sessionState().conf())
        return str(cls.getName())
    except Exception:  # noqa: BLE001 - py4j raises for "not found"; a Python source may still have the name
        return None


def live_reader(spark: SparkSession) -> Reader:
    """Which reader serves `kafka-segments` in this session now."""
    cls = provider_class(spark)
    if cls == JVM_CLASS:
        return Reader("jvm", jar_path(), f"{JVM_CLASS} {jvm_version(spark)}")
    if cls is not None:
        return Reader("python", None, f"another JVM source holds the name: {cls}")
    return Reader("python", None, "the JVM reader is not on this session's class path")


def jvm_version(spark: SparkSession) -> str:
    jvm, _ = _jvm_of(spark)
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        return str(jvm.java.lang.Class.forName(JVM_CLASS, True, loader).getField("VERSION").get(None))
    except Exception:  # noqa: BLE001
        return "unknown"


def load(spark: SparkSession, reader: str = "auto") -> Reader:
    """Put the JVM reader on the session (ADD JAR, when it is not there yet) and say which reader
    serves `kafka-segments`. reader="python" leaves the jar out; "jvm" raises when it cannot load."""
    reader = (os.environ.get("KBATCH_SPARK_READER") or reader or "auto").strip().lower()
    if reader not in READERS:
        raise ValueError(f"kafka-segments reader must be one of {', '.join(READERS)}, not {reader!r}")
    if reader == "python":
        live = live_reader(spark)
        if live.is_jvm:  # spark.jars put it there at start: a running session cannot drop a jar
            log.warning("kbatch.spark: reader='python' asked, but the JVM reader is already on the class path "
                        "(spark.jars?); use format('kafka-segments-python') for the Python reader")
            return live
        return Reader("python", None, "asked for (reader='python' / KBATCH_SPARK_READER=python)")
    out = _load_jvm(spark)
    if reader == "jvm" and not out.is_jvm:
        raise RuntimeError(f"kbatch.spark: the JVM reader was asked for and cannot be used: {out.reason}")
    return out


def _load_jvm(spark: SparkSession) -> Reader:
    jvm, _ = _jvm_of(spark)
    if jvm is None:
        return Reader("python", None, "a Spark Connect session: its server needs the jar (kbatch.spark.jar_path()) "
                                      "in spark.jars")
    live = live_reader(spark)
    if live.is_jvm:
        return live
    jar = jar_path()
    if jar is None:
        return Reader("python", None, f"this kbatch build has no jar ({why_no_jar()}); to get the JVM reader, "
                                      f"{FIX}")
    try:
        spark.sql("ADD JAR '{}'".format(jar.replace("\\", "\\\\").replace("'", "\\'")))
    except Exception as e:  # noqa: BLE001 - a locked-down cluster: the Python reader keeps the name
        return Reader("python", None, f"ADD JAR {jar} failed: {type(e).__name__}: {str(e).splitlines()[0]}")
    live = live_reader(spark)
    if not live.is_jvm:
        return Reader("python", None, f"ADD JAR {jar} did not make {JVM_CLASS} visible ({live.reason})")
    return Reader("jvm", jar, f"{JVM_CLASS} {jvm_version(spark)} from {jar}")


__all__ = ["Reader", "jar_path", "load", "live_reader", "provider_class", "JVM_CLASS", "JVM_NAME", "JAR_NAME"]
