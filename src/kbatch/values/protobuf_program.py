"""Protobuf descriptors -> the compiled kernel's decode plan (kbatch.values._protobuf_kernel), and
the plan's pure-Python twin (`decode_py`), which reads the same plan with the same contract.

A plan is built once per (writer schema, message indexes): the columns of the message type's Arrow
type (values.protobuf.arrow_type: flat, in preorder) and, per message node of that type tree, a
table from field number to what its value is (the wire type it comes as, how it is read, the
column it goes to, a slot holding a non-repeated field's last value until the message ends). At
the end of a message every field is given its row in declaration order: the value seen last, else
null (a field with presence, a message) or its default (proto3's implicit presence). Repeated
scalars come packed or unpacked (parsers must take both); a closed (proto2) enum's unknown number
is dropped, as upb keeps it among the unknown fields; an open one's reads as its number's text.

What the plan does not do raises Unsupported when it is built (maps, groups, required fields, a
type nested 16 deep: the JSON cut of values.protobuf), and what a value does that the plan does not
follow (a non-repeated message or a oneof's message member set twice, which Protobuf merges; a
group on the wire; a Timestamp past datetime's years; a string that is not UTF-8; bytes that do not
parse) makes the whole call answer None: the caller then decodes with upb (values.protobuf's
per-message path), which gives the answer or names the error. So the plan's answers are upb's.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import _backend

if TYPE_CHECKING:
    import pyarrow as pa

K: Any = None
if _backend.BACKEND != "python":  # KBATCH_BACKEND=python: the pure twin only
    try:
        from . import _protobuf_kernel as _kernel
        K = _kernel
    except ImportError:  # not compiled (a pure install): the pure twin runs the plan
        K = None

__all__ = ["K", "Unsupported", "Plan", "plan", "decode", "decode_py", "MAX_DEPTH", "WRAPPERS", "OPS", "KINDS",
           "MODES"]

#: message nesting where values.protobuf cuts a type into JSON text (the plan does not go there)
MAX_DEPTH = 16
#: how a field's value is read (the wire type is part of it)
OPS = {"vi32": 0, "vi64": 1, "vs32": 2, "vs64": 3, "vbool": 4, "venum": 5, "fix4": 6, "fix8": 7, "str": 8, "bin": 9,
       "msg": 10}
#: column kinds: value width is the kernel's business, sign and float the twin's
KINDS = {"bool": 0, "i32": 1, "u32": 2, "f32": 3, "i64": 4, "u64": 5, "f64": 6, "ts": 7, "str": 8, "bin": 9,
         "struct": 10, "list": 11, "map": 12}
#: a message node's output: a struct row, a timestamp (google.protobuf.Timestamp), a wrapper's value
MODES = {"struct": 0, "ts": 1, "wrap": 2, "entry": 3}

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5
#: the wrapper types (Int64Value, StringValue, ...): a field of one reads as its value, nullable
WRAPPERS = {"google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
             "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
             "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue"}
#: the microseconds of datetime's first and last instants (a Timestamp past them does not convert)
TS_MIN_US = -62135596800 * 1_000_000
TS_MAX_US = 253402300799 * 1_000_000 + 999_999


class Unsupported(Exception):
    """A message type the plan does not take (the per-message path decodes it)."""


class Plan:
    """cols: per column (kind, [child columns]) in preorder (0: the root); msgs: per message node
    (mode, output column, fields, slots); a field: (number, wire, op, column, repeated, presence,
    child message, oneof, enum, slot, default's offset, default's length); enums: (numbers, names,
    closed); pool: the defaults' bytes (a column's raw value); indexes: the message indexes."""

    def __init__(self, typ: "pa.DataType", indexes: Sequence[int]) -> None:
        self.type = typ
        self.indexes = tuple(indexes)
        self.cols: list[tuple[str, list[int]]] = []
        self.msgs: list[tuple[str, int, list[tuple[int, ...]], int]] = []
        self.names: list[list[str]] = []  # per message node: its fields' names (the twin's struct rows)
        self.enums: list[tuple[list[int], list[bytes], bool]] = []
        self.pool = bytearray()
        self._enum_ids: dict[int, int] = {}
        self.compiled: Any = None  # the kernel's Program, made on first use

    def program(self) -> Any:
        if self.compiled is None:
            self.compiled = K.Program(self.cols, self.msgs, self.enums, bytes(self.pool), list(self.indexes))
        return self.compiled


def _F() -> Any:
    import importlib
    return importlib.import_module("google.protobuf.descriptor").FieldDescriptor


def _repeated(f: Any) -> bool:
    flag = getattr(f, "is_repeated", None)
    return bool(flag) if flag is not None else bool(f.label == f.LABEL_REPEATED)


def _scalar(f: Any) -> tuple[str, str, int]:
    """A scalar field -> (column kind, op, wire type)."""
    F = _F()
    t = f.type
    table = {F.TYPE_INT32: ("i32", "vi32", 0), F.TYPE_SINT32: ("i32", "vs32", 0), F.TYPE_SFIXED32: ("i32", "fix4", 5),
             F.TYPE_UINT32: ("u32", "vi32", 0), F.TYPE_FIXED32: ("u32", "fix4", 5), F.TYPE_INT64: ("i64", "vi64", 0),
             F.TYPE_SINT64: ("i64", "vs64", 0), F.TYPE_SFIXED64: ("i64", "fix8", 1), F.TYPE_UINT64: ("u64", "vi64", 0),
             F.TYPE_FIXED64: ("u64", "fix8", 1), F.TYPE_FLOAT: ("f32", "fix4", 5), F.TYPE_DOUBLE: ("f64", "fix8", 1),
             F.TYPE_BOOL: ("bool", "vbool", 0), F.TYPE_STRING: ("str", "str", 2), F.TYPE_BYTES: ("bin", "bin", 2),
             F.TYPE_ENUM: ("str", "venum", 0)}
    if t not in table:
        raise Unsupported(f"field {f.full_name} of type {t}")
    return table[t]


def _default(kind: str, op: str, f: Any, enum: tuple[list[int], list[bytes], bool] | None) -> bytes:
    """A field's default as its column's raw bytes (what an unset proto3 scalar reads as)."""
    v = f.default_value
    if op == "venum":
        assert enum is not None
        nums, names, _ = enum
        return names[nums.index(v)] if v in nums else str(v).encode()
    fmt = {"bool": "<?", "i32": "<i", "u32": "<I", "f32": "<f", "i64": "<q", "u64": "<Q", "f64": "<d"}
    if kind in fmt:
        return struct.pack(fmt[kind], v)
    if kind == "str":
        return str(v).encode("utf-8")
    return bytes(v)


class _Compiler:
    def __init__(self, p: Plan) -> None:
        self.p = p

    def col(self, kind: str) -> int:
        self.p.cols.append((kind, []))
        return len(self.p.cols) - 1

    def enum(self, e: Any) -> int:
        hit = self.p._enum_ids.get(id(e))
        if hit is None:
            nums: list[int] = []
            names: list[bytes] = []
            for v in e.values:  # the first name of a number (values_by_number's, with aliases)
                if v.number not in nums:
                    first = e.values_by_number[v.number]
                    nums.append(v.number)
                    names.append(first.name.encode())
            closed = bool(getattr(e, "is_closed", False))
            hit = self.p._enum_ids[id(e)] = len(self.p.enums)
            self.p.enums.append((nums, names, closed))
        return hit

    def message(self, d: Any, depth: int, out: int | None = None) -> int:
        """The message node for descriptor d at `depth`; its output column (made here unless `out`)."""
        p = self.p
        name = d.full_name
        if name == "google.protobuf.Timestamp":
            mode = "ts"
        elif name in WRAPPERS:
            mode = "wrap"
        else:
            mode = "struct"
            if depth >= MAX_DEPTH:
                raise Unsupported(f"{name} nests {MAX_DEPTH} deep (its JSON text)")
        if d.GetOptions().map_entry:
            raise Unsupported("a map")
        at = len(p.msgs)
        p.msgs.append(("", 0, [], 0))
        p.names.append([f.name for f in d.fields])
        fields: list[tuple[int, ...]] = []
        if mode == "ts":
            col = self.col("ts") if out is None else out
            for f, op in ((d.fields_by_number[1], "vi64"), (d.fields_by_number[2], "vi32")):
                fields.append((f.number, 0, OPS[op], col, 0, 0, -1, -1, -1, len(fields), 0, 0))
        elif mode == "wrap":
            f = d.fields_by_name["value"]
            fields.append(self.field(f, depth, 0, {}, value_col=out))
            col = fields[0][3]
        else:
            col = self.col("struct") if out is None else out
            oneofs: dict[str, int] = {}
            slot = 0
            for f in d.fields:
                fields.append(self.field(f, depth + 1, slot, oneofs))
                if not _repeated(f):
                    slot += 1
                p.cols[col][1].append(fields[-1][3])
        p.msgs[at] = (mode, col, fields, len(fields))
        return at

    def entry(self, d: Any, depth: int, col: int) -> int:
        """A map's entry node: its key and value fields (a missing one reads as its default, an
        absent message value as the empty message: upb's answer), into map column `col`."""
        p = self.p
        at = len(p.msgs)
        p.msgs.append(("", 0, [], 0))
        p.names.append(["key", "value"])
        fields = []
        for slot, number in enumerate((1, 2)):
            f = list(self.field(d.fields_by_number[number], depth, slot, {}))
            f[5] = 0  # no null: the default
            fields.append(tuple(f))
            p.cols[col][1].append(f[3])
        p.msgs[at] = ("entry", col, fields, 2)
        return at

    def field(self, f: Any, depth: int, slot: int, oneofs: dict[str, int], value_col: int | None = None
              ) -> tuple[int, ...]:
        F = _F()
        if f.type == F.TYPE_GROUP:
            raise Unsupported("a group")
        if getattr(f, "is_required", False) or getattr(f, "label", None) == F.LABEL_REQUIRED:
            raise Unsupported("a required field (upb refuses a message without it)")
        rep = _repeated(f)
        oneof = -1
        if f.containing_oneof is not None:
            oneof = oneofs.setdefault(f.containing_oneof.name, len(oneofs))
        presence = 1 if (f.message_type is not None or getattr(f, "has_presence", False)) else 0
        if f.type == F.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                col = self.col("map")
                entry = self.entry(f.message_type, depth, col)
                return (f.number, WIRE_LEN, OPS["msg"], col, 1, 0, entry, oneof, -1, -1, 0, 0)
            if rep:
                lst = self.col("list")
                child = self.message(f.message_type, depth)
                self.p.cols[lst][1].append(self.p.msgs[child][1])
                return (f.number, WIRE_LEN, OPS["msg"], lst, 1, 0, child, oneof, -1, -1, 0, 0)
            child = self.message(f.message_type, depth)
            return (f.number, WIRE_LEN, OPS["msg"], self.p.msgs[child][1], 0, 1, child, oneof, -1, slot, 0, 0)
        kind, op, wire = _scalar(f)
        enum = self.enum(f.enum_type) if op == "venum" else -1
        if rep:
            lst = self.col("list")
            self.p.cols[lst][1].append(self.col(kind))
            return (f.number, wire, OPS[op], lst, 1, 0, -1, oneof, enum, -1, 0, 0)
        col = self.col(kind) if value_col is None else value_col
        dflt = _default(kind, op, f, self.p.enums[enum] if enum >= 0 else None)
        off = len(self.p.pool)
        self.p.pool += dflt
        return (f.number, wire, OPS[op], col, 0, presence, -1, oneof, enum, slot, off, len(dflt))


