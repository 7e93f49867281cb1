"""Every round's "why" (--trace and the page) is pinned to the numbers that produced it.

Each test runs a method with a trace, then recomputes what decided each round from the
models themselves, with no cache (a fresh forward pass over the whole text): the draft's
probabilities and entropies, the threshold and n_draft rules, where a prompt-lookup match
stands in the text, which stage proposed each token, which tree branch the oracle followed.
The round's details must equal the recomputed numbers, and the reason a student reads
must quote them.
"""

import dataclasses
import math
import re

import numpy as np
import pytest

from adaptive import adaptive_generate
from workbench import display
from stats import Stats
from gpt2 import softmax
from ngram import NGramDrafter, ngram_generate, staged_generate
from threshold import threshold_generate
from tree import tree_generate

PROMPTS = ([5, 9, 2, 7], [3, 3, 8, 1, 3, 3, 8])  # token ids: bytes in any GPT-2 vocabulary, the learned one too
NEAR_TIE = 1e-5  # the only excusable greedy difference (README: near-ties)


@pytest.fixture(scope="module", params=["tiny random pair", pytest.param("learned pair", marks=pytest.mark.slow)])
def models(request, tiny_dirs, demo_dirs):
    """(draft, oracle): every test here runs on the tests' tiny random pair, and in the slow tests
    (python -m pytest -m slow) on the learned pair."""
    from workbench.speed.accelerate import load_fast
    if request.param == "learned pair":
        return load_fast(demo_dirs["draft"]), load_fast(demo_dirs["oracle"])
    return load_fast(tiny_dirs["related"]), load_fast(tiny_dirs["oracle"])


@pytest.fixture
def related(models):  # the draft (conftest's name for the tiny pair's draft, kept so the tests read alike)
    return models[0]


@pytest.fixture
def oracle(models):
    return models[1]


def traced(generate, *args, **kwargs):
    stats = Stats(trace=[])
    tokens = list(generate(*args, stats=stats, **kwargs))
    return tokens, stats.trace


def probs_after(model, tokens):  # -> [V], with no cache: an independent recomputation
    return softmax(model.forward(tokens, n_logits=1)[-1].astype(np.float32))


def is_argmax(probs, token):
    return probs[token] >= probs.max() - NEAR_TIE


def show(tokens):
    return " ".join(f"<{t}>" for t in tokens)


def reasons(r):
    return " | ".join(display.round_reasons(r, show))


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
        if cumulative and len(cumulative) < d.k_limit:
            assert cumulative[-1] < t  # ... and stopped after the first guess below it
        if not cumulative:
            continue
        if r.accepted == len(cumulative):
            expected, words = t - d.boost, "every draft kept"
        else:
            last = cumulative[r.accepted - 1] if r.accepted else 1.0
            expected, words = (t + last) / 2, f"halfway to {last:.3g}"
        assert d.next_threshold == pytest.approx(min(max(expected, 0.05), 0.95))
        why = reasons(r)
        assert words in why and f"{t:.3g}" in why and f"next threshold {d.next_threshold:.3g}" in why
    for before, after in zip(trace, trace[1:]):  # the next round uses the threshold the reason announced
        if before.details.cumulative:
            assert after.details.threshold == before.details.next_threshold


@pytest.mark.parametrize("rule", ["egag", "heuristic"])
def test_adaptive_reasons_follow_the_entropies_and_the_rule(related, oracle, rule):
    ids = PROMPTS[0]
    tokens, trace = traced(adaptive_generate, related, oracle, ids, 30, rule=rule, n_draft=3, n_draft_max=8,
                           entropy_bound=3.0)
    text = ids + tokens
    for r in trace:
        d = r.details
        for i, (x, h) in enumerate(zip(r.drafted, d.entropies)):
            probs = probs_after(related, text[:r.context_length] + r.drafted[:i])
            assert is_argmax(probs, x)
            assert h == pytest.approx(-float(np.sum(probs * np.log(np.maximum(probs, 1e-30)))), abs=1e-3)
        g, n = d.n_draft, len(r.drafted)
        if rule == "egag":
            assert all(h <= d.entropy_bound for h in d.entropies[:-1])
            assert n in (g, d.k_limit) or d.entropies[-1] > d.entropy_bound
        else:
            assert n == min(g, d.k_limit)
        if not n:
            continue
        low, high = d.bounds
        if rule == "egag":
            average = d.ema * d.average_before + (1 - d.ema) * r.accepted
            assert d.average_after == pytest.approx(average)
            raw = round(average) + 1
            assert f"round({average:.2f}) + 1 = {raw}" in reasons(r)
        else:
            raw = g + 2 if r.accepted == n else g - 1
            assert (f"{g} + 2 = {raw}" if r.accepted == n else f"{g} - 1 = {raw}") in reasons(r)
        assert d.next_n_draft == min(max(raw, low), high)
        assert f"next n_draft {d.next_n_draft}" in reasons(r)
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
        assert f"the last {m} token(s) of the text also stand at position {at}" in reasons(r)


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
        why = reasons(r)
        for x, stage in zip(r.drafted, stages):
            assert f"<{x}>[{'n-gram' if stage == 'n-gram' else 'model'}]" in why
        assert f"{stages.count('n-gram')} guessed by the n-gram table" in why
        seen_ngram |= "n-gram" in stages
    assert seen_ngram  # the run exercises both stages


