"""Part 3, speculative sampling (Chen et al. 2023; the SpS notes and a learner's notes on how to reject): exercise 9 (temperature and top-k),
11 (the residual), 12 (the inverted ratio) and 13 (alpha). Exercise 15, a whole round, is part3_sps_round.py."""

import math

import numpy as np

from gpt2 import softmax

from .contract import near_miss
from .running import Exercise, StillBuggy, attempt, confirmed, project, show, wrong


def sps_alpha(q, p):
    """sps.py's alpha = sum_x min(p(x), q(x)) (the one place the checkers import it)."""
    import sps
    return sps.alpha(q, p)


# ---------------------------------------------------------------------------
# Exercise 9: temperature and top-k
# ---------------------------------------------------------------------------

def check_probabilities(f):
    reference = reference_probabilities()
    for x, temperature, top_k in probability_cases():
        call = f"probabilities({show(x, 3)}, temperature={temperature}, top_k={top_k})"
        with np.errstate(all="ignore"):
            got = attempt(call, f, x.copy(), temperature, top_k, hints=(
                (IndexError, f"top_k can be larger than the vocabulary ({len(x)} tokens here): then every token "
                             "keeps its probability"),) if top_k is not None and top_k > len(x) else ())
        expected = reference(x, temperature, top_k)
        if np.allclose(got, expected, atol=1e-5, rtol=0):
            continue
        what, hint = explain_probabilities((x, temperature, top_k), got, expected, f) or (
            "not what temperature, then top-k, give", "temperature first (logits / temperature), then top-k, then softmax")
        raise wrong(f"{call} returned {show(got)}, expected {show(expected)}: {what}", hint)


def probability_cases():
    """Hand-made cases, then logits at every temperature scale from 100 down to the smallest float32: logits T * z,
    z of a few units, so that logits / T is far from one-hot at each scale, and some with a top-k."""
    logits = np.array([1.0, 3.0, 2.0, 0.0, -1.0, 2.5], np.float32)
    cases = [(logits, 1.0, None), (logits, 0.5, None), (logits, 2.0, None), (logits, 0, None),
             (logits * np.float32(30), 1e-40, None), (logits, 1.0, 2), (logits, 0.5, 3)]
    rng = np.random.default_rng(9)
    for exponent in range(2, -46, -1):
        temperature = float(10.0 ** exponent) if exponent > -45 else 1e-45
        z = rng.normal(0, 2, 8)
        cases.append(((np.float32(temperature) * z.astype(np.float32)).astype(np.float32), temperature,
                      int(rng.integers(2, 9)) if exponent % 3 == 0 else None))
    return cases


def finite(f, logits, temperature, top_k):
    """Whether f gives finite probabilities for these arguments (no f, or a crash: not known, False)."""
    try:
        with np.errstate(all="ignore"):
            return f is not None and bool(np.all(np.isfinite(f(logits.copy(), temperature, top_k))))
    except Exception:
        return False


