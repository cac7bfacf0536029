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
    {"name": "u", "type": ["null", "int", "string", INNER, {"type": "array", "items": "long"},
                           {"type": "map", "values": "int"}]},
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
    u = r.choice([None, r.randrange(-2**31, 2**31), "s", _inner(r), [1, -2], {"a": 1}, {}, []])
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
            "opt": r.choice([None, "", "x"]), "u": u, "arr": [_inner(r) for _ in range(r.randrange(3))],
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
                                            6: ("list-value", 1, LIST),
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
