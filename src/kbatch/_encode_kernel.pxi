# ColumnsEncoderV2: the Cython twin of kbatch._core_py.ColumnsEncoderV2 (the contract), included at
# the end of _core.pyx. Arrow buffers in, magic 2 batches out, no Python object per row.
#
# One nogil loop (_ce_run) runs twice per call with the same decisions: first to check every row
# and size the output exactly (nothing written, nothing changed), then to write the batches into
# a bytes object of that size, filling each header and CRC as the batch closes. The batch left
# open at the end of a call keeps its records in the encoder's carry buffer for the next call.
# The Arrow arrays are read through the twin's checks (encode_setup), so both backends accept and
# refuse the same arguments; the loop checks each row's offsets against its buffers.

from cpython.bytes cimport PyBytes_AS_STRING
from libc.string cimport memcpy as _ce_memcpy

cdef extern from "_hugepages.h" nogil:
    void kb_hugepages(void *p, size_t n)


cdef struct _CeBin:        # a binary/string column (or a header key/value column)
    const uint8_t *data
    int64_t data_len
    const void *offs
    bint wide              # int64 offsets (large_binary / large_string)
    const uint8_t *valid   # NULL: no nulls
    int64_t origin
    bint present           # False: every element null


cdef struct _CeCols:
    _CeBin key
    _CeBin value
    _CeBin hkey
    _CeBin hval
    const int64_t *ts
    const uint8_t *ts_valid
    int64_t ts_origin
    int64_t ts_div
    bint has_ts
    const uint8_t *tomb
    const uint8_t *tomb_valid
    int64_t tomb_origin
    bint has_tomb
    const void *hl_offs
    bint hl_wide
    const uint8_t *hl_valid
    int64_t hl_origin
    const uint8_t *hs_valid
    int64_t hs_origin
    int64_t hs_length
    bint has_hdr
    const int64_t *offv
    const uint8_t *off_valid
    int64_t off_origin
    bint has_off


cdef struct _CeConf:
    int64_t rpb, max_bytes, no_ts, pid, lat_ts
    int32_t ple
    int16_t attrs, epoch
    bint extended, lat, crc


cdef struct _CeState:      # what a call changes; committed only when the call succeeds
    int64_t rows, last_off, sequence, count, base_off, base_ts, max_ts, sec_len
    bint have_last


cdef struct _CeErr:
    int code
    int64_t row, a, b


cdef struct _CeRow:
    const uint8_t *k
    int64_t klen           # -1: null
    const uint8_t *v
    int64_t vlen
    int64_t ts, nh, hbytes, h_lo
    uint8_t attrs


cdef inline bint _ce_null(const uint8_t *valid, int64_t k) noexcept nogil:
    return valid != NULL and not ((valid[k >> 3] >> (k & 7)) & 1)


cdef inline int64_t _ce_off(const void *offs, bint wide, int64_t k) noexcept nogil:
    if wide:
        return (<const int64_t *>offs)[k]
    return (<const int32_t *>offs)[k]


cdef inline int _ce_get(const _CeBin *c, int64_t i, const uint8_t **p, int64_t *n) noexcept nogil:
    """Element i (n = -1 when null); -1 when its offsets leave the data buffer."""
    cdef int64_t k = c.origin + i, lo, hi
    p[0] = NULL  # both outputs set on every path: callers may skip the status where it was checked before
    n[0] = -1
    if not c.present or _ce_null(c.valid, k):
        return 0
    lo = _ce_off(c.offs, c.wide, k)
    hi = _ce_off(c.offs, c.wide, k + 1)
    if lo < 0 or hi < lo or hi > c.data_len:
        return -1
    p[0] = c.data + lo
    n[0] = hi - lo
    return 0


cdef inline int _ce_fail(_CeErr *err, int code, int64_t row, int64_t a, int64_t b) noexcept nogil:
    err.code = code
    err.row = row
    err.a = a
    err.b = b
    return -1


cdef inline int64_t _ce_blob_size(int64_t n) noexcept nogil:
    return 1 if n < 0 else _uvarint_size(_zigzag64(n)) + n


