"""Plain JSON values (no registry framing: the bytes are the JSON text, as most producers write
them) as typed Arrow columns, typed by a JSON Schema or by one inferred over a sample of the
values, as Spark's `from_json` with `schema_of_json` types them.

    fmt = PlainJson({"type": "object", "properties": {"id": {"type": "integer"}}})  # a given schema
    fmt = PlainJson()                        # inferred over the first `sample` values it decodes
    table = kbatch.decode_columns(data, value_schema=fmt)

On the command line: `-s value=json-plain` (inferred) or `-s value=json-plain:SCHEMA.json` (a JSON
Schema file); no `--schemas` (`-s value=json` is JSON Schema in the registry's framing).

The Arrow types are JSON Schema's (kbatch.values.json_schema: object -> struct, array -> list,
integer -> int64, number -> float64, string, boolean; anything else -> a string of the value's
JSON text). Inference (`infer_schema`) writes such a schema: integers and numbers together make a
number, objects merge their properties (first seen first), a field seen only as null or with
types that no one column holds (a string here, an object there) is a string of JSON text, as
Spark's inference makes it. Once inferred (from the first column the format decodes that has
values: per topic in `kbatch export` and the tables), the schema stays: a later value that does
not fit it is that record's error, as one that does not fit a given schema.

The parser: pyarrow's JSON reader over the column's values joined by newlines, with the schema as
its explicit schema (measured against orjson, msgspec and simdjson, which make Python objects to
be converted: bench/bench_values.py, "json-plain"). It takes a column only where its answer is
the reference's (json.loads, then each value made to fit the schema, as `to_arrow` does value by
value): every value an object (`{` first, `}` last; pyarrow reads a top-level `null` line as an
object of nulls, and crashes on one alone), no schema node that keeps JSON text, nesting bounded
by MAX_DEPTH, one row per value. Anything else, and any column pyarrow refuses, is decoded value
by value by the reference, which names the first record that fails (its offset): bad JSON follows
on_decode_error as every format's errors do (kbatch.values.rules).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .base import Format
from .errors import PayloadError, PayloadLimitError, SchemaSourceError
from .json_schema import _JNode, _Mismatch, _node, _shape
from .limits import MAX_DEPTH, MAX_SCHEMA_JSON_DEPTH, JsonDepthError, depth_detail, json_loads

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from .rules import OnError

KIND = "json-plain"
#: values inference reads by default (Spark's schema inference reads every row; a sample keeps
#: the cost of a first pass bounded)
DEFAULT_SAMPLE = 1000
#: with on_error, the rows the fast path tries at a time; a block it refuses is tried in eighths
#: down to SUB_BLOCK rows, which go value by value
BLOCK, SUB_BLOCK = 4096, 64


# ------------------------------------------------------------------------------------ inference
def _merge(a: Any, b: Any) -> Any:
    """The schema that holds values of both schemas (None: only nulls seen so far; {}: JSON text)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    ta, tb = a.get("type"), b.get("type")
    if {ta, tb} == {"integer", "number"}:
        return {"type": "number"}
    if ta == tb == "object":
        props = dict(a["properties"])
        for name, sub in b["properties"].items():
            props[name] = _merge(props.get(name), sub)
        return {"type": "object", "properties": props}
    if ta == tb == "array":
        return {"type": "array", "items": _merge(a.get("items"), b.get("items"))}
    return {}


