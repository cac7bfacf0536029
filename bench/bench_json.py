"""Plain JSON values to typed Arrow columns (issue 42), peers side by side in one process.
Results: bench/results-json.md.

    PYTHONPATH=src .venv/bin/python -m pytest bench/bench_json.py --benchmark-only \
        --benchmark-group-by=group --benchmark-columns=min,median,rounds

Workload: KBATCH_BENCH_JSON values (default 100,000) of an order as compact JSON (~125 bytes: an
integer, two strings, a number, a boolean, an array of strings, a nested object), a binary Arrow
column as decode_columns gives it, typed by one JSON Schema; one thread.
  json-plain values to columns
    kbatch PlainJson(schema)        PlainJson(schema).decode_column(column): the typed struct column
    kbatch PlainJson() inferred     the same with the schema inferred over the first 1,000 values
    orjson / msgspec / simdjson /   each value parsed into Python objects by that parser, then
    json                            pa.array(objects, type) (the obvious user code per parser)
    pyarrow read_json (bound)       pyarrow's reader alone over the values already newline-joined:
                                    what kbatch's path costs at least
  json-plain vs Spark from_json     (only with pyspark) the same values in a cached one-partition
                                    DataFrame, from_json(value cast to string, the schema's DDL)
                                    on local[1], every field read (a noop write); kbatch beside it
Every bench checks its column against the json.loads reference first.
"""
from __future__ import annotations

import json
import os
import random

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.json as pj  # noqa: E402

from kbatch.values import PlainJson  # noqa: E402
from kbatch.values.json_schema import _node, _shape  # noqa: E402

N = int(os.environ.get("KBATCH_BENCH_JSON", "100000"))
SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "user": {"type": "string"}, "amount": {"type": "number"}, "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "addr": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}}}}
NODE = _node(SCHEMA, SCHEMA)
SPARK_DDL = "id BIGINT, user STRING, amount DOUBLE, ok BOOLEAN, tags ARRAY<STRING>, addr STRUCT<city: STRING, zip: BIGINT>"


def values(n: int = N) -> list[bytes]:
    rng = random.Random(42)
    return [json.dumps({"id": i, "user": f"user-{rng.randrange(10**6)}", "amount": round(rng.random() * 1000, 2),
                        "ok": rng.random() < 0.5, "tags": [f"t{rng.randrange(50)}" for _ in range(rng.randrange(4))],
                        "addr": {"city": rng.choice(["Oslo", "Lyon", "Kyoto"]), "zip": rng.randrange(99999)}},
                       separators=(",", ":")).encode() for i in range(n)]


VALUES = values()
COLUMN = pa.array(VALUES, pa.binary())
JOINED = pa.py_buffer(b"\n".join(VALUES) + b"\n")


def reference() -> pa.Array:
    return pa.array([_shape(json.loads(v), NODE) for v in VALUES], NODE.type)


def kbatch_given():
    return PlainJson(SCHEMA).decode_column(COLUMN)


def kbatch_inferred():
    return PlainJson().decode_column(COLUMN)


def per_value(loads):
    def run():
        return pa.array([loads(v) for v in COLUMN.to_pylist()], NODE.type)
    return run


def pyarrow_bound():
    t = pj.read_json(JOINED, read_options=pj.ReadOptions(use_threads=False, block_size=1 << 30),
                     parse_options=pj.ParseOptions(explicit_schema=pa.schema(list(NODE.type)),
                                                   unexpected_field_behavior="ignore"))
    return pa.StructArray.from_arrays([c.combine_chunks() for c in t.columns], fields=list(NODE.type))


def impls():
    out = {"kbatch PlainJson(schema)": kbatch_given, "kbatch PlainJson() inferred": kbatch_inferred}
    try:
        import orjson
        out["orjson"] = per_value(orjson.loads)
    except ImportError:
        pass
    try:
        import msgspec
        out["msgspec"] = per_value(msgspec.json.Decoder().decode)
    except ImportError:
        pass
    try:
        import simdjson
        parser = simdjson.Parser()
        out["simdjson"] = per_value(lambda v: parser.parse(v).as_dict())
    except ImportError:
        pass
    out["json"] = per_value(json.loads)
    out["pyarrow read_json (bound)"] = pyarrow_bound
    return out


IMPLS = impls()


@pytest.fixture(scope="module")
def want():
    return reference()


@pytest.mark.benchmark(group="json-plain values to columns")
@pytest.mark.parametrize("impl", list(IMPLS))
def test_json_values(benchmark, want, impl):
    fn = IMPLS[impl]
    got = fn()
    assert got.equals(want) if impl != "kbatch PlainJson() inferred" else got.to_pylist() == want.to_pylist()
    benchmark.extra_info.update(records=N, bytes=sum(map(len, VALUES)))
    fast = impl.startswith("kbatch") or "bound" in impl
    benchmark.pedantic(fn, rounds=7 if fast else 3, iterations=1, warmup_rounds=1)


# ------------------------------------------------------------------------------------ Spark
@pytest.fixture(scope="module")
def spark_values():
    pytest.importorskip("pyspark.sql")
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "1g").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    df = s.createDataFrame(pa.table({"value": COLUMN}).to_pandas()).repartition(1).cache()
    assert df.count() == N
    yield s, df
    s.stop()


def spark_from_json(df):
    from pyspark.sql import functions as F

    df.select(F.from_json(F.col("value").cast("string"), SPARK_DDL).alias("v")).select("v.*").write.format(
        "noop").mode("overwrite").save()


@pytest.mark.benchmark(group="json-plain vs Spark from_json")
@pytest.mark.parametrize("impl", ["kbatch PlainJson(schema)", "Spark from_json (local[1])"])
def test_json_vs_spark(benchmark, want, spark_values, impl):
    spark, df = spark_values
    if impl.startswith("Spark"):
        from pyspark.sql import functions as F

        rows = df.select(F.from_json(F.col("value").cast("string"), SPARK_DDL).alias("v")).limit(3).collect()
        assert [r["v"].asDict(recursive=True) for r in rows] == want.to_pylist()[:3]
        fn = lambda: spark_from_json(df)  # noqa: E731
    else:
        assert kbatch_given().equals(want)
        fn = kbatch_given
    benchmark.extra_info.update(records=N, bytes=sum(map(len, VALUES)))
    benchmark.pedantic(fn, rounds=5, iterations=1, warmup_rounds=1)
