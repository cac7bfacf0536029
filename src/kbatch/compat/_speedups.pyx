# cython: language_level=3, cdivision=True
"""Compiled hot paths of kbatch.compat: v2 record decode and encode with the Python clients' rules.

decode_v2 returns a list of the client's record objects, or None whenever the bytes are not ones
the client's own reader accepts exactly as read here (the caller then runs the client's reader,
which raises the client's exception at the right record). Every read is bounds-checked against
the record's declared length, which is checked against the section's end: reads go through
kbatch._core's checked cursor (_core.pxd, cimported as asyncpg's protocol cimports pgproto), so
no directive turns bounds checks off in this file.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MAX, INT64_MIN
from libc.string cimport memcmp, memcpy, memset

cimport cython

from .._core cimport ST_OK, Cursor, cur_init, cur_left, cur_take, cur_varlong
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
    void PyType_Modified(PyTypeObject *)
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


@cython.freelist(256)
@cython.final
cdef class AioDefaultRecord:
    """aiokafka's DefaultRecord API (offset, timestamp, timestamp_type, key, value, headers, all
    read-only; checksum None; its repr). The six attributes are read-only T_OBJECT_EX members
    (installed below), which CPython's specialising interpreter reads like __slots__."""
    cdef object _offset, _timestamp, _timestamp_type, _key, _value, _headers

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers):
        self._offset = offset
        self._timestamp = timestamp
        self._timestamp_type = timestamp_type
        self._key = key
        self._value = value
        self._headers = headers

    @property
    def checksum(self):
        return None

    def __repr__(self):
        return (f"DefaultRecord(offset={self._offset!r}, timestamp={self._timestamp!r},"
                f" timestamp_type={self._timestamp_type!r}, key={self._key!r},"
                f" value={self._value!r}, headers={self._headers!r})")


cdef extern from "Python.h":
    object PyDescr_NewMember(PyTypeObject *, PyMemberDef *)
    ctypedef struct PyTypeObjectDict "PyTypeObject":
        PyObject *tp_dict
        Py_ssize_t tp_basicsize

cdef enum:
    _READONLY = 1

cdef PyMemberDef _aio_members[6]


def _install_members():
    """Find the six fields by probing an instance holding distinct objects, then install
    read-only T_OBJECT_EX member descriptors for them."""
    marks = [object() for _ in range(6)]
    cdef AioDefaultRecord r = AioDefaultRecord(*marks)
    cdef char *base = <char *> <PyObject *> r
    cdef Py_ssize_t size = (<PyTypeObjectDict *> <PyObject *> AioDefaultRecord).tp_basicsize
    cdef Py_ssize_t o, i, found
    cdef PyObject *want
    names = [b"offset", b"timestamp", b"timestamp_type", b"key", b"value", b"headers"]
    _aio_members[0].name = "offset"
    _aio_members[1].name = "timestamp"
    _aio_members[2].name = "timestamp_type"
    _aio_members[3].name = "key"
    _aio_members[4].name = "value"
    _aio_members[5].name = "headers"
    d = <dict> (<PyTypeObjectDict *> <PyObject *> AioDefaultRecord).tp_dict
    for i in range(6):
        want = <PyObject *> marks[i]
        found = 0
        o = sizeof(PyObject)
        while o + <Py_ssize_t> sizeof(PyObject *) <= size:
            if (<PyObject **> (base + o))[0] == want:
                found += 1
                _aio_members[i].offset = o
            o += sizeof(PyObject *)
        if found != 1:
            raise RuntimeError("AioDefaultRecord layout")
        _aio_members[i].type = T_OBJECT_EX
        _aio_members[i].flags = _READONLY
        d[names[i].decode()] = PyDescr_NewMember(<PyTypeObject *> <PyObject *> AioDefaultRecord, &_aio_members[i])
    PyType_Modified(<PyTypeObject *> <PyObject *> AioDefaultRecord)
    if r.offset is not marks[0] or r.headers is not marks[5]:
        raise RuntimeError("AioDefaultRecord members")


_install_members()


_ALIASES = []   # the PyMemberDef arrays and name bytes of slot_read_properties: they live forever


