"""Tree speculative sampling (beyond/tree_sampling.py) keeps the oracle's distribution: exactly, by enumerating
every outcome of the real acceptance code, and statistically; a biased rule fails the same tests; and at
temperature 0 it is greedy decoding. The tests of the whole generator run on both rules: tree-sps's and
tree-sps-wor's (beyond/tree_without_replacement.py, whose round is this module's);
tests/test_tree_without_replacement.py has that rule's own."""

import itertools
from collections import Counter

import numpy as np
import pytest

import beyond.tree_sampling as ts
import beyond.tree_without_replacement as wor
from beyond.tree_sampling import SampledTreeDetails, accept_at_node, iid_children, tree_sample_generate, walk_tree
from beyond.tree_without_replacement import tree_sample_wor_generate
from stats import Stats
from processors import Processor, make_processor
from sps import sample
from test_greedy import prompt
from test_sps import (assert_a_seed_reproduces_a_run, assert_exactly_n_new_tokens,  # noqa: F401 (small: a fixture)
                      assert_the_context_limit_and_bad_arguments, assert_self_drafting_keeps_every_draft,
                      assert_the_oracles_distribution, assert_temperature_zero_is_greedy, chi_square_rejects,
                      generator_chi_square, small)
from tree import Node

ALMOST_ONE = np.nextafter(1.0, 0.0)  # r just below 1 rejects every child whose min(1, q/p) is below 1

# Deliberately wrong rules, patched into the module so the real walk uses them (the negative controls).
BIASED = {
    "no residual after a rejection": ("residual", lambda q, p: q),
    "q/p inverted to p/q": ("acceptance_probability", lambda q, p, x: min(1.0, float(p[x] / q[x])) if q[x] > 0 else 1.0),
}


def dirichlet(rng, V, alpha=1.0):
    return rng.dirichlet(np.full(V, alpha)).astype(np.float32)


