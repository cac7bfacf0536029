# decode_columns_v2: the Cython twin of kbatch._core_py.decode_columns_v2 (the contract), included at
# the end of _core.pyx (which cimports memcpy, the stdint types, cython and numpy, and imports
# raise_status and _core_py as _py). Differentially tested against the pure twin (tests/test_arrow.py).

# ------------------------------------------------------------------------------------ column decode
# v2 records straight into Arrow-layout buffers (offsets, data, validity), no Python object per
# record. Same arrays, statuses and positions as the pure twin (which walks the records as
# decode_records_v2 does).

cdef extern from "_columns_decode.h" nogil:
    # an error: a status of kbatch.errors (ST_*), its byte position, the numbers its message names
    ctypedef struct _DcErr "kb_dc_err":
        int status
        int64_t pos
        int64_t a
        int64_t b
        int64_t c
        int64_t batch
    ctypedef struct _DcHdr "kb_dc_hdr":
        int32_t *k_off
        int32_t *v_off
        uint8_t *v_val
        uint8_t *k_dat
        uint8_t *v_dat
    ctypedef struct _DcIn "kb_dc_in":
        const uint8_t *buf
        int64_t nbuf
        const int64_t *starts
        const int64_t *ends
        const int64_t *bases
        const int64_t *bts
        const int64_t *mts
        const int64_t *crcs
        const int32_t *counts
        const int16_t *attrs
        int64_t nb
        int64_t crc_lead
        int64_t header_size
        int headers
        int keys
        int values
    ctypedef struct _DcOut "kb_dc_out":
        int64_t *off
        int64_t *ts
        uint8_t *tsv
        uint8_t *tomb
        uint8_t *k_val
        uint8_t *v_val
        int32_t *tt
        int32_t *bi
        int32_t *k_off
        int32_t *v_off
        int32_t *h_off
        uint8_t *k_dat
        uint8_t *v_dat
    # the record walk (in C: see the header)
    int _dc_loop "kb_dc_loop"(const _DcIn *inp, const _DcOut *o, _DcHdr *hb, int64_t *n_hdr, int64_t *stats,
                              _DcErr *err)
    int kb_dc_walks()
    int kb_dc_walk_limit(int k)


# The varint readers below serve the other record walks of this file (timestamp search, record
# checks), which follow _dc_loop's statuses and positions.
cdef inline int _dc_varint(const uint8_t* buf, int64_t pos, int64_t limit, int32_t* out, int64_t* npos,
                           _DcErr* err) noexcept nogil:
    cdef uint32_t raw = 0
    cdef uint8_t b
    cdef int i
    if pos < limit and buf[pos] < 0x80:  # one byte: most lengths, deltas and counts
        raw = buf[pos]
        npos[0] = pos + 1
        out[0] = <int32_t>((raw >> 1) ^ (0 - (raw & 1)))
        return 0
    for i in range(5):
        if pos + i >= limit:
            err.status = 1; err.pos = pos + i
            return -1
        b = buf[pos + i]
        if i == 4:
            if b & 0x80:
                err.status = 2; err.pos = pos
                return -1
            raw |= (<uint32_t>b) << 28
            npos[0] = pos + 5
            break
        raw |= (<uint32_t>(b & 0x7F)) << (7 * i)
        if not b & 0x80:
            npos[0] = pos + i + 1
            break
    out[0] = <int32_t>((raw >> 1) ^ (0 - (raw & 1)))
    return 0


cdef inline int _dc_varlong(const uint8_t* buf, int64_t pos, int64_t limit, int64_t* out, int64_t* npos,
                            _DcErr* err) noexcept nogil:
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef int64_t i = pos
    cdef uint8_t b
    if pos < limit and buf[pos] < 0x80:  # one byte: timestamp deltas within +-63 ms
        raw = buf[pos]
        out[0] = <int64_t>((raw >> 1) ^ (0 - (raw & 1)))
        npos[0] = pos + 1
        return 0
    while True:
        if i >= limit:
            err.status = 1; err.pos = i
            return -1
        b = buf[i]
        i += 1
        if b & 0x80:
            raw |= (<uint64_t>(b & 0x7F)) << shift
            shift += 7
            if shift > 63:
                err.status = 3; err.pos = pos
                return -1
        else:
            raw |= (<uint64_t>b) << shift
            break
    out[0] = <int64_t>((raw >> 1) ^ (0 - (raw & 1)))
    npos[0] = i
    return 0


