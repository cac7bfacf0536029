# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Protobuf wire format -> Arrow buffers, without a Python object per value (issue 42: a decode
plan; kbatch.values.protobuf_program builds it and holds its pure twin).

A `Program` is the plan of one message type in flat C arrays: the columns (preorder; a struct per
message node, a list per repeated field), per message node its fields (number, wire type, how the
value is read, its column, its slot) and a table from field number to field, the enums' numbers
(sorted) and names, and the defaults' bytes. `decode` runs it over a binary Arrow array of framed
values (magic byte 0, the schema id, the message indexes, the message) with the GIL released:
each message's fields are read as they come (a tag, then a varint, 4 or 8 bytes, or a length and
that many bytes), repeated ones appended to their list's items (packed or not), the others kept
in their slot until the message ends, when every field is given its row in declaration order
(the last value, else null or the default). Every length and count is checked against the bytes
left before it is used, and nesting is the plan's (no recursive type has a plan), so no value can
make it read past its bytes or recurse deeper than the type.

Anything the plan does not follow (bytes that do not parse, a group, a message set twice, a
Timestamp datetime cannot hold, a string that is not UTF-8 (each checked as read), other message
indexes) makes `decode`
return None: the caller decodes with upb, which gives the answer or names the error.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

# column kinds (protobuf_program.KINDS)
cdef enum:
    C_BOOL = 0
    C_I32 = 1
    C_U32 = 2
    C_F32 = 3
    C_I64 = 4
    C_U64 = 5
    C_F64 = 6
    C_TS = 7
    C_STR = 8
    C_BIN = 9
    C_STRUCT = 10
    C_LIST = 11
    C_MAP = 12        # offsets and two children (keys, values): Arrow's map of their entries

# how a value is read (protobuf_program.OPS)
cdef enum:
    O_VI32 = 0
    O_VI64 = 1
    O_VS32 = 2
    O_VS64 = 3
    O_VBOOL = 4
    O_VENUM = 5
    O_FIX4 = 6
    O_FIX8 = 7
    O_STR = 8
    O_BIN = 9
    O_MSG = 10

# message node outputs (protobuf_program.MODES)
cdef enum:
    M_STRUCT = 0
    M_TS = 1
    M_WRAP = 2
    M_ENTRY = 3       # a map's entry: its key and value rows (no row of its own)

cdef enum:
    E_FALLBACK = 1   # the per-message path decides (bytes that do not parse, a merge, ...)
    E_MEMORY = 12    # (_avro_buffers.h's kb_grow returns these two)
    E_LARGE = 13
    E_NOT_MINE = 4   # not framed, another schema id or other message indexes

cdef int64_t TS_MIN_S = -62135596800
cdef int64_t TS_MAX_S = 253402300799
cdef int64_t TS_MIN_US = -62135596800 * 1000000
cdef int64_t TS_MAX_US = 253402300799 * 1000000 + 999999
cdef enum:
    DENSE = 1024     # field numbers below it are found by a table, others by a scan


cdef extern from "_avro_buffers.h":
    ctypedef struct Buf "kb_buf":
        char* p
        int64_t n
        int64_t cap
    int buf_grow "kb_grow"(Buf* b, int64_t more) nogil
    void release "kb_release"(char* p, int64_t cap) nogil
    void kb_pool_init()
    int put_raw "kb_put"(Buf* b, const void* src, int64_t size) nogil


kb_pool_init()


cdef struct ColBuf:
    int kind
    int width         # bytes a value (fixed-width kinds)
    int nkids
    int kid0
    int64_t length
    int64_t nulls
    Buf data
    Buf offs
    Buf valid         # the null rows (int32 each)


cdef struct FPlan:
    int32_t number
    int wire
    int op
    int col
    int rep
    int pres
    int child
    int oneof
    int enm
    int slot
    int64_t doff
    int64_t dlen
    int item          # a repeated field's item column
    int packable      # a repeated scalar not of wire type 2: packed bytes are its items too


cdef struct MPlan:
    int mode
    int out
    int f0            # fields[f0 : f0 + nf] in declaration order
    int nf
    int d0            # dispatch[d0 : d0 + nd]: field number -> field index (-1: unknown)
    int nd
    int s0            # its slots: values[s0 : s0 + ns], has[s0 : s0 + ns]
    int ns
    int o0            # its oneofs' set slot: oneof_at[o0 : o0 + no]
    int no


