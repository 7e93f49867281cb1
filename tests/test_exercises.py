"""The exercises' checkers (exercises/checks/): they pass the project's own functions, fail plausible
wrong answers with a message naming what went wrong, and call an untouched exercise "not solved yet".

Nothing here reads the exercise files, so a student's solved repository stays green.
The wrong answers below give hints away: read them after the exercises.
"""

import ast
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from fixtures import ROOT

import checks  # noqa: E402  (exercises/checks: conftest puts exercises/ on the path)
from stats import Stats  # noqa: E402
from gpt2 import MASKED, softmax  # noqa: E402
from kvcache import KVCache  # noqa: E402
from ngram import NGramDrafter  # noqa: E402
from speculative import speculative_generate  # noqa: E402
from sps import residual, sample  # noqa: E402


@pytest.mark.slow
def test_the_reference_solutions_pass_every_check():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises", "--reference"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(checks.EXERCISES)} passed" in r.stdout


@pytest.mark.parametrize("number", checks.EXERCISES)
def test_an_untouched_exercise_is_not_solved_yet(number):
    def stub(*args):
        raise NotImplementedError("the stub of every exercise file")
    with pytest.raises(checks.NotSolved) as failure:
        checks.check(number, stub)
    module = checks.EXERCISES[number].module
    assert str(failure.value) == f"exercise {number} is not solved yet: see EXERCISES.md, then edit exercises/{module}.py"


def test_exercises_md_numbers_the_exercises_as_their_files():
    # Exercise N is "### N. title (grade[, hands-on])" in EXERCISES.md and, if hands-on,
    # exercises/exNN_name.py, checked by `pytest exercises/ -k exNN`.
    with open(os.path.join(ROOT, "EXERCISES.md"), encoding="utf-8") as f:
        sections = re.split(r"^### ", f.read(), flags=re.M)[1:]
    headings = [re.match(r"(\d+)\. (.*)", s).groups() for s in sections]
    assert [int(n) for n, _ in headings] == list(range(1, len(headings) + 1)) and len(headings) >= 18
    for (n, title), text in zip(headings, sections):
        assert re.search(r"\((warm-up|core|stretch)(, hands-on)?\)$", title), f"exercise {n} has no grade: {title}"
        number = f"{int(n):02d}"
        assert title.endswith(", hands-on)") == (number in checks.EXERCISES), title
        if number in checks.EXERCISES:
            assert f"`exercises/{checks.EXERCISES[number].module}.py`" in text, title
            assert f"pytest exercises/ -k ex{number}\n" in text, title


def test_every_hands_on_exercise_has_six_wrong_answers_here_at_least():
    # A wrong answer is a call fails(number, ...) below, apart from the files as shipped (unsolved=True): the
    # classes of mistakes a learner makes (real-size ids, zero probabilities, the wrong type, ...) and more.
    with open(__file__, encoding="utf-8") as f:
        calls = [node for node in ast.walk(ast.parse(f.read())) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", None) == "fails"]
    wrong_answers = Counter(call.args[0].value for call in calls if isinstance(call.args[0], ast.Constant)
                            and not any(k.arg == "unsolved" for k in call.keywords))
    assert {n: wrong_answers[n] for n in checks.EXERCISES if wrong_answers[n] < 6} == {}


def fails(number, answer, *patterns, unsolved=False):
    """Run exercise number's check on a wrong answer; its message must match every pattern."""
    with pytest.raises(AssertionError) as failure:
        checks.check(number, answer)
    message = str(failure.value)
    assert isinstance(failure.value, checks.NotSolved) == unsolved, message
    assert "\n  where to look: " in message, message
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in:\n{message}"
    return message


# --- exercise 3: the accepted prefix --------------------------------------------

def test_accepted_prefix_without_a_default_for_all_accepted():
    fails("03", lambda d, o: next(i for i in range(len(d)) if d[i] != o[i]),
          r"\[5, 7, 9\], \[5, 7, 9, 4\]\) raised StopIteration", "all len\\(drafted\\) of them are accepted")


def test_accepted_prefix_that_skips_token_0():
    def answer(drafted, oracle_choice):
        n = 0
        while n < len(drafted) and drafted[n] and drafted[n] == oracle_choice[n]:
            n += 1
        return n
    fails("03", answer, r"\(\[0, 0\], \[0, 1, 2\]\) returned 0, expected 1", "token id 0")


def test_accepted_prefix_that_counts_every_match():
    fails("03", lambda d, o: sum(a == b for a, b in zip(d, o)), r"\[1, 7, 9, 4\]\) returned 2, expected 0", "first disagreement")


def test_accepted_prefix_with_a_sentinel_appended_to_the_callers_list():
    def answer(drafted, oracle_choice):
        drafted.append(None)  # seed 000's None, appended to the caller's list instead of a copy
        n = 0
        while drafted[n] == oracle_choice[n]:
            n += 1
        return n
    fails("03", answer, r"changed its argument drafted: \[5, 7, 9\] became \[5, 7, 9, None\]", "work on a copy")


def test_accepted_prefix_as_a_float():
    def answer(drafted, oracle_choice):
        n = 0.0
        while n < len(drafted) and drafted[int(n)] == oracle_choice[int(n)]:
            n += 1
        return n
    fails("03", answer, r"returned 2.0, a float; a count is an int", "type of what you return")


def test_accepted_prefix_as_seed_000_counts_it():
    def answer(drafted, oracle_choice):  # seed 000's n_accepted: the index of the first mismatch, plus one
        return next(i + 1 for i, (c, d) in enumerate(zip(oracle_choice, drafted + [None])) if c != d)
    fails("03", answer, r"returned 3, expected 2", "the oracle's own token comes after them", "exercise 8")


def test_accepted_prefix_with_is_for_equals():
    def answer(drafted, oracle_choice):
        n = 0
        while n < len(drafted) and drafted[n] is oracle_choice[n]:  # holds for ids up to 256 only
            n += 1
        return n
    fails("03", answer, r"\(\[2393, 50256, 257\], \[2393, 50256, 300, 11\]\) returned 0, expected 2", "==, not `is`",
          r"-5\.\.256")


def test_accepted_prefix_by_argmin_of_the_matches():
    # np.argmin of [True, True, True] is 0: the round where every draft matches
    fails("03", lambda d, o: np.argmin(np.array(d) == np.array(o[:len(d)])),
          r"\[5, 7, 9\], \[5, 7, 9, 4\]\) returned np.int64\(0\), expected 3", r"count up to len\(drafted\)")


def test_accepted_prefix_with_ids_in_int16():
    def answer(drafted, oracle_choice):  # "ids are small": real ones are not (50256 > 32767)
        d, o = np.array(drafted, np.int16), np.array(oracle_choice, np.int16)
        n = 0
        while n < len(d) and d[n] == o[n]:
            n += 1
        return n
    fails("03", answer, r"accepted_prefix_length\(\[2393, 50256, 257\], .* raised OverflowError: Python integer 50256 "
                        "out of bounds for int16")


def test_accepted_prefix_as_a_numpy_float():
    fails("03", lambda d, o: np.cumprod(np.array(d) == np.array(o[:len(d)]), dtype=float).sum(),
          r"returned np.float64\(2.0\), a float; a count is an int", "type of what you return")


# --- exercise 4: rollback -----------------------------------------------------------

def test_rollback_one_too_short():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept - 1))
    fails("04", answer, r"rollback\(9, caches of 10, 8 positions\) left 8, 8; expected 9, 8: cache 1 was cut too short")


