# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Avro binary -> Arrow buffers, without a Python object per value (issue 42: a decode plan).

Two flat arrays, both built by kbatch.values.avro_program from the schemas:
- `Columns`: one growable column per node of the reader's Arrow type, in preorder (0 is the root):
  values, offsets and the rows that are null (a valid row costs nothing but its count; the
  bitmap is made once when finished); `Columns.finish` hands the buffers to Arrow without a copy.
- `Program`: per writer schema, a flat array of operations compiled once (schema resolution
  included): each reads one Avro value into one column (or skips it: a field the reader does not
  have, so a projection costs only the skips, by the lengths the encoding carries). A record is
  its fields' operations in order, then one that marks its row; an array or a map is one
  operation followed by its items' operations (run once an item); a union is one operation and a
  table of its branches' ranges. Nothing dispatches on the schema tree per record.
`decode_rows` runs them over a binary Arrow array of framed values (magic byte 0, the schema id,
the payload) with the GIL released. On a payload that does not decode it stops and says which row
and why; the caller finds the precise error through the pure path (fastavro). The bounds of
kbatch.values.limits are kept as in their pure twin (avro_limits.check_value): records, arrays and
maps nest at most MAX_DEPTH deep (a static property of a non-recursive schema: the operation at a
depth past the bound is one that fails when reached), and the values of one decode_rows call hold
at most MAX_EMPTY_ITEMS items that take no bytes; other items take a byte each, so a block count
past the bytes left is refused before any item is read. Strings are checked to be UTF-8 once per
column when it is finished (the whole buffer valid and every value starting on a character).
Column buffers of 64 KiB or more that Arrow lets go of are kept, up to 64 MiB in all, for the
next decode's columns (kb_release): a fresh block's pages fault in one at a time as the loop
first writes them, which cost a 40-field decode a quarter of its time; `pool_bytes` tells how
much is kept.
"""
from cpython.buffer cimport PyBUF_WRITABLE
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

from .limits import MAX_DEPTH as _MAX_DEPTH, MAX_EMPTY_ITEMS as _MAX_EMPTY_ITEMS

import sys as _sys

cdef bint little_endian = _sys.byteorder == "little"  # Arrow's decimals are little-endian
cdef int max_depth = _MAX_DEPTH
cdef int64_t max_empty_items = _MAX_EMPTY_ITEMS

# column kinds
cdef enum:
    C_NULL = 0
    C_BOOL = 1
    C_I32 = 2
    C_I64 = 3
    C_F32 = 4
    C_F64 = 5
    C_BIN = 6
    C_FIXED = 7
    C_DEC = 8
    C_STRUCT = 9
    C_LIST = 10
    C_MAP = 11
    C_STR = 12     # C_BIN whose values must be UTF-8

# operation codes (the reader column's kind is part of the code: no switch on it per value)
cdef enum:
    P_NULL = 0        # append a null to col (a union's null branch, a writer null)
    P_V_I32 = 1       # varint (int / long) -> int32 column
    P_V_I64 = 2       # varint -> int64
    P_V_F32 = 3       # varint -> float32 (promotion)
    P_V_F64 = 4       # varint -> float64
    P_F32 = 5         # float -> float32
    P_F32_F64 = 6     # float -> float64
    P_F64 = 7         # double -> float64
    P_BOOL = 8
    P_BIN = 9         # length-prefixed bytes / string
    P_FIXED = 10      # a: size
    P_DEC_BYTES = 11
    P_DEC_FIXED = 12  # a: size
    P_ENUM = 13       # a: first symbol in the symbol table, b: symbols
    P_MARK = 14       # a record's row is done: mark its struct column valid
    P_DEFAULT = 15    # a reader field the writer lacks: a: default's offset in the pool, b: its length (-1: null)
    P_UNION = 16      # a: next operation, b: first branch in the branch table, c: branches
    P_ARRAY = 17      # a: next operation (the items' operations are [i + 1, a)), b: 1 if an item takes no bytes
    P_MAP = 18        # as P_ARRAY; the key goes to the map column's first child
    P_DEPTH = 19      # a value reaching here is nested deeper than a value may (a: the depth)
    S_VARINT = 20     # skip a varint (int, long)
    S_BYTES = 21      # skip length-prefixed bytes
    S_FIXED = 22      # skip a bytes (float 4, double 8, fixed)
    S_BOOL = 23
    S_ENUM = 24       # skip a varint, its index below b

OPS = {"null": P_NULL, "v_i32": P_V_I32, "v_i64": P_V_I64, "v_f32": P_V_F32, "v_f64": P_V_F64, "f32": P_F32,
       "f32_f64": P_F32_F64, "f64": P_F64, "bool": P_BOOL, "bin": P_BIN, "fixed": P_FIXED, "dec_bytes": P_DEC_BYTES,
       "dec_fixed": P_DEC_FIXED, "enum": P_ENUM, "mark": P_MARK, "default": P_DEFAULT, "union": P_UNION,
       "array": P_ARRAY, "map": P_MAP, "depth": P_DEPTH, "s_varint": S_VARINT, "s_bytes": S_BYTES,
       "s_fixed": S_FIXED, "s_bool": S_BOOL, "s_enum": S_ENUM}
KINDS = {"null": C_NULL, "bool": C_BOOL, "i32": C_I32, "i64": C_I64, "f32": C_F32, "f64": C_F64, "bin": C_BIN,
         "str": C_STR, "fixed": C_FIXED, "dec": C_DEC, "struct": C_STRUCT, "list": C_LIST, "map": C_MAP}

# statuses (_REASONS); 9 and 10 are the bounds
cdef enum:
    E_END = 1
    E_VARINT = 2
    E_INDEX = 3
    E_DECIMAL = 4
    E_SYMBOL = 5
    E_ITEMS = 8
    E_DEPTH = 9
    E_EMPTY = 10
    E_RANGE = 11
    E_MEMORY = 12
    E_LARGE = 13

_REASONS = {1: "the payload ends early", 2: "a varint longer than 10 bytes", 3: "a union or enum index out of range",
            4: "a decimal wider than its Arrow type", 5: "an enum symbol the reader schema does not have",
            7: "bytes left after the value", 8: "more items than bytes left", 9: "nested deeper than a value may",
            10: "more items that take no bytes than a value may", 11: "an int out of the range of a 32-bit int"}


cdef extern from "_avro_buffers.h":
    ctypedef struct Buf "kb_buf":
        char* p
        int64_t n
        int64_t cap
    int buf_grow "kb_grow"(Buf* b, int64_t more) nogil
    void release "kb_release"(char* p, int64_t cap) nogil
    int64_t kb_pool_kept() nogil
    void kb_pool_init()
    int put_raw "kb_put"(Buf* b, const void* src, int64_t size) nogil
    int buf_zero "kb_zero"(Buf* b, int64_t size) nogil
    bint kb_dec_short(const uint8_t* p, int64_t n, const uint8_t* end, int64_t* v) nogil
    int64_t kb_read_long(const uint8_t** pp, const uint8_t* end, int* err) nogil


kb_pool_init()


cdef struct ColBuf:
    int kind
    int width         # fixed / decimal bytes a value
    int nkids
    int kid0          # children: Columns.kids[kid0 : kid0 + nkids]
    int64_t length
    int64_t nulls
    Buf data
    Buf offs
    Buf valid         # the null rows (int32 each)


cdef struct POp:
    int code
    int col           # the column it writes (-1: none)
    int64_t a
    int64_t b
    int64_t c


cdef struct Cur:
    const uint8_t* p
    const uint8_t* end
    int err
    int64_t empty     # items that take no bytes read so far in these rows
    int64_t found     # what broke a bound (err 9, 10)
    ColBuf* cols
    const int* kids
    const POp* ops
    const int64_t* branches
    const int64_t* syms       # enum symbols: (offset, length) pairs into sympool; length -1: not in the reader
    const uint8_t* sympool
    const uint8_t* defpool


# ------------------------------------------------------------------------------------ buffers
cdef inline int put_i32(Buf* b, int32_t v) noexcept nogil:
    return put_raw(b, &v, 4)


cdef inline int put_end(Buf* offs, int64_t n) noexcept nogil:
    """A list, map or string offset, which Arrow's int32 offsets must hold."""
    if n > 0x7FFFFFFF:
        return E_LARGE
    return put_i32(offs, <int32_t>n)


