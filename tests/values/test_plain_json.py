"""Plain (unframed) JSON values as typed columns: kbatch.values.PlainJson, its fast path (pyarrow's
JSON reader) against the reference (json.loads, each value made to fit the schema), inference,
bad values under each on_decode_error mode, decode_columns and read_topic."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

import kbatch
from kbatch.values import PayloadError, PayloadLimitError, PlainJson, infer_schema
from kbatch.values.json_schema import _node, _shape
from kbatch.values.plain_json import _fast

SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "user": {"type": "string"}, "amount": {"type": "number"}, "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "addr": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}},
    "pts": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}}}}


def batch(values, keys=None):
    b = kbatch.BatchBuilder()
    for i, v in enumerate(values):
        b.append(1000 + i, None if keys is None else keys[i], v)
    return b.build()


def reference(values, schema):
    """json.loads, then each value made to fit the schema's Arrow type (what the fast path must equal)."""
    node = _node(schema, schema)
    return pa.array([None if v is None else _shape(json.loads(v), node) for v in values], node.type)


# ------------------------------------------------------------------------------------ generated values
ints = st.integers(-2**63, 2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
maybe = lambda s: st.none() | s  # noqa: E731
obj = st.fixed_dictionaries({}, optional={
    "id": maybe(ints), "user": maybe(text), "amount": maybe(floats | ints), "ok": maybe(st.booleans()),
    "tags": maybe(st.lists(maybe(text), max_size=3)),
    "addr": maybe(st.fixed_dictionaries({}, optional={"city": maybe(text), "zip": maybe(ints)})),
    "pts": maybe(st.lists(maybe(st.fixed_dictionaries({}, optional={"x": maybe(floats)})), max_size=3)),
    "extra": maybe(st.recursive(st.none() | st.booleans() | ints | text, lambda c: st.lists(c, max_size=2) |
                                st.dictionaries(text, c, max_size=2), max_leaves=4)),
})


def dumps(v, pretty):
    return json.dumps(v, ensure_ascii=pretty, indent=1 if pretty else None).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(maybe(obj), st.booleans()), max_size=30))
def test_typed_column_equals_the_json_loads_reference(rows):
    values = [None if v is None else dumps(v, pretty) for v, pretty in rows]
    want = reference(values, SCHEMA)
    got = kbatch.decode_columns(batch(values), value_schema=PlainJson(SCHEMA)).column("value").combine_chunks()
    assert got.equals(want)
    fast = _fast(pa.array(values, pa.binary()), _node(SCHEMA, SCHEMA))
    if fast is not None:  # where the fast path answers, it answers the reference's
        assert fast.equals(want)


def test_the_fast_path_takes_plain_object_columns():
    values = [json.dumps({"id": i, "user": f"u{i}", "tags": ["a"], "addr": {"city": "Oslo"}}).encode() if i % 7
              else None for i in range(200)]
    fast = _fast(pa.array(values, pa.binary()), _node(SCHEMA, SCHEMA))
    assert fast is not None and fast.equals(reference(values, SCHEMA))


@pytest.mark.parametrize("value", [b'{"tags":' + b"[" * 101 + b"]" * 101 + b"}", b"null", b" {}", b"5", b"[1]", b'"s"', b"", b'{"id":1}{"id":2}', b'{"id":1}\n{"id":2}', b'{"user":"}',
                                   b'{"id":1,"id":2}', b'{"id":1.0}', b'{"id":1,"zz":"\xff"}', b'{"user":"\xff"}',
                                   b'{"zz":"\xed\xa0\x80"}', b'{"user":"\\ud800"}', b'{"zz":1e999}', b'{"user":1}', b'{"id":9223372036854775808}'])
