"""JSON Schema values in Confluent framing: the payload is JSON text (UTF-8); `validate=True`
checks each value against its schema with the `jsonschema` package.

Arrow types from the schema: an object with `properties` -> struct (in the properties' order),
an array with `items` -> list, string -> string, integer -> int64, number -> float64, boolean ->
bool, a type list with "null" and one other type -> that type (nullable); local `$ref`s
(`#/definitions/...`, `#/$defs/...`) are followed. Anything else (oneOf/anyOf/allOf, no type,
several types, an object without properties) -> string holding the value's JSON text, so every
value still has a column. A value whose JSON type is not its column's (a string where the schema
says integer) is a PayloadError naming where in the value, not a null.

Bounds (kbatch.values.limits): a value nests at most MAX_DEPTH objects and arrays, a schema text
MAX_SCHEMA_JSON_DEPTH; deeper ones are refused before they are parsed.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from .base import Format
from .errors import PayloadError, PayloadLimitError, SchemaError, SchemaSourceError
from .framing import header
from .limits import MAX_DEPTH, MAX_SCHEMA_JSON_DEPTH, JsonDepthError, depth_detail, json_loads
from .sources import JSON, SchemaSource

if TYPE_CHECKING:
    import pyarrow as pa


class _JNode:
    __slots__ = ("kind", "type", "fields", "item")

    def __init__(self, kind: str, typ: "pa.DataType") -> None:
        self.kind = kind  # "scalar", "object", "array", "text"
        self.type = typ
        self.fields: list[tuple[str, _JNode]] = []
        self.item: _JNode | None = None


def _node(schema: Any, root: Any, depth: int = 0) -> _JNode:
    import pyarrow as pa

    if depth > 32 or not isinstance(schema, dict):
        return _JNode("text", pa.string())
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        return _node(target, root, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        others = [x for x in t if x != "null"]
        t = others[0] if len(others) == 1 else None
    scalars = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}
    if t in scalars:
        return _JNode("scalar", scalars[t])
    if t == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
        kids = [(name, _node(sub, root, depth + 1)) for name, sub in schema["properties"].items()]
        n = _JNode("object", pa.struct([pa.field(name, k.type) for name, k in kids]))
        n.fields = kids
        return n
    if t == "array" and isinstance(schema.get("items"), dict):
        item = _node(schema["items"], root, depth + 1)
        n = _JNode("array", pa.list_(item.type))
        n.item = item
        return n
    return _JNode("text", pa.string())


class _Mismatch(ValueError):
    """A value of another JSON type than its column's (`detail` says which, and where)."""


_JSON_TYPES = {"string": "string", "int64": "integer", "double": "number", "bool": "boolean"}


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object" if isinstance(v, dict) else type(v).__name__


def _fits(v: Any, want: str) -> bool:
    if want == "integer":
        return isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
    if want == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if want == "boolean":
        return isinstance(v, bool)
    return isinstance(v, str)


def _where(path: Any) -> str:
    """A JSON pointer from _shape's lazy path ((parent, key) pairs; () is the root)."""
    parts = []
    while path:
        path, key = path
        parts.append(str(key))
    return "/" + "/".join(reversed(parts)) if parts else "/"


def _shape(v: Any, node: _JNode, path: Any = ()) -> Any:
    """A parsed JSON value made to fit node's Arrow type (text columns get the JSON text); a value
    of another type than its column's raises _Mismatch (null stays null). The path is built only
    for an error message (it is most of the work when built for every field)."""
    if v is None:
        return None
    k = node.kind
    if k == "text":
        return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if k == "object":
        if not isinstance(v, dict):
            raise _Mismatch(f"expected an object at {_where(path)}, found {_json_type(v)}")
        return {name: _shape(v.get(name), child, (path, name)) for name, child in node.fields}
    if k == "array":
        if not isinstance(v, list):
            raise _Mismatch(f"expected an array at {_where(path)}, found {_json_type(v)}")
        item = node.item
        assert item is not None
        return [_shape(x, item, (path, i)) for i, x in enumerate(v)]
    want = _JSON_TYPES.get(str(node.type), "string")
    if not _fits(v, want):
        found = _json_type(v)
        if found == "integer" and want == "integer":
            found = f"integer {v}, outside int64"
        raise _Mismatch(f"expected {want} at {_where(path)}, found {found}")
    if want == "number":  # an integer past 2**53 too (pyarrow refuses to round one into a double)
        try:
            return float(v)
        except OverflowError:  # past the doubles: infinity, as json.loads reads 1e400
            return float("inf") if v > 0 else float("-inf")
    return v


