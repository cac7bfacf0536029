"""`kbatch cat -s value=avro|json|protobuf --schemas SOURCE` (and kcat's -r URL), and `kbatch
export -s value=... --schemas SOURCE` writing typed columns."""
from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")
pytest.importorskip("fastavro")
pa = pytest.importorskip("pyarrow")

import kbatch
from kbatch.cli.cat import cmd_cat
from kbatch.cli.export import cmd_export
from support.schemas import Registry, SchemasTopic, avro_value, json_value

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
V2 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                                                   {"name": "qty", "type": "int", "default": 1}]}
KEY = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "string"}]}
JS = {"type": "object", "properties": {"n": {"type": "integer"}}}


@pytest.fixture
def cluster(tmp_path):
    """A log directory with an Avro-valued topic and the cluster's _schemas partition."""
    t = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    t.register("orders-value", 1, 1, V1)
    t.register("orders-value", 2, 2, V2)
    t.register("orders-key", 1, 3, KEY)
    t.register("events-value", 1, 4, JS, "JSON")
    t.close()
    log = kbatch.Log.create(str(tmp_path / "logs" / "orders-0"))
    b = kbatch.BatchBuilder()
    b.append(1000, avro_value(3, KEY, {"k": "a"}), avro_value(1, V1, {"id": 1, "item": "pen"}))
    b.append(1001, avro_value(3, KEY, {"k": "b"}), avro_value(2, V2, {"id": 2, "item": "ink", "qty": 5}))
    b.append(1002, avro_value(3, KEY, {"k": "c"}), None)
    log.append(b.build(), now_ms=2000)
    log.close()
    log = kbatch.Log.create(str(tmp_path / "logs" / "events-0"))
    b = kbatch.BatchBuilder()
    b.append(1000, None, json_value(4, {"n": 7}))
    log.append(b.build(), now_ms=2000)
    log.close()
    return tmp_path


