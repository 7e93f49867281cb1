"""The GPT-2 forward pass, the KV cache and loading a model, on tiny random models
(checkpoint files themselves: tests/test_checkpoint.py)."""

import json
import mmap
import os
import subprocess
import sys

import numpy as np
import pytest

import checkpoint
import gpt2
import matmul
from checkpoint import CheckpointError
from conftest import ROOT, make_model_dir
from gpt2 import GPT2
from kvcache import KVCache


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


def test_logits_shape_and_float32(oracle):
    logits = oracle.forward(prompt(oracle, 7))
    assert logits.shape == (7, oracle.vocab_size)
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


def test_loading_is_memory_mapped(tiny_dirs):
    # Zero-copy: the big tensors are views of the file's pages, not copies.
    m = GPT2.from_pretrained(tiny_dirs["oracle"])
    owner = m.params["wte"].blocks
    while isinstance(owner, (np.ndarray, memoryview)):
        owner = owner.obj if isinstance(owner, memoryview) else owner.base
    assert isinstance(owner, mmap.mmap)


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE") or not os.path.exists("/sys/kernel/mm/transparent_hugepage"),
                    reason="needs Linux with transparent huge pages")
def test_weights_are_mapped_with_huge_pages_requested(tiny_dirs):
    model = GPT2.from_pretrained(tiny_dirs["oracle"])  # kept alive: its mapping must exist below
    model.forward([1])
    path = os.path.realpath(os.path.join(tiny_dirs["oracle"], checkpoint.BLOCKED_FILE))
    flags, current = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            if line.startswith("VmFlags:") and current == path:
                flags.append(line.split()[1:])
            elif "-" in line.split()[0]:  # a mapping's first line: address range ... path
                current = line.split()[-1]
    assert flags and "hg" in flags[0]  # hg: madvise(MADV_HUGEPAGE) is in force


@pytest.mark.parametrize("n_seq", [1, 2, 5, 16, 24, 25, 40])
@pytest.mark.parametrize("n_threads", [None, 1, 2, 3])
def test_matmul_strategy_matches_a_plain_product(monkeypatch, n_seq, n_threads):
    # Every regime of the one matmul strategy (gemv, blocks in one call, blocks
    # shared over 1, 2 or 3 threads, one big product), with an output width
    # that needs padding.
    if n_threads:
        monkeypatch.setattr(matmul, "THREADED_MIN_SIZE", 0)
        monkeypatch.setattr(matmul, "N_THREADS", n_threads)
        monkeypatch.setattr(matmul, "_pool", None)  # a pool sized for n_threads
    rng = np.random.default_rng(n_seq)
    w = rng.standard_normal((96, 37), dtype=np.float32)  # checkpoint layout [n_in, n_out]
    x = rng.standard_normal((n_seq, 96), dtype=np.float32)
    got = matmul.product(x, matmul.to_blocks(w.T))
    assert got.shape == (n_seq, 48) and got.dtype == np.float32
    np.testing.assert_allclose(got[:, :37], x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    assert not got[:, 37:].any()


def test_threads_change_nothing(monkeypatch, model):
    ids = prompt(model, 12)
    single = model.forward(ids)
    monkeypatch.setattr(matmul, "THREADED_MIN_SIZE", 0)
    np.testing.assert_array_equal(model.forward(ids), single)


def test_blocked_path_matches_the_float64_reference(model_dir, model):
    ids = prompt(model, 12, seed=9)  # fewer than GEMM_MIN_ROWS: the blocked products
    np.testing.assert_allclose(model.forward(ids), reference_logits(model_dir, ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("numpy_first", [True, False])
def test_blas_runs_single_threaded_inside_forward_whatever_was_imported_first(tiny_dirs, numpy_first):
    # A threaded BLAS's own threads would busy-wait beside ours (matmul.owns_the_threads).
    # The setting is made at run time, so a program that imported NumPy first
    # (a notebook, a test, a user's script) gets it too; outside forward() the
    # program's own setting is back.
    probe = f"""
import sys
{"import numpy; numpy.ones((300, 300)) @ numpy.ones((300, 300))" if numpy_first else ""}
import threadpoolctl
import gpt2, matmul
seen = []
real = matmul.product
matmul.product = lambda x, w: seen.append(threadpoolctl.threadpool_info()[0]["num_threads"]) or real(x, w)
before = threadpoolctl.threadpool_info()[0]["num_threads"]
gpt2.GPT2.from_pretrained(sys.argv[1]).forward([1, 2, 3])
print(before, set(seen), threadpoolctl.threadpool_info()[0]["num_threads"])
"""
    r = subprocess.run([sys.executable, "-c", probe, tiny_dirs["oracle"]], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    before, inside, after = r.stdout.split(" ", 1)[0], r.stdout.split(" ", 1)[1].rsplit(" ", 1)[0], r.stdout.split()[-1]
    assert inside == "{1}" and after == before