def slot_read_properties(cls, names):
    """Replace read-only properties that only return a slot (kafka-python's DefaultRecord:
    `offset` returns `self._offset`, ...) by read-only T_OBJECT_EX member descriptors for the
    same slot, on `cls` (a subclass with no slots of its own). CPython 3.11 specialises reading
    such a member to a slot load, where a property is a Python call. `names`: {property: slot}.
    The slot must be an object slot of a base class; reading an unset slot raises AttributeError,
    as the property would."""
    cdef PyMemberDef *defs = <PyMemberDef *> PyMem_Malloc(len(names) * sizeof(PyMemberDef))
    if defs == NULL:
        raise MemoryError()
    keep = [<object> <Py_ssize_t> defs]
    d = <dict> (<PyTypeObjectDict *> <PyObject *> cls).tp_dict
    for i, (prop, slot) in enumerate(names.items()):
        for k in cls.__mro__[1:]:
            if slot in k.__dict__:
                desc = k.__dict__[slot]
                break
        else:
            raise TypeError(f"{cls!r} has no slot {slot}")
        if type(desc) is not types.MemberDescriptorType or (<PyMemberDescrObject *> desc).d_member.type != T_OBJECT_EX:
            raise TypeError(f"{cls.__name__}.{slot} is not an object slot")
        name = prop.encode()
        keep.append(name)
        defs[i].name = name
        defs[i].type = T_OBJECT_EX
        defs[i].offset = (<PyMemberDescrObject *> desc).d_member.offset
        defs[i].flags = _READONLY
        d[prop] = PyDescr_NewMember(<PyTypeObject *> <PyObject *> cls, &defs[i])
    _ALIASES.append(keep)
    PyType_Modified(<PyTypeObject *> <PyObject *> cls)


# ---------------------------------------------------------------------------------- decoding
cdef inline int _varint(Cursor *c, int64_t *out) noexcept nogil:
    """The clients' decode_varint (64-bit zigzag, up to 10 bytes) through _core's cur_varlong;
    non-zero where the client would raise, or where its Python int would fall outside int64 (a 10th
    byte with bits past bit 0: Kafka's readVarlong drops them, the clients keep them)."""
    cdef Py_ssize_t start = c.pos
    if cur_varlong(c, out) != ST_OK:
        return -1
    if c.pos - start == 10 and (c.buf[start + 9] & 0x7E):
        return -1
    return 0


cdef inline bint _add_ok(int64_t a, int64_t b) noexcept nogil:
    if b > 0:
        return a <= INT64_MAX - b
    return a >= INT64_MIN - b


cdef struct _Ctx:
    const uint8_t *b
    Py_ssize_t pos
    Py_ssize_t end
    int64_t base_offset
    int64_t first_ts
    int64_t max_ts
    bint log_append


