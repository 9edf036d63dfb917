/* npz.c — reading NumPy .npz archives (npz.h): the zip container (PKWARE APPNOTE: the
 * end-of-central-directory record, its zip64 locator and record, central-directory entries with
 * their zip64 extra field, local headers), stored or deflated members (zlib), each one an .npy
 * image parsed by npy.c. Everything is checked against the bytes present before it is used. */
#include "npz.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/error.h"
#include "util/io.h"

enum {
    SIG_LOCAL = 0x04034b50,
    SIG_CENTRAL = 0x02014b50,
    SIG_EOCD = 0x06054b50,
    SIG_EOCD64 = 0x06064b50,
    SIG_LOC64 = 0x07064b50,
    EOCD_LEN = 22,
    CENTRAL_LEN = 46,
    LOCAL_LEN = 30,
    MAX_MEMBERS = 1 << 20,
};

static uint32_t u16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t u32(const unsigned char *p) { return u16(p) | u16(p + 2) << 16; }
static uint64_t u64(const unsigned char *p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

/* the central directory: where it starts, its size and its number of entries */
static int find_directory(const unsigned char *b, size_t n, const char *label, uint64_t *cd_off, uint64_t *cd_size,
                          uint64_t *count) {
    if (n < EOCD_LEN) return tlm_error("%s: not an .npz (zip) file: %zu bytes, shorter than a zip's end record", label, n);
    size_t e = n - EOCD_LEN, stop = n - EOCD_LEN > 65535 ? n - EOCD_LEN - 65535 : 0;
    for (;;) { /* (the end record is followed by a comment of up to 65535 bytes) */
        if (u32(b + e) == SIG_EOCD && e + EOCD_LEN + u16(b + e + 20) == n) break;
        if (e == stop)
            return tlm_error("%s: not an .npz (zip) file: no end-of-central-directory record", label);
        e--;
    }
    const unsigned char *r = b + e;
    if (u16(r + 4) != 0 || u16(r + 6) != 0)
        return tlm_error("%s: zip archives split over several disks are not supported", label);
    *count = u16(r + 10), *cd_size = u32(r + 12), *cd_off = u32(r + 16);
    if (u16(r + 8) != *count) return tlm_error("%s: zip end record: entry counts disagree", label);
    if (*count == 0xFFFF || *cd_size == 0xFFFFFFFFu || *cd_off == 0xFFFFFFFFu) { /* zip64 */
        if (e < 20 || u32(b + e - 20) != SIG_LOC64)
            return tlm_error("%s: zip end record asks for zip64 but the zip64 locator is missing", label);
        const uint64_t o = u64(b + e - 20 + 8);
        if (u32(b + e - 20 + 16) > 1) return tlm_error("%s: zip archives split over several disks are not supported", label);
        if (o > e - 20 || e - 20 - o < 56 || u32(b + o) != SIG_EOCD64)
            return tlm_error("%s: zip64 end record: offset %llu does not hold one", label, (unsigned long long)o);
        const unsigned char *z = b + o;
        if (u32(z + 16) != 0 || u32(z + 20) != 0)
            return tlm_error("%s: zip archives split over several disks are not supported", label);
        *count = u64(z + 32), *cd_size = u64(z + 40), *cd_off = u64(z + 48);
        if (u64(z + 24) != *count) return tlm_error("%s: zip64 end record: entry counts disagree", label);
        e = (size_t)o; /* (the directory ends before the zip64 record) */
    }
    if (*cd_off > e || *cd_size > e - *cd_off)
        return tlm_error("%s: zip central directory (offset %llu, %llu bytes) lies outside the file", label,
                         (unsigned long long)*cd_off, (unsigned long long)*cd_size);
    if (*count > MAX_MEMBERS) return tlm_error("%s: %llu zip members (at most %d)", label, (unsigned long long)*count, MAX_MEMBERS);
    if (*count > *cd_size / CENTRAL_LEN)
        return tlm_error("%s: zip central directory of %llu bytes cannot hold %llu entries", label,
                         (unsigned long long)*cd_size, (unsigned long long)*count);
    return 0;
}

/* the offset of one member's data, its sizes checked against the archive: 0 or -1 + tlm_error */
static int member_data(const unsigned char *b, uint64_t local, uint64_t limit, int method, uint64_t csize,
                       uint64_t usize, const char *label, const char *name, uint64_t *data_out) {
    if (local > limit || limit - local < LOCAL_LEN || u32(b + local) != SIG_LOCAL)
        return tlm_error("%s: member '%s': no local header at offset %llu", label, name, (unsigned long long)local);
    const uint64_t data = local + LOCAL_LEN + u16(b + local + 26) + u16(b + local + 28);
    if (data > limit || csize > limit - data)
        return tlm_error("%s: member '%s': its %llu bytes run past the end of the archive's data", label, name,
                         (unsigned long long)csize);
    if (usize > SIZE_MAX - 1) return tlm_error("%s: member '%s' is too large", label, name);
    if (method == 0 && csize != usize)
        return tlm_error("%s: member '%s': stored with %llu bytes but %llu uncompressed", label, name,
                         (unsigned long long)csize, (unsigned long long)usize);
    if (method == 8 && usize / 1032 > csize + 1) /* (deflate expands at most 1032:1: a larger claim is false) */
        return tlm_error("%s: member '%s': %llu compressed bytes cannot inflate to %llu", label, name,
                         (unsigned long long)csize, (unsigned long long)usize);
    *data_out = data;
    return 0;
}

/* The first up to `want` bytes of a deflated member's data into out: how many, or -1 + tlm_error
 * (inflating stops there: a member's header is read without inflating the rest) */
static long long inflate_head(const unsigned char *in, uint64_t csize, unsigned char *out, size_t want,
                              const char *label, const char *name) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -15) != Z_OK) return tlm_error("%s: zlib inflateInit failed", label);
    s.next_in = (Bytef *)in, s.avail_in = csize > 0x40000000u ? 0x40000000u : (uInt)csize;
    s.next_out = out, s.avail_out = (uInt)want;
    int zr = Z_OK;
    while (zr == Z_OK && s.avail_out > 0) {
        const uInt before_in = s.avail_in, before_out = s.avail_out;
        zr = inflate(&s, Z_NO_FLUSH);
        if (zr == Z_OK && s.avail_in == before_in && s.avail_out == before_out) zr = Z_BUF_ERROR; /* no progress */
    }
    const size_t got = want - s.avail_out;
    inflateEnd(&s);
    if (zr == Z_DATA_ERROR || zr == Z_MEM_ERROR || zr == Z_NEED_DICT || (zr == Z_BUF_ERROR && s.avail_out > 0))
        return tlm_error("%s: member '%s': the deflated data is %s", label, name,
                         zr == Z_BUF_ERROR ? "truncated" : "corrupt");
    return (long long)got;
}

