# ------------------------------------------------------------------------------------ grep
# Included from _core.pyx (kbatch grep's search). The pure twin is kbatch._core_py.grep_records_v2
# (in _core_py), the spec: same arguments, results and exceptions.
#
# One records section (a v2 batch's records, decompressed) is searched in two steps: memmem over
# the whole section finds whether, and where, the needle occurs at all; the walk over the
# records' varints then looks inside the fields (key, value, header values) only of the records
# whose bytes hold the next occurrence, so an occurrence across two fields or inside a length
# varint never counts. The walk checks every record as decode_records_v2 does (a section that is
# not sound is an error whether or not the needle is in it, as it is for `kbatch cat`); on a
# problem decode_records_v2 itself raises the error, so both give the same one.
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdlib cimport free, realloc

cdef extern from "_grep.h" nogil:
    Py_ssize_t kb_find(const uint8_t *hay, Py_ssize_t n, const uint8_t *needle, Py_ssize_t m)

cdef enum:
    _GREP_KEY = 1
    _GREP_VALUE = 2
    _GREP_HEADERS = 4
    _GREP_NAMED_HEADERS = 8

GREP_KEY = _GREP_KEY
GREP_VALUE = _GREP_VALUE
GREP_HEADERS = _GREP_HEADERS
GREP_NAMED_HEADERS = _GREP_NAMED_HEADERS

for _name in ("GREP_KEY", "GREP_VALUE", "GREP_HEADERS", "GREP_NAMED_HEADERS"):
    if getattr(_py, _name) != globals()[_name]:
        raise ImportError(f"kbatch._core was built with {_name} = {globals()[_name]}, _core_py.py says "
                          f"{getattr(_py, _name)}; rebuild the extension")


ctypedef struct _GrepOut:
    int32_t *rows
    Py_ssize_t n
    Py_ssize_t cap


cdef inline bint _grep_in(const uint8_t *p, Py_ssize_t n, const uint8_t *needle, Py_ssize_t m) noexcept nogil:
    return n >= m and kb_find(p, n, needle, m) >= 0


cdef inline bint _grep_named(const uint8_t *k, Py_ssize_t klen, const uint8_t **names, const Py_ssize_t *lens,
                             Py_ssize_t n_names) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n_names):
        if lens[j] == klen and memcmp(names[j], k, klen) == 0:
            return True
    return False


