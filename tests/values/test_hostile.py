"""Hostile values (issue 38): nesting, item counts and JSON depth are bounded before the bytes are
trusted, in every value decoder, with the error shape of the read path (key or value, topic,
partition, offset, schema id). The cases that crashed or ate memory run in a subprocess, so a
SIGSEGV or a MemoryError fails the test instead of the test run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("fastavro")
pa = pytest.importorskip("pyarrow")
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.values import Avro, JsonSchema, PayloadError, SchemaSourceError, TopicSchemas, frame
from kbatch.values.avro_limits import check_value, ValueLimit
from kbatch.values.avro_program import K
from kbatch.values.errors import PayloadLimitError
from kbatch.columns.decode import iter_record_batches
from kbatch.values.limits import MAX_DEPTH, MAX_EMPTY_ITEMS, MAX_SCHEMA_JSON_DEPTH, JsonDepthError, json_loads
from support.schemas import SchemasTopic, avro_value, json_value, schema_key, schema_value, segment

SRC = os.path.dirname(os.path.dirname(os.path.abspath(kbatch.__file__)))
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: a record that contains itself: its values nest as deep as their bytes say
NODE = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "long"},
                                                     {"name": "next", "type": ["null", "Node"]}]}
#: an array of null: 2^31 items take no bytes at all
NULLS = {"type": "record", "name": "Nulls", "fields": [{"name": "xs", "type": {"type": "array", "items": "null"}}]}
#: an array of empty records (the compiled kernel's path) and of records of a zero-size fixed
EMPTIES = {"type": "record", "name": "Empties", "fields": [
    {"name": "a", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}},
    {"name": "n", "type": "long"},
    {"name": "b", "type": {"type": "array", "items": {"type": "record", "name": "Z", "fields": [
        {"name": "z", "type": {"type": "fixed", "name": "F0", "size": 0}}, {"name": "e", "type": "E"}]}}}]}
JSON_ORDER = {"type": "object", "properties": {"a": {"type": "integer"}, "tags": {"type": "array",
                                                                                   "items": {"type": "string"}}}}


def deep_array_schema(n: int) -> str:
    """An Avro schema text of n arrays inside each other (built as text: json.dumps recurses)."""
    return '{"type": "array", "items": ' * n + '"long"' + "}" * n


def zigzag(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63) if v < 0 else v << 1
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def node_payload(depth: int) -> bytes:
    """A Node value nested `depth` deep (each level: v = 0, then union branch 1 for the next)."""
    return b"\x00\x02" * (depth - 1) + b"\x00\x00"


NULL_BOMB = frame(2, zigzag(2**31) + b"\x00")  # 11 bytes: a block of 2^31 nulls, then the end of the array


def records():
    return [(0, schema_key("node-value", 1), schema_value("node-value", 1, 1, NODE)),
            (1, schema_key("nulls-value", 1), schema_value("nulls-value", 1, 2, NULLS)),
            (2, schema_key("deep-value", 1), schema_value("deep-value", 1, 3, deep_array_schema(3000))),
            (3, schema_key("events-value", 1), schema_value("events-value", 1, 4, JSON_ORDER, "JSON")),
            (4, schema_key("empties-value", 1), schema_value("empties-value", 1, 5, EMPTIES))]


@pytest.fixture
def source():
    return TopicSchemas.from_records(records())


def run_python(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter with this checkout's kbatch and the test helpers."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, TESTS]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=timeout)


PRELUDE = """
    import resource, sys
    from kbatch.values import Avro, TopicSchemas, frame
    from kbatch.values.errors import PayloadLimitError
    from values.test_hostile import records, node_payload, NULL_BOMB, zigzag
    src = TopicSchemas.from_records(records())
