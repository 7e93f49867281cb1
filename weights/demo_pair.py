"""An offline demo pair: a draft and an oracle that agree often enough to see speculation work.

build_pair() writes models/demo-draft and models/demo-oracle (no network:
random weights and GPT-2's real tokenizer, which this repository ships in
assets/); python demo.py (app/demo.py) then runs speculative decoding on them.

Random weights, honestly: the text is gibberish. What the pair shows is the
mechanics and the speed, with a realistic draft: it costs a few percent of the
oracle and agrees with it most of the time, as gpt2 does with gpt2-large.
How two random models come to agree:

  the draft (2 blocks of width 256) is random, with two restrictions that
  change nothing about what it can compute: layer norms without gain or bias,
  and every vector it writes into its residual stream has mean zero;

  the oracle (12 blocks of width 1024) contains the draft: an orthonormal map
  Q [256, 1024] (rows orthogonal to the all-ones vector) embeds the draft's
  embeddings, its two blocks and its LM head into the wider model, where they
  compute exactly what the draft computes (layer_norm of x @ Q is
  layer_norm(x) @ Q once the gain is sqrt(256 / 1024) and epsilon a quarter
  of the draft's; the extra heads and MLP units get zero weights). Its other 10 blocks are random with their
  output projections scaled by PERTURBATION: they nudge the oracle's logits,
  and where the draft's top two tokens are close, the oracle picks another.

The construction is seeded: every run writes the same pair.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np

from weights import checkpoint

DEMO_NAMES = ("demo-draft", "demo-oracle")
TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "gpt2-tokenizer")
VOCAB, WINDOW = 50257, 1024
DRAFT = {"n_layer": 2, "n_head": 4, "n_embd": 256}
ORACLE = {"n_layer": 12, "n_head": 16, "n_embd": 1024}
PERTURBATION = 2.0  # scale of the oracle's own blocks' outputs: sets how often the two disagree
COMMON = 5000  # GPT-2's ids are BPE merge ranks: the lower, the more common the token
SEED = 0


def config(shape):
    # layer_norm(x @ q) with gain sqrt(d / D) divides by sqrt(var_d + eps * D / d): so the oracle's
    # eps is the draft's times d / D, and the two layer norms agree exactly.
    eps = 1e-5 * (DRAFT["n_embd"] / shape["n_embd"])
    return {"model_type": "gpt2", **shape, "n_positions": WINDOW, "vocab_size": VOCAB, "layer_norm_epsilon": eps}


def mean_zero(a):  # [..., n] -> [..., n]: each vector moved into the subspace orthogonal to the ones vector
    return (a - a.mean(axis=-1, keepdims=True)).astype(np.float32)


def draft_tensors(seed=SEED):
    """The draft's checkpoint tensors: random, layer norms plain, residual writes mean-zero.

    Its blocks write strongly into the residual stream (scale 0.3): with weak
    writes the next token would mostly echo the current one, and text would loop."""
    d, rng = DRAFT["n_embd"], np.random.default_rng([seed, 0])

    def normal(*shape, scale=0.1):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    wte = normal(VOCAB, d, scale=0.3)
    wte[COMMON:] *= np.float32(0.5)  # rarer tokens get smaller logits: the gibberish is mostly made of common ones
    t = {"wte.weight": mean_zero(wte), "wpe.weight": mean_zero(normal(WINDOW, d, scale=0.09)),
         "ln_f.weight": np.ones(d, np.float32), "ln_f.bias": np.zeros(d, np.float32)}
    for i in range(DRAFT["n_layer"]):
        t.update({f"h.{i}.ln_1.weight": np.ones(d, np.float32), f"h.{i}.ln_1.bias": np.zeros(d, np.float32),
                  f"h.{i}.ln_2.weight": np.ones(d, np.float32), f"h.{i}.ln_2.bias": np.zeros(d, np.float32),
                  f"h.{i}.attn.c_attn.weight": normal(d, 3 * d), f"h.{i}.attn.c_attn.bias": normal(3 * d),
                  f"h.{i}.attn.c_proj.weight": mean_zero(normal(d, d, scale=0.3)), f"h.{i}.attn.c_proj.bias": mean_zero(normal(d, scale=0.3)),
                  f"h.{i}.mlp.c_fc.weight": normal(d, 4 * d), f"h.{i}.mlp.c_fc.bias": normal(4 * d),
                  f"h.{i}.mlp.c_proj.weight": mean_zero(normal(4 * d, d, scale=0.3)), f"h.{i}.mlp.c_proj.bias": mean_zero(normal(d, scale=0.3))})
    return t


def embedding(d, D, seed=SEED):  # -> Q [d, D]: orthonormal rows, each orthogonal to the ones vector
    a = np.random.default_rng([seed, 1]).standard_normal((D, d + 1))
    a[:, 0] = 1  # QR keeps the first column's direction: the other columns come out orthogonal to it
    q, _ = np.linalg.qr(a)
    return q[:, 1:].T.astype(np.float32)


def oracle_tensor(key, draft, q, seed=SEED):
    """One tensor of the oracle: the draft's, embedded by q, in its first blocks; random after them."""
    d, D = DRAFT["n_embd"], ORACLE["n_embd"]
    if key in ("wte.weight", "wpe.weight"):
        return draft[key] @ q
    if key.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
        return np.full(D, np.sqrt(d / D), np.float32)  # layer_norm(x @ q) == layer_norm(x) @ q
    if key.endswith(".bias") and "ln_" in key:
        return np.zeros(D, np.float32)
    layer, name = int(key.split(".")[1]), key.split(".", 2)[2]
    if layer >= DRAFT["n_layer"]:
        return perturbing_tensor(name, D, np.random.default_rng([seed, 2, layer, BLOCK_KEYS.index(name)]))
    src = draft[key]
    if name == "attn.c_attn.weight":  # q, k and v each go to the first heads of the wider layer
        w = np.zeros((D, 3 * D), np.float32)
        for j in range(3):
            w[:, j * D:j * D + d] = q.T @ src[:, j * d:(j + 1) * d]
        return w
    if name == "attn.c_attn.bias":
        b = np.zeros(3 * D, np.float32)
        for j in range(3):
            b[j * D:j * D + d] = src[j * d:(j + 1) * d]
        return b
    if name == "mlp.c_fc.weight":
        w = np.zeros((D, 4 * D), np.float32)
        w[:, :4 * d] = q.T @ src
        return w
    if name == "mlp.c_fc.bias":
        return np.concatenate([src, np.zeros(4 * D - 4 * d, np.float32)])
    if name in ("attn.c_proj.weight", "mlp.c_proj.weight"):  # from the draft's heads / units back into x @ q
        w = np.zeros((D if "attn" in name else 4 * D, D), np.float32)
        w[:src.shape[0]] = src @ q
        return w
    return src @ q  # the output projections' biases


