"""Every round's "why" (--trace and the page) is pinned to the numbers that produced it: greedy trees.

The draft's branches where it was unsure and the oracle's choices down them (tree), each node numbered and named
by its own token, and Medusa's heads' candidates.

Each test runs a method with a trace, then recomputes what decided each round from the models themselves, with
no cache (a fresh forward pass over the whole text): the round's details must equal the recomputed numbers, and the
reason a student reads (the method's Shown, workbench/methods/) must quote them. Helpers: recomputed.py.
"""

import math

import numpy as np
import pytest

from gpt2 import softmax
from recomputed import (NEAR_TIE, PROMPTS, is_argmax, models, oracle, probs_after, reasons, related,  # noqa: F401
                        show, traced)
from tree import tree_generate
from workbench.methods.heads import medusa_lines
from workbench.methods.trees import tree_lines


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
        lines = "\n".join(tree_lines(r, show))
        for i, p in enumerate(parents):
            if i in path:
                assert f"* <{r.drafted[i]}>" in lines
            elif p == -1 or p in path:
                assert f"- <{r.drafted[i]}> p {r.details.probs[i]:.2f}   (lost: after its parent the oracle " \
                       f"chose <{r.oracle[p + 1]}>)" in lines
        assert f"{len(path)} node(s) deep" in reasons("tree", r)
    assert branched_somewhere or confidence < 0.5


def test_the_tree_trace_tells_two_nodes_of_the_same_token_apart(related, oracle):
    _, trace = traced(tree_generate, related, oracle, PROMPTS[1], 20, n_draft=4, branch=3, confidence=1.0)
    for r in trace:
        lines = tree_lines(r, show)
        assert "p = the draft's probability of the node's token after its parent" in lines[0]
        numbers = [line.rsplit("= node ", 1)[1] for line in lines if "= node " in line]
        assert sorted(numbers, key=int) == [str(i) for i in range(len(r.drafted))]  # every node, each once, from 0
        for line in lines:
            if "= node " in line:
                i = int(line.rsplit("= node ", 1)[1])
                assert f" <{r.drafted[i]}> p {r.details.probs[i]:.2f}" in line  # its number names its own token
        for p in set(r.details.parents):  # a branching parent is named by number and token, never by token alone
            if r.details.parents.count(p) > 1 and p != -1:
                assert f"node {p} <{r.drafted[p]}>" in reasons("tree", r)


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
        lines = "\n".join(medusa_lines(r, show))
        assert "p = the probability its head gave it" in lines
        why = reasons("medusa", r)
        widths = (3, 2, 2)[:d.k]
        if not widths:  # nothing left to draft
            assert "the heads drafted nothing" in why and "only 1 token was left to make" in why
            continue
        assert f"= {int(np.prod(widths))} branches" in why and " x ".join(map(str, widths)) in why
        assert f"kept the branch the oracle's choices follow: {len(d.path)} node(s) deep" in why
        kept += len(d.path)
    assert kind == "random heads" or kept
