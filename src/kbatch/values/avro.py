"""Avro values in Confluent framing, decoded with fastavro: to Python objects (one value, or many)
and to typed Arrow columns.

Arrow types (`arrow_type`): record -> struct, array -> list, map -> map<string, V>, enum -> string,
fixed -> fixed_size_binary, bytes -> binary, int -> int32, long -> int64, float -> float32,
double -> float64; a union of null and one type -> that type (nullable), a union of several types
-> a dense union with one child per branch (a `null` child for null); logical types: date -> date32,
time-millis -> time32[ms], time-micros -> time64[us], timestamp-millis/-micros -> timestamp[ms/us,
UTC], local-timestamp-millis/-micros -> timestamp[ms/us] without a zone, decimal -> decimal128
(decimal256 past 38 digits), uuid -> string.

Speed: the column path gives fastavro the payloads of a run of records with the same writer schema
as one Avro object-container block per record (fastavro's compiled `reader` then decodes them in
one loop, without a Python call per record), with the logical types left raw (the ints and bytes
that Arrow's date, time, timestamp and decimal types hold), and builds the Arrow column with one
`pyarrow.array` call where the type allows it.

Bounds (kbatch.values.limits): a writer schema is measured once when parsed (avro_limits.AvroShape:
too deep, too large, a fixed too big are refused); the payloads of the schemas whose values can
break a bound (a recursive one, one with an array of items that take no bytes) are walked before
fastavro reads them (avro_limits.check_value), and the compiled kernel keeps the same bounds.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import struct
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from .base import Format
from .avro_limits import AvroShape, SchemaShapeError, ValueLimit, check_value
from .avro_types import BRANCH, AvroTypes, _Node, strip_logical, tag_unions
from .errors import PayloadError, PayloadLimitError, SchemaSourceError
from .framing import header
from .limits import MAX_SCHEMA_JSON_DEPTH, JsonDepthError, json_loads
from .sources import AVRO, RegisteredSchema, SchemaSource

if TYPE_CHECKING:
    import pyarrow as pa

def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError:
        raise MissingDependencyError("decoding Avro values", "fastavro", "schemas") from None
    return fastavro


# ------------------------------------------------------------------------------------ values -> Arrow
def to_arrow(values: list[Any], node: _Node) -> "pa.Array":
    """Raw values (fastavro's, logical types left raw) -> an Arrow array of node.type."""
    import pyarrow as pa

    if node.simple:
        return pa.array(values, type=node.type)
    if node.kind == "decimal":
        return _decimals(values, node)
    if node.kind == "record":
        mask = [v is None for v in values]
        children = [to_arrow([None if v is None else v.get(name) for v in values], child)
                    for name, child in node.fields]
        return pa.StructArray.from_arrays(children, fields=list(node.type), mask=pa.array(mask, pa.bool_())
                                          if any(mask) else None)
    if node.kind in ("array", "map"):
        assert node.item is not None
        offsets = [0]
        flat: list[Any] = []
        keys: list[str] = []
        nulls = []
        for v in values:
            if v is None:
                nulls.append(True)
            else:
                nulls.append(False)
                if node.kind == "map":
                    keys.extend(v.keys())
                    flat.extend(v.values())
                else:
                    flat.extend(v)
            offsets.append(len(flat))
        off = pa.array(offsets, pa.int32())
        null_mask = pa.array(nulls, pa.bool_()) if any(nulls) else None
        items = to_arrow(flat, node.item)
        if node.kind == "map":
            if null_mask is not None:
                off = pa.array([None if n else o for n, o in zip(nulls + [False], offsets)], pa.int32())
            return pa.MapArray.from_arrays(off, pa.array(keys, pa.string()), items, type=node.type)
        return pa.ListArray.from_arrays(off, items, type=node.type, mask=null_mask)
    if node.kind == "union":
        return _union_array(values, node)
    return pa.array(values, type=node.type)


def _decimals(values: list[Any], node: _Node) -> "pa.Array":
    import pyarrow as pa

    width = node.size
    out = bytearray()
    valid = bytearray()
    zero = bytes(width)
    for v in values:
        if v is None:
            out += zero
            valid.append(0)
        else:
            out += int.from_bytes(v, "big", signed=True).to_bytes(width, "little", signed=True)
            valid.append(1)
    n = len(values)
    bitmap = None
    if 0 in valid:
        import numpy as np

        bitmap = pa.py_buffer(np.packbits(np.frombuffer(bytes(valid), np.uint8), bitorder="little").tobytes())
    return pa.Array.from_buffers(node.type, n, [bitmap, pa.py_buffer(bytes(out))])


_INT32 = 1 << 31
_INT64 = 1 << 63


def _float32_exact(v: float) -> bool:
    """Does v survive float32 (what fastavro gives for a float branch: a float32 widened)?"""
    if v != v:
        return True  # NaN
    try:
        return bool(struct.unpack("<f", struct.pack("<f", v))[0] == v)
    except OverflowError:
        return False


def _holds(v: Any, node: _Node, top: bool = False) -> bool:
    """Does node's Arrow type hold the raw value v exactly, as fastavro gives values of that type
    (logical types raw)? The rule a union's branch is picked by (fastavro does not say which branch
    it read): nothing is rounded, truncated or reinterpreted. None is held by any type below a
    union's branch (a field of type ["null", T] is T's node), only by a null branch at its top."""
    k = node.kind
    if v is None:
        return k == "null" or not top
    if k == "union":  # a field's union of several types
        return _branch(v, node) >= 0
    if k == "null":
        return False
    if isinstance(v, bool):
        return k == "boolean"
    if k == "boolean":
        return False
    if isinstance(v, int):
        if k == "int":
            return -_INT32 <= v < _INT32
        if k == "long":
            return -_INT64 <= v < _INT64
        if k in ("float", "double"):  # an int promoted by the reader schema: only if exact
            return abs(v) <= 1 << 53 and (k == "double" or _float32_exact(float(v)))
        return False
    if isinstance(v, float):
        return k == "double" or (k == "float" and _float32_exact(v))
    if isinstance(v, str):
        if k == "enum":
            return v in node.raw.get("symbols", ())
        return k == "string"
    if isinstance(v, (bytes, bytearray)):
        if k == "bytes":
            return True
        if k == "fixed":
            return len(v) == node.size
        if k == "decimal":  # the unscaled value within the precision
            return bool(abs(int.from_bytes(v, "big", signed=True)) < 10 ** node.type.precision)
        return False
    if isinstance(v, dict):
        if k == "record":
            return len(v) == len(node.fields) and all(name in v and _holds(v[name], child)
                                                       for name, child in node.fields)
        if k == "map":
            assert node.item is not None
            item = node.item
            return all(isinstance(key, str) and _holds(x, item) for key, x in v.items())
        return False
    if isinstance(v, list):
        if k == "array":
            assert node.item is not None
            item = node.item
            return all(_holds(x, item) for x in v)
        return False
    return False


def _branch(v: Any, node: _Node) -> int:
    """The first branch of the union that holds v exactly (see _holds), or -1."""
    if v is None:  # a null branch, else (a null row of the column) any branch, its child null there
        for i, (_, _, child) in enumerate(node.branches):
            if child.kind == "null":
                return i
        return 0
    for i, (_, _, child) in enumerate(node.branches):
        if _holds(v, child, top=True):
            return i
    return -1


def _one_reading(v: Any, node: _Node, first: int) -> None:
    """PayloadError when another branch also holds the raw value v and reads it otherwise than
    branch `first` (a record's int field that is a date in one, an int of a map in the other): the
    writer's branch is not known (a reader schema resolved it), and no branch is taken at a guess.
    Branches that read it alike (float and double, int and long, a record and a map of the same
    pairs, bytes and fixed) are not an error: the value is the same in either."""
    mine: str | None = None
    for i in range(first + 1, len(node.branches)):
        child = node.branches[i][2]
        if not _holds(v, child, top=True):
            continue
        if mine is None:
            mine = _reading(v, node.branches[first][2])
        if _reading(v, child) != mine:
            names = [name for name, _, _ in node.branches]
            raise PayloadError(f"the value fits branches {names[first]} and {names[i]} of the union {names}, which "
                               f"read it differently, and the reader schema's resolution does not tell which the "
                               f"writer wrote: decode without a pinned reader schema (each value with its "
                               f"writer's, which tells)")


def _reading(v: Any, node: _Node) -> str:
    """The value as node's Arrow type reads it, maps as dicts (a record of the same pairs reads alike)."""
    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: plain(y) for k, y in x.items()}
        if isinstance(x, list):
            if x and all(isinstance(y, tuple) for y in x):  # (a map's pairs: to_pylist's form)
                return {k: plain(y) for k, y in x}
            return [plain(y) for y in x]
        return x
    return repr(plain(to_arrow([v], node).to_pylist()[0]))


