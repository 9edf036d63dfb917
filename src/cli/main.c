/* main.c — the `tinylm` program: a table of subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util/finite.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command COMMANDS[] = {
    {"train", cmd_train, "train --data FILE [--preset NAME | --config FILE] [--out DIR] ...   (train --help)"},
    {"generate", cmd_generate, "generate --model DIR [--prompt TEXT] [-n N] [--temperature T] [--top-k K] [--top-p P]"},
    {"lesson", cmd_lesson, "lesson 15                       the lesson's worked numbers, computed by the engine"},
    {"info", cmd_info, "info --config FILE | --model DIR  parameters by component for any config"},
    {"logits", cmd_logits, "logits --model DIR --ids \"1 5 9\" --out FILE.npy   logits [T, vocab] as .npy"},
    {"inspect", cmd_inspect, "inspect --model DIR --prompt TEXT | --ids \"1 2\" [--json|--csv] [--plot F.svg]; inspect --grad --data FILE"},
    {"export", cmd_export, "export --model DIR|FILE.bin --out DIR2   as a Hugging Face directory (llama, gpt2) or tinylm"},
    {"tokenize", cmd_tokenize, "tokenize --tokenizer PATH --text TEXT | --decode \"ids\""},
};

static void usage(FILE *f) {
    fprintf(f, "tinylm — build, train, run and open up small transformer language models\n\nusage:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) fprintf(f, "  tinylm %s\n", COMMANDS[i].help);
    fprintf(f, "\nany command: --allow-nonfinite  load (and export) weights that hold NaN/Inf, with a warning\n"
               "             (by default such a model is refused, naming the tensor)\n");
}

int main(int argc, char **argv) {
    /* --allow-nonfinite, before or after the command: every command that loads or writes a
     * model accepts NaN/Inf weights with a warning instead of refusing them (util/finite.h) */
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allow-nonfinite")) tlm_set_allow_nonfinite(1);
        else argv[n++] = argv[i];
    }
    argc = n;
    argv[argc] = NULL;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tinylm: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
