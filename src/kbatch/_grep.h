/* kbatch grep: substring search for the grep kernel (_grep_kernel.pxi).
 *
 * glibc's memmem is vectorised (SSE2/AVX2 two-way search with a memchr-like first-byte skip),
 * and so are the BSDs' and macOS's; elsewhere a memchr + memcmp loop, which is what those do at
 * heart for short needles. Python.h's pyconfig.h defines _GNU_SOURCE on Linux, so glibc declares
 * memmem before this file is read. */
#ifndef KB_GREP_H
#define KB_GREP_H

#include <stddef.h>
#include <string.h>

#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || \
    defined(__NetBSD__) || defined(__DragonFly__)
#  define KB_HAVE_MEMMEM 1
#endif

/* The position of the first occurrence of needle[0:m] in hay[0:n], or -1; m >= 1. */
static inline Py_ssize_t kb_find(const unsigned char *hay, Py_ssize_t n, const unsigned char *needle,
                                 Py_ssize_t m) {
    if (m <= 0 || n < m)
        return -1;
#ifdef KB_HAVE_MEMMEM
    const unsigned char *p = (const unsigned char *)memmem(hay, (size_t)n, needle, (size_t)m);
    return p ? (Py_ssize_t)(p - hay) : -1;
#else
    const unsigned char *p = hay, *last = hay + (n - m);
    while (p <= last) {
        p = (const unsigned char *)memchr(p, needle[0], (size_t)(last - p) + 1);
        if (!p)
            return -1;
        if (memcmp(p, needle, (size_t)m) == 0)
            return (Py_ssize_t)(p - hay);
        p++;
    }
    return -1;
#endif
}

#endif
