"""Speculative sampling (SpS): Chen et al. 2023, arXiv 2302.01318, Algorithms 1 and 2.

The paper's letters: q is the target model (our oracle), p the draft model,
K the number of draft tokens per round (n_draft in the code, decoding.py),
x̃_t the draft tokens.
Careful: Leviathan et al. 2023 and Hugging Face's code use the same two
letters the other way round (p the target, q the draft). Hugging Face's
_speculative_sampling (transformers, generation/utils.py) keeps a draft when
r_i <= p_i / q_i, r_i = torch.rand_like(...) uniform on [0, 1): with r below 1
that is this test, r < min(1, q(x)/p(x)), with the letters swapped (<= and <
differ only when r lands exactly on the ratio, an event of probability 0).
Mixing the two conventions inverts the ratio, a classic bug.
Both p and q are made from logits by one and the same processor
(processors.py: greedy, multinomial, top-k, nucleus, both, with a temperature),
so "q's distribution" below means the processed target's.

Algorithm 2, one round, given the sequence x_1 .. x_n:
  Step 1  for t = 1..K: sample x̃_t ~ p(x | x_1..x_n, x̃_1..x̃_{t-1})
  Step 2  in parallel (one forward), q(x | x_1..x_n, x̃_1..x̃_t) for t = 0..K
  Step 3  for t = 1..K: r ~ U[0, 1];
            if r < min(1, q(x̃_t) / p(x̃_t)): accept x̃_t
            else: sample x_{n+t} ~ (q(x) - p(x))+, renormalised, and stop
  Step 4  if all K were accepted: sample one more token x_{n+K+1} ~ q(x)

Why the output has exactly q's distribution: a token x is emitted either as an
accepted draft, with probability p(x) min(1, q(x)/p(x)) = min(p(x), q(x)), or
through a rejection, with probability (1 - sum_y min(p(y), q(y))) times
(q(x) - p(x))+ / sum_y (q(y) - p(y))+. Both sums equal the same number, so
the rejection term is (q(x) - p(x))+ = q(x) - min(p(x), q(x)), and the two
add up to q(x). tests/test_sps.py checks this identity on the real functions.
"""

import math
from dataclasses import dataclass

import numpy as np

from decoding import cache_lengths, check_args, check_room, feed
from stats import Stats
from kvcache import KVCache
from processors import as_processor
from speculative import rollback


@dataclass
class SpsDetails:
    """A round's record for --trace and --html: what step 3 saw (explain_round)."""
    n_draft: int          # K, the draft length asked for
    k: int                # drafted this round: K, or fewer where fewer tokens were left to make
    steps: list           # per draft checked: {token, p, q, accept_prob, r, accepted}
    resampled: dict = None  # at a rejection: {token, rejected, top: [{token, p, q, min, residual}]}
    bonus: dict = None      # when every draft was kept: {token, q}


# ---------------------------------------------------------------------------
# Sampling and step 3's distributions (the processors are in processors.py)
# ---------------------------------------------------------------------------

def sample(probs, rng):  # [V] -> token id
    """Draw one token from a (possibly unnormalised) float32 distribution by inverse CDF."""
    cdf = np.cumsum(probs)
    token = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    # r * total can round up to total in float32; the draw then belongs to the last possible token.
    return min(token, int(np.flatnonzero(probs)[-1]))


def acceptance_probability(q, p, x):
    """Step 3's test: the chance to keep draft token x, min(1, q(x) / p(x)). p(x) > 0: x was drawn from p."""
    return min(1.0, likelihood_ratio(q, p, x))


def likelihood_ratio(q, p, x):
    """q(x) / p(x), where both are finite numbers, q(x) >= 0 and p(x) > 0; else 0, which keeps no draft.
    Weights that overflow make NaN, and min(1, NaN) is 1: a NaN must never keep a draft. (A p that is
    NaN everywhere then makes every draft rejected, and the residual, which falls back to q, draws.)"""
    qx, px = float(q[x]), float(p[x])  # float64: the ratio of two float32 numbers cannot overflow
    if not (math.isfinite(qx) and math.isfinite(px) and px > 0 and qx >= 0):
        return 0.0
    return qx / px


