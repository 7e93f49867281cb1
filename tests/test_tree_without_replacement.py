"""Tree speculative sampling without replacement (beyond/tree_without_replacement.py) keeps the oracle's
distribution: exactly, by enumerating every outcome of the real acceptance code, and statistically; wrong rules
(tree-sps's rule on distinct children, no residual, i.i.d. children under this rule) fail the same tests. The
whole generator's tests (chi-square with its negative control, temperature 0 is greedy decoding, the caches)
are tree-sps's, run on this rule too in tests/test_tree_sampling.py."""

import itertools
from collections import Counter

import numpy as np
import pytest

import beyond.tree_without_replacement as wor
from beyond.tree_sampling import iid_children
from beyond.tree_without_replacement import accept_at_node, sample_children, without
from test_tree_sampling import (ALMOST_ONE, depth_two_error, distribution_pairs, enumeration_errors, node_chi_square,
                                node_distribution, text)
from tree import Node

# Deliberately wrong rules, patched into the module so the real walk uses them (the negative controls).
BIASED = {
    "p kept after a rejection (tree-sps's rule)": ("without", lambda p, x: p),
    "no residual after a rejection": ("residual", lambda q, p: q),
}


def draws(p, m):
    """Every ordered draw of m distinct children from p without replacement, with its probability (computed
    here, not by the module: each child has p(x) over the mass of the tokens not drawn before it)."""
    support = [x for x in range(len(p)) if p[x] > 0]
    for children in itertools.permutations(support, min(m, len(support))):
        chance, left = 1.0, set(support)
        for x in children:
            chance *= float(p[x]) / sum(float(p[y]) for y in left)
            left.remove(x)
        yield chance, list(children)


# ---------------------------------------------------------------------------
# Exact: every outcome of one node, and of a depth-2 tree, with its probability
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("width", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(2))
def test_one_node_emits_exactly_q(seed, width):
    rng = np.random.default_rng(seed)
    for q, p in distribution_pairs(rng, V=5):
        np.testing.assert_allclose(node_distribution(q, p, width, draws, accept_at_node), q, atol=1e-6)


def test_children_are_distinct_and_as_many_as_p_allows():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.0, 0.3, 0.2, 0.0], np.float32)
    for _ in range(50):
        children = sample_children(p, 4, rng)
        assert len(children) == 3 and sorted(children) == [0, 2, 3]
    assert sample_children(np.eye(4, dtype=np.float32)[2], 3, rng) == [2]  # temperature 0: one child
    assert without(p, 0).tolist() == pytest.approx([0, 0, 0.6, 0.4, 0])


def test_sample_children_draws_without_replacement():
    # The first two children's joint frequencies against p(a) p(b) / (1 - p(a)).
    rng, n = np.random.default_rng(1), 20000
    p = np.array([0.5, 0.3, 0.2], np.float32)
    counts = Counter(tuple(sample_children(p, 2, rng)) for _ in range(n))
    for (a, b), c in counts.items():
        assert c / n == pytest.approx(p[a] * p[b] / (1 - p[a]), abs=0.015)


def test_the_draft_loses_the_rejected_token():
    q, p = np.array([0.6, 0.3, 0.1], np.float32), np.array([0.2, 0.2, 0.6], np.float32)
    i, target, checks = accept_at_node(q, p, [2, 1], [ALMOST_ONE, 0.0])
    # After rejecting token 2: q' = (q - p)+ = [0.4, 0.1, 0] / 0.5, p' = [0.2, 0.2, 0] / 0.4, and token 1 is
    # checked at q'(1) / p'(1) = 0.2 / 0.5; r = 0 accepts it.
    assert i == 1 and checks[1]["p"] == pytest.approx(0.5) and checks[1]["q"] == pytest.approx(0.2)
    assert checks[1]["accept_prob"] == pytest.approx(0.4)
    i, target, _ = accept_at_node(q, p, [2, 1], [ALMOST_ONE] * 2)
    assert i is None and target.tolist() == pytest.approx([1, 0, 0])  # q'' = (q' - p')+ = [0.3, 0, 0] / 0.3
    # A third child can only be token 0, and p'' = q'' = [1, 0, 0]: it is accepted for sure, even at r near 1.
    assert accept_at_node(q, p, [2, 1, 0], [ALMOST_ONE] * 3)[0] == 2


def trees(p_at, V, width, depth):
    """Every tree sample_tree can draw, with its probability: (probability, nodes); each node's children are an
    ordered draw without replacement from p after its text."""
    def grow(nodes, frontier, d, weight):
        if d > depth or not frontier:
            yield weight, nodes
            return
        for picks in itertools.product(*[list(draws(p_at[text(nodes, parent)], width)) for parent in frontier]):
            new, level, w = list(nodes), [], weight
            for parent, (chance, children) in zip(frontier, picks):
                w *= chance
                for token in children:
                    new.append(Node(token, parent, d))
                    level.append(len(new) - 1)
            if w > 0:
                yield from grow(new, level, d + 1, w)
    yield from grow([], [-1], 1, 1.0)


@pytest.mark.parametrize("seed, zeros, width", [(0, False, 2), (1, True, 2), (2, False, 3)])
def test_a_depth_two_tree_emits_exactly_the_oracles_sequences(seed, zeros, width):
    error, total = depth_two_error(seed, width, zeros, trees, accept_at_node)
    assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("rule", BIASED)
def test_the_enumerations_catch_a_wrong_rule(monkeypatch, rule):
    monkeypatch.setattr(wor, *BIASED[rule])
    node_error, tree_error = enumeration_errors(draws, trees, accept_at_node)
    assert node_error > 0.01 and tree_error > 1e-3  # the right rule is within 1e-6


# ---------------------------------------------------------------------------
# Statistical: many draws of the real code, Pearson's chi-square at alpha = 0.001 (test_sps.py's)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("width", [2, 3])
def test_one_node_passes_the_chi_square_test(width):
    rejects, detail = node_chi_square(width, sample_children, accept_at_node)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"


IID = ("sample_children", iid_children)  # tree-sps's i.i.d. children under this rule


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # i.i.d. repeats meet p(x) = 0: the bias itself
@pytest.mark.parametrize("patch", list(BIASED.values()) + [IID], ids=list(BIASED) + ["i.i.d. children"])
def test_the_chi_square_test_catches_a_wrong_rule(monkeypatch, patch):
    monkeypatch.setattr(wor, *patch)
    assert node_chi_square(2, wor.sample_children, wor.accept_at_node)[0]  # looked up after the patch