def explain_probabilities(args, got, expected, f=None):
    """(what went wrong, where to look) for probabilities(*args) = got, where the reference gives expected."""
    x, temperature, top_k = args
    reference = reference_probabilities()
    got = np.asarray(got)
    if not np.all(np.isfinite(got)):
        if temperature == 0:
            return ("temperature 0 means greedy, all the mass on the argmax", "temperature 0 needs its own case: "
                    "dividing by it is not defined")
        if np.float32(temperature) == 0:
            return (f"{temperature} is below the smallest float32, so np.float32({temperature}) is 0, and 0 / 0 is NaN",
                    "divide by at least np.finfo(np.float32).smallest_subnormal")
        if top_k is not None and finite(f, x, temperature, None):
            return (f"the NaN comes with top_k = {top_k}: every logit was cut, and softmax of nothing but -inf is NaN",
                    "keep the logits >= the k-th largest (`>` drops the k-th itself: with top_k = 1 nothing is left)")
        if f is not None and not finite(f, x - x.max(), temperature, top_k):
            return ("the same logits shifted so that the largest is 0 give NaN too: the NaN is not softmax's overflow "
                    "but arithmetic of your own at a tiny temperature", "divide the shifted logits by the temperature "
                    "itself, (logits - max) / T: 1 / T overflows float32 to inf (and 0 * inf is NaN), and "
                    "softmax(logits) ** (1 / T) underflows to 0 (and 0 / 0 is NaN)")
        return (f"logits / {temperature} overflow float32 to +inf, and softmax of inf is NaN",
                "softmax does not change when you subtract the largest logit: do that before dividing")
    if temperature == 0:
        return "temperature 0 puts all the mass on the argmax (the first one on a tie)", "np.argmax"
    if np.array_equal(got, reference(x, 0, top_k)) and not np.allclose(expected, got, atol=1e-5, rtol=0):
        return (f"that is greedy, all the mass on the argmax; at temperature {temperature:g} softmax(logits / T) keeps "
                f"mass on the others ({show(expected)})", "only temperature 0 means greedy: a tiny temperature is "
                "still a division, with the smallest float32 as the floor")
    floors = [t for t in (10.0 ** e for e in range(-1, -45, -1)) if t > temperature and np.allclose(
        got, reference(x, t, top_k), atol=1e-5, rtol=0)]
    if floors and not np.allclose(reference(x, min(floors), top_k), expected, atol=1e-5, rtol=0):
        at = (f"temperature {max(floors):g}" if len(floors) == 1 else
              f"any temperature from {min(floors):g} to {max(floors):g}")
        return (f"that is the answer at {at}, not at {temperature:g}: the temperature is floored, and every "
                "temperature below the floor gives the floor's distribution",
                "divide by the temperature itself: a floor such as max(temperature, 1e-3) changes every temperature "
                "below it; only below the smallest float32, about 1.4e-45, is there nothing left to divide by")
    if abs(float(got.sum()) - 1) > 1e-4:
        return f"they add up to {float(got.sum()):.4g}, not 1", "renormalise after cutting tokens"
    if top_k is not None and top_k < len(x) and np.count_nonzero(got) != np.count_nonzero(expected):
        return (f"{np.count_nonzero(got)} tokens keep some mass, top_k = {top_k} should",
                "everything below the k-th largest logit gets probability 0")
    if top_k is None and temperature != 1.0 and np.argmax(x) == np.argmax(got):
        plain, top, ours = float(softmax(x).max()), float(expected.max()), float(got.max())
        direction = "sharper" if temperature < 1 else "flatter"
        return (f"at temperature {temperature:g} the distribution gets {direction} than at temperature 1 (the top "
                f"token {plain:.3g} -> {top:.3g}); yours gives it {ours:.3g}",
                "whether the logits are divided or multiplied by the temperature, and before or after softmax")
    return None


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
    # a whole residual of one subnormal float32: still a residual, however small
    pairs.append((np.array([1e-40, 0.5, 0.5], np.float32), np.array([0.0, 0.5, 0.5], np.float32)))
    return pairs


def rounded_residuals():
    """(q, p) pairs with q <= p everywhere after rounding, q != p: (q - p)+ is all zeros, and q, not p, the answer."""
    q = np.array([0.2, 0.5, 0.3], np.float32)
    p = q.copy()
    p[1] = np.nextafter(p[1], np.float32(1))
    return [(q, p)]


def check_residual(f):
    from sps import residual
    rng = np.random.default_rng(0)
    pairs = [tuple(rng.dirichlet(np.ones(12)).astype(np.float32) for _ in range(2)) for _ in range(20)]
    pairs.insert(0, (np.array([0.2, 0.5, 0.3], np.float32), np.array([0.4, 0.2, 0.4], np.float32)))
    for q, p in pairs + small_residuals() + rounded_residuals():
        call = f"residual(q={show(q, None)}, p={show(p, None)})"
        with np.errstate(all="ignore"):
            r = attempt(call, f, q.copy(), p.copy())
        expected = residual(q, p)
        fell_back_to_p = np.array_equal(r, p) and not np.array_equal(p, q)  # a hair from q, but not q
        if fell_back_to_p or not np.allclose(r, expected, atol=1e-6):
            what, hint = explain_residual((q, p), r, expected) or ("", "max(q - p, 0), renormalised to sum to 1")
            digits = 3 if show(r) != show(expected) else None  # each float32 in full where 3 digits hide the change
            raise wrong(f"{call} returned {show(r, digits)}, expected {show(expected, digits)}"
                        + (f": {what}" if what else ""), hint)


