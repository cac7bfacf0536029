"""Issue 38: one reader-schema rule for cat, decode_columns and export (kbatch.values.rules), and
on_decode_error for values that do not decode."""
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("fastavro")

import kbatch  # noqa: E402
from kbatch.values import (Avro, PayloadError, SchemaSourceError, TopicSchemas, UnknownSchemaError,  # noqa: E402
                           WrongMagicError, frame, value_format)
from kbatch.values.rules import WriterSchemasConflict, merge_types, parse_kind  # noqa: E402
from support.schemas import ORDER_V1, ORDER_V2, avro_value, schema_key, schema_value, segment  # noqa: E402


@pytest.fixture
def source():
    return TopicSchemas.from_records([(0, schema_key("orders-value", 1), schema_value("orders-value", 1, 1, ORDER_V1)),
                                      (1, schema_key("orders-value", 2), schema_value("orders-value", 2, 2, ORDER_V2))])


V1_BYTES = avro_value(1, ORDER_V1, {"id": 1, "item": "pen", "legacy": "x"})
V2_BYTES = avro_value(2, ORDER_V2, {"id": 2, "item": "ink", "qty": 3, "note": None, "ship": None})


def test_the_same_v1_bytes_read_the_same_alone_beside_v2_and_in_cat(source):
    """Before issue 38 the v1 value read {id, item, legacy} alone (its own schema, what cat prints)
    and {id, item, qty: 1, ...} beside a v2 value (resolved to the newest id in the column)."""
    alone = kbatch.decode_columns(segment([V1_BYTES]), value_schema=Avro(source)).column("value").to_pylist()[0]
    mixed = kbatch.decode_columns(segment([V1_BYTES, V2_BYTES]), value_schema=Avro(source)).column("value")
    printed = Avro(source).to_json(V1_BYTES)
    fields = {k: v for k, v in mixed.to_pylist()[0].items() if v is not None}
    assert alone == printed == fields == {"id": 1, "item": "pen", "legacy": "x"}
    assert mixed.to_pylist()[1]["legacy"] is None and mixed.to_pylist()[1]["qty"] == 3
    # the order of the rows does not change the column type (schema-id order: older fields first)
    other = kbatch.decode_columns(segment([V2_BYTES, V1_BYTES]), value_schema=Avro(source)).column("value")
    assert other.type == mixed.type


def test_a_pinned_subject_version_resolves_every_value_to_it(source):
    fmt = value_format("avro", source, subject="orders-value", version=2)
    col = kbatch.decode_columns(segment([V1_BYTES, V2_BYTES]), value_schema=fmt).column("value")
    assert col.to_pylist()[0] == {"id": 1, "item": "pen", "qty": 1, "note": None, "ship": None}   # v2's defaults
    fmt1 = value_format("avro", source, subject="orders-value", version=1)
    assert kbatch.decode_columns(segment([V2_BYTES]), value_schema=fmt1).column("value").to_pylist() == [
        {"id": 2, "item": "ink", "legacy": ""}]
    with pytest.raises(SchemaSourceError, match="no subject 'orders-value' version 9"):
        value_format("avro", source, subject="orders-value", version=9)
    assert parse_kind("avro:orders-value@3") == ("avro", ("orders-value", 3))
    assert parse_kind("avro:orders-value@latest") == ("avro", ("orders-value", None))
    with pytest.raises(ValueError, match="a number >= 1"):
        parse_kind("avro:orders-value@x")


def test_writer_schemas_whose_field_types_differ_are_refused_with_avros_promotions_allowed():
    assert merge_types(pa.int32(), pa.int64(), "v.n") == pa.int64()
    assert merge_types(pa.float32(), pa.float64(), "v.n") == pa.float64()
    with pytest.raises(WriterSchemasConflict, match="v.n is int64 in one writer schema and string in another"):
        merge_types(pa.struct([("n", pa.int64())]), pa.struct([("n", pa.string())]), "v")
    a = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}
    b = {"type": "record", "name": "R", "fields": [{"name": "n", "type": "string"}]}
    src = TopicSchemas.from_records([(0, schema_key("s", 1), schema_value("s", 1, 1, a)),
                                     (1, schema_key("s", 2), schema_value("s", 2, 2, b))])
    with pytest.raises(WriterSchemasConflict, match="value.n is int32 in one writer schema and string"):
        kbatch.decode_columns(segment([avro_value(1, a, {"n": 1}), avro_value(2, b, {"n": "x"})]),
                              value_schema=Avro(src))


def test_the_first_bad_row_is_raised_whatever_its_schema_id(source):
    bad = frame(1, b"\x02\x08ab")   # id 1, then a string that claims 4 bytes and has 2
    data = segment([V2_BYTES, V2_BYTES, b"not framed", bad, frame(77, b"\x00")])
    with pytest.raises(WrongMagicError) as e:
        kbatch.decode_columns(data, value_schema=Avro(source))
    assert e.value.offset == 2