cdef inline int mark(ColBuf* col) noexcept nogil:
    """One more valid row."""
    col.length += 1
    return 0


cdef int col_null(ColBuf* cols, const int* kids, int k) noexcept nogil:
    """One more null row in column k (a struct's children get one too, as Arrow wants)."""
    cdef ColBuf* col = &cols[k]
    cdef int e = 0
    cdef int i
    if col.kind == C_NULL:
        col.length += 1
        return 0
    if col.length > 0x7FFFFFFF:
        return E_LARGE
    e = put_i32(&col.valid, <int32_t>col.length)
    if e:
        return e
    col.nulls += 1
    col.length += 1
    if col.kind == C_BOOL:
        return buf_zero(&col.data, 1)
    if col.kind == C_I32 or col.kind == C_F32:
        return buf_zero(&col.data, 4)
    if col.kind == C_I64 or col.kind == C_F64:
        return buf_zero(&col.data, 8)
    if col.kind == C_FIXED or col.kind == C_DEC:
        return buf_zero(&col.data, col.width)
    if col.kind == C_BIN or col.kind == C_STR:
        return put_end(&col.offs, col.data.n)
    if col.kind == C_LIST or col.kind == C_MAP:
        return put_end(&col.offs, cols[kids[col.kid0]].length)
    if col.kind == C_STRUCT:
        for i in range(col.nkids):
            e = col_null(cols, kids, kids[col.kid0 + i])
            if e:
                return e
    return 0