from libc.string cimport memset


def _decode_columns_walks():
    """The record walks of decode_columns_v2 this CPU runs, fastest last: 0 generic, 1 AVX2 (32-byte
    moves for keys and values). For tests."""
    return list(range(kb_dc_walks() + 1))


def _decode_columns_walk_limit(int walk):
    """Use the walks up to `walk` only (tests check each walk this CPU has against the pure twin);
    returns the previous limit. Not thread-safe: tests only."""
    return kb_dc_walk_limit(walk)


cdef object _pa_allocate = None


class _NumpyBuffer(np.ndarray):
    """Column memory from numpy when pyarrow is not installed (validation and storage read these
    columns without Arrow): resize() keeps the memory; readers take `count` items of it."""

    def resize(self, *args, **kwargs):
        pass


def _numpy_allocate(nbytes, resizable=False):
    return np.empty(nbytes, np.uint8).view(_NumpyBuffer)


cdef object _arrow_empty(int64_t n, object dtype, bint resizable=False):
    """(buffer, numpy view) of n uninitialized items from Arrow's memory pool, which keeps freed
    blocks for the next call: column buffers do not fault in fresh pages chunk after chunk.
    Without pyarrow (an optional dependency), from numpy."""
    global _pa_allocate
    if _pa_allocate is None:
        try:
            from pyarrow import allocate_buffer
        except ImportError:
            allocate_buffer = _numpy_allocate
        _pa_allocate = allocate_buffer
    dt = np.dtype(dtype)
    b = _pa_allocate(max(n, 1) * dt.itemsize, resizable=resizable)
    return b, np.frombuffer(b, dt, count=n)


cdef object _arrow_copy(const void *p, int64_t n, object dtype):
    _b, arr = _arrow_empty(n, dtype)
    if n:
        memcpy(cnp.PyArray_DATA(arr), p, <size_t>(n * arr.itemsize))
    return arr


def decode_columns_v2(data, starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes,
                      include_headers=True, crcs=None, keys=True, values=True):
    """Decode the v2 records of many batches into Arrow-layout column arrays (see arrow.py).

    data holds each batch's (decompressed) records section at [starts[i], ends[i]); counts,
    base_offsets, base_timestamps, max_timestamps, attributes are the batches' header fields;
    crcs (optional): stored CRCs to check first, over data[starts[i] - 40:ends[i]] (-1: skip).
    Returns a dict of numpy arrays: offset, timestamp (ms; 0 where null), timestamp_valid,
    timestamp_type, is_tombstone, batch_index, key_/value_ offsets+data+valid, header_offsets,
    header_key_offsets/data, header_value_offsets/data/valid, stats. Errors as decode_records_v2.
    The arrays live in buffers of Arrow's memory pool. keys / values False: those bytes are not
    copied (their data empty, their offsets 0; validity and null counts as ever).
    """
    job = ColumnsJob(data, starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes,
                     include_headers, crcs, keys, values)
    job.run()
    return job.result()


cdef void _dc_hdr_free(_DcHdr *hb) noexcept:
    free(hb.k_off); free(hb.v_off); free(hb.v_val); free(hb.k_dat); free(hb.v_dat)
    memset(hb, 0, sizeof(hb[0]))


