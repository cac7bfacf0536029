# OffsetMap: the log cleaner's key -> latest offset map and its two record loops (map the keys of a
# batch; filter a batch and write its kept records again), the Cython twin of
# kbatch._core_py.OffsetMap (the contract). Included at the end of _core.pyx, after
# _columns_kernel.pxi, whose varint readers, _DcErr and _dc_raise it shares: both backends walk
# records with decode_records_v2's checks and raise the same errors at the same positions.
# Differentially tested against the pure twin (tests/test_offset_map.py).
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memmove

cdef extern from "_offset_map.h" nogil:
    ctypedef struct kb_om_entry:
        uint64_t d0
        uint64_t d1
        int64_t offset
    ctypedef struct kb_om:
        kb_om_entry *slots
        int64_t n_slots
        int64_t max_slots
        int64_t size
    void kb_md5(const unsigned char *p, size_t n, unsigned char *out)
    void kb_om_digest(const unsigned char *key, int64_t n, uint64_t *d0, uint64_t *d1)
    int kb_om_put(kb_om *m, uint64_t d0, uint64_t d1, int64_t offset)
    void kb_om_prefetch(const kb_om *m, uint64_t d0, uint64_t d1)
    int64_t kb_om_get(const kb_om *m, uint64_t d0, uint64_t d1)


def key_digest(key):
    """The 16 bytes an OffsetMap keeps for a key; see kbatch._core_py.key_digest."""
    cdef const uint8_t[::1] k = _view(key)
    cdef uint64_t d[2]
    cdef uint8_t dummy = 0
    kb_om_digest(&k[0] if k.shape[0] else &dummy, k.shape[0], &d[0], &d[1])
    return PyBytes_FromStringAndSize(<char *>d, 16)


def md5(data):
    """MD5 of a buffer (the C implementation the map hashes long keys with; tested against hashlib)."""
    cdef const uint8_t[::1] k = _view(data)
    cdef unsigned char out[16]
    cdef uint8_t dummy = 0
    kb_md5(&k[0] if k.shape[0] else &dummy, <size_t>k.shape[0], out)
    return PyBytes_FromStringAndSize(<char *>out, 16)


cdef enum:
    _OM_FIRST_SLOTS = 4096  # the table's first size (96 KiB); it doubles as keys come
    _OM_CHUNK = 32          # records walked (and their slots prefetched) before their keys are looked up


# a walked record of a chunk: its key digest (when it is looked up), offset, where it starts
cdef struct _OmRec:
    uint64_t d0
    uint64_t d1
    int64_t off
    int64_t pos
    int64_t ts
    int keyed
    int tomb
    int flag


# a kept record of filter_records_v2: where it starts, its timestamp, whether its KIP-87 flag is set
cdef struct _OmKept:
    int64_t pos
    int64_t ts
    int flag


cdef inline uint8_t *_om_varint(uint8_t *o, int64_t v) noexcept nogil:
    """Kafka's zigzag varint of v (any int64), minimal."""
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while u > 0x7F:
        o[0] = <uint8_t>((u & 0x7F) | 0x80)
        o += 1
        u >>= 7
    o[0] = <uint8_t>u
    return o + 1


cdef inline uint8_t *_om_blob(uint8_t *o, const uint8_t *buf, int64_t *p, int32_t n) noexcept nogil:
    """A length-prefixed blob whose length n was read and whose bytes start at p[0] (n < 0: null)."""
    if n < 0:
        o[0] = 1  # varint -1
        return o + 1
    o = _om_varint(o, n)
    memcpy(o, buf + p[0], n)
    p[0] += n
    return o + n


