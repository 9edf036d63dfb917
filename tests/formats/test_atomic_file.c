/* test_atomic_file.c — util/atomic_file: the old file survives an abort, a failed
 * commit, and a writer killed with SIGKILL mid-write; commit replaces it completely;
 * no temporary file is left after abort; errors name the path and the system error. */
#include "check.h"

#include "formats/safetensors.h"
#include "util/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
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
    /* rename over a non-empty directory fails at commit: the directory and its file stay */
    snprintf(sub, sizeof sub, "%s/adir", dir);
    CHECK(mkdir(sub, 0755) == 0);
    char inner[4300];
    snprintf(inner, sizeof inner, "%s/keep", sub);
    test_write_file(inner, "k", 1);
    CHECK_ERR(tlm_write_file_atomic(sub, new_text, sizeof new_text) != 0, sub, "rename");
    CHECK(same_content(inner, "k", 1));
    CHECK(count_temps(dir) == 0);

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