@pytest.mark.parametrize("confidence", [0.3, 0.9])
def test_tree_reasons_follow_the_branches_and_the_oracles_choices(related, oracle, confidence):
    ids = PROMPTS[0]
    tokens, trace = traced(tree_generate, related, oracle, ids, 20, n_draft=3, branch=2, confidence=confidence)
    text = ids + tokens
    branched_somewhere = False
    for r in trace:
        parents, path, context = r.details.parents, r.details.path, text[:r.context_length]

        def ancestors(i):
            line = []
            while i != -1:
                line.insert(0, r.drafted[i])
                i = parents[i]
            return line

        for parent in sorted(set(parents)):  # each node's children: top-1 when the draft is sure, else its top 2
            children = [r.drafted[i] for i, p in enumerate(parents) if p == parent]
            probs = probs_after(related, context + (ancestors(parent) if parent != -1 else []))
            expected = 1 if probs.max() >= confidence else 2
            assert len(children) == expected or abs(probs.max() - confidence) < NEAR_TIE
            assert is_argmax(probs, children[0])
            branched_somewhere |= len(children) > 1
        at = -1
        for i in path:  # the kept path follows the oracle's choices
            assert parents[i] == at
            assert is_argmax(probs_after(oracle, context + ancestors(at) if at != -1 else context), r.drafted[i])
            at = i
        after = [r.drafted[i] for i, p in enumerate(parents) if p == at]
        choice = r.new[-1]
        assert is_argmax(probs_after(oracle, context + (ancestors(at) if at != -1 else [])), choice)
        assert choice not in after  # the walk stopped where the oracle's choice was not drafted
        lines = "\n".join(display.tree_lines(r, show))
        for i, p in enumerate(parents):
            if i in path:
                assert f"* <{r.drafted[i]}>" in lines
            elif p == -1 or p in path:
                assert f"- <{r.drafted[i]}> p {r.details.probs[i]:.2f}   (lost: after its parent the oracle " \
                       f"chose <{r.oracle[p + 1]}>)" in lines
        assert f"{len(path)} node(s) deep" in reasons(r)
    assert branched_somewhere or confidence < 0.5


def test_a_reason_that_misquotes_its_numbers_is_caught(related, oracle):
    """Negative control: the threshold check above notices a next threshold one step off the rule."""
    _, trace = traced(threshold_generate, related, oracle, PROMPTS[0], 16, threshold=0.3)
    r = next(r for r in trace if r.details.cumulative and r.accepted < len(r.drafted))
    d, t = r.details, r.details.threshold
    last = d.cumulative[r.accepted - 1] if r.accepted else 1.0
    wrong = t - d.boost  # the all-kept rule applied to a round with a rejection
    assert not math.isclose(wrong, min(max((t + last) / 2, 0.05), 0.95))
    r.details = dataclasses.replace(d, next_threshold=wrong)
    assert f"next threshold {min(max((t + last) / 2, 0.05), 0.95):.3g}" not in reasons(r)


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
            why = reasons(r)
            assert "fixed draft length n_draft" in why and " 4" in why
            if k < 4:
                assert f"; {k} drafted because only {left} token" in why, (method, why)
            else:
                assert "drafted because" not in why, (method, why)
            context += len(r.new)
        assert any(len(r.drafted) < 4 for r in trace)  # the run ends in a cut round


def test_the_tree_trace_tells_two_nodes_of_the_same_token_apart(related, oracle):
    _, trace = traced(tree_generate, related, oracle, PROMPTS[1], 20, n_draft=4, branch=3, confidence=1.0)
    for r in trace:
        lines = display.tree_lines(r, show)
        assert "p = the draft's probability of the node's token after its parent" in lines[0]
        numbers = [line.rsplit("= node ", 1)[1] for line in lines if "= node " in line]
        assert sorted(numbers, key=int) == [str(i) for i in range(len(r.drafted))]  # every node, each once, from 0
        for line in lines:
            if "= node " in line:
                i = int(line.rsplit("= node ", 1)[1])
                assert f" <{r.drafted[i]}> p {r.details.probs[i]:.2f}" in line  # its number names its own token
        for p in set(r.details.parents):  # a branching parent is named by number and token, never by token alone
            if r.details.parents.count(p) > 1 and p != -1:
                assert f"node {p} <{r.drafted[p]}>" in reasons(r)


def drafting_room(r, n_prompt, n_new):
    """The most a round could draft: one less than the tokens still to make when it began."""
    return n_prompt + n_new - r.context_length - 1


@pytest.mark.parametrize("method", ["threshold", "adaptive", "adaptive-hf", "tree", "ngram", "staged", "suffix",
                                    "suffix-tree", "tree-sps", "self-speculative"])
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
            room = len(ids) + n_new - r.context_length - 1  # the most the round could draft: the tokens left, less one
            why = reasons(r)
            said = f"only {room + 1} token{'s were' if room + 1 != 1 else ' was'} left to make"
            assert (said in why) == (room < n_draft), (method, n_new, room, why)
            n_cut, n_full = n_cut + (room < n_draft), n_full + (room >= n_draft)
    assert n_cut and n_full  # both kinds of round were seen


