# cython: language_level=3
"""Cython kernels of kbatch: the compiled twin of `_core_py.py`, which is the spec.

Same names, signatures, defaults, results and exceptions as the pure twin: every error goes
through errors.raise_status with the same status, byte position, expected and found values.
Parsers read through the bounds-checked `Cursor` of `_core.pxd`; the loops that need no Python
objects (batch scan, timestamp check, index search, large CRCs) run without the GIL and report
a status and a position, which are turned into the exception afterwards.

Arguments outside the C paths' domain (a negative position, an end past the buffer, a float
where an integer belongs, ...) are handed to the pure twin, so the two backends agree on every
input without re-deriving Python's slicing and comparison rules in C. Data is never the reason
for a hand-over: any buffer of any content takes the C path.

Results that point into the input: decode_records_v2's keys, values and header values are
read-only ByteViews of the input (the twin's are memoryviews, with the same reading API), and
keep it alive. decode_records_v2 checks every record in full, as the pure twin does, but a
Record keeps its fields in C and makes each object on first access, and decoded records are not
tracked by the cyclic GC: records that are filtered or counted never pay for views, and large
lists of them do not set off full collections.
"""
cimport cython
cimport numpy as cnp
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_Check, PyLong_CheckExact
from cpython.number cimport PyNumber_Index
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF, Py_XDECREF, Py_XINCREF
from cpython.sequence cimport PySequence_GetSlice
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcmp
from libc.stdint cimport (INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t,
                          uint16_t, uint32_t, uint64_t)

import zlib

import numpy as np

from . import _core_py as _py
from . import _wire as W
from . import errors as _errors
from .errors import raise_status

cdef extern from "_crc32c.h" nogil:
    void kb_crc32c_init()
    uint32_t kb_crc32c(uint32_t value, const uint8_t *p, size_t n)
    int kb_crc32c_is_hw()
    int kb_crc32c_paths()
    int kb_crc32c_limit(int path)

cnp.import_array()
kb_crc32c_init()

BACKEND = "cython"

# The status numbers are compiled in from _core.pxd; make sure they are errors.ST_*.
for _name, _value in (("ST_OK", ST_OK), ("ST_TRUNCATED", ST_TRUNCATED),
                      ("ST_VARINT_TOO_LONG", ST_VARINT_TOO_LONG),
                      ("ST_VARLONG_TOO_LONG", ST_VARLONG_TOO_LONG), ("ST_RECORD_SIZE", ST_RECORD_SIZE),
                      ("ST_NEG_HEADER_KEY", ST_NEG_HEADER_KEY),
                      ("ST_NEG_HEADER_COUNT", ST_NEG_HEADER_COUNT),
                      ("ST_RECORDS_REMAINING", ST_RECORDS_REMAINING),
                      ("ST_PREMATURE_EOF", ST_PREMATURE_EOF), ("ST_CRC", ST_CRC),
                      ("ST_BATCH_TOO_SMALL", ST_BATCH_TOO_SMALL), ("ST_BAD_MAGIC", ST_BAD_MAGIC),
                      ("ST_BAD_COUNT", ST_BAD_COUNT), ("ST_RECORD_TOO_LONG", ST_RECORD_TOO_LONG),
                      ("ST_FIELD_PAST_END", ST_FIELD_PAST_END),
                      ("ST_HEADER_COUNT_TOO_LARGE", ST_HEADER_COUNT_TOO_LARGE)):
    if getattr(_errors, _name) != _value:
        raise ImportError(f"kbatch._core was built with {_name} = {_value}, errors.py says "
                          f"{getattr(_errors, _name)}; rebuild the extension")

# Wire constants (the values of _wire.py, checked below).
cdef enum:
    LOG_OVERHEAD = 12
    MAGIC_OFFSET = 16
    HEADER_SIZE_UP_TO_MAGIC = 17
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    RECORD_BATCH_OVERHEAD = 61
    RECORD_OVERHEAD_V0 = 14
    RECORD_OVERHEAD_V1 = 22
    LEGACY_MAGIC_OFFSET = 4
    LEGACY_TIMESTAMP_OFFSET = 6
    LEGACY_COMPRESSION_CODEC_MASK = 0x07
    RECORD_TOMBSTONE_FLAG_MASK = 0x20

for _name, _value in (("LOG_OVERHEAD", LOG_OVERHEAD), ("MAGIC_OFFSET", MAGIC_OFFSET),
                      ("HEADER_SIZE_UP_TO_MAGIC", HEADER_SIZE_UP_TO_MAGIC),
                      ("CRC_OFFSET", CRC_OFFSET), ("ATTRIBUTES_OFFSET", ATTRIBUTES_OFFSET),
                      ("RECORD_BATCH_OVERHEAD", RECORD_BATCH_OVERHEAD),
                      ("RECORD_OVERHEAD_V0", RECORD_OVERHEAD_V0),
                      ("RECORD_OVERHEAD_V1", RECORD_OVERHEAD_V1),
                      ("LEGACY_MAGIC_OFFSET", LEGACY_MAGIC_OFFSET),
                      ("LEGACY_TIMESTAMP_OFFSET", LEGACY_TIMESTAMP_OFFSET),
                      ("LEGACY_COMPRESSION_CODEC_MASK", LEGACY_COMPRESSION_CODEC_MASK),
                      ("RECORD_TOMBSTONE_FLAG_MASK", RECORD_TOMBSTONE_FLAG_MASK)):
    if getattr(W, _name) != _value:
        raise ImportError(f"kbatch._core was built with {_name} = {_value}, _wire.py says "
                          f"{getattr(W, _name)}; rebuild the extension")

cdef object _MASK32 = 0xFFFFFFFF
cdef object _MASK64 = 0xFFFFFFFFFFFFFFFF
cdef object _INT32_MIN = W.INT32_MIN
cdef object _INT32_MAX = W.INT32_MAX
cdef object _INT64_MIN = W.INT64_MIN
cdef object _INT64_MAX = W.INT64_MAX
cdef object _EMPTY_TUPLE = ()

# GIL is released for CRCs over at least this many bytes.
cdef Py_ssize_t _NOGIL_CRC_BYTES = 1 << 16


# ------------------------------------------------------------------------------------ helpers
cdef object _view(object data):
    """memoryview of data as 1-D unsigned bytes: exactly _core_py._view (same errors)."""
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1 or not mv.c_contiguous:
        mv = mv.cast("B")
    elif mv.format != "B":
        mv = mv.cast("B")
    return mv


cdef int _get_buffer(object data, Py_buffer *pb) except -1:
    """Acquire data's bytes (contiguous, read-only use) with _view's rules and errors."""
    if type(data) is bytes or type(data) is bytearray:
        PyObject_GetBuffer(data, pb, PyBUF_SIMPLE)
    else:
        PyObject_GetBuffer(_view(data), pb, PyBUF_SIMPLE)
    return 0


cdef int _index_arg(object o, Py_ssize_t *out) except -1:
    """1 and *out = o when o is an integer (int, or anything with __index__) in
    [0, PY_SSIZE_T_MAX]; 0 when it is not, and the call belongs to the pure twin."""
    if PyLong_CheckExact(o):
        v = o
    else:
        try:
            v = PyNumber_Index(o)
        except TypeError:
            return 0
    if v < 0:
        return 0
    try:
        out[0] = v
    except OverflowError:
        return 0
    return 1


cdef int _raise_cursor(int status, Py_ssize_t position, object base_offset) except -1:
    """Raise what the pure twin's read_varint/read_varlong raise for a cursor status."""
    if status == ST_VARINT_TOO_LONG:
        raise_status(status, position, "at most 5 bytes", "a 5th byte with its MSB set", base_offset)
    if status == ST_VARLONG_TOO_LONG:
        raise_status(status, position, "at most 10 bytes", "a 10th byte with its MSB set", base_offset)
    raise_status(status, position, 1, 0, base_offset)
    return -1


# ------------------------------------------------------------------------------------ CRC32C
def crc32c(data, value=0):
    """CRC-32C (Castagnoli) of any buffer, continuing from `value` (like zlib.crc32)."""
    cdef uint32_t start = (value & _MASK32)
    cdef uint32_t crc
    cdef Py_buffer pb
    _get_buffer(data, &pb)
    try:
        if pb.len >= _NOGIL_CRC_BYTES:
            with nogil:
                crc = kb_crc32c(start, <const uint8_t *>pb.buf, <size_t>pb.len)
        else:
            crc = kb_crc32c(start, <const uint8_t *>pb.buf, <size_t>pb.len)
    finally:
        PyBuffer_Release(&pb)
    return crc


def crc32c_is_hardware():
    """Whether crc32c runs on a CPU instruction (SSE4.2 crc32, chosen at import)."""
    return kb_crc32c_is_hw() != 0