def alpha(q, p):  # [V], [V] -> alpha
    """alpha = sum_x min(p(x), q(x)): the chance that step 3 keeps a draft x ~ p (Leviathan et al.'s alpha,
    one minus their total variation distance between the two distributions)."""
    return float(np.minimum(p, q).sum())


def residual(q, p):  # [V], [V] -> [V]
    """Step 3's fallback distribution (q - p)+, renormalised.

    It is all zeros when q <= p everywhere, which in exact arithmetic means
    q == p and no rejection can happen; in float32 a rejection can still occur
    by a rounding hair. Then q itself is the right distribution to draw from.
    """
    r = np.maximum(q - p, 0)
    total = r.sum()
    return r / total if total > 0 else q


# ---------------------------------------------------------------------------
# Algorithm 1 (the baseline) and Algorithm 2
# ---------------------------------------------------------------------------

def autoregressive_sample(model, ids, n_new, rng=None, processor=None, stats=None, **flags):
    """Algorithm 1: x_{n+1} ~ q(x | x_1..x_n), one forward pass per token. Yields n_new ids.

    processor: a processors.Processor (default: multinomial at temperature 1), or
    instead its flags temperature, top_k, top_p.
    """
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng
    processor = as_processor(processor, **flags)
    check_room(ids, n_new, model)
    tokens, cache = list(ids), KVCache()
    for _ in range(n_new):
        q = processor(feed(model, cache, tokens, stats, "oracle")[-1])
        tokens.append(sample(q, rng))
        stats.add_tokens(tokens[-1:])
        yield tokens[-1]


def speculative_sample(draft, oracle, ids, n_new, n_draft=4, rng=None, processor=None, stats=None, rule=None,
                       drafter=None, **flags):
    """Algorithm 2: yields n_new ids distributed exactly as autoregressive_sample(oracle, ...).

    n_draft is the paper's K; a round drafts fewer near the end, where fewer tokens are left.
    One processor makes both p and q (as autoregressive_sample's processor or flags).
    rule is steps 3 and 4: token_verification, the paper's, unless another lossless rule with its
    signature is given (beyond/block_verification.py's, which keeps steps 1 and 2 as they are here).
    drafter is step 1: draft_samples, unless another with its signature is given (beyond/specdec_pp.py's, which
    may stop before k drafts: a stop decided before each draw, from what was drafted, keeps the output exact).
    """
    stats = Stats() if stats is None else stats
    rng = np.random.default_rng() if rng is None else rng  # one generator for the whole run
    processor = as_processor(processor, **flags)
    rule = token_verification if rule is None else rule
    check_args(ids, n_new, draft, oracle, n_draft=n_draft)
    tokens, end = list(ids), len(ids) + n_new
    draft_cache, oracle_cache = KVCache(), KVCache()
    while len(tokens) < end:
        k = min(n_draft, end - len(tokens) - 1)  # the round adds up to k + 1 tokens: never overshoot
        # Step 1: sample k draft tokens x̃_t ~ p, one at a time, keeping each p.
        drafted, p = draft_samples(draft, draft_cache, tokens, k, processor, rng, stats) if drafter is None else \
            drafter(draft, draft_cache, tokens, k, processor, rng, stats)
        k = len(drafted)  # what the round drafted: a drafter may stop short of k (beyond/specdec_pp.py)
        # Step 2: the target's q for all k + 1 positions in one forward: q[t] is
        # q(x | x_1..x_n, x̃_1..x̃_t) (0-based here: q[0] conditions on no draft).
        q = processor(feed(oracle, oracle_cache, tokens + drafted, stats, "oracle", n_logits=k + 1))
        # Steps 3 and 4: keep each draft with probability min(1, q/p), or end at a draw from the residual.
        new_tokens, n_accepted, details = rule(q, p, drafted, rng, n_draft, explain=stats.trace is not None)
        context_length = len(tokens)
        tokens += new_tokens
        rollback(len(tokens) - 1, draft_cache, oracle_cache)
        stats.add_round(new_tokens, drafted, n_accepted, context_length=context_length, cached=cache_lengths(draft_cache, oracle_cache),
                        details=details)
        yield from new_tokens


