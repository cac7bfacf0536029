"""JSON Schema values in Confluent framing: the payload is JSON text (UTF-8); `validate=True`
checks each value against its schema with the `jsonschema` package.

Arrow types from the schema: an object with `properties` -> struct (in the properties' order),
an array with `items` -> list, string -> string, integer -> int64, number -> float64, boolean ->
bool, a type list with "null" and one other type -> that type (nullable); local `$ref`s
(`#/definitions/...`, `#/$defs/...`) are followed. Anything else (oneOf/anyOf/allOf, no type,
several types, an object without properties) -> string holding the value's JSON text, so every
value still has a column.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependencyError
from .base import Format
from .errors import PayloadError, SchemaError, SchemaSourceError
from .framing import header
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


def _shape(v: Any, node: _JNode) -> Any:
    """A parsed JSON value made to fit node's Arrow type (text columns get the JSON text; a value of
    another type than the schema's becomes null in a scalar column rather than failing the batch)."""
    if v is None:
        return None
    k = node.kind
    if k == "text":
        return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if k == "object":
        if not isinstance(v, dict):
            return None
        return {name: _shape(v.get(name), child) for name, child in node.fields}
    if k == "array":
        if not isinstance(v, list):
            return None
        assert node.item is not None
        return [_shape(x, node.item) for x in v]
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
            self._reader = json.loads(reader_schema) if isinstance(reader_schema, str) else reader_schema

    def schema(self, schema_id: int) -> Any:
        hit = self._schemas.get(schema_id)
        if hit is None:
            s = self.source.get(schema_id)
            if s.schema_type != JSON:
                raise SchemaSourceError(f"schema {schema_id} is {s.schema_type}, not JSON", schema_id=schema_id)
            try:
                hit = self._schemas[schema_id] = json.loads(s.schema)
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
                        json.loads(target.schema), default_specification=referencing.jsonschema.DRAFT7)))
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
            obj = json.loads(bytes(data[pos:]))
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
        target: int | None = None
        for i, v in enumerate(values):
            if v is None:
                decoded.append(None)
                continue
            off = None if offsets is None else offsets[i]
            decoded.append(self.decode(v, off, what))
            sid = int.from_bytes(bytes(v[1:5]), "big", signed=True)
            target = sid if target is None else max(target, sid)
        if target is None and self._reader is None:
            return pa.nulls(len(values))
        node = self._node(target)
        return pa.array([_shape(d, node) for d in decoded], type=node.type)

    def to_json(self, data: "bytes | memoryview", offset: int | None = None, what: str = "value") -> Any:
        return self.decode(data, offset, what)
