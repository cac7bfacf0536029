"""Readers outside the storage layer never die of a file changing under them and never hang on a
FIFO: `kbatch dump` reads through FileRecords (pread, no mmap), and the broker-file readers in
checkpoints.py (and producer snapshots) open through open_regular."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

import kbatch
from kbatch.cli.dump_log import DumpOptions, Dumper

SRC = str(__import__("support.paths").paths.SRC)


def _child(code: str, *args, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_dump_of_a_log_truncated_under_it_is_an_error_not_sigbus(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    parts = []
    for i in range(20):  # 20 MiB: more than one 16 MiB read window
        b = kbatch.BatchBuilder(base_offset=i)
        b.append(1000 + i, b"k", bytes(1 << 20))
        parts.append(b.build())
    seg = d / "00000000000000000000.log"
    seg.write_bytes(b"".join(parts))
    seen = []

    def progress(n):  # after the first batch another process cuts the file
        seen.append(n)
        if len(seen) == 1:
            os.truncate(seg, 100)

    out, err = io.StringIO(), io.StringIO()
    result = Dumper(DumpOptions(), out, err, progress).dump([str(seg)])
    assert result.exit_code == 2
    assert "truncated while being read" in err.getvalue()
    assert 1 <= len(seen) < 20


def test_dump_of_fifos_named_like_broker_files_exits_2_without_hanging(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    names = ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
             "00000000000000000000.txnindex", "00000000000000000000.snapshot", "leader-epoch-checkpoint",
             "partition.metadata"]
    for n in names:
        os.mkfifo(d / n)
    res = _child("import sys; from kbatch.cli import main; sys.exit(main(['dump', *sys.argv[1:]]))",
                 *[str(d / n) for n in names])
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("is a FIFO, not a regular file") == len(names), res.stderr


def test_checkpoint_readers_refuse_fifos(tmp_path):
    names = ("partition.metadata", "leader-epoch-checkpoint", "replication-offset-checkpoint",
             "log-start-offset-checkpoint")
    for n in names:
        os.mkfifo(tmp_path / n)
    code = """
import sys
from kbatch.log import checkpoints as C
from kbatch.errors import StorageError
d = sys.argv[1]
for fn, name in ((C.read_partition_metadata, "partition.metadata"),
                 (C.read_leader_epoch_checkpoint, "leader-epoch-checkpoint"),
                 (C.read_offset_checkpoint, "replication-offset-checkpoint"),
                 (C.read_offset_checkpoint, "log-start-offset-checkpoint")):
    try:
        fn(d + "/" + name)
        print("READ", name)
    except StorageError as e:
        print("REFUSED", name, e)
"""
    res = _child(code, str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("REFUSED") == len(names) and "is a FIFO" in res.stdout, res.stdout


def test_log_open_with_a_fifo_checkpoint_beside_it_is_an_error_not_a_hang(tmp_path):
    d = tmp_path / "t-0"
    log = kbatch.Log.create(str(d))
    b = kbatch.BatchBuilder()
    b.append(1, b"k", b"v")
    log.append(b.build(), now_ms=2)
    log.close()
    os.mkfifo(tmp_path / "log-start-offset-checkpoint")
    res = _child("import sys, kbatch\ntry:\n    kbatch.Log.open(sys.argv[1])\nexcept kbatch.StorageError as e:\n"
                 "    print('REFUSED', e)", str(d))
    assert "REFUSED" in res.stdout and "FIFO" in res.stdout, (res.stdout, res.stderr)


@pytest.mark.parametrize("suffix", [".log", ".index"])
def test_dump_of_a_missing_file_exits_2(tmp_path, suffix):
    out, err = io.StringIO(), io.StringIO()
    assert Dumper(DumpOptions(), out, err).dump([str(tmp_path / ("00000000000000000000" + suffix))]).exit_code == 2


_SPARK_READ_WHILE_TRUNCATED = r"""
import os, sys
import kbatch
from kbatch.spark.datasource import KafkaSegmentsDataSource

d = os.path.join(sys.argv[1], "t-0")
os.makedirs(d)
seg = os.path.join(d, "00000000000000000000.log")
with open(seg, "wb") as f:
    for i in range(64):  # 64 batches of 1000 small records: many Arrow chunks per slice
        b = kbatch.BatchBuilder(base_offset=i * 1000)
        for j in range(1000):
            b.append(1000 + j, b"k%d" % j, b"v" * 100)
        f.write(b.build())
