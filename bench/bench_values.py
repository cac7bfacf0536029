"""Avro values to typed Arrow columns (issue 33), peers side by side in one process.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_values.py --benchmark-only \
        --benchmark-group-by=group --benchmark-columns=min,median,rounds
    PYTHONPATH=src .venv/bin/python bench/bench_values.py      # records/s per core and the ratios, no pytest

Workload: one segment of KBATCH_BENCH_VALUES records (default 100,000) in v2 batches of 1000,
uncompressed, each value Confluent-framed Avro of an order record (11 fields: longs, an int, a
double, strings, a nullable string, an enum, timestamp-millis, a decimal, a nested record, an
array of strings), half of them written with the schema's first version (the evolution case:
those are resolved to the newest). All on one thread (use_threads=False): records/s per core.
  kbatch                           decode_columns(data, value_schema=Avro(source, reader_schema=v2)):
                                   the typed struct column (the compiled kernel, Arrow buffers in and out)
  fastavro-schemaless_reader-loop  the obvious user code: every record of the segment, its value's
                                   5-byte header read, fastavro.schemaless_reader on the rest
                                   (writer schema by id, the newest as reader schema) into a list
  fastavro-schemaless_reader-loop-no-resolution
                                   the same loop, each value with its own writer schema only
  decode_columns-binary            decode_columns(data) alone: the bytes, no decoding of the values
                                   (what the typed column costs on top of)
Every bench checks its result against the fastavro loop's first.
"""
import datetime
import decimal
import io
import json
import os
import sys
import time

import pytest

fastavro = pytest.importorskip("fastavro") if "pytest" in sys.modules else __import__("fastavro")

import kbatch  # noqa: E402
from kbatch.values import Avro, TopicSchemas, frame  # noqa: E402

N = int(os.environ.get("KBATCH_BENCH_VALUES", "100000"))
ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"},
                                                          {"name": "zip", "type": "string"}]}
V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "qty", "type": "int"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "ship", "type": ADDRESS}, {"name": "tags", "type": {"type": "array", "items": "string"}}]}
V2 = dict(V1, fields=V1["fields"] + [{"name": "channel", "type": "string", "default": "web"}])


def workload(n: int = N) -> tuple[bytes, TopicSchemas]:
    src = TopicSchemas.from_records([
        (0, b'{"keytype":"SCHEMA","subject":"orders-value","version":1}',
         json.dumps({"subject": "orders-value", "version": 1, "id": 1, "schema": json.dumps(V1)}).encode()),
        (1, b'{"keytype":"SCHEMA","subject":"orders-value","version":2}',
         json.dumps({"subject": "orders-value", "version": 2, "id": 2, "schema": json.dumps(V2)}).encode())])
    p1, p2 = fastavro.parse_schema(V1), fastavro.parse_schema(V2)
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    out = io.BytesIO()
    for b in range(0, n, 1000):
        builder = kbatch.BatchBuilder()
        for i in range(b, min(n, b + 1000)):
            rec = {"id": i, "customer": f"customer-{i % 977}", "amount": i * 0.25, "qty": i % 13,
                   "note": None if i % 3 else f"note {i}", "status": ["NEW", "PAID", "SHIPPED"][i % 3],
                   "created": base + datetime.timedelta(seconds=i), "price": decimal.Decimal(i % 100000) / 100,
                   "ship": {"city": f"city-{i % 50}", "zip": f"{i % 99999:05d}"}, "tags": ["a", "bb", "ccc"][: i % 4],
                   "channel": "app"}
            buf = io.BytesIO()
            if i % 2:
                fastavro.schemaless_writer(buf, p2, rec)
                v = frame(2, buf.getvalue())
            else:
                fastavro.schemaless_writer(buf, p1, rec)
                v = frame(1, buf.getvalue())
            builder.append(1_700_000_000_000 + i, b"k%d" % i, v)
        out.write(builder.build())
    return out.getvalue(), src


