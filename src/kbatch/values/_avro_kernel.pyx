# cython: language_level=3
"""Avro binary -> Arrow buffers, without a Python object per value.

Two trees, both built by kbatch.values.avro_program from the schemas:
- `Col`: one per node of the Arrow type (the reader schema): growable buffers (values, offsets,
  one validity byte a row) that become an Arrow array in `Col.finish`.
- `Op`: one per node of a writer schema: what to read from the bytes and which Col it goes to
  (None: read and drop it, a field the reader schema does not have). Reader fields the writer
  lacks get their default appended (`Op.defaults`).
`decode_rows` runs the writer programs over a binary Arrow array of framed values (magic byte 0,
the schema id, the payload). On a payload that does not decode it stops and says which row and
why; the caller finds the precise error through fastavro. The bounds of kbatch.values.limits are
kept here as in their pure twin (avro_limits.check_value): records, arrays and maps nest at most
MAX_DEPTH deep, and the values of one decode_rows call hold at most MAX_EMPTY_ITEMS items that take
no bytes; other items take a byte each, so a block count past the bytes left is refused before any
item is read.
"""
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memset

from .limits import MAX_DEPTH as _MAX_DEPTH, MAX_EMPTY_ITEMS as _MAX_EMPTY_ITEMS

cdef int max_depth = _MAX_DEPTH
cdef int64_t max_empty_items = _MAX_EMPTY_ITEMS

# Col kinds
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
    C_DEFAULT = 12   # a constant column (a reader field no writer has): only a row count

# Op codes
cdef enum:
    O_NULL = 0
    O_BOOL = 1
    O_INT = 2
    O_LONG = 3
    O_FLOAT = 4
    O_DOUBLE = 5
    O_BYTES = 6
    O_FIXED = 7
    O_ENUM = 8
    O_DEC_BYTES = 9
    O_DEC_FIXED = 10
    O_RECORD = 11
    O_ARRAY = 12
    O_MAP = 13
    O_UNION = 14

KINDS = {"null": C_NULL, "bool": C_BOOL, "i32": C_I32, "i64": C_I64, "f32": C_F32, "f64": C_F64, "bin": C_BIN,
         "fixed": C_FIXED, "dec": C_DEC, "struct": C_STRUCT, "list": C_LIST, "map": C_MAP, "default": C_DEFAULT}
OPS = {"null": O_NULL, "boolean": O_BOOL, "int": O_INT, "long": O_LONG, "float": O_FLOAT, "double": O_DOUBLE,
       "bytes": O_BYTES, "fixed": O_FIXED, "enum": O_ENUM, "dec_bytes": O_DEC_BYTES, "dec_fixed": O_DEC_FIXED,
       "record": O_RECORD, "array": O_ARRAY, "map": O_MAP, "union": O_UNION}


