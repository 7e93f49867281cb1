"""Block verification: speculative sampling that judges the draft as a whole block.

Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, "Block Verification Accelerates Speculative
Decoding", ICLR 2025, arXiv 2403.10444, Algorithm 2.

sps.py checks the drafts one at a time and stops at the first rejection. That is not the best a lossless
rule can do: a draft token the oracle likes less than the draft did (q/p < 1) can be "paid back" by a
later one it likes more (q/p > 1), and the block as a whole deserves to be kept more often than its
first token alone. Block verification carries that shortfall along the block as a weight, decides how
many drafts to keep only after seeing all of them, and draws the last token from a residual that knows
the weight. The output has exactly the oracle's (processed) distribution; it keeps every drafted prefix
with at least sps.py's chance, so at least as many drafts in expectation (the proofs are below), and no
lossless rule that sees one drafted block keeps more (the paper's Theorem 2).

Letters. The project's, as in sps.py (Chen et al.): q is the target (the oracle), p the draft.
The paper writes M_b ("big") for q and M_s ("small") for p, and uses p_i for its weights: here they are
w_i, as p is the draft. (Leviathan et al. 2023 swap p and q: their p is the target.)

  paper                              here
  M_b(. | c, X^i), M_s(. | c, X^i)   q[i], p[i]: the oracle's and the draft's distributions of token i + 1
  X_1 .. X_γ, γ                      drafted[0 .. k - 1], k (n_draft; the last round may draft fewer)
  p_i                                w[i], block_weights: how much of the block's first i tokens passes
  h_i                                h[i], acceptance_probabilities: the chance that prefix i is the one kept
  η                                  rs[i - 1]: one r ~ U[0, 1) per prefix i, looked at from the end
  τ                                  tau, last_passing: the number of drafts kept
  p_res^block(. | X^τ)               block_residual(q[tau], p[tau], w[tau])

Algorithm 2, one round, given the text c:
  1  X_1 .. X_γ ~ M_s, one at a time (as sps.py's step 1)
  2  M_b(. | c, X^i) for i = 0..γ in one forward pass (as sps.py's step 2)
  3  p_0 = 1;  for i = 1..γ:  p_i = min{p_{i-1} M_b(X_i | X^{i-1}) / M_s(X_i | X^{i-1}), 1}
  4  for i = 0..γ-1:  h_i = Σ_x max{p_i M_b(x | X^i) - M_s(x | X^i), 0}
                            / (Σ_x max{p_i M_b(x | X^i) - M_s(x | X^i), 0} + 1 - p_i);   h_γ = p_γ
  5  for i = γ down to 0: η ~ U(0, 1); if η ≤ h_i: τ = i, stop         (h_0 = 1: τ = 0 at the latest)
  6  τ = γ: Y ~ M_b(. | c, X^γ)  (the bonus)
     τ < γ: Y ~ p_res^block(x | X^τ) = max{p_τ M_b(x | X^τ) - M_s(x | X^τ), 0}, renormalised
  7  output X_1 .. X_τ, Y
Step 5 keeps the LAST prefix that passes, scanned from the end: a failed prefix in the middle does not
stop it, unlike sps.py's first rejection. We test r < h, as sps.py does; for r ~ U[0, 1) its chance is h.
When the denominator of h_i is 0 (p_i = 1 and no residual mass: q = p there), any h_i keeps the output
exact (P(τ = i) is then 0 whatever it is); we take h_i = 1.

Why the output has exactly q's distribution (a sketch of the paper's Theorem 1). Write P(x^i), Q(x^i)
for the draft's and the oracle's probabilities of a sequence, and, given the drafts up to i,
Z_i = Σ_x max(w_i q(x) - p(x), 0) (q, p after x^i). Two identities do all the work:
  (a) E_{x ~ p}[w_{i+1}] = Σ_x min(p(x), w_i q(x)) = w_i - Z_i        (as min(a, b) = a - max(a - b, 0))
  (b) P(τ ≥ i | X^i) = w_i, by induction from i = γ down: τ ≥ γ has chance h_γ = w_γ; below, τ < i
      needs prefix i's test and every later one to fail, and by (b) at i + 1 and (a) some later one
      passes with chance E[w_{i+1}] = w_i - Z_i, so P(τ ≥ i | X^i) = 1 - (1 - h_i)(1 - w_i + Z_i) = w_i,
      because 1 - h_i = (1 - w_i) / (Z_i + 1 - w_i): step 4's h_i is exactly the value that makes (b) true.
So P(τ = i | X^i) = w_i - (w_i - Z_i) = Z_i, and Y is then drawn from max(w_i q - p, 0) / Z_i, which
depends on X^i only. Now, by induction on i, the output (with the next rounds' tokens after it) starts
with x^i with probability Q(x^i), of which P(x^i) w_i comes from rounds that kept all of x^i as drafts.
Token i + 1 = x is then
  kept as a draft:              P(x^i) p(x) min(1, w_i q(x) / p(x)) = P(x^i) min(p(x), w_i q(x))
  drawn as Y after τ = i:       P(x^i) Z_i max(w_i q(x) - p(x), 0) / Z_i = P(x^i) max(w_i q(x) - p(x), 0)
  after an earlier end (τ < i): (Q(x^i) - P(x^i) w_i) q(x), as the next tokens are drawn from q
which add up to P(x^i) w_i q(x) + (Q(x^i) - P(x^i) w_i) q(x) = Q(x^i) q(x) = Q(x^i x). At i = γ the
bonus is drawn from q itself. (tests/test_block_verification.py enumerates every outcome to check it.)

Never fewer drafts kept than sps.py. By (b), block verification keeps a drafted prefix X^i whole with
chance w_i, and E[τ] = Σ_{i=1..γ} E[w_i]; sps.py keeps it with chance Π_{j≤i} min(1, q_j/p_j). As
w_{i-1} ≤ 1, w_i = min(1, w_{i-1} q_i/p_i) ≥ w_{i-1} min(1, q_i/p_i), so w_i ≥ Π_{j≤i} min(1, q_j/p_j) for
every drafted prefix, and block verification keeps at least as many drafts in expectation.

Temperature 0: p and q are one-hot, so each q/p is 1 while the drafts follow the oracle's argmax and 0
from the first that does not (w stays 1, then 0 for good). h_i is 1 up to that draft and 0 after it, so
τ is the number of matching drafts, and Y is the oracle's argmax (the residual is one-hot there, or the
bonus): speculative.py's rule, so the text is greedy decoding's.
"""