def explain_residual(args, r, expected, f=None):
    """(what went wrong, where to look) for residual(*args) = r, where expected is right."""
    q, p = args
    mass = float(np.maximum(q - p, 0).sum())
    if not np.all(np.isfinite(r)):
        return (f"(q - p)+ sums to {mass:.3g} here, and 0 / 0 is NaN" if mass == 0 else "it is not finite",
                "the case where max(q - p, 0) sums to 0: which distribution is right then? (EXERCISES.md)")
    if mass == 0:
        return ("(q - p)+ is all zeros here: return q" + ("" if np.array_equal(q, p) else ", though q and p differ (q "
                "<= p everywhere after rounding)") + (": yours is p" if np.array_equal(r, p) else ""),
                "why q, the target, is the right answer is in exercise 11's answer")
    if np.allclose(r, q, atol=1e-6) and not np.allclose(r, expected, atol=1e-6):
        # The exact identity a sampler must keep: P(emit x) = min(p, q)(x) + P(reject) * residual(x) = q(x).
        out = np.minimum(p, q) + (1 - sps_alpha(q, p)) * r
        return (f"it fell back to q, but (q - p)+ is not all zeros here: its mass is {mass:.2g}. A rejection happens "
                f"with that probability, and then one SpS step emits {show(out, None)} instead of q, off by "
                f"{float(np.abs(out - q).max()):.2g}: a biased sampler",
                "fall back to q only when max(q - p, 0) sums to exactly 0; any other test (a threshold above 0, "
                "np.isclose, the sum of q - p, which is 0 for any two distributions) replaces a real residual by q")
    with np.errstate(all="ignore"):
        kept_q = np.where(q > p, q, np.float32(0))
        if np.allclose(r, kept_q / kept_q.sum(), atol=1e-6):
            return ("that keeps q(x) itself where q > p, renormalised; the residual there is q(x) - p(x), what the "
                    "target has and the draft lacks", "max(q - p, 0): the difference, not q")
        if np.allclose(r, softmax(np.maximum(q - p, 0)), atol=1e-6):
            return ("that is softmax of (q - p)+: softmax exponentiates, and gives every token some mass",
                    "renormalise by dividing by the sum: max(q - p, 0) / its sum")
    if np.any(r[q < p] > 0):
        return ("it puts mass on tokens the draft p over-proposes (p > q)",
                "the residual is the mass the target q has and the draft p lacks: max(q - p, 0)")
    if abs(float(r.sum()) - 1) > 1e-4:
        beta = float(np.float32(1) - np.minimum(p, q).sum())
        if beta > 0 and np.allclose(r, np.maximum(q - p, 0) / np.float32(beta), rtol=1e-4, atol=0):
            return (f"it is (q - p)+ divided by 1 - sum min(p, q) = {beta:.6g}, where the mass of (q - p)+ is "
                    f"{mass:.6g}. The two are equal in exact arithmetic, not in float32, where 1 - sum min(p, q) keeps "
                    "only the digits that survive the subtraction from 1",
                    "divide by the residual's own sum, computed in float32 like the residual: then it adds up to 1 "
                    "whatever the rounding")
        if (r.sum() > 0 and not math.isclose(float(r.sum()), mass, rel_tol=1e-3)
                and np.allclose(r / r.sum(), expected, atol=1e-6)):
            return (f"it is (q - p)+ divided by {mass / float(r.sum()):.6g}, where its mass is {mass:.6g}"
                    + (" (an epsilon added to the sum?)" if r.sum() < 1 else " (a norm that is not the sum?)"),
                    "divide by the sum exactly, and handle the sum 0 apart, as its own case")
        return f"it adds up to {float(r.sum()):.4g}, not 1", "renormalise: divide by the sum"
    return None


