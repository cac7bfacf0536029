"""The object-storage examples of docs/cli.md, docs/remote.md and docs/spark.md run as written
against a real S3 API on loopback (the `s3` fixture: moto's server mode, AWS_* in the environment
as a user sets them). The Spark example runs in a fresh process, as a user starts it, and its
rows are checked against the same job over the local copy."""
import json
import os
import subprocess
import sys

import pytest

from system.test_docs_columns import SRC, blocks, run_blocks

pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")

CHECK = r"""
import json
def rows(path, **opts):
    d = spark.read.format("kafka-segments").options(**opts).load(path)
    return sorted(json.dumps([r["topic"], r["partition"], r["offset"], r["key"] and r["key"].hex(),
                              r["value"] and r["value"].hex(), str(r["timestamp"]), r["isTombstone"]])
                  for r in d.collect())
out = {}
for name, opts in (("all", {}), ("from", {"startingTimestamp": "1700000000000"})):
    remote, local = rows("s3://kbatch-docs/logs/", **opts), rows("sample-topics", **opts)
    out[name] = [len(remote), remote == local]
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def docs_bucket(s3, tmp_path_factory):
    """The bucket docs/cli.md's Remote paths example fills, and the directory it ran in."""
    s3.counting  # the fixture's server is up
    return tmp_path_factory.mktemp("docs-remote")


def test_cli_md_remote_paths_run(s3, docs_bucket, monkeypatch):
    run_blocks(blocks("cli.md", after="## Remote paths", until="## `kbatch export"), docs_bucket, monkeypatch)
    assert (docs_bucket / "orders-2.parquet").is_file()
    run_blocks(blocks("remote.md"), docs_bucket, monkeypatch)


@pytest.mark.spark
def test_spark_md_object_storage_example_runs_in_a_fresh_process(s3, docs_bucket, monkeypatch):
    pytest.importorskip("pyspark.sql.datasource", reason="PySpark >= 4.1 (Python data sources) is not installed")
    if not (docs_bucket / "sample-topics").is_dir():
        run_blocks(blocks("cli.md", after="## Remote paths", until="```bash"), docs_bucket, monkeypatch)
    [(lang, code)] = blocks("spark.md", after="## Reading from object storage", until="## Writing")
    assert lang == "python"
    env = dict(os.environ, **s3.env(), PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1",  # loopback only, and no UI server, as the other Spark tests
               PYSPARK_SUBMIT_ARGS="--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
                                   "pyspark-shell")
    res = subprocess.run([sys.executable, "-c", code + CHECK + "spark.stop()\n"], env=env, cwd=docs_bucket,
                         capture_output=True, text=True, timeout=300)
    line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    assert res.returncode == 0 and line, res.stderr[-3000:]
    out = json.loads(line[0][len("RESULT "):])
    assert out["all"][1] and out["all"][0] > 2000
    assert out["from"][1] and 0 < out["from"][0] <= out["all"][0]