def test_rollback_without_min():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(n_kept)
    fails("04", answer, "raised ValueError", "shorter than n_kept must be left as it is")


def test_rollback_of_the_first_cache_only():
    def answer(n_kept, *caches):
        caches[0].truncate(min(caches[0].n_tokens(), n_kept))
    fails("04", answer, r"left 7, 9; expected 7, 7: cache 2 still holds 2 position", "every cache")


def test_rollback_that_keeps_the_newest_token_too():
    def answer(n_kept, *caches):
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept + 1))
    fails("04", answer, r"left 10, 8; expected 9, 8: cache 1 still holds 1 position\(s\) past the first 9")


def test_rollback_that_empties_a_long_cache():
    def answer(n_kept, *caches):
        for cache in caches:
            if cache.n_tokens() > n_kept:
                cache.truncate(0)
    fails("04", answer, r"left 0, 8; expected 9, 8: cache 1 was cut too short. It had 10 positions and must keep 9")


def test_rollback_of_a_list_of_caches():
    def answer(n_kept, caches):  # the signature misread: the caches come one by one, *caches
        for cache in caches:
            cache.truncate(min(cache.n_tokens(), n_kept))
    fails("04", answer, r"rollback\(9, caches of 10, 8 positions\) raised TypeError: .*takes 2 positional arguments but 3")


# --- exercise 5: the KV-cache bug -------------------------------------------------

def keep_all_but_the_newest(tokens):
    return len(tokens) - 1


def classic_generate(oracle_keep, room=1, draft_keep=keep_all_but_the_newest, catch_up=True,
                     accepted=lambda d, c: checks.EXERCISES["03"].reference()(d, c), new_oracle_cache=False,
                     new_draft_cache=False):
    """ex05's generator as shipped, with its step 4 for each cache (None: no truncate), its step 1's room, its
    catch-up of the draft, its count of accepted drafts, and a new cache each round (fed the text again) as given."""
    def generate(draft, oracle, ids, n_new, n_draft):
        tokens, end = list(ids), len(ids) + n_new
        draft_cache, oracle_cache = KVCache(), KVCache()
        draft.forward(tokens[:-1], draft_cache, n_logits=1)
        oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
        while len(tokens) < end:
            k = min(n_draft, end - len(tokens) - room)
            if new_draft_cache:
                draft_cache = KVCache()
            drafted = []
            for _ in range(k):
                read = (drafted or tokens)[-1:] if draft_cache.n_tokens() else tokens + drafted
                drafted.append(int(np.argmax(draft.forward(read, draft_cache)[-1])))
            if new_oracle_cache:
                oracle_cache = KVCache()
                choice = np.argmax(oracle.forward(tokens + drafted, oracle_cache)[len(tokens) - 1:], axis=-1)
            else:
                choice = np.argmax(oracle.forward([tokens[-1]] + drafted, oracle_cache), axis=-1)
            n = accepted(drafted, choice)
            tokens += drafted[:n] + [int(choice[n])]
            n_kept = len(tokens) - 1
            if catch_up and draft_cache.n_tokens() < n_kept:
                draft.forward(tokens[draft_cache.n_tokens():n_kept], draft_cache, n_logits=1)
            if draft_keep is not None:
                draft_cache.truncate(min(draft_cache.n_tokens(), draft_keep(tokens)))
            if oracle_keep is not None:
                oracle_cache.truncate(min(oracle_cache.n_tokens(), oracle_keep(tokens)))
            yield from drafted[:n] + [int(choice[n])]
    return generate


def test_the_cache_bug_as_shipped_is_not_solved_yet():
    fails("05", classic_generate(None), r"token \d+ is \d+, but greedy decoding gives \d+", "python exercises/ex05",
          unsolved=True)


def test_the_cache_bug_fixed_one_position_too_short():
    fails("05", classic_generate(lambda tokens: len(tokens) - 2), "held \\d+ positions; it should hold",
          "never reads token", "cut 1 position\\(s\\) too short")


def test_the_cache_bug_fixed_one_position_too_long():
    fails("05", classic_generate(lambda tokens: len(tokens)), "1 extra position\\(s\\) hold keys and values of drafts",
          "step 4")


def test_a_round_that_overshoots():
    fails("05", classic_generate(lambda tokens: len(tokens) - 1, room=0), r"got \d+ tokens \(or more\), \d+ more than asked",
          "the last round began with", "step 1")


def test_the_fixed_generator_passes():
    checks.check("05", classic_generate(keep_all_but_the_newest))


def test_a_fix_that_drops_the_drafts_catch_up():
    # The text stays right (the oracle's cache is right), and the draft guesses from a text with a hole in it:
    # only the oracle's pass count shows what it costs.
    fails("05", classic_generate(keep_all_but_the_newest, catch_up=False), "your tokens are right, but the draft's "
          r"cache is wrong: .* it fed token \d+ at position \d+, where the text has \d+: token\(s\) \[\d+\] at position "
          r"\d+ were never read", r"The oracle checked drafts in \d+ passes and kept \d+ of your \d+; with a right draft "
          r"cache it needs \d+ passes", "never changes the text, only the speed", "the draft never read its own last guess")


def test_a_fix_that_never_cuts_the_drafts_cache():
    fails("05", classic_generate(keep_all_but_the_newest, draft_keep=None), "the draft's cache is wrong: .* position "
          r"\d+ holds the keys and values of token \d+, where the text has \d+: a draft the oracle rejected",
          r"The oracle checked drafts in \d+ passes", "cut it to the kept tokens")


def test_a_fix_that_compares_with_is():
    # drafted[n] is an int, oracle_choice[n] a NumPy int: `is` never holds, every draft is rejected
    fails("05", classic_generate(keep_all_but_the_newest, accepted=lambda d, c: next(
        (i for i in range(len(d)) if d[i] is not c[i]), len(d))), r"the oracle kept 0 of your \d+ drafts, where a right "
          r"round keeps \d+ of the same draft's \d+: it checked drafts in \d+ passes where \d+ suffice", "compare ids with ==")


def test_a_fix_with_a_new_oracle_cache_every_round():
    fails("05", classic_generate(None, new_oracle_cache=True), r"the oracle read \d+ tokens of the text again, though it "
          "had read them before", "truncate")


def test_a_fix_with_a_new_draft_cache_every_round():
    fails("05", classic_generate(keep_all_but_the_newest, new_draft_cache=True), r"the draft read \d+ tokens of the text again",
          "cut the draft's cache back")


# --- exercise 6: drafting while confident -----------------------------------------

def drafting(stop_before=False, cap=None, per_token=False, choose=lambda probs: int(np.argmax(probs)), summed=False):
    def answer(draft, tokens, k_limit, threshold):
        guesses, p = [], 1.0
        while len(guesses) < (k_limit if cap is None else cap) and p >= threshold:
            probs = softmax(draft.forward(tokens + guesses)[-1])
            x = choose(probs)
            if stop_before and p * probs[x] < threshold:
                break
            guesses.append(x)
            p = probs[x] if per_token else p + probs[x] if summed else p * probs[x]
        return guesses
    return answer


