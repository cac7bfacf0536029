"""Segments -> tables (issue 31): `kbatch.export_table` into Delta and Iceberg, and `kbatch export
--format parquet` (one plain Parquet file per segment) for reference, on the same partitions.

    KBATCH_BACKEND=cython .venv/bin/python bench/bench_tables.py [--records 5000000] [--partitions 4]
    KBATCH_BACKEND=cython .venv/bin/python bench/bench_tables.py --typed [--records 1000000]   # Avro values
    KBATCH_BACKEND=cython .venv/bin/python bench/bench_tables.py --typed-ratio [--records 400000] [--rounds 5]
                                        # typed vs bytes, same export, interleaved (issue 42's ratio)
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
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

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


#: --typed: the values are Avro records in the Schema Registry's framing (about 50 bytes each),
#: decoded into the table's struct column (issue 33)
ORDER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "item", "type": "string"}, {"name": "qty", "type": "int"}, {"name": "price", "type": "double"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}], "default": None}]}


def make_schemas(root: str) -> str:
    """A `_schemas` partition with ORDER as events-value version 1, id 1 (as a registry writes it)."""
    import json

    path = os.path.join(root, "sr", "_schemas-0")
    log = kbatch.Log.create(path)
    b = kbatch.BatchBuilder()
    b.append(BASE_TS, json.dumps({"keytype": "SCHEMA", "subject": "events-value", "version": 1}).encode(),
             json.dumps({"subject": "events-value", "version": 1, "id": 1, "schema": json.dumps(ORDER)}).encode())
    log.append(b.build(), now_ms=BASE_TS)
    log.close()
    return path


def avro_values(lo: int, n: int, p: int) -> list[bytes]:
    import io

    import fastavro

    from kbatch.values import frame

    parsed = fastavro.parse_schema(ORDER)
    out = []
    for k in range(lo, lo + n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {
            "id": k, "customer": "c-%06d" % (k % 50_000), "item": "item-%04d" % (k % 997), "qty": k % 7,
            "price": (k % 1000) / 4, "ts": BASE_TS + k, "tags": ["t%d" % (k % 5)] * (k % 3),
            "ship": {"city": "city-%03d" % (k % 300), "zip": "%05d" % (k % 99_999)} if k % 2 else None})
        out.append(frame(1, buf.getvalue()))
    return out


def make_typed_logs(root: str, records: int, partitions: int, codec: kbatch.Compression) -> int:
    """The typed workload's partitions; return their record bytes (keys + framed values)."""
    per = records // partitions
    total = 0
    for p in range(partitions):
        log = kbatch.Log.create(os.path.join(root, f"events-{p}"), kbatch.LogConfig(segment_bytes=1 << 30),
                                now_ms=BASE_TS)
        try:
            for lo in range(0, per, 100_000):
                n = min(100_000, per - lo)
                i = np.arange(lo, lo + n)
                keys = [b"key-%08d" % (k % 100_000) for k in i]
                vals = avro_values(lo, n, p)
                ts = pa.array((BASE_TS + i).astype("datetime64[ms]").astype("datetime64[us]"),
                              pa.timestamp("us", tz="UTC"))
                t = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(vals, pa.binary()), "timestamp": ts})
                log.append_table(t, now_ms=BASE_TS + per, compression=codec, records_per_batch=1000)
                total += sum(map(len, keys)) + sum(map(len, vals))
        finally:
            log.close()
    return total


