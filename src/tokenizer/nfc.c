/* nfc.c — NFC normalization of UTF-8 text (UAX #15): decompose every code point
 * canonically (tables + the Hangul algorithm), sort each run of non-starters by combining
 * class (stable), then compose each character with the last starter when nothing between
 * them blocks it. ASCII-only text is returned unchanged without table lookups. */
#include "tokenizer/nfc.h"
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
       LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    int lo = 0, hi = tlm_nfc_n_ccc - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < tlm_nfc_ccc[mid].first) hi = mid - 1;
        else if (cp > tlm_nfc_ccc[mid].last) lo = mid + 1;
        else return tlm_nfc_ccc[mid].ccc;
    }
    return 0;
}

static const tlm_nfc_decomp_entry *decomp_of(uint32_t cp) {
    if (cp < 0xC0) return NULL;
    int lo = 0, hi = tlm_nfc_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < tlm_nfc_decomp[mid].cp) hi = mid - 1;
        else if (cp > tlm_nfc_decomp[mid].cp) lo = mid + 1;
        else return &tlm_nfc_decomp[mid];
    }
    return NULL;
}

/* The primary composite of (a, b), or 0 when there is none. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = tlm_nfc_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const tlm_nfc_comp_entry *e = &tlm_nfc_comp[mid];
        if (a < e->first || (a == e->first && b < e->second)) hi = mid - 1;
        else if (a > e->first || b > e->second) lo = mid + 1;
        else return e->composite;
    }
    return 0;
}

char *tlm_nfc(const char *s, size_t len, size_t *out_len) {
    size_t i = 0;
    while (i < len && (unsigned char)s[i] < 0x80) i++;
    if (i == len) { /* ASCII is already NFC */
        char *copy = malloc(len + 1);
        if (!copy) return NULL;
        memcpy(copy, s, len);
        copy[len] = '\0';
        *out_len = len;
        return copy;
    }
    /* 1. decompose into code points; a code point expands to at most 4 */
    size_t cap = 4 * len + 4, n = 0;
    uint32_t *cps = malloc(cap * sizeof *cps);
    if (!cps) return NULL;
    for (size_t p = 0; p < len;) {
        uint32_t cp;
        p += tlm_utf8_decode(s + p, len - p, &cp);
        if (cp >= SBASE && cp < SBASE + SCOUNT) {
            uint32_t si = cp - SBASE;
            cps[n++] = LBASE + si / NCOUNT;
            cps[n++] = VBASE + (si % NCOUNT) / TCOUNT;
            if (si % TCOUNT) cps[n++] = TBASE + si % TCOUNT;
            continue;
        }
        const tlm_nfc_decomp_entry *d = decomp_of(cp);
        if (d) {
            for (int k = 0; k < d->len; k++) cps[n++] = tlm_nfc_decomp_pool[d->offset + k];
        } else {
            cps[n++] = cp;
        }
    }
    /* 2. canonical ordering: stable insertion sort of each run of non-starters */
    for (size_t k = 1; k < n; k++) {
        int c = ccc_of(cps[k]);
        if (c == 0) continue;
        size_t j = k;
        uint32_t v = cps[k];
        while (j > 0 && ccc_of(cps[j - 1]) > c) { cps[j] = cps[j - 1]; j--; }
        cps[j] = v;
    }
    /* 3. canonical composition, in place */
    size_t m = 0;
    long starter = -1;
    for (size_t k = 0; k < n; k++) {
        uint32_t cp = cps[k];
        int c = ccc_of(cp);
        if (starter >= 0) {
            int blocked = (m - 1 != (size_t)starter) && ccc_of(cps[m - 1]) >= c;
            if (!blocked) {
                uint32_t comp = compose_pair(cps[starter], cp);
                if (comp) { cps[starter] = comp; continue; }
            }
        }
        if (c == 0) starter = (long)m;
        cps[m++] = cp;
    }
    /* 4. back to UTF-8 */
    char *out = malloc(4 * m + 1);
    if (!out) { free(cps); return NULL; }
    size_t o = 0;
    for (size_t k = 0; k < m; k++) o += tlm_utf8_encode(cps[k], out + o);
    out[o] = '\0';
    free(cps);
    *out_len = o;
    return out;
}
