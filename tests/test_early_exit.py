"""Self-speculation through a trained exit (beyond/early_exit.py): greedy decoding's text, whatever the adapter;
on the learned pair, the shipped adapter's drafts are kept more often than the untrained exit's."""

import numpy as np
import pytest

from beyond.early_exit import ExitAdapter, early_exit_generate
from beyond.self_speculative import self_speculative_generate
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt


def random_adapter(oracle, exit_layer=1, seed=0, scale=0.3, zero=False):
    """An exit adapter of random weights (zero=True: c_proj zero, so it adds nothing: the untrained exit)."""
    rng = np.random.default_rng(seed)
    d = oracle.n_embd
    w = lambda *shape: (np.zeros(shape) if zero else rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    params = {"adapter": {"ln_1": {"weight": np.ones(d, np.float32), "bias": w(d)},
                          "attn": {"c_attn": {"weight": (rng.standard_normal((d, 3 * d)) * scale).astype(np.float32),
                                              "bias": w(3 * d)},
                                   "c_proj": {"weight": w(d, d), "bias": w(d)}}}}
    config = {"head": "exit", "n_embd": d, "n_head": oracle.n_head, "layer_norm_epsilon": 1e-5, "exit_layer": exit_layer}
    return ExitAdapter(params, config, oracle)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_draft", [1, 3, 6])
@pytest.mark.parametrize("exit_layer", [1, 2])
def test_greedy_text_is_greedy_decodings(oracle, seed, n_draft, exit_layer):
    ids = prompt(oracle, 8, seed)
    stats = Stats(trace=[])
    got = list(early_exit_generate(random_adapter(oracle, exit_layer, seed), oracle, ids, 20, n_draft=n_draft, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 20)), got, oracle, ids)
    assert stats.drafted > 0 and len(stats.from_draft) == 20
    for r in stats.trace:  # both caches hold all but the newest token after every round
        assert r.cached["oracle"] == r.cached["draft"] == r.context_length + len(r.new) - 1
        assert r.details.trained and r.details.layers == exit_layer


@pytest.mark.parametrize("n_new", range(0, 6))
def test_exactly_n_new_tokens(oracle, n_new):
    ids = prompt(oracle, 5, 0)
    assert list(early_exit_generate(random_adapter(oracle), oracle, ids, n_new)) == list(greedy_generate(oracle, ids, n_new))


def test_an_adapter_that_adds_nothing_drafts_what_the_untrained_exit_drafts(oracle):
    # c_proj zero: x + attn(ln_1(x)) = x, so every draft is self-speculative's at the same layer.
    ids = prompt(oracle, 9, 3)
    trained, untrained = Stats(trace=[]), Stats(trace=[])
    list(early_exit_generate(random_adapter(oracle, 2, zero=True), oracle, ids, 24, n_draft=3, stats=trained))
    list(self_speculative_generate(oracle, ids, 24, n_draft=3, n_layers_draft=2, stats=untrained))
    assert [r.drafted for r in trained.trace] == [r.drafted for r in untrained.trace]


def test_the_checks_run_at_the_call(oracle, draft):
    with pytest.raises(GenerationError, match="another oracle"):
        early_exit_generate(random_adapter(oracle), draft, prompt(draft, 5, 0), 4)  # no next(): at the call
    with pytest.raises(GenerationError):
        early_exit_generate(random_adapter(oracle), oracle, prompt(oracle, 5, 0), 4, n_draft=0)


def test_an_adapter_of_another_kind_or_layer_is_refused(oracle):
    good = random_adapter(oracle)
    with pytest.raises(GenerationError, match="not an exit adapter"):
        ExitAdapter({"adapter": good.params}, {"head": "eagle", "n_embd": oracle.n_embd}, oracle)
    with pytest.raises(GenerationError, match="exit layer"):
        ExitAdapter({"adapter": good.params}, {"head": "exit", "n_embd": oracle.n_embd, "exit_layer": oracle.n_layer,
                                               "n_head": 1, "layer_norm_epsilon": 1e-5}, oracle)
