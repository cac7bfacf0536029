"""Avro schemas -> the compiled kernel's programs (kbatch.values._avro_kernel): the column tree of the
reader schema's Arrow type, and per writer schema the operations that read its bytes into those
columns with Avro's resolution rules (fields matched by name or alias, the writer's extra fields
read and dropped, the reader's extra fields given their defaults, int -> long -> float -> double and
string <-> bytes promotions, enum symbols by name, nullable unions). What the kernel does not do
(unions of several non-null types, record defaults of a record, ...) raises Unsupported, and the
caller decodes with fastavro instead."""
from __future__ import annotations

import struct
from typing import Any

from .. import _backend
from .avro_types import PRIMITIVES, _full_name, _Node

K: Any = None
if _backend.BACKEND != "python":  # KBATCH_BACKEND=python: the pure paths only, here fastavro's
    try:
        from . import _avro_kernel as _kernel
        K = _kernel
    except ImportError:  # not compiled (a pure install): Avro columns come from fastavro
        K = None

__all__ = ["K", "Unsupported", "columns", "program", "Compiler", "LIMIT_CODES", "limit_detail"]

#: the kernel's status codes for a value past a bound (kbatch.values.limits): nesting, empty items
DEPTH_CODE, EMPTY_ITEMS_CODE = 9, 10
LIMIT_CODES = (DEPTH_CODE, EMPTY_ITEMS_CODE)


def limit_detail(e: Any) -> str:
    """The message of the kernel's AvroDecodeError for a bound: the one its pure twin
    (avro_limits.check_value) gives for the same bytes."""
    from .limits import depth_detail, empty_items_detail

    if e.code == DEPTH_CODE:
        return depth_detail("Avro", "records, arrays and maps", e.position)
    return empty_items_detail(e.found, e.position)


class Unsupported(Exception):
    """The schema pair needs something the kernel does not do."""


_PROMOTE = {("int", "int"), ("int", "long"), ("int", "float"), ("int", "double"), ("long", "long"), ("long", "float"),
            ("long", "double"), ("float", "float"), ("float", "double"), ("double", "double"), ("string", "string"),
            ("bytes", "bytes"), ("string", "bytes"), ("bytes", "string"), ("boolean", "boolean")}


def columns(node: _Node) -> Any:
    """The Col tree for a reader type tree."""
    import pyarrow as pa

    k = node.kind
    t = node.type
    if k == "record":
        return K.Col("struct", children=[columns(c) for _, c in node.fields])
    if k == "array":
        assert node.item is not None
        return K.Col("list", children=[columns(node.item)])
    if k == "map":
        assert node.item is not None
        return K.Col("map", children=[K.Col("bin"), columns(node.item)])
    if k == "decimal":
        return K.Col("dec", width=node.size)
    if k == "fixed":
        return K.Col("fixed", width=node.size)
    if k == "null":
        return K.Col("null")
    if k in ("union",):
        raise Unsupported("a union of several types")
    if pa.types.is_boolean(t):
        return K.Col("bool")
    if pa.types.is_binary(t) or pa.types.is_string(t):
        return K.Col("bin")
    if t.bit_width == 32 and not pa.types.is_floating(t):
        return K.Col("i32")
    if pa.types.is_floating(t):
        return K.Col("f32" if t.bit_width == 32 else "f64")
    if t.bit_width == 64:
        return K.Col("i64")
    raise Unsupported(f"the Arrow type {t}")


