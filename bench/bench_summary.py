"""The summary (kbatch.log.summary, issue 40) against a full decode, side by side, same numbers.

    PYTHONPATH=src .venv/bin/python bench/bench_summary.py            # 4,000,000 rows, then the day
    KBATCH_BENCH_SUMMARY_RECORDS=10000000 PYTHONPATH=src .venv/bin/python bench/bench_summary.py
    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_summary.py --benchmark-only   # dev.py bench

The script is the separate run at scale (bench/results-summary-scale.md, carried into
results-summary.md and README.md by bench/report.py); the pytest-benchmark tests time the same
peers on a smaller topic (KBATCH_BENCH_SUMMARY_PYTEST_RECORDS, default 1,000,000, and a
400,000-record day) for `dev.py bench`.

Data (generated once into $KBATCH_BENCH_CACHE or ~/.cache/kbatch/bench-summary): a topic of
KBATCH_BENCH_SUMMARY_RECORDS records in 4 partitions shaped as bench_spark.py's scale topic (16-byte
keys of 200,000 users, 180-230 byte JSON values, a header on every tenth record, batches of 1000
records from an idempotent producer, CreateTime), 64 MiB segments (so most bytes are in sealed
segments, as in a topic with history; Kafka's default is 1 GiB), a transactional producer's
committed and aborted transactions every 200 batches; and one partition-day: 2,000,000 records with
timestamps spread over 24 hours (in batches of 1000, a few out of order inside).

Timed, each peer in the same process, rounds interleaved (min and median of the rounds):

1. header figures of the topic, both isolation levels (records, first/last offset, max timestamp,
   per producer, codecs, control batches; `summarize(timestamps=False)`, what `kbatch stats --fast`
   reads) against the same figures from a full decode (`FetchResult.record_batches`: every record
   decoded into Arrow columns, both levels), three ways: warm (the verified headers of the sealed
   segments and of the active segment's verified prefix cached, nothing appended between rounds),
   cold (every CRC checked, cache empty) and `trust_headers` (no CRC, no cache);
2. `kbatch stats --fast` (the CLI, all partitions) against `kbatch stats` (every record decoded);
3. a per-minute histogram of the partition-day (`summary.histogram`: a timestamps walk through the
   record_fields_v2 kernel) against `decode_columns` of the same bytes bucketed with numpy.

Each pair's answers are compared before anything is timed. Results: bench/results-summary-scale.md
(the script), bench/results-summary.md (pytest-benchmark, with the script's results carried in).
"""
from __future__ import annotations

import io
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import kbatch  # noqa: E402
from kbatch.log.fetch import IsolationLevel, read_log  # noqa: E402
from kbatch.log.summary import SummaryCache, histogram, summarize  # noqa: E402

RECORDS = int(os.environ.get("KBATCH_BENCH_SUMMARY_RECORDS", "4000000"))
PYTEST_RECORDS = int(os.environ.get("KBATCH_BENCH_SUMMARY_PYTEST_RECORDS", "1000000"))
PYTEST_DAY_RECORDS = 400_000
DAY_RECORDS = int(os.environ.get("KBATCH_BENCH_SUMMARY_DAY_RECORDS", "2000000"))
ROUNDS = int(os.environ.get("KBATCH_BENCH_SUMMARY_ROUNDS", "5"))
PARTITIONS = 4
PER_BATCH = 1000
SEGMENT_BYTES = 64 << 20
KEYS = 200_000
T0 = 1_760_000_000_000
DAY = 86_400_000
COUNTRIES = (b"DE", b"FR", b"US", b"BR", b"IN", b"JP", b"NG", b"CA", b"AU", b"ES", b"IT", b"MX")


def cache_root() -> str:
    base = os.environ.get("KBATCH_BENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kbatch")
    return os.path.join(base, "bench-summary")


def value(i: int) -> bytes:
    return (b'{"id":%d,"user":"user-%06d","country":"%s","amount":%d.%02d,"items":%d,"note":"%s"}'
            % (i, (i * 7919) % KEYS, COUNTRIES[i % len(COUNTRIES)], i % 997, i % 100, 1 + i % 9, b"x" * (40 + i % 50)))


