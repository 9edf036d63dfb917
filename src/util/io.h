/* io.h — small file helpers with error messages that name the path. */
#ifndef TLM_IO_H
#define TLM_IO_H

#include <stddef.h>

/* Reads a whole file into a malloc'd, NUL-terminated buffer; *len = bytes read. */
char *read_text_file(const char *path, size_t *len);
/* Joins dir and name with one '/'. Returns a malloc'd string. */
char *path_join(const char *dir, const char *name);
int file_exists(const char *path);
int is_directory(const char *path);
/* Creates a directory (and parents) if missing; error names the path. */
int make_dirs(const char *path);

#endif
