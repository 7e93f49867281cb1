"""EAGLE (beyond/eagle.py): greedy drafts from the oracle's own features give greedy decoding's text;
sampled ones give the oracle's distribution."""

from collections import Counter

import numpy as np
import pytest

from beyond.eagle import EagleHead, eagle_generate, eagle_sample
from decoding import GenerationError
from stats import Stats
from kvcache import KVCache
from processors import Processor, make_processor
from sps import acceptance_probability, residual
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt
from test_sps import V, chi_square_rejects, exact_distribution, small  # noqa: F401 (small: the fixture of tiny models)


def random_head(oracle, seed=0, scale=0.3):
    """An EAGLE head of random weights for this oracle: it drafts badly, which the tests want too."""
    rng = np.random.default_rng(seed)
    d = oracle.n_embd
    w = lambda *shape: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    block = {"ln_1": {"weight": np.ones(d, np.float32), "bias": w(d)}, "ln_2": {"weight": np.ones(d, np.float32), "bias": w(d)},
             "attn": {"c_attn": {"weight": w(d, 3 * d), "bias": w(3 * d)}, "c_proj": {"weight": w(d, d), "bias": w(d)}},
             "mlp": {"c_fc": {"weight": w(d, 4 * d), "bias": w(4 * d)}, "c_proj": {"weight": w(4 * d, d), "bias": w(d)}}}
    params = {"fc": {"weight": w(2 * d, d), "bias": w(d)}, "h": [block]}
    return EagleHead(params, {"head": "eagle", "n_embd": d, "n_head": oracle.n_head, "layer_norm_epsilon": 1e-5}, oracle)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_draft", [1, 2, 4, 7])
def test_greedy_text_is_greedy_decodings(oracle, seed, n_draft):
    ids = prompt(oracle, 8, seed)
    want = list(greedy_generate(oracle, ids, 20))
    stats = Stats(trace=[])
    assert_same_greedy(want, list(eagle_generate(random_head(oracle, seed), oracle, ids, 20, n_draft=n_draft, stats=stats)),
                       oracle, ids)
    assert stats.drafted > 0 and len(stats.from_draft) == 20
    for r in stats.trace[1:]:  # every cache holds all but the newest token after its round
        assert r.cached["oracle"] == r.context_length + len(r.new) - 1


@pytest.mark.parametrize("n_new", range(0, 6))
def test_exactly_n_new_tokens(oracle, n_new):
    assert list(eagle_generate(random_head(oracle), oracle, prompt(oracle, 5, 0), n_new)) == list(greedy_generate(oracle, prompt(oracle, 5, 0), n_new))


def test_a_head_for_another_oracle_is_refused(oracle, draft):
    with pytest.raises(GenerationError):
        list(eagle_generate(random_head(oracle), draft, prompt(draft, 5, 0), 4))


@pytest.mark.parametrize("n_draft, processor", [
    (2, Processor()),
    (3, make_processor("multinomial", temperature=0.6)),
    (4, make_processor("topk", 3)),
    (3, make_processor("nucleus", 0.8, temperature=1.3)),
], ids=str)
@pytest.mark.slow
def test_sampled_text_has_the_oracles_distribution(small, n_draft, processor):
    _, q_model = small
    head = random_head(q_model, seed=5, scale=0.5)
    ids, n, stats = [1, 4], 3000, Stats()
    rng = np.random.default_rng(77)
    counts = Counter(tuple(eagle_sample(head, q_model, ids, 3, n_draft=n_draft, rng=rng, processor=processor, stats=stats))
                     for _ in range(n))
    rejects, detail = chi_square_rejects(counts, exact_distribution(q_model, ids, 3, processor), n)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted  # both branches of the acceptance test were taken


@pytest.mark.slow
def test_the_chi_square_test_catches_a_sampler_that_keeps_every_draft(small, monkeypatch):
    """Negative control: accepting every draft gives the head's distribution, which the test rejects."""
    import sps
    _, q_model = small
    head = random_head(q_model, seed=5, scale=0.5)
    monkeypatch.setattr(sps, "acceptance_probability", lambda q, p, x: 1.0)
    rng = np.random.default_rng(77)
    counts = Counter(tuple(eagle_sample(head, q_model, [1, 4], 3, n_draft=3, rng=rng)) for _ in range(3000))
    assert chi_square_rejects(counts, exact_distribution(q_model, [1, 4], 3), 3000)[0]


def test_temperature_zero_is_greedy(oracle):
    head = random_head(oracle, seed=3)
    greedy = make_processor("greedy")
    ids = prompt(oracle, 6, 1)
    got = list(eagle_sample(head, oracle, ids, 16, n_draft=3, rng=np.random.default_rng(0), processor=greedy))
    assert_same_greedy(list(greedy_generate(oracle, ids, 16)), got, oracle, ids)


def round_joint(head, q_model, ids, processor, accept=acceptance_probability):
    """P(the round's first token, the next one) by enumeration, for a round of two drafts after `ids`
    (its newest token not yet fed): the head's real p after each first draft, the oracle's q; when the
    round stops at its first token, the next comes from the next round, q(. | x1) (the one-step identity)."""
    features = q_model.hidden_states(ids[:-1])  # f_t of every token the oracle has been fed
    def head_step(tokens, feats, cache):  # the head's next guess, its distribution p
        guess = head.forward(tokens, feats, cache)[-1:]
        return guess, processor(q_model.logits(guess)[0])
    _, p1 = head_step(ids[1:], features, KVCache())
    q1 = processor(q_model.forward(ids)[-1])
    a1 = np.array([accept(q1, p1, x) if p1[x] > 0 else 0.0 for x in range(V)])
    rejected = float(np.sum(p1 * (1 - a1)))
    joint = np.zeros((V, V))
    for x1 in range(V):
        cache = KVCache()
        guess, _ = head_step(ids[1:], features, cache)
        _, p2 = head_step([x1], guess, cache)  # the head reads its own guess after drafting x1
        q2 = processor(q_model.forward(list(ids) + [x1])[-1])
        a2 = np.array([accept(q2, p2, x) if p2[x] > 0 else 0.0 for x in range(V)])
        kept_then = p2 * a2 + float(np.sum(p2 * (1 - a2))) * residual(q2, p2)  # the second draft's step
        joint[x1] = p1[x1] * a1[x1] * kept_then + rejected * residual(q1, p1)[x1] * q2
    target = np.stack([q1[x] * processor(q_model.forward(list(ids) + [x])[-1]) for x in range(V)])  # q(x1) q(x2 | x1)
    return joint, target


@pytest.mark.parametrize("processor", [Processor(), make_processor("multinomial", temperature=0.6),
                                       make_processor("topk", 3)], ids=str)
@pytest.mark.parametrize("ids", [[1, 4], [3, 0, 5]], ids=str)
def test_a_round_emits_the_oracles_distribution_exactly(small, processor, ids):
    _, q_model = small
    joint, target = round_joint(random_head(q_model, seed=5, scale=0.5), q_model, ids, processor)
    np.testing.assert_allclose(joint, target, atol=1e-6)
    assert joint.sum() == pytest.approx(1, abs=1e-5)


def test_the_enumeration_catches_a_rule_that_keeps_every_draft(small):
    """Negative control: accepting every draft emits the head's p, not the oracle's q."""
    _, q_model = small
    joint, target = round_joint(random_head(q_model, seed=5, scale=0.5), q_model, [1, 4], Processor(),
                                accept=lambda q, p, x: 1.0)
    assert np.abs(joint - target).max() > 1e-2