cdef int _grep_v2(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                  const uint8_t *needle, Py_ssize_t m, int fields, const uint8_t **names,
                  const Py_ssize_t *name_lens, Py_ssize_t n_names, _GrepOut *out) noexcept nogil:
    """ST_OK with the matching rows in `out`, or the first problem's status (-1: out of memory).
    Bounds: 0 <= start <= end <= len(buf), checked by the caller."""
    cdef Cursor c, r
    cdef Py_ssize_t i, rec_end, hit
    cdef int32_t length = 0, n = 0, n_headers = 0, h, klen = 0
    cdef int64_t ts_delta = 0
    cdef uint8_t attributes = 0
    cdef const uint8_t *kp = NULL
    cdef bint look, found
    cdef int32_t *grown
    cdef int st
    hit = kb_find(buf + start, end - start, needle, m)
    if hit >= 0:
        hit += start
    cur_init(&c, buf, start, end)
    for i in range(count):
        if c.pos >= end:
            return ST_PREMATURE_EOF
        st = cur_varint(&c, &length)
        if st != ST_OK:
            return st
        if length < 0 or length > cur_left(&c):
            return ST_RECORD_TOO_LONG
        rec_end = c.pos + length
        cur_init(&r, buf, c.pos, rec_end)
        c.pos = rec_end
        # the first occurrence at or after this record's start lies wholly inside it: look in its fields
        look = 0 <= hit and hit + m <= rec_end
        found = False
        if cur_u8(&r, &attributes) != ST_OK:
            return ST_FIELD_PAST_END
        st = cur_varlong(&r, &ts_delta)
        if st != ST_OK:
            return st
        st = cur_varint(&r, &n)     # offsetDelta
        if st != ST_OK:
            return st
        st = cur_varint(&r, &n)     # key
        if st != ST_OK:
            return st
        if n >= 0:
            if n > cur_left(&r):
                return ST_FIELD_PAST_END
            if look and fields & _GREP_KEY:
                found = _grep_in(buf + r.pos, n, needle, m)
            r.pos += n
        st = cur_varint(&r, &n)     # value
        if st != ST_OK:
            return st
        if n >= 0:
            if n > cur_left(&r):
                return ST_FIELD_PAST_END
            if look and not found and fields & _GREP_VALUE:
                found = _grep_in(buf + r.pos, n, needle, m)
            r.pos += n
        st = cur_varint(&r, &n_headers)
        if st != ST_OK:
            return st
        if n_headers < 0:
            return ST_NEG_HEADER_COUNT
        if n_headers > cur_left(&r):
            return ST_HEADER_COUNT_TOO_LARGE
        for h in range(n_headers):
            st = cur_varint(&r, &klen)
            if st != ST_OK:
                return st
            if klen < 0:
                return ST_NEG_HEADER_KEY
            if cur_take(&r, klen, &kp) != ST_OK:
                return ST_FIELD_PAST_END
            st = cur_varint(&r, &n)
            if st != ST_OK:
                return st
            if n >= 0:
                if n > cur_left(&r):
                    return ST_FIELD_PAST_END
                if (look and not found and (fields & _GREP_HEADERS or (
                        fields & _GREP_NAMED_HEADERS and _grep_named(kp, klen, names, name_lens, n_names)))):
                    found = _grep_in(buf + r.pos, n, needle, m)
                r.pos += n
        if r.pos != r.end:
            return ST_RECORD_SIZE
        if found:
            if out.n == out.cap:
                out.cap = 16 if out.cap == 0 else 2 * out.cap
                grown = <int32_t *>realloc(out.rows, out.cap * sizeof(int32_t))
                if grown == NULL:
                    return -1
                out.rows = grown
            out.rows[out.n] = <int32_t>i
            out.n += 1
        if 0 <= hit < rec_end:  # used up: the next occurrence from the next record on
            hit = kb_find(buf + rec_end, end - rec_end, needle, m)
            if hit >= 0:
                hit += rec_end
    if c.pos != end:
        return ST_RECORDS_REMAINING
    return ST_OK


def grep_records_v2(data, start, end, count, base_offset, needle, fields, header_names=()):
    """The rows (0-based record indexes) of the `count` v2 records in data[start:end] that hold
    `needle` inside a selected field: fields is a mask of GREP_KEY, GREP_VALUE, GREP_HEADERS
    (every header's value) and GREP_NAMED_HEADERS (the values of headers whose key is one of
    `header_names`, bytes). Null fields hold nothing. The section is checked as
    decode_records_v2 checks it, with its errors."""
    cdef Py_ssize_t s, e, n, m, k, n_names
    cdef Py_buffer pb
    cdef const uint8_t *np_ = NULL
    cdef const uint8_t **names = NULL
    cdef Py_ssize_t *lens = NULL
    cdef _GrepOut out
    cdef int st, f
    mv = _view(data)
    pat = bytes(needle)
    keep = [bytes(x) for x in header_names]
    if not pat:
        raise ValueError("grep_records_v2: the needle is empty (it would match every field)")
    try:
        n_obj = PyNumber_Index(count)
    except TypeError:
        return _py.grep_records_v2(data, start, end, count, base_offset, needle, fields, header_names)
    if (not _index_arg(start, &s) or not _index_arg(end, &e) or s > e or e > len(mv) or n_obj < 0
            or not (PyLong_Check(base_offset) or hasattr(base_offset, "__index__"))):
        return _py.grep_records_v2(data, start, end, count, base_offset, needle, fields, header_names)
    f = PyNumber_Index(fields) & 0xF
    n = n_obj if n_obj <= e + 1 else e + 1  # as decode_records_v2: a larger count fails before the loop gets there
    m = len(pat)
    n_names = len(keep)
    if n_names:
        names = <const uint8_t **>PyMem_Malloc(n_names * sizeof(uint8_t *))
        lens = <Py_ssize_t *>PyMem_Malloc(n_names * sizeof(Py_ssize_t))
        if names == NULL or lens == NULL:
            PyMem_Free(names)
            PyMem_Free(lens)
            raise MemoryError()
        for k in range(n_names):
            names[k] = <const uint8_t *><const char *>keep[k]
            lens[k] = len(keep[k])
    out.rows = NULL
    out.n = out.cap = 0
    np_ = <const uint8_t *><const char *>pat
    view = mv.toreadonly()
    PyObject_GetBuffer(view, &pb, PyBUF_SIMPLE)
    try:
        with nogil:
            st = _grep_v2(<const uint8_t *>pb.buf, s, e, n, np_, m, f, names, lens, n_names, &out)
        if st == -1:
            raise MemoryError()
        if st != ST_OK:
            # the same error as decode_records_v2 for this section: it makes it
            decode_records_v2(view, s, e, count, base_offset, 0, None, 0, False)
            raise RuntimeError(f"grep_records_v2 found status {st} where decode_records_v2 found none")
        return [out.rows[k] for k in range(out.n)]
    finally:
        PyBuffer_Release(&pb)
        free(out.rows)
        PyMem_Free(names)
        PyMem_Free(lens)


