"""kbatch.compat drop-ins against the clients' own record classes, side by side in one process.

Workload: 10 uncompressed v2 batches of 1000 records (key ~6 B, value 100 B, every third record
one header). Decode = MemoryRecords -> next_batch -> validate_crc -> every record's offset,
timestamp, key, value, headers (what the fetchers do). Build = 1000 appends + build/close.
Each bench checks its result against the client's own classes before timing.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_compat.py --benchmark-group-by=group \
        --benchmark-disable-gc
"""
import pytest

import kbatch

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

import aiokafka.record.default_records as a_d  # noqa: E402
import aiokafka.record.memory_records as a_m  # noqa: E402
import kafka.record.memory_records as k_m  # noqa: E402

from kbatch.compat import aiokafka as A  # noqa: E402
from kbatch.compat import kafka_python as K  # noqa: E402

N = 1000
RECORDS = [(1_700_000_000_000 + i, b"key%d" % i, bytes([i % 251]) * 100, [("trace", b"abc")] if i % 3 == 0 else [])
           for i in range(N)]


def k_build(cls):
    b = cls(2, 0, 1 << 22)
    for ts, k, v, h in RECORDS:
        b.append(ts, k, v, h)
    b.close()
    return b.buffer()


def a_build(cls):
    b = cls(2, 0, 0, -1, -1, -1, 1 << 22)
    for i, (ts, k, v, h) in enumerate(RECORDS):
        b.append(i, ts, k, v, h)
    return b.build()


DATA = bytes(k_build(k_m.MemoryRecordsBuilder)) * 10


def decode(cls):
    out = []
    m = cls(DATA)
    while m.has_next():
        batch = m.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, r.headers))
    return out


def drain(cls):
    """The timed consumer loop: every record's fields are read."""
    n = 0
    m = cls(DATA)
    while m.has_next():
        batch = m.next_batch()
        batch.validate_crc()
        for r in batch:
            r.offset, r.timestamp, r.key, r.headers
            n += len(r.value)
    return n


def _check(fn, orig, new):
    assert fn(new) == fn(orig)


@pytest.mark.benchmark(group="decode kafka-python")
@pytest.mark.parametrize("impl", ["kafka-python", "kbatch.compat"])
def test_decode_kafka_python(benchmark, impl):
    assert kbatch.BACKEND == "cython"
    _check(decode, k_m.MemoryRecords, K.MemoryRecords)
    benchmark(drain, k_m.MemoryRecords if impl == "kafka-python" else K.MemoryRecords)


@pytest.mark.benchmark(group="decode aiokafka")
@pytest.mark.parametrize("impl", ["aiokafka", "kbatch.compat"])
def test_decode_aiokafka(benchmark, impl):
    _check(decode, a_m.MemoryRecords, A.MemoryRecords)
    benchmark(drain, a_m.MemoryRecords if impl == "aiokafka" else A.MemoryRecords)


@pytest.mark.benchmark(group="build kafka-python")
@pytest.mark.parametrize("impl", ["kafka-python", "kbatch.compat"])
def test_build_kafka_python(benchmark, impl):
    _check(lambda c: bytes(k_build(c)), k_m.MemoryRecordsBuilder, K.MemoryRecordsBuilder)
    benchmark(k_build, k_m.MemoryRecordsBuilder if impl == "kafka-python" else K.MemoryRecordsBuilder)


@pytest.mark.benchmark(group="build aiokafka")
@pytest.mark.parametrize("impl", ["aiokafka", "kbatch.compat"])
def test_build_aiokafka(benchmark, impl):
    _check(lambda c: bytes(a_build(c)), a_d.DefaultRecordBatchBuilder, A.DefaultRecordBatchBuilder)
    benchmark(a_build, a_d.DefaultRecordBatchBuilder if impl == "aiokafka" else A.DefaultRecordBatchBuilder)