cdef inline int _ce_read_row(const _CeCols *c, const _CeConf *f, int64_t i, int64_t row, _CeRow *r,
                      _CeErr *err) noexcept nogil:
    """Row i's fields, checked in the twin's order; its headers are sized, not copied."""
    cdef int64_t v, q, a, b, j, kl, vl
    cdef const uint8_t *p
    cdef bint tomb
    if _ce_get(&c.key, i, &r.k, &r.klen) < 0:
        return _ce_fail(err, 8, row, 0, i)
    if _ce_get(&c.value, i, &r.v, &r.vlen) < 0:
        return _ce_fail(err, 8, row, 1, i)
    if not c.has_ts or _ce_null(c.ts_valid, c.ts_origin + i):
        r.ts = f.no_ts
    else:
        v = c.ts[c.ts_origin + i]
        # constant divisors (a multiply, not a divide instruction); C truncates, Python's // floors
        if c.ts_div == 1:
            q = v
        elif c.ts_div == 1000:
            q = v / 1000
            if q * 1000 != v and v < 0:
                q -= 1
        else:
            q = v / 1000000
            if q * 1000000 != v and v < 0:
                q -= 1
        r.ts = q
        if f.extended and q == INT64_MIN:
            return _ce_fail(err, 4, row, 0, 0)
    if not c.has_tomb or _ce_null(c.tomb_valid, c.tomb_origin + i):
        tomb = r.vlen < 0
    else:
        tomb = (c.tomb[(c.tomb_origin + i) >> 3] >> ((c.tomb_origin + i) & 7)) & 1
        if not tomb and r.vlen < 0:
            return _ce_fail(err, 1, row, 0, 0)
    r.attrs = RECORD_TOMBSTONE_FLAG_MASK if tomb else 0
    r.nh = 0
    r.hbytes = 0
    r.h_lo = 0
    if c.has_hdr and not _ce_null(c.hl_valid, c.hl_origin + i):
        a = _ce_off(c.hl_offs, c.hl_wide, c.hl_origin + i)
        b = _ce_off(c.hl_offs, c.hl_wide, c.hl_origin + i + 1)
        if a < 0 or b < a or b > c.hs_length:
            return _ce_fail(err, 8, row, 4, i)
        for j in range(a, b):
            if _ce_null(c.hs_valid, c.hs_origin + j):
                return _ce_fail(err, 3, row, 0, 0)
            if _ce_get(&c.hkey, j, &p, &kl) < 0:
                return _ce_fail(err, 8, row, 5, j)
            if kl < 0:
                return _ce_fail(err, 2, row, 0, 0)
            if _ce_get(&c.hval, j, &p, &vl) < 0:
                return _ce_fail(err, 8, row, 6, j)
            r.hbytes += _ce_blob_size(kl) + _ce_blob_size(vl)
        r.nh = b - a
        r.h_lo = a
    return 0


cdef inline int64_t _ce_body_size(const _CeRow *r, uint64_t tsd, uint64_t offd) noexcept nogil:
    return (1 + _uvarint_size(tsd) + _uvarint_size(offd) + _ce_blob_size(r.klen) + _ce_blob_size(r.vlen)
            + _uvarint_size(_zigzag64(r.nh)) + r.hbytes)


cdef inline uint8_t *_ce_blob(uint8_t *o, const uint8_t *p, int64_t n) noexcept nogil:
    if n < 0:
        o[0] = 1  # varint -1
        return o + 1
    o += _put_unsigned(_zigzag64(n), o)
    _ce_memcpy(o, p, n)
    return o + n


cdef inline uint8_t *_ce_write(uint8_t *o, const _CeCols *c, const _CeRow *r, int64_t body, uint64_t tsd,
                        uint64_t offd) noexcept nogil:
    """One record (DefaultRecord.writeTo's layout) at o; returns the end."""
    cdef int64_t j, kl, vl
    cdef const uint8_t *kp
    cdef const uint8_t *vp
    o += _put_unsigned(_zigzag64(body), o)
    o[0] = r.attrs
    o += 1
    o += _put_unsigned(tsd, o)
    o += _put_unsigned(offd, o)
    o = _ce_blob(o, r.k, r.klen)
    o = _ce_blob(o, r.v, r.vlen)
    o += _put_unsigned(_zigzag64(r.nh), o)
    for j in range(r.h_lo, r.h_lo + r.nh):
        _ce_get(&c.hkey, j, &kp, &kl)  # checked by _ce_read_row
        _ce_get(&c.hval, j, &vp, &vl)
        o = _ce_blob(o, kp, kl)
        o = _ce_blob(o, vp, vl)
    return o


cdef inline void _ce_be(uint8_t *p, uint64_t v, int n) noexcept nogil:
    cdef int i
    for i in range(n - 1, -1, -1):
        p[i] = <uint8_t>(v & 0xFF)
        v >>= 8