import math
from dataclasses import dataclass

import numpy as np

from sps import likelihood_ratio, residual, sample, speculative_sample


def block_sample(draft, oracle, ids, n_new, n_draft=4, rng=None, processor=None, stats=None, **flags):
    """Speculative sampling with block verification: yields n_new ids distributed exactly as
    sps.autoregressive_sample(oracle, ...), keeping in each round as many drafts as sps.speculative_sample
    would or more. One processor makes both p and q (a processors.Processor, or its flags temperature,
    top_k, top_p). Steps 1 and 2 are sps.speculative_sample's own (draft k tokens from p, one oracle pass
    for q); block_verification takes the place of its steps 3 and 4."""
    return speculative_sample(draft, oracle, ids, n_new, n_draft, rng, processor, stats, rule=block_verification,
                              **flags)


def block_verification(q, p, drafted, rng, n_draft, explain):
    """Steps 3-6 of one round, with sps.token_verification's signature: q [k + 1, V] (q[i] after the first i
    drafts), p the k draft distributions, the k drafts. Returns (the new tokens, how many of them are drafts
    (tau), the round's record when explain is true, else None)."""
    rs = rng.random(len(drafted))  # r for prefix i is rs[i - 1]; prefix 0 always passes
    tau, last, w, h = verify_block(q, p, drafted, rs)
    new_tokens = drafted[:tau] + [sample(last, rng)]
    if not explain:  # the record costs a pass over the vocabulary per draft: only when kept
        return new_tokens, tau, None
    return new_tokens, tau, explain_round(q, p, drafted, rs, w, h, tau, last, new_tokens)


# ---------------------------------------------------------------------------
# Steps 3-6, as pure functions of the distributions and the uniforms
# ---------------------------------------------------------------------------

def block_weights(q, p, drafted):  # q: [k + 1, V], p: k x [V] -> [k + 1] floats
    """Step 3: w_0 = 1, w_i = min(1, w_{i-1} q(X_i) / p(X_i)) (the paper's p_i). A ratio above 1 makes up
    for an earlier one below 1, but w never exceeds 1: credit cannot be saved for later."""
    w = [1.0]
    for i, x in enumerate(drafted):
        w.append(min(1.0, w[-1] * likelihood_ratio(q[i], p[i], x)))  # 0 where q(x) or p(x) is NaN or infinite
    return w