def distribution_pairs(rng, V):
    """(q, p) pairs: random; p == q (the residual is all zeros); zeros in q (top-k); zeros in p; both one-hot
    and disagreeing (temperature 0); q one-hot, p spread."""
    yield dirichlet(rng, V), dirichlet(rng, V)
    p = dirichlet(rng, V, 0.3)
    yield p, p.copy()
    q = dirichlet(rng, V)
    q[: V // 2] = 0
    yield q / q.sum(), dirichlet(rng, V)
    p = dirichlet(rng, V)
    p[V // 2:] = 0
    yield dirichlet(rng, V), p / p.sum()
    yield np.eye(V, dtype=np.float32)[1], np.eye(V, dtype=np.float32)[3]
    yield np.eye(V, dtype=np.float32)[2], dirichlet(rng, V)


# ---------------------------------------------------------------------------
# Exact: every outcome of one node, and of a depth-2 tree, with its probability
# ---------------------------------------------------------------------------

def iid_draws(p, width):
    """Every draw of width i.i.d. children from p, with its probability: (probability, children)."""
    for children in itertools.product(range(len(p)), repeat=width):
        weight = float(np.prod([p[c] for c in children]))
        if weight > 0:
            yield weight, list(children)


def node_distribution(q, p, width, draws=iid_draws, accept=accept_at_node):
    """P(one node emits x): every draw of the width children from p (draws), and every accept/reject decision
    of the check at the node (accept), whose records give each decision's probability min(1, q/p) against the
    target of the moment; after all rejections, the target it returns (the residual)."""
    emitted = np.zeros(len(q))
    for weight, children in draws(p, width):
        # r just below 1 walks the all-reject path; each record holds the chance to accept there.
        _, target, checks = accept(q, p, children, [ALMOST_ONE] * len(children))
        reach = weight
        for check in checks:
            emitted[check["token"]] += reach * check["accept_prob"]
            reach *= 1 - check["accept_prob"]
        emitted += reach * target  # reach is 0 where a check accepted for sure (min(1, q/p) = 1)
    return emitted


@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("seed", range(2))
def test_one_node_emits_exactly_q(seed, width):
    rng = np.random.default_rng(seed)
    for q, p in distribution_pairs(rng, V=5):
        np.testing.assert_allclose(node_distribution(q, p, width), q, atol=1e-6)


def test_the_decision_is_r_below_min_one_q_over_p():
    q, p = np.array([0.5, 0.3, 0.2], np.float32), np.array([0.2, 0.6, 0.2], np.float32)
    a = float(q[1] / p[1])  # 0.5
    assert accept_at_node(q, p, [1, 0], [a - 1e-6, 0.9])[0] == 0
    i, _, checks = accept_at_node(q, p, [1, 0], [a, 0.9])  # rejected at r = a; token 0 then meets the residual
    assert i == 1 and checks[0]["accepted"] is False and checks[1]["q"] == pytest.approx(1.0)  # (q - p)+ = [0.3, 0, 0]
    i, target, _ = accept_at_node(q, p, [1, 1], [0.7, 0.0])  # a rejected token is rejected again, even at r = 0
    assert i is None and target.tolist() == pytest.approx([1, 0, 0])
    i, target, checks = accept_at_node(q, p, [], [])  # no children: the token comes from q itself
    assert i is None and target is q and checks == []


def test_an_all_zero_residual_is_never_nan():
    # q == p up to float32 rounding: a rejection by a hair must fall back to q, not divide 0 by 0.
    p = np.array([0.2, 0.5, 0.3], np.float32)
    q = p.copy()
    q[1] = np.nextafter(q[1], np.float32(0))  # q/p just below 1: r just below 1 rejects
    i, target, _ = accept_at_node(q, p, [1, 1], [ALMOST_ONE, ALMOST_ONE])
    assert i is None and np.isfinite(target).all() and target.sum() == pytest.approx(1)


def random_contexts(rng, V, depth, zeros=False):
    """q after every context of up to depth tokens, p after every context of fewer: {tuple: [V]}."""
    q, p = {}, {}
    for n in range(depth + 1):
        for context in itertools.product(range(V), repeat=n):
            q[context] = dirichlet(rng, V)
            if zeros and context == ():
                q[context][0] = 0
                q[context] /= q[context].sum()
            if n < depth:
                p[context] = dirichlet(rng, V, 0.5)
    return q, p


def trees(p_at, V, width, depth):
    """Every tree sample_tree can draw, with its probability: (probability, nodes). As there, each node has
    width children drawn from p after its text, and a repeat of an earlier sibling has none."""
    def grow(nodes, frontier, d, weight):
        if d > depth or not frontier:
            yield weight, nodes
            return
        for draws in itertools.product(range(V), repeat=width * len(frontier)):
            new, level, w = list(nodes), [], weight
            for j, token in enumerate(draws):
                parent = frontier[j // width]
                w *= p_at[text(nodes, parent)][token]
                new.append(Node(token, parent, d))
                level.append(len(new) - 1)
            if w > 0:
                fresh = [i for i in level if not any(new[j].parent == new[i].parent and new[j].token == new[i].token
                                                     for j in level if j < i)]
                yield from grow(new, fresh, d + 1, w)
    yield from grow([], [-1], 1, 1.0)


def text(nodes, i):
    """The tokens from the root down to node i."""
    tokens = []
    while i != -1:
        tokens.append(nodes[i].token)
        i = nodes[i].parent
    return tuple(reversed(tokens))


class Script:
    """uniforms(m) for walk_tree that makes the decisions of a script: choice j < m accepts child j after
    rejecting the ones before it, choice m rejects them all."""

    def __init__(self, choices):
        self.choices, self.used = list(choices), 0

    def __call__(self, m):
        if self.used == len(self.choices):
            raise LookupError("the walk goes deeper than the script")
        j = self.choices[self.used]
        self.used += 1
        return [ALMOST_ONE] * j + [0.0] * (j < m) + [ALMOST_ONE] * (m - j - 1)


def tree_round_distribution(q_at, p_at, V, width, depth, trees=trees, accept=accept_at_node):
    """P(the first depth + 1 tokens): every tree (trees: every tree sample_tree can draw, with its probability),
    every script of decisions of the real walk_tree with the check accept, the last token from the
    distribution walk_tree returns, and the oracle's own q after it (the next round's first token) where the
    round ended earlier."""
    dist = Counter()
    for weight, nodes in trees(p_at, V, width, depth):
        q = np.stack([q_at[()]] + [q_at[text(nodes, i)] for i in range(len(nodes))])
        p = {i: p_at[text(nodes, i)] for i in range(-1, len(nodes)) if any(n.parent == i for n in nodes)}
        for n_visits in range(1, depth + 1):  # a leaf is never visited: at most depth nodes have children
            for choices in itertools.product(range(width + 1), repeat=n_visits):
                script = Script(choices)
                try:
                    path, last, visits = walk_tree(nodes, q, p, script, accept)
                except LookupError:
                    continue
                decided = [next((j for j, c in enumerate(v["checks"]) if c["accepted"]), len(v["checks"]))
                           for v in visits]
                if script.used != len(choices) or decided != list(choices):
                    continue  # another script gives this walk (or it has probability 0)
                chance = weight * np.prod([c["accept_prob"] if c["accepted"] else 1 - c["accept_prob"]
                                           for v in visits for c in v["checks"]])
                for x in range(V):
                    extend(dist, text(nodes, path[-1]) if path else (), x, chance * last[x], q_at, depth + 1)
    return dist


def extend(dist, prefix, x, chance, q_at, n):
    """Add chance to every continuation of prefix + (x,) up to n tokens, each further token drawn from q."""
    seq = prefix + (x,)
    if chance == 0:
        return
    if len(seq) == n:
        dist[seq] += chance
        return
    for y in range(len(q_at[()])):
        extend(dist, seq, y, chance * q_at[seq][y], q_at, n)


def oracle_sequences(q_at, V, n):
    return {seq: float(np.prod([q_at[seq[:t]][x] for t, x in enumerate(seq)]))
            for seq in itertools.product(range(V), repeat=n)}


def depth_two_error(seed, width=2, zeros=False, trees=trees, accept=accept_at_node):
    """(the largest difference between a depth-2 tree round's probability of a sequence of 3 tokens and the
    oracle's, the round's total), on random models of 3 tokens (random_contexts(seed))."""
    q_at, p_at = random_contexts(np.random.default_rng(seed), 3, 2, zeros=zeros)
    got, expected = tree_round_distribution(q_at, p_at, 3, width, 2, trees, accept), oracle_sequences(q_at, 3, 3)
    return max(abs(got[seq] - expected[seq]) for seq in expected), sum(got.values())


@pytest.mark.parametrize("seed, zeros", [(0, False), (1, True)])
def test_a_depth_two_tree_emits_exactly_the_oracles_sequences(seed, zeros):
    error, total = depth_two_error(seed, zeros=zeros)
    assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)


def enumeration_errors(draws=iid_draws, trees=trees, accept=accept_at_node):
    """The negative controls' measures: (the largest error of one node's distribution, width 2, on random q and
    p of 5 tokens; depth_two_error's on seed 0)."""
    rng = np.random.default_rng(0)
    q, p = dirichlet(rng, 5), dirichlet(rng, 5)
    return np.abs(node_distribution(q, p, 2, draws, accept) - q).max(), depth_two_error(0, 2, False, trees, accept)[0]


@pytest.mark.parametrize("rule", BIASED)
def test_the_enumerations_catch_a_biased_rule(monkeypatch, rule):
    monkeypatch.setattr(ts, *BIASED[rule])
    node_error, tree_error = enumeration_errors()
    assert node_error > 0.01 and tree_error > 0.01


# ---------------------------------------------------------------------------
# Statistical: many draws of the real code, Pearson's chi-square at alpha = 0.001 (test_sps.py's)
# ---------------------------------------------------------------------------

N_NODE = 4000


def node_chi_square(width, draw_children=iid_children, accept=accept_at_node):
    """Pearson's test of N_NODE tokens emitted by one node, as walk_tree makes them (children from draw_children,
    checked by accept, uniforms from the generator), against the target q; q and p random on 6 tokens."""
    rng = np.random.default_rng(7)
    q, p = dirichlet(rng, 6), dirichlet(rng, 6)
    counts = Counter()
    for _ in range(N_NODE):
        children = draw_children(p, width, rng)
        i, target, _ = accept(q, p, children, rng.random(len(children)))
        counts[(children[i] if i is not None else sample(target, rng),)] += 1
    return chi_square_rejects(counts, {(x,): float(q[x]) for x in range(6)}, N_NODE)


@pytest.mark.parametrize("width", [2, 3])
def test_one_node_passes_the_chi_square_test(width):
    rejects, detail = node_chi_square(width)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"


@pytest.mark.parametrize("rule", BIASED)
def test_the_chi_square_test_catches_a_biased_rule(monkeypatch, rule):
    monkeypatch.setattr(ts, *BIASED[rule])
    assert node_chi_square(2)[0]


# ---------------------------------------------------------------------------
# The whole generator, with either rule: its distribution, temperature 0, the caches, the statistics
# ---------------------------------------------------------------------------

RULES = {"tree-sps": (tree_sample_generate, ts), "tree-sps-wor": (tree_sample_wor_generate, wor)}  # (generator, module)
both_rules = pytest.mark.parametrize("rule", RULES)
N_RUNS = 600  # whole generations on test_sps.py's tiny models (vocabulary of 6): 216 three-token outcomes


@both_rules
@pytest.mark.parametrize("shape, processor", [
    (dict(n_draft=2, width=2), Processor()),
    (dict(n_draft=2, width=3, max_nodes=5), make_processor("topk", 3, temperature=1.3)),
], ids=str)
@pytest.mark.slow
def test_the_generator_has_the_oracles_distribution(small, rule, shape, processor):
    assert_the_oracles_distribution(RULES[rule][0], small, N_RUNS, processor, **shape)


@both_rules
@pytest.mark.slow
def test_the_generators_chi_square_test_catches_a_biased_rule(small, monkeypatch, rule):
    generate, module = RULES[rule]
    monkeypatch.setattr(module, *BIASED["no residual after a rejection"])  # either module's own residual
    assert generator_chi_square(generate, small, N_RUNS, n_draft=2, width=2)[0]


@both_rules
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])  # unrelated, partly agreeing, identical
def test_temperature_zero_is_greedy(request, oracle, rule, kind, k):
    assert_temperature_zero_is_greedy(RULES[rule][0], request.getfixturevalue(kind), oracle, k, width=2)


