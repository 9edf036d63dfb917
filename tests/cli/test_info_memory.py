#!/usr/bin/python3
"""test_info_memory.py — `tinylm info`'s memory estimates against real measurements:
  - weights f32 = 4 x the parameter count = the tensor bytes of the model.safetensors the engine wrote;
  - weights f32 / bf16 = what `generate --dtype f32|bf16` reports holding after loading (its MiB, 0.1 MiB
    resolution, on a model of a few MiB);
  - KV cache for --context N = layers x 2 (K and V) x N x kv_dim x 4 bytes (decode.c's buffers);
  - training activations: model_activation_floats, which tests/model/test_memory_estimate.c checks
    against the buffer model_forward allocates; here: it grows with --batch and --seq as the layout does.

    test_info_memory.py --tinylm PATH --work DIR"""
import json
import os
import re
import struct
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


if __name__ == "__main__":
    sys.exit(main([test_info_memory]))
