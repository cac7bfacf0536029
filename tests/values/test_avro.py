"""Avro values in Confluent framing, written by fastavro (the real encoder), read back as Python
objects and as typed Arrow columns: evolutions, unions, logical types, nested records, errors."""
import datetime
import decimal
import json
import uuid

import pytest

pytest.importorskip("fastavro")
pa = pytest.importorskip("pyarrow")

import kbatch
from kbatch.values import (Avro, PayloadError, TopicSchemas, UnknownSchemaError, WrongMagicError, frame,
                           open_schemas)
from support.schemas import ORDER_V1, ORDER_V2, avro_value, schema_key, schema_value, segment

UTC = datetime.timezone.utc

V1, V2 = ORDER_V1, ORDER_V2
LOGICAL = {"type": "record", "name": "Logical", "fields": [
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "fprice", "type": {"type": "fixed", "name": "F", "size": 8, "logicalType": "decimal", "precision": 10,
                                "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "maybe_ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None}]}
COLLECTIONS = {"type": "record", "name": "C", "fields": [
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "raw", "type": "bytes"}, {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "b", "type": "boolean"},
    {"name": "points", "type": {"type": "array", "items": {"type": "record", "name": "P", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "int"], "default": None}]}}},
    {"name": "either", "type": ["null", "long", "string", "P"], "default": None}]}


@pytest.fixture
def source():
    records = [(0, schema_key("orders-value", 1), schema_value("orders-value", 1, 1, V1)),
               (1, schema_key("orders-value", 2), schema_value("orders-value", 2, 2, V2)),
               (2, schema_key("logical-value", 1), schema_value("logical-value", 1, 3, LOGICAL)),
               (3, schema_key("c-value", 1), schema_value("c-value", 1, 4, COLLECTIONS))]
    return TopicSchemas.from_records(records)


def test_evolution_each_value_with_its_writer_schema(source):
    """Issue 38's rule: without a reader schema each value reads with its writer schema; the column
    is the union of their fields (older ids' fields first), null where a value's schema had none;
    no default is invented and no field dropped."""
    values = [avro_value(1, V1, {"id": 1, "item": "pen", "legacy": "x"}),
              avro_value(2, V2, {"id": 2, "item": "ink", "qty": 3, "note": "fast", "ship": {"city": "Oslo", "zip": "0150"}}),
              None,
              avro_value(2, V2, {"id": 3, "item": "pad", "qty": 2, "note": None, "ship": None})]
    table = kbatch.decode_columns(segment(values), value_schema=Avro(source))
    col = table.column("value")
    assert col.type == pa.struct([("id", pa.int64()), ("item", pa.string()), ("legacy", pa.string()), ("qty", pa.int32()),
                                  ("note", pa.string()), ("ship", pa.struct([("city", pa.string()), ("zip", pa.string())]))])
    assert col.to_pylist() == [
        {"id": 1, "item": "pen", "legacy": "x", "qty": None, "note": None, "ship": None},   # v1: what it wrote
        {"id": 2, "item": "ink", "legacy": None, "qty": 3, "note": "fast", "ship": {"city": "Oslo", "zip": "0150"}},
        None,                                                                # a tombstone stays null
        {"id": 3, "item": "pad", "legacy": None, "qty": 2, "note": None, "ship": None}]
    # the same v1 bytes read the same alone (what cat prints) and beside v2 values
    alone = kbatch.decode_columns(segment(values[:1]), value_schema=Avro(source)).column("value").to_pylist()[0]
    assert alone == {"id": 1, "item": "pen", "legacy": "x"} == Avro(source).decode(values[0])
    # a pinned reader schema resolves every value by Avro's rules: v2 read with v1 takes legacy's default
    pinned = kbatch.decode_columns(segment(values), value_schema=Avro(source, reader_schema=V1)).column("value")
    assert pinned.to_pylist()[1] == {"id": 2, "item": "ink", "legacy": ""}
    # the other columns are decode_columns' own
    assert table.column("offset").to_pylist() == [0, 1, 2, 3]


def test_reader_schema_drops_removed_fields_and_fills_added_ones(source):
    reader = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "vip", "type": "boolean", "default": False}]}
    values = [avro_value(1, V1, {"id": 1, "item": "pen", "legacy": "x"}),
              avro_value(2, V2, {"id": 2, "item": "ink", "qty": 3, "note": None, "ship": None})]
    fmt = Avro(source, reader_schema=json.dumps(reader))
    assert fmt.to_arrow(values).to_pylist() == [{"id": 1, "vip": False}, {"id": 2, "vip": False}]
    assert fmt.decode(values[1]) == {"id": 2, "vip": False}
    # subject=: the subject's newest version is the reader schema
    assert Avro(source, subject="orders-value").arrow_type() == Avro(source).arrow_type(2)


