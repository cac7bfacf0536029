"""The Avro bounds (kbatch.values.limits) on the pure side: a schema's shape, checked once when it is
parsed, and a walk over one payload that fastavro is about to decode.

fastavro trusts the bytes: a value of a recursive schema nested 100,000 deep overflows its C
stack, and an array block announcing 2^31 items of null makes it append 2^31 Nones. So:
- `AvroShape.of(schema)`: how deep records, arrays and maps nest (a schema deeper than MAX_DEPTH,
  or larger than MAX_SCHEMA_TYPES expanded, is refused), whether a type contains itself, whether
  some array's items take no bytes;
- `check_value`: for the schemas where a value can break a bound (a recursive one, or one with
  an array of items that take no bytes), the payload is walked before fastavro reads it. It is the
  pure twin of the compiled kernel's checks (_avro_kernel.pyx `run`): the same bounds, counted
  the same way, the same message at the same byte. Malformed bytes end the walk quietly: fastavro
  then reads up to the same place and names the error.
"""
from __future__ import annotations

from typing import Any

from .avro_types import PRIMITIVES, _full_name
from .limits import (MAX_DEPTH, MAX_EMPTY_ITEMS, MAX_FIXED_SIZE, MAX_SCHEMA_JSON_DEPTH, MAX_SCHEMA_TYPES, depth_detail,
                     empty_items_detail)

#: payload bytes a primitive takes at least
_MIN_WIDTH = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8, "bytes": 1, "string": 1}


class SchemaShapeError(ValueError):
    """A schema past a bound (the caller makes it a SchemaSourceError naming the schema id)."""


class ValueLimit(ValueError):
    """A payload past a bound: `detail` is the message, `position` the byte of the payload."""

    def __init__(self, detail: str, position: int) -> None:
        self.detail = detail
        self.position = position
        super().__init__(detail)


class _Malformed(Exception):
    """The walk met bytes that do not read: fastavro names that error, not the walk."""


_COMPLEX = ("record", "error", "enum", "fixed", "array", "map")


def _check_decimal(s: dict[str, Any]) -> None:
    if s.get("logicalType") == "decimal":
        p = s.get("precision")
        if not isinstance(p, int) or not 1 <= p <= 76:  # Arrow's decimal256 holds 76 digits
            raise SchemaShapeError(f"an Avro decimal of a precision a schema may not have: expected 1 to 76 digits, "
                                   f"found {p!r}")


def unwrap(s: Any) -> Any:
    """A type without its wrappers: {"type": {...}}, {"type": "Name"} and a primitive with
    attributes ({"type": "long", "logicalType": ...}) are the type they name (a name stays a name)."""
    for _ in range(MAX_SCHEMA_JSON_DEPTH + 1):
        if not isinstance(s, dict):
            return s
        t = s.get("type")
        if not (isinstance(t, (dict, list)) or (isinstance(t, str) and t not in _COMPLEX)):
            return s
        _check_decimal(s)
        s = t
    raise SchemaShapeError(f"type wrappers inside each other {MAX_SCHEMA_JSON_DEPTH} times")


def resolve(s: Any, ns: str | None, names: dict[str, Any]) -> tuple[Any, str | None]:
    """A type by name -> its definition (with the namespace it was defined in), wrappers unwrapped."""
    for _ in range(MAX_SCHEMA_JSON_DEPTH + 1):
        s = unwrap(s)
        if not isinstance(s, str) or s in PRIMITIVES:
            return s, ns
        full = s if s in names else _full_name(s, ns)
        if full not in names:
            return s, ns  # an unknown name: fastavro's parse has refused it already
        s = names[full]
        ns = full.rpartition(".")[0] or None
    raise SchemaShapeError(f"type names that lead to each other {MAX_SCHEMA_JSON_DEPTH} times")


def _kind(s: Any) -> str:
    return s if isinstance(s, str) else ("union" if isinstance(s, list) else str(s.get("type")))