/* one member's bytes, uncompressed (malloc'd; its size usize, which its header was checked to need) */
static int member_bytes(const unsigned char *b, uint64_t data, int method, uint64_t csize, uint64_t usize,
                        uint32_t crc, const char *label, const char *name, unsigned char **out) {
    *out = NULL;
    unsigned char *u = malloc(usize ? (size_t)usize : 1);
    if (!u) return tlm_error("%s: member '%s': out of memory (%llu bytes)", label, name, (unsigned long long)usize);
    if (method == 0) {
        memcpy(u, b + data, (size_t)usize);
    } else {
        z_stream s;
        memset(&s, 0, sizeof s);
        if (inflateInit2(&s, -15) != Z_OK) return free(u), tlm_error("%s: zlib inflateInit failed", label);
        const unsigned char *in = b + data;
        uint64_t in_left = csize, out_done = 0;
        int zr = Z_OK;
        while (zr == Z_OK) { /* (zlib's counts are 32-bit: feed it in slices) */
            const uInt in_now = in_left > 0x40000000u ? 0x40000000u : (uInt)in_left;
            const uint64_t out_left = usize - out_done;
            const uInt out_now = out_left > 0x40000000u ? 0x40000000u : (uInt)out_left;
            s.next_in = (Bytef *)in, s.avail_in = in_now, s.next_out = u + out_done, s.avail_out = out_now;
            zr = inflate(&s, Z_NO_FLUSH);
            in += in_now - s.avail_in, in_left -= in_now - s.avail_in, out_done += out_now - s.avail_out;
            if (zr == Z_OK && s.avail_in == in_now && s.avail_out == out_now) zr = Z_BUF_ERROR; /* no progress */
        }
        inflateEnd(&s);
        if (zr != Z_STREAM_END || out_done != usize) {
            free(u);
            return tlm_error("%s: member '%s': the deflated data is %s", label, name,
                             zr == Z_STREAM_END ? "shorter than its stated size"
                             : zr == Z_DATA_ERROR ? "corrupt"
                                                  : "truncated or longer than its stated size");
        }
    }
    uLong c = crc32(0L, Z_NULL, 0);
    for (uint64_t o = 0; o < usize;) {
        const uInt k = usize - o > 0x40000000u ? 0x40000000u : (uInt)(usize - o);
        c = crc32(c, u + o, k), o += k;
    }
    if ((uint32_t)c != crc) {
        free(u);
        return tlm_error("%s: member '%s': CRC-32 %08x, the directory says %08x (the archive is damaged)", label, name,
                         (unsigned)c, (unsigned)crc);
    }
    *out = u;
    return 0;
}

