#!/usr/bin/python3
"""test_output_paths.py — what an output path may be, and that no output replaces an input.

test_output_targets: every file output option (logits --out, inspect --plot/--html, with and
without --grad, lens train --out, report --html) given each kind of target: an existing regular
file (replaced atomically: a new inode, the new bytes), a symbolic link to a regular file
(written through: the link stays, its target gets the bytes), and refused, exit 1 with one line
naming the path and what it is, everything left as it was: a dangling symbolic link (nothing
created where it points), a FIFO, a directory, a symbolic link loop, a symbolic link to
/dev/null, a character device node (root only), and /dev/null is still a character device after.
The directory outputs (export --out, inspect --dump) given a dangling link, a link to /dev/null.

test_output_is_input: every command with an output option x every input it takes (the model's
model.safetensors and config.json, a llama2.c .bin, a run directory's latest checkpoint, the
tokenizer, the prompt file, the data, the lens file, the report's JSON; export --out the model's
own directory or one holding the tokenizer), with the output naming the input by the same path,
through a symbolic link and through a hard link. Each refused: exit 1, one line naming the output
and saying it is an input, and nothing under the work folder changed (names, modes, sizes, mtimes).

test_messages: --ids "1e3" names the whole text; a safetensors data offset of 4e18 names the
tensor and field and says it is past the end; a dangling --out directory link names its target;
JSON nested 100000 deep says "nested too deeply", naming the file.

    test_output_paths.py --tinylm PATH --work DIR"""
import json
import os
import shutil
import stat
import struct
import subprocess
import sys

from harness import ROOT, STORIES, TOK512, check, main, run_bounded, snapshot as harness_snapshot
import tinylm_ref  # (harness puts tests/reference on the path)

TEXT = os.path.join(ROOT, "data", "tinyshakespeare.txt")
TIMEOUT = 60


def run(T, args):
    return run_bounded(T, args, TIMEOUT)


def snapshot(top):
    return harness_snapshot(top, with_bytes=True)


def changed(before, after):
    return sorted(set(before) ^ set(after) | {p for p in before if p in after and before[p] != after[p]})