def _union_array(values: list[Any], node: _Node) -> "pa.Array":
    import pyarrow as pa

    per: list[list[Any]] = [[] for _ in node.branches]
    codes = bytearray()
    offsets = []
    for v in values:
        if type(v) is dict and len(v) == 1:
            key = next(iter(v))
            if key.startswith(BRANCH):  # tagged (tag_unions): the writer's branch
                i = int(key[len(BRANCH):])
                v = v[key]
                codes.append(i)
                offsets.append(len(per[i]))
                per[i].append(v)
                continue
        i = _branch(v, node)  # resolved to a reader schema: the first branch that holds it exactly
        if i < 0:
            raise PayloadError(f"a value of Python type {type(v).__name__} fits no branch of the union "
                               f"{[name for name, _, _ in node.branches]} exactly")
        if v is not None:
            _one_reading(v, node, i)
        codes.append(i)
        offsets.append(len(per[i]))
        per[i].append(v)
    try:
        children = [to_arrow(vals, child) for vals, (_, _, child) in zip(per, node.branches)]
    except (pa.ArrowException, OverflowError) as e:  # (not expected: each value is held exactly)
        raise PayloadError(f"a value does not convert to its branch of the union: {e}") from None
    return pa.UnionArray.from_dense(pa.array(codes, pa.int8()), pa.array(offsets, pa.int32()), children,
                                    [name for name, _, _ in node.branches])