def test_drafting_that_drops_the_guess_crossing_the_threshold():
    fails("06", drafting(stop_before=True), "one guess short", "cumulative probabilities")


def test_drafting_past_k_max():
    fails("06", drafting(cap=50), r"but at most k_limit = \d+ are allowed")


def test_drafting_on_each_guess_alone():
    fails("06", drafting(per_token=True), "product of the guesses' probabilities")


def test_drafting_that_appends_to_the_callers_tokens():
    def answer(draft, tokens, k_limit, threshold):
        start, p = len(tokens), 1.0
        while len(tokens) - start < k_limit and p >= threshold:
            probs = softmax(draft.forward(tokens)[-1])
            tokens.append(int(np.argmax(probs)))
            p *= probs[tokens[-1]]
        return tokens[start:]
    fails("06", answer, r"changed its argument tokens: \[", "work on a copy")


def test_drafting_by_sampling():
    rng = np.random.default_rng(0)
    fails("06", drafting(choose=lambda probs: int(rng.choice(len(probs), p=probs / probs.sum()))),
          r"the draft's greedy guesses \[[\d, ]+\] have cumulative probabilities",
          "each guess is the draft's argmax")


def test_drafting_with_the_probabilities_added():
    fails("06", drafting(summed=True), "drafting goes on while the product of the guesses' probabilities so far",
          "what the loop multiplies")


def test_drafting_into_a_float_array():
    def answer(draft, tokens, k_limit, threshold):
        guesses, n, p = np.zeros(k_limit), 0, 1.0  # preallocated: np.zeros is float64
        while n < k_limit and p >= threshold:
            probs = softmax(draft.forward(tokens + [int(g) for g in guesses[:n]])[-1])
            guesses[n] = np.argmax(probs)
            p, n = p * probs[int(guesses[n])], n + 1
        return guesses[:n]
    fails("06", answer, r"returned array\(\[[\d., ]+\]\), whose entry 0 is np.float64\(\d+.0\), a float; a token id is an int",
          "every entry must be an int")


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
    fails("07", next_threshold_toward(lambda n: n), "first REJECTED draft", "seed 000", "exercise 8")


def test_next_threshold_copied_from_seed_000():
    def answer(threshold, cumulative, n_accepted, boost):
        return checks.seed000_threshold(threshold, cumulative, n_accepted, len(cumulative), boost)
    fails("07", answer, "seed 000's, copied as it is", "counts the oracle's own token", "exercise 8")


def test_next_threshold_without_the_empty_prefix():
    fails("07", next_threshold_toward(lambda n: n - 1), r"cumulative\[-1\] = 0.6, Python's LAST element", "1.0")


def test_next_threshold_without_the_clamp():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            return threshold - boost
        return (threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2
    fails("07", answer, r"returned 0, expected 0.05", r"\[0.05, 0.95\]")


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
    fails("07", answer, r"returned 0.6, expected 0.5: it moved all the way to the cumulative probability of the last "
          r"accepted draft, 0.6", "halfway")


def test_next_threshold_with_a_trailing_comma():
    def answer(threshold, cumulative, n_accepted, boost):
        return checks.EXERCISES["07"].reference()(threshold, cumulative, n_accepted, boost),  # a tuple
    fails("07", answer, r"returned \(0.5,\), not a number", "what the function returns")


def test_next_threshold_with_the_boost_as_a_factor():
    def answer(threshold, cumulative, n_accepted, boost):
        if n_accepted == len(cumulative):
            return min(max(threshold * (1 - boost), 0.05), 0.95)
        return min(max((threshold + (cumulative[n_accepted - 1] if n_accepted else 1.0)) / 2, 0.05), 0.95)
    fails("07", answer, r"returned 0.36, expected 0.3", "lower the threshold by boost")


def test_seed_000s_update_as_shipped_is_not_solved_yet():
    fails("08", checks.seed000_threshold, "returns 0.35", "gives 0.5", unsolved=True)


def test_seed_000s_update_shifted_without_the_empty_prefix():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        return checks.seed000_threshold(threshold, drafted_probs, n_accepted - 1, n_draft, boost)
    fails("08", answer, r"drafted_probs\[-1\] = 0.6, Python's LAST element")


def test_seed_000s_update_with_the_test_changed_instead_of_the_index():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        return checks.seed000_threshold(threshold, drafted_probs, n_accepted, n_draft - 1, boost)  # `<` for `<=`
    fails("08", answer, r"returned 0.3, expected 0.5 \(2 of 3 drafts accepted\): it lowered the threshold by boost",
          "the branch's test")


def test_seed_000s_update_with_its_boost_written_in():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):
        if n_accepted <= n_draft:
            threshold = (threshold + (drafted_probs[n_accepted - 2] if n_accepted > 1 else 1.0)) / 2
        else:
            threshold -= 0.1
        return min(max(threshold, 0.05), 0.95)
    fails("08", answer, r"returned 0.5, expected 0.35 .*not by boost = 0.25", "argument boost")


def test_seed_000s_update_replaced_by_threshold_py_as_it_is():
    def answer(threshold, drafted_probs, n_accepted, n_draft, boost):  # the seed's n_accepted passed on unchanged
        return checks.EXERCISES["07"].reference()(threshold, drafted_probs, n_accepted, boost)
    fails("08", answer, r"update_threshold\(0.4, \[0.9, 0.6\], 3, 2, 0.1\) raised IndexError",
          r"counts the oracle's own token too: .* n_draft \+ 1")


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
    fails("08", answer, r"returned 0.6, expected 0.5 .*all the way to the cumulative probability of the last accepted "
          r"draft, 0.6", "halfway")


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


# --- exercises 16 and 18: prompt lookup, the tree mask ----------------------------------

def lookup(order, starts):
    def answer(tokens, k, max_tail=3):
        for n in order(min(max_tail, len(tokens) - 1)):
            for s in starts(len(tokens), n):
                if tokens[s:s + n] == tokens[-n:]:
                    return tokens[s + n:s + n + k]
        return []
    return answer


def test_lookup_of_the_earliest_occurrence():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n)), "LATEST", "direction")


def test_lookup_of_the_shortest_tail_first():
    fails("16", lookup(lambda m: range(1, m + 1), lambda length, n: range(length - n - 1, -1, -1)),
          "longest matching tail")


def test_lookup_with_max_tail_written_in():
    def answer(tokens, k, max_tail=3):
        return lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n - 1, -1, -1))(tokens, k)
    fails("16", answer, r"max_tail=1\) returned \[7, 8\], expected \[9, 1\]: that is the answer with max_tail = 3",
          "the argument max_tail")


def test_lookup_one_guess_short():
    def answer(tokens, k, max_tail=3):
        return checks.EXERCISES["16"].reference()(tokens, k, max_tail)[:k - 1]
    fails("16", answer, r"returned \[9, 1\], expected \[9, 1, 2\].*one guess short of k = 3", "end of the slice")


