# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled hot paths of kbatch.compat: v2 record decode and encode with the Python clients' rules.

decode_v2 returns a list of the client's record objects, or None whenever the bytes are not ones
the client's own reader accepts exactly as read here (the caller then runs the client's reader,
which raises the client's exception at the right record). Every read is bounds-checked against
the record's declared length, which is checked against the section's end, so boundscheck(False)
is safe: no index is computed from unchecked input.
"""
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint64_t, INT64_MAX, INT64_MIN
from libc.string cimport memcpy

import types


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    ctypedef PyObject *(*allocfunc)(PyTypeObject *, Py_ssize_t)
    ctypedef struct PyTypeObjectAlloc "PyTypeObject":
        allocfunc tp_alloc
    int PyByteArray_Resize(object, Py_ssize_t) except -1
    char *PyByteArray_AS_STRING(object)
    Py_ssize_t PyByteArray_GET_SIZE(object)

cdef enum:
    T_OBJECT_EX = 16


cdef class SlotFactory:
    """Makes instances of a Python class with __slots__ without calling its __init__: the slots
    named are filled in order by writing the object pointers where the member descriptors keep
    them. Only for classes whose __init__ does nothing but assign those slots."""
    cdef object cls
    cdef Py_ssize_t offs[8]
    cdef int n

    def __init__(self, cls, names):
        if len(names) > 8:
            raise ValueError("at most 8 slots")
        if cls.__new__ is not object.__new__:
            raise TypeError(f"{cls!r} has its own __new__")
        self.cls = cls
        self.n = len(names)
        for i, name in enumerate(names):
            for k in cls.__mro__:
                if name in k.__dict__:
                    d = k.__dict__[name]
                    break
            else:
                raise TypeError(f"{cls!r} has no slot {name}")
            if type(d) is not types.MemberDescriptorType:
                raise TypeError(f"{cls.__name__}.{name} is not a slot")
            if (<PyMemberDescrObject *> d).d_member.type != T_OBJECT_EX:
                raise TypeError(f"{cls.__name__}.{name} is not an object slot")
            self.offs[i] = (<PyMemberDescrObject *> d).d_member.offset

    cdef inline object alloc(self):
        cdef PyObject *p = (<PyTypeObjectAlloc *> <PyObject *> self.cls).tp_alloc(<PyTypeObject *> <PyObject *> self.cls, 0)
        if p == NULL:
            raise MemoryError()
        cdef object o = <object> p
        Py_DECREF(o)
        return o

    cdef inline void put(self, object o, int i, object v):
        cdef PyObject **slot = <PyObject **> ((<char *> <PyObject *> o) + self.offs[i])
        Py_INCREF(v)
        slot[0] = <PyObject *> v

    def make(self, *values):
        """Build one instance from positional slot values (for tests)."""
        if len(values) != self.n:
            raise TypeError(f"{self.n} values needed")
        o = self.alloc()
        for i, v in enumerate(values):
            self.put(o, i, v)
        return o


cdef class AioDefaultRecord:
    """aiokafka's DefaultRecord API: offset, timestamp, timestamp_type, key, value, headers, checksum."""
    cdef readonly object offset, timestamp, timestamp_type, key, value, headers

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    @property
    def checksum(self):
        return None

    def __repr__(self):
        return (f"DefaultRecord(offset={self.offset!r}, timestamp={self.timestamp!r},"
                f" timestamp_type={self.timestamp_type!r}, key={self.key!r},"
                f" value={self.value!r}, headers={self.headers!r})")


cdef class AioDefaultRecordMetadata:
    """aiokafka's DefaultRecordMetadata API: offset, size, timestamp, crc (None)."""
    cdef readonly object offset, size, timestamp

    def __init__(self, offset, size, timestamp):
        self.offset = offset
        self.size = size
        self.timestamp = timestamp

    @property
    def crc(self):
        return None

    def __repr__(self):
        return (f"DefaultRecordMetadata(offset={self.offset!r},"
                f" size={self.size!r}, timestamp={self.timestamp!r})")


