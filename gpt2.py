"""GPT-2 in NumPy: the forward pass, float32 throughout, with a KV cache.

Read top-down: small functions, one concept each (gelu, softmax, layer_norm,
linear, attention, mha, mlp, block), then the GPT2 class that loads a
checkpoint and runs them. Parameter names follow the Hugging Face checkpoint
keys (wte, wpe, h.{i}.ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
mlp.c_proj, ln_f), so every array can be traced back to the file.

Sources: Radford et al. 2019, "Language Models are Unsupervised Multitask
Learners"; OpenAI's gpt-2 model.py; jaymody/picoGPT for the style.
"""

import json
import os

import numpy as np

import download_weights
from download_weights import DEFAULT_MODELS_DIR, MODEL_NAMES
from kvcache import KVCache

GELU_C = np.float32(np.sqrt(2 / np.pi))
MASKED = np.float32(-1e10)  # added to the scores of future positions: exp() makes it 0


class CheckpointError(Exception):
    """A checkpoint that is missing, truncated, corrupt or does not match its config."""


# ---------------------------------------------------------------------------
# The layers
# ---------------------------------------------------------------------------

def gelu(x):  # [..., n] -> [..., n]
    # GPT-2 uses the tanh approximation. x * x * x, not x ** 3: NumPy's float32
    # power of negative numbers falls back to a slow general pow (~100x).
    return 0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x * x * x)))


def softmax(x):  # [..., n] -> [..., n]
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # minus the max: no overflow
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x, g, b, eps):  # [n_seq, n_embd] -> [n_seq, n_embd]
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(variance + eps) + b


def linear(x, w, b):  # [n_seq, n_in] @ [n_in, n_out] + [n_out] -> [n_seq, n_out]
    # GPT-2's Conv1D stores the weight as [n_in, n_out], so this is x @ w.
    return x @ w + b


def attention(q, k, v, mask):
    # q [n_head, n_q, head_dim], k and v [n_head, n_kv, head_dim], mask [n_q, n_kv]
    # -> [n_head, n_q, head_dim]
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(np.float32(q.shape[-1]))
    return softmax(scores + mask) @ v


def causal_mask(n_q, n_kv):  # -> [n_q, n_kv]
    # The n_q new tokens sit at positions n_kv - n_q ... n_kv - 1 and may look
    # at every cached position and at new positions up to their own.
    future = np.triu(np.ones((n_q, n_kv), dtype=bool), k=n_kv - n_q + 1)
    return np.where(future, MASKED, np.float32(0))


def mha(x, attn, n_head, kvcache, layer, mask):  # [n_seq, n_embd] -> [n_seq, n_embd]
    n_seq, n_embd = x.shape
    qkv = linear(x, attn["c_attn"]["weight"], attn["c_attn"]["bias"])  # [n_seq, 3 * n_embd]
    # [n_seq, n_embd] -> [n_head, n_seq, head_dim] for each of q, k, v
    q, k, v = (m.reshape(n_seq, n_head, -1).transpose(1, 0, 2) for m in np.split(qkv, 3, axis=-1))
    if kvcache is not None:
        k, v = kvcache.append(layer, k, v)  # now [n_head, n_cached + n_seq, head_dim]
    if mask is None:
        mask = causal_mask(n_seq, k.shape[1])
    out = attention(q, k, v, mask)  # [n_head, n_seq, head_dim]
    out = out.transpose(1, 0, 2).reshape(n_seq, n_embd)  # merge the heads
    return linear(out, attn["c_proj"]["weight"], attn["c_proj"]["bias"])


def mlp(x, mlp_params):  # [n_seq, n_embd] -> [n_seq, n_embd]
    c_fc, c_proj = mlp_params["c_fc"], mlp_params["c_proj"]
    h = gelu(linear(x, c_fc["weight"], c_fc["bias"]))  # [n_seq, 4 * n_embd]
    return linear(h, c_proj["weight"], c_proj["bias"])


def block(x, h, n_head, eps, kvcache, layer, mask):  # [n_seq, n_embd] -> [n_seq, n_embd]
    # Pre-norm residual block, as in GPT-2.
    x = x + mha(layer_norm(x, h["ln_1"]["weight"], h["ln_1"]["bias"], eps), h["attn"], n_head, kvcache, layer, mask)
    x = x + mlp(layer_norm(x, h["ln_2"]["weight"], h["ln_2"]["bias"], eps), h["mlp"])
    return x


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------