class _Segments:
    """Batches appended to a partition directory, rolled at SEGMENT_BYTES."""

    def __init__(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        self.d, self.f, self.size = d, None, 0

    def write(self, base: int, data: bytes) -> None:
        if self.f is None or self.size + len(data) > SEGMENT_BYTES:
            if self.f is not None:
                self.f.close()
            self.f, self.size = open(os.path.join(self.d, f"{base:020d}.log"), "wb"), 0
        self.f.write(data)
        self.size += len(data)

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
        kbatch.rebuild_indexes(self.d)


def generate_topic(root: str, n: int) -> None:
    per = n // PARTITIONS
    for p in range(PARTITIONS):
        out = _Segments(os.path.join(root, f"scale-{p}"))
        off, seq, tseq, k, batch_no = 0, 0, 0, p * per, 0
        while off < per:
            batch_no += 1
            if batch_no % 200 == 0:  # a transaction of the other producer: one batch, then its marker
                b = kbatch.BatchBuilder(base_offset=off, producer_id=9000 + p, producer_epoch=0, base_sequence=tseq,
                                        is_transactional=True, timestamp_extended=False)
                for i in range(10):
                    b.append(T0 + k, b"txn-%012d" % i, b"t" * 100)
                out.write(off, b.build())
                off, tseq = off + 10, tseq + 10
                out.write(off, kbatch.build_end_txn_marker(producer_id=9000 + p, producer_epoch=0,
                                                           commit=batch_no % 400 == 0, coordinator_epoch=1,
                                                           base_offset=off, timestamp=T0 + k))
                off += 1
                continue
            m = min(PER_BATCH, per - off)
            b = kbatch.BatchBuilder(base_offset=off, producer_id=1000 + p, producer_epoch=0, base_sequence=seq,
                                    timestamp_extended=False)
            for i in range(m):
                j = k + i
                b.append(T0 + j, b"user-%06d......" % ((j * 7919) % KEYS), value(j),
                         headers=[("h", b"x")] if j % 10 == 0 else ())
            out.write(off, b.build())
            off, seq, k = off + m, seq + m, k + m
        out.close()


def generate_day(root: str, n: int) -> None:
    rng = random.Random(5)
    out = _Segments(os.path.join(root, "day-0"))
    step = DAY / n
    for base in range(0, n, PER_BATCH):
        b = kbatch.BatchBuilder(base_offset=base, timestamp_extended=False)
        for i in range(base, min(base + PER_BATCH, n)):
            ts = T0 + int(i * step) - (rng.randrange(5000) if i % 97 == 0 else 0)  # a few late records
            b.append(ts, b"user-%06d......" % (i % KEYS), value(i)[:120])
        out.write(base, b.build())
    out.close()


def data(n: int, day: int) -> tuple[str, str]:
    root = os.path.join(cache_root(), f"topic-{n}-{PARTITIONS}p")
    droot = os.path.join(cache_root(), f"day-{day}")
    for r, gen, arg in ((root, generate_topic, n), (droot, generate_day, day)):
        stamp = os.path.join(r, "generated.json")
        if not os.path.exists(stamp):
            shutil.rmtree(r, ignore_errors=True)
            t = time.perf_counter()
            gen(r, arg)
            with open(stamp, "w") as f:
                json.dump({"records": arg, "seconds": time.perf_counter() - t}, f)
    return root, droot


def partitions(root: str) -> list[str]:
    return sorted(os.path.join(root, d) for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))


# ------------------------------------------------------------------------------------ the peers
def header_figures(parts: list[str], **kw) -> list:
    out = []
    for p in parts:
        log = kbatch.Log.open(p)
        try:
            s = summarize(log, timestamps=False, **kw)
        finally:
            log.close()
        out.append([(lvl.records, lvl.first_offset, lvl.last_offset, lvl.max_timestamp,
                     sorted((q.producer_id, q.records) for q in lvl.producers if q.records))
                    for lvl in (s.read_uncommitted, s.read_committed)])
    return out


def decoded_figures(parts: list[str]) -> list:
    """The same figures from every record decoded (Arrow columns, the batch fields for the producer)."""
    import pyarrow.compute as pc

    out = []
    for p in parts:
        log = kbatch.Log.open(p)
        try:
            levels = []
            for iso in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
                res = read_log(log, log.log_start_offset, isolation=iso)
                n, first, last, mx, prods = 0, None, None, None, {}
                for rb in res.record_batches(None, None, include_headers=True, batch_fields=True):
                    n += rb.num_rows
                    offs = rb.column("offset")
                    first = offs[0].as_py() if first is None else first
                    last = offs[-1].as_py()
                    t = pc.max(rb.column("timestamp")).cast("int64").as_py() // 1000
                    mx = t if mx is None else max(mx, t)
                    pid = rb.column("producerId").to_numpy()
                    for q, c in zip(*np.unique(pid[pid >= 0], return_counts=True)):
                        prods[int(q)] = prods.get(int(q), 0) + int(c)
                levels.append((n, first, last, mx, sorted(prods.items())))
            out.append(levels)
        finally:
            log.close()
    return out


