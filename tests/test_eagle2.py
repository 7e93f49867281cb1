"""EAGLE-2 (beyond/eagle2.py): the dynamic tree is the most confident nodes of what the head drafts, closed under
ancestors; greedy verification gives greedy decoding's text (random heads on tiny models, the shipped head on the
learned pair); sampled verification with the draft's chance 1 gives exactly the oracle's distribution (every
outcome of a round enumerated, and chi-square), and a rule that forgets the rejected children fails both."""

import itertools
from collections import Counter, defaultdict

import numpy as np
import pytest

import beyond.eagle2 as e2
from beyond.eagle import EagleHead
from beyond.eagle2 import (Eagle2Details, accept_top_k, draft_dynamic_tree, eagle2_generate, eagle2_sample, predicted_tokens,
                           rerank)
from decoding import GenerationError
from stats import Stats
from kvcache import KVCache
from processors import Processor, make_processor
from speculative import greedy_generate
from test_eagle import random_head
from test_greedy import SEEDS, assert_same_greedy, prompt
from test_sps import V, chi_square_rejects, exact_distribution, small  # noqa: F401 (small: the fixture of tiny models)
from test_tree_sampling import ALMOST_ONE, tree_round_distribution, oracle_sequences

SETTINGS = [(1, 1, 1), (2, 2, 3), (3, 2, 5), (4, 3, 8), (5, 4, 16)]  # (n_draft, top_k, total_tokens)


# ---------------------------------------------------------------------------
# The tree
# ---------------------------------------------------------------------------

def test_the_rerank_keeps_the_best_nodes_closed_under_ancestors():
    from tree import Node
    # Values as logs: a child's value is at most its parent's. Ties go to the shallower node.
    nodes = [Node(1, -1, 1), Node(2, -1, 1), Node(3, 0, 2), Node(4, 0, 2), Node(5, 1, 2), Node(6, 2, 3)]
    scores = [-0.1, -1.0, -0.1, -2.0, -1.5, -0.5]
    assert rerank(nodes, scores, 3) == [0, 2, 5]  # node 2 ties node 0 and follows it; node 1 is worse than 5
    assert rerank(nodes, scores, 4) == [0, 1, 2, 5]
    for n in range(1, 7):
        kept = set(rerank(nodes, scores, n))
        assert all(nodes[i].parent in kept | {-1} for i in kept)


@pytest.mark.parametrize("n_draft, top_k, total_tokens", SETTINGS)
def test_the_tree_is_the_best_of_what_the_head_drafts(oracle, n_draft, top_k, total_tokens):
    """Brute force: every node the head's top-k expansion drafts, with its path's product of probabilities; the tree
    is the total_tokens best (closed under ancestors), and its confidences are those products."""
    head, ids = random_head(oracle, seed=3, scale=0.5), prompt(oracle, 6, 1)
    features = oracle.hidden_states(ids[:-1])
    stats = Stats()
    nodes, confidences, n_candidates = draft_dynamic_tree(head, KVCache(), ids, features, n_draft, top_k,
                                                          total_tokens, stats)
    assert len(nodes) == min(total_tokens, n_candidates) and stats.draft_passes == 1
    assert all(node.parent < i and (node.parent == -1 or nodes[node.parent].depth == node.depth - 1)
               for i, node in enumerate(nodes))  # level order, a tree
    for i, node in enumerate(nodes):  # a confidence is the product of the head's probabilities down the path
        chain, at = 1.0, i
        while at != -1:
            chain, at = chain * nodes[at].p, nodes[at].parent
        assert confidences[i] == pytest.approx(chain, rel=1e-4)
    assert sorted(confidences, reverse=True) == pytest.approx(confidences_by_brute_force(head, oracle, ids, n_draft, top_k)[:len(nodes)], rel=1e-4)
    assert predicted_tokens(confidences) == pytest.approx(1 + sum(confidences))


def confidences_by_brute_force(head, oracle, ids, n_draft, top_k):
    """Every node's confidence when the head expands, level by level, the top_k most confident nodes of the level
    (each run of the head on a path from scratch: no cache, no tree mask), best first."""
    from gpt2 import softmax
    features = oracle.hidden_states(ids[:-1])

    def guesses(path):  # the head's guessed features along a path of drafts, run as a line
        cache = KVCache()
        out = head.forward(ids[1:], features, cache)[-1:]
        for token in path:
            out = head.forward([token], out, cache)
        return out[0]

    level, everything = [((), 1.0)], []
    for depth in range(1, n_draft + 1):
        grown = []
        for path, conf in level:
            p = softmax(oracle.logits(guesses(path)[None])[0])
            for t in np.argsort(-p)[:top_k]:
                grown.append((path + (int(t),), conf * float(p[t])))
        everything += [c for _, c in grown]
        level = sorted(grown, key=lambda x: -x[1])[:top_k]
    return sorted(everything, reverse=True)