def test_logical_types(source):
    rec = {"day": datetime.date(2024, 2, 29), "t_ms": datetime.time(12, 30, 1, 5000),
           "t_us": datetime.time(1, 2, 3, 456789),
           "ts_ms": datetime.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=UTC),
           "ts_us": datetime.datetime(1969, 7, 20, 20, 17, 40, 1, tzinfo=UTC),
           "local": datetime.datetime(2024, 5, 1, 8, 0),
           "price": decimal.Decimal("-12345.678"), "fprice": decimal.Decimal("99.99"),
           "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
           "maybe_ts": datetime.datetime(2000, 1, 1, tzinfo=UTC)}
    v = avro_value(3, LOGICAL, rec)
    arr = Avro(source).to_arrow([v, None])
    t = arr.type
    assert t.field("day").type == pa.date32() and t.field("t_ms").type == pa.time32("ms")
    assert t.field("t_us").type == pa.time64("us") and t.field("ts_ms").type == pa.timestamp("ms", "UTC")
    assert t.field("ts_us").type == pa.timestamp("us", "UTC") and t.field("local").type == pa.timestamp("ms")
    assert t.field("price").type == pa.decimal128(12, 3) and t.field("fprice").type == pa.decimal128(10, 2)
    assert t.field("id").type == pa.string()
    got = arr.to_pylist()[0]
    assert got["day"] == rec["day"] and got["t_ms"] == datetime.time(12, 30, 1, 5000) and got["t_us"] == rec["t_us"]
    assert got["ts_ms"] == rec["ts_ms"] and got["ts_us"] == rec["ts_us"] and got["local"] == rec["local"]
    assert got["price"] == rec["price"] and got["fprice"] == rec["fprice"]
    assert got["id"] == str(rec["id"]) and got["maybe_ts"] == rec["maybe_ts"]
    assert arr.to_pylist()[1] is None
    # the same value as JSON (what kbatch cat prints)
    js = Avro(source).to_json(v)
    assert js["day"] == "2024-02-29" and js["price"] == "-12345.678" and js["id"] == str(rec["id"])
    assert js["ts_ms"].startswith("2024-01-01T12:00:00.123")


def test_collections_enums_fixed_and_unions(source):
    recs = [{"tags": ["a", "b"], "counts": {"x": 1, "y": 2}, "kind": "B", "raw": b"\x00\xff", "fx": b"abcd",
             "f": 1.5, "d": -2.25, "b": True, "points": [{"x": 1, "y": None}, {"x": 2, "y": 3}], "either": 7},
            {"tags": [], "counts": {}, "kind": "A", "raw": b"", "fx": b"wxyz", "f": 0.0, "d": 0.0, "b": False,
             "points": [], "either": "text"},
            {"tags": ["z"], "counts": {"k": -1}, "kind": "A", "raw": b"r", "fx": b"1234", "f": 2.0, "d": 1e300,
             "b": True, "points": [{"x": 9, "y": 9}], "either": {"x": 5, "y": None}},
            {"tags": ["q"], "counts": {}, "kind": "B", "raw": b"", "fx": b"0000", "f": 1.0, "d": 1.0, "b": True,
             "points": [], "either": None}]
    arr = Avro(source).to_arrow([avro_value(4, COLLECTIONS, r) for r in recs])
    t = arr.type
    assert t.field("tags").type == pa.list_(pa.string()) and t.field("counts").type == pa.map_(pa.string(), pa.int64())
    assert t.field("kind").type == pa.string() and t.field("fx").type == pa.binary(4)
    assert t.field("f").type == pa.float32() and pa.types.is_union(t.field("either").type)
    assert [f.name for f in t.field("either").type] == ["null", "long", "string", "P"]
    got = arr.to_pylist()
    for g, r in zip(got, recs):
        assert g["tags"] == r["tags"] and dict(g["counts"]) == r["counts"] and g["kind"] == r["kind"]
        assert g["raw"] == r["raw"] and g["fx"] == r["fx"] and g["f"] == r["f"] and g["d"] == r["d"]
        assert g["points"] == r["points"] and g["either"] == r["either"]