cdef void _ce_header(uint8_t *h, const _CeConf *f, _CeState s) noexcept nogil:
    """The 61-byte header of the batch in s, whose records follow it; CRC when uncompressed
    (DefaultRecordBatch's field order; _wire.py has the offsets)."""
    _ce_be(h, <uint64_t>s.base_off, 8)                                              # baseOffset
    _ce_be(h + 8, <uint64_t>(RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + s.sec_len), 4)  # batchLength
    _ce_be(h + 12, <uint32_t>f.ple, 4)                                              # partitionLeaderEpoch
    h[MAGIC_OFFSET] = 2
    _ce_be(h + CRC_OFFSET, 0, 4)
    _ce_be(h + ATTRIBUTES_OFFSET, <uint16_t>f.attrs, 2)
    _ce_be(h + 23, <uint64_t>(s.last_off - s.base_off), 4)                          # lastOffsetDelta
    _ce_be(h + 27, <uint64_t>s.base_ts, 8)                                          # baseTimestamp
    _ce_be(h + 35, <uint64_t>(f.lat_ts if f.lat else s.max_ts), 8)                  # maxTimestamp
    _ce_be(h + 43, <uint64_t>f.pid, 8)                                              # producerId
    _ce_be(h + 51, <uint16_t>f.epoch, 2)                                            # producerEpoch
    _ce_be(h + 53, <uint32_t><int32_t>s.sequence, 4)                                # baseSequence
    _ce_be(h + 57, <uint32_t>s.count, 4)                                            # recordsCount
    if f.crc:
        _ce_be(h + CRC_OFFSET, kb_crc32c(0, h + ATTRIBUTES_OFFSET,
                                         RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET + s.sec_len), 4)


cdef inline void _ce_next_sequence(_CeState *s) noexcept nogil:
    # DefaultRecordBatch.incrementSequence; NO_SEQUENCE (< 0) stays
    if s.sequence >= 0:
        if s.sequence > 2147483647 - s.count:
            s.sequence = s.count - (2147483647 - s.sequence) - 1
        else:
            s.sequence += s.count


