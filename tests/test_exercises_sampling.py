"""The exercises' checkers, part 3: sampling (exercises 9, 11-13 and 15): each passes the project's own function and
fails plausible wrong answers with a message naming what went wrong. The checkers' other tests: test_exercises.py.
The wrong answers below give hints away: read them after the exercises.
"""

import numpy as np
import pytest

from gpt2 import softmax
from sps import residual, sample
from test_exercises import fails

pytestmark = pytest.mark.slow  # as test_exercises.py is (conftest.py's SLOW_FILES)


# --- exercise 9: temperature and top-k ----------------------------------------------

def processed(scale=lambda logits, t: logits / np.float32(t), zero=True, renormalise=True, greedy_dtype=np.float32):
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0 and zero:
            probs = np.zeros(len(logits), greedy_dtype)
            probs[np.argmax(logits)] = 1
            return probs
        probs = softmax(scale(logits, temperature))
        if top_k is not None and top_k < len(logits):
            probs = np.where(logits >= np.sort(logits)[-top_k], probs, np.float32(0))
            if renormalise:
                probs /= probs.sum()
        return probs
    return answer


def stable(logits, t):
    return (logits - logits.max()) / max(np.float32(t), np.finfo(np.float32).smallest_subnormal)


def test_temperature_multiplied():
    fails("09", processed(scale=lambda logits, t: logits * np.float32(t)), "gets sharper than at temperature 1",
          "divided or multiplied")


def test_temperature_zero_divided_by():
    fails("09", processed(zero=False), "temperature 0 means greedy")


def test_tiny_temperature_divided_before_the_max_is_subtracted():
    fails("09", processed(), r"temperature=1e-40.*overflow float32 to \+inf", "subtract the largest logit")


def test_top_k_not_renormalised():
    fails("09", processed(scale=lambda logits, t: (logits - logits.max()) / np.float32(t), renormalise=False),
          r"top_k=2\) returned .* add up to 0.\d+, not 1", "renormalise")


def test_a_temperature_below_the_smallest_float32():
    fails("09", processed(scale=lambda logits, t: (logits - logits.max()) / np.float32(t)),
          r"temperature=1e-50.*np.float32\(1e-50\) is 0", "smallest_subnormal")


def test_temperature_applied_to_the_callers_logits():
    def answer(logits, temperature=1.0, top_k=None):
        logits -= logits.max()  # in place: the caller's logits change
        return processed(scale=lambda x, t: x / np.float32(max(t, 1e-45)))(logits, temperature, top_k)
    fails("09", answer, r"changed its argument logits: \[1, 3, 2, 0, -1, 2.5\] became \[-2, 0, -1", "work on a copy")


def test_greedy_in_float64():
    fails("09", processed(scale=lambda logits, t: (logits - logits.max()) / np.float32(t), greedy_dtype=np.float64),
          "returned float64 values, expected float32")


def test_top_k_that_sets_the_cut_logits_to_zero():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return processed()(logits, 0)
        x = stable(logits, temperature)
        if top_k is not None and top_k < len(x):
            x = np.where(x >= np.sort(x)[-top_k], x, np.float32(0))  # 0 is a logit like any other, not -inf
        return softmax(x)
    fails("09", answer, r"top_k=2\) returned .*: 6 tokens keep some mass, top_k = 2 should", "probability 0")


def test_temperature_zero_as_the_argmax_itself():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return int(np.argmax(logits))  # the greedy token, not a distribution
        return processed(scale=stable)(logits, temperature, top_k)
    fails("09", answer, r"temperature=0, top_k=None\) returned shape \(\), expected \(6,\)", "one probability per token")


def test_top_k_larger_than_the_vocabulary():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return processed()(logits, 0)
        probs = softmax(stable(logits, temperature))
        if top_k is not None:  # no test for top_k >= V: np.sort(logits)[-10] of 6 logits
            probs = np.where(logits >= np.sort(logits)[-top_k], probs, np.float32(0))
            probs /= probs.sum()
        return probs
    fails("09", answer, r"top_k=10\) raised IndexError", "larger than the vocabulary")


# --- exercises 11-13: residual, the inverted ratio, alpha ------------------------------

def test_residual_not_renormalised():
    fails("11", lambda q, p: np.maximum(q - p, 0), r"adds up to 0.\d+, not 1", "renormalise")


