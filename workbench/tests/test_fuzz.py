"""Property-based fuzzing of every parser of outside input (hypothesis, a test-only dependency).

Each target is one property: given anything, a parser either returns a valid
result or raises the project's own clear error (errors.UserError's subclass for
that input), never another exception (KeyError, ValueError, struct.error,
UnicodeDecodeError, RecursionError...), never a hang, never a huge allocation:
outside input must end in one clear line, not in a traceback (errors.py).

  1. model.safetensors: arbitrary bytes, and near-valid files (a valid header mutated),
     through checkpoint.load_safetensors and checkpoint_tensors (what load() and load_fast use)
  2. config.json: arbitrary JSON, mutated valid configs and raw bytes, through validate_config,
     load_config and the downloader's own check
  3. vocab.json and merges.txt: through validate_vocab, validate_merges, load_tokenizer and the
     downloader's checks
  4. the command line's numeric flags: through runner.parse_setting and cli.parse_args, in process
  5. the session's numeric commands (/n_draft X, /temperature X, /ngram_n X ...): Session.handle
  6. tensors of any values, NaN, infinities and 3e38 among them: loaded only when every value is
     finite, the refusal naming a tensor that is not; and the acceptance test on any numbers
  7. names like this program's temporary files: remove_stale removes only a killed writer's own
  8. HF_ENDPOINT with any user name and password (/ # ? @ % [ ] ...): used with its real host, or
     refused in one line that holds none of them

A negative control shows the properties catch what they are meant to: a parser
that lets int()'s ValueError through fails the same property.

Every target runs at least 300 examples, derandomized (the same examples at
every run) and with no example database; hypothesis's own caches go to a
temporary directory (hypothesis_outside_the_checkout), so nothing is written
in the checkout, not even .hypothesis/ (conftest.py's pytest_sessionfinish).
"""

import pytest

hypothesis = pytest.importorskip("hypothesis")

import atexit  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, find, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from workbench import cli, runner, session  # noqa: E402
from workbench.program import UsageError  # noqa: E402
from workbench.runner import LIMITS  # noqa: E402
from fixtures import TINY_MERGES  # noqa: E402
from errors import CONTROL  # noqa: E402
from processors import Processor  # noqa: E402
from weights import checkpoint, download, tokenizer  # noqa: E402
from weights.checkpoint import ITEM_SIZES, CheckpointError  # noqa: E402
from weights.download import DownloadError  # noqa: E402
from weights.tokenizer import ENDOFTEXT, TokenizerError, bytes_to_unicode  # noqa: E402

EXAMPLES = 300


def fuzz(examples=EXAMPLES):
    """The settings of every target: reproducible, no database, no deadline (the machine is shared)."""
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def hypothesis_outside_the_checkout():
    """hypothesis caches its Unicode tables and the constants it finds in our modules in .hypothesis/ of
    the working directory, database or not, and its pytest plugin does so while collecting (before any
    fixture): so here, on import, they are sent to a temporary directory, removed at exit. A
    HYPOTHESIS_STORAGE_DIRECTORY the user set is left as it is."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    from hypothesis import configuration
    home = tempfile.mkdtemp(prefix="hypothesis-")
    configuration.set_hypothesis_home_dir(home)
    atexit.register(shutil.rmtree, home, ignore_errors=True)


hypothesis_outside_the_checkout()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory the examples write their files into (a function-scoped tmp_path would be one for all examples)."""
    return str(tmp_path_factory.mktemp("fuzz"))


# ---------------------------------------------------------------------------
# The property: a valid result or the clear error, in bounded time and memory
# ---------------------------------------------------------------------------

SECONDS = 20            # per call: a parser of a few kilobytes that takes longer hangs
MEGABYTES = 32          # per call, at its peak (tracemalloc sees NumPy's allocations too)
REFUSED = object()      # what `parsed` returns when the parser raised its clear error


class NotClear(AssertionError):
    """A parser of outside input raised something that is not its clear error (a traceback for the
    user), hung, or allocated far more than its input could justify."""


class Bounded:
    """The body must end within SECONDS (SIGALRM, where there is one) and allocate at most MEGABYTES."""

    def __enter__(self):
        self.alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if self.alarm:
            self.handler = signal.signal(signal.SIGALRM, self.timeout)
            signal.setitimer(signal.ITIMER_REAL, SECONDS)
        self.started = not tracemalloc.is_tracing()
        if self.started:
            tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        return self

    def timeout(self, signum, frame):
        raise NotClear(f"no answer within {SECONDS} s: a hang")

    def __exit__(self, *exc):
        if self.alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.handler)
        peak = tracemalloc.get_traced_memory()[1] - self.base
        if self.started:
            tracemalloc.stop()
        if peak > MEGABYTES << 20:
            raise NotClear(f"allocated {peak >> 20} MB for a few kilobytes of input")
        return False