def test_block_verification_trace_shows_w_h_and_the_tests_from_the_end(related, oracle):
    """Every draft's p, q, q/p and w recomputed from the models; the tests numbered from the longest prefix down to
    the kept one, the shorter ones never tested; the 'made up' clause names exactly the drafts whose q/p > 1
    raised w again; the last token's line names the residual max(w q - p, 0) or the bonus."""
    from beyond.block_verification import block_sample
    tokens, trace = traced(block_sample, related, oracle, PROMPTS[0], 24, n_draft=4, rng=np.random.default_rng(5))
    text, refilled_somewhere = PROMPTS[0] + tokens, False
    for r in trace:
        d, k, tau = r.details, len(r.drafted), r.details.kept
        lines = display.block_lines(r, show)
        w = 1.0
        for i, x in enumerate(r.drafted, 1):
            before = text[:r.context_length] + r.drafted[:i - 1]
            p, q = probs_after(related, before)[x], probs_after(oracle, before)[x]
            w_before, w = w, min(1.0, w * q / p)
            s = d.steps[i - 1]
            assert math.isclose(s["ratio"], q / p, rel_tol=1e-3) and math.isclose(s["w"], w, rel_tol=1e-3, abs_tol=1e-6)
            [line] = [line for line in lines if line.startswith(f"  x~{i} ")]
            assert f"w_{i} {s['w']:.3g}  h_{i} " in line
            # q/p beside 1, and r beside h, print with the digits that decide them
            shown_ratio, shown_h = (float(v) for v in re.search(rf"q/p {NUMBER}  w_{i} \S+  h_{i} {NUMBER}", line).groups())
            assert abs(q / p - 1) < NEAR or (shown_ratio > 1) == (q / p > 1), line
            if s["r"] is not None:
                shown_r = float(re.search(rf"r {NUMBER} (?:<|>=) h_{i}", line).group(1))
                assert shown_r < 1 and (shown_r < shown_h) == s["passed"] == (f"r {shown_r:g} < h_{i}" in line), line
            if i < tau:  # below the kept prefix: never tested
                assert line.endswith("not tested: a longer prefix passed")
            else:  # prefix k is test 1, k - 1 test 2, ..., the kept prefix the last
                assert f"test {k - i + 1}: r {s['r']:.3g} " in line
                assert line.endswith(f"passes, keep {i}" if i == tau else "fails")
            refilled = s["ratio"] > 1 and w_before < 1 and i <= tau
            refilled_somewhere |= refilled
        why = reasons(r)
        made_up = [i for i, s in enumerate(d.steps[:tau], 1) if s["ratio"] > 1 and ([1.0] + [t["w"] for t in d.steps])[i - 1] < 1]
        assert ("made up for the shortfall" in why) == bool(made_up), why
        if made_up:
            named = why.split(" as draft", 1)[1].split(" made up for")[0]
            assert [int(n.split(" (")[0]) for n in named.lstrip("s ").replace(" and ", ", ").split(", ")] == made_up
        for drafted, shown in re.findall(rf"(\d+) \(q/p {NUMBER}\)", why):  # the drafts the "made up" clause names
            ratio = d.steps[int(drafted) - 1]["ratio"]
            assert abs(ratio - 1) < NEAR or (float(shown) > 1) == (ratio > 1), why
        if d.last["from"] == "residual":
            assert f"residual <{r.new[-1]}> drawn after draft {tau} from max(w_{tau} q - p, 0)" in "\n".join(lines)
            # q(x) is the oracle's q, recomputed; the block residual's chance stands beside it by name
            before = text[:r.context_length] + r.drafted[:tau]
            q_tau, p_tau, token = probs_after(oracle, before), probs_after(related, before), r.new[-1]
            w_tau = ([1.0] + [t["w"] for t in d.steps])[tau]
            block_residual = np.maximum(np.float32(w_tau) * q_tau - p_tau, 0)
            chance, q_shown = (float(v) for v in re.search(rf"its chance there {NUMBER}; q\(x\) {NUMBER}\)",
                                                             "\n".join(lines)).groups())
            assert printed(q_shown, float(q_tau[token])) and close(d.last["q"], float(q_tau[token]))
            assert printed(chance, float(block_residual[token] / block_residual.sum()))
            dropped = d.steps[tau]  # the first draft not kept: the residual there never gives it back
            assert d.last["w"] * dropped["q"] <= dropped["p"] * (1 + 1e-6)
            assert f"draft {tau + 1} <{dropped['token']}> has w q - p = " in why and "never draws it again" in why
        elif k:
            assert f"bonus    <{r.new[-1]}> sampled from q" in "\n".join(lines)
    assert any(r.details.kept < len(r.drafted) for r in trace) and refilled_somewhere
    header = display.format_trace(trace, lambda t: b"x", len(PROMPTS[0]))
    assert sum("tested from the longest down" in line for line in header) == 1  # the legend, once


def test_lookahead_trace_puts_each_guess_under_its_place_and_each_new_ngram_ends_in_the_oracles_argmax(oracle):
    """The window's lines: every guess under the '+j' of the place it guesses (level 0's token i at +(i + 1), level
    l's column c at +(c + l)); each n-gram the pass made is a diagonal of the window, and its last token is the
    oracle's argmax after the line of text that diagonal's top row saw, recomputed without a cache."""
    from beyond.lookahead import lookahead_generate
    tokens, trace = traced(lookahead_generate, oracle, PROMPTS[1], 30, W=3, N=4)
    text, n_ngrams = PROMPTS[1] + tokens, 0
    for r in trace:
        d, lines = r.details, display.lookahead_lines(r, show)
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
    assert sum("Jacobi" in line for line in display.format_trace(trace, lambda t: b"x", 7)[:9]) >= 1


