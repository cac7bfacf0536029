"""The compiled Protobuf plan (kbatch.values._protobuf_kernel, issue 42) against its pure twin
(protobuf_program.decode_py) and against upb a message at a time (values.protobuf's per-message
path, the answers before the plan): over generated .proto schemas (proto2 and proto3, every scalar
type, enums open and closed, nested messages, repeated fields packed and not, oneofs, optional
fields, wrappers, Timestamp) and generated wire bytes (fields in any order, repeated, packed or not,
of the wrong wire type, unknown, truncated, strings not UTF-8, Timestamps past datetime). Kernel
and twin give the same answer or both decline (None); an answer equals upb's, nulls included; a
value upb refuses is declined. Values from the real encoder are never declined."""
import math
import os

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.values import PayloadError, Protobuf, TopicSchemas, frame
from kbatch.values import protobuf_program as P
from support.schemas import schema_key, schema_value, segment

SCALARS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64",
           "float", "double", "bool", "string", "bytes"]
WRAPPERS = ["DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue",
            "StringValue", "BytesValue"]
EXAMPLES = int(os.environ.get("KBATCH_PROTOBUF_PLAN_EXAMPLES", "25"))


@st.composite
def proto_texts(draw):
    """A .proto text: message M (index 0) and the messages it uses (each only later ones: no
    recursion), enums E3 (open, proto3) / E2 (closed, proto2)."""
    syntax = draw(st.sampled_from(["proto2", "proto3"]))
    nmsgs = draw(st.integers(1, 3))
    lines = [f'syntax = "{syntax}";', 'import "google/protobuf/timestamp.proto";',
             'import "google/protobuf/wrappers.proto";']
    if syntax == "proto3":
        lines.append("enum E { E_Z = 0; E_A = 1; E_B = -3; E_C = 7; E_ALIAS = 7 [deprecated = true]; }")
        lines[-1] = "enum E { option allow_alias = true; E_Z = 0; E_A = 1; E_B = -3; E_C = 7; E_ALIAS = 7; }"
    else:
        lines.append("enum E { E_Z = 0; E_A = 1; E_B = -3; E_C = 7; }")
    for m in range(nmsgs):
        name = "M" if m == 0 else f"N{m}"
        body = []
        oneof = []
        for i in range(draw(st.integers(1, 6))):
            number = draw(st.sampled_from([1, 2, 3, 5, 15, 16, 100, 2047, 5000, 536870911])) if i == 0 else None
            number = number or 200 + i * 7 + m
            kinds = SCALARS + ["E", "google.protobuf.Timestamp"] + [f"google.protobuf.{w}" for w in WRAPPERS]
            if m + 1 < nmsgs:
                kinds.append(f"N{draw(st.integers(m + 1, nmsgs - 1))}")
            kind = draw(st.sampled_from(kinds))
            label = draw(st.sampled_from(["", "optional", "repeated", "oneof", "map"]))
            if label == "map":
                key = draw(st.sampled_from(SCALARS[:10] + ["bool", "string"]))
                body.append(f"map<{key}, {kind}> f{i} = {number};")
                continue
            if syntax == "proto2" and label == "":
                label = "optional"
            opt = ""
            if label == "repeated" and kind in SCALARS[:13] + ["E"] and draw(st.booleans()):
                opt = " [packed = false]" if syntax == "proto3" else " [packed = true]"
            if label == "oneof":
                oneof.append(f"{kind} f{i} = {number};")
                continue
            body.append(f"{label} {kind} f{i} = {number}{opt};".strip())
        if oneof:
            body.append("oneof o { " + " ".join(oneof) + " }")
        lines.append(f"message {name} {{ " + " ".join(body) + " }")
    return "\n".join(lines) + "\n"


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def tag(number, wire):
    return varint(number << 3 | wire)


WIRE = {"int32": 0, "int64": 0, "uint32": 0, "uint64": 0, "sint32": 0, "sint64": 0, "bool": 0, "enum": 0,
        "fixed32": 5, "sfixed32": 5, "float": 5, "fixed64": 1, "sfixed64": 1, "double": 1, "string": 2, "bytes": 2}


