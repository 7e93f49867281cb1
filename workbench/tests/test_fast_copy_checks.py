"""Every check of tests/test_checkpoint.py, run again through the workbench's fast loader (load_fast, which
reads the checkpoint to convert it and checks its converted copy against it): the checks are imported from
there and take the loader as the fixture `load`, here load_fast. Then what only the conversion meets: a
config of a billion layers, and mutated headers and configs, each an error naming its file or a load that
never allocates the file's size."""

import json
import os
import random
import tracemalloc

import numpy as np
import pytest

from fixtures import make_model_dir
from test_checkpoint import (  # noqa: F401 (the fixtures and the checks, collected here again)
    IDS, edit_config, fresh_copy, raw_checkpoint, read_raw, template, write_raw,
    test_a_bad_config_is_a_checkpoint_error_naming_file_field_and_problem,
    test_a_bad_safetensors_header_is_a_checkpoint_error_naming_file_field_and_problem,
    test_a_config_with_fewer_layers_than_the_checkpoint_is_refused_naming_the_extra_tensors,
    test_an_unknown_extra_tensor_is_refused, test_an_unreadable_checkpoint_is_a_checkpoint_error_with_its_path,
    test_an_unreadable_file_is_a_checkpoint_error_with_its_path, test_checkpoint_that_does_not_match_config,
    test_checkpoint_with_a_missing_layer, test_garbage_checkpoint_is_a_clear_error,
    test_half_precision_checkpoints_load_as_float32,
    test_known_harmless_extras_load_identically_and_an_untied_lm_head_is_refused,
    test_transformer_prefix_and_extra_buffers_load_identically, test_truncated_checkpoint_names_the_file)
from weights import checkpoint
from weights.checkpoint import CheckpointError
from workbench.speed import accelerate
from workbench.speed.accelerate import BLOCKED_FILE, load_fast


@pytest.fixture(scope="module")
def load():
    """The loader the imported checks run through: the fast one."""
    return load_fast


@pytest.fixture(scope="module")
def pristine(template, tmp_path_factory):  # noqa: F811
    """The template's logits for IDS, from a copy converted alone."""
    return load_fast(fresh_copy(template, tmp_path_factory.mktemp("pristine"))).forward(IDS)


