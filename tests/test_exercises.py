"""The exercises' checkers (exercises/checks/): they pass the project's own functions, fail plausible
wrong answers with a message naming what went wrong, and call an untouched exercise "not solved yet".

Nothing here reads the exercise files, so a student's solved repository stays green.
The wrong answers below give hints away: read them after the exercises.
"""

import ast
import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "exercises"))
import checks  # noqa: E402
from decoding import Stats  # noqa: E402
from gpt2 import MASKED, softmax  # noqa: E402
from kvcache import KVCache  # noqa: E402
from ngram import NGramDrafter  # noqa: E402
from speculative import speculative_generate  # noqa: E402
from sps import residual, sample  # noqa: E402


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


def test_every_hands_on_exercise_has_two_wrong_answers_here_at_least():
    # A wrong answer is a call fails(number, ...) below, apart from the files as shipped (unsolved=True).
    with open(__file__, encoding="utf-8") as f:
        calls = [node for node in ast.walk(ast.parse(f.read())) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", None) == "fails"]
    wrong_answers = Counter(call.args[0].value for call in calls if isinstance(call.args[0], ast.Constant)
                            and not any(k.arg == "unsolved" for k in call.keywords))
    assert {n: wrong_answers[n] for n in checks.EXERCISES if wrong_answers[n] < 2} == {}


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


# --- exercise 5: the KV-cache bug -------------------------------------------------

def classic_generate(oracle_keep, room=1):
    """ex05's generator as shipped, with its step 4 for the oracle's cache and its step 1's room as given."""
    def generate(draft, oracle, ids, n_new, n_draft):
        tokens, end = list(ids), len(ids) + n_new
        draft_cache, oracle_cache = KVCache(), KVCache()
        draft.forward(tokens[:-1], draft_cache, n_logits=1)
        oracle.forward(tokens[:-1], oracle_cache, n_logits=1)
        while len(tokens) < end:
            k = min(n_draft, end - len(tokens) - room)
            drafted = []
            for _ in range(k):
                drafted.append(int(np.argmax(draft.forward((drafted or tokens)[-1:], draft_cache)[-1])))
            choice = np.argmax(oracle.forward([tokens[-1]] + drafted, oracle_cache), axis=-1)
            n = checks.EXERCISES["03"].reference()(drafted, choice)
            tokens += drafted[:n] + [int(choice[n])]
            n_kept = len(tokens) - 1
            if draft_cache.n_tokens() < n_kept:
                draft.forward(tokens[draft_cache.n_tokens():n_kept], draft_cache, n_logits=1)
            draft_cache.truncate(n_kept)
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


# --- exercise 6: drafting while confident -----------------------------------------

def drafting(stop_before=False, cap=None, per_token=False):
    def answer(draft, tokens, k_max, threshold):
        guesses, p = [], 1.0
        while len(guesses) < (k_max if cap is None else cap) and p >= threshold:
            probs = softmax(draft.forward(tokens + guesses)[-1])
            x = int(np.argmax(probs))
            if stop_before and p * probs[x] < threshold:
                break
            guesses.append(x)
            p = probs[x] if per_token else p * probs[x]
        return guesses
    return answer


def test_drafting_that_drops_the_guess_crossing_the_threshold():
    fails("06", drafting(stop_before=True), "one guess short", "cumulative probabilities")


def test_drafting_past_k_max():
    fails("06", drafting(cap=50), r"but at most k_max = \d+ are allowed")


def test_drafting_on_each_guess_alone():
    fails("06", drafting(per_token=True), "product of the guesses' probabilities")


def test_drafting_that_appends_to_the_callers_tokens():
    def answer(draft, tokens, k_max, threshold):
        start, p = len(tokens), 1.0
        while len(tokens) - start < k_max and p >= threshold:
            probs = softmax(draft.forward(tokens)[-1])
            tokens.append(int(np.argmax(probs)))
            p *= probs[tokens[-1]]
        return tokens[start:]
    fails("06", answer, r"changed its argument tokens: \[", "work on a copy")


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


def test_the_learners_ratio_as_shipped_is_not_solved_yet():
    def answer(p, q, x, r):
        with np.errstate(divide="ignore"):
            return not r > p[x] / q[x]
    fails("12", answer, r"keeps it for 100% of r .* min\(1, q\(x\)/p\(x\)\) = 50%", r"emits the distribution \[0.6",
          unsolved=True)


def test_a_reversed_acceptance_test():
    fails("12", lambda p, q, x, r: r > min(1, q[x] / p[x]), "keeps exactly when it should reject")


def test_keep_with_the_targets_probability():
    fails("12", lambda p, q, x, r: r < q[x], r"keeps it for 30% of r .* min\(1, q\(x\)/p\(x\)\) = 50%",
          "step 3 in Chen et al.'s letters")


def test_the_learners_test_with_its_not_dropped():
    def answer(p, q, x, r):  # "rand(0, 1) > p / q" read as the test to keep
        with np.errstate(divide="ignore"):
            return r > p[x] / q[x]
    fails("12", answer, r"keeps it for 0% of r .* = 50%. With your test one step emits the distribution \[0, 0, 1\]",
          "q is the target, p the draft")


def test_alpha_as_a_dot_product():
    fails("13", lambda p, q: float(np.dot(p, q)), "kept the draft", "two independent draws")


def test_alpha_without_the_half():
    fails("13", lambda p, q: 1 - float(np.abs(p - q).sum()), "counts every difference twice")


def test_alpha_unweighted():
    fails("13", lambda p, q: float(sum(min(1, q[x] / p[x]) for x in range(len(p)) if p[x] > 0)),
          r"simulated SpS step .* kept the draft", r"P\(draw x\) \* P\(keep x \| x drawn\)")


# --- exercise 15: a round of Algorithm 2 ----------------------------------------------

def sps_round(inverted=False, bonus=True, resample=residual, fixed_K=None):
    def answer(draft, oracle, tokens, K, rng):
        K = fixed_K or K
        drafted, p = [], []
        for _ in range(K):
            p.append(softmax(draft.forward(tokens + drafted)[-1]))
            drafted.append(sample(p[-1], rng))
        q = softmax(oracle.forward(tokens + drafted)[len(tokens) - 1:])
        for t, x in enumerate(drafted):
            ratio = p[t][x] / q[t][x] if inverted else q[t][x] / p[t][x]
            if not rng.random() < min(1, ratio):
                return drafted[:t] + [sample(resample(q[t], p[t]), rng)]
        return drafted + ([sample(q[K], rng)] if bonus else [])
    return answer


def test_a_round_with_the_ratio_inverted():
    with np.errstate(divide="ignore"):
        fails("15", sps_round(inverted=True), r"kept its first draft in \d+.\d% .* ratio inverted", "step 3")


def test_a_round_without_the_bonus_token():
    fails("15", sps_round(bonus=False), r"0 of your rounds added K \+ 1 = 3 tokens", "step 4")


def test_a_round_that_resamples_from_q():
    fails("15", sps_round(resample=lambda q, p: q), "do not follow the target's distribution: chi-square",
          "what each draw samples from")


def test_a_round_that_always_drafts_two():
    fails("15", sps_round(fixed_K=2), r"K=1, rng\) returned \[\d+, \d+, \d+\]: a round adds 1 to K \+ 1 = 2",
          "K = 1, 2 and 3")


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


def tokens_per_round(alpha, K):
    return K + 1 if alpha == 1 else (1 - alpha ** (K + 1)) / (1 - alpha)


def best_draft_length(per_round=tokens_per_round, check=lambda T, K: T[K + 1] / T[1], last=lambda T: max(T) - 1,
                      largest_on_tie=False):
    def answer(alpha, c, T):
        best, best_score = None, -1.0
        for K in range(1, last(T) + 1):
            score = per_round(alpha, K) / (K * c + check(T, K))
            if score > best_score or (largest_on_tie and score == best_score):
                best, best_score = K, score
        return best
    return answer


def test_best_draft_length_with_free_checking():
    fails("23", best_draft_length(check=lambda T, K: 1.0), "best K if checking were free", r"T\[K \+ 1\] / T\[1\]")


def test_best_draft_length_that_divides_by_zero_at_alpha_1():
    fails("23", best_draft_length(per_round=lambda alpha, K: (1 - alpha ** (K + 1)) / (1 - alpha)),
          r"alpha=1, .* raised ZeroDivisionError", r"K \+ 1 tokens")


def test_best_draft_length_checking_k_tokens():
    fails("23", best_draft_length(check=lambda T, K: T[K] / T[1]), r"costed at T\[K\]", r"reads K \+ 1 tokens")


def test_best_draft_length_past_the_curve():
    fails("23", best_draft_length(last=max), "raised KeyError", r"K runs from 1 to max\(T\) - 1")


def test_best_draft_length_largest_on_a_tie():
    fails("23", best_draft_length(largest_on_tie=True), "the two tie", "smallest K")


def test_best_draft_length_as_a_float():
    def answer(alpha, c, T):
        return float(checks.EXERCISES["23"].reference()(alpha, c, T))
    fails("23", answer, r"returned 2.0, a float; a draft length \(here K = 2\) is an int", "type of what you return")


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


def replay_lookup(step=1, room=1, sees=0, prefix=True, fixed_k=None, fixed_max_tail=None):
    def answer(tokens, n_prompt, k, max_tail=3):
        k, max_tail = fixed_k or k, fixed_max_tail or max_tail
        drafter, drafted, accepted, rounds, i = NGramDrafter(n=max_tail + 1), 0, 0, 0, n_prompt
        while i < len(tokens):
            guesses = drafter.lookup(tokens[:i + sees], k if room is None else min(k, len(tokens) - i - room))
            matches = [g == t for g, t in zip(guesses, tokens[i:])]
            n = (matches + [False]).index(False) if prefix else sum(matches)
            drafted, accepted, rounds, i = drafted + len(guesses), accepted + n, rounds + 1, i + n + step
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
