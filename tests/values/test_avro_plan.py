"""The compiled Avro plan (kbatch.values._avro_kernel, issue 42) against its pure twin (fastavro +
values.avro.to_arrow) over generated writer schemas of every Avro type and logical type, and
generated reader schemas of each: a projection (some fields, in another order), added fields with
defaults, promotions, enums with more symbols. Both must give the same Arrow column, nulls and
empty collections included; the kernel must take every such pair (not decline to the twin)."""
import decimal
import json
import uuid

import pytest

pytest.importorskip("fastavro")
pa = pytest.importorskip("pyarrow")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbatch.values import Avro, PayloadError, TopicSchemas
from kbatch.values.avro_program import K
from support.schemas import avro_value, schema_key, schema_value

pytestmark = pytest.mark.skipif(K is None, reason="the compiled Avro kernel is not built")

_names = iter(range(10**9))

LEAVES = ["boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed", "dec_bytes", "dec_fixed",
          "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
          "uuid", "null"]


def leaf(kind):
    n = next(_names)
    if kind == "enum":
        return {"type": "enum", "name": f"E{n}", "symbols": ["A", "B", "C"]}
    if kind == "fixed":
        return {"type": "fixed", "name": f"F{n}", "size": 3}
    if kind == "dec_bytes":
        return {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}
    if kind == "dec_fixed":
        return {"type": "fixed", "name": f"D{n}", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 3}
    if kind in ("date", "time-millis"):
        return {"type": "int", "logicalType": kind}
    if kind in ("time-micros", "timestamp-millis", "timestamp-micros", "local-timestamp-millis"):
        return {"type": "long", "logicalType": kind}
    if kind == "uuid":
        return {"type": "string", "logicalType": "uuid"}
    return kind


