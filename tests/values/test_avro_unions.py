"""Avro unions of several types as Arrow dense unions: the branch is the one the writer wrote (its
index on the wire), not guessed from the decoded value; with a pinned reader schema, the first
branch that holds the value exactly; null rows of a union column (Kafka nulls, values nulled by
on_error) built as Arrow's unions want them (no validity bitmap). Both paths: the compiled
kernel installed (it declines these unions today) and KBATCH_BACKEND=python's (no kernel)."""
import datetime
import io
import json
import struct
import subprocess
import sys
import os

import pytest

pa = pytest.importorskip("pyarrow")
fastavro = pytest.importorskip("fastavro")

import kbatch  # noqa: E402
from kbatch.values import Avro, PayloadError, TopicSchemas, frame  # noqa: E402
from kbatch.values import avro_program  # noqa: E402
from kbatch.values.rules import decode_column  # noqa: E402
from support.schemas import schema_key, schema_value, segment  # noqa: E402

R = {"type": "record", "name": "R", "fields": [{"name": "f0", "type": {"type": "int", "logicalType": "date"}}]}
MAP = {"type": "map", "values": "int"}
E = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
T = {"type": "record", "name": "T", "fields": [
    {"name": "x", "type": ["float", "double"]},
    {"name": "y", "type": ["int", "long"]},
    {"name": "m", "type": [MAP, R]},          # a record read as the map listed first
    {"name": "r", "type": ["R", MAP]},        # a map read as the record listed first (its int a date)
    {"name": "e", "type": [E, "string"]},
    {"name": "n", "type": ["null", "bytes", {"type": "fixed", "name": "F4", "size": 4}]}]}
TOP = ["null", "long", "string"]


def branch(index: int, schema, value) -> bytes:
    """One union value as a writer that picked branch `index` writes it: the index, then the value."""
    b = io.BytesIO()
    fastavro.schemaless_writer(b, fastavro.parse_schema(schema, named_schemas={"R": fastavro.parse_schema(R)})
                               if schema == "R" else fastavro.parse_schema(schema), value)
    z = index << 1
    return bytes([z]) + b.getvalue()


def fastavro_bytes(schema, value) -> bytes:
    b = io.BytesIO()
    fastavro.schemaless_writer(b, fastavro.parse_schema(schema), value)
    return b.getvalue()


def row(x, y, m, r, e, n) -> bytes:
    """A T value, each field's branch chosen: (index, value) per field."""
    return frame(1, b"".join([branch(x[0], ["float", "double"][x[0]], x[1]),
                              branch(y[0], ["int", "long"][y[0]], y[1]),
                              branch(m[0], [MAP, R][m[0]], m[1]),
                              branch(r[0], [R, MAP][r[0]], r[1]),
                              branch(e[0], [E, "string"][e[0]], e[1]),
                              branch(n[0], ["null", "bytes", {"type": "fixed", "name": "F4", "size": 4}][n[0]], n[1])]))


ROWS = [row((1, 0.1), (1, 5), (1, {"f0": 7}), (1, {"f0": 5}), (1, "A"), (2, b"abcd")),
        row((0, 0.5), (0, 5), (0, {"f0": 7}), (0, {"f0": 5}), (0, "A"), (1, b"abcd")),
        row((1, 1e300), (1, 2**40), (0, {}), (1, {}), (0, "B"), (0, None))]
D = datetime.date


@pytest.fixture(params=["kernel", "python"])
def path(request, monkeypatch):
    """The compiled kernel installed (it declines a union of several types: fastavro's path
    decodes), or not (KBATCH_BACKEND=python)."""
    if request.param == "python":
        monkeypatch.setattr(avro_program, "K", None)
    elif avro_program.K is None:
        pytest.skip("the compiled Avro kernel is not built")
    return request.param


def source(*schemas):
    return TopicSchemas.from_records([(i, schema_key(f"s{i}-value", 1), schema_value(f"s{i}-value", 1, i + 1, s))
                                      for i, s in enumerate(schemas)])