/* the .npy header of a member (data at b + data): its image's size checked against the directory's
 * usize before anything else is inflated */
static int member_header(const unsigned char *b, uint64_t data, int method, uint64_t csize, uint64_t usize,
                         const char *label, const char *where, tlm_npy *hdr) {
    enum { PEEK = 12 + 65536 }; /* (a version 1.0 header at most; longer ones are refused as truncated) */
    size_t got = usize < PEEK ? (size_t)usize : PEEK, total = 0;
    unsigned char *head = NULL;
    const unsigned char *h = b + data;
    if (method == 8) {
        if (!(head = malloc(got ? got : 1))) return tlm_error("%s: out of memory", label);
        const long long k = inflate_head(b + data, csize, head, got, label, where);
        if (k < 0) return free(head), -1;
        got = (size_t)k, h = head;
    }
    int rc = tlm_npy_peek_widen(h, got, where, hdr, &total);
    free(head);
    if (rc) return -1;
    if (total != usize)
        return tlm_error("%s: its header (shape of %zu elements) needs %zu bytes, but the archive says it holds %llu",
                         where, hdr->numel, total, (unsigned long long)usize);
    return 0;
}

int tlm_npz_parse(const void *bytes, size_t n, const char *label, tlm_npz *out) {
    return tlm_npz_parse_some(bytes, n, label, NULL, NULL, out);
}

