"""The core codec against aiokafka's Cython records, kafka-python (pure Python) and the `crc32c`
package, side by side in one process. Results and targets: bench/results-codec.md.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_codec.py --benchmark-only

Workload: ~10 MB of uncompressed v2 batches of 1000 records each (key 12 B, value 100 B, no
headers), as a producer writes them (base offset 0). Each group is one question:
  decode  iterate every record of the buffer, CRCs verified, touching key, value and timestamp
  encode  build the same batches from (timestamp, key, value) tuples: BatchBuilder.append per
          record, and build_batch (one kernel call per batch)
  scan    walk the batch headers and verify every CRC (no records decoded)
  crc32c  one CRC-32C call on 64 B, 4 KiB and 1 MiB
Every bench first checks its result against the reference (the known records, or the peer's
bytes), then times. bench/conftest.py prints each group's kbatch/peer speed ratios at the end.
"""
import importlib
import os

import pytest

import kbatch
from kbatch import _backend

aiokafka_mr = pytest.importorskip("aiokafka.record.memory_records")
aiokafka_dr = importlib.import_module("aiokafka.record.default_records")
kafka_mr = pytest.importorskip("kafka.record.memory_records")
kafka_dr = importlib.import_module("kafka.record.default_records")
crc32c_pkg = pytest.importorskip("crc32c")

N_RECORDS = 1000
N_BATCHES = int(os.environ.get("KBATCH_BENCH_BATCHES", "85"))  # 85 x ~119 KB = ~10 MB
BASE_TS = 1_700_000_000_000


def batch_records(b):
    return [(BASE_TS + b * N_RECORDS + i, b"key-%08d" % i, bytes([(b + i) % 251]) * 100) for i in range(N_RECORDS)]


RECORDS = [batch_records(b) for b in range(N_BATCHES)]


def kbatch_encode(records=RECORDS):
    out = []
    for recs in records:
        bb = kbatch.BatchBuilder(timestamp_extended=False)  # Kafka-identical bytes
        append = bb.append
        for ts, k, v in recs:
            append(ts, k, v)
        out.append(bb.build())
    return out


def kbatch_build_batch(records=RECORDS):
    """The bulk path: each batch's records in one encode_records_v2 call."""
    return [kbatch.build_batch(recs, timestamp_extended=False) for recs in records]


def aiokafka_encode(records=RECORDS):
    out = []
    for recs in records:
        bb = aiokafka_dr.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 22)
        append = bb.append
        for i, (ts, k, v) in enumerate(recs):
            append(i, ts, k, v, [])
        out.append(bb.build())
    return out


def kafka_python_encode(records=RECORDS):
    out = []
    for recs in records:
        bb = kafka_dr.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 22)
        append = bb.append
        for i, (ts, k, v) in enumerate(recs):
            append(i, ts, k, v, [])
        out.append(bb.build())
    return out


DATA = b"".join(aiokafka_encode())


# ------------------------------------------------------------------------------------ decode
def kbatch_decode(data):
    n = 0
    for batch in kbatch.iter_batches(data, verify_crc=True):
        for r in batch:
            r.key, r.value, r.timestamp
            n += 1
    return n


def peer_decode(mr_class, data):
    n = 0
    m = mr_class(data)
    while m.has_next():
        batch = m.next_batch()
        if not batch.validate_crc():
            raise AssertionError("bad crc")
        for r in batch:
            r.key, r.value, r.timestamp
            n += 1
    return n


def kbatch_rows(data):
    return [(r.offset, r.timestamp, bytes(r.key), bytes(r.value)) for b in kbatch.iter_batches(data) for r in b]


def peer_rows(mr_class, data):
    m, out = mr_class(data), []
    while m.has_next():
        out += [(r.offset, r.timestamp, bytes(r.key), bytes(r.value)) for r in m.next_batch()]
    return out


REFERENCE_ROWS = [(i, ts, k, v) for recs in RECORDS for i, (ts, k, v) in enumerate(recs)]


@pytest.fixture(scope="module", autouse=True)
def compiled_codecs():
    if kbatch.BACKEND != "cython":
        pytest.skip("benchmarks compare the compiled core; build it (python3 dev.py build)")
    # the peer is aiokafka's Cython codec, not its pure-Python fallback (nor kbatch.compat)
    for cls in (aiokafka_mr.MemoryRecords, aiokafka_dr.DefaultRecordBatchBuilder):
        assert cls.__module__.startswith("aiokafka.record._crecords."), cls
    assert kafka_mr.MemoryRecords.__module__ == "kafka.record.memory_records"