def cli_stats(root: str, fast: bool) -> list:
    from kbatch.cli.stats import cmd_stats

    out = io.StringIO()
    code = cmd_stats(root, as_json=True, quiet=True, fast=fast, out=out, err=io.StringIO())
    assert code == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def day_histogram(part: str, cache) -> dict:
    log = kbatch.Log.open(part)
    try:
        return histogram(log, 60_000, cache=cache)[0]
    finally:
        log.close()


def decoded_histogram(part: str) -> dict:
    from kbatch.columns.decode import decode_columns

    h: dict[int, int] = {}
    for seg in sorted(f for f in os.listdir(part) if f.endswith(".log")):
        with open(os.path.join(part, seg), "rb") as f:
            buf = f.read()
        t = decode_columns(buf)
        ts = t.column("timestamp").cast("int64").to_numpy(zero_copy_only=False) // 1000
        keys, counts = np.unique(ts - ts % 60_000, return_counts=True)
        for k, c in zip(keys.tolist(), counts.tolist()):
            h[k] = h.get(k, 0) + c
    return dict(sorted(h.items()))


def growing_copies(parts: list[str], into: str) -> list[str]:
    """Each partition again under `into`: its sealed segments' .log files hard-linked (only read),
    everything else copied (the active segment, to append to it; the index files)."""
    out = []
    for p in parts:
        d = os.path.join(into, os.path.basename(p))
        os.makedirs(d)
        logs = sorted(f for f in os.listdir(p) if f.endswith(".log"))
        for f in os.listdir(p):
            if f in logs[:-1]:
                os.link(os.path.join(p, f), os.path.join(d, f))
            elif not f.endswith(".json"):
                shutil.copyfile(os.path.join(p, f), os.path.join(d, f))
        out.append(d)
    return out


def batches_to_append(part: str, rounds: int, n: int = PER_BATCH) -> list[bytes]:
    """`rounds` batches of `n` records (the topic's shape, a producer of its own) to append one
    after the other at the partition's log end."""
    log = kbatch.Log.open(part)
    try:
        end = log.end_offset()
    finally:
        log.close()
    out = []
    for r in range(rounds):
        base = end + r * n
        b = kbatch.BatchBuilder(base_offset=base, timestamp_extended=False)
        for i in range(base, base + n):
            b.append(T0 + i, b"user-%06d......" % (i % KEYS), value(i))
        out.append(b.build())
    return out


def append(part: str, data: bytes) -> None:
    active = sorted(f for f in os.listdir(part) if f.endswith(".log"))[-1]
    with open(os.path.join(part, active), "ab") as f:
        f.write(data)


# ------------------------------------------------------------------------------------ timing
def side_by_side(fns: dict, rounds: int) -> dict:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return times


def fmt(ts: list[float]) -> str:
    return f"{min(ts) * 1000:.1f} ms (median {statistics.median(ts) * 1000:.1f})"