def test_lookup_that_finds_the_tail_itself():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - n, -1, -1)),
          r"returned \[\], expected \[9, 1, 2\]", "excludes the tail itself")


def test_lookup_in_the_joined_text():
    def answer(tokens, k, max_tail=3):
        joined = ",".join(map(str, tokens))
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            tail = ",".join(map(str, tokens[-n:]))
            at = joined.rfind(tail, 0, len(joined) - len(tail) - 1)
            if at >= 0:
                start = joined[:at].count(",")  # the token whose text the match begins in
                return tokens[start + n:start + n + k]
        return []
    fails("16", answer, r"lookup\(\[11, 2, 5, 6, 2, 8, 1, 2\], k=2, max_tail=2\) returned \[5, 6\], expected \[8, 1\]: the last "
          r"2 tokens \[1, 2\] occur nowhere earlier as tokens, but their text '1,2' occurs at character 1 of "
          r"'11,2,5,6,2,8,1,2', inside other ids", "not their decimal text")


def test_lookup_as_floats():
    def answer(tokens, k, max_tail=3):
        return np.array(checks.EXERCISES["16"].reference()(tokens, k, max_tail), dtype=float)
    fails("16", answer, r"returned array\(\[9., 1., 2.\]\), whose entry 0 is np.float64\(9.0\), a float; a token id is an int",
          "every entry must be an int")


def test_lookup_in_bytes():
    def answer(tokens, k, max_tail=3):  # bytes.rfind, fast and exact, for ids that fit in a byte
        text = bytes(tokens)
        for n in range(min(max_tail, len(tokens) - 1), 0, -1):
            at = text.rfind(text[-n:], 0, len(tokens) - 1)
            if at >= 0:
                return tokens[at + n:at + n + k]
        return []
    fails("16", answer, r"lookup\(\[2393, 50256, 7, 8, 50256, 9, 393, 50256\], k=2, max_tail=2\) raised ValueError: bytes "
          r"must be in range\(0, 256\)")


def test_lookup_of_occurrences_that_end_before_the_tail():
    fails("16", lookup(lambda m: range(m, 0, -1), lambda length, n: range(length - 2 * n, -1, -1)),
          r"lookup\(\[7, 7, 7, 7\], k=2, max_tail=3\) returned \[7, 7\], expected \[7\]: the last 3 token\(s\) \[7, 7, 7\] "
          r"occur earlier at position\(s\) \[0\]; the one at 0 overlaps the tail itself", "overlapping or not")


def test_lookup_with_tails_one_token_short():
    def answer(tokens, k, max_tail=3):  # max_tail read as NGramDrafter's n, whose tails are n - 1 tokens long
        return checks.EXERCISES["16"].reference()(tokens, k, max_tail - 1)
    fails("16", answer, r"returned \[\], expected \[8, 1, 2\]: that is the answer with max_tail = 0|that is the answer "
          r"with max_tail = \d; tails here are at most \d token\(s\) long", "the argument max_tail")


def test_tree_mask_that_is_causal():
    def answer(nodes, new, n_text, n_fed):
        width = n_text + n_fed + len(new)
        rows = n_text + np.asarray(new)[:, None]
        return np.where(np.arange(width)[None, :] <= rows, np.float32(0), MASKED)
    fails("18", answer, r"row \d+ \(node \d+, .*\) sees column \d+; column \d+ is node \d+, not on its path", "cousin")


def test_tree_mask_that_sees_the_parent_only():
    def answer(nodes, new, n_text, n_fed):
        mask = np.full((len(new), n_text + n_fed + len(new)), MASKED, np.float32)
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            mask[row, n_text + i] = 0
            if nodes[i].parent != -1:
                mask[row, n_text + nodes[i].parent] = 0
        return mask
    fails("18", answer, r"row 5 \(node 5, child of node 2, depth 3\) hides column 4; column 4 is node 0, its ancestor",
          "its ancestors and itself")


def test_tree_mask_without_the_text():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[:, :n_text] = MASKED
        return mask
    fails("18", answer, r"hides column 0; column 0 is text, which every node sees")


def test_tree_mask_without_the_node_itself():
    def answer(nodes, new, n_text, n_fed):
        mask = checks.EXERCISES["18"].reference()(nodes, new, n_text, n_fed)
        mask[np.arange(len(new)), n_text + np.asarray(new)] = MASKED
        return mask
    fails("18", answer, r"hides column 4; column 4 is node 0, itself")


def test_tree_mask_in_float64():
    def answer(nodes, new, n_text, n_fed):
        mask = np.zeros((len(new), n_text + n_fed + len(new)))  # float64
        mask[:] = MASKED
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            while i != -1:
                mask[row, n_text + i] = 0
                i = nodes[i].parent
        return mask
    fails("18", answer, r"returned float64, expected float32", "the dtype of the array you fill")


def test_tree_mask_by_row_instead_of_node():
    def answer(nodes, new, n_text, n_fed):
        mask = np.full((len(new), n_text + n_fed + len(new)), MASKED, np.float32)
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            mask[row, n_text + row] = 0  # the row's own column, not node i's
            while nodes[i].parent != -1:
                i = nodes[i].parent
                mask[row, n_text + i] = 0
        return mask
    fails("18", answer, r"tree_mask\(<6 nodes>, new=\[2, 3, 4\], n_text=4, n_fed=2\): row 0 \(node 2, child of node 0, depth "
          r"2\) hides column 6; column 6 is node 2, itself", r"node i's keys sit in column n_text \+ i")


def test_tree_mask_without_the_nodes_fed_before():
    def answer(nodes, new, n_text, n_fed):
        mask = np.full((len(new), n_text + len(new)), MASKED, np.float32)  # columns for the new nodes only
        mask[:, :n_text] = 0
        for row, i in enumerate(new):
            while i != -1:
                if i >= new[0]:
                    mask[row, n_text + i - new[0]] = 0
                i = nodes[i].parent
        return mask
    fails("18", answer, r"new=\[2, 3, 4\], n_text=4, n_fed=2\) returned shape \(3, 7\), expected \(3, 9\)",
          "the n_fed nodes already in the cache")


# --- part 6, on the learned pair: exercises 22-25 -------------------------------------

def acceptance_by_kind(pooled=True, fresh=True, bottom=lambda s: s.drafted, consume=True, use_k=True,
                       use_n_new=True, per_round=False):
    def answer(draft, oracle, prompts, n_new, k):
        counts, rates, stats = {}, {}, Stats()
        for kind, ids in prompts:
            stats = Stats(trace=[]) if fresh else stats
            run = speculative_generate(draft, oracle, ids, n_new if use_n_new else 16, stats=stats,
                                       **({"n_draft": k} if use_k else {}))
            if consume:
                list(run)
            accepted, proposed = counts.get(kind, (0, 0)) if fresh else (0, 0)
            counts[kind] = (accepted + stats.accepted, proposed + bottom(stats))
            rates.setdefault(kind, []).extend([r.accepted / len(r.drafted) for r in stats.trace if r.drafted]
                                              if per_round else [stats.accepted / bottom(stats)])
        if not pooled or per_round:
            return {kind: sum(r) / len(r) for kind, r in rates.items()}
        return {kind: accepted / proposed for kind, (accepted, proposed) in counts.items()}
    return answer