class AvroShape:
    """What the bounds need to know of one (writer) schema, with its named types: `depth` (records,
    arrays and maps nested, a recursive type counted once), `recursive` (a named type contains
    itself), `empty_arrays` (an array whose items take no bytes), `types` (the expanded count)."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names
        self.depth = 0
        self.types = 0
        self.recursive = False
        self.empty_arrays = False
        self._memo: dict[str, tuple[int, int, int]] = {}
        self._open: set[str] = set()

    @classmethod
    def of(cls, schema: Any, names: dict[str, Any]) -> "AvroShape":
        """The shape of `schema` (named types from `names`, full name -> definition); raises
        SchemaShapeError past MAX_DEPTH or MAX_SCHEMA_TYPES."""
        shape = cls(names)
        shape.depth, _, shape.types = shape._visit(schema, None, 0)
        if shape.depth > MAX_DEPTH:
            raise SchemaShapeError(f"the Avro schema nests deeper than a schema may: expected at most {MAX_DEPTH} "
                                   f"levels of records, arrays and maps, found {shape.depth}")
        if shape.types > MAX_SCHEMA_TYPES:
            raise SchemaShapeError(f"the Avro schema is larger than a schema may: expected at most "
                                   f"{MAX_SCHEMA_TYPES} types with its named types expanded, found {shape.types}")
        return shape

    @property
    def needs_check(self) -> bool:
        """Whether a value can break a bound: without recursion nesting is the schema's (checked),
        and without arrays of empty items every item takes a payload byte."""
        return self.recursive or self.empty_arrays

    def _visit(self, s: Any, ns: str | None, frames: int) -> tuple[int, int, int]:
        """(depth, payload bytes taken at least, types) of one type."""
        if frames > MAX_SCHEMA_JSON_DEPTH:
            raise SchemaShapeError(f"the Avro schema nests deeper than a schema may: expected at most "
                                   f"{MAX_SCHEMA_JSON_DEPTH} types inside each other, found more")
        s = unwrap(s)  # {"type": "Name"} is the named type: its recursion is seen below
        full = None
        if isinstance(s, str) and s not in PRIMITIVES:
            full = s if s in self.names else _full_name(s, ns)
        elif isinstance(s, dict) and s.get("type") in ("record", "error", "enum", "fixed") and "name" in s:
            full = _full_name(str(s["name"]), s.get("namespace", ns))
        if full is not None:
            hit = self._memo.get(full)
            if hit is not None:
                return hit
            if full in self._open:  # a type that contains itself: its values nest as deep as the bytes say
                self.recursive = True
                return (0, 1, 1)
            self._open.add(full)
            try:
                got = self._visit_type(s, ns, frames)
            finally:
                self._open.discard(full)
            self._memo[full] = got
            return got
        return self._visit_type(s, ns, frames)

    def _visit_type(self, s: Any, ns: str | None, frames: int) -> tuple[int, int, int]:
        s, ns = resolve(s, ns, self.names)
        if isinstance(s, dict):
            _check_decimal(s)  # a decimal fixed (a primitive's is checked as it is unwrapped)
        if isinstance(s, list):
            kids = [self._visit(b, ns, frames + 1) for b in s]
            return (max((k[0] for k in kids), default=0), 1, 1 + sum(k[2] for k in kids))
        t = _kind(s)
        if isinstance(s, str) or t not in ("record", "error", "array", "map", "fixed"):
            return (0, _MIN_WIDTH.get(t, 1), 1)
        if t == "fixed":
            size = s.get("size")
            if not isinstance(size, int) or not 0 <= size <= MAX_FIXED_SIZE:
                raise SchemaShapeError(f"the Avro fixed type {s.get('name')!r} has a size a schema may not: expected "
                                       f"0 to {MAX_FIXED_SIZE} bytes, found {size!r}")
            return (0, size, 1)
        if t in ("record", "error"):
            full = _full_name(str(s["name"]), s.get("namespace", ns))
            fns = full.rpartition(".")[0] or None
            kids = [self._visit(f["type"], fns, frames + 1) for f in s.get("fields", ())]
            return (1 + max((k[0] for k in kids), default=0), sum(k[1] for k in kids), 1 + sum(k[2] for k in kids))
        item = self._visit(s["items"] if t == "array" else s["values"], ns, frames + 1)
        if t == "array" and item[1] == 0:
            self.empty_arrays = True
        return (1 + item[0], 1, 1 + item[2])


class _Walk:
    """One payload read against its writer schema, keeping nothing (see the module's doc)."""

    def __init__(self, data: bytes, names: dict[str, Any], widths: dict[int, int], empty: int) -> None:
        self.data = data
        self.pos = 0
        self.names = names
        self.empty = empty
        self._widths = widths  # id(schema node) -> payload bytes it takes at least

    def long(self) -> int:
        data, pos = self.data, self.pos
        shift = result = 0
        while True:
            if pos >= len(data):
                raise _Malformed
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise _Malformed

    def skip(self, n: int) -> None:
        if n < 0 or n > len(self.data) - self.pos:
            raise _Malformed
        self.pos += n

    def width(self, s: Any, ns: str | None) -> int:
        k = id(s)
        w = self._widths.get(k)
        if w is None:
            shape = AvroShape(self.names)
            w = self._widths[k] = shape._visit(s, ns, 0)[1]
        return w

    def value(self, s: Any, ns: str | None, depth: int) -> None:
        s, ns = resolve(s, ns, self.names)
        if isinstance(s, list):
            i = self.long()
            if not 0 <= i < len(s):
                raise _Malformed
            return self.value(s[i], ns, depth)
        t = _kind(s)
        if t in ("record", "error", "array", "map"):
            if depth + 1 > MAX_DEPTH:
                raise ValueLimit(depth_detail("Avro", "records, arrays and maps", self.pos), self.pos)
            if t in ("record", "error"):
                full = _full_name(str(s["name"]), s.get("namespace", ns))
                fns = full.rpartition(".")[0] or None
                for f in s.get("fields", ()):
                    self.value(f["type"], fns, depth + 1)
                return None
            return self.items(s["items"] if t == "array" else s["values"], ns, depth + 1, t == "map")
        if t == "null":
            return None
        if t == "boolean":
            return self.skip(1)
        if t in ("int", "long", "enum"):
            self.long()
            return None
        if t == "float":
            return self.skip(4)
        if t == "double":
            return self.skip(8)
        if t in ("bytes", "string"):
            return self.skip(self.long())
        if t == "fixed":
            return self.skip(int(s.get("size", 0)))
        raise _Malformed  # a type fastavro's parse would have refused

    def items(self, item: Any, ns: str | None, depth: int, is_map: bool) -> None:
        w = 1 if is_map else self.width(item, ns)  # a map entry has its key: a byte at least
        while True:
            at = self.pos
            count = self.long()
            if count == 0:
                return
            if count < 0:
                count = -count
                self.long()  # the block's size in bytes
            if w == 0:
                self.empty += count
                if self.empty > MAX_EMPTY_ITEMS:  # the kernel's int64 saturates past 2**63 - 1
                    raise ValueLimit(empty_items_detail(min(self.empty, 2**63 - 1), at), at)
                self.value(item, ns, depth)  # every item the same (none takes a byte): one read checks them all
                continue
            if count > len(self.data) - self.pos:  # every item takes a byte at least: the payload ends early
                raise _Malformed
            for _ in range(count):
                if is_map:
                    self.skip(self.long())
                self.value(item, ns, depth)


def check_value(payload: bytes, schema: Any, names: dict[str, Any], widths: dict[int, int], empty: int = 0) -> int:
    """Raise ValueLimit where `payload` (one value's bytes, after the header) breaks a bound when
    read with writer `schema`; return quietly when it keeps them or does not read (see the
    module's doc). `widths` is a cache the caller keeps per schema. `empty`: the items that take
    no bytes the values decoded before it in the same column hold (MAX_EMPTY_ITEMS bounds a value
    and a column decoded at once alike, as the kernel counts them); returns the count after it."""
    walk = _Walk(payload, names, widths, empty)
    try:
        walk.value(schema, None, 0)
    except _Malformed:
        pass
    return walk.empty


__all__ = ["AvroShape", "SchemaShapeError", "ValueLimit", "check_value", "resolve"]
