"""test_verdicts.py — the verdict rules of post_norm_warmup, residual_init and layer_deletion on
numbers made up to reach each branch (the experiments' quick runs check that the page's verdict is
the rule applied to the page's own numbers: their check()). Seconds, no training."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "experiments"))

import exp_layer_deletion  # noqa: E402
import exp_post_norm_warmup  # noqa: E402
import exp_residual_init  # noqa: E402

failed = 0


def check(ok, what, detail=""):
    global failed
    failed += not ok
    print("%-90s %s%s" % (what, "ok" if ok else "FAIL", ("  " + str(detail)) if not ok else ""))


def warmup_cases():
    J = exp_post_norm_warmup.judge
    widths, lrs = [64, 512], [5e-4, 1e-3]
    grad = {(d, p): r for d, p, r in [(64, "post", 0.9), (64, "pre", 0.3), (512, "post", 2.0), (512, "pre", 0.3)]}

    def st(post_nowarm_512, post_warm=("trains", "trains"), pre_nowarm="trains"):
        s = {}
        for d in widths:
            for i, lr in enumerate(lrs):
                s[(d, "post", True, lr)] = post_warm[i]
                s[(d, "post", False, lr)] = post_nowarm_512[i] if d == 512 else "trains"
                s[(d, "pre", True, lr)] = "trains"
                s[(d, "pre", False, lr)] = pre_nowarm
        return s

    sup, post, pre, text = J(widths, lrs, st(("trains", "diverged")), grad)
    check(sup is True and post[512] == "needs warmup" and post[64] == "does not need warmup" and pre[512] == "yes",
          "post_norm_warmup: warmup rescues Post-Norm at the widest width only -> supported", text)
    check("grows with the width" in text, "post_norm_warmup: the gradient ratio's trend in d is named", text)
    one = {k: v for k, v in grad.items() if k[0] == 512}
    sup1, _, _, text1 = J([512], lrs, st(("trains", "diverged")), one)
    check("one width only" in text1 and "grows" not in text1, "post_norm_warmup: one width states no trend", text1)
    sup, post, pre, text = J(widths, lrs, st(("trains", "trains")), grad)
    check(sup is False, "post_norm_warmup: Post-Norm trains without warmup wherever it does with -> not supported", text)
    sup, post, pre, text = J(widths, lrs, st(("trains", "diverged"), pre_nowarm="diverged"), grad)
    check(sup is None and pre[512] == "no", "post_norm_warmup: Pre-Norm needs warmup too -> inconclusive", text)
    sup, post, pre, text = J(widths, lrs, st(("stuck", "stuck"), post_warm=("stuck", "stuck")), grad)
    check(sup is None and post[512] == "undetermined", "post_norm_warmup: Post-Norm never trains -> inconclusive", text)


def residual_init_cases():
    J = exp_residual_init.judge
    depths = [6, 48]
    sup, text = J(depths, [1e-3, 1e-3], [1e-3 + 6e-3, 1e-3 + 48e-3], [1e-3, 1e-3], [2e-3, 2.5e-3])
    check(sup is True and "depth^1.00" in text, "residual_init: linear added variance, flat scaled -> supported", text)
    # the measurement: growth ~ depth^1.4
    add6 = 6e-3
    add48 = add6 * 8 ** 1.4
    sup, text = J(depths, [1e-3, 1e-3], [1e-3 + add6, 1e-3 + add48], [1e-3, 1e-3], [2e-3, 2.5e-3])
    check(sup is False and "depth^1.40" in text and "faster than linear" in text,
          "residual_init: depth^1.4 is not 'about linear' -> not supported, and says so", text)
    sup, text = J(depths, [1e-3, 1e-3], [1e-3 + 6e-3, 1e-3 + 48e-3], [1e-3, 1e-3], [2e-3, 9e-3])
    check(sup is False and "part 2 fails" in text, "residual_init: the scaled variance grows 4.5x -> not supported", text)


def layer_deletion_cases():
    J = exp_layer_deletion.judge
    # the docs' full-form numbers: stories260K's middle blocks cost 0.53-1.07 nats on a loss of 1.22
    rows = [["pre, 4 layers", 1.999, 1.854, 0.2811, 0.329, 0.09694, 0, 3],
            ["pre, 8 layers", 1.966, 0.7781, 0.06963, 0.1273, 0.1263, 0, 3],
            ["sandwich, 4 layers", 2.0, 1.0, 0.5, 0.9, 0.4, 0, 3],
            ["stories260K (pre, 5 layers)", 1.22, 2.5, 0.8, 1.07, 0.53, 0, 4]]
    sup, text = J(rows)
    check(sup is False and "stories260K" in text.split("Not modest in:")[-1],
          "layer_deletion: stories260K's 0.53-1.07 nats on 1.22 are not modest -> not supported", text)
    sup, text = J(rows[1:3])
    check(sup is True, "layer_deletion: every Pre-Norm model's later blocks <= 10% of its loss -> supported (sandwich "
          "not judged)", text)
    sup, text = J(rows[:2])
    check(sup is None, "layer_deletion: a later block at 16% of the loss -> inconclusive", text)
    sup, text = J([["pre, 4 layers", 2.0, 0.1, 0.05, 0.3, 0.05, 2, 0]])
    check(sup is False and "block 2 is the worst" in text, "layer_deletion: block 0 not the worst -> not supported", text)


if __name__ == "__main__":
    warmup_cases()
    residual_init_cases()
    layer_deletion_cases()
    print("%s" % ("all passed" if not failed else "%d failed" % failed))
    sys.exit(1 if failed else 0)