source = KafkaSegmentsDataSource({"path": sys.argv[1], "rowsPerBatch": "1000"})
reader = source.reader(source.schema())
rows = 0
for part in reader.partitions():
    for i, rb in enumerate(reader.read(part)):
        rows += rb.num_rows
        if i == 0:  # another process cuts the segment while the slice is being decoded
            os.truncate(seg, 100)
print(rows)
"""


def test_python_spark_source_survives_a_segment_truncated_while_it_decodes(tmp_path):
    """The Python data source reads its slice with pread, not a memory map: a segment cut while a
    task decodes it cannot kill the Python worker with SIGBUS (with a map, the next page touched
    past the new end did). The task decodes the bytes it read, as they were."""
    pytest.importorskip("pyspark")
    r = _child(_SPARK_READ_WHILE_TRUNCATED, str(tmp_path), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert int(r.stdout.strip()) == 64_000


def test_index_rules_do_not_judge_a_file_that_changed_while_it_was_read(tmp_path):
    """A .log cut while its batches are collected for the index rules is an error, not a shorter
    segment whose index entries then look like damage (or worse, look fine)."""
    from kbatch.errors import FileChangedError
    from kbatch.log.index_rules import SegmentBatches

    class Cut:
        def scan(self, reuse=False):
            b = kbatch.BatchBuilder()
            b.append(1000, b"k", b"v")
            yield from kbatch.log.segment.scan_headers(memoryview(b.build()))
            raise FileChangedError("the file shrank while it was being read", path="x.log")

    with pytest.raises(FileChangedError):
        SegmentBatches(Cut())


_JVM_READ_WHILE_TRUNCATED = r"""
import glob, os, shutil, sys, threading, time
import kbatch
import kbatch.spark
from pyspark.sql import SparkSession

root = sys.argv[1]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.task.maxFailures", "1").getOrCreate())
spark.sparkContext.setLogLevel("OFF")
reader = kbatch.spark.register(spark)
if not reader.is_jvm:
    print("SKIP", reader.reason)
    sys.exit(0)
src = os.path.join(root, "src")
os.makedirs(os.path.join(src, "t-0"))
with open(os.path.join(src, "t-0", "00000000000000000000.log"), "wb") as f:
    for i in range(2000):  # about 60 MB of 100-record batches: a count takes a while
        f.write(kbatch.build_batch([(1000 + j, b"k%d" % j, b"v" * 300) for j in range(100)], base_offset=i * 100))
outcomes = []
for delay in (0.0, 0.05, 0.1, 0.2, 0.4):
    d = os.path.join(root, "run%s" % delay)
    shutil.copytree(src, d)
    seg = os.path.join(d, "t-0", "00000000000000000000.log")
    cut = threading.Timer(delay, os.truncate, (seg, 5_000_000))
    cut.start()
    try:
        n = spark.read.format("kafka-segments-jvm").load(d).count()
        outcomes.append("rows" if n <= 200_000 else "wrong %d" % n)  # all, or what was there when planned
    except Exception as e:  # the task failed: say why
        msg = str(e)
        outcomes.append("error:" + ("FileChangedError" if "FileChangedError" in msg or "changed while it was read" in msg
                                    else "Truncated" if "Truncated" in msg else msg[:300].replace("\n", " ")))
    cut.join()
# the JVM is still there and still answers
outcomes.append("alive %d" % spark.range(10).count())
print(" | ".join(outcomes))
print("hs_err files:", len(glob.glob("hs_err_pid*.log")))
"""


def test_jvm_spark_reader_survives_a_segment_truncated_while_it_reads(tmp_path):
    """The JVM reader never maps a segment: a mapped file cut by another process while a task read
    it faulted inside the JDK's CRC-32C stub and killed the JVM (SIGBUS, hs_err; the Spark driver
    gone in local mode). Whenever the cut lands (before planning, mid-read, after), the query
    answers or fails with a kbatch error, and the JVM answers the next query."""
    pytest.importorskip("pyspark")
    r = subprocess.run([sys.executable, "-c", _JVM_READ_WHILE_TRUNCATED, str(tmp_path)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])))
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    if r.stdout.startswith("SKIP"):
        pytest.skip(r.stdout.strip())
    outcomes, hs_err = r.stdout.strip().splitlines()[-2:]
    assert hs_err == "hs_err files: 0"
    parts = outcomes.split(" | ")
    assert parts[-1] == "alive 10", outcomes
    for p in parts[:-1]:
        assert p in ("rows", "error:FileChangedError", "error:Truncated"), outcomes
