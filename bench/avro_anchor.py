"""Avro values to Arrow: kbatch against arrow-avro (issue 42's anchor), side by side in one run.

    PYTHONPATH=src .venv/bin/python bench/avro_anchor.py [--rows N] [--repeats R] [--write]

It builds bench/rust/avro_anchor (cargo; arrow-avro's `Decoder` with a `SchemaStore` keyed by
Confluent ids) into $KBATCH_CARGO_TARGET (default ~/.cache/kbatch/cargo-target), generates the
values once (fastavro's writer, Confluent framing: magic 0 + a 4-byte schema id), writes them to a
values file both read, checks that both decoders give the same rows (row count, nulls and a sum
per column), then times each on one thread: CPU seconds, R interleaved rounds, best and median.

Workloads: a 4-field record (a long, a string, a nullable string, a timestamp-millis) and a
40-field one (four of each: long, string, nullable string, enum, decimal(12, 2) as bytes,
timestamp-millis, a nested record of a long and a string, an array of longs, int, double), in
blocks of 1000 values, uncompressed and zstd (level 3) blocks; for zstd both sides decompress
each block as part of the timed work (kbatch: the Kafka batches of the same values through
`decode_columns`; arrow-avro: zstd frames of the concatenated values, no Kafka framing to parse).

The values file: b"KBAV1\\n", u32 schema count, per schema (u32 id, u32 length, Avro JSON), u32
length + reader schema JSON (empty: none), then blocks: u8 codec (0 none, 1 zstd), u32 values,
u32 raw length, u32 stored length, the stored bytes (the framed values back to back). Integers
little-endian.

Figures (rows/s and payload bytes/s, one core):
  kbatch kernel          Avro.decode_arrow over the binary Arrow column of the values (what
                         decode_columns / cat / export / the tables call per column)
  kbatch decode_columns  the whole path from Kafka batches (uncompressed or zstd) to the typed column
  arrow-avro             Decoder.decode over the values (zstd: each block decompressed first), flushed
                         every 8192 rows
  projected              the same with a reader schema of 2 of the 40 fields (kbatch) and
                         arrow-avro's with_projection of the same 2 fields
"""
from __future__ import annotations

import argparse
import datetime
import decimal
import io
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

import kbatch
from kbatch.values import Avro, TopicSchemas, frame

HERE = Path(__file__).resolve().parent
CRATE = HERE / "rust" / "avro_anchor"
TARGET = Path(os.environ.get("KBATCH_CARGO_TARGET", Path.home() / ".cache" / "kbatch" / "cargo-target"))
BLOCK = 1000

KINDS = ["long", "string", "nstring", "enum", "decimal", "ts", "rec", "arr", "int", "double"]


def field(i: int, kind: str) -> dict[str, Any]:
    name = f"f{i:02d}_{kind}"
    t: Any = {"long": "long", "string": "string", "nstring": ["null", "string"],
              "enum": {"type": "enum", "name": f"E{i}", "symbols": ["RED", "GREEN", "BLUE", "YELLOW"]},
              "decimal": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
              "ts": {"type": "long", "logicalType": "timestamp-millis"},
              "rec": {"type": "record", "name": f"R{i}", "fields": [{"name": "a", "type": "long"},
                                                                    {"name": "b", "type": "string"}]},
              "arr": {"type": "array", "items": "long"}, "int": "int", "double": "double"}[kind]
    return {"name": name, "type": t}


def schema(nfields: int) -> dict[str, Any]:
    if nfields == 4:
        kinds = ["long", "string", "nstring", "ts"]
    else:
        kinds = [KINDS[i % len(KINDS)] for i in range(nfields)]
    return {"type": "record", "name": f"Rec{nfields}", "namespace": "bench",
            "fields": [field(i, k) for i, k in enumerate(kinds)]}


def value(kind: str, i: int, j: int) -> Any:
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    h = (i * 2654435761 + j * 40503) & 0xFFFFFFFF
    if kind == "long":
        return h * 1_000_003 - (1 << 40)
    if kind == "string":
        return f"s{h % 100000}-" + "x" * (h % 17)
    if kind == "nstring":
        return None if h % 3 == 0 else f"n{h % 1000}"
    if kind == "enum":
        return ["RED", "GREEN", "BLUE", "YELLOW"][h % 4]
    if kind == "decimal":
        return decimal.Decimal(h % 10_000_000 - 5_000_000) / 100
    if kind == "ts":
        return base + datetime.timedelta(milliseconds=h)
    if kind == "rec":
        return {"a": h, "b": f"b{h % 97}"}
    if kind == "arr":
        return list(range(h % 5))
    if kind == "int":
        return h % 1_000_000 - 500_000
    return h / 7.0