cdef class ColumnsJob:
    """decode_columns_v2 in three steps, so the walk can run on another thread while the memory
    is taken and given back on the caller's: ColumnsJob(...) checks the arguments and takes the
    column buffers from Arrow's pool; run() walks the records without the GIL (once, from any
    thread); result() raises the walk's error or returns decode_columns_v2's dict (on the thread
    that made the job: Arrow's pool reuses a thread's freed memory only on that thread)."""

    cdef const uint8_t[::1] buf
    cdef const int64_t[::1] st, en, bo, bt, mt, cr
    cdef const int32_t[::1] ct
    cdef const int16_t[::1] at
    cdef int32_t[::1] m_koff, m_voff
    cdef object cols, kb, vb, stats_a, out
    cdef int64_t n, n_hdr
    cdef int64_t[::1] m_stats
    cdef int rc
    cdef bint hdrs, ran
    cdef uint8_t dummy
    cdef _DcIn inp
    cdef _DcOut o
    cdef _DcHdr hb
    cdef _DcErr err

    def __cinit__(self):
        memset(&self.hb, 0, sizeof(self.hb))

    def __init__(self, data, starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes,
                 include_headers=True, crcs=None, keys=True, values=True):
        self.buf = _view(data)
        # 1-D, one entry per batch in each (checked there): the loop indexes all of them by batch
        a_st, a_en, a_ct, a_bo, a_bt, a_mt, a_at = _py._column_arrays(
            starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes)
        a_crc = _py._crc_array(crcs, len(a_st))
        self.st = a_st; self.en = a_en; self.ct = a_ct; self.bo = a_bo; self.bt = a_bt; self.mt = a_mt
        self.at = a_at
        cdef const int64_t *crp = NULL
        if a_crc is not None:
            self.cr = a_crc
            crp = &self.cr[0] if self.cr.shape[0] else NULL
        cdef Py_ssize_t nb = self.st.shape[0]
        cdef int64_t n = 0, total = 0, nbuf = self.buf.shape[0], span
        cdef Py_ssize_t i
        for i in range(nb):
            span = self.en[i] - self.st[i]
            if span > 0:
                total += span
                if self.ct[i] > 0:
                    # a record takes >= 7 bytes: a claimed count never sizes more rows than the bytes hold
                    n += self.ct[i] if self.ct[i] < span // 7 else span // 7
        self.n = n
        self.hdrs = bool(include_headers)
        _, o_off = _arrow_empty(n, np.int64); _, o_ts = _arrow_empty(n, np.int64)
        _, o_tsv = _arrow_empty(n, np.bool_); _, o_tt = _arrow_empty(n, np.int32)
        _, o_tomb = _arrow_empty(n, np.bool_); _, o_bi = _arrow_empty(n, np.int32)
        _, k_off = _arrow_empty(n + 1, np.int32); _, k_val = _arrow_empty(n, np.bool_)
        _, v_off = _arrow_empty(n + 1, np.int32); _, v_val = _arrow_empty(n, np.bool_)
        _, h_off = _arrow_empty(n + 1, np.int32)
        # a projection's skipped keys or values write nothing: no buffer for them
        self.kb, k_dat = _arrow_empty(total if keys else 0, np.uint8, True)
        self.vb, v_dat = _arrow_empty(total if values else 0, np.uint8, True)
        self.cols = {"offset": o_off, "timestamp": o_ts, "timestamp_valid": o_tsv, "timestamp_type": o_tt,
                     "is_tombstone": o_tomb, "batch_index": o_bi, "header_offsets": h_off,
                     "key_offsets": k_off, "key_valid": k_val, "value_offsets": v_off, "value_valid": v_val}
        cdef int64_t[::1] m_off = o_off, m_ts = o_ts
        cdef uint8_t[::1] m_tsv = o_tsv.view(np.uint8), m_tomb = o_tomb.view(np.uint8)
        cdef int32_t[::1] m_tt = o_tt, m_bi = o_bi, m_hoff = h_off
        cdef uint8_t[::1] m_kval = k_val.view(np.uint8), m_vval = v_val.view(np.uint8)
        self.m_koff = k_off; self.m_voff = v_off
        self.stats_a = np.zeros(6, np.int64)
        self.m_stats = self.stats_a
        self.err.status = 0; self.err.pos = 0; self.err.a = 0; self.err.b = 0; self.err.c = 0; self.err.batch = 0
        # every pointer below stays valid while the job lives: the job holds the arrays and views
        self.inp.buf = &self.buf[0] if nbuf > 0 else &self.dummy; self.inp.nbuf = nbuf; self.inp.nb = nb
        self.inp.starts = &self.st[0] if nb else NULL; self.inp.ends = &self.en[0] if nb else NULL
        self.inp.counts = &self.ct[0] if nb else NULL; self.inp.bases = &self.bo[0] if nb else NULL
        self.inp.bts = &self.bt[0] if nb else NULL; self.inp.mts = &self.mt[0] if nb else NULL
        self.inp.attrs = &self.at[0] if nb else NULL; self.inp.crcs = crp; self.inp.headers = self.hdrs
        self.inp.keys = bool(keys); self.inp.values = bool(values)
        # the CRC covers a batch from its attributes to its end; its header precedes its records
        self.inp.crc_lead = RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET; self.inp.header_size = RECORD_BATCH_OVERHEAD
        self.o.off = &m_off[0] if n else NULL; self.o.ts = &m_ts[0] if n else NULL
        self.o.tsv = &m_tsv[0] if n else NULL; self.o.tt = &m_tt[0] if n else NULL
        self.o.tomb = &m_tomb[0] if n else NULL; self.o.bi = &m_bi[0] if n else NULL
        self.o.k_off = &self.m_koff[0]; self.o.k_dat = <uint8_t *>cnp.PyArray_DATA(k_dat)
        self.o.k_val = &m_kval[0] if n else NULL
        self.o.v_off = &self.m_voff[0]; self.o.v_dat = <uint8_t *>cnp.PyArray_DATA(v_dat)
        self.o.v_val = &m_vval[0] if n else NULL
        self.o.h_off = &m_hoff[0]

    def __dealloc__(self):
        _dc_hdr_free(&self.hb)

    def run(self):
        """Walk the records (the GIL released); once."""
        if self.ran:
            raise RuntimeError("ColumnsJob.run() runs once")
        self.ran = True
        cdef int rc
        with nogil:
            rc = _dc_loop(&self.inp, &self.o, &self.hb, &self.n_hdr, &self.m_stats[0], &self.err)
        self.rc = rc

    def result(self):
        """decode_columns_v2's dict, or the walk's error (the same each call)."""
        if not self.ran:
            raise RuntimeError("ColumnsJob.result() before run()")
        if self.rc < 0:
            if self.err.status == -2:
                raise MemoryError()
            _dc_raise(self.err, self.bo, self.ct)
        if self.out is not None:
            return self.out
        cdef int64_t h = self.n_hdr, n = self.n
        if self.hdrs:
            hk_off = _arrow_copy(self.hb.k_off, h + 1, np.int32)
            hv_off = _arrow_copy(self.hb.v_off, h + 1, np.int32)
            hk_dat = _arrow_copy(self.hb.k_dat, self.hb.k_off[h], np.uint8)
            hv_dat = _arrow_copy(self.hb.v_dat, self.hb.v_off[h], np.uint8)
            hv_val = _arrow_copy(self.hb.v_val, h, np.bool_)
        else:
            hk_off = np.zeros(1, np.int32); hv_off = np.zeros(1, np.int32)
            hk_dat = np.zeros(0, np.uint8); hv_dat = np.zeros(0, np.uint8); hv_val = np.zeros(0, np.bool_)
        _dc_hdr_free(&self.hb)
        kd = int(self.m_koff[n]); vd = int(self.m_voff[n])  # every batch decoded its count: n rows
        # give back what the data buffers did not use (the pool shrinks in place, or copies what is left)
        self.o.k_dat = NULL; self.o.v_dat = NULL
        self.kb.resize(kd, shrink_to_fit=True)
        self.vb.resize(vd, shrink_to_fit=True)
        out = dict(self.cols)
        out.update({"key_data": np.frombuffer(self.kb, np.uint8, count=kd),
                    "value_data": np.frombuffer(self.vb, np.uint8, count=vd),
                    "header_key_offsets": hk_off, "header_key_data": hk_dat,
                    "header_value_offsets": hv_off, "header_value_data": hv_dat,
                    "header_value_valid": hv_val, "stats": self.stats_a})
        self.out = out
        # the input and the per-batch arrays are not needed any more: let the caller's buffer go
        self.buf = None; self.inp.buf = NULL
        return out