def test_acceptance_by_kind_averaged_over_prompts():
    fails("22", acceptance_by_kind(pooled=False), "that is the mean of its prompts' rates", "pool the kind's counts")


def test_acceptance_by_kind_averaged_over_rounds():
    fails("22", acceptance_by_kind(per_round=True), r"that is the mean of its \d+ rounds' rates",
          "pool the counts of all its rounds")


def test_acceptance_by_kind_with_one_stats_for_every_prompt():
    fails("22", acceptance_by_kind(fresh=False), r"the acceptance of the first \d+ prompts together", "a fresh")


def test_acceptance_by_kind_over_the_tokens_produced():
    fails("22", acceptance_by_kind(bottom=lambda s: len(s.from_draft)), "new tokens that were drafts",
          r"stats\.drafted")


def test_acceptance_by_kind_that_ignores_k():
    # speculative_generate's default draft length is the checker's first k: only another k shows the mistake
    fails("22", acceptance_by_kind(use_k=False), r"n_new=12, k=3\).*drafts per round, speculative_generate's "
          r"default, not k = 3", "n_draft=k")


def test_acceptance_by_kind_that_ignores_n_new():
    fails("22", acceptance_by_kind(use_n_new=False), r"n_new=12, k=3\)", "the checker varies them")


def test_acceptance_by_kind_that_never_runs_the_generator():
    fails("22", acceptance_by_kind(consume=False), "raised ZeroDivisionError", "generator")


def test_acceptance_by_kind_as_counts():
    def answer(draft, oracle, prompts, n_new, k):
        counts = {}
        for kind, ids in prompts:
            stats = Stats()
            list(speculative_generate(draft, oracle, ids, n_new, n_draft=k, stats=stats))
            accepted, drafted = counts.get(kind, (0, 0))
            counts[kind] = (accepted + stats.accepted, drafted + stats.drafted)
        return counts  # the counts, never divided
    fails("22", answer, r"\['\w+'\] returned \(\d+, \d+\), not a number", "what the function returns")


def test_acceptance_by_kind_as_leviathans_alpha():
    fails("22", acceptance_by_kind(bottom=lambda s: s.accepted + s.rejections),
          r"accepted / \(accepted \+ rejections\), Leviathan et al.'s alpha", r"stats\.drafted")


def test_acceptance_by_kind_as_a_percentage():
    def answer(draft, oracle, prompts, n_new, k):
        return {kind: 100 * rate for kind, rate in acceptance_by_kind()(draft, oracle, prompts, n_new, k).items()}
    fails("22", answer, r"you gave \d+.\d{4}, expected 0.\d{4}: .* that is a percentage", "a fraction of 1")


def tokens_per_round(alpha, n_draft):
    return n_draft + 1 if alpha == 1 else (1 - alpha ** (n_draft + 1)) / (1 - alpha)


def best_draft_length(per_round=tokens_per_round, check=lambda T, n_draft: T[n_draft + 1] / T[1], last=lambda T: max(T) - 1,
                      largest_on_tie=False, draft_passes=lambda n_draft: n_draft, returns=lambda n_draft, score: n_draft):
    def answer(alpha, c, T):
        best, best_score = None, -1.0
        for n_draft in range(1, last(T) + 1):
            score = per_round(alpha, n_draft) / (draft_passes(n_draft) * c + check(T, n_draft))
            if score > best_score or (largest_on_tie and score == best_score):
                best, best_score = n_draft, score
        return returns(best, best_score)
    return answer


def test_best_draft_length_with_free_checking():
    fails("23", best_draft_length(check=lambda T, n_draft: 1.0), "best n_draft if checking were free", r"T\[n_draft \+ 1\] / T\[1\]")


def test_best_draft_length_that_divides_by_zero_at_alpha_1():
    fails("23", best_draft_length(per_round=lambda alpha, n_draft: (1 - alpha ** (n_draft + 1)) / (1 - alpha)),
          r"alpha=1, .* raised ZeroDivisionError", r"n_draft \+ 1 tokens")


def test_best_draft_length_checking_k_tokens():
    fails("23", best_draft_length(check=lambda T, n_draft: T[n_draft] / T[1]), r"costed at T\[n_draft\]", r"reads n_draft \+ 1 tokens")


def test_best_draft_length_past_the_curve():
    fails("23", best_draft_length(last=max), "raised KeyError", r"n_draft runs from 1 to max\(T\) - 1")


def test_best_draft_length_largest_on_a_tie():
    fails("23", best_draft_length(largest_on_tie=True), "the two tie", "smallest n_draft")


def test_best_draft_length_as_a_float():
    def answer(alpha, c, T):
        return float(checks.EXERCISES["23"].reference()(alpha, c, T))
    fails("23", answer, r"returned 2.0, a float; a draft length \(here n_draft = 2\) is an int", "type of what you return")


def test_best_draft_length_with_the_longest_k_at_alpha_1():
    def answer(alpha, c, T):
        if alpha == 1:  # "every draft is kept, so draft as many as the curve allows"
            return max(T) - 1
        return checks.EXERCISES["23"].reference()(alpha, c, T)
    fails("23", answer, r"best_draft_length\(alpha=1, c=0.1, T=\{1: 10, 2: 10, 3: 20, 4: 20\}\) returned 3, expected n_draft = 1 "
          r".*: at alpha = 1 every round yields n_draft \+ 1 tokens, but the longest n_draft is not the best", "score every n_draft")


def test_best_draft_length_with_a_draft_pass_for_the_oracles_token():
    fails("23", best_draft_length(draft_passes=lambda n_draft: n_draft + 1), r"alpha=0.83, c=0.265, .* returned 4, expected n_draft = 2 "
          r".*that is the best n_draft with n_draft \+ 1 draft passes a round", "the oracle's own token needs no draft pass")


def test_best_draft_length_without_the_oracles_token():
    fails("23", best_draft_length(per_round=lambda alpha, n_draft: n_draft if alpha == 1 else (1 - alpha ** n_draft) / (1 - alpha)),
          r"that is the best n_draft with \(1 - alpha\^n_draft\) / \(1 - alpha\) tokens a round, the drafts kept alone",
          "AND the oracle's own token")


def test_best_draft_length_returning_its_score():
    fails("23", best_draft_length(returns=lambda n_draft, score: score), r"returned \d+.\d+, expected n_draft = 2",
          "the draft length n_draft itself, not its score")


def test_best_draft_length_as_an_index():
    def answer(alpha, c, T):  # scores[0] is n_draft = 1
        from speedup import predicted_speedup
        scores = [predicted_speedup(alpha, n_draft, c, T[n_draft + 1] / T[1]) for n_draft in range(1, max(T))]
        return int(np.argmax(scores))
    fails("23", answer, r"returned 1, expected n_draft = 2 .*1 is one less than the best n_draft: the index of the best score",
          r"scores\[i\] is n_draft = i \+ 1")


def accepted_path(choice_after=lambda i: i + 1, any_parent=False, one_level=False):
    def answer(parents, tokens, choice):
        path, at = [], -1
        while True:
            want = choice[0] if at == -1 else choice[choice_after(at)]
            child = next((j for j in range(len(parents)) if (any_parent or parents[j] == at) and tokens[j] == want
                          and j not in path), None)
            if child is None or (one_level and path):
                return path
            path.append(child)
            at = child
    return answer


