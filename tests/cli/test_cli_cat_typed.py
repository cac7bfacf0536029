"""`kbatch cat -s key=avro/value=avro` prints from the kernel's column path (cli/_schemas.py
`rendered`, kbatch.values.render) exactly what the per-value path (fastavro + avro.jsonable) prints:
the same stdout, stderr and exit code, record for record, for every Avro type and logical type,
unions, evolutions with and without a pinned reader schema, and bad values mixed in; on both
backends (the compiled kernel, and fastavro's column path when the kernel is off)."""
from __future__ import annotations

import datetime
import decimal
import io
import json
import math
import random
import re
import struct
import uuid

import pytest

pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")
pytest.importorskip("fastavro")
pa = pytest.importorskip("pyarrow")

import kbatch
import kbatch.cli._schemas as S
import kbatch.values.avro_program as P
from kbatch.cli.cat import cmd_cat
from kbatch.values import Avro
from kbatch.values.framing import frame
from support.schemas import SchemasTopic, avro_value

UTC = datetime.timezone.utc
INNER = {"type": "record", "name": "Inner", "fields": [
    {"name": "x", "type": "long"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "meta", "type": {"type": "map", "values": "string"}}]}
ALL = {"type": "record", "name": "All", "namespace": "t", "fields": [
    {"name": "n", "type": "null"}, {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
    {"name": "l", "type": "long"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
    {"name": "by", "type": "bytes"}, {"name": "s", "type": "string"},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "decf", "type": {"type": "fixed", "name": "D16", "size": 16, "logicalType": "decimal",
                              "precision": 30, "scale": 10}},
    {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 5}},
    {"name": "odd", "type": {"type": "int", "logicalType": "made-up"}},
    {"name": "opt", "type": ["null", "string"]},
    {"name": "u", "type": ["null", "int", "string", INNER, {"type": "array", "items": "long"}]},
    {"name": "u2", "type": [{"type": "map", "values": "int"}, "double", "boolean"]},
    {"name": "arr", "type": {"type": "array", "items": "Inner"}},
    {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
    {"name": "optrec", "type": ["null", "Inner"]}]}
#: types Arrow cannot render as fastavro prints them: decoded value by value
UUID = {"type": "record", "name": "U", "fields": [{"name": "id", "type": {"type": "string", "logicalType": "uuid"}}]}
NANOS = {"type": "record", "name": "N", "fields": [{"name": "t", "type": {"type": "long", "logicalType": "timestamp-nanos"}}]}
CLOCK = {"type": "record", "name": "Clock", "fields": [
    {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "d", "type": {"type": "int", "logicalType": "date"}}]}
CLOCK_RAW = {"type": "record", "name": "Clock", "fields": [{"name": "t", "type": "int"}, {"name": "d", "type": "int"}]}
LIST = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                   {"name": "next", "type": ["null", "Node"], "default": None}]}
#: unions whose branches fastavro gives one Python class: printed from the kernel's column only
AMB = {"type": "record", "name": "Amb", "fields": [
    {"name": "x", "type": ["int", "long"]}, {"name": "y", "type": ["float", "double"]},
    {"name": "z", "type": [{"type": "record", "name": "Kv", "fields": [{"name": "k", "type": "int"}]},
                           {"type": "map", "values": "int"}]}]}
KEY = {"type": "record", "name": "K", "fields": [{"name": "k", "type": "string"}]}
V1 = {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                                                 {"name": "qty", "type": "int"}]}
V2 = {"type": "record", "name": "Ev", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "qty", "type": "long"},
    {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}]}
V3 = {"type": "record", "name": "Ev", "fields": [
    {"name": "id", "type": "long"}, {"name": "qty", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 1},
     "default": "\u0000"}]}


def _inner(r: random.Random) -> dict:
    return {"x": r.choice([0, -1, 2**63 - 1, -2**63, r.randrange(-10**6, 10**6)]),
            "tags": [r.choice(["", "a", "é", "\u2603", "x\"y\\z", "\n"]) for _ in range(r.randrange(3))],
            "meta": {r.choice(["k", "ключ", ""]) + str(j): r.choice(["v", ""]) for j in range(r.randrange(3))}}