def kbatch_typed(data: bytes, src: TopicSchemas):
    # the newest version pinned as the reader schema, as the fastavro loop resolves (issue 38: unpinned,
    # each value reads with its own writer schema)
    return kbatch.decode_columns(data, value_schema=Avro(src, reader_schema=src.get(2).schema),
                                 use_threads=False).column("value")


def binary_only(data: bytes, src: TopicSchemas):
    return kbatch.decode_columns(data, use_threads=False).column("value")


def fastavro_loop(data: bytes, src: TopicSchemas):
    """The obvious user code: a writer schema per id (parsed once), the newest as reader schema."""
    writers = {}
    reader = fastavro.parse_schema(json.loads(src.get(2).schema))
    out = []
    for batch in kbatch.iter_batches(data):
        for rec in batch:
            v = rec.value
            if v is None:
                out.append(None)
                continue
            sid = int.from_bytes(v[1:5], "big")
            w = writers.get(sid)
            if w is None:
                w = writers[sid] = fastavro.parse_schema(json.loads(src.get(sid).schema))
            out.append(fastavro.schemaless_reader(io.BytesIO(v[5:]), w, reader))
    return out


def fastavro_loop_writer_only(data: bytes, src: TopicSchemas):
    """The same loop without schema resolution (each value read with its own writer schema: the
    values then have two shapes); fastavro's fastest per-record path."""
    writers = {}
    out = []
    for batch in kbatch.iter_batches(data):
        for rec in batch:
            v = rec.value
            sid = int.from_bytes(v[1:5], "big")
            w = writers.get(sid)
            if w is None:
                w = writers[sid] = fastavro.parse_schema(json.loads(src.get(sid).schema))
            out.append(fastavro.schemaless_reader(io.BytesIO(v[5:]), w))
    return out


IMPLS = {"kbatch": kbatch_typed, "fastavro-schemaless_reader-loop": fastavro_loop,
         "fastavro-schemaless_reader-loop-no-resolution": fastavro_loop_writer_only,
         "decode_columns-binary": binary_only}


def check(data: bytes, src: TopicSchemas) -> None:
    typed = kbatch_typed(data, src).to_pylist()
    ref = fastavro_loop(data, src)
    assert len(typed) == len(ref) == N
    for t, r in zip(typed[:2000], ref[:2000]):
        assert t["id"] == r["id"] and t["customer"] == r["customer"] and t["price"] == r["price"]
        assert t["created"] == r["created"] and t["ship"] == r["ship"] and t["tags"] == r["tags"]
        assert t["channel"] == r["channel"] and t["status"] == r["status"] and t["note"] == r["note"]


if "pytest" in sys.modules:
    @pytest.fixture(scope="module")
    def work():
        data, src = workload()
        check(data, src)
        return data, src

    @pytest.mark.benchmark(group="avro values to columns")
    @pytest.mark.parametrize("impl", list(IMPLS))
    def test_values(benchmark, work, impl):
        data, src = work
        benchmark.extra_info["records"] = N
        benchmark.pedantic(IMPLS[impl], args=(data, src), rounds=5, iterations=1, warmup_rounds=1)


def main() -> None:
    data, src = workload()
    check(data, src)
    best = {}
    for _ in range(5):
        for name, fn in IMPLS.items():
            t0 = time.perf_counter()
            fn(data, src)
            dt = time.perf_counter() - t0
            best[name] = min(best.get(name, dt), dt)
    print(f"{N} records, one thread, best of 5 (load average {os.getloadavg()[0]:.1f}):")
    for name, dt in best.items():
        print(f"  {name:46s} {N / dt:12,.0f} records/s")
    print(f"kbatch typed vs the fastavro loop: {best['fastavro-schemaless_reader-loop'] / best['kbatch']:.2f}x faster")
    print(f"kbatch typed vs the fastavro loop without resolution: "
          f"{best['fastavro-schemaless_reader-loop-no-resolution'] / best['kbatch']:.2f}x faster")
    print(f"kbatch typed vs binary decode_columns: {best['decode_columns-binary'] / best['kbatch']:.2f}x "
          f"(the typed column costs {best['kbatch'] / best['decode_columns-binary']:.1f}x the binary decode)")


if __name__ == "__main__":
    main()