def test_errors_name_the_offset_and_the_schema_id(source):
    good = avro_value(1, V1, {"id": 1, "item": "pen", "legacy": ""})
    data = segment([good, b"\x01\x00\x00\x00\x01xx"])
    with pytest.raises(WrongMagicError, match=r"value at offset 1: magic byte 1, expected 0") as e:
        kbatch.decode_columns(data, value_schema=Avro(source))
    assert e.value.offset == 1
    with pytest.raises(UnknownSchemaError, match=r"value at offset 1 \(schema id 42\): no schema with id 42"):
        kbatch.decode_columns(segment([good, frame(42, b"")]), value_schema=Avro(source))
    with pytest.raises(PayloadError, match=r"value at offset 2 \(schema id 1\): the Avro payload does not decode"):
        kbatch.decode_columns(segment([good, good, frame(1, b"\x02")]), value_schema=Avro(source))
    with pytest.raises(WrongMagicError, match="key at offset 0"):
        kbatch.decode_columns(segment([good], keys=[b"plain"]), key_schema=Avro(source))
    with pytest.raises(PayloadError, match=r"offset 7 \(schema id 1\)"):
        Avro(source).decode(frame(1, b""), offset=7)


def test_keys_and_values_both(source):
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "string"}]}
    src = TopicSchemas.from_records([(0, schema_key("o-key", 1), schema_value("o-key", 1, 9, key_schema)),
                                     (1, schema_key("o-value", 1), schema_value("o-value", 1, 1, V1))])
    data = segment([avro_value(1, V1, {"id": 5, "item": "x", "legacy": ""})], keys=[avro_value(9, key_schema, {"k": "a"})])
    t = kbatch.decode_columns(data, key_schema=Avro(src), value_schema=Avro(src))
    assert t.column("key").to_pylist() == [{"k": "a"}] and t.column("value").to_pylist()[0]["id"] == 5


def _batches(values, per_batch=4, keys=None):
    out = b""
    for lo in range(0, len(values), per_batch):
        b = kbatch.BatchBuilder(base_offset=lo)
        for j, v in enumerate(values[lo:lo + per_batch]):
            b.append(1_700_000_000_000 + lo + j, None if keys is None else keys[lo + j], v)
        out += b.build()
    return out


def test_iter_record_batches_types_every_chunk_as_decode_columns(source):
    """iter_record_batches(value_schema=, key_schema=): chunk by chunk, one type for every chunk; with
    a reader schema (the subject's newest) the rows are decode_columns'."""
    from kbatch.columns.decode import iter_record_batches

    values = [avro_value(1, V1, {"id": i, "item": f"i{i}", "legacy": "L"}) for i in range(10)]
    values += [avro_value(2, V2, {"id": i, "item": "n", "qty": i, "note": None, "ship": {"city": "X", "zip": None}})
               for i in range(10, 21)] + [None]
    data = _batches(values)
    fmt = Avro(source, subject="orders-value")
    gen = iter_record_batches(data, "orders", 0, value_schema=fmt, chunk_rows=4, use_threads=False)
    chunks = []
    while True:
        try:
            chunks.append(next(gen))
        except StopIteration as stop:
            assert stop.value == len(data)  # the binary iterator's answer: where complete batches end
            break
    assert len(chunks) > 3 and len({c.schema for c in chunks}) == 1
    whole = kbatch.decode_columns(data, "orders", 0, value_schema=fmt)
    assert pa.Table.from_batches(chunks).column("value").to_pylist() == whole.column("value").to_pylist()
    # without a reader schema: the first chunk's type (v1's) for every chunk, later values cast to it
    chunks = list(iter_record_batches(data, value_schema=Avro(source), chunk_rows=4, use_threads=False))
    first = chunks[0].schema.field("value").type
    assert first.names == ["id", "item", "legacy"] and all(c.schema.field("value").type == first for c in chunks)
    assert chunks[-1].column("value").to_pylist()[-2] == {"id": 20, "item": "n", "legacy": None}
    # keys too, and a bad value names its offset
    bad = _batches([avro_value(1, V1, {"id": 1, "item": "a", "legacy": ""}), frame(1, b"\xff")])
    with pytest.raises(PayloadError) as e:
        list(iter_record_batches(bad, value_schema=Avro(source), chunk_rows=1))
    assert e.value.offset == 1


