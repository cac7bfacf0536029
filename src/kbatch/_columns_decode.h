/* The record walk of decode_columns_v2 (_columns_kernel.pxi): v2 records straight into Arrow-layout
 * column buffers. Written in C rather than Cython so the walk keeps its cursor, limits and output
 * pointers in registers (restrict: no store to a column can change another) and copies keys and
 * values with inline moves instead of a libc call per field. The contract (statuses, positions and
 * numbers of every error) is kbatch._core_py.decode_columns_v2; tests/test_kernels.py checks each
 * walk this CPU runs against it. */
#ifndef KBATCH_COLUMNS_DECODE_H
#define KBATCH_COLUMNS_DECODE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_crc32c.h"

/* x86-64 with a compiler that builds AVX2 code in a function of its own (target attribute): the walk
 * is built twice, and the AVX2 one runs where the CPU has it (32-byte moves for keys and values) */
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 8) || \
                            (defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9))
#define KB_DC_HAVE_AVX2 1
#include <immintrin.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define KB_DC_ALWAYS_INLINE inline __attribute__((always_inline))
#define KB_DC_LIKELY(x) __builtin_expect(!!(x), 1)
#define KB_DC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KB_DC_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#define KB_DC_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define KB_DC_ALWAYS_INLINE inline
#define KB_DC_LIKELY(x) (x)
#define KB_DC_UNLIKELY(x) (x)
#define KB_DC_PREFETCH(p) ((void)(p))
#define KB_DC_PREFETCH_W(p) ((void)(p))
#endif

/* bytes of the next batch asked for ahead of where this batch's walk is */
#define KB_DC_PREFETCH_AHEAD 4096

/* An error: a status of kbatch.errors (ST_*), its byte position and the numbers its message
 * names; -2 is out of memory. */
typedef struct {
    int status;
    int64_t pos;
    int64_t a;
    int64_t b;
    int64_t c;
    int64_t batch;
} kb_dc_err;

/* Header columns, grown as headers come (most records have none: nothing is reserved for them). */
typedef struct {
    int32_t *k_off;
    int32_t *v_off;
    uint8_t *v_val;
    uint8_t *k_dat;
    uint8_t *v_dat;
    int64_t cap_h; /* entries of v_val (the offsets hold one more) */
    int64_t cap_k;
    int64_t cap_v;
} kb_dc_hdr;

/* The batches to walk: each one's records section [starts[i], ends[i]) of buf and header fields;
 * crcs (or NULL): the stored CRC to check first (-1: skip), over the crc_lead bytes before the
 * records section and the section itself; the batch's header is the header_size bytes before its
 * records section. */
typedef struct {
    const uint8_t *buf;
    int64_t nbuf;
    const int64_t *starts, *ends, *bases, *bts, *mts, *crcs;
    const int32_t *counts;
    const int16_t *attrs;
    int64_t nb;
    int64_t crc_lead;
    int64_t header_size;
    int headers;
    /* 0: the keys (values) are walked over, not copied: their data stays empty, their offsets 0
     * (a projection without them; their validity and null counts are still the records') */
    int keys;
    int values;
} kb_dc_in;

/* Per-record columns (the offsets hold one more entry) and the key and value data. */
typedef struct {
    int64_t *off, *ts;
    uint8_t *tsv, *tomb, *k_val, *v_val;
    int32_t *tt, *bi, *k_off, *v_off, *h_off;
    uint8_t *k_dat, *v_dat;
} kb_dc_out;

static int kb_dc_realloc(void **p, int64_t nbytes) {
    void *q = realloc(*p, (size_t)nbytes);
    if (q == NULL) return -1;
    *p = q;
    return 0;
}

/* Grow *p to hold `need` items of `item` bytes (and `extra` more items), doubling from at least
 * `least`; *cap counts items. -1 when memory runs out. */