class GPT2:
    def __init__(self, params, config, name="gpt2"):
        self.params = params  # nested dict following the checkpoint keys
        self.name = name
        self.n_layer = config["n_layer"]
        self.n_head = config["n_head"]
        self.n_embd = config["n_embd"]
        self.n_positions = config["n_positions"]
        self.vocab_size = config["vocab_size"]
        self.eps = np.float32(config["layer_norm_epsilon"])

    def forward(self, ids, kvcache=None, positions=None, mask=None):
        """Logits for each token of `ids`: float32 [len(ids), vocab_size].

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
        for layer, h in enumerate(p["h"]):
            x = block(x, h, self.n_head, self.eps, kvcache, layer, mask)
        if kvcache is not None:
            kvcache.commit(ids.size)
        x = layer_norm(x, p["ln_f"]["weight"], p["ln_f"]["bias"], self.eps)
        return x @ p["wte"].T  # the LM head is tied to the token embedding: [n_seq, vocab_size]

    def new_cache(self):
        return KVCache()

    @classmethod
    def from_pretrained(cls, name_or_path, models_dir=None):
        """Load a model by name (gpt2, gpt2-medium, gpt2-large, gpt2-xl) or from a
        directory in the Hugging Face layout (config.json + model.safetensors).

        A name is looked up in models_dir (default: models/ beside this file)
        and downloaded there on first use.
        """
        model_dir = resolve_model_dir(name_or_path, models_dir)
        config = load_config(model_dir)
        tensors = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        params = gpt2_params(tensors, config, os.path.join(model_dir, "model.safetensors"))
        return cls(params, config, name=os.path.basename(os.path.normpath(model_dir)))


# ---------------------------------------------------------------------------
# Loading a checkpoint
# ---------------------------------------------------------------------------

def resolve_model_dir(name_or_path, models_dir=None):
    """A checkpoint directory for a model name or path, downloading a named model if needed."""
    if os.path.isdir(name_or_path):
        for f in ("config.json", "model.safetensors"):
            if not os.path.isfile(os.path.join(name_or_path, f)):
                raise CheckpointError(f"{name_or_path} has no {f}: a model directory needs config.json and model.safetensors")
        return name_or_path
    if name_or_path not in MODEL_NAMES:
        raise CheckpointError(f"unknown model {name_or_path!r}: use one of {', '.join(MODEL_NAMES)} or a directory with config.json and model.safetensors")
    return download_weights.download(name_or_path, models_dir or DEFAULT_MODELS_DIR)


def load_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot read it as JSON ({e})") from None
    config = {"n_positions": raw.get("n_positions", raw.get("n_ctx")), "layer_norm_epsilon": raw.get("layer_norm_epsilon", 1e-5)}
    for key in ("n_layer", "n_head", "n_embd", "vocab_size"):
        config[key] = raw.get(key)
    missing = [k for k, v in config.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if missing:
        raise CheckpointError(f"{path}: missing or not a number: {', '.join(missing)}")
    if config["n_embd"] % config["n_head"]:
        raise CheckpointError(f"{path}: n_embd {config['n_embd']} is not a multiple of n_head {config['n_head']}")
    return config


SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def load_safetensors(path):
    """Read a .safetensors file into a {name: array} dict without copying it.

    The file is memory-mapped: the arrays are read-only views of the pages of
    the file, so a 6.4 GB checkpoint does not need 12.8 GB of RAM to load.
    Format: 8-byte little-endian header length, a JSON header giving each
    tensor's dtype, shape and byte range, then the raw data.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        n_header = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < n_header <= 100_000_000:  # real headers are kilobytes; text or HTML gives nonsense here
            raise CheckpointError(f"{path}: not a safetensors file (bad header length; the file has {size} bytes)")
        if n_header > size - 8:
            raise CheckpointError(f"{path}: truncated: its header needs {8 + n_header} bytes but the file has {size}")
        try:
            header = json.loads(f.read(n_header))
        except ValueError:
            raise CheckpointError(f"{path}: corrupt safetensors header (not valid JSON)") from None
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n_header) if size > 8 + n_header else np.zeros(0, np.uint8)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = SAFETENSORS_DTYPES.get(info["dtype"]), tuple(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: corrupt safetensors header entry for {name}") from None
        if dtype is None:
            raise CheckpointError(f"{path}: tensor {name} has dtype {info['dtype']}; supported: {', '.join(SAFETENSORS_DTYPES)}")
        if end > data.size:
            raise CheckpointError(f"{path}: truncated: tensor {name} ends at byte {8 + n_header + end} but the file has {size} bytes")
        if end - begin != int(np.prod(shape)) * np.dtype(dtype).itemsize:
            raise CheckpointError(f"{path}: tensor {name} has {end - begin} bytes, not what shape {list(shape)} of {info['dtype']} needs")
        tensors[name] = data[begin:end].view(dtype).reshape(shape)
        if info["dtype"] != "F32":  # half-precision checkpoints: widen to float32 (a copy)
            tensors[name] = to_float32(tensors[name], info["dtype"])
    return tensors


def to_float32(a, dtype_name):
    if dtype_name == "BF16":  # bfloat16 is the top half of a float32
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def expected_shapes(config):
    """{checkpoint key: shape} of every tensor GPT-2 needs, from config.json."""
    d, v, n_pos = config["n_embd"], config["vocab_size"], config["n_positions"]
    shapes = {"wte.weight": (v, d), "wpe.weight": (n_pos, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(config["n_layer"]):
        for key, shape in {
            "ln_1.weight": (d,), "ln_1.bias": (d,),
            "attn.c_attn.weight": (d, 3 * d), "attn.c_attn.bias": (3 * d,),
            "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
            "ln_2.weight": (d,), "ln_2.bias": (d,),
            "mlp.c_fc.weight": (d, 4 * d), "mlp.c_fc.bias": (4 * d,),
            "mlp.c_proj.weight": (4 * d, d), "mlp.c_proj.bias": (d,),
        }.items():
            shapes[f"h.{i}.{key}"] = shape
    return shapes


def gpt2_params(tensors, config, path):
    """Check the tensors against config.json and nest them by checkpoint key:
    'h.3.attn.c_attn.weight' -> params['h'][3]['attn']['c_attn']['weight']."""
    # GPT2LMHeadModel checkpoints prefix every key with 'transformer.'; GPT2Model ones do not.
    tensors = {k.removeprefix("transformer."): t for k, t in tensors.items()}
    params = {"h": [{} for _ in range(config["n_layer"])]}
    for key, shape in expected_shapes(config).items():
        if key not in tensors:
            raise CheckpointError(f"{path}: tensor {key} is missing (config.json says n_layer={config['n_layer']})")
        if tensors[key].shape != shape:
            raise CheckpointError(f"{path}: tensor {key} has shape {list(tensors[key].shape)}, config.json implies {list(shape)}")
        *path_keys, leaf = key.split(".")
        node = params
        for k in path_keys:
            node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
        node[leaf] = tensors[key]
    params["wte"], params["wpe"] = params["wte"]["weight"], params["wpe"]["weight"]
    return params


# ---------------------------------------------------------------------------
# Writing checkpoints (random weights for tests and benchmarks)
# ---------------------------------------------------------------------------

def save_safetensors(path, tensors):
    """Write {name: float32 array} as a .safetensors file, via a temporary name."""
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # data starts 8-byte aligned
    with open(path + ".tmp", "wb") as f:
        f.write(len(header_bytes).to_bytes(8, "little") + header_bytes)
        for t in tensors.values():
            np.ascontiguousarray(t, dtype=np.float32).tofile(f)
    os.replace(path + ".tmp", path)


def random_checkpoint(model_dir, config, seed=0, scale=0.02):
    """A GPT-2 checkpoint of the given config.json shapes with random weights.

    The compute cost of a forward does not depend on the values, so these
    stand in for the real weights in benchmarks; tests use a larger `scale`
    so that tiny models have confident, non-tied predictions.
    """
    rng = np.random.default_rng(seed)
    config = {"layer_norm_epsilon": 1e-5, **config}
    tensors = {}
    for key, shape in expected_shapes(config).items():
        if key.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            tensors[key] = np.ones(shape, dtype=np.float32)
        else:
            tensors[key] = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", **config}, f, indent=2)
    save_safetensors(os.path.join(model_dir, "model.safetensors"), tensors)
    return model_dir
