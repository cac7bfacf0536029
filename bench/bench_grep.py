"""`kbatch grep` benchmarks (issue 39), run with pytest-benchmark:

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_grep.py --benchmark-only \
        --benchmark-timer time.process_time

The topic: KBATCH_BENCH_GREP_PARTITIONS (default 4) partitions of KBATCH_BENCH_GREP_RECORDS
(default 500,000) records each, in batches of 100 (about 17 KB: the producer's default
batch.size), 128 MB segments, written through `Log.append` (so the indexes are a writer's):
order events as JSON values of 120-200 bytes, 13-byte keys, a trace-id header. The content comes
from a pool of distinct batches appended in turn; three records carry planted needles.

1. uncompressed, a needle in no record (every byte is searched): `kbatch grep --count` end to end
   (read path: Log.open, the read_committed header pass, CRCs, windows; then the kernel), the same
   read_uncommitted, the kernel alone (grep_sections_v2 over the topic's records sections in
   memory), against `bytes.find` over the same values in a Python loop and the physical bound of a
   memory scan: glibc's memmem over one contiguous buffer of the records' bytes (no match).
2. the planted needles: found exactly once each, with topic/partition/offset (checked), timed.
   Also the loop a user of the Python API writes without grep: the read path's records (what `kbatch
   cat` prints), each value searched with bytes.find.
3. lz4 and zstd (one partition each, the same records): `kbatch grep` against the decompression
   bound: reading the same batches through the read path and decompressing each, nothing else.

Rates are bytes of records sections (decompressed) per second. Every benchmark checks its answer
first. `python bench/bench_grep.py` prints the ratios without pytest-benchmark.
"""
import ctypes
import ctypes.util
import io
import os
import random
import time

import pytest

import kbatch
from kbatch import _backend
from kbatch.cli.grep import cmd_grep
from kbatch.log.fetch import IsolationLevel, read_log
from kbatch.log.unified_log import Log

cython_core = pytest.importorskip("kbatch._core")