static int kb_dc_grow(void **p, int64_t *cap, int64_t need, int64_t least, int64_t item, int64_t extra) {
    int64_t c = need;
    if (*cap * 2 > c) c = *cap * 2;
    if (c < least) c = least;
    if (kb_dc_realloc(p, (c + extra) * item) < 0) return -1;
    *cap = c;
    return 0;
}

/* Room for `entries` headers (their offsets: one more) and kbytes / vbytes of header keys / values,
 * growing by doubling; -1 when memory runs out. */
static int kb_dc_hdr_room(kb_dc_hdr *hb, int64_t entries, int64_t kbytes, int64_t vbytes) {
    if (entries > hb->cap_h) {
        int64_t c = hb->cap_h;
        if (kb_dc_grow((void **)&hb->k_off, &c, entries, 1024, 4, 1) < 0) return -1;
        c = hb->cap_h;
        if (kb_dc_grow((void **)&hb->v_off, &c, entries, 1024, 4, 1) < 0) return -1;
        if (kb_dc_grow((void **)&hb->v_val, &hb->cap_h, entries, 1024, 1, 0) < 0) return -1;
    }
    if (kbytes > hb->cap_k && kb_dc_grow((void **)&hb->k_dat, &hb->cap_k, kbytes, 4096, 1, 0) < 0) return -1;
    if (vbytes > hb->cap_v && kb_dc_grow((void **)&hb->v_dat, &hb->cap_v, vbytes, 4096, 1, 0) < 0) return -1;
    return 0;
}

/* The one- and two-byte varints (lengths, deltas and counts, timestamp deltas within +-8 s): the
 * unsigned value at buf[*pos] into *raw and 1, or 0 when it takes more bytes or reaches limit. */
static inline int kb_dc_short_varint(const uint8_t *buf, int64_t *pos, int64_t limit, uint32_t *raw) {
    const int64_t p = *pos;
    uint32_t b0, b1;
    if (KB_DC_LIKELY(p + 1 < limit)) {
        b0 = buf[p];
        if (b0 < 0x80) {
            *pos = p + 1;
            *raw = b0;
            return 1;
        }
        b1 = buf[p + 1];
        if (b1 < 0x80) {
            *pos = p + 2;
            *raw = (b0 & 0x7F) | (b1 << 7);
            return 1;
        }
    }
    return 0;
}

/* A zigzag varint (at most 5 bytes) at buf[*pos] before limit. */
static inline int kb_dc_varint(const uint8_t *buf, int64_t *pos, int64_t limit, int32_t *out, kb_dc_err *err) {
    int64_t p = *pos;
    uint32_t raw, b;
    int i;
    if (kb_dc_short_varint(buf, pos, limit, &raw)) {
        *out = (int32_t)((raw >> 1) ^ (0u - (raw & 1)));
        return 0;
    }
    raw = 0;
    for (i = 0; i < 5; i++) {
        if (p + i >= limit) {
            err->status = 1; err->pos = p + i;
            return -1;
        }
        b = buf[p + i];
        if (i == 4) {
            if (b & 0x80) {
                err->status = 2; err->pos = p;
                return -1;
            }
            raw |= b << 28;
            *pos = p + 5;
            break;
        }
        raw |= (b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p + i + 1;
            break;
        }
    }
    *out = (int32_t)((raw >> 1) ^ (0u - (raw & 1)));
    return 0;
}

/* A zigzag varlong (at most 10 bytes) at buf[*pos] before limit. */
static inline int kb_dc_varlong(const uint8_t *buf, int64_t *pos, int64_t limit, int64_t *out, kb_dc_err *err) {
    int64_t p = *pos, i = p;
    uint64_t raw, b;
    uint32_t short_raw;
    int shift = 0;
    if (kb_dc_short_varint(buf, pos, limit, &short_raw)) {
        *out = (int64_t)(((uint64_t)short_raw >> 1) ^ (0 - (uint64_t)(short_raw & 1)));
        return 0;
    }
    raw = 0;
    for (;;) {
        if (i >= limit) {
            err->status = 1; err->pos = i;
            return -1;
        }
        b = buf[i++];
        if (b & 0x80) {
            raw |= (b & 0x7F) << shift;
            shift += 7;
            if (shift > 63) {
                err->status = 3; err->pos = p;
                return -1;
            }
        } else {
            raw |= b << shift;
            break;
        }
    }
    *out = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
    *pos = i;
    return 0;
}