def type_name(f):
    from google.protobuf.descriptor import FieldDescriptor as F
    names = {getattr(F, "TYPE_" + s.upper()): s for s in SCALARS}
    names[F.TYPE_ENUM] = "enum"
    return names.get(f.type, "message")


def scalar(draw, kind):
    """One value's bytes (after the tag) of a scalar kind."""
    w = WIRE[kind]
    if w == 0:
        if kind == "enum":
            return varint(draw(st.sampled_from([0, 1, 7, -3, 2, 99, -1 << 40])))
        return varint(draw(st.one_of(st.integers(0, 300), st.integers(-2**63, 2**64 - 1))))
    if w == 5:
        return draw(st.binary(min_size=4, max_size=4))
    if w == 1:
        return draw(st.binary(min_size=8, max_size=8))
    raw = draw(st.one_of(st.text(max_size=6).map(lambda s: s.encode()), st.binary(max_size=4)))
    return varint(len(raw)) + raw


def message_bytes(draw, d, depth=0):
    """Wire bytes for message d: its fields in any order, some twice, some packed, some of the wrong
    wire type, unknown fields."""
    from google.protobuf.descriptor import FieldDescriptor as F
    out = bytearray()
    fields = list(d.fields)
    if d.full_name == "google.protobuf.Timestamp":
        s = draw(st.one_of(st.integers(-62135596800, 253402300799), st.integers(-2**63, 2**63 - 1)))
        n = draw(st.one_of(st.integers(0, 999_999_999), st.integers(-2**31, 2**31 - 1)))
        return tag(1, 0) + varint(s) + tag(2, 0) + varint(n)
    for _ in range(draw(st.integers(0, 5 if depth < 2 else 2))):
        if not fields or draw(st.integers(0, 9)) == 0:  # an unknown field
            wire = draw(st.sampled_from([0, 1, 2, 5]))
            out += tag(draw(st.integers(3000, 3010)), wire) + scalar(draw, {0: "int64", 1: "fixed64", 2: "bytes",
                                                                             5: "fixed32"}[wire])
            continue
        f = draw(st.sampled_from(fields))
        kind = type_name(f)
        if kind == "message":
            if draw(st.integers(0, 3)) == 0 and depth > 0:
                continue
            if draw(st.integers(0, 12)) == 0:  # the wrong wire type for a message: unknown to upb
                wire = draw(st.sampled_from([0, 1, 5]))
                out += tag(f.number, wire) + scalar(draw, {0: "int64", 1: "fixed64", 5: "fixed32"}[wire])
                continue
            sub = message_bytes(draw, f.message_type, depth + 1)
            out += tag(f.number, 2) + varint(len(sub)) + sub
            continue
        wire = WIRE[kind]
        if draw(st.integers(0, 12)) == 0:  # the wrong wire type: upb keeps it unknown
            wire = draw(st.sampled_from([w for w in (0, 1, 2, 5) if w != wire]))
            out += tag(f.number, wire) + scalar(draw, {0: "int64", 1: "fixed64", 2: "bytes", 5: "fixed32"}[wire])
            continue
        if f.type != F.TYPE_STRING and f.type != F.TYPE_BYTES and draw(st.booleans()) and wire != 2:
            items = b"".join(scalar(draw, kind) for _ in range(draw(st.integers(0, 3))))  # packed
            out += tag(f.number, 2) + varint(len(items)) + items
            continue
        out += tag(f.number, wire) + scalar(draw, kind)
    return bytes(out)


