/* cpu.c — cpuid feature bits (see cpu.h). GCC's __builtin_cpu_supports reads the same
 * cpuid leaves and checks that the OS saves the wide registers (xgetbv). */
#include "cpu.h"

#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TLM_X86 1
#endif

static tlm_isa detect(void) {
#ifdef TLM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return TLM_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return TLM_ISA_AVX2;
#endif
    return TLM_ISA_SCALAR;
}

tlm_isa tlm_cpu_isa_detected(void) { return detect(); }

tlm_isa tlm_cpu_isa(void) {
    /* atomic: the ops ask from every thread (the first callers may race to fill it, all with
     * the same value) */
    static _Atomic int cached = -1;
    int isa_now = atomic_load_explicit(&cached, memory_order_relaxed);
    if (isa_now < 0) {
        tlm_isa isa = detect();
        const char *cap = getenv("TLM_ISA");
        if (cap && !strcmp(cap, "scalar")) isa = TLM_ISA_SCALAR;
        if (cap && !strcmp(cap, "avx2") && isa > TLM_ISA_AVX2) isa = TLM_ISA_AVX2;
        isa_now = (int)isa;
        atomic_store_explicit(&cached, isa_now, memory_order_relaxed);
    }
    return (tlm_isa)isa_now;
}

const char *tlm_isa_name(tlm_isa isa) {
    switch (isa) {
    case TLM_ISA_AVX512: return "AVX-512";
    case TLM_ISA_AVX2: return "AVX2+FMA";
    default: return "scalar";
    }
}

int tlm_cpu_has_avx512bf16(void) {
#ifdef TLM_X86
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return tlm_cpu_isa() == TLM_ISA_AVX512 && (a >> 5 & 1);
#else
    return 0;
#endif
}

const char *tlm_cpu_brand(void) {
    static char brand[49];
#ifdef TLM_X86
    if (!brand[0]) {
        unsigned r[12] = {0};
        unsigned max = __get_cpuid_max(0x80000000u, NULL);
        if (max >= 0x80000004u)
            for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(brand, r, 48);
        brand[48] = '\0';
        char *s = brand; /* trim the padding */
        while (*s == ' ') s++;
        memmove(brand, s, strlen(s) + 1);
        for (size_t n = strlen(brand); n && brand[n - 1] == ' ';) brand[--n] = '\0';
    }
#endif
    return brand[0] ? brand : "unknown CPU";
}
