"""beyond/self_speculative.py: the oracle's first layers draft for it, sharing its weights, keys and values."""

import os
import shutil

import numpy as np
import pytest

import beyond.self_speculative as ss
import gpt2
from beyond.self_speculative import LayersDetails, draft_name, early_exit_draft, self_speculative_generate
from fixtures import make_model_dir, save_tensors
from decoding import GenerationError
from stats import Stats
from gpt2 import GPT2
from kvcache import KVCache
from speculative import greedy_generate, speculative_generate
from test_greedy import SEEDS, assert_same_greedy, make_model_dir_cached, prompt
from weights import checkpoint


@pytest.fixture(scope="module")
def deeper(tiny_dirs):
    """A 5-layer tiny oracle: four draft depths to try (the shared fixture's oracle has 3 layers)."""
    return GPT2.from_pretrained(make_model_dir(os.path.join(os.path.dirname(tiny_dirs["oracle"]), "deep5"),
                                              seed=5, n_layer=5))


@pytest.fixture(scope="module")
def damped(tiny_dirs):
    """A 4-layer oracle whose last layer writes little into the residual stream (its output projections
    x 0.1): LayerSkip's premise, that the last layers change the early answer little, made true."""
    base = os.path.dirname(tiny_dirs["oracle"])
    src, dest = make_model_dir(os.path.join(base, "damped-src"), seed=6, n_layer=4), os.path.join(base, "damped")
    tensors = checkpoint.load_safetensors(os.path.join(src, "model.safetensors"))
    os.makedirs(dest, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dest)
    save_tensors(os.path.join(dest, "model.safetensors"),
                 {key: t * np.float32(0.1) if key.startswith("h.3.") and ".c_proj." in key else t
                  for key, t in tensors.items()})
    return GPT2.from_pretrained(dest)


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("kind", ["oracle", "deeper"])  # 3 layers (the programs' fast model), 5 layers (plain)
def test_equals_greedy_for_every_draft_depth(request, kind, k):
    model = request.getfixturevalue(kind)
    for seed in SEEDS:
        ids = prompt(model, 5 + seed, seed)
        expected = list(greedy_generate(model, ids, 30))
        for n_layers in range(1, model.n_layer):
            stats = Stats()
            got = list(self_speculative_generate(model, ids, 30, n_draft=k, n_layers_draft=n_layers, stats=stats))
            assert_same_greedy(expected, got, model, ids)
            assert stats.n_generated == 30 and stats.accepted <= stats.drafted


def test_the_draft_shares_the_oracles_arrays(tiny_dirs, oracle):
    plain = GPT2.from_pretrained(tiny_dirs["oracle"])  # its leaves are the checkpoint's mapped arrays
    for model in (plain, oracle):  # and the fast layout's blocked weights
        draft = early_exit_draft(model, 2)
        assert draft.n_layer == 2 and len(draft.params["h"]) == 2
        for key in ("wte", "wpe", "ln_f"):
            assert draft.params[key] is model.params[key]
        for layer in range(2):
            assert draft.params["h"][layer] is model.params["h"][layer]  # the same dict, so the same arrays
    draft = early_exit_draft(plain, 2)
    pairs = [(draft.params["wte"], plain.params["wte"]), (draft.params["ln_f"]["weight"], plain.params["ln_f"]["weight"]),
             (draft.params["h"][1]["mlp"]["c_fc"]["weight"], plain.params["h"][1]["mlp"]["c_fc"]["weight"])]
    for a, b in pairs:
        assert isinstance(a, np.ndarray) and np.shares_memory(a, b)


def test_the_draft_runs_alone_and_proposes_what_the_self_speculative_draft_does(oracle):
    # speculative_generate with the early-exit draft as a model of its own (two caches, the verification
    # rerunning layers 0..L-1): the same drafts round by round, so the shared path computes the same draft.
    ids = prompt(oracle, 6, 1)
    for n_layers in (1, 2):
        alone, shared = Stats(trace=[]), Stats(trace=[])
        list(speculative_generate(early_exit_draft(oracle, n_layers), oracle, ids, 30, n_draft=4, stats=alone))
        list(self_speculative_generate(oracle, ids, 30, n_draft=4, n_layers_draft=n_layers, stats=shared))
        assert [(r.drafted, r.accepted, r.new) for r in shared.trace] == [(r.drafted, r.accepted, r.new) for r in alone.trace]