class Fx:
    """the inputs, made once under work/in"""

    def __init__(self, T, work):
        self.T, self.work = T, work
        d = self.d = os.path.join(work, "in")
        os.makedirs(d)
        cfg = {"model_type": "tinylm", "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 1,
               "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
        self.model = os.path.join(d, "model")
        tinylm_ref.save(self.model, cfg, tinylm_ref.random_params(cfg, seed=5))
        self.st = os.path.join(self.model, "model.safetensors")
        self.cfg = os.path.join(self.model, "config.json")
        self.tok = os.path.join(d, "tok.bin")
        shutil.copyfile(TOK512, self.tok)
        self.bin = os.path.join(d, "stories.bin")
        shutil.copyfile(STORIES, self.bin)
        self.text = os.path.join(d, "text.txt")
        with open(self.text, "w") as f:
            f.write(open(TEXT).read()[:20000])
        self.prompt = os.path.join(d, "prompt.txt")
        with open(self.prompt, "w") as f:
            f.write("First Citizen:")
        self.exp = os.path.join(d, "exp.json")
        with open(self.exp, "w") as f:
            json.dump({"kind": "experiment", "title": "a page"}, f)
        # a training run directory: latest -> step-1 (a copy of the model)
        self.run = os.path.join(d, "run")
        shutil.copytree(self.model, os.path.join(self.run, "step-1"))
        os.symlink("step-1", os.path.join(self.run, "latest"))
        self.run_st = os.path.join(self.run, "latest", "model.safetensors")
        # a tuned lens for the model, and a previous export of it (with its tokenizer)
        self.lens = os.path.join(d, "lens.safetensors")
        rc, _, err = run(T, self.lens_train(self.lens))
        assert rc == 0, err
        self.export = os.path.join(d, "exported")
        rc, _, err = run(T, ["export", "--model", self.model, "--tokenizer", self.tok, "--out", self.export])
        assert rc == 0, err
        self.export_tok = os.path.join(self.export, "tokenizer.bin")
        assert os.path.isfile(self.export_tok), os.listdir(self.export)

    def lens_train(self, out, model=None, data=None, tok=None):
        return ["lens", "train", "--model", model or self.model, "--tokenizer", tok or self.tok, "--data",
                data or self.text, "--steps", "1", "--batch", "1", "--seq", "8", "--eval-batches", "1", "--out", out]


# ---- what a target may be -------------------------------------------------------------------------

def file_slots(fx):
    """(label, args with {} for the output)"""
    m = ["--model", fx.model, "--tokenizer", fx.tok]
    return [
        ("logits --out", ["logits", *m, "--ids", "1 2", "--out", "{}"]),
        ("inspect --plot", ["inspect", *m, "--ids", "1 2", "--plot", "{}"]),
        ("inspect --html", ["inspect", *m, "--ids", "1 2", "--html", "{}"]),
        ("inspect --grad --plot", ["inspect", "--grad", *m, "--data", fx.text, "--seq", "8", "--plot", "{}"]),
        ("inspect --grad --html", ["inspect", "--grad", *m, "--data", fx.text, "--seq", "8", "--html", "{}"]),
        ("lens train --out", fx.lens_train("{}")),
        ("report --html", ["report", fx.exp, "--html", "{}"]),
        ("compare --json", ["compare", fx.model, fx.model, "--tokens", "1,2", "--json", "{}"]),
        ("compare --html", ["compare", fx.model, fx.model, "--tokens", "1,2", "--html", "{}"]),
    ]


def make_target(kind, d):
    """makes the target of this kind in the fresh folder d: (path, the linked-to path or None); None if impossible"""
    p = os.path.join(d, "out")
    if kind == "regular file":
        with open(p, "wb") as f:
            f.write(b"old bytes\n")
        return p, None
    if kind == "symlink to a regular file":
        t = os.path.join(d, "target")
        with open(t, "wb") as f:
            f.write(b"old bytes\n")
        os.symlink(t, p)
        return p, t
    if kind == "dangling symlink":
        os.symlink(os.path.join(d, "nothing-here"), p)
        return p, os.path.join(d, "nothing-here")
    if kind == "FIFO":
        os.mkfifo(p)
        return p, None
    if kind == "directory":
        os.makedirs(p)
        with open(os.path.join(p, "keep.txt"), "w") as f:
            f.write("mine\n")
        return p, None
    if kind == "symlink loop":
        os.symlink("out", p)
        return p, None
    if kind == "symlink to /dev/null":
        os.symlink("/dev/null", p)
        return p, "/dev/null"
    if kind == "symlink to a directory":
        t = os.path.join(d, "a-dir")
        os.makedirs(t)
        os.symlink(t, p)
        return p, t
    if kind == "character device node":
        try:
            os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError):
            return None
        return p, None
    raise ValueError(kind)


# (kind, words the refusal must say; None: the write succeeds)
TARGETS = [
    ("regular file", None),
    ("symlink to a regular file", None),
    ("dangling symlink", "dangling symbolic link to"),
    ("FIFO", "is a FIFO (named pipe), not a regular file"),
    ("directory", "is a directory, not a regular file"),
    ("symlink loop", "symbolic link loop"),
    ("symlink to /dev/null", "character device"),
    ("symlink to a directory", "which is a directory"),
    ("character device node", "is a character device"),
]


def dev_null_ok():
    s = os.lstat("/dev/null")
    return stat.S_ISCHR(s.st_mode) and s.st_rdev == os.makedev(1, 3)