cdef int grow_like(Buf* b, double f) noexcept nogil:
    """Room for b.n * f bytes, at most 16 MiB more (first rows unlike the rest must not reserve
    much: past it the buffer grows as it fills)."""
    cdef int64_t want = <int64_t>(b.n * f)
    if want > b.n + (16 << 20):
        want = b.n + (16 << 20)
    if b.n == 0 or want >= 0x7FFFFFFF or want <= b.cap:
        return 0
    return buf_grow(b, want - b.n)


include "_arrow_buffers.pxi"


cdef class Columns:
    """The reader type's columns, in preorder (see the module's doc). specs: per column (kind,
    width, [child column indexes])."""
    cdef ColBuf* cols
    cdef int* kids
    cdef public int n
    cdef readonly list specs

    def __cinit__(self, list specs):
        cdef int i, j, nk = 0
        self.n = len(specs)
        self.specs = specs
        self.cols = <ColBuf*>calloc(max(self.n, 1), sizeof(ColBuf))
        for s in specs:
            nk += len(s[2])
        self.kids = <int*>calloc(max(nk, 1), sizeof(int))
        if self.cols == NULL or self.kids == NULL:
            raise MemoryError()
        nk = 0
        for i, s in enumerate(specs):
            self.cols[i].kind = KINDS[s[0]]
            self.cols[i].width = s[1]
            self.cols[i].kid0 = nk
            self.cols[i].nkids = len(s[2])
            for j in s[2]:
                self.kids[nk] = j
                nk += 1
            if self.cols[i].kind in (C_BIN, C_STR, C_LIST, C_MAP):
                if put_i32(&self.cols[i].offs, 0):
                    raise MemoryError()

    def __dealloc__(self):
        cdef int i
        if self.cols != NULL:
            for i in range(self.n):
                release(self.cols[i].data.p, self.cols[i].data.cap)
                release(self.cols[i].offs.p, self.cols[i].offs.cap)
                release(self.cols[i].valid.p, self.cols[i].valid.cap)
        free(self.cols)
        free(self.kids)

    @property
    def length(self):
        return self.cols[0].length

    def reserve(self, int64_t rows):
        """Room for `rows` more rows in the fixed-width columns under the root's structs (no growth
        in the loop for them)."""
        self._reserve(0, rows)

    cdef int _reserve(self, int k, int64_t rows) except -1:
        cdef ColBuf* c = &self.cols[k]
        cdef int i
        cdef int64_t w = 0
        if c.kind == C_I32 or c.kind == C_F32:
            w = 4
        elif c.kind == C_I64 or c.kind == C_F64:
            w = 8
        elif c.kind == C_FIXED or c.kind == C_DEC:
            w = c.width
        elif c.kind == C_BIN or c.kind == C_STR:
            if buf_grow(&c.offs, rows * 4):
                raise MemoryError()
        elif c.kind == C_STRUCT:
            for i in range(c.nkids):
                self._reserve(self.kids[c.kid0 + i], rows)
        if w and rows * w < 0x7FFFFFFF and buf_grow(&c.data, rows * w):
            raise MemoryError()
        return 0

    def reserve_like(self, int64_t done, int64_t total):
        """After `done` of `total` rows: room in every column for the rest at the rate so far
        (a quarter more), so the buffers are not copied as they grow."""
        cdef int i
        cdef double f
        if done <= 0 or total <= done:
            return
        f = 1.25 * total / done
        for i in range(self.n):
            if grow_like(&self.cols[i].data, f) or grow_like(&self.cols[i].offs, f) or \
                    grow_like(&self.cols[i].valid, f):
                raise MemoryError()

    def finish(self, typ):
        """The columns as an Arrow array of type `typ` (the reader schema's), their memory handed
        over to it. ValueError for a string that is not UTF-8 or a decimal past its precision."""
        return self._finish(0, typ)

    cdef object _finish(self, int k, typ):
        import numpy as np
        import pyarrow as pa

        cdef ColBuf* c = &self.cols[k]
        cdef int64_t n = c.length
        cdef int64_t i
        cdef const int32_t* offs
        cdef int valid_as
        cdef bint ok
        nulls = c.nulls
        if c.kind == C_NULL:
            return pa.nulls(n, typ)
        bitmap = None
        if nulls:
            valid = np.ones(n, np.uint8)
            valid[np.frombuffer(take(&c.valid), np.int32)] = 0
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        if c.kind == C_BOOL:
            bits = np.packbits(np.frombuffer(take(&c.data), np.uint8), bitorder="little")
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(bits)], null_count=nulls)
        if c.kind == C_DEC:  # Arrow's check: every value within the type's precision
            arr = pa.Array.from_buffers(typ, n, [bitmap, take(&c.data)], null_count=nulls)
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid as e:
                raise ValueError(str(e)) from None
            return arr
        if c.kind in (C_I32, C_I64, C_F32, C_F64, C_FIXED):
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.data)], null_count=nulls)
        if c.kind == C_BIN or c.kind == C_STR:
            if c.kind == C_STR and c.data.n:
                offs = <const int32_t*>c.offs.p
                with nogil:
                    valid_as = utf8_valid(<const uint8_t*>c.data.p, c.data.n)
                    ok = valid_as != 0
                    if valid_as == 2:  # the whole is UTF-8: each value is if none starts inside a character
                        for i in range(n):
                            if offs[i] < c.data.n and (<uint8_t>c.data.p[offs[i]] & 0xC0) == 0x80:
                                ok = False
                                break
                if not ok:
                    raise ValueError("a string that is not UTF-8")
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.offs), take(&c.data)], null_count=nulls)
        if c.kind == C_STRUCT:
            kids = [self._finish(self.kids[c.kid0 + i], typ.field(i).type) for i in range(c.nkids)]
            return pa.Array.from_buffers(typ, n, [bitmap], null_count=nulls, children=kids)
        if c.kind == C_LIST:
            item = self._finish(self.kids[c.kid0], typ.value_type)
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.offs)], null_count=nulls, children=[item])
        if c.kind == C_MAP:
            keys = self._finish(self.kids[c.kid0], typ.key_type)
            items = self._finish(self.kids[c.kid0 + 1], typ.item_type)
            entries = pa.StructArray.from_arrays([keys, items], fields=[typ.key_field, typ.item_field])
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.offs)], null_count=nulls, children=[entries])
        raise ValueError(f"column kind {c.kind}")