cdef object _read_one(_Ctx *c, int flavour, SlotFactory factory, object ts_type):
    """Decode the record at c.pos (advancing it); None, with c.pos unspecified, when the client's
    own reader must decide (errors, int64 overflow, undecodable header keys)."""
    cdef Cursor cur
    cdef const uint8_t *p
    cdef Py_ssize_t h
    cdef int64_t length, attrs, ts_delta, off_delta, klen, vlen, nh, hklen, hvlen, ts, off
    cdef list headers
    cdef object key, value, hkey, hval, rec
    cur_init(&cur, c.b, c.pos, c.end)
    if _varint(&cur, &length) or length < 0 or length > cur_left(&cur):
        return None
    cur.end = cur.pos + length  # from here the cursor reads only this record's bytes
    if _varint(&cur, &attrs) or _varint(&cur, &ts_delta) or _varint(&cur, &off_delta) or _varint(&cur, &klen):
        return None
    if c.log_append:
        ts = c.max_ts
    else:
        if not _add_ok(c.first_ts, ts_delta):
            return None
        ts = c.first_ts + ts_delta
    if not _add_ok(c.base_offset, off_delta):
        return None
    off = c.base_offset + off_delta
    key = None
    if klen >= 0:
        if cur_take(&cur, klen, &p):
            return None
        key = PyBytes_FromStringAndSize(<const char *> p, klen)
    if _varint(&cur, &vlen):
        return None
    value = None
    if vlen >= 0:
        if cur_take(&cur, vlen, &p):
            return None
        value = PyBytes_FromStringAndSize(<const char *> p, vlen)
    if _varint(&cur, &nh) or nh < 0 or nh > cur_left(&cur):
        return None
    headers = PyList_New(0)
    for h in range(nh):
        if _varint(&cur, &hklen) or hklen < 0 or cur_take(&cur, hklen, &p):
            return None
        try:
            hkey = PyUnicode_DecodeUTF8(<const char *> p, hklen, NULL)
        except UnicodeDecodeError:
            return None
        if _varint(&cur, &hvlen):
            return None
        hval = None
        if hvlen >= 0:
            if cur_take(&cur, hvlen, &p):
                return None
            hval = PyBytes_FromStringAndSize(<const char *> p, hvlen)
        headers.append((hkey, hval))
    if cur.pos != cur.end:
        return None
    c.pos = cur.pos
    cdef AioDefaultRecord arec
    if flavour == 2:
        arec = AioDefaultRecord.__new__(AioDefaultRecord)
        arec._offset = off
        arec._timestamp = ts
        arec._timestamp_type = ts_type
        arec._key = key
        arec._value = value
        arec._headers = headers
        return arec
    rec = factory.alloc()
    if flavour == 0:  # kafka-python: _size_in_bytes, _offset, _timestamp, _timestamp_type, _key, _value, _headers
        factory.put(rec, 0, length)
        factory.put(rec, 1, off)
        factory.put(rec, 2, ts)
        factory.put(rec, 3, ts_type)
        factory.put(rec, 4, key)
        factory.put(rec, 5, value)
        factory.put(rec, 6, headers)
    else:  # aiokafka: offset, timestamp, timestamp_type, key, value, headers
        factory.put(rec, 0, off)
        factory.put(rec, 1, ts)
        factory.put(rec, 2, ts_type)
        factory.put(rec, 3, key)
        factory.put(rec, 4, value)
        factory.put(rec, 5, headers)
    return rec


cdef class V2Records:
    """Iterator over the `count` records of an uncompressed v2 records section buf[pos:], decoded
    one at a time (so each record's objects are made while the bytes are hot, and freed records
    are reused by the next). At the first record the client's reader would not read exactly as
    here (or trailing bytes at the end), it calls fallback(k) with k = records already returned;
    that returns the client's own iterator positioned after those k records, and the rest comes
    from it (its records, its exception at the right record)."""
    cdef Py_buffer view
    cdef bint has_view
    cdef _Ctx c
    cdef Py_ssize_t count, index
    cdef int flavour
    cdef SlotFactory factory
    cdef object ts_type, fallback, fb
    cdef dict stats

    def __cinit__(self, buf, Py_ssize_t pos, Py_ssize_t count, int64_t base_offset, int64_t first_ts,
                  int64_t max_ts, bint log_append, int flavour, SlotFactory factory, object ts_type,
                  object fallback, dict stats=None):
        PyObject_GetBuffer(buf, &self.view, PyBUF_SIMPLE)
        self.has_view = True
        self.c.b = <const uint8_t *> self.view.buf
        self.c.end = self.view.len
        self.c.pos = pos
        self.c.base_offset = base_offset
        self.c.first_ts = first_ts
        self.c.max_ts = max_ts
        self.c.log_append = log_append
        self.count = count
        self.index = 0
        self.flavour = flavour
        self.factory = factory
        self.ts_type = ts_type
        self.fallback = fallback
        self.stats = stats
        if count < 0 or pos < 0 or pos > self.c.end:
            self.count = 0
            self.c.pos = -1  # never equals end: falls back at once

    def __dealloc__(self):
        if self.has_view:
            PyBuffer_Release(&self.view)

    def __iter__(self):
        return self

    def __next__(self):
        if self.fb is not None:
            return next(self.fb)
        if self.index < self.count:
            rec = _read_one(&self.c, self.flavour, self.factory, self.ts_type)
            if rec is not None:
                self.index += 1
                return rec
        elif self.c.pos == self.c.end:
            if self.stats is not None:  # counted once, when the batch is done
                self.stats["decoded_batches"] += 1
                self.stats["decoded_records"] += self.index
                self.stats = None
            raise StopIteration
        if self.stats is not None:
            self.stats["decoded_records"] += self.index
            self.stats = None
        self.fb = self.fallback(self.index)
        return next(self.fb)

    @property
    def done(self):
        """Records returned so far, and whether the client's reader took over."""
        return self.index, self.fb is not None


