/* gguf.h — read and write GGUF files (llama.cpp's format), versions 2 and 3.
 *
 * Layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata count;
 * each metadata entry: a string key, a u32 value type, the value (strings are u64 length +
 * bytes, no NUL; an array is u32 element type + u64 count + the elements, arrays of arrays
 * allowed); each tensor: a string name, u32 n_dims (1..4), u64 ne[n_dims] (ne[0] the
 * fastest-varying dimension), u32 ggml type, u64 offset into the data section; then padding
 * to the alignment (general.alignment, a u32 power of two, default 32) and the data section,
 * each tensor's offset a multiple of the alignment. Version 1 (u32 counts) is refused by name.
 *
 * The reader maps the file read-only and treats it as untrusted: no count, length, offset,
 * dimension or type is used before it is checked against the bytes that are there; tensors
 * must lie inside the data section, aligned, without overlapping, with the byte size their
 * type and shape imply; names and keys are unique. Errors name the file and the key or tensor.
 * Limits: keys 1..65535 bytes and tensor names 1..64 (the spec's), neither holding a NUL byte;
 * arrays nested at most 8 deep; type numbers below WQ_TYPE_LIMIT; a dimension may be 0 (a
 * tensor of no bytes, as ggml allows); bools 0 or 1.
 * Pointers returned (strings, tensor data) point into the mapping and stay valid until
 * tlm_gguf_close; strings are NOT NUL-terminated (a length comes with each). */
#ifndef TLM_GGUF_H
#define TLM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#define TLM_GGUF_DEFAULT_ALIGNMENT 32
#define TLM_GGUF_MAX_DIMS 4

