"""GPT-2 in NumPy: the forward pass, float32 throughout, with a KV cache.

Read top-down: small functions, one concept each (gelu, softmax, layer_norm,
linear, attention, mha, mlp, block), then the GPT2 class that runs them.
Parameter names follow the Hugging Face checkpoint keys (wte, wpe,
h.{i}.ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, ln_f), so
every array can be traced back to the file.

This file is the model and nothing else: it imports NumPy (and contextlib
and os). The KV cache (kvcache.py) is handed to forward by its caller, never
imported here; from_pretrained imports weights/ when it is called, to read the
files. `x @ w + b` below is NumPy's matrix product on the arrays the model was
given. Reading a checkpoint is weights/checkpoint.py's job (from_pretrained
hands over to it), and making the products fast is speed/accelerate.py's: it
gives the same class its weights in a blocked layout, where `x @ w` runs a
faster product for a few rows (the same logits to about 1e-5); build the params
yourself in NumPy (see nest) and this file runs them as they are.

Sources: Radford et al. 2019, "Language Models are Unsupervised Multitask
Learners"; OpenAI's gpt-2 model.py; jaymody/picoGPT for the style.
"""

import contextlib
import os

import numpy as np

GELU_C = np.float32(np.sqrt(2 / np.pi))
MASKED = np.float32(-1e10)  # added to the scores of future positions: exp() makes it 0


# ---------------------------------------------------------------------------
# The layers
# ---------------------------------------------------------------------------

def gelu(x):  # [..., n] -> [..., n]
    # GPT-2 uses the tanh approximation. x * x * x, not x ** 3: NumPy's float32
    # power of negative numbers falls back to a slow general pow.
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x * x * x)))


def softmax(x):  # [..., n] -> [..., n]
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # minus the max: no overflow
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x, g, b, eps):  # [n_seq, n_embd] -> [n_seq, n_embd]
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered * centered).mean(axis=-1, keepdims=True)  # x.var() would centre x again
    return g * centered / np.sqrt(variance + eps) + b


def linear(x, w, b):  # [n_seq, n_in] @ [n_in, n_out] + [n_out] -> [n_seq, n_out]
    return x @ w + b


def attention(q, k, v, mask):
    # q [n_head, n_q, head_dim], k and v [n_head, n_kv, head_dim], mask [n_q, n_kv] or None
    # -> [n_head, n_q, head_dim] (a batch: each with a leading [n_rows], the mask [n_rows, 1, n_q, n_kv])
    # Scaling q rather than the scores is the same product on the smaller array.
    scores = (q / np.sqrt(np.float32(q.shape[-1]))) @ k.swapaxes(-1, -2)  # [n_head, n_q, n_kv]
    if mask is not None:  # None: every query may see every key (one new token)
        scores = scores + mask
    return softmax(scores) @ v


def causal_mask(n_q, n_kv):  # -> [n_q, n_kv]
    # The n_q new tokens sit at positions n_kv - n_q ... n_kv - 1 and may look
    # at every cached position and at new positions up to their own.
    future = np.triu(np.ones((n_q, n_kv), dtype=bool), k=n_kv - n_q + 1)
    return np.where(future, MASKED, np.float32(0))


def batch_mask(lengths, n_q):  # [n_rows] -> [n_rows, 1, n_q, max(lengths) + n_q]
    # A batch (batch.py): row b holds lengths[b] cached positions and its n_q new tokens follow
    # them, so new token t of row b sits at lengths[b] + t and may see every key up to there.
    # That hides the row's future and whatever lies past its own end (a longer row's positions).
    seen = lengths[:, None, None] + np.arange(n_q)[:, None]  # [n_rows, n_q, 1]: the last key each query sees
    future = np.arange(lengths.max() + n_q) > seen  # [n_rows, n_q, n_kv]
    return np.where(future, MASKED, np.float32(0))[:, None]  # the same for every head