cdef struct Buf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef int buf_grow(Buf* b, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap
    cdef char* p
    if b.n + more <= b.cap:
        return 0
    if b.n + more > 0x7FFFFFFF:  # Arrow's int32 offsets: a column of at most 2 GiB a buffer
        raise OverflowError("an Avro column larger than 2 GiB: decode fewer rows at a time")
    cap = b.cap * 2 if b.cap else 256
    while cap < b.n + more:
        cap *= 2
    if cap > 0x7FFFFFFF:
        cap = 0x7FFFFFFF
    p = <char*>realloc(b.p, cap)
    if p == NULL:
        raise MemoryError()
    b.p = p
    b.cap = cap
    return 0


cdef inline int buf_put(Buf* b, const void* src, Py_ssize_t size) except -1:
    if b.n + size > b.cap:
        buf_grow(b, size)
    memcpy(b.p + b.n, src, size)
    b.n += size
    return 0


cdef inline int buf_byte(Buf* b, char v) except -1:
    if b.n + 1 > b.cap:
        buf_grow(b, 1)
    b.p[b.n] = v
    b.n += 1
    return 0


cdef inline int buf_i32(Buf* b, int32_t v) except -1:
    return buf_put(b, &v, 4)


cdef inline int put_end(Buf* offs, Py_ssize_t n) except -1:
    """A list or map offset: its items column's length, which Arrow's int32 offsets must hold."""
    if n > 0x7FFFFFFF:
        raise OverflowError("an Avro column larger than 2 GiB: decode fewer rows at a time")
    return buf_i32(offs, <int32_t>n)


cdef class Col:
    """One Arrow column being built (see the module's doc)."""
    cdef public int kind
    cdef public int width          # fixed / decimal bytes a value
    cdef public list children      # struct: fields; list: [item]; map: [keys, values]
    cdef public object default     # C_DEFAULT: the Python value every row has
    cdef public Py_ssize_t length
    cdef public Py_ssize_t nulls   # validity bytes are written from the first null on (none: all valid)
    cdef Buf data
    cdef Buf offs
    cdef Buf valid

    def __cinit__(self):
        memset(&self.data, 0, sizeof(Buf))
        memset(&self.offs, 0, sizeof(Buf))
        memset(&self.valid, 0, sizeof(Buf))

    def __init__(self, str kind, int width=0, list children=None, object default=None):
        self.kind = KINDS[kind]
        self.width = width
        self.children = children or []
        self.default = default
        self.length = 0
        self.nulls = 0
        if self.kind in (C_BIN, C_LIST, C_MAP):
            buf_i32(&self.offs, 0)

    def __dealloc__(self):
        free(self.data.p)
        free(self.offs.p)
        free(self.valid.p)

    cdef int append_null(self) except -1:
        cdef Col c
        cdef Py_ssize_t i
        if self.kind == C_DEFAULT or self.kind == C_NULL:
            self.length += 1
            return 0
        if self.nulls == 0:  # the rows so far were all valid
            buf_grow(&self.valid, self.length + 1)
            memset(self.valid.p, 1, self.length)
            self.valid.n = self.length
        self.nulls += 1
        self.length += 1
        buf_byte(&self.valid, 0)
        if self.kind == C_BOOL:
            buf_byte(&self.data, 0)
        elif self.kind == C_I32 or self.kind == C_F32:
            buf_i32(&self.data, 0)
        elif self.kind == C_I64 or self.kind == C_F64:
            if self.data.n + 8 > self.data.cap:
                buf_grow(&self.data, 8)
            memset(self.data.p + self.data.n, 0, 8)
            self.data.n += 8
        elif self.kind == C_FIXED or self.kind == C_DEC:
            if self.data.n + self.width > self.data.cap:
                buf_grow(&self.data, self.width)
            memset(self.data.p + self.data.n, 0, self.width)
            self.data.n += self.width
        elif self.kind == C_BIN:
            buf_i32(&self.offs, <int32_t>self.data.n)
        elif self.kind == C_LIST or self.kind == C_MAP:
            c = <Col>self.children[0]
            put_end(&self.offs, c.length)
        elif self.kind == C_STRUCT:
            for i in range(len(self.children)):
                (<Col>self.children[i]).append_null()
        return 0

    cdef inline int mark(self) except -1:
        self.length += 1
        if self.nulls:
            return buf_byte(&self.valid, 1)
        return 0

    def finish(self, typ):
        """The column as an Arrow array of type `typ` (the reader schema's)."""
        import numpy as np
        import pyarrow as pa

        cdef Py_ssize_t n = self.length
        if self.kind == C_DEFAULT:
            return pa.array([self.default] * n, type=typ)
        if self.kind == C_NULL:
            return pa.nulls(n, typ)
        nulls = self.nulls
        bitmap = None
        if nulls:
            valid = np.frombuffer(self._bytes(&self.valid), np.uint8)
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
        if self.kind == C_BOOL:
            bits = np.packbits(np.frombuffer(self._bytes(&self.data), np.uint8), bitorder="little").tobytes()
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(bits)], null_count=nulls)
        if self.kind in (C_I32, C_I64, C_F32, C_F64, C_FIXED, C_DEC):
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(self._bytes(&self.data))], null_count=nulls)
        if self.kind == C_BIN:
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(self._bytes(&self.offs)),
                                                  pa.py_buffer(self._bytes(&self.data))], null_count=nulls)
        if self.kind == C_STRUCT:
            kids = [(<Col>c).finish(typ.field(i).type) for i, c in enumerate(self.children)]
            return pa.Array.from_buffers(typ, n, [bitmap], null_count=nulls, children=kids)
        if self.kind == C_LIST:
            item = (<Col>self.children[0]).finish(typ.value_type)
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(self._bytes(&self.offs))], null_count=nulls,
                                         children=[item])
        if self.kind == C_MAP:
            keys = (<Col>self.children[0]).finish(typ.key_type)
            items = (<Col>self.children[1]).finish(typ.item_type)
            entries = pa.StructArray.from_arrays([keys, items], fields=[typ.key_field, typ.item_field])
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(self._bytes(&self.offs))], null_count=nulls,
                                         children=[entries])
        raise ValueError(f"column kind {self.kind}")

    cdef bytes _bytes(self, Buf* b):
        return b.p[:b.n] if b.n else b""


