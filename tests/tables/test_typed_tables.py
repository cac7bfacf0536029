"""Typed columns in tables (issue 33 with 31): `kbatch.export_table(..., value_schema=, key_schema=,
schemas=)` and `kbatch export --format delta|iceberg -s value=avro --schemas SOURCE` write the
decoded struct columns; read back with deltalake / pyiceberg (and DuckDB) they equal
decode_columns(value_schema=...) of the same segments; schema evolution across runs widens the
table's struct by field name; a type change and a union column are refused before anything is
written; the offsets recorded per commit are the same as for a binary table."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

import kbatch

pa = pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")
pytest.importorskip("fastavro")

from kbatch.tables._typed import TypeChangeError, lake_type  # noqa: E402
from kbatch.values import Avro, open_schemas  # noqa: E402
from support.schemas import ORDER_V1, ORDER_V2, Registry, SchemasTopic, avro_value  # noqa: E402

FORMATS = ["delta", "iceberg"]
NOW = 1_700_000_000_000

V1, V2 = ORDER_V1, ORDER_V2
# v3: qty changes type: no table format takes that as an evolution
V3 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "qty", "type": "string"}]}
RICH = {"type": "record", "name": "Rich", "fields": [
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "b", "type": "boolean"},
    {"name": "points", "type": {"type": "array", "items": {"type": "record", "name": "P", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "int"], "default": None}]}}}]}
EITHER = {"type": "record", "name": "E", "fields": [{"name": "either", "type": ["null", "long", "string"]}]}
KEY = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "string"}]}


def rich(i: int) -> dict:
    import datetime as dt
    import decimal
    import uuid

    return {"day": dt.date(2024, 1, 1 + i % 28), "t_ms": dt.time(1, 2, 3, 4000), "ts_ms": NOW + i, "ts_us": NOW * 1000 + i,
            "price": decimal.Decimal(f"{i}.125"), "uid": uuid.UUID(int=i), "tags": [f"t{i}"] * (i % 3),
            "counts": {"a": i}, "kind": "AB"[i % 2], "fx": b"abcd", "f": 0.5, "d": i / 3, "b": i % 2 == 0,
            "points": [{"x": i, "y": None if i % 2 else i}]}


class Table:
    def __init__(self, fmt: str, tmp_path) -> None:
        self.fmt = fmt
        self.warehouse = str(tmp_path / "warehouse")
        self.name = str(tmp_path / "delta_table") if fmt == "delta" else "kafka.typed"

    def export(self, logs, **kw):
        extra = {} if self.fmt == "delta" else {"warehouse": self.warehouse}
        return kbatch.export_table(logs, self.name, format=self.fmt, **extra, **kw)

    def rows(self, version=None) -> pa.Table:
        if self.fmt == "delta":
            from deltalake import DeltaTable

            t = DeltaTable(self.name, version=version).to_pyarrow_dataset().to_table(use_threads=False)
        else:
            t = self.iceberg().scan().to_arrow()
        return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])

    def iceberg(self):
        from kbatch.tables._iceberg import open_catalog

        return open_catalog(None, self.warehouse).load_table(self.name)

    def version(self):
        if self.fmt == "delta":
            from deltalake import DeltaTable

            return DeltaTable(self.name).version()
        return self.iceberg().current_snapshot().snapshot_id

    def data_files(self) -> list[str]:
        """The files of the current version, as the format lists them (for DuckDB)."""
        if self.fmt == "delta":
            from deltalake import DeltaTable

            return [u.removeprefix("file://") for u in DeltaTable(self.name).file_uris()]
        return [t.file.file_path.removeprefix("file://") for t in self.iceberg().scan().plan_files()]

    def ends(self) -> dict:
        if self.fmt == "delta":
            from kbatch.tables._delta import history_offsets

            return history_offsets(self.name)[0]["ends"]
        from kbatch.tables._iceberg import snapshot_offsets

        return snapshot_offsets(self.iceberg())[0]["ends"]


@pytest.fixture(params=FORMATS)
def table(request, tmp_path):
    return Table(request.param, tmp_path)


def append(path: str, values: list, keys: list | None = None, per_batch: int = 4) -> None:
    log = kbatch.Log.open(path, kbatch.LogConfig(segment_bytes=1500), writable=True) if os.path.isdir(path) \
        else kbatch.Log.create(path, kbatch.LogConfig(segment_bytes=1500), now_ms=NOW)
    try:
        for lo in range(0, len(values), per_batch):
            b = kbatch.BatchBuilder()
            for j, v in enumerate(values[lo:lo + per_batch]):
                b.append(NOW + lo + j, None if keys is None else keys[lo + j], v)
            log.append(b.build(), now_ms=NOW, from_client=False)
    finally:
        log.close()


@pytest.fixture
def cluster(tmp_path):
    """orders-0/-1 (values of schema ids 1 and 2, keys id 4), rich-0 (id 3) and their _schemas."""
    sr = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    sr.register("orders-value", 1, 1, V1)
    sr.register("orders-value", 2, 2, V2)
    sr.register("rich-value", 1, 3, RICH)
    sr.register("orders-key", 1, 4, KEY)
    sr.close()
    logs = tmp_path / "logs"
    for p in (0, 1):
        vals = [avro_value(1, V1, {"id": i, "item": f"i{i}", "legacy": "x"}) for i in range(6)]
        vals += [avro_value(2, V2, {"id": 10 + i, "item": "n", "qty": i, "note": None if i % 2 else "hi",
                                    "ship": {"city": "Oslo", "zip": None} if i % 3 == 0 else None}) for i in range(7)]
        vals.append(None)  # a tombstone: a null struct
        keys = [avro_value(4, KEY, {"k": f"k{i % 5}"}) for i in range(len(vals))]
        append(str(logs / f"orders-{p}"), vals, keys)
    append(str(logs / "rich-0"), [avro_value(3, RICH, rich(i)) for i in range(9)])
    return tmp_path


def segments_bytes(path: str) -> list[bytes]:
    return [open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path)) if n.endswith(".log")]


def expected(path: str, topic: str, partition: int, source, field: str = "value") -> pa.Table:
    """decode_columns of the partition's segments (one column: the union of the writer schemas)."""
    fmt = Avro(source)
    return kbatch.decode_columns(b"".join(segments_bytes(path)), topic, partition, **{f"{field}_schema": fmt})