# ------------------------------------------------------------------------------------ Python values -> JSON
def jsonable(v: Any) -> Any:
    """A decoded value as plain JSON: bytes as base64, dates and times in ISO-8601, decimals and
    UUIDs as strings, unions unwrapped."""
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    return v


# ------------------------------------------------------------------------------------ the format
class _Writer:
    """One writer schema, parsed for fastavro (with and without logical types), and its types."""

    def __init__(self, schema: RegisteredSchema, source: SchemaSource) -> None:
        fastavro = _fastavro()
        self.id = schema.id
        try:
            raw = json_loads(schema.schema, MAX_SCHEMA_JSON_DEPTH)
            refs = [json_loads(r.schema, MAX_SCHEMA_JSON_DEPTH) for _, r in source.resolve(schema)]
        except JsonDepthError as e:
            raise SchemaSourceError(f"the Avro schema does not parse: {e}", schema_id=schema.id) from None
        except ValueError as e:
            raise SchemaSourceError(f"the Avro schema is not JSON: {e}", schema_id=schema.id) from None
        self.raw, self.refs = raw, refs
        try:
            named: dict[str, Any] = {}
            for r in refs:
                fastavro.parse_schema(r, named_schemas=named)
            self.parsed = fastavro.parse_schema(raw, named_schemas=named)
            self.named = named
            self.names = self.types().names
            #: what the bounds need of this schema (kbatch.values.limits): whether payloads are walked
            self.shape = AvroShape.of(raw, self.names)
            self._widths: dict[int, int] = {}
            named_raw: dict[str, Any] = {}
            for r in refs:
                fastavro.parse_schema(strip_logical(r), named_schemas=named_raw)
            self.plain_raw = strip_logical(raw)
            self.plain = fastavro.parse_schema(self.plain_raw, named_schemas=named_raw)
            self.plain_named = named_raw
            # the branches of its unions of several types tagged (tag_unions): the Arrow column's path
            count = [0]
            tagged_refs = [tag_unions(strip_logical(r), count) for r in refs]
            self.tagged_raw = tag_unions(self.plain_raw, count)
            if count[0]:
                named_tagged: dict[str, Any] = {}
                for r in tagged_refs:
                    fastavro.parse_schema(r, named_schemas=named_tagged)
                self.tagged = fastavro.parse_schema(self.tagged_raw, named_schemas=named_tagged)
            else:
                self.tagged = self.plain
        except SchemaShapeError as e:
            raise SchemaSourceError(str(e), schema_id=schema.id) from None
        except Exception as e:  # fastavro raises SchemaParseException, ValueError, KeyError...
            raise SchemaSourceError(f"the Avro schema does not parse: {e}", schema_id=schema.id) from None
        self._container: dict[tuple[int, bool], bytes] = {}

    def check(self, data: "bytes | memoryview", start: int, offset: int | None, what: str, empty: int = 0) -> int:
        """Refuse a payload that breaks a bound (kbatch.values.limits) before fastavro reads it; only
        the schemas whose values can (a recursive one, an array of items that take no bytes) are walked.
        `empty`: the items that take no bytes in the values before it (see check_value); returns the
        count after it."""
        if not self.shape.needs_check:
            return empty
        try:
            return check_value(bytes(data[start:]), self.raw, self.names, self._widths, empty)
        except ValueLimit as e:
            raise PayloadLimitError(e.detail, offset=offset, schema_id=self.id, what=what) from None

    def types(self) -> AvroTypes:
        t = AvroTypes()
        for r in self.refs:
            t.register(r)
        t.register(self.raw)
        return t

    def container_header(self, sync: bytes, tagged: bool = False) -> bytes:
        """An Avro object-container header naming the (logical-free) schema with all the named types
        its references define inline, so fastavro's reader decodes blocks of our payloads (tagged:
        its unions' branches tagged, see tag_unions)."""
        key = (id(sync), tagged)
        hit = self._container.get(key)
        if hit is not None:
            return hit
        meta = {"avro.schema": json.dumps(self.tagged_raw if tagged else self.plain_raw).encode(),
                "avro.codec": b"null"}
        out = bytearray(b"Obj\x01")
        out += _long(len(meta))
        for k, v in meta.items():
            out += _long(len(k)) + k.encode() + _long(len(v)) + v
        out += _long(0) + sync
        self._container[key] = bytes(out)
        return self._container[key]