def values(sch: dict[str, Any], n: int, sid: int) -> list[bytes]:
    parsed = fastavro.parse_schema(sch)
    kinds = [f["name"].split("_", 1)[1] for f in sch["fields"]]
    out = []
    buf = io.BytesIO()
    for i in range(n):
        rec = {f["name"]: value(k, i, j) for j, (f, k) in enumerate(zip(sch["fields"], kinds))}
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, rec)
        out.append(frame(sid, buf.getvalue()))
    return out


def source(sid: int, sch: dict[str, Any]) -> TopicSchemas:
    return TopicSchemas.from_records([(0, json.dumps({"keytype": "SCHEMA", "subject": "t-value", "version": 1}).encode(),
                                       json.dumps({"subject": "t-value", "version": 1, "id": sid,
                                                   "schema": json.dumps(sch)}).encode())])


def values_file(path: Path, schemas: list[tuple[int, dict[str, Any]]], reader: dict[str, Any] | None,
                vals: list[bytes], codec: int) -> None:
    import zstandard

    out = bytearray(b"KBAV1\n")
    out += struct.pack("<I", len(schemas))
    for sid, s in schemas:
        text = json.dumps(s).encode()
        out += struct.pack("<II", sid, len(text)) + text
    rtext = b"" if reader is None else json.dumps(reader).encode()
    out += struct.pack("<I", len(rtext)) + rtext
    cctx = zstandard.ZstdCompressor(level=3)
    for at in range(0, len(vals), BLOCK):
        raw = b"".join(vals[at:at + BLOCK])
        stored = cctx.compress(raw) if codec == 1 else raw
        out += struct.pack("<BIII", codec, len(vals[at:at + BLOCK]), len(raw), len(stored)) + stored
    path.write_bytes(bytes(out))


def segment(vals: list[bytes], compression: int) -> bytes:
    out = bytearray()
    for at in range(0, len(vals), BLOCK):
        b = kbatch.BatchBuilder(compression=compression, base_offset=at)
        for i, v in enumerate(vals[at:at + BLOCK]):
            b.append(1_700_000_000_000 + at + i, None, v)
        out += b.build()
    return bytes(out)


def build_anchor() -> Path | None:
    """The Rust program, built once (cargo's own cache makes a rebuild a no-op)."""
    try:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(CRATE / "Cargo.toml")],
                       check=True, env=dict(os.environ, CARGO_TARGET_DIR=str(TARGET)))
    except FileNotFoundError:
        print("cargo not found: arrow-avro is not run (install Rust: https://rustup.rs)", file=sys.stderr)
        return None
    return TARGET / "release" / "avro_anchor"


