"""Avro schemas -> the compiled kernel's plans (kbatch.values._avro_kernel): the columns of the
reader schema's Arrow type (flat, in preorder), and per writer schema the flat array of operations,
compiled once, that read its bytes into those columns with Avro's resolution rules (fields matched by name or alias, the writer's extra fields
read and dropped, the reader's extra fields given their defaults, int -> long -> float -> double and
string <-> bytes promotions, enum symbols by name, nullable unions). What the kernel does not do
(unions of several non-null types, record defaults of a record, ...) raises Unsupported, and the
caller decodes with fastavro instead."""
from __future__ import annotations

import struct
from typing import Any

from .. import _backend
from .avro_types import PRIMITIVES, _full_name, _Node
from .limits import MAX_DEPTH

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
    """The kernel's Columns for a reader type tree: one column a node, in preorder (0: the root)."""
    specs: list[tuple[str, int, list[int]]] = []
    _column(node, specs)
    return K.Columns(specs)


def _column(node: _Node, specs: list[tuple[str, int, list[int]]]) -> int:
    import pyarrow as pa

    at = len(specs)
    specs.append(("", 0, []))
    k = node.kind
    t = node.type
    kids: list[int] = []
    width = 0
    if k == "record":
        kind = "struct"
        kids = [_column(c, specs) for _, c in node.fields]
    elif k == "array":
        assert node.item is not None
        kind = "list"
        kids = [_column(node.item, specs)]
    elif k == "map":
        assert node.item is not None
        kind = "map"
        kids = [len(specs)]
        specs.append(("str", 0, []))
        kids.append(_column(node.item, specs))
    elif k == "decimal":
        kind, width = "dec", node.size
    elif k == "fixed":
        kind, width = "fixed", node.size
    elif k == "null":
        kind = "null"
    elif k == "enum":  # symbols are Avro names (ASCII): no UTF-8 check
        kind = "bin"
    elif k == "union":
        raise Unsupported("a union of several types")
    elif pa.types.is_boolean(t):
        kind = "bool"
    elif pa.types.is_string(t):
        kind = "str"
    elif pa.types.is_binary(t):
        kind = "bin"
    elif pa.types.is_floating(t):
        kind = "f32" if t.bit_width == 32 else "f64"
    elif t.bit_width == 32:
        kind = "i32"
    elif t.bit_width == 64:
        kind = "i64"
    else:
        raise Unsupported(f"the Arrow type {t}")
    specs[at] = (kind, width, kids)
    return at


#: a writer primitive read into a column of this kind -> the kernel's operation
_READ = {("int", "i32"): "v_i32", ("int", "i64"): "v_i64", ("int", "f32"): "v_f32", ("int", "f64"): "v_f64",
         ("long", "i64"): "v_i64", ("long", "f32"): "v_f32", ("long", "f64"): "v_f64", ("float", "f32"): "f32",
         ("float", "f64"): "f32_f64", ("double", "f64"): "f64", ("boolean", "bool"): "bool",
         ("string", "str"): "bin", ("string", "bin"): "bin", ("bytes", "bin"): "bin", ("bytes", "str"): "bin"}
#: a writer primitive skipped -> (operation, bytes)
_SKIP = {"boolean": ("s_bool", 1), "int": ("s_varint", 0), "long": ("s_varint", 0), "float": ("s_fixed", 4),
         "double": ("s_fixed", 8), "string": ("s_bytes", 0), "bytes": ("s_bytes", 0)}


