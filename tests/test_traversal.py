"""Traversal verification (beyond/traversal.py) keeps the oracle's distribution: exactly, by enumerating every
outcome of the real walk on trees of depth up to 3 over vocabularies of 3 and 4 tokens, and statistically; on a
chain it is block verification, outcome for outcome; it keeps at least as many drafts in expectation as the
token-level rule (tree-sps's); three plausible wrong rules fail the same tests; at temperature 0 it is greedy
decoding."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

import beyond.traversal as tv
from beyond import tree_sampling as ts
from beyond.block_verification import verify_block
from beyond.traversal import TraversalDetails, after_rejection, traversal_generate, traverse
from stats import Stats
from processors import Processor, make_processor
from sps import residual, sample
from test_block_verification import random_contexts as chain_contexts, distributions
from test_greedy import prompt
from test_sps import (assert_a_seed_reproduces_a_run, assert_exactly_n_new_tokens,  # noqa: F401 (small: a fixture)
                      assert_the_context_limit_and_bad_arguments, assert_the_oracles_distribution,
                      assert_temperature_zero_is_greedy, chi_square_rejects, generator_chi_square, small)
from test_tree_sampling import ALMOST_ONE, extend, oracle_sequences, random_contexts, text, trees
from tree import Node

RIGHT = after_rejection  # the module's own, for the wrong rules that keep half of it

# Plausible wrong rules, patched into the module so the real walk uses them (the negative controls).
BIASED = {
    "each child's weight min(1, q/p), the path's weight dropped": ("child_weight",
                                                                   lambda w, target, p, x: min(1.0, float(target[x] / p[x]))),
    "the residual (q - p)+ without the weight": ("after_rejection",
                                                 lambda w, target, p: (RIGHT(w, target, p)[0], residual(target, p))),
    "the parent's weight kept after a rejection": ("after_rejection",
                                                   lambda w, target, p: (w, RIGHT(w, target, p)[1])),
}


# ---------------------------------------------------------------------------
# Enumeration: every tree, every outcome of the walk
# ---------------------------------------------------------------------------

def walks(nodes, q, p):
    """Every outcome of the real traverse on one tree: (chance, path, the last token's distribution). Each test
    r < w passes (r = 0) or fails (r just below 1), with chance w or 1 - w; a script of decisions the walk does
    not follow (a pass at w = 0, a fail at w = 1) is dropped: the other script covers it."""
    def run(script):
        answers = iter(script)

        def uniform():
            try:
                return 0.0 if next(answers) else ALMOST_ONE
            except StopIteration:
                raise LookupError from None
        try:
            path, last, tests = tv.traverse(nodes, q, p, uniform)
        except LookupError:  # the walk needs one more decision
            yield from run(script + [True])
            yield from run(script + [False])
            return
        if [t["passed"] for t in tests] == script:
            chance = math.prod(t["w"] if t["passed"] else 1 - t["w"] for t in tests)
            if chance > 0:
                yield chance, path, last
    yield from run([])


def shaped_trees(p_at, V, parents):
    """Every tree of the given shape (parents in level order), each node's token an i.i.d. draw from p after its
    parent's text (repeats keep their subtrees): (probability, nodes)."""
    for tokens in itertools.product(range(V), repeat=len(parents)):
        nodes, weight = [], 1.0
        for token, parent in zip(tokens, parents):
            weight *= float(p_at[text(nodes, parent)][token])
            nodes.append(Node(token, parent, 1 if parent == -1 else nodes[parent].depth + 1))
        if weight > 0:
            yield weight, nodes


def round_inputs(q_at, p_at, nodes):
    q = np.stack([q_at[()]] + [q_at[text(nodes, i)] for i in range(len(nodes))])
    p = {i: p_at[text(nodes, i)] for i in range(-1, len(nodes)) if any(n.parent == i for n in nodes)}
    return q, p


def round_distribution(q_at, p_at, V, depth, tree_list):
    """P(the first depth + 1 tokens) after one round over every tree of tree_list and every walk, the tokens after
    an earlier end drawn from q (the next rounds, by induction)."""
    dist = Counter()
    for weight, nodes in tree_list:
        q, p = round_inputs(q_at, p_at, nodes)
        for chance, path, last in walks(nodes, q, p):
            for x in range(V):
                extend(dist, text(nodes, path[-1]) if path else (), x, weight * chance * float(last[x]), q_at, depth + 1)
    return dist


def max_error(q_at, p_at, V, depth, tree_list):
    got, expected = round_distribution(q_at, p_at, V, depth, tree_list), oracle_sequences(q_at, V, depth + 1)
    assert set(got) <= set(expected)
    return max(abs(got[seq] - expected[seq]) for seq in expected), sum(got.values())


SHAPES = {  # parents lists in level order: depth up to 3
    "chain of 3": [-1, 0, 1],
    "two children, one path of 3": [-1, -1, 0, 2],
    "a path of 3 beside a pair": [-1, -1, 0, 0, 2],
}


@pytest.mark.parametrize("shape, V, seed, zeros", [(shape, V, seed, zeros) for shape in SHAPES
                                                    for V, seed, zeros in [(3, 0, False), (3, 1, True), (4, 2, False)]
                                                    if V == 3 or len(SHAPES[shape]) <= 4])  # 4^5 trees: too many
def test_a_tree_emits_exactly_the_oracles_sequences(shape, V, seed, zeros):
    parents = SHAPES[shape]
    depth = depth_of(parents)
    q_at, p_at = random_contexts(np.random.default_rng(seed), V, depth, zeros=zeros)
    error, total = max_error(q_at, p_at, V, depth, list(shaped_trees(p_at, V, parents)))
    assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)