@pytest.mark.benchmark(group="codec decode (records/s)")
@pytest.mark.parametrize("impl", ["kbatch", "aiokafka", "kafka-python"])
def test_decode(benchmark, impl):
    if impl == "kbatch":
        assert kbatch_rows(DATA) == REFERENCE_ROWS
        fn, args = kbatch_decode, (DATA,)
    else:
        mr = aiokafka_mr.MemoryRecords if impl == "aiokafka" else kafka_mr.MemoryRecords
        assert peer_rows(mr, DATA) == REFERENCE_ROWS
        fn, args = peer_decode, (mr, DATA)
    if impl == "kafka-python":
        n = benchmark.pedantic(fn, args, rounds=3, iterations=1)
    else:
        n = benchmark(fn, *args)
    assert n == N_RECORDS * N_BATCHES
    benchmark.extra_info.update(records=n, bytes=len(DATA), backend=kbatch.BACKEND)


# ------------------------------------------------------------------------------------ encode
@pytest.mark.benchmark(group="codec encode (records/s)")
@pytest.mark.parametrize("impl", ["kbatch", "kbatch build_batch", "aiokafka", "kafka-python"])
def test_encode(benchmark, impl):
    fn = {"kbatch": kbatch_encode, "kbatch build_batch": kbatch_build_batch, "aiokafka": aiokafka_encode,
          "kafka-python": kafka_python_encode}[impl]
    got = [bytes(b) for b in fn(RECORDS[:3])]
    if impl == "kafka-python":
        # kafka-python writes partitionLeaderEpoch 0 (Kafka's producer writes -1): compare the rest
        got = [b[:12] + b"\xff\xff\xff\xff" + b[16:] for b in got]
    assert got == [bytes(b) for b in aiokafka_encode(RECORDS[:3])]  # byte-identical batches
    if impl == "kafka-python":
        out = benchmark.pedantic(fn, rounds=3, iterations=1)
    else:
        out = benchmark(fn)
    assert len(out) == N_BATCHES
    benchmark.extra_info.update(records=N_RECORDS * N_BATCHES, bytes=len(DATA), backend=kbatch.BACKEND)


# ------------------------------------------------------------------------------------ scan + CRC
def kbatch_iter_scan(data):
    return sum(1 for _ in kbatch.iter_batches(data, verify_crc=True))


def kbatch_kernel_scan(data):
    cols = _backend.core.scan_batches(data, 0, -1, True)
    if not cols["crc_valid"].all():
        raise AssertionError("bad crc")
    return len(cols["crc"])


def peer_scan(mr_class, data):
    n = 0
    m = mr_class(data)
    while m.has_next():
        if not m.next_batch().validate_crc():
            raise AssertionError("bad crc")
        n += 1
    return n


@pytest.mark.benchmark(group="codec scan+crc (GB/s)")
@pytest.mark.parametrize("impl", ["kbatch", "kbatch scan_batches", "aiokafka", "kafka-python"])
def test_scan_crc(benchmark, impl):
    fn, args = {
        "kbatch": (kbatch_iter_scan, (DATA,)),
        "kbatch scan_batches": (kbatch_kernel_scan, (DATA,)),
        "aiokafka": (peer_scan, (aiokafka_mr.MemoryRecords, DATA)),
        "kafka-python": (peer_scan, (kafka_mr.MemoryRecords, DATA)),
    }[impl]
    bad = bytearray(DATA)
    bad[len(DATA) // 2 + 100] ^= 1  # the check must catch a flipped bit in the middle batch's records
    with pytest.raises((AssertionError, kbatch.CrcMismatchError)):
        fn(*args[:-1], bytes(bad))
    assert fn(*args) == N_BATCHES
    benchmark(fn, *args)
    benchmark.extra_info.update(bytes=len(DATA), backend=kbatch.BACKEND)


# ------------------------------------------------------------------------------------ CRC32C per call
CRC_INPUTS = {"64B": DATA[1000:1064], "4KiB": DATA[:4096], "1MiB": DATA[:1 << 20]}


@pytest.mark.benchmark(group="codec crc32c")
@pytest.mark.parametrize("size", list(CRC_INPUTS))
@pytest.mark.parametrize("impl", ["kbatch.crc32c", "kbatch._core.crc32c", "crc32c package"])
def test_crc32c(benchmark, impl, size):
    data = CRC_INPUTS[size]
    fn = {"kbatch.crc32c": kbatch.crc32c, "kbatch._core.crc32c": _backend.core.crc32c,
          "crc32c package": crc32c_pkg.crc32c}[impl]
    expected = crc32c_pkg.crc32c(data)
    assert fn(data) == expected
    if len(data) <= 4096:
        assert importlib.import_module("kbatch._core_py").crc32c(data) == expected  # and the pure twin
    benchmark.group = f"codec crc32c {size}"
    benchmark(fn, data)
    benchmark.extra_info.update(bytes=len(data), backend=kbatch.BACKEND)