def test_output_targets(T, work):
    fx = Fx(T, os.path.join(work, "targets"))
    assert dev_null_ok()
    for n, (label, template) in enumerate(file_slots(fx)):
        for k, (kind, words) in enumerate(TARGETS):
            d = os.path.join(work, "targets", "t%d-%d" % (n, k))
            os.makedirs(d)
            made = make_target(kind, d)
            what = "%s onto a %s" % (label, kind)
            if made is None:
                print("%-78s skipped (cannot make one here)" % what)
                continue
            path, linked = made
            before = snapshot(d)
            old = os.lstat(path)
            rc, _, err = run(T, [path if a == "{}" else a for a in template])
            after = snapshot(d)
            lines = err.strip().splitlines()
            if words is None:  # written: atomically (a new inode), through the link (the link stays)
                real = linked or path
                new = os.stat(real)
                ok = (rc == 0 and stat.S_ISREG(new.st_mode) and new.st_ino != before[real][3]
                      and open(real, "rb").read() != b"old bytes\n"
                      and stat.S_ISLNK(os.lstat(path).st_mode) == (linked is not None)
                      and (linked is None or os.readlink(path) == linked)
                      and not [p for p in os.listdir(d) if ".tmp." in p])
                check(ok, what, "rc %s; stderr %r; %s" % (rc, err.strip()[:300], sorted(os.listdir(d))))
            else:
                ok = (rc == 1 and len(lines) == 1 and path in lines[0] and words in lines[0] and before == after
                      and stat.S_IFMT(os.lstat(path).st_mode) == stat.S_IFMT(old.st_mode) and dev_null_ok())
                check(ok, what, "rc %s; stderr %r; changed: %s" % (rc, err.strip()[:300], changed(before, after)[:3]))
    check(dev_null_ok(), "/dev/null is still the character device 1,3")

    # the directory outputs (export --out, inspect --dump): the same refusals for links and FIFOs
    dir_slots = [
        ("export --out", ["export", "--model", fx.model, "--tokenizer", fx.tok, "--out", "{}"]),
        ("inspect --dump", ["inspect", "--model", fx.model, "--tokenizer", fx.tok, "--ids", "1 2", "--dump", "{}"]),
    ]
    dir_targets = [("dangling symlink", "dangling symbolic link to"), ("symlink to /dev/null", "/dev/null"),
                   ("FIFO", "FIFO"), ("symlink loop", "loop")]
    for n, (label, template) in enumerate(dir_slots):
        for k, (kind, words) in enumerate(dir_targets):
            d = os.path.join(work, "targets", "d%d-%d" % (n, k))
            os.makedirs(d)
            path, _ = make_target(kind, d)
            before = snapshot(d)
            rc, _, err = run(T, [path if a == "{}" else a for a in template])
            after = snapshot(d)
            lines = err.strip().splitlines()
            ok = (rc == 1 and len(lines) == 1 and path in lines[0] and words.lower() in lines[0].lower()
                  and before == after and dev_null_ok())
            check(ok, "%s onto a %s" % (label, kind),
                  "rc %s; stderr %r; changed: %s" % (rc, err.strip()[:300], changed(before, after)[:3]))


# ---- no output replaces an input ------------------------------------------------------------------

