/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for kbatch._core.
 * Hardware path: the SSE4.2 crc32 instruction, chosen at run time with cpuid, so one wheel
 * runs on every x86-64.  Inputs of 3 * 256 bytes and more are cut into three blocks whose CRCs
 * run as three independent streams (the instruction has a latency of 3 cycles and a throughput
 * of 1 per cycle, so one stream leaves two thirds of it idle), then joined:
 *     crc(A || B || C) = shift(shift(crc(A)) ^ crc(B)) ^ crc(C)
 * where shift(x) = the register after |B| zero bytes from x: a linear map of GF(2)^32, applied
 * as four 256-entry tables per block size, built once at import.
 * Software path: slicing-by-8 tables, built once at import. */
#ifndef KBATCH_CRC32C_H
#define KBATCH_CRC32C_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

static uint32_t kb_crc_table[8][256];
static int kb_crc_hw = 0;

#define KB_CRC_LONG 16384  /* bytes per stream of a long block (3 streams: 48 KiB per step) */
#define KB_CRC_SHORT 256   /* bytes per stream of a short block (768 bytes per step) */
static uint32_t kb_crc_shift_long[4][256];   /* shift by KB_CRC_LONG zero bytes */
static uint32_t kb_crc_shift_short[4][256];  /* shift by KB_CRC_SHORT zero bytes */

/* The raw register after n zero bytes, from register x (bytewise, for building tables). */
static uint32_t kb_crc_zeros(uint32_t x, size_t n) {
    while (n--) x = kb_crc_table[0][x & 0xFF] ^ (x >> 8);
    return x;
}

/* Tables of the linear map x -> kb_crc_zeros(x, n): image of each byte of x, per byte lane. */
static void kb_crc_shift_init(uint32_t table[4][256], size_t n) {
    uint32_t basis[32];
    for (int i = 0; i < 32; i++) basis[i] = kb_crc_zeros((uint32_t)1 << i, n);
    for (int lane = 0; lane < 4; lane++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1u << i)) v ^= basis[8 * lane + i];
            table[lane][b] = v;
        }
}

static inline uint32_t kb_crc_shift(const uint32_t table[4][256], uint32_t x) {
    return table[0][x & 0xFF] ^ table[1][(x >> 8) & 0xFF] ^ table[2][(x >> 16) & 0xFF] ^ table[3][x >> 24];
}

static void kb_crc32c_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
        kb_crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = kb_crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = kb_crc_table[0][c & 0xFF] ^ (c >> 8);
            kb_crc_table[t][n] = c;
        }
    }
    kb_crc_shift_init(kb_crc_shift_long, KB_CRC_LONG);
    kb_crc_shift_init(kb_crc_shift_short, KB_CRC_SHORT);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    kb_crc_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

/* crc is the raw register (already inverted by the caller). */
static uint32_t kb_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) { crc = kb_crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* memcpy: no unaligned pointer casts */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        uint32_t lo = (uint32_t)w ^ crc, hi = (uint32_t)(w >> 32);
        crc = kb_crc_table[7][lo & 0xFF] ^ kb_crc_table[6][(lo >> 8) & 0xFF] ^
              kb_crc_table[5][(lo >> 16) & 0xFF] ^ kb_crc_table[4][lo >> 24] ^
              kb_crc_table[3][hi & 0xFF] ^ kb_crc_table[2][(hi >> 8) & 0xFF] ^
              kb_crc_table[1][(hi >> 16) & 0xFF] ^ kb_crc_table[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n--) crc = kb_crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
static inline uint64_t kb_crc_load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8); /* memcpy: no unaligned pointer casts */
    return w;
}

/* Three streams of `len` bytes (a multiple of 8) each, while at least 3 * len bytes remain. */
__attribute__((target("sse4.2")))
static uint64_t kb_crc32c_hw3(uint64_t c, const uint8_t **pp, size_t *pn, size_t len,
                              const uint32_t shift[4][256]) {
    const uint8_t *p = *pp;
    size_t n = *pn;
    while (n >= 3 * len) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + len;
        while (p < end) {
            c = _mm_crc32_u64(c, kb_crc_load64(p));
            c1 = _mm_crc32_u64(c1, kb_crc_load64(p + len));
            c2 = _mm_crc32_u64(c2, kb_crc_load64(p + 2 * len));
            p += 8;
        }
        c = kb_crc_shift(shift, (uint32_t)c) ^ (uint32_t)c1;
        c = kb_crc_shift(shift, (uint32_t)c) ^ (uint32_t)c2;
        p += 2 * len;
        n -= 3 * len;
    }
    *pp = p;
    *pn = n;
    return c;
}

__attribute__((target("sse4.2")))
static uint32_t kb_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    if (n >= 3 * KB_CRC_SHORT) {
        c = kb_crc32c_hw3(c, &p, &n, KB_CRC_LONG, kb_crc_shift_long);
        c = kb_crc32c_hw3(c, &p, &n, KB_CRC_SHORT, kb_crc_shift_short);
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, kb_crc_load64(p));
        p += 8; n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

/* Public form: continues from a finished CRC value, like zlib.crc32(data, value). */
static uint32_t kb_crc32c(uint32_t value, const uint8_t *p, size_t n) {
    uint32_t crc = value ^ 0xFFFFFFFFu;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (kb_crc_hw) return kb_crc32c_hw(crc, p, n) ^ 0xFFFFFFFFu;
#endif
    return kb_crc32c_sw(crc, p, n) ^ 0xFFFFFFFFu;
}

static inline int kb_crc32c_is_hw(void) { return kb_crc_hw; }
#endif
