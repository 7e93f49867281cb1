"""What the tests share: tiny random GPT-2 checkpoints, a tiny GPT-2-style BPE, GPT-2's own pair-merge BPE.

Nothing here touches the network or needs the real weights: each tiny checkpoint is
written in the Hugging Face layout (config.json + model.safetensors) by
weights/checkpoint.random_checkpoint, and the tokenizer files (vocab.json + merges.txt) by
write_tiny_bpe. The fixtures that write them into the test run's temporary directories
are in conftest.py at the root, for tests/ and workbench/tests/ alike.
"""

import json
import os
import shutil
from collections import Counter

import numpy as np

from weights import checkpoint, demo_pair
from weights.tokenizer import ENDOFTEXT, bytes_to_unicode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A few merges in GPT-2's notation (Ġ is the stand-in for a space).
TINY_MERGES = ["h e", "Ġ t", "Ġt he", "i n", "Ġ a", "e r", "Ġ s", "o n", "Ġa n", "Ġan d", "r e", "Ġ o", "Ġo f", "a t", "e n"]
TINY_VOCAB_SIZE = 256 + len(TINY_MERGES) + 1  # bytes, merges, <|endoftext|>


def write_bpe(model_dir, merges, endoftext=True):
    """vocab.json + merges.txt of a GPT-2-style byte-level BPE of these merges (GPT-2's notation): the 256 bytes,
    a token per merge, then <|endoftext|> unless endoftext=False."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for merge in merges:
        vocab[merge.replace(" ", "")] = len(vocab)
    if endoftext:
        vocab[ENDOFTEXT] = len(vocab)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(model_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return model_dir


def write_tiny_bpe(model_dir):
    """vocab.json + merges.txt of a GPT-2-style byte-level BPE with TINY_VOCAB_SIZE tokens."""
    return write_bpe(model_dir, TINY_MERGES)


def tiny_config(**overrides):
    return {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": TINY_VOCAB_SIZE, **overrides}


def make_model_dir(path, seed=0, scale=0.3, tokenizer=True, **overrides):
    """A tiny random GPT-2 checkpoint directory; scale 0.3 gives confident, untied argmaxes."""
    checkpoint.random_checkpoint(str(path), tiny_config(**overrides), seed=seed, scale=scale)
    if tokenizer:
        write_tiny_bpe(str(path))
    return str(path)


def save_tensors(path, tensors):
    """Write a {name: array} dict as a .safetensors file."""
    checkpoint.save_safetensors(path, {k: t.shape for k, t in tensors.items()}, tensors.__getitem__)


def checkout_with_demo_pair(tmp_path_factory):
    """A working directory whose models/ holds the learned demo pair, as `python demo.py` leaves a checkout."""
    cwd = tmp_path_factory.mktemp("checkout")
    demo_pair.build_pair(str(cwd / "models"))
    return cwd


def make_noisy_copy(src, dest, noise, seed=0):
    """A copy of the checkpoint in src with Gaussian noise added: a draft that agrees only partly."""
    rng = np.random.default_rng(seed)
    tensors = checkpoint.load_safetensors(os.path.join(src, "model.safetensors"))
    os.makedirs(dest, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dest)
    save_tensors(os.path.join(dest, "model.safetensors"),
                 {k: t + np.float32(noise) * rng.standard_normal(t.shape, dtype=np.float32) for k, t in tensors.items()})
    return write_tiny_bpe(dest)


def gpt2_pair_bpe(word, bpe_ranks):
    """GPT-2's own encoder.py: merge the adjacent pair listed first in merges.txt, everywhere, until none is listed
    (how transformers' GPT2Tokenizer reads merges.txt, where tiktoken reads vocab.json's ranks). Written apart from
    weights/tokenizer.py's own loop on purpose: the tests hold that loop to this independent reference."""
    word = list(word)
    while len(word) > 1:
        rank, first = min((bpe_ranks.get(pair, float("inf")), pair) for pair in zip(word, word[1:]))
        if rank == float("inf"):
            break
        merged, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == first:
                merged.append(word[i] + word[i + 1])
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return word


def held_out(n_per_kind=1):
    """[(kind, prompt)]: the first prompts of each kind in assets/learned-pair/prompts.json (held-out documents)."""
    with open(os.path.join(demo_pair.ASSETS, "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    seen = Counter()
    chosen = []
    for entry in prompts:
        if seen[entry["kind"]] < n_per_kind:
            seen[entry["kind"]] += 1
            chosen.append((entry["kind"], entry["prompt"]))
    return chosen
