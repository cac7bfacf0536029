/* The log cleaner's key -> latest offset map for kbatch._core.OffsetMap (the pure twin is
 * kbatch._core_py.OffsetMap, which holds the contract).
 *
 * Like Kafka's SkimpyOffsetMap, an entry is 24 bytes: a 16-byte digest of the key and the
 * offset, in one open-addressing table whose memory budget is log.cleaner.dedupe.buffer.size:
 * max_slots = budget / 24. Unlike it, the table starts small and doubles (while it is at most half
 * full) up to max_slots, so a partition with few keys does not touch the whole budget; slots are
 * probed linearly from a position drawn from the digest.
 *
 * Digest (kb_om_digest): a key of up to 15 bytes is kept as itself after a byte holding its
 * length + 1, zero-padded; a longer key as its MD5 (the digest Kafka's cleaner keys by) with the
 * first byte's top bit set. A real digest never starts with a zero byte, so d0 == 0 marks an
 * empty slot, and calloc'ed memory is an empty table. */
#ifndef KBATCH_OFFSET_MAP_H
#define KBATCH_OFFSET_MAP_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- MD5 */
/* RFC 1321, written from its description: 64 steps in four rounds over each 64-byte block. */
static const uint32_t kb_md5_k[64] = {
    0xd76aa478u, 0xe8c7b756u, 0x242070dbu, 0xc1bdceeeu,
    0xf57c0fafu, 0x4787c62au, 0xa8304613u, 0xfd469501u,
    0x698098d8u, 0x8b44f7afu, 0xffff5bb1u, 0x895cd7beu,
    0x6b901122u, 0xfd987193u, 0xa679438eu, 0x49b40821u,
    0xf61e2562u, 0xc040b340u, 0x265e5a51u, 0xe9b6c7aau,
    0xd62f105du, 0x02441453u, 0xd8a1e681u, 0xe7d3fbc8u,
    0x21e1cde6u, 0xc33707d6u, 0xf4d50d87u, 0x455a14edu,
    0xa9e3e905u, 0xfcefa3f8u, 0x676f02d9u, 0x8d2a4c8au,
    0xfffa3942u, 0x8771f681u, 0x6d9d6122u, 0xfde5380cu,
    0xa4beea44u, 0x4bdecfa9u, 0xf6bb4b60u, 0xbebfbc70u,
    0x289b7ec6u, 0xeaa127fau, 0xd4ef3085u, 0x04881d05u,
    0xd9d4d039u, 0xe6db99e5u, 0x1fa27cf8u, 0xc4ac5665u,
    0xf4292244u, 0x432aff97u, 0xab9423a7u, 0xfc93a039u,
    0x655b59c3u, 0x8f0ccc92u, 0xffeff47du, 0x85845dd1u,
    0x6fa87e4fu, 0xfe2ce6e0u, 0xa3014314u, 0x4e0811a1u,
    0xf7537e82u, 0xbd3af235u, 0x2ad7d2bbu, 0xeb86d391u,
};
/* per-round rotations, four per round */
static const unsigned char kb_md5_r[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};

static inline uint32_t kb_rotl32(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

static void kb_md5_block(uint32_t st[4], const unsigned char *p) {
    uint32_t m[16], a = st[0], b = st[1], c = st[2], d = st[3];
    for (int i = 0; i < 16; i++)  /* little-endian words, whatever the host */
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g, round = i >> 4;
        if (round == 0) { f = (b & c) | (~b & d); g = i; }
        else if (round == 1) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
        else if (round == 2) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
        else { f = c ^ (b | ~d); g = (7 * i) & 15; }
        uint32_t t = d;
        d = c;
        c = b;
        b = b + kb_rotl32(a + f + kb_md5_k[i] + m[g], kb_md5_r[4 * round + (i & 3)]);
        a = t;
    }
    st[0] += a; st[1] += b; st[2] += c; st[3] += d;
}