def _all(r: random.Random) -> dict:
    floats = [0.0, -0.0, 0.1, 1e38, -3.5, float("inf"), float("-inf"), float("nan"), 1.401298464324817e-45]
    doubles = floats + [1e308, 5e-324, 0.30000000000000004]
    u = r.choice([None, r.randrange(-2**31, 2**31), "s", _inner(r), [1, -2], []])
    return {"n": None, "b": r.random() < 0.5, "i": r.choice([0, -2**31, 2**31 - 1, r.randrange(-99, 99)]),
            "l": r.choice([0, -2**63, 2**63 - 1, r.randrange(-10**12, 10**12)]), "f": r.choice(floats),
            "d": r.choice(doubles), "by": bytes(r.randrange(256) for _ in range(r.randrange(6))),
            "s": r.choice(["", "plain", "ünïcødé", "\u0000ctl\t", "emoji \U0001F600", "\"quoted\""]),
            "e": r.choice(["RED", "GREEN", "BLUE"]), "fx": bytes(r.randrange(256) for _ in range(4)),
            "date": datetime.date(1970, 1, 1) + datetime.timedelta(days=r.randrange(-700000, 2900000)),
            "tms": datetime.time(r.randrange(24), r.randrange(60), r.randrange(60), r.randrange(1000) * 1000),
            "tus": datetime.time(r.randrange(24), r.randrange(60), r.randrange(60), r.choice([0, r.randrange(10**6)])),
            "tsm": datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(milliseconds=r.randrange(-10**13, 10**13)),
            "tsu": datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(microseconds=r.choice([0, r.randrange(-10**16, 10**16)])),
            "ltm": datetime.datetime(2001, 2, 3, 4, 5, 6, r.randrange(1000) * 1000),
            "ltu": datetime.datetime(1969, 12, 31, 23, 59, 59, r.randrange(10**6)),
            "dec": decimal.Decimal(r.randrange(-10**9 + 1, 10**9)).scaleb(-2),
            "decf": decimal.Decimal(r.choice([0, 1, -1, 10**29, r.randrange(-10**20, 10**20)])).scaleb(-10),
            "big": decimal.Decimal(r.randrange(-10**49, 10**49)).scaleb(-5), "odd": r.randrange(-5, 5),
            "opt": r.choice([None, "", "x"]), "u": u, "u2": r.choice([{"a": 1}, {}, 2.5, True]), "arr": [_inner(r) for _ in range(r.randrange(3))],
            "m": {f"k{j}": r.choice([None, 1.5, -0.0, float("nan")]) for j in range(r.randrange(4))},
            "optrec": r.choice([None, _inner(r)])}


def _long(v: int) -> bytes:
    z, out = (v << 1) ^ (v >> 63), bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


def _write_log(path, batches) -> None:
    log = kbatch.Log.create(str(path))
    try:
        for recs in batches:
            b = kbatch.BatchBuilder()
            for i, (k, v) in enumerate(recs):
                b.append(1_700_000_000_000 + i, k, v)
            log.append(b.build(), now_ms=1_700_000_000_000)
    finally:
        log.close()


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """A `_schemas` partition and topics: `all` (every type, bad values mixed in), `ev` (three
    writer schemas of one subject, mixed in batches), `odd` (types printed value by value)."""
    root = tmp_path_factory.mktemp("typed")
    sr = root / "sr" / "_schemas-0"
    t = SchemasTopic(str(sr))
    for sid, (subject, version, schema) in {1: ("all-value", 1, ALL), 2: ("uuid-value", 1, UUID),
                                            3: ("nanos-value", 1, NANOS), 4: ("clock-value", 1, CLOCK),
                                            6: ("list-value", 1, LIST), 9: ("amb-value", 1, AMB),
                                            5: ("all-key", 1, KEY), 11: ("ev-value", 1, V1),
                                            12: ("ev-value", 2, V2), 13: ("ev-value", 3, V3)}.items():
        t.register(subject, version, sid, schema)
    t.close()
    r = random.Random(42)
    good = lambda: avro_value(1, ALL, _all(r))  # noqa: E731
    key = lambda i: avro_value(5, KEY, {"k": f"k{i}"})  # noqa: E731
    bad = [b"\x01\x00\x00\x00\x01\x00", frame(99, b"\x02"), b"\x00\x00", good()[:-3], good() + b"\x00\x07",
           frame(1, b"\x00"),  # truncated: the record stops after `b`'s... nothing
           frame(11, _long(1) + _long(2) + b"\xff\xfe" + _long(3)),  # a string that is not UTF-8
           frame(11, _long(1) + _long(-5) + b"abc"),  # a negative string length
           b"\x00\x00\x00\x00\x01" + b"\x00\x01" + _long(9)]  # (enum index 9 of 3 further on: garbage)
    batches = []
    for n in range(6):
        recs = [(key(i) if i % 7 else None, good()) for i in range(40 + 10 * n)]
        for j, v in enumerate(bad[n::3]):
            recs.insert(3 + 11 * j, (key(j), v))
        recs.insert(5, (b"", None))
        recs.insert(9, (None, b""))
        batches.append(recs)
    batches.append([(None, good())])  # a batch of one
    _write_log(root / "logs" / "all-0", batches)
    ev = []
    for n in range(5):
        recs = []
        for i in range(30):
            w = r.choice([1, 2, 3])
            if w == 1:
                v = avro_value(11, V1, {"id": i, "item": f"i{i}", "qty": r.randrange(-2**31, 2**31)})
            elif w == 2:
                v = avro_value(12, V2, {"id": i, "item": "", "qty": 2**40, "when": i * 1000, "tags": ["a"] * (i % 3)})
            else:
                v = avro_value(13, V3, {"id": i, "qty": 0.5, "note": r.choice([None, "n"]),
                                        "amount": decimal.Decimal(r.randrange(-99999, 99999)).scaleb(-1)})
            recs.append((None, v))
        ev.append(recs)
    _write_log(root / "logs" / "ev-0", ev)
    odd = [(None, avro_value(2, UUID, {"id": str(uuid.UUID(int=r.getrandbits(128)))})),
           (None, frame(2, _long(36) + str(uuid.UUID(int=7)).upper().encode())),  # upper case: fastavro prints lower
           (None, frame(2, _long(3) + b"xyz")),  # not a UUID: fastavro refuses it
           (None, avro_value(3, NANOS, {"t": 1_700_000_000_123_456_789})),
           (None, avro_value(4, CLOCK, {"t": datetime.time(1, 2, 3, 4000), "d": datetime.date(2024, 2, 29)})),
           (None, avro_value(4, CLOCK_RAW, {"t": 86_400_000, "d": 0})),  # past the day: fastavro refuses it
           (None, avro_value(4, CLOCK_RAW, {"t": -1, "d": 0})),
           (None, avro_value(4, CLOCK_RAW, {"t": 0, "d": 3_000_000})),  # past year 9999
           (None, avro_value(4, CLOCK_RAW, {"t": 0, "d": -800_000})),  # before year 1
           (None, avro_value(6, LIST, {"v": 1, "next": {"v": 2, "next": None}}))]  # a type that contains itself
    amb = [frame(9, _long(1) + _long(5) + _long(1) + struct.pack("<d", 0.1) +  # x: long 5, y: double 0.1
                 _long(1) + _long(1) + _long(1) + b"k" + _long(5) + _long(0)),  # z: the map {"k": 5}
           frame(9, _long(0) + _long(-3) + _long(0) + struct.pack("<f", 1.5) + _long(0) + _long(7)),
           frame(9, _long(1) + _long(2**40) + _long(1) + struct.pack("<d", -0.0) + _long(1) + _long(0))]
    _write_log(root / "logs" / "amb-0", [[(None, v) for v in amb * 20]])
    _write_log(root / "logs" / "odd-0", [odd])
    _write_log(root / "logs" / "odd-1", [odd[4:5] * 3])  # (partitions are read ahead one by one)
    return root