/* n bytes from s to d with fixed-size moves (overlapping at the tail) for the sizes keys and
 * values usually have; neither side is touched outside its n bytes. */
static inline void kb_dc_copy(uint8_t *restrict d, const uint8_t *restrict s, int64_t n) {
    if (n >= 16) {
        if (n <= 32) {
            memcpy(d, s, 16);
            memcpy(d + n - 16, s + n - 16, 16);
        } else if (n <= 256) {
            int64_t k = 0;
            for (; k + 32 <= n; k += 32) memcpy(d + k, s + k, 32);
            if (k < n) memcpy(d + n - 32, s + n - 32, 32);
        } else {
            memcpy(d, s, (size_t)n);
        }
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (int64_t k = 0; k < n; k++) d[k] = s[k];
    }
}

#if defined(KB_DC_HAVE_AVX2)
/* kb_dc_copy with 32-byte moves */
__attribute__((target("avx2"))) static inline void kb_dc_copy_avx2(uint8_t *restrict d, const uint8_t *restrict s,
                                                                   int64_t n) {
    if (n >= 32 && n <= 256) {
        int64_t k = 0;
        for (; k + 32 <= n; k += 32)
            _mm256_storeu_si256((__m256i *)(d + k), _mm256_loadu_si256((const __m256i *)(s + k)));
        if (k < n)
            _mm256_storeu_si256((__m256i *)(d + n - 32), _mm256_loadu_si256((const __m256i *)(s + n - 32)));
    } else {
        kb_dc_copy(d, s, n);
    }
}
#endif

/* A key or value at buf[*q]: its bytes appended to dat at *d (write_ahead: the lines 2 KiB ahead
 * asked for first; copy 0: stepped over, nothing written); 0, 1 when it is null, -1 with err set. */
static KB_DC_ALWAYS_INLINE int kb_dc_blob(const uint8_t *restrict buf, int64_t *q, int64_t rec_end,
                                          uint8_t *restrict dat, int64_t *d, const int write_ahead,
                                          const int copy, const int avx2, kb_dc_err *err) {
    int32_t n;
    if (kb_dc_varint(buf, q, rec_end, &n, err) < 0) return -1;
    if (n < 0) return 1;
    if (KB_DC_UNLIKELY(n > rec_end - *q)) {
        err->status = 14; err->pos = *q; err->a = n; err->b = rec_end - *q;
        return -1;
    }
    if (!copy) {
        *q += n;
        return 0;
    }
    /* a decode larger than the caches writes to memory no cache holds, and the hardware's
     * prefetcher does not get the value data's lines ready early enough (7 % of a decode) */
    if (write_ahead) KB_DC_PREFETCH_W(dat + *d + 2048);
#if defined(KB_DC_HAVE_AVX2)
    if (avx2)
        kb_dc_copy_avx2(dat + *d, buf + *q, n);
    else
#endif
        kb_dc_copy(dat + *d, buf + *q, n);
    (void)avx2;
    *d += n;
    *q += n;
    return 0;
}

/* Walk every record of every batch of `in` into `o` (and the header columns into hb). The
 * per-record arrays hold sum(min(count, section bytes // 7)) rows (a record takes >= 7 bytes), key
 * and value data the section bytes: every output byte comes from a section byte. n_hdr: headers
 * written; stats: null timestamps, smallest and largest timestamp, null keys, null values, null
 * header values (so the Arrow assembly needs no pass to find them). 0, or -1 with err set. */
