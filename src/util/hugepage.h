/* hugepage.h — memory advice: back a large buffer with 2 MiB pages; let go of the pages of a
 * mapped file range once read.
 *
 * Decoding streams every weight once per token: with 4 KiB pages that is a TLB miss (a page
 * walk) every 4 KiB, on a stream the hardware prefetcher would otherwise run at full speed.
 * Debian's default transparent-huge-page mode is "madvise": only memory marked with
 * MADV_HUGEPAGE gets 2 MiB pages, so the big buffers (parameters, bf16 weights, gradients,
 * optimizer state, KV cache) are marked right after allocation, before their first touch.
 * A hint only: where the kernel has no THP, or the buffer is small, nothing changes. */
#ifndef TLM_HUGEPAGE_H
#define TLM_HUGEPAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

static inline void tlm_advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (p && e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* (a failure leaves 4 KiB pages) */
#else
    (void)p, (void)bytes;
#endif
}

/* A read-only file mapping's range [p, p + bytes) has been copied out (a loader converting the
 * weights it maps): its whole pages leave this process's resident memory now rather than when the
 * file is unmapped, so loading holds the file and the copy a tensor at a time, not whole. The
 * pages stay valid: touched again, they are read back from the file (or the page cache). */
static inline void tlm_advise_done(const void *p, size_t bytes) {
#ifdef MADV_DONTNEED
    const uintptr_t page = 4096;
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + bytes) & ~(page - 1);
    if (p && e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED); /* (a failure only keeps them longer) */
#else
    (void)p, (void)bytes;
#endif
}

#endif