cdef uint8_t *_om_rewrite(const uint8_t *buf, int64_t p, uint8_t *o, int flag, int64_t ts_delta) noexcept nogil:
    """The already checked record at p written again: attributes bit 5 as the record had it (a
    broker's cleaner writes 0 for Kafka's null-value tombstones, which never carry the flag), else
    0; the new timestamp delta; every length minimal, a null as -1."""
    cdef _DcErr err  # the record was checked: no reader fails here
    cdef int32_t length = 0, n = 0, nh = 0, j
    cdef int64_t tsd = 0
    cdef int32_t offd = 0
    cdef uint8_t body[30]
    cdef uint8_t *b = body
    cdef uint8_t *start
    _dc_varint(buf, p, INT64_MAX, &length, &p, &err)
    p += 1  # attributes
    _dc_varlong(buf, p, INT64_MAX, &tsd, &p, &err)
    _dc_varint(buf, p, INT64_MAX, &offd, &p, &err)
    # the fixed part (attributes, deltas) is built aside, then the length goes first
    b[0] = RECORD_TOMBSTONE_FLAG_MASK if flag else 0
    b = _om_varint(b + 1, ts_delta)
    b = _om_varint(b, offd)
    start = o + 5  # room for the length varint, moved down after
    memcpy(start, body, b - body)
    o = start + (b - body)
    _dc_varint(buf, p, INT64_MAX, &n, &p, &err)  # key
    o = _om_blob(o, buf, &p, n)
    _dc_varint(buf, p, INT64_MAX, &n, &p, &err)  # value
    o = _om_blob(o, buf, &p, n)
    _dc_varint(buf, p, INT64_MAX, &nh, &p, &err)
    o = _om_varint(o, nh)
    for j in range(nh):
        _dc_varint(buf, p, INT64_MAX, &n, &p, &err)
        o = _om_blob(o, buf, &p, n)
        _dc_varint(buf, p, INT64_MAX, &n, &p, &err)
        o = _om_blob(o, buf, &p, n)
    # the body is [start, o): its length as a varint before it, the body moved to follow it
    cdef uint8_t lenbuf[5]
    cdef uint8_t *le = _om_varint(lenbuf, o - start)
    cdef int64_t ln = le - lenbuf
    cdef uint8_t *dst = start - 5
    memmove(dst + ln, start, o - start)
    memcpy(dst, lenbuf, ln)
    return dst + ln + (o - start)


