"""Typed Arrow values -> the JSON `kbatch cat` prints for them, one column at a time.

`kbatch cat -s value=avro` prints each value as `avro.jsonable` makes fastavro's decode of it:
bytes and fixed in base64, dates, times and timestamps in ISO-8601 (`isoformat()`), decimals as
`str(Decimal)`, maps as objects, unions unwrapped. `json_rows` makes the same objects from a
column the compiled kernel decoded (`Format.decode_column`), by Arrow type: each child column is
converted once, not each value walked in Python.

What Arrow cannot tell apart, this cannot render, and `avro_renders` says no for it:
- uuid: Arrow holds the text, fastavro a UUID (printed in lower case, and refused when not one);
- the logical types Arrow converts and fastavro does not (timestamp-nanos, local-timestamp-nanos),
  or the reverse;
- a pinned reader schema whose fields have defaults of a logical type (fastavro fills them in raw);
- a union of branches fastavro gives the same Python class (int and long, float and double, a
  record and a map) prints only from the compiled kernel's column: values.avro's Python column
  path (where the kernel declines) picks the branch by the value, and may pick another than the
  bytes name;
- a time-millis / time-micros past the day (fastavro refuses it, Arrow's time type wraps it):
  `json_rows` raises Unrenderable for such a column, and the caller decodes its values one by one.

Protobuf values print as json_format.MessageToDict (preserving_proto_field_name) prints them:
`protobuf_rows` shapes a column by the message descriptor, and `protobuf_renders` says
no for what the column does not keep (maps in upb's order, well-known types, ...). Plain JSON
with a given schema prints as json_rows gives it. JSON Schema values (the payload as written, not
as the schema's column holds it) are printed from each value as before.
"""
from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

#: (Avro type, logical type) that Arrow holds as a logical type (kbatch.values.avro_types); fastavro
#: must convert exactly these for a column to render as cat's per-value path prints
_ARROW_LOGICAL = {("int", "date"), ("int", "time-millis"), ("long", "time-micros"), ("long", "timestamp-millis"),
                  ("long", "timestamp-micros"), ("long", "timestamp-nanos"), ("long", "local-timestamp-millis"),
                  ("long", "local-timestamp-micros"), ("long", "local-timestamp-nanos"), ("bytes", "decimal"),
                  ("fixed", "decimal"), ("string", "uuid")}
#: the one time unit per day of each time type (past it fastavro refuses the value)
_DAY = {"ms": 86_400_000, "us": 86_400_000_000}


class Unrenderable(ValueError):
    """A column holds a value whose printed form Arrow's type does not keep."""


# ------------------------------------------------------------------------------------ Avro schemas
def _fastavro_logical() -> set[str]:
    try:
        from fastavro._logical_readers import LOGICAL_READERS
    except ImportError:  # another fastavro layout: render nothing logical from Arrow
        return set()
    return set(LOGICAL_READERS)


def _logical_ok(schema: Any, fast: set[str]) -> bool:
    """Does every logical type in an Avro schema (JSON) print alike from Arrow and from fastavro?"""
    if isinstance(schema, list):
        return all(_logical_ok(s, fast) for s in schema)
    if not isinstance(schema, dict):
        return True
    t, logical = schema.get("type"), schema.get("logicalType")
    if isinstance(t, str) and isinstance(logical, str):
        arrow = (t, logical) in _ARROW_LOGICAL
        if logical == "uuid" or arrow != (f"{t}-{logical}" in fast):
            return False
        if logical == "decimal":
            p, s = schema.get("precision"), schema.get("scale", 0)
            if not (type(p) is int and type(s) is int and 0 <= s <= p and p >= 1):
                return False
    return all(_logical_ok(v, fast) for k, v in schema.items() if k in ("type", "fields", "items", "values")) and \
        all(_logical_ok(f.get("type"), fast) for f in schema.get("fields", ()) if isinstance(f, dict))


def _logical_default(schema: Any) -> bool:
    """Has a record field of the (reader) schema a default and a logical type? fastavro fills such a
    default in raw (the int, the bytes), unconverted, where Arrow's column holds the logical value."""
    if isinstance(schema, list):
        return any(_logical_default(s) for s in schema)
    if not isinstance(schema, dict):
        return False
    for f in schema.get("fields", ()):
        if isinstance(f, dict) and "default" in f and '"logicalType"' in json.dumps(f.get("type")):
            return True
    return any(_logical_default(v) for k, v in schema.items() if k in ("type", "items", "values")) or \
        any(_logical_default(f.get("type")) for f in schema.get("fields", ()) if isinstance(f, dict))


