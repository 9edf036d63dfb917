"""tokens.py — the tokenizer's calls on a Model (TokenizerMixin): tokenize, tokenize_batch and its
padding mask, decode, to_str_tokens, bos / eos."""
import contextlib
import ctypes

import numpy as np

from ._core import _L, TinylmError, _err, _int_array


class TokenizerMixin:
    # ---- tokenizer ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _tokenizer(self):
        with self._tok_lock:
            if self._h is None:
                raise TinylmError("tokenizer: the model is closed")
            if not self._tok:
                raise TinylmError("no tokenizer: %s (pass tokenizer= to tinylm.load)" % self._tok_error)
            yield self._tok

    def tokenize(self, text, bos=True):
        """text -> token ids (int32 [T]); with bos, the tokenizer's BOS first when it has one."""
        if not isinstance(text, str):
            raise TypeError("tokenize: text must be a str, got %s" % type(text).__name__)
        b = text.encode("utf-8")
        n = ctypes.c_size_t()
        with self._tokenizer() as tok:
            p = _L.tlm_tok_encode(tok, b, len(b), 1 if bos else 0, ctypes.byref(n))
            if not p:
                raise _err("tokenize")
        ids = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_int)), shape=(n.value,)).copy() \
            if n.value else np.zeros(0, np.int32)
        _L.tlm_free_mem(p)
        return ids.astype(np.int32)

    def tokenize_batch(self, texts, bos=True, padding_side="right"):
        """A list of texts -> (ids int32 [B, T], attention_mask bool [B, T]): each text's ids
        (tokenize), padded to the longest with the tokenizer's EOS (else id 0) on the right
        (padding_side="right") or the left ("left"); attention_mask True at real tokens. Pass the
        mask to model(), loss(), run_with_cache(), run_with_hooks() and param_grads(): no real token
        attends to a pad, positions (RoPE, learned) count from each row's first real token (as
        Hugging Face's position_ids from the mask), so every real position computes what the text
        alone computes; the loss and the cache leave pads out."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
            raise TypeError("tokenize_batch: texts must be a non-empty list of str")
        if padding_side not in ("right", "left"):
            raise ValueError("tokenize_batch: padding_side=%r; must be 'right' or 'left'" % (padding_side,))
        seqs = [self.tokenize(t, bos) for t in texts]
        T = max(len(q) for q in seqs)
        if T == 0 or min(len(q) for q in seqs) == 0:
            raise ValueError("tokenize_batch: text %d gives no tokens (an empty text without BOS)"
                             % min(range(len(seqs)), key=lambda i: len(seqs[i])))
        pad = self.eos if self.eos is not None else 0
        ids = np.full((len(seqs), T), pad, dtype=np.int32)
        mask = np.zeros((len(seqs), T), dtype=bool)
        for b, q in enumerate(seqs):
            if padding_side == "right":
                ids[b, :len(q)], mask[b, :len(q)] = q, True
            else:
                ids[b, T - len(q):], mask[b, T - len(q):] = q, True
        return ids, mask

    @staticmethod
    def _mask(ids2, attention_mask, what):
        """attention_mask (bool, or integers 0/1, shaped as the ids) -> (mask bool [B, T], start
        int32 [B] or None: each row's first real token when some row is left-padded). Each row must
        be pads, then its real tokens, then pads (left and/or right padding), with one real token
        at least."""
        if attention_mask is None:
            return None, None
        m = np.asarray(attention_mask)
        if m.dtype != np.bool_:
            if m.dtype.kind not in "iu" or (m.size and not np.isin(m, (0, 1)).all()):
                raise TypeError("%s: attention_mask must be bool (True at real tokens) or integers 0/1, got %s"
                                % (what, m.dtype if m.dtype.kind not in "iu" else "other integers"))
            m = m.astype(bool)
        if m.size != ids2.size:
            raise ValueError("%s: attention_mask has %d entries, ids %s" % (what, m.size, ids2.shape))
        m = m.reshape(ids2.shape)
        n = m.sum(1)
        if (n == 0).any():
            raise ValueError("%s: row %d of attention_mask has no real token" % (what, int(np.flatnonzero(n == 0)[0])))
        first = m.argmax(1)
        T = ids2.shape[1]
        runs = (np.arange(T)[None, :] >= first[:, None]) & (np.arange(T)[None, :] < (first + n)[:, None])
        if not np.array_equal(runs, m):
            b = int(np.flatnonzero((runs != m).any(1))[0])
            raise ValueError("%s: row %d of attention_mask has a pad between real tokens; a row must be pads, "
                             "its tokens, pads (left and/or right padding)" % (what, b))
        return m, (np.ascontiguousarray(first, dtype=np.int32) if first.any() else None)

    def _loss_targets(self, ids2, attention_mask, what):
        """next-token targets [B, T], -1 (not counted) where the token or the next one is a pad"""
        t = self._next_targets(ids2)
        m, _ = self._mask(ids2, attention_mask, what)
        if m is None:
            return t
        t[~m] = -1
        t[:, :-1][~m[:, 1:]] = -1
        return t

    def _tok_ids(self, ids, what):
        with self._tokenizer() as tok:
            V = _L.tlm_tok_vocab_size(tok)
        a = np.asarray(ids)
        if a.ndim == 0:
            a = a.reshape(1)  # (one id)
        elif a.ndim == 2 and a.shape[0] == 1:
            a = a[0]  # (one sequence with a batch axis: rendered as that sequence)
        elif a.ndim != 1:
            raise ValueError("%s: ids of shape %s; one sequence [T] (or [1, T]) is one text; for a batch [B, T] "
                             "model.to_string(ids) gives a list of texts" % (what, a.shape))
        return np.zeros(0, np.int32) if a.size == 0 and a.dtype.kind in "iuf" else _int_array(a, what, V)

    def decode(self, ids):
        """The text of ids, as `tinylm tokenize --decode` (BOS and EOS give no text)."""
        ids = self._tok_ids(ids, "decode")
        n = ctypes.c_size_t()
        with self._tokenizer() as tok:
            p = _L.tlm_tok_decode(tok, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int)), ids.size, ctypes.byref(n))
            if not p:
                raise _err("decode")
        s = ctypes.string_at(p, n.value).decode("utf-8", "replace")
        _L.tlm_free_mem(p)
        return s

    def to_str_tokens(self, text_or_ids, bos=True, prepend_bos=None):
        """The text of each token (as the tokenizer's piece after the previous token); a list of texts
        gives a list of such lists (TransformerLens' to_str_tokens of a list). prepend_bos= is
        TransformerLens' name for bos= (for a text; ids are shown as given)."""
        if prepend_bos is not None:
            if not isinstance(prepend_bos, bool):
                raise TypeError("to_str_tokens: prepend_bos must be True, False or None, got %r" % (prepend_bos,))
            bos = prepend_bos
        if isinstance(text_or_ids, (list, tuple)) and text_or_ids and all(isinstance(t, str) for t in text_or_ids):
            return [self.to_str_tokens(t, bos) for t in text_or_ids]
        ids = self.tokenize(text_or_ids, bos) if isinstance(text_or_ids, str) \
            else self._tok_ids(text_or_ids, "to_str_tokens")
        out, prev, n = [], -1, ctypes.c_size_t()
        with self._tokenizer() as tok:
            special = {_L.tlm_tok_bos(tok), _L.tlm_tok_eos(tok)} - {-1}
            for t in ids:
                p = _L.tlm_tok_piece(tok, prev, int(t), ctypes.byref(n))
                piece = ctypes.string_at(p, n.value).decode("utf-8", "replace") if p else ""
                # (llama2.c's BOS piece is "\n<s>\n": shown as its name, as TransformerLens shows it)
                out.append(piece.strip() if int(t) in special else piece)
                prev = int(t)
        return out

    @property
    def bos(self):
        """the tokenizer's BOS id, or None when it has none"""
        with self._tokenizer() as tok:
            b = _L.tlm_tok_bos(tok)
        return None if b < 0 else b

    @property
    def eos(self):
        """the tokenizer's EOS id, or None when it has none"""
        with self._tokenizer() as tok:
            e = _L.tlm_tok_eos(tok)
        return None if e < 0 else e