@pytest.mark.parametrize("kind", ["random heads", "copying heads"])
def test_medusa_trace_shows_each_heads_candidates_and_the_branch_the_oracle_follows(oracle, kind):
    """Level k of the tree is head k's top widths[k - 1], recomputed from the oracle's top state where it chose the
    newest token (no cache) and the heads; each node's p is its head's probability, the same under every parent;
    the kept branch is the oracle's argmax all along; the reason names the widths and the branches."""
    from beyond.medusa import medusa_generate
    from test_medusa import copying_heads, random_heads
    heads = random_heads(oracle) if kind == "random heads" else copying_heads(oracle)
    tokens, trace = traced(medusa_generate, heads, oracle, PROMPTS[1], 24, widths=(3, 2, 2))
    text, kept = PROMPTS[1] + tokens, 0
    for r in trace[1:]:  # the first round is the prompt's pass
        d, before = r.details, text[:r.context_length]
        state = oracle.hidden_states(before[:-1])[-1]  # the state whose LM head chose the newest token
        guesses = heads.guesses(state)  # [K, V]
        levels = [0] * len(d.parents)
        for i, parent in enumerate(d.parents):
            levels[i] = 1 if parent == -1 else levels[parent] + 1
            probs = softmax(guesses[levels[i] - 1])
            assert math.isclose(d.probs[i], probs[r.drafted[i]], rel_tol=1e-4)
            under = [r.drafted[j] for j in range(i + 1) if d.parents[j] == parent]
            if len(under) == (3, 2, 2)[levels[i] - 1]:  # every child of this parent: the head's top, in its order
                assert under == np.argsort(-probs, kind="stable")[:len(under)].tolist()
        path_tokens = [r.drafted[i] for i in d.path]
        for m, token in enumerate(path_tokens + [r.new[-1]]):
            assert is_argmax(probs_after(oracle, before + path_tokens[:m]), token)
        lines = "\n".join(display.medusa_lines(r, show))
        assert "p = the probability its head gave it" in lines
        why = reasons(r)
        widths = (3, 2, 2)[:d.depth]
        if not widths:  # nothing left to draft
            assert "the heads drafted nothing" in why and "only 1 token was left to make" in why
            continue
        assert f"= {int(np.prod(widths))} branches" in why and " x ".join(map(str, widths)) in why
        assert f"kept the branch the oracle's choices follow: {len(d.path)} node(s) deep" in why
        kept += len(d.path)
    assert kind == "random heads" or kept


# ---------------------------------------------------------------------------
# The sampled methods: every label names the rule that ran, with the numbers that decided it
# ---------------------------------------------------------------------------

GREEDY_WORDS = re.compile(r"oracle's choice|oracle chose|choices follow|first disagreement|oracle's own token|argmax")
NUMBER = r"(\d[0-9.]*(?:e[-+]?\d+)?)"
NEAR = 1e-4  # a test this close to its threshold may go either way between a cached and an uncached pass


def residual_of(q, p):
    """(q - p)+ renormalised, computed here apart from sps.residual; q itself where it has no mass."""
    mass = np.maximum(q - p, 0)
    return mass / mass.sum() if mass.sum() > 0 else q


def without_token(p, x):
    rest = p.copy()
    rest[x] = 0
    return rest / rest.sum()


def close(a, b):
    return math.isclose(a, b, rel_tol=2e-3, abs_tol=1e-5)


def probs_rows(model, tokens, n):  # -> [n, V]: after each of the last n tokens, one pass with no cache
    return softmax(model.forward(tokens, n_logits=n).astype(np.float32))


def printed(shown, value):
    """A number printed with 3 significant digits (shown) stands for value: within its rounding, and the noise."""
    return math.isclose(shown, value, rel_tol=6e-3, abs_tol=1e-5)


def ancestors_of(r, i):
    line = []
    while i != -1:
        line.insert(0, r.drafted[i])
        i = r.details.parents[i]
    return line


def assert_tree_labels_follow_the_models(r, lines, text, related, oracle):
    """Every node of a tree-sps round as sampled_tree_lines labels it, against its test recomputed from the models
    (no cache): the target q_i (q, then the residuals) and draft p_i (p, or p without the rejected siblings) each
    check met, the label "kept by its test" exactly on the kept path and where r < min(1, q_i/p_i), the printed r
    and q_i/p_i reading the way the test decided, the nodes never tested said to be so and why, and the last token
    drawn from the final residual or, at a kept leaf, from q, with its chance there."""
    d, context = r.details, text[:r.context_length]
    without = d.siblings == "without replacement"
    label = {int(line.rsplit("= node ", 1)[1]): line for line in lines if "= node " in line}
    assert sorted(label) == list(range(len(r.drafted)))
    tested, final = set(), None
    for visit in d.visits:
        before = context + (ancestors_of(r, visit["node"]) if visit["node"] != -1 else [])
        q, p = probs_after(oracle, before), probs_after(related, before)
        for n, (child, c) in enumerate(zip(visit["children"], visit["checks"])):
            x, kept, line = r.drafted[child], child in d.path, label[child]
            assert c["token"] == x and close(c["q"], q[x]) and close(c["p"], p[x]), (c, q[x], p[x])
            target, draft = "q" + "'" * n, "p" + "'" * n if without else "p"
            ratio = float(q[x] / p[x])
            assert (f"(kept by its test r < min(1, {target}/{draft}): " in line) == kept, line
            assert (f"(rejected by its test r < min(1, {target}/{draft}): " in line) == (not kept), line
            if abs(c["r"] - min(1.0, ratio)) > NEAR:
                assert kept == (c["r"] < min(1.0, ratio)), (line, c["r"], ratio)
            shown_r, shown_ratio = (float(v) for v in re.search(
                rf"r {NUMBER}, {re.escape(target)}/{re.escape(draft)} = \S+ / \S+ = {NUMBER}[;)]", line).groups())
            assert (shown_r < min(1.0, shown_ratio)) == kept, line  # the digits printed decide as the test did
            assert shown_r < 1 and (abs(ratio - 1) < NEAR or (shown_ratio > 1) == (ratio > 1)), line
            tested.add(child)
            if kept:
                break
            q, p = residual_of(q, p), without_token(p, x) if without else p
        final = q
    for i, parent in enumerate(d.parents):
        if i in tested:
            continue
        assert "kept by" not in label[i] and "rejected by" not in label[i], label[i]
        if parent != -1 and parent not in d.path:
            assert "(not tested: its parent was not kept)" in label[i], label[i]
        else:
            kept = next(c for c in d.path if d.parents[c] == parent)
            assert kept < i and f"(not tested: an earlier sibling, node {kept} " in label[i], label[i]
    token, end = r.new[-1], d.path[-1] if d.path else -1
    [last] = [line for line in lines if line.startswith(("  residual ", "  bonus    ", "  oracle   "))]
    if d.last["from"] == "residual":
        n = len(d.visits[-1]["checks"])
        assert last.startswith(f"  residual <{token}> drawn from {'q' + chr(39) * n}, the residual left after every "
                               f"child of ")
        assert printed(float(re.search(rf"its chance there {NUMBER}\)", last).group(1)), float(final[token]))
    else:
        q = probs_after(oracle, context + (ancestors_of(r, end) if end != -1 else []))
        assert last.startswith(f"  bonus    <{token}> drawn from q after " if r.drafted else f"  oracle   <{token}> drawn from q")
        assert printed(float(re.search(rf"q\(x\) {NUMBER}\)", last).group(1)), float(q[token]))
    assert f"  kept     {len(d.path)} node(s) + <{token}>" in lines


