#!/usr/bin/python3
"""generate_batched.py — Python generate of several prompts at once (one batched KV cache) against
generating each prompt alone (the one-token step of `tinylm generate`), in one run.

    PYTHONPATH=python bench/generate_batched.py [--batches 2,8,32] [--n 200] [--d384] [--threads 2]

For each model and batch size B: B prompts of different lengths (1 to 12 words of a story),
greedy, n new tokens each with stop_at_eos=False (every row makes n), timed as
`model.generate(prompts, n)` (batched) and as `[model.generate(p, n) for p in prompts]` (alone, one
after another); the median of --rounds rounds each; tok/s = B n / time. The outputs are checked
equal first. stories260K (data/), and with --d384 a random 6-layer d384 model (initialised weights,
the same shape as bench/python_vs_pytorch.py's)."""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

D384 = {"model_type": "tinylm", "vocab_size": 512, "hidden_size": 384, "num_hidden_layers": 6,
        "num_attention_heads": 6, "num_key_value_heads": 6, "intermediate_size": 1024,
        "max_position_embeddings": 1024}
WORDS = "Once upon a time there was a little girl named Lily who liked to play in the park".split()


def median_time(fn, rounds):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="2,8,32")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--d384", action="store_true")
    a = ap.parse_args()
    if a.lib:
        os.environ["TINYLM_LIB"] = os.path.abspath(a.lib)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import tinylm
    tinylm.set_threads(a.threads)
    models = [("stories260K", os.path.join(ROOT, "data", "stories260K.bin"), os.path.join(ROOT, "data", "tok512.bin"))]
    if a.d384:
        import tinylm_ref
        d = os.path.join(tempfile.gettempdir(), "tinylm-bench-d384")
        if not os.path.isfile(os.path.join(d, "model.safetensors")):
            tinylm_ref.save(d, D384, tinylm_ref.init_params(D384, seed=1))
        models.append(("d384", d, os.path.join(ROOT, "data", "tok512.bin")))
    print("generate_batched: %d threads, n = %d, %d rounds; %s" % (a.threads, a.n, a.rounds, os.uname().machine))
    print("\n| model | prompts | batched tok/s | alone tok/s | batched / alone |")
    print("| --- | --- | --- | --- | --- |")
    for name, path, tok in models:
        m = tinylm.load(path, tokenizer=tok)
        for B in (int(x) for x in a.batches.split(",")):
            prompts = [" ".join(WORDS[:1 + (i * 5) % 12]) for i in range(B)]
            kw = dict(n=a.n, temperature=0, stop_at_eos=False, return_ids=True)
            batched = m.generate(prompts, **kw)
            alone = [m.generate(p, **kw) for p in prompts]
            same = all(np.array_equal(x, y) for x, y in zip(batched, alone))
            tb = median_time(lambda: m.generate(prompts, **kw), a.rounds)
            ta = median_time(lambda: [m.generate(p, **kw) for p in prompts], a.rounds)
            print("| %s | %d | %.0f | %.0f | **%.2fx** |%s" % (name, B, B * a.n / tb, B * a.n / ta, ta / tb,
                                                              "" if same else " (outputs differ!)"))
        m.close()


if __name__ == "__main__":
    main()
