/* atomic_file.h — replace a file so that readers see either the old or the new
 * content, never a mix, even if the writer crashes or the machine loses power.
 *
 * How: write to "PATH.tmp.XXXXXX" in the same directory, flush and fsync it, rename it
 * over PATH (atomic on POSIX), then fsync the directory so the rename itself is durable.
 * Until commit succeeds the file at PATH is untouched. A crash (SIGKILL) mid-write can
 * leave a stray "PATH.tmp.*" file behind, but never a damaged PATH.
 * The new file gets the permission bits of the file it replaces (0666 minus the umask
 * for a new one).
 *
 * What PATH may be (tlm_output_check in io.h, checked at open and again before the rename):
 * absent, or a regular file; a symbolic link to a regular file is written THROUGH: the link's
 * target is replaced (atomically, in its own directory) and the link stays a link. Anything
 * else is refused before a byte is written, and left as it was: a directory, a FIFO, a device
 * node, a socket, a dangling symbolic link (no file is created where it points), a link loop,
 * a link to any of those; and, while input tracking is on (the CLI), any file the command has
 * opened as an input, however it is named (a symbolic or hard link to it too).
 *
 * Typical use:
 *     tlm_atomic *f = tlm_atomic_open(path);
 *     if (!f) return -1;
 *     if (tlm_atomic_write(f, a, na) || tlm_atomic_write(f, b, nb)) { tlm_atomic_abort(f); return -1; }
 *     return tlm_atomic_commit(f);
 */
#ifndef TLM_ATOMIC_FILE_H
#define TLM_ATOMIC_FILE_H

#include <stddef.h>

typedef struct tlm_atomic tlm_atomic;

/* Creates the temporary file next to `path`. NULL + tlm_error on failure. */
tlm_atomic *tlm_atomic_open(const char *path);

/* Appends n bytes (buffered). -1 + tlm_error on failure; after a failure every later
 * write and the commit fail too, so callers may check only the commit. */
int tlm_atomic_write(tlm_atomic *f, const void *data, size_t n);

/* Flushes, fsyncs and renames the temporary file over the path, then fsyncs the
 * directory. Always frees `f`. On failure the temporary file is removed, the old file
 * is untouched, and -1 + tlm_error names the path and the system error. */
int tlm_atomic_commit(tlm_atomic *f);

/* Discards everything: removes the temporary file and frees `f`. NULL is allowed. */
void tlm_atomic_abort(tlm_atomic *f);

/* The temporary file's name (for tests and messages). */
const char *tlm_atomic_temp_path(const tlm_atomic *f);

/* Open + one write + commit. */
int tlm_write_file_atomic(const char *path, const void *data, size_t n);

#endif
