"""The bounds the value decoders keep before they trust what the bytes say (DESIGN.md: hostile
bytes), in one place: how deep a value (and a schema) may nest, how many items that take no bytes a
value may hold, and how deep the JSON texts of values, schemas and `_schemas` records may nest.
A value past a bound is refused before it is decoded (`PayloadLimitError`, naming the key or
value, topic, partition, offset and schema id), as a batch past the decompression limit is.

The compiled Avro kernel (_avro_kernel.pyx) reads these constants and keeps the same bounds; its
pure twin for the fastavro path is avro_limits.py; both build their messages here.
"""
from __future__ import annotations

import json
import re
from typing import Any

from .._wire import DEFAULT_MAX_DECOMPRESSED_BYTES

#: records, arrays and maps (Avro), objects and arrays (JSON) nested in one value, and in a schema:
#: protobuf's default recursion limit, and deep enough for any real schema while the Python walkers
#: over a value (its JSON form, the Arrow builders) stay far under Python's 1000 frames
MAX_DEPTH = 100
#: JSON nesting of a schema text or a `_schemas` record: an Avro record inside a union is 4 JSON
#: levels (the fields list, a field, the union, the record), so a schema MAX_DEPTH deep fits
MAX_SCHEMA_JSON_DEPTH = 4 * MAX_DEPTH
#: types in an Avro schema with its named types expanded (a type named twice counts twice): the
#: Arrow type tree has as many nodes, so a schema that doubles at each level is refused
MAX_SCHEMA_TYPES = 100_000
#: bytes of an Avro fixed type: they hold hashes, UUIDs and decimals (16 to 32 bytes), and a null of a
#: fixed type still takes its size in the Arrow column, so a hostile size would make a 1-byte null huge
MAX_FIXED_SIZE = 64 * 1024
#: what one item that takes no payload bytes (in an array of null, or of empty records) is counted
#: as: a Python object's slot and more (an 8-byte pointer in a list, a dict for a record)
EMPTY_ITEM_BYTES = 64
#: items that take no bytes one value, and one column decoded at once, may hold: every other item
#: costs a payload byte, and payloads are bounded by the batch's decompression limit; these cost
#: none, so they get that limit's worth
MAX_EMPTY_ITEMS = DEFAULT_MAX_DECOMPRESSED_BYTES // EMPTY_ITEM_BYTES


class JsonDepthError(ValueError):
    """A JSON text nested deeper than its bound (a ValueError: callers that take "not JSON" as
    a bad record take this as one too)."""

    def __init__(self, limit: int, position: int) -> None:
        self.limit = limit
        self.position = position
        super().__init__(f"JSON nests deeper than allowed: expected at most {limit} levels of objects and arrays, "
                         f"found {limit + 1} (at byte {position})")


# a string (skipped whole, escapes and all) or a bracket; anything else between them is passed over
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_ESCAPE = re.compile(rb"\\.", re.S)
_WINDOW = 1 << 20  # bytes scanned at a time: the scan's arrays stay a few MiB for any text


def _max_depth(data: bytes) -> int:
    """The deepest nesting of objects and arrays in a JSON text, at C speed (numpy): escapes are
    blanked first (same length), then a quote toggles "in a string" and brackets outside strings
    count. (Bytes after a place where the text is not JSON may be miscounted; the parser stops there.)"""
    import numpy as np

    if b"\\" in data:
        data = _ESCAPE.sub(b"aa", data)
    a = np.frombuffer(data, np.uint8)
    deepest = depth = 0
    inside = False
    for lo in range(0, len(a), _WINDOW):
        c = a[lo:lo + _WINDOW]
        quoted = np.logical_xor.accumulate(c == 34) ^ inside
        inside = bool(quoted[-1])
        outside = ~quoted
        steps = (((c == 91) | (c == 123)) & outside).astype(np.int32) - (((c == 93) | (c == 125)) & outside)
        levels = np.cumsum(steps, dtype=np.int64) + depth
        deepest = max(deepest, int(levels.max()))
        depth = int(levels[-1])
    return deepest


def json_depth_error(text: "str | bytes", limit: int) -> JsonDepthError | None:
    """Where `text` first nests deeper than `limit` objects and arrays (None: it does not), found
    without parsing it, so a hostile text never reaches the recursive parser. Positions are of
    the UTF-8 bytes."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit or _max_depth(data) <= limit:  # the first at C speed
        return None
    depth = 0  # deeper than the limit: walk it once more to say where
    for m in _TOKENS.finditer(data):
        c = data[m.start()]
        if c == 91 or c == 123:  # [ {
            depth += 1
            if depth > limit:
                return JsonDepthError(limit, m.start())
        elif c != 34:  # a closing bracket (34: a string)
            depth -= 1
    return None


def json_loads(text: "str | bytes | bytearray | memoryview", limit: int = MAX_DEPTH) -> Any:
    """json.loads, but a text nested deeper than `limit` raises JsonDepthError (a ValueError)
    before it is parsed."""
    if isinstance(text, (bytearray, memoryview)):
        text = bytes(text)
    err = json_depth_error(text, limit)
    if err is not None:
        raise err
    return json.loads(text)


# ------------------------------------------------------------------------------------ messages
def depth_detail(fmt: str, things: str, position: int) -> str:
    """The message of a value nested past MAX_DEPTH (the kernel's and its twin's)."""
    return (f"the {fmt} value nests deeper than a value may: expected at most {MAX_DEPTH} levels of {things}, "
            f"found {MAX_DEPTH + 1} (at byte {position} of the payload)")


def empty_items_detail(found: int, position: int) -> str:
    """The message of a value past MAX_EMPTY_ITEMS (the kernel's and its twin's)."""
    return (f"the Avro value holds more items that take no bytes (in arrays of null or of empty records) than a "
            f"value, or the values decoded with it, may: expected at most {MAX_EMPTY_ITEMS}, found {found} (at byte "
            f"{position} of the payload)")


__all__ = ["MAX_DEPTH", "MAX_SCHEMA_JSON_DEPTH", "MAX_SCHEMA_TYPES", "MAX_FIXED_SIZE", "EMPTY_ITEM_BYTES",
           "MAX_EMPTY_ITEMS",
           "JsonDepthError", "json_depth_error", "json_loads", "depth_detail", "empty_items_detail"]