def same_file_rows(fx):
    """(label, args with {} for the output, the input the output is made to be)"""
    m = ["--model", fx.model, "--tokenizer", fx.tok]
    rows = [
        ("logits --out = --model's model.safetensors", ["logits", *m, "--ids", "1 2", "--out", "{}"], fx.st),
        ("logits --out = --model's config.json", ["logits", *m, "--ids", "1 2", "--out", "{}"], fx.cfg),
        ("logits --out = --model FILE.bin", ["logits", "--model", fx.bin, "--ids", "1 2", "--out", "{}"], fx.bin),
        ("logits --out = --model RUN's latest checkpoint", ["logits", "--model", fx.run, "--tokenizer", fx.tok,
                                                            "--ids", "1 2", "--out", "{}"], fx.run_st),
        ("logits --out = --tokenizer", ["logits", *m, "--prompt", "First", "--out", "{}"], fx.tok),
        ("logits --out = --prompt-file", ["logits", *m, "--prompt-file", fx.prompt, "--out", "{}"], fx.prompt),
    ]
    for opt in ("--plot", "--html"):
        rows += [
            ("inspect %s = --model's model.safetensors" % opt, ["inspect", *m, "--ids", "1 2", opt, "{}"], fx.st),
            ("inspect %s = --model's config.json" % opt, ["inspect", *m, "--ids", "1 2", opt, "{}"], fx.cfg),
            ("inspect %s = --tokenizer" % opt, ["inspect", *m, "--prompt", "First", opt, "{}"], fx.tok),
            ("inspect %s = --prompt-file" % opt, ["inspect", *m, "--prompt-file", fx.prompt, opt, "{}"], fx.prompt),
            ("inspect %s = --lens-file" % opt, ["inspect", *m, "--ids", "1 2", "--lens", "tuned", "--lens-file",
                                                fx.lens, opt, "{}"], fx.lens),
            ("inspect --grad %s = --data" % opt, ["inspect", "--grad", *m, "--data", fx.text, "--seq", "8", opt, "{}"],
             fx.text),
            ("inspect --grad %s = --model's model.safetensors" % opt,
             ["inspect", "--grad", *m, "--data", fx.text, "--seq", "8", opt, "{}"], fx.st),
        ]
    rows += [
        ("lens train --out = --model's model.safetensors", fx.lens_train("{}"), fx.st),
        ("lens train --out = --model's config.json", fx.lens_train("{}"), fx.cfg),
        ("lens train --out = --model RUN's latest/model.safetensors", fx.lens_train("{}", model=fx.run), fx.run_st),
        ("lens train --out = --data", fx.lens_train("{}"), fx.text),
        ("lens train --out = --tokenizer", fx.lens_train("{}"), fx.tok),
        ("report --html = DATA.json", ["report", fx.exp, "--html", "{}"], fx.exp),
        ("compare --json = A's model.safetensors", ["compare", fx.model, fx.run, "--tokens", "1,2", "--json", "{}"],
         fx.st),
        ("compare --html = B RUN's latest checkpoint", ["compare", fx.model, fx.run, "--tokens", "1,2", "--html", "{}"],
         fx.run_st),
        ("compare --json = B FILE.bin", ["compare", fx.bin, fx.bin, "--tokens", "1,2", "--json", "{}"], fx.bin),
        ("compare --json = --tokenizer", ["compare", fx.model, fx.model, "--tokenizer", fx.tok, "--prompt", "First",
                                          "--json", "{}"], fx.tok),
        ("compare --html = --prompt-file", ["compare", fx.model, fx.model, "--tokenizer", fx.tok, "--prompt-file",
                                            fx.prompt, "--html", "{}"], fx.prompt),
    ]
    return rows


def test_output_is_input(T, work):
    top = os.path.join(work, "same")
    fx = Fx(T, top)
    ways = os.path.join(top, "ways")
    os.makedirs(ways)
    for n, (label, template, inp) in enumerate(same_file_rows(fx)):
        soft, hard = os.path.join(ways, "soft-%d" % n), os.path.join(ways, "hard-%d" % n)
        os.symlink(inp, soft)
        os.link(inp, hard)
        for way, out in (("the same path", inp), ("a symbolic link", soft), ("a hard link", hard)):
            before = snapshot(top)
            rc, _, err = run(T, [out if a == "{}" else a for a in template])
            after = snapshot(top)
            lines = err.strip().splitlines()
            ok = rc == 1 and len(lines) == 1 and out in lines[0] and "input" in lines[0] and before == after
            check(ok, "%s, through %s" % (label, way),
                  "rc %s; stderr %r; changed: %s" % (rc, err.strip()[:300], changed(before, after)[:3]))

    # export --out DIR2: the model's own directory (a previous export), by name and through a link;
    # a DIR2 that holds the --tokenizer given (by name, and as a hard link)
    link_dir = os.path.join(ways, "export-link")
    os.symlink(fx.export, link_dir)
    hard_tok = os.path.join(ways, "hard-tok.bin")
    os.link(fx.export_tok, hard_tok)
    rows = [
        ("export --out = the --model directory", ["export", "--model", fx.export, "--out", fx.export], fx.export),
        ("export --out = a symbolic link to the --model directory", ["export", "--model", fx.export, "--out", link_dir],
         link_dir),
        ("export --out DIR2 holding the --tokenizer", ["export", "--model", fx.model, "--tokenizer", fx.export_tok,
                                                       "--out", fx.export], fx.export),
        ("export --out DIR2 holding a hard link's --tokenizer", ["export", "--model", fx.model, "--tokenizer", hard_tok,
                                                                 "--out", fx.export], fx.export),
        ("export --format llama2c --out = the --model directory",
         ["export", "--format", "llama2c", "--model", fx.export, "--out", fx.export], fx.export),
    ]
    for label, args, out in rows:
        before = snapshot(top)
        rc, _, err = run(T, args)
        after = snapshot(top)
        lines = err.strip().splitlines()
        ok = rc == 1 and len(lines) == 1 and out in lines[0] and before == after
        check(ok, label, "rc %s; stderr %r; changed: %s" % (rc, err.strip()[:300], changed(before, after)[:3]))

    # a control: the same commands write a new file beside the inputs
    new = os.path.join(ways, "new.npy")
    rc, _, err = run(T, ["logits", "--model", fx.model, "--ids", "1 2", "--out", new])
    check(rc == 0 and os.path.isfile(new), "logits --out a new file beside the inputs is written", err.strip()[:300])
    new = os.path.join(fx.model, "logits.npy")
    rc, _, err = run(T, ["logits", "--model", fx.model, "--ids", "1 2", "--out", new])
    check(rc == 0 and os.path.isfile(new), "logits --out a new file inside the --model directory is written",
          err.strip()[:300])
    before = open(fx.st, "rb").read()
    rc, _, err = run(T, ["inspect", "--model", fx.model, "--tokenizer", fx.tok, "--ids", "1 2", "--dump", fx.model,
                         "--probe", "logits"])
    check(rc == 0 and os.path.isfile(os.path.join(fx.model, "logits.npy")) and open(fx.st, "rb").read() == before,
          "inspect --dump into the --model directory writes its probes beside the inputs", err.strip()[:300])


