"""_lib.py — finds libtinylm.so and declares its C interface (include/tinylm.h) for ctypes."""
import ctypes
import os

ABI_VERSION = 11

# (data as an address: a plain int is the cheapest argument for ctypes to convert, and the package
# keeps its views of the engine's buffers by it)
HOOK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                           ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int)

# flags of tlm_hook_info
HOOK_RSTD, HOOK_MASKED, HOOK_NO_GRAD, HOOK_READONLY, HOOK_ON_DEMAND = 1, 2, 4, 8, 16


def _candidates():
    env = os.environ.get("TINYLM_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libtinylm.so")                       # installed next to the package
    root = os.path.dirname(os.path.dirname(here))                  # python/tinylm -> the repository
    build = os.environ.get("TINYLM_BUILD_DIR")
    if build:
        yield os.path.join(build, "libtinylm.so")
    yield os.path.join(root, "build", "libtinylm.so")


def load_library():
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            lib.tlm_abi_version.restype, lib.tlm_abi_version.argtypes = ctypes.c_int, []
            if lib.tlm_abi_version() != ABI_VERSION:  # (before declaring: an older library lacks names)
                raise ImportError("%s: interface version %d, this package wants %d"
                                  % (path, lib.tlm_abi_version(), ABI_VERSION))
            _declare(lib)
            lib.path = path
            return lib
    raise ImportError("libtinylm.so not found (tried %s); build it (cmake --build build) or set TINYLM_LIB"
                      % ", ".join(tried))


def _declare(lib):
    P, I, S, F, V = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_float, None
    IP = ctypes.POINTER(ctypes.c_int)
    FP = ctypes.POINTER(ctypes.c_float)
    sig = {
        "tlm_abi_version": (I, []),
        "tlm_load": (P, [ctypes.c_char_p]),
        "tlm_free": (V, [P]),
        "tlm_error_message": (ctypes.c_char_p, []),
        "tlm_config_json": (P, [P]),
        "tlm_free_mem": (V, [P]),
        "tlm_set_threads": (V, [I]),
        "tlm_vocab_size": (I, [P]),
        "tlm_forward": (I, [P, IP, IP, I, I, FP]),
        "tlm_logits": (FP, [P]),
        "tlm_backward": (I, [P, F]),
        "tlm_backward_logits": (I, [P, FP]),
        "tlm_zero_grad": (V, [P]),
        "tlm_grad": (FP, [P, ctypes.c_char_p, ctypes.POINTER(S)]),
        "tlm_hook_count": (I, [P]),
        "tlm_hook_info": (I, [P, I, ctypes.c_char_p, S, I, I, ctypes.POINTER(ctypes.c_int64), IP]),
        "tlm_set_hooks": (I, [P, HOOK_FN, P, ctypes.c_char_p, ctypes.c_char_p]),
        "tlm_tok_open": (P, [ctypes.c_char_p, ctypes.c_char_p]),
        "tlm_tok_close": (V, [P]),
        "tlm_tok_encode": (P, [P, ctypes.c_char_p, S, I, ctypes.POINTER(S)]),
        "tlm_tok_decode": (P, [P, IP, S, ctypes.POINTER(S)]),
        "tlm_tok_piece": (P, [P, I, I, ctypes.POINTER(S)]),
        "tlm_tok_bos": (I, [P]),
        "tlm_tok_eos": (I, [P]),
        "tlm_tok_vocab_size": (I, [P]),
        # interface version 2
        "tlm_set_threads_checked": (I, [I]),
        "tlm_threads": (I, []),
        "tlm_is_forked_child": (I, []),
        "tlm_max_positions": (I, [P]),
        "tlm_allow_nonfinite": (V, [I]),
        "tlm_hook_unchanged": (V, [P]),
        "tlm_set_capture": (I, [P, P, P]),
        "tlm_hook_stats": (I, [P, ctypes.POINTER(ctypes.c_int64)]),
        "tlm_sampler_new": (P, [P, F, I, F, ctypes.c_uint64]),
        "tlm_sampler_next": (I, [P, FP]),
        "tlm_sampler_free": (V, [P]),
        "tlm_generate": (I, [P, P, IP, I, I, F, I, F, ctypes.c_uint64, IP, IP]),
        # interface version 4: the parameters
        "tlm_num_params": (S, [P]),
        "tlm_param_count": (I, [P]),
        "tlm_param_name": (ctypes.c_char_p, [P, I]),
        "tlm_param": (FP, [P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), IP]),
        "tlm_params_writable": (I, [P]),
        # interface version 5: mixed precision
        "tlm_set_precision": (I, [P, I]),
        # interface version 6: the f32 values of quantized or bf16 weights
        "tlm_f32_copy": (P, [P]),
        # interface version 7: generation step by step (hooks through the KV cache, streaming), views
        "tlm_gen_new": (P, [P, IP, I, I, F, I, F, ctypes.c_uint64]),
        "tlm_gen_next": (I, [P, P, IP]),
        "tlm_gen_position": (I, [P]),
        "tlm_gen_free": (V, [P]),
        "tlm_report_html": (P, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(S)]),
        # interface version 8: padded batches
        "tlm_forward_padded": (I, [P, IP, IP, IP, I, I, FP]),
        "tlm_gen_batch_new": (P, [P, IP, IP, I, I, F, I, F, ctypes.c_uint64]),
        "tlm_gen_batch_next": (I, [P, P, IP]),
        "tlm_gen_batch_free": (V, [P]),
        # interface version 9: the engine's rules, asked for rather than restated (tlm_attention_mask
        # took no start before)
        "tlm_attention_mask": (I, [P, I, I, I, P]),
        "tlm_norm_gain": (I, [P, FP, FP, S]),
        "tlm_input_norm": (I, [P, I, I, ctypes.c_char_p, S]),
        # interface version 11: the split q/k/v inputs per head
        "tlm_set_split_qkv_input": (I, [P, I]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
