"""Property-based fuzzing of every parser of outside input (hypothesis, a test-only dependency): the weights' files.

Each target is one property (fuzzing.py): given anything, a parser either returns a valid result or raises
the project's own clear error, never another exception, never a hang, never a huge allocation: outside
input must end in one clear line, not in a traceback (errors.py).

  1. model.safetensors: arbitrary bytes, and near-valid files (a valid header mutated),
     through checkpoint.load_safetensors and checkpoint_tensors (what load() and load_fast use)
  2. config.json: arbitrary JSON, mutated valid configs and raw bytes, through validate_config,
     load_config and the downloader's own check
  6. tensors of any values, NaN, infinities and 3e38 among them: loaded only when every value is
     finite, the refusal naming a tensor that is not; and the acceptance test on any numbers
  7. names like this program's temporary files: remove_stale removes only a killed writer's own
  8. HF_ENDPOINT with any user name and password (/ # ? @ % [ ] ...): used with its real host, or
     refused in one line that holds none of them

The others: vocab.json and merges.txt (3) in test_fuzz_tokenizer.py, the command line's and the session's
numbers (4, 5) in test_fuzz_settings.py, with the negative control: a parser that lets int()'s ValueError
through fails the same property.
"""

import pytest

hypothesis = pytest.importorskip("hypothesis")

import contextlib  # noqa: E402
import copy  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzzing import JSON, ODD_NUMBERS, REFUSED, SCALARS, Bounded, NotClear, encoded, fuzz, parsed, scratch, write  # noqa: E402,F401
from weights import checkpoint, download, tokenizer  # noqa: E402
from weights.checkpoint import ITEM_SIZES, CheckpointError  # noqa: E402
from weights.download import DownloadError  # noqa: E402
from weights.tokenizer import TokenizerError  # noqa: E402


# ---------------------------------------------------------------------------
# 1. model.safetensors
# ---------------------------------------------------------------------------

TINY = checkpoint.validate_config("config.json", {"n_layer": 1, "n_head": 1, "n_embd": 2, "n_positions": 2, "vocab_size": 3})