def decode_v2(buf, Py_ssize_t pos, Py_ssize_t count, int64_t base_offset, int64_t first_ts, int64_t max_ts,
              bint log_append, int flavour, SlotFactory factory, object ts_type=0):
    """Eager form of V2Records: the list of all `count` records, or None when the client's own
    reader must decide any of them."""
    cdef Py_buffer view
    cdef _Ctx c
    cdef list out = []
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        c.b = <const uint8_t *> view.buf
        c.end = view.len
        c.pos = pos
        c.base_offset = base_offset
        c.first_ts = first_ts
        c.max_ts = max_ts
        c.log_append = log_append
        if count < 0 or pos < 0 or pos > c.end:
            return None
        for i in range(count):
            rec = _read_one(&c, flavour, factory, ts_type)
            if rec is None:
                return None
            out.append(rec)
        if c.pos != c.end:
            return None
        return out
    finally:
        PyBuffer_Release(&view)


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


# ---------------------------------------------------------------------------------- aiokafka builder
cdef extern from "../_crc32c.h" nogil:
    void kb_crc32c_init()
    uint32_t kb_crc32c(uint32_t value, const uint8_t *p, size_t n)

kb_crc32c_init()

cdef extern from "Python.h":
    ctypedef struct PyNumberMethods:
        void *nb_int
    ctypedef struct PyTypeObjectNum "PyTypeObject":
        PyNumberMethods *tp_as_number
        Py_ssize_t tp_basicsize
    ctypedef PyObject *(*newfunc)(PyTypeObject *, PyObject *, PyObject *)
    ctypedef struct PyTypeObjectNew "PyTypeObject":
        newfunc tp_new
    long long PyLong_AsLongLong(object) except? -1
    long PyLong_AsLong(object) except? -1
    object PyByteArray_FromStringAndSize(const char *, Py_ssize_t)

cdef enum:
    _FIRST_RECORD_OFFSET = 61
    _ATTRIBUTES_OFFSET = 21
    _CRC_OFFSET = 17
    _TRANSACTIONAL_MASK = 0x10


cdef int64_t _as_i64(object v) except? -1:
    cdef PyNumberMethods *nm
    """How aiokafka's compiled builder converts an int64 argument: ints (OverflowError past int64)
    and anything with __int__ (floats truncate); otherwise TypeError."""
    if type(v) is not int:
        nm = (<PyTypeObjectNum *> Py_TYPE(v)).tp_as_number
        if nm == NULL or nm.nb_int == NULL:
            raise TypeError("an integer is required")
        v = type(v).__int__(v)
    if sizeof(long) >= 8:  # as the compiled builder: "Python int too large to convert to C long"
        return PyLong_AsLong(v)
    return PyLong_AsLongLong(v)


