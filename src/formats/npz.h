/* npz.h — NumPy .npz archives: a zip file of .npy arrays, one member per key (np.savez writes
 * them stored, np.savez_compressed deflated). Read-only: `tinylm compare` takes reference
 * activations this way (docs/compare.md).
 *
 * The reader maps the file and trusts nothing in it: the end-of-central-directory record (and
 * its zip64 form), every central-directory entry, local header, size and offset are checked
 * against the file's bytes before use; members must be stored (method 0) or deflated (method 8,
 * zlib), unencrypted, on one disk, named KEY.npy, each name once; each member's CRC-32 is
 * checked, then its bytes parsed as .npy (npy.h tlm_npy_parse_widen: float32/64/16 as float32,
 * int32/64 as int32). An error names the file and the member (or the field of the zip
 * structure) and what is wrong. */
#ifndef TLM_NPZ_H
#define TLM_NPZ_H

#include "npy.h"

typedef struct {
    char *key; /* the member's name without ".npy" */
    tlm_npy a;
} tlm_npz_entry;

typedef struct tlm_npz {
    int n;
    tlm_npz_entry *e; /* in the archive's central-directory order */
} tlm_npz;

/* Reads every member. On failure *out is zeroed and -1 + tlm_error is returned. */
int tlm_npz_read(const char *path, tlm_npz *out);
/* Parses an archive image in memory (`label` names it in errors). */
int tlm_npz_parse(const void *bytes, size_t n, const char *label, tlm_npz *out);

/* A caller's say on one member, from its .npy header alone (dtype, ndim, shape, numel; data NULL),
 * asked before the member is inflated or copied: 1 read it, 0 list it without its data (the
 * entry's a.data stays NULL), -1 + tlm_error refuse the archive. where: "FILE: member 'KEY.npy'".
 * Every member's header is read from its first bytes only (at most 64 KiB inflated), and the
 * size it implies must be the member's size in the directory: a member is never inflated past
 * what its header promises, nor at all when the caller does not want it. */
typedef int (*tlm_npz_want)(void *ctx, const char *key, const tlm_npy *header, const char *where);
/* tlm_npz_read / tlm_npz_parse asking want (NULL: read every member) */
int tlm_npz_read_some(const char *path, tlm_npz_want want, void *ctx, tlm_npz *out);
int tlm_npz_parse_some(const void *bytes, size_t n, const char *label, tlm_npz_want want, void *ctx, tlm_npz *out);
/* The array stored under key, or NULL. */
const tlm_npy *tlm_npz_find(const tlm_npz *z, const char *key);
void tlm_npz_free(tlm_npz *z); /* NULL allowed */

#endif