def mha(x, attn, n_head, kvcache, layer, mask):  # [n_seq, n_embd] -> [n_seq, n_embd]
    # (A batch, batch.py: [n_rows, n_seq, n_embd], and every shape below with [n_rows] in front.)
    *rows, n_seq, n_embd = x.shape
    qkv = linear(x, attn["c_attn"]["weight"], attn["c_attn"]["bias"])  # [n_seq, 3 * n_embd]
    # [n_seq, 3 * n_embd] -> 3 x [n_head, n_seq, head_dim]: q, k, v side by side, each cut into heads
    q, k, v = np.moveaxis(qkv.reshape(*rows, n_seq, 3, n_head, -1), (-3, -4), (0, -2))
    if kvcache is not None:
        k, v = kvcache.append(layer, k, v)  # now [n_head, n_cached + n_seq, head_dim]
    out = attention(q, k, v, mask)  # [n_head, n_seq, head_dim]
    out = out.swapaxes(-2, -3).reshape(*rows, n_seq, n_embd)  # merge the heads
    return linear(out, attn["c_proj"]["weight"], attn["c_proj"]["bias"])


def mlp(x, mlp_params):  # [n_seq, n_embd] -> [n_seq, n_embd]
    c_fc, c_proj = mlp_params["c_fc"], mlp_params["c_proj"]
    h = gelu(linear(x, c_fc["weight"], c_fc["bias"]))  # [n_seq, 4 * n_embd]
    return linear(h, c_proj["weight"], c_proj["bias"])


def block(x, params, n_head, eps, kvcache, layer, mask):  # [n_seq, n_embd] -> [n_seq, n_embd]
    # Pre-norm residual block, as in GPT-2. params: this layer's h.{layer}.* weights.
    ln_1, ln_2 = params["ln_1"], params["ln_2"]
    x = x + mha(layer_norm(x, ln_1["weight"], ln_1["bias"], eps), params["attn"], n_head, kvcache, layer, mask)
    x = x + mlp(layer_norm(x, ln_2["weight"], ln_2["bias"], eps), params["mlp"])
    return x


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------