def plan(descriptor: Any, indexes: Sequence[int], typ: "pa.DataType") -> Plan:
    """The plan of a message type (its descriptor, named by `indexes`) whose Arrow type is `typ`
    (values.protobuf.arrow_type's); Unsupported if it needs what the plan does not do."""
    name = descriptor.full_name
    if name == "google.protobuf.Timestamp" or name in WRAPPERS:
        raise Unsupported("a well-known type as the value itself")
    p = Plan(typ, indexes)
    _Compiler(p).message(descriptor, 0)
    _check_kinds(p, p.type, 0)
    return p


def _check_kinds(p: Plan, t: Any, col: int) -> None:
    """The columns' kinds against the Arrow type arrow_type gives (one fact, two walks: a mismatch
    is a bug here, not in a value)."""
    import pyarrow as pa

    kind, kids = p.cols[col]
    expect = {pa.bool_(): "bool", pa.int32(): "i32", pa.uint32(): "u32", pa.float32(): "f32", pa.int64(): "i64",
              pa.uint64(): "u64", pa.float64(): "f64", pa.timestamp("us", tz="UTC"): "ts", pa.string(): "str",
              pa.binary(): "bin"}
    if pa.types.is_struct(t):
        assert kind == "struct" and len(kids) == t.num_fields, (kind, t)
        for i, k in enumerate(kids):
            _check_kinds(p, t.field(i).type, k)
    elif pa.types.is_list(t):
        assert kind == "list", (kind, t)
        _check_kinds(p, t.value_type, kids[0])
    elif pa.types.is_map(t):
        assert kind == "map", (kind, t)
        _check_kinds(p, t.key_type, kids[0])
        _check_kinds(p, t.item_type, kids[1])
    else:
        assert expect.get(t) == kind, (kind, t)