cdef class Op:
    """One node of a writer schema's decoding program (see the module's doc)."""
    cdef public int op
    cdef public Col col            # where the value goes; None: read and drop
    cdef public tuple children     # record: fields in writer order; array: [item]; map: [value]; union: branches
    cdef Py_ssize_t nchildren
    cdef Py_ssize_t ndefaults
    cdef public list defaults      # record: [(Col, kind, bytes or None)] reader fields the writer lacks
    cdef public list symbols       # enum: the reader's name (bytes) of each writer symbol, None: not in the reader
    cdef public int width          # fixed size (writer) / decimal width (column)
    cdef public int size
    cdef public Py_ssize_t minw    # payload bytes a value takes at least (0: none, an item that costs no byte)

    def __init__(self, str op, Col col=None, list children=None, list defaults=None, list symbols=None,
                 int size=0):
        self.op = OPS[op]
        self.col = col
        self.children = tuple(children or ())
        self.nchildren = len(self.children)
        self.defaults = defaults or []
        self.ndefaults = len(self.defaults)
        self.symbols = symbols
        self.size = size
        if self.op == O_NULL:
            self.minw = 0
        elif self.op == O_FIXED or self.op == O_DEC_FIXED:
            self.minw = size
        elif self.op == O_RECORD:
            self.minw = sum((<Op>k).minw for k in self.children)
        elif self.op == O_FLOAT:
            self.minw = 4
        elif self.op == O_DOUBLE:
            self.minw = 8
        else:
            self.minw = 1


class AvroDecodeError(ValueError):
    """`code`: the status (_REASONS; 9 and 10 are bounds), `found`: what broke the bound."""

    def __init__(self, row, position, reason, code=0, found=0):
        self.row = row
        self.position = position
        self.reason = reason
        self.code = code
        self.found = found
        super().__init__(f"row {row}: {reason} (at byte {position} of the payload)")


cdef struct Cur:
    const uint8_t* p
    const uint8_t* end
    const uint8_t* start
    int err
    int depth        # records, arrays and maps open around the value being read
    int64_t empty    # items that take no bytes read so far in these rows
    int64_t found    # what broke a bound (err 9, 10)


cdef inline int64_t read_long(Cur* c):
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if c.p >= c.end:
            c.err = 1
            return 0
        b = c.p[0]
        c.p += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            break
        shift += 7
        if shift > 63:
            c.err = 2
            return 0
    return <int64_t>(v >> 1) ^ -(<int64_t>(v & 1))


cdef int put_number(Col col, double d, int64_t i, bint is_int) except -1:
    cdef int32_t i32
    cdef float f32
    if col.kind == C_I32:
        i32 = <int32_t>i
        buf_put(&col.data, &i32, 4)
    elif col.kind == C_I64:
        buf_put(&col.data, &i, 8)
    elif col.kind == C_F32:
        f32 = <float>(<double>i if is_int else d)
        buf_put(&col.data, &f32, 4)
    else:
        d = <double>i if is_int else d
        buf_put(&col.data, &d, 8)
    return col.mark()


