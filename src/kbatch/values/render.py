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
- a time-millis / time-micros past the day (fastavro refuses it, Arrow's time type wraps it):
  `json_rows` raises Unrenderable for such a column, and the caller decodes its values one by one.

Protobuf (canonical JSON: presence, nanosecond Timestamps, well-known types) and JSON Schema (the
payload as written, not as the schema's column holds it) are printed from each value as before.
"""
from __future__ import annotations

import base64
import json
import math
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


def avro_renders(fmt: Any, schema_id: int) -> bool:
    """Do values of writer schema `schema_id`, read by `fmt` (an Avro format, maybe with a pinned
    reader schema), print from their Arrow column exactly as `avro.jsonable` prints them?"""
    fast = _fastavro_logical()
    w = fmt.writer(schema_id)
    if w.shape.recursive:  # no Arrow type holds a type that contains itself
        return False
    schemas = [w.raw, *w.refs]
    reader = getattr(fmt, "_reader_raw", None)
    if reader is not None:
        if _logical_default(reader):
            return False
        schemas.append(reader)
    return all(_logical_ok(s, fast) for s in schemas)


# ------------------------------------------------------------------------------------ Arrow -> JSON
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
        kids = [json_rows(c) for c in arr.flatten()]
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


def protobuf_json(row: "dict[str, Any]", d: Any) -> "dict[str, Any]":
    """One row of json_rows (a message of type d, as its Arrow column holds it) -> the message as
    MessageToDict prints it: fields in number order, a field without presence left out at its
    default, 64-bit integers as strings, floats as protobuf's shortest form, enums by name."""
    out: dict[str, Any] = {}
    for f in sorted(d.fields, key=_number):  # (upb lists the fields set in number order)
        v = row[f.name]
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        if repeated:
            if v:
                out[f.name] = [_pb_scalar(x, f) for x in v]
        elif f.message_type is not None or f.has_presence:
            if v is not None:
                out[f.name] = _pb_scalar(v, f)
        elif not _pb_default(v, f):
            out[f.name] = _pb_scalar(v, f)
    return out


def _number(f: Any) -> int:
    return int(f.number)


def _pb_default(v: Any, f: Any) -> bool:
    """Is v (json_rows' form) the zero of a field without presence (which upb does not list)?"""
    if f.enum_type is not None:
        zero = f.enum_type.values_by_number.get(0)
        return zero is not None and v == zero.name
    if isinstance(v, float):
        return v == 0.0 and math.copysign(1.0, v) > 0  # (-0.0 is not the zero's bits: listed)
    return not v


def _pb_scalar(v: Any, f: Any) -> Any:
    if f.message_type is not None:
        return protobuf_json(v, f.message_type)
    if f.enum_type is not None:
        if f.enum_type.values_by_name.get(v) is not None:
            return v
        if f.enum_type.is_closed:
            raise Unrenderable(f"enum {f.enum_type.full_name} has no value {v}")
        return int(v)  # an open enum's unknown number (the column holds its digits)
    if f.type in _PB_64:
        return str(v)
    if f.type in (1, 2):  # TYPE_DOUBLE, TYPE_FLOAT
        if math.isinf(v):
            return "-Infinity" if v < 0 else "Infinity"
        if math.isnan(v):
            return "NaN"
        if f.type == 2:
            from google.protobuf.internal import type_checkers

            return type_checkers.ToShortestFloat(v)
    return v


def _valid(arr: "pa.Array") -> list[bool]:
    if not arr.null_count:
        return [True] * len(arr)
    return arr.is_valid().to_pylist()  # type: ignore[no-any-return]


__all__ = ["Unrenderable", "avro_renders", "json_rows", "protobuf_json", "protobuf_renders"]