PARTITIONS = int(os.environ.get("KBATCH_BENCH_GREP_PARTITIONS", "4"))
RECORDS = int(os.environ.get("KBATCH_BENCH_GREP_RECORDS", "500000"))
PER_BATCH = 100
POOL = 400            # distinct batches per codec: 40,000 distinct records
T0 = 1_700_000_000_000
ABSENT = b"NEEDLE-NOT-THERE"
ABSENT_RE = rb"NEEDLE-NOT-[0-9]+"   # a regex: the kernel looks for its literal "NEEDLE-NOT-" first
#: needle -> (partition, batch number, record in the batch)
PLANTED = {b"NEEDLE-KEY-0001": (0, RECORDS // PER_BATCH // 4, 17),
           b"NEEDLE-VAL-0002": (min(1, PARTITIONS - 1), RECORDS // PER_BATCH * 6 // 7, 99),
           b"NEEDLE-HDR-0003": (PARTITIONS - 1, RECORDS // PER_BATCH - 1, 0)}
WORDS = [b"order", b"shipped", b"pending", b"paris", b"berlin", b"amount", b"EUR", b"USD", b"customer", b"sku",
         b"warehouse", b"returned"]


# ------------------------------------------------------------------------------------ data
def _batch(rnd, codec, first, plant=None):
    b = kbatch.BatchBuilder(compression=codec)
    for i in range(PER_BATCH):
        key = b"user-%08d" % rnd.randrange(10**8)
        value = (b'{"id":%d,"customer":"c-%06d","status":"%s","city":"%s","amount":%d.%02d,"items":[%s]}' % (
            first + i, rnd.randrange(10**6), rnd.choice(WORDS), rnd.choice(WORDS), rnd.randrange(10000),
            rnd.randrange(100), b",".join(b'"%s-%d"' % (rnd.choice(WORDS), rnd.randrange(1000))
                                          for _ in range(rnd.randrange(1, 5)))))
        headers = [("trace-id", b"%016x" % rnd.getrandbits(64))]
        if plant is not None and plant[1] == i:
            needle = plant[0]
            if b"KEY" in needle:
                key += needle
            elif b"VAL" in needle:
                value += needle
            else:
                headers.append(("origin", needle))
        b.append(T0 + first + i, key, value, headers=headers)
    return b.build()


def build_topic(root, topic, codec, partitions, records):
    rnd = random.Random(7)
    pool = [_batch(rnd, codec, 0) for _ in range(POOL)]
    for p in range(partitions):
        log = Log.create(os.path.join(root, f"{topic}-{p}"), kbatch.LogConfig(segment_bytes=128 << 20), now_ms=T0)
        try:
            for n in range(records // PER_BATCH):
                plant = [(needle, rec) for needle, (pp, bn, rec) in PLANTED.items() if (pp, bn) == (p, n)]
                data = _batch(rnd, codec, n * PER_BATCH, plant[0]) if plant else pool[n % POOL]
                log.append(data, now_ms=T0 + records, from_client=False)
        finally:
            log.close()


@pytest.fixture(scope="module")
def topics(tmp_path_factory):
    root = os.environ.get("KBATCH_BENCH_GREP_DIR") or str(tmp_path_factory.mktemp("grep"))
    if not os.path.exists(os.path.join(root, "orders-0")):
        build_topic(root, "orders", kbatch.Compression.NONE, PARTITIONS, RECORDS)
        build_topic(root, "orders_lz4", kbatch.Compression.LZ4, 1, RECORDS)
        build_topic(root, "orders_zstd", kbatch.Compression.ZSTD, 1, RECORDS)
    return root


def sections(root, topic):
    """Every records section (decompressed) of a topic's partitions, through the read path:
    [(bytes, record count)]."""
    out = []
    for d in sorted(os.listdir(root)):
        if d.rsplit("-", 1)[0] != topic:
            continue
        log = Log.open(os.path.join(root, d))
        try:
            for fb in read_log(log, 0).batches():
                out.append((bytes(fb.batch.records_bytes()), fb.batch.record_count))
        finally:
            log.close()
    return out


@pytest.fixture(scope="module")
def plain(topics):
    secs = sections(topics, "orders")
    buf = b"".join(s for s, _ in secs)
    starts, pos = [], 0
    for s, _n in secs:
        starts.append(pos)
        pos += len(s)
    values = []
    for s, n in secs:  # the values as bytes, decoded once (not timed): bytes.find's input
        values += [bytes(r.value) for r in cython_core.decode_records_v2(s, 0, len(s), n, 0, 0, None, 0, False)]
    return dict(buf=buf, starts=starts, ends=[a + len(s) for a, (s, _n) in zip(starts, secs)],
                counts=[n for _s, n in secs], values=values, records=sum(n for _s, n in secs))


# ------------------------------------------------------------------------------------ the implementations
def grep_count(root, needle, topic="orders", level=None, regex=False):
    out = io.BytesIO()
    code = cmd_grep(needle.decode(), [root], topic=[topic], count=True, isolation_level=level, regex=regex, out=out,
                    err=io.StringIO())
    return code, out.getvalue().decode()


def kernel(p, needle, fields=15):
    return cython_core.grep_sections_v2(p["buf"], p["starts"], p["ends"], p["counts"], [0] * len(p["starts"]),
                                        needle, fields)


def python_find(values, needle):
    n = 0
    for v in values:
        if v.find(needle) >= 0:
            n += 1
    return n


def records_find(root, needle, topic="orders"):
    """What a user of the Python API writes without grep: the read path's records (cat's), each
    value searched with bytes.find."""
    n = 0
    for d in sorted(os.listdir(root)):
        if d.rsplit("-", 1)[0] != topic:
            continue
        log = Log.open(os.path.join(root, d))
        try:
            for _b, r in read_log(log, 0, isolation=IsolationLevel.READ_COMMITTED).records():
                if r.value is not None and bytes(r.value).find(needle) >= 0:
                    n += 1
        finally:
            log.close()
    return n


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.memmem.restype = ctypes.c_void_p
_libc.memmem.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]


def memmem(buf, needle):
    return _libc.memmem(buf, len(buf), needle, len(needle))


def decompress_only(root, topic):
    """The read path's batches of a topic, each decompressed, nothing searched: the bound."""
    n = 0
    for d in sorted(os.listdir(root)):
        if d.rsplit("-", 1)[0] != topic:
            continue
        log = Log.open(os.path.join(root, d))
        try:
            for fb in read_log(log, 0, isolation=IsolationLevel.READ_COMMITTED).batches():
                n += len(fb.batch.records_bytes())
        finally:
            log.close()
    return n


# ------------------------------------------------------------------------------------ benches
NO_MATCH = ["kbatch grep", "kbatch grep read_uncommitted", "kbatch grep -E (literal prefilter)",
            "kbatch grep kernel", "kbatch grep kernel --value",
            "bytes.find over values (Python loop)", "read path records + bytes.find (Python loop)",
            "memmem over one buffer (bound)"]


@pytest.mark.benchmark(group="grep uncompressed, no match")
@pytest.mark.parametrize("impl", NO_MATCH)
def test_grep_no_match(benchmark, topics, plain, impl):
    _backend.core = cython_core
    total = PARTITIONS * RECORDS
    assert plain["records"] == total
    none = (1, "".join(f"orders [{p}]: 0\n" for p in range(PARTITIONS)) + "total: 0\n")
    assert grep_count(topics, ABSENT) == none == grep_count(topics, ABSENT_RE, regex=True)
    assert kernel(plain, ABSENT) == [] and python_find(plain["values"], ABSENT) == 0 == records_find(topics, ABSENT)
    assert records_find(topics, b"NEEDLE-VAL-0002") == 1
    assert memmem(plain["buf"], ABSENT) is None
    fn, args = {
        "kbatch grep": (grep_count, (topics, ABSENT)),
        "kbatch grep read_uncommitted": (grep_count, (topics, ABSENT, "orders", "read_uncommitted")),
        "kbatch grep -E (literal prefilter)": (grep_count, (topics, ABSENT_RE, "orders", None, True)),
        "kbatch grep kernel": (kernel, (plain, ABSENT)),
        "kbatch grep kernel --value": (kernel, (plain, ABSENT, 2)),
        "bytes.find over values (Python loop)": (python_find, (plain["values"], ABSENT)),
        "read path records + bytes.find (Python loop)": (records_find, (topics, ABSENT)),
        "memmem over one buffer (bound)": (memmem, (plain["buf"], ABSENT)),
    }[impl]
    benchmark.pedantic(fn, args=args, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(records=total, bytes=len(plain["buf"]))


@pytest.mark.benchmark(group="grep uncompressed, planted needles")
@pytest.mark.parametrize("impl", ["kbatch grep -J (3 needles)"])
def test_grep_planted(benchmark, topics, plain, impl):
    _backend.core = cython_core

    def three():
        found = []
        for needle in PLANTED:
            out = io.BytesIO()
            assert cmd_grep(needle.decode(), [topics], topic=["orders"], as_json=True, out=out, err=io.StringIO()) == 0
            found.append(out.getvalue())
        return found

    import json
    for needle, out in zip(PLANTED, three()):
        lines = [json.loads(x) for x in out.splitlines()]
        p, bn, rec = PLANTED[needle]
        assert [(o["topic"], o["partition"], o["offset"]) for o in lines] == [("orders", p, bn * PER_BATCH + rec)]
    benchmark.pedantic(three, rounds=3, iterations=1)
    benchmark.extra_info.update(records=3 * PARTITIONS * RECORDS, bytes=3 * len(plain["buf"]))


@pytest.mark.benchmark(group="grep compressed")
@pytest.mark.parametrize("codec", ["lz4", "zstd"])
@pytest.mark.parametrize("impl", ["kbatch grep", "decompress only (bound)"])
def test_grep_compressed(benchmark, topics, plain, impl, codec):
    _backend.core = cython_core
    topic = f"orders_{codec}"
    secs = sections(topics, topic)
    size = sum(len(s) for s, _n in secs)
    assert size == decompress_only(topics, topic) == sum(len(s) for s, _n in sections(topics, "orders")[:len(secs)])
    assert grep_count(topics, ABSENT, topic) == (1, f"{topic} [0]: 0\ntotal: 0\n")
    assert grep_count(topics, b"NEEDLE-KEY-0001", topic) == (0, f"{topic} [0]: 1\ntotal: 1\n")
    if impl == "kbatch grep":
        benchmark.pedantic(grep_count, args=(topics, ABSENT, topic), rounds=5, iterations=1, warmup_rounds=1)
    else:
        benchmark.pedantic(decompress_only, args=(topics, topic), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(records=RECORDS, bytes=size)


# ------------------------------------------------------------------------------------ ratios
def _cpu(fn, *args, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        fn(*args)
        best = min(best, time.process_time() - t)
    return best


if __name__ == "__main__":
    import tempfile

    _backend.core = cython_core
    root = os.environ.get("KBATCH_BENCH_GREP_DIR") or tempfile.mkdtemp()
    if not os.path.exists(os.path.join(root, "orders-0")):
        build_topic(root, "orders", kbatch.Compression.NONE, PARTITIONS, RECORDS)
        build_topic(root, "orders_lz4", kbatch.Compression.LZ4, 1, RECORDS)
        build_topic(root, "orders_zstd", kbatch.Compression.ZSTD, 1, RECORDS)
    secs = sections(root, "orders")
    buf = b"".join(s for s, _ in secs)
    gb = len(buf) / 1e9
    rows = {"kbatch grep (CLI, read_committed)": _cpu(grep_count, root, ABSENT),
            "kbatch grep (CLI, read_uncommitted)": _cpu(grep_count, root, ABSENT, "orders", "read_uncommitted"),
            "memmem over one buffer": _cpu(memmem, buf, ABSENT)}
    for name, t in rows.items():
        print(f"{name:40s} {t * 1e3:8.1f} ms CPU  {gb / t:6.2f} GB/s")