def depth_of(parents):
    depth = {-1: 0}
    for i, parent in enumerate(parents):
        depth[i] = depth[parent] + 1
    return max(depth.values())


@pytest.mark.parametrize("seed, zeros", [(3, False), (4, True)])
def test_tree_sps_trees_emit_exactly_the_oracles_sequences(seed, zeros):
    # The trees the generator draws (tree_sampling.sample_tree: width 2, depth 2, a repeat without children).
    q_at, p_at = random_contexts(np.random.default_rng(seed), 3, 2, zeros=zeros)
    error, total = max_error(q_at, p_at, 3, 2, list(trees(p_at, 3, 2, 2)))
    assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("rule", BIASED)
def test_the_enumeration_catches_a_wrong_rule(monkeypatch, rule):
    monkeypatch.setattr(tv, *BIASED[rule])
    q_at, p_at = random_contexts(np.random.default_rng(0), 3, 3)
    errors = [max_error(q_at, p_at, 3, depth_of(SHAPES[s]), list(shaped_trees(p_at, 3, SHAPES[s])))[0] for s in SHAPES]
    assert max(errors) > 1e-3  # the right rule is within 1e-6


# ---------------------------------------------------------------------------
# On a chain: block verification, outcome for outcome
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["random", "zeros", "equal", "greedy"])
@pytest.mark.parametrize("n_draft", [1, 2, 3, 4])
def test_on_a_chain_it_is_block_verification(n_draft, kind):
    rng = np.random.default_rng(10 * n_draft + len(kind))
    q_at, p_at = chain_contexts(rng, 3, n_draft, kind)
    for xs in itertools.product(range(3), repeat=n_draft):
        q, p_list = distributions(q_at, p_at, xs)
        if any(p_list[i][x] == 0 for i, x in enumerate(xs)):
            continue  # a block the draft cannot draw
        nodes = [Node(x, i - 1, i + 1) for i, x in enumerate(xs)]
        for rs in [rng.random(n_draft) for _ in range(4)] + [np.zeros(n_draft), np.full(n_draft, ALMOST_ONE)]:
            tau, last, w, h = verify_block(q, p_list, list(xs), rs)
            reversed_rs = iter(rs[::-1])  # block verification looks from the end: prefix k's r first
            path, got_last, tests = traverse(nodes, q, dict(enumerate(p_list, -1)), lambda: next(reversed_rs))
            assert len(path) == tau and path == list(range(tau))
            np.testing.assert_allclose(got_last, last, atol=1e-6)
            assert [t["w"] for t in tests] == pytest.approx(h[::-1][:len(tests)], abs=1e-7)  # each test's w is h_i


