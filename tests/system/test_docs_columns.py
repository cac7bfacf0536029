"""The examples of docs/columns.md, of `kbatch export` / `kbatch import` in docs/cli.md and of the
Spark writer in docs/spark.md run as written: python blocks in one namespace, bash lines as
`kbatch` (exit 0) or `python -c`, in order, in an empty directory."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
SRC = Path(__file__).resolve().parents[2] / "src"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(name: str, after: str | None = None, until: str | None = None):
    text = (DOCS / name).read_text()
    if after is not None:
        text = text[text.index(after):]
    if until is not None and until in text:
        text = text[:text.index(until)]
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def run_blocks(found, tmp_path, monkeypatch):
    from kbatch import cli

    assert found
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    namespace = {}
    for lang, code in found:
        if lang == "python":
            exec(compile(code, "<doc>", "exec"), namespace)  # noqa: S102 - the documented example
            continue
        assert lang == "bash", lang
        for line in code.splitlines():
            if not line.strip():
                continue
            argv = shlex.split(line)
            if argv[0] == "kbatch":
                assert cli.main(argv[1:]) == 0, line
            else:
                assert argv[0] == "python", line
                subprocess.run([sys.executable] + argv[1:], check=True, env=env, timeout=120)


def test_columns_md_runs(tmp_path, monkeypatch):
    pytest.importorskip("typer")
    run_blocks(blocks("columns.md"), tmp_path, monkeypatch)
    assert (tmp_path / "demo-spread").is_dir() and sorted(os.listdir(tmp_path / "demo-spread")) == [
        "users-0", "users-1", "users-2"]


def test_cli_md_export_import_run(tmp_path, monkeypatch):
    pytest.importorskip("typer")
    run_blocks(blocks("cli.md", after="## `kbatch export"), tmp_path, monkeypatch)
    assert (tmp_path / "cli-replay" / "orders-0").is_dir() and (tmp_path / "orders.parquet").is_file()


@pytest.mark.spark
def test_spark_md_writer_runs(tmp_path, monkeypatch):
    pytest.importorskip("pyspark.sql.datasource")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    from pyspark.sql import SparkSession

    # the session the example's getOrCreate() returns: no UI server, as the other Spark tests
    (SparkSession.builder.master("local[2]").appName("kbatch-tests").config("spark.ui.enabled", "false")
     .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
     .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    run_blocks(blocks("spark.md", after="## Writing", until="## Building wheels"), tmp_path, monkeypatch)