def test_what_the_fast_path_passes_on_the_reference_decides(value):
    """pyarrow reads a top-level null as an object of nulls (and crashes on it alone), two objects
    in a value as two rows, a duplicate key as an error: those values go value by value."""
    values = [b'{"id":0}', value]
    assert _fast(pa.array(values, pa.binary()), _node(SCHEMA, SCHEMA)) is None
    try:
        want = reference(values, SCHEMA).to_pylist()
    except Exception:  # noqa: BLE001 - the reference refuses it: so must the format
        with pytest.raises(PayloadError) as e:
            kbatch.decode_columns(batch(values), value_schema=PlainJson(SCHEMA))
        assert e.value.offset == 1
        return
    got = kbatch.decode_columns(batch(values), value_schema=PlainJson(SCHEMA)).column("value").to_pylist()
    assert got == want


def test_values_back_to_back_stay_apart():
    """The fast path reads the values as they lie in the column, with nothing between them."""
    values = [b'{"user":"}{"}', b'{"user":"a\\"}{"}', b'{"tags":["]","{"]}', None, b'{"addr":{"city":"}"}}']
    fast = _fast(pa.array(values, pa.binary()), _node(SCHEMA, SCHEMA))
    assert fast is not None and fast.equals(reference(values, SCHEMA))
    for broken in ([b'{"user":"}', b'{"id":1}'], [b'{"tags":[}', b'{"id":1}]}'], [b'{"addr":{}', b'{"id":1}}']):
        assert _fast(pa.array(broken, pa.binary()), _node(SCHEMA, SCHEMA)) is None


def test_nulls_tombstones_and_an_all_null_column():
    got = kbatch.decode_columns(batch([None, b'{"id":1}', None]), value_schema=PlainJson(SCHEMA))
    assert got.column("value").to_pylist()[0] is None and got.column("value").to_pylist()[1]["id"] == 1
    t = kbatch.decode_columns(batch([None, None]), value_schema=PlainJson(SCHEMA))
    assert t.column("value").to_pylist() == [None, None]
    assert t.schema.field("value").type == _node(SCHEMA, SCHEMA).type
    inferred = PlainJson()
    assert kbatch.decode_columns(batch([None]), value_schema=inferred).column("value").null_count == 1
    assert inferred.schema_json is None  # nothing seen to infer from: still open


def test_nested_objects_and_arrays_and_json_text_columns():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "array", "items": {
        "type": "integer"}}}, "any": {}, "o": {"type": "object", "properties": {"p": {"type": "object", "properties": {
            "q": {"type": "boolean"}}}}}}}
    values = [b'{"a":[[1,2],[],null],"any":{"x":[1]},"o":{"p":{"q":true}}}', b'{"any":"s","o":{"p":null}}']
    got = kbatch.decode_columns(batch(values), value_schema=PlainJson(schema)).column("value").to_pylist()
    assert got == [{"a": [[1, 2], [], None], "any": '{"x":[1]}', "o": {"p": {"q": True}}},
                   {"a": None, "any": "s", "o": {"p": None}}]


def test_inference_over_a_sample_as_spark_infers():
    values = [b'{"id":1,"v":1,"s":"a","mix":1,"n":null,"arr":[1],"o":{"x":1}}',
              b'{"id":2,"v":2.5,"s":"b","mix":"x","n":null,"arr":[],"o":{"y":"z"}}']
    s = infer_schema(values)
    assert s == {"type": "object", "properties": {
        "id": {"type": "integer"}, "v": {"type": "number"}, "s": {"type": "string"}, "mix": {}, "n": {},
        "arr": {"type": "array", "items": {"type": "integer"}},
        "o": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}}}}
    t = kbatch.decode_columns(batch(values), value_schema=PlainJson()).column("value")
    assert t.type == pa.struct([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string()), ("mix", pa.string()),
                                ("n", pa.string()), ("arr", pa.list_(pa.int64())),
                                ("o", pa.struct([("x", pa.int64()), ("y", pa.string())]))])
    assert t.to_pylist()[1]["mix"] == "x" and t.to_pylist()[0]["mix"] == "1"
    # the sample bounds inference; the schema then stays, and a later misfit is that record's error
    fmt = PlainJson(sample=1)
    with pytest.raises(PayloadError, match="expected integer at /id, found string") as e:
        kbatch.decode_columns(batch([b'{"id":1}', b'{"id":"two"}']), value_schema=fmt)
    assert e.value.offset == 1
    assert fmt.schema_json == {"type": "object", "properties": {"id": {"type": "integer"}}}


