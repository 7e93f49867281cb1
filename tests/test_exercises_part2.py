"""The checkers of part 2's exercises (6, 7, 8): each wrong answer below fails with the message written for the
rule it breaks (tests/wrong_answers.py). The answers give hints away: read them after the exercises."""

import numpy as np

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from gpt2 import softmax  # noqa: E402
from wrong_answers import fails


# --- exercise 6: drafting while confident -----------------------------------------

def drafting(stop_before=False, cap=None, per_token=False, choose=lambda probs: int(np.argmax(probs)), summed=False):
    def answer(draft, tokens, k, threshold):
        guesses, p = [], 1.0
        while len(guesses) < (k if cap is None else cap) and p >= threshold:
            probs = softmax(draft.forward(tokens + guesses)[-1])
            x = choose(probs)
            if stop_before and p * probs[x] < threshold:
                break
            guesses.append(x)
            p = probs[x] if per_token else p + probs[x] if summed else p * probs[x]
        return guesses
    return answer


def test_drafting_that_drops_the_guess_crossing_the_threshold():
    # the forward of the guess it drops is a pass thrown away: the passes name it first
    fails("06", drafting(stop_before=True), r"threshold=0.3\) returned \[\], but the draft ran 1 forward passes for 0 "
          "guesses: one per guess, and none for a guess it does not make", "the guess that takes the probability below "
          "the threshold is proposed")


def test_drafting_past_k_max():
    fails("06", drafting(cap=50), r"draft_while_confident\(<a draft certain of every guess>, \[3\], k=3, "
          r"threshold=1.0\) returned \[4, 5, 6, 7, .*, expected \[4, 5, 6\]: threshold 1.0 and a draft certain of every "
          r"guess .*; 50 guess\(es\), but at most k = 3 are allowed", "the loop's limit")


def test_drafting_on_each_guess_alone():
    fails("06", drafting(per_token=True), r"threshold=0.25\) returned \[4, 5, 6, 0, 1\], expected \[4, 5, 6\]: a "
          "cumulative probability exactly equal to the threshold .*; the draft's greedy guesses .* drafting goes on while "
          "the product of the guesses' probabilities so far", "what the loop multiplies")


def test_drafting_that_appends_to_the_callers_tokens():
    def answer(draft, tokens, k, threshold):
        start, p = len(tokens), 1.0
        while len(tokens) - start < k and p >= threshold:
            probs = softmax(draft.forward(tokens)[-1])
            tokens.append(int(np.argmax(probs)))
            p *= probs[tokens[-1]]
        return tokens[start:]
    fails("06", answer, r"changed its argument tokens: \[", "work on a copy")


def test_drafting_by_sampling():
    rng = np.random.default_rng(0)
    fails("06", drafting(choose=lambda probs: int(rng.choice(len(probs), p=probs / probs.sum()))),
          r"called twice with the same arguments, draft_while_confident\(draft, \[5, 9, 2, 7\], k=4, "
          r"threshold=0.3\) returned \[\d+\], then \[\d+\]: nothing in exercise 06's text is random",
          "a generator of its own, .* draws differently each call; each guess is the draft's argmax, never a draw")


def test_drafting_with_the_probabilities_added():
    fails("06", drafting(summed=True), "drafting goes on while the product of the guesses' probabilities so far",
          "what the loop multiplies")


def test_drafting_into_a_float_array():
    def answer(draft, tokens, k, threshold):
        guesses, n, p = np.zeros(k), 0, 1.0  # preallocated: np.zeros is float64
        while n < k and p >= threshold:
            probs = softmax(draft.forward(tokens + [int(g) for g in guesses[:n]])[-1])
            guesses[n] = np.argmax(probs)
            p, n = p * probs[int(guesses[n])], n + 1
        return guesses[:n]
    fails("06", answer, r"returned \[\d+\], a NumPy array of float64; the text promises a list \(the guesses\)",
          r"\.tolist\(\)")


# --- exercises 7 and 8: the threshold update ----------------------------------------

def next_threshold_toward(index):
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            threshold -= boost
        else:
            threshold = (threshold + cumulative[index(n_accepted)]) / 2
        return min(max(threshold, 0.05), 0.95)
    return answer


def test_next_threshold_as_seed_000_computes_it():
    fails("07", next_threshold_toward(lambda n: n), "first REJECTED draft", "the threshold notes", "exercise 8")


def test_next_threshold_copied_from_seed_000():
    def answer(threshold, cumulative, n_accepted, boost):
        return checks.notes_threshold(threshold, cumulative, n_accepted, len(cumulative), boost)
    fails("07", answer, r"next_threshold\(0.4, \[0.9, 0.6\], 0, 0.1\) returned 0.5, expected 0.7: nothing accepted: .*; "
          "that is the threshold notes' update, copied as it is; but the notes' n_accepted also counts the oracle's own token",
          "exercise 8")


def test_next_threshold_without_the_empty_prefix():
    fails("07", next_threshold_toward(lambda n: n - 1), r"cumulative\[-1\] = 0.6, Python's LAST element", "1.0")