# ---------------------------------------------------------------------------------- decoding
cdef inline int _varint(const uint8_t *b, Py_ssize_t *pos, Py_ssize_t end, int64_t *out) noexcept nogil:
    """The clients' decode_varint (64-bit zigzag, up to 10 bytes); -1 where the client would raise
    or would produce a value outside int64 (bits past 64 in the 10th byte)."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t result = 0
    cdef uint64_t byte
    cdef int shift = 0
    while True:
        if p >= end:
            return -1
        byte = b[p]
        p += 1
        if shift == 63 and (byte & 0x7e):
            return -1
        result |= (byte & 0x7f) << shift
        if not (byte & 0x80):
            break
        shift += 7
        if shift >= 64:
            return -1
    out[0] = <int64_t> ((result >> 1) ^ (-(result & 1)))
    pos[0] = p
    return 0


cdef inline bint _add_ok(int64_t a, int64_t b) noexcept nogil:
    if b > 0:
        return a <= INT64_MAX - b
    return a >= INT64_MIN - b


def decode_v2(buf, Py_ssize_t pos, Py_ssize_t count, int64_t base_offset, int64_t first_ts, int64_t max_ts,
              bint log_append, int flavour, SlotFactory factory=None, object ts_type=0):
    """Decode `count` records of an uncompressed v2 section buf[pos:].

    flavour 0: kafka-python DefaultRecord via `factory` (slots _size_in_bytes, _offset, _timestamp,
    _timestamp_type, _key, _value, _headers); flavour 1: AioDefaultRecord. Returns a list, or None
    when the client's own reader must decide (errors, int64 overflow, undecodable header keys).
    """
    cdef const uint8_t[::1] view = buf
    cdef const uint8_t *b = &view[0] if view.shape[0] else NULL
    cdef Py_ssize_t end = view.shape[0]
    cdef Py_ssize_t i, h, rec_end, start
    cdef int64_t length, attrs, ts_delta, off_delta, klen, vlen, nh, hklen, hvlen, ts, off
    cdef list out = []
    cdef list headers
    cdef object key, value, hkey, hval, rec
    cdef AioDefaultRecord arec
    if count < 0 or pos > end:
        return None
    for i in range(count):
        if _varint(b, &pos, end, &length) or length < 0 or length > end - pos:
            return None
        start = pos
        rec_end = pos + length
        if (_varint(b, &pos, rec_end, &attrs) or _varint(b, &pos, rec_end, &ts_delta)
                or _varint(b, &pos, rec_end, &off_delta) or _varint(b, &pos, rec_end, &klen)):
            return None
        if klen >= 0:
            if klen > rec_end - pos:
                return None
            key = PyBytes_FromStringAndSize(<const char *> b + pos, klen)
            pos += klen
        else:
            key = None
        if _varint(b, &pos, rec_end, &vlen):
            return None
        if vlen >= 0:
            if vlen > rec_end - pos:
                return None
            value = PyBytes_FromStringAndSize(<const char *> b + pos, vlen)
            pos += vlen
        else:
            value = None
        if _varint(b, &pos, rec_end, &nh) or nh < 0 or nh > rec_end - pos:
            return None
        headers = []
        for h in range(nh):
            if _varint(b, &pos, rec_end, &hklen) or hklen < 0 or hklen > rec_end - pos:
                return None
            try:
                hkey = PyUnicode_DecodeUTF8(<const char *> b + pos, hklen, NULL)
            except UnicodeDecodeError:
                return None
            pos += hklen
            if _varint(b, &pos, rec_end, &hvlen):
                return None
            if hvlen >= 0:
                if hvlen > rec_end - pos:
                    return None
                hval = PyBytes_FromStringAndSize(<const char *> b + pos, hvlen)
                pos += hvlen
            else:
                hval = None
            headers.append((hkey, hval))
        if pos != rec_end:
            return None
        if log_append:
            ts = max_ts
        else:
            if not _add_ok(first_ts, ts_delta):
                return None
            ts = first_ts + ts_delta
        if not _add_ok(base_offset, off_delta):
            return None
        off = base_offset + off_delta
        if flavour == 0:
            rec = factory.alloc()
            factory.put(rec, 0, length)
            factory.put(rec, 1, off)
            factory.put(rec, 2, ts)
            factory.put(rec, 3, ts_type)
            factory.put(rec, 4, key)
            factory.put(rec, 5, value)
            factory.put(rec, 6, headers)
            out.append(rec)
        else:
            arec = AioDefaultRecord.__new__(AioDefaultRecord)
            arec.offset = off
            arec.timestamp = ts
            arec.timestamp_type = ts_type
            arec.key = key
            arec.value = value
            arec.headers = headers
            out.append(arec)
    if pos != end:
        return None
    return out


# ---------------------------------------------------------------------------------- encoding
cdef inline Py_ssize_t _put_varint(uint8_t *p, int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t> v << 1) ^ <uint64_t> (v >> 63)
    cdef Py_ssize_t n = 0
    while u >= 0x80:
        p[n] = <uint8_t> ((u & 0x7f) | 0x80)
        u >>= 7
        n += 1
    p[n] = <uint8_t> u
    return n + 1


cdef inline Py_ssize_t _size_varint(int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t> v << 1) ^ <uint64_t> (v >> 63)
    cdef Py_ssize_t n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def append_v2(bytearray buf, int64_t offset_delta, int64_t timestamp_delta, key, value, headers,
              Py_ssize_t batch_size, bint first):
    """Append one record as the clients' builders write it; returns its size (length prefix
    included), or -1 without writing when it would take buf past batch_size (never for the first).
    key/value: bytes-like or None; headers: sequence of (str, bytes-like | None)."""
    cdef const uint8_t[::1] kv, vv, hv
    cdef Py_ssize_t klen = -1, vlen = -1, body, total, old, p
    cdef Py_ssize_t nh = len(headers)
    cdef list hkeys = None
    cdef list hvals = None
    cdef uint8_t *out
    if key is not None:
        kv = key if not isinstance(key, memoryview) else key.cast("B")
        klen = kv.shape[0]
    if value is not None:
        vv = value if not isinstance(value, memoryview) else value.cast("B")
        vlen = vv.shape[0]
    body = 1 + _size_varint(timestamp_delta) + _size_varint(offset_delta)
    body += 1 if klen < 0 else _size_varint(klen) + klen
    body += 1 if vlen < 0 else _size_varint(vlen) + vlen
    body += _size_varint(nh)
    if nh:
        hkeys = []
        hvals = []
        for hk, hval in headers:
            ek = hk.encode("utf-8")
            hkeys.append(ek)
            body += _size_varint(len(ek)) + len(ek)
            if hval is None:
                body += 1
            else:
                hval = bytes(hval)
                body += _size_varint(len(hval)) + len(hval)
            hvals.append(hval)
    total = body + _size_varint(body)
    old = PyByteArray_GET_SIZE(buf)
    if total + old > batch_size and not first:
        return -1
    PyByteArray_Resize(buf, old + total)
    out = <uint8_t *> PyByteArray_AS_STRING(buf) + old
    p = _put_varint(out, body)
    out[p] = 0
    p += 1
    p += _put_varint(out + p, timestamp_delta)
    p += _put_varint(out + p, offset_delta)
    if klen < 0:
        out[p] = 1
        p += 1
    else:
        p += _put_varint(out + p, klen)
        if klen:
            memcpy(out + p, &kv[0], klen)
        p += klen
    if vlen < 0:
        out[p] = 1
        p += 1
    else:
        p += _put_varint(out + p, vlen)
        if vlen:
            memcpy(out + p, &vv[0], vlen)
        p += vlen
    p += _put_varint(out + p, nh)
    for h in range(nh):
        ek = hkeys[h]
        p += _put_varint(out + p, len(ek))
        memcpy(out + p, <const char *> ek, len(ek))
        p += len(ek)
        hval = hvals[h]
        if hval is None:
            out[p] = 1
            p += 1
        else:
            p += _put_varint(out + p, len(hval))
            memcpy(out + p, <const char *> hval, len(hval))
            p += len(hval)
    return total
