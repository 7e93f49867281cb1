"""DDTree (beyond/ddtree.py): the heap gives exactly the B likeliest prefixes of the per-position marginals (brute
force on small vocabularies), as a tree; on the Medusa heads, greedy verification gives greedy decoding's text."""

import itertools

import numpy as np
import pytest

import beyond.ddtree as dd
from beyond.ddtree import DDTreeDetails, best_first_tree, ddtree_generate, predicted_tokens
from beyond.medusa import MedusaHeads
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt
from test_medusa import copying_heads, random_heads


def brute_force(logits, budget):
    """Every prefix of 1..n_positions tokens with its chance Π_k softmax(logits[k])(x_k), the budget likeliest."""
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    n_positions, V = p.shape
    every = [(float(np.prod([p[k, x] for k, x in enumerate(prefix)])), prefix)
             for d in range(1, n_positions + 1) for prefix in itertools.product(range(V), repeat=d)]
    return sorted(every, reverse=True)[:budget]


def prefixes(nodes):
    out = []
    for i, node in enumerate(nodes):
        seq, at = [], i
        while at != -1:
            seq.append(nodes[at].token)
            at = nodes[at].parent
        out.append(tuple(reversed(seq)))
    return out


@pytest.mark.parametrize("n_positions, V", [(1, 5), (2, 4), (3, 3), (3, 5), (4, 3)])
@pytest.mark.parametrize("seed", range(4))
def test_the_heap_gives_exactly_the_best_prefixes(n_positions, V, seed):
    logits = np.random.default_rng(seed).standard_normal((n_positions, V)).astype(np.float32) * 2
    for budget in (1, 2, 5, 9, V ** n_positions):
        nodes, chances = best_first_tree(logits, budget)
        want = brute_force(logits, budget)
        assert sorted(prefixes(nodes)) == sorted(prefix for _, prefix in want)
        assert sorted(chances, reverse=True) == pytest.approx([c for c, _ in want], rel=1e-5)
        assert all(node.parent < i and (node.parent == -1 or nodes[node.parent].depth == node.depth - 1)
                   for i, node in enumerate(nodes))  # a tree, level order
        assert [n.depth for n in nodes] == sorted(n.depth for n in nodes)


def test_a_wrong_heap_fails_the_comparison(monkeypatch):
    """Negative control: a heap that pushes only first children (no siblings) is a single path, not the best."""
    real = dd.heapq.heappush
    monkeypatch.setattr(dd.heapq, "heappush", lambda heap, item: item[2] == 0 and real(heap, item))
    logits = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32) * 2
    nodes, _ = best_first_tree(logits, 6)
    assert sorted(prefixes(nodes)) != sorted(prefix for _, prefix in brute_force(logits, 6))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("budget", [1, 2, 4, 8, 15])
def test_greedy_text_is_greedy_decodings(oracle, seed, budget):
    ids = prompt(oracle, 8, seed)
    stats = Stats(trace=[])
    got = list(ddtree_generate(random_heads(oracle, seed=seed), oracle, ids, 24, budget=budget, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 24)), got, oracle, ids)
    for r in stats.trace[1:]:
        assert r.cached["oracle"] == r.context_length + len(r.new) - 1 and len(r.drafted) <= budget
        assert isinstance(r.details, DDTreeDetails) and predicted_tokens(r.details.chances) == pytest.approx(1 + sum(r.details.chances))


def test_kept_branches_are_the_oracles(oracle):
    ids = [5] * 6
    stats = Stats()
    got = list(ddtree_generate(copying_heads(oracle), oracle, ids, 30, budget=6, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)
    assert stats.accepted > 0


def test_the_equality_test_catches_a_walk_that_keeps_a_wrong_branch(oracle, monkeypatch):
    import beyond.medusa as medusa
    monkeypatch.setattr(medusa, "accepted_path", lambda nodes, choice: [0] if nodes else [])
    ids = prompt(oracle, 8, 0)
    assert list(ddtree_generate(random_heads(oracle), oracle, ids, 24, budget=4)) != list(greedy_generate(oracle, ids, 24))


@pytest.mark.parametrize("n_new", range(0, 5))
def test_exactly_n_new_tokens(oracle, n_new):
    ids = prompt(oracle, 5, 0)
    assert list(ddtree_generate(random_heads(oracle), oracle, ids, n_new)) == list(greedy_generate(oracle, ids, n_new))


def test_bad_settings_are_refused(oracle, draft):
    with pytest.raises(GenerationError):
        list(ddtree_generate(random_heads(oracle), oracle, [1, 2], 4, budget=0))
    with pytest.raises(GenerationError):
        list(ddtree_generate(random_heads(oracle), draft, [1, 2], 4))


@pytest.mark.parametrize("budget", [1, 3, 8, 16])
def test_greedy_text_on_the_learned_pair(demo_dirs, budget):
    from gpt2 import GPT2, nest
    from weights import heads
    oracle = GPT2.from_pretrained(demo_dirs["oracle"])
    config, tensors = heads.load(demo_dirs["oracle"], "medusa", oracle)
    medusa_heads = MedusaHeads(nest(tensors), config, oracle)
    ids = [464, 2163, 5860, 257, 1351]
    got = list(ddtree_generate(medusa_heads, oracle, ids, 32, budget=budget))
    assert_same_greedy(list(greedy_generate(oracle, ids, 32)), got, oracle, ids)
