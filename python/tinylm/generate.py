"""generate.py — Model.generate (GenerationMixin): the engine's sampler through its KV cache, one
prompt or a batch, hooks at every step, streaming."""
import ctypes
import numbers
import os

import numpy as np

from . import _lib
from ._core import _L, _err, _int_array, _is_int


class GenerationMixin:
    # ---- generation --------------------------------------------------------------------------

    @staticmethod
    def _sampling(temperature, top_k, top_p, seed):
        """the C sampler's settings, checked (ValueError naming the argument)"""
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
                or not (0 <= float(temperature) < float("inf")):
            raise ValueError("generate: temperature = %r; must be a finite number >= 0 (0 = greedy)" % (temperature,))
        if top_k is None:
            top_k = 0
        if not _is_int(top_k) or not 0 <= top_k <= 0x7fffffff:
            raise ValueError("generate: top_k = %r; must be None or an integer >= 0 (0 = off)" % (top_k,))
        if top_p is None:
            top_p = 0.0
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0.0 <= float(top_p) <= 1.0:
            raise ValueError("generate: top_p = %r; must be None or a number in [0, 1] (0 or 1 = off)" % (top_p,))
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        if not _is_int(seed) or not -2 ** 63 <= seed < 2 ** 64:
            raise ValueError("generate: seed = %r; must be an integer in [-2^63, 2^64) (as `tinylm generate --seed`)"
                             % (seed,))
        return float(temperature), int(top_k), float(top_p), int(seed) % 2 ** 64

    def generate(self, prompt, n=None, temperature=1.0, top_k=None, top_p=None, seed=None, fwd_hooks=(),
                 stop_at_eos=True, return_ids=False, stream=False, use_kv_cache=True, max_new_tokens=None,
                 do_sample=None):
        """Samples up to n tokens after prompt (text, or ids) as `tinylm generate` does: the same
        sampler (temperature 0 = greedy, top-k, top-p, the engine's RNG: the same seed gives the
        CLI's text), stopping at the tokenizer's BOS or EOS (not returned; stop_at_eos=False goes
        on). The prompt plus n must fit in max_position_embeddings.

        Through the engine's KV cache, hooks included: fwd_hooks are called at every step over the
        positions that step computes — the whole prompt first (one pass), then each new token
        ([1, ...] arrays; hook.positions gives their absolute positions) — and what they leave in
        k and v is what the cache keeps. The attention scores and pattern are not computed as a
        [T, T] map there: hooks on them need use_kv_cache=False, which runs the whole sequence
        again at every step (hooks then see every position every time).

        Returns the continuation's text (ids with return_ids=True); stream=True returns a generator
        of its pieces instead (each token's text as it is sampled; ids with return_ids=True). For a
        list of prompts (texts, or lists / arrays of ids): the list of their continuations, each on its
        own with the same seed (with
        stream=True, (index, piece) pairs, prompt after prompt). Without stream, a list runs as one
        batch through a batched KV cache (the prompts left-padded, each row its own sampler with the
        seed): each prompt's continuation is what generating it alone samples, from logits that agree
        to float32 rounding; fwd_hooks then see [B, T, ...] arrays, hook.positions [B, T] (each row's
        own positions; a left pad's 0) and hook.attention_mask [B, T]. A [B, T] id array is B prompts.

        TransformerLens' keywords: max_new_tokens= (as n; 50 when neither is given), do_sample=False
        (greedy: temperature 0)."""
        if max_new_tokens is not None:
            if n is not None:
                raise TypeError("generate: n= and max_new_tokens= are one argument; give one")
            n = max_new_tokens
        if n is None:
            n = 50
        if do_sample is not None:
            if not isinstance(do_sample, bool):
                raise TypeError("generate: do_sample must be True or False, got %r" % (do_sample,))
            if not do_sample:
                temperature = 0.0
        if isinstance(prompt, np.ndarray) and prompt.ndim == 2:
            prompt = list(prompt)  # a [B, T] array: B prompts, each row whole (a list of B continuations)
        if isinstance(prompt, (list, tuple)) and prompt and all(
                isinstance(p, (str, list, tuple, np.ndarray)) for p in prompt):
            # several prompts: each continued on its own (the same seed for each: a prompt's text does
            # not depend on the others in the list)
            if len(prompt) > 1 and not stream and use_kv_cache:
                return self._generate_batch(prompt, n, temperature, top_k, top_p, seed, stop_at_eos, return_ids,
                                            fwd_hooks)
            args = (n, temperature, top_k, top_p, seed, fwd_hooks, stop_at_eos, return_ids)
            if stream:
                streams = [self.generate(p, *args, stream=True, use_kv_cache=use_kv_cache) for p in prompt]
                return ((i, piece) for i, st in enumerate(streams) for piece in st)
            return [self.generate(p, *args, use_kv_cache=use_kv_cache) for p in prompt]
        if not _is_int(n) or n < 1:
            raise ValueError("generate: n = %r; must be an integer >= 1" % (n,))
        for name, flag in (("stop_at_eos", stop_at_eos), ("return_ids", return_ids), ("stream", stream),
                           ("use_kv_cache", use_kv_cache)):
            if not isinstance(flag, bool):
                raise TypeError("generate: %s must be True or False, got %r" % (name, flag))
        temperature, top_k, top_p, seed = self._sampling(temperature, top_k, top_p, seed)
        if isinstance(prompt, str):
            ids = self.tokenize(prompt)
            if ids.size == 0:  # no prompt and no BOS token: a new line, as the CLI starts
                ids = self.tokenize("\n", bos=False)
        else:
            ids = _int_array(prompt, "generate", self.vocab_size)
            if ids.ndim != 1:
                raise ValueError("generate: ids of shape %s; a prompt is [T] token ids ([B, T]: B prompts)"
                                 % (ids.shape,))
        P = int(ids.size)
        if P + n > self.max_positions:
            raise ValueError("generate: the prompt's %d tokens + n = %d new ones exceed the model's "
                             "max_position_embeddings = %d" % (P, n, self.max_positions))
        fwd, writes = self._fwd_table(fwd_hooks)
        if use_kv_cache:
            maps = [self._by_id[i].name for i in fwd if self._by_id[i].flags & _lib.HOOK_MASKED
                    or i in self._pattern_ids]
            if maps:
                raise ValueError("generate: %s is not computed as a [T, T] map with the KV cache; pass "
                                 "use_kv_cache=False (every step runs the whole sequence)" % maps[0])
        setting = (temperature, top_k, top_p, seed)
        if stream:
            steps = self._generate_steps(ids, n, setting, fwd, writes, stop_at_eos, use_kv_cache)
            return steps if return_ids else self._pieces(ids, steps)
        if not fwd and stop_at_eos and self._tok and use_kv_cache:
            out = self._generate_cached(ids, n, *setting)  # (the CLI's own loop, in one call)
        else:
            out = np.array(list(self._generate_steps(ids, n, setting, fwd, writes, stop_at_eos, use_kv_cache)),
                           np.int32)
        if return_ids:
            return out
        return self._continuation(ids, out)

    def _continuation(self, ids, out):
        """the text the continuation adds after the prompt, as the CLI prints it: decoded alone, a
        SentencePiece continuation would lose the space its first piece starts with"""
        before, whole = self.decode(ids), self.decode(np.concatenate([np.asarray(ids, np.int32), out]))
        return whole[len(before):] if whole.startswith(before) else self.decode(out)

    def _prompt_ids(self, text):
        if not isinstance(text, str):
            ids = _int_array(text, "generate", self.vocab_size)
            if ids.ndim != 1:
                raise ValueError("generate: a prompt of shape %s in the list; each must be [T] token ids or a text"
                                 % (ids.shape,))
            return ids
        ids = self.tokenize(text)
        return ids if ids.size else self.tokenize("\n", bos=False)  # (as generate: the CLI's start)

    def _generate_batch(self, prompts, n, temperature, top_k, top_p, seed, stop_at_eos, return_ids, fwd_hooks=()):
        """generate for several prompts at once: one batched KV cache (tlm_gen_batch_*); fwd_hooks see
        [B, T, ...] at each step (the prompts, then [B, 1, ...]), hook.positions [B, T] each row's own
        positions (a left pad's: 0), hook.attention_mask [B, T] (False at pads)"""
        if not _is_int(n) or n < 1:
            raise ValueError("generate: n = %r; must be an integer >= 1" % (n,))
        for name, flag in (("stop_at_eos", stop_at_eos), ("return_ids", return_ids)):
            if not isinstance(flag, bool):
                raise TypeError("generate: %s must be True or False, got %r" % (name, flag))
        setting = self._sampling(temperature, top_k, top_p, seed)
        fwd, writes = self._fwd_table(fwd_hooks)
        maps = [self._by_id[i].name for i in fwd if self._by_id[i].flags & _lib.HOOK_MASKED or i in self._pattern_ids]
        if maps:
            raise ValueError("generate: %s is not computed as a [T, T] map with the KV cache; pass "
                             "use_kv_cache=False (every step runs the whole sequence)" % maps[0])
        seqs = [self._prompt_ids(p) for p in prompts]
        longest = max(q.size for q in seqs)
        if longest + n > self.max_positions:
            raise ValueError("generate: the longest prompt's %d tokens + n = %d new ones exceed the model's "
                             "max_position_embeddings = %d" % (longest, n, self.max_positions))
        B = len(seqs)
        flat = np.ascontiguousarray(np.concatenate(seqs), dtype=np.int32)
        lens = np.array([q.size for q in seqs], np.int32)
        IP = ctypes.POINTER(ctypes.c_int)
        stop = ({self.bos, self.eos} - {None}) if stop_at_eos and self._tok else set()
        out = [[] for _ in range(B)]
        done = [False] * B
        toks = np.zeros(B, np.int32)
        start = longest - lens  # (each row's left pads)
        with self._using("generate") as h:
            g = _L.tlm_gen_batch_new(h, flat.ctypes.data_as(IP), lens.ctypes.data_as(IP), B, n, *setting)
            if not g:
                raise _err("generate")
        try:
            for step in range(n):
                with self._using("generate") as h, self._sigint_flag(bool(fwd)):
                    try:
                        if fwd:
                            pos0, T = (0, longest) if step == 0 else (longest + step - 1, 1)
                            idx = np.arange(pos0, pos0 + T)
                            self._attach(h, fwd, {}, writes, False, B, T,
                                         np.maximum(idx[None, :] - start[:, None], 0),
                                         mask=idx[None, :] >= start[:, None])
                        rc = _L.tlm_gen_batch_next(h, g, toks.ctypes.data_as(IP))
                        self._raise_after(rc, "generate", "generate", len(fwd), 0)
                    finally:
                        if fwd:
                            _L.tlm_set_hooks(h, _lib.HOOK_FN(), None, None, None)
                            self._active, self._exc = None, None
                for b in range(B):
                    if done[b]:
                        continue
                    if int(toks[b]) in stop:
                        done[b] = True
                    else:
                        out[b].append(int(toks[b]))
                if all(done):
                    break
        finally:
            _L.tlm_gen_batch_free(g)
        res = [np.array(o, np.int32) for o in out]
        return res if return_ids else [self._continuation(q, o) for q, o in zip(seqs, res)]

    def _pieces(self, ids, steps):
        """the text of each generated token after the one before it (UTF-8 split across tokens is
        held back until complete)"""
        import codecs
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        prev = int(ids[-1])
        n = ctypes.c_size_t()
        for t in steps:
            with self._tokenizer() as tok:
                p = _L.tlm_tok_piece(tok, prev, int(t), ctypes.byref(n))
                raw = ctypes.string_at(p, n.value) if p else b""
            prev = int(t)
            text = dec.decode(raw)
            if text:
                yield text
        tail = dec.decode(b"", final=True)
        if tail:
            yield tail

    def _generate_steps(self, ids, n, setting, fwd, writes, stop_at_eos, use_kv_cache):
        """a generator of the new ids, one sampled per step (stops at BOS/EOS with stop_at_eos)"""
        stop = set()
        if stop_at_eos and self._tok:
            stop = {self.bos, self.eos} - {None}
        if not use_kv_cache:
            yield from self._generate_recompute(ids, n, setting, fwd, writes, stop)
            return
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        IP = ctypes.POINTER(ctypes.c_int)
        with self._using("generate") as h:
            g = _L.tlm_gen_new(h, ids.ctypes.data_as(IP), ids.size, n, *setting)
            if not g:
                raise _err("generate")
        try:
            tok = ctypes.c_int()
            for _ in range(n):
                with self._using("generate") as h, self._sigint_flag(bool(fwd)):
                    try:
                        if fwd:
                            pos0 = _L.tlm_gen_position(g)
                            T = ids.size if pos0 == 0 else 1
                            self._attach(h, fwd, {}, writes, True, 1, T, np.arange(pos0, pos0 + T))
                        rc = _L.tlm_gen_next(h, g, ctypes.byref(tok))
                        self._raise_after(rc, "generate", "generate", len(fwd), 0)
                    finally:
                        if fwd:
                            _L.tlm_set_hooks(h, _lib.HOOK_FN(), None, None, None)
                            self._active, self._exc = None, None
                if tok.value in stop:
                    return
                yield tok.value
        finally:
            _L.tlm_gen_free(g)

    def _generate_cached(self, ids, n, temperature, top_k, top_p, seed):
        IP = ctypes.POINTER(ctypes.c_int)
        out = np.zeros(n, np.int32)
        made = ctypes.c_int()
        with self._using("generate") as h, self._tokenizer() as tok:
            if _L.tlm_generate(h, tok, ids.ctypes.data_as(IP), ids.size, n, temperature, top_k, top_p, seed,
                               out.ctypes.data_as(IP), ctypes.byref(made)):
                raise _err("generate")
        return out[:made.value].copy()

    def _generate_recompute(self, ids, n, setting, fwd, writes, stop):
        """use_kv_cache=False: every step runs the whole sequence (hooks see every position)"""
        with self._using("generate") as h:
            s = _L.tlm_sampler_new(h, *setting)
            if not s:
                raise _err("generate")
        seq = list(int(i) for i in ids)
        try:
            for _ in range(n):
                logits = self._run(np.array(seq, np.int32), fwd=dict(fwd), writes=writes, what="generate")[0]
                last = np.ascontiguousarray(logits[-1], dtype=np.float32)
                with self._using("generate"):
                    nxt = _L.tlm_sampler_next(s, last.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
                if nxt in stop:
                    return
                seq.append(nxt)
                yield nxt
        finally:
            _L.tlm_sampler_free(s)
