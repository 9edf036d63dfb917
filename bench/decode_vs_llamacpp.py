#!/usr/bin/python3
"""decode_vs_llamacpp.py — tinylm against llama2.c's run.c and llama.cpp on the same weights, in
one run: greedy decode tok/s (~256 positions after "Once upon a time") and the prompt processing
of a 512-token prompt, on random-weight llama2.c checkpoints of the stories15M and stories110M
shapes (and, with --shapes llama-d1024, a 271M llama-style one: d 1024, 16 layers); every ratio of tinylm (f32 and --dtype bf16) to each peer (run.c f32; llama.cpp f32, bf16,
q8_0), and whether the f32 greedy texts agree.

    bench/decode_vs_llamacpp.py --peers-dir /work/shared/peers --nlc /tmp/peers/nlc
        [--tinylm build/tinylm] [--rounds 3] [--shapes stories15M,stories110M] [--threads 2]
        [--steps 256] [--prompt-tokens 512] [--work /tmp/tinylm-bench-llamacpp]

The peers are not part of the repository and nothing of theirs is copied into it; this script
only runs them, from the paths it is given:
  --peers-dir DIR  llama2c/run.c (karpathy/llama2.c, MIT; built here as its Makefile's `runomp`
                   target: gcc -Ofast -march=native -fopenmp, into --work), and
                   llamacpp/llama2c_to_gguf.py (the llama2.c checkpoint as GGUF f32/bf16/q8_0) and
                   llamacpp/llamacpp_bench.mjs (llama.cpp's greedy text, decode and prompt speed
                   through node-llama-cpp's prebuilt CPU build), see DIR/llamacpp/README.md;
  --nlc DIR        where node-llama-cpp 3.21.1 was installed from npm (outside the repository:
                   mkdir -p /tmp/peers/nlc && cd /tmp/peers/nlc && npm init -y && npm i -E node-llama-cpp@3.21.1).
The checkpoints are bench/make_llama2c_checkpoint.py's (untied head, BOS/EOS rows zero: greedy
decoding never stops early), made with a 1024-position context so the 512-token prompt fits the
stories15M shape too (its weights are those of the 256-position shape; only run.c's KV buffer grows).

Each round runs, per shape: tinylm f32 and bf16 (decode, then the 512-token prompt), run.c,
llama.cpp f32, bf16, q8_0 (each one process: decode, then the prompt). Reported: the median over
the rounds [min-max] of each, the ratio of the medians, and the per-round ratios [min-max].
Decode: tinylm's rate is generate's own (tokens after the first; sampling and printing included),
run.c's "achieved tok/s" (every position after the first; its prompt goes one token at a time),
llama.cpp's its own counter (llama_perf "eval": single-token decode calls; no sampling and no
JavaScript loop, which add ~0.5-1 ms per token; the wall-clock rate is printed beside it).
Prompt: tinylm's "prompt N tokens in X ms" (the batched forward to the first logits), llama.cpp's
"prompt eval" counter over the same text (its tokenizer's 512 tokens; tinylm's count of the same
text is checked); run.c has no batched prompt processing (its prompt runs at decode speed), so it
has no prompt figure. Peak RSS of every process (wait4). llama.cpp runs with an f32 KV cache and
flash attention off (llamacpp_bench.mjs's defaults: then its f32 logits match a float64 forward).

Pitfall (the peer's README): llama.cpp's worker threads busy-wait at every step, so anything else
running on the cores makes its figures collapse; the load average is printed before each round.
Measure on an idle machine; a run on a shared one is provisional. Variables this workplace sets for
old OpenBLAS builds are removed; thread counts are given as options (run.c: OMP_NUM_THREADS)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = os.path.join(ROOT, "tests", "data", "tokenizers", "llama2", "tokenizer.bin")
PROMPT = "Once upon a time"
SHAPES = ("stories15M", "stories110M", "llama-d1024")  # (the last on request: --shapes llama-d1024)
DEFAULT_SHAPES = ("stories15M", "stories110M")
GGUF_TYPES = ("f32", "bf16", "q8_0")
TINYLM_DTYPES = ("f32", "bf16")


def run_rss(cmd, env, timeout):
    """(exit status, stdout, stderr, peak RSS MiB): the child is reaped with os.wait4 for its own
    ru_maxrss (KiB on Linux)"""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe)
        t_end = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > t_end:
                p.kill()
                os.wait4(p.pid, 0)
                raise SystemExit("timed out after %d s: %s" % (timeout, " ".join(cmd)))
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0), fe.seek(0)
        return (p.returncode, fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace"),
                ru.ru_maxrss / 1024.0)


def must(rc, out, err, what):
    if rc != 0:
        raise SystemExit("%s failed (exit %d):\n%s\n%s" % (what, rc, out[-2000:], err[-2000:]))


def median_range(v):
    return statistics.median(v), min(v), max(v)


def fmt_mr(v, d=1):
    if not v:
        return "-"
    m, lo, hi = median_range(v)
    return "%.*f [%.*f-%.*f]" % (d, m, d, lo, d, hi)


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers-dir", required=True, help="holds llama2c/run.c and llamacpp/{llama2c_to_gguf.py,llamacpp_bench.mjs}")
    ap.add_argument("--nlc", required=True, help="the folder where node-llama-cpp was installed from npm")
    ap.add_argument("--tinylm", default=os.path.join(ROOT, "build", "tinylm"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=256, help="positions of the decode run, BOS and prompt included (run.c -n)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--work", default="/tmp/tinylm-bench-llamacpp")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per process")
    a = ap.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    for s in shapes:
        if s not in SHAPES:
            ap.error("--shapes: %s is not one of %s" % (s, ",".join(SHAPES)))
    run_c = os.path.join(a.peers_dir, "llama2c", "run.c")
    to_gguf = os.path.join(a.peers_dir, "llamacpp", "llama2c_to_gguf.py")
    lcpp = os.path.join(a.peers_dir, "llamacpp", "llamacpp_bench.mjs")
    for p in (run_c, to_gguf, lcpp):
        if not os.path.isfile(p):
            ap.error("%s: not found (--peers-dir)" % p)
    if not os.path.isfile(os.path.join(a.nlc, "node_modules", "node-llama-cpp", "package.json")):
        ap.error("%s: node-llama-cpp is not installed there (--nlc; see --help)" % a.nlc)
    tinylm = os.path.abspath(a.tinylm)
    if not os.access(tinylm, os.X_OK):
        ap.error("%s: build tinylm first (cmake -S . -B build && cmake --build build)" % tinylm)

    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(k, None)
    env_runc = dict(env, OMP_NUM_THREADS=str(a.threads))
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)

    # --- setup: run.c, the checkpoints and their GGUF files, the long prompt
    runomp = w("runomp")
    subprocess.run(["gcc", "-Ofast", "-march=native", "-fopenmp", "-o", runomp, run_c, "-lm"], check=True)
    for s in shapes:
        if not os.path.exists(w(s + ".bin")):
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "make_llama2c_checkpoint.py"), "--shape", s,
                            "--seq", "1024", "--out", w(s + ".bin")], check=True)
        for t in GGUF_TYPES:
            g = w("%s.%s.gguf" % (s, t))
            if not os.path.exists(g) or os.path.getmtime(g) < os.path.getmtime(w(s + ".bin")):
                subprocess.run(["/usr/bin/python3", to_gguf, w(s + ".bin"), TOK, g, "--type", t], check=True,
                               stdout=subprocess.DEVNULL)
    n_prompt = len(subprocess.run([tinylm, "tokenize", "--tokenizer", TOK, "--text", PROMPT, "--bos"], check=True,
                                  capture_output=True, text=True).stdout.split())
    n_new = a.steps - n_prompt + 1  # tinylm / llama.cpp new tokens: run.c never feeds its last one back
    long_txt = w("prompt%d.txt" % a.prompt_tokens)
    lcpp_base = ["node", lcpp, "--threads", str(a.threads), "--nlc", a.nlc, "--prompt", PROMPT]
    rc, out, err, _ = run_rss(lcpp_base + [w("%s.f32.gguf" % shapes[0]), "-n", "2", "--warmup", "0", "--no-text",
                                           "--prompt-tokens", str(a.prompt_tokens), "--prompt-text-out", long_txt],
                              env, a.timeout)
    must(rc, out, err, "llamacpp_bench.mjs (writing the long prompt)")
    with open(long_txt, encoding="utf-8") as f:
        long_text = f.read()
    n_long_tinylm = len(subprocess.run([tinylm, "tokenize", "--tokenizer", TOK, "--text", long_text, "--bos"],
                                       check=True, capture_output=True, text=True).stdout.split())

    sysinfo = subprocess.run([tinylm, "info", "--system", "--threads", str(a.threads)], capture_output=True,
                             text=True, env=env).stdout
    pick = lambda key: next((l.split(":", 1)[1].strip() for l in sysinfo.splitlines() if l.startswith(key)), "?")
    print("machine: %s, %d cores; tinylm kernels %s, GEMM %s; %s" % (pick("cpu:"), os.cpu_count(), pick("kernels:"),
                                                                    pick("GEMM backend:"), "AMX: " + pick("AMX:")))
    print("threads %d; decode: %d positions (prompt \"%s\" = %d tokens with BOS, %d new); prompt processing: %d tokens "
          "(tinylm's tokenizer: %d for the same text)" % (a.threads, a.steps, PROMPT, n_prompt, n_new,
                                                         a.prompt_tokens, n_long_tinylm))

    # --- the rounds
    # res[shape][engine] = {"decode": [...], "prompt": [...], "rss": [...], "text": str, "wall": [...]}
    engines = ["tinylm f32", "tinylm bf16", "run.c f32"] + ["llama.cpp " + t for t in GGUF_TYPES]
    res = {s: {e: {"decode": [], "prompt": [], "rss": [], "wall": [], "wall_prompt": [], "text": None} for e in engines}
           for s in shapes}
    info = {}
    for r in range(a.rounds):
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        for s in shapes:
            ckpt = w(s + ".bin")
            for dt in TINYLM_DTYPES:
                e = res[s]["tinylm " + dt]
                base = [tinylm, "generate", "--model", ckpt, "--tokenizer", TOK, "--temperature", "0", "--dtype", dt,
                        "--threads", str(a.threads)]
                rc, out, err, rss = run_rss(base + ["--prompt", PROMPT, "-n", str(n_new)], env, a.timeout)
                must(rc, out, err, "tinylm generate")
                m = re.search(r"\(([0-9.]+) tok/s\); [0-9]+ threads", err)
                e["decode"].append(float(m.group(1)))
                e["text"], e["rss"] = out, e["rss"] + [rss]
                rc, out, err, rss = run_rss(base + ["--prompt-file", long_txt, "-n", "1"], env, a.timeout)
                must(rc, out, err, "tinylm generate (long prompt)")
                m = re.search(r"prompt ([0-9]+) tokens in ([0-9.]+) ms \(([0-9.]+) tok/s\)", err)
                e["prompt"].append(float(m.group(3)))
                e["rss"].append(rss)
            e = res[s]["run.c f32"]
            rc, out, err, rss = run_rss([runomp, ckpt, "-z", TOK, "-t", "0", "-n", str(a.steps), "-i", PROMPT],
                                        env_runc, a.timeout)
            must(rc, out, err, "run.c")
            e["decode"].append(float(re.search(r"achieved tok/s: ([0-9.]+)", err).group(1)))
            e["text"], e["rss"] = out, e["rss"] + [rss]
            for t in GGUF_TYPES:
                e = res[s]["llama.cpp " + t]
                js = w("%s.%s.json" % (s, t))
                rc, out, err, rss = run_rss(lcpp_base + [w("%s.%s.gguf" % (s, t)), "-n", str(n_new), "--no-text",
                                                         "--long-prompt-file", long_txt, "--json", js], env, a.timeout)
                must(rc, out, err, "llamacpp_bench.mjs")
                with open(js) as f:
                    j = json.load(f)
                e["decode"].append(j["generation"]["llama_eval_tok_s"])
                e["wall"].append(j["generation"]["tok_s"])
                e["prompt"].append(j["long_prompt"]["llama_tok_s"])
                e["wall_prompt"].append(j["long_prompt"]["tok_s"])
                e["text"], e["rss"] = j["text"], e["rss"] + [rss]
                info[(s, t)] = (j["cpu_variant"], ", ".join(j["weight_buffers"]) or "(not logged)", j["long_prompt"]["tokens"])
                info["version"] = "llama.cpp %s through node-llama-cpp %s (%s build)" % (
                    j["llama_cpp_release"], j["node_llama_cpp"], j["build"])
        print("round %d done (load average before it: %s)" % (r + 1, load), flush=True)
        for s in shapes:
            print("  %s: %s" % (s, "; ".join("%s %.1f%s" % (e, v["decode"][-1], ("/%.0f" % v["prompt"][-1]) if v["prompt"] else "")
                                             for e, v in res[s].items())), flush=True)

    # --- the report
    print("\n(decode tok/s / prompt tok/s; median over %d rounds [min-max]; llama.cpp: its own counters)" % a.rounds)
    for s in shapes:
        R = res[s]
        print("\n%s shape" % s)
        print("  %-16s %24s %24s %13s  %s" % ("engine", "decode tok/s", "prompt %d tok/s" % a.prompt_tokens,
                                               "peak RSS MiB", "notes"))
        for e, v in R.items():
            note = ""
            if e.startswith("llama.cpp"):
                t = e.split()[1]
                var, bufs, ntok = info[(s, t)]
                note = "wall clock %s / %s; %s, weights in %s; prompt %d tokens" % (
                    fmt_mr(v["wall"]), fmt_mr(v["wall_prompt"], 0), var, bufs, ntok)
            elif e == "run.c f32":
                note = "no batched prompt processing"
            print("  %-16s %24s %24s %13.0f  %s" % (e, fmt_mr(v["decode"]), fmt_mr(v["prompt"], 0), max(v["rss"]), note))
        # text agreement
        ref = R["tinylm f32"]["text"].strip()
        for e in ("run.c f32", "llama.cpp f32"):
            other = R[e]["text"].strip()
            same = "identical" if other == ref else "DIFFERS (first %d of %d characters agree)" % (
                common_prefix(other, ref), len(ref))
            print("  greedy text (f32), %s vs tinylm f32: %s" % (e, same))
        for e, base in (("tinylm bf16", "tinylm f32"), ("llama.cpp bf16", "llama.cpp f32"), ("llama.cpp q8_0", "llama.cpp f32")):
            x, y = R[e]["text"].strip(), R[base]["text"].strip()
            print("  greedy text, %s vs %s: %s" % (e, base, "identical" if x == y else
                                                  "first %d of %d characters agree" % (common_prefix(x, y), len(y))))
        # every ratio: tinylm's each dtype against each peer and itself
        print("  ratios (tinylm / peer): of the medians; per round [min-max]")
        for what in ("decode", "prompt"):
            for te in ("tinylm f32", "tinylm bf16"):
                for pe in engines:
                    if pe == te or (pe.startswith("tinylm") and te == "tinylm f32") or not R[pe][what]:
                        continue
                    mt, mp = statistics.median(R[te][what]), statistics.median(R[pe][what])
                    per = [x / y for x, y in zip(R[te][what], R[pe][what])]
                    print("    %-7s %-12s / %-15s %6.2fx   [%.2f-%.2f]" % (what, te, pe, mt / mp, min(per), max(per)))
    print("\nrun.c built with gcc -Ofast -march=native -fopenmp; %s, KV cache f32, flash attention off; "
          "the machine's load decides llama.cpp's figures (busy-waiting workers)" % info["version"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
