"""trained — the trained TinyShakespeare models that stream_growth, layer_deletion and
attention_sinks share (cached in ctx.cache, so one invocation of several of them trains each once),
and validation windows to run them on."""
import numpy as np

PLACEMENTS = ["pre", "sandwich"]


def depths(ctx):
    return [4] if ctx.quick else [4, 8, 12]


def steps(ctx):
    return 60 if ctx.quick else 600


def model(ctx, placement, L):
    """llama-baby (d 128, 4 heads, RMSNorm, RoPE, SwiGLU, context 64) with L layers and the placement,
    trained steps(ctx) steps on TinyShakespeare; a TrainRun"""
    return ctx.train("llama-baby", {"num_hidden_layers": L, "norm_placement": placement}, steps=steps(ctx),
                     opts={"eval-batches": 20})


def windows(ctx, m, n, T):
    """n windows of T token ids from the validation part (last 10%) of TinyShakespeare, [n, T] int32"""
    with open(ctx.data, encoding="utf-8") as f:
        text = f.read()
    val = text[int(len(text) * 0.9):]
    ids = np.asarray(m.tokenize(val[:n * T * 2 + 10], bos=False), np.int32)
    step = (len(ids) - T) // max(1, n)
    return np.stack([ids[i * step:i * step + T] for i in range(n)]).astype(np.int32)


def stories_windows(ctx, m, n, T):
    """n windows of T tokens of tinystories-like text for stories260K: the model's own greedy-free
    samples are not used; instead the prompts below, repeated story openings (BOS first)"""
    texts = ["Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
             "One day, she saw a big red ball under a tree. She ran to get it and her mom smiled.",
             "Tom had a small dog named Max. Max liked to run and jump. One day, Tom and Max went to the "
             "beach. They saw a big boat and many birds. Tom was very happy.",
             "There was a big tree in the garden. A bird lived in the tree with her babies. Every day the bird "
             "flew to find food. The babies were hungry and waited for their mom.",
             "Sue wanted to bake a cake for her friend. She got flour, eggs and milk. She mixed them in a bowl. "
             "Her friend came and they ate the cake together. It was yummy."]
    out = []
    for i in range(n):
        ids = list(m.tokenize(texts[i % len(texts)], bos=True))
        while len(ids) < T:
            ids += list(m.tokenize(texts[(i + 1) % len(texts)], bos=False))
        out.append(ids[:T])
    return np.array(out, np.int32)
