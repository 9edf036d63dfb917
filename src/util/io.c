#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

const char *tlm_path_problem(const char *path, int err, char *buf, size_t n) {
    struct stat ls;
    if ((err == ENOENT || err == ELOOP) && lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
        if (err == ELOOP) {
            snprintf(buf, n, "symbolic link loop (the link resolves to itself)");
            return buf;
        }
        char target[1024];
        ssize_t k = readlink(path, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        snprintf(buf, n, "is a symbolic link to %s, which does not exist", target);
        return buf;
    }
    if (err == ELOOP) snprintf(buf, n, "symbolic link loop (too many levels of symbolic links)");
    else snprintf(buf, n, "%s", strerror(err));
    return buf;
}

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "is a directory, not a regular file";
    if (S_ISFIFO(m)) return "is a FIFO (named pipe), not a regular file";
    if (S_ISSOCK(m)) return "is a socket, not a regular file";
    if (S_ISCHR(m)) return "is a character device, not a regular file";
    if (S_ISBLK(m)) return "is a block device, not a regular file";
    return "is not a regular file";
}

int tlm_open_input(const char *path) {
    if (!path || !*path) return tlm_error("(empty path): no such file or directory");
    /* O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int err = errno;
        char why[1200];
        return tlm_error("%s: cannot open: %s", path, tlm_path_problem(path, err, why, sizeof why));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return tlm_error("%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tlm_error("%s: %s", path, kind_of(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return tlm_error("%s: %s", path, strerror(err));
    }
    return fd;
}

FILE *tlm_fopen_input(const char *path) {
    int fd = tlm_open_input(path);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        tlm_error("%s: %s", path, strerror(err));
    }
    return f;
}

char *read_text_file(const char *path, size_t *len) {
    FILE *f = tlm_fopen_input(path);
    if (!f) return NULL;
    char *text = read_text_stream(f, path, len);
    fclose(f);
    return text;
}

char *read_text_stream(FILE *f, const char *path, size_t *len) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return tlm_error("%s: out of memory reading the file", path), NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int err = errno;
        free(buf);
        return tlm_error("%s: read error: %s", path, strerror(err)), NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int is_directory(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(d)) != NULL;)
        empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

int make_dirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return tlm_error("%s: path is empty or too long", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return tlm_error("%s: cannot create directory: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    if (!is_directory(path)) return tlm_error("%s: exists and is not a directory", path);
    return 0;
}
