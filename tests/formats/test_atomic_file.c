/* test_atomic_file.c — util/atomic_file: the old file survives an abort, a failed
 * commit, and a writer killed with SIGKILL mid-write; commit replaces it completely;
 * no temporary file is left after abort; errors name the path and the system error.
 * What a target may be (a table: regular file, symbolic link to one, written through; a
 * directory, FIFO, device node, dangling link, loop, link to a device refused and left as they
 * were), and that no output replaces a tracked input (util/io.h), by name, symbolic or hard link. */
#include "check.h"

#include "formats/safetensors.h"
#include "util/atomic_file.h"
#include "util/io.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    *n = fread(buf, 1, (size_t)len, f);
    buf[*n] = '\0';
    fclose(f);
    return buf;
}

static int same_content(const char *path, const void *want, size_t n) {
    size_t got_n;
    char *got = slurp(path, &got_n);
    int ok = got && got_n == n && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

/* Number of "*.tmp.*" files in dir. */
static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* A safetensors file with one F32 tensor of n values v, v+1, ... */
static int write_st(const char *path, size_t n, float v) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = v + (float)i;
    tlm_st_entry e = {"w", TLM_DT_F32, 1, {(int64_t)n}, x};
    int rc = tlm_st_write(path, &e, 1, NULL);
    free(x);
    return rc;
}

/* Opens path and checks it holds write_st(path, n, v). */
static int st_is(const char *path, size_t n, float v) {
    tlm_safetensors *st = tlm_st_open(path);
    if (!st)
        return 0;
    const tlm_st_tensor *t = tlm_st_find(st, "w");
    int ok = t && t->numel == n;
    float *x = malloc(n * sizeof *x);
    ok = ok && tlm_st_read_f32(t, x, n) == 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = x[i] == v + (float)i;
    free(x);
    tlm_st_close(st);
    return ok;
}

/* ---- what a target may be -------------------------------------------------------------------- */

/* A snapshot of what is at a path (lstat: a link is not followed), and its bytes if a file. */
typedef struct {
    int exists;
    mode_t mode;
    dev_t rdev;
    char link[512];
    char bytes[256];
    size_t n;
} entry;

static entry look(const char *path) {
    entry e = {0};
    struct stat ls;
    if (lstat(path, &ls) != 0)
        return e;
    e.exists = 1, e.mode = ls.st_mode, e.rdev = ls.st_rdev;
    if (S_ISLNK(ls.st_mode)) {
        ssize_t k = readlink(path, e.link, sizeof e.link - 1);
        e.link[k > 0 ? k : 0] = '\0';
    } else if (S_ISREG(ls.st_mode)) {
        FILE *f = fopen(path, "rb");
        if (f) {
            e.n = fread(e.bytes, 1, sizeof e.bytes, f);
            fclose(f);
        }
    }
    return e;
}

static int same_entry(const entry *a, const entry *b) {
    return a->exists == b->exists && a->mode == b->mode && a->rdev == b->rdev && !strcmp(a->link, b->link) &&
           a->n == b->n && !memcmp(a->bytes, b->bytes, a->n);
}

typedef struct {
    const char *what;
    const char *name;  /* in the scratch dir */
    int (*make)(const char *path, const char *dir);
    const char *words; /* NULL: the write must succeed; else the refusal must say this */
    const char *also;  /* a second path that must be untouched (a link's target), or NULL */
} target_case;

static int make_regular(const char *p, const char *d) { (void)d; return test_write_file(p, "old\n", 4), 0; }
static int make_fifo(const char *p, const char *d) { (void)d; return mkfifo(p, 0644); }
static int make_dir(const char *p, const char *d) { (void)d; return mkdir(p, 0755); }
static int make_dangling(const char *p, const char *d) {
    char t[4200];
    snprintf(t, sizeof t, "%s/nothing-here", d);
    return symlink(t, p);
}
static int make_loop(const char *p, const char *d) { (void)d; return symlink("t-loop", p); }
static int make_link_to_file(const char *p, const char *d) {
    char t[4200];
    snprintf(t, sizeof t, "%s/t-link-target", d);
    test_write_file(t, "target\n", 7);
    return symlink(t, p);
}
static int make_link_to_null(const char *p, const char *d) { (void)d; return symlink("/dev/null", p); }
static int make_link_to_dir(const char *p, const char *d) {
    char t[4200];
    snprintf(t, sizeof t, "%s/t-dir-target", d);
    return mkdir(t, 0755) || symlink(t, p);
}
static int make_link_to_fifo(const char *p, const char *d) {
    char t[4200];
    snprintf(t, sizeof t, "%s/t-fifo-target", d);
    return mkfifo(t, 0644) || symlink(t, p);
}
/* a character device node like /dev/null (needs root; skipped where mknod is not allowed) */
static int make_device(const char *p, const char *d) { (void)d; return mknod(p, S_IFCHR | 0666, makedev(1, 3)); }