# ---------------------------------------------------------------------------
# Greedy: exactly greedy decoding's text
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_draft, top_k, total_tokens", SETTINGS)
def test_greedy_text_is_greedy_decodings(oracle, seed, n_draft, top_k, total_tokens):
    ids = prompt(oracle, 8, seed)
    stats = Stats(trace=[])
    got = list(eagle2_generate(random_head(oracle, seed), oracle, ids, 20, n_draft=n_draft, top_k=top_k,
                               total_tokens=total_tokens, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 20)), got, oracle, ids)
    assert len(stats.from_draft) == 20
    for r in stats.trace[1:]:  # every cache holds all but the newest token after its round
        assert r.cached["oracle"] == r.context_length + len(r.new) - 1
        assert r.cached["draft"] <= r.context_length - 1 and len(r.drafted) <= total_tokens


def test_the_equality_test_catches_a_walk_that_keeps_a_wrong_branch(oracle, monkeypatch):
    """Negative control: keeping the first node whatever the oracle chose changes the text."""
    monkeypatch.setattr(e2, "accepted_path", lambda nodes, choice: [0] if nodes else [])
    ids = prompt(oracle, 8, 0)
    got = list(eagle2_generate(random_head(oracle), oracle, ids, 20, n_draft=3, top_k=2, total_tokens=4))
    assert got != list(greedy_generate(oracle, ids, 20))


@pytest.mark.parametrize("n_new", range(0, 5))
def test_exactly_n_new_tokens(oracle, n_new):
    ids = prompt(oracle, 5, 0)
    assert list(eagle2_generate(random_head(oracle), oracle, ids, n_new)) == list(greedy_generate(oracle, ids, n_new))


def test_bad_settings_are_refused(oracle, draft):
    for bad in ({"n_draft": 0}, {"top_k": 0}, {"total_tokens": 0}):
        with pytest.raises(GenerationError):
            list(eagle2_generate(random_head(oracle), oracle, [1, 2], 4, **bad))
    with pytest.raises(GenerationError):
        list(eagle2_generate(random_head(oracle), draft, [1, 2], 4))


@pytest.fixture(scope="module")
def learned(demo_dirs):
    from gpt2 import GPT2, nest
    from weights import heads
    from weights.tokenizer import load_tokenizer
    oracle = GPT2.from_pretrained(demo_dirs["oracle"])
    config, tensors = heads.load(demo_dirs["oracle"], "eagle", oracle)
    return oracle, EagleHead(nest(tensors), config, oracle), load_tokenizer(demo_dirs["oracle"])


@pytest.mark.parametrize("n_draft, top_k, total_tokens", SETTINGS)
def test_greedy_text_on_the_learned_pair(learned, n_draft, top_k, total_tokens):
    from weights.tokenizer import encode
    oracle, head, tokenizer = learned
    stats = Stats()
    for text in ("The function returns", "import os\n"):
        ids = encode(tokenizer, text)
        got = list(eagle2_generate(head, oracle, ids, 32, n_draft=n_draft, top_k=top_k, total_tokens=total_tokens,
                                   stats=stats))
        assert_same_greedy(list(greedy_generate(oracle, ids, 32)), got, oracle, ids)
    assert stats.accepted > 0


# ---------------------------------------------------------------------------
# Sampling: exactly the oracle's distribution
# ---------------------------------------------------------------------------

def test_the_check_keeps_a_child_with_its_chance_under_q():
    q = np.array([0.5, 0.3, 0.2], np.float32)
    i, target, checks = accept_top_k(q, None, [0, 1], [ALMOST_ONE, 0.5])
    # 0 rejected (r just below 1 >= 0.5); then q without 0 = [0, 0.6, 0.4]: 1 kept at r = 0.5 < 0.6
    assert i == 1 and checks[1]["q"] == pytest.approx(0.6) and checks[1]["p"] == 1.0
    i, target, _ = accept_top_k(q, None, [0, 1], [ALMOST_ONE, ALMOST_ONE])
    assert i is None and target.tolist() == pytest.approx([0, 0, 1])


