"""common — what every experiment shares: the Context passed to an experiment's run(ctx).

An experiment is one module experiments/exp_NAME.py with

    NAME = "residual_depth"          # the command-line name (defaults to the module's suffix)
    TITLE = "..."                    # one line
    CLAIM = "..."                    # the lesson's claim being measured
    def run(ctx): ...                # trains / inspects through ctx, fills ctx's result
    def check(result): ...           # optional: robust qualitative assertions on result.json's
                                     # dict (quick form), returns a list of failure messages

Inside run(ctx):
    ctx.quick, ctx.threads, ctx.out (the output folder), ctx.data (TinyShakespeare)
    ctx.train(preset=..., sets={...}, steps=N, opts={...})  -> TrainRun (cached by its arguments)
    ctx.init_model(preset, sets)     -> a checkpoint at initialization (cached)
    ctx.tinylm(args...)              -> stdout of build/tinylm (raises on failure)
    ctx.inspect_grad(model, ...)     -> the dict of `inspect --grad --json`
    ctx.py()                         -> the Python package `tinylm` (python/tinylm), threads set
    ctx.table(title, columns, rows); ctx.figure(title, filename, svg); ctx.note(text)
    ctx.verdict(supported, text)     # True / False / None (inconclusive)
    ctx.log(text)                    # progress on stderr
run.py then writes result.json, README.md and the figures, and prints the verdict.
"""
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# the engine's own report of a run it stopped because the loss or the gradient norm was not
# finite (src/train/trainer.c): "step N: the loss is NaN; stopping without saving (...)"
DIVERGED = re.compile(r"step (\d+): the (loss|gradient norm) is (NaN|infinite); stopping without saving")


class TrainRun:
    """one training run that finished (status "finished", rc 0) or that the engine stopped on a
    non-finite loss or gradient (status "diverged", rc 1, diverged_at = the step it reported)"""

    def __init__(self, path, metrics, rc, stderr_tail, seconds, status=None, diverged_at=None):
        self.path, self.metrics, self.rc, self.stderr_tail, self.seconds = path, metrics, rc, stderr_tail, seconds
        self.status = status or ("finished" if rc == 0 else "diverged")
        self.diverged_at = diverged_at

    @property
    def ok(self):
        return self.rc == 0

    @property
    def losses(self):
        return [m.get("loss") for m in self.metrics]

    @property
    def final_loss(self):
        return self.metrics[-1]["loss"] if self.metrics else float("nan")

    @property
    def val_loss(self):
        """the last validation loss, NaN if the run diverged or never evaluated"""
        if not self.ok:
            return float("nan")
        for m in reversed(self.metrics):
            if m.get("val_loss") is not None:
                return m["val_loss"]
        return float("nan")

    @property
    def initial_loss(self):
        return self.metrics[0]["loss"] if self.metrics else float("nan")

    def divergence_step(self, factor=1.0):
        """the first step whose loss is not finite or above factor x the first step's loss after
        step 10 (None: never); a run the trainer stopped (NaN) diverged at its last step + 1"""
        init = self.initial_loss
        for m in self.metrics:
            loss = m.get("loss")
            if loss is None or not math.isfinite(loss) or (m["step"] > 10 and loss > factor * init):
                return m["step"]
        if not self.ok:
            if self.diverged_at is not None:
                return self.diverged_at
            return (self.metrics[-1]["step"] + 1) if self.metrics else 1
        return None

    @property
    def model(self):
        return self.path  # a run directory is a --model (its latest checkpoint)


