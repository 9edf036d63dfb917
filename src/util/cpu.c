/* cpu.c — cpuid feature bits (see cpu.h). GCC's __builtin_cpu_supports reads the same
 * cpuid leaves and checks that the OS saves the wide registers (xgetbv). AMX needs more: the
 * OS enables the tile state in XCR0, and Linux (5.16+) hands the tile data to a process only
 * after it asks (arch_prctl ARCH_REQ_XCOMP_PERM); without the grant the first tile load
 * raises SIGILL. */
#include "cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TLM_X86 1
#endif
#if defined(TLM_X86) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
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
    /* cached: under a hypervisor each cpuid traps (microseconds), and converters ask per call */
    static _Atomic int has = -1;
    if (has < 0) {
        unsigned a, b, c, d;
        has = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1);
    }
    return tlm_cpu_isa() == TLM_ISA_AVX512 && has;
#else
    return 0;
#endif
}

#ifdef TLM_X86
/* XCR0, the state components the OS saves (only when cpuid 1 ECX bit 27, OSXSAVE, says the
 * instruction may run); written as the instruction so no -mxsave is needed */
static unsigned long long xcr0(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

/* Linux: ask for the tile data (state component 18, XFEATURE_XTILEDATA) and read back what the
 * process holds; 1 granted, 0 refused (*err = errno) */
static int request_tile_data(int *err) {
    *err = 0;
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_GET_XCOMP_PERM_ = 0x1022, ARCH_REQ_XCOMP_PERM_ = 0x1023, XFEATURE_XTILEDATA_ = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) != 0) {
        *err = errno;
        return 0;
    }
    unsigned long mask = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM_, &mask) != 0) {
        *err = errno;
        return 0;
    }
    if (!(mask >> XFEATURE_XTILEDATA_ & 1)) *err = EPERM;
    return (int)(mask >> XFEATURE_XTILEDATA_ & 1);
#else
    *err = ENOSYS;
    return 0;
#endif
}
#endif

static tlm_cpu_features features;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void features_fill(void) {
    tlm_cpu_features f = {0};
#ifdef TLM_X86
    unsigned a, b, c, d;
    const int zmm = detect() == TLM_ISA_AVX512; /* the OS saves the zmm state (and F, BW, VL) */
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.amx_bf16 = d >> 22 & 1;
        f.amx_tile = d >> 24 & 1;
        f.amx_int8 = d >> 25 & 1;
        f.avx512_vnni = zmm && (c >> 11 & 1);
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = zmm && (a >> 5 & 1);
    }
    f.amx_os = f.amx_tile && (xcr0() & (3ull << 17)) == (3ull << 17);
    if (f.amx_os) f.amx_permitted = request_tile_data(&f.amx_perm_errno);
#endif
    features = f;
}

const tlm_cpu_features *tlm_cpu_features_get(void) {
    pthread_once(&features_once, features_fill);
    return &features;
}

int tlm_cpu_has_amx_bf16(void) {
    const tlm_cpu_features *f = tlm_cpu_features_get();
    return tlm_cpu_isa() == TLM_ISA_AVX512 && f->amx_bf16 && f->amx_permitted;
}

int tlm_cpu_has_amx_int8(void) {
    const tlm_cpu_features *f = tlm_cpu_features_get();
    return tlm_cpu_isa() == TLM_ISA_AVX512 && f->amx_int8 && f->amx_permitted;
}

int tlm_cpu_has_avx512vnni(void) { return tlm_cpu_isa() == TLM_ISA_AVX512 && tlm_cpu_features_get()->avx512_vnni; }

int tlm_cpu_has_avxvnni(void) {
#ifdef TLM_X86
    static _Atomic int has = -1;
    if (has < 0) {
        unsigned a, b, c, d;
        /* (the ymm state saved by the OS: AVX2's own condition, which detect() checks) */
        has = detect() >= TLM_ISA_AVX2 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
    }
    return tlm_cpu_isa() >= TLM_ISA_AVX2 && has;
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
