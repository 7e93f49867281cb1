"""GPT-2 checkpoints on disk: config.json and model.safetensors, read, checked and written.

A checkpoint directory in the Hugging Face layout holds config.json (the
shapes) and model.safetensors (the weights). This module reads both, checks
every field before it trusts it, and hands over the tensors as float32 arrays
under their checkpoint keys (load). It also writes checkpoints: the learned
pair's (workbench/tools/train_pair.py), random ones for the tests and the benchmarks,
and speed/accelerate.py's converted copy.

safetensors, in a few functions here rather than a dependency: an 8-byte
little-endian header length, a JSON header giving each tensor's dtype, shape
and byte range, then the raw data. The file is memory-mapped, so the arrays are
read-only views of its pages and a 6.4 GB checkpoint does not need 12.8 GB of RAM.

What the rest of the code can rely on:
- every file is checked before anything is allocated from it (validate_config,
  validate_header, checkpoint_tensors); a bad one is a CheckpointError naming
  the file, the field and the problem;
- every value of every tensor a load reads in full is a finite number
  (check_finite): a NaN or an infinity is a CheckpointError naming the file
  and the tensor, never a model that computes NaN;
- files are written atomically, even by several processes at once: each
  writer writes its own temporary file, flushes it to disk and renames it into
  place (save_safetensors), so a reader sees a complete file or none;
"""

import contextlib
import functools
import json
import math
import mmap
import os
import re
import secrets

import numpy as np
from tqdm import tqdm

from errors import UserError
from weights import files, reading

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}  # the ones we read, as float32
ITEM_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
              "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}  # every dtype of the format
# Real headers are kilobytes (gpt2-xl's: 580 tensors); parsing JSON takes many times its size in memory,
# so the bound is what no GPT-2 comes near, not what the format allows. Text read as a length is nonsense.
MAX_HEADER_BYTES = 8 << 20
MAX_DIMS = 32  # NumPy 1's limit
# Tensors a checkpoint may hold beyond GPT-2's weights: the attention-mask
# buffers of old checkpoints, and the LM head, which must be wte (check_tied).
HARMLESS_EXTRAS = re.compile(r"h\.\d+\.attn\.(masked_)?bias|lm_head\.weight")
SAMPLES, RUN = 64, 16  # values per tensor compared by a sampled check (check_tied, speed/accelerate.py's copy), in runs
# The places a sampled check looks at, drawn afresh by each process: a file edited where one run does not look is
# seen by another, and no edit can be placed where no run will ever look.
PLACES = np.random.default_rng(secrets.randbits(128))
WRITTEN_DTYPES = {"F32": np.float32, "F16": np.float16}  # what save_safetensors writes


class CheckpointError(UserError):
    """A checkpoint that is missing, truncated, corrupt or does not match its config."""


def is_int(value):  # a JSON integer (JSON's true and false are Python bools, a subclass of int)
    return type(value) is int


def json_type(value):  # for messages: what the JSON holds instead of what was expected
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def shown(value):  # a JSON value in a message, cut short
    try:
        text = json.dumps(value, default=repr)
    except RecursionError:  # json.loads nested it just shallow enough; dumps needs a few frames more
        return f"{json_type(value)} nested too deep to show"
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------

def load_config(model_dir):
    """The shapes GPT2 needs, from model_dir/config.json (Hugging Face's GPT2Config keys), checked."""
    path = os.path.join(model_dir, "config.json")
    try:
        raw = json.loads(reading.read_text(path, "config.json"))
    except reading.ReadError as e:  # a FIFO, a device, a file of gigabytes: never read
        raise CheckpointError(str(e)) from None
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: cannot read it as JSON ({getattr(e, 'strerror', None) or e})") from None
    return validate_config(path, raw)