def sampled_tree_trace(rule, related, oracle, ids, seed):
    from beyond.tree_sampling import tree_sample_generate
    from beyond.tree_without_replacement import tree_sample_wor_generate
    generate = tree_sample_generate if rule == "tree-sps" else tree_sample_wor_generate
    return traced(generate, related, oracle, ids, 20, n_draft=3, width=3, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("rule", ["tree-sps", "tree-sps-wor"])
def test_sampled_tree_labels_name_the_test_that_ran(related, oracle, rule):
    """--method tree-sps and tree-sps-wor: each node is kept or rejected by its test r < min(1, q/p) (never "the
    oracle's choice"), the last token is drawn from a residual or is the bonus from q, and the page says the same."""
    from types import SimpleNamespace
    from workbench.page import report
    seen = set()
    for ids, seed in zip(PROMPTS, (0, 3)):
        tokens, trace = sampled_tree_trace(rule, related, oracle, ids, seed)
        text = ids + tokens
        for r in trace:
            assert r.details.siblings == ("i.i.d." if rule == "tree-sps" else "without replacement")
            assert_tree_labels_follow_the_models(r, display.sampled_tree_lines(r, show), text, related, oracle)
            seen |= {r.details.last["from"]} | {"rejected" for v in r.details.visits for c in v["checks"]
                                                if not c["accepted"]}
        lines = "\n".join(display.format_trace(trace, lambda t: f"<{t}>".encode(), len(ids)))
        assert not GREEDY_WORDS.search(lines), GREEDY_WORDS.search(lines)
        page = report.rounds_section(SimpleNamespace(token_bytes=lambda t: f"<{t}>".encode(), method=rule), trace)
        assert not GREEDY_WORDS.search(page)
        titles = re.findall(r'<rect class="node-(path|rejected|unchecked)"[^>]*><title>token \d+: ([^<]*)</title>', page)
        assert titles and all(said.startswith({"path": "kept by its test", "rejected": "rejected by its test",
                                               "unchecked": "never checked"}[kind]) for kind, said in titles)
        n_kept = sum(len(r.details.path) for r in trace)
        assert sum(kind == "path" for kind, _ in titles) == n_kept
    assert seen == {"residual", "bonus", "rejected"}  # the runs show every label


def test_the_tree_label_check_catches_the_greedy_trees_labels(related, oracle):
    """Negative controls: the labels the greedy tree's tree_lines gave a sampled round ("the oracle's choice after its
    parent"), and a correct label turned to its opposite, both fail the check above."""
    tokens, trace = sampled_tree_trace("tree-sps", related, oracle, PROMPTS[0], 0)
    text = PROMPTS[0] + tokens
    r = next(r for r in trace if r.details.path)
    with pytest.raises(AssertionError):
        assert_tree_labels_follow_the_models(r, display.tree_lines(r, show), text, related, oracle)
    lines = display.sampled_tree_lines(r, show)
    kept = f"= node {r.details.path[0]}"
    flipped = [line.replace("(kept by its test", "(rejected by its test") if line.endswith(kept) else line
               for line in lines]
    assert flipped != lines
    with pytest.raises(AssertionError):
        assert_tree_labels_follow_the_models(r, flipped, text, related, oracle)


def assert_sps_lines_follow(r, p_rows, q_rows):
    """An SpS round (sps, eagle-sps) as sps_lines draws it, against p and q recomputed apart: each draft's verdict
    is its test r < min(1, q/p), printed with digits that decide it as it was decided; then the resample from the
    residual (q - p)+ or the bonus from q, with the drawn token's chance there."""
    d, lines = r.details, display.sps_lines(r, show)
    for t, step in enumerate(d.steps):
        x, kept = r.drafted[t], t < r.accepted
        a = min(1.0, float(q_rows[t][x] / p_rows[t][x]))
        assert close(step["q"], q_rows[t][x]) and close(step["p"], p_rows[t][x])
        if abs(step["r"] - a) > NEAR:
            assert kept == (step["r"] < a)
        [line] = [line for line in lines if line.startswith(f"  x~{t + 1} ")]
        shown_a, shown_r = (float(v) for v in re.search(rf"min\(1, q/p\) {NUMBER}  r {NUMBER}  -> ", line).groups())
        assert line.endswith("-> accept" if kept else "-> REJECT") and (shown_r < shown_a) == kept, line
        assert shown_r < 1 and (abs(a - 1) < NEAR or (shown_a < 1) == (a < 1)), line
    token, t = r.new[-1], r.accepted
    if d.resampled is not None:
        [line] = [line for line in lines if line.startswith("  resample ")]
        assert line.startswith(f"  resample <{token}> from (q - p)+ renormalised, where it had ")
        chance = float(re.search(rf"where it had {NUMBER};", line).group(1))
        assert printed(chance, float(residual_of(q_rows[t], p_rows[t])[token]))
    else:
        [line] = [line for line in lines if line.startswith(("  bonus    ", "  oracle   "))]
        assert f"<{token}> sampled from q (q(x) " in line
        assert printed(float(re.search(rf"q\(x\) {NUMBER}\)", line).group(1)), float(q_rows[t][token]))


def test_sps_lines_name_the_test_and_the_residual(related, oracle):
    from sps import speculative_sample
    endings = set()
    for ids, seed in zip(PROMPTS, (0, 1)):
        tokens, trace = traced(speculative_sample, related, oracle, ids, 20, n_draft=4, rng=np.random.default_rng(seed))
        text = ids + tokens
        for r in trace:
            before = text[:r.context_length]
            k = len(r.drafted)
            p_rows = probs_rows(related, before + r.drafted[:-1], k) if k else []
            q_rows = probs_rows(oracle, before + r.drafted, k + 1)
            assert_sps_lines_follow(r, p_rows, q_rows)
        endings |= {"resampled" if r.details.resampled else "bonus" for r in trace if r.drafted}
        assert not GREEDY_WORDS.search("\n".join(display.format_trace(trace, lambda t: b"x", len(ids))))
    assert endings == {"resampled", "bonus"}


def test_the_sps_label_check_catches_a_verdict_its_numbers_contradict(related, oracle):
    """Negative control: a kept draft whose r is at its min(1, q/p), not below it, fails the check above."""
    from sps import speculative_sample
    tokens, trace = traced(speculative_sample, related, oracle, PROMPTS[0], 12, n_draft=4, rng=np.random.default_rng(0))
    r = next(r for r in trace if r.accepted)
    before = (PROMPTS[0] + tokens)[:r.context_length]
    k = len(r.drafted)
    p_rows, q_rows = probs_rows(related, before + r.drafted[:-1], k), probs_rows(oracle, before + r.drafted, k + 1)
    assert_sps_lines_follow(r, p_rows, q_rows)
    steps = [dict(r.details.steps[0], r=r.details.steps[0]["accept_prob"])] + r.details.steps[1:]
    r.details = dataclasses.replace(r.details, steps=steps)
    with pytest.raises(AssertionError):
        assert_sps_lines_follow(r, p_rows, q_rows)


def test_eagle_sps_lines_name_the_test_and_the_residual(oracle):
    """eagle-sps: the head's p, recomputed from the oracle's features of the text (one pass, no cache) and the head
    run on them afresh, beside the oracle's q; its rounds are SpS's, and so are its labels."""
    from beyond.eagle import eagle_sample
    from kvcache import KVCache
    from test_eagle import random_head
    head = random_head(oracle, seed=1)
    ids = PROMPTS[1]
    tokens, trace = traced(eagle_sample, head, oracle, ids, 20, n_draft=3, rng=np.random.default_rng(2))
    text = ids + tokens
    assert trace[0].reason.startswith("the prompt's pass: the oracle's features of the prompt, and a token drawn from its q")
    for r in trace[1:]:
        before = text[:r.context_length]
        features = oracle.hidden_states(before)[:-1]  # f_t for every token but the newest
        cache = KVCache()
        guess = head.forward(before[1:], features, cache)[-1:]
        p_rows = []
        for x in r.drafted:
            p_rows.append(softmax(oracle.logits(guess)[0].astype(np.float32)))
            guess = head.forward([x], guess, cache)
        q_rows = probs_rows(oracle, before + r.drafted, len(r.drafted) + 1)
        assert_sps_lines_follow(r, p_rows, q_rows)
    assert any(r.details.resampled for r in trace[1:])
    assert not GREEDY_WORDS.search("\n".join(display.format_trace(trace, lambda t: b"x", len(ids))))
    from types import SimpleNamespace
    from workbench.page import report
    page = report.rounds_section(SimpleNamespace(token_bytes=lambda t: f"<{t}>".encode(), method="eagle-sps",
                                                 prompt_ids=ids, tokens=tokens), trace)
    assert not GREEDY_WORDS.search(page)
    assert page.count("each by SpS's test r &lt; min(1, q/p)") == sum(bool(r.drafted) for r in trace)


def test_numbers_compared_print_with_the_digits_that_decide():
    """decoding.decisive_digits: a pair that differs never prints the same, and so never in the wrong order."""
    from decoding import decisive_digits
    for a, b in [(1.046, 1.0), (0.9996, 1.0), (0.5301, 0.5304), (1e-5, 1.1e-5), (0.7, 0.69999)]:
        digits = decisive_digits((a, b))
        shown_a, shown_b = float(f"{a:.{digits}g}"), float(f"{b:.{digits}g}")
        assert shown_a != shown_b and (shown_a < shown_b) == (a < b), (a, b, digits)
    assert decisive_digits((0.25, 0.5)) == 2 and decisive_digits((0.5, 0.5)) == 2 and decisive_digits(least=3) == 3
    assert f"{1.046:.{decisive_digits((1.046, 1.0))}g}" == "1.05"


# ---------------------------------------------------------------------------
# Across vocabularies (crossvocab.py): the draft's own tokens, their text, the oracle's candidates
# ---------------------------------------------------------------------------

CROSS_PROMPTS = ("the cat and the café", "If the file does not exist, the function")


@pytest.fixture(scope="module", params=["tiny random pair", pytest.param("learned pair", marks=pytest.mark.slow)])
def across(request, tiny_dirs, other_vocabulary):
    """(draft, oracle, the draft's tokenizer, the oracle's): the tiny oracle and a draft of it in another BPE
    (conftest's other_vocabulary), and in the slow tests the learned oracle and demo-draft-4k."""
    from workbench.speed.accelerate import load_fast
    from weights.tokenizer import load_tokenizer
    if request.param == "learned pair":
        dirs = request.getfixturevalue("demo_dirs")
        draft_dir, oracle_dir = dirs["draft-4k"], dirs["oracle"]
    else:
        draft_dir, oracle_dir = other_vocabulary, tiny_dirs["oracle"]
    return load_fast(draft_dir), load_fast(oracle_dir), load_tokenizer(draft_dir), load_tokenizer(oracle_dir)


def bytes_of(enc, tokens):
    return b"".join(enc.decode_single_token_bytes(t) for t in tokens)


def in_tokens(enc, text):
    """text (bytes) in enc's tokens, by the tokenizer itself where the bytes are whole UTF-8."""
    from crossvocab import encode_bytes
    try:
        return enc.encode(text.decode("utf-8"), allowed_special="all")
    except UnicodeDecodeError:  # a draft's text can end inside a character: crossvocab.encode_bytes, tested apart
        return encode_bytes(enc, text)


def shown_line(lines, start):
    [line] = [line for line in lines if line.startswith(start)]
    return line


def assert_catch_up_follows(r, draft_enc, oracle_enc, lines):
    """The draft keeps its longest run of drafts whose bytes begin the agreed text, and reads the rest in its own
    tokens; the trace's last "draft" line says both."""
    d, agreed = r.details, bytes_of(oracle_enc, r.new)
    kept, at = 0, 0
    while kept < len(d.draft_pieces) and agreed.startswith(d.draft_pieces[kept], at):
        at += len(d.draft_pieces[kept])
        kept += 1
    assert d.draft_kept == kept and bytes_of(draft_enc, d.reencoded) == agreed[at:]
    assert d.reencoded_pieces == [draft_enc.decode_single_token_bytes(t) for t in d.reencoded]
    again = " ".join(display.bytes_text(p) for p in d.reencoded_pieces) or "(nothing left)"
    assert lines[-1] == (f"  draft    keeps {kept} of its {len(d.draft_ids)} token(s) (their text begins the agreed text) "
                         f"and reads the rest of it in its own tokens: {again}")


def assert_crossvocab_greedy_lines_follow(r, listed, before, n_left, draft, oracle, draft_enc, oracle_enc):
    """A greedy round across vocabularies as crossvocab_lines draws it, against the models run afresh: the draft's
    tokens are its argmaxes after its own token list (listed), shown as their own text; their text in the oracle's
    tokens, cut to the tokens left, are the candidates; the oracle's choices after each prefix; the agreeing
    prefix kept; the draft's catching up."""
    d, lines = r.details, display.crossvocab_lines(r, show)
    for i, x in enumerate(d.draft_ids):
        assert is_argmax(probs_after(draft, listed + d.draft_ids[:i]), x)
    assert d.draft_pieces == [draft_enc.decode_single_token_bytes(x) for x in d.draft_ids]
    assert lines[0].startswith(  # the draft's own tokens; the last line, its catching up
        f"  draft    {' '.join(display.bytes_text(p) for p in d.draft_pieces) or '(nothing)'}   ({len(d.draft_ids)} token(s)")
    assert d.text == b"".join(d.draft_pieces) and shown_line(lines, "  as text  ") == f"  as text  {display.bytes_text(d.text)}"
    assert r.drafted == in_tokens(oracle_enc, d.text)[:n_left - 1]
    assert shown_line(lines, "  checked  ").startswith(f"  checked  {show(r.drafted) or '(nothing)'}   ")
    for j, choice in enumerate(r.oracle):
        assert is_argmax(probs_after(oracle, before + r.drafted[:j]), choice)
    n = next((j for j, x in enumerate(r.drafted) if x != r.oracle[j]), len(r.drafted))
    assert r.accepted == n and r.new == r.drafted[:n] + [r.oracle[n]]
    assert shown_line(lines, "  oracle   ") == f"  oracle   {show(r.oracle)}   (its choice after each candidate prefix)"
    assert shown_line(lines, "  kept     ") == f"  kept     {n} candidate(s) + {show([r.oracle[n]])} from the oracle"
    assert_catch_up_follows(r, draft_enc, oracle_enc, lines)


@pytest.mark.parametrize("n_draft", [2, 4])
def test_crossvocab_trace_shows_the_drafts_own_tokens_their_text_and_the_oracles_candidates(across, n_draft):
    from crossvocab import crossvocab_generate
    draft, oracle, draft_enc, oracle_enc = across
    n_new, agreed = 24, 0
    for prompt in CROSS_PROMPTS:
        ids = encode_text(oracle_enc, prompt)
        tokens, trace = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft=n_draft)
        text, listed = ids + tokens, encode_text(draft_enc, prompt)
        for r in trace:
            assert_crossvocab_greedy_lines_follow(r, listed, text[:r.context_length],
                                                  n_new - (r.context_length - len(ids)), draft, oracle, draft_enc, oracle_enc)
            assert reasons(r) == display.length_reason(n_draft, len(r.details.draft_ids))
            listed += r.details.draft_ids[:r.details.draft_kept] + r.details.reencoded
            agreed += r.accepted
        assert bytes_of(draft_enc, listed) == bytes_of(oracle_enc, text)  # the draft's list spells the text
    assert agreed > 0


