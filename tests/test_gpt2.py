"""The GPT-2 forward pass, the KV cache and loading a model, on tiny random models: the plain model
of gpt2.py (the accelerated one: workbench/tests/test_speed.py; checkpoint files: tests/test_checkpoint.py)."""

import json
import mmap
import os

import numpy as np
import pytest

import gpt2
from fixtures import make_model_dir
from gpt2 import GPT2
from kvcache import KVCache
from weights import checkpoint
from weights.checkpoint import CheckpointError


def prompt(model, n, seed=0):
    return np.random.default_rng(seed).integers(0, model.vocab_size, n)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # Weights of std 0.1: float32 logits are then ~1e-6 from a float64 evaluation
    # (test_matches_an_independent_float64_reference), so comparisons at 1e-5 have a
    # 10x margin. With std 0.3 each float32 path alone is already ~1e-5 from the truth.
    return make_model_dir(tmp_path_factory.mktemp("engine"), seed=2, n_layer=3, scale=0.1)


@pytest.fixture(scope="module")
def model(model_dir):
    return GPT2.from_pretrained(model_dir)


def reference_logits(model_dir, ids):
    """GPT-2 written plainly in float64 from the checkpoint's own tensors and layout."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    w = {k: np.asarray(v, np.float64) for k, v in checkpoint.load_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    n_head, eps = config["n_head"], config.get("layer_norm_epsilon", 1e-5)

    def ln(x, name):
        return w[name + ".weight"] * (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) + w[name + ".bias"]

    def dense(x, name):
        return x @ w[name + ".weight"] + w[name + ".bias"]

    n = len(ids)
    x = w["wte.weight"][ids] + w["wpe.weight"][:n]
    for i in range(config["n_layer"]):
        q, k, v = np.split(dense(ln(x, f"h.{i}.ln_1"), f"h.{i}.attn.c_attn"), 3, axis=-1)
        heads = []
        for hq, hk, hv in zip(*(np.split(m, n_head, axis=-1) for m in (q, k, v))):
            scores = hq @ hk.T / np.sqrt(hq.shape[-1]) + np.triu(np.full((n, n), -np.inf), 1)
            e = np.exp(scores - scores.max(-1, keepdims=True))
            heads.append(e / e.sum(-1, keepdims=True) @ hv)
        x = x + dense(np.concatenate(heads, axis=-1), f"h.{i}.attn.c_proj")
        h = dense(ln(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc")
        x = x + dense(0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3))), f"h.{i}.mlp.c_proj")
    return ln(x, "ln_f") @ w["wte.weight"].T


def test_matches_an_independent_float64_reference(model_dir, model):
    ids = prompt(model, 30)
    np.testing.assert_allclose(model.forward(ids), reference_logits(model_dir, ids), rtol=1e-5, atol=1e-5)


def test_logits_shape_and_float32(model):
    logits = model.forward(prompt(model, 7))
    assert logits.shape == (7, model.vocab_size)
    assert logits.dtype == np.float32


@pytest.mark.parametrize("f", [gpt2.gelu, gpt2.softmax])
def test_layers_stay_float32(f):
    x = np.linspace(-5, 5, 24, dtype=np.float32).reshape(2, 12)
    assert f(x).dtype == np.float32


def test_layer_norm_and_attention_stay_float32():
    x = np.random.default_rng(0).standard_normal((3, 8), dtype=np.float32)
    assert gpt2.layer_norm(x, np.ones(8, np.float32), np.zeros(8, np.float32), np.float32(1e-5)).dtype == np.float32
    q = x.reshape(1, 3, 8)
    assert gpt2.attention(q, q, q, gpt2.causal_mask(3, 3)).dtype == np.float32


def test_gelu_matches_its_formula_on_negative_inputs():
    x = np.linspace(-6, 6, 101, dtype=np.float32)
    exact = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
    np.testing.assert_allclose(gpt2.gelu(x), exact, rtol=1e-6, atol=1e-6)


def test_cached_token_by_token_equals_uncached(model):
    ids = prompt(model, 40)
    full = model.forward(ids)
    cache = KVCache()
    rows = np.concatenate([model.forward([t], cache) for t in ids])
    assert cache.n_tokens() == 40
    np.testing.assert_allclose(rows, full, rtol=1e-5, atol=1e-5)


def test_cached_in_uneven_chunks_equals_uncached(model):
    ids = prompt(model, 40, seed=1)
    full = model.forward(ids)
    cache, rows, start = KVCache(), [], 0
    for size in (5, 1, 9, 3, 16, 6):
        rows.append(model.forward(ids[start:start + size], cache))
        start += size
    np.testing.assert_allclose(np.concatenate(rows), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("keep", [0, 1, 17, 29, 30])
def test_truncate_and_refeed_gives_the_same_logits(model, keep):
    ids = prompt(model, 30, seed=2)
    other = prompt(model, 30, seed=3)
    full = model.forward(ids)
    cache = KVCache()
    model.forward(ids[:keep].tolist() + other[keep:].tolist(), cache)  # rejected tail to be dropped
    cache.truncate(keep)
    assert cache.n_tokens() == keep
    if keep < 30:
        np.testing.assert_allclose(model.forward(ids[keep:], cache), full[keep:], rtol=1e-5, atol=1e-5)


def test_truncate_beyond_length_is_an_error():
    cache = KVCache()
    with pytest.raises(ValueError):
        cache.truncate(1)


def test_cache_appends_are_amortized(oracle):
    # Growing by doubling: a handful of reallocations for 100 appends, not 100.
    cache, buffers = KVCache(), set()
    for t in prompt(oracle, 100, seed=4):
        oracle.forward([t], cache)
        buffers.add(id(cache.keys[0]))
    assert len(buffers) <= 5


@pytest.mark.parametrize("path", [[0, 1, 2, 3, 5, 8, 9], [0, 1, 2], [1, 2, 11], [], list(range(12))])
def test_keep_positions_moves_exactly_those_keys_and_values(oracle, path):
    ids = prompt(oracle, 12, seed=5)
    cache = KVCache()
    oracle.forward(ids, cache)
    before = [a[:, :12].copy() for a in cache.keys + cache.values]
    cache.keep(path)
    assert cache.n_tokens() == len(path)
    for a, b in zip(cache.keys + cache.values, before):
        np.testing.assert_array_equal(a[:, :len(path)], b[:, path])


def test_context_window_is_enforced(oracle):
    cache = KVCache()
    oracle.forward(prompt(oracle, oracle.n_positions), cache)
    with pytest.raises(ValueError, match="context window"):
        oracle.forward([0], cache)


def test_token_id_zero_is_a_token(oracle):
    assert np.isfinite(oracle.forward([0, 0, 0])).all()


def test_hyperparameters_come_from_config(tmp_path):
    m = GPT2.from_pretrained(make_model_dir(tmp_path, n_layer=3, n_head=2, n_embd=32, n_positions=50, tokenizer=False))
    assert (m.n_layer, m.n_head, m.n_embd, m.n_positions) == (3, 2, 32, 50)
    assert m.forward([1, 2, 3]).shape == (3, m.vocab_size)


def test_unknown_model_name():
    with pytest.raises(CheckpointError, match="unknown model 'gpt3'"):
        GPT2.from_pretrained("gpt3")


def test_directory_without_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        GPT2.from_pretrained(str(tmp_path))


def mapped_file_of(array):
    """The mmap an array is a view of, or None (a copy)."""
    owner = array
    while isinstance(owner, (np.ndarray, memoryview)):
        owner = owner.obj if isinstance(owner, memoryview) else owner.base
    return owner if isinstance(owner, mmap.mmap) else None


def test_loading_is_memory_mapped(tiny_dirs):
    # Zero-copy: the big tensors are views of the checkpoint's pages, not copies.
    m = GPT2.from_pretrained(tiny_dirs["oracle"])
    assert mapped_file_of(m.params["wte"]) is not None
    assert mapped_file_of(m.params["h"][0]["mlp"]["c_fc"]["weight"]) is not None


def test_the_model_runs_weights_built_in_numpy():
    # gpt2.py needs no file: a nested dict of arrays under the checkpoint's names is a model.
    rng = np.random.default_rng(0)
    d, v = 16, 40
    layer = {"ln_1": {"weight": np.ones(d, np.float32), "bias": np.zeros(d, np.float32)},
             "attn": {"c_attn": {"weight": rng.standard_normal((d, 3 * d), dtype=np.float32) * 0.2,
                                 "bias": np.zeros(3 * d, np.float32)},
                      "c_proj": {"weight": rng.standard_normal((d, d), dtype=np.float32) * 0.2, "bias": np.zeros(d, np.float32)}},
             "ln_2": {"weight": np.ones(d, np.float32), "bias": np.zeros(d, np.float32)},
             "mlp": {"c_fc": {"weight": rng.standard_normal((d, 4 * d), dtype=np.float32) * 0.2,
                              "bias": np.zeros(4 * d, np.float32)},
                     "c_proj": {"weight": rng.standard_normal((4 * d, d), dtype=np.float32) * 0.2,
                                "bias": np.zeros(d, np.float32)}}}
    params = {"wte": rng.standard_normal((v, d), dtype=np.float32), "wpe": rng.standard_normal((8, d), dtype=np.float32),
              "h": [layer], "ln_f": {"weight": np.ones(d, np.float32), "bias": np.zeros(d, np.float32)}}
    config = {"n_layer": 1, "n_head": 2, "n_embd": d, "n_positions": 8, "vocab_size": v, "layer_norm_epsilon": 1e-5}
    logits = GPT2(params, config).forward([1, 2, 3])
    assert logits.shape == (3, v) and logits.dtype == np.float32 and np.isfinite(logits).all()