class JsonSchema(Format):
    """JSON Schema values framed by a schema registry; `validate=True` checks each against its
    writer schema (jsonschema's validator for the schema's `$schema` draft)."""

    kind = JSON

    def __init__(self, source: SchemaSource, *, validate: bool = False, reader_schema: "str | dict[str, Any] | None" = None,
                 subject: str | None = None) -> None:
        self.source = source
        self.validate = validate
        self._schemas: dict[int, Any] = {}
        self._validators: dict[int, Any] = {}
        self._reader: Any = None
        if reader_schema is None and subject is not None:
            latest = source.latest(subject)
            if latest is not None:
                reader_schema = latest.schema
        if reader_schema is not None:
            try:
                self._reader = (json_loads(reader_schema, MAX_SCHEMA_JSON_DEPTH) if isinstance(reader_schema, str)
                                else reader_schema)
            except ValueError as e:
                raise SchemaSourceError(f"the reader schema does not parse: {e}") from None

    def schema(self, schema_id: int) -> Any:
        hit = self._schemas.get(schema_id)
        if hit is None:
            s = self.source.get(schema_id)
            if s.schema_type != JSON:
                raise SchemaSourceError(f"schema {schema_id} is {s.schema_type}, not JSON", schema_id=schema_id)
            try:
                hit = self._schemas[schema_id] = json_loads(s.schema, MAX_SCHEMA_JSON_DEPTH)
            except JsonDepthError as e:
                raise SchemaSourceError(f"the JSON schema does not parse: {e}", schema_id=schema_id) from None
            except ValueError as e:
                raise SchemaSourceError(f"the JSON schema is not JSON: {e}", schema_id=schema_id) from None
        return hit

    def _validator(self, schema_id: int) -> Any:
        v = self._validators.get(schema_id)
        if v is None:
            try:
                import importlib

                jsonschema: Any = importlib.import_module("jsonschema")
                referencing: Any = importlib.import_module("referencing")
                importlib.import_module("referencing.jsonschema")
            except ImportError:
                raise MissingDependencyError("validating JSON Schema values", "jsonschema", "schemas") from None
            schema = self.schema(schema_id)
            s = self.source.get(schema_id)
            resources = []
            for ref, target in self.source.resolve(s):
                try:
                    # a referenced schema without $schema is read as draft-07, the registry's default
                    resources.append((ref.name, referencing.Resource.from_contents(
                        json_loads(target.schema, MAX_SCHEMA_JSON_DEPTH),
                        default_specification=referencing.jsonschema.DRAFT7)))
                except ValueError as e:
                    raise SchemaSourceError(f"reference {ref.name!r} is not a JSON schema: {e}",
                                            schema_id=schema_id) from None
            registry: Any = referencing.Registry().with_resources(resources)
            cls = jsonschema.validators.validator_for(schema)
            v = self._validators[schema_id] = cls(schema, registry=registry)
        return v

    def decode(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        sid, pos = header(data, offset, what)
        try:
            self.schema(sid)
        except SchemaError as e:
            raise e.located(offset=offset, what=what)
        try:
            obj = json_loads(bytes(data[pos:]), MAX_DEPTH)
        except JsonDepthError as e:
            raise PayloadLimitError(depth_detail("JSON", "objects and arrays", e.position), offset=offset,
                                    schema_id=sid, what=what) from None
        except (ValueError, UnicodeDecodeError) as e:
            raise PayloadError(f"the payload is not JSON: {e}", offset=offset, schema_id=sid, what=what) from None
        if self.validate:
            errors = sorted(self._validator(sid).iter_errors(obj), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                where = "/".join(str(p) for p in first.path) or "(the root)"
                raise PayloadError(f"the value fails its JSON schema at {where}: {first.message}", offset=offset,
                                   schema_id=sid, what=what)
        return obj

    def _node(self, schema_id: int | None) -> _JNode:
        schema = self._reader if self._reader is not None else (None if schema_id is None else self.schema(schema_id))
        return _node(schema, schema)

    def arrow_type(self, schema_id: int | None = None) -> "pa.DataType":
        return self._node(schema_id).type

    def to_arrow(self, values: Sequence["bytes | memoryview | None"], offsets: Sequence[int] | None = None,
                 what: str = "value") -> "pa.Array":
        import pyarrow as pa

        decoded: list[Any] = []
        sids: list[int | None] = []
        target: int | None = None
        for i, v in enumerate(values):
            if v is None:
                decoded.append(None)
                sids.append(None)
                continue
            off = None if offsets is None else offsets[i]
            decoded.append(self.decode(v, off, what))
            sid = int.from_bytes(bytes(v[1:5]), "big", signed=True)
            sids.append(sid)
            target = sid if target is None else max(target, sid)
        if target is None and self._reader is None:
            return pa.nulls(len(values))
        node = self._node(target)
        shaped = []
        for i, d in enumerate(decoded):
            try:
                shaped.append(_shape(d, node))
            except _Mismatch as e:
                col = "the reader schema's" if self._reader is not None else f"schema {target}'s"
                raise PayloadError(f"the JSON value does not fit {col} column type: {e}",
                                   offset=None if offsets is None else offsets[i], schema_id=sids[i],
                                   what=what) from None
        return pa.array(shaped, type=node.type)

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        return self.decode(data, offset, what)