def test_the_branch_is_the_writers(path):
    """A double 0.1 stays in the double branch (not rounded through float32), a record written to
    the branch after a map stays a record (its int a date), a map written after a record stays a
    map (its int not made a date), an int of a long branch stays long."""
    col = decode_column(Avro(source(T)), pa.array(ROWS, pa.binary()), pa.array([0, 1, 2], pa.int64()), "value")
    assert col.to_pylist() == [
        {"x": 0.1, "y": 5, "m": {"f0": D(1970, 1, 8)}, "r": [("f0", 5)], "e": "A", "n": b"abcd"},
        {"x": 0.5, "y": 5, "m": [("f0", 7)], "r": {"f0": D(1970, 1, 6)}, "e": "A", "n": b"abcd"},
        {"x": 1e300, "y": 2**40, "m": [], "r": [], "e": "B", "n": None}]
    for name, codes in {"x": [1, 0, 1], "y": [1, 0, 1], "m": [1, 0, 0], "r": [1, 0, 1], "e": [1, 0, 0],
                        "n": [2, 1, 0]}.items():
        assert col.field(name).type_codes.to_pylist() == codes, name
    # read_topic's and decode_columns' way in, too
    table = kbatch.decode_columns(segment(ROWS), value_schema=Avro(source(T)))
    assert table.column("value").to_pylist() == col.to_pylist()


def test_a_pinned_reader_schema_takes_the_first_branch_that_holds_the_value_exactly(path):
    """Resolved to a reader schema, fastavro does not say which branch it read: the value goes to
    the first branch that holds it unchanged (docs/schemas.md, "Unions"). The value is never
    rounded nor reinterpreted; the tag can be an earlier branch that holds it exactly."""
    fmt = Avro(source(T), reader_schema=T)
    rows = [row((1, 0.1), (1, 5), (0, {}), (1, {}), (1, "A"), (2, b"abcd")),
            row((0, 0.5), (0, 5), (0, {"a": 1}), (1, {}), (0, "A"), (1, b"abcd")), ROWS[2]]
    col = fmt.to_arrow(rows, [0, 1, 2])
    x = col.field("x")
    assert x.to_pylist() == [0.1, 0.5, 1e300]              # 0.1 is no float32: double
    assert x.type_codes.to_pylist() == [1, 0, 1]
    assert col.field("y").to_pylist() == [5, 5, 2**40] and col.field("y").type_codes.to_pylist() == [0, 0, 1]
    assert col.field("e").to_pylist() == ["A", "A", "B"] and col.field("m").to_pylist() == [[], [("a", 1)], []]
    assert col.field("n").type_codes.to_pylist() == [1, 1, 0]   # bytes before fixed: the value unchanged


def test_a_value_no_branch_holds_exactly_is_the_records_error_not_arrows(path):
    """A long promoted by the reader schema to float (in a union of several types) that float32
    does not hold: PayloadError naming the record, never a silently rounded value or ArrowInvalid."""
    writer = {"type": "record", "name": "T", "fields": [{"name": "u", "type": {"type": "map", "values": "long"}}]}
    reader = {"type": "record", "name": "T", "fields": [{"name": "u", "type": [{"type": "map", "values": "float"},
                                                                            "string"]}]}
    fmt = Avro(source(writer), reader_schema=reader)
    ok = frame(1, fastavro_bytes(writer, {"u": {"a": 2**40}}))
    vals = [ok, None, frame(1, fastavro_bytes(writer, {"u": {"a": 2**40 + 1}}))]
    assert fmt.to_arrow(vals[:2], [7, 8]).to_pylist() == [{"u": [("a", 2.0**40)]}, None]
    with pytest.raises(PayloadError, match=r"value at offset 9 \(schema id 1\): .*fits no branch of the union"):
        fmt.to_arrow(vals, [7, 8, 9])
    with pytest.raises(PayloadError, match="at offset 9"):
        decode_column(fmt, pa.array(vals, pa.binary()), pa.array([7, 8, 9], pa.int64()), "value")
    from kbatch.values.avro import _union_array
    from kbatch.values.avro_types import AvroTypes

    node = AvroTypes().node(reader).fields[0][1]
    with pytest.raises(PayloadError, match="fits no branch of the union"):
        _union_array([{"a": "not a long"}], node)
    assert _union_array([{"a": 3}, "b"], node).to_pylist() == [[("a", 3)], "b"]


