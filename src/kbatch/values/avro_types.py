"""Avro schemas as this package reads them: full names, the logical-type-free copy fastavro
decodes to raw values, and the Arrow type tree (`AvroTypes.node`) that both Avro paths (fastavro's
and the compiled kernel's, avro_program) build columns for. See avro.py for the type table."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import SchemaSourceError

if TYPE_CHECKING:
    import pyarrow as pa

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


# ------------------------------------------------------------------------------------ schema helpers
def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def strip_logical(schema: Any) -> Any:
    """The schema without `logicalType` annotations: fastavro then returns what Arrow's types hold
    (days, milli/microseconds, unscaled decimal bytes, uuid text) instead of Python objects. (Loops,
    not comprehensions: one Python frame a level, and each record's fields stripped once.)"""
    if isinstance(schema, list):
        out_list = []
        for s in schema:
            out_list.append(strip_logical(s))
        return out_list
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k == "logicalType":
                continue
            if k in ("type", "items", "values"):
                v = strip_logical(v)
            elif k == "fields" and isinstance(v, list):
                fields = []
                for f in v:
                    g = dict(f) if isinstance(f, dict) else f
                    if isinstance(g, dict) and "type" in g:
                        g["type"] = strip_logical(g["type"])
                    fields.append(g)
                v = fields
            out[k] = v
        if set(out) == {"type"} and isinstance(out["type"], str):
            return out["type"]
        return out
    return schema


#: the field of the one-field record `tag_unions` wraps a union's branch i in: BRANCH + str(i)
BRANCH = "_kbatch_branch_"


def _is_null(b: Any) -> bool:
    return b == "null" or (isinstance(b, dict) and b.get("type") == "null")


def tag_unions(schema: Any, count: list[int]) -> Any:
    """A (logical-free) schema whose unions of several non-null types have each branch i wrapped in
    a one-field record (field BRANCH + i, a name unique by `count`): a record adds no bytes in
    Avro's binary encoding, so the same bytes decode, and fastavro's value there is {BRANCH + i:
    the value}: the branch the writer wrote, which the value alone does not always tell (a double
    that is also a float, a map that is also a record). Field defaults are dropped (a writer
    schema's defaults are never read). Named types keep their full names (a wrapper is named in
    the namespace it sits in)."""
    if isinstance(schema, list):
        branches = [tag_unions(b, count) for b in schema]
        if sum(not _is_null(b) for b in schema) < 2:
            return branches
        count[0] += 1
        return [{"type": "record", "name": f"_kbatch_union_{count[0]}_{i}",
                 "fields": [{"name": f"{BRANCH}{i}", "type": b}]} for i, b in enumerate(branches)]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    t = schema.get("type")
    if t in ("record", "error") and isinstance(schema.get("fields"), list):
        out["fields"] = [{k: (tag_unions(v, count) if k == "type" else v) for k, v in f.items() if k != "default"}
                         if isinstance(f, dict) else f for f in schema["fields"]]
    elif t == "array" and "items" in schema:
        out["items"] = tag_unions(schema["items"], count)
    elif t == "map" and "values" in schema:
        out["values"] = tag_unions(schema["values"], count)
    elif isinstance(t, (dict, list)):
        out["type"] = tag_unions(t, count)
    return out


class _Node:
    """One Avro type as this module converts it: the Arrow type, and how values become an array."""
    __slots__ = ("kind", "type", "simple", "fields", "item", "branches", "scale", "size", "name", "raw")

    def __init__(self, kind: str, typ: "pa.DataType", simple: bool = True) -> None:
        self.kind = kind
        self.type = typ
        self.simple = simple  # pyarrow.array(values, type) builds it from fastavro's raw values
        self.fields: list[tuple[str, _Node]] = []
        self.item: _Node | None = None
        self.branches: list[tuple[str, Any, _Node]] = []  # (avro branch name, avro schema, node)
        self.scale = 0
        self.size = 0
        self.name = ""
        self.raw: Any = None  # record: its schema (field defaults); enum: its schema (symbols)


class AvroTypes:
    """Avro schema -> Arrow type tree; named types (records, enums, fixed) are found by full name,
    across the schemas a schema references."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self._building: set[str] = set()

    def register(self, schema: Any, namespace: str | None = None) -> None:
        """Learn the named types `schema` defines (a referenced schema's, before the schema that
        uses them)."""
        if isinstance(schema, list):
            for s in schema:
                self.register(s, namespace)
        elif isinstance(schema, dict):
            t = schema.get("type")
            if t in ("record", "error", "enum", "fixed"):
                full = _full_name(schema["name"], schema.get("namespace", namespace))
                self.names[full] = schema
                ns = full.rpartition(".")[0] or None
                for f in schema.get("fields", ()):
                    self.register(f["type"], ns)
            elif t == "array":
                self.register(schema["items"], namespace)
            elif t == "map":
                self.register(schema["values"], namespace)
            elif isinstance(t, (dict, list)):
                self.register(t, namespace)

    def node(self, schema: Any, namespace: str | None = None) -> _Node:
        import pyarrow as pa

        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return _Node(schema, _PRIM[schema]())
            full = schema if schema in self.names else _full_name(schema, namespace)
            if full not in self.names:
                raise SchemaSourceError(f"the Avro type {schema!r} is not defined (a missing reference?)")
            if full in self._building:
                raise SchemaSourceError(f"the Avro type {full!r} contains itself: a recursive type has no Arrow type")
            self._building.add(full)
            try:
                return self.node(self.names[full], full.rpartition(".")[0] or None)
            finally:
                self._building.discard(full)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        t = schema["type"]
        logical = schema.get("logicalType")
        if t in ("record", "error"):
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            self.names.setdefault(full, schema)
            ns = full.rpartition(".")[0] or None
            self._building.add(full)
            try:
                children = [(f["name"], self.node(f["type"], ns)) for f in schema["fields"]]
            finally:
                self._building.discard(full)
            n = _Node("record", pa.struct([pa.field(name, c.type) for name, c in children]),
                      all(c.simple for _, c in children))
            n.fields = children
            n.name = full
            n.raw = schema
            return n
        if t == "enum":
            self.names.setdefault(_full_name(schema["name"], schema.get("namespace", namespace)), schema)
            n = _Node("enum", pa.string())
            n.raw = schema
            return n
        if t == "fixed":
            self.names.setdefault(_full_name(schema["name"], schema.get("namespace", namespace)), schema)
            if logical == "decimal":
                return self._decimal(schema)
            n = _Node("fixed", pa.binary(int(schema["size"])))
            n.size = int(schema["size"])
            return n
        if t == "array":
            item = self.node(schema["items"], namespace)
            n = _Node("array", pa.list_(item.type), item.simple)
            n.item = item
            return n
        if t == "map":
            item = self.node(schema["values"], namespace)
            n = _Node("map", pa.map_(pa.string(), item.type), item.simple)
            n.item = item
            return n
        if isinstance(t, (dict, list)):
            return self.node(t, namespace)
        if logical is not None:
            got = self._logical(t, logical, schema)
            if got is not None:
                return got
        return self.node(t, namespace)

    def _logical(self, t: str, logical: str, schema: dict[str, Any]) -> _Node | None:
        import pyarrow as pa

        table = {("int", "date"): pa.date32(), ("int", "time-millis"): pa.time32("ms"),
                 ("long", "time-micros"): pa.time64("us"),
                 ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
                 ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
                 ("long", "timestamp-nanos"): pa.timestamp("ns", tz="UTC"),
                 ("long", "local-timestamp-millis"): pa.timestamp("ms"),
                 ("long", "local-timestamp-micros"): pa.timestamp("us"),
                 ("long", "local-timestamp-nanos"): pa.timestamp("ns"),
                 ("string", "uuid"): pa.string()}
        if (t, logical) in table:
            return _Node(t, table[(t, logical)])
        if t == "bytes" and logical == "decimal":
            return self._decimal(schema)
        return None  # an unknown logical type reads as its underlying type (the Avro spec's rule)

    def _decimal(self, schema: dict[str, Any]) -> _Node:
        import pyarrow as pa

        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        typ = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        n = _Node("decimal", typ, simple=False)
        n.scale = scale
        n.size = 16 if precision <= 38 else 32
        return n

    def _union(self, branches: list[Any], namespace: str | None) -> _Node:
        import pyarrow as pa

        others = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        if len(others) == 1:
            return self.node(others[0], namespace)
        if not others:
            return _Node("null", pa.null())
        kids = []
        for b in branches:
            node = self.node(b, namespace)
            kids.append((_branch_name(b, namespace), b, node))
        typ = pa.dense_union([pa.field(name, n.type) for name, _, n in kids])
        n = _Node("union", typ, simple=False)
        n.branches = kids
        return n


def _branch_name(b: Any, namespace: str | None) -> str:
    if isinstance(b, str):
        return b if b in PRIMITIVES or "." in b or not namespace else f"{namespace}.{b}"
    if isinstance(b, dict):
        if b.get("type") in ("record", "error", "enum", "fixed"):
            return _full_name(b["name"], b.get("namespace", namespace))
        return str(b.get("logicalType") or b.get("type"))
    return "union"


def _prim() -> dict[str, Any]:
    import pyarrow as pa

    return {"null": pa.null, "boolean": pa.bool_, "int": pa.int32, "long": pa.int64, "float": pa.float32,
            "double": pa.float64, "bytes": pa.binary, "string": pa.string}


class _Prim(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> Any:
        self.update(_prim())
        return self[key]


_PRIM = _Prim()
