"""kbatch serve against librdkafka's own mock cluster, with the same client (confluent-kafka) on the
same machine: produce and consume throughput (MB/s of record values+keys, records/s), and the
latency of an offsetsForTimes lookup.

The server runs as `kbatch serve` in its own process (as a user runs it), the mock cluster inside
librdkafka (`test.mock.num.brokers`, in C threads of a producer whose mock brokers other clients
reach over loopback). Each benchmark checks what it measured: every record delivered at the offset
expected, every record consumed with the right value, the lookup's answer equal to
Log.offset_for on the served directory.

Run: .venv/bin/python -m pytest bench/bench_serve.py --benchmark-only -s
KBATCH_BENCH_SERVE_RECORDS (default 400000 produced per round) and KBATCH_BENCH_SERVE_VALUE (bytes,
default 200) size the data. librdkafka's mock keeps about 5 MB per partition (older data is dropped),
so the consume rounds read KBATCH_BENCH_SERVE_CONSUME records (default 20000, 4.2 MB) from offset 0
again each round, with a connected consumer. The result table is in bench/results-serve.md.
"""
import logging
import os
import re
import subprocess
import sys
import time
import zlib

import pytest

ck = pytest.importorskip("confluent_kafka")

import kbatch  # noqa: E402

N = int(os.environ.get("KBATCH_BENCH_SERVE_RECORDS", "400000"))
N_CONSUME = int(os.environ.get("KBATCH_BENCH_SERVE_CONSUME", "20000"))
VALUE = int(os.environ.get("KBATCH_BENCH_SERVE_VALUE", "200"))
PAYLOAD = [(b"key-%08d" % i, (b"%08d" % i) * (VALUE // 8)) for i in range(N)]
BYTES = sum(len(k) + len(v) for k, v in PAYLOAD)
BYTES_CONSUME = sum(len(k) + len(v) for k, v in PAYLOAD[:N_CONSUME])
PRODUCER = {"linger.ms": 5, "batch.size": 1000000, "acks": "all", "compression.type": "none",
            "enable.idempotence": True, "queue.buffering.max.messages": 1000000}
CHECKSUM = zlib.crc32(b"".join(v for _, v in PAYLOAD[:N_CONSUME]))


class MockCluster:
    """librdkafka's mock cluster, owned by a producer; its bootstrap address comes from its log."""

    def __init__(self):
        self.lines = []
        log = logging.getLogger(f"rdkafka-mock-{id(self)}")
        log.addHandler(_Collect(self.lines))
        log.setLevel(logging.DEBUG)
        log.propagate = False
        self.owner = ck.Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "unused:1", "logger": log,
                                  "debug": "mock"})
        end = time.time() + 10
        while time.time() < end and not self.bootstrap:
            self.owner.poll(0.1)
        assert self.bootstrap, "librdkafka did not report its mock cluster's address"

    @property
    def bootstrap(self):
        for line in self.lines:
            m = re.search(r"Mock cluster \S+ bootstrap.servers=(\S+)", line)
            if m:
                return m.group(1)
        return None


class _Collect(logging.Handler):
    def __init__(self, out):
        super().__init__()
        self.out = out

    def emit(self, record):
        self.out.append(record.getMessage())


class KbatchServe:
    """`kbatch serve DIR --listen 127.0.0.1:0` in a subprocess."""

    def __init__(self, directory):
        self.proc = subprocess.Popen([sys.executable, "-m", "kbatch.cli", "serve", directory, "--listen",
                                      "127.0.0.1:0", "--writable", "--auto-create-topics"],
                                     stderr=subprocess.PIPE, text=True)
        self.bootstrap = None
        end = time.time() + 60
        while time.time() < end:
            line = self.proc.stderr.readline()
            m = re.search(r" on (127\.0\.0\.1:\d+)", line)
            if m:
                self.bootstrap = m.group(1)
                break
        assert self.bootstrap, "kbatch serve did not start"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("serve-bench"))
    server = KbatchServe(d)
    mock = MockCluster()
    yield {"kbatch-serve": server.bootstrap, "librdkafka-mock": mock.bootstrap, "dir": d}
    server.stop()


def produce(bootstrap, topic, n=N):
    p = ck.Producer(dict(PRODUCER, **{"bootstrap.servers": bootstrap}))
    state = {"n": 0, "errors": 0, "last": -1}

    def done(err, msg):
        if err:
            state["errors"] += 1
        else:
            state["n"] += 1
            state["last"] = max(state["last"], msg.offset())

    for k, v in PAYLOAD[:n]:
        while True:
            try:
                p.produce(topic, key=k, value=v, partition=0, on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return state


def consumer(bootstrap):
    return ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                        "fetch.wait.max.ms": 5})  # the previous round's long poll ends before the next starts


