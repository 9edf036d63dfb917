#!/usr/bin/python3
"""test_cli_options.py — the option handling every `tinylm` command shares (src/cli/cli_args.c):

- `--help` / `-h` on every command: exit 0, the command's usage on stdout, nothing on stderr;
  `tinylm --help`, `tinylm help` list the commands, `tinylm help CMD` = `tinylm CMD --help`;
- bad numbers and other usage errors: exit 2 and ONE line on stderr naming the option;
- seeds: every seed (0, 1, 2^32, 2^64-1, -1 = 2^64-1, ...) gives a non-degenerate sample, and
  different seeds different samples, for a tinylm model and for a llama2.c checkpoint;
- --prompt-file FILE and --prompt-file - (stdin) give the same output as --prompt;
- --threads N is accepted by every command and changes no result; the help of a command that
  does no parallel work says so.

    test_cli_options.py --tinylm PATH --work DIR"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import tinylm_ref  # noqa: E402
from harness import check, main, run  # noqa: E402

STORIES = os.path.join(ROOT, "data", "stories260K.bin")
TOK512 = os.path.join(ROOT, "data", "tok512.bin")
COMMANDS = ["train", "generate", "inspect", "logits", "info", "export", "tokenize", "lesson"]
COMPUTING = ["train", "generate", "inspect", "logits", "info", "export", "lesson"]

def test_help(T, work):
    for cmd in COMMANDS:
        for flag in ("--help", "-h"):
            rc, out, err = run(T, cmd, flag)
            check(rc == 0 and out.startswith("usage: tinylm " + cmd) and err == "",
                  "%s %s: exit 0, its usage on stdout" % (cmd, flag), "rc %d err %r" % (rc, err))
        rc, out, err = run(T, cmd, "--help")
        check("--threads N" in out and ("no parallel work" in out) == (cmd not in COMPUTING),
              "%s --help lists --threads (saying whether it computes)" % cmd)
        rc2, out2, _ = run(T, "help", cmd)
        check(rc2 == 0 and out2 == out, "tinylm help %s = tinylm %s --help" % (cmd, cmd))
    # --help wins over missing required options, even after other options
    rc, out, err = run(T, "generate", "--model", "nowhere", "--help")
    check(rc == 0 and out.startswith("usage: tinylm generate") and err == "", "generate --model X --help: usage")
    for args in (["--help"], ["-h"], ["help"]):
        rc, out, err = run(T, *args)
        check(rc == 0 and all("tinylm " + c in out for c in COMMANDS) and err == "",
              "tinylm %s lists every command" % args[0], err)
    rc, out, err = run(T)
    check(rc == 2 and out == "" and "usage" in err, "tinylm without a command: usage on stderr, exit 2")


G = ["generate", "--model", STORIES, "--tokenizer", TOK512]
BAD = [  # args, the text the one line must hold
    (G + ["--steps", "abc"], "--steps"),
    (["train", "--data", "x.txt", "--steps", "abc"], "--steps"),
    (["train", "--data", "x.txt", "--steps", "1.5"], "--steps"),
    (["train", "--data", "x.txt", "--lr", "nan"], "--lr"),
    (["train", "--data", "x.txt", "--lr", "inf"], "--lr"),
    (["train", "--data", "x.txt", "--lr", "1e999"], "--lr"),
    (["train", "--data", "x.txt", "--beta2", "1.5"], "--beta2"),
    (["train", "--data", "x.txt", "--batch", "0"], "--batch"),
    (["train", "--data", "x.txt", "--seed", "1e3"], "--seed"),
    (["train", "--data", "x.txt", "--set", "d_model=1e999"], "--set d_model"),
    (["train", "--data", "x.txt", "--preset", "gpt-5"], "gpt-5"),
    (["train", "--data", "x.txt", "--preset", "llama-baby", "--config", "c.json"], "--config"),
    (["train", "--data"], "--data"),
    (["train"], "--data"),
    (G + ["-n", "abc"], "-n"),
    (G + ["-n", ""], "-n"),
    (G + ["-n", " 5"], "-n"),
    (G + ["-n", "5x"], "-n"),
    (G + ["-n", "0"], "-n"),
    (G + ["-n", "-3"], "-n"),
    (G + ["-n", "4294967297"], "-n"),
    (G + ["-n", "2147483648"], "2147483647"),
    (G + ["--top-p", "2"], "--top-p"),
    (G + ["--top-p", "-0.1"], "--top-p"),
    (G + ["--top-k", "-1"], "--top-k"),
    (G + ["--temperature", "nan"], "--temperature"),
    (G + ["--temperature", "inf"], "--temperature"),
    (G + ["--temperature", "-1"], "--temperature"),
    (G + ["--seed", "99999999999999999999999"], "--seed"),
    (G + ["--seed", "18446744073709551616"], "--seed"),
    (G + ["--seed", "-9223372036854775809"], "--seed"),
    (G + ["--seed", "abc"], "--seed"),
    (G + ["--seed", "0x10"], "--seed"),
    (G + ["--threads", "0"], "--threads"),
    (G + ["--threads", "1025"], "--threads"),
    (G + ["--threads", "two"], "--threads"),
    (G + ["--frobnicate"], "--frobnicate"),
    (G + ["-n"], "-n"),
    (G + ["--prompt", "a", "--prompt-file", "p.txt"], "--prompt-file"),
    (["generate", "--prompt", "a"], "--model"),
    (["inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "a", "--top", "0"], "--top"),
    (["inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "a", "--position", "x"], "--position"),
    (["inspect", "--model", STORIES, "--tokenizer", TOK512, "--prompt", "a", "--ids", "1 2"], "--ids"),
    (["inspect", "--model", STORIES, "--ids", "1 x"], "--ids"),
    (["inspect", "--model", STORIES, "--ids", "1", "--json", "--csv"], "--csv"),
    (["inspect", "--model", STORIES, "--grad", "--data", "x.txt", "--batch", "-2"], "--batch"),
    (["inspect", "--model", STORIES, "--ids", "1", "--threads", "-1"], "--threads"),
    (["logits", "--model", STORIES, "--ids", "1 x", "--out", "o.npy"], "--ids"),
    (["logits", "--model", STORIES, "--out", "o.npy"], "--ids"),
    (["logits", "--model", STORIES, "--ids", "1", "--prompt", "a", "--out", "o.npy"], "--prompt"),
    (["logits", "--model", STORIES, "--ids", "1", "--out", "o.npy", "--threads", "1.5"], "--threads"),
    (["info", "--model", STORIES, "--config", "c.json"], "--config"),
    (["info", "--threads", "0", "--model", STORIES], "--threads"),
    (["info"], "--config"),
    (["export", "--model", STORIES], "--out"),
    (["tokenize", "--tokenizer", TOK512], "--text"),
    (["tokenize", "--tokenizer", TOK512, "--decode", "1 2x"], "--decode"),
    (["tokenize", "--text", "a"], "--tokenizer"),
    (["lesson", "14"], "14"),
    (["lesson", "15", "--threads", "x"], "--threads"),
    (["lesson", "rms", "--lang", "fr"], "--lang"),  # (`lesson` alone prints the course's index)
    (["frobnicate"], "frobnicate"),
]


def test_usage_errors(T, work):
    for args, needle in BAD:
        rc, out, err = run(T, *args)
        lines = err.splitlines()
        check(rc == 2 and len(lines) == 1 and needle in lines[0] and out == "",
              "exit 2, one line naming %s: %s" % (needle, " ".join(a if a not in (STORIES, TOK512) else "M"
                                                                    for a in args[1:])[:40]),
              "rc %d stderr %r" % (rc, err))
    # the range is stated, not "must be positive"
    rc, _, err = run(T, *(G + ["-n", "2147483648"]))
    check("1..2147483647" in err, "-n 2147483648 states the allowed range", err)
    rc, _, err = run(T, *(G + ["--seed", "99999999999999999999999"]))
    check("-9223372036854775808..18446744073709551615" in err, "--seed states the allowed range", err)
    # runtime errors still exit 1
    rc, _, err = run(T, "generate", "--model", os.path.join(work, "missing-model"))
    check(rc == 1 and "missing-model" in err, "a missing model is a runtime error (exit 1)", err)


def sample(T, model, seed, extra=()):
    rc, out, err = run(T, "generate", "--model", model, "--tokenizer", TOK512, "-n", "40", "--seed", str(seed),
                       "--temperature", "1", *extra)
    return out if rc == 0 else "ERROR " + err


def test_seeds(T, work):
    # a random tinylm model over tok512's 512 tokens: close to uniform, so any stuck RNG shows
    cfg = {"model_type": "tinylm", "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
    d = os.path.join(work, "random512")
    tinylm_ref.save(d, cfg, tinylm_ref.random_params(cfg, seed=5))
    seeds = ["0", "1", "2", "4294967296", "18446744073709551615", "9223372036854775807", "-2"]
    for label, model in (("tinylm model", d), ("llama2.c stories260K", STORIES)):
        got = {s: sample(T, model, s) for s in seeds}
        for s, text in got.items():
            pieces = set(text.split())
            check(not text.startswith("ERROR") and len(pieces) >= 5,
                  "%s: seed %s gives a varied sample (%d distinct words)" % (label, s, len(pieces)), text[:120])
        check(len(set(got.values())) == len(seeds), "%s: %d seeds give %d different samples" %
              (label, len(seeds), len(set(got.values()))))
        check(sample(T, model, "-1") == got["18446744073709551615"], "%s: seed -1 = seed 2^64-1" % label)
        check(sample(T, model, "0") == got["0"], "%s: seed 0 reproduces its sample" % label)
        check(sample(T, model, "-9223372036854775808") == sample(T, model, "9223372036854775808"),
              "%s: seed -2^63 = seed 2^63 (two's complement)" % label)
    # run.c's own seeding on the llama2.c path: its reference sample (seed 133742) is tested by
    # test_llama2c_reference; here: greedy ignores the seed
    g = [run(T, "generate", "--model", STORIES, "--tokenizer", TOK512, "-n", "20", "--temperature", "0",
             "--seed", s)[1] for s in ("0", "1")]
    check(g[0] == g[1] and g[0], "greedy decoding does not depend on the seed")


def test_prompt_file(T, work):
    prompt = "The little dog"
    path = os.path.join(work, "prompt.txt")
    with open(path, "wb") as f:
        f.write(prompt.encode())
    base = ["--model", STORIES, "--tokenizer", TOK512]
    for cmd, extra in (("generate", ["-n", "30", "--seed", "7"]), ("inspect", ["--json", "--top", "3"])):
        want = run(T, cmd, *base, "--prompt", prompt, *extra)
        from_file = run(T, cmd, *base, "--prompt-file", path, *extra)
        from_stdin = run(T, cmd, *base, "--prompt-file", "-", *extra, stdin=prompt.encode())
        check(want[0] == 0 and want[1] != "", "%s --prompt runs" % cmd, want[2])
        # (exit code and text; stderr holds generate's timings, which differ run to run)
        check(from_file[:2] == want[:2], "%s --prompt-file FILE = --prompt" % cmd, from_file[2])
        check(from_stdin[:2] == want[:2], "%s --prompt-file - (stdin) = --prompt" % cmd, from_stdin[2])
    # logits: the prompt's tokens (with BOS) = the same ids given with --ids
    ids = run(T, "tokenize", "--tokenizer", TOK512, "--text", prompt, "--bos")[1].strip()
    outs = [os.path.join(work, n) for n in ("ids.npy", "file.npy", "stdin.npy")]
    r = [run(T, "logits", *base, "--ids", ids, "--out", outs[0]),
         run(T, "logits", *base, "--prompt-file", path, "--out", outs[1]),
         run(T, "logits", *base, "--prompt-file", "-", "--out", outs[2], stdin=prompt.encode())]
    check(all(x[0] == 0 for x in r), "logits --ids / --prompt-file / stdin run", " ".join(x[2] for x in r))
    if all(x[0] == 0 for x in r):
        data = [open(o, "rb").read() for o in outs]
        check(data[0] == data[1] == data[2], "logits: --prompt-file and stdin give the --ids logits")
    missing = os.path.join(work, "no-such-prompt.txt")
    for cmd in ("generate", "inspect", "logits"):
        rc, _, err = run(T, cmd, *base, "--prompt-file", missing, "--out", os.path.join(work, "x.npy")) \
            if cmd == "logits" else run(T, cmd, *base, "--prompt-file", missing)
        check(rc == 1 and "no-such-prompt.txt" in err and len(err.splitlines()) == 1,
              "%s --prompt-file MISSING names the file (exit 1)" % cmd, err)


def test_threads(T, work):
    base = ["generate", "--model", STORIES, "--tokenizer", TOK512, "-n", "30", "--seed", "3"]
    one, two = run(T, *base, "--threads", "1"), run(T, *base, "--threads", "2")
    check(one[0] == 0 and one[:2] == two[:2], "generate --threads 1 and 2 give the same text", one[2] + two[2])
    check("; 1 threads," in one[2] and "; 2 threads," in two[2], "generate reports the --threads it ran with",
          one[2] + two[2])
    rc, out, err = run(T, "info", "--model", STORIES, "--threads", "1")
    check(rc == 0 and "OpenMP" not in err, "info --threads 1 runs", err)
    rc, out, err = run(T, "tokenize", "--tokenizer", TOK512, "--text", "Once upon a time", "--threads", "2")
    rc1, out1, _ = run(T, "tokenize", "--tokenizer", TOK512, "--text", "Once upon a time")
    check(rc == 0 and out == out1 and out.strip(), "tokenize --threads 2: accepted, the same ids", err)
    rc, out, err = run(T, "lesson", "15", "--threads", "1")
    check(rc == 0 and "numbers agree" in out, "lesson 15 --threads 1 runs", err)
    rc, out, err = run(T, "inspect", "--model", STORIES, "--ids", "1 2 3", "--threads", "1", "--json")
    check(rc == 0 and out.startswith("{"), "inspect --threads 1 runs", err)


if __name__ == "__main__":
    # the relative paths in BAD (x.txt, o.npy) are in the fresh work folder: never there, never written
    sys.exit(main([test_help, test_usage_errors, test_seeds, test_prompt_file, test_threads]))
