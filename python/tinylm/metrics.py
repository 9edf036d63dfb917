"""metrics.py — scalar metrics of the logits with their gradients, for run_with_cache(...,
backward=True, metric=M): each M is called with the logits ([T, V] or [B, T, V], float32) and
returns d metric / d logits (what the engine's backward starts from); M.value(logits) is the
metric itself. Written out by hand (the reverse mode of each form), in float64:

  logit_diff(pos, good, bad)   logits[pos, good] - logits[pos, bad]
  log_prob(pos, token)         log softmax(logits[pos])[token]
  loss(targets)                mean next-token cross-entropy over targets >= 0 (targets like
                               the logits' leading shape; -1 = not counted)
  kl_to(ref_logits, pos=None)  mean over positions (or at pos) of KL(softmax(ref) || softmax(logits))

Batched logits [B, T, V] sum the metric over the batch (each sequence's own gradient). A metric
function of your own that returns a scalar is differentiated by PyTorch when it is installed
(the function must then use torch operations); without it, build it from these."""
import numpy as np

from ._core import _is_int


def _log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class Metric:
    def __init__(self, name, value, grad):
        self.name, self._value, self._grad = name, value, grad

    def value(self, logits):
        return float(self._value(np.asarray(logits, dtype=np.float64)))

    def __call__(self, logits):
        return self._grad(np.asarray(logits, dtype=np.float64)).astype(np.float32)

    def __repr__(self):
        return "tinylm.metrics.%s" % self.name


def logit_diff(pos, good, bad):
    def value(z):
        return (z[..., pos, good] - z[..., pos, bad]).sum()

    def grad(z):
        g = np.zeros_like(z)
        g[..., pos, good] += 1.0
        g[..., pos, bad] -= 1.0
        return g
    return Metric("logit_diff(%d, %d, %d)" % (pos, good, bad), value, grad)


def log_prob(pos, token):
    def value(z):
        return _log_softmax(z[..., pos, :])[..., token].sum()

    def grad(z):  # d/dz log p_token = onehot(token) - softmax(z)
        g = np.zeros_like(z)
        g[..., pos, :] = -np.exp(_log_softmax(z[..., pos, :]))
        g[..., pos, token] += 1.0
        return g
    return Metric("log_prob(%d, %d)" % (pos, token), value, grad)


def loss(targets):
    t = np.asarray(targets)

    def check(z):
        if t.shape != z.shape[:-1]:
            raise ValueError("metrics.loss: targets have shape %s, the logits %s" % (t.shape, z.shape))
        n = int((t >= 0).sum())
        if n == 0:
            raise ValueError("metrics.loss: no target >= 0")
        return n

    def value(z):
        n = check(z)
        lp = _log_softmax(z)
        return -np.take_along_axis(lp, np.maximum(t, 0)[..., None], axis=-1)[..., 0][t >= 0].sum() / n

    def grad(z):  # (softmax - onehot) / n at the counted positions
        n = check(z)
        g = np.exp(_log_softmax(z))
        np.put_along_axis(g, np.maximum(t, 0)[..., None], np.take_along_axis(g, np.maximum(t, 0)[..., None], -1) - 1.0, -1)
        g[t < 0] = 0.0
        return g / n
    return Metric("loss", value, grad)


def kl_to(ref_logits, pos=None):
    ref = _log_softmax(np.asarray(ref_logits, dtype=np.float64))

    def sel(a):
        return a if pos is None else a[..., pos:pos + 1 if pos != -1 else None, :]

    def value(z):
        r, lp = sel(ref), sel(_log_softmax(z))
        return (np.exp(r) * (r - lp)).sum(axis=-1).mean(axis=-1).sum()

    def grad(z):  # d/dz KL(r || softmax z) = softmax(z) - r, per position, / positions
        if ref.shape != z.shape:
            raise ValueError("metrics.kl_to: reference logits %s, the logits %s" % (ref.shape, z.shape))
        g = np.zeros_like(z)
        d = np.exp(sel(_log_softmax(z))) - np.exp(sel(ref))
        if pos is None:
            g = d / z.shape[-2]
        else:
            g[..., pos, :] = d[..., 0, :]
        return g
    return Metric("kl_to" + ("" if pos is None else "(pos=%d)" % pos), value, grad)


# ---- the metric= argument of run_with_cache / run_with_hooks / param_grads ---------------------------

def _autograd_dlogits(metric, logits, value):
    """d metric / d logits of a metric function that returned a scalar: PyTorch's autograd, when
    installed and the function works on a torch tensor; otherwise a TypeError that says what to do"""
    hint = ("it must return d metric / d logits (an array shaped like the logits %s), or be one of "
            "tinylm.metrics (logit_diff, log_prob, loss, kl_to), or use torch operations with PyTorch installed"
            % (logits.shape,))
    try:
        import torch
    except ImportError:
        raise TypeError("metric: the metric function returned a scalar (%r) and PyTorch is not installed to "
                        "differentiate it; %s" % (value, hint)) from None
    t = torch.tensor(np.asarray(logits, dtype=np.float64), requires_grad=True)
    try:
        v = metric(t)
        if not torch.is_tensor(v) or v.numel() != 1 or not v.requires_grad:
            raise TypeError("not a differentiable torch scalar")
        v.reshape(()).backward()
    except Exception as e:  # noqa: BLE001 (any failure: the function is not torch-differentiable)
        raise TypeError("metric: the metric function returned a scalar (%r) and could not be differentiated "
                        "by PyTorch (%s); %s" % (value, e, hint)) from None
    return t.grad.numpy()


def _metric_dlogits(metric, logits):
    """d metric / d logits for metric= : (pos, good, bad) = logits[pos, good] - logits[pos, bad]
    (a logit difference), or an array like logits (the gradient itself), or a callable
    logits -> such an array."""
    if callable(metric):
        g = metric(logits)
        if g is None:
            raise TypeError("metric: the metric function returned None; it must return d metric / d logits, "
                            "an array shaped like the logits %s" % (logits.shape,))
        if np.ndim(g) == 0 or (np.size(g) == 1 and np.shape(g) != np.shape(logits)):
            # a scalar, or a one-element array (lg[..., -1, A] - lg[..., -1, B] on [1, T, V] logits):
            # the metric's value, not its gradient
            g = _autograd_dlogits(metric, logits, np.asarray(g).reshape(()).item())
    elif isinstance(metric, tuple):
        if len(metric) != 3 or not all(_is_int(v) for v in metric):
            raise TypeError("metric: a tuple must be (pos, good, bad), three integers; got %r" % (metric,))
        pos, good, bad = metric
        T, V = logits.shape[-2], logits.shape[-1]
        if not -T <= pos < T or not 0 <= good < V or not 0 <= bad < V:
            raise ValueError("metric: (pos, good, bad) = %r is outside the logits [T = %d, vocab = %d]" % (metric, T, V))
        g = np.zeros_like(logits)
        g[..., pos, good] += 1.0
        g[..., pos, bad] -= 1.0
    else:
        g = metric
    g = np.asarray(g)
    if g.dtype.kind not in "fiu" or g.dtype == np.bool_:
        raise TypeError("metric: the gradient must be numbers, got %s" % g.dtype)
    g = np.ascontiguousarray(g, dtype=np.float32)
    if g.shape != logits.shape:
        raise ValueError("metric: the gradient has shape %s, the logits %s" % (g.shape, logits.shape))
    return g
