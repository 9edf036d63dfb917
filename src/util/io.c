#include "io.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* ---- the inputs a command has opened (io.h: an output never replaces an input) ---------------- */

typedef struct {
    dev_t dev;
    ino_t ino;
    char *path; /* as the command named it, for the message */
} input_file;

static struct {
    int on, paused;
    input_file *v;
    size_t n, cap;
} inputs;
static pthread_mutex_t inputs_lock = PTHREAD_MUTEX_INITIALIZER; /* (inputs may be opened on any thread) */

void tlm_inputs_track(int on) {
    pthread_mutex_lock(&inputs_lock);
    inputs.on = on != 0;
    if (!on) {
        for (size_t i = 0; i < inputs.n; i++) free(inputs.v[i].path);
        free(inputs.v);
        inputs.v = NULL, inputs.n = inputs.cap = 0;
        inputs.paused = 0;
    }
    pthread_mutex_unlock(&inputs_lock);
}

int tlm_inputs_pause(int pause) {
    pthread_mutex_lock(&inputs_lock);
    int was = inputs.paused;
    inputs.paused = pause != 0;
    pthread_mutex_unlock(&inputs_lock);
    return was;
}

int tlm_inputs_count(void) {
    pthread_mutex_lock(&inputs_lock);
    int n = (int)inputs.n;
    pthread_mutex_unlock(&inputs_lock);
    return n;
}

/* Records an opened input. Out of memory: the input goes unrecorded, as if tracking were off
 * (the command itself still works; only this guard is lost). */
static void note_input(const char *path, const struct stat *st) {
    pthread_mutex_lock(&inputs_lock);
    int known = !inputs.on || inputs.paused;
    for (size_t i = 0; !known && i < inputs.n; i++) known = inputs.v[i].dev == st->st_dev && inputs.v[i].ino == st->st_ino;
    if (!known && inputs.n == inputs.cap) {
        size_t cap = inputs.cap ? inputs.cap * 2 : 16;
        input_file *v = realloc(inputs.v, cap * sizeof *v);
        if (v) inputs.v = v, inputs.cap = cap;
    }
    char *name = known || inputs.n == inputs.cap ? NULL : strdup(path);
    if (name) inputs.v[inputs.n++] = (input_file){st->st_dev, st->st_ino, name};
    pthread_mutex_unlock(&inputs_lock);
}

/* -1 + message when st is a recorded input */
static int check_not_input(const char *path, const struct stat *st) {
    char *input = NULL;
    pthread_mutex_lock(&inputs_lock);
    for (size_t i = 0; !input && i < inputs.n; i++)
        if (inputs.v[i].dev == st->st_dev && inputs.v[i].ino == st->st_ino) input = strdup(inputs.v[i].path);
    pthread_mutex_unlock(&inputs_lock);
    if (!input) return 0;
    if (!strcmp(input, path))
        tlm_error("%s: is also an input of this command; refusing to overwrite an input (choose another output path)",
                  path);
    else
        tlm_error("%s: is the same file as the input %s; refusing to overwrite an input (choose another output path)",
                  path, input);
    free(input);
    return -1;
}

int tlm_output_check(const char *path) {
    if (!path || !*path) return tlm_error("(empty path): an output needs a file name");
    struct stat ls, st;
    if (lstat(path, &ls) != 0) return 0; /* a new file (a bad directory part: the writer says so) */
    if (S_ISLNK(ls.st_mode)) {
        char target[1024];
        ssize_t k = readlink(path, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        if (stat(path, &st) != 0) {
            if (errno == ELOOP)
                return tlm_error("%s: is a symbolic link loop; refusing to write an output through it", path);
            if (errno == ENOENT)
                return tlm_error("%s: is a dangling symbolic link to %s (which does not exist); refusing to create a "
                                 "file through it", path, target);
            return tlm_error("%s: is a symbolic link to %s, which cannot be used: %s", path, target, strerror(errno));
        }
        if (!S_ISREG(st.st_mode))
            return tlm_error("%s: is a symbolic link to %s, which %s; an output must be a regular file or a new name "
                             "(refusing to replace it)", path, target, kind_of(st.st_mode));
        return check_not_input(path, &st); /* the writer replaces the link's target */
    }
    if (!S_ISREG(ls.st_mode))
        return tlm_error("%s: %s; an output must be a regular file or a new name (refusing to replace it)", path,
                         kind_of(ls.st_mode));
    return check_not_input(path, &ls);
}

int tlm_output_check_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0; /* absent (or not a directory: the writer's own checks say so) */
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = path_join(dir, e->d_name);
        struct stat st;
        if (!p) rc = tlm_error("out of memory");
        else if (stat(p, &st) == 0) rc = check_not_input(p, &st);
        free(p);
    }
    closedir(d);
    return rc;
}

int tlm_json_nesting_error(const char *name, const char *text, size_t len) {
    long depth = 0, most = 0;
    for (size_t i = 0; text && i < len; i++) {
        const char c = text[i];
        if (c == '"') { /* skip the string: brackets inside it are text */
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
        } else if (c == '[' || c == '{') {
            if (++depth > most) most = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    if (most <= CJSON_NESTING_LIMIT) return 0;
    return tlm_error("%s: nested too deeply: arrays and objects %ld levels deep (the JSON parser accepts at most %d)",
                     name, most, CJSON_NESTING_LIMIT);
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
    note_input(path, &st);
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

static const char *kind_name(mode_t m) {
    return S_ISREG(m) ? "a regular file" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : S_ISDIR(m) ? "a directory"
           : "an unknown kind of file";
}

/* why an existing path cannot be used as a directory */
static int not_a_directory(const char *path) {
    struct stat ls;
    if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
        char target[1024];
        ssize_t k = readlink(path, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        struct stat st;
        if (stat(path, &st) != 0 && errno == ENOENT)
            return tlm_error("%s: is a dangling symbolic link to %s (which does not exist); refusing to create a "
                             "directory through it", path, target);
        if (stat(path, &st) != 0 && errno == ELOOP) return tlm_error("%s: is a symbolic link loop, not a directory", path);
        if (stat(path, &st) != 0) return tlm_error("%s: is a symbolic link to %s: %s", path, target, strerror(errno));
        return tlm_error("%s: is a symbolic link to %s, which is %s, not a directory", path, target,
                         kind_name(st.st_mode));
    }
    if (lstat(path, &ls) != 0) return tlm_error("%s: cannot use it as a directory: %s", path, strerror(errno));
    return tlm_error("%s: exists and is %s, not a directory", path, kind_name(ls.st_mode));
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
            if (!is_directory(buf)) return not_a_directory(buf);
            buf[i] = c;
        }
    }
    return 0;
}