def draft_samples(draft, cache, tokens, k, processor, rng, stats):  # -> k tokens, k x [V]
    """Step 1: x̃_t ~ p(x | x_1..x_n, x̃_1..x̃_{t-1}) for t = 1..k, one draft pass each. Returns the k drafts
    and each p, which step 3 divides by (beyond/block_verification.py's step 1 is this one too)."""
    drafted, p = [], []
    for _ in range(k):
        p.append(processor(feed(draft, cache, tokens + drafted, stats, "draft")[-1]))  # [V]
        drafted.append(sample(p[-1], rng))
    return drafted, p


def token_verification(q, p, drafted, rng, n_draft, explain):
    """Steps 3 and 4 as one round's rule: (the new tokens, how many of them are drafts, the round's record for
    --trace and --html when explain is true, else None)."""
    new_tokens, rs = accept_or_resample(q, p, drafted, rng)
    details = explain_round(q, p, drafted, rs, new_tokens, n_draft) if explain else None
    return new_tokens, len(new_tokens) - 1, details


def accept_or_resample(q, p, drafted, rng):  # q [k + 1, V], p k x [V], k drafts -> (new tokens, the r of each test)
    """Steps 3 and 4: accept x̃_t with probability min(1, q/p); at the first rejection, draw from the
    residual (q - p)+ instead, and stop; if all k were accepted, q[k] is already computed: one bonus
    token from it. Any drafter's p works here (beyond/eagle.py's head uses token_verification too)."""
    new_tokens, rs = [], []
    for t in range(len(drafted)):
        r = rng.random()  # r ~ U[0, 1]
        rs.append(r)
        if r < acceptance_probability(q[t], p[t], drafted[t]):
            new_tokens.append(drafted[t])
        else:
            new_tokens.append(sample(residual(q[t], p[t]), rng))
            return new_tokens, rs
    new_tokens.append(sample(q[len(drafted)], rng))
    return new_tokens, rs


def explain_round(q, p, drafted, rs, new_tokens, n_draft, n_top=8):
    """What step 3 saw, for --trace and --html: per draft p(x), q(x), min(1, q/p), r and the
    decision; at a rejection the top tokens of p, q, min(p, q) and (q - p)+, the rejected draft
    and the drawn token among them; else the bonus."""
    steps = [{"token": x, "p": float(p[t][x]), "q": float(q[t][x]), "accept_prob": acceptance_probability(q[t], p[t], x),
              "r": r, "accepted": t < len(new_tokens) - 1} for t, (x, r) in enumerate(zip(drafted, rs))]
    details = SpsDetails(n_draft, len(drafted), steps)
    t = len(new_tokens) - 1  # the position of the last token: a resample or the bonus
    if t < len(rs):
        res = residual(q[t], p[t])
        shown = list(dict.fromkeys([drafted[t], new_tokens[-1]]))  # the rejected draft and the token drawn in its place
        top = [x for x in np.argsort(-np.maximum(p[t], q[t])).tolist()[:n_top] if x not in shown][:n_top - len(shown)]
        top = sorted(top + shown, key=lambda x: -max(p[t][x], q[t][x]))  # both always shown, even when unlikely
        details.resampled = {"token": new_tokens[-1], "rejected": drafted[t], "top": [
            {"token": x, "p": float(p[t][x]), "q": float(q[t][x]), "min": float(min(p[t][x], q[t][x])),
             "residual": float(res[x])} for x in top]}
    else:
        details.bonus = {"token": new_tokens[-1], "q": float(q[t][new_tokens[-1]])}
    return details