class GPT2:
    def __init__(self, params, config, name="gpt2", directory=None):
        self.params = params  # nested dict following the checkpoint keys
        self.name, self.directory = name, directory  # directory: where from_pretrained read it (weights/heads.py)
        self.n_layer = config["n_layer"]
        self.n_head = config["n_head"]
        self.n_embd = config["n_embd"]
        self.n_positions = config["n_positions"]
        self.vocab_size = config["vocab_size"]
        self.eps = np.float32(config["layer_norm_epsilon"])

    def forward(self, ids, kvcache=None, positions=None, mask=None, n_logits=None):
        """Logits for the last n_logits tokens of `ids` (all of them by default): float32 [n_logits, vocab_size].

        hidden_states, then logits on the rows asked for (the LM head is a big
        product: a prompt needs one row). The arguments are hidden_states'.
        """
        x = self.hidden_states(ids, kvcache, positions, mask)  # [len(ids), n_embd]
        return self.logits(x[-(n_logits or len(x)):])

    def hidden_states(self, ids, kvcache=None, positions=None, mask=None):
        """The last block's output for each token of `ids`, before ln_f: float32 [len(ids), n_embd]
        (EAGLE's "feature", beyond/eagle.py).

        With a kvcache, `ids` are only the tokens after the kvcache.n_tokens()
        cached ones: their positions continue from there and their keys and
        values are appended to the cache. `positions` and `mask` override the
        default consecutive positions and causal mask (a draft tree needs both:
        positions are depths, and each node sees only its ancestors).
        """
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        n_cached = 0 if kvcache is None else kvcache.n_tokens()
        if ids.size == 0:
            raise ValueError("forward needs at least one token")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"token ids must be in [0, {self.vocab_size}), got {ids.min()}..{ids.max()}")
        positions = np.arange(n_cached, n_cached + ids.size) if positions is None else np.asarray(positions)
        if positions.max() >= self.n_positions:
            raise ValueError(f"position {positions.max()} is past {self.name}'s context window of {self.n_positions}")

        p = self.params
        x = p["wte"][ids] + p["wpe"][positions]  # [n_seq, n_embd]
        return self.blocks(x, kvcache, mask)

    def blocks(self, x, kvcache=None, mask=None):  # [n_seq, n_embd] -> [n_seq, n_embd]
        """Every block, in order, over the rows x that follow the kvcache's positions.

        hidden_states is the embeddings, then this. A model whose params hold only some
        of another's blocks runs them on hidden states this way (beyond/self_speculative.py
        verifies from layer L on).
        """
        # The causal mask is built once here rather than in each of the n_layer
        # attentions; a single new token may see every position, so it needs none.
        if mask is None and len(x) > 1:
            n_cached = 0 if kvcache is None else kvcache.n_tokens()
            mask = causal_mask(len(x), n_cached + len(x))
        for layer, layer_params in enumerate(self.params["h"]):
            x = block(x, layer_params, self.n_head, self.eps, kvcache, layer, mask)
        if kvcache is not None:
            kvcache.commit(x.shape[-2])
        return x

    def forward_batch(self, ids, kvcache, n_new, n_logits=1):
        """A batch of sequences at once (batch.py): logits [n_rows, n_logits, vocab_size] after the last
        n_logits new tokens of each row.

        ids [n_rows, n_seq]: row b's next n_new[b] tokens, then padding (any token) up to n_seq, after
        the kvcache.lengths[b] positions its row of kvcache (a kvcache.BatchKVCache) holds. Every row
        runs through the same products; the mask keeps each row to its own positions.
        """
        ids, n_new = np.asarray(ids, dtype=np.int64), np.asarray(n_new, dtype=np.int64)
        n_rows, n_seq = ids.shape
        if n_new.min() < n_logits or n_new.max() > n_seq:
            raise ValueError(f"each row needs {n_logits} to {n_seq} new tokens, got {n_new.tolist()}")
        lengths = kvcache.n_tokens()
        # Each row's positions continue its own; padding repeats its row's first new position (its
        # output is never read) so that no padding can pass the window.
        positions = lengths[:, None] + np.minimum(np.arange(n_seq), n_new[:, None] - 1)  # [n_rows, n_seq]
        if positions.max() >= self.n_positions:
            raise ValueError(f"position {positions.max()} is past {self.name}'s context window of {self.n_positions}")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"token ids must be in [0, {self.vocab_size}), got {ids.min()}..{ids.max()}")
        with self.rows(ids.size):
            x = self.params["wte"][ids.reshape(-1)].reshape(n_rows, n_seq, -1) + self.params["wpe"][positions]
            x = self.blocks(x, kvcache, batch_mask(lengths, n_seq))  # [n_rows, n_seq, n_embd]
            kvcache.truncate(lengths + n_new)  # the padding's keys went in too: each row counts its own tokens
            last = n_new[:, None] - n_logits + np.arange(n_logits)  # [n_rows, n_logits]: each row's last new tokens
            x = x[np.arange(n_rows)[:, None], last]  # [n_rows, n_logits, n_embd]
            return self.logits(x.reshape(n_rows * n_logits, -1)).reshape(n_rows, n_logits, -1)

    def logits(self, x):  # [n_rows, n_embd] -> [n_rows, vocab_size]
        """The final layer norm ln_f, then the LM head, tied to the token embedding wte."""
        p = self.params
        return layer_norm(x, p["ln_f"]["weight"], p["ln_f"]["bias"], self.eps) @ p["wte"].T

    def rows(self, n_rows):
        """A context for running n_rows rows through the blocks outside forward(); the plain model needs
        none (speed/accelerate.py's FastGPT2 sets the BLAS's threads there)."""
        return contextlib.nullcontext()

    @classmethod
    def from_pretrained(cls, name_or_path, models_dir=None):
        """Load a model by name (gpt2, gpt2-medium, gpt2-large, gpt2-xl) or from a
        directory in the Hugging Face layout (config.json + model.safetensors).

        A name is looked up in models_dir (default: models/ beside this file)
        and downloaded there on first use. The weights are float32 arrays: an F32
        checkpoint's are read-only views of the memory-mapped file (not copied),
        an F16 or BF16 one's are widened copies in memory (the demo pair is F16).
        NumPy's own `@` runs them; for the fast layout, see speed/accelerate.py.
        """
        from weights import checkpoint, models  # reading files is not the model's job: the weights package's
        model_dir = models.resolve_model_dir(name_or_path, models_dir)
        config, tensors = checkpoint.load(model_dir)
        return cls(nest(tensors), config, name=os.path.basename(os.path.normpath(model_dir)), directory=model_dir)


def nest(tensors):
    """'h.3.attn.c_attn.weight' -> params['h'][3]['attn']['c_attn']['weight']."""
    params = {}
    for key, t in tensors.items():
        *path, leaf = key.split(".")
        node = params
        for part, after in zip(path, path[1:] + [leaf]):
            if part.isdigit():
                node.extend({} for _ in range(int(part) + 1 - len(node)))
                node = node[int(part)]
            else:
                node = node.setdefault(part, [] if after.isdigit() else {})
        node[leaf] = t
    for name in ("wte", "wpe"):  # a model's; a drafting head (beyond/) has neither
        if name in params:
            params[name] = params[name]["weight"]
    return params