@both_rules
def test_caches_and_statistics_after_every_round(related, oracle, rule):
    ids = prompt(oracle, 5, 4)
    stats = Stats(trace=[])
    out = list(RULES[rule][0](related, oracle, ids, 30, n_draft=3, width=2, rng=np.random.default_rng(3),
                              temperature=0.8, stats=stats))
    length = len(ids)
    for r in stats.trace:
        path, parents = r.details.path, r.details.parents
        length += len(r.new)
        assert r.cached["oracle"] == length - 1 and r.cached["draft"] <= length - 1  # all but the newest token
        assert r.new[:-1] == [r.drafted[i] for i in path] and r.accepted == len(path)
        assert [parents[i] for i in path] == ([-1] + path)[:len(path)]  # a root path
        assert len(r.drafted) <= 32 and all(len(v["checks"]) <= 2 for v in r.details.visits)
        assert r.oracle[0] == r.new[0] and isinstance(r.details, SampledTreeDetails)  # shown: test_shown_trees.py
    assert length == len(ids) + 30 and stats.n_generated == len(out) == 30
    assert stats.rounds == len(stats.trace) and stats.oracle_passes == stats.rounds + 1  # + the prompt's pass
    assert stats.drafted == sum(len(r.drafted) for r in stats.trace)
    assert stats.accepted == sum(r.accepted for r in stats.trace) > 0
    assert stats.draft_passes >= stats.rounds - 1
    if rule == "tree-sps-wor":  # drawn without replacement: no two siblings alike
        for r in stats.trace:
            assert max(Counter(zip(r.details.parents, r.drafted)).values()) == 1


