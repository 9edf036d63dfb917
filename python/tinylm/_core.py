"""_core.py — what every part of the package shares: the library (ctypes, _lib), its errors as
TinylmError, and the checks on token ids and on what a hook returns."""
import ctypes
import numbers

import numpy as np

from . import _lib

_L = _lib.load_library()
_FP = ctypes.POINTER(ctypes.c_float)


class TinylmError(RuntimeError):
    pass


def _c_message():
    msg = _L.tlm_error_message()
    return msg.decode("utf-8", "replace") if msg else ""


def _err(what, msg=None):
    """TinylmError 'what: <the library's message>', each prefix once (the library's message often
    starts with the same word)."""
    msg = _c_message() if msg is None else msg
    last = what.rsplit(": ", 1)[-1]  # ("param_grads: backward" + "backward: ..." says backward once)
    for prefix in (what + ": ", last + ": "):
        while msg.startswith(prefix):
            msg = msg[len(prefix):]
    msg = msg.replace("(--allow-nonfinite accepts it)", "(tinylm.load(..., allow_nonfinite=True) accepts it)")
    return TinylmError("%s: %s" % (what, msg or "failed"))


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _int_array(ids, what, vocab):
    """ids as an int32 array, refused (not cast) when they are not integers or not in [0, vocab)"""
    a = np.asarray(ids)
    if a.size == 0:
        raise ValueError("%s: no token ids (an empty array)" % what)
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        raise TypeError("%s: token ids must be integers, got an array of %s (nothing is cast)"
                        % (what, a.dtype))
    lo, hi = a.min(), a.max()
    if lo < 0 or hi >= vocab:
        bad = lo if lo < 0 else hi
        at = int(np.flatnonzero(a.reshape(-1) == bad)[0])
        raise ValueError("%s: token id %d at position %d is outside the vocabulary [0, %d)" % (what, int(bad), at, vocab))
    return np.ascontiguousarray(a, dtype=np.int32)


def _replacement(r, what, of):
    """a hook's returned value as float32, or a TypeError naming the hook (a string, None-like objects,
    anything that is not an array of real numbers)"""
    a = np.asarray(r) if not isinstance(r, (str, bytes)) else None
    if a is None or a.dtype == np.bool_ or a.dtype.kind not in "fiu":
        raise TypeError("%s: returned %s (%.60r); a replacement must be an array of numbers shaped as the %s "
                        "(or return None after editing it in place)" % (what, type(r).__name__, r, of))
    return a.astype(np.float32, copy=False)
