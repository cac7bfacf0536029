"""The Parquet writer options every kbatch file takes (kbatch.tables.writer_options, issue 42): a
dictionary only on the leaf columns whose first batch holds few distinct values, DELTA_BINARY_PACKED
on integer-backed columns that move in small steps, statistics on every column. The decision on
typed and binary schemas; the files of a typed `kbatch export --format parquet`, Delta and Iceberg
export carry it, keep min/max statistics where readers prune (offset, timestamp), and read back as
decode_columns of the same segments."""
from __future__ import annotations

import glob
import os

import pytest

import kbatch

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("fastavro")
pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

from kbatch.tables import WriterChoices, writer_options  # noqa: E402
from kbatch.values import Avro, open_schemas  # noqa: E402
from support.typed_orders import NOW, order, orders_log  # noqa: E402

N = 2000


def test_dictionary_where_few_values_repeat_and_delta_packing_where_steps_are_small():
    """The typed value's leaves by what their values are: an enum, a small set of cities, tags
    and a handful of prices get a dictionary; ids, customers, zips, random longs do not; offsets,
    timestamps and sequential ids are delta-packed, random longs stay PLAIN; booleans are never
    listed (Parquet has no dictionary for them)."""
    import decimal

    n = 4000
    value = pa.array([order(i) for i in range(n)], pa.struct([
        ("id", pa.int64()), ("customer", pa.string()), ("status", pa.string()), ("price", pa.decimal128(9, 2)),
        ("noise", pa.int64()), ("paid", pa.bool_()), ("ts", pa.timestamp("ms", tz="UTC")),
        ("tags", pa.list_(pa.string())), ("ship", pa.struct([("city", pa.string()), ("zip", pa.string())]))]))
    assert value.field("price")[5].as_py() == decimal.Decimal("1.25")
    headers = pa.array([[{"key": "trace", "value": b"%08d" % i}] if i % 10 == 0 else None for i in range(n)],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([b"k%d" % (i % 3) for i in range(n)]), "value": value,
        "offset": pa.array(range(100, 100 + n), pa.int64()),
        "timestamp": pa.array([(NOW + i) * 1000 for i in range(n)], pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()), "headers": headers,
        # steps of 1, but beyond int64: the step check cannot take them (no packing, no error)
        "isTombstone": pa.array([False] * n), "big": pa.array([(1 << 63) + i for i in range(n)], pa.uint64())})
    opts = writer_options(batch)
    assert sorted(opts["use_dictionary"]) == sorted([
        "key", "value.status", "value.price", "value.tags.list.element", "value.ship.city", "timestampType",
        "headers.list.element.key"])
    assert opts["column_encoding"] == {"value.id": "DELTA_BINARY_PACKED", "value.ts": "DELTA_BINARY_PACKED",
                                       "offset": "DELTA_BINARY_PACKED", "timestamp": "DELTA_BINARY_PACKED"}
    assert "write_statistics" not in opts  # pyarrow's default: every column
    # the writer takes them and the file says so, column by column
    import io

    buf = io.BytesIO()
    with pq.ParquetWriter(buf, batch.schema, **opts) as w:
        w.write_batch(batch)
    meta = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata.row_group(0)
    enc = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in enc["value.status"] and "RLE_DICTIONARY" not in enc["value.customer"]
    assert "DELTA_BINARY_PACKED" in enc["offset"] and "DELTA_BINARY_PACKED" not in enc["value.noise"]
    assert pq.read_table(io.BytesIO(buf.getvalue())).to_batches()[0].equals(batch)


def test_the_decision_is_made_once_per_schema_and_again_for_a_new_one():
    choices = WriterChoices()
    low = pa.RecordBatch.from_pydict({"a": pa.array([1, 2] * 500, pa.int64())})
    high = pa.RecordBatch.from_pydict({"a": pa.array(range(0, 10 ** 9, 10 ** 6), pa.int64())})
    few = pa.RecordBatch.from_pydict({"a": pa.array([7, 7, 7], pa.int64()), "b": pa.array(["x", "y", "z"])})
    assert choices.options(few) == {"use_dictionary": [], "column_encoding": {"a": "DELTA_BINARY_PACKED"}}
    wider = pa.RecordBatch.from_pydict({"a": high.column(0), "b": pa.array(["x"] * 1000)})
    # a 3-row first batch decided for its own file only: the next file of that schema decides again
    assert choices.options(wider) == {"use_dictionary": ["b"], "column_encoding": {"a": "DELTA_BINARY_PACKED"}}
    assert choices.options(low) == {"use_dictionary": ["a"]}
    assert choices.options(high) == {"use_dictionary": ["a"]}  # the topic's first batch speaks for the rest
    assert choices.options(wider.slice(0, 5)) == {"use_dictionary": ["b"], "column_encoding": {"a": "DELTA_BINARY_PACKED"}}


