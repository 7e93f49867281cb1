"""The checker of exercise 15, a whole round of Algorithm 2: each wrong round below fails with the message written
for the rule it breaks (tests/wrong_answers.py). The answers give hints away: read them after the exercises."""

import numpy as np

from gpt2 import softmax  # noqa: E402
from sps import residual, sample  # noqa: E402
from wrong_answers import fails


# --- exercise 15: a round of Algorithm 2 ----------------------------------------------

def the_bonus(models, tokens, drafted, q, p, rng):
    """Step 4 as Algorithm 2 has it: q's last row, after the text and all n_draft drafts."""
    return [sample(q[len(drafted)], rng)]


def sps_round(inverted=False, bonus=the_bonus, resample=residual, fixed_K=None, reseed=False, one_r=False,
              keep=lambda r, ratio: r < ratio):
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
            if not keep(r if one_r else rng.random(), min(1, ratio)):
                return drafted[:t] + [sample(resample(q[t], p[t]), rng)]
        return drafted + bonus((draft, oracle), tokens, drafted, q, p, rng)
    return answer


def test_a_round_with_the_ratio_inverted():
    with np.errstate(divide="ignore"):
        fails("15", sps_round(inverted=True), r"sps_round\(draft, oracle, \[1\], n_draft=2, rng\) with a generator whose "
              r"every draw is r = 0.99999999 returned \[2\], expected \[2, 1, 0\]: a round that keeps both its drafts "
              r".*; that is the round with the ratio inverted, min\(1, p\(x\)/q\(x\)\)", "q is the target")


def test_a_round_without_the_bonus_token():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: []), r"returned \[2, 1\], expected \[2, 1, 0\]: "
          "a round that keeps both its drafts .*; that is a round without its bonus token", "step 4")


def test_a_round_that_resamples_from_q():
    fails("15", sps_round(resample=lambda q, p: q), r"sps_round\(draft, oracle, \[2\], n_draft=2, rng\) with a generator "
          r"whose every draw is r = 0.0 returned \[1\], expected \[2\]: .*; that is a round that draws the replacement of "
          "a rejected draft from q", r"from the residual \(q - p\)\+")


def test_a_round_that_always_drafts_two():
    fails("15", sps_round(fixed_K=2), r"n_draft=1, rng\) returned \[\d+(, \d+)*\], but the draft ran 2 forward passes in "
          "a round of n_draft = 1: one per draft", "n_draft = 1, 2 and 3")


# The bonus token drawn from the wrong distribution: every one fails the bonus's own test, in rounds with the
# draft p (n_draft = 1) or with a draft close to the target (n_draft = 2, where the bonus comes in most rounds).

BONUS = r"\d+ kept all n_draft drafts and added a bonus token, and those do not follow q after the n_draft drafts: chi-square \d+ > \d+"


def test_a_round_whose_bonus_is_uniform():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [int(rng.integers(len(q[0])))]),
          r"returned \[2, 1, 2\], expected \[2, 1, 0\]: .*; or that is a round whose bonus is drawn uniformly over the "
          "vocabulary", r"q after the text and all n_draft drafts")


def test_a_round_whose_bonus_comes_from_the_row_before():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [sample(q[len(drafted) - 1], rng)]),
          r"returned \[2, 1, 2\], expected \[2, 1, 0\]: .*; that is a round whose bonus comes from q one row early",
          r"the last of the n_draft \+ 1 rows of step 2")


def test_a_round_whose_bonus_comes_from_row_one():
    # q[1]: the right row when n_draft = 1, one row early when n_draft = 2
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [sample(q[1], rng)]),
          r"returned \[2, 1, 2\], expected \[2, 1, 0\]: .*; that is a round whose bonus comes from q one row early",
          r"the last of the n_draft \+ 1 rows of step 2")


def test_a_round_whose_bonus_comes_from_the_row_after():
    def one_row_late(models, tokens, drafted, q, p, rng):
        after = tokens + drafted + [sample(q[len(drafted)], rng)]
        return [sample(softmax(models[1].forward(after)[-1]), rng)]
    fails("15", sps_round(bonus=one_row_late), r"returned \[\d+(, \d+)*\], but the oracle ran 2 forward passes in one "
          "round: a round of SpS is ONE target pass", "step 2")


def test_a_round_whose_bonus_comes_from_the_drafts_last_p():
    fails("15", sps_round(bonus=lambda models, tokens, drafted, q, p, rng: [sample(p[-1], rng)]),
          r"returned \[2, 1, 1\], expected \[2, 1, 0\]: .*; that is a round whose bonus comes from the draft's p of the "
          "last draft", "the bonus comes from the target's q")


def test_a_round_whose_bonus_comes_from_the_draft_after_its_drafts():
    def from_the_draft(models, tokens, drafted, q, p, rng):
        return [sample(softmax(models[0].forward(tokens + drafted)[-1]), rng)]
    fails("15", sps_round(bonus=from_the_draft), r"but the draft ran 3 forward passes in a round of n_draft = 2",
          "each from one draft pass")


