"""Tree speculative sampling (beyond/tree_sampling.py) keeps the oracle's distribution: exactly, by enumerating
every outcome of the real acceptance code, and statistically; a biased rule fails the same tests; and at
temperature 0 it is greedy decoding."""

import itertools
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

import beyond.tree_sampling as ts
from beyond.tree_sampling import accept_at_node, reason_line, tree_sample_generate, walk_tree
from decoding import GenerationError, Stats
from processors import Processor, make_processor
from sps import sample
from speculative import greedy_generate
from test_greedy import assert_same_greedy, prompt
from test_sps import chi_square_rejects, exact_distribution, small  # noqa: F401 (small: the fixture of tiny models)
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

def node_distribution(q, p, width):
    """P(one node emits x): every draw of the width children from p, and every accept/reject decision of
    accept_at_node, whose records give each decision's probability min(1, q/p) against the target of the
    moment; after all rejections, the target it returns (the residual)."""
    emitted = np.zeros(len(q))
    for children in itertools.product(range(len(q)), repeat=width):
        weight = float(np.prod([p[c] for c in children]))
        if weight == 0:
            continue
        # r just below 1 walks the all-reject path; each record holds the chance to accept there.
        _, target, checks = accept_at_node(q, p, children, [ALMOST_ONE] * width)
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


def tree_round_distribution(q_at, p_at, V, width, depth):
    """P(the first depth + 1 tokens): every tree, every script of decisions of the real walk_tree, the last
    token from the distribution walk_tree returns, and the oracle's own q after it (the next round's first
    token) where the round ended earlier."""
    dist = Counter()
    for weight, nodes in trees(p_at, V, width, depth):
        q = np.stack([q_at[()]] + [q_at[text(nodes, i)] for i in range(len(nodes))])
        p = {i: p_at[text(nodes, i)] for i in range(-1, len(nodes)) if any(n.parent == i for n in nodes)}
        for n_visits in range(1, depth + 1):  # a leaf is never visited: at most depth nodes have children
            for choices in itertools.product(range(width + 1), repeat=n_visits):
                script = Script(choices)
                try:
                    path, last, visits = walk_tree(nodes, p, q, script)
                except LookupError:
                    continue
                decided = [next((j for j, c in enumerate(v["checks"]) if c["accepted"]), width) for v in visits]
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


@pytest.mark.parametrize("seed, zeros", [(0, False), (1, True)])
def test_a_depth_two_tree_emits_exactly_the_oracles_sequences(seed, zeros):
    V, width, depth = 3, 2, 2
    q_at, p_at = random_contexts(np.random.default_rng(seed), V, depth, zeros=zeros)
    got = tree_round_distribution(q_at, p_at, V, width, depth)
    expected = oracle_sequences(q_at, V, depth + 1)
    assert max(abs(got[seq] - expected[seq]) for seq in expected) < 1e-6
    assert sum(got.values()) == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("rule", BIASED)
def test_the_enumerations_catch_a_biased_rule(monkeypatch, rule):
    name, wrong = BIASED[rule]
    monkeypatch.setattr(ts, name, wrong)
    rng = np.random.default_rng(0)
    q, p = dirichlet(rng, 5), dirichlet(rng, 5)
    assert np.abs(node_distribution(q, p, 2) - q).max() > 0.01
    q_at, p_at = random_contexts(np.random.default_rng(0), 3, 2)
    got, expected = tree_round_distribution(q_at, p_at, 3, 2, 2), oracle_sequences(q_at, 3, 3)
    assert max(abs(got[seq] - expected[seq]) for seq in expected) > 0.01


# ---------------------------------------------------------------------------
# Statistical: many draws of the real code, Pearson's chi-square at alpha = 0.001 (test_sps.py's)
# ---------------------------------------------------------------------------

def node_counts(q, p, width, n, rng):
    """n tokens emitted by one node, as walk_tree makes them: children drawn from p, uniforms from rng."""
    counts = Counter()
    for _ in range(n):
        children = [sample(p, rng) for _ in range(width)]
        i, target, _ = accept_at_node(q, p, children, rng.random(width))
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


@pytest.mark.parametrize("rule", BIASED)
def test_the_chi_square_test_catches_a_biased_rule(monkeypatch, rule):
    monkeypatch.setattr(ts, *BIASED[rule])
    rng = np.random.default_rng(7)
    q, p = dirichlet(rng, 6), dirichlet(rng, 6)
    assert chi_square_rejects(node_counts(q, p, 2, N_NODE, rng), {(x,): float(q[x]) for x in range(6)}, N_NODE)[0]


N_RUNS = 600  # whole generations on test_sps.py's tiny models (vocabulary of 6): 216 three-token outcomes