class Compiler:
    """Writer schema (with its named types) -> an Op tree writing into a reader's Col tree."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names  # the writer's named types by full name

    def _resolve(self, w: Any, ns: str | None) -> tuple[Any, str | None]:
        while isinstance(w, str) and w not in PRIMITIVES:
            full = w if w in self.names else _full_name(w, ns)
            if full not in self.names:
                raise Unsupported(f"unknown type {w}")
            w = self.names[full]
            ns = full.rpartition(".")[0] or None
        while isinstance(w, dict) and isinstance(w.get("type"), (dict, list)) and "name" not in w:
            w = w["type"]
        return w, ns

    def op(self, w: Any, r: _Node, col: Any, ns: str | None = None) -> Any:
        w, ns = self._resolve(w, ns)
        if isinstance(w, list):
            branches = []
            for b in w:
                bb, bns = self._resolve(b, ns)
                if bb == "null" or (isinstance(bb, dict) and bb.get("type") == "null"):
                    branches.append(K.Op("null", col))
                else:
                    branches.append(self.op(bb, r, col, bns))
            return K.Op("union", col, children=branches)
        if r.kind == "null":
            raise Unsupported("a null reader type")
        t = w if isinstance(w, str) else w["type"]
        logical = None if isinstance(w, str) else w.get("logicalType")
        if t in ("record", "error"):
            if r.kind != "record":
                raise Unsupported("record to non-record")
            full = _full_name(w["name"], w.get("namespace", ns))
            wns = full.rpartition(".")[0] or None
            names = {}
            for i, f in enumerate(r.raw["fields"]):
                names[f["name"]] = i
                for a in f.get("aliases", ()):
                    names.setdefault(a, i)
            seen = set()
            kids = []
            for f in w["fields"]:
                at = names.get(f["name"])
                if at is None:
                    kids.append(self.skip(f["type"], wns))
                else:
                    seen.add(at)
                    kids.append(self.op(f["type"], r.fields[at][1], col.children[at], wns))
            defaults = []
            for i, f in enumerate(r.raw["fields"]):
                if i not in seen:
                    if "default" not in f:
                        raise Unsupported(f"reader field {f['name']} has no default")
                    defaults.append(self.default(col.children[i], r.fields[i][1], f["default"]))
            return K.Op("record", col, children=kids, defaults=defaults)
        if t == "enum":
            if r.kind != "enum":
                raise Unsupported("enum to non-enum")
            rs = r.raw["symbols"]
            fallback = r.raw.get("default")
            syms = [s.encode() if s in rs else (None if fallback is None else fallback.encode()) for s in w["symbols"]]
            return K.Op("enum", col, symbols=syms)
        if t == "array":
            if r.kind != "array" or r.item is None:
                raise Unsupported("array to non-array")
            return K.Op("array", col, children=[self.op(w["items"], r.item, col.children[0], ns)])
        if t == "map":
            if r.kind != "map" or r.item is None:
                raise Unsupported("map to non-map")
            return K.Op("map", col, children=[self.op(w["values"], r.item, col.children[1], ns)])
        if t == "fixed":
            size = int(w["size"])
            if r.kind == "decimal":
                if logical != "decimal" or int(w.get("scale", 0)) != r.scale:
                    raise Unsupported("decimal scales differ")
                return K.Op("dec_fixed", col, size=size)
            if r.kind != "fixed" or r.size != size:
                raise Unsupported("fixed sizes differ")
            return K.Op("fixed", col, size=size)
        if isinstance(t, str) and t in PRIMITIVES:
            if r.kind == "decimal":
                if t != "bytes" or logical != "decimal" or int(w.get("scale", 0)) != r.scale:
                    raise Unsupported("decimal from other than bytes of the same scale")
                return K.Op("dec_bytes", col)
            rk = r.kind
            if (t, rk) not in _PROMOTE:
                raise Unsupported(f"{t} to {rk}")
            return K.Op({"string": "bytes"}.get(t, t), col)
        raise Unsupported(f"writer type {t}")

    def skip(self, w: Any, ns: str | None) -> Any:
        """An op that reads a writer value and keeps nothing."""
        w, ns = self._resolve(w, ns)
        if isinstance(w, list):
            return K.Op("union", None, children=[self.skip(b, ns) for b in w])
        t = w if isinstance(w, str) else w["type"]
        if t in ("record", "error"):
            full = _full_name(w["name"], w.get("namespace", ns))
            wns = full.rpartition(".")[0] or None
            return K.Op("record", None, children=[self.skip(f["type"], wns) for f in w["fields"]])
        if t == "enum":
            return K.Op("enum", None, symbols=[None] * len(w["symbols"]))
        if t == "array":
            return K.Op("array", None, children=[self.skip(w["items"], ns)])
        if t == "map":
            return K.Op("map", None, children=[self.skip(w["values"], ns)])
        if t == "fixed":
            return K.Op("fixed", None, size=int(w["size"]))
        if t in PRIMITIVES:
            return K.Op({"string": "bytes"}.get(t, t), None)
        raise Unsupported(f"writer type {t}")

    def default(self, col: Any, r: _Node, value: Any) -> tuple[Any, int, Any]:
        """(col, 0, payload) for a reader field the writer lacks: None appends null; otherwise the
        bytes the column holds for `value` (Avro JSON default)."""
        if value is None:
            return (col, 0, None)
        k = r.kind
        import pyarrow as pa

        t = r.type
        if k in ("array", "map") and not value:
            return (col, 0, b"")
        if k == "enum" or pa.types.is_string(t):
            return (col, 0, str(value).encode())
        if pa.types.is_binary(t) and k != "fixed":
            return (col, 0, str(value).encode("latin-1"))
        if pa.types.is_boolean(t):
            return (col, 0, b"\x01" if value else b"\x00")
        if k in ("int", "long", "float", "double") or pa.types.is_temporal(t):
            fmt = {"i32": "<i", "i64": "<q", "f32": "<f", "f64": "<d"}
            kind = {32: "i32", 64: "i64"}[t.bit_width] if not pa.types.is_floating(t) else (
                "f32" if t.bit_width == 32 else "f64")
            return (col, 0, struct.pack(fmt[kind], value))
        raise Unsupported(f"a default of type {t}")


def program(writer_raw: Any, writer_refs: list[Any], reader: _Node, cols: Any) -> Any:
    """The Op tree reading writer_raw's bytes into cols (the Col tree of `reader`)."""
    from .avro_types import AvroTypes

    names = AvroTypes()
    for r in writer_refs:
        names.register(r)
    names.register(writer_raw)
    return Compiler(names.names).op(writer_raw, reader, cols)
