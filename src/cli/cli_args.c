/* cli_args.c — the option parsing every command shares: a table of options per command,
 * -h/--help, --threads, one-line usage errors (exit 2), and strict number parsing. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/error.h"

enum { MAX_THREADS = 1024 };

/* ---- strict numbers ------------------------------------------------------------------------------ */

/* the text a number may be: not empty, not starting with a space (strto* would skip it) */
static int number_text(const char *name, const char *text, const char *what) {
    if (!*text || isspace((unsigned char)text[0])) return tlm_error("%s \"%s\" is not %s", name, text, what);
    return 0;
}

static int parse_ll(const char *name, const char *text, long long min, long long max, long long *out) {
    if (number_text(name, text, "an integer")) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end) return tlm_error("%s \"%s\" is not an integer", name, text);
    if (errno == ERANGE || v < min || v > max)
        return tlm_error("%s %s is out of range: allowed %lld..%lld", name, text, min, max);
    *out = v;
    return 0;
}

int cli_parse_int(const char *name, const char *text, long long min, long long max, int *out) {
    long long v = 0;
    if (min < -0x7fffffffLL - 1) min = -0x7fffffffLL - 1;
    if (max > 0x7fffffffLL) max = 0x7fffffffLL;
    if (parse_ll(name, text, min, max, &v)) return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *name, const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    if (number_text(name, text, "an integer")) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end) return tlm_error("%s \"%s\" is not an integer", name, text);
    /* strtoull accepts "-1" (as 2^64 - 1): a sign is out of range here */
    if (text[0] == '-' || errno == ERANGE || v < min || v > max)
        return tlm_error("%s %s is out of range: allowed %llu..%llu", name, text, (unsigned long long)min,
                         (unsigned long long)max);
    *out = v;
    return 0;
}

int cli_parse_seed(const char *name, const char *text, uint64_t *out) {
    if (text[0] != '-') {
        if (!cli_parse_u64(name, text, 0, UINT64_MAX, out)) return 0;
    } else {
        long long v;
        if (!parse_ll(name, text, INT64_MIN, -1, &v)) {
            *out = (uint64_t)v; /* two's complement: -1 = 2^64 - 1 */
            return 0;
        }
    }
    if (strstr(tlm_last_error(), "out of range"))
        tlm_error("%s %s is out of range: allowed -9223372036854775808..18446744073709551615", name, text);
    return -1;
}

int cli_parse_double(const char *name, const char *text, double min, double max, double *out) {
    if (number_text(name, text, "a number")) return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end) return tlm_error("%s \"%s\" is not a number", name, text);
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) return tlm_error("%s %s is not a finite number", name, text);
    if (v < min || v > max) return tlm_error("%s %s is out of range: allowed %g..%g", name, text, min, max);
    *out = v;
    return 0;
}

int cli_parse_float(const char *name, const char *text, double min, double max, float *out) {
    double v = 0.0;
    if (max > 3.4028234663852886e38) max = 3.4028234663852886e38; /* FLT_MAX */
    if (min < -3.4028234663852886e38) min = -3.4028234663852886e38;
    if (cli_parse_double(name, text, min, max, &v)) return -1;
    *out = (float)v;
    return 0;
}

/* ---- the option table ---------------------------------------------------------------------------- */

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n') *p = ' '; /* one line */
    fprintf(stderr, "tinylm %s: %s; see tinylm %s --help\n", cmd, msg, cmd);
    return CLI_EXIT_USAGE;
}

cli_opt *cli_opt_of(cli_command *c, const char *name) {
    for (int k = 0; k < c->n_opts; k++)
        if (!strcmp(c->opts[k].name, name)) return &c->opts[k];
    return NULL;
}

static void print_help(const cli_command *c) {
    fputs(c->usage, stdout);
    if (c->more_help) c->more_help();
    printf("\ncommon options:\n");
    if (c->threads)
        printf("  --threads N   OpenMP threads for the computation, 1..%d (default: OMP_NUM_THREADS, else all cores)\n",
               MAX_THREADS);
    else
        printf("  --threads N   accepted as by every command (1..%d); this one does no parallel work\n", MAX_THREADS);
    printf("  -h, --help    this help\n");
    printf("exit status: 0 done, 1 error, 2 usage error\n");
}

static int set_value(cli_opt *o, const char *v) {
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dst = v; return 0;
    case CLI_LIST: {
        cli_list *l = o->dst;
        if (l->n == l->max) return tlm_error("%s: at most %d", o->name, l->max);
        l->items[l->n++] = v;
        return 0;
    }
    case CLI_INT: return cli_parse_int(o->name, v, (long long)o->min, (long long)o->max, o->dst);
    case CLI_FLOAT: return cli_parse_float(o->name, v, o->min, o->max, o->dst);
    case CLI_SEED: return cli_parse_seed(o->name, v, o->dst);
    case CLI_FLAG: break;
    }
    return tlm_error("%s takes no value", o->name);
}

int cli_parse(cli_command *c, int argc, char **argv) {
    int threads = 0;
    for (int k = 0; k < c->n_opts; k++) c->opts[k].given = 0;
    c->n_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(c);
            return fflush(stdout) ? CLI_EXIT_ERROR : 0;
        }
        cli_opt *o = cli_opt_of(c, a);
        const int is_threads = !strcmp(a, "--threads"); /* (every command: scripts pass it to all) */
        if (!o && !is_threads) {
            if (a[0] == '-' && a[1]) return cli_usage_error(c->name, "unknown option %s", a);
            if (c->n_args == c->max_args) return cli_usage_error(c->name, "unexpected argument \"%s\"", a);
            c->args[c->n_args++] = a;
            continue;
        }
        if (o && o->kind == CLI_FLAG) {
            *(int *)o->dst = 1;
            o->given++;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error(c->name, "option %s needs a value", a);
        const char *v = argv[++i];
        if (is_threads ? cli_parse_int(a, v, 1, MAX_THREADS, &threads) : set_value(o, v))
            return cli_usage_error(c->name, "%s", tlm_last_error());
        if (o) o->given++;
    }
    if (threads) omp_set_num_threads(threads);
    return CLI_CONTINUE;
}

int cli_one_of(cli_command *c, int required, const char *const *names) {
    int given = 0;
    char list[256] = "";
    for (int k = 0; names[k]; k++) {
        const cli_opt *o = cli_opt_of(c, names[k]);
        given += o && o->given;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? (names[k + 1] ? ", " : " or ") : "",
                 names[k]);
    }
    if (given > 1) return cli_usage_error(c->name, "give only one of %s", list);
    if (required && given == 0) return cli_usage_error(c->name, "give one of %s", list);
    return 0;
}