def test_a_round_with_a_generator_of_its_own():
    fails("15", sps_round(reseed=True), r"called with 10 generators of different seeds, the round returned \[\d+(, \d+)*\] "
          "every time: nothing in it depends on the rng given", r"np.random.default_rng\(0\)")


def test_a_round_that_resamples_the_residuals_most_likely_token():
    fails("15", sps_round(resample=lambda q, p: np.eye(len(q), dtype=np.float32)[np.argmax(residual(q, p))]),
          r"over 3000 rounds from the prompt \[2, 0\] with n_draft = 2, on a draft and a target over 3 tokens, your "
          r"rounds' outputs do not follow Algorithm 2's, enumerated exactly over its 39 possible outputs: chi-square \d+",
          r"the replacement from \(q - p\)\+")


def test_a_round_with_one_r_for_every_draft():
    fails("15", sps_round(one_r=True), r"with n_draft = 2, \d+ of your rounds added n_draft \+ 1 = 3 tokens \(\d+.\d%\); all n_draft drafts "
          r"are kept with probability 15.9% here", "an r of its own")




# --- new rounds -------------------------------------------------------------------------------------------

def test_a_round_whose_bonus_reuses_the_last_tests_r():
    def answer(draft, oracle, tokens, n_draft, rng):  # "r is a uniform draw already: use it for the bonus too"
        drafted, p = [], []
        for _ in range(n_draft):
            p.append(softmax(draft.forward(tokens + drafted)[-1]))
            drafted.append(sample(p[-1], rng))
        q = softmax(oracle.forward(tokens + drafted)[len(tokens) - 1:])
        r = 0.0
        for t, x in enumerate(drafted):
            r = rng.random()
            if not r < min(1, q[t][x] / p[t][x]):
                return drafted[:t] + [sample(residual(q[t], p[t]), rng)]
        cdf = np.cumsum(q[n_draft])
        return drafted + [min(int(np.searchsorted(cdf, r * cdf[-1], side="right")), int(np.flatnonzero(q[n_draft])[-1]))]
    fails("15", answer, r"with n_draft = 1 and the draft p, " + BONUS, r"ALL n_draft drafts")


def test_a_round_that_extends_the_callers_text():
    def answer(draft, oracle, tokens, n_draft, rng):
        new = sps_round()(draft, oracle, tokens, n_draft, rng)
        tokens += new  # "the round's text grows"
        return new
    fails("15", answer, r"sps_round\(draft, oracle, \[1, 4\], n_draft=2, rng=np.random.default_rng\(0\)\) changed its "
          r"argument tokens: \[1, 4\] became \[1, 4, \d+", "the decoder goes on with its text")


def test_a_round_drafted_by_inverse_cdf_in_numpy():
    def answer(draft, oracle, tokens, n_draft, rng):
        drafted, p = [], []
        for _ in range(n_draft):
            p.append(softmax(draft.forward(tokens + drafted)[-1]))
            cdf = np.cumsum(p[-1])
            drafted.append(np.minimum(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))
        q = softmax(oracle.forward(tokens + drafted)[len(tokens) - 1:])
        for t, x in enumerate(drafted):
            if not rng.random() < min(1, q[t][x] / p[t][x]):
                return drafted[:t] + [sample(residual(q[t], p[t]), rng)]
        return drafted + [sample(q[n_draft], rng)]
    fails("15", answer, r"sps_round\(draft, oracle, \[1, 4\], n_draft=2, rng=np.random.default_rng\(0\)\) returned "
          r"\[.*\], whose entry 0 is np.int64\(\d\), a NumPy integer \(np.int64\); a token id is a Python int")


def test_a_round_whose_r_comes_from_numpys_global_generator():
    def answer(draft, oracle, tokens, n_draft, rng):
        drafted, p = [], []
        for _ in range(n_draft):
            p.append(softmax(draft.forward(tokens + drafted)[-1]))
            drafted.append(sample(p[-1], rng))
        q = softmax(oracle.forward(tokens + drafted)[len(tokens) - 1:])
        for t, x in enumerate(drafted):
            if not np.random.random() < min(1, q[t][x] / p[t][x]):  # the global generator, not rng
                return drafted[:t] + [sample(residual(q[t], p[t]), rng)]
        return drafted + [sample(q[n_draft], rng)]
    fails("15", answer, r"called twice with the same arguments and a generator of the same seed, sps_round\(.*\) returned "
          r"\[.*\], then \[.*\]: the rng given is the only source of randomness", "np.random's global generator "
          r"\(np.random.random\(\), np.random.choice\(...\), ...\) draws differently each call")


def test_a_round_that_keeps_at_r_equal_to_the_ratio():
    fails("15", sps_round(keep=lambda r, ratio: r <= ratio), r"sps_round\(draft, oracle, \[2\], n_draft=2, rng\) with a "
          r"generator whose every draw is r = 0.0 returned \[0, 0, 1\], expected \[2\]: .*that is the round with `<=` for "
          r"`<`", "step 3.s test is strict")