KEEP_TESTS = [  # (a wrong test of step 3, what it is, where to look)
    (lambda q, p, x, r: r < min(1.0, p[x] / q[x] if q[x] > 0 else math.inf),
     "that is the learner's ratio inverted, min(1, p(x)/q(x))", "which of the two models proposes x more often than "
     "the target wants it, and what the test must then do: q is the target, p the draft"),
    (lambda q, p, x, r: r <= min(1.0, q[x] / p[x]), "that is the test with `<=` for `<`: at r = 0.0 it keeps a token "
     "with q(x) = 0, as 0 <= 0", "r can be exactly 0.0 (U[0, 1) includes 0): the test is strict, "
                                 "r < min(1, q(x)/p(x)), and `not r > ...` is `<=`"),
    (lambda q, p, x, r: r < min(1.0, (q[x] + 1e-12) / p[x]), "that is a test with an epsilon added to q(x) (against "
     "log(0) or 0 / 0): it keeps a token the target never emits", "q(x) = 0 needs no guard: 0 / p(x) is 0, and p(x) > "
                                                                  "0, since x was drawn from p"),
    (lambda q, p, x, r: r > min(1.0, q[x] / p[x]), "it keeps exactly when it should reject",
     "the direction of the comparison with r"),
    (lambda q, p, x, r: r < q[x], "that is r < q(x): the target's probability alone, not its ratio to the draft's",
     "the acceptance test of step 3 in Chen et al.'s letters: min(1, q(x)/p(x))"),
    (lambda q, p, x, r: q[x] >= p[x], "that keeps x whenever the target wants it at least as much as the draft, "
     "whatever r", "the test draws on r: a draft the target wants less than the draft is kept q(x)/p(x) of the time"),
    (lambda q, p, x, r: r < np.minimum(np.float32(1), q[x] / p[x]), "that compares r with min(1, q(x)/p(x)) in "
     "float32 (np.minimum, or a np.float32 1): NumPy rounds r to float32 for the comparison, and r = 1 - 2^-53 "
     "becomes 1.0", "min(1.0, q[x] / p[x]) with Python's min and 1.0, or float(...) of the ratio: a Python float "
     "compared with a Python float"),
]


def explain_keep(args, got, expected, f=None):
    """(what the test is, where to look) for keep_draft(*args) = got: the usual wrong tests that give got here and,
    f given, agree with f on KEEP_CASES too (r = 0.0, and 20 values spread over [0, 1))."""
    points = [args] + ([(q, p, int(x), float(r)) for q, p in KEEP_CASES for x in np.flatnonzero(p)
                        for r in [0.0, *((np.arange(20) + 0.5) / 20)]] if f is not None else [])
    with np.errstate(all="ignore"):
        try:
            answers = [bool(got)] + [bool(f(q.copy(), p.copy(), x, r)) for q, p, x, r in points[1:]]
        except Exception:  # the answer fails elsewhere too: judge it on this point alone
            points, answers = points[:1], [bool(got)]
        matches = [(what, hint) for test, what, hint in KEEP_TESTS
                   if all(bool(test(*point)) == answer for point, answer in zip(points, answers))]
    if matches:
        return "; or ".join(what for what, _ in matches), "; or ".join(hint for _, hint in matches)
    if f is None:
        return None
    from sps import acceptance_probability
    q, p, x, r = args
    grid = (np.arange(400) + 0.5) / 400
    try:
        with np.errstate(all="ignore"):
            share = float(np.mean([bool(f(q.copy(), p.copy(), x, float(u))) for u in grid]))
    except Exception:
        return None
    rate = acceptance_probability(q, p, x)
    if abs(share - rate) > 0.01:  # not the boundary alone: the test keeps x at another rate
        return (f"your test keeps x for {share:.0%} of r in [0, 1), where Algorithm 2 keeps it with probability "
                f"min(1, q(x)/p(x)) = {rate:.0%} (q(x) = {q[x]:.3g}, p(x) = {p[x]:.3g})",
                "the acceptance test of step 3 in Chen et al.'s letters: r < min(1, q(x)/p(x)), q the target")
    return None