def _crc32c_paths():
    """The CRC-32C paths this CPU runs, fastest last: 0 software, 1 the crc32 instruction,
    2 carry-less multiply folding (AVX-512 VPCLMULQDQ) for long inputs. For tests."""
    return list(range(kb_crc32c_paths() + 1))


def _crc32c_limit(int path):
    """Use CRC-32C paths up to `path` only (tests check each path this CPU has against the
    others); returns the previous limit. Not thread-safe: tests only."""
    return kb_crc32c_limit(path)


# ------------------------------------------------------------------------------------ varints
def read_varint(data, pos):
    """Decode a zigzag varint (int32) at `pos` as Kafka's ByteUtils.readVarint does.

    Returns (value, next_pos). Non-minimal encodings are accepted; a 5th byte with its MSB set is
    rejected; the 5th byte's bits beyond 32 are dropped, as in Java.
    """
    cdef Py_ssize_t p
    cdef Py_buffer pb
    cdef Cursor c
    cdef int32_t v = 0
    cdef int st
    if not _index_arg(pos, &p):
        return _py.read_varint(data, pos)
    _get_buffer(data, &pb)
    cur_init(&c, <const uint8_t *>pb.buf, p, pb.len)
    st = cur_varint(&c, &v)
    PyBuffer_Release(&pb)
    if st != ST_OK:
        _raise_cursor(st, c.err_pos, None)
    return v, c.pos


def read_varlong(data, pos):
    """Decode a zigzag varlong (int64) at `pos` as Kafka's ByteUtils.readVarlong does."""
    cdef Py_ssize_t p
    cdef Py_buffer pb
    cdef Cursor c
    cdef int64_t v = 0
    cdef int st
    if not _index_arg(pos, &p):
        return _py.read_varlong(data, pos)
    _get_buffer(data, &pb)
    cur_init(&c, <const uint8_t *>pb.buf, p, pb.len)
    st = cur_varlong(&c, &v)
    PyBuffer_Release(&pb)
    if st != ST_OK:
        _raise_cursor(st, c.err_pos, None)
    return v, c.pos


