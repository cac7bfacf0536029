"""docs/spark.md's Schema Registry example, run as written: spark-avro's from_avro after the 5-byte
header, each writer schema from a `_schemas` directory read offline, the newest as reader schema.

spark-avro comes from Maven Central through spark.jars.packages: the release matching pyspark, else
(a pyspark newer than any spark-avro published there) the newest published one of the same major
version; without the network, or without pyspark and Java, the test is skipped and says why."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CENTRAL = "https://repo1.maven.org/maven2/org/apache/spark/spark-avro_2.13/maven-metadata.xml"


def the_block() -> str:
    text = (ROOT / "docs" / "spark.md").read_text()
    section = text.split("## Schema Registry values", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"


def spark_avro_version(pyspark_version: str) -> str | None:
    try:
        with urllib.request.urlopen(CENTRAL, timeout=30) as resp:
            published = re.findall(r"<version>([^<]+)</version>", resp.read().decode())
    except OSError:
        return None
    if pyspark_version in published:
        return pyspark_version

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    same_major = [v for v in published if v.split(".")[0] == pyspark_version.split(".")[0] and "preview" not in v
                  and key(v) <= key(pyspark_version)]
    return max(same_major, key=key) if same_major else None


def test_from_avro_after_the_header_with_writer_schemas_from_the_schemas_topic(tmp_path):
    if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
        pytest.skip("needs pyspark and Java (the spark extra)")
    pytest.importorskip("fastavro")
    import pyspark

    version = spark_avro_version(pyspark.__version__)
    if version is None:
        pytest.skip(f"no spark-avro for Spark {pyspark.__version__} on Maven Central (or it cannot be reached)")
    env = dict(os.environ, SPARK_AVRO_VERSION=version, PYTHONPATH=str(Path(__import__("kbatch").__file__).parents[1]))
    proc = subprocess.run([sys.executable, "-c", the_block()], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
