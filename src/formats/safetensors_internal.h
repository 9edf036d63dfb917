/* safetensors_internal.h — the reader's state, shared by the single-file parser
 * (safetensors_read.c) and the sharded-directory loader (safetensors_dir.c). */
#ifndef TLM_SAFETENSORS_INTERNAL_H
#define TLM_SAFETENSORS_INTERNAL_H

#include "safetensors.h"

typedef struct {
    char *path;  /* also the `file` of its tensors */
    void *base;  /* whole file */
    size_t len;
    int mapped;  /* 1: munmap, 0: free */
} st_blob;

typedef struct {
    char *key;
    char *value;
} st_meta;

struct tlm_safetensors {
    char *label; /* the file or directory opened, for messages */
    st_blob *blobs;
    size_t n_blobs;
    tlm_st_tensor *tensors; /* names are malloc'd and owned here */
    size_t n, cap;
    st_meta *meta;
    size_t n_meta;
    const tlm_st_tensor **by_name; /* sorted, built by st_finish */
};

/* `label` names the checkpoint in messages (the file or directory). */
tlm_safetensors *st_new(const char *label);
/* Maps `path` and parses it, appending its tensors and metadata. */
int st_add_file(tlm_safetensors *st, const char *path);
/* Sorts the name index and rejects a name that occurs twice (in one file or two). */
int st_finish(tlm_safetensors *st);

#endif