cdef struct EPlan:
    int n
    int at            # enum_nums / enum_names[at : at + n], numbers sorted
    int closed


cdef struct Slot:
    uint64_t v        # the value's bits, or where its bytes start
    int64_t n         # its length (strings, bytes)


cdef struct Cur:
    ColBuf* cols
    const int* kids
    const FPlan* fields
    const MPlan* msgs
    const int* dispatch
    Slot* slots
    uint8_t* has
    int* oneof_at
    const EPlan* enums
    const int32_t* enum_nums
    const int64_t* enum_names    # (offset, length) pairs into pool
    const uint8_t* pool


# ------------------------------------------------------------------------------------ buffers
cdef inline int buf_put(Buf* b, const void* src, int64_t size) noexcept nogil:
    if size <= 0:  # (an empty string: no memcpy from or into a buffer not yet allocated)
        return 0
    return put_raw(b, src, size)


cdef inline int put_i32(Buf* b, int32_t v) noexcept nogil:
    cdef int e
    if b.n + 4 > b.cap:
        e = buf_grow(b, 4)
        if e:
            return e
    (<int32_t*>(b.p + b.n))[0] = v
    b.n += 4
    return 0


cdef inline int put_end(Buf* offs, int64_t n) noexcept nogil:
    if n > 0x7FFFFFFF:
        return E_LARGE
    return put_i32(offs, <int32_t>n)


cdef inline int put_bits(ColBuf* col, uint64_t v) noexcept nogil:
    """One fixed-width value (its low `width` bytes; little-endian, as Arrow)."""
    cdef int e
    cdef Buf* b = &col.data
    cdef int w = col.width
    if b.n + w > b.cap:
        e = buf_grow(b, w)
        if e:
            return e
    if w == 8:
        (<uint64_t*>(b.p + b.n))[0] = v
    elif w == 4:
        (<uint32_t*>(b.p + b.n))[0] = <uint32_t>v
    else:
        (<uint8_t*>(b.p + b.n))[0] = <uint8_t>(v != 0)
    b.n += w
    col.length += 1
    return 0


cdef inline int put_bytes(ColBuf* col, const void* src, int64_t n) noexcept nogil:
    cdef int e = buf_put(&col.data, src, n)
    if e:
        return e
    col.length += 1
    return put_end(&col.offs, col.data.n)


cdef int col_null(ColBuf* cols, const int* kids, int k) noexcept nogil:
    """One more null row in column k (a struct's children get one too, as Arrow wants)."""
    cdef ColBuf* col = &cols[k]
    cdef int e = 0
    cdef int i
    if col.length > 0x7FFFFFFF:
        return E_LARGE
    e = put_i32(&col.valid, <int32_t>col.length)
    if e:
        return e
    col.nulls += 1
    if col.kind == C_STR or col.kind == C_BIN:
        col.length += 1
        return put_end(&col.offs, col.data.n)
    if col.kind == C_LIST or col.kind == C_MAP:
        col.length += 1
        return put_end(&col.offs, cols[kids[col.kid0]].length)
    if col.kind == C_STRUCT:
        col.length += 1
        for i in range(col.nkids):
            e = col_null(cols, kids, kids[col.kid0 + i])
            if e:
                return e
        return 0
    return put_bits(col, 0)


# ------------------------------------------------------------------------------------ UTF-8
include "_arrow_buffers.pxi"


