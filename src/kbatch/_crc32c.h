/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for kbatch._core.
 * Hardware path: the SSE4.2 crc32 instruction, chosen at run time with cpuid, so one wheel
 * runs on every x86-64.  Software path: slicing-by-8 tables, built once at import. */
#ifndef KBATCH_CRC32C_H
#define KBATCH_CRC32C_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

static uint32_t kb_crc_table[8][256];
static int kb_crc_hw = 0;

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
__attribute__((target("sse4.2")))
static uint32_t kb_crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
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

static int kb_crc32c_is_hw(void) { return kb_crc_hw; }
#endif