def test_mismatching_types_name_the_record_and_where():
    with pytest.raises(PayloadError) as e:
        kbatch.decode_columns(batch([b'{"id":1}', b'{"addr":{"zip":"x"}}']), "orders", 3, value_schema=PlainJson(SCHEMA))
    assert e.value.offset == 1 and "expected integer at /addr/zip, found string" in str(e.value)
    assert str(e.value).startswith("value in orders [3] at offset 1")


BAD = [b'{"id":1}', b'{oops', b'{"id":2}', b'{"id":"x"}', b"[" * 200 + b"]" * 200, b'{"id":3}']


def test_invalid_json_fail_mode_raises_the_first_in_row_order():
    with pytest.raises(PayloadError) as e:
        kbatch.decode_columns(batch(BAD), value_schema=PlainJson(SCHEMA))
    assert e.value.offset == 1 and "not JSON" in str(e.value)


def test_invalid_json_null_and_callable_modes_locate_every_bad_record():
    t = kbatch.decode_columns(batch(BAD), value_schema=PlainJson(SCHEMA), on_decode_error="null")
    assert [None if v is None else v["id"] for v in t.column("value").to_pylist()] == [1, None, 2, None, None, 3]
    seen = []
    kbatch.decode_columns(batch(BAD), value_schema=PlainJson(SCHEMA),
                          on_decode_error=lambda row, e: seen.append((row, e.offset, type(e))))
    assert seen == [(1, 1, PayloadError), (3, 3, PayloadError), (4, 4, PayloadLimitError)]


def test_a_schema_spec_and_its_errors(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(SCHEMA))
    assert PlainJson.from_spec(f"json-plain:{p}").schema_json == SCHEMA
    assert PlainJson.from_spec("json-plain").schema_json is None
    assert PlainJson.from_spec('json-plain:{"type":"object","properties":{"a":{"type":"string"}}}').given
    from kbatch.values import SchemaSourceError

    with pytest.raises(SchemaSourceError, match="cannot be read"):
        PlainJson.from_spec(f"json-plain:{tmp_path / 'missing.json'}")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(SchemaSourceError, match="does not parse"):
        PlainJson.from_spec(f"json-plain:{tmp_path / 'bad.json'}")


def test_keys_too_and_large_binary_columns():
    values = [b'{"id":1}', b'{"id":2}']
    t = kbatch.decode_columns(batch(values, keys=[b'{"k":"a"}', b'{"k":"b"}']), key_schema=PlainJson(),
                              value_schema=PlainJson(SCHEMA))
    assert t.column("key").to_pylist() == [{"k": "a"}, {"k": "b"}]
    fmt = PlainJson(SCHEMA)
    assert fmt.decode_column(pa.array(values, pa.large_binary())).to_pylist() == \
        fmt.decode_column(pa.array(values, pa.binary())).to_pylist()


def test_read_topic_types_plain_json(tmp_path):
    log = kbatch.Log.create(str(tmp_path / "logs" / "events-0"))
    log.append(batch([b'{"id":1}', None, b'{"id":"x"}']), now_ms=5000)
    log.close()
    t = kbatch.read_topic(str(tmp_path / "logs"), value_schema="json-plain:" + json.dumps(SCHEMA),
                          on_decode_error="null")
    assert [None if v is None else v["id"] for v in t.column("value").to_pylist()] == [1, None, None]
    with pytest.raises(PayloadError) as e:
        kbatch.read_topic(str(tmp_path / "logs"), value_schema=PlainJson(SCHEMA))
    assert (e.value.topic, e.value.partition, e.value.offset) == ("events", 0, 2)
    with pytest.raises(ValueError, match="json-plain"):
        kbatch.read_topic(str(tmp_path / "logs"), value_schema="avro")