"""


# ------------------------------------------------------------------------------------ Avro: depth
def test_a_recursive_value_nested_100000_deep_is_refused_not_a_crash():
    """fastavro's C reader recursed once a level and died with SIGSEGV; now the payload is walked
    first and refused at the 101st level, on every path (one value, cat's JSON, the column)."""
    p = run_python(PRELUDE + """
    import pyarrow as pa
    value = frame(1, node_payload(100_000))
    fmt = Avro(src)
    for call in (lambda: fmt.decode(value, 7), lambda: fmt.to_json(value, 7),
                 lambda: fmt.decode_column(pa.array([value], pa.binary()), pa.array([7]))):
        try:
            call()
        except PayloadLimitError as e:
            print(e)
        else:
            print("decoded")
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line == ("value at offset 7 (schema id 1): the Avro value nests deeper than a value may: expected at "
                        f"most {MAX_DEPTH} levels of records, arrays and maps, found {MAX_DEPTH + 1} (at byte "
                        f"{2 * MAX_DEPTH} of the payload)")


def test_a_recursive_value_within_the_depth_decodes(source):
    fmt = Avro(source)
    got = fmt.decode(frame(1, node_payload(MAX_DEPTH)))
    depth = 0
    while got is not None:
        depth += 1
        got = got["next"]
    assert depth == MAX_DEPTH
    json.dumps(fmt.to_json(frame(1, node_payload(MAX_DEPTH))))  # cat's path: no RecursionError either
    with pytest.raises(PayloadLimitError, match="nests deeper"):
        fmt.decode(frame(1, node_payload(MAX_DEPTH + 1)))


def test_a_3000_deep_schema_is_a_schema_error(source):
    with pytest.raises(SchemaSourceError, match=r"value at offset 3 \(schema id 3\): the Avro schema does not "
                                                r"parse: JSON nests deeper than allowed: expected at most 400"):
        Avro(source).decode(frame(3, b"\x00"), offset=3)
    # deep enough to pass the JSON bound, too deep as a schema
    src = TopicSchemas.from_records([(0, schema_key("d", 1), schema_value("d", 1, 9, deep_array_schema(150)))])
    with pytest.raises(SchemaSourceError, match=f"expected at most {MAX_DEPTH} levels of records, arrays and "
                                                f"maps, found 150"):
        Avro(src).decode(frame(9, b"\x00"))
    src = TopicSchemas.from_records([(0, schema_key("d", 1), schema_value("d", 1, 9, deep_array_schema(MAX_DEPTH)))])
    assert Avro(src).decode(frame(9, b"\x02" * (MAX_DEPTH - 1) + b"\x00" * MAX_DEPTH)) is not None
    with pytest.raises(SchemaSourceError, match="the reader schema does not parse: JSON nests deeper"):
        Avro(source, reader_schema=deep_array_schema(3000))


def test_a_schema_that_doubles_at_each_level_is_refused():
    """Named types used twice a level: 2^40 types expanded (an Arrow type as large), from a short text."""
    fields = [{"name": "a", "type": {"type": "record", "name": "T0", "fields": [{"name": "x", "type": "long"}]}}]
    for i in range(1, 41):
        fields.append({"name": f"f{i}", "type": {"type": "record", "name": f"T{i}", "fields": [
            {"name": "l", "type": f"T{i - 1}"}, {"name": "r", "type": f"T{i - 1}"}]}})
    schema = {"type": "record", "name": "Top", "fields": fields}
    src = TopicSchemas.from_records([(0, schema_key("b", 1), schema_value("b", 1, 9, schema))])
    with pytest.raises(SchemaSourceError, match="larger than a schema may: expected at most 100000 types"):
        Avro(src).decode(frame(9, b"\x00"))


@pytest.mark.parametrize("typ, says", [
    ({"type": "fixed", "name": "F", "size": -1}, "expected 0 to 65536 bytes, found -1"),  # the kernel's memset: SIGSEGV
    ({"type": "fixed", "name": "F", "size": 2**31}, "expected 0 to 65536 bytes, found 2147483648"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 1000, "scale": 2},
     "expected 1 to 76 digits, found 1000")])
def test_fixed_sizes_and_decimal_precisions_are_bounded(typ, says):
    """A fixed of size -1 crashed the kernel (a null memset its size); in a subprocess for that."""
    p = run_python(f"""
    import pyarrow as pa
    from kbatch.values import Avro, SchemaSourceError, TopicSchemas, frame
    from support.schemas import schema_key, schema_value
    schema = {{"type": "record", "name": "R", "fields": [{{"name": "f", "type": ["null", {typ!r}]}}]}}
    src = TopicSchemas.from_records([(0, schema_key("a", 1), schema_value("a", 1, 1, schema))])
    value = frame(1, b"\\x00")
    for call in (lambda: Avro(src).decode(value), lambda: Avro(src).decode_column(pa.array([value], pa.binary()))):
        try:
            call()
        except SchemaSourceError as e:
            print(e)
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and all(says in line for line in lines), lines


def test_strip_logical_is_linear_in_the_schema():
    """It stripped each record's fields twice, so a schema 40 records deep took 2^40 steps."""
    from kbatch.values.avro_types import strip_logical
    s: object = {"type": "long", "logicalType": "timestamp-millis"}
    for i in range(40):
        s = {"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": s}]}
    out = strip_logical(s)
    for _ in range(40):
        out = out["fields"][0]["type"]
    assert out == "long"


