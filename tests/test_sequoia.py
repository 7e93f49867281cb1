"""Sequoia's tree shape (beyond/sequoia.py): the dynamic program equals brute force over every tree of up to 7 nodes,
for the best tree of each size and for the most tokens per unit of time under a cost curve; the acceptance per
rank is measured from runs; tree.py and tree-sps-wor draft a given shape, greedy text unchanged and the oracle's
distribution kept."""

import itertools
import math

import numpy as np
import pytest

from beyond.sequoia import (acceptance_by_rank, best_shape, best_values, depth, expected_tokens, sequoia_shape,
                            tree_of)
from beyond.tree_without_replacement import tree_sample_wor_generate
from decoding import GenerationError
from stats import Stats
from processors import Processor
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt
from test_sps import assert_the_oracles_distribution, small  # noqa: F401 (small: a fixture)
from tree import check_shape, tree_generate


def ordered_trees(n):
    """Every rooted tree of n nodes whose children are ordered (a rank each), as nested lists of subtrees."""
    if n == 1:
        yield []
        return
    for k in range(1, n):  # the root's children
        for sizes in compositions(n - 1, k):
            for subtrees in itertools.product(*[list(ordered_trees(s)) for s in sizes]):
                yield list(subtrees)


def compositions(total, k):
    if k == 1:
        yield (total,)
        return
    for first in range(1, total - k + 2):
        for rest in compositions(total - first, k - 1):
            yield (first,) + rest


def parents_of(tree):
    """A nested tree as a parents list in level order."""
    parents, level = [], [(-1, tree)]
    while level:
        below = []
        for node, subtrees in level:
            for sub in subtrees:
                parents.append(node)
                below.append((len(parents) - 1, sub))
        level = below
    return parents


def test_the_enumeration_counts_the_catalan_numbers():
    assert [len(list(ordered_trees(n))) for n in range(1, 8)] == [1, 1, 2, 5, 14, 42, 132]


ACCEPTANCES = {
    "falling": [0.6, 0.2, 0.1, 0.05],
    "flat": [0.3, 0.3, 0.3],
    "one rank": [0.8],
    "rising (not positional)": [0.1, 0.5, 0.2],
    "random": list(np.random.default_rng(0).dirichlet(np.ones(4)) * 0.9),
}


@pytest.mark.parametrize("name", ACCEPTANCES)
@pytest.mark.parametrize("max_depth", [1, 2, 3, 6])
def test_the_program_equals_brute_force_over_every_tree_of_up_to_7_nodes(name, max_depth):
    a = ACCEPTANCES[name]
    best, choice = best_values(a, 7, max_depth)
    for n in range(1, 8):
        shapes = [parents_of(t) for t in ordered_trees(n)]
        fitting = [s for s in shapes if (not s or depth(s) <= max_depth) and all(
            s.count(parent) <= len(a) for parent in set(s))]
        brute = max((expected_tokens(s, a) for s in fitting), default=-math.inf)  # -inf: no such tree
        assert best[max_depth][n] == pytest.approx(brute, abs=1e-12)
        if brute == -math.inf:
            continue
        found = tree_of(choice, n, max_depth)
        assert len(found) == n - 1 and expected_tokens(found, a) == pytest.approx(brute, abs=1e-12)
        if found:
            check_shape(found, 100)


@pytest.mark.parametrize("name", ACCEPTANCES)
@pytest.mark.parametrize("cost, draft_cost", [
    ([1.0, 1.02, 1.05, 1.1, 1.2, 1.35, 1.5], 0.0),   # a flat curve: the largest tree pays
    ([1.0, 1.3, 1.6, 1.9, 2.2, 2.5, 2.8], 0.0),      # a CPU's: every token costs
    ([1.0, 1.05, 1.1, 1.2, 1.3, 1.4, 1.5], 0.3),     # and a draft pass per level
])
def test_the_hardware_aware_choice_equals_brute_force(name, cost, draft_cost):
    a = ACCEPTANCES[name]
    parents, value, speed = sequoia_shape(a, cost, 4, draft_cost)
    best = 1.0 / cost[0]
    for n in range(2, len(cost) + 1):
        for t in ordered_trees(n):
            s = parents_of(t)
            if depth(s) <= 4 and all(s.count(x) <= len(a) for x in set(s)):
                best = max(best, expected_tokens(s, a) / (cost[n - 1] + depth(s) * draft_cost))
    assert speed == pytest.approx(best, abs=1e-12)
    assert value / (cost[len(parents)] + (depth(parents) if parents else 0) * draft_cost) == pytest.approx(speed)