BLOCK_KEYS = ["attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
              "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]


def perturbing_tensor(name, D, rng):
    """A random block whose writes into the residual stream are scaled by PERTURBATION."""
    shape = {"c_attn": (D, 3 * D), "c_fc": (D, 4 * D), "c_proj": (4 * D if "mlp" in name else D, D)}[name.split(".")[1]]
    if name.endswith(".bias"):
        return np.zeros(shape[1], np.float32)
    scale = 0.02 * (PERTURBATION if "c_proj" in name else 1.0)
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)


def write_model(model_dir, shape, tensor):
    """A complete checkpoint directory, written under a temporary name and renamed at the end."""
    parent = os.path.dirname(os.path.abspath(model_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".writing-", dir=parent)
    try:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config(shape), f, indent=2)
        shapes = checkpoint.expected_shapes(config(shape))
        checkpoint.save_safetensors(os.path.join(tmp, "model.safetensors"), shapes, tensor,
                                    progress=f"writing {os.path.basename(model_dir)}")
        for name in ("vocab.json", "merges.txt"):
            shutil.copyfile(os.path.join(TOKENIZER_DIR, name), os.path.join(tmp, name))
        try:
            os.rename(tmp, model_dir)
        except OSError:
            if not os.path.isfile(os.path.join(model_dir, "model.safetensors")):
                raise
            # another process wrote the same (seeded) model first: keep theirs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build_pair(models_dir):
    """Write models_dir/demo-draft and models_dir/demo-oracle unless they are there; return their paths."""
    draft_dir, oracle_dir = (os.path.join(models_dir, name) for name in DEMO_NAMES)
    if os.path.isdir(draft_dir) and os.path.isdir(oracle_dir):
        return draft_dir, oracle_dir
    draft = draft_tensors()  # the oracle is made from them too
    if not os.path.isdir(draft_dir):
        write_model(draft_dir, DRAFT, draft.__getitem__)
    if not os.path.isdir(oracle_dir):
        print("writing the offline demo pair (random weights, 0.9 GB, and as much again for its fast-layout copy; once)", file=sys.stderr)
        q = embedding(DRAFT["n_embd"], ORACLE["n_embd"])
        write_model(oracle_dir, ORACLE, lambda key: oracle_tensor(key, draft, q))
    return draft_dir, oracle_dir