def same_column(got: pa.Table, want: pa.Table, name: str = "value") -> None:
    typ = got.schema.field(name).type
    assert got["offset"].to_pylist() == want["offset"].to_pylist()
    assert got[name].to_pylist() == want[name].cast(typ).to_pylist()


def part(t: pa.Table, topic: str, partition: int) -> pa.Table:
    import pyarrow.compute as pc

    return t.filter(pc.and_(pc.equal(t["topic"], topic), pc.equal(t["partition"], partition)))


def test_typed_rows_equal_decode_columns_of_the_same_partitions(table, cluster):
    logs, sr = str(cluster / "logs"), str(cluster / "sr" / "_schemas-0")
    r = table.export(logs, value_schema="avro", key_schema="avro", schemas=sr)
    assert r.rows == 14 * 2 + 9 and r.commits == 1
    t = table.rows()
    source = open_schemas(sr)
    for topic, p in (("orders", 0), ("orders", 1), ("rich", 0)):
        got = part(t, topic, p)
        path = str(cluster / "logs" / f"{topic}-{p}")
        same_column(got, expected(path, topic, p, source))
        if topic == "orders":
            same_column(got, expected(path, topic, p, source, "key"), "key")
    # queryable by field: v1 values read with their writer schema (issue 38): no qty, their legacy kept
    import pyarrow.compute as pc

    orders = part(t, "orders", 0)
    assert pc.struct_field(orders["value"], "qty").to_pylist()[:6] == [None] * 6
    assert pc.struct_field(orders["value"], "legacy").to_pylist()[:7] == ["x"] * 6 + [None]
    assert pc.struct_field(orders["value"], "ship").to_pylist()[6] == {"city": "Oslo", "zip": None}
    assert orders["value"].to_pylist()[-1] is None
    # the table formats' own types: microsecond timestamps, Delta keeps time-millis as int (spark-avro's rule)
    vt = t.schema.field("value").type
    assert vt.field("ts_ms").type == pa.timestamp("us", tz="UTC")
    if table.fmt == "delta":
        assert vt.field("t_ms").type == pa.int32()
    # the offsets in the metadata are a binary table's
    assert table.ends() == {"orders-0": 14, "orders-1": 14, "rich-0": 9}
    again = table.export(logs, value_schema="avro", key_schema="avro", schemas=sr)
    assert again.rows == 0 and again.commits == 0