cdef int _ce_run(const _CeCols *c, const _CeConf *f, _CeState *s, int64_t n, bint final, bint write,
                 uint8_t *out, int64_t out_cap, int64_t *ends, int64_t n_closed, uint8_t *carry,
                 int64_t carry_cap, int64_t *o_total, int64_t *o_closed, int64_t *o_carry,
                 _CeErr *err) noexcept nogil:
    """Encode n rows from state st. Sizing (write=0): o_total = bytes of the batches that close,
    o_closed = their number, o_carry = bytes the open batch will hold in the carry buffer.
    Writing (write=1, after sizing with the same state): batches that close go to out (ends[k] =
    end of batch k), the one left open to carry. The two runs make the same decisionst."""
    cdef int64_t i, row, off, body, rec, pos = 0, hdr = 0, closed = 0, total = 0, carry_add = 0
    cdef uint64_t tsd, offd
    cdef _CeRow r
    cdef uint8_t *dst = NULL   # (write) where the open batch's records start
    cdef bint to_out = False
    # the state and limits in locals: the byte writes below may alias any memory, so fields read
    # through pointers would be reloaded after each of them
    cdef _CeState st = s[0]
    cdef _CeCols cl = c[0]  # the columns too (and read_row, write inlined): a measured 4 % of the kernel
    cdef int64_t rpb = f.rpb, max_bytes = f.max_bytes, no_ts = f.no_ts
    c = &cl
    if write and st.count > 0:
        if n_closed > 0:      # the carried batch closes in this call: it moves to out first
            if RECORD_BATCH_OVERHEAD + st.sec_len > out_cap:
                return _ce_fail(err, 10, st.rows, 0, 0)
            _ce_memcpy(out + RECORD_BATCH_OVERHEAD, carry, st.sec_len)
            hdr = 0
            pos = RECORD_BATCH_OVERHEAD + st.sec_len
            dst = out + RECORD_BATCH_OVERHEAD
            to_out = True
        else:
            dst = carry
    for i in range(n):
        row = st.rows + i
        if _ce_read_row(c, f, i, row, &r, err) < 0:
            return -1
        if c.has_off:
            if _ce_null(c.off_valid, c.off_origin + i):
                return _ce_fail(err, 5, row, 0, 0)
            off = c.offv[c.off_origin + i]
            if st.have_last and off <= st.last_off:
                return _ce_fail(err, 6, row, st.last_off, off)
        elif not st.have_last:
            off = st.base_off  # base_offset, kept there until the first row
        elif st.last_off == INT64_MAX:
            return _ce_fail(err, 9, row, 0, 0)
        else:
            off = st.last_off + 1
        while True:
            if st.count > 0 and (st.count >= rpb or <uint64_t>(off - st.base_off) > <uint64_t>2147483647):
                pass  # closes below
            else:
                if st.count > 0:
                    tsd = _zigzag64(<int64_t>(<uint64_t>r.ts - <uint64_t>st.base_ts))
                    offd = _zigzag64(off - st.base_off)
                else:
                    tsd = 0
                    offd = 0
                body = _ce_body_size(&r, tsd, offd)
                rec = _uvarint_size(_zigzag64(body)) + body
                if RECORD_BATCH_OVERHEAD + st.sec_len + rec <= max_bytes:
                    break
                if st.count == 0:
                    return _ce_fail(err, 7, row, RECORD_BATCH_OVERHEAD + rec, max_bytes)
            # close the open batch, then place the row again from a new one
            if write:
                if to_out:
                    _ce_header(out + hdr, f, st)
                    ends[closed] = pos
                else:
                    return _ce_fail(err, 10, row, 0, 0)
            total += RECORD_BATCH_OVERHEAD + st.sec_len
            closed += 1
            _ce_next_sequence(&st)
            st.count = 0
            st.sec_len = 0
        if st.count == 0:
            st.base_off = off
            st.base_ts = r.ts
            st.max_ts = no_ts
            carry_add = 0
            if write:
                if closed < n_closed:
                    if pos + RECORD_BATCH_OVERHEAD > out_cap:
                        return _ce_fail(err, 10, row, 0, 0)
                    hdr = pos
                    pos += RECORD_BATCH_OVERHEAD
                    dst = out + pos
                    to_out = True
                else:
                    dst = carry
                    to_out = False
        if write:
            if to_out:
                if pos + rec > out_cap:
                    return _ce_fail(err, 10, row, 0, 0)
                _ce_write(out + pos, c, &r, body, tsd, offd)
                pos += rec
            else:
                if st.sec_len + rec > carry_cap:
                    return _ce_fail(err, 10, row, 0, 0)
                _ce_write(carry + st.sec_len, c, &r, body, tsd, offd)
        st.sec_len += rec
        carry_add += rec
        st.count += 1
        if r.ts > st.max_ts:
            st.max_ts = r.ts
        st.last_off = off
        st.have_last = True
    if final and st.count > 0:
        if write:
            if not to_out:
                return _ce_fail(err, 10, st.rows + n, 0, 0)
            _ce_header(out + hdr, f, st)
            ends[closed] = pos
        total += RECORD_BATCH_OVERHEAD + st.sec_len
        closed += 1
        _ce_next_sequence(&st)
        st.count = 0
        st.sec_len = 0
        carry_add = 0
    st.rows += n
    s[0] = st
    o_total[0] = total
    o_closed[0] = closed
    o_carry[0] = carry_add
    return 0


cdef int _ce_bin(_CeBin *b, object col) except -1:
    """Point b at a checked _Col (kbatch._core_py) of a binary column; None: every row null."""
    if col is None:
        b.present = False
        b.data = NULL
        b.data_len = 0
        b.offs = NULL
        b.wide = False
        b.valid = NULL
        b.origin = 0
        return 0
    b.present = True
    b.data = <const uint8_t *>cnp.PyArray_DATA(col.data)
    b.data_len = col.data.shape[0]
    b.offs = <const void *>cnp.PyArray_DATA(col.offsets)
    b.wide = col.offsets.dtype.itemsize == 8
    b.valid = _ce_bitmap(col.valid)
    b.origin = col.origin
    return 0


# Statements, not `NULL if x is None else <const T *>...`: Cython gives such an expression a
# temporary without the const, and the C compiler warns that the cast's const is discarded.
cdef inline const uint8_t *_ce_bitmap(object valid):
    if valid is None:
        return NULL
    return <const uint8_t *>cnp.PyArray_DATA(valid)


cdef inline const void *_ce_data(object col):
    """The data buffer of a checked _Col, NULL for None."""
    if col is None:
        return NULL
    return <const void *>cnp.PyArray_DATA(col.data)


cdef inline const uint8_t *_ce_valid(object col):
    """The validity bitmap of a checked _Col, NULL for None (no column) or no nulls."""
    if col is None:
        return NULL
    return _ce_bitmap(col.valid)