def consume(c, topic, check=False):
    """Read offsets 0 .. N_CONSUME - 1 again with a connected consumer (check: CRC of the values,
    done once before timing; the timed rounds count records and keep the last offset)."""
    c.assign([ck.TopicPartition(topic, 0, 0)])
    n, crc, last = 0, 0, -1
    end = time.time() + 120
    while n < N_CONSUME and time.time() < end:
        msgs = c.consume(min(N_CONSUME - n, 10000), 5.0)  # returns once that many are in
        if check:
            for m in msgs:
                if not m.error():
                    crc = zlib.crc32(m.value(), crc)
        n += len(msgs)
        if msgs:
            last = msgs[-1].offset()
    c.unassign()
    return n, crc if check else CHECKSUM, last


_round = {"kbatch-serve": 0, "librdkafka-mock": 0}


@pytest.mark.parametrize("impl", ["kbatch-serve", "librdkafka-mock"])
def test_produce(benchmark, targets, impl):
    benchmark.group = "serve-produce"
    benchmark.extra_info.update(records=N, bytes=BYTES)

    def run():
        _round[impl] += 1
        return produce(targets[impl], f"produce-{_round[impl]}")

    state = benchmark.pedantic(run, rounds=4, iterations=1, warmup_rounds=1)
    assert state == {"n": N, "errors": 0, "last": N - 1}


@pytest.fixture(scope="module")
def loaded(targets):
    for impl in ("kbatch-serve", "librdkafka-mock"):
        assert produce(targets[impl], "consume-me", N_CONSUME)["n"] == N_CONSUME
    return targets


@pytest.mark.parametrize("impl", ["kbatch-serve", "librdkafka-mock"])
def test_consume(benchmark, loaded, impl):
    benchmark.group = "serve-consume"
    benchmark.extra_info.update(records=N_CONSUME, bytes=BYTES_CONSUME)
    c = consumer(loaded[impl])
    assert consume(c, "consume-me", check=True) == (N_CONSUME, CHECKSUM, N_CONSUME - 1)  # connected, checked
    result = benchmark.pedantic(consume, args=(c, "consume-me"), rounds=20, iterations=1, warmup_rounds=2)
    c.close()
    assert result == (N_CONSUME, CHECKSUM, N_CONSUME - 1)


def test_offsets_for_times_latency(benchmark, loaded):
    """One offsetsForTimes (ListOffsets v7 by timestamp) round trip; librdkafka's mock answers -1 to
    every timestamp lookup, so it has no figure to compare with."""
    benchmark.group = "serve-list-offsets"
    c = ck.Consumer({"bootstrap.servers": loaded["kbatch-serve"], "group.id": "bench-times"})
    log = kbatch.Log.open(os.path.join(loaded["dir"], "consume-me-0"))
    try:
        batches = list(log.batches(verify_crc=False))
        ts = batches[len(batches) // 2].max_timestamp
        want = log.offset_for(ts).offset
    finally:
        log.close()

    def lookup():
        return c.offsets_for_times([ck.TopicPartition("consume-me", 0, ts)], timeout=10)[0].offset

    try:
        assert lookup() == want
        benchmark.pedantic(lookup, rounds=200, iterations=1, warmup_rounds=5)
    finally:
        c.close()


class RawFetcher:
    """A minimal Fetch client (requests from kafka-python's schema classes, responses read as
    frames, the records' last offset read from the batch headers): what the server does per byte,
    with almost no client work in the way."""

    def __init__(self, bootstrap, part_max=1 << 20):
        import socket

        from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.req_cls, self.resp_cls = FetchRequest, FetchResponse
        self.part_max = part_max
        self.correlation = 0

    def fetch(self, topic, offset):
        R = self.req_cls
        req = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=self.part_max, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic=topic, partitions=[
                    R.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                                log_start_offset=-1, partition_max_bytes=self.part_max)])],
                forgotten_topics_data=[], rack_id="")
        self.correlation += 1
        req.with_header(correlation_id=self.correlation, client_id="bench")
        self.sock.sendall(req.encode(version=11, header=True, framed=True))
        size = int.from_bytes(self._read(4), "big")
        frame = self._read(size)
        records = self.resp_cls.decode(memoryview(frame)[4:], version=11).responses[0].partitions[0].records
        last = None
        for b in kbatch.iter_batches(records, verify_crc=False, strict=False):
            last = b.last_offset
        return len(records), last

    def _read(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("closed")
            got += k
        return buf

    def read_all(self, topic):
        offset, total = 0, 0
        while offset < N_CONSUME:
            n, last = self.fetch(topic, offset)
            total += n
            offset = last + 1
        return total, offset

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("impl", ["kbatch-serve", "librdkafka-mock"])
def test_fetch_raw(benchmark, loaded, impl):
    benchmark.group = "serve-fetch-raw"
    f = RawFetcher(loaded[impl])
    try:
        total, end = f.read_all("consume-me")
        assert end == N_CONSUME
        benchmark.extra_info.update(bytes=total)
        assert benchmark.pedantic(f.read_all, args=("consume-me",), rounds=20, iterations=1,
                                  warmup_rounds=2) == (total, N_CONSUME)
    finally:
        f.close()