@pytest.fixture(params=["kernel", "fastavro"])
def avro_path(request, monkeypatch):
    """The compiled Avro kernel's column path, or (kernel off) fastavro's column path."""
    if request.param == "fastavro" or P.K is None:
        monkeypatch.setattr(P, "K", None)
    return request.param


def _cat(path, **kw):
    out, err = io.BytesIO(), io.StringIO()
    code = cmd_cat(str(path), out=out, err=err, quiet=True, **kw)
    return code, out.getvalue(), err.getvalue()


def both(monkeypatch, path, **kw):
    """cat's answer from the column path, checked equal to the per-value path's (stdout, stderr,
    exit code); the number of values the per-value path decoded in each run."""
    calls = []
    real = Avro.to_json

    def counted(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)
    monkeypatch.setattr(Avro, "to_json", counted)
    monkeypatch.setattr(S, "CAT_FROM_COLUMNS", False)
    old = _cat(path, **kw)
    per_value = len(calls)
    monkeypatch.setattr(S, "CAT_FROM_COLUMNS", True)
    new = _cat(path, **kw)
    assert new[0] == old[0]
    # (fastavro's EOFError names its BytesIO object by address, which differs from run to run)
    assert re.sub(r"0x[0-9a-f]+", "0x", new[2]) == re.sub(r"0x[0-9a-f]+", "0x", old[2])
    assert re.sub(rb"0x[0-9a-f]+", b"0x", new[1]).splitlines() == re.sub(rb"0x[0-9a-f]+", b"0x", old[1]).splitlines()
    return new, per_value, len(calls) - per_value


@pytest.mark.parametrize("kw", [dict(fmt="%o %k|%s\\n"), dict(as_json=True), dict(fmt="%s\\n", null=True),
                                dict(fmt="%o\\n"), dict(count=17, fmt="%s\\n")], ids=["fmt", "json", "Z", "no-s", "c"])
def test_every_avro_type_prints_as_the_per_value_path_prints_it(typed, monkeypatch, backend, avro_path, kw):
    schemas = str(typed / "sr" / "_schemas-0")
    (code, out, err), per_value, columns_per_value = both(
        monkeypatch, typed / "logs" / "all-0", serdes=["key=avro", "value=avro"], schemas=schemas, **kw)
    if "count" not in kw and kw.get("fmt") != "%o\\n":
        assert code == 1 and "ERROR" in err  # the bad values are named, by the per-value path
    if kw.get("fmt") == "%o\\n":
        assert per_value == columns_per_value == 0  # nothing printed, nothing decoded
    elif "count" not in kw:
        assert columns_per_value < per_value / 10  # the good values came from the columns


@pytest.mark.parametrize("serdes", [["value=avro"], ["value=avro:ev-value@1"], ["value=avro:ev-value@2"],
                                    ["value=avro:ev-value@3"], ["value=avro:ev-value@latest"]])
