"""`kbatch cat -s value=...` throughput: typed values printed from the column decoders (issue 42:
every typed path through the kernels) against the value-by-value path they replaced, side by side
in one run, the same output asserted before any figure is kept.

    PYTHONPATH=src:tests .venv/bin/python bench/bench_cat_typed.py [--records N] [--rounds R] [--write]

Three workloads: Avro orders (support.typed_orders: decimal, timestamp, enum, array, nested
record), unframed JSON with a JSON Schema file, and a 25-field Protobuf message (descriptors built
in code, as tests/cli/test_cli_cat_typed.py builds them). Wall time of cmd_cat into memory, one
thread, least of R interleaved rounds after a warm-up (median in brackets)."""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def avro(root: str, n: int) -> tuple[str, dict[str, Any]]:
    from support.typed_orders import orders_log

    logs, registry = orders_log(root, n)
    return os.path.join(logs, "orders-0"), dict(serdes=["value=avro"], schemas=registry)


def plain_json(root: str, n: int) -> tuple[str, dict[str, Any]]:
    import kbatch

    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "customer": {"type": "string"}, "price": {"type": "number"},
        "paid": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
        "ship": {"type": ["null", "object"], "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}}}
    path = os.path.join(root, "schema.json")
    with open(path, "w") as f:
        json.dump(schema, f)
    log = kbatch.Log.create(os.path.join(root, "p-0"), kbatch.LogConfig(segment_bytes=1 << 30))
    for lo in range(0, n, 500):
        b = kbatch.BatchBuilder()
        for i in range(lo, min(n, lo + 500)):
            b.append(i, None, json.dumps({"id": i, "customer": f"c-{i:06d}", "price": i % 50 / 4, "paid": i % 2 == 0,
                                          "tags": [f"t{i % 4}"] * (i % 3),
                                          "ship": {"city": "x", "zip": f"{i:05d}"} if i % 2 else None}).encode())
        log.append(b.build())
    log.close()
    return os.path.join(root, "p-0"), dict(serdes=[f"value=json-plain:{path}"])


def protobuf(root: str, n: int) -> tuple[str, dict[str, Any]]:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    import kbatch
    import test_cli_cat_typed as T
    from support.schemas import protobuf_value

    ts, p3, p2 = T._proto_files()
    pool = descriptor_pool.DescriptorPool()
    for fd in (ts, p3, p2):
        pool.Add(fd)
    os.mkdir(os.path.join(root, "s"))
    with open(os.path.join(root, "s", "7.desc"), "wb") as f:
        f.write(descriptor_pb2.FileDescriptorSet(file=[ts, p3]).SerializeToString())
    msg = message_factory.GetMessageClass(pool.FindMessageTypeByName("t3.Msg"))
    inner = message_factory.GetMessageClass(pool.FindMessageTypeByName("t3.Inner"))
    log = kbatch.Log.create(os.path.join(root, "p-0"), kbatch.LogConfig(segment_bytes=1 << 30))
    for lo in range(0, n, 500):
        b = kbatch.BatchBuilder()
        for i in range(lo, min(n, lo + 500)):
            m = msg(i32=i, i64=i * 1000003, s=f"c-{i:06d}", db=i / 4, b=i % 2 == 0, c=i % 3, packed=[i % 7] * (i % 3),
                    inner=inner(s="x", a=i % 5) if i % 2 else None)
            b.append(i, None, protobuf_value(7, m, [1]))
        log.append(b.build())
    log.close()
    return os.path.join(root, "p-0"), dict(serdes=["value=protobuf"], schemas=os.path.join(root, "s"))


WORKLOADS: dict[str, Callable[[str, int], tuple[str, dict[str, Any]]]] = {
    "Avro orders": avro, "Avro orders, -J": avro, "plain JSON with a schema": plain_json, "Protobuf, 25 fields": protobuf}


def run(path: str, columns: bool, kw: dict[str, Any]) -> tuple[float, bytes]:
    import kbatch.cli._schemas as S
    from kbatch.cli.cat import cmd_cat

    S.CAT_FROM_COLUMNS = columns
    out, err = io.BytesIO(), io.StringIO()
    t = time.perf_counter()
    code = cmd_cat(path, out=out, err=err, quiet=True, **kw)
    dt = time.perf_counter() - t
    if code != 0:
        raise SystemExit(f"cat exited {code}: {err.getvalue()[:500]}")
    return dt, out.getvalue()


def main() -> int:
    # a script, not a pytest-benchmark module: the tests' helpers (support.typed_orders, the cat
    # test's descriptors) are put on the path only when it runs
    sys.path[:0] = [os.path.join(ROOT, "src"), os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "cli")]
    import kbatch.cli._schemas as S

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="write bench/results-cat-typed.md")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in WORKLOADS.items():
            work = os.path.join(tmp, str(len(rows)))
            os.makedirs(work)
            path, kw = make(work, a.records)
            if name.endswith("-J"):
                kw = dict(kw, as_json=True)
            times: dict[bool, list[float]] = {False: [], True: []}
            outs: dict[bool, bytes] = {}
            for columns in (False, True):  # a warm-up: plans compiled, schemas fetched
                run(path, columns, kw)
            for _ in range(a.rounds):
                for columns in (False, True):
                    dt, outs[columns] = run(path, columns, kw)
                    times[columns].append(dt)
            assert outs[True] == outs[False], f"{name}: the column path printed something else"
            old, new = min(times[False]), min(times[True])
            rows.append((name, a.records / old, a.records / new, old / new,
                         statistics.median(times[False]) / statistics.median(times[True])))
            print(f"{name}: value by value {a.records / old:,.0f} rec/s, from columns {a.records / new:,.0f} rec/s, "
                  f"{old / new:.2f}x", flush=True)
    S.CAT_FROM_COLUMNS = True
    if a.write:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        lines = ["# `kbatch cat` typed values: from the column decoders vs value by value", "",
                 f"Generated by `bench/bench_cat_typed.py --records {a.records} --rounds {a.rounds} --write` (commit "
                 f"{commit}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC). Machine: "
                 f"{platform.machine()}, {os.cpu_count()} CPUs, CPython {platform.python_version()}; load average "
                 f"{os.getloadavg()[0]:.1f} at the end. Wall time of cmd_cat into memory, one thread, least of "
                 f"{a.rounds} interleaved rounds after a warm-up (median ratio in brackets); both printed outputs asserted equal first.",
                 "", "| workload | value by value rec/s | from columns rec/s | ratio |", "|---|---:|---:|---|"]
        for name, old, new, r, rm in rows:
            lines.append(f"| {name} | {old:,.0f} | {new:,.0f} | {r:.2f}x ({rm:.2f}x) |")
        lines += ["", "What bounds it: cat prints one JSON line a record (the envelope, the key, headers); the "
                  "decode is a column a run of up to 2,048 records, then each row is rendered from the Arrow "
                  "values in Python (values/render.py), which is now most of a typed record's cost. `-J` "
                  "parses the envelope JSON and writes it again, as before.", ""]
        with open(os.path.join(HERE, "results-cat-typed.md"), "w") as f:
            f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