def main() -> int:
    import kbatch as _k

    if _k.BACKEND != "cython":
        print(f"benchmarks report the compiled core; kbatch.BACKEND is {_k.BACKEND!r}", file=sys.stderr)
        return 2
    load0 = os.getloadavg()[0]
    root, droot = data(RECORDS, DAY_RECORDS)
    parts = partitions(root)
    size = sum(os.path.getsize(os.path.join(p, f)) for p in parts for f in os.listdir(p) if f.endswith(".log"))
    day = os.path.join(droot, "day-0")
    tmp = tempfile.mkdtemp(prefix="bench-summary-cache-")
    os.environ["KBATCH_SUMMARY_CACHE"] = os.path.join(tmp, "cli")
    try:
        warm = SummaryCache(os.path.join(tmp, "warm"))
        # the answers first: equal, or nothing is timed
        want = decoded_figures(parts)
        for kw in (dict(cache=warm), dict(cache=warm), dict(cache=False), dict(trust_headers=True, cache=False)):
            got = header_figures(parts, **kw)
            assert got == want, (kw, got, want)
        fast, full = cli_stats(root, True), cli_stats(root, False)
        keys = ("records", "batches", "first_offset", "last_offset", "max_timestamp", "commits", "aborts",
                "per_producer", "read_committed")
        for a, b in zip(fast, full):
            for x in (a, b):
                x["read_committed"].pop("min_timestamp")  # a --fast stats leaves it out (omitted)
            assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
        hwarm = SummaryCache(os.path.join(tmp, "hist-warm"))
        hist = day_histogram(day, hwarm)
        assert hist == decoded_histogram(day) == day_histogram(day, hwarm) == day_histogram(day, False), \
            "histograms differ"
        assert sum(hist.values()) == DAY_RECORDS

        def cold() -> None:
            shutil.rmtree(os.path.join(tmp, "cold"), ignore_errors=True)
            header_figures(parts, cache=SummaryCache(os.path.join(tmp, "cold")))

        t1 = side_by_side({"full decode": lambda: decoded_figures(parts),
                           "summary, warm": lambda: header_figures(parts, cache=warm),
                           "summary, cold (CRC)": cold,
                           "summary, trust_headers": lambda: header_figures(parts, trust_headers=True, cache=False)},
                          ROUNDS)
        t2 = side_by_side({"kbatch stats": lambda: cli_stats(root, False),
                           "kbatch stats --fast": lambda: cli_stats(root, True)}, max(2, ROUNDS // 2))
        def hist_cold() -> None:
            shutil.rmtree(os.path.join(tmp, "hist-cold"), ignore_errors=True)
            day_histogram(day, SummaryCache(os.path.join(tmp, "hist-cold")))

        t3 = side_by_side({"decode_columns + numpy": lambda: decoded_histogram(day),
                           "histogram, warm": lambda: day_histogram(day, hwarm),
                           "histogram, cold (CRC, timestamps walk)": hist_cold}, ROUNDS)
        # an append between summaries: only the appended batch is read and CRC-checked (the
        # verified prefix of the active segment cached); on copies, the generated data untouched
        grow = growing_copies(parts, os.path.join(tmp, "grow"))
        gcache = SummaryCache(os.path.join(tmp, "grow-cache"))
        header_figures(grow, cache=gcache)
        rounds4 = max(2, ROUNDS // 2)
        todo = {g: batches_to_append(g, rounds4) for g in grow}
        appended = [len(b) for bs in todo.values() for b in bs]
        t4: dict[str, list[float]] = {"full decode": [], "summary, warm after an append": []}
        for r in range(rounds4):   # peers interleaved; the appends (a producer's work) are not timed
            t = time.perf_counter()
            decoded_figures(grow)
            t4["full decode"].append(time.perf_counter() - t)
            for g in grow:
                append(g, todo[g][r])
            t = time.perf_counter()
            header_figures(grow, cache=gcache)
            t4["summary, warm after an append"].append(time.perf_counter() - t)
        assert header_figures(grow, cache=gcache) == decoded_figures(grow) == header_figures(grow, cache=False)
        log = kbatch.Log.open(grow[0])
        try:
            last = summarize(log, cache=gcache)
            # the headers come from the cache but for what was appended (up to _PREFIX_STEP, read again)
            assert last.cached_bytes + last.scanned_bytes == last.log_bytes
            assert last.scanned_bytes <= sum(len(b) for b in todo[grow[0]])
        finally:
            log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()[0]

    def ratio(times: dict, peer: str, ours: str) -> str:
        a, b = times[peer], times[ours]
        return f"{min(a) / min(b):.1f}x (median {statistics.median(a) / statistics.median(b):.1f}x)"

    rows = [
        ("header figures, both isolation levels, warm (the verified headers of sealed segments and of the active "
         "segment's prefix cached; nothing appended between rounds)",
         t1, "full decode", "summary, warm", ">= 100x"),
        (f"header figures, warm, after appending a {PER_BATCH}-record batch (~{statistics.mean(appended) / 1024:.0f} KiB) "
         "to each partition (only it is read and CRC-checked)", t4, "full decode", "summary, warm after an append",
         ">= 100x"),
        ("header figures, cold (every CRC checked, cache empty)", t1, "full decode", "summary, cold (CRC)", "report"),
        ("header figures, trust_headers (no CRC, no cache: only the batch headers are read)", t1, "full decode",
         "summary, trust_headers", "report"),
        ("`kbatch stats --fast` vs `kbatch stats` (CLI, 4 partitions, cache warm after the first round)", t2,
         "kbatch stats", "kbatch stats --fast", "report"),
        ("per-minute histogram of one partition-day vs decode_columns, warm (the walk remembered, the active "
         "segment's prefix too)",
         t3, "decode_columns + numpy", "histogram, warm", ">= 10x"),
        ("per-minute histogram, cold (every CRC checked, every CreateTime record's timestamp walked)", t3,
         "decode_columns + numpy", "histogram, cold (CRC, timestamps walk)", "report"),
    ]
    lines = ["# The summary (issue 40): header figures and histograms against a full decode", "",
             f"Generated by `KBATCH_BENCH_SUMMARY_RECORDS={RECORDS} bench/bench_summary.py` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load0:.1f} at the start, "
             f"{load1:.1f} at the end (the machine is shared: read the ratios). Topic: {RECORDS:,} records, "
             f"{PARTITIONS} partitions, {size / 2**20:.0f} MiB in 64 MiB segments; partition-day: {DAY_RECORDS:,} "
             f"records. Answers compared equal before timing. {ROUNDS} rounds, peers interleaved.", "",
             "| question | peer | kbatch | ratio (min, median) | target |", "|---|---|---|---|---|"]
    for q, times, peer, ours, target in rows:
        lines.append(f"| {q} | {peer}: {fmt(times[peer])} | {ours}: {fmt(times[ours])} | "
                     f"{ratio(times, peer, ours)} | {target} |")
    notes = os.path.join(HERE, "notes", "summary.md")
    if os.path.exists(notes):
        lines += ["", "## Notes", "", open(notes, encoding="utf-8").read().rstrip()]
    text = "\n".join(lines) + "\n"
    print(text)
    if os.environ.get("KBATCH_BENCH_WRITE", "1") != "0":
        with open(os.path.join(HERE, "results-summary-scale.md"), "w", encoding="utf-8") as f:
            f.write(text)
    return 0


# ------------------------------------------------------------------------------------ pytest-benchmark
try:
    import pytest
except ImportError:  # the script alone needs no pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.fixture(autouse=True)
    def _cython_backend(monkeypatch):
        from kbatch import _backend

        monkeypatch.setattr(_backend, "core", pytest.importorskip("kbatch._core"))

    @pytest.fixture(scope="module")
    def small(tmp_path_factory):
        """(partitions, the day's partition, a warm header cache, a warm histogram cache), answers checked."""
        root, droot = data(PYTEST_RECORDS, PYTEST_DAY_RECORDS)
        parts, day = partitions(root), os.path.join(droot, "day-0")
        d = tmp_path_factory.mktemp("summary-cache")
        warm, hwarm = SummaryCache(str(d / "warm")), SummaryCache(str(d / "hist-warm"))
        want = decoded_figures(parts)
        for kw in (dict(cache=warm), dict(cache=warm), dict(cache=False)):
            assert header_figures(parts, **kw) == want
        assert day_histogram(day, hwarm) == decoded_histogram(day) == day_histogram(day, hwarm)
        return parts, day, warm, hwarm, d

    @pytest.mark.benchmark(group="summary header figures")
    @pytest.mark.parametrize("impl", ["summary, warm", "summary, cold (CRC)", "full decode"])
    def test_header_figures(benchmark, small, impl):
        parts, _day, warm, _h, d = small

        def cold() -> None:
            shutil.rmtree(d / "cold", ignore_errors=True)
            header_figures(parts, cache=SummaryCache(str(d / "cold")))

        fn = {"summary, warm": lambda: header_figures(parts, cache=warm), "summary, cold (CRC)": cold,
              "full decode": lambda: decoded_figures(parts)}[impl]
        benchmark.pedantic(fn, rounds=3, iterations=1)
        benchmark.extra_info["records"] = PYTEST_RECORDS

    @pytest.mark.benchmark(group="summary histogram")
    @pytest.mark.parametrize("impl", ["histogram, warm", "histogram, cold (CRC, timestamps walk)",
                                      "decode_columns + numpy"])
    def test_histogram(benchmark, small, impl):
        _parts, day, _w, hwarm, d = small

        def cold() -> None:
            shutil.rmtree(d / "hist-cold", ignore_errors=True)
            day_histogram(day, SummaryCache(str(d / "hist-cold")))

        fn = {"histogram, warm": lambda: day_histogram(day, hwarm), "histogram, cold (CRC, timestamps walk)": cold,
              "decode_columns + numpy": lambda: decoded_histogram(day)}[impl]
        benchmark.pedantic(fn, rounds=3, iterations=1)
        benchmark.extra_info["records"] = PYTEST_DAY_RECORDS


if __name__ == "__main__":
    sys.exit(main())