def run_typed(fmt: str, logs: str, work: str, records: int, partitions: int, want_bytes: int, schemas: str | None
              ) -> tuple[float, float, int]:
    """One export of the typed workload (schemas None: the same export with binary values, the
    side-by-side reference); checked against decode_columns' typed column before it returns."""
    target = os.path.join(work, f"{fmt}-typed")
    shutil.rmtree(target, ignore_errors=True)
    wh = os.path.join(work, "warehouse-typed")
    shutil.rmtree(wh, ignore_errors=True)
    name = target if fmt == "delta" else "bench.typed"
    kw = {} if schemas is None else {"value_schema": "avro", "schemas": schemas}
    c0, w0 = cpu(), time.perf_counter()
    if fmt == "parquet":
        from kbatch.cli.export import cmd_export

        code = cmd_export(logs, to=target + "/", fmt="parquet", quiet=True, out=open(os.devnull, "w"),
                          serdes=["value=avro"] if schemas else [], schemas=schemas)
        assert code == 0
        c1, w1 = cpu(), time.perf_counter()
        import pyarrow.dataset as ds

        got = ds.dataset(target, format="parquet", partitioning="hive").to_table(columns=["partition", "offset", "value"])
    else:
        result = kbatch.export_table(logs, name, format=fmt, warehouse=wh if fmt == "iceberg" else None, **kw)
        c1, w1 = cpu(), time.perf_counter()
        assert result.rows == records and result.record_bytes == want_bytes, (result.rows, result.record_bytes)
        if fmt == "delta":
            from deltalake import DeltaTable

            got = DeltaTable(name).to_pyarrow_dataset().to_table(columns=["partition", "offset", "value"],
                                                                use_threads=False)
        else:
            from kbatch.tables._iceberg import open_catalog

            got = open_catalog(None, wh).load_table(name).scan(
                selected_fields=("partition", "offset", "value")).to_arrow()
    assert got.num_rows == records, (fmt, got.num_rows)
    if schemas is not None:  # partition 0's first 1000 values equal decode_columns' typed column
        import pyarrow.compute as pc

        from kbatch.values import Avro, open_schemas

        first = got.filter(pc.and_(pc.equal(got["partition"], 0), pc.less(got["offset"], 1000))).sort_by("offset")
        seg = os.path.join(logs, "events-0", "00000000000000000000.log")
        want = kbatch.decode_columns(open(seg, "rb").read(), "events", 0, end_offset=1000,
                                     value_schema=Avro(open_schemas(schemas), subject="events-value"))
        assert first["value"].to_pylist() == want["value"].cast(first.schema.field("value").type).to_pylist(), fmt
    root = target if fmt in ("delta", "parquet") else wh
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet"))
    return c1 - c0, w1 - w0, size


def peer_fastavro_delta(logs: str, work: str, records: int, schemas: str) -> tuple[float, float, int]:
    """The obvious user code for the same typed Delta table: the records as binary columns
    (kbatch.read_topic), every value through fastavro's schemaless_reader (writer schema by id),
    pyarrow infers the struct, deltalake's write_deltalake writes the table. Checked like ours."""
    import io

    import fastavro
    from deltalake import DeltaTable, write_deltalake

    from kbatch.values import open_schemas

    target = os.path.join(work, "peer-delta")
    shutil.rmtree(target, ignore_errors=True)
    source = open_schemas(schemas)
    c0, w0 = cpu(), time.perf_counter()
    t = kbatch.read_topic(logs)
    parsed: dict[int, object] = {}
    out = []
    for v in t["value"].to_pylist():
        if v is None:
            out.append(None)
            continue
        sid = int.from_bytes(v[1:5], "big")
        w = parsed.get(sid)
        if w is None:
            import json

            w = parsed[sid] = fastavro.parse_schema(json.loads(source.get(sid).schema))
        out.append(fastavro.schemaless_reader(io.BytesIO(v[5:]), w, None))
    t = t.set_column(t.schema.get_field_index("value"), "value", pa.array(out))
    # one chunk: deltalake 1.6's writer aborts the process (arrow-rs 'end <= self.len()') on this
    # table as read_topic chunks it beside the one-chunk value column
    write_deltalake(target, t.combine_chunks(), partition_by=["topic", "partition"])
    c1, w1 = cpu(), time.perf_counter()
    got = DeltaTable(target).to_pyarrow_dataset().to_table(columns=["offset", "value"], use_threads=False)
    import pyarrow.compute as pc

    assert got.num_rows == records  # and every value decoded: a record's id is its offset in the partition
    assert pc.all(pc.equal(pc.struct_field(got["value"], "id"), got["offset"])).as_py()
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target) for f in fs if f.endswith(".parquet"))
    return c1 - c0, w1 - w0, size


