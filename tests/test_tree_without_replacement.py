"""Tree speculative sampling without replacement (beyond/tree_without_replacement.py) keeps the oracle's
distribution: exactly, by enumerating every outcome of the real acceptance code, and statistically; wrong rules
(tree-sps's rule on distinct children, no residual, i.i.d. children under this rule) fail the same tests; and
at temperature 0 it is greedy decoding. The same tests as tree-sps's (tests/test_tree_sampling.py)."""

import itertools
from collections import Counter

import numpy as np
import pytest

import beyond.tree_without_replacement as wor
from beyond.tree_sampling import reason_line
from beyond.tree_without_replacement import accept_at_node, sample_children, tree_sample_wor_generate, walk_tree, without
from decoding import GenerationError, Stats
from processors import Processor, make_processor
from sps import sample
from speculative import greedy_generate
from test_greedy import assert_same_greedy, prompt
from test_sps import chi_square_rejects, exact_distribution, small  # noqa: F401 (small: the fixture of tiny models)
from test_tree_sampling import (ALMOST_ONE, Script, dirichlet, distribution_pairs, extend, oracle_sequences,
                                random_contexts, text)
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

def node_distribution(q, p, width):
    """P(one node emits x): every ordered draw of the children, every accept/reject decision of accept_at_node
    (its records give each decision's probability against the target of the moment), and after all rejections
    the target it returns."""
    emitted = np.zeros(len(q))
    for weight, children in draws(p, width):
        _, target, checks = accept_at_node(q, p, children, [ALMOST_ONE] * len(children))  # the all-reject walk
        reach = weight
        for check in checks:
            emitted[check["token"]] += reach * check["accept_prob"]
            reach *= 1 - check["accept_prob"]
        emitted += reach * target
    return emitted


@pytest.mark.parametrize("width", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(2))
def test_one_node_emits_exactly_q(seed, width):
    rng = np.random.default_rng(seed)
    for q, p in distribution_pairs(rng, V=5):
        np.testing.assert_allclose(node_distribution(q, p, width), q, atol=1e-6)


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


def tree_round_distribution(q_at, p_at, V, width, depth):
    """P(the first depth + 1 tokens): every tree, every script of decisions of the real walk_tree, the last
    token from the distribution walk_tree returns, then the oracle's own q (the next rounds)."""
    dist = Counter()
    for weight, nodes in trees(p_at, V, width, depth):
        q = np.stack([q_at[()]] + [q_at[text(nodes, i)] for i in range(len(nodes))])
        p = {i: p_at[text(nodes, i)] for i in range(-1, len(nodes)) if any(n.parent == i for n in nodes)}
        for n_visits in range(1, depth + 1):
            for choices in itertools.product(range(width + 1), repeat=n_visits):
                script = Script(choices)
                try:
                    path, last, visits = walk_tree(nodes, p, q, script)
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


@pytest.mark.parametrize("seed, zeros, width", [(0, False, 2), (1, True, 2), (2, False, 3)])
def test_a_depth_two_tree_emits_exactly_the_oracles_sequences(seed, zeros, width):
    V, depth = 3, 2
    q_at, p_at = random_contexts(np.random.default_rng(seed), V, depth, zeros=zeros)
    got = tree_round_distribution(q_at, p_at, V, width, depth)
    expected = oracle_sequences(q_at, V, depth + 1)
    assert max(abs(got[seq] - expected[seq]) for seq in expected) < 1e-6
    assert sum(got.values()) == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("rule", BIASED)
def test_the_enumerations_catch_a_wrong_rule(monkeypatch, rule):
    monkeypatch.setattr(wor, *BIASED[rule])
    rng = np.random.default_rng(0)
    q, p = dirichlet(rng, 5), dirichlet(rng, 5)
    assert np.abs(node_distribution(q, p, 2) - q).max() > 0.01
    q_at, p_at = random_contexts(np.random.default_rng(0), 3, 2)
    got, expected = tree_round_distribution(q_at, p_at, 3, 2, 2), oracle_sequences(q_at, 3, 3)
    assert max(abs(got[seq] - expected[seq]) for seq in expected) > 1e-3  # the right rule is within 1e-6