cdef _dc_raise(_DcErr err, bo, ct):
    base = int(bo[err.batch])
    s, p, a, b = err.status, err.pos, err.a, err.b
    if s == 1:
        raise_status(1, p, 1, 0, base)
    if s == 9:
        raise_status(9, p, a, b, base)
    if s == 2:
        raise_status(2, p, "at most 5 bytes", "a 5th byte with its MSB set", base)
    if s == 3:
        raise_status(3, p, "at most 10 bytes", "a 10th byte with its MSB set", base)
    if s == 12:
        raise_status(12, p, "count >= 0", a, base)
    if s == 8:
        raise_status(8, p, f"{a} records", b, base)
    if s == 13:
        raise_status(13, p, f"record length <= {a}", b, base)
    if s == 14:
        if err.c:
            raise_status(14, p, a, b, base)
        raise_status(14, p, f"{a} bytes", f"{b} bytes left in record", base)
    if s == 6:
        raise_status(6, p, "header count >= 0", a, base)
    if s == 15:
        raise_status(15, p, f"header count <= {a}", b, base)
    if s == 5:
        raise_status(5, p, "header key size >= 0", a, base)
    if s == 4:
        raise_status(4, p, f"{a} bytes in record payload", f"{b} bytes read", base)
    if s == 7:
        raise_status(7, p, f"{a} records ending at byte {p}", f"{b} more bytes", base)
    raise_status(s, p, a, b, base)