cdef class _Columns:
    cdef ColBuf* cols
    cdef int n

    def __dealloc__(self):
        cdef int i
        if self.cols != NULL:
            for i in range(self.n):
                release(self.cols[i].data.p, self.cols[i].data.cap)
                release(self.cols[i].offs.p, self.cols[i].offs.cap)
                release(self.cols[i].valid.p, self.cols[i].valid.cap)
        free(self.cols)

    cdef object finish(self, const int* kids, int k, typ):
        """Column k as an Arrow array of `typ`, its memory handed over."""
        import numpy as np
        import pyarrow as pa

        cdef ColBuf* c = &self.cols[k]
        cdef int64_t n = c.length
        cdef int64_t i
        nulls = c.nulls
        bitmap = None
        if nulls:
            valid = np.ones(n, np.uint8)
            valid[np.frombuffer(take(&c.valid), np.int32)] = 0
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        if c.kind == C_BOOL:
            bits = np.packbits(np.frombuffer(take(&c.data), np.uint8), bitorder="little")
            return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(bits)], null_count=nulls)
        if c.kind <= C_TS:
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.data)], null_count=nulls)
        if c.kind == C_STR or c.kind == C_BIN:
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.offs), take(&c.data)], null_count=nulls)
        if c.kind == C_STRUCT:
            children = []
            for i in range(c.nkids):
                children.append(self.finish(kids, kids[c.kid0 + i], typ.field(i).type))
            return pa.Array.from_buffers(typ, n, [bitmap], null_count=nulls, children=children)
        if c.kind == C_MAP:
            keys = self.finish(kids, kids[c.kid0], typ.key_type)
            items = self.finish(kids, kids[c.kid0 + 1], typ.item_type)
            entries = pa.StructArray.from_arrays([keys, items], fields=[typ.key_field, typ.item_field])
            return pa.Array.from_buffers(typ, n, [bitmap, take(&c.offs)], null_count=nulls, children=[entries])
        item = self.finish(kids, kids[c.kid0], typ.value_type)
        return pa.Array.from_buffers(typ, n, [bitmap, take(&c.offs)], null_count=nulls, children=[item])