def residual_mass(q, p, w):  # [V], [V], w_i -> Z_i
    """Z_i = Σ_x max(w_i q(x) - p(x), 0): the mass of the block residual before it is renormalised,
    and the chance P(τ = i | X^i) (see the docstring)."""
    return float(np.maximum(np.float32(w) * q - p, 0).sum())


def acceptance_probabilities(q, p, w):  # q: [k + 1, V], p: k x [V], w: [k + 1] -> [k + 1] floats
    """Step 4: h_i = Z_i / (Z_i + 1 - w_i) for i < k, h_k = w_k. h_0 is 1 (w_0 = 1), and h_i is 1 where
    the denominator is 0 (w_i = 1 and q <= p: then q = p, and P(τ = i) is 0 whatever h_i is), and 0 where
    the mass is NaN or infinite (a NaN in q or p: no draft is kept on it)."""
    k = len(p)
    h = []
    for i in range(k):
        mass = residual_mass(q[i], p[i], w[i])
        if not math.isfinite(mass):  # a NaN in q or p: this prefix never passes
            h.append(0.0)
            continue
        denominator = mass + 1.0 - w[i]
        h.append(mass / denominator if denominator > 0 else 1.0)
    return h + [w[k]]


def last_passing(h, rs):  # [k + 1], [k] -> tau
    """Step 5: the last prefix i whose test r_i < h_i passes, looked at from the end (i = k first); a failed
    prefix before it does not matter. Prefix 0 always passes (h_0 = 1), so it needs no r."""
    for i in range(len(h) - 1, 0, -1):
        if rs[i - 1] < h[i]:
            return i
    return 0


def block_residual(q, p, w):  # [V], [V], w_i -> [V]
    """Step 6's p_res^block: max(w_i q - p, 0) renormalised, which is sps.residual applied to w_i q.
    With w_i = 1 it is sps.py's (q - p)+; with w_i < 1 the draft's own token can get mass back.
    Renormalised again because residual() falls back to its first argument, here w_i q, when the mass
    is 0 (q == p up to float32 rounding; in exact arithmetic τ = i cannot happen then)."""
    r = residual(np.float32(w) * q, p)
    return r / r.sum()


def verify_block(q, p, drafted, rs):
    """Steps 3-6 on one drafted block: q [k + 1, V] (q[i] after the first i drafts), p the k draft
    distributions, the k drafted tokens, and rs, one r ~ U[0, 1) per prefix 1..k. Returns (tau, the
    distribution the last token is drawn from, the weights w, the acceptance probabilities h)."""
    w = block_weights(q, p, drafted)
    h = acceptance_probabilities(q, p, w)
    tau = last_passing(h, rs)
    last = q[tau] if tau == len(drafted) else block_residual(q[tau], p[tau], w[tau])  # the bonus, or p_res
    return tau, last, w, h


# ---------------------------------------------------------------------------
# The round's record, for --trace and --html
# ---------------------------------------------------------------------------

@dataclass
class BlockDetails:
    """One round of block verification, as --trace, --html and the tests see it (stats.Round.details)."""
    steps: list  # per draft: token, p, q, ratio q/p, w and h of the prefix it ends, r and passed (None where
    #              step 5 never looked: below tau), kept
    kept: int    # tau
    last: dict   # the last token: token, from ("bonus" or "residual"), prob (its chance in the distribution it was
    #              drawn from: q, or the block residual), q (the oracle's q(x) there), w (w_tau)


def explain_round(q, p, drafted, rs, w, h, tau, last, new_tokens):
    """Per draft: p(x), q(x), q/p, the weight w_i and h_i of the prefix it ends, its r where step 5 looked
    (from the end down to tau), and whether it was kept; and where the last token came from."""
    looked = range(max(tau, 1), len(drafted) + 1)  # the prefixes step 5 tested, from the end down to tau
    steps = [{"token": int(x), "p": float(p[i][x]), "q": float(q[i][x]), "ratio": float(q[i][x] / p[i][x]),
              "w": w[i + 1], "h": h[i + 1], "r": float(rs[i]) if i + 1 in looked else None,
              "passed": bool(rs[i] < h[i + 1]) if i + 1 in looked else None, "kept": i < tau}
             for i, x in enumerate(drafted)]
    token = new_tokens[-1]
    return BlockDetails(steps, tau, {"token": int(token), "from": "bonus" if tau == len(drafted) else "residual",
                                     "prob": float(last[token]), "q": float(q[tau][token]), "w": w[tau]})