def test_folder_source_end_to_end(tmp_path):
    (tmp_path / "2.avsc").write_text(json.dumps(V2))
    data = segment([avro_value(2, V2, {"id": 1, "item": "a", "qty": 1, "note": None, "ship": None})])
    t = kbatch.decode_columns(data, value_schema=Avro(open_schemas(tmp_path)))
    assert t.column("value").to_pylist()[0]["item"] == "a"


@pytest.mark.parametrize("n", [0, 1, 3000])
def test_many_values_and_none(source, n):
    values = [avro_value(1, V1, {"id": i, "item": f"i{i}", "legacy": ""}) if i % 5 else None for i in range(n)]
    arr = Avro(source).to_arrow(values)
    assert arr.to_pylist() == [None if v is None else {"id": i, "item": f"i{i}", "legacy": ""}
                               for i, v in enumerate(values)]


from kbatch.values.avro_program import K as _K  # None: a pure install or KBATCH_BACKEND=python

KERNEL = _K is not None


def scenarios():
    v1 = [avro_value(1, V1, {"id": i, "item": f"i{i}", "legacy": "old"}) for i in range(3)]
    v2 = [avro_value(2, V2, {"id": 9, "item": "x", "qty": 4, "note": "n", "ship": {"city": "Oslo", "zip": None}}),
          avro_value(2, V2, {"id": 10, "item": "y", "qty": 1, "note": None, "ship": None})]
    rec = {"day": datetime.date(2024, 2, 29), "t_ms": datetime.time(12, 30, 1, 5000),
           "t_us": datetime.time(1, 2, 3, 456789), "ts_ms": datetime.datetime(2024, 1, 1, tzinfo=UTC),
           "ts_us": datetime.datetime(1969, 7, 20, 20, 17, 40, 1, tzinfo=UTC), "local": datetime.datetime(2024, 5, 1),
           "price": decimal.Decimal("-12345.678"), "fprice": decimal.Decimal("-0.01"), "id": uuid.uuid4(),
           "maybe_ts": None}
    reader = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "item", "type": "bytes"}, {"name": "id", "type": "double"},
        {"name": "vip", "type": "boolean", "default": True}, {"name": "tags", "type": {"type": "array", "items": "int"},
                                                             "default": []},
        {"name": "n", "type": ["null", "int"], "default": None}, {"name": "s", "type": "string", "default": "d"}]}
    coll = {"tags": ["a"], "counts": {"x": 1}, "kind": "B", "raw": b"\x00", "fx": b"abcd", "f": 1.5, "d": 2.0,
            "b": True, "points": [{"x": 1, "y": None}], "either": None}
    return {"evolution": (v1 + [None] + v2, None, True),
            "reader schema with promotions and defaults": (v1 + v2, reader, True),
            "logical types": ([avro_value(3, LOGICAL, rec), None], None, True),
            "a union of several types (fastavro path)": ([avro_value(4, COLLECTIONS, coll)], None, False)}


@pytest.mark.parametrize("name", list(scenarios()))
def test_kernel_and_fastavro_paths_agree(source, name):
    values, reader, kernel_takes_it = scenarios()[name]
    fmt = Avro(source, reader_schema=reader)
    column = pa.array(values, pa.binary())
    got = fmt.decode_arrow(column, None, "value")
    slow = fmt.to_arrow(values)
    if not KERNEL or not kernel_takes_it:
        assert got is None
        return
    assert got is not None and got.type == slow.type
    assert got.equals(slow), (got.to_pylist(), slow.to_pylist())
    sliced = pa.array(values[:1] + values, pa.binary()).slice(1)             # a column with an offset
    if reader is not None or name != "evolution":  # several writer schemas: decode_column takes their union
        assert fmt.decode_column(sliced, None).equals(slow)
    else:
        assert fmt.decode_column(sliced, None).equals(fmt.decode_column(column, None))


def test_kernel_falls_back_to_name_the_bad_value(source):
    good = avro_value(1, V1, {"id": 1, "item": "pen", "legacy": ""})
    fmt = Avro(source)
    bad = frame(1, b"\x02\x08ab")   # id 1, then a string that claims 4 bytes and has 2
    assert fmt.decode_arrow(pa.array([good, bad], pa.binary()), None, "value") is None
    with pytest.raises(PayloadError, match=r"offset 1 \(schema id 1\)"):
        kbatch.decode_columns(segment([good, bad]), value_schema=fmt)