def test_residual_that_divides_by_zero():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / r.sum()
    fails("11", answer, "0 / 0 is NaN")


def test_residual_with_p_and_q_swapped():
    fails("11", lambda q, p: residual(p, q), "over-proposes")


def residual_falling_back_below(threshold):
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / r.sum() if r.sum() > threshold else q
    return answer


def test_residual_that_falls_back_to_q_below_a_mass_of_1e_3():
    # The biased sampler: a residual of mass 1e-4 replaced by q. One SpS step then emits
    # min(p, q) + 1e-4 * q, not q: off by 5e-5 here, the size of bias the checker must see.
    fails("11", residual_falling_back_below(1e-3), r"residual\(q=\[0.5, 0.3, 0.2\], p=\[0.5001, 0.29995, 0.19995\d*\]\) returned .*fell back to q",
          r"its mass is 0.0001\b", r"off by 5e-05: a biased sampler", "exactly 0")


def test_residual_that_falls_back_to_q_when_the_mass_is_close_to_0():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return q if np.isclose(r.sum(), 0) else r / r.sum()
    fails("11", answer, r"fell back to q, .* its mass is 9.3e-10", "np.isclose")


def test_residual_with_a_floor_against_0_over_0():
    fails("11", lambda q, p: np.maximum(q - p, np.float32(1e-10)) / np.maximum(q - p, np.float32(1e-10)).sum(),
          r"returned \[9.\d+e-05, 0.5, 0.5\], expected \[0, 0.5, 0.5\]: it puts mass on tokens the draft p "
          "over-proposes", r"max\(q - p, 0\)")


def test_residual_computed_in_the_callers_q():
    def answer(q, p):
        q -= p  # in place: the caller's q is gone, and SpS samples from it next
        np.maximum(q, 0, out=q)
        return q / q.sum() if q.sum() > 0 else q + p
    fails("11", answer, r"changed its argument q: \[0.2, 0.5, 0.3\] became", "work on a copy")


def test_residual_with_an_epsilon_in_the_sum():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / (r.sum() + np.float32(1e-9)) if r.sum() > 0 else q  # "never divide by 0"
    fails("11", answer, r"p=\[0.60000104, 0.2499995, 0.1499995\]\) returned \[0, 0.5, 0.5\], expected \[0, 0.5, 0.5\]: "
          r"it is \(q - p\)\+ divided by 1.01\d*e-06, where its mass is 1.01\d*e-06 \(an epsilon", "divide by the sum exactly")


def test_residual_divided_by_one_minus_alpha():
    def answer(q, p):  # exercise 10's beta = 1 - sum min(p, q): the mass of (q - p)+, in exact arithmetic
        beta = 1 - np.minimum(p, q).sum()
        return np.maximum(q - p, 0) / beta if beta > 0 else q
    fails("11", answer, r"it is \(q - p\)\+ divided by 1 - sum min\(p, q\) = [\d.e-]+, where the mass of \(q - p\)\+ is "
          r"[\d.e-]+\. The two are equal in exact arithmetic, not in float32", "the residual's own sum")


def test_residual_uniform_when_there_is_no_mass():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / r.sum() if r.sum() > 0 else np.full(len(q), 1 / len(q), np.float32)
    fails("11", answer, r"residual\(q=\[0.2, 0.5, 0.3\], p=q\) returned \[0.333, 0.333, 0.333\], expected q",
          "exercise 11's answer")


def test_the_learners_ratio_as_shipped_is_not_solved_yet():
    def answer(q, p, x, r):
        with np.errstate(divide="ignore"):
            return not r > p[x] / q[x]
    fails("12", answer, r"keeps it for 100% of r .* min\(1, q\(x\)/p\(x\)\) = 50%", r"emits the distribution \[0.6",
          unsolved=True)


def test_a_reversed_acceptance_test():
    fails("12", lambda q, p, x, r: r > min(1, q[x] / p[x]), "keeps exactly when it should reject")


def test_keep_with_the_targets_probability():
    fails("12", lambda q, p, x, r: r < q[x], r"keeps it for 30% of r .* min\(1, q\(x\)/p\(x\)\) = 50%",
          "step 3 in Chen et al.'s letters")


