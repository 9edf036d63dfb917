/* hugepage.h — asks the kernel to back a large buffer with 2 MiB pages.
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

#endif