#: the Python class fastavro gives each Avro type (logical types left raw), as values.avro's column
#: path tells a union's branches apart when the kernel declines the schema
_PY_CLASS = {"null": "None", "boolean": "bool", "int": "int", "long": "int", "float": "float", "double": "float",
             "string": "str", "enum": "str", "bytes": "bytes", "fixed": "bytes", "record": "dict", "error": "dict",
             "map": "dict", "array": "list"}


def _named(schema: Any, out: "dict[str, str]") -> None:
    """The Python class of each named type (short and full names) a schema defines."""
    if isinstance(schema, list):
        for s in schema:
            _named(s, out)
    elif isinstance(schema, dict):
        t = schema.get("type")
        if t in ("record", "error", "enum", "fixed") and isinstance(schema.get("name"), str):
            name = schema["name"]
            ns = schema.get("namespace")
            out[name] = out[name.rpartition(".")[2]] = _PY_CLASS[t]
            if ns:
                out[f"{ns}.{name}"] = _PY_CLASS[t]
        for k in ("type", "items", "values"):
            if isinstance(schema.get(k), (dict, list)):
                _named(schema[k], out)
        for f in schema.get("fields", ()):
            if isinstance(f, dict):
                _named(f.get("type"), out)


def _unions_distinct(schema: Any, named: "dict[str, str]") -> bool:
    """Does every union's branches give fastavro values of different Python classes? Where two share
    one (int and long, a record and a map, float and double), values.avro's Python column path,
    resolving to a pinned reader schema, takes the first branch that holds the value, which may not
    be the writer's (without one it decodes the writer's branch: avro_types.tag_unions)."""
    if isinstance(schema, list):
        classes = []
        for b in schema:
            t = b.get("type") if isinstance(b, dict) else b
            if isinstance(t, (dict, list)):
                t = "?"
            classes.append(_PY_CLASS.get(t) if isinstance(t, str) and t in _PY_CLASS else named.get(str(t), "?"))
        if "?" in classes or len(set(classes)) != len(classes):
            return False
        return all(_unions_distinct(b, named) for b in schema)
    if isinstance(schema, dict):
        return all(_unions_distinct(schema[k], named) for k in ("type", "items", "values") if k in schema) and \
            all(_unions_distinct(f.get("type"), named) for f in schema.get("fields", ()) if isinstance(f, dict))
    return True


def avro_renders(fmt: Any, schema_id: int) -> "str | None":
    """Do values of writer schema `schema_id`, read by `fmt` (an Avro format, maybe with a pinned
    reader schema), print from their Arrow column exactly as `avro.jsonable` prints them? "column":
    from any column decode_column makes; "kernel": only from the compiled kernel's (with a pinned
    reader schema, a union whose branches fastavro's Python path cannot tell apart); None: no."""
    fast = _fastavro_logical()
    w = fmt.writer(schema_id)
    if w.shape.recursive:  # no Arrow type holds a type that contains itself
        return None
    schemas = [w.raw, *w.refs]
    reader = getattr(fmt, "_reader_raw", None)
    if reader is not None:
        if _logical_default(reader):
            return None
        schemas.append(reader)
    if not all(_logical_ok(s, fast) for s in schemas):
        return None
    if reader is None:  # each value read with its own writer schema: the union's branch is the writer's
        return "column"
    named: dict[str, str] = {}
    for s in schemas:
        _named(s, named)
    return "column" if all(_unions_distinct(s, named) for s in schemas) else "kernel"


# ------------------------------------------------------------------------------------ Arrow -> JSON
def _fields(arr: "pa.StructArray") -> list[Any]:
    """A struct column's fields, without its nulls (the rows' validity is read apart): Arrow's
    flatten() ANDs them into each field, and aborts the process on a union field (whose nulls are
    its branches' own: Arrow unions have no validity bitmap)."""
    return [arr.field(i) for i in range(arr.type.num_fields)]


