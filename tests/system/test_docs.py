"""Docs that run: every code block of README.md and docs/*.md is executed as written, and the API
reference (docs/api.md) names every public name.

Blocks are fenced and tagged:
  ```python  runs in a fresh interpreter, in an empty temporary directory;
  ```bash    runs with `bash -euo pipefail` in an empty temporary directory, with the interpreter's
             bin directory (python, kbatch) first on PATH;
  ```text    output, file layouts and tables: not code, never run.
Blocks that are one example in steps (RUN_IN_SEQUENCE) run in order in tests/system/test_docs_columns.py.
A python/bash block that cannot run here says so to the reader in its first line,
`# (not run by the docs test: <why>)`, and must be in NOT_RUN below with the reason: keep it tiny.
Untagged fences and indented code blocks are refused, so no code hides from this test.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import kbatch

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KBATCH_PARENT = str(Path(kbatch.__file__).resolve().parents[1])
LANGS = ("python", "bash", "text")
NOT_RUN_MARK = re.compile(r"^#\s*\(not run by the docs test: (.+)\)\s*$")

# (file, first command of the block) -> why it cannot run inside the test suite
NOT_RUN = {
    ("README.md", "python3 dev.py demo"):
        "the quick start: `dev.py test` is this suite itself (.ci/run runs it) and the demo takes minutes",
    ("README.md", "python3 dev.py wheel"):
        "builds and installs a release (minutes); `python3 dev.py wheel` is its own check",
    ("spark.md", "python -m venv pyspark_env && source pyspark_env/bin/activate"):
        "needs spark-submit and a wheelhouse; tests/spark/test_spark_packed.py runs the same steps",
    ("spark.md", "KBATCH_JAR=$(python -c 'import kbatch.spark; print(kbatch.spark.jar_path())')"):
        "needs spark-submit and a job; tests/spark/test_spark_packed.py ships the jar to executors the same way",
    ("README.md", "pip install '<wheel or checkout>[serve,cli]'"):
        "kcat (not a Python package) against a server left running; docs/serve.md's Python example runs",
    ("serve.md", "pip install '<wheel or checkout>[serve,cli]'"):
        "kcat against a server left running; the Python example after it runs, tests/test_serve*.py more",
    ("spark.md", "import io, json, os, sys"):
        "fetches spark-avro from Maven Central; tests/spark/test_spark_schemas.py runs the block where it can",
    ("spark.md", "import os, subprocess, sys"):
        "needs Delta's jars from Maven Central and a Spark session; tests/spark/test_spark_lakehouse.py runs it",
    ("spark.md", "spark-submit --packages org.apache.hadoop:hadoop-aws:3.5.0 \\"):
        "spark-submit against a real bucket; tests/spark/test_spark_s3a.py reads the same way from moto",
    ("spark.md", "pip install cibuildwheel"):
        "cibuildwheel needs a container engine; the wheels workflow runs it",
    ("compat.md", "PYTHONPATH=src .venv/bin/python tools/peer_suites.py --kafka-python ../kafka-python "
                  "--aiokafka ../aiokafka"):
        "needs checkouts of the clients' repositories at their release tags",
    ("engines.md", "from datetime import datetime"):
        "starts a Ray cluster (~20 s); tests/scan/test_ray.py makes the same calls on a local cluster",
    ("real-kafka.md", "python3 dev.py kafka fetch"):
        "fetches Kafka's jars with Maven and starts brokers for minutes; tests/system/test_real_kafka.py runs them",
}


# Sections whose blocks are one example in steps (later blocks use what earlier ones made):
# tests/system/test_docs_columns.py runs each of them in order, in one directory and one namespace.
# file -> (from this heading, up to this one or the end)
RUN_IN_SEQUENCE = {
    "columns.md": ("", None),
    "cli.md": ("## `kbatch export", None),
    "spark.md": ("## Writing", "## Building wheels"),
}
SEQUENCE_TEST = Path(__file__).resolve().parent / "test_docs_columns.py"
# Sections about object storage: their blocks run in order against an S3 API on loopback (moto),
# with AWS_* in the environment as a user sets them, in tests/system/test_docs_remote.py.
RUN_WITH_S3 = {
    "cli.md": ("## Remote paths", "## `kbatch export"),
    "remote.md": ("", None),
    "spark.md": ("## Reading from object storage", "## Writing"),
}
S3_TEST = Path(__file__).resolve().parent / "test_docs_remote.py"


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"

    def first_command(self) -> str:
        lines = [ln for ln in self.code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        return lines[0].split("  #")[0].strip() if lines else ""

    def in_sequence(self, table: dict | None = None) -> bool:
        """In a RUN_IN_SEQUENCE (or RUN_WITH_S3) section, so run (in order, with the blocks before
        it) elsewhere."""
        if table is None:
            return self.in_sequence(RUN_IN_SEQUENCE) or self.in_sequence(RUN_WITH_S3)
        span = table.get(self.path.name)
        if span is None:
            return False
        lines = self.path.read_text().splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith(span[0])), None) if span[0] else 0
        end = next((i for i, ln in enumerate(lines) if span[1] and ln.startswith(span[1])), len(lines))
        return start is not None and start < self.line <= end

    def not_run_reason(self) -> str | None:
        first = self.code.splitlines()[0] if self.code else ""
        m = NOT_RUN_MARK.match(first.strip())
        return m.group(1) if m else None


def parse(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a markdown file, and the problems (untagged fences, indented code)."""
    blocks, problems = [], []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(.*)$", lines[i])
        if m:
            indent, lang, start = len(m.group(1)), m.group(2).strip(), i + 1
            i += 1
            body = []
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][indent:])
                i += 1
            if lang not in LANGS:
                problems.append(f"{path.name}:{start}: fence tagged {lang!r}; use one of {LANGS}")
            blocks.append(Block(path, start, lang, "\n".join(body) + "\n"))
        elif (lines[i].startswith("    ") and lines[i].strip() and i > 0 and not lines[i - 1].strip()
              and not _in_list(lines, i)):
            problems.append(f"{path.name}:{i + 1}: indented code block; fence it and tag it")
        i += 1
    return blocks, problems