# ------------------------------------------------------------------------------------ the plan
cdef class Program:
    """One message type's plan (protobuf_program.Plan: cols, msgs, enums, pool, indexes)."""
    cdef int ncols
    cdef int* kinds
    cdef int* kids
    cdef int* kid0
    cdef int* nkids
    cdef FPlan* fields
    cdef MPlan* msgs
    cdef int nmsgs
    cdef int* dispatch
    cdef int nslots       # the scratch a decode call allocates: slots (and their has flags), oneofs
    cdef int noneofs
    cdef EPlan* enums
    cdef int32_t* enum_nums
    cdef int64_t* enum_names
    cdef bytes pool
    cdef readonly bytes prefix

    def __cinit__(self, list cols, list msgs, list enums, bytes pool, list indexes):
        cdef int i, j, nk = 0, nf = 0, nd = 0, ns = 0, no = 0, ne = 0
        cdef MPlan* m
        cdef FPlan* fp
        from .framing import encode_message_indexes
        self.prefix = encode_message_indexes(indexes)
        self.ncols = len(cols)
        for kind, ks in cols:
            nk += len(ks)
        for mode, out, fs, nslot in msgs:
            nf += len(fs)
            ns += nslot
            no += 1 + max([f[7] for f in fs] + [-1])
            nd += min(DENSE, 1 + max([f[0] for f in fs] + [0]))
        for nums, names, closed in enums:
            ne += len(nums)
        names_pool = bytearray(pool)
        self.kinds = <int*>calloc(self.ncols + 1, sizeof(int))
        self.kids = <int*>calloc(nk + 1, sizeof(int))
        self.kid0 = <int*>calloc(self.ncols + 1, sizeof(int))
        self.nkids = <int*>calloc(self.ncols + 1, sizeof(int))
        self.fields = <FPlan*>calloc(nf + 1, sizeof(FPlan))
        self.msgs = <MPlan*>calloc(len(msgs) + 1, sizeof(MPlan))
        self.dispatch = <int*>calloc(nd + 1, sizeof(int))
        self.nslots = ns
        self.noneofs = no
        self.enums = <EPlan*>calloc(len(enums) + 1, sizeof(EPlan))
        self.enum_nums = <int32_t*>calloc(ne + 1, sizeof(int32_t))
        self.enum_names = <int64_t*>calloc(2 * ne + 2, sizeof(int64_t))
        if (self.kinds == NULL or self.kids == NULL or self.kid0 == NULL or self.nkids == NULL or self.fields == NULL
                or self.msgs == NULL or self.dispatch == NULL or self.enums == NULL or self.enum_nums == NULL or self.enum_names == NULL):
            raise MemoryError()
        kinds = {"bool": C_BOOL, "i32": C_I32, "u32": C_U32, "f32": C_F32, "i64": C_I64, "u64": C_U64, "f64": C_F64,
                 "ts": C_TS, "str": C_STR, "bin": C_BIN, "struct": C_STRUCT, "list": C_LIST, "map": C_MAP}
        nk = 0
        for i, (kind, ks) in enumerate(cols):
            self.kinds[i] = kinds[kind]
            self.kid0[i] = nk
            self.nkids[i] = len(ks)
            for j in ks:
                self.kids[nk] = j
                nk += 1
        ne = 0
        for i, (nums, names, closed) in enumerate(enums):
            order = sorted(range(len(nums)), key=lambda k: nums[k])
            self.enums[i].n = len(nums)
            self.enums[i].at = ne
            self.enums[i].closed = 1 if closed else 0
            for k in order:
                self.enum_nums[ne] = nums[k]
                self.enum_names[2 * ne] = len(names_pool)
                self.enum_names[2 * ne + 1] = len(names[k])
                names_pool += names[k]
                ne += 1
        self.pool = bytes(names_pool)
        self.nmsgs = len(msgs)
        nf = nd = ns = no = 0
        for i, (mode, out, fs, nslot) in enumerate(msgs):
            m = &self.msgs[i]
            m.mode = {"struct": M_STRUCT, "ts": M_TS, "wrap": M_WRAP, "entry": M_ENTRY}[mode]
            m.out = out
            m.f0 = nf
            m.nf = len(fs)
            m.d0 = nd
            m.nd = min(DENSE, 1 + max([f[0] for f in fs] + [0]))
            m.s0 = ns
            m.ns = nslot
            m.o0 = no
            m.no = 1 + max([f[7] for f in fs] + [-1])
            for j in range(m.nd):
                self.dispatch[nd + j] = -1
            for j, f in enumerate(fs):
                fp = &self.fields[nf + j]
                (fp.number, fp.wire, fp.op, fp.col, fp.rep, fp.pres, fp.child, fp.oneof, fp.enm, fp.slot, fp.doff,
                 fp.dlen) = f
                fp.item = cols[fp.col][1][0] if fp.rep else -1
                fp.packable = 1 if fp.rep and fp.wire != 2 else 0
                if fp.number < m.nd:
                    self.dispatch[nd + fp.number] = j
            nf += m.nf
            nd += m.nd
            ns += m.ns
            no += m.no

    def __dealloc__(self):
        free(self.kinds)
        free(self.kids)
        free(self.kid0)
        free(self.nkids)
        free(self.fields)
        free(self.msgs)
        free(self.dispatch)
        free(self.enums)
        free(self.enum_nums)
        free(self.enum_names)

    cdef _Columns columns(self):
        cdef _Columns c = _Columns()
        cdef int i, k
        c.n = self.ncols
        c.cols = <ColBuf*>calloc(self.ncols + 1, sizeof(ColBuf))
        if c.cols == NULL:
            raise MemoryError()
        for i in range(self.ncols):
            c.cols[i].kind = self.kinds[i]
            c.cols[i].kid0 = self.kid0[i]
            c.cols[i].nkids = self.nkids[i]
            k = self.kinds[i]
            c.cols[i].width = 1 if k == C_BOOL else (4 if k <= C_F32 else 8)
            if k == C_STR or k == C_BIN or k == C_LIST or k == C_MAP:
                if put_i32(&c.cols[i].offs, 0):
                    raise MemoryError()
        return c


# ------------------------------------------------------------------------------------ the wire
cdef extern from *:
    """
    /* A base-128 varint at *pp (kbatch.values._protobuf_kernel): always inlined, the hot path of
       every tag, length and varint value. At most 10 bytes, bits past 64 dropped (as upb does);
       0, or 1 (E_FALLBACK): the bytes end inside it, or it runs past 10 bytes. */
    static inline __attribute__((always_inline)) int kb_pb_varint(const uint8_t **pp, const uint8_t *end,
                                                                 uint64_t *out) {
        const uint8_t *p = *pp;
        uint64_t v = 0;
        int k;
        if (p < end && p[0] < 0x80) {
            *out = p[0];
            *pp = p + 1;
            return 0;
        }
        if (end - p >= 10) {  /* room for the longest: no end check a byte */
            for (k = 0; k < 10; k++) {
                uint8_t b = p[k];
                v |= (uint64_t)(b & 0x7F) << (7 * k);
                if (b < 0x80) {
                    *out = v;
                    *pp = p + k + 1;
                    return 0;
                }
            }
            return 1;
        }
        for (k = 0; k < 10 && p + k < end; k++) {
            uint8_t b = p[k];
            v |= (uint64_t)(b & 0x7F) << (7 * k);
            if (b < 0x80) {
                *out = v;
                *pp = p + k + 1;
                return 0;
            }
        }
        return 1;
    }
    """
    int kb_pb_varint(const uint8_t** pp, const uint8_t* end, uint64_t* out) nogil