# ------------------------------------------------------------------------------------ programs
cdef class Program:
    """One writer schema's operations (see the module's doc). ops: (name, col, a, b, c) tuples;
    branches: (first op, end op) per union branch, first -1 for a null branch; symbols: per enum
    symbol its reader name (bytes) or None; defaults: the bytes P_DEFAULT operations point into."""
    cdef POp* ops
    cdef int64_t* branches
    cdef int64_t* syms
    cdef bytes sympool
    cdef bytes defpool
    cdef public int nops
    cdef readonly list listing

    def __cinit__(self, list ops, list branches, list symbols, bytes defaults):
        cdef int i
        self.nops = len(ops)
        self.listing = ops
        self.ops = <POp*>calloc(max(self.nops, 1), sizeof(POp))
        self.branches = <int64_t*>calloc(max(2 * len(branches), 1), sizeof(int64_t))
        self.syms = <int64_t*>calloc(max(2 * len(symbols), 1), sizeof(int64_t))
        if self.ops == NULL or self.branches == NULL or self.syms == NULL:
            raise MemoryError()
        for i, (name, col, a, b, c) in enumerate(ops):
            self.ops[i].code = OPS[name]
            self.ops[i].col = col
            self.ops[i].a = a
            self.ops[i].b = b
            self.ops[i].c = c
        for i, (lo, hi) in enumerate(branches):
            self.branches[2 * i] = lo
            self.branches[2 * i + 1] = hi
        pool = bytearray()
        for i, s in enumerate(symbols):
            self.syms[2 * i] = len(pool)
            self.syms[2 * i + 1] = -1 if s is None else len(s)
            if s is not None:
                pool += s
        self.sympool = bytes(pool) + bytes(32)  # a symbol is copied 32 bytes at a time
        self.defpool = defaults + b"\x00"

    def __dealloc__(self):
        free(self.ops)
        free(self.branches)
        free(self.syms)


