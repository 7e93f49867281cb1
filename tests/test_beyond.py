"""Tree drafts and adaptive decoding give exactly greedy_generate's tokens (n-gram and staged: test_ngram.py)."""

import numpy as np
import pytest

from adaptive import adaptive_generate, entropy
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt
from tree import Node, tree_generate, tree_mask

DRAFTS = ["draft", "related", "oracle"]  # unrelated, partly agreeing, identical


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", DRAFTS)
@pytest.mark.parametrize("shape", [dict(n_draft=1, branch=1), dict(n_draft=4, branch=2, max_nodes=8),
                                   dict(n_draft=6, branch=3, max_nodes=16, confidence=0.9),
                                   dict(n_draft=8, branch=2, max_nodes=32, confidence=1.0)])
def test_tree_equals_greedy(request, oracle, seed, kind, shape):
    ids = prompt(oracle, 5 + seed, seed)
    stats = Stats()
    got = list(tree_generate(request.getfixturevalue(kind), oracle, ids, 30, stats=stats, **shape))
    assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)
    assert stats.n_generated == 30
    if kind == "oracle" and shape["branch"] == 1:  # a line, always accepted whole
        assert stats.rounds == -(-30 // (shape["n_draft"] + 1))


def test_tree_with_the_oracle_as_draft_accepts_whole_paths(oracle):
    # Budget enough for full depth (2 + 4 + 8 + 16 nodes): the draft's top token is
    # always in the tree, so every round accepts 4 tokens and adds the oracle's 5th.
    stats = Stats()
    got = list(tree_generate(oracle, oracle, prompt(oracle, 5, 0), 30, n_draft=4, branch=2, max_nodes=100,
                             confidence=1.0, stats=stats))
    assert got == list(greedy_generate(oracle, prompt(oracle, 5, 0), 30))
    # 6 rounds of 5 tokens; even the last has room for depth 4, so each drafts all 30 nodes
    assert (stats.rounds, stats.drafted, stats.accepted) == (6, 6 * 30, 6 * 4)


def test_tree_branches_help_a_partly_agreeing_draft(related, oracle):
    accepted = {}
    for branch in (1, 3):
        stats = Stats()
        for seed in SEEDS:
            list(tree_generate(related, oracle, prompt(oracle, 6, seed), 30, n_draft=4, branch=branch,
                               max_nodes=24, confidence=1.0, stats=stats))
        accepted[branch] = stats.tokens_per_round
    assert accepted[3] >= accepted[1]


def test_tree_mask_sees_ancestors_only():
    nodes = [Node(5, -1, 1), Node(6, -1, 1), Node(7, 0, 2), Node(8, 1, 2)]
    mask = tree_mask(nodes, [2, 3], n_text=3, n_fed=2) == 0
    #                 text      n0     n1     n2     n3
    assert mask.tolist() == [[True] * 3 + [True, False, True, False],
                             [True] * 3 + [False, True, False, True]]


def test_tree_reaches_the_context_limit(tiny_dirs):
    from test_greedy import make_model_dir_cached
    from gpt2 import GPT2
    d = GPT2.from_pretrained(make_model_dir_cached(tiny_dirs, "d40", seed=11, n_layer=1))
    o = GPT2.from_pretrained(make_model_dir_cached(tiny_dirs, "o40", seed=12, n_layer=2))
    ids = prompt(o, 13, 3)
    expected = list(greedy_generate(o, ids, 27))
    for draft in (d, o):
        assert_same_greedy(expected, list(tree_generate(draft, o, ids, 27, n_draft=8, branch=2)), o, ids)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", DRAFTS)
@pytest.mark.parametrize("rule", ["egag", "heuristic"])
def test_adaptive_equals_greedy(request, oracle, seed, kind, rule):
    ids = prompt(oracle, 6, seed)
    for bound in (0.5, 3.0, 100.0):
        got = list(adaptive_generate(request.getfixturevalue(kind), oracle, ids, 30, rule=rule, entropy_bound=bound))
        assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)


def test_heuristic_grows_n_draft_when_everything_is_accepted(oracle):
    stats = Stats()
    list(adaptive_generate(oracle, oracle, [1, 2, 3], 60, rule="heuristic", n_draft=2, n_draft_max=16, stats=stats))
    assert stats.rounds < 60 / 3  # n_draft went 2, 4, 6, ...: far fewer rounds than at a fixed 2


def test_entropy():
    assert entropy(np.array([1, 0, 0], np.float32)) == 0
    assert entropy(np.full(4, 0.25, np.float32)) == pytest.approx(np.log(4))


@pytest.mark.parametrize("n_new", range(0, 8))
def test_exactly_n_new_tokens(related, oracle, n_new):
    ids = prompt(oracle, 3, 0)
    assert len(list(tree_generate(related, oracle, ids, n_new))) == n_new
    assert len(list(adaptive_generate(related, oracle, ids, n_new))) == n_new


def test_bad_arguments(draft, oracle):
    with pytest.raises(GenerationError):
        list(adaptive_generate(draft, oracle, [1], 3, rule="magic"))
    with pytest.raises(GenerationError):
        list(tree_generate(draft, oracle, [1], 3, branch=0))
