"""Speed, applied to a model from outside: the same GPT2, its weights in the blocked layout.

gpt2.py computes `x @ w + b` with whatever arrays it holds. Here those arrays
become blocked.Weight and blocked.Rows objects, whose `@` runs the blocked
product (blocked.py), and every forward sets the BLAS's threads for its rows
(threads.py). A small model's (under threads.SHARE_MIN_BYTES per token) become
panels.Panels and panels.Table instead, copied from them at load (panels.py).
Nothing else changes: the same forward, its products summed in another order (logits within
about 1e-5 of the plain model's: the same greedy tokens but at a near-tie).

    model = accelerate(GPT2.from_pretrained("gpt2"))   # a model in memory, converted in memory
    model = load_fast("gpt2")                          # what the programs do: the converted copy on disk

Transposing and blocking gpt2-xl's 6 GB takes seconds, so load_fast keeps a
converted copy beside the checkpoint, model.blocked.safetensors, written on
first load from a load of the checkpoint in full (every value checked finite).
It is a cache trusted no more than its source: model.blocked.json, signed with
the directory's key, records both files' identity and SHA-256
(weights/derived.py), and at every load both must still be those files (the
same identity, or, for a new one, the same SHA-256), the copy must have the
checkpoint's tensors and shapes, and the same values at 64 places of every
tensor, chosen afresh by each process. Anything else and the copy is rebuilt.
--compare checks every value against the checkpoint (same_as_checkpoint).
Where it cannot be written (a read-only directory, a full disk), or where the
system keeps no change time (Windows), the conversion is made in memory.
"""

import contextlib
import os
import sys

import numpy as np

from errors import printable
from gpt2 import GPT2, nest
from roofline import weight_bytes
from workbench.speed.blocked import BLOCK, Rows, blocked_shape, to_blocks
from workbench.speed import panels, second_core, threads
from weights import checkpoint, derived, files, models, reading

try:
    import fcntl  # POSIX: a lock held while a copy is made (converting_alone)
except ImportError:
    fcntl = None

BLOCKED_FILE = "model.blocked.safetensors"
RECORD_FILE = "model.blocked.json"  # the copy's and its checkpoint's identity and SHA-256, signed (weights/derived.py)
RECIPE = f"blocked layout, BLOCK {BLOCK}"  # what the record says made the copy: a copy of another layout is rebuilt
CHANGE_TIME = os.name == "posix"  # st_ctime is the time of the last change (on Windows: the file's creation)


class FastGPT2(GPT2):
    """gpt2.GPT2 with its weights in the blocked layout: each forward sets the BLAS's threads for its rows.
    A model streaming under threads.SHARE_MIN_BYTES per token runs on the calling thread alone, its
    weights copied into panels (speed/panels.py): at most that many bytes, made once at load; its
    products of several rows run half on a helper process (speed/second_core.py)."""

    def __init__(self, params, config, name="gpt2", directory=None):
        super().__init__(params, config, name=name, directory=directory)
        self.shares = weight_bytes(self) >= threads.SHARE_MIN_BYTES
        if not self.shares:
            self.params = panels.in_panels(self.params, kind=second_core.SplitPanels)

    # gpt2.GPT2's steps, each in the BLAS's thread setting for its rows: forward() runs hidden_states() and
    # logits(); a drafter that reads the states (beyond/) calls them, or blocks(), itself.
    def hidden_states(self, ids, *args, **kwargs):
        with threads.threads_for(np.size(ids), self.shares, second_core.asked()):
            return super().hidden_states(ids, *args, **kwargs)

    def blocks(self, x, *args, **kwargs):
        with threads.threads_for(len(x), self.shares, second_core.asked()):
            return super().blocks(x, *args, **kwargs)

    def logits(self, x):
        with threads.threads_for(len(x), self.shares, second_core.asked()):
            return super().logits(x)


def accelerate(model):
    """A FastGPT2 computing what `model` (a plain gpt2.GPT2) computes, its weights converted in memory."""
    p = model.params
    layers = [{**layer, "attn": {name: fast_linear(layer["attn"][name]) for name in ("c_attn", "c_proj")},
               "mlp": {name: fast_linear(layer["mlp"][name]) for name in ("c_fc", "c_proj")}} for layer in p["h"]]
    wte = np.asarray(p["wte"], dtype=np.float32)
    params = {**p, "wte": Rows(to_blocks(wte), wte.shape[0]), "h": layers}
    return FastGPT2(params, config_of(model), name=model.name)


def fast_linear(linear):  # {"weight": W [n_in, n_out], "bias": b} with W as a blocked Weight
    w = np.asarray(linear["weight"], dtype=np.float32)
    return {**linear, "weight": Rows(to_blocks(w.T), w.shape[1]).T}


