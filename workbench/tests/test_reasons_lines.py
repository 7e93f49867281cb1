"""Every round's "why" (--trace and the page) is pinned to the numbers that produced it: a line of drafts.

The threshold and n_draft rules, where a prompt-lookup match stands in the text, which stage proposed each token,
the draft cut short by the tokens left to make, lookahead's window.

Each test runs a method with a trace, then recomputes what decided each round from the models themselves, with
no cache (a fresh forward pass over the whole text): the round's details must equal the recomputed numbers, and the
reason a student reads (the method's Shown, workbench/methods/) must quote them. Helpers: recomputed.py.
"""

import dataclasses
import math
import re

import numpy as np
import pytest

from adaptive import adaptive_generate
from ngram import NGramDrafter, ngram_generate, staged_generate
from recomputed import (PROMPTS, is_argmax, models, oracle, probs_after, reasons, related,  # noqa: F401
                        shown_of, show, traced)
from threshold import threshold_generate
from tree import tree_generate
from workbench import display
from workbench.methods.text import lookahead_lines




@pytest.mark.parametrize("ids", PROMPTS)
def test_threshold_reasons_follow_the_drafts_probabilities_and_the_rule(related, oracle, ids):
    tokens, trace = traced(threshold_generate, related, oracle, ids, 24, threshold=0.3)
    text = ids + tokens
    for r in trace:
        d = r.details
        t, cumulative = d.threshold, d.cumulative
        p = 1.0
        for i, x in enumerate(r.drafted):
            probs = probs_after(related, text[:r.context_length] + r.drafted[:i])
            assert is_argmax(probs, x)
            p *= float(probs[x])
            assert cumulative[i] == pytest.approx(p, rel=1e-4)
        assert all(c >= t for c in cumulative[:-1])  # drafting went on only while at or above the threshold
        if cumulative and len(cumulative) < d.k:
            assert cumulative[-1] < t  # ... and stopped after the first guess below it
        if not cumulative:
            continue
        if r.accepted == len(cumulative):
            expected, words = t - d.boost, "every draft kept"
        else:
            last = cumulative[r.accepted - 1] if r.accepted else 1.0
            expected, words = (t + last) / 2, f"halfway to {last:.3g}"
        assert d.next_threshold == pytest.approx(min(max(expected, 0.05), 0.95))
        why = reasons("threshold", r)
        assert words in why and f"{t:.3g}" in why and f"next threshold {d.next_threshold:.3g}" in why
    for before, after in zip(trace, trace[1:]):  # the next round uses the threshold the reason announced
        if before.details.cumulative:
            assert after.details.threshold == before.details.next_threshold


@pytest.mark.parametrize("rule", ["egag", "heuristic"])
def test_adaptive_reasons_follow_the_entropies_and_the_rule(related, oracle, rule):
    ids = PROMPTS[0]
    tokens, trace = traced(adaptive_generate, related, oracle, ids, 30, rule=rule, n_draft=3, n_draft_max=8,
                           entropy_bound=3.0)
    text, method = ids + tokens, {"egag": "adaptive", "heuristic": "adaptive-hf"}[rule]
    for r in trace:
        d = r.details
        for i, (x, h) in enumerate(zip(r.drafted, d.entropies)):
            probs = probs_after(related, text[:r.context_length] + r.drafted[:i])
            assert is_argmax(probs, x)
            assert h == pytest.approx(-float(np.sum(probs * np.log(np.maximum(probs, 1e-30)))), abs=1e-3)
        g, n = d.n_draft, len(r.drafted)
        if rule == "egag":
            assert all(h <= d.entropy_bound for h in d.entropies[:-1])
            assert n in (g, d.k) or d.entropies[-1] > d.entropy_bound
        else:
            assert n == min(g, d.k)
        if not n:
            continue
        low, high = d.bounds
        if rule == "egag":
            average = d.ema * d.average_before + (1 - d.ema) * r.accepted
            assert d.average_after == pytest.approx(average)
            raw = round(average) + 1
            assert f"round({average:.2f}) + 1 = {raw}" in reasons(method, r)
        else:
            raw = g + 2 if r.accepted == n else g - 1
            assert (f"{g} + 2 = {raw}" if r.accepted == n else f"{g} - 1 = {raw}") in reasons(method, r)
        assert d.next_n_draft == min(max(raw, low), high)
        assert f"next n_draft {d.next_n_draft}" in reasons(method, r)
    for before, after in zip(trace, trace[1:]):
        assert after.details.n_draft == before.details.next_n_draft