cdef int put_decimal(Col col, const uint8_t* src, Py_ssize_t size, Cur* c) except -1:
    cdef int w = col.width
    cdef Py_ssize_t k
    cdef uint8_t fill
    if size > w:
        c.err = 4
        return 0
    if col.data.n + w > col.data.cap:
        buf_grow(&col.data, w)
    fill = 0xFF if (size and (src[0] & 0x80)) else 0
    memset(col.data.p + col.data.n, fill, w)
    for k in range(size):  # big-endian two's complement -> little-endian
        col.data.p[col.data.n + k] = src[size - 1 - k]
    col.data.n += w
    return col.mark()


cdef int put_default(Col col, int kind, object payload) except -1:
    cdef bytes b
    if payload is None:
        return col.append_null()
    if col.kind == C_DEFAULT:
        col.length += 1
        return 0
    b = <bytes>payload
    if col.kind == C_BIN:
        buf_put(&col.data, <const char*>b, len(b))
        buf_i32(&col.offs, <int32_t>col.data.n)
    elif col.kind == C_LIST or col.kind == C_MAP:  # [] / {}: an empty one
        put_end(&col.offs, (<Col>col.children[0]).length)
    else:
        buf_put(&col.data, <const char*>b, len(b))
    return col.mark()


cdef int run(Op op, Cur* c) except -1:
    cdef Col col = op.col
    cdef int64_t n, i, count, j
    cdef double d
    cdef float f
    cdef Op child
    cdef object sym
    cdef int o = op.op
    cdef Py_ssize_t k
    cdef const uint8_t* at
    if o == O_RECORD or o == O_ARRAY or o == O_MAP:
        c.depth += 1
        if c.depth > max_depth:
            c.err = 9
            c.found = c.depth
            return 0
    if o == O_RECORD:
        for k in range(op.nchildren):
            run(<Op>op.children[k], c)
            if c.err:
                return 0
        c.depth -= 1
        if col is not None:
            for k in range(op.ndefaults):
                t = op.defaults[k]
                put_default(<Col>t[0], <int>t[1], t[2])
            col.mark()
        return 0
    if o == O_UNION:
        i = read_long(c)
        if c.err:
            return 0
        if i < 0 or i >= op.nchildren:
            c.err = 3
            return 0
        child = <Op>op.children[i]
        if child.op == O_NULL:
            if col is not None:
                col.append_null()
            return 0
        return run(child, c)
    if o == O_NULL:
        if col is not None:
            col.append_null()
        return 0
    if o == O_BOOL:
        if c.p >= c.end:
            c.err = 1
            return 0
        if col is not None:
            buf_byte(&col.data, 1 if c.p[0] else 0)
            col.mark()
        c.p += 1
        return 0
    if o == O_INT or o == O_LONG:
        n = read_long(c)
        if c.err:
            return 0
        if col is not None:
            put_number(col, 0.0, n, True)
        return 0
    if o == O_FLOAT:
        if c.end - c.p < 4:
            c.err = 1
            return 0
        memcpy(&f, c.p, 4)
        c.p += 4
        if col is not None:
            put_number(col, <double>f, 0, False)
        return 0
    if o == O_DOUBLE:
        if c.end - c.p < 8:
            c.err = 1
            return 0
        memcpy(&d, c.p, 8)
        c.p += 8
        if col is not None:
            put_number(col, d, 0, False)
        return 0
    if o == O_BYTES or o == O_DEC_BYTES:
        n = read_long(c)
        if c.err:
            return 0
        if n < 0 or n > c.end - c.p:
            c.err = 1
            return 0
        if col is not None:
            if o == O_DEC_BYTES:
                put_decimal(col, c.p, n, c)
            else:
                buf_put(&col.data, c.p, n)
                buf_i32(&col.offs, <int32_t>col.data.n)
                col.mark()
        c.p += n
        return 0
    if o == O_FIXED or o == O_DEC_FIXED:
        n = op.size
        if n > c.end - c.p:
            c.err = 1
            return 0
        if col is not None:
            if o == O_DEC_FIXED:
                put_decimal(col, c.p, n, c)
            else:
                buf_put(&col.data, c.p, n)
                col.mark()
        c.p += n
        return 0
    if o == O_ENUM:
        i = read_long(c)
        if c.err:
            return 0
        if i < 0 or i >= len(op.symbols):
            c.err = 3
            return 0
        if col is not None:
            sym = op.symbols[i]
            if sym is None:
                c.err = 5
                return 0
            buf_put(&col.data, <const char*><bytes>sym, len(<bytes>sym))
            buf_i32(&col.offs, <int32_t>col.data.n)
            col.mark()
        return 0
    if o == O_ARRAY or o == O_MAP:
        child = <Op>op.children[0]
        while True:
            at = c.p
            count = read_long(c)
            if c.err:
                return 0
            if count == 0:
                break
            if count < 0:
                count = -count
                read_long(c)  # the block's size in bytes
                if c.err:
                    return 0
            # (count < 0 here: -2**63 negated; the count stands for 2**63)
            if o == O_ARRAY and child.minw == 0:  # items that take no bytes: bounded per value instead
                if count < 0 or count > max_empty_items - c.empty:
                    c.err = 10
                    c.found = INT64_MAX if count < 0 or count > INT64_MAX - c.empty else c.empty + count
                    c.p = at
                    return 0
                c.empty += count
            elif count < 0 or count > c.end - c.p:  # every item takes a byte at least (a map entry: its key)
                c.err = 8
                return 0
            for j in range(count):
                if o == O_MAP:  # the key: a string
                    n = read_long(c)
                    if c.err:
                        return 0
                    if n < 0 or n > c.end - c.p:
                        c.err = 1
                        return 0
                    if col is not None:
                        kc = <Col>col.children[0]
                        buf_put(&kc.data, c.p, n)
                        buf_i32(&kc.offs, <int32_t>kc.data.n)
                        kc.mark()
                    c.p += n
                run(child, c)
                if c.err:
                    return 0
        c.depth -= 1
        if col is not None:
            put_end(&col.offs, (<Col>col.children[0]).length)
            col.mark()
        return 0
    c.err = 6
    return 0


