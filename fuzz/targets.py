"""Fuzz targets. Each takes bytes, runs BOTH backends on them and fails on any disagreement
(result, error class, or byte position) or on any exception that is not a KBatchError.

A target returns normally when both backends agree; it raises AssertionError on a disagreement
and lets any other exception escape (atheris reports both as crashes).
"""
from __future__ import annotations

import contextlib
import importlib
import struct

import kbatch
from kbatch import _backend
from kbatch.errors import KBatchError

PURE = importlib.import_module("kbatch._core_py")
try:
    CYTHON = importlib.import_module("kbatch._core")
except ModuleNotFoundError:  # not built: fuzzing the pure backend alone still finds crashes
    CYTHON = None
# a built extension that does not load (an instrumented build without its runtime, fuzz/native.py)
# raises here rather than leaving the targets to compare the pure backend with itself

MAX_DECOMPRESSED = 1 << 20  # keep each input cheap: a bomb must raise, not allocate


@contextlib.contextmanager
def backend(mod):
    saved = _backend.core
    _backend.core = mod
    try:
        yield
    finally:
        _backend.core = saved


def outcome(fn, mod, data):
    """('ok', value) or ('err', class name, position, expected, found)."""
    with backend(mod):
        try:
            return ("ok", fn(data))
        except KBatchError as e:
            return ("err", type(e).__name__, e.position, str(e.expected), str(e.found))


def differential(fn, data):
    a = outcome(fn, PURE, data)
    if CYTHON is None:
        return a
    b = outcome(fn, CYTHON, data)
    if a != b:
        raise AssertionError(f"backends disagree on {data!r}:\n python: {a!r}\n cython: {b!r}")
    return a


# ------------------------------------------------------------------------------------ targets
def _batches(data):
    out = []
    for b in kbatch.iter_batches(data, verify_crc=True, strict=False, max_decompressed_bytes=MAX_DECOMPRESSED):
        recs = [r._astuple() for r in b.records()]
        out.append((b.magic, b.position, b.size_in_bytes, b.last_offset, int(b.attributes), recs,
                    [tuple(c) for c in b.control_records()] if b.is_control else None))
    return out


def batches(data: bytes):
    """iter_batches + record decoding over any bytes, magic 0/1/2 and every codec."""
    differential(_batches, data)


def _records_section(data):
    # first 12 bytes choose the decode parameters; the rest is a records section
    if len(data) < 12:
        return None
    count, base_ts, flags = struct.unpack_from(">hqh", data, 0)
    lat = base_ts if flags & 1 else None
    return _backend.core.decode_records_v2(data, 12, len(data), count & 0x3FF, 1000, base_ts, lat,
                                           flags & 1, bool(flags & 2))


def records(data: bytes):
    """decode_records_v2 directly on a records section (no CRC in the way)."""
    differential(lambda d: [r._astuple() for r in (_records_section(d) or [])], data)


def _varints(data):
    out = []
    pos = 0
    while pos < len(data):
        try:
            v, pos2 = (_backend.core.read_varlong if data[pos] & 1 else _backend.core.read_varint)(data, pos + 1)
        except KBatchError as e:
            out.append(("err", type(e).__name__, e.position))
            break
        out.append(v)
        pos = pos2
    return out


def varints(data: bytes):
    differential(_varints, data)


def _index(data):
    if len(data) < 9:
        return None
    kind = data[0] & 1
    (target,) = struct.unpack_from(">q", data, 1)
    size = 12 if kind else 8
    fmt = ">qi" if kind else ">ii"
    # a valid index is sorted by key: sort the fuzzed entries so both searches have one answer
    entries = sorted(struct.unpack_from(fmt, data, 9 + i * size) for i in range((len(data) - 9) // size))
    body = b"".join(struct.pack(fmt, *e) for e in entries)
    if not kind:
        target = max(min(target, 2**31 - 1), -2**31)
    targets = [target, min(max(-target, -2**63), 2**63 - 1), 0]
    one = _backend.core.index_search(body, size, kind, target, len(entries))
    many = _backend.core.index_search_many(body, size, kind, targets, len(entries)).tolist()
    return one, many


def index_search(data: bytes):
    differential(_index, data)


def _columns(data):
    from kbatch.columns.decode import decode_columns

    t = decode_columns(data, "t", 0, batch_fields=True, include_control=True, strict=False,
                       max_decompressed_bytes=MAX_DECOMPRESSED)
    return t.to_pylist()


def columns(data: bytes):
    """decode_columns (the Arrow kernel) over any bytes."""
    differential(_columns, data)


def _validate(data):
    from kbatch.log.validator import LogValidator

    if len(data) < 18:
        return None
    now, window, flags = struct.unpack_from(">qqh", data, 0)
    v = LogValidator(timestamp_type=flags & 1, before_max_ms=abs(window) % (2**63 - 1),
                     after_max_ms=(abs(window) >> 3) % (2**63 - 1), compacted=bool(flags & 2),
                     timestamp_extended=bool(flags & 4), max_decompressed_bytes=MAX_DECOMPRESSED)
    try:
        r = v.validate(data[18:], now)
    except kbatch.InvalidTimestampError as e:
        return ("invalid-timestamp", str(e), [tuple(x) for x in e.record_errors])
    return repr(r)


def validate(data: bytes):
    """LogValidator.validate with fuzzed configuration and batches."""
    differential(_validate, data)


def _index_file(data):
    from kbatch.log.index import OffsetIndex, TimeIndex

    if len(data) < 9:
        return None
    kind = data[0] & 1
    (target,) = struct.unpack_from(">q", data, 1)
    idx = (TimeIndex if kind else OffsetIndex)(1000, data[9:])
    idx.sanity_check()
    if kind:
        return len(idx), tuple(idx.lookup(target)), idx.lookup_offsets([target, 0]).tolist()
    return len(idx), tuple(idx.lookup(target)), idx.lookup_positions([target, 1000]).tolist()


def index_file(data: bytes):
    """.index / .timeindex reading, sanity checks and lookups over any bytes."""
    differential(_index_file, data)


def _grep(data):
    # byte 0: the needle's length - 1 (low 3 bits), byte 1: the field mask, bytes 2-3: the record count;
    # then the needle, then a records section. Both grep kernels, and the same rows section by section.
    if len(data) < 5:
        return None
    n, fields = (data[0] & 7) + 1, data[1] & 0xF
    count = struct.unpack_from(">h", data, 2)[0] & 0x3FF
    needle, sec = data[4:4 + n], data[4 + n:]
    if len(needle) < n:
        return None
    core = _backend.core
    rows = core.grep_records_v2(sec, 0, len(sec), count, 0, needle, fields, [b"h"])
    both = core.grep_sections_v2(sec + sec, [0, len(sec)], [len(sec), 2 * len(sec)], [count, count], [0, 9],
                                 needle, fields, [b"h"])
    assert both == ([(0, rows), (1, rows)] if rows else []), (rows, both)
    return rows


def grep(data: bytes):
    """grep_records_v2 / grep_sections_v2 (kbatch grep's kernels) on a records section."""
    differential(_grep, data)


TARGETS = {
    "batches": batches,
    "records": records,
    "varints": varints,
    "index_search": index_search,
    "columns": columns,
    "validate": validate,
    "index_file": index_file,
    "grep": grep,
}
