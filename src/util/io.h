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

/* ---- an output never replaces an input, nor anything that is not a regular file ----------------
 * While tracking is on (the CLI turns it on for its commands: main.c), tlm_open_input records the
 * device and inode of every regular file it opens: checkpoints, configs, tokenizers, data, prompts,
 * lens files, JSON descriptions. tlm_output_check is called by tlm_atomic_open (and so by every
 * writer: npy, safetensors, SVG, HTML, config.json, tokenizer copies) before anything is written
 * and again just before the rename, and refuses a path that is the same file (st_dev, st_ino,
 * after following symbolic links) as any recorded input: --out onto the model, a hard link to
 * the data, a symbolic link to the tokenizer, DIR/config.json when --model DIR. Tracking is off
 * by default, so library users (Python) may save over a checkpoint they loaded. */
/* 1: start recording (what was recorded is kept); 0: stop and forget every recorded input. */
void tlm_inputs_track(int on);
/* Pauses (1) or resumes (0) the recording; returns the previous state. For a look at an output
 * target that is not an input (export's check that DIR2 holds a previous export). */
int tlm_inputs_pause(int pause);
/* The number of inputs recorded (tests). */
int tlm_inputs_count(void);
/* May `path` be written as an output file (replaced atomically)? 0 when it does not exist, or
 * is a regular file, or a symbolic link to a regular file (the writer replaces the link's target
 * and keeps the link), and is no recorded input. Otherwise -1 + tlm_error naming the path and
 * what it is: a directory, a FIFO, a device, a socket, a dangling symbolic link (and its
 * target), a link loop, a link to something that is not a regular file, or an input. */
int tlm_output_check(const char *path);
/* For a directory that outputs go into (export --out DIR2, inspect --dump DIR): -1 + tlm_error
 * when any existing entry of `dir` is a recorded input (--out DIR2 the model's own directory);
 * 0 when none is, or dir does not exist yet. Call it after the inputs are loaded, before writing. */
int tlm_output_check_dir(const char *dir);

/* After a JSON parse failed: when the text nests arrays/objects deeper than cJSON accepts
 * (CJSON_NESTING_LIMIT), -1 + tlm_error "NAME: nested too deeply ..."; else 0 (the caller
 * reports its own "not valid JSON"). Strings are skipped, so brackets inside them do not count. */
int tlm_json_nesting_error(const char *name, const char *text, size_t len);

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