@cython.final
cdef class ColumnsEncoderV2:
    """Arrow columns -> magic 2 record batches; the contract is kbatch._core_py.ColumnsEncoderV2."""
    cdef _CeConf f
    cdef _CeState s
    cdef _Out carry
    cdef readonly object base_offset, attributes, records_per_batch, max_batch_bytes, producer_id
    cdef readonly object producer_epoch, base_sequence, partition_leader_epoch, log_append_time

    def __cinit__(self):
        self.carry.buf = NULL
        self.carry.len = self.carry.cap = 0

    def __dealloc__(self):
        free(self.carry.buf)

    def __init__(self, base_offset, attributes, records_per_batch, max_batch_bytes, producer_id=-1,
                 producer_epoch=-1, base_sequence=-1, partition_leader_epoch=-1, log_append_time=None):
        t = _py.ColumnsEncoderV2(base_offset, attributes, records_per_batch, max_batch_bytes, producer_id,
                                 producer_epoch, base_sequence, partition_leader_epoch, log_append_time)
        # the twin checked every argument; keep its values
        self.base_offset, self.attributes, self.records_per_batch = t.base_offset, t.attributes, t.records_per_batch
        self.max_batch_bytes, self.producer_id, self.producer_epoch = t.max_batch_bytes, t.producer_id, t.producer_epoch
        self.base_sequence, self.partition_leader_epoch = t.base_sequence, t.partition_leader_epoch
        self.log_append_time = t.log_append_time
        self.f.rpb = t.records_per_batch
        self.f.max_bytes = t.max_batch_bytes
        self.f.no_ts = t.no_timestamp
        self.f.pid = t.producer_id
        self.f.ple = t.partition_leader_epoch
        self.f.attrs = t.attributes
        self.f.epoch = t.producer_epoch
        self.f.extended = t.extended
        self.f.lat = (t.attributes & W.TIMESTAMP_TYPE_MASK) != 0
        self.f.lat_ts = 0 if t.log_append_time is None else t.log_append_time
        self.f.crc = (t.attributes & W.COMPRESSION_CODEC_MASK) == 0
        self.s.rows = 0
        self.s.last_off = 0
        self.s.have_last = False
        self.s.sequence = t.base_sequence
        self.s.count = 0
        self.s.base_off = t.base_offset  # the first row's offset without an offset column
        self.s.base_ts = 0
        self.s.max_ts = t.no_timestamp
        self.s.sec_len = 0
        self.carry.len = 0

    @property
    def rows(self):
        return self.s.rows

    @property
    def last_offset(self):
        return self.s.last_off if self.s.have_last else None

    @property
    def sequence(self):
        return self.s.sequence

    @property
    def pending(self):
        return self.s.count

    def encode(self, n, key, value, timestamp, ts_divisor, tombstone, headers, offset, final=False):
        """Encode n rows; (data, ends) of the batches they close (see the twin)."""
        n_, div, kc, vc, tc, bc, oc, hl, hs, hk, hv = _py.encode_setup(
            n, ts_divisor, key, value, timestamp, tombstone, headers, offset, self.s.rows)
        cdef _CeCols c
        _ce_bin(&c.key, kc)
        _ce_bin(&c.value, vc)
        c.has_ts = tc is not None
        c.ts = <const int64_t *>_ce_data(tc)
        c.ts_valid = _ce_valid(tc)
        c.ts_origin = 0 if tc is None else tc.origin
        c.ts_div = div
        c.has_tomb = bc is not None
        c.tomb = <const uint8_t *>_ce_data(bc)
        c.tomb_valid = _ce_valid(bc)
        c.tomb_origin = 0 if bc is None else bc.origin
        c.has_off = oc is not None
        c.offv = <const int64_t *>_ce_data(oc)
        c.off_valid = _ce_valid(oc)
        c.off_origin = 0 if oc is None else oc.origin
        c.has_hdr = hl is not None
        if hl is not None:
            c.hl_offs = <const void *>cnp.PyArray_DATA(hl.offsets)
            c.hl_wide = hl.offsets.dtype.itemsize == 8
            c.hl_valid = _ce_bitmap(hl.valid)
            c.hl_origin = hl.origin
            c.hs_valid = _ce_bitmap(hs.valid)
            c.hs_origin = hs.origin
            c.hs_length = hs.length
        _ce_bin(&c.hkey, hk)
        _ce_bin(&c.hval, hv)
        cdef int64_t rows = n_, total = 0, closed = 0, carry_add = 0, unused = 0
        cdef bint fin = bool(final)
        cdef _CeState plan = self.s
        cdef _CeErr err
        cdef int rc
        err.code = 0
        with nogil:
            rc = _ce_run(&c, &self.f, &plan, rows, fin, False, NULL, 0, NULL, 0, NULL, 0, &total, &closed,
                         &carry_add, &err)
        if rc < 0:
            _py._raise_encode(err.code, err.row, err.a, err.b)
        # room for the open batch's records; the carried ones stay in place unless they move to out
        _out_reserve(&self.carry, self.s.sec_len + carry_add - self.carry.len)
        data = PyBytes_FromStringAndSize(NULL, total)
        ends_a = np.empty(closed, np.int64)
        cdef int64_t[::1] ends_m = ends_a
        cdef uint8_t *out = <uint8_t *>PyBytes_AS_STRING(data)
        if total >= (<int64_t>8 << 20):  # a large new output: faulted in 2 MiB at a time, not 4 KiB
            kb_hugepages(out, total)
        cdef int64_t dummy64 = 0
        cdef _CeState st = self.s
        with nogil:
            rc = _ce_run(&c, &self.f, &st, rows, fin, True, out, total, &ends_m[0] if closed else &dummy64,
                         closed, self.carry.buf, self.carry.cap, &unused, &unused, &unused, &err)
        if rc < 0:  # only if the arrays changed between the runs
            raise RuntimeError("kbatch: the Arrow buffers changed while ColumnsEncoderV2 read them")
        self.s = st
        self.carry.len = st.sec_len if st.count else 0
        return data, ends_a

    def flush(self):
        """Close the open batch: (data, ends) as encode returns them (empty when none is open)."""
        if self.s.count == 0:
            return b"", np.empty(0, np.int64)
        data = PyBytes_FromStringAndSize(NULL, RECORD_BATCH_OVERHEAD + self.s.sec_len)
        cdef uint8_t *out = <uint8_t *>PyBytes_AS_STRING(data)
        _ce_memcpy(out + RECORD_BATCH_OVERHEAD, self.carry.buf, self.s.sec_len)
        _ce_header(out, &self.f, self.s)
        _ce_next_sequence(&self.s)
        self.s.count = 0
        self.s.sec_len = 0
        self.carry.len = 0
        return data, np.array([len(data)], np.int64)


