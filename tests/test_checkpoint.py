"""weights/checkpoint.py: every file checked before it is trusted, and atomic writes beside other writers.

Every check here runs through the loader a test is given (the fixture `load`): the plain model's,
gpt2.GPT2.from_pretrained, here; workbench/tests/test_fast_copy_checks.py runs them again through the
workbench's fast loader, whose converted copy is never trusted more than its source
(workbench/tests/test_fast_copy.py)."""

import json
import os
import shutil
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from fixtures import ROOT, make_model_dir, save_tensors
from gpt2 import GPT2
from permissions import permissions_binding_root
from weights import checkpoint, reading
from weights.checkpoint import CheckpointError

IDS = [5, 0, 17, 200, 3, 99, 41, 7]


@pytest.fixture(scope="module")
def load():
    """The loader under test: model directory -> model."""
    return GPT2.from_pretrained


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A small checkpoint (config.json + model.safetensors) that tests copy, never convert in place."""
    return make_model_dir(tmp_path_factory.mktemp("template"), seed=3, n_layer=2, tokenizer=False)


@pytest.fixture(scope="module")
def pristine(template, load, tmp_path_factory):
    """The template's logits for IDS, from a fresh copy of it loaded alone."""
    return load(fresh_copy(template, tmp_path_factory.mktemp("pristine"))).forward(IDS)


def fresh_copy(src, dest):
    """A copy of src's config.json and model.safetensors in dest, not converted yet."""
    os.makedirs(dest, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(src, name), dest)
    return str(dest)


def read_raw(path):
    """(parsed header, data bytes) of a .safetensors file, unchecked."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), f.read()


def write_raw(path, header, data):
    """A .safetensors file from a header (any JSON value, or bytes) and data bytes, unchecked."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def edit_config(model_dir, **changes):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(changes)
    with open(path, "w") as f:
        json.dump(config, f)


def notes(capfd):
    """The lines the loads since the last call wrote on stderr."""
    return capfd.readouterr().err.strip().splitlines()


def temp_files(model_dir):
    return sorted(f for f in os.listdir(model_dir) if f.endswith(".tmp"))  # files.TEMP's, and any other


# ---------------------------------------------------------------------------
# Fault 1: two writers of one file
# ---------------------------------------------------------------------------

def test_two_writers_of_one_file_never_share_a_temporary_file(tmp_path):
    # The same fault, deterministically: a second writer runs to completion while
    # the first is half-way through its own write of the same path.
    path = str(tmp_path / "x.safetensors")
    first = {f"t{i}": np.full((64, 64), i + 1, np.float32) for i in range(6)}
    second = {k: -t for k, t in first.items()}

    def first_tensor(name):
        if name == "t3":
            save_tensors(path, second)
        return first[name]

    checkpoint.save_safetensors(path, {k: t.shape for k, t in first.items()}, first_tensor)
    got = checkpoint.load_safetensors(path)
    assert all(np.array_equal(got[k], first[k]) for k in first)  # the last rename wins, whole
    assert temp_files(tmp_path) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = str(tmp_path / "x.safetensors")
    save_tensors(path, {"a": np.ones(4, np.float32)})

    def tensor(name):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_safetensors(path, {"a": (4,)}, tensor)
    assert temp_files(tmp_path) == []
    assert np.array_equal(checkpoint.load_safetensors(path)["a"], np.ones(4, np.float32))


# ---------------------------------------------------------------------------
# Fault 2: one validation pass per file type
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def raw_checkpoint(template):
    return read_raw(os.path.join(template, "model.safetensors"))


def broken_header(header, change):
    """A copy of a checkpoint header with `change` applied to it (a function of the copy, or a new header)."""
    header = json.loads(json.dumps(header))
    return change(header) if callable(change) else change


def set_field(name, field, value):
    def change(header):
        header[name][field] = value
        return header
    return change


