#include "run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "convert/checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

static int fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tlm_error("%s: cannot open to sync: %s", path, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    return rc ? tlm_error("%s: fsync failed: %s", path, strerror(errno)) : 0;
}

static int remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = path_join(dir, e->d_name);
        if (unlink(p) != 0) remove_tree(p);
        free(p);
    }
    closedir(d);
    return rmdir(dir);
}

static int write_optimizer(const char *path, const adamw *opt, size_t n_params) {
    tlm_st_entry e[2] = {{.name = "adam.m", .dtype = TLM_DT_F32, .ndim = 1, .shape = {(int64_t)n_params}, .data = opt->m},
                         {.name = "adam.v", .dtype = TLM_DT_F32, .ndim = 1, .shape = {(int64_t)n_params}, .data = opt->v}};
    return tlm_st_write(path, e, 2, NULL);
}

/* test hook: TLM_TEST_CRASH_IN_SAVE=<step> kills the process halfway through that save */
static void maybe_crash(int step) {
    const char *s = getenv("TLM_TEST_CRASH_IN_SAVE");
    if (s && atoi(s) == step) raise(SIGKILL);
}

int run_save(const char *out_dir, int step, const tlm_model *m, const tlm_tokenizer *tok, const adamw *opt,
             const char *trainer_json) {
    if (make_dirs(out_dir)) return -1;
    char name[64], tmpl[4096], final_dir[4096], link_tmp[4096], link_path[4096];
    snprintf(name, sizeof name, "step-%07d", step);
    snprintf(tmpl, sizeof tmpl, "%s/.%s.tmp-XXXXXX", out_dir, name);
    snprintf(final_dir, sizeof final_dir, "%s/%s", out_dir, name);
    snprintf(link_tmp, sizeof link_tmp, "%s/.latest.tmp", out_dir);
    snprintf(link_path, sizeof link_path, "%s/latest", out_dir);
    if (!mkdtemp(tmpl)) return tlm_error("%s: cannot create a checkpoint directory: %s", out_dir, strerror(errno));
    char *tok_path = path_join(tmpl, TLM_TOKENIZER_OWN_FILE), *opt_path = path_join(tmpl, "optimizer.safetensors");
    char *state_path = path_join(tmpl, "trainer.json");
    int rc = model_save_dir(m, tmpl);
    maybe_crash(step);
    if (!rc) rc = tlm_tokenizer_save(tok, tok_path);
    if (!rc) rc = write_optimizer(opt_path, opt, m->n_params);
    if (!rc) rc = tlm_write_file_atomic(state_path, trainer_json, strlen(trainer_json));
    free(tok_path), free(opt_path), free(state_path);
    if (!rc) rc = fsync_path(tmpl);
    if (rc) {
        remove_tree(tmpl);
        return tlm_error_prefix("%s: saving the checkpoint of step %d", out_dir, step);
    }
    /* a leftover directory of this step (a crash after its rename, before the link switch)
     * is not what latest points to, so it can go */
    char *current = run_latest(out_dir);
    if (current && strcmp(current, final_dir) != 0) remove_tree(final_dir);
    free(current);
    tlm_clear_error();
    if (rename(tmpl, final_dir) != 0) {
        int e = errno;
        remove_tree(tmpl);
        return tlm_error("%s: cannot move the checkpoint into place: %s", final_dir, strerror(e));
    }
    unlink(link_tmp);
    if (symlink(name, link_tmp) != 0 || rename(link_tmp, link_path) != 0)
        return tlm_error("%s: cannot switch the latest link: %s", link_path, strerror(errno));
    if (fsync_path(out_dir)) return -1;
    /* keep only the checkpoint latest names */
    DIR *d = opendir(out_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "step-", 5) != 0 || !strcmp(e->d_name, name)) continue;
        char *old = path_join(out_dir, e->d_name);
        remove_tree(old);
        free(old);
    }
    if (d) closedir(d);
    return 0;
}