def test_the_residual_weight_is_block_verifications_h():
    q, p = np.array([0.7, 0.3], np.float32), np.array([0.2, 0.8], np.float32)
    w, target = after_rejection(0.5, q, p)  # Z = max(0.35 - 0.2, 0) + max(0.15 - 0.8, 0) = 0.15
    assert w == pytest.approx(0.15 / (0.15 + 0.5)) and target.tolist() == pytest.approx([1.0, 0.0])
    assert after_rejection(1.0, q, q) == (1.0, q)  # no mass and w = 1: nothing to lose
    w, target = after_rejection(0.0, q, p)  # a path the oracle never takes: nothing below it is kept
    assert w == 0.0 and target is q


# ---------------------------------------------------------------------------
# Never fewer drafts kept than the token-level rule
# ---------------------------------------------------------------------------

def expected_kept(nodes, q, p):
    """(E[drafts kept] of traversal verification, of tree-sps's token-level rule), from the real code: traverse's
    outcomes, and tree_sampling.accept_at_node's chance to accept each child in turn, down the tree."""
    traversal = sum(chance * len(path) for chance, path, _ in walks(nodes, q, p))

    def token_level(at, target):
        children = [c for c, node in enumerate(nodes) if node.parent == at]
        if not children:
            return 0.0
        _, _, checks = ts.accept_at_node(target, p[at], [nodes[c].token for c in children], [ALMOST_ONE] * len(children))
        total, reach = 0.0, 1.0
        for c, check in zip(children, checks):
            total += reach * check["accept_prob"] * (1 + token_level(c, q[c + 1]))
            reach *= 1 - check["accept_prob"]
        return total
    return traversal, token_level(-1, q[0])


@pytest.mark.parametrize("shape", SHAPES)
def test_never_fewer_drafts_kept_than_token_level_verification(shape):
    gains = []
    for seed in range(3):
        q_at, p_at = random_contexts(np.random.default_rng(100 + seed), 3, 3, zeros=seed == 2)
        total_t = total_s = 0.0
        for weight, nodes in shaped_trees(p_at, 3, SHAPES[shape]):
            traversal, token = expected_kept(nodes, *round_inputs(q_at, p_at, nodes))
            total_t, total_s = total_t + weight * traversal, total_s + weight * token
        assert total_t >= total_s - 1e-6  # in expectation over the trees drawn (one tree's drafts can go either way,
        gains.append(total_t - total_s)  # as block verification's can on one drafted block)
    assert max(gains) > 1e-3  # and strictly more somewhere


# ---------------------------------------------------------------------------
# Statistical: the real walk with real uniforms; the generator on tiny models and on the learned pair
# ---------------------------------------------------------------------------

N_ROUNDS = 4000


def round_counts(q_at, p_at, V, parents, n, rng, depth):
    counts = Counter()
    for _ in range(n):
        nodes = []
        for parent in parents:
            nodes.append(Node(sample(p_at[text(nodes, parent)], rng), parent, 0))
        q, p = round_inputs(q_at, p_at, nodes)
        path, last, _ = traverse(nodes, q, p, rng.random)
        seq = list(text(nodes, path[-1]) if path else ()) + [sample(last, rng)]
        while len(seq) < depth + 1:
            seq.append(sample(q_at[tuple(seq)], rng))
        counts[tuple(seq)] += 1
    return counts


