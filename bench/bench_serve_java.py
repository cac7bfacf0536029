"""Kafka's own Java client against `kbatch serve` and against a real Kafka broker (4.4.0, the cached
distribution), same client, same data, same machine, side by side: consume (Kafka's
ConsumerPerformance tool: a KafkaConsumer in a classic group reading every record) and produce
(ProducerPerformance: an idempotent KafkaProducer, acks=all).

The data is the broker's own: ProducerPerformance writes it into the broker, and `kbatch serve`
(read-only, in its own process) serves a copy of those partition folders, so both servers send the
same bytes. Each benchmark checks before it times: the tool must report every record consumed (or
sent), and after the produce rounds each server's log must hold exactly what was sent. A round is
the whole tool run (JVM start included, the same for both servers).

Run: .venv/bin/python -m pytest bench/bench_serve_java.py --benchmark-only -s
KBATCH_BENCH_JAVA_RECORDS (default 1000000) and KBATCH_BENCH_JAVA_VALUE (bytes, default 100) size it.
"""
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.kafka_broker import KafkaBroker, KafkaUnavailable, kafka_dist  # noqa: E402

import kbatch  # noqa: E402

N = int(os.environ.get("KBATCH_BENCH_JAVA_RECORDS", "1000000"))
VALUE = int(os.environ.get("KBATCH_BENCH_JAVA_VALUE", "100"))
PARTITIONS = 4
VERSION = "4.4.0"
TOOL_TIMEOUT = 600
#: (kind, bootstrap) -> records/s as the tools report them (their own clocks, without the JVM start)
RATES: dict = {}


class KbatchServe:
    """`kbatch serve DIR --listen 127.0.0.1:0` in a subprocess (read-only unless `writable`). Its
    stderr is read to the bootstrap line, then drained by a thread so the pipe never fills."""

    def __init__(self, directory, writable=False):
        cmd = [sys.executable, "-m", "kbatch.cli", "serve", str(directory), "--listen", "127.0.0.1:0",
               "--group-initial-rebalance-delay-ms", "0"]
        if writable:  # the producer's Metadata request creates its topic, as a broker's auto-creation
            cmd += ["--writable", "--auto-create-topics"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.bootstrap = None
        end = time.time() + 120
        while time.time() < end:
            line = self.proc.stderr.readline()
            m = re.search(r" on (127\.0\.0\.1:\d+)", line)
            if m:
                self.bootstrap = m.group(1)
                break
        assert self.bootstrap, "kbatch serve did not start"
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def _tool(broker, main, *args):
    r = broker.java_tool(main, *args, timeout=TOOL_TIMEOUT)
    assert r.returncode == 0, f"{main} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def consume(broker, bootstrap, topic, group):
    """ConsumerPerformance reading N records; returns the records it counted."""
    out = _tool(broker, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
                "--topic", topic, "--messages", str(N), "--group", group, "--timeout", "120000")
    rows = [line for line in out.splitlines() if re.match(r"^\d{4}-", line)]
    assert rows, out
    fields = [f.strip() for f in rows[-1].split(",")]
    RATES.setdefault(("consume", bootstrap), []).append(float(fields[5]))  # nMsg.sec, as the tool measures it
    return int(fields[4])


def produce(broker, bootstrap, topic):
    """ProducerPerformance sending N records, idempotent, acks=all; returns the records it reports sent."""
    out = _tool(broker, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(N),
                "--record-size", str(VALUE), "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
                "acks=all", "enable.idempotence=true", "linger.ms=5", "batch.size=262144")
    # progress lines, then the summary: "<n> records sent, <r> records/sec (...), ... avg latency, ..."
    rows = re.findall(r"^(\d+) records sent, ([\d.]+) records/sec.*avg latency", out, re.M)
    assert rows, out
    RATES.setdefault(("produce", bootstrap), []).append(float(rows[-1][1]))
    return int(rows[-1][0])


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    try:
        dist = kafka_dist(VERSION)
    except KafkaUnavailable as e:
        pytest.skip(f"real Kafka {VERSION}: {e}")
    work = tmp_path_factory.mktemp("serve-java-bench")
    broker = KafkaBroker(dist, work / "broker").start()
    try:
        _tool(broker, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
              "--topic", "data", "--partitions", str(PARTITIONS), "--replication-factor", "1")
        assert produce(broker, broker.bootstrap, "data") == N
        copy = work / "copy"
        copy.mkdir()
        for p in range(PARTITIONS):
            shutil.copytree(broker.partition_dir("data", p), copy / f"data-{p}")
        served = KbatchServe(copy)
        writable_dir = work / "writable"
        writable_dir.mkdir()
        writable = KbatchServe(writable_dir, writable=True)
        try:
            yield {"broker": broker, "kafka-broker": broker.bootstrap, "kbatch-serve": served.bootstrap,
                   "writable": writable, "writable_dir": writable_dir}
        finally:
            served.stop()
            writable.stop()
    finally:
        broker.close()


@pytest.mark.parametrize("target", ["kbatch-serve", "kafka-broker"])
def test_consume(benchmark, targets, target):
    benchmark.group = "serve-java-consume"
    benchmark.name = target
    broker, bootstrap = targets["broker"], targets[target]
    counter = iter(range(1000))
    assert consume(broker, bootstrap, "data", f"check-{target}") == N  # every record, before timing
    RATES.pop(("consume", bootstrap), None)
    benchmark.pedantic(lambda: consume(broker, bootstrap, "data", f"g-{target}-{next(counter)}"), rounds=3,
                       iterations=1)
    benchmark.extra_info.update(records=N, value_bytes=VALUE, client=f"kafka-clients {VERSION}",
                                tool_records_per_s=max(RATES[("consume", bootstrap)]))
    print(f"\n{target} consume: ConsumerPerformance nMsg.sec {RATES[('consume', bootstrap)]}")


@pytest.mark.parametrize("target", ["kbatch-serve", "kafka-broker"])
def test_produce(benchmark, targets, target):
    benchmark.group = "serve-java-produce"
    benchmark.name = target
    broker = targets["broker"]
    bootstrap = targets["writable"].bootstrap if target == "kbatch-serve" else targets["kafka-broker"]
    topics = iter(f"p-{target}-{i}" for i in range(1000))

    def setup():
        topic = next(topics)
        if target == "kbatch-serve":  # auto-created by the producer's first Metadata request
            return (bootstrap, topic), {}
        _tool(broker, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create",
              "--topic", topic, "--partitions", "1", "--replication-factor", "1")
        return (bootstrap, topic), {}

    sent = []
    RATES.pop(("produce", bootstrap), None)
    benchmark.pedantic(lambda b, t: sent.append((t, produce(broker, b, t))), setup=setup, rounds=3, iterations=1)
    assert all(n == N for _t, n in sent), sent
    if target == "kbatch-serve":  # what was acknowledged is on disk
        for t, _n in sent:
            log = kbatch.Log.open(str(targets["writable_dir"] / f"{t}-0"))
            try:
                assert log.end_offset() == N
            finally:
                log.close()
    benchmark.extra_info.update(records=N, value_bytes=VALUE, client=f"kafka-clients {VERSION}",
                                tool_records_per_s=max(RATES[("produce", bootstrap)]))
    print(f"\n{target} produce: ProducerPerformance records/sec {RATES[('produce', bootstrap)]}")