def run_anchor(exe: Path, path: Path, repeats: int, projection: list[int] | None = None) -> dict[str, Any]:
    args = [str(exe), str(path), str(repeats), "8192"] + ([",".join(map(str, projection))] if projection else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def checks(arr: pa.StructArray) -> dict[str, tuple[str, int, int]]:
    """Per field: (type, nulls, sum): ints and timestamps summed, strings and lists by length,
    as the Rust side sums."""
    out = {}
    for i, f in enumerate(arr.type):
        col = arr.field(i)
        t = f.type
        s = 0
        if pa.types.is_integer(t) or pa.types.is_timestamp(t):
            s = int(np.asarray(col.cast(pa.int64()).fill_null(0)).astype(np.int64).sum(dtype=np.int64))
        elif pa.types.is_string(t):
            s = int(np.asarray(pa.compute.binary_length(col).fill_null(0)).sum())
        elif pa.types.is_list(t):
            s = int(np.asarray(pa.compute.list_value_length(col).fill_null(0)).sum())
        out[f.name] = (str(t), col.null_count, s)
    return out


def agree(kb: pa.StructArray, rust: dict[str, Any], rows: int) -> None:
    assert len(kb) == rows == rust["rows"], (len(kb), rows, rust["rows"])
    mine = checks(kb)
    compared = 0
    for name, nulls, s in rust["checks"]:
        t, n2, s2 = mine[name]
        assert nulls == n2, (name, nulls, n2)
        if t.startswith(("int", "string", "timestamp", "list")) and not name.endswith("_enum"):  # arrow-avro: a dictionary
            assert (s - s2) % 2**64 == 0, (name, t, s, s2)  # both wrap at 64 bits
            compared += 1
    assert compared, "no column compared"


def timed(fn: Any) -> float:
    """The CPU seconds of one call (the process's: all its threads; the machine is shared, so the
    wall clock also counts other processes' turns)."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=int(os.environ.get("KBATCH_BENCH_AVRO_ROWS", "200000")))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--write", action="store_true", help="write bench/results-avro-anchor.md")
    args = ap.parse_args()
    exe = build_anchor()
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "kbatch-avro-anchor"
    work.mkdir(exist_ok=True)
    rows_out = []
    for nfields in (4, 40):
        sch = schema(nfields)
        vals = values(sch, args.rows, 7)
        payload = sum(len(v) for v in vals)
        src = source(7, sch)
        column = pa.array(vals, pa.binary())
        cases = [("all fields", None, None)]
        if nfields == 40:
            keep = [0, 1]
            proj = dict(sch, fields=[sch["fields"][i] for i in keep])
            cases.append((f"2 of {nfields} fields", proj, keep))
        for codec, cname in ((0, "uncompressed"), (1, "zstd")):
            seg = segment(vals, 0 if codec == 0 else 4)
            for label, reader, keep in cases:
                fmt = Avro(src) if reader is None else Avro(src, reader_schema=reader)
                path = work / f"values-{nfields}-{codec}.kbav"
                values_file(path, [(7, sch)], None, vals, codec)

                def kernel() -> Any:
                    f = Avro(src) if reader is None else Avro(src, reader_schema=reader)
                    got = f.decode_arrow(column, None, "value")
                    assert got is not None, "the kernel refused the column"
                    return got

                def columns() -> Any:
                    return kbatch.decode_columns(seg, value_schema=fmt, use_threads=False,
                                                 include_headers=False).column("value")

                got = kernel()
                ref = columns().combine_chunks()
                assert got.equals(ref), "the kernel and decode_columns differ"
                res: dict[str, Any] = {"fields": nfields, "codec": cname, "case": label, "rows": args.rows,
                                       "payload": payload}
                impls: dict[str, Any] = {}
                if codec == 0:
                    impls["kbatch kernel"] = kernel
                impls["kbatch decode_columns"] = columns
                if codec == 0 and reader is None:
                    impls["binary decode_columns"] = lambda: kbatch.decode_columns(seg, use_threads=False,
                                                                                  include_headers=False)
                times: dict[str, list[float]] = {k: [] for k in ["arrow-avro"] + list(impls)}
                if exe is not None:
                    agree(got, run_anchor(exe, path, 1, keep), args.rows)
                for fn in impls.values():
                    fn()  # warm
                for _ in range(args.repeats):  # interleaved: each round runs every one once
                    if exe is not None:
                        times["arrow-avro"] += run_anchor(exe, path, 1, keep)["cpu_seconds"]
                    for k, fn in impls.items():
                        times[k].append(timed(fn))
                for k, ts in times.items():
                    if ts:
                        res[k] = (min(ts), statistics.median(ts))
                rows_out.append(res)
                report(res)
    if args.write:
        write(rows_out, args)


def report(res: dict[str, Any]) -> None:
    n, payload = res["rows"], res["payload"]
    print(f"{res['fields']} fields, {res['codec']}, {res['case']}: {n} rows, {payload / n:.0f} B a value")
    for k, (b, m) in res.items() if False else [(k, v) for k, v in res.items() if isinstance(v, tuple)]:
        print(f"  {k:24s} {n / b / 1e6:8.2f} M rows/s (median {n / m / 1e6:6.2f})  {payload / b / 1e6:8.1f} MB/s")
    if "arrow-avro" in res:
        for k in ("kbatch kernel", "kbatch decode_columns"):
            if k in res:
                print(f"  {k} / arrow-avro: {res['arrow-avro'][0] / res[k][0]:.2f}x "
                      f"(median {res['arrow-avro'][1] / res[k][1]:.2f}x)")
    sys.stdout.flush()


def write(rows: list[dict[str, Any]], args: Any) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    lines = ["# Avro values to Arrow: kbatch against arrow-avro", "",
             f"Generated by `bench/avro_anchor.py --rows {args.rows} --repeats {args.repeats} --write` "
             f"(commit {commit}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC). Machine: "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
             f"CPython {platform.python_version()}, pyarrow {pa.__version__}, arrow-avro 60.1.0 (release build). "
             f"Load average {os.getloadavg()[0]:.1f} at the end. One thread each; CPU time (the "
             f"machine is shared: the wall clock counts other processes' turns), best of {args.repeats} "
             "interleaved rounds (median in brackets) after a warm-up; both outputs checked equal (rows, "
             "nulls and sums per column) before timing.", "",
             "| record | batches | case | arrow-avro M rows/s | kbatch kernel M rows/s | kbatch decode_columns "
             "M rows/s | kernel / arrow-avro | decode_columns / arrow-avro |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        n = r["rows"]

        def rate(k: str) -> str:
            if k not in r:
                return "—"
            b, m = r[k]
            return f"{n / b / 1e6:.2f} ({n / m / 1e6:.2f})"

        def ratio(k: str) -> str:
            if k not in r or "arrow-avro" not in r:
                return "—"
            return f"{r['arrow-avro'][0] / r[k][0]:.2f}x ({r['arrow-avro'][1] / r[k][1]:.2f}x)"

        lines.append(f"| {r['fields']} fields, {r['payload'] / n:.0f} B | {r['codec']} | {r['case']} | "
                     f"{rate('arrow-avro')} | {rate('kbatch kernel')} | {rate('kbatch decode_columns')} | "
                     f"{ratio('kbatch kernel')} | {ratio('kbatch decode_columns')} |")
    (HERE / "results-avro-anchor.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