def _in_list(lines: list[str], i: int) -> bool:
    """An indented paragraph that continues a list item (the nearest unindented line is an item)."""
    for j in range(i - 1, -1, -1):
        if lines[j].strip() and not lines[j].startswith(" "):
            return bool(re.match(r"^(\s*[-*+]|\s*\d+\.)\s", lines[j]))
    return False


ALL = [(b, p) for path in DOCS for b, p in [parse(path)]]
BLOCKS = [b for blocks, _ in ALL for b in blocks]
RUNNABLE = [b for b in BLOCKS if b.lang in ("python", "bash") and b.not_run_reason() is None
            and not b.in_sequence()]


def test_docs_found():
    names = {p.name for p in DOCS}
    assert {"README.md", "cli.md", "compat.md", "spark.md", "api.md"} <= names
    assert len(RUNNABLE) >= 8


def test_every_fence_is_tagged_and_no_indented_code():
    assert [p for _, problems in ALL for p in problems] == []


def test_text_blocks_hold_no_commands():
    """`text` is for output and layouts: a block that starts like a command must be bash."""
    looks_like_code = re.compile(r"^(\$ |kbatch |python3? |pip |import |from \S+ import )")
    assert [b.id for b in BLOCKS if b.lang == "text" and looks_like_code.match(b.code.lstrip())] == []


def test_blocks_in_sequence_are_run_there():
    """Every RUN_IN_SEQUENCE section has blocks, and test_docs_columns.py reads exactly those sections."""
    for table, test in ((RUN_IN_SEQUENCE, SEQUENCE_TEST), (RUN_WITH_S3, S3_TEST)):
        source = test.read_text()
        for name, (start, end) in table.items():
            assert [b for b in BLOCKS if b.path.name == name and b.in_sequence(table)], name
            assert f'"{name}"' in source and (not start or start in source) and (not end or end in source), name


def test_blocks_not_run_are_marked_and_justified():
    marked = {(b.path.name, b.first_command()): b.not_run_reason() for b in BLOCKS if b.not_run_reason()}
    assert set(marked) == set(NOT_RUN), "a block marked 'not run' needs an entry in NOT_RUN, and the reverse"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = KBATCH_PARENT  # the kbatch under test (an installed wheel, or src/)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _needs(block: Block) -> None:
    """Skip a block whose optional dependencies this environment lacks (the spark extra, Java)."""
    if "pyspark" in block.code or "kbatch.spark" in block.code:
        if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
            pytest.skip("needs pyspark and Java (the spark extra)")
    for fmt, module in (("delta", "deltalake"), ("iceberg", "pyiceberg")):
        if (module in block.code or f"--format {fmt}" in block.code) and importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} (the tables extra)")
    for engine in ("polars", "duckdb", "ray"):  # docs/engines.md: each engine's extra
        if re.search(rf"^(import|from) {engine}\b", block.code, re.M) and importlib.util.find_spec(engine) is None:
            pytest.skip(f"needs {engine} (the {engine} extra)")
    if block.lang == "bash" and re.search(r"(^|\s)kbatch ", block.code) and importlib.util.find_spec("typer") is None:
        pytest.skip("needs the cli extra")


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_block_runs(block: Block, tmp_path: Path):
    _needs(block)
    if block.lang == "python":
        cmd = [sys.executable, "-c", block.code]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", block.code]
    proc = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{block.id} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


# ------------------------------------------------------------------------------------ API reference
PUBLIC_MODULES = ["kbatch", "kbatch.columns.decode", "kbatch.compat", "kbatch.cli", "kbatch.spark", "kbatch.server",
                  "kbatch.scan", "kbatch.polars", "kbatch.duckdb", "kbatch.ray"]


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_api_reference_names_every_public_name(modname: str):
    if modname == "kbatch.spark" and importlib.util.find_spec("pyspark") is None:
        pytest.skip("kbatch.spark needs pyspark")
    mod = importlib.import_module(modname)
    text = (ROOT / "docs" / "api.md").read_text()
    headings = set(re.findall(r"^### `([\w.]+)", text, re.M))
    missing = [f"{modname}.{n}" for n in mod.__all__ if f"{modname}.{n}" not in headings]
    assert missing == [], f"not in docs/api.md (regenerate: python tools/api_docs.py): {missing}"
    assert f"## `{modname}`" in text


def test_api_reference_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/api.md)" in readme
    assert "../shared" not in readme  # the reference lives in the repository