# ------------------------------------------------------------------------------------ the run
def decode(p: Plan, column: "pa.Array", schema_id: int) -> "pa.Array | None":
    """Rows of a binary Arrow array of framed values, all with `schema_id` and the plan's message
    indexes -> the typed array; None when a value needs the per-message path (see the doc). Without
    the compiled kernel the pure twin runs the plan (as fast as upb a message at a time, and the
    same answers as the kernel's: a map's entries in the writer's order)."""
    if K is None:
        return decode_py(p, column.to_pylist(), schema_id)
    import numpy as np

    n = len(column)
    bufs = column.buffers()
    offs = np.ascontiguousarray(np.frombuffer(bufs[1], np.int32)[column.offset:column.offset + n + 1])
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
    valid = column.is_valid().to_numpy(zero_copy_only=False).view(np.uint8) if column.null_count else None
    return K.decode(p.program(), p.type, data, offs, valid, n, schema_id)


class _Fallback(Exception):
    pass


def _varint(b: bytes, i: int, end: int) -> tuple[int, int]:
    v = shift = 0
    for k in range(10):
        if i >= end:
            raise _Fallback
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v & 0xFFFFFFFFFFFFFFFF, i
        shift += 7
    raise _Fallback


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def decode_py(p: Plan, values: Sequence["bytes | None"], schema_id: int) -> "pa.Array | None":
    """The kernel's pure twin: the same plan, the same answers (None: the per-message path's)."""
    import pyarrow as pa

    prefix = _prefix(p.indexes)
    rows: list[Any] = []
    try:
        for v in values:
            if v is None:
                rows.append(None)
                continue
            if len(v) < 5 or v[0] != 0 or int.from_bytes(v[1:5], "big", signed=True) != schema_id:
                return None
            if not v.startswith(prefix, 5):
                return None  # other message indexes (or [0] not written as the one byte 0): upb's
            at = 5 + len(prefix)
            rows.append(_message(p, 0, v, at, len(v)))
        return pa.array(rows, type=p.type)
    except _Fallback:
        return None


