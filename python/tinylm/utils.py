"""utils.py — TransformerLens' helpers over hook names (tinylm.utils.get_act_name)."""
import re

_LAYER_TYPE_ALIAS = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_ACT_NAME_ALIAS = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q", "value": "v",
                   "mlp_pre": "pre", "mlp_mid": "mid", "mlp_post": "post"}
# names whose sublayer is implied (tinylm's q_normed / k_normed too)
_ATTN_NAMES = ("k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores", "q_normed", "k_normed")
_MLP_NAMES = ("pre", "post", "mid", "pre_linear")


def get_act_name(name, layer=None, layer_type=None):
    """A hook's full name from a short one, as TransformerLens' utils.get_act_name:
    get_act_name("pattern", 0) == "blocks.0.attn.hook_pattern", ("resid_post", 2) ->
    "blocks.2.hook_resid_post", ("scale", 1, "ln1") -> "blocks.1.ln1.hook_scale", ("scale") ->
    "ln_final.hook_scale", "k6a" -> "blocks.6.attn.hook_k"; a full name (with a dot, or
    starting hook_) without layer comes back unchanged."""
    if not isinstance(name, str):
        raise TypeError("get_act_name: name must be a str, got %r" % (name,))
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    m = re.match(r"([a-z]+)(\d+)([a-z]?.*)", name)
    if m is not None:
        name, layer, layer_type = m.groups(0)
    if layer is not None and not isinstance(layer, (int, str)) or isinstance(layer, bool):
        raise TypeError("get_act_name: layer must be an integer, got %r" % (layer,))
    name = _ACT_NAME_ALIAS.get(name, name)
    full = "" if layer is None else "blocks.%s." % int(layer)
    if name in _ATTN_NAMES:
        layer_type = "attn"
    elif name in _MLP_NAMES:
        layer_type = "mlp"
    elif layer_type in _LAYER_TYPE_ALIAS:
        layer_type = _LAYER_TYPE_ALIAS[layer_type]
    if layer_type:
        full += "%s." % layer_type
    full += "hook_%s" % name
    if name in ("scale", "normalized") and layer is None:
        full = "ln_final." + full
    return full