def test_the_crossvocab_check_catches_a_misquoted_candidate(across):
    """Negative control: a round whose candidates are shown one token short fails the check above."""
    import dataclasses as dc
    from crossvocab import crossvocab_generate
    draft, oracle, draft_enc, oracle_enc = across
    ids = encode_text(oracle_enc, CROSS_PROMPTS[0])
    tokens, trace = traced(crossvocab_generate, draft, oracle, draft_enc, oracle_enc, ids, 12, n_draft=4)
    r = next(r for r in trace if len(r.drafted) > 1)
    listed = encode_text(draft_enc, CROSS_PROMPTS[0])
    for earlier in trace[:trace.index(r)]:
        listed += earlier.details.draft_ids[:earlier.details.draft_kept] + earlier.details.reencoded
    args = (listed, (ids + tokens)[:r.context_length], 12 - (r.context_length - len(ids)), draft, oracle, draft_enc,
            oracle_enc)
    assert_crossvocab_greedy_lines_follow(r, *args)
    wrong = dc.replace(r, drafted=r.drafted[:-1])
    with pytest.raises(AssertionError):
        assert_crossvocab_greedy_lines_follow(wrong, *args)


def encode_text(enc, text):
    return enc.encode(text, allowed_special="all")


def shared_mass(p_draft, draft_enc, oracle_enc):
    """The draft's mass on its tokens whose bytes the oracle has too, found token by token here."""
    shared = [d for d in range(draft_enc.n_vocab) if draft_enc.decode_single_token_bytes(d) in oracle_bytes(oracle_enc)]
    return float(p_draft[shared].sum())


