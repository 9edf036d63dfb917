#!/usr/bin/python3
"""test_bad_paths.py — every path a command takes, given something wrong, gives an honest error.

A table of (command, option) slots, each with the options that make the rest of the command
valid, times a table of bad things to give the slot: a missing path, a directory, an empty
file, a FIFO (which must not make the command wait for a writer), a dangling symbolic link,
a symbolic link loop, an unreadable file (chmod 000: skipped when running as root, where the
mode does not prevent reading), a truncated file and a file of the wrong format. Each row
asserts:
  - exit status 1 (a runtime error), not a signal, within a timeout;
  - ONE line on stderr that names the path and says what is wrong (the row's expected words);
  - nothing on disk changed: the work folder's listing (names, sizes, modes, mtimes) and the
    bytes of an existing --out are the same before and after.

    test_bad_paths.py --tinylm PATH --work DIR"""
import json
import os
import shutil
import subprocess
import sys

from harness import ROOT, STORIES, TOK512, check, main, run_bounded, snapshot as harness_snapshot
import tinylm_ref  # (harness puts tests/reference on the path)

TEXT = os.path.join(ROOT, "data", "tinyshakespeare.txt")
TIMEOUT = 30
ROOT_USER = os.geteuid() == 0


def run(T, args):
    return run_bounded(T, args, TIMEOUT)


def snapshot(top):
    return harness_snapshot(top, with_bytes=False)