static void check_targets(const char *dir) {
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/targets", dir);
    CHECK(mkdir(sub, 0755) == 0);
    struct stat null_before, null_after;
    CHECK(stat("/dev/null", &null_before) == 0 && S_ISCHR(null_before.st_mode));
    const target_case cases[] = {
        {"a regular file (replaced atomically)", "t-file", make_regular, NULL, NULL},
        {"a symbolic link to a regular file (written through)", "t-link", make_link_to_file, NULL, "t-link-target"},
        {"a FIFO", "t-fifo", make_fifo, "FIFO", NULL},
        {"a directory", "t-dir", make_dir, "is a directory", NULL},
        {"a dangling symbolic link", "t-dangling", make_dangling, "dangling symbolic link to", NULL},
        {"a symbolic link loop", "t-loop", make_loop, "loop", NULL},
        {"a symbolic link to /dev/null", "t-null", make_link_to_null, "character device", NULL},
        {"a symbolic link to a directory", "t-dirlink", make_link_to_dir, "directory", "t-dir-target"},
        {"a symbolic link to a FIFO", "t-fifolink", make_link_to_fifo, "FIFO", "t-fifo-target"},
        {"a character device node", "t-dev", make_device, "character device", NULL},
    };
    const char text[] = "new bytes\n";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const target_case *c = &cases[i];
        char p[4300], also[4300];
        snprintf(p, sizeof p, "%s/%s", sub, c->name);
        snprintf(also, sizeof also, "%s/%s", sub, c->also ? c->also : c->name);
        if (c->make(p, sub) != 0) {
            printf("(skipped: %s: cannot make it here: %s)\n", c->what, strerror(errno));
            continue;
        }
        entry before = look(p), also_before = look(also);
        struct stat old_st;
        int had = stat(p, &old_st) == 0;
        int rc = tlm_write_file_atomic(p, text, sizeof text - 1);
        entry after = look(p), also_after = look(also);
        if (c->words) {
            if (rc == 0 || !strstr(tlm_last_error(), c->words) || !strstr(tlm_last_error(), p))
                fprintf(stderr, "target %s: rc %d, error \"%s\" (wanted \"%s\")\n", c->what, rc, tlm_last_error(),
                        c->words);
            CHECK_ERR(rc != 0, p, c->words);
            CHECK(same_entry(&before, &after));           /* left exactly as it was */
            CHECK(same_entry(&also_before, &also_after)); /* and what it points to */
        } else {
            CHECK(rc == 0);
            CHECK(same_content(c->also ? also : p, text, sizeof text - 1));
            if (c->also) /* the link is still the same link */
                CHECK(S_ISLNK(after.mode) && !strcmp(before.link, after.link));
            struct stat new_st;
            CHECK(had && stat(p, &new_st) == 0 && new_st.st_ino != old_st.st_ino); /* a new file renamed in */
        }
        CHECK(count_temps(sub) == 0);
    }
    CHECK(stat("/dev/null", &null_after) == 0 && S_ISCHR(null_after.st_mode) && null_after.st_rdev == null_before.st_rdev);
    /* tlm_atomic_open checks again at commit: a FIFO made at the name meanwhile stays */
    char p[4300];
    snprintf(p, sizeof p, "%s/late-fifo", sub);
    tlm_atomic *f = tlm_atomic_open(p);
    CHECK(f && tlm_atomic_write(f, text, sizeof text - 1) == 0);
    CHECK(mkfifo(p, 0644) == 0);
    CHECK_ERR(tlm_atomic_commit(f) != 0, p, "FIFO");
    struct stat st;
    CHECK(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(count_temps(sub) == 0);
}

