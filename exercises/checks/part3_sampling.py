"""Part 3, speculative sampling (Chen et al. 2023; seeds 001 and 002): exercise 9 (temperature and top-k),
11 (the residual), 12 (the inverted ratio), 13 (alpha) and 15 (a whole round of Algorithm 2)."""

import itertools
import math
from collections import Counter

import numpy as np

from stats import Stats
from gpt2 import softmax

from .models import SAMPLING_V, close_draft, sampling_pair
from .running import Exercise, StillBuggy, attempt, integers, number, project, show, unchanged, wrong


def sps_alpha(q, p):
    """sps.py's alpha = sum_x min(p(x), q(x)) (the one place the checkers import it)."""
    import sps
    return sps.alpha(q, p)


# ---------------------------------------------------------------------------
# Exercise 9: temperature and top-k
# ---------------------------------------------------------------------------

def check_probabilities(f):
    logits = np.array([1.0, 3.0, 2.0, 0.0, -1.0, 2.5], np.float32)
    plain = softmax(logits)
    cases = [(logits, 1.0, None), (logits, 0.5, None), (logits, 2.0, None), (logits, 0, None),
             (np.array([1.0, 3.0, 3.0, 0.0], np.float32), 0, None), (logits * np.float32(30), 1e-40, None),
             (logits, 1.0, 2), (logits, 0.5, 3), (logits, 1.0, 6), (logits, 1.0, 10),
             (logits, 1e-50, None)]  # below the smallest float32: last, the subtlest
    reference = reference_probabilities()
    for x, temperature, top_k in cases:
        call = f"probabilities({show(x, 3)}, temperature={temperature}, top_k={top_k})"
        given = x.copy()
        with np.errstate(all="ignore"):
            got = attempt(call, f, given, temperature, top_k, hints=(
                (IndexError, f"top_k can be larger than the vocabulary ({len(x)} tokens here): then every token "
                             "keeps its probability"),) if top_k is not None and top_k > len(x) else ())
        unchanged(call, {"logits": (x, given)})  # a sampler goes on using its logits (the trace shows them)
        expected = reference(x, temperature, top_k)
        got = np.asarray(got)
        if got.shape != expected.shape:
            raise wrong(f"{call} returned shape {got.shape}, expected {expected.shape}", "one probability per token")
        if got.dtype != np.float32:
            raise wrong(f"{call} returned {got.dtype} values, expected float32",
                        "which operation brings in float64 (a np.float64 scalar, np.exp of a float64 array, ...)")
        if np.allclose(got, expected, atol=1e-5):
            continue
        what = f"{call} returned {show(got)}, expected {show(expected)}"
        if not np.all(np.isfinite(got)):
            if temperature == 0:
                raise wrong(f"{what}: temperature 0 means greedy, all the mass on the argmax",
                            "temperature 0 needs its own case: dividing by it is not defined")
            if np.float32(temperature) == 0:
                raise wrong(f"{what}: {temperature} is below the smallest float32, so np.float32({temperature}) is 0, "
                            "and 0 / 0 is NaN", "divide by at least np.finfo(np.float32).smallest_subnormal")
            raise wrong(f"{what}: logits / {temperature} overflow float32 to +inf, and softmax of inf is NaN",
                        "softmax does not change when you subtract the largest logit: do that before dividing")
        if temperature == 0:
            raise wrong(f"{what}: temperature 0 puts all the mass on the argmax (the first one on a tie)", "np.argmax")
        if abs(float(got.sum()) - 1) > 1e-4:
            raise wrong(f"{what}: they add up to {float(got.sum()):.4g}, not 1", "renormalise after cutting tokens")
        if top_k is not None and top_k < len(x) and np.count_nonzero(got) != top_k:
            raise wrong(f"{what}: {np.count_nonzero(got)} tokens keep some mass, top_k = {top_k} should",
                        "everything below the k-th largest logit gets probability 0")
        if top_k is None and temperature != 1.0 and np.argmax(x) == np.argmax(got):
            top, ours = float(expected.max()), float(got.max())
            direction = "sharper" if temperature < 1 else "flatter"
            raise wrong(f"{what}: at temperature {temperature} the distribution gets {direction} than at temperature 1 "
                        f"(the top token {float(plain.max()):.3g} -> {top:.3g}); yours gives it {ours:.3g}",
                        "whether the logits are divided or multiplied by the temperature, and before or after softmax")
        raise wrong(what, "temperature first (logits / temperature), then top-k, then softmax")


