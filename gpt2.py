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
import mmap
import os
import sys
from concurrent.futures import ThreadPoolExecutor

# OpenBLAS reads this once, when NumPy loads it, so it is set before `import
# numpy` here, and the scripts import gpt2 before NumPy. Why: see "The matmul
# strategy" below. A value already in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")

import numpy as np  # noqa: E402 (after the line above)
from tqdm import tqdm

import download_weights
from download_weights import DEFAULT_MODELS_DIR, MODEL_NAMES

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
    # The variance from the centred x we need anyway (x.var() would centre it again):
    # decoding runs 2 * n_layer of these per token between the weight streams.
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return g * centered / np.sqrt(variance + eps) + b


def linear(x, w, b):  # [n_seq, n_in] -> [n_seq, n_out]
    # x @ W + b, with W held in blocks of its transpose (see matmul below).
    return matmul(x, w)[:, :b.shape[0]] + b


def attention(q, k, v, mask):
    # q [n_head, n_q, head_dim], k and v [n_head, n_kv, head_dim], mask [n_q, n_kv] or None
    # -> [n_head, n_q, head_dim]
    # Scaling q rather than the scores is the same product on the smaller array.
    scores = (q / np.sqrt(np.float32(q.shape[-1]))) @ k.transpose(0, 2, 1)  # [n_head, n_q, n_kv]
    if mask is not None:  # None: every query may see every key (one new token)
        scores = scores + mask
    return softmax(scores) @ v


def causal_mask(n_q, n_kv):  # -> [n_q, n_kv]
    # The n_q new tokens sit at positions n_kv - n_q ... n_kv - 1 and may look
    # at every cached position and at new positions up to their own.
    future = np.triu(np.ones((n_q, n_kv), dtype=bool), k=n_kv - n_q + 1)
    return np.where(future, MASKED, np.float32(0))


# ---------------------------------------------------------------------------
# The matmul strategy: the one place that decides how x @ W is computed
# ---------------------------------------------------------------------------
# Decoding multiplies a few rows x by big weight matrices W, so its time is the
# time to stream W from memory, and checking k draft tokens should cost about
# what 1 token costs. It does not with the checkpoint's own [n_in, n_out]
# layout: on this project's 2-core machine OpenBLAS takes 3.4x as long for 8
# rows as for 1 (a general matrix product packs all of W first). So at load
# time every weight is transposed to [n_out, n_in] and cut into blocks of
# BLOCK output rows, stored as [n_out / BLOCK, BLOCK, n_in] (zero-padded):
#   1 row:  one matrix-vector product over all of W; BLAS gemv streams it at
#           the memory bandwidth, using every core;
#   k rows: each block is a small [BLOCK, n_in] @ [n_in, k] product whose
#           operands stay in cache; the blocks are shared out, one share per
#           core, to the calling thread and a pool of Python threads (NumPy
#           releases the GIL inside matmul);
#   many rows (a prompt): one ordinary matrix product; its time is compute,
#           not memory, and BLAS's big-matrix kernels are best at that.
# 8 rows then cost about 1.5x one row. Blocks of 32 measured worse (OpenBLAS
# starts threading inside each product), blocks of 8 too (per-call overhead).
# On gpt2-xl shapes the blocks beat one product up to 24 rows (92 vs 101 ms
# for a quarter of the model) and lose from 32 (203 vs 98 ms).
# Two kinds of threads share the cores, so they must not wait on each other:
# after a threaded product OpenBLAS's own threads busy-wait for the next one,
# by default for 2^28 clock cycles (0.1 s here). A k-row forward right after
# single-token ones, i.e. verification right after drafting, then runs its
# blocks beside a spinning thread: gpt2-xl T(2) 330-346 ms, against 282-297
# ms a moment later. OPENBLAS_THREAD_TIMEOUT=22 (2^22 cycles, 1.6 ms here)
# still spans the gaps between one forward's products (shorter waits cost
# T(1) about 5%: each product then wakes a sleeping thread) and is over before
# the next forward: synthetic gpt2 -> gpt2-xl speculation at alpha 0.8 went
# from 1.31-1.32x to 1.45-1.51x over the oracle alone.
BLOCK = 16
GEMM_MIN_ROWS = 25
THREADED_MIN_SIZE = 1 << 20  # weights of fewer elements (4 MB) are multiplied in the calling thread
N_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_pool = None


