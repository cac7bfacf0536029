"""Round trip over generated Avro schemas and records: fastavro writes, kbatch.values reads back the
same values, as Python objects and through the typed Arrow column (either decoding path)."""
import math

import pytest

pytest.importorskip("fastavro")
pytest.importorskip("pyarrow")
from hypothesis import given, settings
from hypothesis import strategies as st

from kbatch.values import Avro, TopicSchemas
from support.schemas import avro_value, schema_key, schema_value

PRIMS = ["boolean", "int", "long", "float", "double", "string", "bytes"]
_names = iter(range(10**9))


def schemas(depth=0):
    prim = st.sampled_from(PRIMS)
    if depth >= 2:
        return prim
    inner = st.deferred(lambda: schemas(depth + 1))
    return st.one_of(
        prim,
        inner.map(lambda s: ["null", s] if not isinstance(s, list) else s),
        inner.map(lambda s: {"type": "array", "items": s}),
        inner.map(lambda s: {"type": "map", "values": s}),
        st.lists(inner, min_size=1, max_size=4).map(
            lambda fs: {"type": "record", "name": f"R{next(_names)}",
                        "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fs)]}))


def values_for(s):
    if isinstance(s, list):
        return st.one_of(st.none(), values_for(s[1]))
    if isinstance(s, dict):
        if s["type"] == "array":
            return st.lists(values_for(s["items"]), max_size=4)
        if s["type"] == "map":
            return st.dictionaries(st.text(max_size=5), values_for(s["values"]), max_size=4)
        return st.fixed_dictionaries({f["name"]: values_for(f["type"]) for f in s["fields"]})
    return {"boolean": st.booleans(), "int": st.integers(-2**31, 2**31 - 1), "long": st.integers(-2**63, 2**63 - 1),
            "float": st.floats(width=32, allow_nan=False), "double": st.floats(allow_nan=False),
            "string": st.text(max_size=10), "bytes": st.binary(max_size=10)}[s]


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isinf(a) and a == b)
    if isinstance(a, dict) and isinstance(b, list):      # an Arrow map reads back as (key, value) pairs
        b = dict(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=60)
@given(st.data())
def test_generated_schemas_round_trip(data):
    fields = data.draw(st.lists(schemas(), min_size=1, max_size=5))
    schema = {"type": "record", "name": "Top", "fields": [{"name": f"c{i}", "type": t} for i, t in enumerate(fields)]}
    import json
    src = TopicSchemas.from_records([(0, schema_key("t-value", 1), schema_value("t-value", 1, 1, json.loads(json.dumps(schema))))])
    records = data.draw(st.lists(values_for(schema), min_size=1, max_size=6))
    framed = [avro_value(1, schema, r) for r in records]
    fmt = Avro(src)
    for r, v in zip(records, framed):
        assert same(r, fmt.decode(v))
    got = fmt.to_arrow(framed + [None]).to_pylist()
    assert got[-1] is None
    for r, g in zip(records, got):
        assert same(r, g), (r, g)
    # the compiled kernel (Arrow buffers in and out) gives the same column as the fastavro path
    import pyarrow as pa
    column = pa.array(framed + [None], pa.binary())
    kernel = fmt.decode_arrow(column, None, "value")
    if KERNEL:
        assert kernel is not None
        assert kernel.equals(fmt.to_arrow(framed + [None])), (kernel, fmt.to_arrow(framed + [None]))


from kbatch.values.avro_program import K as _K  # None: a pure install or KBATCH_BACKEND=python

KERNEL = _K is not None


@settings(max_examples=300)
@given(st.binary(max_size=64), st.sampled_from(["one", "all"]))
def test_kernel_takes_any_bytes_without_harm(payload, shape):
    """Arbitrary payloads under a real schema id: the kernel either gives what the fastavro path
    gives, or declines (None) and the fastavro path decides; it never reads out of bounds or loops."""
    import pyarrow as pa
    from kbatch.values import PayloadError, frame
    schema = {"type": "record", "name": "Fz", "fields": [
        {"name": "a", "type": "long"}, {"name": "s", "type": ["null", "string"]},
        {"name": "xs", "type": {"type": "array", "items": "int"}}, {"name": "m", "type": {"type": "map", "values": "null"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
        {"name": "f", "type": {"type": "fixed", "name": "F2", "size": 2}}, {"name": "g", "type": "double"}]}
    import json
    src = TopicSchemas.from_records([(0, schema_key("f", 1), schema_value("f", 1, 1, json.loads(json.dumps(schema))))])
    fmt = Avro(src)
    values = [frame(1, payload)] if shape == "one" else [frame(1, payload[i:]) for i in range(0, len(payload) + 1, 7)]
    got = fmt.decode_arrow(pa.array(values, pa.binary()), None, "value") if KERNEL else None
    try:
        slow = fmt.to_arrow(values)
    except PayloadError:
        slow = None
    if got is not None and slow is not None:
        assert got.equals(slow)