# ---------------------------------------------------------------------------
# Exercises 11-13: the residual, the inverted ratio, the acceptance rate
# ---------------------------------------------------------------------------

def small_residuals():
    """(q, p) pairs whose (q - p)+ is not zero but small, down to a hair, each with its exact residual: p takes a
    little of q's mass from its last tokens and gives it to the first. In float32 these q - p are exact (q and p
    within a factor of 2), so the residual is the same whatever the order of the arithmetic."""
    pairs = []
    for q, moved in (([0.5, 0.3, 0.2], 2e-3), ([0.5, 0.3, 0.2], 1e-4), ([0.6, 0.25, 0.15], 1e-6)):
        q = np.array(q, np.float32)
        p = q + np.array([moved, -moved / 2, -moved / 2], np.float32)
        pairs.append((q, p))
    q = np.array([0.99, 0.01], np.float32)  # one float32 step apart: a mass of about 1e-9
    pairs.append((q, np.array([np.nextafter(q[0], np.float32(1)), np.nextafter(q[1], np.float32(0))], np.float32)))
    return pairs


def check_residual(f):
    from sps import residual
    rng = np.random.default_rng(0)
    pairs = [tuple(rng.dirichlet(np.ones(12)).astype(np.float32) for _ in range(2)) for _ in range(20)]
    pairs.insert(0, (np.array([0.2, 0.5, 0.3], np.float32), np.array([0.4, 0.2, 0.4], np.float32)))
    for q, p in pairs + small_residuals():
        call = f"residual(q={show(q, None)}, p={show(p, None)})"
        given = (q.copy(), p.copy())
        with np.errstate(all="ignore"):
            r = np.asarray(attempt(call, f, *given))
        unchanged(call, {"q": (q, given[0]), "p": (p, given[1])})  # SpS still needs both after a rejection
        expected = residual(q, p)
        if r.shape == expected.shape and np.allclose(r, expected, atol=1e-6):
            continue
        what = f"{call} returned {show(r)}, expected {show(expected)}"
        mass = float(np.maximum(q - p, 0).sum())
        if mass < 1e-2 and r.shape == q.shape and np.allclose(r, q, atol=1e-6):
            # The exact identity a sampler must keep: P(emit x) = min(p, q)(x) + P(reject) * residual(x) = q(x).
            out = np.minimum(p, q) + (1 - sps_alpha(q, p)) * r
            raise wrong(f"{what}: it fell back to q, but (q - p)+ is not all zeros here: its mass is {mass:.2g}. A "
                        f"rejection happens with that probability, and then one SpS step emits "
                        f"{show(out, None)} instead of q, off by {float(np.abs(out - q).max()):.2g}: a biased sampler",
                        "fall back to q only when max(q - p, 0) sums to exactly 0; any threshold above 0 (a small "
                        "epsilon, np.isclose) replaces a real residual by q")
        if r.shape == q.shape and np.any(r[q < p] > 0):
            raise wrong(f"{what}: it puts mass on tokens the draft p over-proposes (p > q)",
                        "the residual is the mass the target q has and the draft p lacks: max(q - p, 0)")
        if r.shape == q.shape and abs(float(r.sum()) - 1) > 1e-4:
            beta = float(np.float32(1) - np.minimum(p, q).sum())
            if beta > 0 and np.allclose(r, np.maximum(q - p, 0) / np.float32(beta), rtol=1e-4, atol=0):
                raise wrong(f"{what}: it is (q - p)+ divided by 1 - sum min(p, q) = {beta:.6g}, where the mass of "
                            f"(q - p)+ is {mass:.6g}. The two are equal in exact arithmetic, not in float32, where "
                            f"1 - sum min(p, q) keeps only the digits that survive the subtraction from 1",
                            "divide by the residual's own sum, computed in float32 like the residual: then it adds up "
                            "to 1 whatever the rounding")
            if (np.all(np.isfinite(r)) and r.sum() > 0 and not math.isclose(float(r.sum()), mass, rel_tol=1e-3)
                    and np.allclose(r / r.sum(), expected, atol=1e-6)):
                raise wrong(f"{what}: it is (q - p)+ divided by {mass / float(r.sum()):.6g}, where its mass is "
                            f"{mass:.6g} (an epsilon added to the sum?)",
                            "divide by the sum exactly, and handle the sum 0 apart, as its own case")
            raise wrong(f"{what}: it adds up to {float(r.sum()):.4g}, not 1", "renormalise: divide by the sum")
        raise wrong(what, "max(q - p, 0), renormalised to sum to 1")
    same = np.array([0.2, 0.5, 0.3], np.float32)
    call = f"residual(q={show(same)}, p=q)"
    with np.errstate(all="ignore"):
        r = np.asarray(attempt(call, f, same.copy(), same.copy()))
    if not np.all(np.isfinite(r)):
        raise wrong(f"{call} returned {show(r)}: here (q - p)+ is all zeros, and 0 / 0 is NaN",
                    "the case where max(q - p, 0) sums to 0: which distribution is right then? (EXERCISES.md)")
    if not np.allclose(r, same):
        raise wrong(f"{call} returned {show(r)}, expected q = {show(same)}: when (q - p)+ is all zeros, return q",
                    "why q is the right answer is in exercise 11's answer")