class AvroDecodeError(ValueError):
    """`code`: the status (_REASONS; 9 and 10 are bounds), `found`: what broke the bound."""

    def __init__(self, row, position, reason, code=0, found=0):
        self.row = row
        self.position = position
        self.reason = reason
        self.code = code
        self.found = found
        super().__init__(f"row {row}: {reason} (at byte {position} of the payload)")


# ------------------------------------------------------------------------------------ the loop




cdef inline int64_t read_long(Cur* c) noexcept nogil:
    return kb_read_long(&c.p, c.end, &c.err)


cdef inline int skip_long(Cur* c) noexcept nogil:
    """Step over a varint: 0, or -1 with c.err set."""
    cdef int k
    cdef const uint8_t* p = c.p
    cdef int64_t room = c.end - p
    if room > 10:
        room = 10
    for k in range(room):
        if p[k] < 0x80:
            c.p = p + k + 1
            return 0
    c.err = E_VARINT if room == 10 else E_END
    return -1


cdef int leaf_longs(Cur* c, const POp* op, int64_t count) noexcept nogil:
    """`count` array items that are one varint each (skipped, or into an int64 column)."""
    cdef int64_t j, n
    cdef ColBuf* col
    cdef int e
    if op.code == S_VARINT:
        for j in range(count):
            if skip_long(c):
                return -1
        return 0
    col = &c.cols[op.col]
    if col.data.n + 8 * count > col.data.cap:
        e = buf_grow(&col.data, 8 * count)
        if e:
            c.err = e
            return -1
    for j in range(count):
        n = read_long(c)
        if c.err:
            return -1
        (<int64_t*>(col.data.p + col.data.n))[0] = n
        col.data.n += 8
    col.length += count
    return 0


cdef int put_decimal(ColBuf* col, const uint8_t* src, int64_t size) noexcept nogil:
    """Big-endian two's complement -> the little-endian decimal128/256 of col.width bytes."""
    cdef int w = col.width
    cdef int64_t k
    cdef uint8_t fill
    cdef int e
    cdef char* out
    cdef uint64_t x
    cdef int64_t v, hi
    if size > w:
        return E_DECIMAL
    if col.data.n + w > col.data.cap:
        e = buf_grow(&col.data, w)
        if e:
            return e
    out = col.data.p + col.data.n
    if little_endian and 0 < size <= 8 and (w == 16 or w == 32):  # the usual: an int64, sign-extended
        x = 0
        for k in range(size):
            x = (x << 8) | src[k]
        v = (<int64_t>(x << (64 - 8 * size))) >> (64 - 8 * size)
        hi = -1 if v < 0 else 0
        (<int64_t*>out)[0] = v
        (<int64_t*>out)[1] = hi
        if w == 32:
            (<int64_t*>out)[2] = hi
            (<int64_t*>out)[3] = hi
        col.data.n += w
        return mark(col)
    fill = 0xFF if (size and (src[0] & 0x80)) else 0
    memset(out, fill, w)
    for k in range(size):
        out[k] = src[size - 1 - k]
    col.data.n += w
    return mark(col)


cdef int put_default(Cur* c, const POp* op) noexcept nogil:
    cdef ColBuf* col = &c.cols[op.col]
    cdef int e
    if op.b < 0:
        return col_null(c.cols, c.kids, op.col)
    if col.kind == C_BIN or col.kind == C_STR:
        e = put_raw(&col.data, c.defpool + op.a, op.b)
        if e:
            return e
        e = put_end(&col.offs, col.data.n)
    elif col.kind == C_LIST or col.kind == C_MAP:  # [] / {}: an empty one
        e = put_end(&col.offs, c.cols[c.kids[col.kid0]].length)
    else:
        e = put_raw(&col.data, c.defpool + op.a, op.b)
    if e:
        return e
    return mark(col)


