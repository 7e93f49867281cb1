"""Every round's "why" (--trace and the page) is pinned to the numbers that produced it: the sampling methods.

Every label names the rule that ran, with the numbers that decided it: block verification's w, h and tests from
the end, a sampled tree's tests with q', q'', ... and p', p'', ..., SpS's tests and residual (sps, eagle-sps), each
number printed with the digits that decide it.

Each test runs a method with a trace, then recomputes what decided each round from the models themselves, with
no cache (a fresh forward pass over the whole text): the round's details must equal the recomputed numbers, and the
reason a student reads (the method's Shown, workbench/methods/) must quote them. Helpers: recomputed.py.
"""

import dataclasses
import math
import re

import numpy as np
import pytest

from gpt2 import softmax
from recomputed import (GREEDY_WORDS, NEAR, NUMBER, PROMPTS, close, models, oracle, printed,  # noqa: F401
                        probs_after, probs_rows, reasons, related, residual_of, show, shown_of, traced, without_token)
from workbench import display, methods
from workbench.methods.sampling import block_lines, sps_lines
from workbench.methods.trees import sampled_tree_lines, tree_lines


def test_block_verification_trace_shows_w_h_and_the_tests_from_the_end(related, oracle):
    """Every draft's p, q, q/p and w recomputed from the models; the tests numbered from the longest prefix down to
    the kept one, the shorter ones never tested; the 'made up' clause names exactly the drafts whose q/p > 1
    raised w again; the last token's line names the residual max(w q - p, 0) or the bonus."""
    from beyond.block_verification import block_sample
    tokens, trace = traced(block_sample, related, oracle, PROMPTS[0], 24, n_draft=4, rng=np.random.default_rng(5))
    text, refilled_somewhere = PROMPTS[0] + tokens, False
    for r in trace:
        d, k, tau = r.details, len(r.drafted), r.details.kept
        lines = block_lines(r, show)
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
        why = reasons("sps-block", r)
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
    header = display.format_trace(shown_of("sps-block"), trace, lambda t: b"x", len(PROMPTS[0]))
    assert sum("tested from the longest down" in line for line in header) == 1  # the legend, once


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
            assert_tree_labels_follow_the_models(r, sampled_tree_lines(r, show), text, related, oracle)
            seen |= {r.details.last["from"]} | {"rejected" for v in r.details.visits for c in v["checks"]
                                                if not c["accepted"]}
        lines = "\n".join(display.format_trace(shown_of(rule), trace, lambda t: f"<{t}>".encode(), len(ids)))
        assert not GREEDY_WORDS.search(lines), GREEDY_WORDS.search(lines)
        page = report.rounds_section(SimpleNamespace(token_bytes=lambda t: f"<{t}>".encode(), method=methods.get(rule)), trace)
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
        assert_tree_labels_follow_the_models(r, tree_lines(r, show), text, related, oracle)
    lines = sampled_tree_lines(r, show)
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
    d, lines = r.details, sps_lines(r, show)
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
        assert not GREEDY_WORDS.search("\n".join(display.format_trace(shown_of("sps"), trace, lambda t: b"x", len(ids))))
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
    assert reasons("eagle-sps", trace[0]).startswith("the prompt's pass: the oracle's features of the prompt, and a token "
                                                     "drawn from its q")
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
    assert not GREEDY_WORDS.search("\n".join(display.format_trace(shown_of("eagle-sps"), trace, lambda t: b"x", len(ids))))
    from types import SimpleNamespace
    from workbench.page import report
    page = report.rounds_section(SimpleNamespace(token_bytes=lambda t: f"<{t}>".encode(), method=methods.get("eagle-sps"),
                                                 prompt_ids=ids, tokens=tokens), trace)
    assert not GREEDY_WORDS.search(page)
    assert page.count("each by SpS's test r &lt; min(1, q/p)") == sum(bool(r.drafted) for r in trace)


def test_numbers_compared_print_with_the_digits_that_decide():
    """display.decisive_digits: a pair that differs never prints the same, and so never in the wrong order."""
    from workbench.display import decisive_digits
    for a, b in [(1.046, 1.0), (0.9996, 1.0), (0.5301, 0.5304), (1e-5, 1.1e-5), (0.7, 0.69999)]:
        digits = decisive_digits((a, b))
        shown_a, shown_b = float(f"{a:.{digits}g}"), float(f"{b:.{digits}g}")
        assert shown_a != shown_b and (shown_a < shown_b) == (a < b), (a, b, digits)
    assert decisive_digits((0.25, 0.5)) == 2 and decisive_digits((0.5, 0.5)) == 2 and decisive_digits(least=3) == 3
    assert f"{1.046:.{decisive_digits((1.046, 1.0))}g}" == "1.05"