typedef enum {
    GGUF_UINT8 = 0,
    GGUF_INT8 = 1,
    GGUF_UINT16 = 2,
    GGUF_INT16 = 3,
    GGUF_UINT32 = 4,
    GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_UINT64 = 10,
    GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

typedef struct {
    const char *p;
    uint64_t len;
} gguf_str;

typedef struct tlm_gguf tlm_gguf; /* opaque */

typedef struct {
    gguf_str key;
    gguf_type type;      /* GGUF_ARRAY for arrays */
    gguf_type elem_type; /* arrays: the elements' type (GGUF_ARRAY: nested arrays) */
    uint64_t count;      /* arrays: elements; otherwise 1 */
} gguf_kv;

typedef struct {
    gguf_str name;
    int type; /* ggml type (ops/quant.h wq_type numbers); any value the file holds */
    int n_dims;
    int64_t ne[TLM_GGUF_MAX_DIMS]; /* ne[0] fastest; unused dims are 1 */
    uint64_t offset;               /* into the data section */
    size_t nbytes;                 /* from type and shape (0 when the type is not one tinylm knows) */
    const void *data;              /* into the mapping */
} gguf_tensor;

/* Opens and checks a GGUF file. NULL + tlm_error on any problem. A tensor whose type tinylm
 * does not know (an IQ type, say) opens with nbytes 0: its extent is then taken as far as the
 * next tensor's offset (or the file's end); using it as a weight fails later, naming it. */
tlm_gguf *tlm_gguf_open(const char *path);
/* 1 when path is a regular file that starts with GGUF's magic; 0 otherwise, never an error (a FIFO is
 * not opened: its open would wait for a writer) */
int tlm_gguf_is_file(const char *path);
/* The same over a copy of an image in memory (`label` names it in errors): fuzzer and tests */
tlm_gguf *tlm_gguf_open_memory(const void *data, size_t n, const char *label);
void tlm_gguf_close(tlm_gguf *g); /* NULL allowed */

uint32_t tlm_gguf_version(const tlm_gguf *g);
size_t tlm_gguf_alignment(const tlm_gguf *g);
const char *tlm_gguf_label(const tlm_gguf *g); /* the path or label, for messages */

/* ---- metadata ------------------------------------------------------------------------------- */
size_t tlm_gguf_kv_count(const tlm_gguf *g);
const gguf_kv *tlm_gguf_kv_at(const tlm_gguf *g, size_t i);
/* NULL when absent (no error: many keys are optional) */
const gguf_kv *tlm_gguf_find(const tlm_gguf *g, const char *key);
const char *tlm_gguf_type_name(gguf_type t); /* "uint32", "array", ... */

/* Typed getters: 1 and *out when present with a usable type, 0 when absent (nothing set), -1 +
 * tlm_error (file, key, the type it has) when present with a type or value that does not fit:
 * integers of any integer type if the value fits the target (a negative into unsigned does
 * not); floats from FLOAT32 or FLOAT64, refused when not finite as a float32 (NaN, +-Inf, a
 * float64 beyond float32's range: util/finite.h); bool from BOOL; strings from STRING. */
int tlm_gguf_get_u32(const tlm_gguf *g, const char *key, uint32_t *out);
int tlm_gguf_get_i64(const tlm_gguf *g, const char *key, int64_t *out);
int tlm_gguf_get_f32(const tlm_gguf *g, const char *key, float *out);
int tlm_gguf_get_bool(const tlm_gguf *g, const char *key, int *out);
int tlm_gguf_get_str(const tlm_gguf *g, const char *key, gguf_str *out);
/* an array's element type and count: 1, 0 absent, -1 when the key holds no array */
int tlm_gguf_get_array(const tlm_gguf *g, const char *key, gguf_type *elem_type, uint64_t *count);
/* element i of an array kv: 1 and *out, numbers converted as above; -1 + tlm_error when the
 * element type does not fit (e.g. a string read as a number) or i is out of range */
int tlm_gguf_array_str(const tlm_gguf *g, const gguf_kv *kv, uint64_t i, gguf_str *out);
int tlm_gguf_array_f32(const tlm_gguf *g, const gguf_kv *kv, uint64_t i, float *out);
int tlm_gguf_array_i64(const tlm_gguf *g, const gguf_kv *kv, uint64_t i, int64_t *out);

/* ---- tensors -------------------------------------------------------------------------------- */
size_t tlm_gguf_tensor_count(const tlm_gguf *g);
const gguf_tensor *tlm_gguf_tensor_at(const tlm_gguf *g, size_t i);
const gguf_tensor *tlm_gguf_find_tensor(const tlm_gguf *g, const char *name); /* NULL when absent */

/* Hands the mapping over to the caller (who must munmap(*base, *len) it); tensor data
 * pointers stay valid after tlm_gguf_close. 0, or -1 for an image opened from memory. */
int tlm_gguf_detach_mapping(tlm_gguf *g, void **base, size_t *len);
/* 1: the tensors' data lies in a read-only file mapping (tlm_gguf_open), whose pages a reader may let go
 * of (util/hugepage.h tlm_advise_done); 0: in memory (an image copied in) */
int tlm_gguf_is_mapped(const tlm_gguf *g);

/* ---- writing (version 3) -------------------------------------------------------------------- */
typedef struct tlm_gguf_writer tlm_gguf_writer; /* opaque */

tlm_gguf_writer *tlm_gguf_writer_new(void); /* NULL when out of memory */
void tlm_gguf_writer_free(tlm_gguf_writer *w);
/* Metadata in the order added (keys unique: a repeated key fails). Strings are copied.
 * general.alignment may be set only as a uint32 power of two (tlm_gguf_set_u32); the file is
 * then laid out with it. */
int tlm_gguf_set_u32(tlm_gguf_writer *w, const char *key, uint32_t v);
int tlm_gguf_set_i32(tlm_gguf_writer *w, const char *key, int32_t v);
int tlm_gguf_set_u64(tlm_gguf_writer *w, const char *key, uint64_t v);
int tlm_gguf_set_f32(tlm_gguf_writer *w, const char *key, float v);
int tlm_gguf_set_bool(tlm_gguf_writer *w, const char *key, int v);
int tlm_gguf_set_str(tlm_gguf_writer *w, const char *key, const char *s, size_t len);
/* arrays of numbers (elem_type one of the number types or BOOL; `data` holds count values of
 * that type, little-endian) and of strings (lens NULL: each s[i] is NUL-terminated) */
int tlm_gguf_set_array(tlm_gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t count);
int tlm_gguf_set_str_array(tlm_gguf_writer *w, const char *key, const char *const *s, const size_t *lens,
                           uint64_t count);
/* A tensor (ggml type, ne[0] fastest, n_dims 1..4); `data` holds nbytes (checked against type
 * and shape) and must stay valid until tlm_gguf_write returns (it is not copied). */
int tlm_gguf_add_tensor(tlm_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                        const void *data, size_t nbytes);
/* Writes the file atomically (util/atomic_file.h; never over an input that is open: the old
 * file stays until the rename), alignment 32 (or general.alignment's), tensors in the order
 * added, the file ending with the last tensor's bytes. -1 + tlm_error. */
int tlm_gguf_write(tlm_gguf_writer *w, const char *path);
/* A file larger than memory: a tensor added without its data (nbytes as tlm_gguf_add_tensor
 * checks them), whose bytes tlm_gguf_write_streamed asks `fill` for when it comes to it, in the
 * order added: fill(user, index among all tensors, out, nbytes) writes them to out (a buffer the
 * size of the largest deferred tensor, reused) and returns 0, or -1 + tlm_error (the file is then
 * not written). The writer holds one such tensor at a time. */
typedef int (*tlm_gguf_fill)(void *user, size_t index, void *out, size_t nbytes);
int tlm_gguf_add_tensor_deferred(tlm_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                                 size_t nbytes);
int tlm_gguf_write_streamed(tlm_gguf_writer *w, const char *path, tlm_gguf_fill fill, void *user);

#endif