def schemas(depth=0):
    prim = st.sampled_from(LEAVES).map(leaf)
    if depth >= 2:
        return prim
    inner = st.deferred(lambda: schemas(depth + 1))
    nonnull = inner.filter(lambda s: s != "null" and not isinstance(s, list))
    return st.one_of(
        prim,
        st.tuples(nonnull, st.booleans()).map(lambda t: ["null", t[0]] if t[1] else [t[0], "null"]),
        inner.map(lambda s: {"type": "array", "items": s}),
        inner.map(lambda s: {"type": "map", "values": s}),
        st.lists(inner, min_size=1, max_size=4).map(
            lambda fs: {"type": "record", "name": f"R{next(_names)}",
                        "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fs)]}))


def values_for(s):
    if isinstance(s, list):
        other = s[1] if s[0] == "null" else s[0]
        return st.one_of(st.none(), values_for(other))
    if isinstance(s, dict):
        t, lt = s["type"], s.get("logicalType")
        if lt == "decimal":
            digits = s["precision"]
            return st.integers(-(10**digits) + 1, 10**digits - 1).map(
                lambda i: decimal.Decimal(i).scaleb(-s["scale"]))
        if lt == "uuid":
            return st.uuids().map(str)
        if lt in ("date", "time-millis"):
            return st.integers(0, 86_399_999)
        if lt is not None:
            return st.integers(-2**50, 2**50)
        if t == "enum":
            return st.sampled_from(s["symbols"])
        if t == "fixed":
            return st.binary(min_size=s["size"], max_size=s["size"])
        if t == "array":
            return st.lists(values_for(s["items"]), max_size=3)
        if t == "map":
            return st.dictionaries(st.text(max_size=4), values_for(s["values"]), max_size=3)
        return st.fixed_dictionaries({f["name"]: values_for(f["type"]) for f in s["fields"]})
    return {"boolean": st.booleans(), "int": st.integers(-2**31, 2**31 - 1), "long": st.integers(-2**63, 2**63 - 1),
            "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
            "string": st.text(max_size=8), "bytes": st.binary(max_size=8), "null": st.none()}[s]


PROMOTE = {"int": ["long", "double"], "long": ["double"], "float": ["double"], "string": ["bytes"],
           "bytes": ["string"]}


def reader_of(draw, writer):
    """A reader schema of the writer's record: some fields (at least one), shuffled, each maybe
    promoted; an enum maybe with more symbols; a new field with a default maybe."""
    fields = writer["fields"]
    keep = draw(st.lists(st.sampled_from(range(len(fields))), min_size=1, max_size=len(fields), unique=True))
    out = []
    for i in keep:
        f = dict(fields[i])
        t = f["type"]
        if isinstance(t, str) and t in PROMOTE and draw(st.booleans()):
            f["type"] = draw(st.sampled_from(PROMOTE[t]))
        elif isinstance(t, dict) and t.get("type") == "enum" and draw(st.booleans()):
            f["type"] = dict(t, symbols=t["symbols"] + ["Z"])
        out.append(f)
    if draw(st.booleans()):
        out.append(draw(st.sampled_from([
            {"name": "added_s", "type": "string", "default": "dflt"},
            {"name": "added_n", "type": ["null", "long"], "default": None},
            {"name": "added_l", "type": "long", "default": 7},
            {"name": "added_a", "type": {"type": "array", "items": "int"}, "default": []},
            {"name": "added_b", "type": "boolean", "default": True}])))
    return dict(writer, fields=out)


def source(schema):
    return TopicSchemas.from_records([(0, schema_key("t-value", 1),
                                       schema_value("t-value", 1, 1, json.loads(json.dumps(schema))))])


@settings(max_examples=int(__import__("os").environ.get("KBATCH_AVRO_PLAN_EXAMPLES", "50")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_plan_and_pure_twin_agree(data):
    fields = data.draw(st.lists(schemas(), min_size=1, max_size=6))
    writer = {"type": "record", "name": "Top", "fields": [{"name": f"c{i}", "type": t} for i, t in enumerate(fields)]}
    records = data.draw(st.lists(values_for(writer), min_size=1, max_size=5))
    framed = [avro_value(1, writer, r) for r in records]
    values = framed + [None] + framed[:1]
    reader = reader_of(data.draw, writer) if data.draw(st.booleans()) else None
    fmt = Avro(source(writer), reader_schema=reader)
    got = fmt.decode_arrow(pa.array(values, pa.binary()), None, "value")
    try:
        want = fmt.to_arrow(values)
    except PayloadError:  # (bytes promoted to a string that are not UTF-8): the kernel must not take them either
        assert got is None
        return
    assert got is not None, "the kernel declined a schema pair it takes"
    assert got.type == want.type
    assert got.equals(want), (got.to_pylist(), want.to_pylist())


def test_projection_reads_only_the_fields_selected():
    """A reader schema of 2 of 40 fields: the plan skips the other 38 by their lengths (strings,
    arrays with and without block sizes, nested records, unions), and the two columns match."""
    kinds = ["long", "string", ["null", "string"], {"type": "array", "items": "long"},
             {"type": "map", "values": "string"}, "double", "boolean"]
    fields = [{"name": f"f{i}", "type": kinds[i % len(kinds)]} for i in range(40)]
    fields[5] = {"name": "f5", "type": {"type": "record", "name": "In", "fields": [{"name": "a", "type": "long"}]}}
    writer = {"type": "record", "name": "Wide", "fields": fields}
    reader = dict(writer, fields=[fields[34], fields[1]])

    def value(i):
        return {f["name"]: {"long": i, "string": f"s{i}", "double": i / 3, "boolean": bool(i % 2)}.get(
            f["type"], None) if isinstance(f["type"], str) else
            (None if i % 3 == 0 else f"n{i}") if isinstance(f["type"], list) else
            list(range(i % 4)) if f["type"]["type"] == "array" else
            {f"k{j}": "v" for j in range(i % 3)} if f["type"]["type"] == "map" else {"a": -i}
            for f in fields}

    values = [avro_value(1, writer, value(i)) for i in range(50)]
    fmt = Avro(source(writer), reader_schema=reader)
    got = fmt.decode_arrow(pa.array(values, pa.binary()), None, "value")
    assert got is not None
    assert got.type.names == ["f34", "f1"]
    assert got.to_pylist() == [{"f34": i % 2 == 1, "f1": f"s{i}"} for i in range(50)]
    assert got.equals(fmt.to_arrow(values))


def test_skipped_array_with_block_sizes():
    """An array written in blocks with their byte sizes (negative counts) is jumped over when its
    field is not read; the field after it decodes."""
    from kbatch.values import frame

    def zz(v):
        v = (v << 1) ^ (v >> 63)
        out = bytearray()
        while v & ~0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    items = zz(1) + zz(300)
    payload = zz(-2) + zz(len(items)) + items + zz(0) + zz(6) + b"abcdef"
    writer = {"type": "record", "name": "B", "fields": [{"name": "xs", "type": {"type": "array", "items": "long"}},
                                                       {"name": "s", "type": "string"}]}
    for reader in (None, dict(writer, fields=[writer["fields"][1]])):
        fmt = Avro(source(writer), reader_schema=reader)
        got = fmt.decode_arrow(pa.array([frame(1, payload)], pa.binary()), None, "value")
        assert got is not None
        want = {"xs": [1, 300], "s": "abcdef"} if reader is None else {"s": "abcdef"}
        assert got.to_pylist() == [want]
        assert got.equals(fmt.to_arrow([frame(1, payload)]))


def test_not_utf8_is_declined_to_the_twin():
    """A string field holding bytes that are not UTF-8 (one value splits a character across two
    strings that are UTF-8 together): the kernel declines, the twin names the value."""
    from kbatch.values import PayloadError, frame

    writer = {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]}
    fmt = Avro(source(writer))
    col = pa.array([frame(1, b"\x02\xc3"), frame(1, b"\x02\xa9")], pa.binary())  # "é" cut in two
    assert fmt.decode_arrow(col, None, "value") is None
    with pytest.raises(PayloadError):
        fmt.to_arrow(col.to_pylist())


def test_buffers_kept_for_the_next_decode():
    """Column buffers Arrow lets go of are kept (at most 64 MiB) and taken by the next decode's
    columns with the last one's bytes still in them: a decode into them gives the pure twin's
    answer (nulls, empty strings and collections, defaults), and the kept bytes stay bounded."""
    from kbatch.values.avro_program import K as kernel

    writer = {"type": "record", "name": "Big", "fields": [
        {"name": "n", "type": "long"}, {"name": "s", "type": "string"}, {"name": "o", "type": ["null", "string"]},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "xs", "type": {"type": "array", "items": "long"}}, {"name": "b", "type": "boolean"},
        {"name": "f", "type": "float"}]}
    reader = dict(writer, fields=writer["fields"] + [{"name": "added", "type": "int", "default": 7}])

    def column(seed):
        rows = [{"n": i * seed, "s": "" if i % 5 == 0 else f"s{i * seed}", "o": None if (i + seed) % 3 == 0 else "o",
                 "d": decimal.Decimal(i - seed) / 100, "xs": list(range((i + seed) % 3)), "b": (i + seed) % 2 == 0,
                 "f": i / 4} for i in range(30_000)]
        return [avro_value(1, writer, r) for r in rows]

    fmt = Avro(source(writer), reader_schema=reader)
    first = fmt.decode_arrow(pa.array(column(3), pa.binary()), None, "value")
    assert first is not None and first.nbytes > 1 << 20
    del first
    kept = kernel.pool_bytes()
    assert 0 < kept <= 64 << 20
    values = column(7)
    got = fmt.decode_arrow(pa.array(values, pa.binary()), None, "value")
    assert got is not None
    assert kernel.pool_bytes() < kept, "the second decode took no kept buffer"
    assert got.equals(fmt.to_arrow(values))
    assert kernel.pool_bytes() <= 64 << 20


def test_bytes_decimals_of_every_width():
    """Bytes decimals of 1 to 16 bytes, negative and positive, last in the payload and followed by
    a field (the kernel reads one of up to 8 bytes as a word when 8 bytes are left): the pure
    twin's values."""
    dec = {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 3}
    writer = {"type": "record", "name": "Dw", "fields": [{"name": "a", "type": dec}, {"name": "s", "type": "string"},
                                                        {"name": "b", "type": dec}]}
    records = []
    for width in range(1, 17):
        for sign in (1, -1):
            v = sign * (1 << (8 * width - 2)) + sign * 3
            records.append({"a": decimal.Decimal(v).scaleb(-3), "s": "x" * width, "b": decimal.Decimal(-v).scaleb(-3)})
    records.append({"a": decimal.Decimal(0), "s": "", "b": decimal.Decimal(-1).scaleb(-3)})
    values = [avro_value(1, writer, r) for r in records]
    fmt = Avro(source(writer))
    got = fmt.decode_arrow(pa.array(values, pa.binary()), None, "value")
    assert got is not None
    assert got.equals(fmt.to_arrow(values))
    assert got.field("a").to_pylist() == [r["a"] for r in records]