def round_chi_square(seed=7):
    parents = SHAPES["a path of 3 beside a pair"]
    q_at, p_at = random_contexts(np.random.default_rng(300), 3, 3)
    counts = round_counts(q_at, p_at, 3, parents, N_ROUNDS, np.random.default_rng(seed), 3)
    return chi_square_rejects(counts, oracle_sequences(q_at, 3, 4), N_ROUNDS)


def test_one_round_passes_the_chi_square_test():
    rejects, detail = round_chi_square()
    assert not rejects, f"chi2, critical, df, impossible = {detail}"


@pytest.mark.parametrize("rule", [list(BIASED)[0], list(BIASED)[2]])  # the second is caught by the enumeration only
def test_the_chi_square_test_catches_a_wrong_rule(monkeypatch, rule):
    monkeypatch.setattr(tv, *BIASED[rule])
    assert round_chi_square()[0]


N_RUNS = 600  # whole generations on test_sps.py's tiny models (vocabulary of 6): 216 three-token outcomes


@pytest.mark.parametrize("shape, processor", [
    (dict(n_draft=2, width=2), Processor()),
    (dict(n_draft=3, width=2, max_nodes=6), make_processor("topk", 3, temperature=1.3)),
], ids=str)
@pytest.mark.slow
def test_the_generator_has_the_oracles_distribution(small, shape, processor):
    assert_the_oracles_distribution(traversal_generate, small, N_RUNS, processor, **shape)


@pytest.mark.slow
def test_the_generators_chi_square_test_catches_a_wrong_rule(small, monkeypatch):
    monkeypatch.setattr(tv, *BIASED["each child's weight min(1, q/p), the path's weight dropped"])
    assert generator_chi_square(traversal_generate, small, N_RUNS, n_draft=2, width=2)[0]


LEARNED_TOP_K, LEARNED_RUNS = 4, 1500


def learned_distribution(oracle, ids, processor, n_new=3):
    """{continuation: probability} of the learned oracle under a top-k processor, by enumeration of its support."""
    dist = {(): 1.0}
    for _ in range(n_new):
        grown = {}
        for seq, chance in dist.items():
            q = processor(oracle.forward(list(ids) + list(seq))[-1])
            for x in np.flatnonzero(q):
                grown[seq + (int(x),)] = chance * float(q[x])
        dist = grown
    return dist


def learned_chi_square(demo_dirs, seed=11):
    from workbench.speed.accelerate import load_fast
    from weights.tokenizer import encode, load_tokenizer
    draft, oracle = (load_fast(demo_dirs[k]) for k in ("draft", "oracle"))
    ids = encode(load_tokenizer(demo_dirs["oracle"]), "The function returns")
    processor = make_processor("topk", LEARNED_TOP_K)
    rng, stats = np.random.default_rng(seed), Stats()
    counts = Counter(tuple(traversal_generate(draft, oracle, ids, 3, n_draft=2, width=2, rng=rng, processor=processor,
                                              stats=stats)) for _ in range(LEARNED_RUNS))
    return (*chi_square_rejects(counts, learned_distribution(oracle, ids, processor), LEARNED_RUNS), stats)


@pytest.mark.slow
def test_the_learned_pair_has_the_oracles_distribution(demo_dirs):
    rejects, detail, stats = learned_chi_square(demo_dirs)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted


@pytest.mark.slow
def test_the_learned_pairs_chi_square_test_catches_a_wrong_rule(demo_dirs, monkeypatch):
    monkeypatch.setattr(tv, *BIASED["each child's weight min(1, q/p), the path's weight dropped"])
    assert learned_chi_square(demo_dirs)[0]


# ---------------------------------------------------------------------------
# The generator: temperature 0, the caches, the statistics, the record
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n_draft, width", [(1, 1), (3, 2), (4, 3)])
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])  # unrelated, partly agreeing, identical
def test_temperature_zero_is_greedy(request, oracle, kind, n_draft, width):
    assert_temperature_zero_is_greedy(traversal_generate, request.getfixturevalue(kind), oracle, n_draft, width=width)