def load_fast(name_or_path, models_dir=None):
    """A FastGPT2 of a named model or a checkpoint directory, mapped from its converted copy."""
    model_dir = models.resolve_model_dir(name_or_path, models_dir)
    config = checkpoint.load_config(model_dir)
    return FastGPT2(nest(converted_weights(model_dir, config)), config,
                    name=os.path.basename(os.path.normpath(model_dir)), directory=model_dir)


def config_of(model):
    return {"n_layer": model.n_layer, "n_head": model.n_head, "n_embd": model.n_embd,
            "n_positions": model.n_positions, "vocab_size": model.vocab_size, "layer_norm_epsilon": float(model.eps)}


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


def as_rows(key, t, shape):
    """A converted tensor as the rows it stores: Rows of W.T for a linear weight W
    [n_in, n_out], Rows of wte, else the array itself (shape: the checkpoint's)."""
    if is_linear_weight(key):
        return Rows(t, shape[1])
    if key == "wte.weight":
        return Rows(t, shape[0])
    return t


def as_matrix(key, t, shape):
    """What the model holds for a tensor: a Weight for `x @ w`, Rows for wte, else the array."""
    rows = as_rows(key, t, shape)
    return rows.T if is_linear_weight(key) else rows  # W [n_in, n_out] is the transpose of W.T's row blocks


def converted_weights(model_dir, config):
    """{checkpoint key: array, Weight or Rows}, mapped from model.blocked.safetensors.

    Transposing gpt2-xl's 6 GB takes seconds, so it is done once: the first
    load writes the converted copy beside the checkpoint, later loads check it
    against the checkpoint (sound_copy) and map it. A load that only reads
    removes nothing (files.remove_stale is a writer's).
    """
    source, path = os.path.join(model_dir, "model.safetensors"), os.path.join(model_dir, BLOCKED_FILE)
    if not CHANGE_TIME:  # no identity to bind a copy to: converted at each load
        return as_matrices(in_memory(source, config), config)
    tensors = checkpoint.checkpoint_tensors(source, config, sampled=True)  # shapes checked before any is read
    converted, _ = sound_copy(path, source, tensors)
    if converted is None:
        with converting_alone(source):  # another load converting it now: its copy, once made, is used
            converted, why_not = sound_copy(path, source, tensors)
            if converted is None:
                converted = convert(path, source, config, why_not)
    return as_matrices(converted, config)


def as_matrices(converted, config):  # {key: a converted tensor} -> what the model holds (as_matrix)
    shapes = checkpoint.expected_shapes(config)  # checked against the checkpoint's by now
    return {key: as_matrix(key, t, shapes[key]) for key, t in converted.items()}


@contextlib.contextmanager
def converting_alone(source):
    """Held while a load checks the copy again and makes it: a lock on the checkpoint file itself (flock,
    no file of its own; a killed holder's goes with it). Concurrent first loads make one copy, the others
    waiting for it. Where no lock can be taken (a file system without them) loads convert side by side,
    each writing whole files of its own (weights/files.py)."""
    with contextlib.ExitStack() as held:
        with contextlib.suppress(OSError, reading.ReadError):
            f = held.enter_context(reading.open_regular(source))
            if fcntl is not None:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    model = os.path.basename(os.path.dirname(os.path.abspath(source)))
                    print(printable(f"note: another run is converting {model} to the fast layout; waiting for it"),
                          file=sys.stderr)
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        yield


def sound_copy(path, source, tensors):
    """(the converted copy at path, mapped, None) if it is bound to the checkpoint at source (derived.bound: the
    files recorded, by identity or SHA-256, under this directory's key) and faithful to its tensors; else (None,
    why not), why not None where there is no copy. Returning drops any mapping of a bad copy (Windows cannot
    replace a mapped file)."""
    if not os.path.isfile(path):
        return None, None
    try:
        entries, _, data, st = checkpoint.open_safetensors_and_stat(path)  # what is mapped is what is checked
        why_not = derived.bound(record_path(path), path, source, RECIPE, derived_stat=st)
        if why_not:
            raise checkpoint.CheckpointError(f"{path} {why_not}")
        return faithful(path, entries, data, tensors), None
    except checkpoint.CheckpointError as e:
        return None, str(e)


