"""GPT-2 checkpoints on disk: config.json and model.safetensors, read, checked and written.

A checkpoint directory in the Hugging Face layout holds config.json (the
shapes) and model.safetensors (the weights). This module reads both, checks
every tensor against the config, and hands gpt2.py the weights in the layout
its products want (see matmul.py): linear weights transposed and in blocks.
That conversion is done once and cached beside the checkpoint as
model.blocked.safetensors. It also writes checkpoints: random ones for the
tests, the benchmarks and the offline demo.

safetensors, in ~40 lines here rather than a dependency: an 8-byte
little-endian header length, a JSON header giving each tensor's dtype, shape
and byte range, then the raw data. The file is memory-mapped, so the arrays are
read-only views of its pages and a 6.4 GB checkpoint does not need 12.8 GB of RAM.
"""

import json
import mmap
import os
import sys

import numpy as np
from tqdm import tqdm

from errors import UserError
from matmul import BLOCK, Rows, blocked_shape, to_blocks

BLOCKED_FILE = "model.blocked.safetensors"
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


class CheckpointError(UserError):
    """A checkpoint that is missing, truncated, corrupt or does not match its config."""


# ---------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------

def load_config(model_dir):
    """The shapes GPT2 needs, from model_dir/config.json (Hugging Face's GPT2Config keys)."""
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


# ---------------------------------------------------------------------------
# Reading safetensors
# ---------------------------------------------------------------------------

def read_header(path):
    """(header dict, byte offset of the data, file size) of a .safetensors file."""
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
    """Read a .safetensors file into a {name: array} dict without copying it (memory-mapped)."""
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
    if hasattr(mmap, "MADV_HUGEPAGE"):  # Linux: 2 MB pages, one TLB entry per 2 MB of weights streamed
        try:
            pages.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel without transparent huge pages: 4 KB pages it is
            pass
    return np.frombuffer(pages, dtype=np.uint8)


def to_float32(a, dtype_name):
    if dtype_name == "BF16":  # bfloat16 is the top half of a float32
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


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


# ---------------------------------------------------------------------------
# The weights in the layout the products want (matmul.py), cached on disk
# ---------------------------------------------------------------------------

def is_linear_weight(key):
    return key.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight"))


def to_memory_layout(key, t):  # a checkpoint tensor -> the array the model keeps
    if is_linear_weight(key):
        # Conv1D weights are stored [n_in, n_out]. np.array first reads the mapped
        # file in order: a transposing walk over its pages directly is much slower.
        return to_blocks(np.array(t).T)
    if key == "wte.weight":
        return to_blocks(t)  # [vocab_size, n_embd] already has one row per output of the LM head
    return t


def memory_shape(key, shape):
    if is_linear_weight(key):
        return blocked_shape(shape[1], shape[0])
    if key == "wte.weight":
        return blocked_shape(*shape)
    return shape


def as_matrix(key, t, shape):
    """What the model holds for a tensor: a Weight for `x @ w`, Rows for wte, else the array."""
    if is_linear_weight(key):
        return Rows(t, shape[1]).T  # W [n_in, n_out] is the transpose of W.T's row blocks
    if key == "wte.weight":
        return Rows(t, shape[0])
    return t


def load_weights(model_dir, config):
    """{checkpoint key: array, Weight or Rows}, mapped from model.blocked.safetensors.

    Transposing gpt2-xl's 6 GB takes seconds, so it is done once: the first
    load writes the converted copy beside the checkpoint (stamped with the
    checkpoint's size and modification time, to notice when it changes), later
    loads map it.
    """
    source = os.path.join(model_dir, "model.safetensors")
    tensors = checkpoint_tensors(source, config)
    shapes = {key: t.shape for key, t in tensors.items()}
    return {key: as_matrix(key, t, shapes[key]) for key, t in load_blocked(model_dir, source, tensors).items()}


def load_blocked(model_dir, source, tensors):
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
        del tensors  # unmap the checkpoint: the model never reads it again...
        forget_pages(source)  # ...so its gigabytes need not stay in the page cache
    blocked = load_safetensors(path)
    for key, shape in shapes.items():
        if key not in blocked or blocked[key].shape != shape:
            raise CheckpointError(f"{path}: {key} is missing or has the wrong shape; delete the file to rebuild it")
    return {key: blocked[key] for key in shapes}


def forget_pages(path):
    """Tell the kernel a file will not be read again (Linux; elsewhere a no-op)."""
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------
# Writing checkpoints
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
            # On disk before the rename: a crash must never leave a complete-looking
            # file with missing data.
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
        # amount and repeated, is much faster to make than fresh normal samples.
        if not pool:
            pool.append(np.random.default_rng([seed, 1]).standard_normal(1 << 22, dtype=np.float32) * np.float32(scale))
        return np.resize(np.roll(pool[0], rng.integers(pool[0].size)), shape)

    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", **config}, f, indent=2)
    save_safetensors(os.path.join(model_dir, "model.safetensors"), shapes, tensor,
                     progress=f"writing random weights to {model_dir}")
    return model_dir