def tiny_header():
    """(header, n_data) of a valid checkpoint of TINY, its tensors F32 and laid out in file order."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in checkpoint.expected_tensors(TINY):
        n_bytes = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n_bytes]}
        offset += n_bytes
    return header, offset


def safetensors_bytes(header, data, prefix=None, pad=0):
    text = json.dumps(header).encode() + b" " * pad
    length = len(text) if prefix is None else prefix
    return (length % 2 ** 64).to_bytes(8, "little") + text + data


def load_checked(path, config=TINY):
    """The public readers of a .safetensors file, each held to the property; on success, every value is read."""
    tensors = parsed(lambda: checkpoint.load_safetensors(path), CheckpointError)
    if tensors is not REFUSED:
        for name, t in tensors.items():
            assert t.dtype == np.float32, name
            np.asarray(t).tobytes()  # every byte of the mapping is there (a range past the file would be a SIGBUS)
    for sampled in (False, True):
        needed = parsed(lambda: checkpoint.checkpoint_tensors(path, config, sampled=sampled), CheckpointError)
        if needed is not REFUSED:
            assert list(needed) == [key for key, _ in checkpoint.expected_tensors(config)]
            for key, shape in checkpoint.expected_tensors(config):
                assert tuple(needed[key].shape) == shape, key
                checkpoint.sampled_values(needed[key])
    return tensors


@fuzz()
@given(content=st.one_of(
    st.binary(max_size=300),
    st.tuples(st.integers(min_value=0, max_value=400), st.binary(max_size=300)).map(lambda t: t[0].to_bytes(8, "little") + t[1]),
    st.tuples(st.sampled_from([0, 1, 2, 7, 8, 2 ** 27, checkpoint.MAX_HEADER_BYTES, checkpoint.MAX_HEADER_BYTES + 1, 2 ** 63,
                               2 ** 64 - 1]), st.binary(max_size=50)).map(lambda t: t[0].to_bytes(8, "little") + t[1]),
    st.tuples(JSON, st.binary(max_size=64)).map(lambda t: safetensors_bytes(t[0], t[1])),
))
def test_1_safetensors_of_arbitrary_bytes(scratch, content):
    load_checked(write(os.path.join(scratch, "arbitrary.safetensors"), content))


DTYPES = st.one_of(st.sampled_from(sorted(ITEM_SIZES)), st.sampled_from(["f32", "F64 ", "FLOAT", "", "__proto__", "F32\x00"]), JSON)
SHAPES = st.one_of(
    st.lists(st.integers(min_value=-2, max_value=6), max_size=4),
    st.lists(st.sampled_from(ODD_NUMBERS), max_size=4),
    st.lists(st.sampled_from([0, 1, 2, 3, 2 ** 31, 2 ** 32, 2 ** 62, 2 ** 63, 2 ** 64, 10 ** 30]), max_size=5),
    st.integers(min_value=0, max_value=33).map(lambda n: [1] * n),
    st.lists(st.lists(st.integers(0, 3), max_size=2), max_size=2),
    JSON,
)
OFFSETS = st.one_of(
    st.lists(st.integers(min_value=-8, max_value=400), min_size=2, max_size=2),
    st.lists(st.sampled_from(ODD_NUMBERS), min_size=2, max_size=2),
    st.lists(st.integers(min_value=0, max_value=100), max_size=4),
    JSON,
)


@fuzz(400)
@given(data=st.data())
def test_1_safetensors_near_valid_headers(scratch, data):
    header, n_data = tiny_header()
    names = [name for name in header if name != "__metadata__"]
    for _ in range(data.draw(st.integers(min_value=1, max_value=4), label="mutations")):
        name = data.draw(st.sampled_from(names), label="tensor")
        kind = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "entry", "extra key", "drop key", "drop tensor",
                                          "copy tensor", "rename", "swap offsets", "shift offsets", "metadata", "tied head",
                                          "retype", "header"]), label="mutation")
        entry = header.get(name)
        if not isinstance(entry, dict):
            continue
        if kind == "dtype":
            entry["dtype"] = data.draw(DTYPES, label="dtype")
        elif kind == "shape":
            entry["shape"] = data.draw(SHAPES, label="shape")
        elif kind == "data_offsets":
            entry["data_offsets"] = data.draw(OFFSETS, label="data_offsets")
        elif kind == "entry":
            header[name] = data.draw(JSON, label="entry")
        elif kind == "extra key":
            entry[data.draw(st.text(max_size=6), label="key")] = data.draw(JSON, label="value")
        elif kind == "drop key":
            entry.pop(data.draw(st.sampled_from(["dtype", "shape", "data_offsets"]), label="key"), None)
        elif kind == "drop tensor":
            header.pop(name)
        elif kind == "copy tensor":  # the same bytes twice: overlap, or a name the config does not know
            header[data.draw(st.sampled_from(["lm_head.weight", "h.0.attn.bias", "h.1.ln_1.weight", "transformer." + name,
                                              "extra", name + " "]), label="copy as")] = copy.deepcopy(entry)
        elif kind == "rename":
            header[data.draw(st.sampled_from(["transformer." + name, name.upper(), "", "__metadata__", name + "\x00"]),
                             label="new name")] = header.pop(name)
        elif kind == "swap offsets":
            other = header.get(data.draw(st.sampled_from(names), label="other"))
            if isinstance(other, dict):
                entry["data_offsets"], other["data_offsets"] = other.get("data_offsets"), entry.get("data_offsets")
        elif kind == "shift offsets":
            shift = data.draw(st.integers(min_value=-8, max_value=8), label="shift")
            if isinstance(entry.get("data_offsets"), list):
                entry["data_offsets"] = [n + shift if checkpoint.is_int(n) else n for n in entry["data_offsets"]]
        elif kind == "metadata":
            header["__metadata__"] = data.draw(JSON, label="metadata")
        elif kind == "tied head":  # an LM head beside wte: the same bytes, or others, of any dtype and shape
            wte = header.get("wte.weight")
            header["lm_head.weight"] = {"dtype": data.draw(st.sampled_from(["F32", "F16", "BF16", "I32"]), label="head dtype"),
                                        "shape": data.draw(st.sampled_from([[3, 2], [2, 3], [6], [3, 2, 1]]), label="head shape"),
                                        "data_offsets": copy.deepcopy(wte.get("data_offsets") if isinstance(wte, dict) else [0, 24])}
        elif kind == "retype":  # a narrower dtype with the same bytes: valid for half as many values, or twice the shape
            entry["dtype"] = data.draw(st.sampled_from(["F16", "BF16", "U8", "F64"]), label="new dtype")
            if isinstance(entry.get("shape"), list) and entry["shape"] and checkpoint.is_int(entry["shape"][-1]):
                entry["shape"][-1] *= data.draw(st.sampled_from([1, 2, 4]), label="factor")
        elif kind == "header":
            header = data.draw(st.one_of(JSON, st.just([header])), label="header")
            break
    data_bytes = data.draw(st.one_of(st.just(b"\x00" * n_data), st.binary(min_size=n_data, max_size=n_data),
                                     st.binary(max_size=n_data + 16)), label="data")
    prefix = data.draw(st.one_of(st.none(), st.integers(min_value=-16, max_value=16), st.sampled_from(["file", "huge"])),
                       label="length change")
    pad = data.draw(st.sampled_from([0, 0, 1, 7, 100]), label="pad")
    text_length = len(json.dumps(header).encode()) + pad
    if prefix == "file":  # the whole file's size: a header that would run past its end
        prefix = text_length + 8 + len(data_bytes)
    elif prefix == "huge":
        prefix = 2 ** 64 - 1
    elif prefix is not None:  # a length a few bytes off
        prefix = max(text_length + prefix, 0)
    content = safetensors_bytes(header, data_bytes, prefix=prefix, pad=pad)
    if data.draw(st.booleans(), label="cut the file"):
        content = content[:data.draw(st.integers(min_value=0, max_value=len(content)), label="length")]
    load_checked(write(os.path.join(scratch, "near-valid.safetensors"), content))


@fuzz()
@given(tensors=st.lists(st.tuples(st.text(min_size=1, max_size=8), st.sampled_from(sorted(ITEM_SIZES)),
                                  st.lists(st.integers(min_value=0, max_value=4), max_size=3)),
                        max_size=6, unique_by=lambda t: t[0]),
       order=st.randoms(use_true_random=False), fill=st.binary(min_size=1, max_size=8), metadata=JSON)
def test_1_safetensors_of_any_dtype_and_layout(scratch, tensors, order, fill, metadata):
    """Valid files of every dtype of the format, their tensors in any order: read, or refused as unsupported."""
    header, offset = {}, 0
    order.shuffle(tensors)
    for name, dtype, shape in tensors:
        n_bytes = ITEM_SIZES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n_bytes]}
        offset += n_bytes
    if metadata is not None:
        header["__metadata__"] = metadata
    path = write(os.path.join(scratch, "layout.safetensors"), safetensors_bytes(header, (fill * offset)[:offset]))
    loaded = load_checked(path)
    valid = all(isinstance(v, str) for v in metadata.values()) if isinstance(metadata, dict) else metadata is None
    # each tensor starting on a multiple of its item size, as NumPy views need (checkpoint.validate_entry)
    valid = valid and all(h["data_offsets"][0] % ITEM_SIZES[h["dtype"]] == 0 for n, h in header.items() if n != "__metadata__")
    supported = {name for name, dtype, _ in tensors if dtype in checkpoint.SAFETENSORS_DTYPES}
    if valid and len(supported) == len(tensors) and "__metadata__" not in [t[0] for t in tensors]:
        assert loaded is not REFUSED, header  # a valid file is read
        assert {name: list(t.shape) for name, t in loaded.items()} == {name: shape for name, _, shape in tensors}


def nested(depth):
    return "[" * depth + "]" * depth


def stack_depth():
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_1_2_3_values_nested_up_to_the_recursion_limit(scratch):
    """Every nesting depth, one by one, around the deepest json.loads can read from here: a value
    nested just shallow enough for json.loads must not be too deep for the message that quotes it
    (json.dumps, a few frames deeper). Exhaustive: random depths would almost never hit the few that
    matter. The readers run a few frames below this one; the window leaves them 80 frames."""
    config_dir, vocab_dir = os.path.join(scratch, "nested-config"), os.path.join(scratch, "nested-vocab")
    os.makedirs(config_dir, exist_ok=True)
    os.makedirs(vocab_dir, exist_ok=True)
    write(os.path.join(vocab_dir, "merges.txt"), "")
    failures = []
    deepest = sys.getrecursionlimit() - stack_depth()  # what json.loads could nest to if called right here
    for depth in range(max(1, deepest - 80), deepest + 5):
        header = '{"wte.weight": {"dtype": "F32", "shape": %s, "data_offsets": [0, 0]}}' % nested(depth)
        path = write(os.path.join(scratch, "nested.safetensors"), len(header).to_bytes(8, "little") + header.encode())
        write(os.path.join(config_dir, "config.json"), '{"n_layer": %s}' % nested(depth))
        write(os.path.join(vocab_dir, "vocab.json"), '{"a": %s}' % nested(depth))
        for what, call, clear in (("model.safetensors", lambda: checkpoint.load_safetensors(path), CheckpointError),
                                  ("config.json", lambda: checkpoint.load_config(config_dir), CheckpointError),
                                  ("vocab.json", lambda: tokenizer.load_tokenizer(vocab_dir), TokenizerError)):
            try:
                parsed(call, clear)
            except NotClear as e:
                failures.append(f"{what} nested {depth} deep: {e}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------
# 2. config.json
# ---------------------------------------------------------------------------

VALID_CONFIG = {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128, "n_ctx": 128,
                "vocab_size": 272, "layer_norm_epsilon": 1e-5}
SIZES = ("n_layer", "n_head", "n_embd", "vocab_size", "n_positions")
FLOAT32_MAX = float(np.finfo(np.float32).max)


def assert_valid_config(config):
    """What validate_config promises the model: positive integer sizes, a usable float32 epsilon, whole heads."""
    assert set(config) == set(SIZES) | {"layer_norm_epsilon"}, config
    for key in SIZES:
        assert type(config[key]) is int and config[key] > 0, (key, config[key])
    eps = config["layer_norm_epsilon"]
    assert type(eps) in (int, float) and 0 < eps <= FLOAT32_MAX and 0 < np.float32(eps) < np.inf, eps
    assert config["n_embd"] % config["n_head"] == 0, config


def checked_config(raw):
    config = parsed(lambda: checkpoint.validate_config("config.json", raw), CheckpointError)
    if config is not REFUSED:
        assert_valid_config(config)
    return config


@fuzz()
@given(raw=JSON)
def test_2_config_of_arbitrary_json(raw):
    checked_config(raw)


CONFIG_VALUES = st.one_of(SCALARS, JSON, st.integers(min_value=-2, max_value=2 ** 70),
                          st.floats(min_value=0, max_value=1e-30) | st.floats(min_value=1e30))


@st.composite
def mutated_configs(draw):
    raw = dict(VALID_CONFIG)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        key = draw(st.sampled_from(sorted(VALID_CONFIG) + ["n_inner", "__proto__"]))
        if draw(st.booleans()):
            raw.pop(key, None)
        else:
            raw[key] = draw(CONFIG_VALUES)
    return raw


@fuzz()
@given(raw=mutated_configs())
def test_2_mutated_configs(raw):
    checked_config(raw)


ENCODINGS = ["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-32", "latin-1"]


@fuzz()
@given(content=st.one_of(
    st.binary(max_size=200),
    st.text(max_size=100),
    st.tuples(mutated_configs(), st.sampled_from(ENCODINGS), st.booleans()).map(
        lambda t: encoded(json.dumps(t[0], ensure_ascii=t[2]), t[1])),
    st.sampled_from([b"", b"{", b"\xff\xfe", b'{"n_layer": ' + b"9" * 5000 + b"}", b"<html>captive portal</html>",
                     b"[" * 100000, b'{"n_layer": 2, "n_layer": true}']),
))
def test_2_config_files_through_the_loader_and_the_downloader(scratch, content):
    model_dir = os.path.join(scratch, "config-file")
    os.makedirs(model_dir, exist_ok=True)
    write(os.path.join(model_dir, "config.json"), content)
    config = parsed(lambda: checkpoint.load_config(model_dir), CheckpointError)
    if config is not REFUSED:
        assert_valid_config(config)
    partial = write(os.path.join(model_dir, "config.json.incomplete"), content)
    parsed(lambda: download.verify(partial, "config.json", len(content), None), DownloadError)


# ---------------------------------------------------------------------------
# 6-8. The fourth pass's classes (issue 43): non-finite tensors, names like temporaries, URLs with reserved characters
# ---------------------------------------------------------------------------

SPECIAL_FLOATS = [float("nan"), float("inf"), -float("inf"), 3e38, -3e38, 3.4028235e38, 1e-45, 0.0, -0.0, 65504.0, 7e4]
VALUES = st.one_of(st.floats(width=32), st.sampled_from(SPECIAL_FLOATS), st.floats(min_value=-2, max_value=2, width=32))
WIDTH = {"F32": np.float32, "F16": np.float16, "BF16": np.float32}  # BF16: the top half of a float32


def stored(values, dtype):
    """(the bytes of values as dtype, the float32 values the loader widens them to)."""
    with np.errstate(over="ignore"):
        wide = np.asarray(values, np.float32).astype(WIDTH[dtype])
    if dtype == "BF16":
        half = (wide.view(np.uint32) >> 16).astype(np.uint16)
        return half.tobytes(), (half.astype(np.uint32) << 16).view(np.float32)
    return wide.tobytes(), wide.astype(np.float32)


@fuzz()
@given(data=st.data(), dtype=st.sampled_from(["F32", "F16", "BF16"]))
def test_6_a_checkpoint_with_any_values_loads_only_when_every_value_is_finite(scratch, data, dtype):
    header, _ = tiny_header()
    names = [n for n in header if n != "__metadata__"]
    chunks, widened, offset = [], {}, 0
    for name in names:
        size = math.prod(header[name]["shape"])
        values = data.draw(st.lists(VALUES, min_size=size, max_size=size), label=name)
        raw, widened[name] = stored(values, dtype)
        header[name] = {**header[name], "dtype": dtype, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    path = write(os.path.join(scratch, "values.safetensors"), safetensors_bytes(header, b"".join(chunks)))
    loaded = parsed(lambda: checkpoint.checkpoint_tensors(path, TINY), CheckpointError)
    bad = [name for name in names if not np.isfinite(widened[name]).all()]
    if not bad:
        assert loaded is not REFUSED and all(np.array_equal(loaded[n], widened[n].reshape(loaded[n].shape)) for n in names)
        return
    assert loaded is REFUSED
    with pytest.raises(CheckpointError) as e:
        checkpoint.checkpoint_tensors(path, TINY)
    named = str(e.value).split(": tensor ", 1)[1].split(" holds ", 1)[0]
    assert str(e.value).startswith(f"{path}: tensor ") and named in bad, str(e.value)
    assert parsed(lambda: checkpoint.checkpoint_tensors(path, TINY, sampled=True), CheckpointError) is not REFUSED


@fuzz()
@given(q=st.lists(VALUES, min_size=4, max_size=4), p=st.lists(VALUES, min_size=4, max_size=4),
       x=st.integers(min_value=0, max_value=3))
def test_6_the_acceptance_test_keeps_a_draft_only_on_finite_numbers(q, p, x):
    import sps
    q, p = np.float32(q), np.float32(p)
    with Bounded():
        a = sps.acceptance_probability(q, p, x)
    assert type(a) is float and 0.0 <= a <= 1.0
    sound = np.isfinite(q[x]) and np.isfinite(p[x]) and p[x] > 0 and q[x] >= 0
    assert a == (min(1.0, float(q[x]) / float(p[x])) if sound else 0.0), (q[x], p[x], a)


DEAD_PID = [None]


def dead_pid():
    if DEAD_PID[0] is None:
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        DEAD_PID[0] = child.pid
    return DEAD_PID[0]


HEX = "0123456789abcdef"
TEMP_LIKE = st.one_of(
    st.tuples(st.sampled_from([".speculative-gpt2-", ".speculative-gpt2-", ".writing-", "", "notes.", ".Speculative-gpt2-"]),
              st.one_of(st.sampled_from(["dead", "mine", "0", "4194304", "2147483647", "2147483648", "99999999999999999999",
                                         "-1", "00012"]),
                        st.integers(min_value=0, max_value=2 ** 70).map(str)),
              st.sampled_from(["-", "-", ".", ""]),
              st.one_of(st.text(HEX, min_size=16, max_size=16), st.text(HEX + "ABCDEFxyz", max_size=20)),
              st.sampled_from([".tmp", ".tmp", ".TMP", ".tmp.bak", "", ".tmp "])).map("".join),
    st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=30),
)


@fuzz()
@given(names=st.lists(TEMP_LIKE, min_size=1, max_size=6, unique=True), as_dir=st.lists(st.booleans(), min_size=6, max_size=6))
def test_7_only_a_killed_writers_own_temporary_names_are_removed(scratch, names, as_dir):
    from weights import files
    names = [n.replace("dead", str(dead_pid())).replace("mine", str(os.getpid())) for n in names]
    names = [n for n in dict.fromkeys(names) if n not in (".", "..") and len(n.encode("utf-8", "surrogatepass")) <= 200]
    folder = tempfile.mkdtemp(dir=scratch)
    try:
        for name, is_dir in zip(names, as_dir):
            path = os.path.join(folder, name)
            if is_dir:
                os.mkdir(path)
                write(os.path.join(path, "inner"), b"inside")
            else:
                write(path, b"the user's own")
        with Bounded(), contextlib.redirect_stderr(io.StringIO()) as said:
            files.remove_stale(folder)
        ours = {n for n in names if (m := files.TEMP.fullmatch(n)) and 0 < int(m.group(1)) <= files.MAX_PID
                and files.process_is_gone(int(m.group(1)))}
        assert sorted(os.listdir(folder)) == sorted(set(names) - ours)
        assert said.getvalue().count("note: removed") == len(ours)
        assert all(n.startswith(".speculative-gpt2-") and n.endswith(".tmp") for n in ours)
    finally:
        shutil.rmtree(folder)


USERINFO = st.text(st.sampled_from("aZ09/#?@:%[]!$&'()*+,;= .~-_\\\t2F"), max_size=10)


@fuzz()
@given(user=USERINFO, password=USERINFO, scheme=st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
       host=st.sampled_from(["127.0.0.1", "hf-mirror.com", "[::1]", "h", ""]),
       port=st.sampled_from(["", ":8080", ":0", ":99999", ":x"]), path=st.sampled_from(["", "/", "/mirror", "/a?b#c"]))
def test_8_an_endpoint_with_any_credentials_is_used_or_refused_naming_none_of_them(user, password, scheme, host, port,
                                                                                 path):
    from weights import http
    user, password = "Uq" + user, "Pz" + password  # marked: any part of them in a message is seen
    value = f"{scheme}://{user}:{password}@{host}{port}{path}"
    with mock_environ(HF_ENDPOINT=value):
        got = parsed(http.endpoint, DownloadError)
        if got is REFUSED:
            with pytest.raises(DownloadError) as e:
                http.endpoint()
            assert "Uq" not in str(e.value) and "Pz" not in str(e.value), str(e.value)
            assert "HF_ENDPOINT" in str(e.value)
            return
    from urllib.parse import urlsplit
    assert got == value.rstrip("/") and urlsplit(value).hostname == host.strip("[]").lower()  # the host, no credentials
    for shown in (http.host_of(value), http.shown_url(value + "/x")):
        assert "Uq" not in shown and "Pz" not in shown, shown


@contextlib.contextmanager
def mock_environ(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