cdef int run(Cur* c, int64_t lo, int64_t hi) noexcept nogil:
    """Run operations [lo, hi) over the bytes at c.p: 0, or -1 with c.err set (c.p where it broke).
    The cursor and the tables are local variables here (kept in registers: the appends' stores
    would otherwise make the compiler reload them from c), written back to c around a call that
    reads on."""
    cdef const uint8_t* p = c.p
    cdef const uint8_t* end = c.end
    cdef ColBuf* cols = c.cols
    cdef const POp* ops = c.ops
    cdef const POp* op
    cdef ColBuf* col
    cdef int64_t i = lo
    cdef int64_t n, j
    cdef int e = 0
    cdef double d
    cdef float f
    cdef int32_t v32
    cdef uint8_t one
    cdef const int64_t* br
    cdef int code
    cdef int64_t jump_at = -1, jump_to = 0  # after a union's one-leaf branch: where to go on
    while i < hi:
        op = &ops[i]
        code = op.code
        if code == P_V_I64:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            col = &cols[op.col]
            e = put_raw(&col.data, &n, 8)
            col.length += 1
        elif code == P_BIN:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            if n < 0 or n > end - p:
                e = E_END
                break
            col = &cols[op.col]
            if n <= 32 and end - p >= 32 and col.data.cap - col.data.n >= 32:
                memcpy(col.data.p + col.data.n, p, 32)  # a short string: one fixed-size copy, no call
                col.data.n += n
            else:
                e = put_raw(&col.data, p, n)
            p += n
            if e == 0:
                e = put_end(&col.offs, col.data.n)
            col.length += 1
        elif code == P_UNION:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            if n < 0 or n >= op.c:
                e = E_INDEX
                break
            br = c.branches + 2 * (op.b + n)
            if br[0] >= 0 and br[1] == br[0] + 1:  # a branch of one leaf: run it here, then go on after the union
                jump_at = br[1]
                jump_to = op.a
                i = br[0]
                continue
            if br[0] < 0:
                if op.col >= 0:
                    e = col_null(cols, c.kids, op.col)
            else:
                c.p = p
                if run(c, br[0], br[1]):
                    p = c.p
                    e = c.err
                    break
                p = c.p
            i = op.a
            if e:
                break
            continue
        elif code == P_MARK:
            cols[op.col].length += 1
        elif code == P_V_I32:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            if n < INT32_MIN or n > INT32_MAX:
                e = E_RANGE
                break
            col = &cols[op.col]
            v32 = <int32_t>n
            e = put_raw(&col.data, &v32, 4)
            col.length += 1
        elif code == P_F64:
            if end - p < 8:
                e = E_END
                break
            col = &cols[op.col]
            e = put_raw(&col.data, p, 8)
            p += 8
            col.length += 1
        elif code == S_VARINT:
            kb_read_long(&p, end, &e)
        elif code == S_BYTES:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            if n < 0 or n > end - p:
                e = E_END
                break
            p += n
        elif code == S_FIXED or code == S_BOOL:
            if op.a > end - p:
                e = E_END
                break
            p += op.a
        elif code == P_ENUM or code == S_ENUM:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            if n < 0 or n >= op.b:
                e = E_INDEX
                break
            if code == P_ENUM:
                j = c.syms[2 * (op.a + n) + 1]
                if j < 0:
                    e = E_SYMBOL
                    break
                col = &cols[op.col]
                if j <= 32 and col.data.cap - col.data.n >= 32:  # (the pool has 32 bytes after a symbol)
                    memcpy(col.data.p + col.data.n, c.sympool + c.syms[2 * (op.a + n)], 32)
                    col.data.n += j
                else:
                    e = put_raw(&col.data, c.sympool + c.syms[2 * (op.a + n)], j)
                if e == 0:
                    e = put_end(&col.offs, col.data.n)
                col.length += 1
        elif code == P_DEC_BYTES:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            if n < 0 or n > end - p:
                e = E_END
                break
            col = &cols[op.col]
            if col.width == 16 and kb_dec_short(p, n, end, &j):  # the usual: a decimal128 of an int64
                if col.data.n + 16 > col.data.cap:
                    e = buf_grow(&col.data, 16)
                    if e:
                        break
                (<int64_t*>(col.data.p + col.data.n))[0] = j
                (<int64_t*>(col.data.p + col.data.n))[1] = j >> 63
                col.data.n += 16
                col.length += 1
            else:
                e = put_decimal(col, p, n)
            p += n
        elif code == P_DEC_FIXED or code == P_FIXED:
            if op.a > end - p:
                e = E_END
                break
            col = &cols[op.col]
            if code == P_DEC_FIXED:
                e = put_decimal(col, p, op.a)
            else:
                e = put_raw(&col.data, p, op.a)
                col.length += 1
            p += op.a
        elif code == P_BOOL:
            if p >= end:
                e = E_END
                break
            col = &cols[op.col]
            one = 1 if p[0] else 0
            e = put_raw(&col.data, &one, 1)
            p += 1
            col.length += 1
        elif code == P_V_F64 or code == P_V_F32:
            n = kb_read_long(&p, end, &e)
            if e:
                break
            col = &cols[op.col]
            if code == P_V_F64:
                d = <double>n
                e = put_raw(&col.data, &d, 8)
            else:
                f = <float>n
                e = put_raw(&col.data, &f, 4)
            col.length += 1
        elif code == P_F32 or code == P_F32_F64:
            if end - p < 4:
                e = E_END
                break
            memcpy(&f, p, 4)
            p += 4
            col = &cols[op.col]
            if code == P_F32:
                e = put_raw(&col.data, &f, 4)
            else:
                d = <double>f
                e = put_raw(&col.data, &d, 8)
            col.length += 1
        elif code == P_NULL:
            if op.col >= 0:
                e = col_null(cols, c.kids, op.col)
        elif code == P_DEFAULT:
            e = put_default(c, op)
        elif code == P_ARRAY or code == P_MAP:
            c.p = p
            e = items(c, op, i)
            p = c.p
            if e:
                e = c.err
                break
            i = op.a
            continue
        elif code == P_DEPTH:
            e = E_DEPTH
            c.found = op.a
            break
        if e:
            break
        i += 1
        if i == jump_at:
            i = jump_to
            jump_at = -1
    c.p = p
    if e:
        c.err = e
        return -1
    return 0