def oracle_bytes(enc, seen={}):
    if enc.name not in seen:
        seen[enc.name] = {enc.decode_single_token_bytes(t) for t in range(enc.n_vocab)}
    return seen[enc.name]


def assert_crossvocab_sampling_lines_follow(r, listed, before, draft, oracle, draft_enc, oracle_enc):
    """A sampling round across vocabularies as crossvocab_lines draws it: each candidate is the draft's token of the
    same bytes; p'(x) its p renormalised on the shared tokens, q(x) the oracle's, both recomputed with no cache; the
    verdict r < min(1, q/p'), printed with the digits that decide it; the last token's origin."""
    d, lines = r.details, display.crossvocab_lines(r, show)
    assert len(d.tests) == min(r.accepted + 1, len(r.drafted)) and len(r.drafted) == len(d.draft_ids)  # tested until a rejection
    for t, (test, x) in enumerate(zip(d.tests, r.drafted)):
        assert test["token"] == x and oracle_enc.decode_single_token_bytes(x) == d.draft_pieces[t]
        p_draft = probs_after(draft, listed + d.draft_ids[:t])
        p_prime = float(p_draft[d.draft_ids[t]]) / shared_mass(p_draft, draft_enc, oracle_enc)
        q = float(probs_after(oracle, before + r.drafted[:t])[x])
        assert close(test["p"], p_prime) and close(test["q"], q)
        a, kept = min(1.0, q / p_prime), t < r.accepted
        if abs(test["r"] - a) > NEAR:
            assert kept == (test["r"] < a)
        line = shown_line(lines, f"  x~{t + 1} ")
        shown_p, shown_q, shown_a, shown_r = (float(v) for v in re.search(
            rf"p'\(x\) {NUMBER}  q\(x\) {NUMBER}  min\(1, q/p'\) {NUMBER}  r {NUMBER}  -> ", line).groups())
        assert printed(shown_p, p_prime) and printed(shown_q, q), line
        assert line.endswith("-> accept" if kept else "-> REJECT") and (shown_r < shown_a) == kept, line
    kept_line = shown_line(lines, "  kept     ")
    resampled = r.accepted < len(r.drafted)
    assert ("resampled from (q - p')+" in kept_line) == resampled and kept_line.startswith(
        f"  kept     {r.accepted} candidate(s) + {show(r.new[-1:])} ")
    assert_catch_up_follows(r, draft_enc, oracle_enc, lines)