def _schema_of(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return {"type": "boolean"}
    if isinstance(v, int):
        return {"type": "integer"} if -2**63 <= v < 2**63 else {"type": "number"}
    if isinstance(v, float):
        return {"type": "number"}
    if isinstance(v, str):
        return {"type": "string"}
    if isinstance(v, list):
        items = None
        for x in v:
            items = _merge(items, _schema_of(x))
        return {"type": "array", "items": items}
    props: dict[str, Any] = {}
    for name, x in v.items():
        props[name] = _merge(props.get(name), _schema_of(x))
    return {"type": "object", "properties": props}


def _finished(s: Any) -> Any:
    """Fields only ever null, arrays only ever empty and objects without properties become JSON text ({})."""
    if s is None:
        return {}
    if s.get("type") == "object":
        if not s["properties"]:
            return {}
        return {"type": "object", "properties": {k: _finished(v) for k, v in s["properties"].items()}}
    if s.get("type") == "array":
        return {"type": "array", "items": _finished(s.get("items"))} if s.get("items") is not None else {}
    return s


def infer_schema(values: Iterable["bytes | str | memoryview | None"], sample: int = DEFAULT_SAMPLE) -> dict[str, Any]:
    """The JSON Schema of the first `sample` values that parse (None and bad JSON are passed over),
    as Spark's schema_of_json / spark.read.json infer one: kbatch.values.PlainJson's schema."""
    s = None
    seen = 0
    for v in values:
        if seen >= sample:
            break
        if v is None:
            continue
        try:
            obj = json_loads(v if isinstance(v, str) else bytes(v), MAX_DEPTH)
        except (ValueError, UnicodeDecodeError):
            continue
        seen += 1
        s = _merge(s, _schema_of(obj))
    return _finished(s)  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------ the fast path
def _text_free(node: _JNode) -> bool:
    if node.kind == "text":
        return False
    if node.kind == "object":
        return all(_text_free(k) for _n, k in node.fields)
    if node.kind == "array":
        assert node.item is not None
        return _text_free(node.item)
    return True


def _buffers(column: "pa.Array") -> "tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None":
    """(offsets as int64, data) of a binary / string column."""
    import numpy as np
    import pyarrow as pa

    t = column.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        dtype: Any = np.int32
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        dtype = np.int64
    else:
        return None
    bufs = column.buffers()
    n = len(column)
    offs = np.frombuffer(bufs[1], dtype)[column.offset:column.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(0, np.uint8)
    return offs, data


def _negative_int_zero(body: "np.ndarray[Any, Any]") -> bool:
    """Does the text hold `-0` not followed by a digit, `.`, `e` or `E` (the integer literal -0,
    or those bytes in a string: the reference then decodes the values)?"""
    import numpy as np

    minus = np.flatnonzero(body[:-2] == 0x2D)  # (each value ends with `}`: `-0` is never last)
    zero = minus[body[minus + 1] == 0x30]
    if not len(zero):
        return False
    after = body[zero + 2]
    return not np.isin(after, np.frombuffer(b"0123456789.eE", np.uint8)).all()


def _fast(column: "pa.Array", node: _JNode) -> "pa.Array | None":
    """The column through pyarrow's JSON reader, or None where its answer might not be the
    reference's (see the module's doc)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.json as pj

    if node.kind != "object" or not _text_free(node):
        return None
    vals = column if column.null_count == 0 else column.drop_null()
    bufs = _buffers(vals)
    if bufs is None or len(vals) == 0:
        return None
    offs, data = bufs
    m = len(vals)
    lo, hi = int(offs[0]), int(offs[-1])
    starts, ends = offs[:-1], offs[1:]
    if (ends - starts < 2).any():
        return None
    if not ((data[starts] == 0x7B).all() and (data[ends - 1] == 0x7D).all()):  # { ... }
        return None
    body = data[lo:hi]
    # pyarrow's reader does not check UTF-8 (it keeps 0xFF in a string column); json.loads refuses it
    if (body >= 0x80).any():
        try:
            vals.cast(pa.string())  # Arrow's UTF-8 validation
        except pa.ArrowInvalid:
            return None
    # nesting: a value with at most MAX_DEPTH `{` / `[` bytes (in strings or not) nests no deeper
    opens = np.flatnonzero((body == 0x7B) | (body == 0x5B))
    if len(opens) > MAX_DEPTH and (np.diff(np.searchsorted(opens, offs - lo)) > MAX_DEPTH).any():
        return None
    # The values back to back, as they lie in the column (no copy): each is `{...}`, so where one
    # ends inside an open object, array or string the next one's `{` is a parse error, and a
    # value that holds two objects makes one row too many: m rows are the m values, one each.
    multiline = bool(((body == 0x0A) | (body == 0x0D)).any())
    typ = node.type
    if _negative_int_zero(body) and "double" in str(typ):
        return None  # pyarrow reads the integer -0 in a number column as -0.0; json.loads and Spark as 0.0
    try:
        t = pj.read_json(vals.buffers()[2].slice(lo, hi - lo), read_options=pj.ReadOptions(
            use_threads=False, block_size=max(1 << 20, min(hi - lo + 1, (1 << 31) - 1))),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(list(typ)), unexpected_field_behavior="ignore",
                                          newlines_in_values=multiline))
    except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
        return None
    if t.num_rows != m:
        return None
    kids = [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in t.columns]
    arr = pa.StructArray.from_arrays(kids, fields=list(typ))
    if arr.type != typ:
        arr = arr.cast(typ)
    if m == len(column):
        return arr
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    where = np.full(len(column), -1, np.int64)
    where[valid] = np.arange(m)
    return arr.take(pa.array(where, mask=where < 0))


def _sliced(column: "pa.Array", step: int) -> Any:
    """The column's values as Python objects, `step` at a time (inference stops after its sample)."""
    for at in range(0, len(column), step):
        yield from column.slice(at, step).to_pylist()


# ------------------------------------------------------------------------------------ the format
class PlainJson(Format):
    """Unframed JSON keys or values typed by a JSON Schema (`schema`: a dict or its JSON text) or,
    without one, by the schema `infer_schema` finds in the first `sample` values of the first
    column decoded with it (kept from then on: `schema_json` says what it is)."""

    kind = KIND
    framed = False

    def __init__(self, schema: "dict[str, Any] | str | None" = None, *, sample: int = DEFAULT_SAMPLE) -> None:
        if isinstance(schema, str):
            try:
                schema = json_loads(schema, MAX_SCHEMA_JSON_DEPTH)
            except ValueError as e:
                raise SchemaSourceError(f"the JSON schema does not parse: {e}") from None
        if schema is not None and not isinstance(schema, dict):
            raise SchemaSourceError(f"a JSON schema is an object, not {type(schema).__name__}")
        if sample < 1:
            raise ValueError(f"sample must be >= 1, not {sample}")
        self.sample = sample
        self.given = schema is not None
        self._schema: Any = schema
        self._tree: _JNode | None = None if schema is None else _node(schema, schema)

    @classmethod
    def from_spec(cls, spec: str) -> "PlainJson":
        """`json-plain` (inferred) or `json-plain:PATH` (the JSON Schema in the file PATH; or the
        schema's JSON text itself, starting with `{`)."""
        kind, colon, rest = spec.partition(":")
        if kind.lower() != KIND:
            raise ValueError(f"{spec!r} is not a {KIND} spec")
        if not colon:
            return cls()
        if not rest:
            raise ValueError(f"{spec!r}: give the JSON Schema's file after the colon ({KIND}:schema.json), "
                             f"or no colon to infer it")
        if rest.lstrip().startswith("{"):
            return cls(rest)
        try:
            with open(os.path.expanduser(rest), encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise SchemaSourceError(f"{rest}: the JSON schema cannot be read: {e.strerror or e}") from None
        try:
            return cls(text)
        except SchemaSourceError as e:
            raise SchemaSourceError(f"{rest}: {e.detail}") from None

    @property
    def schema_json(self) -> Any:
        """The schema the values are typed by (None: not inferred yet)."""
        return self._schema

    def rule(self) -> str:
        """What a table records for this column (kbatch.values.reader_rule)."""
        import hashlib

        if not self.given:
            return f"{KIND}:inferred"
        text = json.dumps(self._schema, sort_keys=True, separators=(",", ":"))
        return f"{KIND}:" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def _tree_for(self, values: Any) -> _JNode | None:
        """The schema's node tree, inferring it from `values` (a list, or an Arrow column read a
        slice at a time) if need be; None while there is nothing to infer from (only nulls)."""
        if self._tree is None:
            if isinstance(values, list):
                if all(v is None for v in values):
                    return None
                s = infer_schema(values, self.sample)
            else:
                if values.null_count == len(values):
                    return None
                s = infer_schema(_sliced(values, self.sample), self.sample)
            self._schema = s
            self._tree = _node(s, s)
        return self._tree

    def arrow_type(self, schema_id: int | None = None) -> "pa.DataType":
        """The column's type; ValueError before a schema is given or inferred."""
        if self._tree is None:
            raise ValueError("no JSON schema yet: none was given and no value was seen to infer one from")
        return self._tree.type

    def _one(self, data: "bytes | memoryview | str", offset: int | None, what: str) -> Any:
        try:
            return json_loads(data if isinstance(data, str) else bytes(data), MAX_DEPTH)
        except JsonDepthError as e:
            raise PayloadLimitError(depth_detail("JSON", "objects and arrays", e.position), offset=offset,
                                    what=what) from None
        except (ValueError, UnicodeDecodeError) as e:
            raise PayloadError(f"the value is not JSON: {e}", offset=offset, what=what) from None

    def _shaped(self, obj: Any, node: _JNode, offset: int | None, what: str) -> Any:
        try:
            return _shape(obj, node)
        except _Mismatch as e:
            which = "the JSON schema's" if self.given else "the inferred schema's"
            raise PayloadError(f"the JSON value does not fit {which} column type: {e}", offset=offset,
                               what=what) from None

    def to_arrow(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None = None,
                 what: str = "value") -> "pa.Array":
        """The reference: each value parsed (json.loads, nesting bounded) and made to fit the schema."""
        import pyarrow as pa

        vals = list(values)
        node = self._tree_for(vals)
        if node is None:
            return pa.nulls(len(vals))
        out = []
        for i, v in enumerate(vals):
            off = None if offsets is None else offsets[i]
            out.append(None if v is None else self._shaped(self._one(v, off, what), node, off, what))
        try:
            return pa.array(out, type=node.type)
        except (pa.ArrowException, UnicodeEncodeError):  # a lone surrogate (\ud800) in a string
            for i, obj in enumerate(out):
                try:
                    pa.array([obj], type=node.type)
                except (pa.ArrowException, UnicodeEncodeError) as e:
                    raise PayloadError(f"the JSON value has no Arrow form: {e}", what=what,
                                       offset=None if offsets is None else offsets[i]) from None
            raise

    def decode_arrow(self, column: "pa.Array", offsets: "pa.Array | None", what: str) -> "pa.Array | None":
        import pyarrow as pa

        if column.null_count == len(column):
            return pa.nulls(len(column), pa.null() if self._tree is None else self._tree.type)
        node = self._tree_for(column)
        if node is None:
            return pa.nulls(len(column))
        fast = _fast(column, node)
        if fast is not None:
            return fast
        return None  # rules._plain: to_arrow over the values, which names the record that fails

    def decode_column(self, column: "pa.Array | pa.ChunkedArray", offsets: "pa.Array | pa.ChunkedArray | None" = None,
                      what: str = "value", on_error: "OnError | None" = None) -> "pa.Array":
        """As every format's (kbatch.values.rules), but with on_error the column goes by blocks of
        BLOCK rows: a block the fast path takes is done, one it refuses is read value by value, each
        bad value reported (in row order) and null; not the rules' halving, which repeats the fast
        path's attempt at every level (20x the clean column's time at 1 % bad values)."""
        import pyarrow as pa

        if on_error is None:
            return super().decode_column(column, offsets, what)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if isinstance(offsets, pa.ChunkedArray):
            offsets = offsets.combine_chunks() if offsets.num_chunks != 1 else offsets.chunk(0)
        n = len(column)
        if n == 0 or column.null_count == n:
            return pa.nulls(n, pa.null() if self._tree is None else self._tree.type)
        node = self._tree_for(column)
        assert node is not None  # some value is not null
        whole = _fast(column, node)
        if whole is not None:
            return whole
        parts: list[pa.Array] = []
        self._blocks(column, offsets, what, node, 0, n, BLOCK, on_error, parts)
        return pa.concat_arrays(parts)

    def _blocks(self, column: "pa.Array", offsets: "pa.Array | None", what: str, node: _JNode, lo: int, hi: int,
                size: int, on_error: "OnError", parts: "list[pa.Array]") -> None:
        """Rows [lo, hi) by blocks of `size` through the fast path; a block it refuses is tried again
        in eighths down to SUB_BLOCK rows, then value by value (a few bad values cost a few small
        blocks, not their whole BLOCK)."""
        for at in range(lo, hi, size):
            k = min(size, hi - at)
            part = column.slice(at, k)
            fast = _fast(part, node)
            if fast is not None:
                parts.append(fast)
            elif size > SUB_BLOCK:
                self._blocks(column, offsets, what, node, at, at + k, max(SUB_BLOCK, size // 8), on_error, parts)
            else:
                offs = None if offsets is None else offsets.slice(at, k).to_pylist()
                parts.append(self._each(part.to_pylist(), offs, what, node, at, on_error))

    def _each(self, values: list[Any], offsets: list[int] | None, what: str, node: _JNode, row0: int,
              on_error: "OnError") -> "pa.Array":
        """Values one by one (the reference); a bad one goes to on_error(row, error) and is null."""
        import pyarrow as pa

        from .errors import SchemaError

        out: list[Any] = []
        errors: dict[int, SchemaError] = {}
        for i, v in enumerate(values):
            off = None if offsets is None else offsets[i]
            try:
                out.append(None if v is None else self._shaped(self._one(v, off, what), node, off, what))
            except SchemaError as e:
                errors[i] = e
                out.append(None)
        try:
            arr = pa.array(out, type=node.type)
        except (pa.ArrowException, UnicodeEncodeError):  # a lone surrogate (\ud800) has no Arrow form
            for i, obj in enumerate(out):
                try:
                    pa.array([obj], type=node.type)
                except (pa.ArrowException, UnicodeEncodeError) as e:
                    errors[i] = PayloadError(f"the JSON value has no Arrow form: {e}", what=what,
                                             offset=None if offsets is None else offsets[i])
                    out[i] = None
            arr = pa.array(out, type=node.type)
        for i in sorted(errors):
            on_error(row0 + i, errors[i])
        return arr

    def decode(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        """One value as Python objects (made to fit the schema when one is given or inferred)."""
        obj = self._one(data, offset, what)
        return obj if self._tree is None else self._shaped(obj, self._tree, offset, what)

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        return self.decode(data, offset, what)


def plain_spec(spec: object) -> bool:
    """Does an -s kind / value_schema= string name plain JSON (`json-plain`, `json-plain:...`)?"""
    return isinstance(spec, str) and spec.partition(":")[0].lower() == KIND


__all__ = ["PlainJson", "infer_schema", "plain_spec", "KIND", "DEFAULT_SAMPLE"]