class Context:
    def __init__(self, name, out, quick=False, threads=2, tinylm="build/tinylm", cache=None, verbose=True):
        self.name, self.out, self.quick, self.threads, self.verbose = name, out, quick, threads, verbose
        self.tinylm_path = tinylm
        self.repo = REPO
        self.data = os.path.join(REPO, "data", "tinyshakespeare.txt")
        self.stories = os.path.join(REPO, "data", "stories260K.bin")
        self.stories_tok = os.path.join(REPO, "data", "tok512.bin")
        self.cache = cache or os.path.join(out, "models")
        os.makedirs(self.out, exist_ok=True)
        os.makedirs(self.cache, exist_ok=True)
        self.tables, self.figures, self.notes = [], [], []
        self.figure_files = []
        self._verdict = {"supported": None, "text": "no verdict"}
        self._py = None
        self.t0 = time.time()
        self.trainings = []  # (from the cache?, training seconds) of every ctx.train call

    # ---- output
    def log(self, msg):
        if self.verbose:
            sys.stderr.write("[%s %5.1fs] %s\n" % (self.name, time.time() - self.t0, msg))
            sys.stderr.flush()

    def table(self, title, columns, rows):
        self.tables.append({"title": title, "columns": list(columns), "rows": [[_jsonable(v) for v in r] for r in rows]})

    def figure(self, title, filename, svg):
        self.figures.append({"title": title, "svg": svg})
        self.figure_files.append(filename)
        with open(os.path.join(self.out, filename), "w") as f:
            f.write(svg)

    def note(self, text):
        self.notes.append(text)

    def verdict(self, supported, text):
        self._verdict = {"supported": supported, "text": text}

    # ---- the engine
    def tinylm(self, *args, check=True, timeout=None):
        cmd = [self.tinylm_path] + [str(a) for a in args]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
        return p.stdout if check else p

    def has_subcommand(self, sub):
        p = subprocess.run([self.tinylm_path, "help", sub], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return p.returncode == 0

    def train(self, preset="llama-baby", sets=None, steps=200, opts=None, data=None, tag=None, flags=()):
        """tinylm train with --set KEY=VALUE for sets and --OPTION VALUE for opts; cached under
        ctx.cache by a hash of the arguments (training is deterministic for a given seed).
        A run the engine stops on a non-finite loss or gradient is returned (and cached) with ok
        False and status "diverged"; a run that fails for any other reason (a non-zero exit
        without that report, killed, missing output: a full disk, an unwritable folder) raises
        RuntimeError and is not cached."""
        sets, opts = dict(sets or {}), dict(opts or {})
        data = data or self.data
        args = ["--data", data, "--preset", preset, "--steps", str(steps), "--sample", "0"]
        opts.setdefault("save-every", steps)
        opts.setdefault("eval-every", steps)
        for k in sorted(sets):
            v = sets[k]
            args += ["--set", "%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)]
        for k in sorted(opts):
            args += ["--" + k, str(opts[k])]
        args += list(flags)
        key = hashlib.sha1(json.dumps(args).encode()).hexdigest()[:12]
        d = os.path.join(self.cache, (tag + "-" if tag else "") + key)
        done = os.path.join(d, "experiment_done.json")
        if os.path.isfile(done):
            with open(done) as f:
                info = json.load(f)
            # a record says how its run ended; one written before records did (any exit 0 or 1
            # was kept) is judged again from its exit status and stderr
            outcome = _outcome(d, info.get("rc"), info.get("stderr_tail", ""), steps)
            if isinstance(outcome, dict) and info.get("status", outcome["status"]) == outcome["status"]:
                self.trainings.append((True, info["seconds"]))
                return TrainRun(d, _read_metrics(d), info["rc"], info["stderr_tail"], info["seconds"],
                                outcome["status"], outcome.get("diverged_at"))
            self.log("cached run %s is not a finished or diverged run (%s): training it again" % (d, outcome))
        if os.path.exists(d):
            shutil.rmtree(d)
        t = time.time()
        cmd = [self.tinylm_path, "train"] + args + ["--out", d, "--threads", str(self.threads)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        secs = time.time() - t
        tail = p.stderr[-600:]
        outcome = _outcome(d, p.returncode, p.stderr, steps)
        if not isinstance(outcome, dict):
            raise RuntimeError("tinylm train failed (%s); the run is not cached, %s is left to look at\n"
                               "  command: %s\n  stderr: %s" % (outcome, d, " ".join(cmd), p.stderr[-2000:].strip() or "(none)"))
        # the cache keeps the weights only: the AdamW moments (twice the weights) are not needed again
        for root, _, files in os.walk(d):
            if "optimizer.safetensors" in files:
                os.remove(os.path.join(root, "optimizer.safetensors"))
        with open(done, "w") as f:
            json.dump(dict(outcome, rc=p.returncode, stderr_tail=tail, seconds=secs, args=args), f)
        self.trainings.append((False, secs))
        self.log("trained %s %s %d steps: %s, %.1fs" % (preset, " ".join("%s=%s" % kv for kv in sorted(sets.items())),
                                                       steps, outcome["status"], secs))
        return TrainRun(d, _read_metrics(d), p.returncode, tail, secs, outcome["status"], outcome.get("diverged_at"))

    def train_checkpoints(self, preset="llama-baby", sets=None, steps=200, opts=None, data=None, at=(), until=None):
        """ctx.train's run with a checkpoint kept at each step of `at` too (the engine keeps only the
        latest): trained as one run that stops (--stop-at) at each step in turn, its checkpoint
        copied aside, and resumes (a resume is bit-identical to the uninterrupted run, the cosine
        schedule planned for `steps`). Returns (TrainRun, [(step, checkpoint dir)]) in step order,
        the last being the run's end; cached under ctx.cache like ctx.train. until < steps: the run
        stops there, short of its schedule's end (the cosine still planned for `steps`), and that
        checkpoint is the last (the optimizer state is kept, so a later call with a larger until
        continues it)."""
        sets, opts = dict(sets or {}), dict(opts or {})
        data = data or self.data
        at = sorted(s for s in set(int(s) for s in at) if 0 < s < steps)
        args = ["--data", data, "--preset", preset, "--steps", str(steps), "--sample", "0"]
        opts.setdefault("save-every", steps)
        opts.setdefault("eval-every", steps)
        for k in sorted(sets):
            v = sets[k]
            args += ["--set", "%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)]
        for k in sorted(opts):
            args += ["--" + k, str(opts[k])]
        key = hashlib.sha1(json.dumps([args, at]).encode()).hexdigest()[:12]
        d = os.path.join(self.cache, "staged-" + key)
        run_dir, done = os.path.join(d, "run"), os.path.join(d, "experiment_done.json")
        end = steps if until is None or until >= steps else int(until)
        at_end = [s for s in at if s < end]
        stops = at_end + [end]
        kept = [(s, os.path.join(d, "ckpt-%07d" % s)) for s in at_end] + [(end, run_dir)]
        if os.path.isfile(done):
            with open(done) as f:
                info = json.load(f)
            if info.get("until", steps) == end:
                self.trainings.append((True, info["seconds"]))
                return TrainRun(run_dir, _read_metrics(run_dir), 0, info["stderr_tail"], info["seconds"]), kept
            os.remove(done)
        # an interrupted staged run continues from its latest checkpoint (the run directory keeps its
        # optimizer state until the end): the stops it passed have their copies
        first = 0
        latest = os.path.join(run_dir, "latest")
        if os.path.isdir(latest) and os.path.isfile(os.path.join(latest, "optimizer.safetensors")):
            done_step = int(os.path.basename(os.path.realpath(latest))[5:])
            while first < len(at_end) and at_end[first] <= done_step:
                if at_end[first] == done_step and not os.path.isdir(kept[first][1]):
                    shutil.copytree(os.path.join(run_dir, "step-%07d" % done_step), kept[first][1],
                                    ignore=shutil.ignore_patterns("optimizer.safetensors"))
                if not os.path.isdir(kept[first][1]):
                    first = -1
                    break
                first += 1
            if first >= 0:
                self.log("continuing the staged run %s from step %d" % (d, done_step))
        else:
            first = -1
        if first < 0:
            if os.path.exists(d):
                shutil.rmtree(d)
            os.makedirs(d)
            first = 0
        t = time.time()
        p = None
        for i, s in enumerate(stops):
            if i < first:
                continue
            if i == 0 and first == 0 and not os.path.isdir(latest):
                cmd = [self.tinylm_path, "train"] + args + ["--out", run_dir]
            else:
                cmd = [self.tinylm_path, "train", "--resume", run_dir, "--data", data]
            if s < steps:
                cmd += ["--stop-at", str(s)]
            if i == first and os.path.isdir(latest) and \
                    int(os.path.basename(os.path.realpath(latest))[5:]) >= s:
                continue  # (already there: a run cut short earlier at this step)
            cmd += ["--threads", str(self.threads)]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            ck = os.path.join(run_dir, "step-%07d" % s)
            if p.returncode not in (0, 130) or not os.path.isdir(ck):
                raise RuntimeError("tinylm train (staged, to step %d) failed (%d); the run is not cached, %s is left "
                                   "to look at\n  command: %s\n  stderr: %s" % (s, p.returncode, d, " ".join(cmd),
                                                                                p.stderr[-2000:].strip() or "(none)"))
            if s < end:
                shutil.copytree(ck, kept[i][1], ignore=shutil.ignore_patterns("optimizer.safetensors"))
        secs = time.time() - t
        for root, _, files in os.walk(d):
            if "optimizer.safetensors" in files and (end == steps or root != os.path.realpath(latest)):
                os.remove(os.path.join(root, "optimizer.safetensors"))
        with open(done, "w") as f:
            json.dump({"status": "finished", "rc": 0, "stderr_tail": p.stderr[-600:] if p else "", "seconds": secs,
                       "args": args, "at": at, "until": end}, f)
        self.trainings.append((False, secs))
        self.log("trained %s %s to step %d of %d, checkpoints kept at %s: %.1fs" % (
            preset, " ".join("%s=%s" % kv for kv in sorted(sets.items())), end, steps, at_end, secs))
        return TrainRun(run_dir, _read_metrics(run_dir), 0, p.stderr[-600:], secs), kept

    def init_model(self, preset="llama-baby", sets=None, data=None):
        """a checkpoint at initialization: one step at learning rate 1e-12 (the weights move by
        ~1e-12, far below float32 resolution of the init)"""
        return self.train(preset, sets, steps=1, data=data, tag="init",
                          opts={"lr": 1e-12, "min-lr": 1e-12, "warmup": 0, "eval-batches": 1})

    def inspect_grad(self, model, batch=4, seq=64, data=None):
        out = self.tinylm("inspect", "--grad", "--model", model, "--data", data or self.data, "--batch", batch,
                          "--seq", seq, "--json", "--threads", self.threads)
        return json.loads(out)

    def inspect(self, model, *args):
        return json.loads(self.tinylm("inspect", "--model", model, "--json", "--threads", self.threads, *args))

    def py(self):
        if self._py is None:
            sys.path.insert(0, os.path.join(REPO, "python"))
            lib = os.path.join(os.path.dirname(os.path.abspath(self.tinylm_path)), "libtinylm.so")
            if os.path.isfile(lib) and "TINYLM_LIB" not in os.environ:
                os.environ["TINYLM_LIB"] = lib
            import tinylm
            tinylm.set_threads(self.threads)
            self._py = tinylm
        return self._py

    def text_ids(self, model, n_tokens, offset_frac=0.95):
        """token ids of a window of the validation part of TinyShakespeare (last 10%) under a
        model's own tokenizer"""
        with open(self.data, encoding="utf-8") as f:
            text = f.read()
        start = int(len(text) * offset_frac)
        return model.tokenize(text[start:start + n_tokens], bos=False)[:n_tokens]

    def result(self, module, command):
        res = {"kind": "experiment", "name": self.name, "title": module.TITLE, "claim": module.CLAIM,
               "command": command, "verdict": dict(self._verdict), "tables": self.tables,
               "figures": self.figures, "notes": self.notes}
        if getattr(module, "TERMS", None):  # the experiment in the lessons' terms (a caption under the claim)
            res["terms"] = module.TERMS
        return res


def _outcome(d, rc, stderr, steps):
    """how a training run into d ended: {"status": "finished"} (exit 0, every step's metrics and a
    checkpoint), {"status": "diverged", "diverged_at": N, "diverged": "the loss is NaN"} (exit 1
    with the engine's own report of a non-finite loss or gradient), or else a string saying what
    is wrong (the run failed: it must not be cached)"""
    metrics = os.path.join(d, "metrics.jsonl")
    if rc == 0:
        m = _read_metrics(d)
        if not m:
            return "it exited 0 but wrote no %s" % metrics
        if m[-1].get("step") != steps:
            return "it exited 0 but %s ends at step %s of %d" % (metrics, m[-1].get("step"), steps)
        if not os.path.exists(os.path.join(d, "latest")):
            return "it exited 0 but %s holds no checkpoint (no 'latest')" % d
        return {"status": "finished"}
    hits = DIVERGED.findall(stderr or "") if rc == 1 else []
    if hits:
        if not os.path.isfile(metrics):
            return "it stopped on a non-finite value but wrote no %s" % metrics
        step, what, value = hits[-1]
        return {"status": "diverged", "diverged_at": int(step), "diverged": "the %s is %s" % (what, value)}
    if rc is None:
        return "its record has no exit status"
    return "killed by signal %d" % -rc if rc < 0 else "exit status %d without a divergence report" % rc


def _read_metrics(d):
    out = []
    p = os.path.join(d, "metrics.jsonl")
    if os.path.isfile(p):
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line.replace("NaN", "null").replace("Infinity", "1e999")))
                    except ValueError:
                        pass
    return out


def _jsonable(v):
    """numbers as JSON can hold them (NaN / inf as strings), numpy scalars as Python's"""
    if hasattr(v, "item") and not isinstance(v, (list, tuple, str)):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return float("%.6g" % v)
    if v is None or isinstance(v, (int, str, bool)):
        return v
    return str(v)


def table_rows(table):
    """a stored table's rows with the non-finite numbers back as floats (_jsonable wrote them as "NaN",
    "inf", "-inf"): a verdict recomputed from result.json then sees what run() saw"""
    back = {"NaN": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
    return [[back.get(v, v) if isinstance(v, str) else v for v in r] for r in table["rows"]]


def fmt(v, digits=4):
    """a number for a Markdown cell"""
    if isinstance(v, str) or v is None:
        return "-" if v is None else v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return "%.*e" % (digits - 2, v)
    return "%.*g" % (digits, v)


def geo_factor(values):
    """the per-step geometric factor of a sequence: exp of the least-squares slope of log(values)
    against the index (values > 0); NaN if fewer than two positive values"""
    pts = [(i, math.log(v)) for i, v in enumerate(values) if v is not None and v > 0 and math.isfinite(v)]
    if len(pts) < 2:
        return float("nan")
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    return math.exp(sxy / sxx) if sxx > 0 else float("nan")
