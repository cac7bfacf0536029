# The pieces both value kernels (_avro_kernel, _protobuf_kernel) hand their columns to Arrow with:
# the UTF-8 check of string columns and the buffer that gives a malloc'd block to Arrow without a
# copy, its memory returned to _avro_buffers.h's pool of kept blocks when Arrow lets go of it.
# Included (`include "_arrow_buffers.pxi"`) by each after its `cdef extern from "_avro_buffers.h"`.


# ------------------------------------------------------------------------------------ UTF-8
cdef int utf8_valid(const uint8_t* s, int64_t n) noexcept nogil:
    """Is s[:n] UTF-8 (no overlongs, surrogates or code points past U+10FFFF)? 0: no, 1: yes and
    ASCII only, 2: yes with other characters."""
    cdef int64_t i = 0
    cdef uint64_t w
    cdef uint8_t b, b1
    cdef int k, j
    cdef uint64_t w1, w2, w3
    cdef int wide = 0
    while i < n:
        if i + 32 <= n:  # ASCII runs 32 bytes a step
            memcpy(&w, s + i, 8)
            memcpy(&w1, s + i + 8, 8)
            memcpy(&w2, s + i + 16, 8)
            memcpy(&w3, s + i + 24, 8)
            if not ((w | w1 | w2 | w3) & 0x8080808080808080ULL):
                i += 32
                continue
        if i + 8 <= n:
            memcpy(&w, s + i, 8)
            if not (w & 0x8080808080808080ULL):
                i += 8
                continue
        b = s[i]
        if b < 0x80:
            i += 1
            continue
        wide = 1
        if b < 0xC2:
            return False
        if b < 0xE0:
            k = 1
        elif b < 0xF0:
            k = 2
        elif b < 0xF5:
            k = 3
        else:
            return False
        if i + k >= n:
            return False
        b1 = s[i + 1]
        if (b1 & 0xC0) != 0x80:
            return False
        if b == 0xE0 and b1 < 0xA0:
            return False
        if b == 0xED and b1 > 0x9F:
            return False
        if b == 0xF0 and b1 < 0x90:
            return False
        if b == 0xF4 and b1 > 0x8F:
            return False
        for j in range(2, k + 1):
            if (s[i + j] & 0xC0) != 0x80:
                return False
        i += k + 1
    return 2 if wide else 1


# ------------------------------------------------------------------------------------ the columns
cdef class _Mem:
    """A malloc'd buffer Arrow reads without a copy (pa.py_buffer keeps this alive)."""
    cdef char* p
    cdef Py_ssize_t n
    cdef int64_t cap
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __dealloc__(self):
        release(self.p, self.cap)

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.n
        self.strides[0] = 1
        view.buf = self.p
        view.obj = self
        view.len = self.n
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef object take(Buf* b):
    """The buffer as an Arrow buffer, its memory handed over (b is empty after)."""
    import pyarrow as pa
    cdef _Mem m = _Mem()
    if b.n == 0:
        release(b.p, b.cap)
        b.p = NULL
        b.cap = 0
        return pa.py_buffer(b"")
    m.p = b.p
    m.n = b.n
    m.cap = b.cap
    b.p = NULL
    b.n = 0
    b.cap = 0
    return pa.py_buffer(m)