cdef class MetaMaker:
    """Makes instances of a compiled class with three int64-sized C fields (aiokafka's
    DefaultRecordMetadata: offset, size, timestamp) without a Python call: the field offsets are
    found once by probing an instance made with distinct values; if that fails, the class is called."""
    cdef object cls
    cdef object empty
    cdef Py_ssize_t offs[3]
    cdef bint direct

    def __init__(self, cls):
        cdef int64_t probe[3]
        cdef Py_ssize_t i, o, size
        cdef int found
        self.cls = cls
        self.empty = ()
        self.direct = False
        probe[0] = 0x0123456789ab01
        probe[1] = 0x0123456789ab02
        probe[2] = 0x0123456789ab03
        if not isinstance(cls, type) or hasattr(cls, "__dict__") and "__slots__" in cls.__dict__:
            return
        try:
            obj = cls(probe[0], probe[1], probe[2])
            if (obj.offset, obj.size, obj.timestamp) != (probe[0], probe[1], probe[2]):
                return
        except Exception:
            return
        size = (<PyTypeObjectNum *> <PyObject *> cls).tp_basicsize
        for i in range(3):
            found = 0
            o = sizeof(PyObject)
            while o + 8 <= size:
                if memcmp((<char *> <PyObject *> obj) + o, &probe[i], 8) == 0:
                    found += 1
                    self.offs[i] = o
                o += 8
            if found != 1:
                return
        self.direct = True
        # check that a made object reads back right
        m = self.make(5, 6, 7)
        if type(m) is not cls or (m.offset, m.size, m.timestamp) != (5, 6, 7):
            self.direct = False

    cdef inline object make(self, int64_t offset, int64_t size, int64_t timestamp):
        if not self.direct:
            return self.cls(offset, size, timestamp)
        cdef PyObject *r = (<PyTypeObjectNew *> <PyObject *> self.cls).tp_new(
            <PyTypeObject *> <PyObject *> self.cls, <PyObject *> self.empty, NULL)
        if r == NULL:
            raise MemoryError()
        cdef object o = <object> r
        Py_DECREF(o)
        cdef char *p = <char *> r
        memcpy(p + self.offs[0], &offset, 8)
        memcpy(p + self.offs[1], &size, 8)
        memcpy(p + self.offs[2], &timestamp, 8)
        return o

    def __call__(self, offset, size, timestamp):
        return self.make(offset, size, timestamp)


cdef object _aio_meta = None      # MetaMaker for aiokafka's live DefaultRecordMetadata
cdef object _aio_compress = None  # callable(compression_type, bytes) -> compressed bytes (raises its errors)
cdef object _aio_now_ms = None    # callable() -> int, the time in ms for timestamp=None
cdef dict _aio_stats = None       # kbatch.compat.STATS


def setup_aiokafka(meta_cls, compress, now_ms, dict stats):
    """Called once by kbatch.compat.aiokafka: aiokafka's metadata class, its codec step, its clock,
    and the spy counters (built records are counted when their batch is built)."""
    global _aio_meta, _aio_compress, _aio_now_ms, _aio_stats
    _aio_meta = MetaMaker(meta_cls)
    _aio_compress = compress
    _aio_now_ms = now_ms
    _aio_stats = stats