def test_no_dictionary_or_packing_on_what_cannot_take_it():
    """Null-typed, all-null, one-value and empty columns (and an empty batch) decide without an error."""
    b = pa.RecordBatch.from_pydict({"n": pa.nulls(3), "e": pa.array([None, None, None], pa.int64()),
                                    "one": pa.array([5, None, None], pa.int64()), "l": pa.array([[], [], []],
                                                                                                pa.list_(pa.int64()))})
    assert writer_options(b) == {"use_dictionary": []}
    assert writer_options(b.slice(0, 0)) == {"use_dictionary": []}
    # a type the hash kernels refuse (a union: Parquet has none either) keeps the writer's default
    u = pa.UnionArray.from_sparse(pa.array([0, 1] * 50, pa.int8()), [pa.array(range(100)), pa.array(["x"] * 100)])
    assert writer_options(pa.RecordBatch.from_pydict({"u": u})) == {"use_dictionary": ["u"]}


def export_all(tmp_path):
    """A 2000-record typed partition (schema id 1) and its exports: a Parquet directory (kbatch export
    -s value=avro), a Delta table, an Iceberg table; their files, and decode_columns' rows."""
    from kbatch.cli.export import cmd_export

    logs, sr = orders_log(str(tmp_path), N)
    path = os.path.join(logs, "orders-0")
    assert cmd_export(logs, to=str(tmp_path / "pq") + "/", fmt="parquet", quiet=True, out=open(os.devnull, "w"),
                      serdes=["value=avro"], schemas=sr) == 0
    kbatch.export_table(logs, str(tmp_path / "delta"), format="delta", value_schema="avro", schemas=sr)
    wh = str(tmp_path / "wh")
    kbatch.export_table(logs, "k.orders", format="iceberg", warehouse=wh, value_schema="avro", schemas=sr)
    seg = open(glob.glob(os.path.join(path, "*.log"))[0], "rb").read()
    want = kbatch.decode_columns(seg, "orders", 0, value_schema=Avro(open_schemas(sr), subject="orders-value"))
    files = {fmt: sorted(glob.glob(str(tmp_path / d / "**" / "*.parquet"), recursive=True))
             for fmt, d in (("parquet", "pq"), ("delta", "delta"), ("iceberg", "wh"))}
    return files, want, wh


def test_typed_exports_carry_the_options_keep_pruning_statistics_and_read_back_equal(tmp_path):
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    from kbatch.tables._iceberg import open_catalog

    files, want, wh = export_all(tmp_path)
    for fmt, paths in files.items():
        assert paths, fmt
        for p in paths:
            f = pq.ParquetFile(p)
            for g in range(f.metadata.num_row_groups):
                rg = f.metadata.row_group(g)
                cols = {rg.column(i).path_in_schema: rg.column(i) for i in range(rg.num_columns)}
                assert "RLE_DICTIONARY" in cols["value.status"].encodings, fmt
                assert "RLE_DICTIONARY" not in cols["value.customer"].encodings, fmt
                assert "DELTA_BINARY_PACKED" in cols["offset"].encodings, fmt
                data = f.read_row_group(g, columns=["offset", "timestamp"])
                for name in ("offset", "timestamp"):  # what a reader prunes row groups by
                    st = cols[name].statistics
                    assert cols[name].is_stats_set and st.has_min_max, (fmt, name)
                    assert (st.min, st.max) == (data[name][0].as_py(), data[name][-1].as_py()), (fmt, name)
                assert cols["value.id"].is_stats_set and cols["value.id"].statistics.has_min_max, fmt
    readers = {
        "parquet": ds.dataset(str(tmp_path / "pq"), format="parquet", partitioning="hive").to_table(),
        "delta": DeltaTable(str(tmp_path / "delta")).to_pyarrow_dataset().to_table(use_threads=False),
        "iceberg": open_catalog(None, wh).load_table("k.orders").scan().to_arrow(),
    }
    for fmt, got in readers.items():
        got = got.sort_by("offset")
        assert got["offset"].to_pylist() == want["offset"].to_pylist(), fmt
        assert got["value"].to_pylist() == want["value"].cast(got.schema.field("value").type).to_pylist(), fmt
    # Iceberg's manifests take their bounds from the files' statistics: offset's are there
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import LongType

    table = open_catalog(None, wh).load_table("k.orders")
    fid = table.schema().find_field("offset").field_id
    (task,) = list(table.scan().plan_files())
    assert from_bytes(LongType(), task.file.lower_bounds[fid]) == 0
    assert from_bytes(LongType(), task.file.upper_bounds[fid]) == N - 1