# ------------------------------------------------------------------------------------ Avro: counts
def test_an_11_byte_array_of_2_31_nulls_stays_bounded_in_memory():
    """It drove every front end past 2.9 GB: the block count is now bounded before any item is
    read. The child runs under an address-space limit and reports its peak resident memory."""
    p = run_python(PRELUDE + """
    import pyarrow as pa
    fmt = Avro(src)
    fmt.writer(2)
    def vm():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    calls = lambda v: (lambda: fmt.decode(v, 5), lambda: fmt.to_json(v, 5),
                       lambda: fmt.decode_column(pa.array([v], pa.binary()), pa.array([5])))
    for call in calls(frame(2, b"\\x00")):  # every path once (its imports) on a harmless value
        call()
    resource.setrlimit(resource.RLIMIT_AS, (vm() + (1 << 30), resource.RLIM_INFINITY))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for call in calls(NULL_BOMB):
        try:
            call()
        except PayloadLimitError as e:
            print(e)
        except MemoryError:
            print("MemoryError")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    *errors, grew_kib = p.stdout.splitlines()
    assert len(NULL_BOMB) == 11
    assert errors == [f"value at offset 5 (schema id 2): the Avro value holds more items that take no bytes (in "
                      f"arrays of null or of empty records) than a value, or the values decoded with it, may: expected "
                      f"at most {MAX_EMPTY_ITEMS}, found {2**31} (at byte 0 of the payload)"] * 3
    assert int(grew_kib) < 16 * 1024  # KiB: nothing was allocated for the items (before: 2.9 GB)


def test_empty_items_up_to_the_bound_decode(source):
    fmt = Avro(source)
    value = frame(2, zigzag(1000) + b"\x00")
    assert fmt.decode(value) == {"xs": [None] * 1000}
    assert fmt.decode_column(pa.array([value], pa.binary())).to_pylist() == [{"xs": [None] * 1000}]
    # blocks add up: two blocks that pass alone break the bound together
    two = frame(2, zigzag(MAX_EMPTY_ITEMS) + zigzag(1) + b"\x00")
    with pytest.raises(PayloadLimitError, match=f"found {MAX_EMPTY_ITEMS + 1} \\(at byte 4 of the payload\\)"):
        fmt.decode(two)


@pytest.mark.parametrize("path", ["kernel", "pure"])
def test_empty_items_are_bounded_per_column_too(source, path):
    """Values each under the bound, together past it: a column decoded at once (a chunk) holds no
    more than one value may, so many small hostile values do not add up to a bomb either."""
    if path == "kernel" and K is None:
        pytest.skip("the compiled Avro kernel is not built")
    half = MAX_EMPTY_ITEMS // 2 + 1
    values = [frame(5, empties_payload([half], 1, [])), frame(5, empties_payload([], 1, [half]))]
    fmt = Avro(source)
    call = ((lambda: fmt.decode_arrow(pa.array(values, pa.binary()), pa.array([3, 4]), "value")) if path == "kernel"
            else (lambda: fmt.to_arrow(values, [3, 4])))
    with pytest.raises(PayloadLimitError, match=rf"^value at offset 4 \(schema id 5\): .* expected at most "
                                                rf"{MAX_EMPTY_ITEMS}, found {2 * half} \(at byte 2 of the payload\)$"):
        call()
    assert [fmt.writer(5).check(v, 5, None, "value") for v in values] == [half, half]  # each alone is within it


@pytest.mark.parametrize("sid", [2, 5])  # arrays of null (the fastavro path), of empty records (the kernel's)
def test_with_on_decode_error_the_value_past_the_column_bound_is_the_one_nulled(source, sid):
    """rules.decode_column halves a failing column to find the bad values; the bound counts only
    the parts that decoded, so the value that crossed it is nulled and the others kept."""
    if sid == 5 and K is None:
        pytest.skip("the compiled Avro kernel is not built")
    half = MAX_EMPTY_ITEMS // 2 + 1
    payloads = ([zigzag(half) + b"\x00", zigzag(half) + b"\x00", zigzag(2) + b"\x00"] if sid == 2 else
                [empties_payload([half], 1, []), empties_payload([half], 2, []), empties_payload([2], 3, [])])
    data = segment([frame(sid, p) for p in payloads])
    errors = []
    got = kbatch.decode_columns(data, "t", 0, value_schema=Avro(source),
                                on_decode_error=lambda row, e: errors.append((row, e)))
    assert [(row, type(e).__name__, e.offset) for row, e in errors] == [(1, "PayloadLimitError", 1)]
    values = got.column("value")
    assert values[1].as_py() is None and values[2].as_py() is not None
    assert len(values[0].as_py()["xs" if sid == 2 else "a"]) == half
    with pytest.raises(PayloadLimitError, match=r"value in t \[0\] at offset 1 \(schema id \d\): .* found "
                                                rf"{2 * half} \(at byte 0 of the payload\)"):
        kbatch.decode_columns(data, "t", 0, value_schema=Avro(source))


def empties_payload(a_blocks, n, b_blocks):
    """An Empties value: blocks of the `a` array (counts; a negative one carries its byte size), the
    long, blocks of the `b` array."""
    out = bytearray()
    for blocks in (a_blocks, None, b_blocks):
        if blocks is None:
            out += zigzag(n)
            continue
        for c in blocks:
            out += zigzag(c)
            if c < 0:
                out += zigzag(0)
        out += b"\x00"
    return bytes(out)


COUNTS = st.one_of(st.integers(0, 4), st.integers(-4, -1),
                   st.sampled_from([MAX_EMPTY_ITEMS + 1, 2**31, 2**62, 2**63 - 1, -(2**31), -(2**63)]))


def outcome(call):
    try:
        got = call()
    except Exception as e:  # the class and the message are the contract
        return type(e).__name__, str(e)
    return "ok", None if got is None else got.to_pylist()


@pytest.mark.skipif(K is None, reason="the compiled Avro kernel is not built")
@settings(max_examples=150)
@given(st.lists(COUNTS, max_size=3), st.integers(-2**40, 2**40), st.lists(COUNTS, max_size=3),
       st.binary(max_size=3), st.sampled_from(["whole", "cut", "tail"]))
def test_kernel_and_its_pure_twin_agree_on_empty_items(a, n, b, extra, how):
    """The kernel (decode_arrow) and the fastavro path with its walk (to_arrow) give the same
    column, or the same error class and message, for counts around and far past the bound."""
    payload = empties_payload(a, n, b)
    if how == "cut":
        payload = payload[:len(payload) // 2]
    elif how == "tail":
        payload += extra
    fmt = Avro(TopicSchemas.from_records(records()))
    values = [frame(5, payload)]
    kernel = outcome(lambda: fmt.decode_arrow(pa.array(values, pa.binary()), pa.array([9]), "value"))
    pure = outcome(lambda: fmt.to_arrow(values, [9]))
    if kernel[0] == "PayloadLimitError" or pure[0] == "PayloadLimitError":
        assert kernel == pure
    elif how == "whole" and pure[0] == "ok":
        assert kernel == pure  # the kernel took the value (it declines, None, only bytes that do not read)
    elif kernel != ("ok", None) and pure[0] == "ok":
        assert kernel == pure


@settings(max_examples=200)
@given(st.sampled_from([1, 2, 5]), st.binary(max_size=40), st.sampled_from([b"", b"\x02" * 150, zigzag(2**31)]))
def test_any_bytes_under_the_hostile_schemas_decode_or_are_a_payload_error(sid, tail, head):
    """Random payloads (some behind a deep or a huge prefix) under the recursive schema and the two
    with arrays of empty items: a value, or a PayloadError; nothing else on any path."""
    fmt = Avro(TopicSchemas.from_records(records()))
    value = frame(sid, head + tail)
    for call in (lambda: fmt.decode(value), lambda: fmt.to_json(value),
                 lambda: fmt.decode_column(pa.array([value], pa.binary()))):
        try:
            call()
        except PayloadError:
            pass
        except SchemaSourceError as e:  # the recursive schema has no Arrow type: its column is refused
            assert sid == 1 and "contains itself" in str(e)


def nested_schema(depth: int, kinds: str) -> object:
    """Records, arrays and maps `depth` deep (kinds cycles through r, a, m), a long inside."""
    s: object = "long"
    for i in range(depth):
        k = kinds[i % len(kinds)]
        s = ({"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": s}]} if k == "r" else
             {"type": "array", "items": s} if k == "a" else {"type": "map", "values": s})
    return s


def nested_payload(depth: int, kinds: str) -> bytes:
    """One path down: each array and map holds one item (a map's key: "k"), then the long 0."""
    head, tail = bytearray(), bytearray()
    for i in reversed(range(depth)):
        k = kinds[i % len(kinds)]
        if k == "a":
            head += b"\x02"
            tail[:0] = b"\x00"
        elif k == "m":
            head += b"\x02\x02k"
            tail[:0] = b"\x00"
    return bytes(head) + b"\x00" + bytes(tail)


@pytest.mark.skipif(K is None, reason="the compiled Avro kernel is not built")
@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 5])
@pytest.mark.parametrize("kinds", ["r", "a", "am", "ram"])
def test_kernel_and_its_pure_twin_agree_on_depth(depth, kinds):
    """A schema past the bound is refused when parsed, so no value reaches the kernel that deep:
    this runs the kernel's program and the walk on one directly, and wants the same verdict."""
    import numpy as np

    from kbatch.values import avro_program as P
    from kbatch.values.avro_types import AvroTypes

    schema = nested_schema(depth, kinds)
    types = AvroTypes()
    types.register(schema)
    node = types.node(schema)
    cols = P.columns(node)
    prog = P.program(schema, [], node, cols)
    payload = nested_payload(depth, kinds)
    data = np.frombuffer(frame(1, payload), np.uint8)
    try:
        K.decode_rows(cols, {1: prog}, data, np.array([0, len(data)], np.int32), None, 0, 1)
        kernel = None
    except K.AvroDecodeError as e:
        assert e.code in P.LIMIT_CODES
        kernel = (P.limit_detail(e), e.position)
    try:
        check_value(payload, schema, types.names, {})
        pure = None
    except ValueLimit as e:
        pure = (e.detail, e.position)
    assert kernel == pure
    assert (pure is None) == (depth <= MAX_DEPTH)