/* ---- no output replaces an input ------------------------------------------------------------ */

static void check_inputs(const char *dir) {
    char in[4300], hard[4300], soft[4300], other[4300];
    snprintf(in, sizeof in, "%s/input.txt", dir);
    snprintf(hard, sizeof hard, "%s/input-hard.txt", dir);
    snprintf(soft, sizeof soft, "%s/input-soft.txt", dir);
    snprintf(other, sizeof other, "%s/other.txt", dir);
    test_write_file(in, "precious\n", 9);
    test_write_file(other, "other\n", 6);
    CHECK(link(in, hard) == 0 && symlink(in, soft) == 0);

    /* tracking off (the library's default): an input may be replaced */
    int fd = tlm_open_input(in);
    CHECK(fd >= 0 && tlm_inputs_count() == 0);
    close(fd);
    CHECK(tlm_output_check(in) == 0);

    tlm_inputs_track(1);
    fd = tlm_open_input(in);
    CHECK(fd >= 0 && tlm_inputs_count() == 1);
    close(fd);
    fd = tlm_open_input(hard); /* the same file again: recorded once */
    CHECK(fd >= 0 && tlm_inputs_count() == 1);
    close(fd);
    const char *names[] = {in, hard, soft};
    for (int i = 0; i < 3; i++) {
        CHECK_ERR(tlm_write_file_atomic(names[i], "x", 1) != 0, names[i], "input", "refusing");
        CHECK(same_content(in, "precious\n", 9));
    }
    CHECK(count_temps(dir) == 0);
    CHECK(tlm_write_file_atomic(other, "new\n", 4) == 0 && same_content(other, "new\n", 4)); /* not an input */
    /* an input opened after the output was opened: refused at commit, nothing replaced */
    tlm_atomic *f = tlm_atomic_open(other);
    CHECK(f && tlm_atomic_write(f, "y", 1) == 0);
    fd = tlm_open_input(other);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(tlm_atomic_commit(f) != 0, other, "input");
    CHECK(same_content(other, "new\n", 4));
    /* a directory whose entries include an input */
    CHECK_ERR(tlm_output_check_dir(dir) != 0, "input");
    char clean[4300];
    snprintf(clean, sizeof clean, "%s/clean", dir);
    CHECK(mkdir(clean, 0755) == 0 && tlm_output_check_dir(clean) == 0);
    snprintf(clean, sizeof clean, "%s/absent", dir);
    CHECK(tlm_output_check_dir(clean) == 0);
    /* paused: an opened file is not recorded (a look at an output target) */
    char probe[4300];
    snprintf(probe, sizeof probe, "%s/probe.txt", dir);
    test_write_file(probe, "p", 1);
    int was = tlm_inputs_pause(1);
    fd = tlm_open_input(probe);
    CHECK(was == 0 && fd >= 0 && tlm_inputs_count() == 2);
    close(fd);
    tlm_inputs_pause(was);
    CHECK(tlm_write_file_atomic(probe, "q", 1) == 0);
    /* tracking off again: everything is forgotten */
    tlm_inputs_track(0);
    CHECK(tlm_inputs_count() == 0 && tlm_write_file_atomic(in, "replaced\n", 9) == 0);
    CHECK(same_content(in, "replaced\n", 9));
}