def _prefix(indexes: Sequence[int]) -> bytes:
    from .framing import encode_message_indexes
    return encode_message_indexes(list(indexes))


def _read(p: Plan, op: int, kind: str, wire: int, b: bytes, i: int, end: int) -> tuple[Any, int]:
    """One scalar of wire type `wire` -> (its value in the column's Python form, next position)."""
    if wire == WIRE_VARINT:
        u, i = _varint(b, i, end)
        if op == OPS["vi32"]:
            return (_signed(u, 32) if kind in ("i32", "ts") else u & 0xFFFFFFFF), i
        if op == OPS["vi64"]:
            return (_signed(u, 64) if kind in ("i64", "ts") else u), i
        if op == OPS["vs32"]:
            u &= 0xFFFFFFFF
            return (u >> 1) ^ -(u & 1), i
        if op == OPS["vs64"]:
            return (u >> 1) ^ -(u & 1), i
        if op == OPS["vbool"]:
            return u != 0, i
        return _signed(u, 32), i  # an enum's number
    if wire == WIRE_I32:
        if end - i < 4:
            raise _Fallback
        return struct.unpack_from({"i32": "<i", "u32": "<I", "f32": "<f"}[kind], b, i)[0], i + 4
    if end - i < 8:
        raise _Fallback
    return struct.unpack_from({"i64": "<q", "u64": "<Q", "f64": "<d"}[kind], b, i)[0], i + 8


def _enum_value(p: Plan, e: int, number: int) -> str | None:
    """An enum number's name; its text for an open enum that lacks it; None: dropped (closed)."""
    nums, names, closed = p.enums[e]
    if number in nums:
        return names[nums.index(number)].decode()
    return None if closed else str(number)


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Fallback from None


