"""The models the checks run on, made once per run in a temporary directory: two tiny random pairs, and the
shipped learned pair (assets/learned-pair: English, the Python documentation) with its held-out prompts."""

import atexit
import functools
import os
import shutil
import tempfile

import numpy as np

import gpt2
from weights import checkpoint

from .running import ROOT


@functools.lru_cache(maxsize=1)
def models_dir():
    base = tempfile.mkdtemp(prefix="exercises-")
    atexit.register(shutil.rmtree, base, True)
    return base


@functools.lru_cache(maxsize=1)
def tiny_pair():
    """A tiny random oracle and a draft that is a noisy copy of it (so they agree often, not always)."""
    base = models_dir()
    config = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 1024, "vocab_size": 272}
    oracle_dir = checkpoint.random_checkpoint(os.path.join(base, "oracle"), config, seed=2, scale=0.3)
    draft_dir = noisy_copy(oracle_dir, os.path.join(base, "draft"), 0.015, seed=0)
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir)


def noisy_copy(source_dir, draft_dir, noise, seed):
    """A copy of the checkpoint in source_dir with Gaussian noise of scale `noise` added to every weight."""
    tensors = checkpoint.load_safetensors(os.path.join(source_dir, "model.safetensors"))
    rng = np.random.default_rng(seed)
    os.makedirs(draft_dir)
    shutil.copy(os.path.join(source_dir, "config.json"), draft_dir)
    checkpoint.save_safetensors(os.path.join(draft_dir, "model.safetensors"), {k: t.shape for k, t in tensors.items()},
                                lambda k: tensors[k] + np.float32(noise) * rng.standard_normal(tensors[k].shape, dtype=np.float32))
    return draft_dir


SAMPLING_V = 6  # small enough to enumerate every 3-token continuation (6^3 of them), as tests/test_sps.py does


@functools.lru_cache(maxsize=1)
def sampling_pair():
    """A draft p and a target q over a vocabulary of 6 tokens: the SpS checks enumerate their distributions."""
    config = {"n_head": 2, "n_embd": 16, "n_positions": 16, "vocab_size": SAMPLING_V}
    return tuple(gpt2.GPT2.from_pretrained(checkpoint.random_checkpoint(
        os.path.join(models_dir(), name), {**config, "n_layer": n_layer}, seed=seed, scale=0.5))
        for name, seed, n_layer in (("p", 21, 1), ("q", 22, 2)))


@functools.lru_cache(maxsize=1)
def close_draft():
    """A draft close to sampling_pair's target q (a noisy copy of it): a round of it keeps all its drafts often,
    so the bonus token comes often."""
    sampling_pair()
    return gpt2.GPT2.from_pretrained(noisy_copy(os.path.join(models_dir(), "q"), os.path.join(models_dir(), "p-close"),
                                                0.02, seed=1))


@functools.lru_cache(maxsize=1)
def learned_pair():
    """(draft, oracle, encode): the shipped learned pair, written from assets/ into this run's directory."""
    from weights.demo_pair import build_pair
    from weights.tokenizer import encode, load_tokenizer
    draft_dir, oracle_dir = build_pair(models_dir())
    enc = load_tokenizer(oracle_dir)
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir), lambda text: encode(enc, text)


@functools.lru_cache(maxsize=1)
def held_out_prompts():
    """((kind, prompt ids), ...): the first held-out prompt of each kind, cut to 24 tokens (a quick check)."""
    import json
    with open(os.path.join(ROOT, "assets", "learned-pair", "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    encode, kinds = learned_pair()[2], {}
    for entry in prompts:
        kinds.setdefault(entry["kind"], tuple(encode(entry["prompt"])[:24]))
    return tuple(kinds.items())

