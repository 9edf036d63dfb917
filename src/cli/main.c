/* main.c — the `tinylm` program: a table of subcommands. */
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "cli.h"
#include "train/dist.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/finite.h"
#include "util/io.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command COMMANDS[] = {
    {"train", cmd_train, "train --data FILE [--preset NAME | --config FILE] [--out DIR] ...   (train --help)"},
    {"generate", cmd_generate, "generate --model DIR [--prompt TEXT] [-n N] [--temperature T] [--top-k K] [--top-p P]"},
    {"lesson", cmd_lesson, "lesson [TOPIC] [--lang zh|en]     the course: its index, or a topic's worked numbers computed by the engine"},
    {"info", cmd_info, "info --config FILE | --model DIR  parameters by component for any config"},
    {"logits", cmd_logits, "logits --model DIR --ids \"1 5 9\" --out FILE.npy   logits [T, vocab] as .npy"},
    {"inspect", cmd_inspect,
     "inspect --model DIR --prompt TEXT | --ids \"1 2\" [--json|--csv] [--plot F.svg] [--html F.html]; inspect --grad "
     "--data FILE"},
    {"lens", cmd_lens, "lens train --model M --data FILE --out LENS | lens eval ...   tuned lens: per-layer translators"},
    {"compare", cmd_compare, "compare A B [--tokens IDS | --prompt TEXT] [--json F] [--html F]   where two models (or a model and an .npz) diverge, and why"},
    {"export", cmd_export, "export --model DIR|FILE.bin --out DIR2 [--format llama2c]   HF (llama, gpt2), tinylm or llama2.c, with the tokenizer"},
    {"report", cmd_report, "report DATA.json --html OUT.html   an experiment description as a self-contained page"},
    {"tokenize", cmd_tokenize, "tokenize --tokenizer PATH --text TEXT | --decode \"ids\""},
    {"sweep", cmd_sweep, "sweep --grid GRID.json --data FILE --out DIR   a grid of training runs (mpirun: one per rank)"},
};

enum { N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

static void usage(FILE *f) {
    fprintf(f, "tinylm — build, train, run and open up small transformer language models\n\nusage:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  tinylm %s\n", COMMANDS[i].help);
    fprintf(f, "\n`tinylm COMMAND --help` (or `tinylm help COMMAND`) prints a command's options.\n"
               "Every command takes --threads N (OpenMP threads). Exit status: 0 done, 1 error, 2 usage error.\n"
               "\nany command: --allow-nonfinite  load (and export) weights that hold NaN/Inf, with a warning\n"
               "             (by default such a model is refused, naming the tensor)\n");
}

static const command *find(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, COMMANDS[i].name)) return &COMMANDS[i];
    return NULL;
}

static int unknown(const char *name) {
    fprintf(stderr, "tinylm: unknown command \"%s\"; see tinylm --help\n", name);
    return 2;
}

/* Subnormal floats (below 1.2e-38: exp of a softmax logit 90 below the row's maximum, squares of tiny
 * gradients in AdamW's second moment) cost a microcode assist per operation on x86: a Pre-Norm run at
 * a high learning rate slowed more than tenfold as they appeared (docs/performance.md, "Figures
 * behind the code"). The CLI flushes them to zero (FTZ: results;
 * DAZ: inputs) in its main thread before any other starts, so OpenMP's and MPI's threads inherit it;
 * their values are far below every tolerance the numerics are held to. (The library leaves the
 * floating-point mode of a host process, Python's, as it finds it.) */
static void flush_subnormals(void) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */
#endif
}

int main(int argc, char **argv) {
    flush_subnormals();
    /* --allow-nonfinite, before or after the command: every command that loads or writes a
     * model accepts NaN/Inf weights with a warning instead of refusing them (util/finite.h) */
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allow-nonfinite")) tlm_set_allow_nonfinite(1);
        else argv[n++] = argv[i];
    }
    argc = n;
    argv[argc] = NULL;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || (!strcmp(argv[1], "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "help")) { /* help COMMAND = COMMAND --help */
        const command *c = find(argv[2]);
        char *help_argv[] = {argv[2], "--help", NULL};
        return c ? c->run(2, help_argv) : unknown(argv[2]);
    }
    const command *c = find(argv[1]);
    if (!c) return unknown(argv[1]);
    /* a run takes Ctrl-C / SIGTERM at a step boundary: blocked before MPI or OpenMP start threads */
    if (!strcmp(c->name, "train")) train_defer_stop_signals();
    /* under mpirun: MPI is started once, here, for the commands that use the ranks */
    if (dist_init(&argc, &argv)) return fprintf(stderr, "tinylm: %s\n", tlm_last_error()), 1;
    if (dist_size() > 1 && strcmp(c->name, "train") != 0 && strcmp(c->name, "sweep") != 0) {
        if (dist_rank() == 0)
            fprintf(stderr, "tinylm %s: runs as one process; under mpirun only train and sweep use the ranks\n", c->name);
        dist_finalize();
        return 2;
    }
    /* an output never replaces one of the command's inputs (util/io.h: tlm_open_input records each
     * input, tlm_atomic_open refuses to write over one). train and sweep are left out here: a
     * resumed run rewrites its own files (metrics.jsonl), so cmd_train.c / cmd_sweep.c opt in. */
    if (strcmp(c->name, "train") != 0 && strcmp(c->name, "sweep") != 0) tlm_inputs_track(1);
    int rc = c->run(argc - 1, argv + 1);
    tlm_inputs_track(0);
    dist_finalize();
    return rc;
}