def plain(v, unordered_maps=False):
    """Arrow's Python values with NaN comparable (and a map's entries in key order: upb's are in
    its hash table's)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: plain(x, unordered_maps) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(plain(x, unordered_maps) for x in v)
    if isinstance(v, list):
        out = [plain(x, unordered_maps) for x in v]
        if unordered_maps and out and all(isinstance(x, tuple) for x in out):
            out.sort(key=repr)
        return out
    return v


def source(text):
    return TopicSchemas.from_records([(0, schema_key("t-value", 1), schema_value("t-value", 1, 1, text, "PROTOBUF"))])


def per_message(fmt, values):
    """upb a message at a time (the answer before the plan); None where it refuses the values."""
    try:
        return fmt.to_arrow(values)
    except (PayloadError, ValueError, OverflowError, TypeError, pa.ArrowException):
        return None


def three_ways(fmt, values):
    plan = fmt.schema(1).plan([0])
    assert plan is not None, "the plan takes every generated type"
    col = pa.array(values, pa.binary())
    twin = P.decode_py(plan, values, 1)
    kernel = P.decode(plan, col, 1) if P.K is not None else twin
    if kernel is None or twin is None:
        assert kernel is None and twin is None, (kernel, twin)
        return None
    assert kernel.type == twin.type == plan.type
    assert plain(kernel.to_pylist()) == plain(twin.to_pylist())
    upb = per_message(fmt, values)
    assert upb is not None, "an answer where upb refuses the value"
    assert upb.type == kernel.type
    assert plain(kernel.to_pylist(), True) == plain(upb.to_pylist(), True)
    return kernel


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large])
@given(proto_texts(), st.data())
def test_plan_twin_and_upb_agree(text, data):
    fmt = Protobuf(source(text))
    d = fmt.schema(1).descriptor([0])
    payloads = [message_bytes(data.draw, d) for _ in range(data.draw(st.integers(1, 4)))]
    values = [frame(1, b"\x00" + p) for p in payloads]
    values.insert(data.draw(st.integers(0, len(values))), None)
    three_ways(fmt, values)
    cut = data.draw(st.integers(0, max(len(payloads[0]) - 1, 0)))  # truncated: declined or equal
    three_ways(fmt, [frame(1, b"\x00" + payloads[0][:cut])])
    # the real encoder's bytes (no unknown fields): every such value is the plan's (none declined)
    cls = fmt.schema(1).message_class([0])
    encoded = []
    for p in payloads:
        try:
            m = cls.FromString(p)
            m.DiscardUnknownFields()  # (a map entry with unknown fields is one of the message's)
            encoded.append(m.SerializeToString())
        except Exception:
            continue
    vals = [frame(1, b"\x00" + e) for e in encoded]
    if vals and all(_encodable(fmt, v) for v in vals):
        assert three_ways(fmt, vals) is not None


def _encodable(fmt, v):
    """A value upb converts (a Timestamp inside datetime's years, strings of UTF-8 in proto2)."""
    return per_message(fmt, [v]) is not None


ORDER = '''syntax = "proto3";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  int64 id = 1; string item = 2; Line main = 3; repeated string tags = 4; Status status = 6;
  google.protobuf.Timestamp at = 7; google.protobuf.StringValue coupon = 8; optional int32 qty = 9;
  repeated Line lines = 10; bytes blob = 11; double score = 12; repeated Status hist = 13;
  oneof pay { string card = 14; int64 account = 15; Line gift = 16; }
}
message Line { string sku = 1; uint32 n = 2; repeated int64 marks = 3; }
'''


@pytest.fixture(scope="module")
def order():
    fmt = Protobuf(source(ORDER))
    return fmt, fmt.schema(1).message_class([0])


def test_decode_columns_goes_through_the_plan(order, monkeypatch):
    """decode_columns (and so read_topic, export, the tables: Format.decode_column) takes the plan's
    path; the per-message path is not called for values the plan takes."""
    fmt, Order = order
    import datetime
    o = Order(id=7, item="pen", tags=["a", "b"], status=1, qty=0, score=0.5, blob=b"\x01", hist=[0, 1, 5], card="c")
    o.main.sku = "m"
    o.main.marks.extend([1, -2])
    o.at.FromDatetime(datetime.datetime(2024, 1, 2, 3, 4, 5, 6000))
    o.coupon.value = "SPRING"
    o.lines.add(sku="s1", n=2)
    values = [frame(1, b"\x00" + o.SerializeToString()), None, frame(1, b"\x00")]
    want = fmt.to_arrow(values)
    monkeypatch.setattr(Protobuf, "to_arrow", lambda *a, **k: pytest.fail("the per-message path was taken"))
    table = kbatch.decode_columns(segment(values), value_schema=fmt)
    got = table.column("value").combine_chunks()
    assert got.type == want.type and got.to_pylist() == want.to_pylist()
    row = got.to_pylist()[0]
    assert row["hist"] == ["NEW", "PAID", "5"] and row["card"] == "c" and row["account"] is None
    assert row["gift"] is None and row["main"] == {"sku": "m", "n": 0, "marks": [1, -2]}
    assert got.to_pylist()[2]["qty"] is None and got.to_pylist()[2]["id"] == 0


@pytest.mark.parametrize("wire, why", [
    (tag(3, 2) + b"\x02" + tag(1, 2) + b"\x00" + tag(3, 2) + b"\x02" + tag(2, 0) + b"\x05", "a message twice: merged"),
    (tag(16, 2) + b"\x00" + tag(14, 2) + b"\x01x", "a oneof's message member replaced"),
    (tag(14, 2) + b"\x01x" + tag(16, 2) + b"\x00", "a oneof's member replaced by a message"),
    (tag(5, 3) + tag(1, 0) + b"\x01" + tag(5, 4) + tag(1, 0) + b"\x09", "a group among the unknown fields"),
    (tag(7, 2) + b"\x0b" + tag(1, 0) + varint(2**62), "a Timestamp past datetime's years"),
])
def test_what_the_plan_declines_upb_answers(order, wire, why):
    """The cases the plan leaves to upb: the column is declined whole and upb's answer stands."""
    fmt, _ = order
    values = [frame(1, b"\x00" + wire)]
    plan = fmt.schema(1).plan([0])
    assert P.decode_py(plan, values, 1) is None, why
    if P.K is not None:
        assert P.decode(plan, pa.array(values, pa.binary()), 1) is None, why
    col = pa.array(values, pa.binary())
    try:
        want = fmt.to_arrow(values).to_pylist()
    except PayloadError as e:  # upb's error, or a value Arrow's type cannot hold: the same through decode_column
        with pytest.raises(PayloadError) as again:
            fmt.decode_column(col)
        assert str(again.value) == str(e)
        return
    assert fmt.decode_column(col).to_pylist() == want


@pytest.mark.parametrize("seconds", [2**62, 2**55, 253402300800, -62135596801])
def test_timestamp_outside_datetime_is_a_named_error(order, seconds):
    """A Timestamp whose seconds fall outside the years 1-9999 (which timestamp[us] and datetime
    hold): the plan declines, and the column's error names the value, never an OSError or
    OverflowError from datetime (a traceback for `kbatch export`)."""
    fmt, _ = order
    ts = tag(1, 0) + varint(seconds % 2**64)
    values = [frame(1, b"\x00" + tag(7, 2) + bytes([len(ts)]) + ts)]
    with pytest.raises(PayloadError, match="outside the years 1-9999") as ei:
        fmt.decode_column(pa.array(values, pa.binary()), pa.array([42]))
    assert ei.value.offset == 42 and ei.value.schema_id == 1


def test_last_value_wins_and_oneof_members_replace(order):
    fmt, _ = order
    wire = (tag(1, 0) + b"\x05" + tag(2, 2) + b"\x01a" + tag(1, 0) + b"\x09" + tag(2, 2) + b"\x02bc" +
            tag(14, 2) + b"\x01x" + tag(15, 0) + b"\x03" + tag(4, 2) + b"\x01p" + tag(4, 2) + b"\x01q" +
            tag(13, 2) + b"\x02\x01\x00" + tag(13, 0) + b"\x01")
    got = three_ways(fmt, [frame(1, b"\x00" + wire)]).to_pylist()[0]
    assert got["id"] == 9 and got["item"] == "bc" and got["card"] is None and got["account"] == 3
    assert got["tags"] == ["p", "q"] and got["hist"] == ["PAID", "NEW", "PAID"]


@pytest.mark.parametrize("payload", [
    b"\x08", b"\x08\xff", b"\x08" + b"\xff" * 10 + b"\x01", b"\x12\x05ab", b"\x12" + b"\xff" * 9 + b"\x7f",
    b"\x1a\x7f", b"\x00\x01", b"\x0e\x01", b"\x0c", b"\x22\x03\x0a\x05a", b"\x6a\x03\x01\x80", b"\x12\x02\xc3\x28",
    b"\x1a" + b"\x80" * 5 + b"\x10", b"\x1a\x02\x1a\x00" * 1, b"\xff\xff\xff\xff\xff\x0f"])
def test_hostile_bytes_decline_to_upbs_error(order, payload):
    """Truncated varints, lengths past the end, field 0, wire types 6 and 7, a stray end-group, bad
    UTF-8: the plan declines (no crash, no hang), and the column's error is upb's PayloadError."""
    fmt, _ = order
    values = [frame(1, b"\x00" + payload)]
    plan = fmt.schema(1).plan([0])
    got = P.decode_py(plan, values, 1)
    if P.K is not None:
        k = P.decode(plan, pa.array(values, pa.binary()), 1)
        assert (k is None) == (got is None)
    if got is None:
        with pytest.raises(PayloadError, match="does not parse"):
            fmt.decode_column(pa.array(values, pa.binary()), pa.array([5]))
    else:
        assert got.to_pylist() == fmt.to_arrow(values).to_pylist()


def test_a_huge_packed_count_and_deep_unknown_nesting(order):
    """A packed field saying 2^62 bytes, and 10,000 nested length-delimited unknown fields: checked
    against the bytes left (declined at once), skipped without recursion."""
    fmt, _ = order
    plan = fmt.schema(1).plan([0])
    huge = frame(1, b"\x00" + tag(13, 2) + varint(2**62) + b"\x01")
    assert P.decode_py(plan, [huge], 1) is None
    if P.K is not None:
        assert P.decode(plan, pa.array([huge], pa.binary()), 1) is None
    inner = b""
    for _ in range(10_000):
        inner = tag(3000, 2) + varint(len(inner)) + inner
    deep = frame(1, b"\x00" + inner + tag(1, 0) + b"\x04")
    assert three_ways(fmt, [deep]).to_pylist()[0]["id"] == 4


def test_types_the_plan_does_not_take_keep_the_per_message_path():
    text = ('syntax = "proto2";\nmessage R { optional R next = 1; optional int64 v = 2; }\n'
            'message W { required int32 a = 1; }\n')
    fmt = Protobuf(source(text))
    assert fmt.schema(1).plan([0]) is None and fmt.schema(1).plan([1]) is None
    v = frame(1, b"\x00" + tag(2, 0) + b"\x03")
    assert fmt.decode_column(pa.array([v], pa.binary())).to_pylist()[0]["v"] == 3


@settings(max_examples=EXAMPLES * 4, deadline=None)
@given(st.binary(max_size=48))
def test_arbitrary_bytes_decline_or_agree(order, payload):
    """Any bytes after the framing: kernel and twin agree, and an answer is upb's."""
    fmt, _ = order
    three_ways(fmt, [frame(1, b"\x00" + payload)])


def test_on_decode_error_as_before(order, monkeypatch):
    """A column of good values and hostile ones with on_error (export's --on-decode-error null /
    dead-letter): the same rows nulled, the same errors (row, offset, message) and the same good
    rows as the per-message path alone gives."""
    fmt, Order = order
    good = [frame(1, b"\x00" + Order(id=i, item=f"i{i}", tags=["t"] * i).SerializeToString()) for i in range(6)]
    bad = [frame(1, b"\x00\x08"), frame(1, b"\x00\x12\x05ab"), frame(1, b"\x00\x0e\x01"), frame(1, b"\x00\x12\x01\xff")]
    values = good[:2] + bad[:2] + good[2:4] + [None] + bad[2:] + good[4:]
    col, offsets = pa.array(values, pa.binary()), pa.array(range(100, 100 + len(values)))

    def run():
        seen = []
        out = fmt.decode_column(col, offsets, "value", on_error=lambda row, e: seen.append((row, str(e))))
        return out.to_pylist(), seen

    with_plan = run()
    with pytest.raises(PayloadError, match="offset 102"):
        fmt.decode_column(col, offsets, "value")
    monkeypatch.setattr(Protobuf, "decode_arrow", lambda *a: None)
    before = run()
    assert with_plan == before
    assert [row for row, _ in with_plan[1]] == [2, 3, 7, 8]
    assert "value at offset 102 (schema id 1): the Protobuf message Order does not parse" in with_plan[1][0][1]


def test_message_indexes_pick_the_plan_and_threads_share_it(order, monkeypatch):
    """A value of the schema's second message type (indexes [1]) has that type's plan; one plan
    decodes in several threads at once (the kernel releases the GIL: its scratch is the call's)."""
    from concurrent.futures import ThreadPoolExecutor

    from kbatch.values.framing import encode_message_indexes

    fmt, Order = order
    Line = fmt.schema(1).message_class([1])
    lines = [frame(1, encode_message_indexes([1]) + Line(sku=f"s{i}", n=i, marks=[i] * (i % 3)).SerializeToString())
             for i in range(50)]
    want = fmt.to_arrow(lines).to_pylist()
    orders = [frame(1, b"\x00" + Order(id=i, item="x" * i, card="c" if i % 2 else "", account=i).SerializeToString())
              for i in range(300)]
    columns = [pa.array(orders[i::4], pa.binary()) for i in range(4)]
    answers = [fmt.to_arrow(c.to_pylist()).to_pylist() for c in columns]
    monkeypatch.setattr(Protobuf, "to_arrow", lambda *a, **k: pytest.fail("the per-message path was taken"))
    assert fmt.decode_column(pa.array(lines, pa.binary())).to_pylist() == want
    plan = fmt.schema(1).plan([0])
    with ThreadPoolExecutor(4) as pool:
        for _ in range(10):
            got = list(pool.map(lambda c: P.decode(plan, c, 1).to_pylist(), columns))
            assert got == answers


def test_export_through_the_plan_and_its_errors(order, tmp_path, monkeypatch):
    """`kbatch export -s value=protobuf`: the typed column through the plan (the per-message path
    not taken), a value that does not parse exits 1 naming topic, partition and offset, and
    --on-decode-error null nulls that row only."""
    pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")
    import io

    import pyarrow.parquet as pq

    from kbatch.cli.export import cmd_export

    _, Order = order
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "1.proto").write_text(ORDER)
    log = kbatch.Log.create(str(tmp_path / "logs" / "orders-0"))
    b = kbatch.BatchBuilder()
    for i in range(3):
        b.append(1000 + i, None, frame(1, b"\x00" + Order(id=i, item=f"i{i}", hist=[1]).SerializeToString()))
    b.append(1003, None, frame(1, b"\x00\x12\x05ab"))  # a length past the end (`bad`)
    log.append(b.build(), now_ms=2000)
    log.close()
    bad = frame(1, b"\x00\x12\x05ab")
    calls = []
    real = Protobuf.to_arrow

    def per_message(self, values, offsets=None, what="value"):
        calls.append(list(values))
        return real(self, values, offsets, what)

    monkeypatch.setattr(Protobuf, "to_arrow", per_message)

    def export(to, **kw):
        err = io.StringIO()
        code = cmd_export(str(tmp_path / "logs"), to=str(tmp_path / to), serdes=["value=protobuf"],
                          schemas=str(tmp_path / "schemas"), quiet=True, out=io.StringIO(), err=err, **kw)
        return code, err.getvalue()

    code, err = export("failed.parquet")
    assert code == 1 and "value in orders [0] at offset 3 (schema id 1): the Protobuf message Order does not parse" \
        in err, err
    code, err = export("nulled.parquet", on_decode_error="null")
    assert code == 0, err
    rows = pq.read_table(tmp_path / "nulled.parquet").column("value").to_pylist()
    assert [r and (r["id"], r["item"], r["hist"]) for r in rows] == [(0, "i0", ["PAID"]), (1, "i1", ["PAID"]),
                                                                     (2, "i2", ["PAID"]), None]
    assert calls and all(bad in c for c in calls), "the per-message path decoded a part the plan takes"
