"""Medusa (beyond/medusa.py): a tree of the heads' candidates, verified greedily, gives greedy decoding's text."""

import numpy as np
import pytest

from beyond.medusa import MedusaHeads, candidate_tree, medusa_generate
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt


def random_heads(oracle, n_heads=3, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    d = oracle.n_embd
    heads = [{"weight": (rng.standard_normal((d, d)) * scale).astype(np.float32), "bias": np.zeros(d, np.float32)}
             for _ in range(n_heads)]
    return MedusaHeads({"medusa": heads}, {"head": "medusa", "n_embd": d}, oracle)


def copying_heads(oracle, n_heads=3):
    """Heads of zero weights: each guesses the oracle's own next token again, so on text that repeats a
    token the tree's first branch is right and whole branches are kept."""
    d = oracle.n_embd
    return MedusaHeads({"medusa": [{"weight": np.zeros((d, d), np.float32), "bias": np.zeros(d, np.float32)}] * n_heads},
                       {"head": "medusa", "n_embd": d}, oracle)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("widths", [(1,), (2, 2), (3, 2, 2), (1, 1, 1)], ids=str)
def test_greedy_text_is_greedy_decodings(oracle, seed, widths):
    ids = prompt(oracle, 8, seed)
    stats = Stats(trace=[])
    got = list(medusa_generate(random_heads(oracle, seed=seed), oracle, ids, 24, widths=widths, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 24)), got, oracle, ids)
    for r in stats.trace[1:]:
        assert r.cached["oracle"] == r.context_length + len(r.new) - 1  # the kept branch, all but the newest token


def test_kept_branches_are_the_oracles(oracle):
    """Heads that repeat the oracle's token are right wherever greedy text repeats: whole branches are kept,
    and the text is still greedy decoding's."""
    ids = [5] * 6
    stats = Stats()
    got = list(medusa_generate(copying_heads(oracle), oracle, ids, 30, widths=(2, 2, 2), stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)
    assert stats.accepted > 0


def test_the_equality_test_catches_a_walk_that_keeps_a_wrong_branch(oracle, monkeypatch):
    """Negative control: keeping the first branch whole, whatever the oracle chose, changes the text."""
    import beyond.medusa as medusa
    monkeypatch.setattr(medusa, "accepted_path", lambda nodes, choice: [i for i, n in enumerate(nodes) if i == 0 or
                                                                         (n.parent == i - 1 and n.depth > 1)][:2])
    ids = prompt(oracle, 8, 0)
    got = list(medusa_generate(random_heads(oracle), oracle, ids, 24, widths=(1, 1, 1)))
    assert got != list(greedy_generate(oracle, ids, 24))


@pytest.mark.parametrize("n_new", range(0, 5))
def test_exactly_n_new_tokens(oracle, n_new):
    ids = prompt(oracle, 5, 0)
    assert list(medusa_generate(random_heads(oracle), oracle, ids, n_new)) == list(greedy_generate(oracle, ids, n_new))


def test_the_tree_is_the_product_of_the_heads_candidates():
    logits = np.array([[0, 5, 9, 1], [7, 0, 0, 8], [1, 2, 3, 4]], dtype=np.float32)
    nodes = candidate_tree(logits, (2, 2, 1))
    assert [(n.token, n.parent, n.depth) for n in nodes] == [
        (2, -1, 1), (1, -1, 1),
        (3, 0, 2), (0, 0, 2), (3, 1, 2), (0, 1, 2),
        (3, 2, 3), (3, 3, 3), (3, 4, 3), (3, 5, 3)]


def test_bad_settings_are_refused(oracle, draft):
    with pytest.raises(GenerationError):
        list(medusa_generate(random_heads(oracle), oracle, [1, 2], 4, widths=(2, 2, 2, 2)))
    with pytest.raises(GenerationError):
        list(medusa_generate(random_heads(oracle), draft, [1, 2], 4))