# ------------------------------------------------------------------------------------ timestamp search
# find_timestamps_v2: offsets-by-time inside batches (LogSegment.findOffsetByTimestamp's record
# loop) for many targets at once. The walk checks each record exactly as _dc_loop does, but only
# reads lengths, timestampDelta and offsetDelta: keys, values and headers are skipped, not copied.

cdef inline int _ft_skip_blob(const uint8_t* buf, int64_t* pos, int64_t rec_end, _DcErr* err) noexcept nogil:
    cdef int32_t n
    if _dc_varint(buf, pos[0], rec_end, &n, pos, err) < 0:
        return -1
    if n >= 0:
        if n > rec_end - pos[0]:
            err.status = 14; err.pos = pos[0]; err.a = n; err.b = rec_end - pos[0]
            return -1
        pos[0] += n
    return 0


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _ft_walk(const uint8_t* buf, int64_t nbuf, const int64_t* starts, const int64_t* ends,
                  const int32_t* counts, const int64_t* bases, const int64_t* bts, const int64_t* mts,
                  const int16_t* attrs, Py_ssize_t nb, int64_t start_off,
                  int64_t* r_lo, int64_t* r_hi, int64_t* o_run, int64_t* o_off, _DcErr* err) noexcept nogil:
    # o_run/o_off: per batch, the timestamps where the running max of the eligible records
    # (a timestamp, offset >= start_off) rises, and those records' offsets: [r_lo[i], r_hi[i]).
    # Sized on entry to the sum of the positive counts (one entry per record at most).
    cdef Py_ssize_t bi
    cdef int64_t r = 0, pos, end, rec_start, rec_end, hk_start, no_ts, ts, ts_delta, off
    cdef int32_t length, off_delta, klen, nh, j, count, done_in_batch
    cdef bint is_lat
    for bi in range(nb):
        pos = starts[bi]
        end = ends[bi]
        count = counts[bi]
        err.batch = bi
        r_lo[bi] = r
        if pos < 0 or end > nbuf or end < pos:
            err.status = 1; err.pos = pos; err.a = end; err.b = nbuf
            return -1
        if count < 0:
            err.status = 12; err.pos = pos; err.a = count
            return -1
        no_ts = INT64_MIN if attrs[bi] & 0x80 else -1
        is_lat = (attrs[bi] & 0x08) != 0
        for done_in_batch in range(count):
            if pos >= end:
                err.status = 8; err.pos = pos; err.a = count; err.b = done_in_batch
                return -1
            rec_start = pos
            if _dc_varint(buf, pos, end, &length, &pos, err) < 0:
                return -1
            if length < 0 or length > end - pos:
                err.status = 13; err.pos = rec_start; err.a = end - pos; err.b = length
                return -1
            rec_end = pos + length
            if rec_end - pos < 1:
                err.status = 14; err.pos = pos; err.a = 1; err.b = 0; err.c = 1
                return -1
            pos += 1  # record attributes
            if _dc_varlong(buf, pos, rec_end, &ts_delta, &pos, err) < 0:
                return -1
            if _dc_varint(buf, pos, rec_end, &off_delta, &pos, err) < 0:
                return -1
            if _ft_skip_blob(buf, &pos, rec_end, err) < 0:  # key
                return -1
            if _ft_skip_blob(buf, &pos, rec_end, err) < 0:  # value
                return -1
            if _dc_varint(buf, pos, rec_end, &nh, &pos, err) < 0:
                return -1
            if nh < 0:
                err.status = 6; err.pos = pos; err.a = nh
                return -1
            if nh > rec_end - pos:
                err.status = 15; err.pos = pos; err.a = rec_end - pos; err.b = nh
                return -1
            for j in range(nh):
                hk_start = pos
                if _dc_varint(buf, pos, rec_end, &klen, &pos, err) < 0:
                    return -1
                if klen < 0:
                    err.status = 5; err.pos = hk_start; err.a = klen
                    return -1
                if klen > rec_end - pos:
                    err.status = 14; err.pos = pos; err.a = klen; err.b = rec_end - pos; err.c = 1
                    return -1
                pos += klen
                if _ft_skip_blob(buf, &pos, rec_end, err) < 0:  # header value
                    return -1
            if pos != rec_end:
                err.status = 4; err.pos = rec_start; err.a = length; err.b = length - (rec_end - pos)
                return -1
            ts = mts[bi] if is_lat else <int64_t>(<uint64_t>bts[bi] + <uint64_t>ts_delta)
            off = <int64_t>(<uint64_t>bases[bi] + <uint64_t><int64_t>off_delta)
            if ts != no_ts and off >= start_off and (r == r_lo[bi] or ts > o_run[r - 1]):
                o_run[r] = ts
                o_off[r] = off
                r += 1
        if pos != end:
            err.status = 7; err.pos = pos; err.a = count; err.b = end - pos
            return -1
        r_hi[bi] = r
    return 0


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _ft_answer(const int64_t* r_lo, const int64_t* r_hi, const int64_t* o_run, const int64_t* o_off,
                     const int64_t* tb, const int64_t* tt, Py_ssize_t nt, int64_t* out_off,
                     int64_t* out_ts) noexcept nogil:
    # target_batches were checked to lie in [0, nb) on entry
    cdef Py_ssize_t j
    cdef int64_t lo, hi, mid, t
    for j in range(nt):
        lo = r_lo[tb[j]]
        hi = r_hi[tb[j]]
        t = tt[j]
        while lo < hi:  # first k with o_run[k] >= t (o_run rises within a batch)
            mid = lo + (hi - lo) // 2
            if o_run[mid] < t:
                lo = mid + 1
            else:
                hi = mid
        if lo < r_hi[tb[j]]:
            out_off[j] = o_off[lo]
            out_ts[j] = o_run[lo]
        else:
            out_off[j] = -1
            out_ts[j] = -1