cdef inline Py_ssize_t _put_unsigned(uint64_t u, uint8_t *out) noexcept nogil:
    cdef Py_ssize_t n = 0
    while u & ~(<uint64_t>0x7F):
        out[n] = <uint8_t>((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    out[n] = <uint8_t>u
    return n + 1


cdef inline uint64_t _zigzag32(int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    return (u << 1) ^ (<uint32_t>0 - (u >> 31))


cdef inline uint64_t _zigzag64(int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    return (u << 1) ^ (<uint64_t>0 - (u >> 63))


def write_varint(value):
    """Minimal zigzag encoding of an int32."""
    cdef uint8_t out[10]
    if not PyLong_Check(value):
        return _py.write_varint(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise OverflowError(f"varint out of int32 range: {value}")
    return PyBytes_FromStringAndSize(<char *>out, _put_unsigned(_zigzag32(value), out))


def write_varlong(value):
    """Minimal zigzag encoding of an int64."""
    cdef uint8_t out[10]
    if not PyLong_Check(value):
        return _py.write_varlong(value)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"varlong out of int64 range: {value}")
    return PyBytes_FromStringAndSize(<char *>out, _put_unsigned(_zigzag64(value), out))


def sizeof_varint(value):
    cdef uint8_t out[10]
    if not PyLong_Check(value):
        return _py.sizeof_varint(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise OverflowError(f"varint out of int32 range: {value}")
    return _put_unsigned(_zigzag32(value), out)


def sizeof_varlong(value):
    cdef uint8_t out[10]
    if not PyLong_Check(value):
        return _py.sizeof_varlong(value)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"varlong out of int64 range: {value}")
    return _put_unsigned(_zigzag64(value), out)


# ------------------------------------------------------------------------------------ batch scan
SCAN_FIELDS = _py.SCAN_FIELDS

ctypedef struct ScanCols:
    int64_t *position
    int64_t *size
    int8_t *magic
    int64_t *base_offset
    int64_t *last_offset
    int32_t *partition_leader_epoch
    uint32_t *crc
    uint8_t *crc_valid
    int16_t *attributes
    int64_t *first_timestamp
    int64_t *max_timestamp
    int64_t *producer_id
    int16_t *producer_epoch
    int32_t *base_sequence
    int32_t *record_count

ctypedef struct ScanErr:
    int status
    Py_ssize_t position
    int64_t expected_min    # ST_BATCH_TOO_SMALL: the minimum the size was compared with
    int64_t found
    int64_t base_offset

# Internal status of _scan_walk's filling pass: the buffer changed after it was counted.
cdef enum:
    ST_SCAN_CHANGED = -1


cdef int _scan_walk(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, ScanCols *cols,
                    Py_ssize_t capacity, bint verify_crc, Py_ssize_t *n_rows, Py_ssize_t *valid,
                    ScanErr *err) noexcept nogil:
    """Walk the batch headers in buf[start:end]: count them (cols NULL) or fill the columns.

    The rules, checks and their order are _core_py.scan_batches'. Legacy entries get
    crc_valid = 1 here; scan_batches checks their CRC-32 afterwards.
    """
    cdef Cursor c
    cdef Py_ssize_t pos = start, n = 0, total
    cdef uint64_t u64 = 0
    cdef uint32_t u32 = 0, crc = 0
    cdef uint16_t u16 = 0
    cdef uint8_t u8 = 0
    cdef int64_t offset, last, first_ts, max_ts, pid
    cdef int32_t size, ple, lod, seq, count
    cdef int16_t attrs, epoch
    cdef int8_t magic
    cdef int st = ST_OK
    cdef const uint8_t *covered = NULL
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        # offset | size | ... | magic: 17 bytes, present since end - pos > 17.
        cur_init(&c, buf, pos, end)
        st |= cur_be64(&c, &u64)
        offset = <int64_t>u64
        st |= cur_be32(&c, &u32)
        size = <int32_t>u32
        if size < RECORD_OVERHEAD_V0:
            err.status = ST_BATCH_TOO_SMALL
            err.position = pos
            err.expected_min = RECORD_OVERHEAD_V0
            err.found = size
            err.base_offset = offset
            return ST_BATCH_TOO_SMALL
        total = <Py_ssize_t>size + LOG_OVERHEAD
        if total > end - pos:
            break  # the last batch runs past `end`: stop, as FileLogInputStream does
        cur_init(&c, buf, pos, pos + total)  # one batch; total <= end - pos
        st |= cur_skip(&c, MAGIC_OFFSET)
        st |= cur_u8(&c, &u8)
        magic = <int8_t>u8
        if magic == 2:
            if total < RECORD_BATCH_OVERHEAD:
                err.status = ST_BATCH_TOO_SMALL
                err.position = pos
                err.expected_min = RECORD_BATCH_OVERHEAD
                err.found = total
                err.base_offset = offset
                return ST_BATCH_TOO_SMALL
            if cols != NULL:
                if n >= capacity:
                    return ST_SCAN_CHANGED
                c.pos = pos + LOG_OVERHEAD
                st |= cur_be32(&c, &u32)
                ple = <int32_t>u32
                st |= cur_skip(&c, 1)  # magic
                st |= cur_be32(&c, &crc)
                st |= cur_be16(&c, &u16)
                attrs = <int16_t>u16
                st |= cur_be32(&c, &u32)
                lod = <int32_t>u32
                st |= cur_be64(&c, &u64)
                first_ts = <int64_t>u64
                st |= cur_be64(&c, &u64)
                max_ts = <int64_t>u64
                st |= cur_be64(&c, &u64)
                pid = <int64_t>u64
                st |= cur_be16(&c, &u16)
                epoch = <int16_t>u16
                st |= cur_be32(&c, &u32)
                seq = <int32_t>u32
                st |= cur_be32(&c, &u32)
                count = <int32_t>u32
                cols.crc_valid[n] = 1
                if verify_crc:
                    c.pos = pos + ATTRIBUTES_OFFSET
                    st |= cur_take(&c, total - ATTRIBUTES_OFFSET, &covered)
                    if st == ST_OK:
                        cols.crc_valid[n] = kb_crc32c(0, covered, <size_t>(total - ATTRIBUTES_OFFSET)) == crc
                cols.position[n] = pos
                cols.size[n] = total
                cols.magic[n] = 2
                cols.base_offset[n] = offset
                cols.last_offset[n] = <int64_t>(<uint64_t>offset + <uint64_t><int64_t>lod)
                cols.partition_leader_epoch[n] = ple
                cols.crc[n] = crc
                cols.attributes[n] = attrs
                cols.first_timestamp[n] = first_ts
                cols.max_timestamp[n] = max_ts
                cols.producer_id[n] = pid
                cols.producer_epoch[n] = epoch
                cols.base_sequence[n] = seq
                cols.record_count[n] = count
        elif magic == 0 or magic == 1:
            if magic == 1 and size < RECORD_OVERHEAD_V1:
                err.status = ST_BATCH_TOO_SMALL
                err.position = pos
                err.expected_min = RECORD_OVERHEAD_V1
                err.found = size
                err.base_offset = offset
                return ST_BATCH_TOO_SMALL
            if cols != NULL:
                if n >= capacity:
                    return ST_SCAN_CHANGED
                c.pos = pos + LOG_OVERHEAD
                st |= cur_be32(&c, &crc)
                st |= cur_skip(&c, 1)  # magic
                st |= cur_u8(&c, &u8)
                attrs = <int8_t>u8
                first_ts = -1
                if magic == 1:
                    st |= cur_be64(&c, &u64)
                    first_ts = <int64_t>u64
                cols.position[n] = pos
                cols.size[n] = total
                cols.magic[n] = magic
                cols.base_offset[n] = offset
                cols.last_offset[n] = offset
                cols.partition_leader_epoch[n] = -1
                cols.crc[n] = crc
                cols.crc_valid[n] = 1
                cols.attributes[n] = attrs
                cols.first_timestamp[n] = first_ts
                cols.max_timestamp[n] = first_ts
                cols.producer_id[n] = -1
                cols.producer_epoch[n] = -1
                cols.base_sequence[n] = -1
                cols.record_count[n] = -1 if attrs & LEGACY_COMPRESSION_CODEC_MASK else 1
        else:
            err.status = ST_BAD_MAGIC
            err.position = pos + MAGIC_OFFSET
            err.expected_min = 0
            err.found = magic
            err.base_offset = offset
            return ST_BAD_MAGIC
        if st != ST_OK:  # cannot happen: every read above lies inside the checked batch
            err.status = st
            err.position = c.err_pos
            return st
        n += 1
        pos += total
    n_rows[0] = n
    valid[0] = pos
    return ST_OK


def scan_batches(data, start=0, end=-1, verify_crc=True):
    """Read every batch header in data[start:end] into numpy columns (one row per batch).

    Works for magic 0, 1 and 2 mixed. Stops without error, as Kafka's FileLogInputStream does,
    when fewer than 17 bytes remain or the last batch runs past `end`; `valid_bytes` says where
    the complete batches end (an absolute position). Raises for a size below the format's
    overhead or a magic outside 0..2. With verify_crc, `crc_valid` holds the CRC check
    (CRC-32C over [21, end) for v2, CRC-32 over [magic, end) for legacy); otherwise all True.
    For legacy entries base_offset = last_offset = the entry's offset, record_count is 1 for a
    plain message and -1 for a compressed wrapper (unknown without decompressing).
    """
    cdef Py_ssize_t s, e, n = 0, filled = 0, valid = 0, valid2 = 0, i
    cdef Py_buffer pb
    cdef ScanCols cols
    cdef ScanErr err
    cdef int st
    cdef bint verify = verify_crc
    mv = _view(data)
    n_buf = len(mv)
    if end < 0 or end > n_buf:
        end = n_buf
    if not _index_arg(start, &s) or not _index_arg(end, &e):
        return _py.scan_batches(data, start, end, verify_crc)
    PyObject_GetBuffer(mv, &pb, PyBUF_SIMPLE)
    try:
        with nogil:
            st = _scan_walk(<const uint8_t *>pb.buf, s, e, NULL, 0, verify, &n, &valid, &err)
        if st != ST_OK:
            _raise_scan(&err)
        arrays = [np.empty(n, dtype=dt) for _name, dt in SCAN_FIELDS]
        cols.position = <int64_t *>cnp.PyArray_DATA(arrays[0])
        cols.size = <int64_t *>cnp.PyArray_DATA(arrays[1])
        cols.magic = <int8_t *>cnp.PyArray_DATA(arrays[2])
        cols.base_offset = <int64_t *>cnp.PyArray_DATA(arrays[3])
        cols.last_offset = <int64_t *>cnp.PyArray_DATA(arrays[4])
        cols.partition_leader_epoch = <int32_t *>cnp.PyArray_DATA(arrays[5])
        cols.crc = <uint32_t *>cnp.PyArray_DATA(arrays[6])
        cols.crc_valid = <uint8_t *>cnp.PyArray_DATA(arrays[7])
        cols.attributes = <int16_t *>cnp.PyArray_DATA(arrays[8])
        cols.first_timestamp = <int64_t *>cnp.PyArray_DATA(arrays[9])
        cols.max_timestamp = <int64_t *>cnp.PyArray_DATA(arrays[10])
        cols.producer_id = <int64_t *>cnp.PyArray_DATA(arrays[11])
        cols.producer_epoch = <int16_t *>cnp.PyArray_DATA(arrays[12])
        cols.base_sequence = <int32_t *>cnp.PyArray_DATA(arrays[13])
        cols.record_count = <int32_t *>cnp.PyArray_DATA(arrays[14])
        if n:
            with nogil:
                st = _scan_walk(<const uint8_t *>pb.buf, s, e, &cols, n, verify, &filled, &valid2, &err)
            if st != ST_OK or filled != n or valid2 != valid:
                raise RuntimeError("scan_batches: the buffer changed while it was being scanned")
            if verify:
                # Legacy entries: CRC-32 over [magic, end) with zlib, as the pure twin does.
                for i in range(n):
                    if cols.magic[i] != 2:
                        lo = cols.position[i] + LOG_OVERHEAD + LEGACY_MAGIC_OFFSET
                        cols.crc_valid[i] = zlib.crc32(mv[lo:cols.position[i] + cols.size[i]]) == cols.crc[i]
    finally:
        PyBuffer_Release(&pb)
    out = {name: arr for (name, _dt), arr in zip(SCAN_FIELDS, arrays)}
    out["valid_bytes"] = start if valid == s else valid
    return out


cdef int _raise_scan(ScanErr *err) except -1:
    if err.status == ST_BATCH_TOO_SMALL:
        raise_status(ST_BATCH_TOO_SMALL, err.position, f"size >= {err.expected_min}", err.found,
                     err.base_offset)
    if err.status == ST_BAD_MAGIC:
        raise_status(ST_BAD_MAGIC, err.position, "magic 0, 1 or 2", err.found, err.base_offset)
    raise_status(err.status, err.position, 1, 0, err.base_offset)
    return -1


# ------------------------------------------------------------------------------------ records
cdef extern from "Python.h":
    Py_buffer *PyMemoryView_GET_BUFFER(object mview)
    void PyObject_GC_UnTrack(void *op)

# hash(bytes) of a buffer: Py_HashBuffer from 3.14; before that CPython's _Py_HashBytes, which 3.13
# no longer declares in Python.h (an undeclared call returns a truncated int: hashes unequal to bytes')
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030E0000
    #define kb_hash_bytes(p, n) Py_HashBuffer((p), (n))
    #else
    #if PY_VERSION_HEX >= 0x030D0000
    PyAPI_FUNC(Py_hash_t) _Py_HashBytes(const void *, Py_ssize_t);
    #endif
    #define kb_hash_bytes(p, n) _Py_HashBytes((p), (n))
    #endif
    """
    Py_hash_t kb_hash_bytes(const void *src, Py_ssize_t len)

_TIMESTAMP_TYPE_OBJECTS = (W.TimestampType.CREATE_TIME, W.TimestampType.LOG_APPEND_TIME)

# Record._o slots, one per field, and the Record._pending bits of the same numbers.
cdef enum:
    _OFFSET, _TIMESTAMP, _TIMESTAMP_TYPE, _KEY, _VALUE, _HEADERS, _IS_TOMBSTONE, _ATTRIBUTES, _N_FIELDS
    _FROM_VIEW = (1 << _KEY) | (1 << _VALUE) | (1 << _HEADERS)   # the fields made from _view


@cython.final
@cython.no_gc
cdef class Record:
    """One decoded record. Keys and values are read-only zero-copy views (ByteView) into the
    batch's bytes (the input buffer when uncompressed), or None. `timestamp` is None for "no
    timestamp".

    A decoded record keeps its fields in C (numbers, where the key, value and headers are) and
    makes each object on first access, then keeps it. The object fields are plain references,
    NULL until made: a fresh record costs no reference-count updates on None or shared objects,
    the main cost of building 10^5 objects a second once the parsing is in C. Records are not
    tracked by the cyclic GC: they hold ints, strs, ByteViews and views of the input, so only a
    caller who stores a record inside its own field (Record(...) from Python) could make a cycle,
    which would then be leaked, never freed early.
    """
    cdef PyObject *_o[_N_FIELDS]   # each field's object once made (owned), NULL when absent
    cdef PyObject *_view           # owned: the input view while a _FROM_VIEW field is pending
    cdef int64_t _off, _ts
    cdef Py_ssize_t _key_lo, _key_hi, _value_lo, _value_hi, _headers_lo, _headers_hi
    cdef int32_t _n_headers
    cdef uint8_t _attributes, _ttype
    cdef bint _tombstone
    cdef unsigned int _pending     # 1 << field: still to be made from the C fields

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers, is_tombstone, attributes):
        cdef int i
        self._pending = 0
        _record_clear(self)
        for i, obj in enumerate((offset, timestamp, timestamp_type, key, value, headers, is_tombstone,
                                 attributes)):
            Py_INCREF(obj)
            self._o[i] = <PyObject *>obj

    def __dealloc__(self):
        _record_clear(self)

    @property
    def offset(self):
        if self._pending & (1 << _OFFSET):
            return self._off
        return _record_get(self, _OFFSET)

    @property
    def timestamp(self):
        if self._pending & (1 << _TIMESTAMP):
            return self._ts
        return _record_get(self, _TIMESTAMP)

    @property
    def timestamp_type(self):
        if self._pending & (1 << _TIMESTAMP_TYPE):
            return _TIMESTAMP_TYPE_OBJECTS[self._ttype]
        return _record_get(self, _TIMESTAMP_TYPE)

    @property
    def key(self):
        if self._pending & (1 << _KEY):
            return _record_keep(self, _KEY, _byte_view(<object>self._view, self._key_lo, self._key_hi))
        return _record_get(self, _KEY)

    @property
    def value(self):
        if self._pending & (1 << _VALUE):
            return _record_keep(self, _VALUE, _byte_view(<object>self._view, self._value_lo, self._value_hi))
        return _record_get(self, _VALUE)

    @property
    def headers(self):
        if self._pending & (1 << _HEADERS):
            return _record_keep(self, _HEADERS, _build_headers(<object>self._view, self._headers_lo,
                                                                self._headers_hi, self._n_headers))
        if self._o[_HEADERS] == NULL:
            return _EMPTY_TUPLE
        return <object>self._o[_HEADERS]

    @property
    def is_tombstone(self):
        if self._pending & (1 << _IS_TOMBSTONE):
            return True if self._tombstone else False
        return _record_get(self, _IS_TOMBSTONE)

    @property
    def attributes(self):
        if self._pending & (1 << _ATTRIBUTES):
            return self._attributes
        return _record_get(self, _ATTRIBUTES)

    def _astuple(self):
        key, value = self.key, self.value
        return (self.offset, self.timestamp, self.timestamp_type,
                None if key is None else bytes(key),
                None if value is None else bytes(value),
                tuple([(k, None if v is None else bytes(v)) for k, v in self.headers]),
                self.is_tombstone, self.attributes)

    def __reduce__(self):
        # keys and values travel as bytes: views cannot leave their buffer
        return Record, self._astuple()

    def __eq__(self, other):
        if not hasattr(other, "_astuple"):
            return NotImplemented
        return self._astuple() == other._astuple()

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self._astuple())

    def __repr__(self):
        return ("Record(offset={}, timestamp={}, timestamp_type={}, key={!r}, value={!r}, headers={!r}, "
                "is_tombstone={})").format(*self._astuple()[:7])


cdef void _record_clear(Record r) noexcept:
    cdef int i
    for i in range(_N_FIELDS):
        Py_XDECREF(r._o[i])
        r._o[i] = NULL
    Py_XDECREF(r._view)
    r._view = NULL


cdef inline object _record_get(Record r, int i):
    return None if r._o[i] == NULL else <object>r._o[i]


cdef inline object _record_keep(Record r, int i, object obj):
    Py_INCREF(obj)
    r._o[i] = <PyObject *>obj
    r._pending &= ~(1u << i)
    if not r._pending & _FROM_VIEW:
        Py_XDECREF(r._view)
        r._view = NULL
    return obj


# Decoded records come from a pool of freed Record blocks: taking one and setting the few fields
# the destructor reads is cheaper than PyObject_Malloc plus clearing all 160-odd bytes (Cython's
# own freelist clears them with `rep stosq`, slower still). Record's tp_free puts blocks back.
cdef extern from "Python.h":
    PyObject *PyObject_Init(PyObject *op, PyTypeObject *tp)
    void *PyObject_Malloc(size_t n)
    void PyObject_Free(void *p)
    ctypedef void (*_freefunc)(void *) noexcept
    ctypedef struct _TypeSlots "PyTypeObject":
        Py_ssize_t tp_basicsize
        _freefunc tp_free

cdef enum:
    _RECORD_POOL = 4096

cdef void *_record_pool[_RECORD_POOL]
cdef int _record_pool_n = 0
cdef PyTypeObject *_record_type = <PyTypeObject *>Record
cdef size_t _record_size = (<_TypeSlots *>Record).tp_basicsize


cdef void _record_free(void *p) noexcept:
    global _record_pool_n
    if _record_pool_n < _RECORD_POOL and (<PyObject *>p).ob_type == _record_type:
        _record_pool[_record_pool_n] = p
        _record_pool_n += 1
    else:
        PyObject_Free(p)


(<_TypeSlots *>Record).tp_free = _record_free


cdef inline Record _new_record():
    """A Record with no field set (what Record.__new__ gives) for the decoder to fill in."""
    global _record_pool_n
    cdef PyObject *o
    cdef int i
    if _record_pool_n:
        _record_pool_n -= 1
        o = <PyObject *>_record_pool[_record_pool_n]
    else:
        o = <PyObject *>PyObject_Malloc(_record_size)
        if o == NULL:
            raise MemoryError()
    PyObject_Init(o, _record_type)
    cdef Record r = <Record>o   # a new reference: Cython increfs here, the decref below evens it
    Py_DECREF(r)
    for i in range(_N_FIELDS):
        r._o[i] = NULL
    r._view = NULL
    r._pending = 0
    return r


@cython.final
@cython.no_gc
@cython.freelist(4096)
cdef class ByteView:
    """A read-only, zero-copy view of bytes inside a decoded batch: what Record.key, Record.value
    and header values are on the compiled backend (the pure backend's are memoryviews).

    It exports the buffer protocol (bytes(v), memoryview(v), numpy.frombuffer(v), hashlib,
    struct, zlib and every buffer API take it) and has memoryview's reading API: len, indexing
    (an int), slicing (a memoryview), iteration, == with any bytes-like object, hash equal to
    the bytes' hash (when the input is hashable), tobytes(), hex(), tolist() and the rest through a memoryview. It keeps the
    input alive, as a memoryview would, and costs a quarter of one to make.
    """
    cdef object _owner     # the read-only memoryview of the input that holds the buffer export
    cdef const char *_p
    cdef Py_ssize_t _n

    def __init__(self, *args):
        raise TypeError("ByteView objects are made by kbatch's decoder; use memoryview(x) for a view of your own buffer")

    def __getbuffer__(self, Py_buffer *b, int flags):
        PyBuffer_FillInfo(b, self, <void *>self._p, self._n, 1, flags)

    def __len__(self):
        return self._n

    def __bytes__(self):
        return PyBytes_FromStringAndSize(self._p, self._n)

    def tobytes(self, order=None):
        return PyBytes_FromStringAndSize(self._p, self._n)

    def __getitem__(self, index):
        return memoryview(self)[index]

    def __iter__(self):
        return iter(memoryview(self))

    def __hash__(self):
        hash(self._owner.obj)  # memoryview's rule: a view of a mutable (unhashable) buffer is unhashable
        return kb_hash_bytes(self._p, self._n)

    def __eq__(self, other):
        cdef Py_buffer b
        cdef bint eq
        if isinstance(other, ByteView):
            return (<ByteView>other)._n == self._n and memcmp((<ByteView>other)._p, self._p, self._n) == 0
        if isinstance(other, bytes):
            return len(<bytes>other) == self._n and memcmp(<const char *>other, self._p, self._n) == 0
        try:
            return memoryview(self) == other    # memoryview's rules for other formats and shapes
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    @property
    def obj(self):
        """The object whose buffer this views (the input, or the decompressed records)."""
        return self._owner.obj

    @property
    def readonly(self):
        return True

    @property
    def nbytes(self):
        return self._n

    def __getattr__(self, name):
        # the rest of memoryview's API (hex, tolist, nbytes, readonly, format, obj, cast, ...)
        return getattr(memoryview(self), name)

    def __repr__(self):
        return f"<kbatch.ByteView {self.tobytes()!r}>"


cdef inline object _byte_view(object view, Py_ssize_t lo, Py_ssize_t hi):
    """A ByteView of view[lo:hi]: `view` is a read-only 1-D byte memoryview (what _view makes)
    and 0 <= lo <= hi <= len(view)."""
    cdef ByteView v = ByteView.__new__(ByteView)
    v._owner = view
    v._p = <const char *>PyMemoryView_GET_BUFFER(view).buf + lo
    v._n = hi - lo
    return v


def byte_view(data, start, end):
    """A read-only zero-copy view of data[start:end] (a ByteView; the pure twin: a memoryview),
    which keeps `data` alive. What the legacy decoder makes keys and values with."""
    cdef Py_ssize_t s, e
    cdef Py_buffer *b
    if type(start) is not int or type(end) is not int:
        return _py.byte_view(data, start, end)
    if type(data) is memoryview:  # the legacy decoder's read-only byte view: no new view per call
        b = PyMemoryView_GET_BUFFER(data)
        if (b.readonly and b.ndim == 1 and b.itemsize == 1 and (b.strides == NULL or b.strides[0] == 1)
                and b.format != NULL and b.format[0] == b'B' and b.format[1] == 0
                and _index_arg(start, &s) and _index_arg(end, &e) and s <= e <= b.len):
            return _byte_view(data, s, e)
    mv = _view(data)
    if not mv.readonly:
        mv = mv.toreadonly()
    if not _index_arg(start, &s) or not _index_arg(end, &e) or e > len(mv) or s > e:
        return _py.byte_view(data, start, end)
    return _byte_view(mv, s, e)


cdef Py_ssize_t _bytes_bounds(Cursor *r, object base_offset) except -2:
    """A varint length then that many bytes (Kafka's Utils.readBytes): returns where they
    start and moves past them, or -1 for null (any negative length). `r` bounds both."""
    cdef int32_t n = 0
    cdef int st = cur_varint(r, &n)
    if st != ST_OK:
        _raise_cursor(st, r.err_pos, base_offset)
    if n < 0:
        return -1
    if n > cur_left(r):
        raise_status(ST_FIELD_PAST_END, r.pos, f"{n} bytes", f"{cur_left(r)} bytes left in record",
                     base_offset)
    r.pos += n
    return r.pos - n


cdef int32_t _check_headers(Cursor *r, object base_offset, Py_ssize_t *first) except -1:
    """Read past a record's headers with the pure twin's checks, in its order, building nothing.
    Returns the header count; *first = where the first header starts."""
    cdef int32_t n_headers = 0, klen = 0, h
    cdef Py_ssize_t klen_pos
    cdef int st = cur_varint(r, &n_headers)
    if st != ST_OK:
        _raise_cursor(st, r.err_pos, base_offset)
    first[0] = r.pos
    if n_headers < 0:
        raise_status(ST_NEG_HEADER_COUNT, r.pos, "header count >= 0", n_headers, base_offset)
    if n_headers > cur_left(r):
        raise_status(ST_HEADER_COUNT_TOO_LARGE, r.pos, f"header count <= {cur_left(r)}", n_headers,
                     base_offset)
    for h in range(n_headers):
        klen_pos = r.pos
        st = cur_varint(r, &klen)
        if st != ST_OK:
            _raise_cursor(st, r.err_pos, base_offset)
        if klen < 0:
            raise_status(ST_NEG_HEADER_KEY, klen_pos, "header key size >= 0", klen, base_offset)
        if cur_skip(r, klen) != ST_OK:
            raise_status(ST_FIELD_PAST_END, r.pos, klen, cur_left(r), base_offset)
        _bytes_bounds(r, base_offset)
    return n_headers


cdef object _build_headers(object view, Py_ssize_t lo, Py_ssize_t hi, int32_t n_headers):
    """The headers tuple of a record: `n_headers` headers in view[lo:hi], which _check_headers
    has read. Only bytes changed since (through another reference to a mutable input) can make
    a read fail here; that raises instead of reading past `hi`."""
    cdef Py_buffer *b = PyMemoryView_GET_BUFFER(view)
    cdef Cursor r
    cdef int32_t klen = 0, vlen = 0, h
    cdef const uint8_t *kp = NULL
    if n_headers == 0:
        return _EMPTY_TUPLE
    if hi > b.len:
        raise RuntimeError("the record's input buffer changed after the record was decoded")
    cur_init(&r, <const uint8_t *>b.buf, lo, hi)
    headers = PyTuple_New(n_headers)  # unfilled slots are NULL, which tuple dealloc allows
    for h in range(n_headers):
        if (cur_varint(&r, &klen) != ST_OK or klen < 0 or cur_take(&r, klen, &kp) != ST_OK
                or cur_varint(&r, &vlen) != ST_OK or vlen > cur_left(&r)):
            raise RuntimeError("the record's input buffer changed after the record was decoded")
        hkey = PyUnicode_DecodeUTF8(<const char *>kp, klen, "replace")
        if vlen < 0:
            hval = None
        else:
            hval = _byte_view(view, r.pos, r.pos + vlen)
            r.pos += vlen
        pair = (hkey, hval)
        PyObject_GC_UnTrack(<void *>pair)  # (str, view of the input): as the records, see there
        Py_INCREF(pair)
        PyTuple_SET_ITEM(headers, h, pair)
    PyObject_GC_UnTrack(<void *>headers)
    return headers


cdef list _decode_v2(object view, const uint8_t *buf, Py_ssize_t start, Py_ssize_t end,
                     Py_ssize_t count, object count_obj, uint64_t base_offset, object base_offset_obj,
                     uint64_t base_timestamp, bint use_lat, object lat, object timestamp_type,
                     int64_t no_ts):
    """decode_records_v2's loop over data[start:end], bounds 0 <= start, end <= len(buf)."""
    cdef Cursor c, r
    cdef Py_ssize_t i, rec_start, key_lo, key_hi, value_lo, value_hi, headers_lo = 0
    cdef int32_t length = 0, off_delta = 0, n_headers
    cdef int64_t ts_delta = 0, ts
    cdef uint8_t attributes = 0
    cdef int st, ttype = -1
    cdef unsigned int pending
    cdef Record rec
    # Each record takes at least 7 bytes; when count cannot fit, an error comes before the end.
    cdef bint prealloc = count <= (end - start) // 7
    cdef list out = PyList_New(count) if prealloc else []
    if timestamp_type is _TIMESTAMP_TYPE_OBJECTS[0]:
        ttype = 0
    elif timestamp_type is _TIMESTAMP_TYPE_OBJECTS[1]:
        ttype = 1
    cur_init(&c, buf, start, end)
    for i in range(count):
        if c.pos >= end:
            raise_status(ST_PREMATURE_EOF, c.pos, f"{count_obj} records", i, base_offset_obj)
        rec_start = c.pos
        st = cur_varint(&c, &length)
        if st != ST_OK:
            _raise_cursor(st, c.err_pos, base_offset_obj)
        if length < 0 or length > cur_left(&c):
            raise_status(ST_RECORD_TOO_LONG, rec_start, f"record length <= {cur_left(&c)}", length,
                         base_offset_obj)
        cur_init(&r, buf, c.pos, c.pos + length)  # the record: its reads stop at its end
        c.pos += length
        if cur_u8(&r, &attributes) != ST_OK:
            raise_status(ST_FIELD_PAST_END, r.pos, 1, 0, base_offset_obj)
        st = cur_varlong(&r, &ts_delta)
        if st != ST_OK:
            _raise_cursor(st, r.err_pos, base_offset_obj)
        st = cur_varint(&r, &off_delta)
        if st != ST_OK:
            _raise_cursor(st, r.err_pos, base_offset_obj)
        key_lo = _bytes_bounds(&r, base_offset_obj)
        key_hi = r.pos
        value_lo = _bytes_bounds(&r, base_offset_obj)
        value_hi = r.pos
        n_headers = _check_headers(&r, base_offset_obj, &headers_lo)
        if r.pos != r.end:
            raise_status(ST_RECORD_SIZE, rec_start, f"{length} bytes in record payload",
                         f"{length - cur_left(&r)} bytes read", base_offset_obj)
        rec = _new_record()
        rec._off = <int64_t>(base_offset + <uint64_t><int64_t>off_delta)  # Java long wrap
        rec._attributes = attributes
        rec._tombstone = value_lo < 0 or (attributes & RECORD_TOMBSTONE_FLAG_MASK) != 0
        pending = (1 << _OFFSET) | (1 << _IS_TOMBSTONE) | (1 << _ATTRIBUTES)
        if use_lat:
            Py_XINCREF(<PyObject *>lat)   # None ("no timestamp") stays NULL
            rec._o[_TIMESTAMP] = NULL if lat is None else <PyObject *>lat
        else:
            ts = <int64_t>(base_timestamp + <uint64_t>ts_delta)
            if ts != no_ts:
                rec._ts = ts
                pending |= 1 << _TIMESTAMP
        if ttype >= 0:
            rec._ttype = ttype
            pending |= 1 << _TIMESTAMP_TYPE
        else:
            Py_INCREF(timestamp_type)
            rec._o[_TIMESTAMP_TYPE] = <PyObject *>timestamp_type
        if key_lo >= 0:
            pending |= 1 << _KEY
            rec._key_lo = key_lo
            rec._key_hi = key_hi
        if value_lo >= 0:
            pending |= 1 << _VALUE
            rec._value_lo = value_lo
            rec._value_hi = value_hi
        if n_headers:
            pending |= 1 << _HEADERS
            rec._headers_lo = headers_lo
            rec._headers_hi = r.pos
            rec._n_headers = n_headers
        if pending & _FROM_VIEW:
            Py_INCREF(view)
            rec._view = <PyObject *>view
        rec._pending = pending
        if prealloc:
            Py_INCREF(rec)
            PyList_SET_ITEM(out, i, rec)
        else:
            out.append(rec)
    if c.pos != end:
        raise_status(ST_RECORDS_REMAINING, c.pos, f"{count_obj} records ending at byte {c.pos}",
                     f"{end - c.pos} more bytes", base_offset_obj)
    return out


def decode_records_v2(data, start, end, count, base_offset, base_timestamp, log_append_time,
                      timestamp_type, extended):
    """Decode exactly `count` v2 records from data[start:end] into a list of Record.

    offset = base_offset + offsetDelta; timestamp = base_timestamp + timestampDelta (Java wrapping
    arithmetic), or `log_append_time` for every record when it is not None (LogAppendTime batches).
    "No timestamp" becomes None: -1 when not `extended`, Long.MIN_VALUE when `extended`.
    Checks each record's declared length, header counts, and that the section holds exactly
    `count` records, with Kafka's rules (kafka-format.md §1.3).
    """
    cdef Py_ssize_t s, e, n
    cdef uint64_t bo, bt = 0
    cdef int64_t no_ts
    cdef Py_buffer pb
    mv = _view(data)
    try:
        n_obj = PyNumber_Index(count)
    except TypeError:
        return _py.decode_records_v2(data, start, end, count, base_offset, base_timestamp,
                                     log_append_time, timestamp_type, extended)
    if n_obj < 0:
        raise_status(ST_BAD_COUNT, start, "count >= 0", count, base_offset)
    if (not _index_arg(start, &s) or not _index_arg(end, &e) or e > len(mv)
            or not (PyLong_Check(base_offset) or hasattr(base_offset, "__index__"))
            or (log_append_time is None and n_obj > 0
                and not (PyLong_Check(base_timestamp) or hasattr(base_timestamp, "__index__")))):
        return _py.decode_records_v2(data, start, end, count, base_offset, base_timestamp,
                                     log_append_time, timestamp_type, extended)
    # At most (e - s) // 7 records fit (7 bytes is the smallest record), so a count above e + 1
    # fails before the loop reaches it: clamping keeps C sizes without changing the outcome.
    n = n_obj if n_obj <= e + 1 else e + 1
    no_ts = INT64_MIN if extended else -1
    lat = None
    if log_append_time is not None:
        lat = None if log_append_time == no_ts else log_append_time
    bo = PyNumber_Index(base_offset) & _MASK64
    if log_append_time is None and n:
        bt = PyNumber_Index(base_timestamp) & _MASK64
    view = mv.toreadonly()
    PyObject_GetBuffer(view, &pb, PyBUF_SIMPLE)
    try:
        return _decode_v2(view, <const uint8_t *>pb.buf, s, e, n, count, bo, base_offset, bt,
                          log_append_time is not None, lat, timestamp_type, no_ts)
    finally:
        PyBuffer_Release(&pb)


# ------------------------------------------------------------------------------------ timestamps
cdef extern from *:
    """
    /* KIP-937 counts over an int64 column: branch-free, so compilers vectorize it; on x86-64
       Linux an AVX2 clone is picked at load time (64-bit compares need more than SSE2). */
    #if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
    #  if __has_attribute(target_clones)
    #    define KB_CLONES __attribute__((target_clones("avx2", "default")))
    #  endif
    #endif
    #ifndef KB_CLONES
    #  define KB_CLONES
    #endif
    KB_CLONES
    static void kb_count_bad_ts(const int64_t *ts, Py_ssize_t n, int64_t lo, int64_t hi, int has_skip,
                                int64_t skip, Py_ssize_t *n_old, Py_ssize_t *n_new) {
        /* all-ones / all-zero masks rather than bools: the form GCC's vectorizer takes */
        int64_t old = 0, new_ = 0, skip_mask = has_skip ? -1 : 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t t = ts[i];
            int64_t dead = -(int64_t)(t == skip) & skip_mask;
            int64_t too_old = -(int64_t)(t < lo);
            int64_t too_new = -(int64_t)(t > hi);
            old -= too_old & ~dead;
            new_ -= too_new & ~too_old & ~dead;
        }
        *n_old += (Py_ssize_t)old;
        *n_new += (Py_ssize_t)new_;
    }
    """
    void kb_count_bad_ts(const int64_t *ts, Py_ssize_t n, int64_t lo, int64_t hi, int has_skip,
                         int64_t skip, Py_ssize_t *n_old, Py_ssize_t *n_new) nogil

# check_timestamps counts in blocks of this many values until it meets the first bad one.
cdef Py_ssize_t _TS_BLOCK = 4096


def check_timestamps(timestamps, now_ms, before_max_ms, after_max_ms, no_timestamp):
    """KIP-937 range check over an int64 column, without wrapping (DESIGN.md decision 4).

    A timestamp equal to `no_timestamp` is skipped. Bad = ts < now - before_max_ms (too old) or
    ts > now + after_max_ms (too new), in exact arithmetic. Returns
    (first_bad_index or -1, n_too_old, n_too_new).
    """
    cdef const int64_t[::1] v
    cdef const int64_t *p
    cdef int64_t lo, hi, skip = 0, t
    cdef int has_skip = 0
    cdef Py_ssize_t i, j, n, block, first = -1, n_old = 0, n_new = 0
    ts = np.asarray(timestamps, dtype=np.int64)
    lo_obj, hi_obj = timestamp_bounds(now_ms, before_max_ms, after_max_ms)
    if isinstance(no_timestamp, (int, np.integer)):
        nts = int(no_timestamp)
        has_skip = _INT64_MIN <= nts <= _INT64_MAX
        if has_skip:
            skip = nts
    elif no_timestamp is not None:
        return _py.check_timestamps(timestamps, now_ms, before_max_ms, after_max_ms, no_timestamp)
    if ts.ndim != 1 or type(lo_obj) is not int or type(hi_obj) is not int:
        return _py.check_timestamps(timestamps, now_ms, before_max_ms, after_max_ms, no_timestamp)
    lo, hi = lo_obj, hi_obj
    v = np.ascontiguousarray(ts)
    n = v.shape[0]
    if n == 0:
        return -1, 0, 0
    p = &v[0]  # n int64 values from here: every index below is < n
    with nogil:
        i = 0
        while i < n and first < 0:
            block = min(_TS_BLOCK, n - i)
            kb_count_bad_ts(p + i, block, lo, hi, has_skip, skip, &n_old, &n_new)
            if n_old or n_new:
                for j in range(i, i + block):
                    t = p[j]
                    if (t < lo or t > hi) and not (has_skip and t == skip):
                        first = j
                        break
            i += block
        if i < n:
            kb_count_bad_ts(p + i, n - i, lo, hi, has_skip, skip, &n_old, &n_new)
    return first, n_old, n_new


def timestamp_bounds(now_ms, before_max_ms, after_max_ms):
    """[now - before, now + after], saturated to the int64 range."""
    lo = max(_INT64_MIN, min(_INT64_MAX, now_ms - before_max_ms))
    hi = max(_INT64_MIN, min(_INT64_MAX, now_ms + after_max_ms))
    return lo, hi


# ------------------------------------------------------------------------------------ index search
_KEY_SIZES = {0: 4, 1: 8}  # 0: offset index (int32 relative offset), 1: time index (int64)


cdef inline Py_ssize_t _bsearch(Cursor *c, Py_ssize_t entry_size, int key_size, int64_t target,
                                Py_ssize_t n_entries) noexcept nogil:
    """Slot of the largest entry whose key <= target, probing as _core_py.index_search does
    (so an unsorted index gives the same answer); -1 when none. The caller proved
    n_entries * entry_size <= c.end and entry_size >= key_size, so the peeks cannot fail."""
    cdef Py_ssize_t lo = 0, hi = n_entries - 1, mid
    if n_entries == 0 or _key_at(c, 0, key_size) > target:
        return -1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if _key_at(c, mid * entry_size, key_size) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef inline int64_t _key_at(Cursor *c, Py_ssize_t at, int key_size) noexcept nogil:
    cdef uint32_t u32 = 0
    cdef uint64_t u64 = 0
    if key_size == 4:
        cur_peek_be32(c, at, &u32)
        return <int32_t>u32
    cur_peek_be64(c, at, &u64)
    return <int64_t>u64


cdef int _index_domain(object data, object entry_size, object key_kind, object n_entries,
                       Py_buffer *pb, Py_ssize_t *es, int *key_size, Py_ssize_t *ne) except -1:
    """index_search's checks in the pure twin's order. 1 with the buffer acquired when the C
    path applies, 0 (nothing acquired) when the call belongs to the pure twin."""
    buf = _view(data)
    ks = _KEY_SIZES[key_kind]
    n_buf = len(buf)
    need = n_entries * entry_size
    if need > n_buf:
        raise_status(ST_TRUNCATED, n_buf, need, n_buf)
    if not _index_arg(entry_size, es) or not _index_arg(n_entries, ne) or es[0] < ks:
        return 0
    key_size[0] = ks
    PyObject_GetBuffer(buf, pb, PyBUF_SIMPLE)
    return 1


def index_search(data, entry_size, key_kind, target, n_entries):
    """Slot of the largest entry whose key <= target in a sorted index, or -1 when none.

    key_kind 0 = `.index` (key: int32 relative offset), 1 = `.timeindex` (key: int64 timestamp).
    Entries are big-endian; the key is at the start of each entry.
    """
    cdef Py_buffer pb
    cdef Py_ssize_t es = 0, ne = 0, slot
    cdef int key_size = 0
    cdef int64_t t64
    cdef Cursor c
    if not PyLong_Check(target):
        return _py.index_search(data, entry_size, key_kind, target, n_entries)
    if not _index_domain(data, entry_size, key_kind, n_entries, &pb, &es, &key_size, &ne):
        return _py.index_search(data, entry_size, key_kind, target, n_entries)
    cur_init(&c, <const uint8_t *>pb.buf, 0, pb.len)
    if target < _INT64_MIN:
        slot = -1  # every key is greater
    else:
        t64 = INT64_MAX if target > _INT64_MAX else <int64_t>target
        slot = _bsearch(&c, es, key_size, t64, ne)
    PyBuffer_Release(&pb)
    return slot


def index_search_many(data, entry_size, key_kind, targets, n_entries):
    """index_search for each of many targets (any order); returns an int64 numpy array."""
    cdef Py_buffer pb
    cdef Py_ssize_t es = 0, ne = 0, i, n
    cdef int key_size = 0
    cdef Cursor c
    cdef const int64_t[:] tv
    cdef int64_t[::1] ov
    t = np.asarray(targets, dtype=np.int64)
    if t.ndim != 1:
        return _py.index_search_many(data, entry_size, key_kind, targets, n_entries)
    n = t.shape[0]
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    if not _index_domain(data, entry_size, key_kind, n_entries, &pb, &es, &key_size, &ne):
        return _py.index_search_many(data, entry_size, key_kind, targets, n_entries)
    tv = t
    ov = out
    cur_init(&c, <const uint8_t *>pb.buf, 0, pb.len)
    with nogil:
        # tv[i], ov[i] for i in range(n): both have n elements.
        for i in range(n):
            ov[i] = _bsearch(&c, es, key_size, tv[i], ne)
    PyBuffer_Release(&pb)
    return out


# ------------------------------------------------------------------------------------ record encoding
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_Check
from libc.stdint cimport INT32_MAX
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy


cdef class _OutsideCPath(Exception):
    """Raised inside the C encoding path for anything it leaves to the pure twin."""


# What the C path hands to the pure twin (which then returns the same result or raises the same
# error): its own _OutsideCPath, and a Python conversion that refuses a value.
_HAND_OVER = (_OutsideCPath, OverflowError, TypeError, ValueError, BufferError, UnicodeError)


cdef struct _Out:
    uint8_t *buf
    Py_ssize_t len
    Py_ssize_t cap


cdef int _out_reserve(_Out *o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap = o.cap * 2 if o.cap else 4096
    cdef uint8_t *nb
    if o.len + extra <= o.cap:
        return 0
    while cap < o.len + extra:
        cap *= 2
    nb = <uint8_t *>realloc(o.buf, cap)
    if nb == NULL:
        raise MemoryError()
    o.buf = nb
    o.cap = cap
    return 0


cdef inline Py_ssize_t _uvarint_size(uint64_t u) noexcept nogil:
    cdef Py_ssize_t n = 1
    while u > 0x7F:
        u >>= 7
        n += 1
    return n


cdef inline void _out_blob(_Out *o, const void *p, Py_ssize_t n) noexcept nogil:
    """A varint length then the bytes; _out_reserve made room."""
    o.len += _put_unsigned(_zigzag64(n), o.buf + o.len)
    memcpy(o.buf + o.len, p, n)
    o.len += n


cdef object _plain_headers(object headers, Py_ssize_t nh):
    """`headers` when every pair is (str or bytes, bytes or None), else a list of such pairs made
    the way the pure twin reads them (bytes(memoryview(x)) of other bytes-likes, e.g. the views a
    decoded record carries); _OutsideCPath for any shape or value the twin should judge."""
    cdef Py_ssize_t h
    cdef bint plain = True
    for h in range(nh):
        pair = headers[h]
        if not PyTuple_CheckExact(pair) or PyTuple_GET_SIZE(pair) != 2:
            raise _OutsideCPath()
        hk = <object>PyTuple_GET_ITEM(pair, 0)
        hv = <object>PyTuple_GET_ITEM(pair, 1)
        if hk is None:
            raise _OutsideCPath()  # refused: the twin raises
        if not (PyUnicode_Check(hk) or type(hk) is bytes) or not (hv is None or type(hv) is bytes):
            plain = False
    if plain:
        return headers
    return [(hk if PyUnicode_Check(hk) or type(hk) is bytes else bytes(memoryview(hk)),
             hv if hv is None or type(hv) is bytes else bytes(memoryview(hv))) for hk, hv in headers]


cdef Py_ssize_t _header_size(object headers, Py_ssize_t nh) except -1:
    """Bytes of the headers after their count; _OutsideCPath for any shape the C path skips."""
    cdef Py_ssize_t h, size = 0, klen = 0
    for h in range(nh):
        pair = headers[h]
        if not PyTuple_CheckExact(pair) or PyTuple_GET_SIZE(pair) != 2:
            raise _OutsideCPath()
        hk = <object>PyTuple_GET_ITEM(pair, 0)
        hv = <object>PyTuple_GET_ITEM(pair, 1)
        if PyUnicode_Check(hk):
            PyUnicode_AsUTF8AndSize(hk, &klen)
        elif type(hk) is bytes:
            klen = len(<bytes>hk)
        else:
            raise _OutsideCPath()  # None (an error), other bytes-likes: the pure twin
        size += _uvarint_size(_zigzag64(klen)) + klen
        if hv is None:
            size += 1
        elif type(hv) is bytes:
            size += _uvarint_size(_zigzag64(len(<bytes>hv))) + len(<bytes>hv)
        else:
            raise _OutsideCPath()
    return size


cdef void _write_headers(_Out *o, object headers, Py_ssize_t nh):
    """Write what _header_size measured (it checked every shape)."""
    cdef Py_ssize_t h, klen = 0
    cdef const char *kp
    for h in range(nh):
        pair = headers[h]
        hk = <object>PyTuple_GET_ITEM(pair, 0)
        hv = <object>PyTuple_GET_ITEM(pair, 1)
        if PyUnicode_Check(hk):
            kp = PyUnicode_AsUTF8AndSize(hk, &klen)
        else:
            kp = <bytes>hk
            klen = len(<bytes>hk)
        _out_blob(o, kp, klen)
        if hv is None:
            o.buf[o.len] = 1
            o.len += 1
        else:
            _out_blob(o, <const char *>(<bytes>hv), len(<bytes>hv))


@cython.final
cdef class RecordsEncoderV2:
    """encode_records_v2 a record (append) or a list (extend) at a time, keeping the state between
    calls: what BatchBuilder writes magic 2 records with. Same contract as the pure twin.

    The C path takes int/None numbers, bytes-like keys and values, headers as a list or tuple of
    (str or bytes, bytes or None); any other record, and every record the rules refuse, goes to
    the pure twin's encode_records_v2, which returns the same bytes or raises the same error.
    """
    cdef _Out o
    cdef readonly object base_offset
    cdef readonly bint extended
    cdef readonly Py_ssize_t count
    cdef int64_t c_base_off, c_last, c_base_ts, c_max, no_ts
    cdef bint have_last, have_base_ts

    def __cinit__(self):
        self.o.buf = NULL
        self.o.len = self.o.cap = 0

    def __dealloc__(self):
        free(self.o.buf)

    def __init__(self, base_offset, last_offset=None, base_timestamp=None, extended=False):
        self.base_offset = _py._int64("base_offset", base_offset)  # the twin's checks and errors
        self.c_base_off = self.base_offset
        self.have_last = last_offset is not None
        self.c_last = _py._int64("last_offset", last_offset) if self.have_last else 0
        self.have_base_ts = base_timestamp is not None
        self.c_base_ts = _py._int64("base_timestamp", base_timestamp) if self.have_base_ts else 0
        self.extended = bool(extended)
        self.no_ts = INT64_MIN if self.extended else -1
        self.c_max = self.no_ts
        self.count = 0
        self.o.len = 0

    @property
    def last_offset(self):
        return self.c_last if self.have_last else None

    @property
    def base_timestamp(self):
        return self.c_base_ts if self.have_base_ts else None

    @property
    def max_timestamp(self):
        return self.c_max

    def section(self):
        return PyBytes_FromStringAndSize(<char *>self.o.buf, self.o.len) if self.o.len else b""

    def append(self, timestamp, key, value, headers=(), tombstone=None, offset=None):
        """Encode one record (BatchBuilder.append's arguments); returns its offset."""
        try:
            self._one(timestamp, key, value, headers, tombstone, offset)
        except _HAND_OVER:
            self._by_twin(((timestamp, key, value, headers, tombstone, offset),))
        return self.c_last

    def extend(self, records):
        """Encode records in order; a refused record refuses them all."""
        cdef Py_ssize_t len0 = self.o.len, count0 = self.count, n
        cdef int64_t last0 = self.c_last, base_ts0 = self.c_base_ts, max0 = self.c_max
        cdef bint have_last0 = self.have_last, have_base_ts0 = self.have_base_ts
        try:
            if not (type(records) is list or type(records) is tuple):
                raise _OutsideCPath()  # any other iterable is read once, by the twin
            for rec in records:
                if not PyTuple_CheckExact(rec):
                    raise _OutsideCPath()
                n = PyTuple_GET_SIZE(rec)
                if n < 3 or n > 6:
                    raise _OutsideCPath()
                self._one(<object>PyTuple_GET_ITEM(rec, 0), <object>PyTuple_GET_ITEM(rec, 1),
                          <object>PyTuple_GET_ITEM(rec, 2),
                          <object>PyTuple_GET_ITEM(rec, 3) if n > 3 else _EMPTY_TUPLE,
                          <object>PyTuple_GET_ITEM(rec, 4) if n > 4 else None,
                          <object>PyTuple_GET_ITEM(rec, 5) if n > 5 else None)
        except _HAND_OVER:
            self.o.len, self.count, self.c_last, self.c_base_ts, self.c_max = len0, count0, last0, base_ts0, max0
            self.have_last, self.have_base_ts = have_last0, have_base_ts0
            self._by_twin(records)

    cdef int _by_twin(self, records) except -1:
        """The pure twin encodes (or refuses) `records` from this state; its bytes are appended."""
        section, n, base_ts, max_ts, last = _py.encode_records_v2(
            records, self.base_offset, self.last_offset, self.base_timestamp, self.extended)
        if n:
            _out_reserve(&self.o, len(section))
            memcpy(self.o.buf + self.o.len, <const char *>section, len(section))
            self.o.len += len(section)
            self.count += n
            self.c_base_ts = base_ts
            self.have_base_ts = True
            self.c_last = last
            self.have_last = True
            if max_ts > self.c_max:
                self.c_max = max_ts
        return 0

    cdef int _one(self, object t_obj, object key, object value, object headers, object tomb,
                  object off_obj) except -1:
        """Encode one record in C, or raise _OutsideCPath (nothing written) for the twin."""
        cdef int64_t ts, c_off
        cdef Py_ssize_t nh, hsize, size
        cdef uint64_t tsd, offd
        cdef uint8_t attrs
        cdef Py_buffer kb, vb
        # offset: the previous + 1, or given (increasing, >= base, delta within int32)
        if off_obj is None:
            if self.have_last and self.c_last == INT64_MAX:
                raise _OutsideCPath()
            c_off = self.c_last + 1 if self.have_last else self.c_base_off
        elif PyLong_CheckExact(off_obj):
            c_off = off_obj  # OverflowError beyond int64: the twin refuses it
            if self.have_last and c_off <= self.c_last:
                raise _OutsideCPath()
        else:
            raise _OutsideCPath()
        if c_off < self.c_base_off or <uint64_t>c_off - <uint64_t>self.c_base_off > <uint64_t>INT32_MAX:
            raise _OutsideCPath()
        if t_obj is None:
            ts = self.no_ts
        elif PyLong_CheckExact(t_obj):
            ts = t_obj
            if self.extended and ts == INT64_MIN:
                raise _OutsideCPath()
        else:
            raise _OutsideCPath()
        if tomb is None:
            attrs = RECORD_TOMBSTONE_FLAG_MASK if value is None else 0
        elif tomb is False:
            if value is None:
                raise _OutsideCPath()
            attrs = 0
        else:
            attrs = RECORD_TOMBSTONE_FLAG_MASK if tomb else 0
        if type(headers) is tuple or type(headers) is list:
            nh = len(headers)
        elif headers is None:
            nh = 0
        else:
            raise _OutsideCPath()
        headers = _plain_headers(headers, nh)
        hsize = _header_size(headers, nh)
        kb.buf = vb.buf = NULL
        try:
            if key is not None:
                PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE)
            if value is not None:
                PyObject_GetBuffer(value, &vb, PyBUF_SIMPLE)
            tsd = _zigzag64(<int64_t>(<uint64_t>ts - <uint64_t>(self.c_base_ts if self.have_base_ts else ts)))
            offd = _zigzag64(c_off - self.c_base_off)
            size = (1 + _uvarint_size(tsd) + _uvarint_size(offd) + _uvarint_size(_zigzag64(nh)) + hsize
                    + (1 if key is None else _uvarint_size(_zigzag64(kb.len)) + kb.len)
                    + (1 if value is None else _uvarint_size(_zigzag64(vb.len)) + vb.len))
            _out_reserve(&self.o, size + 10)
            # nothing below can fail: write the record and take the new state
            self.o.len += _put_unsigned(_zigzag64(size), self.o.buf + self.o.len)
            self.o.buf[self.o.len] = attrs
            self.o.len += 1
            self.o.len += _put_unsigned(tsd, self.o.buf + self.o.len)  # Java long arithmetic: wraps
            self.o.len += _put_unsigned(offd, self.o.buf + self.o.len)
            if key is None:
                self.o.buf[self.o.len] = 1  # varint -1
                self.o.len += 1
            else:
                _out_blob(&self.o, kb.buf, kb.len)
            if value is None:
                self.o.buf[self.o.len] = 1
                self.o.len += 1
            else:
                _out_blob(&self.o, vb.buf, vb.len)
            self.o.len += _put_unsigned(_zigzag64(nh), self.o.buf + self.o.len)
            _write_headers(&self.o, headers, nh)
        finally:
            if kb.buf != NULL:
                PyBuffer_Release(&kb)
            if vb.buf != NULL:
                PyBuffer_Release(&vb)
        if not self.have_base_ts:
            self.c_base_ts = ts
            self.have_base_ts = True
        if ts > self.c_max:
            self.c_max = ts
        self.c_last = c_off
        self.have_last = True
        self.count += 1
        return 0


def encode_records_v2(records, base_offset, last_offset, base_timestamp, extended):
    """Encode magic 2 records as Kafka's DefaultRecord.writeTo lays them out (the records section).

    Same contract as the pure twin (the spec), through RecordsEncoderV2's C path.
    """
    cdef RecordsEncoderV2 enc = RecordsEncoderV2(base_offset, last_offset, base_timestamp, extended)
    enc.extend(records)
    base_ts = enc.base_timestamp
    return enc.section(), enc.count, (enc.no_ts if base_ts is None else base_ts), enc.c_max, enc.last_offset




# ------------------------------------------------------------------------------------ column decode
include "_columns_kernel.pxi"


# ------------------------------------------------------------------------------------ column encode
include "_encode_kernel.pxi"


# ------------------------------------------------------------------------------------ compaction key map
include "_offset_map_kernel.pxi"

# kbatch grep: memmem over a records section, then the fields of the records that hold a hit
include "_grep_kernel.pxi"
