"""Add a claim of your own to ``attneb verify``: a derivation, a numeric check and its wrong theories.

Run it with::

    attneb verify --load examples/own_claim.py --only X1 --power --quick

The claim: one attention step commutes with translations, ``a(q + c; X + c) = a(q; X) + c`` (the
key-norm bias is what makes it so; without it the logits change by ``beta c . x_j``, which depends
on the key). The module

1. derives it with :mod:`attneb.theory.derivation` (steps checked by sympy; the typed statement is the claim),
2. registers the claim, the derivation as a check (:func:`attneb.proofs_check.register_derivation`:
   its wrong theories are its claims, mutated one at a time) and a numeric check on the real
   implementation, whose wrong theories are named beside it,
3. lets ``attneb verify --power`` measure how often the numeric check rejects each wrong theory.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from attneb.numerics import kernels, transformer
from attneb.proofs_check import Context, Evidence, alternative, check, claim, register_derivation, swap
from attneb.theory import ClaimedForm, Derivation, Step

TOL = 1e-10

claim("X1", "attention commutes with translations",
      "One attention step with key-query matrix beta I and key-norm bias -beta ||x_j||^2 / 2 satisfies "
      "a(q + c; X + c) = a(q; X) + c for every shift c.")


@cache
def translation_derivation() -> Derivation:
    """d = 1, three keys: the logits of the shifted problem differ by a term common to every key."""
    beta = sp.Symbol("beta", positive=True)
    q, c = sp.symbols("q c", real=True)
    xs = sp.symbols("x1:4", real=True)

    def logit(query, key):
        return beta * query * key - beta * key**2 / 2

    def attention(query, keys):
        weights = [sp.exp(logit(query, key)) for key in keys]
        return sum(w * key for w, key in zip(weights, keys)) / sum(weights)

    shifted = [x + c for x in xs]
    common = sp.expand(logit(q + c, shifted[0]) - logit(q, xs[0]))
    steps = [
        Step(sp.Eq(logit(q + c, xs[0] + c), logit(q, xs[0]) + common, evaluate=False),
             "the shifted logit of key 1 is the old one plus a term free of the key ..."),
        Step(sp.Eq(sp.diff(common, xs[0]), 0, evaluate=False), "... that does not depend on the key"),
    ]
    claims = [ClaimedForm(sp.Eq(attention(q + c, shifted), attention(q, xs) + c, evaluate=False),
                          "a(q + c; X + c) = a(q; X) + c", ref="X1", name=sp.Symbol("a(q + c; X + c)"))]
    return Derivation("translation", "Attention commutes with translations", [beta, q, c, *xs], steps,
                      [sp.Eq(sp.Symbol("common_shift"), common, evaluate=False)], claims)


register_derivation("translation", translation_derivation, ["X1"])


def shift_of_output(c: np.ndarray) -> np.ndarray:
    """How the claim says the output moves when queries and keys move by ``c``: by ``c``."""
    return c


def _without_key_norm_bias(real):
    return classmethod(lambda cls, dim, h2: transformer.AttentionHead(
        *(getattr(real(dim, h2), name) for name in ("W_Q", "W_K", "W_V")), key_norm_coef=0.0))


@check("X1", "attention head and kernel mean commute with a random translation",
       criterion=f"max |a(q + c; X + c) - a(q; X) - c| <= {TOL:g} for the head and for kernels.kernel_mean, "
       "over random queries, keys and shifts (fresh ones in every replicate)",
       replication="seeds",
       alternatives=[
           alternative("output moves by 2c", "the claim with the output shifted twice as far",
                       swap(f"{__name__}:shift_of_output", lambda real: (lambda c: 2 * c))),
           alternative("head without key-norm bias", "the softmax head without -beta ||x_j||^2 / 2",
                       swap("attneb.numerics.transformer:AttentionHead.gaussian", _without_key_norm_bias),
                       kind="implementation"),
       ],
       covers=("attneb.numerics.transformer:AttentionHead.__call__",))
def translation_check(ctx: Context) -> Evidence:
    [seed] = ctx.fresh_seeds([0])
    rng = np.random.default_rng(seed)
    queries, keys, c = rng.normal(size=(20, 2)), rng.normal(size=(30, 2)), rng.normal(size=2) * 3
    head = transformer.AttentionHead.gaussian(2, 0.5)
    residuals = {
        "head": float(np.abs(head(queries + c, keys + c) - head(queries, keys) - shift_of_output(c)).max()),
        "kernel_mean": float(np.abs(kernels.kernel_mean(queries + c, keys + c, 0.5)
                                    - kernels.kernel_mean(queries, keys, 0.5) - shift_of_output(c)).max()),
    }
    worst = max(residuals.values())
    return Evidence(passed=worst <= TOL, kind="identity",
                    summary=f"translation by c = {np.round(c, 3).tolist()}: max residual {worst:.1e} (tolerance {TOL:g})",
                    data={"residuals": residuals, "shift": c.tolist()})