def _message(p: Plan, m: int, b: bytes, i: int, end: int) -> Any:
    mode, _out, fields, _n = p.msgs[m]
    by_number = {f[0]: f for f in fields}
    slots: dict[int, Any] = {}  # slot -> the last value (a message's: its row)
    lists: dict[int, list[Any]] = {}
    oneof_set: dict[int, int] = {}  # oneof -> the slot set last
    while i < end:
        tag, i = _varint(b, i, end)
        number, wire = tag >> 3, tag & 7
        if tag > 0xFFFFFFFF or number == 0 or wire in (3, 4, 6, 7):
            raise _Fallback  # groups, and what upb refuses
        f = by_number.get(number)
        packed = f is not None and f[4] and wire == WIRE_LEN and f[1] != WIRE_LEN
        if f is None or (wire != f[1] and not packed):  # unknown, or the wrong wire type: upb keeps it unknown
            if mode == "entry":
                raise _Fallback  # upb keeps an entry with unknown fields out of the map (among the message's)
            i = _skip(b, i, end, wire)
            continue
        _num, fwire, op, col, rep, _pres, child, oneof, enum, slot, _o, _l = f
        if wire == WIRE_LEN:
            n, i = _varint(b, i, end)
            if n > end - i:
                raise _Fallback
            lo, i = i, i + n
        if op == OPS["msg"]:
            row = _message(p, child, b, lo, lo + n)
            if rep:
                lists.setdefault(number, []).append(row)
                continue
            if slot in slots or (oneof >= 0 and oneof in oneof_set):
                raise _Fallback  # set twice: Protobuf merges
            slots[slot] = row
            if oneof >= 0:
                oneof_set[oneof] = slot
            continue
        if op in (OPS["str"], OPS["bin"]):
            val: Any = bytes(b[lo:lo + n])
            if op == OPS["str"]:
                val = _text(val)
        elif packed:
            kind = p.cols[p.cols[col][1][0]][0]
            out = lists.setdefault(number, [])
            j = lo
            while j < lo + n:
                x, j = _read(p, op, kind, fwire, b, j, lo + n)
                if op == OPS["venum"]:
                    x = _enum_value(p, enum, x)
                    if x is None:
                        continue
                out.append(x)
            continue
        else:
            kind = p.cols[p.cols[col][1][0]][0] if rep else p.cols[col][0]
            val, i = _read(p, op, kind, wire, b, i, end)
            if op == OPS["venum"]:
                val = _enum_value(p, enum, val)
                if val is None:
                    if mode == "entry":
                        raise _Fallback  # upb keeps the whole entry among the unknown fields
                    continue  # a closed enum's unknown number: the field keeps what it had
        if rep:
            lists.setdefault(number, []).append(val)
            continue
        if oneof >= 0:
            prev = oneof_set.get(oneof)
            if prev is not None and prev != slot:
                if any(g[9] == prev and g[2] == OPS["msg"] for g in fields):
                    raise _Fallback  # a message member replaced: Protobuf clears it, the rows are written
                slots.pop(prev, None)
            oneof_set[oneof] = slot
        slots[slot] = val
    if mode == "ts":
        s, nanos = slots.get(0, 0), slots.get(1, 0)
        us = s * 1_000_000 + nanos // 1000
        if not (TS_MIN_US <= s * 1_000_000 <= TS_MAX_US and TS_MIN_US <= us <= TS_MAX_US):
            raise _Fallback  # datetime refuses it: the per-message path says so
        return us
    out_row: dict[str, Any] = {}
    for idx, f in enumerate(fields):
        _num, _w, op, col, rep, pres, child, _oneof, enum, slot, off, ln = f
        if rep:
            val = lists.get(f[0], [])
            if p.cols[col][0] == "map" and len({k for k, _v in val}) != len(val):
                raise _Fallback  # a key twice: upb keeps the last, where its table puts it
        elif slot in slots:
            val = slots[slot]
        elif pres:
            val = None
        elif op == OPS["msg"]:
            val = _message(p, child, b"", 0, 0)  # a map's absent message value: the empty message
        else:
            kind = p.cols[col][0]
            raw = bytes(p.pool[off:off + ln])
            val = _from_raw(kind, raw) if op != OPS["venum"] else raw.decode()
        if mode == "wrap":
            return val
        out_row[p.names[m][idx]] = val
    if mode == "entry":
        return (out_row["key"], out_row["value"])
    return out_row


def _from_raw(kind: str, raw: bytes) -> Any:
    fmt = {"bool": "<?", "i32": "<i", "u32": "<I", "f32": "<f", "i64": "<q", "u64": "<Q", "f64": "<d"}
    if kind in fmt:
        return struct.unpack(fmt[kind], raw)[0]
    if kind == "str":
        return raw.decode("utf-8")
    return raw


def _skip(b: bytes, i: int, end: int, wire: int) -> int:
    if wire == WIRE_VARINT:
        return _varint(b, i, end)[1]
    if wire == WIRE_I64:
        if end - i < 8:
            raise _Fallback
        return i + 8
    if wire == WIRE_I32:
        if end - i < 4:
            raise _Fallback
        return i + 4
    n, i = _varint(b, i, end)
    if n > end - i:
        raise _Fallback
    return i + n