def validate_config(path, raw):
    """{n_layer, n_head, n_embd, vocab_size, n_positions, layer_norm_epsilon} from a parsed
    config.json: each size a positive integer, epsilon a positive number float32 can hold."""
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: {json_type(raw)}, not an object of settings")
    config = {key: raw.get(key) for key in ("n_layer", "n_head", "n_embd", "vocab_size", "n_positions")}
    if config["n_positions"] is None:
        config["n_positions"] = raw.get("n_ctx")  # its older name
    for key, value in config.items():
        if value is None:
            raise CheckpointError(f"{path}: {key} is missing")
        if not is_int(value) or value <= 0:
            raise CheckpointError(f"{path}: {key} must be a positive integer, not {shown(value)}")
    eps = raw.get("layer_norm_epsilon", 1e-5)
    # Compared in float32, as the model uses it: 1e-50 is 0 there and 1e50 infinite.
    if type(eps) not in (int, float) or not 0 < eps <= float(np.finfo(np.float32).max) or np.float32(eps) == 0:
        raise CheckpointError(f"{path}: layer_norm_epsilon must be a positive number within float32's range, not {shown(eps)}")
    config["layer_norm_epsilon"] = eps
    if config["n_embd"] % config["n_head"]:
        raise CheckpointError(f"{path}: n_embd {config['n_embd']} is not a multiple of n_head {config['n_head']}")
    return config


def expected_tensors(config):
    """(checkpoint key, shape) of every tensor GPT-2 needs, in file order, one at a time:
    a reader stops at the first one missing, so a config.json claiming a billion
    layers costs nothing."""
    d, v, n_pos = config["n_embd"], config["vocab_size"], config["n_positions"]
    yield from {"wte.weight": (v, d), "wpe.weight": (n_pos, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}.items()
    layer = {
        "ln_1.weight": (d,), "ln_1.bias": (d,),
        "attn.c_attn.weight": (d, 3 * d), "attn.c_attn.bias": (3 * d,),
        "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
        "ln_2.weight": (d,), "ln_2.bias": (d,),
        "mlp.c_fc.weight": (d, 4 * d), "mlp.c_fc.bias": (4 * d,),
        "mlp.c_proj.weight": (4 * d, d), "mlp.c_proj.bias": (d,),
    }
    for i in range(config["n_layer"]):
        for key, shape in layer.items():
            yield f"h.{i}.{key}", shape


def expected_shapes(config):
    """{checkpoint key: shape} of every tensor GPT-2 needs, from config.json."""
    return dict(expected_tensors(config))


# ---------------------------------------------------------------------------
# Reading safetensors
# ---------------------------------------------------------------------------

def open_safetensors(path, sampled=False):
    """(tensors, metadata, data) of a .safetensors file. tensors is {name: (dtype,
    shape, begin, end)} from its header, checked by validate_header; data is the
    bytes after the header, memory-mapped (nothing read yet; `sampled`: only a few
    values will be). Header and data come from one open file: a file replaced
    meanwhile cannot mix two versions."""
    return open_safetensors_and_stat(path, sampled)[:3]


def open_safetensors_and_stat(path, sampled=False):
    """open_safetensors's (tensors, metadata, data), and the os.stat_result of the very file they come from."""
    try:
        with reading.open_regular(path) as f:  # not a FIFO or a device: only a regular file can be mapped
            st = os.fstat(f.fileno())
            header, data_start = read_header(path, f, st.st_size)
            tensors, metadata = validate_header(path, header, st.st_size - data_start)
            data = map_file(f, sampled)[data_start:]
    except reading.ReadError as e:
        raise CheckpointError(str(e)) from None
    except OSError as e:  # unreadable, vanished
        raise CheckpointError(f"{path}: cannot read it ({files.words_of(e)})") from None
    return tensors, metadata, data, st


def read_header(path, f, size):  # -> (the parsed JSON header, byte offset of the data)
    prefix = f.read(8)
    n_header = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
    if not 0 < n_header <= MAX_HEADER_BYTES:
        raise CheckpointError(f"{path}: not a safetensors file (bad header length; the file has {size} bytes)")
    if n_header > size - 8:
        raise CheckpointError(f"{path}: truncated: its header needs {8 + n_header} bytes but the file has {size}")
    try:
        return json.loads(f.read(n_header)), 8 + n_header
    except (ValueError, RecursionError):
        raise CheckpointError(f"{path}: corrupt safetensors header (not valid JSON)") from None


def validate_header(path, header, n_data):
    """({name: (dtype, shape, begin, end)}, metadata) from a parsed safetensors header,
    checked as the format requires: every entry an object with a known dtype, a
    shape of non-negative integers and byte offsets holding exactly that shape;
    together the tensors cover the n_data bytes of data exactly, each byte once."""
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header ({json_type(header)}, not an object)")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{path}: corrupt safetensors header (__metadata__ must map names to strings)")
    tensors = {name: validate_entry(path, name, info, n_data) for name, info in header.items() if name != "__metadata__"}
    position = 0  # where the next tensor must start: no overlap, no hole
    for name, (_, _, begin, end) in sorted(tensors.items(), key=lambda item: item[1][2:]):
        if begin != position:
            raise CheckpointError(f"{path}: tensor {name} starts at byte {begin} of the data, not {position}: "
                                  "tensors overlap or leave a gap")
        position = end
    if position != n_data:
        raise CheckpointError(f"{path}: {n_data - position} bytes after the last tensor belong to none")
    return tensors, metadata