def emitted(q, p, keep):
    """P(one SpS step emits x) for a draft x ~ p kept with probability keep[x], else resampled from the residual."""
    from sps import residual
    keep = np.asarray(keep, np.float32)
    return p * keep + (1 - float(np.sum(p * keep))) * residual(q, p)


KEEP_CASES = [(np.array([0.3, 0.3, 0.4], np.float32), np.array([0.6, 0.3, 0.1], np.float32)),
              (np.array([0.0, 0.2, 0.8], np.float32), np.array([0.5, 0.5, 0.0], np.float32)),
              # a draft the draft model gave a tiny probability: p(x) > 0 is all there is, min(1, q/p) = 0.1
              (np.array([1e-31, 0.4, 0.6], np.float32), np.array([1e-30, 0.6, 0.4], np.float32))]


def kept_shares(f):
    """[(p, q, the drafts x, the share of r in [0, 1) for which f keeps each)] on KEEP_CASES, r spread evenly."""
    grid = (np.arange(400) + 0.5) / 400
    seen = []
    for q, p in KEEP_CASES:
        kept = []
        for x in np.flatnonzero(p):
            call = f"keep_draft(q={show(q)}, p={show(p)}, x={x}, r)"
            with np.errstate(all="ignore"):
                kept.append(float(np.mean([bool(attempt(f"{call} with r = {r:.4f}", f, q.copy(), p.copy(), int(x),
                                                        float(r), hint=(
                    f"q(x) = 0 here: a token the target never emits, which the test must never keep (min(1, 0 / "
                    f"p(x)) = 0)" if q[x] == 0 else None))) for r in grid])))
        seen.append((p, q, np.flatnonzero(p), kept))
    return seen


def keep_failure(seen):
    """(what went wrong, on the first draft kept at another rate than min(1, q/p)), or None."""
    from sps import acceptance_probability
    for p, q, xs, kept in seen:
        expected = [acceptance_probability(q, p, x) for x in xs]
        bad = next((i for i, (k, e) in enumerate(zip(kept, expected)) if abs(k - e) > 0.01), None)
        if bad is None:
            continue
        x = xs[bad]
        keep = np.zeros_like(p)
        keep[xs] = kept
        return (f"for draft token x = {x} with p(x) = {p[x]:.2g} (draft) and q(x) = {q[x]:.2g} (target), keep_draft "
                f"keeps it for {kept[bad]:.0%} of r in [0, 1); Algorithm 2 keeps it with probability "
                f"min(1, q(x)/p(x)) = {expected[bad]:.0%}. With your test one step emits the distribution "
                f"{show(emitted(q, p, keep), 2)}, not the target's q = {show(q, 2)}")
    return None


def shipped_keep_draft(f):
    """StillBuggy if f keeps each draft with probability min(1, p/q): the learner's ratio, as shipped."""
    seen = kept_shares(f)
    if all(abs(k - min(1.0, p[x] / q[x] if q[x] > 0 else math.inf)) < 0.01 for p, q, xs, kept in seen
           for x, k in zip(xs, kept)):
        raise StillBuggy(wrong(keep_failure(seen), "which of the two models proposes x more often than the target "
                                                   "wants it, and what the test must then do").args[0])


def check_keep_draft(f):
    """keep_draft(q, p, x, r): q the target's distribution, p the draft's, r ~ U[0, 1)."""
    from sps import acceptance_probability
    seen = kept_shares(f)
    what = keep_failure(seen)
    if what is None:
        return
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
            got = attempt(call, f, q.copy(), p.copy())
        expected = sps_alpha(q, p)
        if abs(got - expected) < 1e-5:
            continue
        n = 20000
        kept = sum(rng.random() < acceptance_probability(q, p, sample(p, rng)) for _ in range(n))
        what, hint = near_miss(got, expected) or explain_alpha((q, p), got, expected, f) or (
            "", "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)")
        said = f"{got:.4g}, expected {expected:.4g}"
        if f"{got:.4g}" == f"{expected:.4g}":
            said = f"{got!r}, expected {expected!r}"
        raise wrong(f"{call} returned {said}: one simulated SpS step (x ~ p, kept when "
                    f"r < min(1, q(x)/p(x))), run {n} times, kept the draft {kept / n:.1%} of the time"
                    + (f"; {what}" if what else ""), hint)


