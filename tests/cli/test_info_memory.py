#!/usr/bin/python3
"""test_info_memory.py — `tinylm info`'s memory estimates against real measurements:
  - weights f32 = 4 x the parameter count = the tensor bytes of the model.safetensors the engine wrote;
  - weights f32 / bf16 = what `generate --dtype f32|bf16` reports holding after loading (its MiB, 0.1 MiB
    resolution, on a model of a few MiB);
  - KV cache for --context N = layers x 2 (K and V) x N x kv_dim x 4 bytes (decode.c's buffers);
  - training activations: model_activation_floats, which tests/model/test_memory_estimate.c checks
    against the buffer model_forward allocates; here: it grows with --batch and --seq as the layout does;
  - loading a GGUF file holds the engine's copy of the weights, not the mapped file and the copy (each
    tensor's pages are let go of once copied): peak RSS of `generate` on a 56 MiB bf16 GGUF; the same
    for an f32 Hugging Face directory, and a llama2.c checkpoint loaded with --dtype bf16 never holds
    the f32 model.

    test_info_memory.py --tinylm PATH --work DIR"""
import json
import os
import re
import struct
import subprocess
import sys

from harness import check, main, run
import tinylm_ref  # (harness puts tests/reference on the path)


def memory(out):
    """{label: bytes} of the memory section"""
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s+(weights f32|weights bf16|KV cache, \d+ positions|training activations)\s+(\d+) bytes", line)
        if m:
            got[m.group(1)] = int(m.group(2))
    return got


def test_info_memory(T, work):
    cfg = {"model_type": "tinylm", "vocab_size": 4096, "hidden_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256,
           "max_position_embeddings": 256, "tie_word_embeddings": False}
    d = os.path.join(work, "gqa")
    tinylm_ref.save(d, cfg, tinylm_ref.random_params(cfg, seed=2))
    with open(os.path.join(d, "tinylm_tokenizer.json"), "w") as f:
        f.write('{"tinylm_tokenizer": 1, "type": "bytes"}')
    rc, out, err = run(T, "info", "--model", d, "--context", "100", "--batch", "3", "--seq", "50")
    mem = memory(out)
    if not check(rc == 0 and len(mem) == 4, "info prints the four memory lines", err + out[-400:]):
        return
    total = int(re.search(r"^total\s+\d+\s+([\d,]+)", out, re.M).group(1).replace(",", ""))
    st = open(os.path.join(d, "model.safetensors"), "rb").read()
    (hlen,) = struct.unpack("<Q", st[:8])
    header = json.loads(st[8:8 + hlen])
    file_bytes = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__")
    check(mem["weights f32"] == 4 * total == file_bytes,
          "weights f32 = 4 x %d parameters = the file's %d tensor bytes" % (total, file_bytes), str(mem))
    kv_dim = cfg["num_key_value_heads"] * cfg["hidden_size"] // cfg["num_attention_heads"]
    want_kv = cfg["num_hidden_layers"] * 2 * 100 * kv_dim * 4
    check(mem["KV cache, 100 positions"] == want_kv, "KV cache, 100 positions = L x 2 x 100 x kv_dim x 4 = %d" % want_kv,
          str(mem))
    for dtype, label in (("f32", "weights f32"), ("bf16", "weights bf16")):
        rc, _, err = run(T, "generate", "--model", d, "--prompt", "a", "-n", "1", "--dtype", dtype)
        m = re.search(r"\(([\d.]+) MiB of %s weights" % dtype, err)
        held = float(m.group(1)) if m else -1
        check(rc == 0 and abs(held - mem[label] / 1048576) <= 0.05 + 1e-9,
              "%s = what generate --dtype %s holds (%.1f MiB; info %.3f MiB)" % (label, dtype, held,
                                                                               mem[label] / 1048576), err)
    # defaults: --context and --seq are max_position_embeddings, --batch 1
    rc, out, _ = run(T, "info", "--model", d)
    dm = memory(out)
    check(rc == 0 and dm.get("KV cache, 256 positions") == cfg["num_hidden_layers"] * 2 * 256 * kv_dim * 4
          and "batch 1 x 256 tokens" in out, "defaults: context and seq = max_position_embeddings, batch 1")
    a1 = memory(run(T, "info", "--model", d, "--batch", "1", "--seq", "32")[1])["training activations"]
    a2 = memory(run(T, "info", "--model", d, "--batch", "2", "--seq", "32")[1])["training activations"]
    check(a1 > 0 and a2 > a1, "training activations grow with the batch (%d -> %d bytes)" % (a1, a2))
    rc, _, err = run(T, "info", "--model", d, "--context", "0")
    check(rc == 2 and "--context" in err, "--context 0 is a usage error", err)