def validate_entry(path, name, info, n_data):  # one tensor's header entry -> (dtype, shape, begin, end)
    where = f"{path}: tensor {name}"
    if not isinstance(info, dict):
        raise CheckpointError(f"{where}: its header entry is {json_type(info)}, not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in ITEM_SIZES:
        raise CheckpointError(f"{where}: unknown dtype {shown(dtype)}")
    if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(is_int(n) and n >= 0 for n in shape)):
        raise CheckpointError(f"{where}: shape must be a list of non-negative integers, not {shown(shape)}")
    itemsize = ITEM_SIZES[dtype]
    if math.prod(max(n, 1) for n in shape) * itemsize >= 2 ** 63:  # NumPy could not even describe it
        raise CheckpointError(f"{where}: shape {shape} is too big for any array")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_int(n) for n in offsets)):
        raise CheckpointError(f"{where}: data_offsets must be two integers, not {shown(offsets)}")
    begin, end = offsets
    if not 0 <= begin <= end:
        raise CheckpointError(f"{where}: data_offsets {offsets} are negative or reversed")
    if end > n_data:
        raise CheckpointError(f"{path}: truncated: tensor {name} ends at byte {end} of the data, which has {n_data}")
    if begin % itemsize:
        raise CheckpointError(f"{where}: starts at byte {begin}, not a multiple of {dtype}'s {itemsize} bytes")
    if end - begin != math.prod(shape) * itemsize:
        raise CheckpointError(f"{where} has {end - begin} bytes, not the {math.prod(shape) * itemsize} that shape {shape} of {dtype} needs")
    return dtype, tuple(shape), begin, end


def raw_view(data, entry):  # one tensor's mapped bytes as an array of its own dtype (BF16 as uint16)
    dtype, shape, begin, end = entry
    return data[begin:end].view(SAFETENSORS_DTYPES[dtype]).reshape(shape)


def tensor_view(path, name, data, entry, sampled=False):
    """A tensor as float32: a view of the mapped bytes when stored as F32, else a widened copy
    (sampled: Widened, which widens only the values read)."""
    dtype = entry[0]
    if dtype not in SAFETENSORS_DTYPES:
        raise CheckpointError(f"{path}: tensor {name} has dtype {dtype}; supported: {', '.join(SAFETENSORS_DTYPES)}")
    t = raw_view(data, entry)
    if dtype == "F32":
        return t
    return Widened(t, dtype) if sampled else to_float32(t, dtype)


class Widened:
    """A stored F16 or BF16 tensor, widened to float32 only where it is indexed: a sampled
    check reads a few values, and widening all of them would read the whole file."""

    def __init__(self, stored, dtype):
        self.stored, self.dtype, self.shape = stored, dtype, stored.shape

    def __getitem__(self, index):
        return to_float32(self.stored[index], self.dtype)

    @property
    def T(self):
        return Widened(self.stored.T, self.dtype)


