/* io.h — small file helpers with error messages that name the path. */
#ifndef TLM_IO_H
#define TLM_IO_H

#include <stddef.h>
#include <stdio.h>

/* Opens an input file for reading: the one way every input file (checkpoint, tokenizer, config,
 * data, prompt) is opened. Refuses what is not a regular file without blocking (a FIFO would
 * wait forever for a writer: it is opened non-blocking, then checked), and says what is
 * wrong: "No such file or directory", "is a directory", "is a FIFO (named pipe), not a regular
 * file", "is a symbolic link to X, which does not exist", "symbolic link loop", ... Returns a
 * file descriptor (O_CLOEXEC, blocking) or -1 + tlm_error naming the path. */
int tlm_open_input(const char *path);
/* The same as a stdio stream ("rb"); NULL + tlm_error. */
FILE *tlm_fopen_input(const char *path);
/* Why `path` cannot be used as an existing file or directory: "no such file or directory",
 * "symbolic link to X, which does not exist", "symbolic link loop", or strerror(err).
 * `err` is the errno of the failed stat/open. Writes into buf; returns buf. */
const char *tlm_path_problem(const char *path, int err, char *buf, size_t n);

/* Reads a whole file into a malloc'd, NUL-terminated buffer; *len = bytes read. The file
 * must be a regular file (tlm_open_input). */
char *read_text_file(const char *path, size_t *len);
/* The same for a stream already open (standard input: pipes allowed); `name` labels errors. */
char *read_text_stream(FILE *f, const char *name, size_t *len);
/* Joins dir and name with one '/'. Returns a malloc'd string. */
char *path_join(const char *dir, const char *name);
int file_exists(const char *path);
int is_directory(const char *path);
/* 1 when path is a directory with no entries (0 when it has some, or cannot be listed) */
int dir_is_empty(const char *path);
/* Creates a directory (and parents) if missing; error names the path. */
int make_dirs(const char *path);

#endif