def emitted(q, p, keep):
    """P(one SpS step emits x) for a draft x ~ p kept with probability keep[x], else resampled from the residual."""
    from sps import residual
    keep = np.asarray(keep, np.float32)
    return p * keep + (1 - float(np.sum(p * keep))) * residual(q, p)


def check_keep_draft(f):
    """keep_draft(q, p, x, r): q the target's distribution, p the draft's, r ~ U[0, 1)."""
    from sps import acceptance_probability
    cases = [(np.array([0.3, 0.3, 0.4], np.float32), np.array([0.6, 0.3, 0.1], np.float32)),
             (np.array([0.0, 0.2, 0.8], np.float32), np.array([0.5, 0.5, 0.0], np.float32))]
    grid = (np.arange(400) + 0.5) / 400  # r spread evenly over [0, 1): the share kept is P(keep)
    seen = []
    for q, p in cases:
        kept = []
        for x in np.flatnonzero(p):
            call = f"keep_draft(q={show(q)}, p={show(p)}, x={x}, r)"
            with np.errstate(all="ignore"):
                kept.append(float(np.mean([bool(attempt(f"{call} with r = {r:.4f}", f, q, p, int(x), float(r), hint=(
                    f"q(x) = 0 here: a token the target never emits, which the test must never keep (min(1, 0 / "
                    f"p(x)) = 0)" if q[x] == 0 else None))) for r in grid])))
        xs = np.flatnonzero(p)
        seen.append((p, q, xs, kept))
    inverted = all(abs(k - min(1.0, p[x] / q[x] if q[x] > 0 else math.inf)) < 0.01
                   for p, q, xs, kept in seen for x, k in zip(xs, kept))
    for p, q, xs, kept in seen:
        expected = [acceptance_probability(q, p, x) for x in xs]
        bad = next((i for i, (k, e) in enumerate(zip(kept, expected)) if abs(k - e) > 0.01), None)
        if bad is None:
            continue
        x = xs[bad]
        keep = np.zeros_like(p)
        keep[xs] = kept
        out = emitted(q, p, keep)
        what = (f"for draft token x = {x} with p(x) = {p[x]:.2g} (draft) and q(x) = {q[x]:.2g} (target), keep_draft "
                f"keeps it for {kept[bad]:.0%} of r in [0, 1); Algorithm 2 keeps it with probability "
                f"min(1, q(x)/p(x)) = {expected[bad]:.0%}. With your test one step emits the distribution "
                f"{show(out, 2)}, not the target's q = {show(q, 2)}")
        if inverted:
            raise StillBuggy(wrong(what, "which of the two models proposes x more often than the target wants it, "
                                         "and what the test must then do").args[0])
        if all(abs(k - (1 - acceptance_probability(q_, p_, x_))) < 0.01
               for p_, q_, xs_, kept_ in seen for x_, k in zip(xs_, kept_)):
            raise wrong(f"{what}: it keeps exactly when it should reject", "the direction of the comparison with r")
        raise wrong(what, "the acceptance test of step 3 in Chen et al.'s letters: q is the target, p the draft")


