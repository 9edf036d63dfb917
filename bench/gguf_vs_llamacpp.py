#!/usr/bin/python3
"""gguf_vs_llamacpp.py — tinylm and llama.cpp on the SAME quantized GGUF file, in one run: greedy
decode tok/s (~256 positions after "Once upon a time") and the processing of a 512-token prompt,
for each type (default q8_0 and q4_k) on a random-weight model of the stories110M shape. The
GGUF files are tinylm's own export (`tinylm export --format gguf --type T`), which llama.cpp
loads as it is; both engines read exactly those blocks.

    bench/gguf_vs_llamacpp.py --peers-dir /work/shared/peers --nlc /tmp/peers/nlc
        [--tinylm build/tinylm] [--rounds 3] [--types q8_0,q4_k] [--shape stories110M] [--threads 2]
        [--steps 256] [--prompt-tokens 512] [--work /tmp/tinylm-bench-gguf] [--precision auto|fp32|bf16]

--shape llama-1b is the Llama-3.2-1B body (bench/make_llama2c_checkpoint.py; a 4.4 GB f32
checkpoint made once in --work). --streamed: the files are new models of the shape written by
`tinylm export --config` a chunk of rows at a time (the engine's init, seed 1; the f32 model is
never formed), the writer's time and peak RSS printed; --shape llama-8b (streamed only) is the
Llama-3.1-8B body (d 4096, 32 layers, 32 / 8 heads of 128, FFN 14336) with the 32000-token
vocabulary of the 1B shape: 4.6 GB as Q4_K, 32 GB in f32. --precision is tinylm generate's: auto
(its default) decodes quantized weights with integer products, fp32 with the exact ones
(docs/gguf.md). Decode GB/s = the weights read per token (as `generate` counts them; the same file
for both engines) x tok/s, and its share of the DRAM read bandwidth `tinylm info --system`
measures before the rounds and after them.

llama.cpp runs through node-llama-cpp's prebuilt CPU build (`--nlc`: where it was installed from
npm, outside the repository) and the peers' llamacpp/llamacpp_bench.mjs (`--peers-dir`), with an
f32 KV cache and flash attention off as in bench/decode_vs_llamacpp.py, whose conventions this
follows: tinylm's rates are generate's own (decode: tokens after the first; prompt: the batched
pass to the first logits), llama.cpp's its own counters (llama_perf eval / prompt eval); the
median over the rounds [min-max], the ratio of the medians and the per-round ratios; peak RSS.
llama.cpp's workers busy-wait: measure on an idle machine (the load average is printed)."""
import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_vs_llamacpp import PROMPT, ROOT, TOK, fmt_mr, median_range, must, run_rss  # noqa: E402
from make_llama2c_checkpoint import SHAPES  # noqa: E402

# dim, hidden, layers, heads, kv heads, vocab, seq (as make_llama2c_checkpoint.SHAPES): shapes made
# by --streamed only — the Llama-3.1-8B body with the 1B shape's vocabulary, and a small one
STREAMED_SHAPES = dict(SHAPES, **{"llama-8b": (4096, 14336, 32, 32, 8, 32000, 1024),
                                  "llama-tiny": (256, 768, 2, 4, 2, 32000, 256)})


def write_config(path, shape, seq):
    """a Hugging Face llama config.json of the shape (untied head, RoPE base 10000 as llama2.c's)"""
    dim, hidden, L, H, KV, V, _ = STREAMED_SHAPES[shape]
    with open(path, "w") as f:
        json.dump({"model_type": "llama", "hidden_size": dim, "intermediate_size": hidden, "num_hidden_layers": L,
                   "num_attention_heads": H, "num_key_value_heads": KV, "vocab_size": V,
                   "max_position_embeddings": seq, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                   "tie_word_embeddings": False, "initializer_range": 0.02}, f)