@pytest.mark.parametrize("text", [b"\xff\xfe", b"ab\xc3", b"\xed\xa0\x80"])  # not UTF-8, cut, a surrogate
def test_a_string_that_is_not_utf8_is_the_same_error_on_both_paths(source, text):
    """The kernel copied string bytes as they came: an Arrow string column of invalid UTF-8 where
    the fastavro path raises. Both now name the value."""
    schema = {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"},
                                                        {"name": "m", "type": {"type": "map", "values": "long"}}]}
    src = TopicSchemas.from_records([(0, schema_key("s", 1), schema_value("s", 1, 1, schema))])
    fmt = Avro(src)
    good = frame(1, zigzag(2) + b"ok" + b"\x00")
    for value in (frame(1, zigzag(len(text)) + text + b"\x00"),  # the string
                  frame(1, zigzag(2) + b"ok" + zigzag(1) + zigzag(len(text)) + text + b"\x02\x00")):  # a map key
        column = pa.array([good, value], pa.binary())
        with pytest.raises(PayloadError, match=r"^value at offset 8 \(schema id 1\): the Avro payload does not "
                                               r"decode: UnicodeDecodeError"):
            fmt.decode_column(column, pa.array([7, 8]))
        with pytest.raises(PayloadError, match="UnicodeDecodeError"):
            fmt.to_arrow([good, value], [7, 8])
    assert fmt.decode_column(pa.array([good], pa.binary())).to_pylist() == [{"s": "ok", "m": []}]