int main(void) {
    const char *dir = scratch_dir();
    char path[4200], sub[4200];
    snprintf(path, sizeof path, "%s/data.bin", dir);
    const char old_text[] = "old content\n";
    const char new_text[] = "the new content, longer than the old\n";

    /* plain write creates the file */
    CHECK(tlm_write_file_atomic(path, old_text, sizeof old_text) == 0);
    CHECK(same_content(path, old_text, sizeof old_text));
    CHECK(count_temps(dir) == 0);

    /* abort after writing half: old content intact, temp removed */
    tlm_atomic *f = tlm_atomic_open(path);
    CHECK(f != NULL);
    char temp[4300];
    snprintf(temp, sizeof temp, "%s", tlm_atomic_temp_path(f));
    CHECK(strncmp(temp, path, strlen(path)) == 0 && strstr(temp, ".tmp.") != NULL);
    CHECK(tlm_atomic_write(f, new_text, sizeof new_text / 2) == 0);
    CHECK(count_temps(dir) == 1);
    tlm_atomic_abort(f);
    CHECK(same_content(path, old_text, sizeof old_text));
    CHECK(count_temps(dir) == 0);
    CHECK(access(temp, F_OK) != 0);
    tlm_atomic_abort(NULL); /* allowed */

    /* commit replaces the whole content */
    f = tlm_atomic_open(path);
    CHECK(tlm_atomic_write(f, new_text, 10) == 0 && tlm_atomic_write(f, new_text + 10, sizeof new_text - 10) == 0);
    CHECK(same_content(path, old_text, sizeof old_text)); /* not visible before commit */
    CHECK(tlm_atomic_commit(f) == 0);
    CHECK(same_content(path, new_text, sizeof new_text));
    CHECK(count_temps(dir) == 0);

    /* permissions: a replaced file keeps its mode; a new one gets 0666 minus the umask */
    CHECK(chmod(path, 0640) == 0);
    CHECK(tlm_write_file_atomic(path, old_text, sizeof old_text) == 0);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0640);
    mode_t mask = umask(022);
    snprintf(sub, sizeof sub, "%s/fresh.bin", dir);
    CHECK(tlm_write_file_atomic(sub, "x", 1) == 0);
    CHECK(stat(sub, &sb) == 0 && (sb.st_mode & 07777) == 0644);
    umask(mask);

    /* errors name the path and the system error */
    snprintf(sub, sizeof sub, "%s/no/such/dir/file.bin", dir);
    CHECK_ERR(tlm_write_file_atomic(sub, "x", 1) != 0, sub, strerror(ENOENT));
    CHECK_ERR(tlm_atomic_open("") == NULL, "empty");
    /* a non-empty directory is refused at open (no temp file written): it and its file stay */
    snprintf(sub, sizeof sub, "%s/adir", dir);
    CHECK(mkdir(sub, 0755) == 0);
    char inner[4300];
    snprintf(inner, sizeof inner, "%s/keep", sub);
    test_write_file(inner, "k", 1);
    CHECK_ERR(tlm_write_file_atomic(sub, new_text, sizeof new_text) != 0, sub, "is a directory");
    CHECK(same_content(inner, "k", 1));
    CHECK(count_temps(dir) == 0);

    check_targets(dir);
    check_inputs(dir);

    /* a writer killed with SIGKILL after writing half: the old file is intact and loads */
    snprintf(sub, sizeof sub, "%s/model.safetensors", dir);
    CHECK(write_st(sub, 1000, 1.0f) == 0);
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        tlm_atomic *g = tlm_atomic_open(sub);
        static char junk[1 << 16];
        memset(junk, 'J', sizeof junk);
        if (g)
            tlm_atomic_write(g, junk, sizeof junk);
        if (write(pipefd[1], "w", 1) != 1) /* tell the parent: half written, not committed */
            _exit(3);
        for (;;)
            pause();
    }
    close(pipefd[1]);
    char byte;
    CHECK(read(pipefd[0], &byte, 1) == 1);
    close(pipefd[0]);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(st_is(sub, 1000, 1.0f));
    CHECK(count_temps(dir) == 1); /* the killed writer's temp file is left, as documented */

    /* kill a full safetensors writer at staggered moments: the file is always either the
     * complete old one or the complete new one */
    int saw_old = 0, saw_new = 0;
    for (int round = 0; round < 8; round++) {
        pid = fork();
        if (pid == 0)
            _exit(write_st(sub, 2000000, 7.0f) == 0 ? 0 : 1); /* 8 MB */
        struct timespec ts = {0, 1000000L * round * round};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        int is_old = st_is(sub, 1000, 1.0f), is_new = st_is(sub, 2000000, 7.0f);
        CHECK(is_old || is_new);
        saw_old += is_old, saw_new += is_new;
        if (is_new) /* put the old one back for the next round */
            CHECK(write_st(sub, 1000, 1.0f) == 0);
    }
    printf("SIGKILL rounds: old file %d times, new file %d times, never broken\n", saw_old, saw_new);

    scratch_remove(dir);
    return check_report("test_atomic_file");
}