_REASONS = {1: "the payload ends early", 2: "a varint longer than 10 bytes", 3: "a union or enum index out of range",
            4: "a decimal wider than its Arrow type", 5: "an enum symbol the reader schema does not have",
            6: "an unknown operation", 7: "bytes left after the value",
            8: "more items than bytes left", 9: "nested deeper than a value may",
            10: "more items that take no bytes than a value may"}


def decode_rows(Col root, dict programs, const uint8_t[::1] data, const int32_t[::1] offsets, valid, Py_ssize_t first,
                Py_ssize_t n, int64_t empty=0):
    """Decode rows [first, first + n) of a binary Arrow array (data, offsets, validity as a numpy
    bool array or None) into `root`, each with the program of its schema id (`programs`: id -> Op).
    Raises AvroDecodeError naming the row; KeyError for a schema id that has no program. `empty`:
    the items that take no bytes the column held before these rows (one bound for all); returns
    the count after them."""
    cdef Py_ssize_t r
    cdef int32_t lo, hi
    cdef Cur c
    cdef int32_t sid
    cdef int32_t last_id = -1
    cdef Op prog = None
    cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
    cdef const uint8_t[::1] v = valid if valid is not None else None
    c.empty = empty  # one bound for all the rows: what the column holds, as the pure path counts
    for r in range(first, first + n):
        if v is not None and not v[r]:
            root.append_null()
            continue
        lo = offsets[r]
        hi = offsets[r + 1]
        if hi - lo < 5 or base[lo] != 0:
            raise AvroDecodeError(r, 0, "not framed (magic byte 0 and a schema id)")
        sid = <int32_t>((<uint32_t>base[lo + 1] << 24) | (<uint32_t>base[lo + 2] << 16) |
                        (<uint32_t>base[lo + 3] << 8) | <uint32_t>base[lo + 4])
        if sid != last_id or prog is None:
            prog = <Op>programs[sid]
            last_id = sid
        c.start = base + lo + 5
        c.p = c.start
        c.end = base + hi
        c.err = 0
        c.depth = 0
        c.found = 0
        run(prog, &c)
        if c.err:
            raise AvroDecodeError(r, c.p - c.start, _REASONS.get(c.err, "error"), c.err, c.found)
    return c.empty