def round_error(q_model, head, ids, processor, n_draft, top_k, total_tokens, accept=accept_top_k):
    """The largest difference between one EAGLE-2 round's probability of the next n_draft + 1 tokens and the oracle's,
    on test_sps.py's tiny oracle (a vocabulary of 6): the round's tree (the real draft_dynamic_tree), every script of
    decisions of the real walk with the check accept, then the oracle's q (the next rounds, by induction)."""
    features = q_model.hidden_states(ids[:-1])
    nodes, _, _ = draft_dynamic_tree(head, KVCache(), ids, features, n_draft, top_k, total_tokens, Stats())
    q_at = {}
    for n in range(n_draft + 1):
        for context in itertools.product(range(V), repeat=n):
            q_at[context] = processor(q_model.forward(list(ids) + list(context))[-1])
    depth = max(node.depth for node in nodes)
    width = max(sum(1 for n in nodes if n.parent == i) for i in range(-1, len(nodes)))
    got = tree_round_distribution(q_at, defaultdict(lambda: None), V, width, depth,
                                  trees=lambda *_: [(1.0, nodes)], accept=accept)
    want = oracle_sequences(q_at, V, depth + 1)
    return max(abs(got[seq] - want[seq]) for seq in want), sum(got.values())


@pytest.mark.parametrize("processor", [Processor(), make_processor("multinomial", temperature=0.6),
                                       make_processor("topk", 3)], ids=str)
@pytest.mark.parametrize("n_draft, top_k, total_tokens", [(2, 2, 4), (3, 2, 5), (2, 3, 6)])
def test_a_round_emits_the_oracles_distribution_exactly(small, processor, n_draft, top_k, total_tokens):
    _, q_model = small
    error, total = round_error(q_model, random_head(q_model, seed=5, scale=0.5), [1, 4], processor, n_draft, top_k,
                               total_tokens)
    assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)


def forgetful(q, p, children, uniforms):
    """Wrong: each child kept with chance q(c), the rejected ones left in the target."""
    checks = [{"token": int(x), "p": 1.0, "q": float(q[x]), "accept_prob": float(q[x]), "r": float(r),
               "accepted": bool(r < q[x])} for x, r in zip(children, uniforms)]
    for i, c in enumerate(checks):
        if c["accepted"]:
            return i, q, checks[:i + 1]
    return None, q, checks


def test_the_enumeration_catches_a_rule_that_forgets_the_rejected_children(small):
    _, q_model = small
    error, _ = round_error(q_model, random_head(q_model, seed=5, scale=0.5), [1, 4], Processor(), 2, 2, 4,
                           accept=forgetful)
    assert error > 1e-2


N_RUNS = 1500


def generator_counts(q_model, processor, rng, n_runs=N_RUNS, **settings):
    head = random_head(q_model, seed=5, scale=0.5)
    stats = Stats()
    counts = Counter(tuple(eagle2_sample(head, q_model, [1, 4], 3, rng=rng, processor=processor, stats=stats,
                                         **settings)) for _ in range(n_runs))
    return counts, stats


@pytest.mark.parametrize("processor", [Processor(), make_processor("topk", 3, temperature=1.3)], ids=str)
@pytest.mark.slow
def test_sampled_text_has_the_oracles_distribution(small, processor):
    _, q_model = small
    counts, stats = generator_counts(q_model, processor, np.random.default_rng(77), n_draft=2, top_k=2, total_tokens=4)
    rejects, detail = chi_square_rejects(counts, exact_distribution(q_model, [1, 4], 3, processor), N_RUNS)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted


@pytest.mark.slow
def test_the_chi_square_test_catches_a_rule_that_forgets_the_rejected_children(small, monkeypatch):
    _, q_model = small
    monkeypatch.setattr(e2, "accept_top_k", forgetful)
    counts, _ = generator_counts(q_model, Processor(), np.random.default_rng(77), n_draft=2, top_k=2, total_tokens=4)
    assert chi_square_rejects(counts, exact_distribution(q_model, [1, 4], 3), N_RUNS)[0]


@pytest.mark.parametrize("n_draft, top_k, total_tokens", SETTINGS)
def test_temperature_zero_is_greedy(oracle, n_draft, top_k, total_tokens):
    ids = prompt(oracle, 6, 1)
    got = list(eagle2_sample(random_head(oracle, seed=3), oracle, ids, 16, n_draft=n_draft, top_k=top_k,
                             total_tokens=total_tokens, rng=np.random.default_rng(0), temperature=0))
    assert_same_greedy(list(greedy_generate(oracle, ids, 16)), got, oracle, ids)


def test_the_sampled_rounds_record(oracle):
    stats = Stats(trace=[])
    list(eagle2_sample(random_head(oracle, seed=3), oracle, prompt(oracle, 6, 1), 20, n_draft=3, top_k=2,
                       total_tokens=5, rng=np.random.default_rng(0), temperature=0.8, stats=stats))
    for r in stats.trace[1:]:
        d = r.details
        assert isinstance(d, Eagle2Details) and len(d.confidences) == len(r.drafted)
        assert r.new[:-1] == [r.drafted[i] for i in d.path] and all(c["p"] == 1.0 for v in d.visits for c in v["checks"])