cdef int items(Cur* c, const POp* op, int64_t i) noexcept nogil:
    """An array's or a map's blocks (op: its operation, at i; the items' operations are [i + 1,
    op.a)): 0, or -1 with c.err set."""
    cdef int code = op.code
    cdef int64_t n, count, j
    cdef const uint8_t* at
    cdef ColBuf* col
    cdef int e = 0
    while True:
        at = c.p
        count = read_long(c)
        if c.err:
            return -1
        if count == 0:
            break
        if count < 0:
            count = -count
            n = read_long(c)  # the block's size in bytes
            if c.err:
                return -1
            if op.col < 0 and op.b == 0:  # skipped items that take bytes: jump the block
                if n < 0 or n > c.end - c.p:
                    c.err = E_END
                    return -1
                c.p += n
                continue
        # (count < 0 here: -2**63 negated; the count stands for 2**63)
        if code == P_ARRAY and op.b:  # items that take no bytes: bounded per value instead
            if count < 0 or count > max_empty_items - c.empty:
                c.err = E_EMPTY
                c.found = INT64_MAX if count < 0 or count > INT64_MAX - c.empty else c.empty + count
                c.p = at
                return -1
            c.empty += count
        elif count < 0 or count > c.end - c.p:  # every item takes a byte at least (a map entry: its key)
            c.err = E_ITEMS
            return -1
        if code == P_ARRAY and op.a == i + 2 and (c.ops[i + 1].code == S_VARINT or
                                                  c.ops[i + 1].code == P_V_I64):
            if leaf_longs(c, &c.ops[i + 1], count):  # items of one varint each: no call an item
                return -1
            continue
        for j in range(count):
            if code == P_MAP:  # the key: a string
                n = read_long(c)
                if c.err:
                    return -1
                if n < 0 or n > c.end - c.p:
                    c.err = E_END
                    return -1
                if op.col >= 0:
                    col = &c.cols[c.kids[c.cols[op.col].kid0]]
                    e = put_raw(&col.data, c.p, n)
                    if e == 0:
                        e = put_end(&col.offs, col.data.n)
                    if e:
                        c.err = e
                        return -1
                    col.length += 1
                c.p += n
            if run(c, i + 1, op.a):
                return -1
    if op.col >= 0:
        col = &c.cols[op.col]
        e = put_end(&col.offs, c.cols[c.kids[col.kid0]].length)
        if e:
            c.err = e
            return -1
        col.length += 1
    return 0