# Runs a command from a fresh, small interpreter and prints its exit code and peak RSS (KiB). The
# kernel carries a process's peak across exec and starts a forked child at its parent's size, so a
# child of this test (which holds torch) would report at least the test's own footprint.
PEAK_HELPER = """import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss_mib(cmd):
    """(exit code, stderr, the command's peak resident memory in MiB)"""
    p = subprocess.run([sys.executable, "-S", "-c", PEAK_HELPER, *cmd], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    rc, kib = p.stdout.decode().split()
    return int(rc), p.stderr.decode("utf-8", "replace"), int(kib) / 1024.0


def test_gguf_load_peak(T, work):
    """Before: the mapped file's pages stayed resident until the whole model was copied, so the peak
    was the file plus the copy (1043 MiB for a 517 MiB bf16 model; 624 MiB after)."""
    # (many tensors, none large: what stays resident besides the copy is the tensor being read)
    big = {"model_type": "tinylm", "vocab_size": 4096, "hidden_size": 512, "num_hidden_layers": 8,
           "num_attention_heads": 8, "intermediate_size": 1376, "max_position_embeddings": 64,
           "tie_word_embeddings": False}
    small = dict(big, vocab_size=256, hidden_size=64, intermediate_size=128)
    peaks = {}
    for name, cfg in (("big", big), ("small", small)):
        d = os.path.join(work, name)
        params = tinylm_ref.random_params(cfg, seed=3)
        tinylm_ref.save(d, cfg, params)
        with open(os.path.join(d, "tinylm_tokenizer.json"), "w") as f:
            f.write('{"tinylm_tokenizer": 1, "type": "bytes"}')
        g = os.path.join(work, name + ".gguf")
        rc, _, err = run(T, "export", "--model", d, "--format", "gguf", "--type", "bf16", "--out", g)
        if not check(rc == 0, "export %s as a bf16 GGUF" % name, err):
            return
        rc, err, peaks[name] = peak_rss_mib([T, "generate", "--model", g, "--prompt", "a", "-n", "1"])
        if not check(rc == 0, "generate on the %s GGUF" % name, err):
            return
    file_mib = os.path.getsize(os.path.join(work, "big.gguf")) / 1048576.0
    grown = peaks["big"] - peaks["small"]
    check(grown < 1.4 * file_mib,
          "loading a %.0f MiB bf16 GGUF adds %.0f MiB at peak (< 1.4x the file: not the file and its copy)"
          % (file_mib, grown), "peaks %s" % peaks)
    # the same for a Hugging Face directory (its f32 safetensors copied into the engine's f32 parameters)
    hf = os.path.join(work, "big_hf")
    rc, out, err = run(T, "export", "--model", os.path.join(work, "big"), "--out", hf)
    if not check(rc == 0 and "llama" in out, "export the big model as a Hugging Face llama directory", out + err):
        return
    rc, err, peak = peak_rss_mib([T, "generate", "--model", hf, "--prompt", "a", "-n", "1"])
    hf_mib = os.path.getsize(os.path.join(hf, "model.safetensors")) / 1048576.0
    check(rc == 0 and peak - peaks["small"] < 1.4 * hf_mib,
          "loading a %.0f MiB f32 Hugging Face checkpoint adds %.0f MiB at peak (< 1.4x the file)"
          % (hf_mib, peak - peaks["small"]), err)
    # a llama2.c checkpoint (f32) loaded with --dtype bf16: each array is rounded as it is read, so the
    # peak is the bf16 weights and one tensor's f32 values (before: the whole f32 model first, then the
    # bf16 copy packed into it: the f32 size); and it computes what the f32 load converted to bf16 does
    l2c = os.path.join(work, "big_l2c")
    rc, _, err = run(T, "export", "--model", os.path.join(work, "big"), "--format", "llama2c", "--out", l2c)
    if not check(rc == 0, "export the big model as a llama2.c checkpoint", err):
        return
    bin_path = os.path.join(l2c, "model.bin")
    bin_mib = os.path.getsize(bin_path) / 1048576.0
    rc, err, peak = peak_rss_mib([T, "generate", "--model", l2c, "--prompt", "a", "-n", "1", "--dtype", "bf16"])
    check(rc == 0 and peak - peaks["small"] < 0.7 * bin_mib,
          "loading a %.0f MiB f32 llama2.c checkpoint as bf16 adds %.0f MiB at peak (< 0.7x the file)"
          % (bin_mib, peak - peaks["small"]), err)
    outs = {}
    for name, model in (("llama2c", bin_path), ("hf", hf)):
        out = os.path.join(work, "logits_%s.npy" % name)
        rc, _, err = run(T, "logits", "--model", model, "--ids", "1 5 9 200 3000", "--dtype", "bf16", "--out", out)
        outs[name] = open(out, "rb").read() if rc == 0 else err
    check(outs["llama2c"] == outs["hf"] and len(outs["hf"]) > 5 * 4096 * 4,
          "--dtype bf16: the llama2.c checkpoint's logits = the same model's from its Hugging Face export, bit for bit")


def test_kv_cache_kinds(T, work):
    """the KV cache in f32 (tinylm's), in a 2-byte type, and with the sliding layers at their window: a Gemma 2
    shape of 4 layers (layers 0 and 2 slide, window 8), 2 kv heads x 16, --context 32:
    f32 = 4 x 2 x 32 x 32 x 4 = 32768; 2-byte = 16384; windowed = 2 x (8 + 32) x 2 x 32 x 4 = 20480;
    a --context past max_position_embeddings (64) is warned about; within it, not"""
    cfg = {"model_type": "gemma2", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
           "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "max_position_embeddings": 64, "sliding_window": 8, "query_pre_attn_scalar": 16}
    path = os.path.join(work, "gemma2_kv.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    rc, out, err = run(T, "info", "--config", path, "--context", "32")
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s+(KV cache, 32 positions|KV cache, bf16 / f16|KV cache, sliding at window)\s+(\d+) bytes", line)
        if m:
            got[m.group(1)] = int(m.group(2))
    want = {"KV cache, 32 positions": 32768, "KV cache, bf16 / f16": 16384, "KV cache, sliding at window": 20480}
    check(rc == 0 and got == want and "exceeds" not in out + err, "info: the KV cache per element type and with the "
          "sliding layers at their window", "%s\n%s%s" % (got, out, err))
    rc, out, err = run(T, "info", "--config", path, "--context", "100")
    check(rc == 0 and "--context 100 exceeds max_position_embeddings 64" in out and "warning" in err,
          "info: a context past max_position_embeddings is warned about", out + err)


def gguf_kv(key, t, payload):
    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", t) + payload


def gguf_s(v):
    b = v.encode() if isinstance(v, str) else v
    return struct.pack("<Q", len(b)) + b


def test_info_metadata(T, work):
    """info --metadata lists every metadata key of a GGUF file with its type and value; arrays by element type,
    count and first elements; a string's control bytes escaped"""
    kvs = [gguf_kv("general.architecture", 8, gguf_s("llama")),
           gguf_kv("llama.block_count", 4, struct.pack("<I", 2)),
           gguf_kv("llama.rope.freq_base", 6, struct.pack("<f", 500000.0)),
           gguf_kv("general.size_label", 8, gguf_s(b"1B\x07\n")),
           gguf_kv("tokenizer.ggml.add_bos_token", 7, struct.pack("<B", 1)),
           gguf_kv("general.big", 10, struct.pack("<Q", 1 << 40)),
           gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 5) + b"".join(gguf_s(t) for t in
                                                                                  ["<s>", "</s>", "a", "b", "c"])),
           gguf_kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0.0, -1.5, 2.25)),
           gguf_kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, 2) + struct.pack("<2i", 1, 3))]
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)
    path = os.path.join(work, "meta.gguf")
    with open(path, "wb") as f:
        f.write(head + b"\0" * (-len(head) % 32))
    rc, out, err = run(T, "info", "--metadata", path)
    want = ["9 metadata keys, 0 tensors", "general.architecture", 'string   "llama"', "llama.block_count",
            "uint32   2", "float32  500000", '"1B\\x07\\x0a"', "bool     true", "uint64   1099511627776",
            'array of 5 string: ["<s>", "</s>", "a", "b", ...]', "array of 3 float32: [0, -1.5, 2.25]",
            "array of 2 int32: [1, 3]"]
    missing = [w for w in want if w not in out]
    check(rc == 0 and not missing, "info --metadata: every key, its type and value, arrays summarised",
          "missing %s\n%s%s" % (missing, out, err))
    rc, out, err = run(T, "info", "--metadata", os.path.join(work, "gemma2_kv.json"))
    check(rc != 0 and "gemma2_kv.json" in err, "info --metadata on a non-GGUF file: an error naming it", err)


if __name__ == "__main__":
    sys.exit(main([test_info_memory, test_gguf_load_peak, test_kv_cache_kinds, test_info_metadata]))