# ------------------------------------------------------------------------------------ JSON
def test_a_deeply_nested_json_value_is_refused(source):
    fmt = JsonSchema(source)
    deep = frame(4, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(PayloadLimitError, match=r"value at offset 3 \(schema id 4\): the JSON value nests deeper "
                                                r"than a value may: expected at most 100 levels of objects and "
                                                r"arrays, found 101 \(at byte 100 of the payload\)"):
        fmt.decode(deep, offset=3)
    ok = frame(4, b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert fmt.decode(ok) is not None
    # brackets inside strings are text, not nesting
    assert fmt.decode(frame(4, json.dumps({"a": 1, "s": "[" * 500}).encode()))["a"] == 1
    with pytest.raises(PayloadLimitError):
        fmt.to_arrow([json_value(4, {"a": 1}), deep], [0, 1])


def test_a_json_value_nested_to_the_bound_validates():
    """jsonschema's validator recurses several frames a level: at the bound it still fits Python's stack."""
    pytest.importorskip("jsonschema")
    schema = {"type": "array", "items": {"$ref": "#"}}
    src = TopicSchemas.from_records([(0, schema_key("j", 1), schema_value("j", 1, 1, schema, "JSON"))])
    value = frame(1, b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert JsonSchema(src, validate=True).decode(value) is not None


def test_json_loads_bounds_and_positions():
    assert json_loads(b'{"a": [1, {"b": "]]]"}]}', 3) == {"a": [1, {"b": "]]]"}]}
    with pytest.raises(JsonDepthError,
                       match=r"expected at most 2 levels of objects and arrays, found 3 \(at byte 10\)"):
        json_loads('{"a": [1, {"b": 2}]}', 2)
    assert json_loads('"\\\\[[[" ', 1) == "\\[[["  # an escaped backslash before a bracket inside a string


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9'),
                           lambda kids: (st.lists(kids, max_size=3) |
                                         st.dictionaries(st.text(max_size=3), kids, max_size=3)),
                           max_leaves=30)


def json_depth(v) -> int:
    if isinstance(v, list):
        return 1 + max(map(json_depth, v), default=0)
    if isinstance(v, dict):
        return 1 + max(map(json_depth, v.values()), default=0)
    return 0


@settings(max_examples=200)
@given(JSON_VALUES, st.integers(0, 8), st.booleans())
def test_the_json_depth_scan_agrees_with_the_parser(value, limit, as_bytes):
    """The scan that guards json.loads counts what the parser nests, whatever the strings hold."""
    text = json.dumps(value, ensure_ascii=False)
    data = text.encode() if as_bytes else text
    if json_depth(value) <= limit:
        assert json_loads(data, limit) == value
    else:
        with pytest.raises(JsonDepthError):
            json_loads(data, limit)


def test_a_json_value_of_the_wrong_types_names_topic_offset_and_schema_id(source):
    """pyarrow's "Could not convert 'x' with type str" (exit 2, no offset) becomes a PayloadError
    saying where in the value, for which record, with which schema."""
    data = segment([json_value(4, {"a": 1, "tags": ["x"]}), json_value(4, {"a": "x"})])
    with pytest.raises(PayloadError, match=r"^value in events \[0\] at offset 1 \(schema id 4\): the JSON value does "
                                           r"not fit schema 4's column type: expected integer at /a, found string$"):
        kbatch.decode_columns(data, "events", 0, value_schema=JsonSchema(source))
    with pytest.raises(PayloadError, match=r"expected string at /tags/1, found integer"):
        kbatch.decode_columns(segment([json_value(4, {"tags": ["x", 2]})]), value_schema=JsonSchema(source))
    with pytest.raises(PayloadError, match=r"expected an array at /tags, found object"):
        JsonSchema(source).to_arrow([json_value(4, {"tags": {}})])
    with pytest.raises(PayloadError,
                       match=r"expected integer at /a, found integer 18446744073709551616, outside int64"):
        JsonSchema(source).to_arrow([json_value(4, {"a": 2**64})])
    with pytest.raises(PayloadError, match=r"offset 2 \(schema id 4\).*expected integer at /a, found boolean"):
        list(iter_record_batches(segment([json_value(4, {"a": 1})] * 2 + [json_value(4, {"a": True})]), "t", 0,
                                        value_schema=JsonSchema(source)))
    got = kbatch.decode_columns(segment([json_value(4, {"a": 1, "tags": None}), json_value(4, {})]),
                                value_schema=JsonSchema(source))
    assert got.column("value").to_pylist() == [{"a": 1, "tags": None}, {"a": None, "tags": None}]


# ------------------------------------------------------------------------------------ _schemas records
def test_a_deeply_nested_schemas_record_is_listed_and_skipped(tmp_path):
    """A RecursionError escaped from the replay and made every id unusable; the record is now one
    of the listed problems and the others still count."""
    t = SchemasTopic(str(tmp_path / "_schemas-0"))
    t.register("node-value", 1, 1, NODE)
    deep = (b'{"subject": "x", "version": 1, "id": 2, "schema": "\\"long\\"", "references": '
            + b"[" * 100_000 + b"]" * 100_000 + b"}")
    t.raw(schema_key("x", 1), deep)
    t.raw(b"[" * 100_000 + b"]" * 100_000, None)
    t.register("nulls-value", 1, 3, NULLS)
    t.close()
    src = TopicSchemas.open(str(tmp_path / "_schemas-0"))
    assert [p.split(": ", 1)[1] for p in src.problems] == [
        f"JSON nests deeper than allowed: expected at most {MAX_SCHEMA_JSON_DEPTH} levels of objects and arrays, "
        f"found {MAX_SCHEMA_JSON_DEPTH + 1} (at byte {i})"
        for i in (deep.index(b"[") + MAX_SCHEMA_JSON_DEPTH - 1, MAX_SCHEMA_JSON_DEPTH)]  # the value's { is a level
    assert [p.split(": ", 1)[0] for p in src.problems] == ["offset 1", "offset 2"]
    fmt = Avro(src)
    assert fmt.decode(frame(1, node_payload(2))) == {"v": 0, "next": {"v": 0, "next": None}}
    assert fmt.decode(frame(3, b"\x00")) == {"xs": []}


# ------------------------------------------------------------------------------------ Protobuf
def test_a_protobuf_message_nested_100000_deep_is_a_payload_error():
    """Protobuf's parser keeps its own recursion limit (100, MAX_DEPTH's model): a hostile message is
    a PayloadError naming offset and schema id, and one at the limit prints (cat's path) without a
    RecursionError."""
    pytest.importorskip("google.protobuf")
    pytest.importorskip("grpc_tools")
    p = run_python("""
    from kbatch.values import Protobuf, TopicSchemas, PayloadError, frame
    from support.schemas import schema_key, schema_value
    proto = 'syntax = "proto3";\\nmessage N { N next = 1; int64 v = 2; }\\n'
    src = TopicSchemas.from_records([(0, schema_key("n", 1), schema_value("n", 1, 1, proto, "PROTOBUF"))])
    def varint(v):
        out = bytearray()
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    def nested(depth):
        lengths = [2]  # the innermost message: v = 1
        for _ in range(depth - 1):
            lengths.append(1 + len(varint(lengths[-1])) + lengths[-1])
        heads = [b"\\x0a" + varint(n) for n in reversed(lengths[:-1])]
        return b"".join(heads) + b"\\x10\\x01"
    fmt = Protobuf(src)
    try:
        fmt.decode(frame(1, b"\\x00" + nested(100_000)), 7)
    except PayloadError as e:
        print(e)
    from kbatch.values import SchemaSourceError
    from kbatch.values.protobuf import compile_proto
    try:  # a .proto text nested as deep: protoc's parser keeps a limit too
        compile_proto({"d.proto": 'syntax = "proto3";\\n' + "message M { " * 100_000 + "}" * 100_000}, "d.proto")
    except SchemaSourceError as e:
        print("maximum recursion limit" in str(e))
    import json
    print(len(json.dumps(fmt.to_json(frame(1, b"\\x00" + nested(99)), 8))) > 0)
    print(fmt.decode(frame(1, b"\\x00" + nested(99)))["next"] is not None)
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    first, *rest = p.stdout.splitlines()
    assert first.startswith("value at offset 7 (schema id 1): the Protobuf message N does not parse")
    assert rest == ["True", "True", "True"]


# ------------------------------------------------------------------------------------ the CLI
@pytest.fixture
def hostile_cluster(tmp_path):
    pytest.importorskip("typer", reason="the CLI needs typer (the cli extra)")
    t = SchemasTopic(str(tmp_path / "sr" / "_schemas-0"))
    for offset, key, value in records():
        t.raw(key, value)
    t.close()
    for topic, values in (("nodes", [avro_value(1, NODE, {"v": 1, "next": None}), frame(1, node_payload(100_000))]),
                          ("nulls", [avro_value(2, NULLS, {"xs": [None]}), NULL_BOMB]),
                          ("events", [json_value(4, {"a": 1}), json_value(4, {"a": "x"})]),
                          ("deep", [frame(3, b"\x00")])):
        log = kbatch.Log.create(str(tmp_path / "logs" / f"{topic}-0"))
        b = kbatch.BatchBuilder()
        for i, v in enumerate(values):
            b.append(1000 + i, None, v)
        log.append(b.build(), now_ms=2000)
        log.close()
    return tmp_path


def kbatch_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "kbatch.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("topic, kind, offset, says", [
    ("nodes", "avro", 1, "(schema id 1): the Avro value nests deeper than a value may"),
    ("nulls", "avro", 1, "(schema id 2): the Avro value holds more items that take no bytes"),
    ("events", "json", 1, "(schema id 4): the JSON value does not fit schema 4's column type: expected integer at "
                          "/a, found string"),
    ("deep", "avro", 0, "(schema id 3): the Avro schema does not parse: JSON nests deeper than allowed")])
def test_cat_and_export_exit_1_naming_the_record(hostile_cluster, tmp_path, topic, kind, offset, says):
    """No SIGSEGV, no traceback, no exit 2: exit 1, and the message names topic, partition, offset
    and schema id."""
    logs, sr = str(hostile_cluster / "logs" / f"{topic}-0"), str(hostile_cluster / "sr" / "_schemas-0")
    p = kbatch_cli("cat", logs, "-s", f"value={kind}", "--schemas", sr)
    assert "Traceback" not in p.stderr
    if topic == "events":  # cat prints a JSON value as it is: the column types are export's
        assert p.returncode == 0, p.stderr[-3000:]
    else:
        assert p.returncode == 1, (p.returncode, p.stderr[-3000:])
        assert f"{topic} [0] at offset {offset or 0}" in p.stderr and says in p.stderr, p.stderr
    p = kbatch_cli("export", logs, "--to", str(tmp_path / f"out-{topic}"), "-s", f"value={kind}", "--schemas", sr)
    assert p.returncode == 1, (p.returncode, p.stderr[-3000:])
    assert "Traceback" not in p.stderr
    where = f"value in {topic} [0]" + ("" if offset is None else f" at offset {offset}")
    assert f"{where} {says}" in p.stderr, p.stderr
