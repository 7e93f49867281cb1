"""EAGLE (beyond/eagle.py): greedy drafts from the oracle's own features give greedy decoding's text;
sampled ones give the oracle's distribution."""

from collections import Counter

import numpy as np
import pytest

from beyond.eagle import EagleHead, eagle_generate, eagle_sample
from decoding import GenerationError, Stats
from processors import Processor, make_processor
from sps import autoregressive_sample
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt
from test_sps import chi_square_rejects, exact_distribution, small  # noqa: F401 (small: the fixture of tiny models)


def random_head(oracle, seed=0, scale=0.3):
    """An EAGLE head of random weights for this oracle: it drafts badly, which the tests want too."""
    rng = np.random.default_rng(seed)
    d = oracle.n_embd
    w = lambda *shape: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    block = {"ln_1": {"weight": np.ones(d, np.float32), "bias": w(d)}, "ln_2": {"weight": np.ones(d, np.float32), "bias": w(d)},
             "attn": {"c_attn": {"weight": w(d, 3 * d), "bias": w(3 * d)}, "c_proj": {"weight": w(d, d), "bias": w(d)}},
             "mlp": {"c_fc": {"weight": w(d, 4 * d), "bias": w(4 * d)}, "c_proj": {"weight": w(4 * d, d), "bias": w(d)}}}
    params = {"fc": {"weight": w(2 * d, d), "bias": w(d)}, "h": [block]}
    return EagleHead(params, {"kind": "eagle", "n_embd": d, "n_head": oracle.n_head, "layer_norm_epsilon": 1e-5}, oracle)


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
        assert r.cached["oracle"] == r.context + len(r.new) - 1


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