def top_k_pair(q, p, k):
    """q and p after the same top-k on each: every token outside both top k has p = q = 0."""
    def cut(x):
        x = np.where(x >= np.sort(x)[-k], x, 0).astype(np.float32)
        return x / x.sum()
    return cut(q), cut(p)


def check_alpha(f):
    from sps import acceptance_probability, sample
    rng = np.random.default_rng(3)
    cases = [(np.array([0.2, 0.3, 0.5], np.float32), np.array([0.5, 0.3, 0.2], np.float32)),
             (np.array([0.25, 0.25, 0.5], np.float32), np.array([0.25, 0.25, 0.5], np.float32)),
             (np.array([0.0, 1.0], np.float32), np.array([1.0, 0.0], np.float32)),
             (np.array([0.0, 0.2, 0.8], np.float32), np.array([0.5, 0.5, 0.0], np.float32))]
    cases += [tuple(rng.dirichlet(np.ones(10)).astype(np.float32) for _ in range(2)) for _ in range(4)]
    # after top-k: tokens outside the top k of both have p = q = 0, most of the vocabulary in a real run
    cases += [(np.array([0.3, 0.7, 0, 0, 0], np.float32), np.array([0.6, 0.4, 0, 0, 0], np.float32)),
              top_k_pair(*(rng.dirichlet(np.ones(12)).astype(np.float32) for _ in range(2)), 4)]
    for q, p in cases:
        call = f"alpha(q={show(q, 2)}, p={show(p, 2)})"
        with np.errstate(all="ignore"):
            got = number(call, attempt(call, f, q.copy(), p.copy()))
        expected = sps_alpha(q, p)
        if abs(got - expected) < 1e-5:
            continue
        both_zero = np.flatnonzero((p == 0) & (q == 0)).tolist()
        if math.isnan(got) and both_zero:
            raise wrong(f"{call} returned nan, expected {expected:.4g}: at token(s) {both_zero} p = q = 0 (after "
                        "top-k, every token outside the top k has probability 0 in both), and 0 / 0 is NaN there",
                        "a token neither model gives any probability adds nothing to alpha: sum_x min(p(x), q(x)) "
                        "needs no division")
        n = 20000
        kept = sum(rng.random() < acceptance_probability(q, p, sample(p, rng)) for _ in range(n))
        what = (f"{call} returned {got:.4g}, expected {expected:.4g}: one simulated SpS step (x ~ p, kept when "
                f"r < min(1, q(x)/p(x))), run {n} times, kept the draft {kept / n:.1%} of the time")
        if abs(got - float(np.dot(p, q))) < 1e-5:
            raise wrong(f"{what}; sum p(x) q(x) is the chance that two independent draws, one from each, agree",
                        "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)")
        if abs(got - (1 - float(np.abs(p - q).sum()))) < 1e-5:
            raise wrong(f"{what}; 1 - sum |p - q| counts every difference twice: the total variation distance is "
                        "half of sum |p - q|", "how often a draft is kept, given what the test keeps")
        if abs(got - expected / len(p)) < 1e-5:
            raise wrong(f"{what}; that is alpha divided by the {len(p)} tokens: a mean over the vocabulary, not a sum",
                        "P(keep) adds up the chances of the tokens, one by one: a sum, not a mean")
        raise wrong(what, "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)")


# ---------------------------------------------------------------------------
# Exercise 15: a whole round of Algorithm 2
# ---------------------------------------------------------------------------

def sequence_distribution(model, ids, n_new, probabilities=softmax):
    """{continuation: probability} of n_new tokens sampled from the model, by enumeration.
    probabilities: logits [n, V] -> probabilities [n, V] (softmax, or a processors.Processor)."""
    dist = {}
    for seq in itertools.product(range(model.vocab_size), repeat=n_new):
        probs = probabilities(model.forward(list(ids) + list(seq[:-1]))[len(ids) - 1:])
        dist[seq] = float(np.prod([probs[i, t] for i, t in enumerate(seq)]))
    return dist


def chi_square(counts, dist, n):
    """Pearson's test of n samples (counts) against dist: (chi2, critical value at alpha = 0.001, the
    continuation furthest above its expectation). Continuations expected fewer than 5 times are pooled."""
    seqs = list(dist)
    chi2, df = pearson([counts.get(s, 0) for s in seqs], n * np.array([dist[s] for s in seqs]))
    if any(dist.get(s, 0) == 0 for s in counts):
        chi2 = math.inf
    worst = max(seqs, key=lambda s: (counts.get(s, 0) - n * dist[s]) / math.sqrt(n * dist[s] + 1e-12))
    return chi2, critical_value(df, 0.001), worst


