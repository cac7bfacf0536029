"""Protobuf values to Arrow: kbatch's compiled plan against upb (`protobuf`'s parser) a message at a
time and against Redpanda's published per-byte figures (issue 42), side by side in one run.

    PYTHONPATH=src .venv/bin/python bench/bench_protobuf.py [--rows N] [--repeats R] [--write]

Workloads (Confluent-framed values: magic 0, a 4-byte schema id, the message indexes, the message;
schema text compiled by grpcio-tools' protoc, as kbatch.values.Protobuf does):
  1 field    message One { string s = 1; }, a ~375-byte string: ~381-byte messages, as Redpanda's
             `protobuf_381_byte_message_linear_1_field`
  40 fields  four each of int64, string, proto3-optional string (a third unset), enum, double,
             Timestamp, a nested message {int64 a; string b}, repeated int64 (packed), int32 and
             StringValue, the mix of the Avro 40-field record (bench/avro_anchor.py); ~381 bytes
             a message, as Redpanda's `protobuf_381_byte_message_linear_40_fields`
in Kafka batches of 1000 values, uncompressed and zstd.

Figures (CPU time of one thread, best of R interleaved rounds, median in brackets; outputs checked
equal before timing):
  kbatch kernel          Protobuf.decode_arrow over the binary Arrow column (what decode_columns,
                         export, read_topic and the tables call per column)
  kbatch decode_columns  Kafka batches (uncompressed or zstd) -> the typed column
  upb parse              cls.FromString per value (upb's C parser; messages, no columns)
  upb -> Arrow           the per-message path before the plan: FromString, to Python, pa.array
  Redpanda (published)   redpanda#25372's record_multiplexer figures: 9.04 ns/byte (1 field) and
                         49.1 ns/byte (40 fields), 13.2 ns/byte with zstd at 1 field (their machine)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import kbatch
from kbatch.values import Protobuf, TopicSchemas, frame

HERE = Path(__file__).resolve().parent
BLOCK = 1000
REDPANDA = {1: 9.042, 40: 49.149}  # ns/byte, redpanda#25372 (381-byte messages, uncompressed)
REDPANDA_ZSTD_1 = 13.214
KINDS = ["int64", "string", "ostring", "enum", "double", "ts", "msg", "rep", "int32", "wrap"]


def proto(nfields: int) -> str:
    head = ['syntax = "proto3";', "package bench;", 'import "google/protobuf/timestamp.proto";',
            'import "google/protobuf/wrappers.proto";', "enum Color { RED = 0; GREEN = 1; BLUE = 2; YELLOW = 3; }"]
    pair = "message Pair { int64 a = 1; string b = 2; }"  # after the value's type: message index 0 is the value's
    if nfields == 1:
        return "\n".join(head + ["message One { string s = 1; }", pair]) + "\n"
    t = {"int64": "int64", "string": "string", "ostring": "optional string", "enum": "Color", "double": "double",
         "ts": "google.protobuf.Timestamp", "msg": "Pair", "rep": "repeated int64", "int32": "int32",
         "wrap": "google.protobuf.StringValue"}
    fields = [f"{t[KINDS[i % 10]]} f{i:02d}_{KINDS[i % 10]} = {i + 1};" for i in range(nfields)]
    return "\n".join(head + ["message Wide { " + " ".join(fields) + " }", pair]) + "\n"


def source(text: str) -> TopicSchemas:
    key = json.dumps({"keytype": "SCHEMA", "subject": "t-value", "version": 1}).encode()
    val = json.dumps({"subject": "t-value", "version": 1, "id": 7, "schema": text, "schemaType": "PROTOBUF"}).encode()
    return TopicSchemas.from_records([(0, key, val)])


def message(cls: Any, nfields: int, i: int) -> Any:
    m = cls()
    if nfields == 1:
        m.s = f"{i:08d}-" + "x" * 366
        return m
    for j in range(nfields):
        h = (i * 2654435761 + j * 40503) & 0xFFFFFFFF
        kind = KINDS[j % 10]
        name = f"f{j:02d}_{kind}"
        if kind == "int64":
            setattr(m, name, h * 1_000_003 - (1 << 40))
        elif kind == "string":
            setattr(m, name, f"s{h % 100000}-" + "x" * (7 + h % 9))
        elif kind == "ostring":
            if h % 3:
                setattr(m, name, f"n{h % 1000}")
        elif kind == "enum":
            setattr(m, name, h % 4)
        elif kind == "double":
            setattr(m, name, h / 7.0)
        elif kind == "ts":
            getattr(m, name).FromMilliseconds(1_704_067_200_000 + h)
        elif kind == "msg":
            sub = getattr(m, name)
            sub.a = h
            sub.b = f"b{h % 97}"
        elif kind == "rep":
            getattr(m, name).extend(range(h % 5))
        elif kind == "int32":
            setattr(m, name, h % 1_000_000 - 500_000)
        else:
            getattr(m, name).value = f"w{h % 50}"
    return m


def segment(vals: list[bytes], compression: int) -> bytes:
    out = bytearray()
    for at in range(0, len(vals), BLOCK):
        b = kbatch.BatchBuilder(compression=compression, base_offset=at)
        for i, v in enumerate(vals[at:at + BLOCK]):
            b.append(1_700_000_000_000 + at + i, None, v)
        out += b.build()
    return bytes(out)


def timed(fn: Any) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=int(os.environ.get("KBATCH_BENCH_PROTOBUF_ROWS", "100000")))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="write bench/results-protobuf.md")
    args = ap.parse_args()
    from kbatch.values import protobuf_program as P

    if P.K is None:
        sys.exit("the compiled Protobuf kernel is not built (python setup.py build_ext --inplace)")
    results = []
    for nfields in (1, 40):
        fmt = Protobuf(source(proto(nfields)))
        cls = fmt.schema(7).message_class([0])
        vals = [frame(7, b"\x00" + message(cls, nfields, i).SerializeToString()) for i in range(args.rows)]
        payload = sum(len(v) for v in vals)
        column = pa.array(vals, pa.binary())
        for codec, cname in ((0, "uncompressed"), (4, "zstd")):
            seg = segment(vals, codec)

            def kernel() -> Any:
                got = fmt.decode_arrow(column, None, "value")
                assert got is not None, "the plan declined the column"
                return got

            def columns() -> Any:
                return kbatch.decode_columns(seg, value_schema=fmt, use_threads=False,
                                             include_headers=False).column("value")

            def upb_parse() -> Any:
                parse = cls.FromString
                return [parse(v[6:]) for v in vals]

            def upb_arrow() -> Any:
                return fmt.to_arrow(vals)

            got = kernel()
            assert got.equals(columns().combine_chunks()), "the kernel and decode_columns differ"
            assert got.equals(upb_arrow()), "the plan and upb a message at a time differ"
            impls: dict[str, Any] = {"kbatch decode_columns": columns}
            if codec == 0:
                impls = {"kbatch kernel": kernel, **impls, "upb parse": upb_parse, "upb -> Arrow": upb_arrow}
            times: dict[str, list[float]] = {k: [] for k in impls}
            for fn in impls.values():
                fn()
            for _ in range(args.repeats):
                for k, fn in impls.items():
                    times[k].append(timed(fn))
            res = {"fields": nfields, "codec": cname, "rows": args.rows, "payload": payload,
                   **{k: (min(v), statistics.median(v)) for k, v in times.items()}}
            results.append(res)
            report(res)
    if args.write:
        write(results, args)


def ns_byte(res: dict[str, Any], k: str, i: int = 0) -> float:
    return float(res[k][i] * 1e9 / res["payload"])


def report(res: dict[str, Any]) -> None:
    n = res["rows"]
    print(f"{res['fields']} field(s), {res['codec']}: {n} values, {res['payload'] / n:.0f} B a value")
    for k, (b, m) in [(k, v) for k, v in res.items() if isinstance(v, tuple)]:
        print(f"  {k:22s} {n / b / 1e6:7.2f} M values/s (median {n / m / 1e6:6.2f})  "
              f"{ns_byte(res, k):6.2f} ns/byte (median {ns_byte(res, k, 1):6.2f})")
    rp = REDPANDA[res["fields"]] if res["codec"] == "uncompressed" or res["fields"] == 40 else REDPANDA_ZSTD_1
    for k in ("kbatch kernel", "kbatch decode_columns"):
        if k in res:
            print(f"  {k} vs Redpanda's published {rp} ns/byte: {rp / ns_byte(res, k):.1f}x")
    if "upb -> Arrow" in res:
        print(f"  kernel vs upb parse: {res['upb parse'][0] / res['kbatch kernel'][0]:.1f}x, "
              f"vs upb -> Arrow: {res['upb -> Arrow'][0] / res['kbatch kernel'][0]:.1f}x")
    sys.stdout.flush()


def write(rows: list[dict[str, Any]], args: Any) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    import google.protobuf

    lines = ["# Protobuf values to Arrow: kbatch's plan against upb and Redpanda's published figures", "",
             f"Generated by `bench/bench_protobuf.py --rows {args.rows} --repeats {args.repeats} --write` "
             f"(commit {commit}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC). Machine: "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
             f"CPython {platform.python_version()}, pyarrow {pa.__version__}, protobuf {google.protobuf.__version__} "
             f"(upb). Load average {os.getloadavg()[0]:.1f} at the end. One thread; CPU time, best of "
             f"{args.repeats} interleaved rounds (median in brackets) after a warm-up; the plan's column checked "
             "equal to decode_columns' and to upb's a message at a time before timing. ns/byte: CPU time over "
             "the framed values' bytes. Redpanda: redpanda#25372's published record_multiplexer figures "
             "(381-byte messages; their machine, their translation to Iceberg values), not rerun here.", "",
             "| message | batches | kbatch kernel ns/byte | kbatch decode_columns ns/byte | upb parse ns/byte | "
             "upb -> Arrow ns/byte | Redpanda published ns/byte | kernel vs Redpanda | decode_columns vs "
             "Redpanda | kernel vs upb parse |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def f(k: str) -> str:
            return "—" if k not in r else f"{ns_byte(r, k):.2f} ({ns_byte(r, k, 1):.2f})"

        rp = REDPANDA[r["fields"]] if r["codec"] == "uncompressed" else (REDPANDA_ZSTD_1 if r["fields"] == 1 else None)
        kr = "—" if "kbatch kernel" not in r or rp is None else f"{rp / ns_byte(r, 'kbatch kernel'):.1f}x"
        cr = "—" if rp is None else f"{rp / ns_byte(r, 'kbatch decode_columns'):.1f}x"
        up = "—" if "upb parse" not in r else f"{r['upb parse'][0] / r['kbatch kernel'][0]:.1f}x"
        lines.append(f"| {r['fields']} field{'s' if r['fields'] > 1 else ''}, {r['payload'] / r['rows']:.0f} B | "
                     f"{r['codec']} | {f('kbatch kernel')} | {f('kbatch decode_columns')} | {f('upb parse')} | "
                     f"{f('upb -> Arrow')} | {'—' if rp is None else rp} | {kr} | {cr} | {up} |")
    (HERE / "results-protobuf.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