def test_on_decode_error_null_and_a_callable(source):
    """One poison record among good ones: fail raises (the default), null and a callable keep the
    others, the poison rows null; the errors name each record."""
    bad = frame(1, b"\x02\x08ab")
    values = [V1_BYTES, b"plain text", V2_BYTES, bad, None, frame(99, b"\x00"), V2_BYTES]
    with pytest.raises(WrongMagicError):
        kbatch.decode_columns(segment(values), value_schema=Avro(source))
    col = kbatch.decode_columns(segment(values), value_schema=Avro(source), on_decode_error="null").column("value")
    got = col.to_pylist()
    assert [v is None for v in got] == [False, True, False, True, True, True, False]
    assert got[0]["legacy"] == "x" and got[2]["qty"] == 3
    seen = []
    table = kbatch.decode_columns(segment(values), value_schema=Avro(source),
                                  on_decode_error=lambda row, error: seen.append((row, error)))
    assert table.column("value").to_pylist() == got
    assert [(row, type(e), e.offset, e.schema_id) for row, e in seen] == [
        (1, WrongMagicError, 1, None), (3, PayloadError, 3, 1), (5, UnknownSchemaError, 5, 99)]
    # a stream of chunks: the row index counts across chunks
    seen.clear()
    from kbatch.columns.decode import iter_record_batches

    rbs = list(iter_record_batches(segment(values), value_schema=Avro(source), chunk_rows=1,
                                   on_decode_error=lambda row, error: seen.append(row)))
    assert sum(rb.num_rows for rb in rbs) == len(values) and sorted(seen) == [1, 3, 5]
    with pytest.raises(ValueError, match="on_decode_error must be"):
        kbatch.decode_columns(segment(values), value_schema=Avro(source), on_decode_error="skip")


def test_an_unavailable_source_is_never_a_null_value():
    """A registry that cannot answer is the run's failure, not the record's: on_decode_error does
    not turn it into nulls."""
    import socket

    from kbatch.values import RegistrySchemas
    from kbatch.values.sources import SchemaSourceUnavailable

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    fmt = Avro(RegistrySchemas(f"http://127.0.0.1:{port}", timeout=5))
    with pytest.raises(SchemaSourceUnavailable):
        kbatch.decode_columns(segment([V1_BYTES, V2_BYTES]), value_schema=fmt, on_decode_error="null")
    assert fmt.source.requests == 1


def test_cat_prints_each_value_with_its_writer_schema_unless_pinned(tmp_path):
    import io
    import json

    pytest.importorskip("typer")
    from kbatch.cli._common import UsageProblem
    from kbatch.cli.cat import cmd_cat
    from support.schemas import SchemasTopic

    sr = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    sr.register("orders-value", 1, 1, ORDER_V1)
    sr.register("orders-value", 2, 2, ORDER_V2)
    sr.close()
    log = kbatch.Log.create(str(tmp_path / "logs" / "orders-0"))
    log.append(segment([V1_BYTES, V2_BYTES]))
    log.close()

    def cat(*serdes):
        out, err = io.BytesIO(), io.StringIO()
        code = cmd_cat(str(tmp_path / "logs"), serdes=list(serdes), schemas=str(tmp_path / "sr" / "_schemas-0"),
                       out=out, err=err, quiet=True)
        assert code == 0, err.getvalue()
        return [json.loads(line) for line in out.getvalue().splitlines()]
    assert cat("value=avro")[0] == {"id": 1, "item": "pen", "legacy": "x"}
    assert cat("value=avro:orders-value@2")[0] == {"id": 1, "item": "pen", "qty": 1, "note": None, "ship": None}
    assert cat("value=avro:orders-value@latest")[1]["qty"] == 3
    with pytest.raises(UsageProblem, match="no subject 'orders-value' version 7"):
        cat("value=avro:orders-value@7")
    with pytest.raises(UsageProblem, match="a number >= 1"):
        cat("value=avro:orders-value@v2")


def test_an_id_whose_schema_does_not_parse_or_is_another_kind_is_its_records_error(source):
    records = [(0, schema_key("orders-value", 1), schema_value("orders-value", 1, 1, ORDER_V1)),
               (1, schema_key("clicks-value", 1), schema_value("clicks-value", 1, 3, 'syntax = "proto3";', "PROTOBUF")),
               (2, schema_key("bad-value", 1), schema_value("bad-value", 1, 4, "{not json"))]
    src = TopicSchemas.from_records(records)
    values = [V1_BYTES, frame(3, b"\x00\x02"), frame(4, b"\x00"), V1_BYTES]
    with pytest.raises(SchemaSourceError, match="schema 3 is PROTOBUF, not AVRO"):
        kbatch.decode_columns(segment(values), value_schema=Avro(src))
    seen = []
    col = kbatch.decode_columns(segment(values), value_schema=Avro(src),
                                on_decode_error=lambda row, e: seen.append((row, e.schema_id))).column("value")
    assert [v is None for v in col.to_pylist()] == [False, True, True, False] and seen == [(1, 3), (2, 4)]