cdef inline int read_varint(const uint8_t** pp, const uint8_t* end, uint64_t* out) noexcept nogil:
    """A base-128 varint (at most 10 bytes; bits past 64 dropped, as upb does): 0, or E_FALLBACK."""
    return kb_pb_varint(pp, end, out)


cdef inline int read_scalar(int op, int wire, const uint8_t** pp, const uint8_t* end, uint64_t* out) noexcept nogil:
    """One value of a scalar field, as its column's bits (an enum: its number)."""
    cdef uint64_t u
    cdef uint32_t x
    cdef uint32_t w4
    if wire == 0:
        if read_varint(pp, end, &u):
            return E_FALLBACK
        if op == O_VI64:
            out[0] = u
        elif op == O_VI32 or op == O_VENUM:
            out[0] = <uint32_t>u
        elif op == O_VS32:
            x = <uint32_t>u
            out[0] = <uint32_t>((x >> 1) ^ (0u - (x & 1)))
        elif op == O_VS64:
            out[0] = (u >> 1) ^ (0ULL - (u & 1))
        else:
            out[0] = 1 if u != 0 else 0
        return 0
    if wire == 5:
        if end - pp[0] < 4:
            return E_FALLBACK
        memcpy(&w4, pp[0], 4)
        out[0] = w4
        pp[0] += 4
        return 0
    if end - pp[0] < 8:
        return E_FALLBACK
    memcpy(out, pp[0], 8)
    pp[0] += 8
    return 0


cdef inline int skip(int wire, const uint8_t** pp, const uint8_t* end) noexcept nogil:
    cdef uint64_t n
    if wire == 0:
        return read_varint(pp, end, &n)
    if wire == 1:
        if end - pp[0] < 8:
            return E_FALLBACK
        pp[0] += 8
        return 0
    if wire == 5:
        if end - pp[0] < 4:
            return E_FALLBACK
        pp[0] += 4
        return 0
    if read_varint(pp, end, &n) or n > <uint64_t>(end - pp[0]):
        return E_FALLBACK
    pp[0] += n
    return 0