def find_timestamps_v2(data, starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes,
                       target_batches, targets, starting_offset):
    """First record at or after each target in its batch -> (offsets, timestamps); see kbatch._core_py."""
    cdef const uint8_t[::1] buf = _view(data)
    a_st, a_en, a_ct, a_bo, a_bt, a_mt, a_at = _py._column_arrays(
        starts, ends, counts, base_offsets, base_timestamps, max_timestamps, attributes)
    a_tb = np.ascontiguousarray(target_batches, dtype=np.int64)
    a_tt = np.ascontiguousarray(targets, dtype=np.int64)
    start_obj = PyNumber_Index(starting_offset)
    if not _INT64_MIN <= start_obj <= _INT64_MAX:
        raise OverflowError(f"starting_offset out of int64 range: {start_obj}")
    if a_tb.ndim != 1 or a_tt.ndim != 1 or len(a_tb) != len(a_tt):
        raise ValueError("target_batches and targets must be 1-D with one entry per target, not shapes "
                         f"{a_tb.shape} {a_tt.shape}")
    cdef Py_ssize_t nb = len(a_st), nt = len(a_tt)
    if nt and (a_tb.min() < 0 or a_tb.max() >= nb):
        raise ValueError(f"target_batches must be in [0, {nb})")
    cdef const int64_t[::1] st = a_st
    cdef const int64_t[::1] en = a_en
    cdef const int32_t[::1] ct = a_ct
    cdef const int64_t[::1] bo = a_bo
    cdef const int64_t[::1] bt = a_bt
    cdef const int64_t[::1] mt = a_mt
    cdef const int16_t[::1] at = a_at
    cdef const int64_t[::1] tb = a_tb
    cdef const int64_t[::1] tt = a_tt
    cdef int64_t n = 0, nbuf = buf.shape[0], start_off = start_obj
    cdef Py_ssize_t i
    for i in range(nb):
        if ct[i] > 0 and en[i] > st[i]:  # a record takes >= 7 bytes (as in decode_columns_v2)
            n += ct[i] if ct[i] < (en[i] - st[i]) // 7 else (en[i] - st[i]) // 7
    lo_a = np.empty(nb, np.int64); hi_a = np.empty(nb, np.int64)
    run_a = np.empty(n, np.int64); off_a = np.empty(n, np.int64)
    out_off = np.empty(nt, np.int64); out_ts = np.empty(nt, np.int64)
    cdef int64_t[::1] m_lo = lo_a, m_hi = hi_a, m_run = run_a, m_off = off_a, m_oo = out_off, m_ot = out_ts
    cdef _DcErr err
    cdef int rc
    cdef uint8_t dummy = 0
    cdef int64_t dummy64 = 0
    err.status = 0; err.pos = 0; err.a = 0; err.b = 0; err.c = 0; err.batch = 0
    with nogil:
        rc = _ft_walk(&buf[0] if nbuf > 0 else &dummy, nbuf, &st[0] if nb else NULL, &en[0] if nb else NULL,
                      &ct[0] if nb else NULL, &bo[0] if nb else NULL, &bt[0] if nb else NULL,
                      &mt[0] if nb else NULL, &at[0] if nb else NULL, nb, start_off,
                      &m_lo[0] if nb else &dummy64, &m_hi[0] if nb else &dummy64,
                      &m_run[0] if n else &dummy64, &m_off[0] if n else &dummy64, &err)
        if rc == 0 and nt:
            _ft_answer(&m_lo[0], &m_hi[0], &m_run[0] if n else &dummy64, &m_off[0] if n else &dummy64,
                       &tb[0], &tt[0], nt, &m_oo[0], &m_ot[0])
    if rc < 0:
        _dc_raise(err, bo, ct)
    return out_off, out_ts


