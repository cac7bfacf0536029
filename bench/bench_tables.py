"""Segments -> tables (issue 31): `kbatch.export_table` into Delta and Iceberg, and `kbatch export
--format parquet` (one plain Parquet file per segment) for reference, on the same partitions.

    KBATCH_BACKEND=cython .venv/bin/python bench/bench_tables.py [--records 5000000] [--partitions 4]
    python3 dev.py bench -k tables      # the same as pytest-benchmark entries (KBATCH_BENCH_TABLE_RECORDS,
                                        # default 1,000,000), wall time, sinks side by side

Workload: N records over P partitions (1000-record batches, 12-byte keys, 100-byte values, one
header on every 10th record), written once with no compression and once with lz4 (Kafka's
default level), 1 GiB segments. Each run starts from an empty table. The figure is record bytes
(keys + values + header keys and values) per second per core: the process's CPU time (user +
system, all threads, the Parquet encoders' included), not the wall clock, divided into the bytes;
and the wall-clock rate beside it. Redpanda publishes its Iceberg translation at about 5 MiB/s per
core: the ratio to that is printed. Every table is read back and checked (row count, offsets per
partition, the bytes counted) before its time is reported.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

os.environ.setdefault("KBATCH_BACKEND", "cython")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import kbatch  # noqa: E402
from kbatch.columns.decode import HEADER_TYPE  # noqa: E402

REDPANDA_MIB_S_PER_CORE = 5.0
BASE_TS = 1_700_000_000_000


def make_logs(root: str, records: int, partitions: int, codec: kbatch.Compression) -> int:
    """Write the partitions; return their record bytes."""
    per = records // partitions
    total = 0
    for p in range(partitions):
        log = kbatch.Log.create(os.path.join(root, f"events-{p}"), kbatch.LogConfig(segment_bytes=1 << 30),
                                now_ms=BASE_TS)
        try:
            for lo in range(0, per, 100_000):
                n = min(100_000, per - lo)
                i = np.arange(lo, lo + n)
                keys = pa.array([b"key-%08d" % (k % 100_000) for k in i], pa.binary())
                vals = pa.array([bytes([(k * 7 + p) % 251]) * 60 + b"%040d" % k for k in i], pa.binary())
                hdrs = pa.array([[{"key": "trace", "value": b"%08d" % k}] if k % 10 == 0 else None for k in i],
                                HEADER_TYPE)
                ts = pa.array((BASE_TS + i).astype("datetime64[ms]").astype("datetime64[us]"),
                              pa.timestamp("us", tz="UTC"))
                t = pa.table({"key": keys, "value": vals, "timestamp": ts, "headers": hdrs})
                log.append_table(t, now_ms=BASE_TS + per, compression=codec, records_per_batch=1000)
                total += sum(len(k) for k in keys.to_pylist()) + sum(len(v) for v in vals.to_pylist())
                total += sum(5 + 8 for k in i if k % 10 == 0)
        finally:
            log.close()
    return total


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def check_table(fmt: str, name: str, warehouse: str | None, records: int, partitions: int) -> None:
    import pyarrow.compute as pc

    if fmt == "delta":
        from deltalake import DeltaTable

        t = DeltaTable(name).to_pyarrow_dataset().to_table(columns=["partition", "offset"], use_threads=False)
    else:
        from kbatch.tables._iceberg import open_catalog

        t = open_catalog(None, warehouse).load_table(name).scan(selected_fields=("partition", "offset")).to_arrow()
    assert t.num_rows == records, (fmt, t.num_rows, records)
    per = records // partitions
    for p in range(partitions):
        off = t.filter(pc.equal(t["partition"], p))["offset"]
        assert len(off) == per and pc.min(off).as_py() == 0 and pc.max(off).as_py() == per - 1, (fmt, p)


def run(fmt: str, logs: str, work: str, records: int, partitions: int, want_bytes: int) -> tuple[float, float, int]:
    target = os.path.join(work, f"{fmt}-table")
    shutil.rmtree(target, ignore_errors=True)
    wh = os.path.join(work, "warehouse")
    shutil.rmtree(wh, ignore_errors=True)
    if fmt == "parquet":
        from kbatch.cli.export import cmd_export

        c0, w0 = cpu(), time.perf_counter()
        code = cmd_export(logs, to=target + "/", fmt="parquet", quiet=True, out=open(os.devnull, "w"))
        c1, w1 = cpu(), time.perf_counter()
        assert code == 0
        import pyarrow.dataset as ds

        assert ds.dataset(target, format="parquet", partitioning="hive").count_rows() == records
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target) for f in fs
                   if f.endswith(".parquet"))
        return c1 - c0, w1 - w0, size
    name = target if fmt == "delta" else "bench.events"
    c0, w0 = cpu(), time.perf_counter()
    result = kbatch.export_table(logs, name, format=fmt, warehouse=wh if fmt == "iceberg" else None)
    c1, w1 = cpu(), time.perf_counter()
    assert result.rows == records and result.record_bytes == want_bytes, (result.rows, result.record_bytes, want_bytes)
    check_table(fmt, name, wh, records, partitions)
    root = target if fmt == "delta" else wh
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet"))
    return c1 - c0, w1 - w0, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    assert kbatch.BACKEND == "cython", kbatch.BACKEND
    base = args.dir or tempfile.mkdtemp(prefix="kbatch-bench-tables-")
    print(f"| input | sink | record MiB | CPU s | MiB/s per core (CPU) | x Redpanda 5 MiB/s | wall MiB/s | Parquet MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    try:
        for codec in (kbatch.Compression.NONE, kbatch.Compression.LZ4):
            logs = os.path.join(base, f"logs-{codec.name.lower()}")
            shutil.rmtree(logs, ignore_errors=True)
            want = make_logs(logs, args.records, args.partitions, codec)
            mib = want / (1 << 20)
            for fmt in ("parquet", "delta", "iceberg"):
                c, w, size = run(fmt, logs, base, args.records, args.partitions, want)
                per_core = mib / c
                print(f"| {codec.name.lower()} | {fmt} | {mib:.0f} | {c:.2f} | {per_core:.0f} | "
                      f"{per_core / REDPANDA_MIB_S_PER_CORE:.1f}x | {mib / w:.0f} | {size / (1 << 20):.0f} |",
                      flush=True)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------------ pytest-benchmark
TABLE_RECORDS = int(os.environ.get("KBATCH_BENCH_TABLE_RECORDS", "1000000"))
SINKS = ("parquet", "delta", "iceberg")


def _pytest_entries():  # defined only under pytest: the script needs no pytest
    import pytest

    @pytest.fixture(scope="module", params=["none", "lz4"])
    def table_logs(request, tmp_path_factory):
        base = str(tmp_path_factory.mktemp(f"tables-{request.param}"))
        logs = os.path.join(base, "logs")
        want = make_logs(logs, TABLE_RECORDS, 4, kbatch.Compression[request.param.upper()])
        return base, logs, want, request.param

    @pytest.mark.benchmark(group="tables")
    @pytest.mark.parametrize("impl", SINKS)
    def test_tables(benchmark, table_logs, impl):
        base, logs, want, codec = table_logs
        run(impl, logs, base, TABLE_RECORDS, 4, want)   # checked once before timing
        cpu_s, _wall, size = benchmark.pedantic(run, args=(impl, logs, base, TABLE_RECORDS, 4, want), rounds=2,
                                                iterations=1)
        benchmark.extra_info.update({"input": codec, "record bytes": want, "records": TABLE_RECORDS,
                                     "cpu s": round(cpu_s, 3), "parquet bytes": size})

    return table_logs, test_tables


if "pytest" in sys.modules:
    table_logs, test_tables = _pytest_entries()


if __name__ == "__main__":
    sys.exit(main())
