#!/usr/bin/python3
"""patch_name.py — activation patching on stories260K: which layer, at which position, carries
the name through a story?

Clean run: "... a little kid named Lily. Lily loved to play outside. One day," — the model
then predicts " Lily". Corrupted run: the same with " Tim" (one token each in tok512, so the two
prompts line up position by position; " Tom" is two tokens there). Metric: logit(" Lily") -
logit(" Tim") at the last position. For every layer l and position p, the corrupted run is
repeated with the clean residual stream (blocks.l.hook_resid_pre) patched in at p alone;
the table shows how much of the clean-minus-corrupted metric that restores (1 = all).
Attribution patching (the first-order estimate from one backward pass, gradients at the same
hooks) is printed next to it for the last layer.

    PYTHONPATH=python /usr/bin/python3 examples/patch_name.py
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

model = tinylm.load(os.path.join(ROOT, "data", "stories260K.bin"), tokenizer=os.path.join(ROOT, "data", "tok512.bin"))
story = "Once upon a time, there was a little kid named %s. %s loved to play outside. One day,"
clean, corrupt = model.tokenize(story % ("Lily", "Lily")), model.tokenize(story % ("Tim", "Tim"))
assert clean.shape == corrupt.shape
LILY, TIM = model.tokenize(" Lily", bos=False)[-1], model.tokenize(" Tim", bos=False)[-1]


def metric(logits):
    return float(logits[-1, LILY] - logits[-1, TIM])


clean_logits, clean_cache = model.run_with_cache(clean, names=lambda n: n.endswith("hook_resid_pre"))
corrupt_logits = model(corrupt)
m_clean, m_corrupt = metric(clean_logits), metric(corrupt_logits)
print("metric logit(' Lily') - logit(' Tim') at the last position: clean %.3f, corrupted %.3f"
      % (m_clean, m_corrupt))

toks = model.to_str_tokens(clean)
positions = [i for i, t in enumerate(toks) if t.strip() in ("Lily",)] + [len(toks) - 2, len(toks) - 1]
print("\nrestored fraction, patching blocks.L.hook_resid_pre at one position:")
print("layer " + "".join("%12s" % ("%d:%r" % (p, toks[p]))[:12] for p in positions))
for l in range(model.n_layers):
    name = "blocks.%d.hook_resid_pre" % l
    row = []
    for p in positions:
        def patch(a, hook, p=p):
            a[p] = clean_cache[hook.name][p]  # in place, in the engine's own buffer
        m = metric(model.run_with_hooks(corrupt, fwd_hooks=[(name, patch)]))
        row.append((m - m_corrupt) / (m_clean - m_corrupt))
    print("%5d " % l + "".join("%12.3f" % r for r in row))

# attribution patching: (clean - corrupted) . d metric / d activation, from one backward of the corrupted run
_, grads = model.run_with_cache(corrupt, names=lambda n: n.endswith("hook_resid_pre"), backward=True,
                                metric=(-1, int(LILY), int(TIM)))
print("\nattribution patching estimate (one backward pass), same cells:")
for l in range(model.n_layers):
    name = "blocks.%d.hook_resid_pre" % l
    est = [float(np.dot(clean_cache[name][p] - grads[name][p], grads[name + "_grad"][p])) / (m_clean - m_corrupt)
           for p in positions]
    print("%5d " % l + "".join("%12.3f" % e for e in est))