def dram_gbs(tinylm, threads, env):
    out = subprocess.run([tinylm, "info", "--system", "--threads", str(threads)], capture_output=True, text=True,
                         env=env).stdout
    m = re.search(r"measured DRAM read bandwidth: ([0-9.]+) GB/s", out)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers-dir", required=True, help="holds llamacpp/llamacpp_bench.mjs")
    ap.add_argument("--nlc", required=True, help="the folder where node-llama-cpp was installed from npm")
    ap.add_argument("--tinylm", default=os.path.join(ROOT, "build", "tinylm"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--types", default="q8_0,q4_k")
    ap.add_argument("--shape", default="stories110M", help="stories15M, stories110M, llama-d1024, llama-1b; with "
                    "--streamed also llama-8b, llama-tiny")
    ap.add_argument("--seq", type=int, default=1024, help="the model's context length")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--work", default="/tmp/tinylm-bench-gguf")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
    ap.add_argument("--streamed", action="store_true",
                    help="write the GGUF files with `tinylm export --config` (never the f32 model: --shape llama-8b "
                         "needs it)")
    a = ap.parse_args()
    if a.shape not in (STREAMED_SHAPES if a.streamed else SHAPES):
        ap.error("--shape %s: one of %s" % (a.shape, ", ".join(sorted(STREAMED_SHAPES if a.streamed else SHAPES))))
    types = [t for t in a.types.split(",") if t]
    lcpp = os.path.join(a.peers_dir, "llamacpp", "llamacpp_bench.mjs")
    if not os.path.isfile(lcpp):
        ap.error("%s: not found (--peers-dir)" % lcpp)
    tinylm = os.path.abspath(a.tinylm)
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(k, None)
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)  # noqa: E731

    if a.streamed:
        # new models of the shape, each tensor drawn and quantized a chunk of rows at a time
        cfg = w("%s.config.json" % a.shape)
        write_config(cfg, a.shape, a.seq)
        for t in types:
            g = w("%s.%s.gguf" % (a.shape, t))
            if os.path.exists(g):
                print("%s: made before (remove it to make it again)" % g)
                continue
            cmd = [tinylm, "export", "--config", cfg, "--seed", "1", "--format", "gguf", "--type", t, "--tokenizer",
                   TOK, "--out", g, "--threads", str(a.threads)]
            t0 = time.monotonic()
            rc, out, err, rss = run_rss(cmd, env, a.timeout * 4)
            must(rc, out, err, "tinylm export --config --type " + t)
            print("%s: written in %.0f s, the writer's peak RSS %.0f MiB (%.2f GB file)" % (
                g, time.monotonic() - t0, rss, os.path.getsize(g) / 1e9))
    else:
        ckpt = w(a.shape + ".bin")
        if not os.path.exists(ckpt):
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "make_llama2c_checkpoint.py"), "--shape",
                            a.shape, "--seq", str(a.seq), "--out", ckpt], check=True)
        for t in types:
            rc, out, err, _ = run_rss([tinylm, "export", "--model", ckpt, "--tokenizer", TOK, "--format", "gguf",
                                       "--type", t, "--out", w("%s.%s.gguf" % (a.shape, t))], env, a.timeout)
            must(rc, out, err, "tinylm export --type " + t)
    n_prompt = len(subprocess.run([tinylm, "tokenize", "--tokenizer", TOK, "--text", PROMPT, "--bos"], check=True,
                                  capture_output=True, text=True).stdout.split())
    n_new = a.steps - n_prompt + 1
    long_txt = w("prompt%d.txt" % a.prompt_tokens)
    lcpp_base = ["node", lcpp, "--threads", str(a.threads), "--nlc", a.nlc, "--prompt", PROMPT]
    rc, out, err, _ = run_rss(lcpp_base + [w("%s.%s.gguf" % (a.shape, types[0])), "-n", "2", "--warmup", "0",
                                           "--no-text", "--prompt-tokens", str(a.prompt_tokens), "--prompt-text-out",
                                           long_txt], env, a.timeout)
    must(rc, out, err, "llamacpp_bench.mjs (writing the long prompt)")
    sysinfo = subprocess.run([tinylm, "info", "--system", "--threads", str(a.threads)], capture_output=True, text=True,
                             env=env).stdout
    m = re.search(r"measured DRAM read bandwidth: ([0-9.]+) GB/s", sysinfo)
    dram = [float(m.group(1))] if m else []
    pick = lambda key: next((l.split(":", 1)[1].strip() for l in sysinfo.splitlines() if l.startswith(key)), "?")  # noqa
    print("machine: %s, %d cores; tinylm kernels %s, --precision %s; %d threads; %s shape, %d positions decoded, "
          "%d-token prompt" % (pick("cpu:"), os.cpu_count(), pick("kernels:"), a.precision, a.threads, a.shape, a.steps,
                               a.prompt_tokens))
    res = {(e, t): {"decode": [], "prompt": [], "rss": [], "text": None} for e in ("tinylm", "llama.cpp") for t in types}
    read_mib = {}  # the weights read per decoded token, as generate counts them
    for r in range(a.rounds):
        with open("/proc/loadavg") as f:
            print("round %d: load average %s" % (r + 1, " ".join(f.read().split()[:3])))
        for t in types:
            g = w("%s.%s.gguf" % (a.shape, t))
            e = res[("tinylm", t)]
            base = [tinylm, "generate", "--model", g, "--temperature", "0", "--threads", str(a.threads), "--precision",
                    a.precision]
            rc, out, err, rss = run_rss(base + ["--prompt", PROMPT, "-n", str(n_new)], env, a.timeout)
            must(rc, out, err, "tinylm generate")
            e["decode"].append(float(re.search(r"\(([0-9.]+) tok/s\); [0-9]+ threads", err).group(1)))
            m = re.search(r"([0-9.]+) MiB read per token", err)
            if m:
                read_mib[t] = float(m.group(1))
            e["text"], e["rss"] = out, e["rss"] + [rss]
            rc, out, err, rss = run_rss(base + ["--prompt-file", long_txt, "-n", "1"], env, a.timeout)
            must(rc, out, err, "tinylm generate (long prompt)")
            e["prompt"].append(float(re.search(r"prompt [0-9]+ tokens in [0-9.]+ ms \(([0-9.]+) tok/s\)", err).group(1)))
            e["rss"].append(rss)
            e = res[("llama.cpp", t)]
            js = w("%s.%s.json" % (a.shape, t))
            rc, out, err, rss = run_rss(lcpp_base + [g, "-n", str(n_new), "--long-prompt-file", long_txt, "--json", js],
                                        env, a.timeout)
            must(rc, out, err, "llamacpp_bench.mjs")
            with open(js) as f:
                j = json.load(f)
            e["decode"].append(j["generation"]["llama_eval_tok_s"])
            e["prompt"].append(j["long_prompt"]["llama_tok_s"])
            e["text"], e["rss"] = j["text"], e["rss"] + [rss]
            e["variant"] = "%s, weights %s" % (j["cpu_variant"], ", ".join(j["weight_buffers"]) or "?")
    after = dram_gbs(tinylm, a.threads, env)
    dram += [after] if after else []
    print("\nDRAM read bandwidth (tinylm info --system): %s GB/s before and after the rounds" %
          " / ".join("%.1f" % x for x in dram))
    for t in types:
        T, L = res[("tinylm", t)], res[("llama.cpp", t)]
        print("\n%s (the same file for both; llama.cpp %s)" % (t, L.get("variant", "?")))
        for what in ("decode", "prompt"):
            ratio = median_range(T[what])[0] / median_range(L[what])[0]
            per = [x / y for x, y in zip(T[what], L[what])]
            print("  %-7s tok/s  tinylm %s   llama.cpp %s   ratio %.2fx [%.2f-%.2f]" % (
                what, fmt_mr(T[what]), fmt_mr(L[what]), ratio, min(per), max(per)))
        if t in read_mib and dram:
            gb = read_mib[t] * 1048576 / 1e9
            share = lambda x: "%.0f-%.0f%%" % (100 * x / max(dram), 100 * x / min(dram))  # noqa: E731
            tg, lg = gb * median_range(T["decode"])[0], gb * median_range(L["decode"])[0]
            print("  decode GB/s   tinylm %.1f (%s of DRAM)   llama.cpp %.1f (%s)   [%.1f MiB of weights read per "
                  "token]" % (tg, share(tg), lg, share(lg), read_mib[t]))
        print("  peak RSS MiB  tinylm %s   llama.cpp %s" % (fmt_mr(T["rss"], 0), fmt_mr(L["rss"], 0)))
        a_txt, b_txt = (T["text"] or "").strip(), (L["text"] or "").strip()
        n = next((i for i, (x, y) in enumerate(zip(a_txt, b_txt)) if x != y), min(len(a_txt), len(b_txt)))
        print("  greedy text: %s" % ("identical" if a_txt == b_txt else "first %d characters agree (of %d / %d): "
                                      "both round activations to 8-bit blocks under --precision auto, but not alike; "
                                      "under fp32 tinylm does not round them"
                                      % (n, len(a_txt), len(b_txt))))


if __name__ == "__main__":
    main()
