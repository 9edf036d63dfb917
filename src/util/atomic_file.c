/* atomic_file.c — write-to-temp, fsync, rename: see atomic_file.h. */
#include "atomic_file.h"

#include "error.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tlm_atomic {
    char *path;   /* as given (messages, the checks at commit) */
    char *target; /* what the rename replaces: path, or the regular file a symbolic link at path names */
    char *tmp;
    FILE *fp;
    int failed; /* a write already failed: the message is set, the commit must fail */
};

/* Permission bits for a new file: those of the file being replaced, or 0666 minus the
 * umask (what fopen would give), since mkstemp creates the file 0600. */
static mode_t new_file_mode(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0)
        return st.st_mode & 07777;
    mode_t mask = umask(022); /* reading the umask means setting it; restore at once */
    umask(mask);
    return 0666 & ~mask;
}

/* The file the rename replaces: a symbolic link to a regular file (tlm_output_check allows no
 * other) is written through, to its target, in the target's directory, so the link stays. */
static char *rename_target(const char *path) {
    struct stat ls;
    if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real) tlm_error("%s: cannot resolve the symbolic link: %s", path, strerror(errno));
        return real;
    }
    char *p = strdup(path);
    if (!p) tlm_error("%s: out of memory", path);
    return p;
}

tlm_atomic *tlm_atomic_open(const char *path) {
    if (!path || !*path) {
        tlm_error("atomic write: empty file name");
        return NULL;
    }
    /* not a FIFO, device, directory or dangling link; not one of the command's inputs (io.h) */
    if (tlm_output_check(path)) return NULL;
    tlm_atomic *f = calloc(1, sizeof *f);
    if (!f) {
        tlm_error("%s: out of memory", path);
        return NULL;
    }
    if (!(f->target = rename_target(path))) goto fail;
    size_t n = strlen(f->target);
    f->path = strdup(path);
    f->tmp = malloc(n + sizeof ".tmp.XXXXXX");
    if (!f->path || !f->tmp) {
        tlm_error("%s: out of memory", path);
        goto fail;
    }
    memcpy(f->tmp, f->target, n);
    memcpy(f->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(f->tmp);
    if (fd < 0) {
        tlm_error("%s: cannot create temporary file %s: %s", path, f->tmp, strerror(errno));
        goto fail;
    }
    if (fchmod(fd, new_file_mode(f->target)) != 0 || !(f->fp = fdopen(fd, "wb"))) {
        tlm_error("%s: cannot set up temporary file %s: %s", path, f->tmp, strerror(errno));
        close(fd);
        unlink(f->tmp);
        goto fail;
    }
    return f;
fail:
    free(f->path);
    free(f->target);
    free(f->tmp);
    free(f);
    return NULL;
}

const char *tlm_atomic_temp_path(const tlm_atomic *f) { return f->tmp; }

int tlm_atomic_write(tlm_atomic *f, const void *data, size_t n) {
    if (f->failed)
        return -1;
    if (n && fwrite(data, 1, n, f->fp) != n) {
        f->failed = 1;
        return tlm_error("%s: write to %s failed: %s", f->path, f->tmp, strerror(errno));
    }
    return 0;
}

static void free_handle(tlm_atomic *f) {
    free(f->path);
    free(f->target);
    free(f->tmp);
    free(f);
}

void tlm_atomic_abort(tlm_atomic *f) {
    if (!f)
        return;
    if (f->fp)
        fclose(f->fp);
    unlink(f->tmp);
    free_handle(f);
}

/* Makes the rename durable. A failure here is reported: the new file is in place, but
 * a power loss could still bring the old one back. */
static int sync_directory(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else {
        size_t n = (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (!dir)
        return tlm_error("%s: out of memory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0 || fsync(fd) != 0)
        rc = tlm_error("%s: cannot sync directory %s: %s", path, dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

int tlm_atomic_commit(tlm_atomic *f) {
    if (!f)
        return tlm_error("atomic write: commit without an open file");
    if (f->failed) {
        tlm_atomic_abort(f);
        return -1; /* the write error message is already set */
    }
    int ok = fflush(f->fp) == 0 && fsync(fileno(f->fp)) == 0;
    int err = errno;
    /* fclose can report a deferred write error too (e.g. on network file systems) */
    if (fclose(f->fp) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    f->fp = NULL;
    if (!ok) {
        tlm_error("%s: writing %s failed: %s", f->path, f->tmp, strerror(err));
        tlm_atomic_abort(f);
        return -1;
    }
    /* again, just before the rename: something may have taken the name since the open (a FIFO),
     * or the command may have opened the file as an input since */
    if (tlm_output_check(f->path)) {
        tlm_atomic_abort(f);
        return -1;
    }
    if (rename(f->tmp, f->target) != 0) {
        tlm_error("%s: cannot rename %s over it: %s", f->path, f->tmp, strerror(errno));
        tlm_atomic_abort(f);
        return -1;
    }
    int rc = sync_directory(f->target);
    free_handle(f);
    return rc;
}

int tlm_write_file_atomic(const char *path, const void *data, size_t n) {
    tlm_atomic *f = tlm_atomic_open(path);
    if (!f)
        return -1;
    if (tlm_atomic_write(f, data, n) != 0) {
        tlm_atomic_abort(f);
        return -1;
    }
    return tlm_atomic_commit(f);
}