def test_the_shared_cache_holds_what_the_oracle_computes(deeper):
    # One round by hand: the draft fills layers 0..L-1, the verification layers L..; together they
    # are the oracle's own cache of the same tokens.
    ids, n_layers = prompt(deeper, 7, 2), 2
    draft, shared, deep, stats = early_exit_draft(deeper, n_layers), KVCache(), KVCache(), Stats()
    drafted, hidden = ss.draft_tokens(draft, shared, ids, 3, stats)
    assert hidden.shape == (len(ids) + 3, deeper.n_embd) and shared.n_tokens() == len(ids) + 3
    ss.verify_from_layer(deeper, ss.upper_layers(deeper, n_layers), deep, hidden, drafted, stats)
    full = KVCache()
    deeper.forward(ids + drafted, full)
    assert deep.n_tokens() == full.n_tokens() == len(ids) + 3
    assert len(shared.keys) == n_layers and len(deep.keys) == deeper.n_layer - n_layers  # no layer cached twice
    n = full.n_tokens()
    for layer in range(deeper.n_layer):
        cache, index = (shared, layer) if layer < n_layers else (deep, layer - n_layers)
        np.testing.assert_allclose(cache.keys[index][:, :n], full.keys[layer][:, :n], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(cache.values[index][:, :n], full.values[layer][:, :n], rtol=1e-4, atol=1e-5)
    assert (stats.draft_passes, stats.oracle_passes) == (4, 1)  # k + 1 passes of layers 0..L-1, one of L..


def test_the_verification_does_not_rerun_the_draft_layers(monkeypatch, deeper):
    # Every block runs over every fed row exactly once: layers 0..L-1 in the draft's passes only,
    # layers L.. in one verification pass per round.
    layer_of = {id(params): i for i, params in enumerate(deeper.params["h"])}
    calls = []

    def counted(x, params, *args):
        calls.append((layer_of[id(params)], x.shape[0]))
        return block(x, params, *args)

    block = gpt2.block  # the model's own blocks: the passes are gpt2.GPT2's hidden_states and blocks
    monkeypatch.setattr(gpt2, "block", counted)
    ids, n_layers = prompt(deeper, 6, 0), 3
    stats = Stats(trace=[])
    list(self_speculative_generate(deeper, ids, 25, n_draft=4, n_layers_draft=n_layers, stats=stats))
    n_fed = len(ids) + sum(len(r.drafted) for r in stats.trace) + stats.rounds - 1  # prompt, drafts, each round's newest
    for layer in range(deeper.n_layer):
        assert sum(rows for i, rows in calls if i == layer) == n_fed
        assert sum(i == layer for i, _ in calls) == (stats.draft_passes if layer < n_layers else stats.rounds)
    assert stats.draft_passes == sum(len(r.drafted) + 1 for r in stats.trace)


def test_caches_hold_all_but_the_newest_token_after_every_round(deeper):
    ids = prompt(deeper, 5, 4)
    stats = Stats(trace=[])
    list(self_speculative_generate(deeper, ids, 30, n_draft=4, n_layers_draft=2, stats=stats))
    length = len(ids)
    for record in stats.trace:
        length += len(record.new)
        assert record.cached == {"draft": length - 1, "oracle": length - 1}
        assert record.new[:-1] == record.drafted[:record.accepted]
        assert record.new[-1] == record.oracle[record.accepted]
        k = min(4, len(ids) + 30 - record.context_length - 1)
        assert record.details == LayersDetails(4, k, layers=2, n_layer=5, trained=False)
        assert draft_name(record.details.layers, record.details.n_layer) == "layers 0-1 of 5 + ln_f + LM head"
    assert length == len(ids) + 30 and stats.trace[-1].cached["oracle"] == len(ids) + 29
    assert {r.accepted for r in stats.trace} != {4}  # rejections happened: the rollback was exercised


def test_the_draft_is_named_by_its_layers(oracle):
    stats = Stats(trace=[])
    list(self_speculative_generate(oracle, [1, 2, 3], 4, n_draft=2, n_layers_draft=1, stats=stats))
    d = stats.trace[0].details
    assert (d.layers, d.n_layer, d.trained) == (1, 3, False)
    assert draft_name(d.layers, d.n_layer) == "layer 0 of 3 + ln_f + LM head"
    assert draft_name(2, 3, trained=True) == "layers 0-1 of 3 + the trained adapter + ln_f + LM head"


@pytest.mark.parametrize("n_new", range(0, 7))
def test_exactly_n_new_tokens(oracle, n_new):
    # n_new = 1, and the last round of the others: k = 0 drafts, the oracle's token alone.
    ids = prompt(oracle, 3, 0)
    for k in (1, 4):
        got = list(self_speculative_generate(oracle, ids, n_new, n_draft=k, n_layers_draft=2))
        assert got == list(greedy_generate(oracle, ids, n_new))


def test_reaches_the_context_limit(tiny_dirs):
    model = GPT2.from_pretrained(make_model_dir_cached(tiny_dirs, "o40", seed=12, n_layer=2))  # a window of 40
    ids = prompt(model, 13, 3)
    for k in (1, 3, 8):
        assert_same_greedy(list(greedy_generate(model, ids, 27)),
                           list(self_speculative_generate(model, ids, 27, n_draft=k, n_layers_draft=1)), model, ids)
    with pytest.raises(GenerationError, match="context window of 40"):
        self_speculative_generate(model, ids, 28, n_layers_draft=1)


@pytest.mark.parametrize("n_layers", [0, -1, 3, 4, 1.5, "1"])
def test_draft_depth_out_of_range(oracle, n_layers):
    # 1 <= L < n_layer, checked at the call: an error before any token
    with pytest.raises(GenerationError, match="from 1 to 2 .*has 3"):
        self_speculative_generate(oracle, [1, 2, 3], 5, n_layers_draft=n_layers)


def test_other_bad_arguments(draft, oracle):
    with pytest.raises(GenerationError, match="no shorter draft"):
        self_speculative_generate(draft, [1, 2], 5)  # a 1-layer model
    with pytest.raises(GenerationError, match="n_draft must be at least 1"):
        self_speculative_generate(oracle, [1, 2], 5, n_draft=0)
    with pytest.raises(GenerationError, match="no tokens"):
        self_speculative_generate(oracle, [], 5)
    with pytest.raises(GenerationError, match="token ids"):
        self_speculative_generate(oracle, [1, oracle.vocab_size], 5)
    assert early_exit_draft(oracle, 1).n_layer == 1  # the default depth: half the layers
    assert len(list(self_speculative_generate(oracle, [1, 2], 3))) == 3


def test_a_deep_draft_is_accepted_often_where_the_last_layer_changes_little(damped):
    rates = {}
    for n_layers in (1, damped.n_layer - 1):
        stats = Stats()
        for seed in SEEDS:
            list(self_speculative_generate(damped, prompt(damped, 6, seed), 30, n_draft=4, n_layers_draft=n_layers,
                                           stats=stats))
        rates[n_layers] = stats.kept_fraction
    assert rates[damped.n_layer - 1] > 0.5 and rates[damped.n_layer - 1] > rates[1], rates