@cython.final
cdef class OffsetMap:
    """Key -> latest offset for the log cleaner, memory-bounded as Kafka's SkimpyOffsetMap; see
    kbatch._core_py.OffsetMap (the contract)."""

    cdef kb_om m
    cdef readonly int64_t memory
    cdef readonly double load_factor
    cdef readonly int64_t slots
    cdef readonly int64_t capacity
    cdef public int64_t latest_offset

    def __cinit__(self):
        self.m.slots = NULL

    def __init__(self, memory=W.DEFAULT_DEDUPE_BUFFER_SIZE, load_factor=W.DEFAULT_DEDUPE_LOAD_FACTOR):
        memory = PyNumber_Index(memory)
        load_factor = float(load_factor)
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load_factor must be in (0, 1], not {load_factor}")
        slots = max(0, memory) // W.OFFSET_MAP_ENTRY_SIZE
        if int(slots * load_factor) < 1:
            raise _errors.InvalidConfigurationError(
                "The offset map is too small to hold even one key (Kafka: increase log.cleaner.dedupe.buffer.size "
                "or decrease log.cleaner.threads)", expected=f"at least {W.OFFSET_MAP_ENTRY_SIZE} bytes at this load "
                f"factor", found=f"{memory} bytes")
        if not 0 <= memory <= _INT64_MAX:
            raise OverflowError(f"memory out of int64 range: {memory}")
        self.memory = memory
        self.load_factor = load_factor
        self.slots = slots
        self.capacity = int(slots * load_factor)
        self.latest_offset = -1
        self._reset()

    cdef _reset(self):
        free(self.m.slots)
        self.m.n_slots = min(self.slots, _OM_FIRST_SLOTS)
        self.m.max_slots = self.slots
        self.m.size = 0
        self.m.slots = <kb_om_entry *>calloc(self.m.n_slots, sizeof(kb_om_entry))
        if self.m.slots == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.m.slots)

    @property
    def size(self):
        return self.m.size

    def __len__(self):
        return self.m.size

    @property
    def full(self):
        return self.m.size >= self.capacity

    @property
    def utilization(self):
        return <double>self.m.size / <double>self.slots

    @property
    def table_bytes(self):
        """Bytes the table takes now (it grows towards memory as keys come)."""
        return self.m.n_slots * sizeof(kb_om_entry)

    def put(self, key, offset):
        cdef const uint8_t[::1] k = _view(key)
        cdef int64_t off = PyNumber_Index(offset)
        cdef uint64_t d0, d1
        cdef uint8_t dummy = 0
        kb_om_digest(&k[0] if k.shape[0] else &dummy, k.shape[0], &d0, &d1)
        cdef int rc = kb_om_put(&self.m, d0, d1, off)
        if rc == -1:
            raise MemoryError()
        if rc == -2:
            raise OverflowError("Attempt to add a new entry to a full offset map")

    def get(self, key):
        cdef const uint8_t[::1] k = _view(key)
        cdef uint64_t d0, d1
        cdef uint8_t dummy = 0
        kb_om_digest(&k[0] if k.shape[0] else &dummy, k.shape[0], &d0, &d1)
        return kb_om_get(&self.m, d0, d1)

    def update_latest_offset(self, offset):
        cdef int64_t off = PyNumber_Index(offset)
        if off > self.latest_offset:
            self.latest_offset = off

    def clear(self):
        self.latest_offset = -1
        self._reset()

    def map_records_v2(self, data, start, end, count, base_offset, start_offset):
        """Put the keys of one v2 records section; see kbatch._core_py.OffsetMap.map_records_v2."""
        cdef const uint8_t[::1] buf = _view(data)
        cdef int64_t s = PyNumber_Index(start), e = PyNumber_Index(end)
        cdef int32_t n = PyNumber_Index(count)
        cdef int64_t bo = PyNumber_Index(base_offset), so = PyNumber_Index(start_offset)
        cdef int64_t nbuf = buf.shape[0], pos, off, key_at, ts_delta, read = 0
        cdef int32_t off_delta, key_len, done
        cdef int value_null, full = 0, rc = 0
        cdef uint8_t attrs, dummy = 0
        cdef uint64_t d0, d1
        cdef const uint8_t *p = &buf[0] if nbuf > 0 else &dummy
        cdef _DcErr err
        err.status = 0; err.pos = 0; err.a = 0; err.b = 0; err.c = 0; err.batch = 0
        if s < 0 or e > nbuf or e < s:
            raise_status(ST_TRUNCATED, s, 1, 0, bo)
        if n < 0:
            raise_status(12, s, "count >= 0", n, bo)
        cdef _OmRec chunk[_OM_CHUNK]
        cdef int k, j, bad = 0
        pos = s
        done = 0
        with nogil:
            while done < n and not bad and not full and rc == 0:
                # walk (and check) a chunk of records, prefetching the slots of their keys ...
                k = 0
                while done < n and k < _OM_CHUNK:
                    if _rec_walk_one(p, &pos, e, n, done, &attrs, &ts_delta, &off_delta, &key_at, &key_len,
                                    &value_null, &err) < 0:
                        bad = 1
                        break
                    off = <int64_t>(<uint64_t>bo + <uint64_t><int64_t>off_delta)
                    chunk[k].keyed = key_len >= 0 and off >= so
                    chunk[k].off = off
                    if chunk[k].keyed:
                        kb_om_digest(p + key_at, key_len, &chunk[k].d0, &chunk[k].d1)
                        kb_om_prefetch(&self.m, chunk[k].d0, chunk[k].d1)
                    k += 1
                    done += 1
                # ... then put them in order, as far as the map takes them
                for j in range(k):
                    if chunk[j].keyed:
                        if self.m.size >= self.capacity:
                            full = 1
                            break
                        rc = kb_om_put(&self.m, chunk[j].d0, chunk[j].d1, chunk[j].off)
                        if rc < 0:
                            break
                        rc = 0
                    read += 1
            if bad and not full and rc == 0:
                rc = -1  # the bad record, reached with the map not full
            elif rc == 0 and not full and pos != e:
                err.status = 7; err.pos = pos; err.a = n; err.b = e - pos
                rc = -1
        if rc == -1 and err.status != 0:
            _dc_raise(err, (bo,), (n,))
        if rc == -1:
            raise MemoryError()
        if rc == -2:  # capacity <= slots: the cleaner stops before the table is full
            raise OverflowError("Attempt to add a new entry to a full offset map")
        return read, bool(full)

    def filter_records_v2(self, data, start, end, count, base_offset, base_timestamp, max_timestamp, attributes,
                          delete_horizon, keep_tombstones, new_horizon):
        """The cleaner's record filter over one v2 data batch; see kbatch._core_py.OffsetMap.filter_records_v2."""
        cdef const uint8_t[::1] buf = _view(data)
        cdef int64_t s = PyNumber_Index(start), e = PyNumber_Index(end)
        cdef int32_t n = PyNumber_Index(count)
        cdef int64_t bo = PyNumber_Index(base_offset)
        cdef int64_t bt = PyNumber_Index(base_timestamp)
        cdef int64_t mt = PyNumber_Index(max_timestamp)
        cdef int attrs_b = PyNumber_Index(attributes)
        cdef bint has_horizon = delete_horizon is not None
        cdef int64_t horizon = PyNumber_Index(delete_horizon) if has_horizon else 0
        cdef int64_t fresh = PyNumber_Index(new_horizon)
        cdef bint keep_tombs = bool(keep_tombstones)
        cdef int64_t nbuf = buf.shape[0]
        if s < 0 or e > nbuf or e < s:
            raise_status(ST_TRUNCATED, s, 1, 0, bo)
        if n < 0:
            raise_status(12, s, "count >= 0", n, bo)
        cdef bint lat = (attrs_b & 0x08) != 0
        cdef int64_t no_ts = INT64_MIN if attrs_b & 0x80 else -1
        cdef int64_t latest = self.latest_offset, pos = s, off, key_at, ts_delta
        cdef int64_t superseded = 0, invalid = 0, tomb_removed = 0, tomb_kept = 0, n_kept = 0, bound = 0
        cdef int32_t off_delta, key_len, done
        cdef int value_null, rc = 0
        cdef uint8_t a, dummy = 0
        cdef const uint8_t *p = &buf[0] if nbuf > 0 else &dummy
        cdef int64_t rec_start
        cdef _OmRec chunk[_OM_CHUNK]
        cdef int k, j
        cdef _DcErr err
        err.status = 0; err.pos = 0; err.a = 0; err.b = 0; err.c = 0; err.batch = 0
        # a record takes >= 7 bytes: a claimed count never sizes more entries than the bytes hold
        cdef _OmKept *kept = <_OmKept *>malloc((min(n, (e - s) // 7) + 1) * sizeof(_OmKept))
        if kept == NULL:
            raise MemoryError()
        try:
            with nogil:
                done = 0
                while done < n and rc == 0:
                    # walk (and check) a chunk of records, prefetching the slots of the keys to look up ...
                    k = 0
                    while done < n and k < _OM_CHUNK:
                        rec_start = pos
                        if _rec_walk_one(p, &pos, e, n, done, &a, &ts_delta, &off_delta, &key_at, &key_len,
                                        &value_null, &err) < 0:
                            rc = -1
                            break
                        off = <int64_t>(<uint64_t>bo + <uint64_t><int64_t>off_delta)
                        chunk[k].off = off
                        chunk[k].pos = rec_start
                        chunk[k].ts = mt if lat else <int64_t>(<uint64_t>bt + <uint64_t>ts_delta)
                        chunk[k].flag = (a & RECORD_TOMBSTONE_FLAG_MASK) != 0
                        chunk[k].tomb = chunk[k].flag or value_null
                        chunk[k].keyed = key_len >= 0
                        if off <= latest and key_len >= 0:
                            kb_om_digest(p + key_at, key_len, &chunk[k].d0, &chunk[k].d1)
                            kb_om_prefetch(&self.m, chunk[k].d0, chunk[k].d1)
                        bound += pos - rec_start + 15  # a record written again grows by its timestamp delta at most
                        k += 1
                        done += 1
                    # ... then decide (Cleaner.shouldRetainRecord)
                    for j in range(k):
                        if chunk[j].off <= latest:
                            if not chunk[j].keyed:
                                invalid += 1
                                continue
                            if chunk[j].off < kb_om_get(&self.m, chunk[j].d0, chunk[j].d1):
                                superseded += 1
                                continue
                            if chunk[j].tomb and not keep_tombs:
                                tomb_removed += 1
                                continue
                        if chunk[j].tomb:
                            tomb_kept += 1
                        kept[n_kept].pos = chunk[j].pos
                        kept[n_kept].ts = chunk[j].ts
                        kept[n_kept].flag = chunk[j].flag
                        n_kept += 1
                if rc == 0 and pos != e:
                    err.status = 7; err.pos = pos; err.a = n; err.b = e - pos
                    rc = -1
            if rc < 0:
                _dc_raise(err, (bo,), (n,))
            counts = (n_kept, superseded, invalid, tomb_removed, tomb_kept)
            out_horizon = delete_horizon if has_horizon or not tomb_kept else fresh
            if n_kept == 0 or (n_kept == n and out_horizon is delete_horizon):
                return (None, *counts, bt, mt, delete_horizon)
            return self._rewrite(p, kept, n_kept, bound, out_horizon, no_ts, counts)
        finally:
            free(kept)

    cdef tuple _rewrite(self, const uint8_t *p, _OmKept *kept, int64_t n_kept, int64_t bound, object horizon,
                        int64_t no_ts, tuple counts):
        cdef int64_t base_ts = kept[0].ts if horizon is None else <int64_t>horizon
        cdef int64_t max_ts = no_ts, i
        cdef uint8_t *out = <uint8_t *>malloc(bound + 5)
        cdef uint8_t *o = out
        if out == NULL:
            raise MemoryError()
        try:
            with nogil:
                for i in range(n_kept):
                    if kept[i].ts > max_ts:
                        max_ts = kept[i].ts
                    o = _om_rewrite(p, kept[i].pos, o, kept[i].flag,
                                    <int64_t>(<uint64_t>kept[i].ts - <uint64_t>base_ts))
            section = PyBytes_FromStringAndSize(<char *>out, o - out)
        finally:
            free(out)
        return (section, *counts, base_ts, max_ts, horizon)