def test_numbers_past_double_and_integers_past_2_53():
    fmt = PlainJson({"type": "object", "properties": {"f": {"type": "number"}}})
    got = fmt.decode_column(pa.array([b'{"f":9007199254740993}', b'{"f":1e400}'], pa.binary())).to_pylist()
    assert got == [{"f": 9007199254740992.0}, {"f": float("inf")}]  # as json.loads reads them
    big = [b'{"f":' + b"9" * 400 + b"}", b'{"f":-' + b"9" * 400 + b"}"]
    assert fmt.decode_column(pa.array(big, pa.binary())).to_pylist() == [{"f": float("inf")}, {"f": float("-inf")}]
    assert fmt.to_arrow(big).to_pylist() == [{"f": float("inf")}, {"f": float("-inf")}]  # the reference, too


def test_bad_values_spread_over_many_blocks_are_each_found_in_row_order():
    """With on_error the column goes by blocks, a refused block in eighths, then value by value."""
    from kbatch.values import plain_json

    n = plain_json.BLOCK * 2 + 100
    bad = {3, 64, 65, plain_json.BLOCK - 1, plain_json.BLOCK + 700, n - 1}
    values = [b"{oops" if i in bad else None if i % 97 == 0 else b'{"id":%d}' % i for i in range(n)]
    seen = []
    got = PlainJson(SCHEMA).decode_column(pa.array(values, pa.binary()), pa.array(range(10, 10 + n)),
                                          on_error=lambda row, e: seen.append((row, e.offset)))
    assert seen == [(r, r + 10) for r in sorted(bad)]
    assert [None if v is None else v["id"] for v in got.to_pylist()] == \
        [None if i in bad or i % 97 == 0 else i for i in range(n)]


def test_negative_zero_reads_as_json_loads_and_sparks_from_json():
    """The integer -0 in a number field is 0.0 (json.loads then float(), and Spark's from_json),
    the number -0.0 (or -0e0) is -0.0, -0 in an integer field 0: on the fast path and value by
    value alike. (Arrow's equals() takes -0.0 for 0.0: the rows are compared by repr.)"""
    values = [b'{"amount":-0,"id":-0,"addr":{"zip":-0},"pts":[{"x":-0},{"x":-0.0}]}',
              b'{"amount":-0.0,"pts":[{"x":-0e0},{"x":0}]}', b'{"amount":0,"user":"a-0"}', None,
              b'{"amount":-0.5,"id":-1,"user":"-0"}']
    want = repr(reference(values, SCHEMA).to_pylist())
    assert want == repr([{"id": 0, "user": None, "amount": 0.0, "ok": None, "tags": None,
                          "addr": {"city": None, "zip": 0}, "pts": [{"x": 0.0}, {"x": -0.0}]},
                         {"id": None, "user": None, "amount": -0.0, "ok": None, "tags": None, "addr": None,
                          "pts": [{"x": -0.0}, {"x": 0.0}]},
                         {"id": None, "user": "a-0", "amount": 0.0, "ok": None, "tags": None, "addr": None,
                          "pts": None}, None,
                         {"id": -1, "user": "-0", "amount": -0.5, "ok": None, "tags": None, "addr": None, "pts": None}])
    fmt = PlainJson(SCHEMA)
    col = pa.array(values, pa.binary())
    assert repr(kbatch.decode_columns(batch(values), value_schema=fmt).column("value").to_pylist()) == want
    assert repr(fmt.decode_column(col, None, "value", on_error=lambda row, e: None).to_pylist()) == want
    for i in range(len(values)):  # each alone, and each with a row that has no -0
        for part in ([values[i]], [values[i], values[2]]):
            fast = _fast(pa.array(part, pa.binary()), _node(SCHEMA, SCHEMA))
            if fast is not None:
                assert repr(fast.to_pylist()) == repr(reference(part, SCHEMA).to_pylist())
    # integers only: pyarrow's -0 is the reference's 0, the fast path keeps the column
    ints = {"type": "object", "properties": {"id": {"type": "integer"}, "n": {"type": "array", "items": {"type": "integer"}}}}
    fast = _fast(pa.array([b'{"id":-0,"n":[-0,1]}'], pa.binary()), _node(ints, ints))
    assert fast is not None and repr(fast.to_pylist()) == repr([{"id": 0, "n": [0, 1]}])