def test_temperature_zero_is_greedy_on_the_learned_pair(demo_dirs):
    from speculative import greedy_generate
    from workbench.speed.accelerate import load_fast
    from test_greedy import assert_same_greedy
    draft, oracle = (load_fast(demo_dirs[k]) for k in ("draft", "oracle"))
    ids = [464, 2163, 5860, 257]
    want = list(greedy_generate(oracle, ids, 24))
    for n_draft, width in [(1, 1), (2, 2), (4, 2), (5, 3)]:
        got = list(traversal_generate(draft, oracle, ids, 24, n_draft=n_draft, width=width,
                                      rng=np.random.default_rng(n_draft), temperature=0))
        assert_same_greedy(want, got, oracle, ids)


def test_caches_statistics_and_record_after_every_round(related, oracle):
    ids = prompt(oracle, 5, 4)
    stats = Stats(trace=[])
    out = list(traversal_generate(related, oracle, ids, 30, n_draft=3, width=2, rng=np.random.default_rng(3),
                                  temperature=0.8, stats=stats))
    length = len(ids)
    for r in stats.trace:
        path, parents, d = r.details.path, r.details.parents, r.details
        length += len(r.new)
        assert isinstance(d, TraversalDetails)
        assert r.cached["oracle"] == length - 1 and r.cached["draft"] <= length - 1  # all but the newest token
        assert r.new[:-1] == [r.drafted[i] for i in path] and r.accepted == len(path)
        assert [parents[i] for i in path] == ([-1] + path)[:len(path)]  # a root path
        if path:  # the walk ends at the kept node's own test, which passed; every test before it failed
            assert d.tests[-1]["node"] == path[-1] and d.tests[-1]["passed"]
        assert not any(t["passed"] for t in d.tests[:-1] if path)
    assert length == len(ids) + 30 and stats.n_generated == len(out) == 30
    assert stats.rounds == len(stats.trace) and stats.oracle_passes == stats.rounds + 1  # + the prompt's pass
    assert stats.accepted == sum(r.accepted for r in stats.trace) > 0


def test_a_subtree_below_a_rejected_parent_can_be_kept():
    """What the token-level rule cannot do: the first child's token is one the oracle likes less than the draft
    did (q/p = 0.5), its child one it likes more (q/p = 2): the path keeps with chance 1, where tree-sps's walk
    keeps the first child with chance 0.5 only."""
    f32 = lambda *x: np.array(x, np.float32)  # noqa: E731
    nodes = [Node(0, -1, 1), Node(1, 0, 2)]
    q = np.stack([f32(0.25, 0.75), f32(0.2, 0.8), f32(0.5, 0.5)])
    p = {-1: f32(0.5, 0.5), 0: f32(0.6, 0.4)}
    path, last, tests = traverse(nodes, q, p, lambda: ALMOST_ONE)
    assert path == [0, 1] and tests == [{"node": 1, "token": 1, "w": 1.0, "r": float(ALMOST_ONE), "passed": True,
                                         "deleted": 0}]
    assert ts.accept_at_node(q[0], p[-1], [0], [0.6])[0] is None  # the token-level rule: r = 0.6 >= 0.5 rejects


def test_a_seed_reproduces_a_run(related, oracle):
    assert_a_seed_reproduces_a_run(traversal_generate, related, oracle)


@pytest.mark.parametrize("n_new", [0, 1, 2, 5])
def test_exactly_n_new_tokens(related, oracle, n_new):
    assert_exactly_n_new_tokens(traversal_generate, related, oracle, n_new, n_drafts=(1, 3))


def test_context_limit_and_bad_arguments(small):
    assert_the_context_limit_and_bad_arguments(traversal_generate, small, (
        {"n_draft": 0}, {"width": 0}, {"max_nodes": 0}, {"temperature": -1},
        {"processor": Processor(), "temperature": 0.5}))

