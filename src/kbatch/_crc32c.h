/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for kbatch._core.
 * Hardware path: the SSE4.2 crc32 instruction, chosen at run time with cpuid, so one wheel
 * runs on every x86-64.  Inputs of 3 * 256 bytes and more are cut into three blocks whose CRCs
 * run as three independent streams (the instruction has a latency of 3 cycles and a throughput
 * of 1 per cycle, so one stream leaves two thirds of it idle), then joined:
 *     crc(A || B || C) = shift(shift(crc(A)) ^ crc(B)) ^ crc(C)
 * where shift(x) = the register after |B| zero bytes from x: a linear map of GF(2)^32, applied
 * as four 256-entry tables per block size, built once at import.
 * Folding path (x86-64 with AVX-512 and VPCLMULQDQ, chosen at run time): inputs of KB_CRC_FOLD_MIN
 * bytes and more run as sixteen 128-bit lanes folded forward with carry-less multiplies, 256 bytes
 * a step (as the crc32 instruction does at most 8 bytes a cycle, this is about twice as fast on
 * data in cache), then the lanes are folded into one and finished with the crc32 instruction.
 * In the reflected bit order, a lane R (bit i: coefficient of x^(127-i)) moved D bits forward is
 *     clmul(R.lo, rev64(x^(D+63) mod P)) ^ clmul(R.hi, rev64(x^(D-1) mod P))
 * (the product of reflected operands comes out one bit low: hence 63 and -1, not 64 and 0), and
 * the crc32 instruction over a lane's 16 bytes from register 0 gives that lane times x^32 mod P,
 * the CRC register of everything folded into it. The constants are computed at import.
 * Software path: slicing-by-8 tables, built once at import. */
#ifndef KBATCH_CRC32C_H
#define KBATCH_CRC32C_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 8) || \
                            (defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9))
#define KB_CRC_HAVE_FOLD 1  /* a compiler with VPCLMULQDQ intrinsics and target attributes */
#endif

static uint32_t kb_crc_table[8][256];
static int kb_crc_hw = 0;
static int kb_crc_fold = 0;      /* the folding path is available */
static int kb_crc_max_path = 2;  /* 0: software, 1: crc32 instruction, 2: folding (tests lower it) */

#define KB_CRC_FOLD_MIN 1024     /* bytes from which the folding path is worth its set-up */
/* {low qword, high qword} folding constants by 2048 bits (16 lanes), 512 bits (4 lanes), 128 bits */
static uint64_t kb_crc_fold_k[3][2];

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

/* rev64(x^e mod P): x^e mod P (P = 0x1EDC6F41, the CRC-32C polynomial in normal order) reversed
 * as a 64-bit value (its 32 coefficients land in the high half). */
static uint64_t kb_crc_xpow_rev64(unsigned e) {
    uint64_t r = 1;
    while (e--) {
        r <<= 1;
        if (r >> 32) r ^= 0x11EDC6F41ull;
    }
    uint64_t v = 0;
    for (int i = 0; i < 64; i++)
        if (r & ((uint64_t)1 << i)) v |= (uint64_t)1 << (63 - i);
    return v;
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
#if defined(KB_CRC_HAVE_FOLD)
    /* avx512f: the CPU has it and the OS saves its registers (libgcc checks XCR0) */
    kb_crc_fold = kb_crc_hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                  __builtin_cpu_supports("pclmul");
#endif
#endif
    static const unsigned dist[3] = {2048, 512, 128};
    for (int i = 0; i < 3; i++) {
        kb_crc_fold_k[i][0] = kb_crc_xpow_rev64(dist[i] + 63);
        kb_crc_fold_k[i][1] = kb_crc_xpow_rev64(dist[i] - 1);
    }
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

#if defined(KB_CRC_HAVE_FOLD)
#include <immintrin.h>
#define KB_FOLD_ATTR __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

KB_FOLD_ATTR static inline __m512i kb_fold512(__m512i x, __m512i k, __m512i next) {
    /* x moved forward by k's distance, plus next: three-way xor in one instruction (0x96) */
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     next, 0x96);
}

KB_FOLD_ATTR static inline __m512i kb_fold_k512(int i) {
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)kb_crc_fold_k[i][1], (long long)kb_crc_fold_k[i][0]));
}

/* crc: raw register; n >= KB_CRC_FOLD_MIN (>= 512: the first and a second step of 256 bytes). */
KB_FOLD_ATTR static uint32_t kb_crc32c_fold(uint32_t crc, const uint8_t *p, size_t n) {
    __m512i x0 = _mm512_loadu_si512((const void *)p), x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128)), x3 = _mm512_loadu_si512((const void *)(p + 192));
    x0 = _mm512_xor_si512(x0, _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (int)crc));
    p += 256; n -= 256;
    __m512i k = kb_fold_k512(0);
    while (n >= 256) {
        x0 = kb_fold512(x0, k, _mm512_loadu_si512((const void *)p));
        x1 = kb_fold512(x1, k, _mm512_loadu_si512((const void *)(p + 64)));
        x2 = kb_fold512(x2, k, _mm512_loadu_si512((const void *)(p + 128)));
        x3 = kb_fold512(x3, k, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256; n -= 256;
    }
    /* four registers into one (each 512 bits ahead of the next), then its four lanes into one */
    k = kb_fold_k512(1);
    x1 = kb_fold512(x0, k, x1);
    x2 = kb_fold512(x1, k, x2);
    x3 = kb_fold512(x2, k, x3);
    __m128i k128 = _mm_set_epi64x((long long)kb_crc_fold_k[2][1], (long long)kb_crc_fold_k[2][0]);
    __m128i a = _mm512_extracti32x4_epi32(x3, 0);
    __m128i lanes[3] = {_mm512_extracti32x4_epi32(x3, 1), _mm512_extracti32x4_epi32(x3, 2),
                        _mm512_extracti32x4_epi32(x3, 3)};
    for (int i = 0; i < 3; i++)
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k128, 0x00), _mm_clmulepi64_si128(a, k128, 0x11)),
                          lanes[i]);
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(a, 1));
    return kb_crc32c_hw((uint32_t)c, p, n);  /* the last bytes (< 256) */
}
#endif

/* Public form: continues from a finished CRC value, like zlib.crc32(data, value). */
static uint32_t kb_crc32c(uint32_t value, const uint8_t *p, size_t n) {
    uint32_t crc = value ^ 0xFFFFFFFFu;
#if defined(KB_CRC_HAVE_FOLD)
    if (kb_crc_fold && kb_crc_max_path >= 2 && n >= KB_CRC_FOLD_MIN) return kb_crc32c_fold(crc, p, n) ^ 0xFFFFFFFFu;
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (kb_crc_hw && kb_crc_max_path >= 1) return kb_crc32c_hw(crc, p, n) ^ 0xFFFFFFFFu;
#endif
    return kb_crc32c_sw(crc, p, n) ^ 0xFFFFFFFFu;
}

static inline int kb_crc32c_is_hw(void) { return kb_crc_hw; }

/* The paths this CPU can run: 0 software, 1 crc32 instruction, 2 folding. */
static inline int kb_crc32c_paths(void) { return kb_crc_fold ? 2 : kb_crc_hw ? 1 : 0; }

/* Use paths up to `path` only (tests run each path this CPU has); returns the previous limit. */
static inline int kb_crc32c_limit(int path) { int old = kb_crc_max_path; kb_crc_max_path = path; return old; }
#endif
