"""Kafka files in the engines (issue 41): kbatch.scan under Polars and Ray against Parquet of the
same rows, and the scan's peak memory against its budget.

    KBATCH_BACKEND=cython .venv/bin/python bench/bench_engines.py [--records 10000000] [--partitions 8]
        [--rounds 5] [--no-ray] [--only polars|ray|memory ...] [--cache ~/.cache/kbatch/bench-engines]

Workload: N records over P partitions (`events-0..P-1`), 500-record uncompressed batches, 12-byte
keys, 100-byte values, timestamps rising 1 ms a record in each partition, 1 GiB segments with a
broker's index interval (4096 bytes); the same rows (the Kafka source's columns without headers) in
one Parquet file a partition, pyarrow's defaults (snappy, 1 Mi-row row groups, statistics). Both
are written once into the cache directory (outside the repository) and reused.

Timed side by side in one process, the peers alternating round by round (min and median of the
rounds; ratio = Parquet time / kbatch time, > 1: kbatch is faster), each result checked against
the peer's before any timing:

- key-only: `scan_kafka(root).select("key").collect()` vs `pl.scan_parquet(files).select("key").collect()`;
- time-bounded, the last tenth: `filter(timestamp >= t).group_by("partition").len()` (the bound is
  pushed: the time index skips what it excludes; Parquet skips row groups by their statistics);
- time-bounded, a middle tenth: `filter(t0 <= timestamp < t1)`: only the lower bound is pushed
  (timestamps need not rise with offsets, so the upper one is no offset bound), reported;
- Ray: `read_kafka_segments(root)` vs `ray.data.read_parquet(files)`, rows counted in the read tasks
  (a local cluster of 2 CPUs), reported;
- memory: a full scan of every column in a subprocess, its peak RSS over its baseline (VmHWM reset
  after a warm-up) against the budget (`max_bytes_in_flight`, default 64 MiB); target < 2x.

Results: bench/results-engines.md (written by this script).
"""
from __future__ import annotations

import argparse
import datetime as dt
import glob
import os
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Any, Callable

os.environ.setdefault("KBATCH_BACKEND", "cython")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import kbatch  # noqa: E402

BASE_TS = 1_700_000_000_000
HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------------------------ data
def make_data(cache: str, records: int, partitions: int) -> tuple[str, list[str]]:
    """The logs and the Parquet files (written once; a `done` marker says they are whole)."""
    root, pq_dir = os.path.join(cache, "logs"), os.path.join(cache, "parquet")
    marker = os.path.join(cache, f"done-{records}-{partitions}")
    files = [os.path.join(pq_dir, f"events-{p}.parquet") for p in range(partitions)]
    if os.path.exists(marker):
        return root, files
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(pq_dir)
    per = records // partitions
    for p in range(partitions):
        log = kbatch.Log.create(os.path.join(root, f"events-{p}"), kbatch.LogConfig(segment_bytes=1 << 30),
                                now_ms=BASE_TS)
        try:
            for lo in range(0, per, 250_000):
                n = min(250_000, per - lo)
                i = np.arange(lo, lo + n)
                keys = pa.array([b"key-%08d" % (k % 1_000_003) for k in i.tolist()], pa.binary())
                vals = pa.array([bytes([(k * 7 + p) % 251]) * 60 + b"%040d" % k for k in i.tolist()], pa.binary())
                ts = pa.array((BASE_TS + i).astype("datetime64[ms]").astype("datetime64[us]"),
                              pa.timestamp("us", tz="UTC"))
                log.append_table(pa.table({"key": keys, "value": vals, "timestamp": ts}), now_ms=BASE_TS + per,
                                 records_per_batch=500)
        finally:
            log.close()
        with kbatch.scan(os.path.join(root, f"events-{p}"), include_headers=False) as s:
            pq.write_table(s.to_table(), files[p])
        print(f"  wrote events-{p}", file=sys.stderr)
    open(marker, "w").close()
    return root, files