def _null_rows_ok(arr):
    """A union column (or a struct's union fields) without a validity bitmap, usable by Arrow."""
    unions = [arr] if pa.types.is_union(arr.type) else [arr.field(i) for i in range(arr.type.num_fields)
                                                         if pa.types.is_union(arr.type.field(i).type)]
    assert unions
    for u in unions:
        assert u.buffers()[0] is None
        u.validate(full=True)
        u.to_pylist()
    return arr.to_pylist()


@pytest.mark.parametrize("schema,good", [(TOP, [frame(1, branch(1, "long", 5)), frame(1, branch(2, "string", "a"))]),
                                         (T, ROWS[:2])])
def test_on_error_nulls_rows_of_a_union_column(path, schema, good):
    bad = [b"\x00\x00\x00\x00\x01\xff\xff", b"junk", None]
    values = [good[0], bad[0], good[1], bad[1], bad[2]]
    errors = []
    col = decode_column(Avro(source(schema)), pa.array(values, pa.binary()), pa.array(range(5), pa.int64()), "value",
                        lambda row, e: errors.append(row))
    assert errors == [1, 3]
    rows = _null_rows_ok(col)
    assert rows[1] is None and rows[3] is None and rows[4] is None and rows[0] is not None
    if pa.types.is_union(col.type):
        assert rows == [5, None, "a", None, None]
    # the rows nulled in a part of their own, then the column's type: every row a null
    col = decode_column(Avro(source(schema)), pa.array([good[0], bad[0]], pa.binary()), None, "value",
                        lambda row, e: None)
    _null_rows_ok(col)
    # two writer schemas: the parts put together by the rules (a Kafka null, an id of its own)
    src = source(schema, schema)
    other = frame(2, good[0][5:])
    col = decode_column(Avro(src), pa.array([good[0], other, bad[0], None], pa.binary()), None, "value",
                        lambda row, e: None)
    assert _null_rows_ok(col)[2:] == [None, None]


def test_a_kafka_null_in_a_union_without_a_null_branch(path):
    s = ["long", "string"]
    col = Avro(source(s)).to_arrow([frame(1, branch(1, "string", "a")), None])
    assert _null_rows_ok(col) == ["a", None]


EXPORT = r'''
import io, sys
import kbatch
from kbatch.cli.export import cmd_export
from kbatch.values import frame
from support.schemas import SchemasTopic
tmp, schema = sys.argv[1], __import__("json").loads(sys.argv[2])
t = SchemasTopic(tmp + "/sr/_schemas-0"); t.register("t-value", 1, 1, schema); t.close()
log = kbatch.Log.create(tmp + "/logs/t-0"); b = kbatch.BatchBuilder()
for i, v in enumerate(bytes.fromhex(h) if h else None for h in sys.argv[3].split(",")):
    b.append(1000 + i, None, v)
log.append(b.build(), now_ms=2000); log.close()
err = io.StringIO()
code = cmd_export(tmp + "/logs/t-0", to=tmp + "/o.jsonl", serdes=["value=avro"], schemas=tmp + "/sr/_schemas-0",
                  quiet=True, out=io.StringIO(), err=err, on_decode_error="null")
sys.stdout.write(str(code) + "\n" + err.getvalue())
'''


@pytest.mark.parametrize("schema,good", [(TOP, [frame(1, branch(1, "long", 5)), frame(1, branch(2, "string", "a"))]),
                                         (T, ROWS[:2])])