class Compiler:
    """Writer schema (with its named types) -> the flat operations writing into a reader's columns
    (see _avro_kernel's doc): schema resolution is decided here, once."""

    def __init__(self, names: dict[str, Any], specs: list[tuple[str, int, list[int]]]) -> None:
        self.names = names  # the writer's named types by full name
        self.specs = specs  # the reader's columns (Columns.specs)
        self.ops: list[tuple[str, int, int, int, int]] = []
        self.branches: list[tuple[int, int]] = []
        self.symbols: list[bytes | None] = []
        self.defaults = bytearray()

    def program(self) -> Any:
        return K.Program(self.ops, self.branches, self.symbols, bytes(self.defaults))

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

    def _emit(self, name: str, col: int, a: int = 0, b: int = 0, c: int = 0) -> int:
        self.ops.append((name, col, a, b, c))
        return len(self.ops) - 1

    def minw(self, w: Any, ns: str | None, seen: frozenset[str] = frozenset()) -> int:
        """The payload bytes a writer value takes at least (0: an item that costs no byte)."""
        w, ns = self._resolve(w, ns)
        if isinstance(w, list):  # the branch index
            return 1
        t = w if isinstance(w, str) else w["type"]
        if t == "null":
            return 0
        if t == "float":
            return 4
        if t == "double":
            return 8
        if t == "fixed":
            return int(w["size"])
        if t in ("record", "error"):
            full = _full_name(w["name"], w.get("namespace", ns))
            if full in seen:
                return 1
            wns = full.rpartition(".")[0] or None
            return sum(self.minw(f["type"], wns, seen | {full}) for f in w["fields"])
        return 1

    def op(self, w: Any, r: _Node | None, col: int, ns: str | None = None, depth: int = 0) -> None:
        """Emit the operations reading one writer value `w` into column `col` of reader type `r`
        (col -1, r None: read and drop it). depth: the records, arrays and maps open around it."""
        w, ns = self._resolve(w, ns)
        skip = col < 0
        if isinstance(w, list):
            at = self._emit("union", col)
            first = len(self.branches)
            self.branches.extend([(-1, -1)] * len(w))
            for i, b in enumerate(w):
                bb, bns = self._resolve(b, ns)
                if bb == "null" or (isinstance(bb, dict) and bb.get("type") == "null"):
                    continue
                lo = len(self.ops)
                self.op(bb, r, col, bns, depth)
                self.branches[first + i] = (lo, len(self.ops))
            self.ops[at] = ("union", col, len(self.ops), first, len(w))
            return
        t = w if isinstance(w, str) else w["type"]
        if not skip and r is not None and r.kind == "null":
            if t != "null":
                raise Unsupported("a null reader type")
            self._emit("null", col)  # a column of nulls
            return
        logical = None if isinstance(w, str) else w.get("logicalType")
        kind = "" if skip else self.specs[col][0]
        if t in ("record", "error", "array", "map") and depth + 1 > MAX_DEPTH:
            self._emit("depth", -1, depth + 1)  # a value reaching it breaks the bound; nothing deeper is compiled
            return
        if t in ("record", "error"):
            full = _full_name(w["name"], w.get("namespace", ns))
            wns = full.rpartition(".")[0] or None
            if skip:
                for f in w["fields"]:
                    self.op(f["type"], None, -1, wns, depth + 1)
                return
            assert r is not None
            if r.kind != "record":
                raise Unsupported("record to non-record")
            names = {}
            for i, f in enumerate(r.raw["fields"]):
                names[f["name"]] = i
                for a in f.get("aliases", ()):
                    names.setdefault(a, i)
            seen = set()
            kids = self.specs[col][2]
            for f in w["fields"]:
                found = names.get(f["name"])
                if found is None:
                    self.op(f["type"], None, -1, wns, depth + 1)
                else:
                    seen.add(found)
                    self.op(f["type"], r.fields[found][1], kids[found], wns, depth + 1)
            for i, f in enumerate(r.raw["fields"]):
                if i not in seen:
                    if "default" not in f:
                        raise Unsupported(f"reader field {f['name']} has no default")
                    self.default(kids[i], r.fields[i][1], f["default"])
            self._emit("mark", col)
            return
        if t == "enum":
            n = len(w["symbols"])
            if skip:
                self._emit("s_enum", -1, 0, n)
                return
            assert r is not None
            if r.kind != "enum":
                raise Unsupported("enum to non-enum")
            rs = r.raw["symbols"]
            fallback = r.raw.get("default")
            first = len(self.symbols)
            self.symbols.extend(s.encode() if s in rs else (None if fallback is None else fallback.encode())
                                for s in w["symbols"])
            self._emit("enum", col, first, n)
            return
        if t in ("array", "map"):
            item_w = w["items"] if t == "array" else w["values"]
            at = self._emit(t, col)
            if skip:
                self.op(item_w, None, -1, ns, depth + 1)
            else:
                assert r is not None
                if r.kind != t or r.item is None:
                    raise Unsupported(f"{t} to non-{t}")
                kids = self.specs[col][2]
                self.op(item_w, r.item, kids[0] if t == "array" else kids[1], ns, depth + 1)
            empty = 1 if t == "array" and self.minw(item_w, ns) == 0 else 0
            self.ops[at] = (t, col, len(self.ops), empty, 0)
            return
        if t == "fixed":
            size = int(w["size"])
            if skip:
                self._emit("s_fixed", -1, size)
                return
            assert r is not None
            if r.kind == "decimal":
                if logical != "decimal" or int(w.get("scale", 0)) != r.scale:
                    raise Unsupported("decimal scales differ")
                self._emit("dec_fixed", col, size)
                return
            if r.kind != "fixed" or r.size != size:
                raise Unsupported("fixed sizes differ")
            self._emit("fixed", col, size)
            return
        if isinstance(t, str) and t in PRIMITIVES:
            if skip:
                if t != "null":
                    name, size = _SKIP[t]
                    self._emit(name, -1, size)
                return
            assert r is not None
            if r.kind == "decimal":
                if t != "bytes" or logical != "decimal" or int(w.get("scale", 0)) != r.scale:
                    raise Unsupported("decimal from other than bytes of the same scale")
                self._emit("dec_bytes", col)
                return
            if (t, r.kind) not in _PROMOTE:
                raise Unsupported(f"{t} to {r.kind}")
            read = _READ.get((t, kind))
            if read is None:
                raise Unsupported(f"{t} to a column of {kind}")
            self._emit(read, col)
            return
        raise Unsupported(f"writer type {t}")

    def default(self, col: int, r: _Node, value: Any) -> None:
        """The operation giving a reader field the writer lacks its default (Avro JSON): None
        appends null; otherwise the bytes the column holds for `value`."""
        if value is None:
            self._emit("default", col, 0, -1)
            return
        k = r.kind
        import pyarrow as pa

        t = r.type
        if k in ("array", "map") and not value:
            payload = b""
        elif k == "enum" or pa.types.is_string(t):
            payload = str(value).encode()
        elif pa.types.is_binary(t) and k != "fixed":
            payload = str(value).encode("latin-1")
        elif pa.types.is_boolean(t):
            payload = b"\x01" if value else b"\x00"
        elif k in ("int", "long", "float", "double") or pa.types.is_temporal(t):
            fmt = {"i32": "<i", "i64": "<q", "f32": "<f", "f64": "<d"}
            kind = {32: "i32", 64: "i64"}[t.bit_width] if not pa.types.is_floating(t) else (
                "f32" if t.bit_width == 32 else "f64")
            payload = struct.pack(fmt[kind], value)
        else:
            raise Unsupported(f"a default of type {t}")
        self._emit("default", col, len(self.defaults), len(payload))
        self.defaults += payload


def program(writer_raw: Any, writer_refs: list[Any], reader: _Node, cols: Any) -> Any:
    """The kernel's Program reading writer_raw's bytes into cols (the Columns of `reader`)."""
    from .avro_types import AvroTypes

    names = AvroTypes()
    for r in writer_refs:
        names.register(r)
    names.register(writer_raw)
    c = Compiler(names.names, cols.specs)
    c.op(writer_raw, reader, 0)
    return c.program()