def grep_sections_v2(data, starts, ends, counts, base_offsets, needle, fields, header_names=()):
    """grep_records_v2 over many records sections of one buffer (a scan window's uncompressed v2
    batches: data[starts[k]:ends[k]], counts[k] records, base_offsets[k]), in one call: [(k, rows)]
    for the sections that hold a match, in order. The first section that is not sound raises its
    error (decode_records_v2's), after nothing: callers read the sections before it again."""
    cdef Py_ssize_t n_names, k, i, n, m, nk
    cdef Py_buffer pb
    cdef const uint8_t *np_ = NULL
    cdef const uint8_t **names = NULL
    cdef Py_ssize_t *lens = NULL
    cdef _GrepOut out
    cdef int st = ST_OK, f
    cdef const int64_t[::1] s_, e_, c_
    mv = _view(data)
    pat = bytes(needle)
    keep = [bytes(x) for x in header_names]
    if not pat:
        raise ValueError("grep_sections_v2: the needle is empty (it would match every field)")
    s_ = np.ascontiguousarray(starts, dtype=np.int64)
    e_ = np.ascontiguousarray(ends, dtype=np.int64)
    c_ = np.ascontiguousarray(counts, dtype=np.int64)
    bases = np.ascontiguousarray(base_offsets, dtype=np.int64)
    nk = s_.shape[0]
    if e_.shape[0] != nk or c_.shape[0] != nk or bases.shape[0] != nk:
        raise ValueError("grep_sections_v2: starts, ends, counts and base_offsets differ in length")
    for k in range(nk):
        if s_[k] < 0 or s_[k] > e_[k] or e_[k] > len(mv) or c_[k] < 0:
            # outside the C path's domain: the pure twin says what is wrong
            return _py.grep_sections_v2(data, starts, ends, counts, base_offsets, needle, fields, header_names)
    f = PyNumber_Index(fields) & 0xF
    m = len(pat)
    n_names = len(keep)
    if n_names:
        names = <const uint8_t **>PyMem_Malloc(n_names * sizeof(uint8_t *))
        lens = <Py_ssize_t *>PyMem_Malloc(n_names * sizeof(Py_ssize_t))
        if names == NULL or lens == NULL:
            PyMem_Free(names)
            PyMem_Free(lens)
            raise MemoryError()
        for i in range(n_names):
            names[i] = <const uint8_t *><const char *>keep[i]
            lens[i] = len(keep[i])
    out.rows = NULL
    out.n = out.cap = 0
    np_ = <const uint8_t *><const char *>pat
    found = []
    view = mv.toreadonly()
    PyObject_GetBuffer(view, &pb, PyBUF_SIMPLE)
    try:
        for k in range(nk):
            n = c_[k] if c_[k] <= e_[k] + 1 else e_[k] + 1
            out.n = 0
            with nogil:
                st = _grep_v2(<const uint8_t *>pb.buf, s_[k], e_[k], n, np_, m, f, names, lens, n_names, &out)
            if st == -1:
                raise MemoryError()
            if st != ST_OK:
                decode_records_v2(view, s_[k], e_[k], int(c_[k]), int(bases[k]), 0, None, 0, False)
                raise RuntimeError(f"grep_sections_v2 found status {st} where decode_records_v2 found none")
            if out.n:
                found.append((k, [out.rows[i] for i in range(out.n)]))
        return found
    finally:
        PyBuffer_Release(&pb)
        free(out.rows)
        PyMem_Free(names)
        PyMem_Free(lens)