def to_float32(a, dtype_name):
    if dtype_name == "BF16":  # bfloat16 is the top half of a float32
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def map_file(f, sampled=False):  # an open file -> read-only uint8 array over its pages
    pages = reading.map_read_only(f, f.name)  # a file cut short while mapped: one line, not a bus error
    # Weights streamed at every token: 2 MB pages, one TLB entry per 2 MB (Linux).
    # A file of which only a few values are read: no read-ahead, which around each
    # of them would read megabytes.
    advice = "MADV_RANDOM" if sampled else "MADV_HUGEPAGE"
    if hasattr(mmap, advice):  # not on Windows
        with contextlib.suppress(OSError):  # e.g. a kernel without transparent huge pages
            pages.madvise(getattr(mmap, advice))
    return np.frombuffer(pages, dtype=np.uint8)


def check_finite(path, name, t):
    """CheckpointError unless every value of tensor `name` (an array) is a finite number. A NaN or an
    infinity in a weight makes every output NaN, and NaN compares false: a sampling method would keep
    every draft, greedy decoding would print token 0. One pass over the values, at memory speed."""
    if np.isfinite(t).all():
        return
    bad = np.asarray(t).reshape(-1)[np.flatnonzero(~np.isfinite(t))[0]]
    raise CheckpointError(f"{reading.shown(path)}: tensor {name} holds {'NaN' if np.isnan(bad) else 'an infinity'}: "
                          "the file is damaged (every value of a weight must be a finite number)")


def load_safetensors(path):
    """Read a .safetensors file into a {name: array} dict without copying it (memory-mapped), unchecked
    but for its header: the downloader's check of the format. Loads go through checkpoint_tensors."""
    tensors, _, data = open_safetensors(path)
    return {name: tensor_view(path, name, data, entry) for name, entry in tensors.items()}


def sampled_values(m):  # -> SAMPLES values spread over m (an array, or anything indexed like one), and its first and last
    return np.asarray(m[sample_positions(m.shape)])