def test_the_conversion_of_a_config_of_a_billion_layers_fails_at_once_without_memory(tmp_path, template):
    # It used to build the expected shapes of 10**9 layers, growing until the OOM killer came (the plain loader:
    # tests/test_checkpoint.py).
    model_dir = fresh_copy(template, tmp_path)
    edit_config(model_dir, n_layer=10 ** 9)
    config = checkpoint.load_config(model_dir)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=r"tensor h\.2\.ln_1\.weight is missing \(config.json says n_layer=1000000000\)"):
            accelerate.converted_weights(model_dir, config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


# ---------------------------------------------------------------------------
# Mutated headers and configs, through the fast loader's conversion
# ---------------------------------------------------------------------------

BAD_VALUES = [0, -1, 1, 2.5, 3.0, "7", None, True, [], {}, [1, 2], 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, -(2 ** 63),
              float("nan"), float("inf"), 1e-50, 1e50]


def mutate_header(header, rng):
    """A header with one random mutation (rng: random.Random), as bytes or a JSON value."""
    header = json.loads(json.dumps(header))
    names = [n for n in header if n != "__metadata__"]
    name, field = rng.choice(names), rng.choice(["dtype", "shape", "data_offsets"])
    kind = rng.randrange(9)
    if kind == 0:  # flip bytes in the JSON text
        text = bytearray(json.dumps(header).encode())
        for _ in range(rng.randint(1, 3)):
            text[rng.randrange(len(text))] ^= rng.randrange(1, 256)
        return bytes(text)
    if kind == 1:  # a number becomes something else
        value = header[name][field]
        if isinstance(value, list) and value:
            value[rng.randrange(len(value))] = rng.choice(BAD_VALUES + [-v for v in value] + [v + 4 for v in value])
        else:
            header[name][field] = rng.choice(BAD_VALUES)
    elif kind == 2:  # a field or a tensor dropped
        if rng.random() < 0.5:
            del header[name][field]
        else:
            del header[name]
    elif kind == 3:  # an entry, or the header itself, of another type
        value = rng.choice(BAD_VALUES)
        if rng.random() < 0.2:
            return value
        header[name] = value
    elif kind == 4:
        header[name]["dtype"] = rng.choice(["F16", "BF16", "F64", "I64", "BOOL", "F8_E4M3", "f32", "", "F32 "])
    elif kind == 5:  # two tensors' bytes swapped
        other = rng.choice(names)
        header[name]["data_offsets"], header[other]["data_offsets"] = header[other]["data_offsets"], header[name]["data_offsets"]
    elif kind == 6:  # a tensor's bytes moved
        shift = rng.choice([-8, -4, -2, 2, 4, 8, 1 << 20])
        header[name]["data_offsets"] = [o + shift for o in header[name]["data_offsets"]]
    elif kind == 7:  # a shape reshuffled
        header[name]["shape"] = rng.choice([header[name]["shape"][::-1], header[name]["shape"] + [1],
                                            header[name]["shape"][1:], [0] + header[name]["shape"]])
    else:
        header["__metadata__"] = rng.choice(BAD_VALUES + [{"source": 1}, {"a": "b"}])
    return header


def mutate_config(config, rng):
    """A config with one random mutation, as text."""
    config = dict(config)
    key = rng.choice(["n_layer", "n_head", "n_embd", "vocab_size", "n_positions", "n_ctx", "layer_norm_epsilon"])
    kind = rng.randrange(4)
    if kind == 0:
        text = bytearray(json.dumps(config).encode())
        text[rng.randrange(len(text))] ^= rng.randrange(1, 128)
        return text.decode("utf-8", "replace")
    if kind == 1:
        config[key] = rng.choice(BAD_VALUES)
    elif kind == 2:
        config.pop(key, None)
    else:
        config[key] = rng.choice([2 * config.get(key, 1), config.get(key, 1) + 1, 10 ** 9, 10 ** 18])
    return json.dumps(rng.choice(BAD_VALUES) if rng.random() < 0.05 else config)


def load_measured(model_dir):
    """(outcome, peak bytes allocated): the weights or the CheckpointError of loading model_dir."""
    tracemalloc.start()
    try:
        config = checkpoint.load_config(model_dir)
        return accelerate.converted_weights(model_dir, config), tracemalloc.get_traced_memory()[1]
    except CheckpointError as e:
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_mutated_headers_and_configs_give_a_checkpoint_error_or_load_without_allocating_the_file(tmp_path):
    model_dir = make_model_dir(tmp_path / "fuzz", seed=5, n_layer=2, n_embd=32, n_positions=32, tokenizer=False)
    path, config_path = os.path.join(model_dir, "model.safetensors"), os.path.join(model_dir, "config.json")
    header, data = read_raw(path)
    with open(config_path) as f:
        config = json.load(f)
    file_size = os.path.getsize(path)
    load_measured(model_dir)  # what a first load in a process allocates once (lazy imports, caches) is not the file's doing
    rng = random.Random(1)
    outcomes = {"error": 0, "loaded": 0}
    for case in range(500):
        if case < 300:
            write_raw(path, mutate_header(header, rng), data)
        else:
            write_raw(path, header, data)
            with open(config_path, "w") as f:
                f.write(mutate_config(config, rng))
        if os.path.exists(os.path.join(model_dir, BLOCKED_FILE)):
            os.remove(os.path.join(model_dir, BLOCKED_FILE))
        outcome, peak = load_measured(model_dir)
        assert peak < file_size, f"case {case}: {peak} bytes allocated for a file of {file_size}"
        if isinstance(outcome, CheckpointError):
            assert str(outcome).startswith((path, config_path)), f"case {case}: {outcome}"
            outcomes["error"] += 1
        else:
            shapes = checkpoint.expected_shapes(checkpoint.load_config(model_dir))
            assert {k: np.asarray(w).shape for k, w in outcome.items()} == shapes, f"case {case}"
            outcomes["loaded"] += 1
    with open(config_path, "w") as f:
        json.dump(config, f)
    assert outcomes["error"] > 300 and outcomes["loaded"] > 10, outcomes  # both kinds were exercised