FIRST, SECOND, LAST = "wte.weight", "wpe.weight", "h.1.mlp.c_proj.bias"
BAD_HEADERS = {
    "a list": ([], "a list, not an object"),
    "null": (None, "null, not an object"),
    "a string": ("F32", "a string, not an object"),
    "entry a list": (lambda h: {**h, FIRST: [1, 2]}, "entry is a list"),
    "entry null": (lambda h: {**h, FIRST: None}, "entry is null"),
    "offsets strings": (set_field(FIRST, "data_offsets", ["0", "100"]), "data_offsets must be two integers"),
    "offsets floats": (set_field(FIRST, "data_offsets", [0.0, 69632.0]), "data_offsets must be two integers"),
    "offsets booleans": (set_field(FIRST, "data_offsets", [False, True]), "data_offsets must be two integers"),
    "offsets three": (set_field(FIRST, "data_offsets", [0, 4, 8]), "data_offsets must be two integers"),
    "offsets negative": (set_field(FIRST, "data_offsets", [-4, 69628]), "negative or reversed"),
    "offsets reversed": (lambda h: set_field(FIRST, "data_offsets", h[FIRST]["data_offsets"][::-1])(h), "negative or reversed"),
    "offsets misaligned": (lambda h: set_field(SECOND, "data_offsets", [o + 2 for o in h[SECOND]["data_offsets"]])(h),
                           "not a multiple of F32's 4 bytes"),
    "offsets overlapping": (lambda h: set_field(SECOND, "data_offsets", [o - 4 for o in h[SECOND]["data_offsets"]])(h),
                            "overlap or leave a gap"),
    "aliasing another tensor": (lambda h: set_field(LAST, "data_offsets", h["h.1.ln_2.bias"]["data_offsets"])(h),
                                "overlap or leave a gap"),
    "leaving the tail unused": (lambda h: set_field(LAST, "data_offsets", h["h.1.ln_2.bias"]["data_offsets"])(
                                    {k: v for k, v in h.items() if k != "h.1.ln_2.bias"}), "after the last tensor"),
    "beyond the file": (lambda h: set_field(LAST, "data_offsets", [o + 256 for o in h[LAST]["data_offsets"]])(h), "truncated"),
    "shape negative": (set_field(FIRST, "shape", [-272, -64]), "shape must be a list of non-negative integers"),
    "shape float": (set_field(FIRST, "shape", [272.0, 64]), "shape must be a list of non-negative integers"),
    "shape string": (set_field(FIRST, "shape", "272x64"), "shape must be a list of non-negative integers"),
    "shape overflowing int64": (set_field(FIRST, "shape", [2 ** 40, 2 ** 40, 0]), "too big for any array"),
    "shape wrong size": (set_field(FIRST, "shape", [64, 64]), "has 69632 bytes, not the 16384"),
    "dtype unknown": (set_field(FIRST, "dtype", "F33"), 'unknown dtype "F33"'),
    "dtype a number": (set_field(FIRST, "dtype", 32), "unknown dtype 32"),
    "dtype missing": (lambda h: {**h, FIRST: {k: v for k, v in h[FIRST].items() if k != "dtype"}}, "unknown dtype null"),
    "dtype not a float": (set_field(FIRST, "dtype", "I32"), "has dtype I32; supported: F32, F16, BF16"),
    "metadata a list": (lambda h: {**h, "__metadata__": ["source"]}, "__metadata__ must map names to strings"),
}


@pytest.mark.parametrize("case", BAD_HEADERS)
def test_a_bad_safetensors_header_is_a_checkpoint_error_naming_file_field_and_problem(tmp_path, template, raw_checkpoint, case, load):
    change, message = BAD_HEADERS[case]
    header, data = raw_checkpoint
    assert header[FIRST]["data_offsets"] == [0, 69632] and header[FIRST]["shape"] == [272, 64]  # what the cases assume
    model_dir = fresh_copy(template, tmp_path)
    path = os.path.join(model_dir, "model.safetensors")
    write_raw(path, broken_header(header, change), data)
    with pytest.raises(CheckpointError) as e:
        load(model_dir)
    assert str(e.value).startswith(path) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("prefix", [b"", b"\x08\x00", (2 ** 64 - 1).to_bytes(8, "little"), (10 ** 6).to_bytes(8, "little")])
def test_a_bad_header_length_is_a_checkpoint_error(tmp_path, prefix):
    path = str(tmp_path / "x.safetensors")
    with open(path, "wb") as f:
        f.write(prefix)
    with pytest.raises(CheckpointError, match="not a safetensors file|truncated"):
        checkpoint.load_safetensors(path)