def test_prompt_lookup_reasons_say_where_the_match_stands(oracle):
    ids = [4, 8, 15, 16, 23, 42, 4, 8, 15, 16, 23, 42, 4, 8]
    drafter = NGramDrafter(n=4)
    tokens, trace = traced(ngram_generate, oracle, ids, 20, n_draft=4, drafter=drafter)
    text = ids + tokens
    lookups = [r for r in trace if r.details.source["from"] == "prompt lookup"]
    assert lookups  # the repeated prompt gives matches
    for r in lookups:
        source, context = r.details.source, text[:r.context_length]
        m, at = source["length"], source["at"]
        assert context[at:at + m] == context[-m:] and at + m < len(context)  # an earlier occurrence of the tail
        assert r.drafted == context[at + m:at + m + len(r.drafted)]          # the drafts are what followed it
        assert not any(context[s:s + m] == context[-m:] for s in range(at + 1, len(context) - m))  # the latest one
        longer = range(m + 1, min(drafter.n - 1, len(context) - 1) + 1)
        assert not any(context[s:s + L] == context[-L:] for L in longer for s in range(len(context) - L))  # the longest
        assert f"the last {m} token(s) of the text also stand at position {at}" in reasons("ngram", r)


def test_staged_reasons_name_the_stage_of_each_draft(related, oracle):
    ids = [3, 3, 8, 1, 3, 3, 8, 1, 3, 3]
    tokens, trace = traced(staged_generate, related, oracle, ids, 24, n_draft=5)
    text = ids + tokens
    seen_ngram = False
    for r in trace:
        stages = r.details.stages
        assert len(stages) == len(r.drafted)
        assert not stages or stages[-1] == "draft"  # each of the draft model's checks ends with its own token
        for i, x in enumerate(r.drafted):  # every draft, whoever guessed it, is the draft model's greedy token
            assert is_argmax(probs_after(related, text[:r.context_length] + r.drafted[:i]), x)
        why = reasons("staged", r)
        for x, stage in zip(r.drafted, stages):
            assert f"<{x}>[{'n-gram' if stage == 'n-gram' else 'model'}]" in why
        assert f"{stages.count('n-gram')} guessed by the n-gram table" in why
        seen_ngram |= "n-gram" in stages
    assert seen_ngram  # the run exercises both stages


def test_a_reason_that_misquotes_its_numbers_is_caught(related, oracle):
    """Negative control: the threshold check above notices a next threshold one step off the rule."""
    _, trace = traced(threshold_generate, related, oracle, PROMPTS[0], 16, threshold=0.3)
    r = next(r for r in trace if r.details.cumulative and r.accepted < len(r.drafted))
    d, t = r.details, r.details.threshold
    last = d.cumulative[r.accepted - 1] if r.accepted else 1.0
    wrong = t - d.boost  # the all-kept rule applied to a round with a rejection
    assert not math.isclose(wrong, min(max((t + last) / 2, 0.05), 0.95))
    r.details = dataclasses.replace(d, next_threshold=wrong)
    assert f"next threshold {min(max((t + last) / 2, 0.05), 0.95):.3g}" not in reasons("threshold", r)


@pytest.mark.parametrize("n_new", [6, 7, 9])
def test_every_fixed_length_trace_says_when_the_tokens_left_cut_the_draft(related, oracle, n_new):
    """SpS and greedy speculative rounds: the reason names n_draft, and a round that drafted fewer says why."""
    from sps import speculative_sample
    from speculative import speculative_generate
    runs = {"sps": traced(speculative_sample, related, oracle, PROMPTS[0], n_new, n_draft=4, rng=np.random.default_rng(0))[1],
            "speculative": traced(speculative_generate, related, oracle, PROMPTS[0], n_new, n_draft=4)[1]}
    for method, trace in runs.items():
        context = len(PROMPTS[0])
        for r in trace:
            left = len(PROMPTS[0]) + n_new - context  # tokens still to make before the round
            k = min(4, left - 1)
            assert len(r.drafted) == k and r.details.k == k and r.details.n_draft == 4
            why = reasons(method, r)
            assert "fixed draft length n_draft" in why and " 4" in why
            if k < 4:
                assert f"; {k} drafted because only {left} token" in why, (method, why)
            else:
                assert "drafted because" not in why, (method, why)
            context += len(r.new)
        assert any(len(r.drafted) < 4 for r in trace)  # the run ends in a cut round


def drafting_room(r, n_prompt, n_new):
    """The most a round could draft: one less than the tokens still to make when it began."""
    return n_prompt + n_new - r.context_length - 1


@pytest.mark.parametrize("method", ["threshold", "adaptive", "adaptive-hf",
                                    "tree", "ngram", "staged", "suffix", "suffix-tree", "tree-sps", "self-speculative"])