def decode_rows(Columns root, dict programs, const uint8_t[::1] data, const int32_t[::1] offsets, valid,
                Py_ssize_t first, Py_ssize_t n, int64_t empty=0):
    """Decode rows [first, first + n) of a binary Arrow array (data, offsets, validity as a numpy
    uint8 array or None) into `root`, each with the program of its schema id (`programs`: id ->
    Program). Raises AvroDecodeError naming the row; KeyError for a schema id that has no program.
    `empty`: the items that take no bytes the column held before these rows (one bound for all);
    returns the count after them."""
    cdef Py_ssize_t r, stop = first + n
    cdef int32_t lo, hi
    cdef Cur c
    cdef int32_t sid = 0
    cdef int32_t last_id = -1
    cdef Program prog = None
    cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
    cdef const uint8_t[::1] v = valid if valid is not None else None
    cdef const uint8_t* vp = &v[0] if v is not None and v.shape[0] else NULL
    cdef const int32_t* op = &offsets[0]
    cdef int status = 0
    cdef const uint8_t* start = NULL
    memset(&c, 0, sizeof(Cur))
    c.empty = empty  # one bound for all the rows: what the column holds, as the pure path counts
    c.cols = root.cols
    c.kids = root.kids
    r = first
    while r < stop:
        with nogil:
            while r < stop:
                if vp != NULL and not vp[r]:
                    status = col_null(c.cols, c.kids, 0)
                    if status:
                        break
                    r += 1
                    continue
                lo = op[r]
                hi = op[r + 1]
                if hi - lo < 5 or base[lo] != 0:
                    status = -1
                    break
                sid = <int32_t>((<uint32_t>base[lo + 1] << 24) | (<uint32_t>base[lo + 2] << 16) |
                                (<uint32_t>base[lo + 3] << 8) | <uint32_t>base[lo + 4])
                if sid != last_id:
                    status = -2  # look the program up with the GIL
                    break
                start = base + lo + 5
                c.p = start
                c.end = base + hi
                c.err = 0
                if run(&c, 0, prog.nops):
                    status = -3
                    break
                r += 1
        if status == -2:
            prog = <Program>programs[sid]
            last_id = sid
            c.ops = prog.ops
            c.branches = prog.branches
            c.syms = prog.syms
            c.sympool = <const uint8_t*><char*>prog.sympool
            c.defpool = <const uint8_t*><char*>prog.defpool
            status = 0
            continue
        if status == -1:
            raise AvroDecodeError(r, 0, "not framed (magic byte 0 and a schema id)")
        if status == -3:
            if c.err == E_MEMORY:
                raise MemoryError()
            if c.err == E_LARGE:
                raise OverflowError("an Avro column larger than 2 GiB: decode fewer rows at a time")
            raise AvroDecodeError(r, c.p - start, _REASONS.get(c.err, "error"), c.err, c.found)
        if status == E_MEMORY:
            raise MemoryError()
        if status:
            raise OverflowError("an Avro column larger than 2 GiB: decode fewer rows at a time")
    return c.empty


def pool_bytes():
    """The bytes of freed column buffers kept for the next decode (kb_release: at most 64 MiB)."""
    return kb_pool_kept()


def schema_ids(const uint8_t[::1] data, const int32_t[::1] offsets, valid, Py_ssize_t n):
    """The schema ids of rows [0, n) of a binary Arrow array: {id: its first row}; None when a
    valid row is not framed (magic byte 0 and a 4-byte id)."""
    cdef Py_ssize_t r
    cdef int32_t lo, sid, last = 0
    cdef bint any_ = False
    cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
    cdef const uint8_t[::1] v = valid if valid is not None else None
    cdef const uint8_t* vp = &v[0] if v is not None and v.shape[0] else NULL
    cdef const int32_t* op = &offsets[0]
    out = {}
    for r in range(n):
        if vp != NULL and not vp[r]:
            continue
        lo = op[r]
        if op[r + 1] - lo < 5 or base[lo] != 0:
            return None
        sid = <int32_t>((<uint32_t>base[lo + 1] << 24) | (<uint32_t>base[lo + 2] << 16) |
                        (<uint32_t>base[lo + 3] << 8) | <uint32_t>base[lo + 4])
        if not any_ or sid != last:
            if sid not in out:
                out[sid] = r
            last = sid
            any_ = True
    return out