@pytest.mark.parametrize("text", [b"{", b'{"a": ' * 100_000, b"\xff\xfe{}", b"\x80{}"],
                         ids=["unclosed", "nested 100000 deep", "utf-16", "not utf-8"])
def test_a_header_that_is_not_json_is_a_checkpoint_error(tmp_path, text):
    path = str(tmp_path / "x.safetensors")
    write_raw(path, text, b"")
    with pytest.raises(CheckpointError, match="corrupt safetensors header"):
        checkpoint.load_safetensors(path)


def test_a_deeply_nested_header_is_a_checkpoint_error(tmp_path):
    path = str(tmp_path / "x.safetensors")
    write_raw(path, b"[" * 200_000 + b"]" * 200_000, b"")
    with pytest.raises(CheckpointError, match="corrupt safetensors header"):
        checkpoint.load_safetensors(path)


BAD_CONFIGS = {
    "a list": ([], "a list, not an object of settings"),
    "null": (None, "null, not an object of settings"),
    "n_head 0": ({"n_head": 0}, "n_head must be a positive integer, not 0"),
    "n_head negative": ({"n_head": -4}, "n_head must be a positive integer, not -4"),
    "n_layer 0": ({"n_layer": 0}, "n_layer must be a positive integer, not 0"),
    "n_layer negative": ({"n_layer": -2}, "n_layer must be a positive integer, not -2"),
    "n_layer fractional": ({"n_layer": 2.5}, "n_layer must be a positive integer, not 2.5"),
    "n_layer a float": ({"n_layer": 2.0}, "n_layer must be a positive integer, not 2.0"),
    "n_layer a string": ({"n_layer": "2"}, 'n_layer must be a positive integer, not "2"'),
    "n_layer a boolean": ({"n_layer": True}, "n_layer must be a positive integer, not true"),
    "n_embd 0": ({"n_embd": 0}, "n_embd must be a positive integer, not 0"),
    "n_embd fractional": ({"n_embd": 64.5}, "n_embd must be a positive integer"),
    "vocab_size negative": ({"vocab_size": -1}, "vocab_size must be a positive integer"),
    "vocab_size fractional": ({"vocab_size": 271.5}, "vocab_size must be a positive integer"),
    "n_positions 0": ({"n_positions": 0}, "n_positions must be a positive integer"),
    "n_positions missing": ({"n_positions": None}, "n_positions is missing"),
    "layer_norm_epsilon NaN": ({"layer_norm_epsilon": float("nan")}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon infinite": ({"layer_norm_epsilon": float("inf")}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon negative": ({"layer_norm_epsilon": -1e-5}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon zero": ({"layer_norm_epsilon": 0}, "layer_norm_epsilon must be a positive number"),
    "layer_norm_epsilon 0 in float32": ({"layer_norm_epsilon": 1e-50}, "within float32's range"),
    "layer_norm_epsilon a string": ({"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon must be a positive number"),
    "n_embd not a multiple of n_head": ({"n_head": 5}, "n_embd 64 is not a multiple of n_head 5"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_a_bad_config_is_a_checkpoint_error_naming_file_field_and_problem(tmp_path, template, case, load):
    changes, message = BAD_CONFIGS[case]
    model_dir = fresh_copy(template, tmp_path)
    path = os.path.join(model_dir, "config.json")
    if isinstance(changes, dict):
        edit_config(model_dir, **changes)
    else:
        with open(path, "w") as f:
            json.dump(changes, f)
    with pytest.raises(CheckpointError) as e:
        load(model_dir)
    assert str(e.value).startswith(path) and message in str(e.value), str(e.value)


def test_a_config_of_a_billion_layers_fails_at_once_without_memory(tmp_path, template):
    # It used to build the expected shapes of 10**9 layers, growing until the OOM killer came (the fast copy's
    # conversion: workbench/tests/test_fast_copy_checks.py).
    model_dir = fresh_copy(template, tmp_path)
    edit_config(model_dir, n_layer=10 ** 9)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match=r"tensor h\.2\.ln_1\.weight is missing \(config.json says n_layer=1000000000\)"):
            checkpoint.load(model_dir)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_a_config_with_fewer_layers_than_the_checkpoint_is_refused_naming_the_extra_tensors(tmp_path, template, load):
    model_dir = fresh_copy(template, tmp_path)
    edit_config(model_dir, n_layer=1)
    with pytest.raises(CheckpointError, match=r"config.json \(n_layer=1\) leaves unused: h\.1\.ln_1\.weight, h\.1\.ln_1\.bias, "
                                              r"h\.1\.attn\.c_attn\.weight, h\.1\.attn\.c_attn\.bias and 8 more"):
        load(model_dir)


def test_an_unknown_extra_tensor_is_refused(tmp_path, template, load):
    tensors = {k: np.array(v) for k, v in checkpoint.load_safetensors(os.path.join(template, "model.safetensors")).items()}
    tensors["h.0.mlp.gate.weight"] = np.ones((4, 4), np.float32)
    model_dir = fresh_copy(template, tmp_path)
    save_tensors(os.path.join(model_dir, "model.safetensors"), tensors)
    with pytest.raises(CheckpointError, match=r"leaves unused: h\.0\.mlp\.gate\.weight$"):
        load(model_dir)


@pytest.mark.parametrize("lm_head", ["tied", "untied", "another shape"])
def test_known_harmless_extras_load_identically_and_an_untied_lm_head_is_refused(tmp_path, template, pristine, lm_head, load):
    tensors = checkpoint.load_safetensors(os.path.join(template, "model.safetensors"))
    extended = {"transformer." + k: np.array(v) for k, v in tensors.items()}
    extended["transformer.h.0.attn.bias"] = np.ones((1, 1, 4, 4), np.float32)  # old checkpoints carry the mask...
    extended["transformer.h.1.attn.masked_bias"] = np.full((), -1e4, np.float32)  # ...and its fill value
    extended["lm_head.weight"] = {"tied": np.array(tensors["wte.weight"]), "untied": np.array(tensors["wte.weight"]) * 2,
                                  "another shape": np.ones((4, 64), np.float32)}[lm_head]
    model_dir = fresh_copy(template, tmp_path)
    save_tensors(os.path.join(model_dir, "model.safetensors"), extended)
    if lm_head == "tied":
        np.testing.assert_array_equal(load(model_dir).forward(IDS), pristine)
    else:
        with pytest.raises(CheckpointError, match="lm_head.weight is not wte.weight"):
            load(model_dir)


def test_transformer_prefix_and_extra_buffers_load_identically(tmp_path, tiny_dirs, oracle, load):
    tensors = checkpoint.load_safetensors(os.path.join(tiny_dirs["oracle"], "model.safetensors"))
    prefixed = {"transformer." + k: np.array(v) for k, v in tensors.items()}
    prefixed["transformer.h.0.attn.bias"] = np.ones((1, 1, 4, 4), np.float32)  # old checkpoints carry the mask
    os.makedirs(tmp_path / "m")
    shutil.copy(os.path.join(tiny_dirs["oracle"], "config.json"), tmp_path / "m")
    save_tensors(str(tmp_path / "m" / "model.safetensors"), prefixed)
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    np.testing.assert_array_equal(load(str(tmp_path / "m")).forward(ids), oracle.forward(ids))


def test_half_precision_checkpoints_load_as_float32(tmp_path, template, load):
    tensors = checkpoint.load_safetensors(os.path.join(template, "model.safetensors"))
    header, _ = read_raw(os.path.join(template, "model.safetensors"))
    for dtype, as_bits in (("F16", lambda t: t.astype(np.float16).view(np.uint16)),
                           ("BF16", lambda t: (t.view(np.uint32) >> 16).astype(np.uint16))):
        half, data, offset = {}, b"", 0
        for name in header:
            if name != "__metadata__":
                bits = as_bits(np.array(tensors[name]))
                half[name] = {"dtype": dtype, "shape": list(bits.shape), "data_offsets": [offset, offset + bits.nbytes]}
                data, offset = data + bits.tobytes(), offset + bits.nbytes
        model_dir = fresh_copy(template, tmp_path / dtype)
        write_raw(os.path.join(model_dir, "model.safetensors"), half, data)
        loaded = checkpoint.load_safetensors(os.path.join(model_dir, "model.safetensors"))
        assert all(t.dtype == np.float32 for t in loaded.values())
        np.testing.assert_allclose(loaded["wte.weight"], tensors["wte.weight"], rtol=1e-2)
        assert np.isfinite(load(model_dir).forward(IDS)).all()
        # A load that checks the converted copy widens only the values it samples, not the whole file.
        config = checkpoint.load_config(model_dir)
        sampled = checkpoint.checkpoint_tensors(os.path.join(model_dir, "model.safetensors"), config, sampled=True)
        full = checkpoint.checkpoint_tensors(os.path.join(model_dir, "model.safetensors"), config)
        for key, t in sampled.items():
            assert isinstance(t, checkpoint.Widened) and t.shape == full[key].shape
            np.testing.assert_array_equal(checkpoint.sampled_values(t), checkpoint.sampled_values(full[key]))
            np.testing.assert_array_equal(checkpoint.sampled_values(t.T), checkpoint.sampled_values(full[key].T))


def test_truncated_checkpoint_names_the_file(tmp_path, load):
    d = make_model_dir(tmp_path, tokenizer=False)
    path = os.path.join(d, "model.safetensors")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CheckpointError, match="model.safetensors: truncated"):
        load(d)


def test_garbage_checkpoint_is_a_clear_error(tmp_path, load):
    d = make_model_dir(tmp_path, tokenizer=False)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(b"<html>not found</html>")
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load(d)


def test_checkpoint_that_does_not_match_config(tmp_path, load):
    d = make_model_dir(tmp_path, tokenizer=False)
    edit_config(d, n_embd=128)
    with pytest.raises(CheckpointError, match=r"wte.weight has shape \[\d+, 64\], config.json implies \[\d+, 128\]"):
        load(d)


def test_checkpoint_with_a_missing_layer(tmp_path, load):
    d = make_model_dir(tmp_path, tokenizer=False)
    edit_config(d, n_layer=5)
    with pytest.raises(CheckpointError, match="h.2.ln_1.weight is missing"):
        load(d)


# ---------------------------------------------------------------------------
# Fault 5: other OSErrors
# ---------------------------------------------------------------------------

@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_an_unreadable_checkpoint_is_a_checkpoint_error_with_its_path(tmp_path, template, load):
    model_dir = fresh_copy(template, tmp_path)
    os.chmod(os.path.join(model_dir, "model.safetensors"), 0)
    with permissions_binding_root() as binding:
        if not binding:
            pytest.skip("root reads files whatever their permissions, and cannot set that aside here")
        with pytest.raises(CheckpointError, match="model.safetensors: cannot read it"):
            load(model_dir)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_an_unreadable_file_is_a_checkpoint_error_with_its_path(tmp_path, template, monkeypatch, name, load):
    # Simulated, since tests may run as root, whom permissions do not stop. Every file from outside is
    # opened by weights/reading.py, with os.open.
    real_open = os.open

    def deny(path, *args, **kwargs):
        if str(path).endswith(name):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    model_dir = fresh_copy(template, tmp_path)
    monkeypatch.setattr(reading.os, "open", deny)
    with pytest.raises(CheckpointError, match=f"{name}: cannot read it.*Permission denied"):
        load(model_dir)


# ---------------------------------------------------------------------------
# What the user sees
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"n_layer": 10 ** 9}, {"n_layer": 1}, {"layer_norm_epsilon": float("nan")}, []],
                         ids=["a billion layers", "fewer layers", "epsilon NaN", "a list"])
def test_a_bad_checkpoint_is_one_line_from_the_command_line(tmp_path, tiny_dirs, change):
    model_dir = str(tmp_path / "oracle")
    shutil.copytree(tiny_dirs["oracle"], model_dir, ignore=shutil.ignore_patterns("model.blocked.*"))
    if isinstance(change, dict):
        edit_config(model_dir, **change)
    else:
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(change, f)
    r = subprocess.run([sys.executable, "speculative.py", "the cat", "-n", "4", "--draft", tiny_dirs["draft"],
                        "--oracle", model_dir], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and model_dir in errors[0], r.stderr