def crossvocab_sampling_trace(across, prompt, seed, n_new=16):
    from crossvocab import crossvocab_sample
    draft, oracle, draft_enc, oracle_enc = across
    ids = encode_text(oracle_enc, prompt)
    tokens, trace = traced(crossvocab_sample, draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft=4,
                           rng=np.random.default_rng(seed))
    return ids + tokens, trace


def test_crossvocab_sampling_trace_quotes_each_tests_p_q_and_r(across):
    draft, oracle, draft_enc, oracle_enc = across
    endings = set()
    for prompt, seed in zip(CROSS_PROMPTS, (0, 1)):
        text, trace = crossvocab_sampling_trace(across, prompt, seed)
        listed = encode_text(draft_enc, prompt)
        for r in trace:
            assert_crossvocab_sampling_lines_follow(r, listed, text[:r.context_length], draft, oracle, draft_enc,
                                                    oracle_enc)
            listed += r.details.draft_ids[:r.details.draft_kept] + r.details.reencoded
            endings.add("resampled" if r.accepted < len(r.drafted) else "bonus" if r.drafted else "nothing")
        assert not GREEDY_WORDS.search("\n".join(display.format_trace(trace, lambda t: b"x", 3)))
    assert {"resampled", "bonus"} <= endings


def test_the_crossvocab_sampling_check_catches_a_verdict_its_numbers_contradict(across):
    """Negative control: a test whose r is set to its min(1, q/p') but still shown kept fails the check above."""
    import dataclasses as dc
    draft, oracle, draft_enc, oracle_enc = across
    text, trace = crossvocab_sampling_trace(across, CROSS_PROMPTS[0], 0)
    r = trace[0]
    listed = encode_text(draft_enc, CROSS_PROMPTS[0])
    args = (listed, text[:r.context_length], draft, oracle, draft_enc, oracle_enc)
    assert_crossvocab_sampling_lines_follow(r, *args)
    test = r.details.tests[0]
    flipped = dict(test, accepted=not test["accepted"])
    wrong = dc.replace(r, details=dc.replace(r.details, tests=[flipped] + r.details.tests[1:]))
    with pytest.raises(AssertionError):
        assert_crossvocab_sampling_lines_follow(wrong, *args)
