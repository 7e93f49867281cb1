"""Self-speculation through an exit that was trained: Kangaroo's adapter (Liu, Hu, Li, Zhang, Wang, Tang,
arXiv 2404.18911).

beyond/self_speculative.py drafts with the oracle's first L layers, then its final layer norm ln_f and
LM head. GPT-2 was never trained to answer from layer L, so that early answer is often not the one the
full oracle gives. Kangaroo keeps the oracle frozen and trains a small adapter, one attention layer
with its layer norm and a residual, that maps the state after layer L to what ln_f and the LM head
expect:

    a_t = x_t + attn(ln_1(x_t))          x_t: the oracle's state after its block L-1 (its "shallow
    draft x_(t+1) = argmax of logits(a_t)     sub-network"); logits: the oracle's own ln_f and LM head

workbench/tools/train_heads.py trains it on the oracle's own distribution at every position (cross-entropy,
the oracle frozen); docs/LEARNED_PAIR.md gives its held-out agreement beside the untrained exit's.
The attention needs the keys and values of every earlier position, so the adapter keeps a cache of
its own, fed and rolled back with the draft's.

Everything else is self_speculative.py's rounds, unchanged: the draft's layers 0..L-1 share their
cache with the oracle's, verification runs the oracle's layers L.. over the draft's hidden rows, and a
draft is kept only if the full oracle chooses it, so the output is exactly the oracle's greedy output.
Kangaroo also stops drafting early when the adapter's confidence falls (its "double early exit");
here the draft length is fixed, as in self_speculative.py, so the two exits compare at the same length.
"""

import numpy as np

from beyond.self_speculative import early_exit_draft, rounds
from decoding import GenerationError, check_lengths, check_room
from stats import Stats
from gpt2 import causal_mask, layer_norm, mha


class ExitAdapter:
    """ln_1 and one attention layer, the weights workbench/tools/train_heads.py exports ("adapter.*");
    weights/heads.py reads them (params: gpt2.nest of its tensors)."""

    def __init__(self, params, config, oracle):
        if config.get("head") != "exit" or config.get("n_embd") != oracle.n_embd:
            raise GenerationError(f"this is not an exit adapter for a model of width {oracle.n_embd}")
        if not 1 <= config.get("exit_layer", 0) < oracle.n_layer:
            raise GenerationError(f"the adapter's exit layer must be from 1 to {oracle.n_layer - 1}")
        self.params, self.oracle = params["adapter"], oracle
        self.n_head, self.eps = config["n_head"], np.float32(config["layer_norm_epsilon"])
        self.exit_layer = config["exit_layer"]  # L: it reads the state after the oracle's first L blocks

    def forward(self, x, cache):  # [n, n_embd] -> [n, n_embd]: the state the oracle's ln_f and LM head read
        """x + attn(ln_1(x)) over the rows after the positions in cache (their keys and values join it)."""
        n = len(x)
        mask = causal_mask(n, cache.n_tokens() + n) if n > 1 else None
        ln_1 = self.params["ln_1"]
        x = x + mha(layer_norm(x, ln_1["weight"], ln_1["bias"], self.eps), self.params["attn"], self.n_head, cache, 0, mask)
        cache.commit(n)
        return x


def early_exit_generate(adapter, oracle, ids, n_new, n_draft=4, stats=None):
    """Greedy self-speculative decoding through the trained exit: yields exactly
    greedy_generate(oracle, ids, n_new)'s tokens. The draft is the oracle's layers 0..L-1 (L the
    adapter's exit_layer), the adapter, ln_f and the LM head. The checks run at the call."""
    check_room(ids, n_new, oracle)
    check_lengths(n_draft=n_draft)
    if adapter.oracle is not oracle:
        raise GenerationError("the exit adapter was loaded for another oracle")
    if min(ids) < 0 or max(ids) >= oracle.vocab_size:
        raise GenerationError(f"token ids must be in [0, {oracle.vocab_size}), got {min(ids)}..{max(ids)}")
    draft = early_exit_draft(oracle, adapter.exit_layer)
    return rounds(draft, oracle, list(ids), n_new, n_draft, Stats() if stats is None else stats, adapter=adapter)