/* MD5 of p[0:n] into out[16]. */
static void kb_md5(const unsigned char *p, size_t n, unsigned char out[16]) {
    uint32_t st[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    unsigned char tail[128];
    size_t full = n & ~(size_t)63, rest = n - full;
    for (size_t i = 0; i < full; i += 64) kb_md5_block(st, p + i);
    memcpy(tail, p + full, rest);
    tail[rest] = 0x80;  /* then zeros up to 8 bytes short of a block end, then the bit length */
    size_t len = rest + 1 <= 56 ? 64 : 128;
    memset(tail + rest + 1, 0, len - rest - 1);
    uint64_t bits = (uint64_t)n << 3;
    for (int i = 0; i < 8; i++) tail[len - 8 + i] = (unsigned char)(bits >> (8 * i));
    kb_md5_block(st, tail);
    if (len == 128) kb_md5_block(st, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (unsigned char)(st[i] >> (8 * j));
}

/* ---------------------------------------------------------------------------------------- map */
typedef struct {
    uint64_t d0, d1;  /* the digest's 16 bytes, in memory order; d0 == 0: an empty slot */
    int64_t offset;
} kb_om_entry;

typedef struct {
    kb_om_entry *slots;
    int64_t n_slots;    /* slots in the table now */
    int64_t max_slots;  /* the memory budget / 24 */
    int64_t size;       /* keys held */
} kb_om;

static inline void kb_om_digest(const unsigned char *key, int64_t n, uint64_t *d0, uint64_t *d1) {
    unsigned char d[16];
    if (n < 16) {
        memset(d, 0, 16);
        d[0] = (unsigned char)(n + 1);
        memcpy(d + 1, key, (size_t)n);
    } else {
        kb_md5(key, (size_t)n, d);
        d[0] |= 0x80;
    }
    memcpy(d0, d, 8);
    memcpy(d1, d + 8, 8);
}

static inline uint64_t kb_om_mix(uint64_t d0, uint64_t d1) {
    /* the murmur3 finalizer over both halves: short keys' digests are mostly zero padding */
    uint64_t h = d0 ^ (d1 * 0x9E3779B97F4A7C15ull);
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static inline int64_t kb_om_home(uint64_t h, int64_t n) {
#ifdef __SIZEOF_INT128__
    return (int64_t)(((unsigned __int128)h * (uint64_t)n) >> 64);  /* any table size, no division */
#else
    return (int64_t)(h % (uint64_t)n);
#endif
}

/* The slot holding the digest, or the empty slot where it would go; NULL when neither exists
 * (every slot taken by other keys: possible only with a load factor of 1). */
static inline kb_om_entry *kb_om_find(const kb_om *m, uint64_t d0, uint64_t d1) {
    int64_t i = kb_om_home(kb_om_mix(d0, d1), m->n_slots);
    for (int64_t probes = 0; probes < m->n_slots; probes++) {
        kb_om_entry *e = m->slots + i;
        if (e->d0 == 0 || (e->d0 == d0 && e->d1 == d1)) return e;
        if (++i == m->n_slots) i = 0;
    }
    return NULL;
}

/* Start loading the slot a digest's probe begins at: the record loops look up a chunk of keys
 * after walking it, so the table's cache misses overlap instead of following one another. */
static inline void kb_om_prefetch(const kb_om *m, uint64_t d0, uint64_t d1) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(m->slots + kb_om_home(kb_om_mix(d0, d1), m->n_slots));
#else
    (void)m; (void)d0; (void)d1;
#endif
}

/* 0, or -1 when memory runs out (the table is then as it was). */
static int kb_om_resize(kb_om *m, int64_t n) {
    kb_om_entry *fresh = (kb_om_entry *)calloc((size_t)n, sizeof(kb_om_entry));
    if (fresh == NULL) return -1;
    kb_om old = *m;
    m->slots = fresh;
    m->n_slots = n;
    for (int64_t i = 0; i < old.n_slots; i++) {
        kb_om_entry *e = old.slots + i;
        if (e->d0 != 0) *kb_om_find(m, e->d0, e->d1) = *e;
    }
    free(old.slots);
    return 0;
}

/* Put (digest, offset): 1 when the key is new, 0 when its offset was replaced, -1 when memory runs
 * out, -2 when every slot of the budget is taken and the key is new. */
static int kb_om_put(kb_om *m, uint64_t d0, uint64_t d1, int64_t offset) {
    kb_om_entry *e = kb_om_find(m, d0, d1);
    if (e != NULL && e->d0 != 0) {
        e->offset = offset;
        return 0;
    }
    if (e == NULL || m->size >= m->max_slots) return -2;
    if (m->n_slots < m->max_slots && 2 * (m->size + 1) > m->n_slots) {  /* keep it at most half full */
        int64_t n = m->n_slots * 2 < m->max_slots ? m->n_slots * 2 : m->max_slots;
        if (kb_om_resize(m, n) < 0) return -1;
        e = kb_om_find(m, d0, d1);
    }
    e->d0 = d0;
    e->d1 = d1;
    e->offset = offset;
    m->size++;
    return 1;
}

static inline int64_t kb_om_get(const kb_om *m, uint64_t d0, uint64_t d1) {
    kb_om_entry *e = kb_om_find(m, d0, d1);
    return e != NULL && e->d0 != 0 ? e->offset : -1;
}

#endif
