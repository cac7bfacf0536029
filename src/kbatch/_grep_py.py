"""kbatch grep's kernel, pure-Python twin (the spec of _grep_kernel.pxi's grep_records_v2;
kbatch._core_py re-exports it so the `backend` switch covers it like every kernel)."""
from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import _core_py as _twin
from .errors import ST_TRUNCATED, raise_status

if TYPE_CHECKING:
    from typing_extensions import Buffer

#: where grep_records_v2 looks (a mask): keys, values, every header's value, the values of the
#: headers `header_names` names
GREP_KEY = 1
GREP_VALUE = 2
GREP_HEADERS = 4
GREP_NAMED_HEADERS = 8


def grep_records_v2(data: Buffer, start: int, end: int, count: int, base_offset: int, needle: Buffer,
                    fields: int, header_names: Iterable[Buffer] = ()) -> list[int]:
    """The rows (0-based record indexes) of the `count` v2 records in data[start:end] that hold
    `needle` inside a selected field: fields is a mask of GREP_KEY, GREP_VALUE, GREP_HEADERS
    (every header's value) and GREP_NAMED_HEADERS (the values of headers whose key is one of
    `header_names`, bytes). Null fields hold nothing; an occurrence across two fields, or in a
    length varint, is in none. The section is checked as decode_records_v2 checks it, with its
    errors."""
    buf = _twin._view(data)
    pat = bytes(needle)
    names = {bytes(x) for x in header_names}
    if not pat:
        raise ValueError("grep_records_v2: the needle is empty (it would match every field)")
    start, end, count = operator.index(start), operator.index(end), operator.index(count)
    mask = operator.index(fields) & 0xF
    if start < 0 or end > len(buf) or end < start:
        raise_status(ST_TRUNCATED, start, 1, 0, base_offset)
    rows: list[int] = []
    for i, (_a, _t, _o, key, value, headers) in enumerate(
            _twin._walk_records_v2(buf, start, end, count, base_offset)):
        found = ((mask & GREP_KEY and key is not None and pat in bytes(key))
                 or (mask & GREP_VALUE and value is not None and pat in bytes(value)))
        for hk, hv in headers:
            if found:
                break
            if hv is not None and (mask & GREP_HEADERS or (mask & GREP_NAMED_HEADERS and bytes(hk) in names)):
                found = pat in bytes(hv)
        if found:
            rows.append(i)
    return rows