def test_tree_path_with_choice_off_by_one():
    fails("24", accepted_path(choice_after=lambda i: i), r"the oracle chose \d+ \(choice\[\d+\]\)",
          r"after node i is choice\[i \+ 1\]")


def test_tree_path_to_any_node_with_the_token():
    fails("24", accepted_path(any_parent=True), r"node \d+ is not a child of node \d+", "a child of the last node")


def test_tree_path_of_one_level():
    fails("24", accepted_path(one_level=True), "the path goes on", "keep stepping down")


def test_tree_path_as_tokens():
    def answer(parents, tokens, choice):
        return [tokens[i] for i in checks.EXERCISES["24"].reference()(parents, tokens, choice)]
    fails("24", answer, "those are the path tokens", "indices")


def test_tree_path_as_floats():
    def answer(parents, tokens, choice):
        return np.array(checks.EXERCISES["24"].reference()(parents, tokens, choice), dtype=float)
    fails("24", answer, r"returned array\(\[1.\]\), whose entry 0 is np.float64\(1.0\), a float; a node index is an int")


def test_tree_path_as_a_mask_of_the_nodes():
    def answer(parents, tokens, choice):
        kept = [False] * len(parents)  # which nodes the round keeps, instead of their indices
        for i in checks.EXERCISES["24"].reference()(parents, tokens, choice):
            kept[i] = True
        return kept
    fails("24", answer, r"whose entry 0 is False, a bool; a node index is an int")


def test_tree_path_with_is_for_equals():
    def answer(parents, tokens, choice):
        path, at = [], -1
        while (child := next((j for j, p in enumerate(parents) if p == at and tokens[j] is choice[at + 1]),
                             None)) is not None:
            path.append(child)
            at = child
        return path
    fails("24", answer, r"tokens=\[464, 11361, 50256, 3290, 257, 13\], .* returned \[\], expected \[1, 4\]: that is the path "
          "with `is` for `==`", "CPython shares the objects of -5..256 only")


def test_tree_path_through_first_children_only():
    def answer(parents, tokens, choice):
        path, at = [], -1
        while (child := next((j for j, p in enumerate(parents) if p == at), None)) is not None \
                and tokens[child] == choice[at + 1]:  # the first child, and only it
            path.append(child)
            at = child
        return path
    fails("24", answer, r"returned \[\], expected \[1\]: after the root the oracle chose 12 \(choice\[0\]\), and node 1, a "
          "child of the root, has that token", r"every child of the last node kept, not its first only \(node 0\)")


def test_tree_path_leaf_first():
    def answer(parents, tokens, choice):
        return checks.EXERCISES["24"].reference()(parents, tokens, choice)[::-1]
    fails("24", answer, r"returned \[4, 1\], expected \[1, 4\]: that is the path leaf first", "root first")


def replay_lookup(step=1, room=1, sees=0, prefix=True, fixed_k=None, fixed_max_tail=None, empty_rounds=True,
                  start=None):
    def answer(tokens, n_prompt, k, max_tail=3):
        k, max_tail = fixed_k or k, fixed_max_tail or max_tail
        drafter, drafted, accepted, rounds, i = NGramDrafter(n=max_tail + 1), 0, 0, 0, n_prompt if start is None else start
        while i < len(tokens):
            guesses = drafter.lookup(tokens[:i + sees], k if room is None else min(k, len(tokens) - i - room))
            matches = [g == t for g, t in zip(guesses, tokens[i:])]
            n = (matches + [False]).index(False) if prefix else sum(matches)
            drafted, accepted, i = drafted + len(guesses), accepted + n, i + n + step
            rounds += 1 if guesses or empty_rounds else 0
        return drafted, accepted, rounds
    return answer


def test_lookup_replay_without_the_oracles_token():
    fails("25", replay_lookup(step=0), "did not finish", "AND the oracle's own token")


def test_lookup_replay_that_reads_ahead():
    fails("25", replay_lookup(sees=1), r"also sees tokens\[i\]", r"lookup\(tokens\[:i\], \.\.\.\)")


def test_lookup_replay_without_the_cut():
    fails("25", replay_lookup(room=None), "always asks for k drafts", r"min\(k, len\(tokens\) - i - 1\)")


def test_lookup_replay_counting_every_match():
    fails("25", replay_lookup(prefix=False), "counts every draft matching", "first one that differs")


def test_lookup_replay_with_k_written_in():
    fails("25", replay_lookup(fixed_k=4), r"k=2, max_tail=3\) returned .* that is the replay with k = 4, not 2",
          "the argument k")


def test_lookup_replay_with_the_drafters_default_tail():
    fails("25", replay_lookup(fixed_max_tail=3), r"k=3, max_tail=1\) returned .* with max_tail = 3, the default",
          r"NGramDrafter\(n=max_tail \+ 1\)")



def test_lookup_replay_as_floats():
    def answer(tokens, n_prompt, k, max_tail=3):
        drafted, accepted, rounds = replay_lookup()(tokens, n_prompt, k, max_tail)
        return drafted, accepted / 1, rounds  # "/ 1" to be safe: a float
    fails("25", answer, r"returned \(\d+, \d+.0, \d+\), whose accepted is \d+.0, a float; a count is an int")


def test_lookup_replay_without_the_empty_rounds():
    fails("25", replay_lookup(empty_rounds=False), "does not count the rounds whose lookup found nothing",
          "a round without drafts is still an oracle pass")


def test_lookup_replay_to_the_end_of_the_text():
    fails("25", replay_lookup(room=0), "whose last round may draft up to the end of the text",
          r"the oracle's own token must still fit")


def test_lookup_replay_from_the_start_of_the_prompt():
    fails("25", replay_lookup(start=0), "a replay from the start of the prompt", "i = n_prompt")


# --- part 7: exercises 26 (a batch's caches) and 27 (another vocabulary's draft) ----------------------

def cut_each_row(rule):
    return lambda cache_lengths, n_kept: [rule(c, n) for c, n in zip(cache_lengths, n_kept)]


def test_cut_rows_to_the_shortest_row():
    def answer(cache_lengths, n_kept):  # one length for the batch, as pad-and-mask would keep
        return [min(min(c, n) for c, n in zip(cache_lengths, n_kept))] * len(cache_lengths)
    fails("26", answer, r"returned \[290, 290, 290\], expected \[416, 301, 290\]: every row was cut to 290, the "
          r"shortest row's kept length; row 1 \(a cache of 416 positions, n_kept 416\) keeps 416", "its own")


def test_cut_rows_to_the_longest_row():
    def answer(cache_lengths, n_kept):
        return [max(min(c, n) for c, n in zip(cache_lengths, n_kept))] * len(cache_lengths)
    fails("26", answer, r"returned \[416, 416, 416\], .* the longest row's kept length; row 2 \(a cache of 305 "
          r"positions, n_kept 301\) keeps 301", "does not pad its rows")