# ------------------------------------------------------------------------------------ record fields
# record_fields_v2: the fields LogValidator checks (offset, timestamp, key presence) of each record
# of one batch, walked with decode_records_v2's checks; keys, values and headers are not copied.

cdef inline int _rec_walk_one(const uint8_t *buf, int64_t *pos, int64_t end, int32_t count, int32_t done,
                             uint8_t *attrs, int64_t *ts_delta, int32_t *off_delta, int64_t *key_at,
                             int32_t *key_len, int *value_null, _DcErr *err) noexcept nogil:
    """One record at pos[0], checked as _dc_loop checks it (the same statuses and positions); pos[0]
    moves past it. key_len -1: a null key. Shared by the record loops that read a few fields only."""
    cdef int64_t p = pos[0], rec_start, rec_end, hk_start
    cdef int32_t length, n, nh, klen, j
    if p >= end:
        err.status = 8; err.pos = p; err.a = count; err.b = done
        return -1
    rec_start = p
    if _dc_varint(buf, p, end, &length, &p, err) < 0:
        return -1
    if length < 0 or length > end - p:
        err.status = 13; err.pos = rec_start; err.a = end - p; err.b = length
        return -1
    rec_end = p + length
    if rec_end - p < 1:
        err.status = 14; err.pos = p; err.a = 1; err.b = 0; err.c = 1
        return -1
    attrs[0] = buf[p]
    p += 1
    if _dc_varlong(buf, p, rec_end, ts_delta, &p, err) < 0:
        return -1
    if _dc_varint(buf, p, rec_end, off_delta, &p, err) < 0:
        return -1
    if _dc_varint(buf, p, rec_end, &n, &p, err) < 0:  # key
        return -1
    key_at[0] = p
    key_len[0] = n if n >= 0 else -1
    if n >= 0:
        if n > rec_end - p:
            err.status = 14; err.pos = p; err.a = n; err.b = rec_end - p
            return -1
        p += n
    if _dc_varint(buf, p, rec_end, &n, &p, err) < 0:  # value
        return -1
    value_null[0] = n < 0
    if n >= 0:
        if n > rec_end - p:
            err.status = 14; err.pos = p; err.a = n; err.b = rec_end - p
            return -1
        p += n
    if _dc_varint(buf, p, rec_end, &nh, &p, err) < 0:
        return -1
    if nh < 0:
        err.status = 6; err.pos = p; err.a = nh
        return -1
    if nh > rec_end - p:
        err.status = 15; err.pos = p; err.a = rec_end - p; err.b = nh
        return -1
    for j in range(nh):
        hk_start = p
        if _dc_varint(buf, p, rec_end, &klen, &p, err) < 0:
            return -1
        if klen < 0:
            err.status = 5; err.pos = hk_start; err.a = klen
            return -1
        if klen > rec_end - p:
            err.status = 14; err.pos = p; err.a = klen; err.b = rec_end - p; err.c = 1
            return -1
        p += klen
        if _ft_skip_blob(buf, &p, rec_end, err) < 0:  # header value
            return -1
    if p != rec_end:
        err.status = 4; err.pos = rec_start; err.a = length; err.b = length - (rec_end - p)
        return -1
    pos[0] = p
    return 0