def cat(*args, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(*args, out=out, err=err, quiet=True, **kw)
    return code, out.getvalue().decode(), err.getvalue()


def test_cat_prints_decoded_values_as_json(cluster):
    code, out, err = cat(str(cluster / "logs" / "orders-0"), serdes=["value=avro", "key=avro"],
                         schemas=str(cluster / "sr" / "_schemas-0"), fmt="%k %s\\n")
    assert code == 0, err
    assert out.splitlines() == ['{"k":"a"} {"id":1,"item":"pen"}', '{"k":"b"} {"id":2,"item":"ink","qty":5}',
                                '{"k":"c"} ']


def test_cat_json_envelope_embeds_the_value(cluster):
    code, out, err = cat(str(cluster / "logs"), serdes=["value=avro"], schemas=str(cluster / "sr" / "_schemas-0"),
                         as_json=True, topic="orders")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[1]["payload"] == {"id": 2, "item": "ink", "qty": 5} and rows[1]["value_schema_id"] == 2
    assert rows[2]["payload"] is None and "value_schema_id" not in rows[2]
    assert rows[0]["key"].startswith("\x00") or isinstance(rows[0]["key"], str)  # the key stays text without -s key=


def test_cat_json_schema_values_and_a_schema_folder(cluster, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "4.json").write_text(json.dumps(JS))
    code, out, err = cat(str(cluster / "logs" / "events-0"), serdes=["value=json"], schemas=str(folder))
    assert code == 0, err
    assert out == '{"n":7}\n'


def test_cat_with_a_registry_url_kcat_spelling(cluster):
    with Registry({1: ("AVRO", json.dumps(V1), [], "orders-value", 1),
                   2: ("AVRO", json.dumps(V2), [], "orders-value", 2)}) as reg:
        code, out, err = cat(str(cluster / "logs" / "orders-0"), serdes=["value=avro"], registry=reg.url, count=2)
    assert code == 0, err
    assert out.splitlines() == ['{"id":1,"item":"pen"}', '{"id":2,"item":"ink","qty":5}']


def test_cat_names_the_offset_and_schema_of_a_value_it_cannot_decode(cluster, tmp_path):
    folder = tmp_path / "only-v1"
    folder.mkdir()
    (folder / "1.avsc").write_text(json.dumps(V1))
    code, out, err = cat(str(cluster / "logs" / "orders-0"), serdes=["value=avro"], schemas=str(folder))
    assert code == 1
    assert "at offset 1" in err and "schema id 2" in err and "no schema with id 2" in err
    assert out.splitlines()[0] == '{"id":1,"item":"pen"}'


def test_cat_usage_errors(cluster):
    from kbatch.cli._common import UsageProblem
    with pytest.raises(UsageProblem, match="needs --schemas"):
        cat(str(cluster / "logs"), serdes=["value=avro"])
    with pytest.raises(UsageProblem, match="not a registry URL"):
        cat(str(cluster / "logs"), serdes=["value=avro"], schemas=str(cluster / "nowhere"))


@pytest.mark.parametrize("target", ["out/", "orders.parquet", "orders.jsonl"])
def test_export_writes_typed_columns(cluster, tmp_path, target):
    to = str(tmp_path / target)
    code = cmd_export(str(cluster / "logs" / "orders-0"), to=to, serdes=["value=avro", "key=avro"],
                      schemas=str(cluster / "sr" / "_schemas-0"), quiet=True, out=io.StringIO(), err=io.StringIO())
    assert code == 0
    if target.endswith(".jsonl"):
        rows = [json.loads(line) for line in open(to)]
        assert rows[0]["value"] == {"id": 1, "item": "pen", "qty": None} and rows[0]["key"] == {"k": "a"}
        return
    import pyarrow.dataset as ds
    table = ds.dataset(to, partitioning="hive" if target.endswith("/") else None).to_table()
    assert table.schema.field("value").type == pa.struct([("id", pa.int64()), ("item", pa.string()), ("qty", pa.int32())])
    # queryable by field; each value as its writer schema wrote it (issue 38): the v1 value has no qty
    assert table.column("value").to_pylist() == [{"id": 1, "item": "pen", "qty": None},
                                                 {"id": 2, "item": "ink", "qty": 5}, None]
    import pyarrow.compute as pc
    assert pc.sum(pc.struct_field(table.column("value"), "qty")).as_py() == 5


def test_cat_protobuf_values_from_a_schema_folder(tmp_path):
    pytest.importorskip("grpc_tools")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from kbatch.values.protobuf import compile_proto
    from support.schemas import protobuf_value

    proto = 'syntax = "proto3";\npackage t;\nmessage Click { string url = 1; int64 at = 2; enum K { A = 0; B = 1; } K k = 3; }\n'
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "5.proto").write_text(proto)
    fds = descriptor_pb2.FileDescriptorSet.FromString(compile_proto({"c.proto": proto}, "c.proto"))
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    Click = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Click"))
    log = kbatch.Log.create(str(tmp_path / "logs" / "clicks-0"))
    b = kbatch.BatchBuilder()
    b.append(1000, None, protobuf_value(5, Click(url="/a", at=12345678901, k=1)))
    log.append(b.build(), now_ms=2000)
    log.close()
    code, out, err = cat(str(tmp_path / "logs"), serdes=["value=protobuf"], schemas=str(tmp_path / "schemas"))
    assert code == 0, err
    # Protobuf's canonical JSON mapping: int64 as a string, enums by name
    assert json.loads(out) == {"url": "/a", "at": "12345678901", "k": "B"}
    code, out, err = cat(str(tmp_path / "logs"), serdes=["avro"], schemas=str(tmp_path / "schemas"))
    assert code == 1 and "schema 5 is PROTOBUF, not AVRO" in err


