"""The checkers of part 3's exercises 9, 11, 12 and 13: each wrong answer below fails with the message written for
the rule it breaks (tests/wrong_answers.py). Exercise 15's are in test_exercises_sps_round.py. The answers give hints
away: read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from gpt2 import softmax  # noqa: E402
from sps import residual  # noqa: E402
from wrong_answers import fails


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
    fails("09", processed(), r"probabilities\(\[30, 90, 60, 0, -30, 75\], 1e-40, None\) returned \[nan, .*: a tiny "
          r"temperature over ordinary logits: .*; logits / 1e-40 overflow float32 to \+inf", "subtract the largest logit")


def test_top_k_not_renormalised():
    fails("09", processed(scale=stable, renormalise=False), r"probabilities\(\[1, 3, 2, 0, -1, 2.5\], 0.7, 1\) returned "
          r"\[0, 0.554, 0, 0, 0, 0\], expected \[0, 1, 0, 0, 0, 0\]: top_k = 1: .*; they add up to 0.5544, not 1", "renormalise")


def test_a_temperature_below_the_smallest_float32():
    fails("09", processed(scale=lambda logits, t: (logits - logits.max()) / np.float32(t)),
          r"probabilities\(\[1, 3, 2, 0, -1, 2.5\], 1e-50, None\) returned \[nan, .*: a temperature below the smallest "
          r"float32: np.float32\(1e-50\) is 0", "smallest_subnormal")


def test_temperature_applied_to_the_callers_logits():
    def answer(logits, temperature=1.0, top_k=None):
        logits -= logits.max()  # in place: the caller's logits change
        return processed(scale=lambda x, t: x / np.float32(max(t, 1e-45)))(logits, temperature, top_k)
    fails("09", answer, r"changed its argument logits: \[1, 3, 2, 0, -1, 2.5\] became \[-2, 0, -1", "work on a copy")


def test_greedy_in_float64():
    fails("09", processed(scale=stable, greedy_dtype=np.float64),
          r"probabilities\(\[1, 3, 3, 0\], 0, None\) returned \[0, 1, 0, 0\], a NumPy array of float64; the "
          r"text promises float32 \(the probabilities\)", "which operation brings in another dtype")


def test_top_k_that_sets_the_cut_logits_to_zero():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return processed()(logits, 0)
        x = stable(logits, temperature)
        if top_k is not None and top_k < len(x):
            x = np.where(x >= np.sort(x)[-top_k], x, np.float32(0))  # 0 is a logit like any other, not -inf
        return softmax(x)
    fails("09", answer, r"0.7, 1\) returned \[0.167, .*\]: top_k = 1: .*; 6 tokens keep some mass, top_k = 1 should",
          "probability 0")


def test_temperature_zero_as_the_argmax_itself():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return int(np.argmax(logits))  # the greedy token, not a distribution
        return processed(scale=stable)(logits, temperature, top_k)
    fails("09", answer, r"probabilities\(\[1, 3, 3, 0\], 0, None\) returned 1, an int, not an array; the text promises "
          r"a float32 array of shape \(4,\) \(the probabilities\)", "one probability per token")


def test_top_k_larger_than_the_vocabulary():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return processed()(logits, 0)
        probs = softmax(stable(logits, temperature))
        if top_k is not None:  # no test for top_k >= V: np.sort(logits)[-10] of 6 logits
            probs = np.where(logits >= np.sort(logits)[-top_k], probs, np.float32(0))
            probs /= probs.sum()
        return probs
    fails("09", answer, r"probabilities\(\[1, 3, 2, 0, -1, 2.5\], 1.0, 10\) raised IndexError", "larger than the vocabulary")


# --- exercises 11-13: residual, the inverted ratio, alpha ------------------------------

def test_residual_not_renormalised():
    fails("11", lambda q, p: np.maximum(q - p, 0), r"residual\(\[0, 0.5, 0.5\], \[0.5, 0.5, 0\]\) returned \[0, 0, 0.5\], "
          r"expected \[0, 0, 1\]: zero probabilities in both; it adds up to 0.5, not 1", "renormalise")


def test_residual_that_divides_by_zero():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / r.sum()
    fails("11", answer, r"residual\(\[0.2, 0.5, 0.3\], \[0.2, 0.5, 0.3\]\) returned \[nan, nan, nan\], .*: q = p: .*; "
          r"\(q - p\)\+ sums to 0 here, and 0 / 0 is NaN", "which distribution is right then")


def test_residual_with_p_and_q_swapped():
    fails("11", lambda q, p: residual(p, q), r"residual\(\[0, 0.5, 0.5\], \[0.5, 0.5, 0\]\) returned \[1, 0, 0\], .*; it "
          "puts mass on tokens the draft p over-proposes", r"max\(q - p, 0\)")


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
          # its floor's mass is a hair where there is a residual, and all there is where q = p
          r"residual\(\[0.2, 0.5, 0.3\], \[0.2, 0.5, 0.3\]\) returned \[0.333, 0.333, 0.333\], .*: q = p: .*; \(q - "
          r"p\)\+ is all zeros here: return q", "exercise 11's answer")


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
    # the two differ past 3 digits: the message shows each float32 in full
    fails("11", answer, r"p=\[0.60000104, 0.2499995, 0.1499995\]\) returned \[0.0, 0.4995\d*, 0.4995\d*\], expected "
          r"\[0.0, 0.5, 0.5\]: it is \(q - p\)\+ divided by 1.01\d*e-06, where its mass is 1.01\d*e-06 \(an epsilon",
          "divide by the sum exactly")


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
    fails("11", answer, r"residual\(\[0.2, 0.5, 0.3\], \[0.2, 0.5, 0.3\]\) returned \[0.333, 0.333, 0.333\], expected "
          r"\[0.2, 0.5, 0.3\]: q = p: .*; \(q - p\)\+ is all zeros here: return q", "exercise 11's answer")


def test_the_learners_ratio_as_shipped_is_not_solved_yet():
    def answer(q, p, x, r):
        with np.errstate(divide="ignore"):
            return not r > p[x] / q[x]
    fails("12", answer, r"keeps it for 100% of r .* min\(1, q\(x\)/p\(x\)\) = 50%", r"emits the distribution \[0.6",
          unsolved=True)


def test_a_reversed_acceptance_test():
    fails("12", lambda q, p, x, r: r > min(1, q[x] / p[x]), "keeps exactly when it should reject")


def test_keep_with_the_targets_probability():
    fails("12", lambda q, p, x, r: r < q[x], r"keep_draft\(\[0.3, 0.7\], \[0.3, 0.7\], 1, 0.9999999999999999\) returned "
          r"False, expected True: q\(x\) = p\(x\), r just below 1: .*; that is r < q\(x\): the target's probability "
          "alone", "step 3 in Chen et al.'s letters")


def test_the_learners_test_with_its_not_dropped():
    def answer(q, p, x, r):  # "rand(0, 1) > p / q" read as the test to keep
        with np.errstate(divide="ignore"):
            return r > p[x] / q[x]
    fails("12", answer, r"keep_draft\(\[0.001, 0.5, 0.499\], \[0.5, 0.5, 0\], 0, 0.0\) returned False, expected True: "
          r"r = 0.0 and q\(x\) small but not 0", r"min\(1, q\(x\)/p\(x\)\) is above 0 here")


def test_alpha_as_a_dot_product():
    fails("13", lambda q, p: float(np.dot(p, q)), r"alpha\(\[0.2, 0.5, 0.3\], \[0.2, 0.5, 0.3\]\) returned 0.38, "
          r"expected 1.0: p = q: every draft is kept; sum p\(x\) q\(x\) is the chance that two independent draws")


def test_alpha_without_the_half():
    fails("13", lambda q, p: 1 - float(np.abs(p - q).sum()), r"alpha\(\[1, 0\], \[0, 1\]\) returned -1.0, expected "
          "0.0: p and q certain of different tokens: .*; 1 - sum |p - q| counts every difference twice")


def test_alpha_unweighted():
    fails("13", lambda q, p: float(sum(min(1, q[x] / p[x]) for x in range(len(p)) if p[x] > 0)),
          r"returned 3.0, expected 1.0: p = q: every draft is kept; that is sum_x min\(1, q\(x\)/p\(x\)\), each token's "
          "chance to be kept, unweighted", r"P\(draw x\) \* P\(keep x \| x drawn\)")


def test_alpha_that_divides_zero_by_zero():
    # right wherever p > 0; after top-k, p = q = 0 outside the top k, and 0 * min(1, 0 / 0) is NaN
    fails("13", lambda q, p: float(np.sum(p * np.minimum(1, q / p))),
          r"alpha\(\[0.3, 0.7, 0, 0, 0\], \[0.6, 0.4, 0, 0, 0\]\) returned nan, expected 0.7: after top-k: .*; at token\(s\) "
          r"\[2, 3, 4\] p = q = 0", "needs no division")


def test_alpha_weighted_by_the_target():
    fails("13", lambda q, p: float(np.sum(q * np.minimum(1, p / q))), r"returned nan, expected 0.7: after top-k: .*; at "
          r"token\(s\) \[2, 3, 4\] p = q = 0 \(after top-k")


def test_alpha_left_as_an_array():
    fails("13", lambda q, p: np.minimum(p, q), r"alpha\(\[0.2, 0.3, 0.5\], \[0.5, 0.3, 0.2\]\) returned "
          r"\[0.2, 0.3, 0.2\], not a number; alpha is a float", "what the function returns on every path")


def test_alpha_as_a_mean():
    fails("13", lambda q, p: float(np.minimum(p, q).mean()), r"returned 0.333333, expected 1.0: p = q: .*; that is alpha "
          "divided by the 3 tokens: a mean over the vocabulary", "a sum, not a mean")



def test_keep_whenever_the_target_likes_it_as_much():
    fails("12", lambda q, p, x, r: q[x] >= p[x], r"keep_draft\(\[0.001, 0.5, 0.499\], \[0.5, 0.5, 0\], 0, 0.0\) returned "
          "False, expected True: .*; that keeps x whenever the target wants it at least as much as the draft, whatever r",
          "the test draws on r")


def test_keep_in_log_space():
    import math

    def answer(q, p, x, r):  # "ratios are safer as a difference of logs": log(0) is not
        return r < min(1.0, math.exp(math.log(q[x]) - math.log(p[x])))
    fails("12", answer, r"keep_draft\(q=\[0, 0.2, 0.8\], p=\[0.5, 0.5, 0\], x=0, r\) with r = 0.001\d raised ValueError: "
          "math domain error", r"q\(x\) = 0 here")


def test_keep_only_what_the_draft_over_proposes():
    fails("12", lambda q, p, x, r: r < q[x] / p[x] if p[x] > q[x] else False,
          r"keep_draft\(\[0.3, 0.7\], \[0.3, 0.7\], 1, 0.9999999999999999\) returned False, expected True: q\(x\) = p\(x\), "
          r"r just below 1: min\(1, q/p\) = 1 keeps every r; your test keeps x for 0% of r in \[0, 1\), where Algorithm "
          r"2 keeps it with probability min\(1, q\(x\)/p\(x\)\) = 100%", r"r < min\(1, q\(x\)/p\(x\)\)")



# --- new answers --------------------------------------------------------------------------------------

def test_top_k_that_keeps_one_more():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            return processed()(logits, 0)
        x = stable(logits, temperature)
        if top_k is not None and top_k < len(x):
            x = np.where(x >= np.sort(x)[-top_k - 1], x, np.float32(-np.inf))  # the k-th largest counted from 0
        return softmax(x)
    fails("09", answer, r"probabilities\(\[1, 3, 2, 0, -1, 2.5\], 0.7, 1\) returned \[0, 0.\d+, 0, 0, 0, 0.\d+\], .*: "
          "top_k = 1: .*; 2 tokens keep some mass, top_k = 1 should", "below the k-th largest logit")


def test_temperature_zero_on_the_last_argmax():
    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0:
            probs = np.zeros_like(logits)
            probs[len(logits) - 1 - np.argmax(logits[::-1])] = 1  # the last of the largest
            return probs
        return processed(scale=stable)(logits, temperature, top_k)
    fails("09", answer, r"probabilities\(\[1, 3, 3, 0\], 0, None\) returned \[0, 0, 1, 0\], expected \[0, 1, 0, 0\]: "
          r"temperature 0 on a tie: all the mass on the first argmax; temperature 0 puts all the mass on the argmax "
          r"\(the first one on a tie\)", "np.argmax")


def test_probabilities_in_float64():
    def answer(logits, temperature=1.0, top_k=None):
        return processed(scale=stable)(logits.astype(np.float64), temperature, top_k)  # "more precision is safer"
    fails("09", answer, r"probabilities\(\[1, 3, 2, 0, -1, 2.5\], 0.7, 3\) returned \[.*\], a NumPy array of float64; "
          r"the text promises float32 \(the probabilities\)", "which operation brings in another dtype")


def test_residual_of_the_absolute_difference():
    fails("11", lambda q, p: np.abs(q - p) / np.abs(q - p).sum(), r"residual\(\[0, 0.5, 0.5\], \[0.5, 0.5, 0\]\) "
          r"returned \[0.5, 0, 0.5\], expected \[0, 0, 1\]: zero probabilities in both; it puts mass on tokens the draft "
          r"p over-proposes", r"max\(q - p, 0\)")


def test_residual_as_a_list():
    fails("11", lambda q, p: residual(q, p).tolist(), r"residual\(\[0.2, 0.5, 0.3\], \[0.4, 0.2, 0.4\]\) returned "
          r"\[0.0, 1.0, 0.0\], a list, not an array; the text promises a float32 array of shape \(3,\) \(the residual\)",
          "one probability per token")


def test_residual_in_float64():
    def answer(q, p):
        r = np.maximum(q.astype(np.float64) - p, 0)
        return r / r.sum() if r.sum() > 0 else q.astype(np.float64)
    fails("11", answer, r"returned \[0, 1, 0\], a NumPy array of float64; the text promises float32 \(the residual\)",
          "which operation brings in another dtype")


def test_keep_as_the_ratio_itself():
    fails("12", lambda q, p, x, r: min(1.0, q[x] / p[x]), r"keep_draft\(q=\[0.3, 0.3, 0.4\], p=\[0.6, 0.3, 0.1\], x=0, r\) "
          r"with r = 0.0013 returned np.float32\(0.5\), a NumPy float \(np.float32\), not True or False",
          "return the comparison itself")


def test_keep_as_an_int():
    fails("12", lambda q, p, x, r: int(r < min(1.0, q[x] / p[x])), r"returned 1, an int, not True or False",
          "return the comparison itself")


def test_keep_in_log_space_with_an_epsilon():
    import math

    def answer(q, p, x, r):  # "log(0) is -inf: add a tiny epsilon"
        return r < min(1.0, math.exp(math.log(q[x] + 1e-12) - math.log(p[x])))
    fails("12", answer, r"keep_draft\(\[0, 0.2, 0.8\], \[0.5, 0.5, 0\], 0, 0.0\) returned True, expected False: r = "
          r"0.0 and q\(x\) = 0: the target never emits x; .*that is a test with an epsilon added to q\(x\)",
          r"q\(x\) = 0 needs no guard")


def test_alpha_as_a_share_of_the_union():
    fails("13", lambda q, p: float(np.minimum(p, q).sum() / np.maximum(p, q).sum()),
          r"alpha\(\[0.3, 0.7, 0, 0, 0\], \[0.6, 0.4, 0, 0, 0\]\) returned 0.538462, expected 0.7: after top-k: .*; alpha "
          r"here is sum_x min\(p\(x\), q\(x\)\) = 0.7", r"sum_x p\(x\) min\(1, q\(x\)/p\(x\)\)")


def test_alpha_as_an_int_when_p_is_q():
    def answer(q, p):
        if np.array_equal(p, q):
            return 1  # "every draft is kept"
        return float(np.minimum(p, q).sum())
    fails("13", answer, r"alpha\(\[0.2, 0.5, 0.3\], \[0.2, 0.5, 0.3\]\) returned 1, an int; alpha is a float",
          "0.0 and 1.0, not 0 and 1")


def test_alpha_that_guards_the_callers_p():
    def answer(q, p):
        p[p == 0] = 1e-12  # "no division by zero", written into the caller's p
        return float(np.sum(p * np.minimum(1, q / p)))
    fails("13", answer, r"alpha\(\[1, 0\], \[0, 1\]\) changed its argument p: \[0, 1\] became \[1e-12, 1\]",
          "the caller samples from p")