def test_duckdb_reads_the_typed_tables_and_the_parquet_export_as_decode_columns(table, cluster):
    duckdb = pytest.importorskip("duckdb")
    logs, sr = str(cluster / "logs"), str(cluster / "sr" / "_schemas-0")
    table.export(logs, value_schema="avro", schemas=sr, topics=["orders"])
    files = table.data_files()
    assert files
    con = duckdb.connect()
    # Delta's files hold no topic/partition (they are in the paths, hive style); Iceberg's hold both
    got = con.sql("SELECT * FROM read_parquet(?, hive_partitioning = true, union_by_name = true) "
                  "ORDER BY topic, partition, \"offset\"", params=[files]).to_arrow_table()
    source = open_schemas(sr)
    for p in (0, 1):
        same_column(part(got, "orders", p), expected(str(cluster / "logs" / f"orders-{p}"), "orders", p, source))
    # by field, in SQL
    n = con.execute("SELECT sum(value.qty) FROM read_parquet(?, hive_partitioning = true, union_by_name = true)",
                    [files]).fetchone()[0]
    assert n == 2 * sum(range(7))  # v1 values have no qty (null): their writer schema had none


def test_duckdb_reads_the_binary_tables_and_plain_parquet_as_decode_columns(table, cluster, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    pytest.importorskip("typer")
    from kbatch.cli.export import cmd_export

    logs = str(cluster / "logs")
    table.export(logs)
    assert cmd_export(logs, to=str(tmp_path / "plain"), quiet=True, out=io.StringIO(), err=io.StringIO()) == 0
    con = duckdb.connect()
    q = "SELECT * FROM read_parquet(?, hive_partitioning = true) ORDER BY topic, partition, \"offset\""
    plain = [str(p) for p in (tmp_path / "plain").rglob("*.parquet")]
    for files in (table.data_files(), plain):
        got = con.sql(q, params=[files]).to_arrow_table()
        for topic, p in (("orders", 0), ("orders", 1), ("rich", 0)):
            want = pa.concat_tables([kbatch.decode_columns(d, topic, p)
                                     for d in segments_bytes(str(cluster / "logs" / f"{topic}-{p}"))])
            g = part(got, topic, p)
            for name in ("offset", "key", "value"):
                assert g[name].to_pylist() == want[name].to_pylist(), (files, topic, p, name)
            assert g["timestamp"].cast(pa.int64()).to_pylist() == want["timestamp"].cast(pa.int64()).to_pylist()


def test_schema_evolution_across_runs_widens_the_table_by_field(table, tmp_path):
    """Run 1 sees only v1 (the registry has v1); v2 is registered (a field added with a default, one
    removed) and run 2 exports its records: the table holds both, each row null where its schema
    had no such field; the offsets are recorded as for any run."""
    path = str(tmp_path / "logs" / "orders-0")
    append(path, [avro_value(1, V1, {"id": i, "item": "a", "legacy": "L"}) for i in range(5)])
    schemas = {1: ("AVRO", kbatch_json(V1), [], "orders-value", 1)}
    with Registry(schemas) as reg:
        r1 = table.export(str(tmp_path / "logs"), value_schema="avro", schemas=reg.url)
        v1 = table.version()
        schemas[2] = ("AVRO", kbatch_json(V2), [], "orders-value", 2)
        append(path, [avro_value(2, V2, {"id": 10 + i, "item": "b", "qty": i, "note": "n", "ship": None})
                      for i in range(4)])
        r2 = table.export(str(tmp_path / "logs"), value_schema="avro", schemas=reg.url)
    assert (r1.rows, r2.rows) == (5, 4)
    t = table.rows()
    names = t.schema.field("value").type.names
    assert names == ["id", "item", "legacy", "qty", "note", "ship"]
    vals = t["value"].to_pylist()
    assert vals[0] == {"id": 0, "item": "a", "legacy": "L", "qty": None, "note": None, "ship": None}
    assert vals[5] == {"id": 10, "item": "b", "legacy": None, "qty": 0, "note": "n", "ship": None}
    assert table.ends() == {"orders-0": 9}
    if table.fmt == "delta":  # the version run 1 made still reads as it was
        old = table.rows(v1)
        assert old.num_rows == 5
    # v3 changes qty's type: refused, nothing committed, the table unchanged
    schemas[3] = ("AVRO", kbatch_json(V3), [], "orders-value", 3)
    append(path, [avro_value(3, V3, {"id": 99, "item": "c", "qty": "many"})])
    before = table.version()
    with Registry(schemas) as reg:
        with pytest.raises(TypeChangeError, match="qty is int32 in the table and string in this run"):
            table.export(str(tmp_path / "logs"), value_schema="avro", schemas=reg.url)
    assert table.version() == before and table.rows().num_rows == 9


def kbatch_json(schema) -> str:
    import json

    return json.dumps(schema)


def test_a_union_of_several_types_and_a_mixed_table_are_refused(table, tmp_path):
    logs = tmp_path / "logs"
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "5.avsc").write_text(kbatch_json(EITHER))
    (folder / "1.avsc").write_text(kbatch_json(V1))
    append(str(logs / "e-0"), [avro_value(5, EITHER, {"either": 3})])
    with pytest.raises(TypeChangeError, match="value.either: a union of several non-null types"):
        table.export(str(logs), value_schema="avro", schemas=str(folder))
    with pytest.raises(Exception):
        table.version()  # no table was made
    # a binary table takes no typed run, and a typed one no binary run
    append(str(logs / "o-0"), [avro_value(1, V1, {"id": 1, "item": "a", "legacy": ""})])
    table.export(str(logs), topics=["o"])
    with pytest.raises(kbatch.KBatchError, match="the table's value column is bytes"):
        table.export(str(logs), topics=["o"], value_schema="avro", schemas=str(folder))