# ---------------------------------------------------------------------------
# Statistical: many draws of the real code, Pearson's chi-square at alpha = 0.001 (test_sps.py's)
# ---------------------------------------------------------------------------

def node_counts(q, p, width, n, rng):
    """n tokens emitted by one node, as walk_tree makes them: children from sample_children, uniforms from rng."""
    counts = Counter()
    for _ in range(n):
        children = wor.sample_children(p, width, rng)  # looked up at the call: a negative control patches it
        i, target, _ = accept_at_node(q, p, children, rng.random(len(children)))
        counts[(children[i] if i is not None else sample(target, rng),)] += 1
    return counts


N_NODE = 4000


@pytest.mark.parametrize("width", [2, 3])
def test_one_node_passes_the_chi_square_test(width):
    rng = np.random.default_rng(7)
    q, p = dirichlet(rng, 6), dirichlet(rng, 6)
    rejects, detail = chi_square_rejects(node_counts(q, p, width, N_NODE, rng), {(x,): float(q[x]) for x in range(6)},
                                         N_NODE)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"


IID = ("sample_children", lambda p, width, rng: [sample(p, rng) for _ in range(width)])  # i.i.d. under this rule


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # i.i.d. repeats meet p(x) = 0: the bias itself
@pytest.mark.parametrize("patch", list(BIASED.values()) + [IID], ids=list(BIASED) + ["i.i.d. children"])
def test_the_chi_square_test_catches_a_wrong_rule(monkeypatch, patch):
    monkeypatch.setattr(wor, *patch)
    rng = np.random.default_rng(7)
    q, p = dirichlet(rng, 6), dirichlet(rng, 6)
    assert chi_square_rejects(node_counts(q, p, 2, N_NODE, rng), {(x,): float(q[x]) for x in range(6)}, N_NODE)[0]


N_RUNS = 600  # whole generations on test_sps.py's tiny models (vocabulary of 6): 216 three-token outcomes


def generated_counts(small, processor, seed, **shape):
    p_model, q_model = small
    rng, stats = np.random.default_rng(seed), Stats()
    counts = Counter(tuple(tree_sample_wor_generate(p_model, q_model, [1, 4], 3, rng=rng, processor=processor,
                                                    stats=stats, **shape)) for _ in range(N_RUNS))
    return counts, exact_distribution(q_model, [1, 4], 3, processor), stats


@pytest.mark.parametrize("shape, processor", [
    (dict(n_draft=2, width=2), Processor()),
    (dict(n_draft=2, width=3, max_nodes=5), make_processor("topk", 3, temperature=1.3)),
], ids=str)
def test_the_generator_has_the_oracles_distribution(small, shape, processor):
    counts, dist, stats = generated_counts(small, processor, 1234, **shape)
    rejects, detail = chi_square_rejects(counts, dist, N_RUNS)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted and stats.n_generated == 3 * N_RUNS


def test_the_generators_chi_square_test_catches_a_wrong_rule(small, monkeypatch):
    monkeypatch.setattr(wor, *BIASED["no residual after a rejection"])
    counts, dist, _ = generated_counts(small, Processor(), 1234, n_draft=2, width=2)
    assert chi_square_rejects(counts, dist, N_RUNS)[0]


# ---------------------------------------------------------------------------
# Temperature 0, the caches, the statistics, the trace
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n_draft", [1, 3])
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])  # unrelated, partly agreeing, identical
def test_temperature_zero_is_greedy(request, oracle, kind, n_draft):
    d = request.getfixturevalue(kind)
    for seed in (0, 1):
        ids = prompt(oracle, 5 + seed, seed)
        got = list(tree_sample_wor_generate(d, oracle, ids, 20, n_draft=n_draft, width=2,
                                            rng=np.random.default_rng(seed), temperature=0))
        assert_same_greedy(list(greedy_generate(oracle, ids, 20)), got, oracle, ids)