def pearson(observed, expected):
    """(chi2, degrees of freedom) of observed counts against expected ones; cells expected fewer than 5 times
    are pooled into one."""
    observed, expected = np.asarray(observed, np.float64), np.asarray(expected, np.float64)
    rare = expected < 5
    if rare.any():
        expected = np.append(expected[~rare], expected[rare].sum())
        observed = np.append(observed[~rare], observed[rare].sum())
    return float(np.sum((observed - expected) ** 2 / np.maximum(expected, 1e-12))), len(expected) - 1


def critical_value(df, alpha):
    """The chi-square quantile 1 - alpha with df degrees of freedom (Wilson-Hilferty's approximation)."""
    z = {0.001: 3.0902, 1e-4: 3.7190}[alpha]
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def sps_rounds(f, p_model, q_model, ids, n_draft):
    """f's round from ids, checked for its shape: 1 to n_draft + 1 token ids."""
    call = f"sps_round(draft, oracle, {ids}, n_draft={n_draft}, rng)"

    def run(rng):
        out = integers(call, attempt(call, f, p_model, q_model, list(ids), n_draft, rng))
        if not 1 <= len(out) <= n_draft + 1 or not all(0 <= x < SAMPLING_V for x in out):
            raise wrong(f"{call} returned {out}: a round adds 1 to n_draft + 1 = {n_draft + 1} token ids in [0, {SAMPLING_V})",
                        "a round drafts n_draft tokens, the argument (the checker calls with n_draft = 1, 2 and 3), and ends "
                        "with exactly one token of the target's: a resample, or the bonus" if len(out) > n_draft + 1 else
                        "a round ends with exactly one token of the target's: a resample, or the bonus")
        return out
    return run


def all_kept(p_model, q_model, ids, n_draft):
    """P(a round from ids keeps all n_draft drafts), exactly: sum over x of min(p(x), q(x)) times the same one token on."""
    if n_draft == 0:
        return 1.0
    p, q = softmax(p_model.forward(ids)[-1]), softmax(q_model.forward(ids)[-1])
    return sum(float(min(p[x], q[x])) * all_kept(p_model, q_model, ids + [x], n_draft - 1) for x in range(len(p)))


def full_rounds(f, p_model, q_model, ids, n_draft, n_rounds, rng, lengths=None):
    """A failure unless about P(all n_draft kept) of n_rounds rounds add n_draft + 1 tokens (4.5 standard deviations).
    n_draft = 2 comes first (check_sps_round): a round without its bonus fails there, so a failure at another n_draft that
    never reaches n_draft + 1 tokens is a n_draft ignored."""
    lengths = lengths or Counter(len(sps_rounds(f, p_model, q_model, ids, n_draft)(rng)) for _ in range(n_rounds))
    full, expected = lengths[n_draft + 1], all_kept(p_model, q_model, ids, n_draft)
    if abs(full - n_rounds * expected) > 4.5 * math.sqrt(n_rounds * expected * (1 - expected)):
        raise wrong(f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft}, {full} of your rounds added n_draft + 1 = "
                    f"{n_draft + 1} tokens ({full / n_rounds:.1%}); all n_draft drafts are kept with probability {expected:.1%} "
                    f"here, and then the round adds one more token from q",
                    f"your rounds never added more than {max(lengths)} tokens with n_draft = {n_draft}: a round drafts n_draft tokens, "
                    "n_draft the argument" if max(lengths) <= n_draft and n_draft != 2 else
                    "step 3: each draft is kept by a test of its own, with an r of its own (one r for all n_draft tests "
                    "keeps or rejects them together)" if full > n_rounds * expected else
                    "step 4: what a round does when every draft was kept")