def test_iceberg_typed_table_and_its_own_scan(tmp_path, cluster):
    """pyiceberg's scan filters by a struct field (a query by field through the table's reader)."""
    from pyiceberg.expressions import GreaterThanOrEqual

    t = Table("iceberg", tmp_path)
    t.export(str(cluster / "logs"), value_schema="avro", schemas=str(cluster / "sr" / "_schemas-0"), topics=["orders"])
    got = t.iceberg().scan(row_filter=GreaterThanOrEqual("value.id", 10)).to_arrow()
    assert sorted(v["id"] for v in got["value"].to_pylist()) == sorted(list(range(10, 17)) * 2)


def test_compacted_typed_over_several_topics_is_one_version_of_each_partitions_cleaner_view(table, cluster):
    logs, sr = str(cluster / "logs"), str(cluster / "sr" / "_schemas-0")
    append(str(cluster / "logs" / "keys-0"), [b"v%d" % i for i in range(10)], [b"k%d" % (i % 3) for i in range(10)])
    r = table.export(logs, compacted=True)  # a binary compacted table: three topics, four partitions
    assert r.commits == 1 and len(r.partitions) == 4
    t = table.rows()
    for topic, p in (("orders", 0), ("orders", 1), ("rich", 0), ("keys", 0)):
        latest: dict = {}
        for _b, rec in kbatch.Log.open(str(cluster / "logs" / f"{topic}-{p}")).read().records():
            if rec.key is not None:
                latest[bytes(rec.key)] = None if rec.value is None else bytes(rec.value)
        want = {(k, v) for k, v in latest.items() if v is not None}
        got = part(t, topic, p)
        assert set(zip(got["key"].to_pylist(), got["value"].to_pylist())) == want, (topic, p)
    # typed and compacted: the cleaner picks on the framed keys, then the rows are typed
    other = Table(table.fmt, cluster / "typed")
    r = other.export(logs, compacted=True, topics=["orders"], value_schema="avro", key_schema="avro", schemas=sr)
    assert r.commits == 1
    got = other.rows()
    source = open_schemas(sr)
    for p in (0, 1):
        g = part(got, "orders", p)
        # keys k0..k4: the latest record of k3 (offset 13) is the tombstone, so four keys remain
        assert sorted(k["k"] for k in g["key"].to_pylist()) == ["k0", "k1", "k2", "k4"]
        full = expected(str(cluster / "logs" / f"orders-{p}"), "orders", p, source)
        by_offset = dict(zip(full["offset"].to_pylist(), full["value"].cast(g.schema.field("value").type).to_pylist()))
        assert g["value"].to_pylist() == [by_offset[o] for o in g["offset"].to_pylist()]


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_export_table_with_schemas(cluster, tmp_path, fmt):
    pytest.importorskip("typer")
    to = str(tmp_path / "d") if fmt == "delta" else "ns.typed"
    cmd = [sys.executable, "-m", "kbatch", "export", str(cluster / "logs"), "--format", fmt, "--to", to, "--topic",
           "orders", "-s", "value=avro", "--schemas", str(cluster / "sr" / "_schemas-0")]
    if fmt == "iceberg":
        cmd += ["--warehouse", str(tmp_path / "wh")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    t = Table(fmt, tmp_path)
    t.name = to
    t.warehouse = str(tmp_path / "wh")
    rows = t.rows()
    assert rows.schema.field("value").type.names == ["id", "item", "legacy", "qty", "note", "ship"]
    assert rows.num_rows == 28
    # -s without --schemas is a usage error (exit 2), before anything is written
    bad = subprocess.run(cmd[:cmd.index("--schemas")] + ["--to", str(tmp_path / "other")] * (fmt == "delta"),
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "needs --schemas" in bad.stderr


def test_lake_types_of_the_decoders_types():
    assert lake_type(pa.timestamp("ms", tz="UTC"), "delta", "v") == pa.timestamp("us", tz="UTC")
    assert lake_type(pa.time32("ms"), "delta", "v") == pa.int32()
    assert lake_type(pa.time32("ms"), "iceberg", "v") == pa.time64("us")
    assert lake_type(pa.uint32(), "iceberg", "v") == pa.int64()
    assert lake_type(pa.uint64(), "delta", "v") == pa.decimal128(20, 0)
    assert lake_type(pa.struct([pa.field("a", pa.binary(4), nullable=False)]), "delta", "v") == \
        pa.struct([pa.field("a", pa.binary())])
    with pytest.raises(TypeChangeError, match="wider than the 38 digits"):
        lake_type(pa.decimal256(40, 2), "iceberg", "v")


def test_a_value_that_does_not_decode_stops_its_partition_only_and_is_named(table, cluster):
    logs, sr = cluster / "logs", str(cluster / "sr" / "_schemas-0")
    append(str(logs / "orders-0"), [b"plain text, not framed"])  # offset 14 of orders-0
    r = table.export(str(logs), value_schema="avro", schemas=sr, topics=["orders"])
    assert len(r.problems) == 1 and "orders-0" in r.problems[0] and "offset 14" in r.problems[0]
    assert "magic byte" in r.problems[0] and "not advanced" in r.problems[0]
    assert table.ends() == {"orders-1": 14}   # orders-0 stays where it was: nothing of it in the table
    assert set(table.rows()["partition"].to_pylist()) == {1}


def test_api_usage_errors_are_clear(tmp_path, cluster):
    logs, sr = str(cluster / "logs"), str(cluster / "sr" / "_schemas-0")
    with pytest.raises(ValueError, match="needs schemas="):
        kbatch.export_table(logs, str(tmp_path / "t"), value_schema="avro")
    with pytest.raises(ValueError, match="say which column"):
        kbatch.export_table(logs, str(tmp_path / "t"), schemas=sr)
    with pytest.raises(ValueError, match="a schema format is one of"):
        kbatch.export_table(logs, str(tmp_path / "t"), value_schema="xml", schemas=sr)
    assert not (tmp_path / "t").exists()


PROTO = '''syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  map<string, int32> counts = 2;
  enum Status { NEW = 0; PAID = 1; }
  Status status = 3;
  google.protobuf.Timestamp at = 4;
  message Line { string sku = 1; uint32 n = 2; uint64 big = 3; }
  repeated Line lines = 5;
}
'''
JSON_SCHEMA = {"type": "object", "properties": {"user": {"type": "string"}, "n": {"type": "integer"},
                                                "tags": {"type": "array", "items": {"type": "string"}}}}


def test_protobuf_and_json_schema_values_into_typed_tables(table, tmp_path):
    """Protobuf (unsigned integers, enums, maps, a well-known Timestamp) and JSON Schema values, both
    from one `_schemas` directory, read back equal to decode_columns' typed columns."""
    pytest.importorskip("grpc_tools")
    pytest.importorskip("jsonschema")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from kbatch.values import JsonSchema, Protobuf
    from kbatch.values.protobuf import compile_proto
    from support.schemas import json_value, protobuf_value

    fds = descriptor_pb2.FileDescriptorSet.FromString(compile_proto({"order.proto": PROTO}, "order.proto"))
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    sr = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    sr.register("pb-value", 1, 7, PROTO, "PROTOBUF")
    sr.register("js-value", 1, 8, JSON_SCHEMA, "JSON")
    sr.close()
    logs = tmp_path / "logs"
    msgs = []
    for i in range(9):
        o = Order(id=i, status=i % 2)
        o.counts["a"] = i
        o.at.FromMilliseconds(NOW + i)
        o.lines.add(sku=f"s{i}", n=i, big=2**63 + i)
        msgs.append(protobuf_value(7, o))
    append(str(logs / "pb-0"), msgs + [None])
    append(str(logs / "js-0"), [json_value(8, {"user": f"u{i}", "n": i, "tags": ["x"] * i}) for i in range(7)])
    source = open_schemas(str(tmp_path / "sr" / "_schemas-0"))
    for topic, fmt, kind in (("pb", Protobuf(source), "protobuf"), ("js", JsonSchema(source), "json")):
        name = table.name if topic == "pb" else table.name + "_js"
        t = Table(table.fmt, tmp_path)
        t.name = name
        r = t.export(str(logs), topics=[topic], value_schema=kind, schemas=str(tmp_path / "sr" / "_schemas-0"))
        assert not r.problems and r.commits == 1
        got = t.rows()
        want = pa.concat_tables([kbatch.decode_columns(d, topic, 0, value_schema=fmt)
                                 for d in segments_bytes(str(logs / f"{topic}-0"))])
        typ = got.schema.field("value").type
        if topic == "pb":  # unsigned 64-bit as decimal(20, 0), 32-bit as long: the formats have no unsigned types
            line = typ.field("lines").type.value_type
            assert line.field("big").type == pa.decimal128(20, 0) and line.field("n").type == pa.int64()
        assert got["value"].to_pylist() == want["value"].cast(typ).to_pylist()