def json_rows(arr: "pa.Array") -> list[Any]:
    """Each row of a typed column as JSON-able Python objects (None for a null row), as cat prints
    the value; Unrenderable for a value that has no faithful form."""
    import pyarrow as pa
    import pyarrow.types as T

    typ = arr.type
    n = len(arr)
    if T.is_struct(typ):
        valid = _valid(arr)
        names = [f.name for f in typ]
        kids = [json_rows(c) for c in _fields(arr)]
        return [dict(zip(names, vals)) if ok else None for ok, vals in zip(valid, zip(*kids))] if kids else \
            [{} if ok else None for ok in valid]
    if T.is_list(typ) or T.is_large_list(typ) or T.is_map(typ):
        offs = arr.offsets.to_pylist()
        valid = _valid(arr)
        if T.is_map(typ):
            keys, items = (json_rows(c) for c in arr.values.flatten())  # (.values: not sliced, as the offsets)
            # fastavro builds a dict from the pairs on the wire: a repeated key keeps its first place, its last value
            return [dict(zip(keys[offs[i]:offs[i + 1]], items[offs[i]:offs[i + 1]])) if valid[i] else None
                    for i in range(n)]
        values = json_rows(arr.values)
        return [values[offs[i]:offs[i + 1]] if valid[i] else None for i in range(n)]
    if T.is_union(typ):
        if typ.mode != "dense":
            raise Unrenderable(f"a {typ.mode} union")
        import numpy as np

        bufs = arr.buffers()  # (type_codes / offsets do not follow a slice: read the buffers at its offset)
        codes = np.frombuffer(bufs[1], np.int8)[arr.offset:arr.offset + n].tolist()
        at = np.frombuffer(bufs[2], np.int32)[arr.offset:arr.offset + n].tolist()
        child = {code: json_rows(arr.field(i)) for i, code in enumerate(typ.type_codes)}
        return [child[c][o] for c, o in zip(codes, at)]
    if T.is_null(typ):
        return [None] * n
    if T.is_binary(typ) or T.is_large_binary(typ) or T.is_fixed_size_binary(typ):
        return [None if v is None else base64.b64encode(v).decode("ascii") for v in arr.to_pylist()]
    if T.is_time(typ):
        raw = arr.view(pa.int32() if T.is_time32(typ) else pa.int64())
        if len(raw) - raw.null_count:
            import pyarrow.compute as pc

            lo, hi = pc.min_max(raw).values()
            if lo.as_py() < 0 or hi.as_py() >= _DAY[typ.unit]:
                raise Unrenderable(f"a {typ} value outside the day")
        return [None if v is None else v.isoformat() for v in arr.to_pylist()]
    if T.is_date(typ) or T.is_timestamp(typ):
        if T.is_timestamp(typ) and typ.unit == "ns":
            raise Unrenderable("a nanosecond timestamp")  # (datetime holds microseconds)
        try:
            return [None if v is None else v.isoformat() for v in arr.to_pylist()]
        except (ValueError, OverflowError) as e:  # past Python's years: fastavro refuses it too
            raise Unrenderable(f"a {typ} value Python cannot hold: {e}") from None
    if T.is_decimal(typ):
        return [None if v is None else str(v) for v in arr.to_pylist()]
    if T.is_boolean(typ) or T.is_integer(typ) or T.is_floating(typ) or T.is_string(typ) or T.is_large_string(typ):
        return arr.to_pylist()  # type: ignore[no-any-return]
    raise Unrenderable(f"no JSON rendering for {typ}")


# ------------------------------------------------------------------------------------ Protobuf
def protobuf_renders(d: Any, depth: int = 0, seen: "set[str] | None" = None) -> bool:
    """Does a message type print from its Arrow column exactly as json_format.MessageToDict
    (preserving_proto_field_name) prints the message? Not with: a map (upb iterates it in its own
    order), a well-known type (Timestamp to the nanosecond, wrappers, Struct, Duration, Any: their
    own JSON forms), a group, extensions, a type that contains itself or nests past the column's
    depth, an enum value with JSON options."""
    from .protobuf_program import MAX_DEPTH

    seen = set() if seen is None else seen
    if d.full_name in seen or depth >= MAX_DEPTH - 1 or d.full_name.startswith("google.protobuf.") or \
            d.extension_ranges or d.GetOptions().map_entry:
        return False
    seen = seen | {d.full_name}
    for f in d.fields:
        if f.type == f.TYPE_GROUP:
            return False
        if f.message_type is not None and not protobuf_renders(f.message_type, depth + 1, seen):
            return False
        if f.enum_type is not None and any(v.GetOptions().ListFields() for v in f.enum_type.values):
            return False
    return True


_PB_64 = (3, 4, 6, 16, 18)  # TYPE_INT64, TYPE_UINT64, TYPE_FIXED64, TYPE_SFIXED64, TYPE_SINT64: JSON strings