int tlm_npz_parse_some(const void *bytes, size_t n, const char *label, tlm_npz_want want, void *ctx, tlm_npz *out) {
    const unsigned char *b = bytes;
    memset(out, 0, sizeof *out);
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    if (find_directory(b, n, label, &cd_off, &cd_size, &count)) return -1;
    tlm_npz z = {0};
    z.e = calloc(count ? (size_t)count : 1, sizeof *z.e);
    if (!z.e) return tlm_error("%s: out of memory", label);
    const unsigned char *p = b + cd_off, *end = b + cd_off + cd_size;
    int rc = 0;
    for (uint64_t i = 0; i < count && !rc; i++) {
        if ((size_t)(end - p) < CENTRAL_LEN || u32(p) != SIG_CENTRAL) {
            rc = tlm_error("%s: zip central directory entry %llu is missing or damaged", label, (unsigned long long)i);
            break;
        }
        const unsigned flags = u16(p + 8), method = u16(p + 10), nlen = u16(p + 28), xlen = u16(p + 30),
                       clen = u16(p + 32);
        if ((size_t)(end - p) - CENTRAL_LEN < (size_t)nlen + xlen + clen) {
            rc = tlm_error("%s: zip central directory entry %llu runs past the directory", label, (unsigned long long)i);
            break;
        }
        char name[1024];
        const char *nm = (const char *)p + CENTRAL_LEN;
        if (nlen == 0 || nlen >= sizeof name || memchr(nm, 0, nlen)) {
            rc = tlm_error("%s: zip member %llu has an empty, overlong or binary name", label, (unsigned long long)i);
            break;
        }
        memcpy(name, nm, nlen), name[nlen] = '\0';
        uint64_t csize = u32(p + 20), usize = u32(p + 24), local = u32(p + 42);
        const uint32_t crc = u32(p + 16);
        const unsigned disk = u16(p + 34);
        /* the zip64 extra field holds, in this order, the values whose 32-bit field is all ones */
        const unsigned char *x = p + CENTRAL_LEN + nlen, *xend = x + xlen;
        while (xend - x >= 4) {
            const unsigned id = u16(x), len = u16(x + 2);
            if ((size_t)(xend - x) - 4 < len) break;
            if (id == 1) {
                const unsigned char *f = x + 4;
                unsigned left = len;
                uint64_t *fields[3] = {&usize, &csize, &local};
                for (int k = 0; k < 3 && !rc; k++) {
                    if (*fields[k] != 0xFFFFFFFFu) continue;
                    if (left < 8) rc = tlm_error("%s: member '%s': its zip64 extra field is too short", label, name);
                    else *fields[k] = u64(f), f += 8, left -= 8;
                }
                if (rc) break;
            }
            x += 4 + len;
        }
        if (rc) break;
        if (usize == 0xFFFFFFFFu || csize == 0xFFFFFFFFu || local == 0xFFFFFFFFu) {
            rc = tlm_error("%s: member '%s': sizes marked zip64 without a zip64 extra field", label, name);
            break;
        }
        if (flags & 1) {
            rc = tlm_error("%s: member '%s' is encrypted", label, name);
            break;
        }
        if (method != 0 && method != 8) {
            rc = tlm_error("%s: member '%s': compression method %u (only stored, 0, and deflate, 8: what np.savez and "
                           "np.savez_compressed write)", label, name, method);
            break;
        }
        if (disk != 0 && disk != 0xFFFF) {
            rc = tlm_error("%s: zip archives split over several disks are not supported", label);
            break;
        }
        if (nlen < 5 || strcmp(name + nlen - 4, ".npy")) {
            rc = tlm_error("%s: member '%s' is not an .npy array (an .npz holds KEY.npy members)", label, name);
            break;
        }
        name[nlen - 4] = '\0';
        for (int j = 0; j < z.n && !rc; j++)
            if (!strcmp(z.e[j].key, name)) rc = tlm_error("%s: key '%s' is in the archive twice", label, name);
        if (rc) break;
        unsigned char *u = NULL;
        char member[1100];
        snprintf(member, sizeof member, "%s.npy", name);
        char where[2200];
        snprintf(where, sizeof where, "%s: member '%s'", label, member);
        uint64_t data = 0;
        tlm_npy hdr;
        if (member_data(b, local, cd_off, (int)method, csize, usize, label, member, &data) ||
            member_header(b, data, (int)method, csize, usize, label, where, &hdr)) {
            rc = -1;
            break;
        }
        /* (the caller's say, on the header alone: read, list without the data, or refuse) */
        const int take = want ? want(ctx, name, &hdr, where) : 1;
        if (take < 0 || (take > 0 && member_bytes(b, data, (int)method, csize, usize, crc, label, member, &u))) {
            rc = -1;
            break;
        }
        tlm_npz_entry *en = &z.e[z.n];
        en->key = strdup(name);
        if (!en->key) rc = tlm_error("%s: out of memory", label);
        else if (!take) en->a = hdr;
        else if (tlm_npy_parse_widen(u, (size_t)usize, where, &en->a)) rc = -1;
        free(u);
        if (en->key) z.n++;
        p += CENTRAL_LEN + nlen + xlen + clen;
    }
    if (rc) {
        tlm_npz_free(&z);
        return -1;
    }
    *out = z;
    return 0;
}

int tlm_npz_read(const char *path, tlm_npz *out) { return tlm_npz_read_some(path, NULL, NULL, out); }

int tlm_npz_read_some(const char *path, tlm_npz_want want, void *ctx, tlm_npz *out) {
    memset(out, 0, sizeof *out);
    int fd = tlm_open_input(path);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tlm_error("%s: not a readable regular file", path);
    }
    const size_t n = (size_t)st.st_size;
    if (n == 0) {
        close(fd);
        return tlm_error("%s: not an .npz (zip) file: it is empty", path);
    }
    void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return tlm_error("%s: cannot map the file", path);
    int rc = tlm_npz_parse_some(map, n, path, want, ctx, out);
    munmap(map, n);
    return rc;
}

const tlm_npy *tlm_npz_find(const tlm_npz *z, const char *key) {
    for (int i = 0; z && i < z->n; i++)
        if (!strcmp(z->e[i].key, key)) return &z->e[i].a;
    return NULL;
}

void tlm_npz_free(tlm_npz *z) {
    if (!z) return;
    for (int i = 0; i < z->n; i++) free(z->e[i].key), tlm_npy_free(&z->e[i].a);
    free(z->e);
    memset(z, 0, sizeof *z);
}
