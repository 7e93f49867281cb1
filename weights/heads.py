"""Reading a drafting head: the weights workbench/tools/train_heads.py trains on an oracle's own states.

A head lives in a directory of its own (config.json + model.safetensors), inside the directory of the
model it was trained on: ORACLE/heads/eagle, ORACLE/heads/medusa, ORACLE/heads/exit for the oracle's
drafters, DRAFT/heads/accept for SpecDec++'s acceptance head, which reads the draft's states
(tools/train_acceptance_head.py, beyond/specdec_pp.py). Its config.json
says which head it is and the oracle's shapes; every tensor's name and shape is checked against them before
any is read, and every value is finite (checkpoint.check_finite), as weights/checkpoint.py checks a model.
beyond/ gets the tensors as float32 arrays.
"""

import json
import os

import numpy as np

from weights import checkpoint, reading
from weights.checkpoint import CheckpointError

HEADS = ("eagle", "medusa", "exit")  # the heads there are for an oracle, each read by its module in beyond/
DRAFT_HEADS = ("accept",)  # ... and for a draft (beyond/specdec_pp.py)
MAX_MEDUSA_HEADS = 8
MAX_ACCEPT_LAYERS = 8


def head_dir(oracle_dir, head):
    return os.path.join(oracle_dir, "heads", head)


def block_shapes(prefix, d):
    """One GPT-2 block's tensors, by the checkpoint's names (gpt2.block runs them)."""
    return {f"{prefix}ln_1.weight": (d,), f"{prefix}ln_1.bias": (d,),
            f"{prefix}attn.c_attn.weight": (d, 3 * d), f"{prefix}attn.c_attn.bias": (3 * d,),
            f"{prefix}attn.c_proj.weight": (d, d), f"{prefix}attn.c_proj.bias": (d,),
            f"{prefix}ln_2.weight": (d,), f"{prefix}ln_2.bias": (d,),
            f"{prefix}mlp.c_fc.weight": (d, 4 * d), f"{prefix}mlp.c_fc.bias": (4 * d,),
            f"{prefix}mlp.c_proj.weight": (4 * d, d), f"{prefix}mlp.c_proj.bias": (d,)}


def expected_shapes(config, d):
    head = config["head"]
    if head == "eagle":  # fc maps [embedding, feature] back to the width; then one block
        return {"fc.weight": (2 * d, d), "fc.bias": (d,), **block_shapes("h.0.", d)}
    if head == "medusa":  # one residual block a head
        return {f"medusa.{k}.{leaf}": shape for k in range(config["n_heads"])
                for leaf, shape in (("weight", (d, d)), ("bias", (d,)))}
    if head == "accept":  # SpecDec++'s residual blocks, then two logits (rejected, accepted)
        return {**{f"accept.h.{k}.{leaf}": shape for k in range(config["n_layers"])
                   for leaf, shape in (("weight", (d, d)), ("bias", (d,)))},
                "accept.out.weight": (d, 2), "accept.out.bias": (2,)}
    # exit: Kangaroo's adapter, an attention layer and its layer norm
    return {key.replace("h.0.", "adapter."): shape for key, shape in block_shapes("h.0.", d).items()
            if "mlp" not in key and "ln_2" not in key}


def load_config(path, head, oracle):
    try:
        config = json.loads(reading.read_text(path, "config.json"))
    except reading.ReadError as e:
        raise CheckpointError(str(e)) from None
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{reading.shown(path)}: cannot read it as JSON ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(config, dict) or config.get("head") != head:
        raise CheckpointError(f"{reading.shown(path)}: not the config of {head} heads")
    def whole(name, low, high):
        value = config.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise CheckpointError(f"{reading.shown(path)}: {name} must be a whole number from {low} to {high}, got {value!r}")
    whole("n_embd", oracle.n_embd, oracle.n_embd)  # trained on this oracle's width, or not for it
    whole("n_head", 1, oracle.n_embd)
    if oracle.n_embd % config["n_head"]:
        raise CheckpointError(f"{reading.shown(path)}: n_head {config['n_head']} does not divide the width {oracle.n_embd}")
    eps = config.get("layer_norm_epsilon")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 1e-12 <= eps <= 1:
        raise CheckpointError(f"{reading.shown(path)}: layer_norm_epsilon must be a small positive number, got {eps!r}")
    if head == "medusa":
        whole("n_heads", 1, MAX_MEDUSA_HEADS)
    if head == "exit":
        whole("exit_layer", 1, oracle.n_layer - 1)
    if head == "accept":
        whole("n_layers", 1, MAX_ACCEPT_LAYERS)
    return config


def load(oracle_dir, head, oracle):
    """(config, {name: float32 array}) of the head named `head` trained for `oracle`, read from oracle_dir/heads/HEAD
    (for an accept head, `oracle` is the draft whose states it reads, and oracle_dir the draft's directory)."""
    if head not in HEADS + DRAFT_HEADS:
        raise CheckpointError(f"no head {head!r}; the heads are {', '.join(HEADS + DRAFT_HEADS)}")
    directory = head_dir(oracle_dir, head)
    if not os.path.isdir(directory):
        trainer = ("workbench/tools/train_acceptance_head.py trains it" if head in DRAFT_HEADS else
                   "workbench/tools/train_heads.py trains them")
        raise CheckpointError(f"{reading.shown(oracle_dir)} has no {head} head (heads/{head}); "
                              f"python demo.py writes the learned pair's, {trainer}")
    config = load_config(os.path.join(directory, "config.json"), head, oracle)
    path = os.path.join(directory, "model.safetensors")
    entries, _, data = checkpoint.open_safetensors(path)
    expected = expected_shapes(config, oracle.n_embd)
    if set(entries) != set(expected):
        missing, extra = sorted(set(expected) - set(entries)), sorted(set(entries) - set(expected))
        raise CheckpointError(f"{reading.shown(path)}: not the tensors of {head} heads "
                              f"(missing {', '.join(missing[:3]) or 'none'}; unexpected {', '.join(extra[:3]) or 'none'})")
    tensors = {}
    for name, entry in entries.items():
        if tuple(entry[1]) != expected[name]:
            raise CheckpointError(f"{reading.shown(path)}: tensor {name} has shape {list(entry[1])}, "
                                  f"expected {list(expected[name])}")
        tensors[name] = np.array(checkpoint.tensor_view(path, name, data, entry), dtype=np.float32)
        checkpoint.check_finite(path, name, tensors[name])
    return config, tensors