def test_writer_schemas_and_pinned_readers_print_alike(typed, monkeypatch, avro_path, serdes):
    (code, out, err), per_value, columns_per_value = both(
        monkeypatch, typed / "logs" / "ev-0", serdes=serdes, schemas=str(typed / "sr" / "_schemas-0"), fmt="%s\\n")
    if serdes == ["value=avro"]:
        assert code == 0 and columns_per_value == 0 and per_value == 150
        rows = [json.loads(line) for line in out.decode().splitlines()]
        assert {len(r) for r in rows} == {3, 4, 5}  # each value with its own writer schema's fields


def test_types_arrow_does_not_keep_print_value_by_value(typed, monkeypatch, avro_path):
    (code, out, err), per_value, columns_per_value = both(
        monkeypatch, typed / "logs", topic="odd", serdes=["value=avro"], schemas=str(typed / "sr" / "_schemas-0"),
        fmt="%s\\n")
    lines = out.decode().splitlines()
    assert code == 1
    assert f'{{"id":"{uuid.UUID(int=7)}"}}' in lines  # lower case, as fastavro's UUID prints
    assert '{"t":1700000000123456789}' in lines  # fastavro does not convert timestamp-nanos
    assert '{"t":"01:02:03.004000","d":"2024-02-29"}' in lines
    assert '{"v":1,"next":{"v":2,"next":null}}' in lines
    assert (per_value, columns_per_value) == (13, 10)  # odd-0 value by value, odd-1 from its column


def test_a_read_error_comes_after_the_records_before_it(typed, monkeypatch, tmp_path):
    """The read-ahead prints what it read before the error, then names the error, as before."""
    import shutil

    part = tmp_path / "all-0"
    shutil.copytree(typed / "logs" / "all-0", part)
    seg = next(part.glob("*.log"))
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a corrupt middle batch
    seg.write_bytes(bytes(data) + bytes(data[:200]))
    both(monkeypatch, part, serdes=["value=avro"], schemas=str(typed / "sr" / "_schemas-0"), fmt="%o %s\\n")


# ------------------------------------------------------------------------------------ plain JSON
PLAIN = {"type": "object", "properties": {
    "id": {"type": "integer"}, "x": {"type": "number"}, "s": {"type": ["null", "string"]}, "ok": {"type": "boolean"},
    "in": {"type": "object", "properties": {"a": {"type": "integer"}, "t": {"type": "array", "items": {"type": "string"}}}},
    "rows": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "number"}}}},
    "any": {}}}
PLAIN_VALUES = [b'{"id":1,"x":2.5,"s":"a","ok":true,"in":{"a":1,"t":["x"]},"rows":[{"v":1}],"any":null}',
                b'{"id": -0, "x": -0, "s": null}', b'{"x": -0.0, "extra": [1, 2], "id": 9223372036854775807}',
                b'{"x": 1e400, "s": "\\u00e9\\n\\"q\\"", "id": 3}', b'{"x": 123456789012345678901, "id": 1}',
                b'{"x": 0.1, "id": 1, "id": 2}', b'{}', b'{"in": {"t": []}, "rows": []}', b'{\n"id":\n5\n}',
                b'{"s": "\xc3\xa9 \xe2\x98\x83"}']
PLAIN_TEXT = [b'{"any": {"b": [1, {"c": "d"}]}, "id": 4}', b'{"any": "text"}', b'{"any": 1.50}']
PLAIN_BAD = [b'{"id": 1.5}', b'{"id": "1"}', b'[1, 2]', b'{"s": "\\ud800"}', b'not json', b'{"id": 1', b'"str"',
             b'{"id": 99999999999999999999}', b'{"s": 5}', b'{"ok": 1}', b'{"s": "\xff"}', b'null', b'{"x": true}']