def test_the_learners_test_with_its_not_dropped():
    def answer(q, p, x, r):  # "rand(0, 1) > p / q" read as the test to keep
        with np.errstate(divide="ignore"):
            return r > p[x] / q[x]
    fails("12", answer, r"keeps it for 0% of r .* = 50%. With your test one step emits the distribution \[0, 0, 1\]",
          "q is the target, p the draft")


def test_alpha_as_a_dot_product():
    fails("13", lambda q, p: float(np.dot(p, q)), "kept the draft", "two independent draws")


def test_alpha_without_the_half():
    fails("13", lambda q, p: 1 - float(np.abs(p - q).sum()), "counts every difference twice")


def test_alpha_unweighted():
    fails("13", lambda q, p: float(sum(min(1, q[x] / p[x]) for x in range(len(p)) if p[x] > 0)),
          r"simulated SpS step .* kept the draft", r"P\(draw x\) \* P\(keep x \| x drawn\)")


def test_alpha_that_divides_zero_by_zero():
    # right wherever p > 0; after top-k, p = q = 0 outside the top k, and 0 * min(1, 0 / 0) is NaN
    fails("13", lambda q, p: float(np.sum(p * np.minimum(1, q / p))),
          r"alpha\(q=\[0.3, 0.7, 0, 0, 0\], p=\[0.6, 0.4, 0, 0, 0\]\) returned nan, expected 0.7: at token\(s\) \[2, 3, 4\] "
          "p = q = 0", "needs no division")


def test_alpha_weighted_by_the_target():
    fails("13", lambda q, p: float(np.sum(q * np.minimum(1, p / q))), r"returned nan, expected 0.7: at token\(s\) "
          r"\[2, 3, 4\] p = q = 0 \(after top-k")


def test_alpha_left_as_an_array():
    fails("13", lambda q, p: np.minimum(p, q), r"alpha\(q=\[0.2, 0.3, 0.5\], p=\[0.5, 0.3, 0.2\]\) returned "
          r"array\(\[0.2, 0.3, 0.2\], dtype=float32\), not a number", "what the function returns on every path")


def test_alpha_as_a_mean():
    fails("13", lambda q, p: float(np.minimum(p, q).mean()), r"returned 0.2333, expected 0.7: .* alpha divided by the "
          "3 tokens: a mean over the vocabulary", "a sum, not a mean")


def test_keep_whenever_the_target_likes_it_as_much():
    fails("12", lambda q, p, x, r: q[x] >= p[x], r"keeps it for 0% of r in \[0, 1\); Algorithm 2 keeps it with probability "
          r"min\(1, q\(x\)/p\(x\)\) = 50%", "step 3")


def test_keep_in_log_space():
    import math

    def answer(q, p, x, r):  # "ratios are safer as a difference of logs": log(0) is not
        return r < min(1.0, math.exp(math.log(q[x]) - math.log(p[x])))
    fails("12", answer, r"keep_draft\(q=\[0, 0.2, 0.8\], p=\[0.5, 0.5, 0\], x=0, r\) with r = 0.001\d raised ValueError: "
          "math domain error", r"q\(x\) = 0 here")


def test_keep_only_what_the_draft_over_proposes():
    fails("12", lambda q, p, x, r: r < q[x] / p[x] if p[x] > q[x] else False,
          r"q\(x\) = 0.3 \(target\), keep_draft keeps it for 0% of r in \[0, 1\); Algorithm 2 keeps it with probability "
          r"min\(1, q\(x\)/p\(x\)\) = 100%", "q is the target, p the draft")

# --- exercise 15: a round of Algorithm 2 ----------------------------------------------

def the_bonus(models, tokens, drafted, q, p, rng):
    """Step 4 as Algorithm 2 has it: q's last row, after the text and all n_draft drafts."""
    return [sample(q[len(drafted)], rng)]


def sps_round(inverted=False, bonus=the_bonus, resample=residual, fixed_K=None, reseed=False, one_r=False):
    def answer(draft, oracle, tokens, n_draft, rng):
        n_draft = fixed_K or n_draft
        rng = np.random.default_rng(0) if reseed else rng
        drafted, p = [], []
        for _ in range(n_draft):
            p.append(softmax(draft.forward(tokens + drafted)[-1]))
            drafted.append(sample(p[-1], rng))
        q = softmax(oracle.forward(tokens + drafted)[len(tokens) - 1:])
        r = rng.random()
        for t, x in enumerate(drafted):
            ratio = p[t][x] / q[t][x] if inverted else q[t][x] / p[t][x]
            if not (r if one_r else rng.random()) < min(1, ratio):
                return drafted[:t] + [sample(resample(q[t], p[t]), rng)]
        return drafted + bonus((draft, oracle), tokens, drafted, q, p, rng)
    return answer