def main_typed(base: str, records: int, partitions: int, rounds: int = 2) -> None:
    """--typed: each sink with the Avro values typed beside the same sink with them as bytes, and
    the typed Delta table beside the fastavro loop + write_deltalake; the least CPU time of
    `rounds` runs each (the machine is shared)."""
    schemas = make_schemas(base)
    print("| input | sink | values | records | record MiB | CPU s | records/s per core | MiB/s per core (CPU) | "
          "CPU time / ours typed | Parquet MiB |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")

    def best(fn: Any, *a: Any) -> tuple[float, float, int]:
        return min((fn(*a) for _ in range(rounds)), key=lambda r: r[0])

    for codec in (kbatch.Compression.NONE, kbatch.Compression.LZ4):
        logs = os.path.join(base, f"typed-logs-{codec.name.lower()}")
        shutil.rmtree(logs, ignore_errors=True)
        want = make_typed_logs(logs, records, partitions, codec)
        mib = want / (1 << 20)
        for fmt in ("parquet", "delta", "iceberg"):
            typed = best(run_typed, fmt, logs, base, records, partitions, want, schemas)
            rows = [("avro struct", typed), ("bytes", best(run_typed, fmt, logs, base, records, partitions, want, None))]
            if fmt == "delta":
                rows.append(("avro struct: fastavro loop + write_deltalake", best(peer_fastavro_delta, logs, base,
                                                                                   records, schemas)))
            for label, (c, _w, size) in rows:
                print(f"| {codec.name.lower()} | {fmt} | {label} | {records:,} | {mib:.0f} | {c:.2f} | "
                      f"{records / c:,.0f} | {mib / c:.0f} | {c / typed[0]:.2f}x | {size / (1 << 20):.0f} |", flush=True)


@contextlib.contextmanager
def writer_defaults(on: bool) -> Iterator[None]:
    """on: every Parquet file written with pyarrow's default options (a dictionary on every column,
    PLAIN everywhere) instead of kbatch.tables.writer_options: the reference the options are
    measured against."""
    from kbatch.tables import _parquet

    keep = _parquet.writer_options
    if on:
        _parquet.writer_options = lambda batch: {}
    try:
        yield
    finally:
        _parquet.writer_options = keep