cdef int put_enum(Cur* c, ColBuf* col, const FPlan* f, uint64_t v) noexcept nogil:
    """An enum number's name into a string column; its decimal text (an open enum's unknown number);
    -1: a closed enum's unknown number (dropped)."""
    cdef const EPlan* e = &c.enums[f.enm]
    cdef int lo = 0, hi = e.n - 1, mid
    cdef int32_t num = <int32_t><uint32_t>v
    cdef char text[16]
    cdef int k = 0, neg = num < 0
    cdef int64_t a
    cdef char t
    while lo <= hi:
        mid = (lo + hi) >> 1
        if c.enum_nums[e.at + mid] == num:
            return put_bytes(col, c.pool + c.enum_names[2 * (e.at + mid)], c.enum_names[2 * (e.at + mid) + 1])
        if c.enum_nums[e.at + mid] < num:
            lo = mid + 1
        else:
            hi = mid - 1
    if e.closed:
        return -1
    a = num
    if neg:
        a = -a
    while True:
        text[k] = <char>(48 + a % 10)
        k += 1
        a //= 10
        if a == 0:
            break
    if neg:
        text[k] = 45
        k += 1
    for lo in range(k // 2):
        t = text[lo]
        text[lo] = text[k - 1 - lo]
        text[k - 1 - lo] = t
    return put_bytes(col, text, k)


cdef inline int known_enum(Cur* c, const FPlan* f, uint64_t v) noexcept nogil:
    """Does a closed enum have this number (an open one has every number)?"""
    cdef const EPlan* e = &c.enums[f.enm]
    cdef int lo = 0, hi = e.n - 1, mid
    cdef int32_t num = <int32_t><uint32_t>v
    if not e.closed:
        return 1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if c.enum_nums[e.at + mid] == num:
            return 1
        if c.enum_nums[e.at + mid] < num:
            lo = mid + 1
        else:
            hi = mid - 1
    return 0


cdef inline int put_item(Cur* c, const FPlan* f, uint64_t v) noexcept nogil:
    """A repeated scalar's item."""
    cdef ColBuf* col = &c.cols[f.item]
    cdef int e
    if f.op == O_VENUM:
        e = put_enum(c, col, f, v)
        return 0 if e == -1 else e
    return put_bits(col, v)


cdef int emit(Cur* c, const FPlan* f, const Slot* s) noexcept nogil:
    """A non-repeated scalar's row from its slot."""
    cdef ColBuf* col = &c.cols[f.col]
    if f.op == O_STR or f.op == O_BIN:
        return put_bytes(col, <const void*><uintptr_t>s.v, s.n)
    if f.op == O_VENUM:
        return put_enum(c, col, f, s.v)
    return put_bits(col, s.v)


cdef int emit_default(Cur* c, const FPlan* f) noexcept nogil:
    cdef ColBuf* col = &c.cols[f.col]
    cdef uint64_t v = 0
    if col.kind == C_STR or col.kind == C_BIN:
        return put_bytes(col, c.pool + f.doff, f.dlen)
    memcpy(&v, c.pool + f.doff, f.dlen)
    return put_bits(col, v)


cdef inline uint64_t key_hash(const ColBuf* k, int64_t i) noexcept nogil:
    cdef uint64_t h = 1469598103934665603ULL
    cdef int64_t j, lo, hi
    cdef uint64_t v = 0
    if k.kind == C_STR:
        lo = (<const int32_t*>k.offs.p)[i]
        hi = (<const int32_t*>k.offs.p)[i + 1]
        for j in range(lo, hi):
            h = (h ^ <uint8_t>k.data.p[j]) * 1099511628211ULL
        return h
    memcpy(&v, k.data.p + i * k.width, k.width)
    return (v ^ (v >> 29)) * 0xBF58476D1CE4E5B9ULL


cdef inline bint key_same(const ColBuf* k, int64_t a, int64_t b) noexcept nogil:
    cdef const int32_t* o
    if k.kind == C_STR:
        o = <const int32_t*>k.offs.p
        return o[a + 1] - o[a] == o[b + 1] - o[b] and (o[a + 1] == o[a] or
                                                       memcmp(k.data.p + o[a], k.data.p + o[b], o[a + 1] - o[a]) == 0)
    return memcmp(k.data.p + a * k.width, k.data.p + b * k.width, k.width) == 0


cdef int twice(Cur* c, const FPlan* f) noexcept nogil:
    """Does the map field's value of the message ending now hold a key twice? (Its entries: the
    key column's rows since the map column's last offset.)"""
    cdef const ColBuf* mc = &c.cols[f.col]
    cdef const ColBuf* k = &c.cols[f.item]
    cdef int64_t lo = (<const int32_t*>mc.offs.p)[mc.length]
    cdef int64_t hi = k.length
    cdef int64_t m = hi - lo, i, j, size
    cdef int64_t* table
    cdef uint64_t h
    if m < 2:
        return 0
    if m <= 16:
        for i in range(lo, hi):
            for j in range(i + 1, hi):
                if key_same(k, i, j):
                    return 1
        return 0
    size = 32
    while size < 2 * m:
        size *= 2
    table = <int64_t*>malloc(size * sizeof(int64_t))
    if table == NULL:
        return 1  # (the per-message path then decides)
    for i in range(size):
        table[i] = -1
    for i in range(lo, hi):
        h = key_hash(k, i) & <uint64_t>(size - 1)
        while table[h] >= 0:
            if key_same(k, table[h], i):
                free(table)
                return 1
            h = (h + 1) & <uint64_t>(size - 1)
        table[h] = i
    free(table)
    return 0


cdef int parse(Cur* c, int m, const uint8_t* p, const uint8_t* end) noexcept nogil:
    """One message of node m, p..end its bytes: its rows (see the module's doc)."""
    cdef const MPlan* mp = &c.msgs[m]
    cdef const FPlan* fs = c.fields + mp.f0
    cdef const FPlan* f
    cdef Slot* slots = c.slots + mp.s0
    cdef uint8_t* has = c.has + mp.s0
    cdef int* oneof_at = c.oneof_at + mp.o0
    cdef uint64_t tag, n, v
    cdef uint32_t number
    cdef int wire, i, e, prev
    cdef const uint8_t* q
    cdef const uint8_t* qend
    cdef int64_t secs, us, nanos
    memset(has, 0, mp.ns)
    for i in range(mp.no):
        oneof_at[i] = -1
    while p < end:
        if read_varint(&p, end, &tag) or tag > 0xFFFFFFFFULL:
            return E_FALLBACK
        number = <uint32_t>(tag >> 3)
        wire = <int>(tag & 7)
        if number == 0 or wire == 3 or wire == 4 or wire > 5:
            return E_FALLBACK  # a group (upb skips or refuses it), or bytes that do not parse
        i = -1
        if number < <uint32_t>mp.nd:
            i = c.dispatch[mp.d0 + number]
        else:
            for e in range(mp.nf):
                if <uint32_t>fs[e].number == number:
                    i = e
                    break
        if i < 0 or (wire != fs[i].wire and not (fs[i].packable and wire == 2)):
            if mp.mode == M_ENTRY:
                return E_FALLBACK  # upb keeps an entry with unknown fields out of the map (among the message's)
            if skip(wire, &p, end):  # unknown, or the wrong wire type: upb keeps it among the unknown fields
                return E_FALLBACK
            continue
        f = &fs[i]
        if wire != f.wire:  # packed items
            if read_varint(&p, end, &n) or n > <uint64_t>(end - p):
                return E_FALLBACK
            q = p
            qend = p + n
            p = qend
            while q < qend:
                if read_scalar(f.op, f.wire, &q, qend, &v):
                    return E_FALLBACK
                e = put_item(c, f, v)
                if e:
                    return e
            continue
        if wire == 2:
            if read_varint(&p, end, &n) or n > <uint64_t>(end - p):
                return E_FALLBACK
            q = p
            p += n
            if f.op == O_MSG:
                if not f.rep:
                    if has[f.slot] or (f.oneof >= 0 and oneof_at[f.oneof] >= 0):
                        return E_FALLBACK  # set twice: Protobuf merges (or clears a oneof's member)
                    has[f.slot] = 1
                    if f.oneof >= 0:
                        oneof_at[f.oneof] = f.slot
                e = parse(c, f.child, q, p)
                if e:
                    return e
                continue
            if f.op == O_STR and n and not utf8_valid(q, <int64_t>n):
                return E_FALLBACK  # upb refuses it in proto3 and gives bytes in proto2: its answer
            if f.rep:
                e = put_bytes(&c.cols[f.item], q, <int64_t>n)
                if e:
                    return e
                continue
            slots[f.slot].v = <uint64_t><uintptr_t>q
            slots[f.slot].n = <int64_t>n
        else:
            if read_scalar(f.op, wire, &p, end, &v):
                return E_FALLBACK
            if f.rep:
                e = put_item(c, f, v)
                if e:
                    return e
                continue
            if f.op == O_VENUM and not known_enum(c, f, v):
                if mp.mode == M_ENTRY:
                    return E_FALLBACK  # upb keeps the whole entry among the unknown fields
                continue  # a closed enum's unknown number: the field keeps what it had
            slots[f.slot].v = v
        if f.oneof >= 0:
            prev = oneof_at[f.oneof]
            if prev >= 0 and prev != f.slot:
                for e in range(mp.nf):
                    if fs[e].slot == prev and not fs[e].rep:
                        if fs[e].op == O_MSG:
                            return E_FALLBACK  # a message member replaced: its rows are written
                        break
                has[prev] = 0
            oneof_at[f.oneof] = f.slot
        has[f.slot] = 1
    # the message ends: every field's row, in declaration order
    if mp.mode == M_TS:
        secs = <int64_t>slots[0].v if has[0] else 0
        nanos = <int32_t><uint32_t>slots[1].v if has[1] else 0  # (int64: -nanos cannot overflow)
        if secs < TS_MIN_S or secs > TS_MAX_S:
            return E_FALLBACK
        us = secs * 1000000 + (nanos // 1000 if nanos >= 0 else -((-nanos + 999) // 1000))
        if us < TS_MIN_US or us > TS_MAX_US:
            return E_FALLBACK  # datetime cannot hold it: the per-message path says so
        return put_bits(&c.cols[mp.out], <uint64_t>us)
    for i in range(mp.nf):
        f = &fs[i]
        if f.rep:
            if c.cols[f.col].kind == C_MAP and twice(c, f):
                return E_FALLBACK  # a key twice: upb keeps the last, where its hash table puts it
            e = put_end(&c.cols[f.col].offs, c.cols[f.item].length)
            c.cols[f.col].length += 1
        elif f.op == O_MSG:
            if has[f.slot]:
                e = 0
            elif f.pres:
                e = col_null(c.cols, c.kids, f.col)
            else:
                e = parse(c, f.child, NULL, NULL)  # a map's absent message value: the empty message
        elif has[f.slot]:
            e = emit(c, f, &slots[f.slot])
        elif f.pres:
            e = col_null(c.cols, c.kids, f.col)
        else:
            e = emit_default(c, f)
        if e:
            return e
    if mp.mode == M_STRUCT:
        c.cols[mp.out].length += 1
    return 0


def decode(Program prog, typ, const uint8_t[::1] data, const int32_t[::1] offsets, valid, Py_ssize_t n,
           int32_t schema_id):
    """Rows [0, n) of a binary Arrow array (data, offsets, validity as a numpy uint8 array or None),
    every valid one framed with `schema_id` and the plan's message indexes -> an Arrow array of
    `typ`; None when a value needs the per-message path (see the module's doc)."""
    cdef _Columns cols = prog.columns()
    cdef Cur c
    cdef Py_ssize_t r
    cdef int32_t lo, hi, sid
    cdef int status = 0
    cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
    cdef const uint8_t[::1] v = valid if valid is not None else None
    cdef const uint8_t* vp = &v[0] if v is not None and v.shape[0] else NULL
    cdef const int32_t* op = &offsets[0]
    cdef const uint8_t* prefix = <const uint8_t*><char*>prog.prefix
    cdef Py_ssize_t plen = len(prog.prefix)
    memset(&c, 0, sizeof(Cur))
    c.cols = cols.cols
    c.kids = prog.kids
    c.fields = prog.fields
    c.msgs = prog.msgs
    c.dispatch = prog.dispatch
    # the scratch is the call's own: a plan decodes in several threads at once (the GIL is released)
    c.slots = <Slot*>calloc(prog.nslots + 1, sizeof(Slot))
    c.has = <uint8_t*>calloc(prog.nslots + 1, 1)
    c.oneof_at = <int*>calloc(prog.noneofs + 1, sizeof(int))
    if c.slots == NULL or c.has == NULL or c.oneof_at == NULL:
        free(c.slots)
        free(c.has)
        free(c.oneof_at)
        raise MemoryError()
    c.enums = prog.enums
    c.enum_nums = prog.enum_nums
    c.enum_names = prog.enum_names
    c.pool = <const uint8_t*><char*>prog.pool
    with nogil:
        for r in range(n):
            if vp != NULL and not vp[r]:
                status = col_null(c.cols, c.kids, 0)
                if status:
                    break
                continue
            lo = op[r]
            hi = op[r + 1]
            if hi - lo < 5 + plen or base[lo] != 0:
                status = E_NOT_MINE
                break
            sid = <int32_t>((<uint32_t>base[lo + 1] << 24) | (<uint32_t>base[lo + 2] << 16) |
                            (<uint32_t>base[lo + 3] << 8) | <uint32_t>base[lo + 4])
            if sid != schema_id or memcmp(base + lo + 5, prefix, plen) != 0:
                status = E_NOT_MINE
                break
            status = parse(&c, 0, base + lo + 5 + plen, base + hi)
            if status:
                break
    free(c.slots)
    free(c.has)
    free(c.oneof_at)
    if status == E_MEMORY:
        raise MemoryError()
    if status == E_LARGE:
        raise OverflowError("a Protobuf column larger than 2 GiB: decode fewer rows at a time")
    if status:
        return None
    return cols.finish(prog.kids, 0, typ)