def parsed(call, clear):
    """call()'s value, or REFUSED when it raised `clear` (the error the project promises for this
    input) with a message. Anything else fails the property as NotClear."""
    try:
        with Bounded():
            return call()
    except clear as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        return REFUSED
    except (NotClear, KeyboardInterrupt):
        raise
    except BaseException as e:  # BaseException: a Rust panic in tiktoken (pyo3's PanicException) is one too
        raise NotClear(f"{type(e).__name__} instead of {clear.__name__}: {str(e)[:300]}") from e


def encoded(text, encoding):
    """text in encoding; a lone surrogate as UTF-8/16/32 would write it, a character latin-1 lacks as a JSON escape."""
    return text.encode(encoding, "surrogatepass" if encoding.startswith("utf") else "backslashreplace")


def write(path, content):
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return path


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------

ODD_NUMBERS = [0, -1, 1, 2, 3, 4, 8, 2 ** 31, 2 ** 32, 2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64, -2 ** 63, 10 ** 30, 10 ** 400,
               0.0, -0.0, 1.0, 2.0, 0.5, 1e-5, 1e-46, 5e-324, 1e308, 3.4028235e38, 3.5e38, float("nan"), float("inf"),
               -float("inf"), True, False]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                    st.sampled_from(ODD_NUMBERS), st.sampled_from(["", "1", "-1", "1e5", "F32", ENDOFTEXT, "\x1b[2J"]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)

# What a user may type for a number: text of any kind, and the spellings that trip up int() and float().
TRICKY_NUMBERS = ["", " ", "0", "-0", "+0", "-0.0", "00", "1", "-1", "2", "4", "64", "65", "128", "129", "1000", "1000.0",
                  "1000.0000001", "100000", "100001", "1e-46", "5e-324", "1e-400", "1e308", "1e309", "-1e309", "2e-45",
                  "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "infinity", "1_000", "1__0", "_1", "1_", "0x10", "0b1",
                  "0o7", "1.", ".5", "0.5", "1.0", "1e3", "1E-3", "1e", "e3", " 5 ", "\t5\n", "5\x00", "\x005", "٣", "١٢",
                  "１２", "𝟙", "²", "Ⅻ", "٣.٥", "1,5", "1/2", "True", "None", "[]", str(2 ** 63 - 1), str(2 ** 63), str(-2 ** 63),
                  "9" * 5000, "1" + "0" * 4300, "0." + "0" * 400 + "1", "\x1b[31m5", "5\u202e", "\udc805", "5\udcff",
                  "\u2028", "½", "0.99999999999999999", "1.00000000000000001", "0.000000000000000000001"]
NUMBERISH = st.one_of(
    st.sampled_from(TRICKY_NUMBERS),
    st.text(max_size=20),
    st.integers().map(str),
    st.integers(min_value=-3, max_value=2 ** 64).map(str),
    st.floats().map(repr),
    st.floats().map("{:e}".format),
    st.floats(min_value=-2, max_value=2000).map(str),
    st.from_regex(r"\A[ \t]?[+-]?[0-9٠-٩０-９_]{0,6}\.?[0-9_]{0,4}([eE][+-]?[0-9]{1,4})?[ \t]?\Z"),
    st.tuples(st.sampled_from(TRICKY_NUMBERS), st.text(max_size=3)).map("".join),
)


def in_bounds(field, value):
    """value is what LIMITS allows for field: its kind, within its bounds (top_p above 0)."""
    kind, low, high = LIMITS[field]
    return type(value) is kind and low <= value <= high and (field != "top_p" or value > 0)


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
# 3. vocab.json and merges.txt
# ---------------------------------------------------------------------------