def test_next_threshold_without_the_clamp():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            return threshold - boost
        return (threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2
    fails("07", answer, r"next_threshold\(0.1, \[0.9\], 1, 0.1\) returned 0.0, expected 0.05: the lower clamp",
          r"\[0.05, 0.95\]")


def test_next_threshold_with_seed_000s_boost_written_in():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            return min(max(threshold - 0.1, 0.05), 0.95)
        return min(max((threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2, 0.05), 0.95)
    fails("07", answer, r"returned 0.5, expected 0.35: every draft was accepted, .* not by boost = 0.25", "argument boost")


def test_next_threshold_rounded():
    def answer(threshold, cumulative, n_accepted, boost):
        return round(checks.EXERCISES["07"].reference()(threshold, cumulative, n_accepted, boost), 2)
    fails("07", answer, r"next_threshold\(0.437, \[0.913, 0.6271, 0.3389\], 2, 0.1\) returned 0.53, expected 0.53205: "
          "that is the threshold rounded to 2 decimals", "as computed")


def test_next_threshold_all_the_way():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            return min(max(threshold - boost, 0.05), 0.95)
        return min(max(cumulative[n_accepted - 1] if n_accepted else 1.0, 0.05), 0.95)
    fails("07", answer, r"returned 0.95, expected 0.7: nothing accepted: .*; it moved all the way to the cumulative "
          r"probability of the last accepted draft, 1.0", "halfway")


def test_next_threshold_with_a_trailing_comma():
    def answer(threshold, cumulative, n_accepted, boost):
        return checks.EXERCISES["07"].reference()(threshold, cumulative, n_accepted, boost),  # a tuple
    fails("07", answer, r"returned \(0.5,\), not a number", "what the function returns")


def test_next_threshold_with_the_boost_as_a_factor():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            return min(max(threshold * (1 - boost), 0.05), 0.95)
        return min(max((threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2, 0.05), 0.95)
    fails("07", answer, r"next_threshold\(0.4, \[0.9, 0.6\], 2, 0.1\) returned 0.36, expected 0.3: every draft accepted",
          "lower the threshold by boost")


def test_seed_000s_update_as_shipped_is_not_solved_yet():
    fails("08", checks.notes_threshold, "returns 0.35", "gives 0.5", unsolved=True)


def test_seed_000s_update_shifted_without_the_empty_prefix():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        return checks.notes_threshold(threshold, drafted_probs, n_accepted - 1, n_draft, boost)
    fails("08", answer, r"drafted_probs\[-1\] = 0.6, Python's LAST element")


def test_seed_000s_update_with_the_test_changed_instead_of_the_index():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        return checks.notes_threshold(threshold, drafted_probs, n_accepted, n_draft - 1, boost)  # `<` for `<=`
    # at n_accepted = 1 the notes' index is still there: the first rejected draft's probability
    fails("08", answer, r"update_threshold\(0.4, \[0.9, 0.6\], 1, 2, 0.1\) returned 0.65, expected 0.7: no draft "
          r"accepted .*; it moved halfway toward drafted_probs\[0\] = 0.9, the cumulative probability of the first "
          "REJECTED draft", r"which draft drafted_probs\[n_accepted - 1\] is")


def test_seed_000s_update_with_its_boost_written_in():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted <= n_draft:
            threshold = (threshold + (drafted_probs[n_accepted - 2] if n_accepted > 1 else 1.0)) / 2
        else:
            threshold -= 0.1
        return min(max(threshold, 0.05), 0.95)
    fails("08", answer, r"returned 0.5, expected 0.35 .*not by boost = 0.25", "argument boost")


def test_seed_000s_update_replaced_by_threshold_py_as_it_is():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):  # the notes' n_accepted passed on unchanged
        return checks.EXERCISES["07"].reference()(threshold, drafted_probs, n_accepted, boost)
    fails("08", answer, r"update_threshold\(0.4, \[0.9, 0.6\], 1, 2, 0.1\) returned 0.65, .*toward drafted_probs\[0\] = "
          r"0.9, .* \(or threshold.py's update given the notes' n_accepted, which counts the oracle's own token too\)")


def test_seed_000s_update_rounded():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        return round(checks.EXERCISES["08"].reference()(threshold, drafted_probs, n_accepted, n_draft, boost), 2)
    fails("08", answer, r"returned 0.53, expected 0.53205 .*rounded to 2 decimals", "does not round")


def test_seed_000s_update_all_the_way():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted <= n_draft:
            threshold = drafted_probs[n_accepted - 2] if n_accepted > 1 else 1.0
        else:
            threshold -= boost
        return min(max(threshold, 0.05), 0.95)
    fails("08", answer, r"returned 0.95, expected 0.7: no draft accepted .*; it moved all the way to the cumulative "
          r"probability of the last accepted draft, 1.0", "halfway")




# --- new answers --------------------------------------------------------------------------------------

def test_drafting_into_numpy_ints():
    fails("06", drafting(choose=lambda probs: np.argmax(probs)), r"threshold=0.3\) returned \[np.int64\(\d+\)\], whose "
          r"entry 0 is np.int64\(\d+\), a NumPy integer \(np.int64\); a token id is a Python int", r"int\(\.\.\.\)")


def test_drafting_that_checks_k_after_its_forward():
    def answer(draft, tokens, k, threshold):
        guesses, p = [], 1.0
        while True:
            probs = softmax(draft.forward(tokens + guesses)[-1])  # computed before the loop's tests
            if len(guesses) >= k or p < threshold:
                return guesses
            guesses.append(int(np.argmax(probs)))
            p *= probs[guesses[-1]]
    fails("06", answer, r"returned \[\d+\], but the draft ran 2 forward passes for 1 guesses", "before the forward of "
          "the next guess")


def test_drafting_from_the_text_alone():
    def answer(draft, tokens, k, threshold):
        guesses, p = [], 1.0
        while len(guesses) < k and p >= threshold:
            probs = softmax(draft.forward(tokens)[-1])  # the guesses never join the text the draft reads
            guesses.append(int(np.argmax(probs)))
            p *= probs[guesses[-1]]
        return guesses
    fails("06", answer, r"draft_while_confident\(<a draft certain of every guess>, \[3\], k=3, threshold=1.0\) "
          r"returned \[4, 4, 4\], expected \[4, 5, 6\]: .*; the draft's greedy guesses \[4, 5, 6, 7\]",
          "the draft's argmax after the text and all the earlier guesses")


def test_next_threshold_toward_the_first_draft_when_nothing_is_accepted():
    fails("07", next_threshold_toward(lambda n: max(n - 1, 0)), r"next_threshold\(0.4, \[0.9, 0.6\], 0, 0.1\) returned "
          r"0.65, expected 0.7: nothing accepted: .*; it moved halfway toward cumulative\[0\] = 0.9, the cumulative "
          "probability of the first REJECTED draft", "exercise 8")


def test_next_threshold_clamped_before_it_moves():
    def answer(threshold, cumulative, n_accepted, boost):
        threshold = min(max(threshold, 0.05), 0.95)  # the clamp, but on the old threshold
        if n_accepted == len(cumulative):
            return threshold - boost
        return (threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2
    fails("07", answer, r"next_threshold\(0.1, \[0.9\], 1, 0.1\) returned 0.0, expected 0.05: the lower clamp",
          r"within \[0.05, 0.95\]")


def test_next_threshold_that_also_lowers_after_a_rejection():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted < len(cumulative):
            threshold = (threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2
        return min(max(threshold - boost, 0.05), 0.95)  # boost taken off every round
    fails("07", answer, r"next_threshold\(0.4, \[0.9, 0.6\], 0, 0.1\) returned 0.6, expected 0.7: nothing accepted",
          "move halfway toward the cumulative probability of the last accepted draft")


def test_seed_000s_update_clipped_by_numpy():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted <= n_draft:
            threshold = (threshold + (drafted_probs[n_accepted - 2] if n_accepted > 1 else 1.0)) / 2
        else:
            threshold -= boost
        return np.clip(threshold, 0.05, 0.95)
    fails("08", answer, r"update_threshold\(0.4, \[0.9, 0.6, 0.3\], 3, 3, 0.1\) returned np.float64\(0.5\), a NumPy float "
          r"\(np.float64\); the threshold is a Python float", r"float\(\.\.\.\)")


def test_seed_000s_update_with_the_empty_prefix_prepended():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        drafted_probs.insert(0, 1.0)  # the empty prefix in front: drafted_probs[n_accepted - 1] is then right
        return checks.notes_threshold(threshold, drafted_probs, n_accepted, n_draft, boost)
    fails("08", answer, r"changed its argument drafted_probs: \[0.9, 0.6, 0.3\] became \[1.0, 0.9, 0.6, 0.3\]",
          "the notes' loop goes on with it")


def test_seed_000s_update_with_an_empty_prefix_of_0():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted <= n_draft:
            threshold = (threshold + (drafted_probs[n_accepted - 2] if n_accepted > 1 else 0.0)) / 2
        else:
            threshold -= boost
        return min(max(threshold, 0.05), 0.95)
    fails("08", answer, r"update_threshold\(0.4, \[0.9, 0.6\], 1, 2, 0.1\) returned 0.2, expected 0.7: .*; no draft was "
          r"accepted \(n_accepted = 1, the oracle's token alone\), so the accepted prefix is empty and its probability "
          "is 1.0", "there is no last accepted draft")


def test_next_threshold_that_needs_a_draft_to_lower_it():
    def answer(threshold, cumulative, n_accepted, boost):
        if cumulative and n_accepted == len(cumulative):  # "every draft accepted" read as "there were drafts"
            threshold -= boost
        else:
            threshold = (threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2
        return min(max(threshold, 0.05), 0.95)
    # (the diagnosis that recognises the threshold notes' update must not index the empty list itself)
    fails("07", answer, r"next_threshold\(0.4, \[\], 0, 0.1\) returned 0.7, expected 0.3: a round of no drafts \(an "
          r"empty cumulative\): none was rejected", "when every draft was accepted, lower the threshold by boost")
