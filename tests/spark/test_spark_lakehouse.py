"""docs/spark.md's backfill with Spark's own Delta writer, run as written: `format("kafka-segments")`
into `write.format("delta")`, read back with deltalake, rows equal to the read path's
(kbatch.read_topic, read_committed) of the same partitions.

Delta's jars come from Maven Central through tools/lakehouse_jars.py (the build for the installed
pyspark's Spark, else the newest: on pyspark 4.3.0, Delta 4.4.0 built for Spark 4.2, which creates
tables but cannot read them in Spark, docs/spark.md). Skipped, saying why, only without pyspark and
Java or when Maven Central cannot be reached."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import tool_module

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def the_block() -> str:
    text = (ROOT / "docs" / "spark.md").read_text()
    section = text.split("## Backfill into Delta and Iceberg tables with Spark's own writers", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"


def lakehouse_jars():
    return tool_module("lakehouse_jars")


def test_spark_backfill_into_delta_reads_back_as_the_read_path(tmp_path):
    if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
        pytest.skip("needs pyspark and Java (the spark extra)")
    pytest.importorskip("deltalake")
    pa = pytest.importorskip("pyarrow")
    import pyspark

    import kbatch

    tool = lakehouse_jars()
    why = tool.kafka_dist_module().central_reachable()
    if why is not None and not all(
            (tool.cache_root() / g / f"{a}-{v}.jar").exists() for g, a, v in tool.coordinates("delta", pyspark.__version__)[0]):
        pytest.skip(f"Maven Central cannot be reached ({why}) and Delta's jars are not in the cache")
    jars, _note = tool.fetch("delta", pyspark.__version__)
    env = dict(os.environ, DELTA_JARS=",".join(str(j) for j in jars), PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=str(Path(kbatch.__file__).parents[1]))  # Python workers: this interpreter
    proc = subprocess.run([sys.executable, "-c", the_block()], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]

    from deltalake import DeltaTable

    key = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    got = DeltaTable(str(tmp_path / "orders_spark_delta")).to_pyarrow_dataset().to_table(use_threads=False).sort_by(key)
    want = kbatch.read_topic(str(tmp_path / "sample-data"), isolation="read_committed").sort_by(key)
    assert got.num_rows == want.num_rows > 0
    for name in ("topic", "partition", "offset", "key", "value", "timestampType"):
        assert got[name].to_pylist() == want[name].to_pylist(), name
    assert got["timestamp"].cast(pa.int64()).to_pylist() == want["timestamp"].cast(pa.int64()).to_pylist()
    assert sorted(DeltaTable(str(tmp_path / "orders_spark_delta")).metadata().partition_columns) == ["partition", "topic"]