def protobuf_rows(arr: "pa.Array", d: Any) -> list[Any]:
    """Each row of a column of messages of type d as MessageToDict prints the message (None for a
    null row): fields in number order, a field without presence left out at its default (-0.0 is
    not its bits: kept), 64-bit integers as strings, floats as protobuf's shortest form, enums by
    name (an open enum's unknown number as the number). Column by column, as json_rows."""
    import pyarrow.types as T

    n = len(arr)
    valid = _valid(arr)
    kids = dict(zip([f.name for f in arr.type], _fields(arr)))
    cols: list[tuple[str, int, Any, Any, list[Any]]] = []
    for name, how, zero, conv, f in _pb_plan(d):
        child = kids[name]
        if f.message_type is None:
            col = json_rows(child)
        elif how == _REPEATED:
            if not T.is_list(child.type):
                raise Unrenderable(f"{name}: a repeated message's column is {child.type}")
            items = protobuf_rows(child.values, f.message_type)  # (.values: not sliced, as the offsets)
            offs = child.offsets.to_pylist()
            col = [items[offs[i]:offs[i + 1]] for i in range(n)]
        else:
            col = protobuf_rows(child, f.message_type)
        cols.append((name, how, zero, conv, col))
    rows: list[Any] = []
    for i in range(n):
        if not valid[i]:
            rows.append(None)
            continue
        out: dict[str, Any] = {}
        for name, how, zero, conv, col in cols:
            v = col[i]
            if how == _REPEATED:
                if v:
                    out[name] = v if conv is None else [conv(x) for x in v]
                continue
            if how == _PRESENCE:
                if v is None:
                    continue
            elif how == _IMPLICIT:
                if v == zero:
                    continue
            elif v == 0.0 and math.copysign(1.0, v) > 0:
                continue
            out[name] = v if conv is None else conv(v)
        rows.append(out)
    return rows


_PLANS: "dict[Any, list[tuple[str, int, Any, Any, Any]]]" = {}
_REPEATED, _PRESENCE, _IMPLICIT, _IMPLICIT_FLOAT = range(4)


def _pb_plan(d: Any) -> "list[tuple[str, int, Any, Any, Any]]":
    """(name, how, zero, convert, field) per field of message type d, in number order (upb lists the
    fields set so), made once."""
    hit = _PLANS.get(d)
    if hit is not None:
        return hit
    plan: list[tuple[str, int, Any, Any, Any]] = []
    for f in sorted(d.fields, key=lambda f: int(f.number)):
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        conv = None if f.message_type is not None else _pb_converter(f)  # (messages: shaped by protobuf_rows)
        if repeated:
            plan.append((f.name, _REPEATED, None, conv, f))
        elif f.message_type is not None or f.has_presence:
            plan.append((f.name, _PRESENCE, None, conv, f))
        elif f.type in (1, 2):  # TYPE_DOUBLE, TYPE_FLOAT
            plan.append((f.name, _IMPLICIT_FLOAT, 0.0, conv, f))
        elif f.enum_type is not None:
            zero = f.enum_type.values_by_number.get(0)
            plan.append((f.name, _IMPLICIT, None if zero is None else zero.name, conv, f))
        else:
            plan.append((f.name, _IMPLICIT, "" if f.type in (9, 12) else 0, conv, f))  # TYPE_STRING, TYPE_BYTES
    _PLANS[d] = plan
    return plan


def _pb_converter(f: Any) -> "Callable[[Any], Any] | None":
    """A field's value as json_rows gives it -> as MessageToDict prints it (None: as it is)."""
    if f.enum_type is not None:
        names, closed, full = set(f.enum_type.values_by_name), f.enum_type.is_closed, f.enum_type.full_name

        def enum(v: Any) -> Any:
            if v in names:
                return v
            if closed:
                raise Unrenderable(f"enum {full} has no value {v}")
            return int(v)  # an open enum's unknown number (the column holds its digits)
        return enum
    if f.type in _PB_64:
        return str
    if f.type in (1, 2):  # TYPE_DOUBLE, TYPE_FLOAT
        import importlib

        type_checkers = importlib.import_module("google.protobuf.internal.type_checkers")  # (no stubs)
        shortest = type_checkers.ToShortestFloat if f.type == 2 else None

        def number(v: Any) -> Any:
            if math.isinf(v):
                return "-Infinity" if v < 0 else "Infinity"
            if math.isnan(v):
                return "NaN"
            return v if shortest is None else shortest(v)
        return number
    return None


def _valid(arr: "pa.Array") -> list[bool]:
    if not arr.null_count:
        return [True] * len(arr)
    return arr.is_valid().to_pylist()  # type: ignore[no-any-return]


__all__ = ["Unrenderable", "avro_renders", "json_rows", "protobuf_renders", "protobuf_rows"]