def matmul(x, w):  # [n_seq, n_in] @ blocked W [n_blocks, BLOCK, n_in] -> [n_seq, n_blocks * BLOCK]
    n_blocks, block, n_in = w.shape
    if x.shape[0] == 1:
        return (w.reshape(n_blocks * block, n_in) @ x[0])[None, :]
    if x.shape[0] >= GEMM_MIN_ROWS:
        return x @ w.reshape(n_blocks * block, n_in).T
    out = np.empty((n_blocks, block, x.shape[0]), dtype=np.float32)
    xt = x.T  # [n_in, n_seq]
    if w.size < THREADED_MIN_SIZE:  # a small weight: handing it to threads costs more than it saves
        np.matmul(w, xt, out=out)
    else:
        global _pool
        bounds = np.linspace(0, n_blocks, N_THREADS + 1).astype(int)
        mine, *others = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        if others and _pool is None:
            _pool = ThreadPoolExecutor(N_THREADS - 1)
        jobs = [_pool.submit(np.matmul, w[share], xt, out=out[share]) for share in others]
        # The calling thread multiplies its own share rather than wait: one
        # hand-off fewer per product (gpt2-xl, 8 rows: 450-470 -> 436-451 ms).
        np.matmul(w[mine], xt, out=out[mine])
        for job in jobs:
            job.result()
    return out.reshape(n_blocks * block, x.shape[0]).T


