"""A second student trial's wrong answers to exercises 3-15 that the checkers passed, or failed with a message about
another mistake or none: each now fails with the message written for the rule it breaks (tests/wrong_answers.py).
The answers give hints away: read them after the exercises."""

import os

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from gpt2 import softmax  # noqa: E402
from kvcache import KVCache  # noqa: E402
from sps import residual, sample  # noqa: E402
from wrong_answers import fails


def reference(number):
    return checks.EXERCISES[number].reference()


# --- exercise 3: the accepted prefix -------------------------------------------------------------------------

def test_accepted_prefix_by_the_digits_of_the_ids():
    def answer(drafted, oracle_choice):  # the common prefix of the ids written out: 9 begins 95
        s1, s2 = ",".join(map(str, drafted)), ",".join(map(str, oracle_choice))
        common = os.path.commonprefix([s1, s2])
        return len(drafted) if common == s1 else common.count(",")
    fails("03", answer, r"\(\[5, 7, 9\], \[5, 7, 95, 4\]\) returned 3, expected 2: draft 2, 9, is not the oracle's choice "
          "there, 95, though its digits begin it", "compare the ids themselves")


def test_accepted_prefix_by_the_index_of_each_draft():
    def answer(drafted, oracle_choice):  # drafted.index finds a repeated draft's first place
        for d in drafted:
            if d != oracle_choice[drafted.index(d)]:
                return drafted.index(d)
        return len(drafted)
    message = fails("03", answer, r"\(\[0, 0\], \[0, 1, 2\]\) returned 2, expected 1: .*draft 1, 0, is not the oracle's "
                    "choice there, 1, yet it was counted", "stop at the first disagreement")
    assert "oracle's own token" not in message


# --- exercise 5: the KV-cache bug ----------------------------------------------------------------------------

def generator(fix="right", draft_cached=True, oracle_cached=True, draft_delta=0, yields="tokens"):
    """ex05's generator with the oracle's cache fixed as `fix` says, and each other change named."""
    def generate(draft, oracle, ids, n_new, n_draft=8):
        tokens, end = list(ids), len(ids) + n_new
        draft_cache, oracle_cache = KVCache(), KVCache()
        if len(tokens) > 1:
            draft.forward(tokens[:-1], draft_cache, n_logits=1)
            oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
        while len(tokens) < end:
            k = min(n_draft, end - len(tokens) - 1)
            drafted, last = [], tokens[-1]
            for _ in range(k):
                read = draft.forward([last], draft_cache) if draft_cached else draft.forward(tokens + drafted)
                last = int(np.argmax(read[-1]))
                drafted.append(last)
            choice = np.argmax(oracle.forward([tokens[-1]] + drafted, oracle_cache) if oracle_cached else
                               oracle.forward(tokens + drafted)[len(tokens) - 1:], axis=-1)
            n = 0
            while n < k and drafted[n] == choice[n]:
                n += 1
            new_tokens, before = drafted[:n] + [int(choice[n])], len(tokens)
            tokens += new_tokens
            n_kept = len(tokens) - 1
            if draft_cached:
                if draft_cache.n_tokens() < n_kept:
                    draft.forward(tokens[draft_cache.n_tokens():n_kept], draft_cache, n_logits=1)
                draft_cache.truncate(min(draft_cache.n_tokens(), n_kept + draft_delta))
            if fix == "right":
                oracle_cache.truncate(n_kept)
            elif fix == "before the round":
                oracle_cache.truncate(before - 1)
            elif fix == "anew after a rejection" and n < k:
                oracle_cache = KVCache()
                oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
            elif fix == "cut short, fed again":
                oracle_cache.truncate(n_kept - 1)
                oracle.forward(tokens[n_kept - 1:n_kept], oracle_cache, n_logits=1)
            if yields == "lists":
                yield new_tokens
            else:
                yield from new_tokens
    return generate


def test_the_oracles_cache_cut_to_its_length_before_the_round():
    fails("05", generator(fix="before the round"), r"n_new=12, n_draft=3\) raised ValueError: .*; when the oracle's forward "
          r"began .*its cache held 0 positions; it should hold 1.* its cache was cut 1 position\(s\) too short",
          "which positions of the oracle's cache belong to tokens that stay")


def test_the_oracles_cache_made_anew_after_a_rejection():
    fails("05", generator(fix="anew after a rejection"), r"your tokens are right, but the oracle read \d+ tokens of the "
          "text again", "truncate the oracle's cache to n_kept")