def tiny_vocab():
    """The tests' tiny BPE (conftest.write_tiny_bpe): the bytes, the merges' tokens, <|endoftext|>."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for merge in TINY_MERGES:
        vocab[merge.replace(" ", "")] = len(vocab)
    vocab[ENDOFTEXT] = len(vocab)
    return vocab


TINY_MERGES_TEXT = "#version: 0.2\n" + "\n".join(TINY_MERGES) + "\n"
ALPHABET = "".join(bytes_to_unicode().values())
TOKENS = st.one_of(st.text(alphabet=ALPHABET, min_size=1, max_size=4), st.text(max_size=4),
                   st.sampled_from([ENDOFTEXT, "", "Ġ", "the", "Ġthe", "he", " ", "\x00", "<|endoftext|> ", "\udc80"]))
IDS = st.one_of(st.integers(min_value=-2, max_value=300), st.sampled_from(ODD_NUMBERS), SCALARS)


@st.composite
def mutated_vocabs(draw):
    vocab = tiny_vocab()
    tokens = list(vocab)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        token = draw(st.sampled_from(tokens))
        kind = draw(st.sampled_from(["drop", "id", "add", "rename", "swap ids"]))
        if token not in vocab:
            continue
        if kind == "drop":
            del vocab[token]
        elif kind == "id":
            vocab[token] = draw(IDS)
        elif kind == "add":
            vocab[draw(TOKENS)] = draw(st.one_of(st.just(len(vocab)), IDS))
        elif kind == "rename":
            vocab[draw(TOKENS)] = vocab.pop(token)
        else:
            other = draw(st.sampled_from(tokens))
            if other in vocab:
                vocab[token], vocab[other] = vocab[other], vocab[token]
    return vocab


@st.composite
def mutated_merges(draw):
    lines = ["#version: 0.2", *TINY_MERGES, ""]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "replace", "insert", "separator", "end"]))
        if kind == "drop":
            lines.pop(i)
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif kind == "replace":
            lines[i] = draw(st.one_of(st.text(max_size=12), st.tuples(TOKENS, TOKENS).map(" ".join)))
        elif kind == "insert":
            lines.insert(i, draw(st.one_of(st.text(max_size=12), st.tuples(TOKENS, TOKENS).map(" ".join),
                                           st.sampled_from(["#version: 0.2", "# a comment", "   ", "h e f"]))))
        elif kind == "separator":
            lines[i] = lines[i].replace(" ", draw(st.sampled_from(["  ", "\t", "\u3000", "\x1c", "", " \r"])))
        if not lines:
            lines = [""]
    newline = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    return newline.join(lines)


def assert_usable(enc, vocab):
    """What a loaded tokenizer must do: have the vocabulary's tokens, and give back the text it encoded."""
    assert enc.n_vocab == len(vocab)
    for text in ("the cat sat on the mat", " é 中文\t\n", "\x00\x1b[31m"):
        assert enc.decode(tokenizer.encode(enc, text)) == text


@fuzz()
@given(vocab=st.one_of(JSON, mutated_vocabs()))
def test_3_vocabs(vocab):
    parsed(lambda: tokenizer.validate_vocab("vocab.json", vocab), TokenizerError)


@fuzz()
@given(text=st.one_of(mutated_merges(), st.text(max_size=80)), vocab=st.one_of(st.just(tiny_vocab()), mutated_vocabs()))
def test_3_merges_against_a_valid_vocabulary(text, vocab):
    if parsed(lambda: tokenizer.validate_vocab("vocab.json", vocab), TokenizerError) is not REFUSED:  # as the loader does
        parsed(lambda: tokenizer.validate_merges("merges.txt", text, vocab), TokenizerError)


def dumped(vocab):
    return json.dumps(vocab, ensure_ascii=False).encode("utf-8", "surrogatepass")


@fuzz()
@given(vocab=st.one_of(mutated_vocabs().map(dumped), JSON.map(dumped), st.binary(max_size=100),
                       st.sampled_from([b"", b"\xef\xbb\xbf" + dumped(tiny_vocab()), b"\xff" + dumped(tiny_vocab())])),
       merges=st.one_of(mutated_merges().map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=100)))
def test_3_tokenizer_files_through_the_loader_and_the_downloader(scratch, vocab, merges):
    model_dir = os.path.join(scratch, "tokenizer")
    os.makedirs(model_dir, exist_ok=True)
    write(os.path.join(model_dir, "vocab.json"), vocab)
    write(os.path.join(model_dir, "merges.txt"), merges)
    enc = parsed(lambda: tokenizer.load_tokenizer(model_dir), TokenizerError)
    if enc is not REFUSED:
        assert_usable(enc, json.loads(vocab))
    # The downloader checks vocab.json as it arrives, and merges.txt against a valid vocab.json beside it.
    partial = write(os.path.join(model_dir, "vocab.json.incomplete"), vocab)
    parsed(lambda: download.verify(partial, "vocab.json", None, None), DownloadError)
    write(os.path.join(model_dir, "vocab.json"), dumped(tiny_vocab()))
    partial = write(os.path.join(model_dir, "merges.txt.incomplete"), merges)
    parsed(lambda: download.verify(partial, "merges.txt", None, None), DownloadError)


