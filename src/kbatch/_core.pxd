# cython: language_level=3
"""Bounds-checked read cursor for kbatch._core's parsers (after asyncpg's pgproto/frb.pxd).

Every byte the parsers read goes through a `Cursor`: a pointer to the start of the buffer, the
next position, and the end this cursor may not read past (the buffer, a batch, a records
section or one record). Positions are absolute indexes into the buffer, as in the pure twin, so
an error position is the same number on both backends.

Each read returns a status (ST_OK or an ST_* code equal to errors.ST_*) instead of raising, so the
functions run without the GIL; on failure `c.err_pos` holds the byte position to report and the
cursor does not move. Big-endian integers are assembled with shifts, never with pointer casts.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# Kernel status codes: the same numbers as kbatch.errors.ST_* (checked when _core is imported).
cdef enum:
    ST_OK = 0
    ST_TRUNCATED = 1
    ST_VARINT_TOO_LONG = 2
    ST_VARLONG_TOO_LONG = 3
    ST_RECORD_SIZE = 4
    ST_NEG_HEADER_KEY = 5
    ST_NEG_HEADER_COUNT = 6
    ST_RECORDS_REMAINING = 7
    ST_PREMATURE_EOF = 8
    ST_CRC = 9
    ST_BATCH_TOO_SMALL = 10
    ST_BAD_MAGIC = 11
    ST_BAD_COUNT = 12
    ST_RECORD_TOO_LONG = 13
    ST_FIELD_PAST_END = 14
    ST_HEADER_COUNT_TOO_LARGE = 15


ctypedef struct Cursor:
    const uint8_t *buf    # byte 0 of the buffer; positions are indexes from here
    Py_ssize_t pos        # next byte to read
    Py_ssize_t end        # first byte this cursor may not read
    Py_ssize_t err_pos    # where the last failed read failed


cdef inline void cur_init(Cursor *c, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    c.buf = buf
    c.pos = pos
    c.end = end
    c.err_pos = -1


cdef inline Py_ssize_t cur_left(const Cursor *c) noexcept nogil:
    """Bytes left before the cursor's end (negative when pos was set past it)."""
    return c.end - c.pos


cdef inline int cur_truncated(Cursor *c, Py_ssize_t at) noexcept nogil:
    # The first byte that is missing: `at` itself when it already lies past the end.
    c.err_pos = at if at > c.end else c.end
    return ST_TRUNCATED


cdef inline int cur_need(Cursor *c, Py_ssize_t n) noexcept nogil:
    """ST_OK when n more bytes can be read; ST_TRUNCATED (at the first missing byte) otherwise."""
    if n < 0 or n > c.end - c.pos:
        return cur_truncated(c, c.pos)
    return ST_OK


cdef inline int cur_skip(Cursor *c, Py_ssize_t n) noexcept nogil:
    if cur_need(c, n):
        return ST_TRUNCATED
    c.pos += n
    return ST_OK


cdef inline int cur_take(Cursor *c, Py_ssize_t n, const uint8_t **out) noexcept nogil:
    """Point *out at the next n bytes and move past them."""
    if cur_need(c, n):
        return ST_TRUNCATED
    out[0] = c.buf + c.pos
    c.pos += n
    return ST_OK


cdef inline int cur_u8(Cursor *c, uint8_t *out) noexcept nogil:
    if c.pos >= c.end:
        return cur_truncated(c, c.pos)
    out[0] = c.buf[c.pos]
    c.pos += 1
    return ST_OK


cdef inline uint16_t _be16(const uint8_t *p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline uint32_t _be32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline uint64_t _be64(const uint8_t *p) noexcept nogil:
    return (<uint64_t>_be32(p) << 32) | <uint64_t>_be32(p + 4)


cdef inline int cur_be16(Cursor *c, uint16_t *out) noexcept nogil:
    if cur_need(c, 2):
        return ST_TRUNCATED
    out[0] = _be16(c.buf + c.pos)
    c.pos += 2
    return ST_OK


cdef inline int cur_be32(Cursor *c, uint32_t *out) noexcept nogil:
    if cur_need(c, 4):
        return ST_TRUNCATED
    out[0] = _be32(c.buf + c.pos)
    c.pos += 4
    return ST_OK


cdef inline int cur_be64(Cursor *c, uint64_t *out) noexcept nogil:
    if cur_need(c, 8):
        return ST_TRUNCATED
    out[0] = _be64(c.buf + c.pos)
    c.pos += 8
    return ST_OK


cdef inline int cur_peek_be32(Cursor *c, Py_ssize_t at, uint32_t *out) noexcept nogil:
    """Big-endian uint32 at absolute position `at`, without moving the cursor (random access)."""
    if at < 0 or at > c.end - 4:
        return cur_truncated(c, at)
    out[0] = _be32(c.buf + at)
    return ST_OK


cdef inline int cur_peek_be64(Cursor *c, Py_ssize_t at, uint64_t *out) noexcept nogil:
    if at < 0 or at > c.end - 8:
        return cur_truncated(c, at)
    out[0] = _be64(c.buf + at)
    return ST_OK


cdef inline int cur_varint(Cursor *c, int32_t *out) noexcept nogil:
    """Zigzag varint (int32) as Kafka's ByteUtils.readVarint: at most 5 bytes, non-minimal
    encodings accepted, a 5th byte with its MSB set rejected (err_pos = the varint's first byte),
    the 5th byte's bits beyond 32 dropped."""
    cdef Py_ssize_t p = c.pos
    cdef uint32_t raw = 0
    cdef uint32_t b
    cdef int i
    for i in range(4):
        if p >= c.end:
            return cur_truncated(c, p)
        b = c.buf[p]
        p += 1
        raw |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            c.pos = p
            out[0] = <int32_t>((raw >> 1) ^ (<uint32_t>0 - (raw & 1)))
            return ST_OK
    if p >= c.end:
        return cur_truncated(c, p)
    b = c.buf[p]
    if b & 0x80:
        c.err_pos = c.pos
        return ST_VARINT_TOO_LONG
    raw |= b << 28  # uint32: bits beyond 32 fall off, as in Java's int shift
    c.pos = p + 1
    out[0] = <int32_t>((raw >> 1) ^ (<uint32_t>0 - (raw & 1)))
    return ST_OK


cdef inline int cur_varlong(Cursor *c, int64_t *out) noexcept nogil:
    """Zigzag varlong (int64) as Kafka's ByteUtils.readVarlong: a 10th byte with its MSB set is
    rejected (err_pos = the varlong's first byte); only bit 0 of a 10th byte is kept."""
    cdef Py_ssize_t p = c.pos
    cdef uint64_t raw = 0
    cdef uint64_t b
    cdef int shift = 0
    while True:
        if p >= c.end:
            return cur_truncated(c, p)
        b = c.buf[p]
        p += 1
        if b & 0x80:
            raw |= (b & 0x7F) << shift  # shift <= 63 here: no undefined shifts
            shift += 7
            if shift > 63:
                c.err_pos = c.pos
                return ST_VARLONG_TOO_LONG
        else:
            raw |= b << shift
            break
    c.pos = p
    out[0] = <int64_t>((raw >> 1) ^ (<uint64_t>0 - (raw & 1)))
    return ST_OK