def to_blocks(w_t):  # [n_out, n_in] -> [ceil(n_out / BLOCK), BLOCK, n_in], zero rows appended
    n_out, n_in = w_t.shape
    blocks = np.zeros((-(-n_out // BLOCK), BLOCK, n_in), dtype=np.float32)
    for i, start in enumerate(range(0, n_out, BLOCK)):
        # One block at a time: when w_t is a transposed view this strided copy
        # stays in cache, 4x faster than transposing the whole matrix at once.
        blocks[i, :min(BLOCK, n_out - start)] = w_t[start:start + BLOCK]
    return blocks


def mha(x, attn, n_head, kvcache, layer, mask):  # [n_seq, n_embd] -> [n_seq, n_embd]
    n_seq, n_embd = x.shape
    qkv = linear(x, attn["c_attn"]["weight"], attn["c_attn"]["bias"])  # [n_seq, 3 * n_embd]
    # [n_seq, 3 * n_embd] -> 3 x [n_head, n_seq, head_dim]: q, k, v side by side, each cut into heads
    q, k, v = qkv.reshape(n_seq, 3, n_head, -1).transpose(1, 2, 0, 3)
    if kvcache is not None:
        k, v = kvcache.append(layer, k, v)  # now [n_head, n_cached + n_seq, head_dim]
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

    def forward(self, ids, kvcache=None, positions=None, mask=None, n_logits=None):
        """Logits for each token of `ids`: float32 [len(ids), vocab_size].

        With a kvcache, `ids` are only the tokens after the kvcache.n_tokens()
        cached ones: their positions continue from there and their keys and
        values are appended to the cache. n_logits asks for the last n_logits
        rows only (the LM head is a big product: a prompt needs one row).
        `positions` and `mask` override the default consecutive positions and
        causal mask (a draft tree needs both: positions are depths, and each
        node sees only its ancestors).
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

        # The causal mask is built once here rather than in each of the n_layer
        # attentions; a single new token may see every position, so it needs none.
        if mask is None and ids.size > 1:
            mask = causal_mask(ids.size, n_cached + ids.size)
        p = self.params
        wte = p["wte"].reshape(-1, self.n_embd)  # [vocab_size (padded), n_embd], held in blocks for the LM head
        x = wte[ids] + p["wpe"][positions]  # [n_seq, n_embd]
        for layer, h in enumerate(p["h"]):
            x = block(x, h, self.n_head, self.eps, kvcache, layer, mask)
        if kvcache is not None:
            kvcache.commit(ids.size)
        x = layer_norm(x[-(n_logits or ids.size):], p["ln_f"]["weight"], p["ln_f"]["bias"], self.eps)
        # The LM head is tied to the token embedding: logits = x @ wte.T.
        return matmul(x, p["wte"])[:, :self.vocab_size]  # [n_logits, vocab_size]

    @classmethod
    def from_pretrained(cls, name_or_path, models_dir=None):
        """Load a model by name (gpt2, gpt2-medium, gpt2-large, gpt2-xl) or from a
        directory in the Hugging Face layout (config.json + model.safetensors).

        A name is looked up in models_dir (default: models/ beside this file)
        and downloaded there on first use.
        """
        model_dir = resolve_model_dir(name_or_path, models_dir)
        config = load_config(model_dir)
        params = nest(load_blocked(model_dir, config))
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


def read_header(path):
    """(header dict, byte offset of the data, file size) of a .safetensors file.

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
    return header, 8 + n_header, size


def load_safetensors(path):
    """Read a .safetensors file into a {name: array} dict without copying it.

    The file is memory-mapped: the arrays are read-only views of the pages of
    the file, so a 6.4 GB checkpoint does not need 12.8 GB of RAM to load.
    """
    header, data_start, size = read_header(path)
    data = map_file(path)[data_start:] if size > data_start else np.zeros(0, np.uint8)
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
            raise CheckpointError(f"{path}: truncated: tensor {name} ends at byte {data_start + end} but the file has {size} bytes")
        if end - begin != int(np.prod(shape)) * np.dtype(dtype).itemsize:
            raise CheckpointError(f"{path}: tensor {name} has {end - begin} bytes, not what shape {list(shape)} of {info['dtype']} needs")
        tensors[name] = data[begin:end].view(dtype).reshape(shape)
        if info["dtype"] != "F32":  # half-precision checkpoints: widen to float32 (a copy)
            tensors[name] = to_float32(tensors[name], info["dtype"])
    return tensors


def map_file(path):  # -> read-only uint8 array over the file's pages
    with open(path, "rb") as f:
        pages = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_HUGEPAGE"):  # Linux
        # Ask for 2 MB pages: decoding streams every weight once per token, and
        # with 4 KB pages that is 1.5 million TLB misses per gpt2-xl token, each
        # a page-table walk (two nested ones in a virtual machine). Measured on
        # gpt2-large shapes: 157 -> 147 ms per token with freshly read pages, and
        # 207 -> 167 ms when the page cache held the file in 4 KB pages.
        try:
            pages.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel without transparent huge pages: 4 KB pages it is
            pass
    return np.frombuffer(pages, dtype=np.uint8)


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


def checkpoint_tensors(path, config):
    """The tensors GPT-2 needs from a checkpoint file, checked against config.json."""
    # GPT2LMHeadModel checkpoints prefix every key with 'transformer.'; GPT2Model ones do not.
    tensors = {k.removeprefix("transformer."): t for k, t in load_safetensors(path).items()}
    checked = {}
    for key, shape in expected_shapes(config).items():
        if key not in tensors:
            raise CheckpointError(f"{path}: tensor {key} is missing (config.json says n_layer={config['n_layer']})")
        if tensors[key].shape != shape:
            raise CheckpointError(f"{path}: tensor {key} has shape {list(tensors[key].shape)}, config.json implies {list(shape)}")
        checked[key] = tensors[key]
    return checked


# The weights in the layout forward() uses (see "The matmul strategy"): every
# linear weight transposed and blocked, and wte blocked for the LM head.
BLOCKED_FILE = "model.blocked.safetensors"


def is_linear_weight(key):
    return key.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))


def to_memory_layout(key, t):  # a checkpoint tensor -> the array forward() uses
    if is_linear_weight(key):
        # Conv1D weights are stored [n_in, n_out]. np.array first reads the mapped
        # file in order: a transposing walk over its pages directly is 10x slower.
        return to_blocks(np.array(t).T)
    if key == "wte.weight":
        return to_blocks(t)    # [vocab_size, n_embd] is already [n_out, n_in] for the LM head
    return t


def memory_shape(key, shape):
    if is_linear_weight(key):
        shape = shape[::-1]
    if is_linear_weight(key) or key == "wte.weight":
        return (-(-shape[0] // BLOCK), BLOCK, shape[1])
    return shape


def load_blocked(model_dir, config):
    """The model's tensors in memory layout, memory-mapped from model.blocked.safetensors.

    Transposing gpt2-xl's 6 GB takes seconds, so it is done once: the first
    load writes the converted copy beside the checkpoint (with the checkpoint's
    size and modification time, to notice when it changes), later loads map it.
    """
    source = os.path.join(model_dir, "model.safetensors")
    tensors = checkpoint_tensors(source, config)
    stamp = f"{os.path.getsize(source)}:{os.stat(source).st_mtime_ns}:block{BLOCK}"
    path = os.path.join(model_dir, BLOCKED_FILE)
    shapes = {key: memory_shape(key, t.shape) for key, t in tensors.items()}
    if not (os.path.exists(path) and read_header(path)[0].get("__metadata__", {}).get("source") == stamp):
        try:
            save_safetensors(path, shapes, lambda key: to_memory_layout(key, tensors[key]), {"source": stamp},
                             progress=f"one-time conversion of {os.path.basename(os.path.normpath(model_dir))} to the fast layout")
        except OSError as e:  # a read-only directory or a full disk: convert in memory, every time
            print(f"note: cannot write {path} ({e.strerror}); converting in memory instead", file=sys.stderr)
            return {key: to_memory_layout(key, t) for key, t in tensors.items()}
        del tensors  # unmap the checkpoint: forward() never reads it again...
        forget_pages(source)  # ...so its gigabytes need not stay in the page cache
    blocked = load_safetensors(path)
    for key, shape in shapes.items():
        if key not in blocked or blocked[key].shape != shape:
            raise CheckpointError(f"{path}: {key} is missing or has the wrong shape; delete the file to rebuild it")
    return blocked


def forget_pages(path):
    """Tell the kernel a file will not be read again (Linux; elsewhere a no-op)."""
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


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
    params["wte"], params["wpe"] = params["wte"]["weight"], params["wpe"]["weight"]
    return params


# ---------------------------------------------------------------------------
# Writing checkpoints (random weights for tests and benchmarks)
# ---------------------------------------------------------------------------

def save_safetensors(path, shapes, tensor, metadata=None, progress=None):
    """Write a float32 .safetensors file: shapes is {name: shape}, tensor(name) gives
    each array in turn (so a 6 GB file never needs 6 GB of RAM). Written under a
    temporary name and renamed at the end: an interrupted write leaves no file."""
    header, offset = {"__metadata__": metadata or {}}, 0
    for name, shape in shapes.items():
        n_bytes = 4 * int(np.prod(shape))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n_bytes]}
        offset += n_bytes
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # data starts 8-byte aligned
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f, tqdm(total=offset, unit="B", unit_scale=True, desc=progress,
                                        disable=progress is None or offset < 100_000_000) as bar:
            f.write(len(header_bytes).to_bytes(8, "little") + header_bytes)
            for name, shape in shapes.items():
                t = np.ascontiguousarray(tensor(name), dtype=np.float32)
                assert t.shape == tuple(shape), (name, t.shape, shape)
                t.tofile(f)
                bar.update(t.nbytes)
            # On disk before the rename, so that a crash never leaves a complete-looking
            # file with missing data, and no gigabytes are still being written back
            # when a benchmark starts timing.
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def random_checkpoint(model_dir, config, seed=0, scale=0.02):
    """A GPT-2 checkpoint of the given config.json shapes with random weights.

    The compute cost of a forward does not depend on the values, so these
    stand in for the real weights in benchmarks; tests use a larger `scale`
    so that tiny models have confident, non-tied predictions.
    """
    rng = np.random.default_rng(seed)
    config = {"layer_norm_epsilon": 1e-5, **config}
    shapes = expected_shapes(config)
    pool = []  # made on first use, from its own generator: small models do not depend on it

    def tensor(key):
        shape = shapes[key]
        if key.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            return np.ones(shape, dtype=np.float32)
        if np.prod(shape) <= 1 << 22:
            return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
        # Big tensors (benchmarks): a pool of 4M samples, rolled by a random
        # amount and repeated, is 10x faster to make than fresh normal samples.
        if not pool:
            pool.append(np.random.default_rng([seed, 1]).standard_normal(1 << 22, dtype=np.float32) * np.float32(scale))
        return np.resize(np.roll(pool[0], rng.integers(pool[0].size)), shape)

    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", **config}, f, indent=2)
    save_safetensors(os.path.join(model_dir, "model.safetensors"), shapes, tensor,
                     progress=f"writing random weights to {model_dir}")
    return model_dir