# ------------------------------------------------------------------------------------ key partitioner
@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _mm2_loop(const _CeBin *c, int64_t n, int32_t *out, int64_t *bad) noexcept nogil:
    """Kafka's Utils.murmur2 of each element (uint32 arithmetic wraps as Java's int does)."""
    cdef int64_t i, j, length, tail
    cdef const uint8_t *p
    cdef uint32_t h, k, m = 0x5BD1E995
    for i in range(n):
        if _ce_get(c, i, &p, &length) < 0:
            bad[0] = i
            return -1
        if length < 0:
            out[i] = 0
            continue
        h = <uint32_t>0x9747B28C ^ <uint32_t>length
        tail = length - length % 4
        j = 0
        while j < tail:
            k = p[j] | (<uint32_t>p[j + 1] << 8) | (<uint32_t>p[j + 2] << 16) | (<uint32_t>p[j + 3] << 24)
            k *= m
            k ^= k >> 24
            k *= m
            h *= m
            h ^= k
            j += 4
        if length % 4 == 3:
            h ^= <uint32_t>p[tail + 2] << 16
        if length % 4 >= 2:
            h ^= <uint32_t>p[tail + 1] << 8
        if length % 4 >= 1:
            h ^= p[tail]
            h *= m
        h ^= h >> 13
        h *= m
        h ^= h >> 15
        out[i] = <int32_t>h
    return 0


def murmur2(keys):
    """Kafka's murmur2 of every element of a binary column; see kbatch._core_py.murmur2."""
    c = _py._Col(keys, True, keys[4], 0, 0)
    cdef _CeBin b
    _ce_bin(&b, c)
    out = np.zeros(c.length, np.int32)
    cdef int32_t[::1] m = out
    cdef int64_t n = c.length, bad = 0
    cdef int rc
    cdef int32_t dummy = 0
    with nogil:
        rc = _mm2_loop(&b, n, &m[0] if n else &dummy, &bad)
    if rc < 0:
        _py._raise_encode(_py.EC_BAD_ARRAY, bad, 0, bad)
    return out