@fuzz()
@given(vocab=st.one_of(mutated_vocabs().map(dumped), JSON.map(dumped), st.binary(max_size=100)),
       merges=st.one_of(st.just(TINY_MERGES_TEXT.encode()), mutated_merges().map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_3_the_downloaders_merges_check_against_any_vocab_json_beside_it(scratch, vocab, merges):
    """download() fetches only the files missing: the vocab.json merges.txt is checked against may be one
    already in the model's directory, never checked by this download (a corrupt or hostile one)."""
    model_dir = os.path.join(scratch, "merges-check")
    os.makedirs(model_dir, exist_ok=True)
    write(os.path.join(model_dir, "vocab.json"), vocab)
    partial = write(os.path.join(model_dir, "merges.txt.incomplete"), merges)
    parsed(lambda: download.verify(partial, "merges.txt", None, None), DownloadError)


# ---------------------------------------------------------------------------
# Agreement: the downloader stores exactly what the loader will read
# ---------------------------------------------------------------------------

@fuzz()
@given(name=st.sampled_from(["config.json", "vocab.json"]), encoding=st.sampled_from(ENCODINGS),
       ensure_ascii=st.booleans(), surrogate=st.booleans())
def test_2_3_the_downloader_accepts_what_the_loader_reads(scratch, name, encoding, ensure_ascii, surrogate):
    """A small file the downloader checks and stores must be one the loader then reads: else it is kept,
    never downloaded again, and every load fails (weights/download.py: 'checked as the loader checks it')."""
    model_dir = os.path.join(scratch, "agreement")
    os.makedirs(model_dir, exist_ok=True)
    value = VALID_CONFIG if name == "config.json" else tiny_vocab()
    if surrogate and name == "vocab.json":  # a lone surrogate, which strict UTF-8 refuses
        value = {**value, "\ud800": len(value)}
    content = encoded(json.dumps(value, ensure_ascii=ensure_ascii), encoding)
    write(os.path.join(model_dir, name), content)
    if name == "vocab.json":
        write(os.path.join(model_dir, "merges.txt"), TINY_MERGES_TEXT)
        loads = parsed(lambda: tokenizer.load_tokenizer(model_dir), TokenizerError)
    else:
        loads = parsed(lambda: checkpoint.load_config(model_dir), CheckpointError)
    partial = write(os.path.join(model_dir, name + ".incomplete"), content)
    stored = parsed(lambda: download.verify(partial, name, len(content), None), DownloadError)
    assert (stored is not REFUSED) == (loads is not REFUSED), \
        f"{name} in {encoding}: the downloader {'stores' if stored is not REFUSED else 'refuses'} it, " \
        f"the loader {'reads' if loads is not REFUSED else 'refuses'} it"


# ---------------------------------------------------------------------------
# 4. The command line's numbers
# ---------------------------------------------------------------------------

# flag -> (its setting in LIMITS, the other arguments it needs to apply)
FLAGS = {"--n-draft": ("n_draft", []), "--max-new-tokens": ("max_new_tokens", []),
         "--temperature": ("temperature", ["--method", "sps"]), "--top-k": ("top_k", ["--method", "sps"]),
         "--top-p": ("top_p", ["--method", "sps"]), "--seed": ("seed", ["--method", "sps"]),
         "--n-beams": ("n_beams", ["--method", "beam"])}


def check_setting(parse, field, text):
    """The property of a number a user types: a value of LIMITS' kind within its bounds, or UsageError."""
    value = parsed(lambda: parse(field, text), UsageError)
    if value is not REFUSED:
        if not in_bounds(field, value):
            raise NotClear(f"{field} {text!r} accepted as {value!r}, outside {LIMITS[field]}")
    return value


@fuzz(500)
@given(field=st.sampled_from(sorted(LIMITS)), text=NUMBERISH)
def test_4_parse_setting(field, text):
    check_setting(runner.parse_setting, field, text)


@fuzz()
@given(flag=st.sampled_from(sorted(FLAGS)), text=NUMBERISH, form=st.sampled_from(["=", " "]))
def test_4_command_line_flags(flag, text, form):
    field, others = FLAGS[flag]
    argv = ([f"{flag}={text}"] if form == "=" else [flag, text]) + others
    stderr = io.StringIO()
    try:
        with Bounded(), contextlib.redirect_stderr(stderr):
            args = cli.parse_args(argv)
            cli.settings_from(args)  # and the processor the values make
    except SystemExit as e:
        lines = stderr.getvalue().split("\n")
        assert e.code == 2 and len(lines) == 2 and lines[0].startswith("error: ") and lines[1] == "", stderr.getvalue()
        assert not CONTROL.search(stderr.getvalue()), stderr.getvalue()
        assert form == " " or flag in lines[0], lines[0]  # ("--flag -1" is read as two flags: argparse's own message)
        return
    except (NotClear, KeyboardInterrupt):
        raise
    except BaseException as e:
        raise NotClear(f"{argv}: {type(e).__name__}: {str(e)[:300]}") from e
    assert stderr.getvalue() == ""
    assert in_bounds(field, getattr(args, field)), (argv, getattr(args, field))


# ---------------------------------------------------------------------------
# 5. The session's numeric commands
# ---------------------------------------------------------------------------

# command -> the setting it changes (session.command_table; SHOWN_AS)
NUMERIC_COMMANDS = {"length": "max_new_tokens", "n_draft": "n_draft", "temperature": "temperature", "seed": "seed",
                    "n_draft_min": "n_draft_min", "n_draft_max": "n_draft_max", "egag_ema": "ema", "ngram_n": "ngram_n",
                    "top_k_filler": "top_k_filler", "beams": "n_beams"}
OTHER_COMMANDS = ["processor topk", "processor nucleus", "processor topknucleus", "processor topknucleus 20",
                  "processor greedy", "processor multinomial", "set_ngramstorage basic", "set_ngramstorage onelevel"]


def assert_settings_in_bounds(s):
    for field in LIMITS:
        value = getattr(s, field, None)
        assert value is None or in_bounds(field, value), (field, value)
    p = s.processor
    assert in_bounds("temperature", float(p.temperature)), p
    assert p.top_k is None or in_bounds("top_k", p.top_k), p
    assert p.top_p is None or in_bounds("top_p", p.top_p), p
    assert s.n_draft_min <= s.n_draft_max


@fuzz()
@given(command=st.sampled_from(sorted(NUMERIC_COMMANDS) + OTHER_COMMANDS), argument=NUMBERISH,
       more=st.one_of(st.just(""), NUMBERISH.map(lambda t: " " + t)))
def test_5_session_numeric_commands(command, argument, more):
    out = io.StringIO()
    s = session.Session("draft", "oracle", None, runner.Settings(processor=Processor(0.0)), out=out)
    assert command.split()[0] in s.commands
    before = copy.deepcopy(s.settings)
    line = f"/{command} {argument}{more}"
    try:
        with Bounded():
            going_on = s.handle(line)
    except (NotClear, KeyboardInterrupt):
        raise
    except BaseException as e:
        raise NotClear(f"{line!r}: {type(e).__name__}: {str(e)[:300]}") from e
    said = out.getvalue()
    assert going_on is True, line
    assert not CONTROL.search(said), said  # everything typed is shown escaped
    assert said.endswith("\n") and said.count("\n") == 1, said  # one line: the new value, or the error
    if said.startswith("error: "):
        assert vars(s.settings) == vars(before), (line, said)  # a refused value changes nothing
    assert_settings_in_bounds(s.settings)


# ---------------------------------------------------------------------------
# Negative controls: the same properties catch a parser that breaks them
# ---------------------------------------------------------------------------

def raw_parse_setting(field, text, name=None):
    """parse_setting without its try: int()'s and float()'s ValueError reach the user as a traceback."""
    kind, low, high = LIMITS[field]
    value = kind(text)
    if not low <= value <= high:
        raise UsageError(f"{name or field} must be {runner.bounds(field)}")
    return value


def unbounded_parse_setting(field, text, name=None):
    """parse_setting without its bounds: any number at all (nan, inf, a billion) gets through."""
    try:
        return LIMITS[field][0](text)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{name or field} must be a number") from None


def fails(parse, field, text):
    try:
        check_setting(parse, field, text)
    except NotClear:
        return True
    return False


@pytest.mark.parametrize("broken, found", [(raw_parse_setting, "ValueError instead of UsageError"),
                                           (unbounded_parse_setting, "outside")])
def test_the_property_catches_a_broken_parser(broken, found):
    # The same property, the same strategies and settings as test_4_parse_setting, on a broken parser:
    # hypothesis finds a failing example, shrinks it and raises its failure.
    @fuzz()
    @given(field=st.sampled_from(sorted(LIMITS)), text=NUMBERISH)
    def the_property_on_the_broken_parser(field, text):
        check_setting(broken, field, text)

    with pytest.raises(NotClear, match=found):
        the_property_on_the_broken_parser()
    # find: the smallest text that breaks it, which the real parser refuses clearly.
    text = find(NUMBERISH, lambda t: fails(broken, "n_draft", t), settings=fuzz())
    assert not fails(runner.parse_setting, "n_draft", text)
    with pytest.raises(UsageError):
        runner.parse_setting("n_draft", text)


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