ALPHAS = [(np.array([0.2, 0.3, 0.5], np.float32), np.array([0.5, 0.3, 0.2], np.float32)),
          (np.array([0.1, 0.6, 0.3, 0.0], np.float32), np.array([0.4, 0.4, 0.1, 0.1], np.float32)),
          (np.array([0.7, 0.2, 0.1], np.float32), np.array([0.1, 0.1, 0.8], np.float32))]  # where a diagnosis must hold too


def explain_alpha(args, got, expected, f=None):
    """(what the figure is, where to look) for alpha(*args) = got: the usual wrong formulas that give it here and,
    f given, on ALPHAS too."""
    q, p = args
    both_zero = np.flatnonzero((p == 0) & (q == 0)).tolist()
    if math.isnan(got) and both_zero:
        return (f"at token(s) {both_zero} p = q = 0 (after top-k, every token outside the top k has probability 0 in "
                "both), and 0 / 0 is NaN there", "a token neither model gives any probability adds nothing to alpha: "
                                                 "sum_x min(p(x), q(x)) needs no division")
    formulas = [
        (lambda q, p: float(np.dot(p, q)), "sum p(x) q(x) is the chance that two independent draws, one from each, "
         "agree", "P(keep) = sum over x of P(draw x) * P(keep x | x drawn)"),
        (lambda q, p: 1 - float(np.abs(p - q).sum()), "1 - sum |p - q| counts every difference twice: the total "
         "variation distance is half of sum |p - q|", "how often a draft is kept, given what the test keeps"),
        (lambda q, p: sps_alpha(q, p) / len(p), f"that is alpha divided by the {len(p)} tokens: a mean over the "
         "vocabulary, not a sum", "P(keep) adds up the chances of the tokens, one by one: a sum, not a mean"),
        (lambda q, p: float(np.sum(np.minimum(1, q[p > 0] / p[p > 0]))), "that is sum_x min(1, q(x)/p(x)), each "
         "token's chance to be kept, unweighted by how often the draft proposes it", "P(keep) = sum over x of "
                                                                                       "P(draw x) * P(keep x | x drawn)"),
    ]
    with np.errstate(all="ignore"):
        matches = [(what, hint) for formula, what, hint in formulas
                   if abs(got - formula(q, p)) < 1e-5 and confirmed(f, formula, ALPHAS, lambda a, b: abs(a - b) < 1e-5)]
    if matches:
        return "; or ".join(what for what, _ in matches), "; or ".join(hint for _, hint in matches)
    if math.isnan(got):
        return None
    if 1e-5 < abs(got - expected) < 0.02:
        return (f"off by {abs(got - expected):.2g}, the size of a sampling error", "alpha in closed form: a sum over "
                "the tokens, sum_x min(p(x), q(x)), with no sampling and so no sampling error")
    return (f"alpha here is sum_x min(p(x), q(x)) = {expected:.4g}", "P(keep) = sum over x of P(draw x) * P(keep x | "
            "x drawn) = sum_x p(x) min(1, q(x)/p(x))")


def reference_probabilities():
    from processors import Processor
    return lambda logits, temperature=1.0, top_k=None: Processor(temperature=temperature, top_k=top_k)(logits)


def reference_keep_draft():
    from sps import acceptance_probability
    return lambda q, p, x, r: r < acceptance_probability(q, p, x)


EXERCISES = (
    Exercise("09", "ex09_temperature_top_k", "probabilities", check_probabilities, reference_probabilities),
    Exercise("11", "ex11_residual", "residual", check_residual, project("sps", "residual")),
    Exercise("12", "ex12_inverted_ratio", "keep_draft", check_keep_draft, reference_keep_draft, shipped_keep_draft),
    Exercise("13", "ex13_alpha", "alpha", check_alpha, lambda: sps_alpha),
)