def main_typed_ratio(base: str, records: int, partitions: int, rounds: int) -> None:
    """--typed-ratio (issue 42: a typed export <= 1.2x the same binary export): each sink's typed
    export and the same export with the values as bytes run one after the other in every round
    (interleaved, so the shared machine's load falls on both), with kbatch's writer options and
    with pyarrow's defaults; each output checked (run_typed); the least CPU and wall time of the
    rounds, their ratio, the Parquet bytes."""
    schemas = make_schemas(base)
    logs = os.path.join(base, "typed-logs-none")
    shutil.rmtree(logs, ignore_errors=True)
    want = make_typed_logs(logs, records, partitions, kbatch.Compression.NONE)
    print(f"{records:,} records, {partitions} partitions, {want / (1 << 20):.0f} MiB of record bytes, uncompressed "
          f"batches; least of {rounds} interleaved rounds\n")
    print("| sink | writer options | typed CPU s | bytes CPU s | typed / bytes (CPU) | typed / bytes (wall) | "
          "typed Parquet MiB | bytes Parquet MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for fmt in ("parquet", "delta", "iceberg"):
        got: dict[tuple[bool, bool], list[tuple[float, float, int]]] = {}
        for _ in range(rounds):
            for defaults in (False, True):
                with writer_defaults(defaults):
                    for typed in (True, False):
                        r = run_typed(fmt, logs, base, records, partitions, want, schemas if typed else None)
                        got.setdefault((defaults, typed), []).append(r)
        for defaults in (False, True):
            t, b = got[(defaults, True)], got[(defaults, False)]
            tc, bc = min(x[0] for x in t), min(x[0] for x in b)
            tw, bw = min(x[1] for x in t), min(x[1] for x in b)
            print(f"| {fmt} | {'pyarrow defaults' if defaults else 'kbatch (writer_options)'} | {tc:.3f} | {bc:.3f} | "
                  f"{tc / bc:.2f}x | {tw / bw:.2f}x | {t[0][2] / (1 << 20):.2f} | {b[0][2] / (1 << 20):.2f} |", flush=True)
    writer_bound(logs, schemas, partitions, rounds)


def writer_bound(logs: str, schemas: str, partitions: int, rounds: int) -> None:
    """What bounds the ratio: the Parquet writer alone (pyarrow's ParquetWriter into memory, CPU
    time) on the batches each export writes (decode_columns of each partition's segment, in the
    read path's 33,000-row batches), the whole batch and the value column alone, with kbatch's
    options, without statistics and with the cheapest properties (no statistics, no dictionary)."""
    import io

    import pyarrow.parquet as pq

    from kbatch.tables import writer_options
    from kbatch.values import Avro, open_schemas

    fmt = Avro(open_schemas(schemas), subject="events-value")
    segs = [os.path.join(logs, f"events-{p}", "00000000000000000000.log") for p in range(partitions)]
    files: dict[str, list[list[pa.RecordBatch]]] = {"bytes": [], "typed": []}
    for p, seg in enumerate(segs):
        data = open(seg, "rb").read()
        for kind, kw in (("bytes", {}), ("typed", {"value_schema": fmt})):
            t = kbatch.decode_columns(data, "events", p, **kw).drop_columns(["topic", "partition"])
            files[kind].append(t.to_batches(max_chunksize=33_000))

    def write(bss: list[list[pa.RecordBatch]], codec: str, how: str, value_only: bool) -> tuple[float, int]:
        if value_only:
            bss = [[b.select(["value"]) for b in bs] for bs in bss]
        opts: dict[str, Any] = dict(writer_options(bss[0][0]))  # decided once, as the exports do (WriterChoices)
        if how != "kbatch":
            opts["write_statistics"] = False
        if how == "cheapest":
            opts["use_dictionary"] = False
        c0, size = cpu(), 0
        for bs in bss:
            buf = io.BytesIO()
            with pq.ParquetWriter(buf, bs[0].schema, compression=codec, **opts) as w:
                for b in bs:
                    w.write_batch(b)
            size += buf.getbuffer().nbytes
        return cpu() - c0, size

    cases = [(what, how) for what in ("whole batch", "value column") for how in ("kbatch", "no statistics", "cheapest")]
    print("\nThe Parquet writer alone (same batches, into memory):\n")
    print("| codec | columns | writer options | typed CPU ms | bytes CPU ms | typed / bytes | typed MiB | bytes MiB |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for codec in ("snappy", "zstd"):
        best: dict[tuple[str, str, str], tuple[float, int]] = {}
        for _ in range(rounds):
            for what, how in cases:
                for kind in ("typed", "bytes"):
                    c, n = write(files[kind], codec, how, what == "value column")
                    k = (what, how, kind)
                    best[k] = (min(c, best.get(k, (c, n))[0]), n)
        for what, how in cases:
            (tc, tn), (bc, bn) = best[(what, how, "typed")], best[(what, how, "bytes")]
            print(f"| {codec} | {what} | {how} | {tc * 1000:.1f} | {bc * 1000:.1f} | {tc / bc:.2f}x | "
                  f"{tn / (1 << 20):.2f} | {bn / (1 << 20):.2f} |", flush=True)


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
    ap.add_argument("--typed", action="store_true", help="Avro values decoded into typed columns (issue 33)")
    ap.add_argument("--typed-ratio", action="store_true", help="typed vs bytes, same export, interleaved (issue 42)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    assert kbatch.BACKEND == "cython", kbatch.BACKEND
    base = args.dir or tempfile.mkdtemp(prefix="kbatch-bench-tables-")
    if args.typed_ratio:
        try:
            main_typed_ratio(base, args.records, args.partitions, args.rounds)
        finally:
            if args.dir is None:
                shutil.rmtree(base, ignore_errors=True)
        return
    if args.typed:
        try:
            main_typed(base, args.records, args.partitions)
        finally:
            if args.dir is None:
                shutil.rmtree(base, ignore_errors=True)
        return
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

    @pytest.fixture(scope="module")
    def typed_logs(tmp_path_factory):
        base = str(tmp_path_factory.mktemp("tables-typed"))
        logs = os.path.join(base, "logs")
        want = make_typed_logs(logs, TABLE_RECORDS, 4, kbatch.Compression.NONE)
        return base, logs, want, make_schemas(base)

    @pytest.mark.benchmark(group="tables-typed")
    @pytest.mark.parametrize("impl", ["delta", "iceberg", "parquet", "bytes: delta", "fastavro loop + write_deltalake"])
    def test_tables_typed(benchmark, typed_logs, impl):
        base, logs, want, schemas = typed_logs
        if impl == "fastavro loop + write_deltalake":
            args: tuple[Any, ...] = (logs, base, TABLE_RECORDS, schemas)
            fn: Any = peer_fastavro_delta
        else:
            fmt = impl.removeprefix("bytes: ")
            args, fn = (fmt, logs, base, TABLE_RECORDS, 4, want, None if impl.startswith("bytes") else schemas), run_typed
        fn(*args)   # checked once before timing
        cpu_s, _wall, size = benchmark.pedantic(fn, args=args, rounds=2, iterations=1)
        benchmark.extra_info.update({"input": "none", "record bytes": want, "records": TABLE_RECORDS,
                                     "cpu s": round(cpu_s, 3), "parquet bytes": size})

    return table_logs, test_tables, typed_logs, test_tables_typed


if "pytest" in sys.modules:
    table_logs, test_tables, typed_logs, test_tables_typed = _pytest_entries()


if __name__ == "__main__":
    sys.exit(main())
