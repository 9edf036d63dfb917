#!/usr/bin/python3
"""steer.py — a steering vector on stories260K: add COEF x (resid("... little boy") -
resid("... little girl")) to the residual stream after layer LAYER at every position but BOS
while generating, and count what changes.

The vector is the difference of blocks.LAYER.hook_resid_post at the last position of two prompts
one word apart. Generation from "Once upon a time" with 8 seeds, with and without the vector:
the script prints the log-probabilities of " he" / " she" after "... a little girl named Lily.
One day,", the counts of he/his/him vs she/her and of boy vs girl over the samples, and seed 0.

    PYTHONPATH=python /usr/bin/python3 examples/steer.py [LAYER] [COEF]
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import tinylm  # (installed: pip install .)
except ImportError:  # (a checkout: the package beside the build)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import tinylm

LAYER = int(sys.argv[1]) if len(sys.argv) > 1 else 4
COEF = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
model = tinylm.load(os.path.join(ROOT, "data", "stories260K.bin"), tokenizer=os.path.join(ROOT, "data", "tok512.bin"))
hook = "blocks.%d.hook_resid_post" % LAYER


def resid(text):
    _, cache = model.run_with_cache(model.tokenize(text), names=[hook])
    return cache[hook][-1]


vec = COEF * (resid("Once upon a time, there was a little boy") - resid("Once upon a time, there was a little girl"))
print("steering %s with %.1f x (resid('... boy') - resid('... girl')), |v| = %.2f"
      % (hook, COEF, float(np.linalg.norm(vec))))


def steer(a, h):
    # every position but BOS (position 0 is every sequence's anchor), at every step: generate runs the
    # prompt, then one new position a step, through the KV cache; h.positions are their positions
    a[..., h.positions > 0, :] += vec


def logprob(l, t):
    return float(l[t] - np.log(np.exp(l - l.max()).sum()) - l.max())


text = "Once upon a time, there was a little girl named Lily. One day,"
probe = model.tokenize(text)
HE, SHE = model.tokenize(" he", bos=False)[-1], model.tokenize(" she", bos=False)[-1]  # (one token each)
lp = model(probe)[-1]
ls = model.run_with_hooks(probe, fwd_hooks=[(hook, steer)])[-1]
print("after %r: log p(' he') %.2f -> %.2f, log p(' she') %.2f -> %.2f (plain -> steered)"
      % (text, logprob(lp, HE), logprob(ls, HE), logprob(lp, SHE), logprob(ls, SHE)))


def count(texts, words):
    return sum(t.replace(".", " ").replace(",", " ").split().count(w) for t in texts for w in words)


prompt = "Once upon a time"
for label, hooks in (("plain", []), ("steered", [(hook, steer)])):
    texts = [model.generate(prompt, 80, temperature=0.8, seed=s, fwd_hooks=hooks) for s in range(8)]
    print("\n%s, 8 samples of 80 tokens: he/his/him %d, she/her %d, boy %d, girl %d. Seed 0:\n  %s%s"
          % (label, count(texts, ["he", "He", "his", "His", "him"]), count(texts, ["she", "She", "her", "Her"]),
             count(texts, ["boy"]), count(texts, ["girl"]), prompt, texts[0].replace("\n", " ")))