static KB_DC_ALWAYS_INLINE int kb_dc_walk(const kb_dc_in *in, const kb_dc_out *o, kb_dc_hdr *hb, int64_t *n_hdr,
                                         int64_t *stats, kb_dc_err *err, const int avx2) {
    const uint8_t *restrict buf = in->buf;
    const int64_t nbuf = in->nbuf;
    int64_t *restrict o_off = o->off;
    int64_t *restrict o_ts = o->ts;
    uint8_t *restrict o_tsv = o->tsv;
    uint8_t *restrict o_tomb = o->tomb;
    uint8_t *restrict k_val = o->k_val;
    uint8_t *restrict v_val = o->v_val;
    int32_t *restrict o_tt = o->tt;
    int32_t *restrict o_bi = o->bi;
    int32_t *restrict k_off = o->k_off;
    int32_t *restrict v_off = o->v_off;
    int32_t *restrict h_off = o->h_off;
    uint8_t *restrict k_dat = o->k_dat;
    uint8_t *restrict v_dat = o->v_dat;
    const int headers = in->headers;
    const int want_keys = in->keys, want_values = in->values;
    int64_t r = 0, h = 0, kd = 0, vd = 0, hkd = 0, hvd = 0;
    int64_t ts_nulls = 0, ts_min = INT64_MAX, ts_max = INT64_MIN, k_nulls = 0, v_nulls = 0, hv_nulls = 0;
    k_off[0] = 0; v_off[0] = 0; h_off[0] = 0;
    if (headers) {
        if (kb_dc_hdr_room(hb, 1, 0, 0) < 0) {
            err->status = -2;
            return -1;
        }
        hb->k_off[0] = 0; hb->v_off[0] = 0;
    }
    for (int64_t bi = 0; bi < in->nb; bi++) {
        int64_t pos = in->starts[bi];
        const int64_t end = in->ends[bi];
        const int32_t count = in->counts[bi];
        err->batch = bi;
        if (pos < 0 || end > nbuf || end < pos) {
            err->status = 1; err->pos = pos; err->a = end; err->b = nbuf;
            return -1;
        }
        if (in->crcs != NULL && in->crcs[bi] >= 0) {
            /* checked here, right before the records, so the walk below reads the batch from cache */
            uint32_t crc;
            if (pos < in->header_size) {
                err->status = 1; err->pos = pos; err->a = end; err->b = nbuf;
                return -1;
            }
            crc = kb_crc32c(0, buf + pos - in->crc_lead, (size_t)(end - pos + in->crc_lead));
            if ((int64_t)crc != in->crcs[bi]) {
                err->status = 9; err->pos = pos - in->header_size; err->a = crc; err->b = in->crcs[bi];
                return -1;
            }
        }
        if (count < 0) {
            err->status = 12; err->pos = pos; err->a = count;
            return -1;
        }
        const int16_t attr = in->attrs[bi];
        const int64_t no_ts = (attr & 0x80) ? INT64_MIN : -1;
        const int is_lat = (attr & 0x08) != 0;
        const int64_t lat = in->mts[bi];
        const uint64_t base = (uint64_t)in->bases[bi];
        const uint64_t bts = (uint64_t)in->bts[bi];
        /* while this batch's records are walked (from cache: its CRC pass just read them), ask for
         * the next batch's bytes, a few lines a record, so its CRC pass reads them from cache too
         * instead of waiting on memory (without a CRC pass the walk reads the batch in order and the
         * hardware prefetcher keeps up: asking costs more than it saves) */
        int64_t pf = 0, pf_end = 0, pf_from = 0;
        if (bi + 1 < in->nb && in->crcs != NULL && in->crcs[bi + 1] >= 0
            && 0 <= in->starts[bi + 1] - in->crc_lead && in->ends[bi + 1] <= nbuf) {
            pf = in->starts[bi + 1] - in->crc_lead;
            pf_end = in->ends[bi + 1];
            pf_from = pf - pos - KB_DC_PREFETCH_AHEAD;
        }
        for (int32_t done = 0; done < count; done++) {
            int64_t rec_start, rec_end, q;
            int null, v_null;
            int64_t ts_delta, ts;
            int32_t length, off_delta, nh;
            uint8_t a;
            while (pf < pf_end && pf < pos + pf_from + 2 * KB_DC_PREFETCH_AHEAD) {
                KB_DC_PREFETCH(buf + pf);
                pf += 64;
            }
            if (KB_DC_UNLIKELY(pos >= end)) {
                err->status = 8; err->pos = pos; err->a = count; err->b = done;
                return -1;
            }
            rec_start = pos;
            if (kb_dc_varint(buf, &pos, end, &length, err) < 0) return -1;
            if (KB_DC_UNLIKELY(length < 0 || length > end - pos)) {
                err->status = 13; err->pos = rec_start; err->a = end - pos; err->b = length;
                return -1;
            }
            rec_end = pos + length;
            if (KB_DC_UNLIKELY(rec_end - pos < 1)) {
                err->status = 14; err->pos = pos; err->a = 1; err->b = 0; err->c = 1;
                return -1;
            }
            /* the fields are walked with their own cursor: the next record starts at rec_end, so
             * one record's walk does not wait on the previous one's (only on its length) */
            q = pos;
            a = buf[q++];
            if (kb_dc_varlong(buf, &q, rec_end, &ts_delta, err) < 0) return -1;
            if (kb_dc_varint(buf, &q, rec_end, &off_delta, err) < 0) return -1;
            /* key, value */
            null = kb_dc_blob(buf, &q, rec_end, k_dat, &kd, 0, want_keys, avx2, err);
            if (null < 0) return -1;
            k_val[r] = (uint8_t)!null;
            k_nulls += null;
            k_off[r + 1] = (int32_t)kd;
            v_null = kb_dc_blob(buf, &q, rec_end, v_dat, &vd, 1, want_values, avx2, err);
            if (v_null < 0) return -1;
            v_val[r] = (uint8_t)!v_null;
            v_nulls += v_null;
            v_off[r + 1] = (int32_t)vd;
            /* headers */
            if (kb_dc_varint(buf, &q, rec_end, &nh, err) < 0) return -1;
            if (KB_DC_UNLIKELY(nh < 0)) {
                err->status = 6; err->pos = q; err->a = nh;
                return -1;
            }
            if (KB_DC_UNLIKELY(nh > rec_end - q)) {
                err->status = 15; err->pos = q; err->a = rec_end - q; err->b = nh;
                return -1;
            }
            for (int32_t j = 0; j < nh; j++) {
                const int64_t hstart = q;
                int32_t klen, hn;
                int64_t hv_pos;
                if (kb_dc_varint(buf, &q, rec_end, &klen, err) < 0) return -1;
                if (klen < 0) {
                    err->status = 5; err->pos = hstart; err->a = klen;
                    return -1;
                }
                if (klen > rec_end - q) {
                    err->status = 14; err->pos = q; err->a = klen; err->b = rec_end - q; err->c = 1;
                    return -1;
                }
                hv_pos = q + klen;
                if (kb_dc_varint(buf, &hv_pos, rec_end, &hn, err) < 0) return -1;
                if (hn >= 0 && hn > rec_end - hv_pos) {
                    err->status = 14; err->pos = hv_pos; err->a = hn; err->b = rec_end - hv_pos;
                    return -1;
                }
                if (headers) {
                    if (kb_dc_hdr_room(hb, h + 1, hkd + klen, hvd + (hn > 0 ? hn : 0)) < 0) {
                        err->status = -2;
                        return -1;
                    }
                    memcpy(hb->k_dat + hkd, buf + q, (size_t)klen);
                    hkd += klen;
                    if (hn < 0) {
                        hb->v_val[h] = 0;
                        hv_nulls++;
                    } else {
                        memcpy(hb->v_dat + hvd, buf + hv_pos, (size_t)hn);
                        hvd += hn;
                        hb->v_val[h] = 1;
                    }
                    h++;
                    hb->k_off[h] = (int32_t)hkd;
                    hb->v_off[h] = (int32_t)hvd;
                }
                q = hv_pos + (hn > 0 ? hn : 0);
            }
            if (KB_DC_UNLIKELY(q != rec_end)) {
                err->status = 4; err->pos = rec_start; err->a = length; err->b = length - (rec_end - q);
                return -1;
            }
            pos = rec_end;
            h_off[r + 1] = (int32_t)h;
            o_off[r] = (int64_t)(base + (uint64_t)(int64_t)off_delta);
            ts = is_lat ? lat : (int64_t)(bts + (uint64_t)ts_delta);
            if (ts == no_ts) {
                o_tsv[r] = 0; o_ts[r] = 0;
                ts_nulls++;
            } else {
                o_tsv[r] = 1; o_ts[r] = ts;
                ts_min = ts < ts_min ? ts : ts_min;
                ts_max = ts > ts_max ? ts : ts_max;
            }
            o_tt[r] = is_lat;
            o_tomb[r] = (uint8_t)(v_null | ((a & 0x20) != 0));
            o_bi[r] = (int32_t)bi;
            r++;
        }
        if (pos != end) {
            err->status = 7; err->pos = pos; err->a = count; err->b = end - pos;
            return -1;
        }
    }
    *n_hdr = h;
    stats[0] = ts_nulls; stats[1] = ts_min; stats[2] = ts_max;
    stats[3] = k_nulls; stats[4] = v_nulls; stats[5] = hv_nulls;
    return 0;
}