@pytest.mark.parametrize("text", [False, True], ids=["objects", "with-text"])
def test_plain_json_with_a_schema_prints_as_the_per_value_path_prints_it(tmp_path, monkeypatch, backend, text):
    from kbatch.values import PlainJson

    schema = dict(PLAIN) if text else {**PLAIN, "properties": {k: v for k, v in PLAIN["properties"].items() if k != "any"}}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    r = random.Random(7)
    good = PLAIN_VALUES + (PLAIN_TEXT if text else [])
    batches = []
    for n in range(5):
        # (the last batch only values pyarrow's reader takes: the column comes from it, not value by value)
        recs = [(None, r.choice(good if n < 4 else PLAIN_VALUES[:3])) for _ in range(50)]
        if n % 2:
            for j, v in enumerate(PLAIN_BAD[n::2]):
                recs.insert(2 + 7 * j, (None, v))
        if n == 4:
            batches.append(recs)
            continue
        recs.insert(4, (None, None))
        recs.insert(6, (None, b""))
        batches.append(recs)
    _write_log(tmp_path / "logs" / "plain-0", batches[:4])
    _write_log(tmp_path / "logs" / "plain-1", batches[4:])  # (read ahead alone: pyarrow's reader takes it whole)
    calls = []
    real = PlainJson.to_json
    monkeypatch.setattr(PlainJson, "to_json", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    results = []
    for flag in (False, True):
        monkeypatch.setattr(S, "CAT_FROM_COLUMNS", flag)
        results.append(_cat(tmp_path / "logs", topic="plain", serdes=[f"value=json-plain:{tmp_path / 'schema.json'}"],
                            fmt="%o %s\\n"))
        results.append(len(calls))
    (old, per_value, new, both_runs) = results
    assert new == old and old[0] == 1 and b"ERROR" not in old[1]
    assert both_runs - per_value < per_value / 3  # most values came from the columns


def test_plain_json_inferred_and_json_schema_print_value_by_value(tmp_path, monkeypatch):
    """Without a given schema cat prints plain JSON as written, and JSON Schema values are the
    payload as written (fields the schema does not name, numbers as spelled): no column keeps that."""
    from support.schemas import json_value

    t = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    t.register("js-value", 1, 1, {"type": "object", "properties": {"n": {"type": "integer"}}}, "JSON")
    t.close()
    _write_log(tmp_path / "logs" / "plain-0", [[(None, b'{"b": 1.50, "a": [1]}'), (None, b'{"n": 1}')]])
    _write_log(tmp_path / "logs" / "js-0", [[(None, json_value(1, {"n": 1, "extra": 1.5})), (None, b"\x00x")]])
    for topic, serdes, want in (("plain", "value=json-plain", ['{"b":1.5,"a":[1]}', '{"n":1}']),
                                ("js", "value=json", ['{"n":1,"extra":1.5}'])):
        outs = []
        for flag in (False, True):
            monkeypatch.setattr(S, "CAT_FROM_COLUMNS", flag)
            outs.append(_cat(tmp_path / "logs", topic=topic, serdes=[serdes], schemas=str(tmp_path / "sr" / "_schemas-0"),
                             fmt="%s\\n"))
        assert outs[0] == outs[1]
        assert outs[1][1].decode().splitlines() == want, outs[1][2]


# ------------------------------------------------------------------------------------ Protobuf
def _proto_files():
    """Two .proto files built as descriptors (no protoc): proto3 with every scalar, enums, nested,
    repeated, oneof, optional, a map and a Timestamp; proto2 with defaults and a closed enum."""
    from google.protobuf import descriptor_pb2, timestamp_pb2

    F = descriptor_pb2.FieldDescriptorProto
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    p3 = descriptor_pb2.FileDescriptorProto(name="t3.proto", package="t3", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto"])
    p3.enum_type.add(name="Color").value.extend([descriptor_pb2.EnumValueDescriptorProto(name=n, number=i)
                                                 for i, n in enumerate(["RED", "GREEN", "BLUE"])])
    inner = p3.message_type.add(name="Inner")
    inner.field.add(name="s", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    inner.field.add(name="a", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    inner.field.add(name="xs", number=3, type=F.TYPE_SINT64, label=F.LABEL_REPEATED)
    msg = p3.message_type.add(name="Msg")
    scalars = [("late", F.TYPE_INT32, 40), ("i32", F.TYPE_INT32, 1), ("i64", F.TYPE_INT64, 2), ("u32", F.TYPE_UINT32, 3),
               ("u64", F.TYPE_UINT64, 4), ("s32", F.TYPE_SINT32, 5), ("s64", F.TYPE_SINT64, 6),
               ("f32", F.TYPE_FIXED32, 7), ("f64", F.TYPE_FIXED64, 8), ("sf32", F.TYPE_SFIXED32, 9),
               ("sf64", F.TYPE_SFIXED64, 10), ("fl", F.TYPE_FLOAT, 11), ("db", F.TYPE_DOUBLE, 12),
               ("b", F.TYPE_BOOL, 13), ("s", F.TYPE_STRING, 14), ("by", F.TYPE_BYTES, 15)]
    for name, typ, num in scalars:
        msg.field.add(name=name, number=num, type=typ, label=F.LABEL_OPTIONAL)
    msg.field.add(name="c", number=16, type=F.TYPE_ENUM, type_name=".t3.Color", label=F.LABEL_OPTIONAL)
    msg.field.add(name="inner", number=17, type=F.TYPE_MESSAGE, type_name=".t3.Inner", label=F.LABEL_OPTIONAL)
    msg.field.add(name="inners", number=18, type=F.TYPE_MESSAGE, type_name=".t3.Inner", label=F.LABEL_REPEATED)
    msg.field.add(name="packed", number=19, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    msg.field.add(name="strs", number=20, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    msg.field.add(name="colors", number=25, type=F.TYPE_ENUM, type_name=".t3.Color", label=F.LABEL_REPEATED)
    msg.field.add(name="fls", number=26, type=F.TYPE_FLOAT, label=F.LABEL_REPEATED)
    msg.oneof_decl.add(name="choice")
    msg.oneof_decl.add(name="_opt")
    for name, typ, num, tn in (("cs", F.TYPE_STRING, 22, None), ("ci", F.TYPE_INT64, 23, None),
                               ("cm", F.TYPE_MESSAGE, 24, ".t3.Inner")):
        f = msg.field.add(name=name, number=num, type=typ, label=F.LABEL_OPTIONAL, oneof_index=0)
        if tn:
            f.type_name = tn
    msg.field.add(name="opt", number=21, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL, oneof_index=1,
                  proto3_optional=True)
    mp = p3.message_type.add(name="WithMap")
    entry = mp.nested_type.add(name="MEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    mp.field.add(name="m", number=1, type=F.TYPE_MESSAGE, type_name=".t3.WithMap.MEntry", label=F.LABEL_REPEATED)
    wt = p3.message_type.add(name="WithTs")
    wt.field.add(name="t", number=1, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=F.LABEL_OPTIONAL)
    p2 = descriptor_pb2.FileDescriptorProto(name="t2.proto", package="t2", syntax="proto2")
    p2.enum_type.add(name="Size").value.extend([descriptor_pb2.EnumValueDescriptorProto(name=n, number=i + 1)
                                                for i, n in enumerate(["S", "M"])])
    m2 = p2.message_type.add(name="P2")
    m2.field.add(name="a", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, default_value="5")
    m2.field.add(name="z", number=2, type=F.TYPE_ENUM, type_name=".t2.Size", label=F.LABEL_OPTIONAL)
    m2.field.add(name="r", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    m2.field.add(name="u", number=4, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    return ts, p3, p2


@pytest.mark.parametrize("plan", ["kernel", "twin"])
def test_protobuf_prints_as_message_to_dict(tmp_path, monkeypatch, backend, plan):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    import kbatch.values.protobuf_program as PP

    if plan == "twin":  # the plan's pure twin decodes the columns
        monkeypatch.setattr(PP, "K", None)
    from kbatch.values import Protobuf
    from support.schemas import protobuf_value

    ts, p3, p2 = _proto_files()
    pool = descriptor_pool.DescriptorPool()
    for f in (ts, p3, p2):
        pool.Add(f)
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "7.desc").write_bytes(descriptor_pb2.FileDescriptorSet(file=[ts, p3]).SerializeToString())
    (tmp_path / "schemas" / "8.desc").write_bytes(descriptor_pb2.FileDescriptorSet(file=[p2]).SerializeToString())
    cls = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))
           for n in ("t3.Msg", "t3.Inner", "t3.WithMap", "t3.WithTs", "t2.P2")}
    r = random.Random(3)
    floats = [0.0, -0.0, 0.1, 1e30, float("nan"), float("inf"), float("-inf"), 3.4028234663852886e38, 1.5]

    def inner():
        return cls["t3.Inner"](s=r.choice(["", "x", "é\u2603"]), a=r.choice([0, -1, 2**31 - 1]),
                               xs=[r.choice([0, -2**63, 2**63 - 1]) for _ in range(r.randrange(3))])

    def msg():
        m = cls["t3.Msg"](late=r.choice([0, 7]), i32=r.choice([0, -5, 2**31 - 1]), i64=r.choice([0, -2**63, 2**63 - 1]),
                          u32=r.choice([0, 2**32 - 1]), u64=r.choice([0, 2**64 - 1]), s32=r.choice([0, -2**31]),
                          s64=r.choice([0, -1]), f32=r.choice([0, 2**32 - 1]), f64=r.choice([0, 2**64 - 1]),
                          sf32=r.choice([0, -1]), sf64=r.choice([0, -2**63]), fl=r.choice(floats), db=r.choice(floats),
                          b=r.random() < 0.5, s=r.choice(["", "a\"b\\", "\u0000"]), by=r.choice([b"", b"\x00\xff"]),
                          c=r.choice([0, 1, 2, 7]), packed=[r.randrange(-9, 9) for _ in range(r.randrange(3))],
                          strs=r.choice([[], ["", "x"]]), colors=r.choice([[], [0, 2, 9]]),
                          fls=r.choice([[], [0.1, -0.0, float("nan")]]))
        if r.random() < 0.5:
            m.inner.CopyFrom(inner()) if r.random() < 0.7 else m.inner.SetInParent()
        m.inners.extend(inner() for _ in range(r.randrange(3)))
        choice = r.randrange(4)
        if choice == 1:
            m.cs = r.choice(["", "y"])
        elif choice == 2:
            m.ci = r.choice([0, 5])
        elif choice == 3:
            m.cm.CopyFrom(inner())
        if r.random() < 0.5:
            m.opt = r.choice([0.0, -0.0, 2.5])
        return protobuf_value(7, m, [1])

    def p2():
        m = cls["t2.P2"]()
        if r.random() < 0.5:
            m.a = r.choice([0, 5, 6])
        if r.random() < 0.5:
            m.z = r.choice([1, 2])
        m.r.extend(["q"] * r.randrange(2))
        if r.random() < 0.5:
            m.u = 0
        return protobuf_value(8, m)
    good = msg()
    bad = [good[:-1], good[:6] + b"\xff\xff\xff", protobuf_value(7, cls["t3.Inner"](s="x"), [9]), b"\x00\x00\x00\x00\x63\x00",
           frame(7, b"\x02\x01" + b"\x72\x02\xc3\x28"),  # Msg.s (14) not UTF-8
           frame(7, b"\x02\x01" + b"\x0f"), b"\x01nope"]
    others = [protobuf_value(7, cls["t3.WithMap"](m={"b": 1, "a": 2, "c": 0}), [2]),
              protobuf_value(7, cls["t3.WithTs"](t={"seconds": 1_700_000_000, "nanos": 123456789}), [3]),
              protobuf_value(7, inner_value := cls["t3.Inner"](s="i", a=3), [0])]
    del inner_value
    batches = []
    for n in range(4):
        recs = [(None, msg() if n % 2 else p2()) for _ in range(60)]
        if n == 3:
            for j, v in enumerate(bad + others):
                recs.insert(1 + 5 * j, (None, v))
        recs.insert(3, (None, None))
        batches.append(recs)
    _write_log(tmp_path / "logs" / "pb-0", batches[:2])  # (read ahead alone: all from columns)
    _write_log(tmp_path / "logs" / "pb-1", batches[2:])
    calls = []
    real = Protobuf.to_json
    monkeypatch.setattr(Protobuf, "to_json", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    results = []
    for flag in (False, True):
        monkeypatch.setattr(S, "CAT_FROM_COLUMNS", flag)
        for kw in (dict(fmt="%o %s\\n"), dict(as_json=True)):
            results.append(_cat(tmp_path / "logs", topic="pb", serdes=["value=protobuf"],
                                schemas=str(tmp_path / "schemas"), **kw))
        results.append(len(calls))
    assert results[3:5] == results[0:2]
    assert results[0][0] == 1 and b'"i64":"-9223372036854775808"' in results[0][1]
    per_value, columns_per_value = results[2], results[5] - results[2]
    assert columns_per_value < per_value / 5  # the good values came from the columns


# ------------------------------------------------------------------------------------ generated Avro schemas
def _gen_schemas():
    """Avro schemas of every type and logical type, unions of several branches, nested (hypothesis)."""
    from hypothesis import strategies as st

    names = iter(range(10**9))
    logical = [("int", "date"), ("int", "time-millis"), ("long", "time-micros"), ("long", "timestamp-millis"),
               ("long", "timestamp-micros"), ("long", "local-timestamp-millis"), ("long", "local-timestamp-micros"),
               ("string", "uuid"), ("long", "timestamp-nanos")]

    def leaf(k):
        n = next(names)
        if k == "enum":
            return {"type": "enum", "name": f"E{n}", "symbols": ["A", "B"]}
        if k == "fixed":
            return {"type": "fixed", "name": f"F{n}", "size": 2}
        if k == "dec":
            return {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}
        if k == "decf":
            return {"type": "fixed", "name": f"D{n}", "size": 6, "logicalType": "decimal", "precision": 14, "scale": 0}
        if isinstance(k, tuple):
            return {"type": k[0], "logicalType": k[1]}
        return k
    prim = st.sampled_from(["boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed", "dec",
                            "decf", *logical]).map(leaf)

    def tree(depth):
        if depth >= 2:
            return prim
        inner = st.deferred(lambda: tree(depth + 1))
        branch = inner.filter(lambda s: not isinstance(s, list))
        return st.one_of(
            prim, st.lists(branch, min_size=1, max_size=3).map(lambda bs: ["null", *bs]),
            st.lists(branch, min_size=2, max_size=3), inner.map(lambda s: {"type": "array", "items": s}),
            inner.map(lambda s: {"type": "map", "values": s}),
            st.lists(inner, min_size=1, max_size=3).map(lambda fs: {
                "type": "record", "name": f"R{next(names)}", "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fs)]}))
    return tree(0)


def _distinct(branches):
    """A union's branches with one of each Avro type (the spec's rule), named types by name."""
    seen, out = set(), []
    for b in branches:
        key = b.get("name") or b.get("type") if isinstance(b, dict) and b.get("type") in ("record", "enum", "fixed") \
            else (b.get("type") if isinstance(b, dict) else b)
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


def _gen_value(draw, s):
    from hypothesis import strategies as st

    if isinstance(s, list):
        return _gen_value(draw, draw(st.sampled_from(s)))
    if isinstance(s, dict):
        t, lt = s["type"], s.get("logicalType")
        if lt == "decimal":
            return decimal.Decimal(draw(st.integers(-10**s["precision"] + 1, 10**s["precision"] - 1))).scaleb(-s["scale"])
        if lt == "uuid":
            return str(draw(st.uuids()))
        if lt == "date":
            return draw(st.integers(-700_000, 2_900_000))
        if lt == "time-millis":
            return draw(st.integers(0, 86_399_999))
        if lt == "time-micros":
            return draw(st.integers(0, 86_399_999_999))
        if lt is not None:
            return draw(st.integers(-2**50, 2**50))
        if t == "enum":
            return draw(st.sampled_from(s["symbols"]))
        if t == "fixed":
            return draw(st.binary(min_size=s["size"], max_size=s["size"]))
        if t == "array":
            return [_gen_value(draw, s["items"]) for _ in range(draw(st.integers(0, 2)))]
        if t == "map":
            return {draw(st.text(max_size=3)): _gen_value(draw, s["values"]) for _ in range(draw(st.integers(0, 2)))}
        if t == "record":
            return {f["name"]: _gen_value(draw, f["type"]) for f in s["fields"]}
        return _gen_value(draw, t)
    return draw({"null": st.none(), "boolean": st.booleans(), "int": st.integers(-2**31, 2**31 - 1),
                 "long": st.integers(-2**63, 2**63 - 1), "float": st.floats(width=32), "double": st.floats(),
                 "string": st.text(max_size=6), "bytes": st.binary(max_size=6)}[s])


def _fix_unions(s):
    if isinstance(s, list):
        return _distinct([_fix_unions(b) for b in s])
    if isinstance(s, dict):
        out = dict(s)
        if "items" in s:
            out["items"] = _fix_unions(s["items"])
        if "values" in s:
            out["values"] = _fix_unions(s["values"])
        if "fields" in s:
            out["fields"] = [dict(f, type=_fix_unions(f["type"])) for f in s["fields"]]
        return out
    return s


def test_generated_avro_schemas_render_as_each_value_alone(avro_path):
    """rendered() (cat's column path) against each value decoded alone (to_json + json.dumps), over
    generated schemas: every value it gives is byte for byte the per-value answer."""
    import os

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from kbatch.values import TopicSchemas
    from support.schemas import schema_key, schema_value

    @settings(max_examples=int(os.environ.get("KBATCH_CAT_TYPED_EXAMPLES", "40")), deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data):
        fields = data.draw(st.lists(_gen_schemas(), min_size=1, max_size=4))
        writer = _fix_unions({"type": "record", "name": "Top",
                              "fields": [{"name": f"c{i}", "type": t} for i, t in enumerate(fields)]})
        try:
            import fastavro

            fastavro.parse_schema(writer)
        except Exception:  # (a union hypothesis made that Avro does not allow)
            return
        records = [_gen_value(data.draw, writer) for _ in range(data.draw(st.integers(1, 6)))]
        try:
            values = [avro_value(1, writer, rec) for rec in records]
        except Exception:  # (a value fastavro's writer puts in another branch than drawn: skip)
            return
        values = values + [None, b""] + values[:1]
        src = TopicSchemas.from_records([(0, schema_key("t-value", 1), schema_value("t-value", 1, 1, writer))])
        fmt = Avro(src)
        serdes = S._SchemaSerdes(fmt, "value")
        serdes.prepare(values, list(range(len(values))))  # (what the column path raises, cat's prepare swallows)
        for v in filter(None, values):
            try:
                want = json.dumps(fmt.to_json(v), ensure_ascii=False, separators=(",", ":")).encode()
            except ValueError as e:
                want = repr(e)
            try:
                got = serdes(v)
            except ValueError as e:
                got = repr(e)
            assert got == want, writer
    check()


def test_unions_of_one_python_class_print_from_the_column(typed, monkeypatch, avro_path):
    """int|long, float|double, record|map: the column's branch is the writer's (values.avro_types.
    tag_unions; fastavro's column path once picked it by the value: a double 0.1 into the float
    branch), so every value prints from the column. With a pinned reader schema (the first branch
    that holds the value: maybe not the writer's) only the kernel's column is used."""
    from kbatch.values import TopicSchemas
    from support.schemas import schema_key, schema_value

    want = ['{"x":5,"y":0.1,"z":{"k":5}}', '{"x":-3,"y":1.5,"z":{"k":7}}', '{"x":1099511627776,"y":-0.0,"z":{}}']
    (code, out, err), per_value, columns_per_value = both(
        monkeypatch, typed / "logs" / "amb-0", serdes=["value=avro"], schemas=str(typed / "sr" / "_schemas-0"),
        fmt="%s\\n")
    assert code == 0 and out.decode().splitlines()[:3] == want
    assert columns_per_value == 0 and per_value == 60
    (code, out, err), per_value, columns_per_value = both(
        monkeypatch, typed / "logs" / "amb-0", serdes=["value=avro:amb-value@1"],
        schemas=str(typed / "sr" / "_schemas-0"), fmt="%s\\n")
    assert code == 0 and out.decode().splitlines()[:3] == want
    src = TopicSchemas.from_records([(0, schema_key("amb-value", 1), schema_value("amb-value", 1, 9, AMB))])
    fmt = Avro(src)
    try:  # (the kernel may not take unions of several types yet: then every value is decoded alone)
        P.program(AMB, [], fmt._node(9), P.columns(fmt._node(9)))
        kernel_takes = P.K is not None
    except P.Unsupported:
        kernel_takes = False
    assert columns_per_value == (0 if avro_path == "kernel" and kernel_takes else per_value) and per_value == 60