# ---- messages ---------------------------------------------------------------------------------------

def one_line(T, what, args, rc_want, *words):
    rc, _, err = run(T, args)
    lines = err.strip().splitlines()
    ok = rc == rc_want and len(lines) == 1 and all(w in lines[0] for w in words)
    return check(ok, what, "rc %s; stderr %r" % (rc, err.strip()[:400]))


def test_messages(T, work):
    top = os.path.join(work, "msg")
    fx = Fx(T, top)
    npy = os.path.join(top, "never.npy")
    # --ids "1e3": the whole text, not its tail
    for ids, word in (("1e3", '"1e3" is not an integer'), ("5 1e3", '"1e3" is not an integer'),
                      ("7x", '"7x" is not an integer'), ("1,2,abc", '"abc" is not an integer')):
        one_line(T, "logits --ids %r names %s" % (ids, word), ["logits", "--model", fx.model, "--ids", ids,
                                                                "--out", npy], 2, word)
    one_line(T, "tokenize --decode \"1e3\" names the whole id", ["tokenize", "--tokenizer", fx.tok, "--decode", "1e3"],
             2, '"1e3" is not an integer')
    one_line(T, "logits --ids 99999999999 is out of range", ["logits", "--model", fx.model, "--ids", "99999999999",
                                                             "--out", npy], 2, "99999999999 is out of range")
    check(not os.path.exists(npy), "no --out written by a refused --ids")

    # a safetensors data offset of 4e18: out of range, past the end, naming the tensor and the field
    bad = os.path.join(top, "bad-offset")
    shutil.copytree(fx.model, bad)
    st = os.path.join(bad, "model.safetensors")
    data = open(st, "rb").read()
    hlen = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + hlen])
    name = sorted(k for k in header if k != "__metadata__")[0]
    header[name]["data_offsets"][1] = 4000000000000000000
    text = json.dumps(header).encode()
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data[8 + hlen:])
    assert b"4000000000000000000" in text
    for cmd in (["info", "--model", bad], ["logits", "--model", bad, "--ids", "1", "--out", npy]):
        one_line(T, "%s: data_offsets 4e18 names the tensor and the field" % cmd[0], cmd, 1, st, name,
                 "data_offsets[1] (end)", "past the end of the file")

    # a dangling --out directory link: names where it points
    dang = os.path.join(top, "dangling-out")
    os.symlink(os.path.join(top, "nowhere"), dang)
    for label, args in (("export --out", ["export", "--model", fx.model, "--tokenizer", fx.tok, "--out", dang]),
                        ("inspect --dump", ["inspect", "--model", fx.model, "--tokenizer", fx.tok, "--ids", "1",
                                            "--dump", dang]),
                        ("train --out", ["train", "--data", fx.text, "--preset", "lesson15", "--steps", "1",
                                         "--out", dang])):
        one_line(T, "%s a dangling link says so and names its target" % label, args, 1, dang,
                 "dangling symbolic link to " + os.path.join(top, "nowhere"))
    check(not os.path.exists(os.path.join(top, "nowhere")), "nothing created where the dangling link points")

    # JSON nested 100000 deep: "nested too deeply", naming the file (cJSON's depth limit)
    deep = os.path.join(top, "deep.json")
    with open(deep, "w") as f:
        f.write("[" * 100000 + "]" * 100000)
    deep_obj = os.path.join(top, "deep-obj.json")
    with open(deep_obj, "w") as f:
        f.write('{"kind": "experiment", "title": "t", "x": ' + '{"a": ' * 100000 + "1" + "}" * 100001)
    one_line(T, "info --config deeply nested JSON", ["info", "--config", deep], 1, deep, "nested too deeply")
    one_line(T, "report deeply nested JSON", ["report", deep_obj, "--html", os.path.join(top, "never.html")], 1,
             deep_obj, "nested too deeply")
    deep_model = os.path.join(top, "deep-model")
    shutil.copytree(fx.model, deep_model)
    shutil.copyfile(deep, os.path.join(deep_model, "config.json"))
    one_line(T, "a model's config.json deeply nested", ["logits", "--model", deep_model, "--ids", "1", "--out", npy],
             1, os.path.join(deep_model, "config.json"), "nested too deeply")
    deep_tok = os.path.join(top, "deep-tok")
    os.makedirs(deep_tok)
    shutil.copyfile(deep_obj, os.path.join(deep_tok, "tokenizer.json"))
    one_line(T, "a tokenizer.json deeply nested", ["tokenize", "--tokenizer", os.path.join(deep_tok, "tokenizer.json"),
                                                   "--text", "a"], 1, "tokenizer.json", "nested too deeply")
    # and a safetensors header
    deep_st = os.path.join(top, "deep-st")
    shutil.copytree(fx.model, deep_st)
    st = os.path.join(deep_st, "model.safetensors")
    hdr = b'{"__metadata__": {}, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
    one_line(T, "a safetensors header deeply nested", ["info", "--model", deep_st], 1, st, "nested too deeply")
    # the other JSON readers: a train config, a sweep grid, a shard index, a GPT-2 vocab.json
    one_line(T, "train --config deeply nested JSON", ["train", "--data", fx.text, "--config", deep, "--steps", "1",
                                                      "--out", os.path.join(top, "never-run")], 1, deep,
             "nested too deeply")
    one_line(T, "sweep --grid deeply nested JSON", ["sweep", "--grid", deep, "--data", fx.text, "--out",
                                                    os.path.join(top, "never-sweep")], 1, deep, "nested too deeply")
    check(not os.path.exists(os.path.join(top, "never-run")) and not os.path.exists(os.path.join(top, "never-sweep")),
          "no run or sweep folder made for a deeply nested config or grid")
    deep_idx = os.path.join(top, "deep-index")
    shutil.copytree(fx.model, deep_idx)
    os.remove(os.path.join(deep_idx, "model.safetensors"))
    shutil.copyfile(deep_obj, os.path.join(deep_idx, "model.safetensors.index.json"))
    one_line(T, "a shard index deeply nested", ["info", "--model", deep_idx], 1, "model.safetensors.index.json",
             "nested too deeply")
    deep_gpt2 = os.path.join(top, "deep-gpt2")
    shutil.copytree(os.path.join(ROOT, "tests", "data", "tokenizers", "gpt2"), deep_gpt2)
    shutil.copyfile(deep_obj, os.path.join(deep_gpt2, "encoder.json"))
    one_line(T, "a GPT-2 encoder.json deeply nested", ["tokenize", "--tokenizer", deep_gpt2, "--text", "a"], 1,
             "encoder.json", "nested too deeply")
    check(not os.path.exists(npy), "no --out written by any refused command")


if __name__ == "__main__":
    sys.exit(main([test_output_targets, test_output_is_input, test_messages]))
