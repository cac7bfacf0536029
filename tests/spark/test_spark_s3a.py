"""The JVM reader over `s3a://`: Hadoop's S3A connector (hadoop-aws at pyspark's Hadoop version, from
Maven Central through tools/spark_jars.py) against moto's S3 server on 127.0.0.1.

A log directory (several topics, partitions and segments, a transaction with an abort) is copied
into a bucket; the same query over `s3a://bucket/prefix` and over the local directory must give the
same rows, batch and streaming (availableNow), read_uncommitted and read_committed, and a pushed-down
offset range must too. So must Kafka's LocalTieredStorage and Aiven's tiered-storage copies of one
partition (support.tiered) in the bucket, for that partition's rows. Spark runs in a child process: the connector's jars go on the driver's class
path at JVM start (Hadoop resolves `fs.s3a.impl` with the class loader it started with, which a
runtime ADD JAR does not reach). Skips, saying why, when Maven Central or the JVM reader cannot be had.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.paths import tool_module
from support.tiered import make_aiven, make_local_tiered

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("moto")

import kbatch  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
NOW = 1_750_000_000_000
CHILD_TIMEOUT_S = 900

CHILD = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession
    import kbatch.spark as ks

    local, remote, endpoint, out = sys.argv[1:5]
    tiered = [tuple(a.split("=", 1)) for a in sys.argv[5:]]  # (name, s3a:// root of a tiered copy of orders-0)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.hadoop.fs.s3a.endpoint", endpoint)
             .config("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
             .config("spark.hadoop.fs.s3a.path.style.access", "true")
             .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
             .config("spark.hadoop.fs.s3a.aws.credentials.provider",
                     "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
             .config("spark.hadoop.fs.s3a.access.key", "testing")
             .config("spark.hadoop.fs.s3a.secret.key", "testing")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    reader = ks.register(spark)
    assert reader.is_jvm, str(reader)
    COLS = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers", "isTombstone"]

    def rows(df):
        return sorted([[str(v) if v is not None else None for v in r] for r in df.select(*COLS).collect()])

    def read(reader, path, iso, **opts):
        return (reader.format("kafka-segments").option("includeHeaders", "true").option("isolation.level", iso)
                .options(**opts).load(path))

    result = {}
    for iso in ("read_uncommitted", "read_committed"):
        for name, path in [("local", local), ("s3a", remote)] + tiered:
            result[f"batch-{iso}-{name}"] = rows(read(spark.read, path, iso))
            result[f"range-{iso}-{name}"] = rows(read(spark.read, path, iso).where("offset >= 40 and offset < 90"))
            ck = os.path.join(os.path.dirname(out), f"ck-{iso}-{name}")
            q = (read(spark.readStream, path, iso, maxOffsetsPerTrigger="100").writeStream.format("parquet")
                 .option("checkpointLocation", ck).option("path", ck + "-sink").trigger(availableNow=True).start())
            q.awaitTermination(600)
            assert not q.isActive and q.exception() is None, q.exception()
            result[f"stream-{iso}-{name}"] = rows(spark.read.parquet(ck + "-sink"))
    with open(out, "w") as f:
        json.dump(result, f)
    spark.stop()
""")


def spark_jars_module():
    return tool_module("spark_jars")


def write_logs(root: Path) -> None:
    cfg = kbatch.LogConfig(segment_bytes=2500, index_interval_bytes=200)
    for topic, parts, n in (("orders", 2, 150), ("audit", 1, 60)):
        for p in range(parts):
            log = kbatch.Log.create(str(root / f"{topic}-{p}"), cfg, now_ms=NOW)
            try:
                for base in range(0, n, 10):
                    b = kbatch.BatchBuilder(compression=kbatch.Compression.LZ4 if p else kbatch.Compression.NONE)
                    for i in range(base, base + 10):
                        b.append(NOW + i, None if i % 9 == 0 else b"k%d" % (i % 7),
                                 None if i % 13 == 0 else b"%s/%d/%d" % (topic.encode(), p, i),
                                 headers=[("h", b"%d" % i)] if i % 4 == 0 else ())
                    log.append(b.build(), now_ms=NOW + n, from_client=False)
            finally:
                log.close()
    # a transaction of producer 7 aborted in orders-0, between the plain batches
    log = kbatch.Log.open(str(root / "orders-0"), cfg, writable=True)
    try:
        b = kbatch.BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
        for i in range(5):
            b.append(NOW + 500 + i, b"tx", b"aborted %d" % i)
        log.append(b.build(), now_ms=NOW + 1000, from_client=False)
        log.append(kbatch.build_end_txn_marker(producer_id=7, producer_epoch=0, commit=False, coordinator_epoch=0,
                                               timestamp=NOW + 600), now_ms=NOW + 1000, from_client=False)
    finally:
        log.close()


def test_s3a_reads_the_same_rows_as_the_local_directory(tmp_path):
    sj = spark_jars_module()
    try:
        jars = sj.hadoop_aws_jars()
    except sj.SparkJarsError as e:
        pytest.skip(f"Hadoop's S3A connector cannot be had: {e}")
    from support.s3server import S3Server

    local = tmp_path / "logs"
    local.mkdir()
    write_logs(local)
    copies = {"local_tiered": make_local_tiered, "aiven": make_aiven}
    for kind, make in copies.items():
        make(str(local / "orders-0"), str(tmp_path / "tiered" / kind), "orders", 0)
    server = S3Server()
    try:
        bucket = server.bucket("kbatch-s3a")
        server.upload_tree(str(local), bucket, "cluster/logs")
        for kind in copies:
            server.upload_tree(str(tmp_path / "tiered" / kind), bucket, f"rsm/{kind}")
        out = tmp_path / "result.json"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
                   PYSPARK_SUBMIT_ARGS=f"--driver-class-path {':'.join(str(j) for j in jars)} pyspark-shell")
        for k in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
            env.pop(k, None)
        proc = subprocess.run([sys.executable, "-c", CHILD, str(local), f"s3a://{bucket}/cluster/logs",
                               server.endpoint, str(out)] + [f"{k}=s3a://{bucket}/rsm/{k}" for k in copies],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S)
        assert proc.returncode == 0, proc.stderr[-6000:]
        got = json.loads(out.read_text())
        ranged_gets = [r for r in server.proxy.log if r[0] == "GET" and r[2] and "/cluster/logs/" in r[1]]
    finally:
        server.stop()
    for kind in ("batch", "range", "stream"):
        for iso in ("read_uncommitted", "read_committed"):
            assert got[f"{kind}-{iso}-s3a"] == got[f"{kind}-{iso}-local"], (kind, iso)
    assert len(got["batch-read_uncommitted-local"]) == 2 * 150 + 60 + 5
    assert len(got["batch-read_committed-local"]) == 2 * 150 + 60
    assert got["stream-read_committed-s3a"] == got["batch-read_committed-s3a"]
    assert 0 < len(got["range-read_uncommitted-s3a"]) < len(got["batch-read_uncommitted-s3a"])
    # the tiered copies of orders-0 in the bucket: that partition's rows, every kind of read
    for kind in copies:
        for what in ("batch", "range", "stream"):
            for iso in ("read_uncommitted", "read_committed"):
                want = [r for r in got[f"{what}-{iso}-local"] if r[:2] == ["orders", "0"]]
                assert want and got[f"{what}-{iso}-{kind}"] == want, (kind, what, iso)
    # the s3a rows came through the S3 server: S3A's ranged GETs of the segment objects
    assert any(".log" in r[1] for r in ranged_gets), ranged_gets[:5]