@both_rules
def test_the_oracle_as_its_own_draft_keeps_whole_paths(oracle, rule):
    # p == q at every node: min(1, q/p) = 1 keeps the first child, so every round reaches a leaf.
    assert_self_drafting_keeps_every_draft(RULES[rule][0], oracle)


def test_a_repeated_child_gets_no_subtree(related, oracle):
    stats = Stats(trace=[])
    list(tree_sample_generate(related, oracle, [5, 6], 12, n_draft=4, width=3, rng=np.random.default_rng(1),
                              temperature=0.5, stats=stats))
    for r in stats.trace:
        parents = r.details.parents
        for i, parent in enumerate(parents):
            repeat = any(parents[j] == parent and r.drafted[j] == r.drafted[i] for j in range(i))
            assert not (repeat and i in parents)


@both_rules
def test_a_seed_reproduces_a_run(related, oracle, rule):
    assert_a_seed_reproduces_a_run(RULES[rule][0], related, oracle)


@both_rules
@pytest.mark.parametrize("n_new", [0, 1, 2, 5])
def test_exactly_n_new_tokens(related, oracle, rule, n_new):
    assert_exactly_n_new_tokens(RULES[rule][0], related, oracle, n_new, n_drafts=(1, 3))


@both_rules
def test_context_limit_and_bad_arguments(small, rule):
    assert_the_context_limit_and_bad_arguments(RULES[rule][0], small, (
        {"n_draft": 0}, {"width": 0}, {"max_nodes": 0}, {"temperature": -1},
        {"processor": Processor(), "temperature": 0.5}))