@functools.lru_cache(maxsize=None)
def sample_positions(shape):
    """Indices of an array of this shape, in row-major order: its first and last values, and SAMPLES more in runs of
    RUN consecutive values (a page of the file or two, read at once) at places drawn by this process (PLACES). The
    same for every array of a shape within a process, so that a tensor and its copy are compared place for place."""
    size = math.prod(shape)
    if size <= SAMPLES + 2:
        flat = np.arange(size, dtype=np.int64)
    else:
        starts = PLACES.integers(0, size - RUN + 1, SAMPLES // RUN)
        flat = np.unique(np.concatenate([[0, size - 1], (starts[:, None] + np.arange(RUN)).reshape(-1)]))
    return np.unravel_index(flat, shape)


# ---------------------------------------------------------------------------
# A checkpoint against its config.json
# ---------------------------------------------------------------------------

def checkpoint_tensors(path, config, sampled=False):
    """The tensors GPT-2 needs from a checkpoint file, {key: float32 array}, checked
    against config.json (every shape, and no tensor left over) before any is read,
    then every value finite (check_finite) and a stored LM head equal to wte
    (check_tied). sampled: only a few values of each will be read (see map_file),
    and neither value check is made (speed/accelerate.py's converted copy is made
    from a load in full, and bound to the file it was made from)."""
    entries, _, data = open_safetensors(path, sampled)
    # GPT2LMHeadModel checkpoints prefix every key with 'transformer.'; GPT2Model ones do not.
    names = {name.removeprefix("transformer."): name for name in entries}
    if len(names) < len(entries):
        raise CheckpointError(f"{path}: has some tensors twice, with and without the 'transformer.' prefix")
    needed = {}
    for key, shape in expected_tensors(config):
        if key not in names:
            raise CheckpointError(f"{path}: tensor {key} is missing (config.json says n_layer={config['n_layer']})")
        if entries[names[key]][1] != shape:
            raise CheckpointError(f"{path}: tensor {key} has shape {list(entries[names[key]][1])}, config.json implies {list(shape)}")
        needed[key] = names[key]
    unused = [key for key in names if key not in needed and not HARMLESS_EXTRAS.fullmatch(key)]
    if unused:  # e.g. a config.json with fewer layers than the checkpoint: the model would silently lose them
        listed = ", ".join(unused[:4]) + (f" and {len(unused) - 4} more" if len(unused) > 4 else "")
        raise CheckpointError(f"{path}: has tensors config.json (n_layer={config['n_layer']}) leaves unused: {listed}")
    tensors = {key: tensor_view(path, name, data, entries[name], sampled) for key, name in needed.items()}
    if not sampled:
        for key, name in needed.items():
            check_finite(path, name, tensors[key])
    if "lm_head.weight" in names:
        check_tied(path, entries[names["lm_head.weight"]], data, tensors["wte.weight"], sampled)
    return tensors


def check_tied(path, entry, data, wte, sampled=False):
    """GPT-2's LM head is its token embedding (gpt2.py computes x @ wte.T): a stored
    lm_head.weight must be the same matrix, every value (sampled: a few spread over it)."""
    dtype, shape = entry[:2]
    if dtype not in SAFETENSORS_DTYPES or shape != wte.shape:
        same = False
    elif sampled:
        same = np.array_equal(to_float32(sampled_values(raw_view(data, entry)), dtype), sampled_values(wte), equal_nan=True)
    else:
        same = np.array_equal(tensor_view(path, "lm_head.weight", data, entry), wte)
    if not same:
        raise CheckpointError(f"{path}: lm_head.weight is not wte.weight, but GPT-2 ties them (gpt2.py uses wte as the LM head)")


# ---------------------------------------------------------------------------
# A whole checkpoint, for gpt2.GPT2
# ---------------------------------------------------------------------------

def load(model_dir):
    """(config, {checkpoint key: float32 array}) of the checkpoint in model_dir, every file
    checked first. F32 tensors are read-only views of the mapped file; F16 and BF16 ones
    are widened to float32 in memory."""
    config = load_config(model_dir)
    return config, checkpoint_tensors(os.path.join(model_dir, "model.safetensors"), config)


# ---------------------------------------------------------------------------
# Writing checkpoints
# ---------------------------------------------------------------------------

def save_safetensors(path, shapes, tensor, metadata=None, progress=None, dtype="F32"):
    """Write a .safetensors file of float32 (dtype "F32") or float16 ("F16") tensors: shapes
    is {name: shape}, tensor(name) gives each array in turn (so a 6 GB file never needs 6 GB of RAM).

    Atomic, even with other writers of the same path at the same time: each
    writer writes a temporary file of its own, flushes it to disk and renames it
    over path (weights/files.py). Readers see the old file or a complete new one; a writer
    that fails removes its temporary file, and one that is killed leaves it to the next
    writer in that directory, which removes it (files.remove_stale).
    """
    # {"format": "pt"} is what the hub's files carry; transformers' from_pretrained refuses a file without it.
    header, offset, written = {"__metadata__": {"format": "pt", **(metadata or {})}}, 0, WRITTEN_DTYPES[dtype]
    for name, shape in shapes.items():
        n_bytes = np.dtype(written).itemsize * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n_bytes]}
        offset += n_bytes
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)  # data starts 8-byte aligned
    with files.replacing(path, durable=True) as f, tqdm(total=offset, unit="B", unit_scale=True, desc=progress,
                                                         disable=progress is None or offset < 100_000_000) as bar:
        f.write(len(header_bytes).to_bytes(8, "little") + header_bytes)
        for name, shape in shapes.items():
            t = np.asarray(tensor(name), dtype=written)  # tofile writes C order; 0-d stays 0-d
            assert t.shape == tuple(shape), (name, t.shape, shape)
            t.tofile(f)
            bar.update(t.nbytes)


def random_checkpoint(model_dir, config, seed=0, scale=0.02):
    """A GPT-2 checkpoint of the given config.json shapes with random weights.

    The compute cost of a forward does not depend on the values, so these
    stand in for the real weights in benchmarks; tests use a larger `scale`
    so that tiny models have confident, non-tied predictions.
    """
    rng = np.random.default_rng(seed)
    config = {"layer_norm_epsilon": 1e-5, **config}
    validate_config(os.path.join(model_dir, "config.json"), config)
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
    files.write_text(os.path.join(model_dir, "config.json"), json.dumps({"model_type": "gpt2", **config}, indent=2))
    save_safetensors(os.path.join(model_dir, "model.safetensors"), shapes, tensor,
                     progress=f"writing random weights to {model_dir}")
    return model_dir