def convert(path, source, config, why_not=None):
    """The checkpoint's tensors in the fast layout: written to path, then mapped from
    there once they read back as written, and recorded (derived.bind), as every later
    load will map them; in memory, with a note, when path cannot be written or does
    not read back. why_not: why the copy there was not used, said once the checkpoint
    has passed its checks (a bad checkpoint is the load's one line, nothing before it)."""
    try:
        # Hashed before it is read: a checkpoint replaced meanwhile is recorded as the file it replaced, whose
        # identity and SHA-256 the next load does not find, and is converted again then.
        source_seen = derived.sha256_of(source)
    except (OSError, reading.ReadError):
        source_seen = None  # read next, that fails in one line
    tensors = checkpoint.checkpoint_tensors(source, config)  # read in full, every value checked: its errors are the load's
    if why_not:
        print(printable(f"note: {why_not}; rebuilding it"), file=sys.stderr)
    try:
        problem = files.why_not_ours_to_replace(record_path(path)) or derived.why_no_key(os.path.dirname(path))  # before the work
        if problem:
            raise files.WriteError(problem)
        write_converted(path, source_seen, tensors)
        del tensors
        forget_pages(source)  # read once and unmapped now: its gigabytes need not stay in the page cache
        entries, _, data, _ = checkpoint.open_safetensors_and_stat(path)
        converted = faithful(path, entries, data, checkpoint.checkpoint_tensors(source, config, sampled=True))
        derived.bind(record_path(path), path, source, RECIPE, source_seen)
        return converted
    except OSError as e:  # a read-only directory, a full disk, a directory in the way; on Windows a copy mapped by another run
        note = f"cannot write {e.filename or path} ({files.words_of(e)})"  # the file that failed: the copy or its record
    except files.WriteError as e:  # a link, a device or a FIFO at its name: never written through (weights/files.py)
        note = str(e)
    except checkpoint.CheckpointError as e:  # what was just written does not read back: a failing disk
        note = str(e)
    print(printable(f"note: {note}; converting in memory instead"), file=sys.stderr)
    return in_memory(source, config)


def in_memory(source, config):
    """The checkpoint's tensors in the fast layout, converted in memory from a load in full."""
    return {key: to_memory_layout(key, t) for key, t in checkpoint.checkpoint_tensors(source, config).items()}


def write_converted(path, source_seen, tensors):  # the one place the converted copy is written
    model = os.path.basename(os.path.dirname(os.path.abspath(path)))
    made_from = {"recipe": RECIPE, **({"source_sha256": source_seen[0]} if source_seen else {})}
    checkpoint.save_safetensors(path, {key: memory_shape(key, t.shape) for key, t in tensors.items()},
                                lambda key: to_memory_layout(key, tensors[key]), made_from,
                                progress=f"one-time conversion of {model} to the fast layout")


def record_path(path):
    return os.path.join(os.path.dirname(path), RECORD_FILE)


def faithful(path, entries, data, tensors):
    """The mapped tensors of a converted copy (its header's entries, its data) if they are a conversion of
    `tensors` (the checkpoint's): the same tensors and shapes, and the same values at checkpoint.SAMPLES places
    of every tensor (spread over it, chosen afresh by each process), which a copy that is zero-filled,
    half-written or made from other weights does not have. Else CheckpointError."""
    shapes = {key: memory_shape(key, t.shape) for key, t in tensors.items()}
    if {name: shape for name, (_, shape, _, _) in entries.items()} != shapes or any(e[0] != "F32" for e in entries.values()):
        raise checkpoint.CheckpointError(f"{path}: its tensors are not those of model.safetensors in the fast layout")
    converted = {key: checkpoint.raw_view(data, entries[key]) for key in shapes}
    for key, t in tensors.items():
        source_rows = t.T if is_linear_weight(key) else t  # the checkpoint's tensor as the rows as_rows reads
        if not np.array_equal(checkpoint.sampled_values(as_rows(key, converted[key], t.shape)), checkpoint.sampled_values(source_rows), equal_nan=True):
            raise checkpoint.CheckpointError(f"{path}: {key} holds other values than model.safetensors")
    return converted


def same_as_checkpoint(model):
    """Raise CheckpointError unless every weight `model` computes with (a FastGPT2 from load_fast) holds exactly
    the values of its checkpoint, read in full as --plain reads it: --compare's proof that the oracle it times
    alone is the checkpoint's (a copy bound to its source can still have been forged by whoever holds the key).
    Checked once per model."""
    if not isinstance(model, FastGPT2) or model.directory is None or getattr(model, "checked_in_full", False):
        return
    source = os.path.join(model.directory, "model.safetensors")
    for key, t in checkpoint.checkpoint_tensors(source, config_of(model)).items():
        held = model.params
        for part in key.removesuffix(".weight").split(".") if key in ("wte.weight", "wpe.weight") else key.split("."):
            held = held[int(part)] if part.isdigit() else held[part]  # gpt2.nest's tree
        if not np.array_equal(np.asarray(held, dtype=np.float32), t):
            where = os.path.join(model.directory, BLOCKED_FILE)
            raise checkpoint.CheckpointError(f"{where}: the fast model's {key} is not model.safetensors' (every value "
                                             f"compared): remove {BLOCKED_FILE} and {RECORD_FILE}, and run again")
    model.checked_in_full = True


def forget_pages(path):
    """Tell the kernel a file will not be read again (Linux; elsewhere a no-op). Only advice: errors are ignored."""
    if hasattr(os, "posix_fadvise"):
        with contextlib.suppress(OSError), open(path, "rb", buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