static int kb_dc_loop_generic(const kb_dc_in *in, const kb_dc_out *o, kb_dc_hdr *hb, int64_t *n_hdr, int64_t *stats,
                              kb_dc_err *err) {
    return kb_dc_walk(in, o, hb, n_hdr, stats, err, 0);
}

#if defined(KB_DC_HAVE_AVX2)
__attribute__((target("avx2,bmi,bmi2"))) static int kb_dc_loop_avx2(const kb_dc_in *in, const kb_dc_out *o,
                                                                    kb_dc_hdr *hb, int64_t *n_hdr, int64_t *stats,
                                                                    kb_dc_err *err) {
    return kb_dc_walk(in, o, hb, n_hdr, stats, err, 1);
}
#endif

/* The walks this CPU runs, fastest last (0 generic, 1 AVX2); kb_dc_walk_limit(k) uses those up to
 * k only and returns the previous limit. For tests; not thread-safe. */
static int kb_dc_walks(void) {
#if defined(KB_DC_HAVE_AVX2)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") ? 1 : 0;
#else
    return 0;
#endif
}

/* 1: the AVX2 walk runs (the CPU has it), 0: the generic one; tests lower it to check both */
static int kb_dc_simd = -1;

static int kb_dc_loop(const kb_dc_in *in, const kb_dc_out *o, kb_dc_hdr *hb, int64_t *n_hdr, int64_t *stats,
                      kb_dc_err *err) {
#if defined(KB_DC_HAVE_AVX2)
    if (kb_dc_simd < 0) kb_dc_simd = kb_dc_walks();
    if (kb_dc_simd) return kb_dc_loop_avx2(in, o, hb, n_hdr, stats, err);
#endif
    return kb_dc_loop_generic(in, o, hb, n_hdr, stats, err);
}

static int kb_dc_walk_limit(int k) {
    int previous = kb_dc_simd < 0 ? kb_dc_walks() : kb_dc_simd;
    kb_dc_simd = k < kb_dc_walks() ? k : kb_dc_walks();
    return previous;
}

#endif