def make_warm(cache: str, root: str, partitions: int) -> tuple[str, str, float]:
    """The header summary's cache of the logs as written (each partition's one active segment: its
    verified prefix, docs/summary.md), warmed by kbatch.log.summary.summarize: (the logs, the
    cache directory, seconds the warm-up took)."""
    import shutil

    from kbatch.log.summary import SummaryCache, summarize

    summaries = os.path.join(cache, "summaries-active")
    shutil.rmtree(summaries, ignore_errors=True)
    t0 = time.perf_counter()
    for p in range(partitions):
        log = kbatch.Log.open(os.path.join(root, f"events-{p}"))
        try:
            summarize(log, cache=SummaryCache(summaries))
        finally:
            log.close()
    return root, summaries, time.perf_counter() - t0


# ------------------------------------------------------------------------------------ timing
def side_by_side(rounds: int, runs: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def fmt_ratio(peer: list[float], ours: list[float]) -> str:
    return f"{min(peer) / min(ours):.2f}x (median {statistics.median(peer) / statistics.median(ours):.2f}x)"


def polars_benches(root: str, files: list[str], records: int, partitions: int, rounds: int,
                   warm: tuple[str, str, float] | None = None) -> list[tuple]:
    import polars as pl

    from kbatch.polars import scan_kafka

    per = records // partitions
    lf = scan_kafka(root, include_headers=False, summary_cache=False)
    pf = pl.scan_parquet(files)
    scans: list = []
    lf_stats = scan_kafka(root, include_headers=False, summary_cache=False, on_scan=scans.append)
    def at(ms: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)

    tail = pl.col("timestamp") >= at(BASE_TS + per * 9 // 10)
    middle = (pl.col("timestamp") >= at(BASE_TS + per * 45 // 100)) & (pl.col("timestamp") < at(BASE_TS + per * 55 // 100))
    out = []
    queries = [
        ("key-only: select(key).collect()", lambda f: f.select("key").collect(), ">= 0.5x"),
        ("time-bounded, last tenth: filter(ts >= t).group_by(partition).len()",
         lambda f: f.filter(tail).group_by("partition").len().sort("partition").collect(), ">= 1.0x"),
        ("time-bounded, middle tenth: filter(t0 <= ts < t1).group_by(partition).len()",
         lambda f: f.filter(middle).group_by("partition").len().sort("partition").collect(), "(report)"),
    ]
    runs = [(name, q, target, lf, lf_stats) for name, q, target in queries]
    if warm is not None:  # the same logs, their active segments' verified headers cached by the summary
        lf_w = scan_kafka(warm[0], include_headers=False, summary_cache=warm[1])
        lf_ws = scan_kafka(warm[0], include_headers=False, summary_cache=warm[1], on_scan=scans.append)
        runs += [(name.replace(":", ", summary cache warm:", 1), q, target, lf_w, lf_ws)
                 for name, q, target in queries[1:]]
    for name, q, target, lf, lf_stats in runs:
        a, b = q(lf), q(pf)
        assert a.equals(b), f"{name}: kbatch and Parquet differ"
        q(lf_stats)
        st = scans[-1].stats
        times = side_by_side(rounds, {"kbatch": lambda: q(lf), "parquet": lambda: q(pf)})
        out.append((name, times, target, a.height, st.bytes_read, st.batches_read, sorted(st.columns_built),
                    st.ranges_from_headers))
        print(f"{name}: kbatch {min(times['kbatch']):.3f}s parquet {min(times['parquet']):.3f}s "
              f"ratio {fmt_ratio(times['parquet'], times['kbatch'])}; read {st.bytes_read >> 20} MiB", file=sys.stderr)
    return out


def ray_bench(root: str, files: list[str], rounds: int) -> tuple:
    import ray

    from kbatch.ray import read_kafka_segments

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=400 << 20, log_to_driver=False,
             configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False

        def rows(ds: Any) -> int:
            counted = ds.map_batches(lambda t: pa.table({"n": [t.num_rows]}), batch_format="pyarrow")
            return int(counted.sum("n"))

        # ray.data's threaded file listing imports fsspec's HTTP filesystem on each thread; without
        # aiohttp a concurrent import fails with an ImportError ray does not expect (only
        # ModuleNotFoundError): mark it absent, as it is, before the listing
        import importlib.util

        if importlib.util.find_spec("aiohttp") is None:
            sys.modules.setdefault("fsspec.implementations.http", None)  # type: ignore[arg-type]
        ours = lambda: rows(read_kafka_segments(root, include_headers=False))  # noqa: E731
        # a local filesystem named: ray.data otherwise probes fsspec's HTTP filesystem (aiohttp) for the paths
        peer = lambda: rows(ray.data.read_parquet(files, filesystem=pafs.LocalFileSystem()))  # noqa: E731
        a, b = ours(), peer()
        assert a == b, (a, b)
        ranges = len(kbatch.scan(root).ranges)
        times = side_by_side(rounds, {"kbatch": ours, "parquet": peer})
        print(f"ray: kbatch {min(times['kbatch']):.3f}s parquet {min(times['parquet']):.3f}s "
              f"ratio {fmt_ratio(times['parquet'], times['kbatch'])}", file=sys.stderr)
        return times, a, ranges
    finally:
        ray.shutdown()


_MEMORY = textwrap.dedent("""
    import os, sys, time
    import kbatch
    root, budget = sys.argv[1], int(sys.argv[2])
    def status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith(field + ":"))
    with kbatch.scan(root, limit=10, max_bytes_in_flight=budget) as s:
        s.to_table()
    base = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    rows = 0
    t0 = time.perf_counter()
    with kbatch.scan(root, max_bytes_in_flight=budget) as s:
        for rb in s.to_reader():
            rows += rb.num_rows
        seen = s.stats.bytes_read
    print(rows, seen, status("VmHWM") - base, time.perf_counter() - t0)
""")


def memory_bench(root: str, budget: int) -> tuple[int, int, int, float]:
    out = subprocess.run([sys.executable, "-c", _MEMORY, root, str(budget)], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    rows, seen, grew, secs = out.stdout.split()
    return int(rows), int(seen), int(grew), float(secs)


# ------------------------------------------------------------------------------------ report
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/kbatch/bench-engines"))
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--only", choices=("polars", "ray", "memory"), action="append",
                    help="run only these groups (repeatable; default: all); a partial run is best written elsewhere")
    ap.add_argument("--write", default=os.path.join(HERE, "results-engines.md"))
    args = ap.parse_args(argv)
    assert kbatch.BACKEND == "cython", "the figures are the compiled core's"
    t0 = time.time()
    root, files = make_data(os.path.join(args.cache, f"{args.records}-{args.partitions}"), args.records,
                            args.partitions)
    print(f"data ready ({time.time() - t0:.0f}s)", file=sys.stderr)
    log_bytes = sum(os.path.getsize(p) for p in glob.glob(os.path.join(root, "*", "*.log")))
    pq_bytes = sum(os.path.getsize(p) for p in files)
    load0 = os.getloadavg()[0]
    only = set(args.only or ("polars", "ray", "memory"))
    warm = make_warm(os.path.join(args.cache, f"{args.records}-{args.partitions}"), root, args.partitions) \
        if "polars" in only else None
    pol = polars_benches(root, files, args.records, args.partitions, args.rounds, warm) if "polars" in only else []
    ray_res = None if args.no_ray or "ray" not in only else ray_bench(root, files, max(2, args.rounds // 2))
    budget = kbatch.scan.DEFAULT_MAX_BYTES_IN_FLIGHT
    mem = memory_bench(root, budget) if "memory" in only else None
    load1 = os.getloadavg()[0]
    import platform

    import polars as pl

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                            text=True).stdout.strip()
    lines = [
        "# Kafka files in the engines (issue 41)", "",
        f"`KBATCH_BACKEND=cython .venv/bin/python bench/bench_engines.py --records {args.records} "
        f"--partitions {args.partitions} --rounds {args.rounds}` (commit {commit}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; one run).",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared: other sessions ran "
        f"beside it; load average {load0:.1f} at the start, {load1:.1f} at the end), CPython "
        f"{platform.python_version()}, pyarrow {pa.__version__}, polars {pl.__version__}"
        + ("" if ray_res is None else f", ray {__import__('ray').__version__}") + ".", "",
        f"Workload: {args.records:,} records over {args.partitions} partitions, 500-record uncompressed batches, "
        f"12-byte keys, 100-byte values, timestamps rising 1 ms a record: {log_bytes / 2**20:.0f} MiB of segments; "
        f"the same rows as {args.partitions} Parquet files (pyarrow defaults: snappy, statistics), "
        f"{pq_bytes / 2**20:.0f} MiB. Every result is checked against the peer's before it is timed; ratio = "
        f"Parquet time / kbatch time (min of {args.rounds} rounds, median in brackets; > 1: kbatch is faster).", "",
        "## Polars: `kbatch.polars.scan_kafka` vs `pl.scan_parquet`", "",
        "Cold: the segments as written (each partition one active segment), every row decoded. Warm: "
        "the same segments, as written, whose verified prefix (the active segment's CRC-checked batch "
        "headers and walked timestamps; bytes appended since would be read and checked) the header "
        "summary cached (`kbatch.log.summary.summarize`, "
        + (f"{warm[2]:.1f} s for the {args.partitions} partitions, once" if warm else "not run") + "): the "
        "narrow projection is built from the cache (kbatch.scan.headers), no record read. \"kbatch read\": "
        "the bytes the read path's batches span (from the cache, none of them is read).", "",
        "| query | rows | kbatch s (min) | Parquet s (min) | ratio | target | met | kbatch read | columns built |",
        "|---|---:|---:|---:|---|---|---|---|---|",
    ]
    for name, times, target, rows, read, batches, cols, from_headers in pol:
        r = min(times["parquet"]) / min(times["kbatch"])
        met = "—" if not target.startswith(">=") else ("yes" if r >= float(target[3:-1]) else "**no**")
        lines.append(f"| {name} | {rows:,} | {min(times['kbatch']):.3f} | {min(times['parquet']):.3f} | "
                     f"{fmt_ratio(times['parquet'], times['kbatch'])} | {target} | {met} | "
                     f"{read / 2**20:.0f} MiB, {batches:,} batches"
                     + (f" (headers: {from_headers} ranges from the cache)" if from_headers else "")
                     + f" | {', '.join(cols)} |")
    if ray_res is not None:
        times, n, ranges = ray_res
        lines += ["", "## Ray Data: `kbatch.ray.read_kafka_segments` vs `ray.data.read_parquet`", "",
                  f"A local cluster (`num_cpus=2`); rows counted inside the read tasks' blocks "
                  f"(`map_batches` then `sum`), {n:,} rows; kbatch's {ranges} planned ranges are its read tasks.", "",
                  "| kbatch s (min) | Parquet s (min) | ratio |", "|---:|---:|---|",
                  f"| {min(times['kbatch']):.3f} | {min(times['parquet']):.3f} | "
                  f"{fmt_ratio(times['parquet'], times['kbatch'])} |"]
    if mem is not None:
        rows, seen, grew, secs = mem
        lines += ["", "## Memory: a full scan against its budget", "",
                  f"Every column of every record ({rows:,} rows, {seen / 2**20:.0f} MiB of batches) through "
                  f"`kbatch.scan(root).to_reader()` in a subprocess, batches dropped as they come, in {secs:.2f} s: "
                  f"peak RSS {grew / 2**20:.0f} MiB over the baseline with `max_bytes_in_flight` "
                  f"{budget >> 20} MiB: {grew / budget:.2f}x the budget (target < 2x: "
                  f"{'met' if grew < 2 * budget else '**not met**'}).", ""]
    notes = os.path.join(HERE, "notes", "engines.md")
    if os.path.exists(notes):
        lines += [open(notes).read().rstrip(), ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