def test_a_round_with_the_ratio_inverted():
    with np.errstate(divide="ignore"):
        fails("15", sps_round(inverted=True), r"kept its first draft in \d+.\d% .* ratio inverted", "step 3")


def test_a_round_without_the_bonus_token():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: []), r"0 of your rounds added n_draft \+ 1 = 3 "
          "tokens", "step 4")


def test_a_round_that_resamples_from_q():
    fails("15", sps_round(resample=lambda q, p: q), "do not follow the target's distribution: chi-square",
          "what each draw samples from")


def test_a_round_that_always_drafts_two():
    fails("15", sps_round(fixed_K=2), r"n_draft=1, rng\) returned \[\d+, \d+, \d+\]: a round adds 1 to n_draft \+ 1 = 2",
          "n_draft = 1, 2 and 3")


# The bonus token drawn from the wrong distribution: every one fails the bonus's own test, in rounds with the
# draft p (n_draft = 1) or with a draft close to the target (n_draft = 2, where the bonus comes in most rounds).

BONUS = r"\d+ kept all n_draft drafts and added a bonus token, and those do not follow q after the n_draft drafts: chi-square \d+ > \d+"


def test_a_round_whose_bonus_is_uniform():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [int(rng.integers(len(q[0])))]),
          BONUS, "they follow the uniform distribution over the 6 tokens instead", r"ALL n_draft drafts, the last of the n_draft \+ 1")


def test_a_round_whose_bonus_comes_from_the_row_before():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [sample(q[len(drafted) - 1], rng)]),
          r"with n_draft = 1 and the draft p, " + BONUS, "they follow q one row early, after the text alone instead")


def test_a_round_whose_bonus_comes_from_row_one():
    # q[1]: the right row when n_draft = 1, one row early when n_draft = 2
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [sample(q[1], rng)]),
          r"with n_draft = 2 and a draft close to the target q, " + BONUS,
          "they follow q one row early, after the text and the first draft instead")


def test_a_round_whose_bonus_comes_from_the_row_after():
    def one_row_late(models, tokens, drafted, q, p, rng):
        after = tokens + drafted + [sample(q[len(drafted)], rng)]
        return [sample(softmax(models[1].forward(after)[-1]), rng)]
    fails("15", sps_round(bonus=one_row_late), BONUS, "they follow q one row late, after the drafts and one more token")


def test_a_round_whose_bonus_comes_from_the_drafts_last_p():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [sample(p[-1], rng)]), BONUS,
          "they follow the draft's p of the last draft, after the text alone instead")


def test_a_round_whose_bonus_comes_from_the_draft_after_its_drafts():
    def from_the_draft(models, tokens, drafted, q, p, rng):
        return [sample(softmax(models[0].forward(tokens + drafted)[-1]), rng)]
    fails("15", sps_round(bonus=from_the_draft), BONUS, "they follow the draft's p after the text and the draft instead")


def test_a_round_with_a_generator_of_its_own():
    fails("15", sps_round(reseed=True), r"your 300 rounds from the prompt \[1, 4\] with n_draft = 2 all returned \[\d+(, \d+)*\]: "
          "nothing in them is random", "the rng the round is given")


def test_a_round_that_resamples_the_residuals_most_likely_token():
    fails("15", sps_round(resample=lambda q, p: np.eye(len(q), dtype=np.float32)[np.argmax(residual(q, p))]),
          r"the first 3 tokens do not follow the target's distribution: chi-square \d+ > \d+", r"the resample from \(q - p\)\+")


def test_a_round_with_one_r_for_every_draft():
    fails("15", sps_round(one_r=True), r"with n_draft = 2, \d+ of your rounds added n_draft \+ 1 = 3 tokens \(\d+.\d%\); all n_draft drafts "
          r"are kept with probability 15.9% here", "an r of its own")