cdef inline void _be16(uint8_t *p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t> (v >> 8)
    p[1] = <uint8_t> v


cdef inline void _be32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t> (v >> 24)
    p[1] = <uint8_t> (v >> 16)
    p[2] = <uint8_t> (v >> 8)
    p[3] = <uint8_t> v


cdef inline void _be64(uint8_t *p, uint64_t v) noexcept nogil:
    _be32(p, <uint32_t> (v >> 32))
    _be32(p + 4, <uint32_t> v)


cdef Py_ssize_t _aio_size_of(object key, object value, list headers, list hkeys) except -1:
    """aiokafka's _size_of (key, value, headers; same type checks in the same order); the UTF-8
    header keys are appended to hkeys when it is not None."""
    cdef Py_buffer pb
    cdef Py_ssize_t size = 0, n
    cdef tuple header
    cdef str h_key
    cdef bytes h_value
    if key is None:
        size += 1
    else:
        PyObject_GetBuffer(key, &pb, PyBUF_SIMPLE)
        n = pb.len
        PyBuffer_Release(&pb)
        size += _size_varint(n) + n
    if value is None:
        size += 1
    else:
        PyObject_GetBuffer(value, &pb, PyBUF_SIMPLE)
        n = pb.len
        PyBuffer_Release(&pb)
        size += _size_varint(n) + n
    size += _size_varint(len(headers))
    for header in headers:
        h_key, h_value = header
        ek = h_key.encode("utf-8")
        if hkeys is not None:
            hkeys.append(ek)
        n = len(<bytes> ek)
        size += _size_varint(n) + n
        if h_value is None:
            size += 1
        else:
            n = len(h_value)
            size += _size_varint(n) + n
    return size


cdef class AioRecordBatchBuilder:
    """aiokafka's compiled DefaultRecordBatchBuilder (magic 2), with its argument types and quirks:
    a record is refused when offset != 0 and it would take the batch to batch_size bytes or more;
    a first timestamp of -1 counts as "no record yet"; the last offset delta is kept as int32; the
    batch is always sent compressed when a codec is set; build() returns the same bytearray."""
    cdef char _magic
    cdef char _compression_type
    cdef char _is_transactional
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef Py_ssize_t _batch_size
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _cap
    cdef uint8_t *_buf
    cdef int64_t _first_timestamp
    cdef int64_t _max_timestamp
    cdef int32_t _last_offset
    cdef int32_t _num_records
    cdef int32_t _counted
    cdef object _buffer
    cdef MetaMaker _meta

    def __cinit__(self, char magic, char compression_type, char is_transactional, int64_t producer_id,
                  int16_t producer_epoch, int32_t base_sequence, Py_ssize_t batch_size):
        assert magic >= 2
        self._magic = magic
        self._compression_type = compression_type & 0x07
        self._batch_size = batch_size
        self._is_transactional = is_transactional
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self._first_timestamp = -1
        self._max_timestamp = -1
        self._last_offset = 0
        self._num_records = 0
        self._cap = 1024
        self._buf = <uint8_t *> PyMem_Malloc(self._cap)
        if self._buf == NULL:
            raise MemoryError()
        memset(self._buf, 0, _FIRST_RECORD_OFFSET)
        self._pos = _FIRST_RECORD_OFFSET
        self._meta = _aio_meta

    def __dealloc__(self):
        PyMem_Free(self._buf)

    cdef int _reserve(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = self._cap
        cdef uint8_t *nb
        if need <= cap:
            return 0
        while cap < need:
            cap *= 2
        nb = <uint8_t *> PyMem_Realloc(self._buf, cap)
        if nb == NULL:
            raise MemoryError()
        self._buf = nb
        self._cap = cap
        return 0

    def set_producer_state(self, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def append(self, offset, timestamp, key, value, headers):
        """Write one record; aiokafka's DefaultRecordMetadata, or None when the batch is full."""
        cdef int64_t off = _as_i64(offset)
        if headers is not None and type(headers) is not list:  # checked there after offset, before timestamp
            raise TypeError(f"Argument 'headers' has incorrect type (expected list, got {type(headers).__name__})")
        cdef list hl = headers
        cdef int64_t ts, delta
        cdef Py_ssize_t body, size, pos, nh, h, n
        cdef Py_buffer kb, vb
        cdef bint has_k = False, has_v = False
        cdef list hkeys = None
        cdef uint8_t *out
        cdef object hv
        if timestamp is None:
            ts = _aio_now_ms()
        else:
            ts = _as_i64(timestamp)
        if self._first_timestamp != -1:
            delta = <int64_t> (<uint64_t> ts - <uint64_t> self._first_timestamp)
        else:
            delta = 0
        try:
            body = 1 + _size_varint(off) + _size_varint(delta)
            if key is None:
                body += 1
            else:
                PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE)
                has_k = True
                body += _size_varint(kb.len) + kb.len
            if value is None:
                body += 1
            else:
                PyObject_GetBuffer(value, &vb, PyBUF_SIMPLE)
                has_v = True
                body += _size_varint(vb.len) + vb.len
            nh = len(hl)
            if nh:
                hkeys = []
                body += _aio_size_of(None, None, hl, hkeys) - 2
            else:
                body += 1
            size = body + _size_varint(body)
            pos = self._pos
            if off != 0 and pos + size >= self._batch_size:
                return None
            self._reserve(pos + size)
            if self._first_timestamp == -1:
                self._first_timestamp = ts
                self._max_timestamp = ts
            out = self._buf + pos
            pos = _put_varint(out, body)
            out[pos] = 0
            pos += 1
            pos += _put_varint(out + pos, delta)
            pos += _put_varint(out + pos, off)
            if has_k:
                pos += _put_varint(out + pos, kb.len)
                memcpy(out + pos, kb.buf, kb.len)
                pos += kb.len
            else:
                out[pos] = 1
                pos += 1
            if has_v:
                pos += _put_varint(out + pos, vb.len)
                memcpy(out + pos, vb.buf, vb.len)
                pos += vb.len
            else:
                out[pos] = 1
                pos += 1
            pos += _put_varint(out + pos, nh)
            for h in range(nh):
                ek = hkeys[h]
                n = len(<bytes> ek)
                pos += _put_varint(out + pos, n)
                memcpy(out + pos, <const char *> ek, n)
                pos += n
                hv = (<tuple> hl[h])[1]
                if hv is None:
                    out[pos] = 1
                    pos += 1
                else:
                    n = len(<bytes> hv)
                    pos += _put_varint(out + pos, n)
                    memcpy(out + pos, <const char *> hv, n)
                    pos += n
        finally:
            if has_k:
                PyBuffer_Release(&kb)
            if has_v:
                PyBuffer_Release(&vb)
        if self._max_timestamp < ts:
            self._max_timestamp = ts
        self._num_records += 1
        self._last_offset = <int32_t> off
        self._pos += size
        if self._meta is not None:
            return self._meta.make(off, size, ts)
        return _aio_meta(off, size, ts)

    cdef int _maybe_compress(self) except -1:
        if self._compression_type == 0:
            return 0
        data = PyBytes_FromStringAndSize(<const char *> self._buf + _FIRST_RECORD_OFFSET,
                                         self._pos - _FIRST_RECORD_OFFSET)
        compressed = _aio_compress(self._compression_type, data)
        cdef const uint8_t[::1] cv = compressed
        cdef Py_ssize_t n = cv.shape[0]
        self._reserve(_FIRST_RECORD_OFFSET + n)
        if n:
            memcpy(self._buf + _FIRST_RECORD_OFFSET, &cv[0], n)
        self._pos = _FIRST_RECORD_OFFSET + n
        return 1

    def build(self):
        cdef int send_compressed = self._maybe_compress()
        cdef uint8_t *buf = self._buf
        cdef int16_t attrs = self._compression_type if send_compressed else 0
        if self._is_transactional:
            attrs |= _TRANSACTIONAL_MASK
        _be64(buf, 0)
        _be32(buf + 8, <uint32_t> <int32_t> (self._pos - 12))
        _be32(buf + 12, <uint32_t> -1)
        buf[16] = <uint8_t> self._magic
        _be16(buf + _ATTRIBUTES_OFFSET, <uint16_t> attrs)
        _be32(buf + 23, <uint32_t> self._last_offset)
        _be64(buf + 27, <uint64_t> self._first_timestamp)
        _be64(buf + 35, <uint64_t> self._max_timestamp)
        _be64(buf + 43, <uint64_t> self.producer_id)
        _be16(buf + 51, <uint16_t> self.producer_epoch)
        _be32(buf + 53, <uint32_t> self.base_sequence)
        _be32(buf + 57, <uint32_t> self._num_records)
        _be32(buf + _CRC_OFFSET, kb_crc32c(0, buf + _ATTRIBUTES_OFFSET, <size_t> (self._pos - _ATTRIBUTES_OFFSET)))
        if _aio_stats is not None:
            _aio_stats["built_batches"] += 1
            _aio_stats["built_records"] += self._num_records - self._counted
            self._counted = self._num_records
        if self._buffer is None:
            self._buffer = PyByteArray_FromStringAndSize(<const char *> buf, self._pos)
        else:
            PyByteArray_Resize(self._buffer, self._pos)
            memcpy(PyByteArray_AS_STRING(self._buffer), buf, self._pos)
        return self._buffer

    def size(self):
        """Bytes written so far (header included)."""
        return self._pos

    def size_in_bytes(self, offset, timestamp, key, value, headers):
        cdef int64_t off = _as_i64(offset)
        cdef int64_t ts = _as_i64(timestamp)
        cdef list hl = headers
        cdef int64_t delta = 0
        if self._first_timestamp != -1:
            delta = <int64_t> (<uint64_t> ts - <uint64_t> self._first_timestamp)
        cdef Py_ssize_t body = 1 + _size_varint(off) + _size_varint(delta) + _aio_size_of(key, value, hl, None)
        return body + _size_varint(body)

    @classmethod
    def size_of(cls, key, value, headers):
        cdef list hl = headers
        return _aio_size_of(key, value, hl, None)

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        """Upper bound of a record's size (header of a one-record batch included)."""
        cdef list hl = headers
        return _FIRST_RECORD_OFFSET + 21 + _aio_size_of(key, value, hl, None)