char *run_latest(const char *out_dir) {
    char *link = path_join(out_dir, "latest");
    char target[1024];
    ssize_t n = link ? readlink(link, target, sizeof target - 1) : -1;
    free(link);
    if (n <= 0) return tlm_error("%s: no checkpoint (no \"latest\" link)", out_dir), NULL;
    target[n] = '\0';
    if (strchr(target, '/')) return tlm_error("%s/latest: unexpected link target \"%s\"", out_dir, target), NULL;
    return path_join(out_dir, target);
}

int run_load_optimizer(const char *ckpt_dir, adamw *opt, size_t n_params) {
    char *path = path_join(ckpt_dir, "optimizer.safetensors");
    tlm_safetensors *st = tlm_st_open(path);
    if (!st) return free(path), -1;
    int64_t shape[1] = {(int64_t)n_params};
    int rc = tlm_st_load_f32(st, "adam.m", 1, shape, opt->m) || tlm_st_load_f32(st, "adam.v", 1, shape, opt->v) ? -1 : 0;
    tlm_st_close(st);
    /* (a NaN moment, or a negative second moment under its square root, would make every weight it
     * touches NaN at the first step) */
    if (!rc && (tlm_check_finite(opt->m, n_params, 0, path, "adam.m") < 0 ||
                tlm_check_finite(opt->v, n_params, 0, path, "adam.v") < 0))
        rc = -1;
    for (size_t i = 0; !rc && i < n_params; i++)
        if (opt->v[i] < 0.0f)
            rc = tlm_error("%s: tensor 'adam.v' (second moments) holds %g at flat index %zu: it must be >= 0", path,
                           opt->v[i], i);
    free(path);
    return rc;
}

/* ---- one owner per run directory -------------------------------------------------------------- */

/* the pid the lock file holds, or 0 (not written yet: the owner writes it right after locking) */
static long lock_owner(int fd) {
    for (int attempt = 0; attempt < 50; attempt++) {
        char buf[32] = {0};
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (pid > 0) return pid;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int run_lock(const char *out_dir) {
    if (make_dirs(out_dir)) return -1;
    char *path = path_join(out_dir, RUN_LOCK_FILE);
    if (!path) return tlm_error("out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        tlm_error("%s: cannot open the run's lock file: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        long pid = e == EWOULDBLOCK ? lock_owner(fd) : 0;
        close(fd);
        if (e != EWOULDBLOCK)
            tlm_error("%s: cannot lock: %s", path, strerror(e));
        else if (pid > 0)
            tlm_error("%s is in use by another tinylm process (pid %ld, recorded in %s); wait for it to finish, or "
                      "choose another --out",
                      out_dir, pid, path);
        else
            tlm_error("%s is in use by another tinylm process (it holds the lock on %s); wait for it to finish, or "
                      "choose another --out",
                      out_dir, path);
        free(path);
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        tlm_error("%s: cannot write the pid into the lock file: %s", path, strerror(errno));
        close(fd);
        free(path);
        return -1;
    }
    free(path);
    return fd;
}

int run_remove_stale(const char *out_dir) {
    DIR *d = opendir(out_dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        /* run_save's temporaries: ".step-NNNNNNN.tmp-XXXXXX" (mkdtemp) and ".latest.tmp" */
        int tmp_dir = !strncmp(e->d_name, ".step-", 6) && strstr(e->d_name, ".tmp-");
        int tmp_link = !strcmp(e->d_name, ".latest.tmp");
        if (!tmp_dir && !tmp_link) continue;
        char *p = path_join(out_dir, e->d_name);
        if (p && (tmp_link ? unlink(p) : remove_tree(p)) == 0) {
            fprintf(stderr, "removed %s, left by a save that was interrupted\n", p);
            removed++;
        }
        free(p);
    }
    closedir(d);
    return removed;
}