def test_export_on_decode_error_null_with_a_union(tmp_path, schema, good):
    """In a process of its own: an abort in Arrow is a failed test, not a dead pytest."""
    values = [good[0], b"\x00\x00\x00\x00\x01\xff\xff", good[1], b"", None]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", EXPORT, str(tmp_path), json.dumps(schema),
                        ",".join("" if v is None else (v.hex() or "00") for v in values)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    code, _, msg = p.stdout.partition("\n")
    assert code == "0" and "2 record(s) did not decode" in msg, p.stdout
    rows = [json.loads(line)["value"] for line in open(tmp_path / "o.jsonl")]
    assert rows[1] is None and rows[3] is None and rows[4] is None
    if schema == TOP:
        assert rows[0] == 5 and rows[2] == "a"
    else:
        assert rows[0]["x"] == 0.1 and rows[1] is None


def test_a_pinned_reader_schema_refuses_a_value_two_branches_read_differently(path):
    """A map {"f0": 5} resolved into [R{f0: date}, map<int>]: R would make the 5 a date. The
    writer's branch is not known once fastavro resolved it: the record's error, not a guess; the
    same bytes read without the pinned reader schema give the map, as written."""
    pinned = Avro(source(T), reader_schema=T)
    ambiguous = row((0, 0.5), (0, 5), (0, {}), (1, {"f0": 5}), (0, "A"), (0, None))
    with pytest.raises(PayloadError, match=r"at offset 4 .*fits branches R and map of the union"):
        decode_column(pinned, pa.array([ROWS[2], ambiguous], pa.binary()), pa.array([3, 4], pa.int64()), "value")
    errors = []
    col = decode_column(pinned, pa.array([ROWS[2], ambiguous], pa.binary()), pa.array([3, 4], pa.int64()), "value",
                        lambda r, e: errors.append(r))
    assert errors == [1] and col.to_pylist()[1] is None and _null_rows_ok(col)[0]["x"] == 1e300
    own = decode_column(Avro(source(T)), pa.array([ambiguous], pa.binary()), None, "value")
    assert own.to_pylist()[0]["r"] == [("f0", 5)]


def test_a_pinned_reader_schema_takes_a_double_that_float32_holds_without_error(path):
    """float and double read 0.10000000149011612 (float32's 0.1) alike: tagged float, same value."""
    v = struct.unpack("<f", struct.pack("<f", 0.1))[0]
    rows = [row((1, v), (1, 2**31), (0, {}), (1, {}), (1, "C"), (0, None))]
    col = Avro(source(T), reader_schema=T).to_arrow(rows)
    assert col.field("x").to_pylist() == [v] and col.field("x").type_codes.to_pylist() == [0]
    assert col.field("y").to_pylist() == [2**31] and col.field("y").type_codes.to_pylist() == [1]
    assert col.field("e").to_pylist() == ["C"] and col.field("e").type_codes.to_pylist() == [1]


def test_a_union_in_a_referenced_schema_and_a_union_of_named_types(path):
    """A writer schema with references (decoded one value at a time: no container header): the
    referenced record's union, and the main schema's union of it and a map, keep the writer's
    branches."""
    ref = {"type": "record", "name": "Amount", "namespace": "m", "fields": [{"name": "v", "type": ["float", "double"]}]}
    main = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "a", "type": [{"type": "map", "values": "double"}, "m.Amount"]}]}
    src = TopicSchemas.from_records([
        (0, schema_key("amount", 1), schema_value("amount", 1, 1, ref)),
        (1, schema_key("o-value", 1), schema_value("o-value", 1, 2, main,
                                                   references=[{"name": "m.Amount", "subject": "amount", "version": 1}]))])
    amount = b"\x02" + b"\x02" + struct.pack("<d", 0.1)     # a: branch 1 (Amount), v: branch 1 (double)
    a_map = b"\x00" + b"\x02" + b"\x02v" + struct.pack("<d", 0.1) + b"\x00"  # a: the map {"v": 0.1}
    col = decode_column(Avro(src), pa.array([frame(2, amount), frame(2, a_map), None], pa.binary()), None, "value")
    assert col.to_pylist() == [{"a": {"v": 0.1}}, {"a": [("v", 0.1)]}, None]
    assert col.field("a").type_codes.to_pylist() == [1, 0, 0]
    assert col.field("a").field(1).field("v").type_codes.to_pylist() == [1]