def test_cut_rows_without_the_min():
    fails("26", lambda cache_lengths, n_kept: list(n_kept),
          r"cut_rows\(\[415, 304, 291\], \[416, 301, 290\]\) \(the draft's caches.*: row 1's cache holds only 415 "
          "positions and you cut it to 416, past its end", "the draft never fed its last one",
          r"min\(cache_lengths\[b\], n_kept\[b\]\)")


def test_cut_rows_that_keep_the_newest_token():
    fails("26", cut_each_row(lambda c, n: min(c, n + 1)), r"row 2 \(a cache of 305 positions, n_kept 301\) keeps 302 "
          "positions, one more than n_kept: position 301 is where the newest token goes", "in no cache")


def test_cut_rows_one_position_too_short():
    fails("26", cut_each_row(lambda c, n: min(c, n) - 1), r"returned \[415, 300, 289\], .*row 1 \(a cache of 416 "
          r"positions, n_kept 416\) was cut 1 position\(s\) too short: position 415 belongs to tokens that stay",
          "feed them again")


def test_cut_rows_by_dropping_from_the_end():
    def answer(cache_lengths, n_kept):  # length - rejected, written as a slice that drops the rejected
        return [len(range(c)[:-(c - min(c, n))]) for c, n in zip(cache_lengths, n_kept)]
    fails("26", answer, r"returned \[0, 301, 290\], .*row 1 had nothing to drop .* and was emptied", r"`x\[:-0\]` is "
          r"`x\[:0\]`", "not by a count from the end")


def test_cut_rows_as_floats():
    fails("26", cut_each_row(lambda c, n: (c + n - abs(c - n)) / 2),  # min(c, n) by arithmetic: `/` makes floats
          r"returned \[416.0, 301.0, 290.0\], whose entry 0 is 416.0, a float; a row's new length is an int")


def test_cut_rows_as_a_numpy_array():
    fails("26", lambda cache_lengths, n_kept: np.minimum(cache_lengths, n_kept),
          r"returned array\(\[416, 301, 290\]\), a NumPy array of int64; the new lengths are a list of ints",
          r"\.tolist\(\)")


def test_cut_rows_paired_out_of_order():
    def answer(cache_lengths, n_kept):
        return [min(cache_lengths[b], n_kept[b - 1]) for b in range(len(n_kept))]
    fails("26", answer, r"returned \[290, 305, 292\], .*row 1 was cut with row 3's numbers \(n_kept\[2\] = 290\), not "
          r"its own \(n_kept\[0\] = 416\)", r"zip\(cache_lengths, n_kept\)")


def test_cut_rows_written_into_n_kept():
    def answer(cache_lengths, n_kept):
        for b, c in enumerate(cache_lengths):
            n_kept[b] = min(c, n_kept[b])
        return n_kept
    fails("26", answer, r"changed its argument n_kept: \[416, 301, 290\] became \[415, 301, 290\]",
          "would cut the oracle's cache to the draft's lengths")


def test_cut_rows_as_the_positions_dropped():
    fails("26", cut_each_row(lambda c, n: c - min(c, n)), r"returned \[0, 4, 2\], .*the positions each row drops",
          "each row's new length")


def test_cut_rows_of_the_rows_that_shrink_only():
    def answer(cache_lengths, n_kept):
        return [min(c, n) for c, n in zip(cache_lengths, n_kept) if c > n]
    fails("26", answer, r"returned 2 lengths, \[301, 290\], for a batch of 3 rows", "every row's")


def test_cut_rows_squeezed_to_a_number_for_one_row():
    fails("26", lambda cache_lengths, n_kept: np.minimum(cache_lengths, n_kept).squeeze().tolist(),
          r"cut_rows\(\[37\], \[35\]\) returned 35, an int, not a list", "np.squeeze")


def fails_in_runs(check, answer, *patterns):
    """Stage two alone (the function inside the project's decoder), on an answer the hand-made cases would stop."""
    with pytest.raises(AssertionError) as failure:
        check(answer)
    message = str(failure.value)
    assert "\n  where to look: " in message, message
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in:\n{message}"


def test_a_cut_too_short_in_a_run_costs_work_not_tokens():
    fails_in_runs(checks.part7_batch_vocab.check_cut_rows_in_runs, cut_each_row(lambda c, n: min(c, n) - 1),
                  r"every row's tokens are right, but the run cost the draft \d+ passes feeding (\d+) tokens, the oracle "
                  r"\d+ passes feeding \d+, where batch.py's own run costs", "the next forward feeds them again",
                  r"round 1, the draft's cache, rows of \[6, 44, 233\] positions, n_kept \[3, 42, 230\]: you cut to "
                  r"\[2, 41, 229\]")


def test_a_cut_past_a_rows_end_in_a_run():
    fails_in_runs(checks.part7_batch_vocab.check_cut_rows_in_runs, lambda cache_lengths, n_kept: list(n_kept),
                  r"in round \d+, cut_rows\(.*\) \(the draft's cache\) returned .*: row \d+ holds (\d+) positions, and a "
                  "cut to \\d+ is past its end")


def test_a_cut_that_keeps_the_newest_token_in_a_run():
    fails_in_runs(checks.part7_batch_vocab.check_cut_rows_in_runs, cut_each_row(lambda c, n: min(c, n + 1)),
                  r"the run raised ValueError: .*round 1, the draft's cache, .* you cut to \[4, 43, 231\], where "
                  r"min\(\.\.\.\) keeps \[3, 42, 230\]", "no new token to feed")


def align(keep=lambda d, text, end: text[end:end + len(d)] == d, rest=lambda text, end: text[end:], stop=True):
    """An align_suffix that keeps a draft when keep(...) holds, from the first, stopping at the first that does not."""
    def answer(drafted, text):
        n, end = 0, 0
        for d in drafted:
            if not keep(d, text, end):
                if stop:
                    break
                continue
            n, end = n + 1, end + len(d)
        return n, rest(text, end)
    return answer


def test_align_suffix_by_lengths_instead_of_bytes():
    fails("27", align(keep=lambda d, text, end: end + len(d) <= len(text)),  # counts bytes, never compares them
          r"\(\[b'the', b' cat'\], b'the cow'\) .*returned \(2, b''\), expected \(1, b' cow'\): you kept draft 1 "
          r"\(b' cat'\), where the text has b' cow'", "counting bytes or tokens is not comparing them")


def test_align_suffix_that_keeps_the_draft_the_text_ends_inside():
    def answer(drafted, text):
        n, end = 0, 0
        while n < len(drafted) and end < len(text) and drafted[n].startswith(text[end:end + len(drafted[n])]):
            n, end = n + 1, end + len(drafted[n])
        return n, text[end:]
    fails("27", answer, r"b'the ca'\) .*returned \(2, b''\), expected \(1, b' ca'\): you kept draft 1 \(b' cat'\), but "
          "the agreed text ends inside it", "goes into rest")


def test_align_suffix_through_str():
    def answer(drafted, text):
        text, drafted = text.decode("utf-8"), [d.decode("utf-8") for d in drafted]
        n, end = 0, 0
        while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
            n, end = n + 1, end + len(drafted[n])
        return n, text[end:].encode("utf-8")
    fails("27", answer, r"align_suffix\(\[b'caf', b'\\xc3\\xa9'\], b'caf\\xc3'\) raised UnicodeDecodeError",
          "never decode them to str")