def test_every_trace_says_when_the_tokens_left_cut_the_draft(related, oracle, method):
    from adaptive import adaptive_generate as adaptive
    from beyond.self_speculative import self_speculative_generate
    from beyond.suffix import suffix_generate
    from beyond.tree_sampling import tree_sample_generate
    if method == "self-speculative" and oracle.n_layer < 2:
        pytest.skip("a one-layer oracle has no shorter draft")
    ids, n_draft = PROMPTS[1], 4
    runs = {
        "threshold": lambda n: traced(threshold_generate, related, oracle, ids, n, n_draft=n_draft, threshold=0.0),
        "adaptive": lambda n: traced(adaptive, related, oracle, ids, n, n_draft=n_draft, n_draft_min=n_draft,
                                     n_draft_max=n_draft, entropy_bound=100.0),
        "adaptive-hf": lambda n: traced(adaptive, related, oracle, ids, n, rule="heuristic", n_draft=n_draft,
                                        n_draft_min=n_draft, n_draft_max=n_draft),
        "tree": lambda n: traced(tree_generate, related, oracle, ids, n, n_draft=n_draft),
        "ngram": lambda n: traced(ngram_generate, oracle, ids, n, n_draft=n_draft),
        "staged": lambda n: traced(staged_generate, related, oracle, ids, n, n_draft=n_draft),
        "suffix": lambda n: traced(suffix_generate, oracle, ids, n, n_draft=n_draft),
        "suffix-tree": lambda n: traced(suffix_generate, oracle, ids, n, n_draft=n_draft, width=2),
        "tree-sps": lambda n: traced(tree_sample_generate, related, oracle, ids, n, n_draft=n_draft,
                                     rng=np.random.default_rng(n)),
        "self-speculative": lambda n: traced(self_speculative_generate, oracle, ids, n, n_draft=n_draft),
    }
    n_cut = n_full = 0
    for n_new in (3, 6, 9, 10):
        _, trace = runs[method](n_new)
        for r in trace:
            k = len(ids) + n_new - r.context_length - 1  # the most the round could draft: the tokens left, less one
            why = reasons(method, r)
            said = f"only {k + 1} token{'s were' if k + 1 != 1 else ' was'} left to make"
            assert (said in why) == (k < n_draft), (method, n_new, k, why)
            n_cut, n_full = n_cut + (k < n_draft), n_full + (k >= n_draft)
    assert n_cut and n_full  # both kinds of round were seen


def test_lookahead_trace_puts_each_guess_under_its_place_and_each_new_ngram_ends_in_the_oracles_argmax(oracle):
    """The window's lines: every guess under the '+j' of the place it guesses (level 0's token i at +(i + 1), level
    l's column c at +(c + l)); each n-gram the pass made is a diagonal of the window, and its last token is the
    oracle's argmax after the line of text that diagonal's top row saw, recomputed without a cache."""
    from beyond.lookahead import lookahead_generate
    tokens, trace = traced(lookahead_generate, oracle, PROMPTS[1], 30, W=3, N=4)
    text, n_ngrams = PROMPTS[1] + tokens, 0
    for r in trace:
        d, lines = r.details, lookahead_lines(r, show)
        header = next(line for line in lines if line.lstrip().startswith("+1"))
        places = {header.index(f"+{j}"): j for j in range(1, 12) if f"+{j}" in header}
        guess = {}
        for l, level in enumerate(d.window):
            [line] = [line for line in lines if line.startswith(f"  level {l} ")]
            shown = {places[m.start()]: int(m.group(1)) for m in re.finditer(r"<(\d+)>", line)}
            expected = {(i + 1 if l == 0 else i + l): t for i, t in enumerate(level)}
            assert shown == expected, (l, line)
            guess.update({(l, j): t for j, t in expected.items()})
        before = text[:r.context_length]
        for c, ngram in enumerate(d.ngrams):
            top = len(d.window) - 1
            assert ngram[0] == (before[-1] if c == 0 else guess[(0, c)])
            assert ngram[1:-1] == [guess[(l, c + l)] for l in range(1, top + 1)]
            seen = before + [guess[(0, j)] for j in range(1, c + 1)] + [guess[(l, c + l)] for l in range(1, top + 1)]
            assert is_argmax(probs_after(oracle, seen), ngram[-1])
            n_ngrams += 1
        if d.ngrams:
            assert "  pool +   " + " | ".join(show(g) for g in d.ngrams) in "\n".join(lines).replace(
                f"{len(d.ngrams)} n-gram(s), a window column each, then the oracle's guess after it: ", "")
        if d.candidates:
            checked = next(line for line in lines if line.startswith("  checked"))
            assert f"{d.best + 1} (best): {show(d.candidates[d.best])}" in checked
            assert checked.count("(best)") == 1 and all(show(c) in checked for c in d.candidates)
    assert n_ngrams and any(r.accepted for r in trace)
    assert sum("Jacobi" in line for line in display.format_trace(shown_of("lookahead"), trace, lambda t: b"x", 7)[:9]) >= 1