def _long(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_SYNC = b"kbatch-avro-sync"  # 16 bytes


class Avro(Format):
    """Avro values framed by a schema registry: `Avro(source)` decodes each value with its writer
    schema (by id); `reader_schema=` (Avro JSON text or a dict) resolves every value to that schema
    (Avro's schema evolution: added fields take their defaults, removed ones are dropped);
    `subject=` takes the newest version of that subject as the reader schema."""

    kind = AVRO

    def __init__(self, source: SchemaSource, *, reader_schema: "str | dict[str, Any] | None" = None,
                 subject: str | None = None) -> None:
        self.source = source
        self._writers: dict[int, _Writer] = {}
        self._reader_raw: Any = None
        self._reader_plain: Any = None
        self._reader_parsed: Any = None
        self._nodes: dict[Any, _Node] = {}
        self._plans: dict[tuple[int, int], Any] = {}  # (id of the reader node, writer id) -> the kernel's Program
        if reader_schema is None and subject is not None:
            latest = source.latest(subject)
            if latest is not None:
                reader_schema = self.writer(latest.id).raw
        if reader_schema is not None:
            fastavro = _fastavro()
            try:
                raw = (json_loads(reader_schema, MAX_SCHEMA_JSON_DEPTH) if isinstance(reader_schema, str)
                       else reader_schema)
                names = AvroTypes()
                names.register(raw)
                AvroShape.of(raw, names.names)
            except (ValueError, KeyError, TypeError) as e:  # not JSON, too deep, not a schema
                raise SchemaSourceError(f"the reader schema does not parse: {e}") from None
            self._reader_raw = raw
            try:
                self._reader_parsed = fastavro.parse_schema(raw, _write_hint=False)
                self._reader_plain = fastavro.parse_schema(strip_logical(raw), _write_hint=False)
            except Exception as e:
                raise SchemaSourceError(f"the reader schema does not parse: {e}") from None

    def writer(self, schema_id: int) -> _Writer:
        w = self._writers.get(schema_id)
        if w is None:
            s = self.source.get(schema_id)
            if s.schema_type != AVRO:
                raise SchemaSourceError(f"schema {schema_id} is {s.schema_type}, not AVRO", schema_id=schema_id)
            w = self._writers[schema_id] = _Writer(s, self.source)
        return w

    # -- one value
    def decode(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed value -> Python objects (fastavro's: dicts for records, logical types as
        datetime, Decimal, UUID)."""
        fastavro = _fastavro()
        sid, pos = header(data, offset, what)
        w = self._lookup(sid, offset, what)
        w.check(data, pos, offset, what)
        try:
            fo = io.BytesIO(bytes(data[pos:]))
            return fastavro.schemaless_reader(fo, w.parsed, self._reader_parsed)
        except Exception as e:
            raise PayloadError(f"the Avro payload does not decode: {type(e).__name__}: {e}", offset=offset,
                               schema_id=sid, what=what) from None

    def _lookup(self, sid: int, offset: int | None, what: str) -> _Writer:
        from .errors import SchemaError

        try:
            return self.writer(sid)
        except SchemaError as e:
            raise e.located(offset=offset, what=what)

    # -- many values -> Arrow
    def arrow_type(self, schema_id: int | None = None) -> "pa.DataType":
        """The Arrow type values decode to: the reader schema's, else writer schema `schema_id`'s."""
        return self._node(schema_id).type

    def _node(self, schema_id: int | None) -> _Node:
        key = "reader" if self._reader_raw is not None else schema_id
        hit = self._nodes.get(key)
        if hit is None:
            if self._reader_raw is not None:
                types = AvroTypes()
                if schema_id is not None:  # named types the reader schema shares with the writer's references
                    for r in self.writer(schema_id).refs:
                        types.register(r)
                types.register(self._reader_raw)
                hit = types.node(self._reader_raw)
            else:
                if schema_id is None:
                    raise ValueError("without a reader schema the Arrow type is a writer schema's: name its id")
                w = self.writer(schema_id)
                hit = w.types().node(w.raw)
            self._nodes[key] = hit
        return hit

    def decode_raw(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None = None,
                   what: str = "value") -> tuple[list[Any], int | None]:
        """Many framed values -> (fastavro's values with logical types left raw, the schema id that
        fixes the Arrow type: the newest id seen, every value resolved to it, unless a reader schema
        was given)."""
        out, target, _ = self._decode_raw(values, offsets, what, 0)
        return out, target

    def _decode_raw(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None, what: str,
                    empty: int, tagged: bool = False) -> tuple[list[Any], int | None, int]:
        """decode_raw, and the items that take no bytes the values hold, counted from `empty` (the
        values decoded before them in the column: one bound for all, kbatch.values.limits). tagged:
        the values of a writer schema that is the column's own (no schema resolution) come with
        their unions' branches tagged (tag_unions), for `to_arrow`."""
        fastavro = _fastavro()
        n = len(values)
        ids: list[int] = [0] * n
        starts: list[int] = [0] * n
        for i, v in enumerate(values):
            if v is None:
                ids[i] = -1
                continue
            off = None if offsets is None else offsets[i]
            sid, pos = header(v, off, what)
            if sid not in self._writers:
                self._lookup(sid, off, what)  # errors come in row order
            ids[i], starts[i] = sid, pos
        seen = sorted({s for s in ids if s != -1})
        target = seen[-1] if seen else None
        out: list[Any] = [None] * n
        if self._reader_raw is not None:
            reader = self._reader_plain
        elif target is not None:
            reader = self.writer(target).plain
        else:
            return out, None, empty
        # runs of one writer schema, each decoded by fastavro's reader in one go
        i = 0
        while i < n:
            sid = ids[i]
            if sid == -1:
                i += 1
                continue
            j = i
            parts: list[Any] = []
            w = self.writer(sid)
            rows = []
            while j < n and (ids[j] == sid or ids[j] == -1):
                if ids[j] != -1:
                    off = None if offsets is None else offsets[j]
                    empty = w.check(values[j], starts[j], off, what, empty)  # type: ignore[arg-type]
                    payload = values[j][starts[j]:]  # type: ignore[index]
                    parts.append(_long(1) + _long(len(payload)))
                    parts.append(payload)
                    parts.append(_SYNC)
                    rows.append(j)
                j += 1
            same = reader is w.plain
            tag = tagged and same
            decoded = None
            if not w.refs:  # a container header needs a self-contained schema
                buf = w.container_header(_SYNC, tag) + b"".join(bytes(p) for p in parts)
                try:
                    decoded = list(fastavro.reader(io.BytesIO(buf), reader_schema=None if same else reader))
                    if len(decoded) != len(rows):
                        decoded = None
                except Exception:
                    decoded = None  # find the value that does not decode, and say which
            if decoded is None:
                decoded = [self._one_raw(values[r], starts[r], w, reader, same, offsets, r, what, tag) for r in rows]
            for r, d in zip(rows, decoded):
                out[r] = d
            i = j
        return out, target, empty

    def _one_raw(self, v: Any, start: int, w: _Writer, reader: Any, same: bool, offsets: Sequence[int] | None,
                 row: int, what: str, tagged: bool = False) -> Any:
        fastavro = _fastavro()
        try:
            d = fastavro.schemaless_reader(io.BytesIO(bytes(v[start:])), w.tagged if tagged else w.plain,
                                           None if same else reader)
        except Exception as e:
            raise PayloadError(f"the Avro payload does not decode: {type(e).__name__}: {e}",
                               offset=None if offsets is None else offsets[row], schema_id=w.id, what=what) from None
        return d

    def decode_arrow(self, column: "pa.Array", offsets: "pa.Array | None", what: str) -> "pa.Array | None":
        """The compiled kernel's path (kbatch.values._avro_kernel): Arrow binary buffers in, Arrow
        buffers out. None when it does not apply (no compiled kernel, a schema it does not take, a
        value that does not decode: the Python path then decodes, or names the error)."""
        import numpy as np
        import pyarrow as pa

        from . import avro_program as P

        if P.K is None or not pa.types.is_binary(column.type):
            return None
        n = len(column)
        if n == 0:
            return None
        bufs = column.buffers()
        offs = np.ascontiguousarray(np.frombuffer(bufs[1], np.int32)[column.offset:column.offset + n + 1])
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
        valid = column.is_valid().to_numpy(zero_copy_only=False).view(np.uint8) if column.null_count else None
        firsts = P.K.schema_ids(data, offs, valid, n)  # {id: its first row}; None: a value not framed
        if not firsts:
            return None
        seen = sorted(firsts)
        for sid in seen:  # (errors of the smallest id first, as the Python path finds them)
            self._lookup(sid, None if offsets is None else offsets[firsts[sid]].as_py(), what)
        if any(self.writer(sid).shape.recursive for sid in seen):
            return None  # no program for a type that contains itself: the Python path walks and names it
        target = None if self._reader_raw is not None else seen[-1]
        node = self._node(target)
        try:
            cols = P.columns(node)
            programs = {}
            for sid in seen:  # a writer schema's plan is compiled once for a reader type
                key = (id(node), sid)
                prog = self._plans.get(key)
                if prog is None:
                    w = self.writer(sid)
                    prog = self._plans[key] = P.program(w.raw, w.refs, node, cols)
                programs[sid] = prog
        except P.Unsupported:
            return None
        cols.reserve(n)
        try:  # a first slice of rows, then room for the rest at its rate (no buffer copied as it grows)
            head = min(n, 1024)
            empty = P.K.decode_rows(cols, programs, data, offs, valid, 0, head, self._empty_before())
            cols.reserve_like(head, n)
            empty = P.K.decode_rows(cols, programs, data, offs, valid, head, n - head, empty)
        except P.K.AvroDecodeError as e:
            if e.code not in P.LIMIT_CODES:
                return None  # the Python path finds the value and names its error
            lo = int(offs[e.row])
            sid = int.from_bytes(bytes(data[lo + 1:lo + 5]), "big", signed=True)
            raise PayloadLimitError(P.limit_detail(e), offset=None if offsets is None else offsets[e.row].as_py(),
                                    schema_id=sid, what=what) from None
        try:
            result: pa.Array = cols.finish(node.type)
        except ValueError:  # a string that is not UTF-8, a decimal past its precision
            return None  # the Python path names the value (fastavro's UnicodeDecodeError)
        self._empty_done(empty)
        return result

    def to_arrow(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None = None,
                 what: str = "value") -> "pa.Array":
        """Many framed values -> one typed Arrow array (null where the value is null)."""
        import pyarrow as pa

        raw, target, empty = self._decode_raw(values, offsets, what, self._empty_before(), tagged=True)
        if target is None and self._reader_raw is None:
            return pa.nulls(len(values))
        node = self._node(target)
        try:
            result = to_arrow(raw, node)
        except PayloadError as e:  # a value no branch of a union holds: name its record
            for i, v in enumerate(raw):
                if v is not None and e.offset is None:
                    try:
                        to_arrow([v], node)
                    except PayloadError:
                        sid = header(values[i], None, what)[0]  # type: ignore[arg-type]
                        raise PayloadError(e.detail, offset=None if offsets is None else offsets[i],
                                           schema_id=sid, what=what) from None
            raise
        self._empty_done(empty)
        return result

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One framed value as plain JSON (see `jsonable`)."""
        return jsonable(self.decode(data, offset, what))