class Fixtures:
    """the bad things, made once in work/bad; each maker returns a path (or None: not applicable)"""

    def __init__(self, T, work):
        self.d = os.path.join(work, "bad")
        os.makedirs(self.d)
        # a good tinylm model (to truncate and to mis-configure)
        cfg = {"model_type": "tinylm", "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 1,
               "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
        self.model = os.path.join(work, "model")
        tinylm_ref.save(self.model, cfg, tinylm_ref.random_params(cfg, seed=3))
        # the same as a Hugging Face llama directory whose config.json says vocab_size 2^30
        self.hf = os.path.join(self.d, "hf-vocab-mismatch")
        rc, _, err = run(T, ["export", "--model", self.model, "--out", self.hf, "--no-tokenizer"])
        assert rc == 0, err
        cp = os.path.join(self.hf, "config.json")
        hf_cfg = json.load(open(cp))
        hf_cfg["vocab_size"] = 1 << 30
        json.dump(hf_cfg, open(cp, "w"))
        self.text = os.path.join(work, "text.txt")
        with open(self.text, "w") as f:
            f.write(open(TEXT).read()[:20000])

    def p(self, name):
        return os.path.join(self.d, name)

    def missing(self, ext):
        return self.p("no-such" + ext)

    def directory(self, ext):
        p = self.p("a-directory" + ext)
        os.makedirs(p, exist_ok=True)
        return p

    def empty(self, ext):
        p = self.p("empty" + ext)
        open(p, "wb").close()
        return p

    def fifo(self, ext):
        p = self.p("fifo" + ext)
        if not os.path.exists(p):
            os.mkfifo(p)
        return p

    def dangling(self, ext):
        p = self.p("dangling" + ext)
        if not os.path.islink(p):
            os.symlink(self.p("nothing-here" + ext), p)
        return p

    def loop(self, ext):
        p = self.p("loop" + ext)
        if not os.path.islink(p):
            os.symlink(os.path.basename(p), p)
        return p

    def unreadable(self, ext):
        if ROOT_USER:
            return None
        p = self.p("unreadable" + ext)
        with open(p, "wb") as f:
            f.write(b"x" * 64)
        os.chmod(p, 0)
        return p

    def truncated_of(self, src, ext):
        p = self.p("truncated-" + os.path.basename(src).replace(".", "-") + ext)
        data = open(src, "rb").read()
        with open(p, "wb") as f:
            f.write(data[:len(data) // 2])
        return p

    def copy_as(self, src, name):
        p = self.p(name)
        shutil.copyfile(src, p)
        return p

    def text_file(self, name, data):
        p = self.p(name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def model_dir(self, name, edit=None, latest=None):
        """a model directory copy (edit(cfg) changes its config), or a run directory whose latest -> `latest`"""
        p = self.p(name)
        if os.path.exists(p) or os.path.islink(p):
            return p
        if latest is not None:
            os.makedirs(p)
            os.symlink(latest, os.path.join(p, "latest"))
            return p
        shutil.copytree(self.model, p)
        if edit:
            cp = os.path.join(p, "config.json")
            cfg = json.load(open(cp))
            edit(cfg)
            json.dump(cfg, open(cp, "w"))
        return p


def bad_things(fx, kind):
    """rows of (label, path, words the message must hold) for a slot of this kind"""
    common = [("missing", fx.missing, "no such file"), ("directory", fx.directory, "directory"),
              ("FIFO", fx.fifo, "FIFO"), ("dangling symlink", fx.dangling, "does not exist"),
              ("symlink loop", fx.loop, "loop"), ("unreadable", fx.unreadable, "ermission denied")]
    rows = []
    if kind == "model":
        for label, make, words in common:
            if label == "directory":
                rows.append((label, make(""), "not a model directory"))
            else:
                rows.append((label, make(".bin"), words))
        rows += [
            ("empty .bin", fx.empty(".bin"), "too short"),
            ("truncated llama2.c .bin", fx.truncated_of(STORIES, ".bin"), "truncated"),
            ("tokenizer given as model", fx.copy_as(TOK512, "tok-as-model.bin"), "header"),
            ("text file as model", fx.text_file("notes.txt", b"hello\n"), "not a model"),
            ("GGUF cut in its header", fx.text_file("cut.gguf", b"GGUF\x03\x00\x00\x00" + bytes(12)), "GGUF header"),
            ("run dir, dangling latest", fx.model_dir("run-dangling", latest="step-99"), "step-99, which does not exist"),
            ("run dir, latest loop", fx.model_dir("run-loop", latest="latest"), "loop"),
            ("config vocab_size != weights", fx.model_dir("vocab-mismatch", edit=lambda c: c.update(vocab_size=1 << 30)),
             "does not match the weights"),
            ("HF config vocab_size != weights", fx.hf, "does not match the weights"),
            ("config.json not JSON", fx.model_dir("bad-json", edit=None), "JSON"),
            ("model.safetensors truncated", fx.model_dir("st-truncated"), "model.safetensors"),
        ]
        with open(os.path.join(fx.p("bad-json"), "config.json"), "w") as f:
            f.write("{\"model_type\": \"tinylm\", ")
        st = os.path.join(fx.p("st-truncated"), "model.safetensors")
        data = open(st, "rb").read()
        if len(data) == os.path.getsize(os.path.join(fx.model, "model.safetensors")):
            with open(st, "wb") as f:
                f.write(data[:len(data) // 2])
    elif kind == "tokenizer":
        rows = [(label, make(".bin"), words) for label, make, words in common if label != "directory"]
        rows += [
            ("directory without a tokenizer", fx.directory(""), "no tokenizer"),
            ("empty tokenizer.bin", fx.empty("-tok.bin"), "truncated"),
            ("truncated tokenizer.bin", fx.truncated_of(TOK512, ".bin"), "truncated"),
            ("llama2.c model as tokenizer", fx.copy_as(STORIES, "model-as-tok.bin"), "llama2.c model checkpoint"),
            ("truncated tokenizer.json", fx.text_file("tokenizer.json", b"{\"model\": {\"type\": "), "JSON"),
            ("GGUF cut in its header", fx.text_file("cut-tok.gguf", b"GGUF\x03\x00\x00\x00" + bytes(12)), "GGUF header"),
        ]
    elif kind == "text":  # --prompt-file, --data
        rows = [(label, make(".txt"), words) for label, make, words in common]
    elif kind == "config":
        rows = [(label, make(".json"), words) for label, make, words in common]
        rows += [("empty config", fx.empty(".json"), "JSON"),
                 ("truncated config", fx.text_file("trunc.json", b"{\"vocab_size\": "), "JSON"),
                 ("binary as config", fx.copy_as(TOK512, "tok.json"), "JSON")]
    elif kind == "run":  # train --resume
        rows = [(label, make(""), words) for label, make, words in common if label != "unreadable"]
        rows[1] = ("directory that is no run", fx.directory("-norun"), "directory")
        rows += [("file as run", fx.copy_as(TEXT, "run.txt"), "directory")]
    return [r for r in rows if r[1] is not None]


def slots(fx, work):
    """(label, kind, args with {} where the bad path goes)"""
    out = os.path.join(work, "out")  # must never appear
    npy = os.path.join(work, "logits.npy")
    model = ["--model", STORIES, "--tokenizer", TOK512]
    return [
        ("train --data", "text", ["train", "--data", "{}", "--preset", "lesson15", "--steps", "1", "--out", out]),
        ("train --config", "config", ["train", "--data", fx.text, "--config", "{}", "--steps", "1", "--out", out]),
        ("train --resume", "run", ["train", "--resume", "{}", "--data", fx.text]),
        ("generate --model", "model", ["generate", "--model", "{}", "--tokenizer", TOK512, "-n", "2"]),
        ("inspect --model", "model", ["inspect", "--model", "{}", "--tokenizer", TOK512, "--prompt", "a"]),
        ("logits --model", "model", ["logits", "--model", "{}", "--ids", "1 2", "--out", npy]),
        ("info --model", "model", ["info", "--model", "{}"]),
        ("export --model", "model", ["export", "--model", "{}", "--out", out]),
        ("generate --tokenizer", "tokenizer", ["generate", "--model", STORIES, "--tokenizer", "{}", "-n", "2"]),
        ("inspect --tokenizer", "tokenizer", ["inspect", "--model", STORIES, "--tokenizer", "{}", "--prompt", "a"]),
        ("logits --tokenizer", "tokenizer", ["logits", "--model", STORIES, "--tokenizer", "{}", "--prompt", "a",
                                             "--out", npy]),
        ("tokenize --tokenizer", "tokenizer", ["tokenize", "--tokenizer", "{}", "--text", "a"]),
        ("generate --prompt-file", "text", ["generate", *model, "--prompt-file", "{}", "-n", "2"]),
        ("inspect --prompt-file", "text", ["inspect", *model, "--prompt-file", "{}"]),
        ("logits --prompt-file", "text", ["logits", *model, "--prompt-file", "{}", "--out", npy]),
        ("inspect --grad --data", "text", ["inspect", "--grad", *model, "--data", "{}"]),
        ("info --config", "config", ["info", "--config", "{}"]),
        ("report DATA.json", "config", ["report", "{}", "--html", os.path.join(work, "never.html")]),
        ("compare A", "model", ["compare", "{}", STORIES, "--tokens", "1,2"]),
        ("compare B", "model", ["compare", STORIES, "{}", "--tokens", "1,2"]),
        ("compare --tokenizer", "tokenizer", ["compare", STORIES, STORIES, "--tokenizer", "{}", "--prompt", "a"]),
        ("compare --prompt-file", "text", ["compare", STORIES, STORIES, "--tokenizer", TOK512, "--prompt-file", "{}"]),
    ]


def one_row(T, work, what, args, path, words):
    before = snapshot(work)
    rc, out, err = run(T, args)
    after = snapshot(work)
    lines = err.strip().splitlines()
    ok = (rc == 1 and len(lines) == 1 and path in lines[0] and words.lower() in lines[0].lower() and before == after)
    why = "rc %s; stderr %r" % (rc, err.strip()[:300])
    if before != after:
        changed = sorted(set(before.items()) ^ set(after.items()))
        why += "; changed on disk: %s" % [c[0] for c in changed][:4]
    check(ok, what, why)


def test_bad_inputs(T, work):
    if ROOT_USER:
        print("(running as root: chmod 000 does not prevent reading, so the unreadable-file rows are skipped)")
    fx = Fixtures(T, work)
    for label, kind, template in slots(fx, work):
        for what, path, words in bad_things(fx, kind):
            args = [path if a == "{}" else a for a in template]
            one_row(T, work, "%s: %s" % (label, what), args, path, words)


def test_existing_out(T, work):
    """export --out / train --out / logits --out that exist as something else are left intact"""
    fx = Fixtures(T, os.path.join(work, "out-case"))
    file_out = fx.text_file("precious.txt", b"keep me\n")
    full = fx.p("full-dir")
    os.makedirs(full)
    with open(os.path.join(full, "notes.txt"), "w") as f:
        f.write("mine\n")
    rows = [
        ("export --out an existing file", ["export", "--model", fx.model, "--out", file_out, "--no-tokenizer"], file_out),
        ("export --out a non-empty directory", ["export", "--model", fx.model, "--out", full, "--no-tokenizer"], full),
        ("export --out a FIFO", ["export", "--model", fx.model, "--out", fx.fifo(""), "--no-tokenizer"], fx.p("fifo")),
        ("export --out a dangling link", ["export", "--model", fx.model, "--out", fx.dangling(""), "--no-tokenizer"], fx.p("dangling")),
        ("export with a bad --model creates no --out", ["export", "--model", fx.missing(".bin"), "--out",
                                                        fx.p("new-out")], fx.missing(".bin")),
        ("train --out an existing file", ["train", "--data", fx.text, "--preset", "lesson15", "--steps", "1",
                                          "--out", file_out], file_out),
        ("train with a bad --data leaves --out", ["train", "--data", fx.directory(".txt"), "--preset", "lesson15",
                                                  "--steps", "1", "--out", full], fx.p("a-directory.txt")),
    ]
    for what, args, path in rows:
        one_row(T, os.path.join(work, "out-case"), what, args, path, "")
    check(open(file_out, "rb").read() == b"keep me\n" and os.listdir(full) == ["notes.txt"],
          "the existing --out file and directory hold what they held")


if __name__ == "__main__":
    sys.exit(main([test_bad_inputs, test_existing_out]))