def generated_counts(small, processor, seed, **shape):
    p_model, q_model = small
    rng, stats = np.random.default_rng(seed), Stats()
    counts = Counter(tuple(tree_sample_generate(p_model, q_model, [1, 4], 3, rng=rng, processor=processor,
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


def test_the_generators_chi_square_test_catches_a_biased_rule(small, monkeypatch):
    monkeypatch.setattr(ts, *BIASED["no residual after a rejection"])
    counts, dist, _ = generated_counts(small, Processor(), 1234, n_draft=2, width=2)
    assert chi_square_rejects(counts, dist, N_RUNS)[0]


# ---------------------------------------------------------------------------
# Temperature 0, the caches, the statistics, the trace
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])  # unrelated, partly agreeing, identical
def test_temperature_zero_is_greedy(request, oracle, kind, k):
    d = request.getfixturevalue(kind)
    for seed in (0, 1):
        ids = prompt(oracle, 5 + seed, seed)
        got = list(tree_sample_generate(d, oracle, ids, 20, n_draft=k, width=2, rng=np.random.default_rng(seed),
                                        temperature=0))
        assert_same_greedy(list(greedy_generate(oracle, ids, 20)), got, oracle, ids)


def test_caches_and_statistics_after_every_round(related, oracle):
    ids = prompt(oracle, 5, 4)
    stats = Stats(trace=[])
    out = list(tree_sample_generate(related, oracle, ids, 30, n_draft=3, width=2, rng=np.random.default_rng(3),
                                    temperature=0.8, stats=stats))
    length = len(ids)
    for r in stats.trace:
        path, parents = r.details.path, r.details.parents
        length += len(r.new)
        assert r.cached["oracle"] == length - 1 and r.cached["draft"] <= length - 1  # all but the newest token
        assert r.new[:-1] == [r.drafted[i] for i in path] and r.accepted == len(path)
        assert [parents[i] for i in path] == ([-1] + path)[:len(path)]  # a root path
        assert len(r.drafted) <= 32 and all(len(v["checks"]) <= 2 for v in r.details.visits)
        assert r.oracle[0] == r.new[0] and r.details.reason == reason_line(r.details)
    assert length == len(ids) + 30 and stats.n_generated == len(out) == 30
    assert stats.rounds == len(stats.trace) and stats.oracle_passes == stats.rounds + 1  # + the prompt's pass
    assert stats.drafted == sum(len(r.drafted) for r in stats.trace)
    assert stats.accepted == sum(r.accepted for r in stats.trace) > 0
    assert stats.draft_passes >= stats.rounds - 1


def test_the_oracle_as_its_own_draft_keeps_whole_paths(oracle):
    # p == q at every node: min(1, q/p) = 1 keeps the first child, so every round reaches a leaf.
    stats = Stats(trace=[])
    list(tree_sample_generate(oracle, oracle, [1, 2, 3], 24, n_draft=3, rng=np.random.default_rng(0), stats=stats))
    assert [r.accepted for r in stats.trace] == [3] * 6 and all(r.details.last["from"] == "bonus" for r in stats.trace)


def test_a_repeated_child_gets_no_subtree(related, oracle):
    stats = Stats(trace=[])
    list(tree_sample_generate(related, oracle, [5, 6], 12, n_draft=4, width=3, rng=np.random.default_rng(1),
                              temperature=0.5, stats=stats))
    for r in stats.trace:
        parents = r.details.parents
        for i, parent in enumerate(parents):
            repeat = any(parents[j] == parent and r.drafted[j] == r.drafted[i] for j in range(i))
            assert not (repeat and i in parents)


def test_the_trace_and_the_page_show_the_rounds(related, oracle):
    from app import display, report
    stats = Stats(trace=[])
    list(tree_sample_generate(related, oracle, [1, 2, 3], 12, n_draft=2, rng=np.random.default_rng(2), stats=stats))
    lines = display.format_trace(stats.trace, lambda t: f"<{t}>".encode(), 3)
    assert sum(line.startswith("round ") for line in lines) == len(stats.trace) and any("tree" in line for line in lines)
    page = report.rounds_section(SimpleNamespace(token_bytes=lambda t: f"<{t}>".encode(), method="tree-sample"),
                                 stats.trace)
    assert page.count("<details") == len(stats.trace)
    assert reason_line(stats.trace[0].details, show=lambda ts_: " ".join(f"'{t}'" for t in ts_)).startswith("depth 1: child 1 '")


def test_a_seed_reproduces_a_run(related, oracle):
    runs = [list(tree_sample_generate(related, oracle, [1, 2, 3], 15, rng=np.random.default_rng(7))) for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("n_new", [0, 1, 2, 5])
def test_exactly_n_new_tokens(related, oracle, n_new):
    for k in (1, 3):
        assert len(list(tree_sample_generate(related, oracle, [1, 2], n_new, n_draft=k, rng=np.random.default_rng(n_new)))) == n_new


def test_context_limit_and_bad_arguments(small):
    p_model, q_model = small
    assert len(list(tree_sample_generate(p_model, q_model, [1] * 10, 6, n_draft=4, rng=np.random.default_rng(0)))) == 6
    with pytest.raises(GenerationError, match="context window of 16"):
        list(tree_sample_generate(p_model, q_model, [1] * 10, 7))
    for bad in ({"n_draft": 0}, {"width": 0}, {"max_nodes": 0}, {"temperature": -1},
                {"processor": Processor(), "temperature": 0.5}):
        with pytest.raises(GenerationError):
            list(tree_sample_generate(p_model, q_model, [1], 3, **bad))