def test_align_suffix_that_keeps_everything_when_the_text_is_shorter():
    def answer(drafted, text):
        if b"".join(drafted).startswith(text):  # "the text agrees with the drafts": every draft stays
            return len(drafted), b""
        return checks.part7_batch_vocab.project_align_suffix(drafted, text)
    fails("27", answer, r"returned \(4, b''\), expected \(1, b' ca'\): you kept 4 drafts, spelling b'the cats sat', "
          r"but the agreed text is shorter: it ends inside draft 1", "not that the drafts go on with the text")


def test_align_suffix_with_the_rest_from_the_start_of_the_text():
    fails("27", align(rest=lambda text, end: text), r"returned \(4, b'the cat sat'\), expected \(4, b' sat'\): rest is "
          "the whole agreed text, but the 4 kept draft\\(s\\) already spell its first 7 bytes", r"text\[end:\]")


def test_align_suffix_with_is_for_equals():
    fails("27", align(keep=lambda d, text, end: text[end:end + len(d)] is d),
          r"\[b't', b'h', b'e', b' cat'\], b'the cat sat'\) .*returned \(3, b' cat sat'\), expected \(4, b' sat'\): that "
          "is the run with `is` for `==`", "one-byte strings only")


def test_align_suffix_with_the_rest_as_a_list_of_ints():
    def answer(drafted, text):
        n, rest = checks.part7_batch_vocab.project_align_suffix(drafted, text)
        return n, [byte for byte in rest]
    fails("27", answer, r"returned \(4, \[32, 115, 97, 116\]\): rest is a list of ints; it must be bytes",
          r"list\(b'ab'\) is \[97, 98\]")


def test_align_suffix_that_searches_the_text():
    fails("27", align(keep=lambda d, text, end: d in text[end:]), r"b'the dog cat'\) .*returned \(2, b' cat'\), "
          r"expected \(1, b' dog cat'\): draft 1 \(b' cat'\) is in the text, but at byte 7, not at byte 3",
          "not search for it")


def test_align_suffix_that_steps_over_a_wrong_draft():
    fails("27", align(stop=False), r"\(\[b'a', b'b', b'c'\], b'ac'\) .*returned \(2, b''\), expected \(1, b'c'\): draft 1 "
          r"\(b'b'\) disagrees", "stop at the first draft that disagrees")


def test_align_suffix_that_drops_the_draft_ending_at_the_texts_end():
    fails("27", align(keep=lambda d, text, end: end + len(d) < len(text) and text[end:end + len(d)] == d),
          r"\(\[b'the', b' cat'\], b'the cat'\) .*returned \(1, b' cat'\), expected \(2, b''\): draft 1 \(b' cat'\) ends "
          "exactly at the agreed text's end", "<=, not <")


def test_align_suffix_that_keeps_no_draft():
    fails("27", lambda drafted, text: (0, text), r"returned \(0, b'the cat sat'\), expected \(4, b' sat'\): the draft's "
          "list would still spell the text, but the 4 draft\\(s\\) it agreed on are thrown away", "the longest run")


def test_align_suffix_through_str_without_errors():
    def answer(drafted, text):
        text, drafted = text.decode("utf-8", errors="ignore"), [d.decode("utf-8", errors="ignore") for d in drafted]
        n, end = 0, 0
        while n < len(drafted) and text[end:end + len(drafted[n])] == drafted[n]:
            n, end = n + 1, end + len(drafted[n])
        return n, text[end:].encode("utf-8")
    fails("27", answer, r"b'caf\\xc3'\) .*returned \(1, b''\), expected \(1, b'\\xc3'\): rest lost the byte\(s\) "
          r"b'\\xc3', a piece of a UTF-8 character", "never decode it")


def test_an_alignment_that_keeps_no_draft_in_a_run_costs_the_drafts_reading():
    fails_in_runs(checks.part7_batch_vocab.check_align_suffix_in_runs, lambda drafted, text: (0, text),
                  "the text is right and the draft's list spells it after every round, but the run cost the draft "
                  r"\d+ passes feeding \d+ tokens", r"The first alignment that differs: .* you returned \(0, ")


def test_an_alignment_that_keeps_every_draft_in_a_run_misspells_the_text():
    fails_in_runs(checks.part7_batch_vocab.check_align_suffix_in_runs, lambda drafted, text: (len(drafted), b""),
                  r"after round 1 the draft's token list spells .*, where the text is .*: the round's drafts were .*"
                  "The draft goes on from a text that is not there")


# --- EXERCISES.md's snippets, run as written ----------------------------------------------------

SNIPPET = re.compile(r'^python -c "\n(.*?)"$', re.M | re.S)


def snippets():
    """{exercise number: the code of its `python -c "..."` snippet}, from EXERCISES.md's bash blocks."""
    with open(os.path.join(ROOT, "EXERCISES.md"), encoding="utf-8") as f:
        sections = re.split(r"^### ", f.read(), flags=re.M)[1:]
    found = {}
    for section in sections:
        number = int(re.match(r"\d+", section).group(0))
        for block in re.findall(r"^```bash\n(.*?)^```", section, re.M | re.S):
            found.update({number: code for code in SNIPPET.findall(block)})
    return found


def test_the_snippets_are_found():
    assert sorted(snippets()) == [21, 22, 23, 24, 25]


@pytest.fixture(scope="module")
def snippet_dir(tmp_path_factory, tiny_dirs, demo_dirs):
    """A directory to run the snippets in, as a student's checkout after the exercises and the commands before
    each snippet: exercises/ holds solved files (each function the project's own); assets/learned-pair/prompts.json
    the first held-out prompt of each kind (the snippets read all 16: one of each runs the same code in a quarter
    of the time); bench_results/ what `python bench.py --quick` (on tiny models standing in for gpt2 and gpt2-xl)
    and `python bench.py suite` (on the learned pair, 8 tokens a prompt) write there."""
    import json
    base = tmp_path_factory.mktemp("snippets")
    (base / "exercises").mkdir()
    for exercise in checks.EXERCISES.values():
        (base / "exercises" / f"{exercise.module}.py").write_text(
            f"import checks\n{exercise.function} = checks.EXERCISES[{exercise.number!r}].reference()\n")
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    (base / "assets" / "learned-pair").mkdir(parents=True)
    (base / "assets" / "learned-pair" / "prompts.json").write_text(
        json.dumps(list({p["kind"]: p for p in reversed(prompts)}.values())), encoding="utf-8")
    models = base / "models"
    shutil.copytree(tiny_dirs["related"], models / "gpt2")
    shutil.copytree(tiny_dirs["oracle"], models / "gpt2-xl")
    for args in (["--quick", "--models-dir", models, "--new-tokens", 8, "--context", 16],
                 ["suite", "--methods", "speculative", "--rounds", 1, "-n", 8, "--models-dir",
                  os.path.dirname(demo_dirs["draft"])]):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench.py"), *map(str, args), "--out",
                            base / "bench_results"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    return base


@pytest.mark.parametrize("number", [21, 22, 23, 24, 25])
@pytest.mark.slow
def test_each_snippet_runs_as_written(number, snippet_dir):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "exercises")]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", snippets()[number]], cwd=snippet_dir, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