def test_a_costly_check_chooses_no_tree_and_a_free_one_the_largest():
    assert sequoia_shape([0.1], [1.0, 5.0, 9.0], 3)[0] == []
    parents, value, _ = sequoia_shape([0.9, 0.5], [1.0] * 8, 7)
    assert len(parents) == 7 and value == pytest.approx(best_shape([0.9, 0.5], 7, 7)[1])


def test_expected_tokens_by_hand():
    a = [0.5, 0.25]
    assert expected_tokens([], a) == 1.0
    assert expected_tokens([-1, -1, 0], a) == pytest.approx(1 + 0.5 + 0.25 + 0.5 * 0.5)
    assert expected_tokens([-1, -1, -1], a) == pytest.approx(1.75)  # a third rank was never measured: never kept


# ---------------------------------------------------------------------------
# The acceptance per rank, measured from runs
# ---------------------------------------------------------------------------

def test_acceptance_by_rank_counts_what_the_walk_met():
    from types import SimpleNamespace
    from tree import TreeDetails
    rounds = [SimpleNamespace(details=TreeDetails([-1, -1, 0, 1], [1, 3], [1.0] * 4)),  # the root's 2nd, then its only
              SimpleNamespace(details=TreeDetails([-1, -1], [], [1.0] * 2)),            # both rejected
              SimpleNamespace(details=None)]                                            # the prompt's round
    a, made, kept = acceptance_by_rank(rounds)
    assert made == [3, 2] and kept == [1, 1] and a == pytest.approx([1 / 3, 0.5])
    assert acceptance_by_rank(rounds, max_rank=3)[1] == [3, 2, 0]


def test_the_measured_acceptance_of_a_run(related, oracle):
    stats = Stats(trace=[])
    list(tree_sample_wor_generate(related, oracle, prompt(oracle, 6, 0), 40, n_draft=3, width=3,
                                  rng=np.random.default_rng(0), temperature=1.0, stats=stats))
    a, made, kept = acceptance_by_rank(stats.trace)
    assert len(a) == 3 and made[0] >= made[1] >= made[2] > 0 and sum(kept) == stats.accepted
    assert a[0] > a[2]  # the first draw is the likeliest to be kept


# ---------------------------------------------------------------------------
# The drafters take a given shape
# ---------------------------------------------------------------------------

SHAPES = [[-1], [-1, 0, 1], [-1, -1, 0, 0, 1, 2], best_shape([0.6, 0.2, 0.1], 10, 4)[0]]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["draft", "related"])
def test_tree_with_a_shape_is_greedy(request, oracle, seed, shape, kind):
    ids = prompt(oracle, 6, seed)
    stats = Stats(trace=[])
    got = list(tree_generate(request.getfixturevalue(kind), oracle, ids, 30, n_draft=depth(shape), shape=shape,
                             stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)
    for r in stats.trace:  # the tree drafted is the shape (cut to the round's depth near the end)
        assert r.details.parents == shape[:len(r.details.parents)]
        assert r.details.k < depth(shape) or len(r.drafted) == len(shape)


def test_tree_with_a_shape_on_the_learned_pair(demo_dirs):
    from workbench.speed.accelerate import load_fast
    draft, oracle = (load_fast(demo_dirs[k]) for k in ("draft", "oracle"))
    ids = [464, 2163, 5860, 257, 1351]
    for shape in SHAPES:
        got = list(tree_generate(draft, oracle, ids, 24, n_draft=depth(shape), shape=shape))
        assert_same_greedy(list(greedy_generate(oracle, ids, 24)), got, oracle, ids)


@pytest.mark.parametrize("shape", SHAPES[1:], ids=str)
def test_tree_sps_wor_with_a_shape(related, oracle, shape):
    stats = Stats(trace=[])
    ids = prompt(oracle, 6, 1)
    list(tree_sample_wor_generate(related, oracle, ids, 30, n_draft=depth(shape), shape=shape, temperature=0.9,
                                  rng=np.random.default_rng(2), stats=stats))
    for r in stats.trace:
        assert r.details.parents == shape[:len(r.details.parents)]
    got = list(tree_sample_wor_generate(related, oracle, ids, 20, n_draft=depth(shape), shape=shape, temperature=0,
                                        rng=np.random.default_rng(2)))
    assert_same_greedy(list(greedy_generate(oracle, ids, 20)), got, oracle, ids)


@pytest.mark.slow
def test_tree_sps_wor_with_a_shape_has_the_oracles_distribution(small):
    assert_the_oracles_distribution(tree_sample_wor_generate, small, 600, Processor(), n_draft=2,
                                    shape=[-1, -1, 0, 0, 1])


def test_bad_shapes_are_refused(oracle, draft):
    for bad in ([], [0], [-1, 1], [-1, -1, 1, 0], [-1, "x"]):
        with pytest.raises(GenerationError):
            list(tree_generate(draft, oracle, [1, 2], 4, shape=bad))