def test_caches_and_statistics_after_every_round(related, oracle):
    ids = prompt(oracle, 5, 4)
    stats = Stats(trace=[])
    out = list(tree_sample_wor_generate(related, oracle, ids, 30, n_draft=3, width=2, rng=np.random.default_rng(3),
                                        temperature=0.8, stats=stats))
    length = len(ids)
    for r in stats.trace:
        path, parents = r.details.path, r.details.parents
        length += len(r.new)
        assert r.cached["oracle"] == length - 1 and r.cached["draft"] <= length - 1  # all but the newest token
        assert r.new[:-1] == [r.drafted[i] for i in path] and r.accepted == len(path)
        assert [parents[i] for i in path] == ([-1] + path)[:len(path)]  # a root path
        siblings = Counter((parent, token) for parent, token in zip(parents, r.drafted))
        assert max(siblings.values()) == 1  # no two siblings alike
        assert len(r.drafted) <= 32 and all(len(v["checks"]) <= 2 for v in r.details.visits)
        assert r.oracle[0] == r.new[0] and r.details.reason == reason_line(r.details)
    assert length == len(ids) + 30 and stats.n_generated == len(out) == 30
    assert stats.drafted == sum(len(r.drafted) for r in stats.trace)
    assert stats.accepted == sum(r.accepted for r in stats.trace) > 0


def test_the_oracle_as_its_own_draft_keeps_whole_paths(oracle):
    # p == q at every node: min(1, q/p) = 1 keeps the first child, so every round reaches a leaf.
    stats = Stats(trace=[])
    list(tree_sample_wor_generate(oracle, oracle, [1, 2, 3], 24, n_draft=3, rng=np.random.default_rng(0), stats=stats))
    assert [r.accepted for r in stats.trace] == [3] * 6 and all(r.details.last["from"] == "bonus" for r in stats.trace)


def test_the_method_is_registered(related, oracle):
    from types import SimpleNamespace
    from app import methods
    m = methods.get("tree-sps-wor")
    assert m.samples and m.verifies and m.needs_cache and m.n_draft == 4
    call = methods.Call(draft=related, oracle=oracle, ids=[1, 2, 3], n_new=10, n_draft=3, stats=Stats(),
                        settings=SimpleNamespace(processor=Processor(temperature=0)), rng=np.random.default_rng(0))
    assert list(m.generate(call)) == list(greedy_generate(oracle, [1, 2, 3], 10))


def test_a_seed_reproduces_a_run(related, oracle):
    runs = [list(tree_sample_wor_generate(related, oracle, [1, 2, 3], 15, rng=np.random.default_rng(7)))
            for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("n_new", [0, 1, 2, 5])
def test_exactly_n_new_tokens(related, oracle, n_new):
    for n_draft in (1, 3):
        assert len(list(tree_sample_wor_generate(related, oracle, [1, 2], n_new, n_draft=n_draft,
                                                 rng=np.random.default_rng(n_new)))) == n_new


def test_context_limit_and_bad_arguments(small):
    p_model, q_model = small
    assert len(list(tree_sample_wor_generate(p_model, q_model, [1] * 10, 6, n_draft=4,
                                             rng=np.random.default_rng(0)))) == 6
    with pytest.raises(GenerationError, match="context window of 16"):
        list(tree_sample_wor_generate(p_model, q_model, [1] * 10, 7))
    for bad in ({"n_draft": 0}, {"width": 0}, {"max_nodes": 0}, {"temperature": -1},
                {"processor": Processor(), "temperature": 0.5}):
        with pytest.raises(GenerationError):
            list(tree_sample_wor_generate(p_model, q_model, [1], 3, **bad))