def record_fields_v2(data, start, end, count, base_offset, base_timestamp, max_timestamp, attributes):
    """(offsets, timestamps, key_valid) of each record of one v2 records section; see kbatch._core_py."""
    cdef const uint8_t[::1] buf = _view(data)
    cdef int64_t s = PyNumber_Index(start), e = PyNumber_Index(end)
    cdef int64_t bo = PyNumber_Index(base_offset), bt = PyNumber_Index(base_timestamp)
    cdef int64_t mt = PyNumber_Index(max_timestamp)
    cdef int attrs = PyNumber_Index(attributes)
    cdef int64_t n_obj = PyNumber_Index(count)
    cdef int64_t nbuf = buf.shape[0]
    if s < 0 or e > nbuf or e < s:
        raise_status(ST_TRUNCATED, s, 1, 0, bo)
    if n_obj < 0:
        raise_status(12, s, "count >= 0", n_obj, bo)
    if n_obj > INT32_MAX:  # outside the C path's domain (no section holds that many records)
        return _py.record_fields_v2(data, start, end, count, base_offset, base_timestamp, max_timestamp, attributes)
    cdef int32_t n = <int32_t>n_obj
    # a record takes >= 7 bytes: a claimed count never sizes more rows than the bytes hold
    cdef int64_t rows = min(<int64_t>n, (e - s) // 7)
    offs_a = np.empty(rows, np.int64)
    ts_a = np.empty(rows, np.int64)
    key_a = np.empty(rows, np.bool_)
    cdef int64_t[::1] o_off = offs_a
    cdef int64_t[::1] o_ts = ts_a
    cdef uint8_t[::1] o_key = key_a.view(np.uint8)
    cdef bint lat = (attrs & 0x08) != 0
    cdef int64_t pos = s, key_at, ts_delta
    cdef int32_t off_delta, key_len, done
    cdef int value_null, rc = 0
    cdef uint8_t a, dummy = 0
    cdef const uint8_t *p = &buf[0] if nbuf > 0 else &dummy
    cdef _DcErr err
    err.status = 0; err.pos = 0; err.a = 0; err.b = 0; err.c = 0; err.batch = 0
    with nogil:
        for done in range(n):
            if _rec_walk_one(p, &pos, e, n, done, &a, &ts_delta, &off_delta, &key_at, &key_len, &value_null,
                             &err) < 0:
                rc = -1
                break
            # done < rows: each record took >= 7 bytes of [s, e)
            o_off[done] = <int64_t>(<uint64_t>bo + <uint64_t><int64_t>off_delta)
            o_ts[done] = mt if lat else <int64_t>(<uint64_t>bt + <uint64_t>ts_delta)
            o_key[done] = key_len >= 0
        if rc == 0 and pos != e:
            err.status = 7; err.pos = pos; err.a = n; err.b = e - pos
            rc = -1
    if rc < 0:
        _dc_raise(err, (bo,), (n,))
    return offs_a, ts_a, key_a