def check_sps_round(f, n_rounds=300, n_runs=500, n_draft=2, n_new=3):
    p_model, q_model = sampling_pair()
    ids, V = [1, 4], SAMPLING_V
    rng = np.random.default_rng(1234)

    # 1. The shape of a round: P(its first draft is kept) = alpha; P(all n_draft kept), both exact.
    rounds = Counter(tuple(sps_rounds(f, p_model, q_model, ids, n_draft)(rng)) for _ in range(n_rounds))
    if len(rounds) == 1:
        raise wrong(f"your {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft} all returned {list(list(rounds)[0])}: "
                    "nothing in them is random", "draw every r and every token with the rng the round is given: a "
                    "generator made inside the round (np.random.default_rng(seed)) repeats the same draws each time")
    lengths = Counter()
    for out, n in rounds.items():
        lengths[len(out)] += n
    p1, q1 = softmax(p_model.forward(ids)[-1]), softmax(q_model.forward(ids)[-1])
    alpha = sps_alpha(q1, p1)
    inverted = float(sum(p1[x] * min(1.0, p1[x] / q1[x]) for x in range(V)))
    setting = f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft} (draft p and target q over {V} tokens)"
    first_kept = n_rounds - lengths[1]
    if abs(first_kept - n_rounds * alpha) > 4.5 * math.sqrt(n_rounds * alpha * (1 - alpha)):
        looks = (f" (with the ratio inverted, min(1, p/q), it would be {inverted:.1%})"
                 if abs(first_kept / n_rounds - inverted) < abs(first_kept / n_rounds - alpha) else "")
        raise wrong(f"{setting}, your round kept its first draft in {first_kept / n_rounds:.1%} of them; Algorithm 2 "
                    f"keeps it with probability sum_x min(p(x), q(x)) = {alpha:.1%} here{looks}",
                    "step 3's test r < min(1, q(x~)/p(x~)), q the target (the oracle), p the draft")
    full_rounds(f, p_model, q_model, ids, n_draft, n_rounds, rng, lengths)
    for other in (1, 3):  # the draft length is an argument: other values of it
        full_rounds(f, p_model, q_model, ids, other, n_rounds // 2, rng)

    # The bonus token of step 4, on its own: with the draft p and n_draft = 1 (a bonus in alpha of the rounds), then
    # with a draft close to q and n_draft = 2 (a bonus in most rounds, and a row early that is not the text's). Each
    # wrong bonus the tests try gives a chi-square many times the critical value here.
    check_bonus(f, p_model, q_model, ids, 1, 1200, rng, "the draft p")
    check_bonus(f, close_draft(), q_model, ids, 2, 800, rng, "a draft close to the target q")

    # 2. What comes out: rounds until n_new tokens (any prefix of the output follows q), against q exactly.
    counts = Counter()
    for _ in range(n_runs):
        new = []
        while len(new) < n_new:
            new += sps_rounds(f, p_model, q_model, ids + new, n_draft)(rng)
        counts[tuple(new[:n_new])] += 1
    target = sequence_distribution(q_model, ids, n_new)
    chi2, critical, worst = chi_square(counts, target, n_runs)
    if chi2 > critical:
        first = Counter(seq[0] for seq in counts.elements())
        raise wrong(f"over {n_runs} runs of your rounds from the prompt {ids} (n_draft = {n_draft}), the first {n_new} tokens do "
                    f"not follow the target's distribution: chi-square {chi2:.0f} > {critical:.0f} (alpha = 0.001). "
                    f"The first token came out {show([first[x] / n_runs for x in range(V)], 2)}, q says "
                    f"{show(q1, 2)}; the continuation {list(worst)} came {counts.get(worst, 0)} times, where q "
                    f"expects {n_runs * target[worst]:.0f}",
                    "what each draw samples from: the drafts from p, the resample from (q - p)+ renormalised, the "
                    "bonus from q after all n_draft drafts")


def check_bonus(f, p_model, q_model, ids, n_draft, n_rounds, rng, draft_name):
    """A failure unless the bonus tokens of n_rounds rounds follow q after the n_draft drafts, exactly: for each
    drafts d of the rounds that kept all n_draft, the bonus counts against q(. | ids + d) (chi-square, alpha = 1e-4)."""
    run = sps_rounds(f, p_model, q_model, ids, n_draft)
    bonuses = {}  # the n_draft drafts of a round that kept them all -> Counter of its bonus tokens
    for _ in range(n_rounds):
        out = run(rng)
        if len(out) == n_draft + 1:
            bonuses.setdefault(tuple(out[:n_draft]), Counter())[out[n_draft]] += 1

    def after(model, tokens):  # model's next-token distribution after ids + tokens, float64
        return softmax(model.forward(ids + list(tokens))[-1]).astype(np.float64)

    chi2 = df = 0
    for drafts, counts in bonuses.items():  # drafts: a tuple
        c, d = pearson([counts[b] for b in range(SAMPLING_V)], sum(counts.values()) * after(q_model, drafts))
        chi2, df = chi2 + c, df + d
    critical = critical_value(max(df, 1), 1e-4)
    if chi2 <= critical:
        return
    def drafts_text(n):
        if n == 0:
            return "the text alone"
        if n == 1:
            return "the text and the first draft" if n_draft > 1 else "the text and the draft"
        return f"the text and all {n_draft} drafts" if n == n_draft else f"the text and the first {n} drafts"

    def one_more(d):  # q after the drafts and one more token drawn from q: the row after the right one
        q_K = after(q_model, d)
        return sum(q_K[b] * after(q_model, d + (b,)) for b in range(SAMPLING_V))
    candidates = {  # the usual wrong rows, each a distribution for the drafts d
        f"q one row early, after {drafts_text(n_draft - 1)}": lambda d: after(q_model, d[:-1]),
        "q one row late, after the drafts and one more token": one_more,
        f"the draft's p of the last draft, after {drafts_text(n_draft - 1)}": lambda d: after(p_model, d[:-1]),
        f"the draft's p after {drafts_text(n_draft)}": lambda d: after(p_model, d),
        f"the uniform distribution over the {SAMPLING_V} tokens": lambda d: np.full(SAMPLING_V, 1 / SAMPLING_V),
    }
    fits = {}
    for name, dist in candidates.items():
        tests = [pearson([counts[b] for b in range(SAMPLING_V)], sum(counts.values()) * dist(drafts))
                 for drafts, counts in bonuses.items()]
        fits[name] = sum(c for c, _ in tests)
    best = min(fits, key=fits.get)
    drafts, counts = max(bonuses.items(), key=lambda item: sum(item[1].values()))
    m = sum(counts.values())
    looks = (f"; they follow {best} instead: {show(candidates[best](drafts), 2)} there (chi-square {fits[best]:.0f})"
             if fits[best] <= critical else "")
    raise wrong(f"over {n_rounds} rounds from the prompt {ids} with n_draft = {n_draft} and {draft_name}, "
                f"{sum(sum(c.values()) for c in bonuses.values())} kept all n_draft drafts and added a bonus token, and "
                f"those do not follow q after the n_draft drafts: chi-square {chi2:.0f} > {critical:.0f} (alpha = 0.0001, "
                f"{df} degrees of freedom). After the drafts {list(drafts)} ({m} rounds) the bonus came out "
                f"{show([counts[b] / m for b in range(SAMPLING_V)], 2)}, q there is "
                f"{show(after(q_model, drafts), 2)}{looks}",
                "step 4: the bonus is drawn from q after the text and ALL n_draft drafts, the last of the n_draft + 1 rows of "
                "step 2 (row t is q after the first t drafts)")


def reference_probabilities():
    from processors import Processor
    return lambda logits, temperature=1.0, top_k=None: Processor(temperature=temperature, top_k=top_k)(logits)


def reference_keep_draft():
    from sps import acceptance_probability
    return lambda q, p, x, r: r < acceptance_probability(q, p, x)


def reference_sps_round():
    # sps.py runs rounds inline in speculative_sample; its trace records the first round's new tokens.
    from sps import speculative_sample

    def sps_round(draft, oracle, tokens, n_draft, rng):
        stats = Stats(trace=[])
        next(speculative_sample(draft, oracle, tokens, n_draft + 1, n_draft=n_draft, rng=rng, stats=stats))  # Chen et al.'s n_draft
        return stats.trace[0].new
    return sps_round


EXERCISES = (
    Exercise("09", "ex09_temperature_top_k", "probabilities", check_probabilities, reference_probabilities),
    Exercise("11", "ex11_residual", "residual", check_residual, project("sps", "residual")),
    Exercise("12", "ex12_inverted_ratio", "keep_draft", check_keep_draft, reference_keep_draft),
    Exercise("13", "ex13_alpha", "alpha", check_alpha, lambda: sps_alpha),
    Exercise("15", "ex15_sps_round", "sps_round", check_sps_round, reference_sps_round),
)
