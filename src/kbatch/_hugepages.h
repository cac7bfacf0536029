/* kb_hugepages: ask Linux for transparent huge pages over the 2 MiB-aligned inside of a new, large
 * output buffer, before it is first written (ColumnsEncoderV2.encode). Each 4 KiB page of a new
 * buffer is a page fault on first write; in a VM one costs microseconds, so a fresh 37 MB output
 * spent more time faulting than encoding. With THP in "madvise" mode (the common default) this is
 * what makes the kernel fault it in 2 MiB at a time. Advice only: where it is not supported, or
 * the memory is already mapped (malloc reusing its heap), it changes nothing. */
#ifndef KB_HUGEPAGES_H
#define KB_HUGEPAGES_H
#include <stddef.h>
#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static inline void kb_hugepages(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, (size_t)(hi - lo), MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

#endif
