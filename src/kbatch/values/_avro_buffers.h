/* The value kernels' buffers (kbatch.values._avro_kernel and _protobuf_kernel): a growable byte
 * buffer with always-inlined appends and a bounded pool of the large blocks Arrow let go of (each
 * extension module has its own); and the Avro kernel's reads: its zigzag varint and a short bytes
 * decimal. */
#ifndef KB_AVRO_BUFFERS_H
#define KB_AVRO_BUFFERS_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

/* A growable byte buffer and its appends (kbatch.values._avro_kernel). The appends are always
   inlined: the decode loop is too large for the compiler to inline them on its own, and a call
   an appended value cost a fifth of a 40-field decode. */
typedef struct { char *p; int64_t n; int64_t cap; } kb_buf;

/* Large buffers that Arrow let go of, kept for the next decode's columns: a fresh block is
   mapped lazily and each 4 KiB page of it traps and is zeroed as the loop first writes it
   (about a quarter of a 40-field decode's time), where a block used before is written at once. At
   most KB_POOL_BYTES in all (freed past it), each of KB_POOL_MIN bytes or more; a block is
   taken for a want of at least half its size. */
#define KB_POOL_SLOTS 64
#define KB_POOL_MIN (64 << 10)
#define KB_POOL_BYTES ((int64_t)64 << 20)
static pthread_mutex_t kb_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kb_pool_p[KB_POOL_SLOTS];
static int64_t kb_pool_cap[KB_POOL_SLOTS];
static int64_t kb_pool_bytes = 0;

static void kb_release(char *p, int64_t cap) {
    int i;
    if (p == NULL)
        return;
    if (cap >= KB_POOL_MIN) {
        pthread_mutex_lock(&kb_pool_lock);
        if (kb_pool_bytes + cap <= KB_POOL_BYTES) {
            for (i = 0; i < KB_POOL_SLOTS; i++) {
                if (kb_pool_p[i] == NULL) {
                    kb_pool_p[i] = p;
                    kb_pool_cap[i] = cap;
                    kb_pool_bytes += cap;
                    pthread_mutex_unlock(&kb_pool_lock);
                    return;
                }
            }
        }
        pthread_mutex_unlock(&kb_pool_lock);
    }
    free(p);
}

/* The smallest kept block of need..most bytes (its size in *cap), or NULL. */
static char *kb_pool_take(int64_t need, int64_t most, int64_t *cap) {
    int i, best = -1;
    char *p = NULL;
    pthread_mutex_lock(&kb_pool_lock);
    for (i = 0; i < KB_POOL_SLOTS; i++) {
        if (kb_pool_p[i] != NULL && kb_pool_cap[i] >= need && kb_pool_cap[i] <= most &&
                (best < 0 || kb_pool_cap[i] < kb_pool_cap[best]))
            best = i;
    }
    if (best >= 0) {
        p = kb_pool_p[best];
        *cap = kb_pool_cap[best];
        kb_pool_p[best] = NULL;
        kb_pool_bytes -= *cap;
    }
    pthread_mutex_unlock(&kb_pool_lock);
    return p;
}

/* fork(): the pool's lock is taken around it, so a child never starts with it held by a thread it
   does not have (as malloc does for its own locks). */
static void kb_pool_lock_take(void) { pthread_mutex_lock(&kb_pool_lock); }
static void kb_pool_lock_give(void) { pthread_mutex_unlock(&kb_pool_lock); }
static void kb_pool_init(void) {
    (void)pthread_atfork(kb_pool_lock_take, kb_pool_lock_give, kb_pool_lock_give);
}

static inline int64_t kb_pool_kept(void) {
    int64_t n;
    pthread_mutex_lock(&kb_pool_lock);
    n = kb_pool_bytes;
    pthread_mutex_unlock(&kb_pool_lock);
    return n;
}

/* Room for `more` bytes: 0, or 13 (past Arrow's int32 offsets: 2 GiB a buffer) / 12 (no memory). */
static __attribute__((noinline)) int kb_grow(kb_buf *b, int64_t more) {
    int64_t cap, got;
    char *p;
    if (b->n + more <= b->cap)
        return 0;
    if (b->n + more > 0x7FFFFFFF)
        return 13;
    cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->n + more)
        cap *= 2;
    if (cap > 0x7FFFFFFF)
        cap = 0x7FFFFFFF;
    if (cap >= KB_POOL_MIN &&  /* a kept block, if one is at most twice the need (or what realloc would give) */
            (p = kb_pool_take(b->n + more, 2 * (b->n + more) > cap ? 2 * (b->n + more) : cap, &got)) != NULL) {
        if (b->n)
            memcpy(p, b->p, (size_t)b->n);
        kb_release(b->p, b->cap);
        b->p = p;
        b->cap = got;
        return 0;
    }
    p = (char *)realloc(b->p, (size_t)cap);
    if (p == NULL)
        return 12;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Append size bytes (a constant size becomes one store). */
static inline __attribute__((always_inline)) int kb_put(kb_buf *b, const void *src, int64_t size) {
    if (b->n + size > b->cap) {
        int e = kb_grow(b, size);
        if (e)
            return e;
    }
    memcpy(b->p + b->n, src, (size_t)size);
    b->n += size;
    return 0;
}

static inline __attribute__((always_inline)) int kb_zero(kb_buf *b, int64_t size) {
    if (b->n + size > b->cap) {
        int e = kb_grow(b, size);
        if (e)
            return e;
    }
    memset(b->p + b->n, 0, (size_t)size);
    b->n += size;
    return 0;
}

/* Avro's zigzag varint at *p (kbatch.values._avro_kernel): always inlined, it is the hot
   path of every int, long, length, count and index. err: 1 the payload ends early, 2 longer
   than 10 bytes. */
static inline __attribute__((always_inline)) int64_t kb_read_long(const uint8_t **pp, const uint8_t *end,
                                                                 int *err) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    int k;
    if (end - p >= 10) {  /* room for the longest: no end check a byte */
        if (p[0] < 0x80) {  /* one byte: small numbers, lengths, union and enum indexes */
            *pp = p + 1;
            return (int64_t)(p[0] >> 1) ^ -(int64_t)(p[0] & 1);
        }
        for (k = 0; k < 10; k++) {
            uint8_t b = p[k];
            v |= (uint64_t)(b & 0x7F) << (7 * k);
            if (b < 0x80) {
                *pp = p + k + 1;
                return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            }
        }
        *err = 2;
        return 0;
    }
    for (k = 0; k < 10; k++) {
        uint8_t b;
        if (p + k >= end) {
            *err = 1;
            return 0;
        }
        b = p[k];
        v |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            *pp = p + k + 1;
            return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        }
    }
    *err = 2;
    return 0;
}

/* A bytes decimal of 1..8 bytes (big-endian two's complement) as an int64, read as one word
   where 8 bytes are left to read: 1, or 0 (the caller's byte loop). */
static inline __attribute__((always_inline)) int kb_dec_short(const uint8_t *p, int64_t n,
                                                             const uint8_t *end, int64_t *v) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t x;
    if (n <= 0 || n > 8 || end - p < 8)
        return 0;
    memcpy(&x, p, 8);
    *v = (int64_t)__builtin_bswap64(x) >> (64 - 8 * n);  /* the n bytes on top, sign-extended */
    return 1;
#else
    (void)p; (void)n; (void)end; (void)v;
    return 0;
#endif
}

#endif