def test_export_keeps_one_type_per_topic(tmp_path):
    """Each batch is typed by its writer schemas; the topic's type so far is their union by field
    name: a later batch of an older version takes the wider type (null where it has no field), and
    a field whose type changes is refused with the reason (never two types in one topic's files)."""
    from kbatch.cli._schemas import export_typing
    from kbatch.values import SchemaError
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "1.avsc").write_text(json.dumps(V1))
    (folder / "2.avsc").write_text(json.dumps(V2))
    other = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
    (folder / "3.avsc").write_text(json.dumps(other))
    typing_for = export_typing(["value=avro"], str(folder))

    def batch(sid, schema, rec):
        b = kbatch.BatchBuilder()
        b.append(1000, None, avro_value(sid, schema, rec))
        return kbatch.decode_columns(b.build()).to_batches()[0]
    a = typing_for("orders", batch(2, V2, {"id": 2, "item": "b", "qty": 2}))
    assert a.schema.field("value").type == pa.struct([("id", pa.int64()), ("item", pa.string()), ("qty", pa.int32())])
    older = typing_for("orders", batch(1, V1, {"id": 1, "item": "a"}))    # cast to the first type: qty null
    assert older.schema == a.schema and older.column(older.schema.get_field_index("value")).to_pylist() == [
        {"id": 1, "item": "a", "qty": None}]
    with pytest.raises(SchemaError, match="topic orders: value.id is int64 in one writer schema and string"):
        typing_for("orders", batch(3, other, {"id": "x"}))             # a string id does not cast to int64
    assert typing_for("other-topic", batch(1, V1, {"id": 1, "item": "a"})).num_rows == 1   # per topic


def test_export_typing_a_batch_of_nulls_after_a_union_column(tmp_path):
    """A topic's union column, then a batch whose values all did not decode (--on-decode-error
    null) or are Kafka nulls: its column of nulls takes the union type (Arrow casts no null column
    to a union: it was a traceback)."""
    from kbatch.cli._schemas import export_typing
    schema = ["null", "long", "string"]
    (tmp_path / "1.avsc").write_text(json.dumps(schema))
    typing_for = export_typing(["value=avro"], str(tmp_path), None, "null")

    def batch(values):
        b = kbatch.BatchBuilder()
        for v in values:
            b.append(1000, None, v)
        return kbatch.decode_columns(b.build()).to_batches()[0]
    first = typing_for("t", batch([avro_value(1, schema, 5), avro_value(1, schema, "a")]))
    nulls = typing_for("t", batch([b"\x00\x00\x00\x00\x01\xff\xff", None]))
    assert nulls.schema == first.schema
    col = nulls.column(nulls.schema.get_field_index("value"))
    assert col.buffers()[0] is None and col.to_pylist() == [None, None]


@pytest.mark.parametrize("one_file", [False, True])
def test_export_parquet_of_a_union_column_is_a_usage_error(tmp_path, one_file):
    """Parquet has no union type: exporting Avro values whose schema has a union of several
    non-null types to Parquet says so (exit 2, what to do instead) and leaves no file behind,
    never pyarrow's ArrowNotImplementedError traceback; jsonl takes the same values."""
    from kbatch.cli import main

    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": ["null", "long", "string"]}]}
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "1.avsc").write_text(json.dumps(schema))
    part = tmp_path / "log" / "t-0"
    log = kbatch.Log.create(str(part))
    b = kbatch.BatchBuilder()
    for v in (5, "a", None):
        b.append(1000, None, avro_value(1, schema, {"v": v}))
    log.append(b.build())
    log.close()
    out = tmp_path / ("out.parquet" if one_file else "out")
    args = ["export", str(part), "--to", str(out), "-s", "value=avro", "--schemas", str(tmp_path / "schemas")]
    if not one_file:
        args += ["--format", "parquet"]
    import contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(args)
    assert code == 2, err.getvalue()
    assert "the typed column value.v (dense_union" in err.getvalue() and "Parquet has no type" in err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".parquet", ".tmp")]
    jsonl = tmp_path / "out.jsonl"
    assert main(["export", str(part), "--to", str(jsonl), "-s", "value=avro", "--schemas",
                 str(tmp_path / "schemas")]) == 0
    assert [json.loads(line)["value"]["v"] for line in jsonl.read_text().splitlines()] == [5, "a", None]