def test_the_oracles_cache_cut_short_and_fed_again():
    fails("05", generator(fix="cut short, fed again"), r"your tokens are right, but the oracle read \d+ tokens of the text "
          "again", "a new cache, or one cut shorter and fed again")


def test_the_draft_without_a_cache():
    fails("05", generator(draft_cached=False), r"your tokens are right, but the draft read \d+ tokens of the text again",
          "a new cache, or none, feeds it the whole text again")


def test_the_tokens_returned_as_a_list():
    def answer(draft, oracle, ids, n_new, n_draft=8):
        return list(generator()(draft, oracle, ids, n_new, n_draft))  # made whole, then returned
    fails("05", answer, r"n_new=12, n_draft=3\) returned \[[\d, ]+\], a list, not a generator; the text promises the tokens "
          "one by one", r"yield from new_tokens")


def test_a_round_yielded_as_a_list():
    fails("05", generator(yields="lists"), r"the token it yielded 0 is \[\d+\], a list; a token id is an int",
          r"`yield new_tokens` yields the whole list as one item")


# --- exercise 6: drafting while confident --------------------------------------------------------------------

def drafting(guess=lambda logits: int(np.argmax(softmax(logits[-1]))), log_space=False, break_at_or_below=False):
    def answer(draft, tokens, k, threshold):
        guesses, cumulative, log_p = [], 1.0, 0.0
        while len(guesses) < k and (log_p >= np.log(threshold) if log_space else cumulative >= threshold):
            logits = draft.forward(tokens + guesses)
            x = guess(logits)
            guesses.append(x)
            p = softmax(logits[-1])[x]
            cumulative, log_p = cumulative * p, log_p + np.log(p)  # the log in float32
            if break_at_or_below and cumulative <= threshold:
                break
        return guesses
    return answer


def test_drafting_that_breaks_at_the_threshold():
    fails("06", drafting(break_at_or_below=True), r"threshold=1.0\) returned \[4\], expected \[4, 5, 6\]: .*that is drafting "
          "while the cumulative probability is ABOVE the threshold", "`>=`, not `>`")


def test_drafting_in_float32_logs():
    fails("06", drafting(log_space=True), r"threshold=0.25\) returned \[4, 5\], expected \[4, 5, 6\]: .*ABOVE the threshold: "
          "it stopped where the probability equals the threshold .*in logs or in float32", "compare the product of the "
          "probabilities itself")


def test_drafting_by_the_argmax_of_every_row():
    fails("06", drafting(guess=lambda logits: int(np.argmax(softmax(logits)))), r"raised IndexError: index \d+ is out of "
          "bounds", r"np.argmax\(probs\) of the last row's distribution")


# --- exercises 7 and 8: the threshold update -----------------------------------------------------------------

def threshold_update(clamp=lambda t: min(max(t, 0.05), 0.95), lower=lambda t, b: t - b, clean=lambda n, c: n == len(c),
                     partial_clamp=False):
    def answer(threshold, cumulative, n_accepted, boost):
        if clean(n_accepted, cumulative):
            threshold = lower(threshold, boost)
            return max(threshold, 0.05) if partial_clamp else clamp(threshold)
        threshold = (threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2
        return min(threshold, 0.95) if partial_clamp else clamp(threshold)
    return answer


def test_next_threshold_clamped_on_one_side_a_branch():
    fails("07", threshold_update(partial_clamp=True), r"next_threshold\(0.06, \[0.02, 0.01\], 1, 0.1\) returned 0.04, "
          "expected 0.05: the lower clamp after a rejection", r"within \[0.05, 0.95\]")


def test_next_threshold_with_the_clamps_min_and_max_swapped():
    fails("07", threshold_update(clamp=lambda t: max(min(t, 0.05), 0.95)), r"returned 0.95, expected 0.7: .*; it gives "
          "the clamp's bound 0.95 whatever the round: the clamp's min and max swapped", r"min\(max\(threshold, 0.05\), 0.95\)")


def test_next_threshold_raised_after_a_clean_sweep():
    message = fails("07", threshold_update(lower=lambda t, b: t + b), r"next_threshold\(0.4, \[0.9, 0.6\], 2, 0.1\) "
                    "returned 0.5, expected 0.3: .*it RAISED the threshold by boost", "goes down")
    assert "threshold notes' update" not in message  # the notes' copy gives 0.5 here too, and differs elsewhere


def test_next_threshold_in_float32():
    fails("07", lambda *args: float(np.float32(reference("07")(*args))), r"returned 0.699999988079071, expected 0.7: "
          r".*that is the right value in float32, off by 1.2e-08", "compute it in Python floats")


def test_next_threshold_that_counts_one_rejection_as_a_clean_sweep():
    fails("07", threshold_update(clean=lambda n, c: n >= len(c) - 1), r"next_threshold\(0.95, \[0.99\], 0, 0.1\) returned "
          "0.85, expected 0.95: .*it lowered the threshold by boost, as after a round in which every draft was "
          "accepted; here a draft was rejected", "the test for a clean sweep")


def notes_fixed(move=lambda t, last: (t + last) / 2, clamp="both"):
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted <= n_draft:
            threshold = move(threshold, drafted_probs[n_accepted - 2] if n_accepted > 1 else 1.0)
        else:
            threshold -= boost
            if clamp == "lowering only":
                threshold = min(max(threshold, 0.05), 0.95)
        return min(max(threshold, 0.05), 0.95) if clamp == "both" else threshold
    return answer


def test_seed_000s_update_fixed_without_its_clamp():
    fails("08", notes_fixed(clamp="none"), r"returned 0, expected 0.05 .*: 0 is outside \[0.05, 0.95\]",
          "the clamp, after either branch")


def test_seed_000s_update_with_its_clamp_in_the_else_branch():
    fails("08", notes_fixed(clamp="lowering only"), r"update_threshold\(0.95, \[0.99, 0.5\], 2, 2, 0.1\) returned 0.97, "
          r"expected 0.95 .*: 0.97 is outside \[0.05, 0.95\]", "the clamp, after either branch")


def test_seed_000s_update_away_from_the_last_accepted_draft():
    fails("08", notes_fixed(move=lambda t, last: t - (last - t) / 2), r"returned 0.1, expected 0.7: .*it moved AWAY from "
          "the cumulative probability of the last accepted draft, 1.0", "halfway toward it")


def test_seed_000s_update_in_float32():
    fails("08", lambda *args: float(np.float32(reference("08")(*args))), r"returned 0.699999988079071, expected 0.7: .*that "
          "is the right value in float32", "compute it in Python floats")


# --- exercise 9: temperature and top-k -----------------------------------------------------------------------

def processed(top=lambda x, k: np.where(x < np.sort(x)[-k], np.float32(-np.inf), x), scale=None, greedy_below=0.0):
    tiny = np.finfo(np.float32).smallest_subnormal

    def answer(logits, temperature=1.0, top_k=None):
        if temperature == 0 or temperature < greedy_below:
            return reference("09")(logits, 0)
        if scale == "power":
            p = softmax(logits) ** (1 / np.float32(temperature))
            return (p / p.sum()).astype(np.float32)
        x = (logits - logits.max()) * (1 / temperature) if scale == "inverse" else \
            (logits - logits.max()) / max(np.float32(temperature), tiny)
        if top_k is not None and top_k < len(x):
            x = top(x, top_k)
        return softmax(x)
    return answer


def test_top_k_that_drops_the_kth_logit_too():
    fails("09", processed(top=lambda x, k: np.where(x > np.sort(x)[-k], x, np.float32(-np.inf))),
          r"0.7, 1\) returned \[nan, .*: top_k = 1: .*the NaN comes with top_k = 1: every logit was cut", r"logits >= the "
          "k-th largest")


def test_temperature_as_a_power_of_the_probabilities():
    message = fails("09", processed(scale="power"), r"0.0001, None\) returned \[nan, nan, nan\], .*the same logits shifted "
                    "so that the largest is 0 give NaN too", r"softmax\(logits\) \*\* \(1 / T\) underflows")
    assert "overflow float32 to +inf" not in message


def test_temperature_as_a_product_with_its_inverse():
    fails("09", processed(scale="inverse"), r"1e-40, None\) returned \[nan, .*the same logits shifted so that the largest "
          "is 0 give NaN too", r"1 / T overflows float32 to inf")


def test_a_tiny_temperature_taken_for_greedy():
    fails("09", processed(greedy_below=1e-6), r"1e-45, None\) returned \[0, 1, 0\], .*that is greedy, all the mass on the "
          "argmax", "only temperature 0 means greedy")


# --- exercise 11: the residual -------------------------------------------------------------------------------

def test_residual_that_falls_back_to_p():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / r.sum() if r.sum() > 0 else p
    fails("11", answer, r"p=\[0.2, 0.50000006, 0.3\]\) returned \[0.2, 0.50000006, 0.3\], expected \[0.2, 0.5, 0.3\]: \(q - "
          r"p\)\+ is all zeros here: return q, though q and p differ .*: yours is p", "why q, the target")


def test_residual_that_falls_back_below_1e_12():
    def answer(q, p):
        r = np.maximum(q - p, 0)
        return r / r.sum() if r.sum() > 1e-12 else q
    fails("11", answer, r"q=\[1e-40, 0.5, 0.5\], p=\[0.0, 0.5, 0.5\]\) returned .*it fell back to q, but \(q - p\)\+ is not "
          "all zeros here: its mass is 1e-40", "exactly 0")


def test_residual_divided_by_the_sum_of_q_minus_p():
    def answer(q, p):
        r, total = np.maximum(q - p, 0), (q - p).sum()  # 0 for any two distributions
        return r / total if total != 0 else q
    fails("11", answer, r"returned \[0, 0.5, 0.5\], expected \[0, 0, 1\]: .*it fell back to q, but \(q - p\)\+ is not all "
          "zeros here: its mass is 0.5", r"the sum of q - p, which is 0 for any two distributions")


def test_residual_of_q_where_q_is_larger():
    def answer(q, p):
        r = np.where(q > p, q, np.float32(0))
        return r / r.sum() if r.sum() > 0 else q
    fails("11", answer, r"that keeps q\(x\) itself where q > p, renormalised", "the difference, not q")


def test_residual_renormalised_by_softmax():
    fails("11", lambda q, p: softmax(np.maximum(q - p, 0)), r"returned \[0.274, 0.274, 0.452\], expected \[0, 0, 1\]: .*that "
          r"is softmax of \(q - p\)\+", "dividing by the sum")


# --- exercise 12: the inverted ratio ------------------------------------------------------------------------

def test_keep_by_the_difference_of_the_probabilities():
    message = fails("12", lambda q, p, x, r: r < 1 - (p[x] - q[x]), r"keep_draft\(\[0, 0.2, 0.8\], \[0.5, 0.5, 0\], 0, 0.0\) "
                    r"returned True, expected False: .*your test keeps x for 50% of r in \[0, 1\), where Algorithm 2 keeps "
                    r"it with probability min\(1, q\(x\)/p\(x\)\) = 0%", r"r < min\(1, q\(x\)/p\(x\)\)")
    assert "`<=`" not in message.split("where to look")[1]


def test_keep_with_a_draw_of_its_own():
    fails("12", lambda q, p, x, r: np.random.random() < min(1.0, q[x] / p[x]), r"called twice with the same arguments, "
          r"keep_draft\(.*\) returned (True|False), then (True|False): nothing in exercise 12's text is random",
          "np.random's global generator")


def test_keep_that_guards_the_callers_p():
    def answer(q, p, x, r):
        p[x] = max(p[x], np.float32(1e-12))  # "never divide by 0": a tiny p(x) becomes 1e-12 in the caller's p
        return r < min(1.0, q[x] / p[x])
    fails("12", answer, r"changed its argument p: \[1e-30, 0.6, 0.4\] became \[1e-12, 0.6, 0.4\]",
          "the round tests its next draft with p")


def test_keep_against_a_float32_one():
    fails("12", lambda q, p, x, r: r < np.minimum(1, q[x] / p[x]), r"0.9999999999999999\) returned False, expected True: "
          r".*that compares r with min\(1, q\(x\)/p\(x\)\) in float32", "a Python float compared with a Python float")


def test_keep_with_alpha_for_the_tokens_ratio():
    fails("12", lambda q, p, x, r: r < float(np.minimum(p, q).sum()), r"your test keeps x for 20% of r in \[0, 1\)",
          r"r < min\(1, q\(x\)/p\(x\)\), q the target")


def test_keep_with_a_normalised_ratio():
    fails("12", lambda q, p, x, r: r < q[x] / (p[x] + q[x]), r"\[0.3, 0.7\], \[0.3, 0.7\], 1, 0.9999999999999999\) returned "
          "False, expected True: .*your test keeps x for 50% of r", r"r < min\(1, q\(x\)/p\(x\)\)")


# --- exercise 13: alpha ------------------------------------------------------------------------------------------

def test_alpha_estimated_by_sampling():
    def answer(q, p):
        rng = np.random.default_rng(0)  # seeded: the same answer each call, but an estimate
        xs = rng.choice(len(p), size=100_000, p=p.astype(np.float64) / p.astype(np.float64).sum())
        with np.errstate(all="ignore"):
            return float(np.mean(rng.random(100_000) < np.minimum(1, q[xs] / p[xs])))
    fails("13", answer, r"returned 0.70\d+, expected 0.7: .*off by 0.00\d+, the size of a sampling error", "closed form")


def test_alpha_as_exp_of_minus_kl():
    def answer(q, p):
        both = (p > 0) & (q > 0)
        return float(np.exp(-np.sum(p[both] * np.log(p[both] / q[both])))) if both.any() else 0.0
    message = fails("13", answer, r"returned 0.825272, expected 0.7: .*alpha here is sum_x min\(p\(x\), q\(x\)\) = 0.7",
                    r"sum_x p\(x\) min\(1, q\(x\)/p\(x\)\)")
    assert "needs no division" not in message


def test_alpha_as_the_bhattacharyya_coefficient():
    fails("13", lambda q, p: float(np.sqrt(p * q).sum()), r"returned 0.953414, expected 0.7: .*alpha here is sum_x "
          r"min\(p\(x\), q\(x\)\)", r"P\(keep\) = sum over x")


def test_alpha_rounded():
    fails("13", lambda q, p: round(float(np.minimum(p, q).sum()), 4), r"returned 0.5305, expected 0.530463\d+: .*that is "
          "the right value rounded to 4 decimals", r"no round\(\.\.\.\)")


def test_alpha_counting_the_tokens_the_target_likes_as_much():
    message = fails("13", lambda q, p: float(np.sum(p * (q >= p))), r"returned 0.4, expected 0.7: .*alpha here is sum_x "
                    r"min\(p\(x\), q\(x\)\) = 0.7", r"P\(keep\) = sum over x")
    assert "counts every difference twice" not in message  # 1 - sum |p - q| gives 0.4 here, and not elsewhere


# --- exercise 15: a round of Algorithm 2 -------------------------------------------------------------------

def round_of(q_from=lambda q_rows, tokens: q_rows, p_context=lambda tokens, drafted: tokens + drafted,
             replacement=lambda q, p, t: residual(q[t], p[t]), greedy=False, replace=True, shifted=False):
    def answer(draft, oracle, tokens, n_draft, rng):
        drafted, p = [], []
        for _ in range(n_draft):
            p.append(softmax(draft.forward(p_context(tokens, drafted))[-1]))
            drafted.append(int(np.argmax(p[-1])) if greedy else sample(p[-1], rng))
        q = softmax(oracle.forward(tokens + drafted)[len(tokens) - (0 if shifted else 1):])
        for t, x in enumerate(drafted):
            if not rng.random() < min(1.0, q[t][x] / p[t][x]):
                return drafted[:t] + ([sample(replacement(q, p, t), rng)] if replace else [])
        return drafted + [sample(q[-1], rng)]
    return answer


def test_a_round_that_tests_each_draft_with_the_row_after_it():
    fails("15", round_of(shifted=True), r"\[1\], n_draft=2, rng\) with a generator whose every draw is r = 0.99999999 "
          r"returned \[1\], .*your round ended with 1 after 0 draft\(s\): it rejected draft 1, 2, which Algorithm 2 keeps",
          r"step 3 tests draft t with row t of step 2, q\[t\] and p\[t\]")


def test_a_round_whose_drafts_all_come_from_the_text():
    fails("15", round_of(p_context=lambda tokens, drafted: tokens), r"your draft pass 2 read \[1\], where step 1's pass "
          r"reads the text and the drafts before it, \[1, 2\]", r"draft.forward\(tokens \+ drafted\)\[-1\]")


def test_a_round_that_replaces_from_p_minus_q():
    fails("15", round_of(replacement=lambda q, p, t: residual(p[t], q[t])), r"r = 0.0 returned \[0\], expected \[2\]: .*your "
          r"round's token after 0 kept draft\(s\) is 0, where the replacement of draft 1, from the residual \(q - p\)\+ of "
          "its row, gives 2", r"step 3's replacement: sample\(residual\(q\[t\], p\[t\]\), rng\)")


def test_a_round_that_replaces_from_the_next_row():
    fails("15", round_of(replacement=lambda q, p, t: residual(q[t + 1], p[t])), r"r = 0.0 returned \[0\], expected \[2\]: "
          r".*where the replacement of draft 1, from the residual \(q - p\)\+ of its row, gives 2", "the rows of the "
          "rejected draft")


def test_a_round_of_greedy_drafts():
    message = fails("15", round_of(greedy=True), r"your round's drafts are \[2, 0\] \(what its target pass read after the "
                    r"text\), where the draws from p give \[2, 1\]", r"step 1: each draft is sample\(p, rng\)")
    assert "step 4" not in message


def test_a_round_that_ends_without_a_token_after_a_rejection():
    fails("15", round_of(replace=False), r"returned \[\], 0 token id\(s\); a round adds 1 to n_draft \+ 1 = 3 tokens",
          r"after a rejection one from the residual \(q - p\)\+")
