"""Shared test fixtures: tiny random GPT-2 checkpoints, a tiny GPT-2-style BPE, and the learned demo pair.

Nothing here touches the network or needs the real weights: each tiny checkpoint is
written in the Hugging Face layout (config.json + model.safetensors) by
weights/checkpoint.random_checkpoint, and the tokenizer files (vocab.json + merges.txt) by
write_tiny_bpe, in temporary directories of the test run. The model fixtures are the
programs' own: the accelerated model (speed/accelerate.py); tests/test_gpt2.py tests the
plain one, and tests/test_speed.py that the two give the same tokens.
"""

import json
import os
import shutil
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.append(os.path.join(ROOT, "exercises"))  # the exercises' checkers, imported as `checks`

from speed.accelerate import load_fast  # noqa: E402
from weights import checkpoint  # noqa: E402
from weights.tokenizer import ENDOFTEXT, bytes_to_unicode  # noqa: E402

# A few merges in GPT-2's notation (Ġ is the stand-in for a space).
TINY_MERGES = ["h e", "Ġ t", "Ġt he", "i n", "Ġ a", "e r", "Ġ s", "o n", "Ġa n", "Ġan d", "r e", "Ġ o", "Ġo f", "a t", "e n"]
TINY_VOCAB_SIZE = 256 + len(TINY_MERGES) + 1  # bytes, merges, <|endoftext|>


def write_bpe(model_dir, merges, endoftext=True):
    """vocab.json + merges.txt of a GPT-2-style byte-level BPE of these merges (GPT-2's notation): the 256 bytes,
    a token per merge, then <|endoftext|> unless endoftext=False."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for merge in merges:
        vocab[merge.replace(" ", "")] = len(vocab)
    if endoftext:
        vocab[ENDOFTEXT] = len(vocab)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(model_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return model_dir


def write_tiny_bpe(model_dir):
    """vocab.json + merges.txt of a GPT-2-style byte-level BPE with TINY_VOCAB_SIZE tokens."""
    return write_bpe(model_dir, TINY_MERGES)


def tiny_config(**overrides):
    return {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": TINY_VOCAB_SIZE, **overrides}


def make_model_dir(path, seed=0, scale=0.3, tokenizer=True, **overrides):
    """A tiny random GPT-2 checkpoint directory; scale 0.3 gives confident, untied argmaxes."""
    checkpoint.random_checkpoint(str(path), tiny_config(**overrides), seed=seed, scale=scale)
    if tokenizer:
        write_tiny_bpe(str(path))
    return str(path)


def save_tensors(path, tensors):
    """Write a {name: array} dict as a .safetensors file."""
    checkpoint.save_safetensors(path, {k: t.shape for k, t in tensors.items()}, tensors.__getitem__)


def make_noisy_copy(src, dest, noise, seed=0):
    """A copy of the checkpoint in src with Gaussian noise added: a draft that agrees only partly."""
    rng = np.random.default_rng(seed)
    tensors = checkpoint.load_safetensors(os.path.join(src, "model.safetensors"))
    os.makedirs(dest, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dest)
    save_tensors(os.path.join(dest, "model.safetensors"),
                 {k: t + np.float32(noise) * rng.standard_normal(t.shape, dtype=np.float32) for k, t in tensors.items()})
    return write_tiny_bpe(dest)


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """Tiny models sharing the tiny BPE: an oracle, an unrelated draft, and a noisy copy of the oracle."""
    base = tmp_path_factory.mktemp("models")
    dirs = {
        "draft": make_model_dir(base / "draft", seed=1, n_layer=1),
        "oracle": make_model_dir(base / "oracle", seed=2, n_layer=3),
    }
    dirs["related"] = make_noisy_copy(dirs["oracle"], str(base / "related"), noise=0.015)
    return dirs


@pytest.fixture(scope="session")
def other_vocabulary(tiny_dirs, tmp_path_factory):
    """The directory of a draft of the tiny oracle with a byte-level BPE of its own (test_crossvocab's second one:
    other merges, another size), its weights the oracle's translated token by token, plus noise: it agrees with
    the oracle in part, across vocabularies (crossvocab.py)."""
    from test_crossvocab import OTHER_MERGES, make_translated_copy
    return make_translated_copy(tiny_dirs["oracle"], tmp_path_factory.mktemp("other-vocabulary") / "draft",
                                OTHER_MERGES, noise=0.01, seed=6)


@pytest.fixture(scope="session")
def draft(tiny_dirs):
    return load_fast(tiny_dirs["draft"])


@pytest.fixture(scope="session")
def related(tiny_dirs):
    return load_fast(tiny_dirs["related"])


@pytest.fixture(scope="session")
def oracle(tiny_dirs):
    return load_fast(tiny_dirs["oracle"])


@pytest.fixture(scope="session")
def demo_dirs(tmp_path_factory):
    """The offline demo pair (demo.py), and demo-draft-4k beside it, written once per test run in a temporary
    directory: about 29 MB (the three models, their tokenizers and the oracle's heads), and about 47 MB more of
    fast copies (model.blocked.safetensors) when the tests load the models through speed/accelerate.py."""
    from weights import demo_pair
    models_dir = str(tmp_path_factory.mktemp("demo-models"))
    draft, oracle = demo_pair.build_pair(models_dir)
    return {"draft": draft, "oracle": oracle, "draft-4k": os.path.join(models_dir, "demo-draft-4k")}


# ---------------------------------------------------------------------------
# After the whole run: nothing outside the tests' temporary directories was touched
# ---------------------------------------------------------------------------

SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis"}
OTHER_JOBS = {os.path.join(ROOT, "tools", "out"), os.path.join(ROOT, "tools", "data")}  # training's, not the tests'


def tree_state(root):
    """{path: (size, mtime)} of every file under root, the virtualenv and caches aside."""
    state = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and os.path.join(folder, d) not in OTHER_JOBS]
        for name in names:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            state[path] = (st.st_size, st.st_mtime_ns)
    return state


# Whole programs run as processes of their own, sweeps of hostile input, the benchmarks and the exercises'
# checkers against their wrong answers (test_exercises.py and test_exercises_*.py) take most of the suite's time:
# the README's command, python -m pytest -q, leaves them to python -m pytest -q -m slow (CI runs both). Tests
# marked @pytest.mark.slow where they are defined go there too.
SLOW_FILES = {"test_cli.py", "test_security.py", "test_fuzz.py", "test_bench.py", "test_ablation.py",
              "test_session.py", "test_plain.py", "test_page_drawings.py", "test_report.py", "test_download.py",
              "test_chinese.py", "test_exercises.py"}
SLOW_PREFIXES = ("test_exercises_",)
# ... but for the tests a document asks a reader to run with a -k: EXERCISES.md's exercise 2.
QUICK_IN_SLOW_FILES = {"test_cli.py": ("vocabularies", "tokenizer_files")}


def pytest_configure(config):
    """A test file named on the command line runs whole, its slow tests too (pytest tests/test_security.py),
    unless the command gives its own -m."""
    args = config.invocation_params.args
    if any(".py" in a for a in args if not a.startswith("-")) and not any(a.startswith("-m") for a in args):
        config.option.markexpr = ""


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        if ((name in SLOW_FILES or name.startswith(SLOW_PREFIXES))
                and not any(k in item.name for k in QUICK_IN_SLOW_FILES.get(name, ()))):
            item.add_marker(pytest.mark.slow)


def pytest_sessionstart(session):
    session.config.tree_before = tree_state(ROOT)


def pytest_sessionfinish(session, exitstatus):
    """The run fails if it changed a file of the checkout, left a writer's temporary file or a partial
    download anywhere in it, or turned /dev/null into anything but a device."""
    import stat
    problems = []
    if os.name == "posix" and not stat.S_ISCHR(os.stat(os.devnull).st_mode):
        problems.append(f"{os.devnull} is no longer a character device")
    after = tree_state(ROOT)
    before = getattr(session.config, "tree_before", after)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    problems += [f"the run changed {os.path.relpath(p, ROOT)}" for p in changed]
    problems += [f"left behind: {os.path.relpath(p, ROOT)}" for p in after
                 if os.path.basename(p).startswith((".writing-", ".speculative-gpt2-")) or p.endswith((".incomplete", ".tmp", ".lock"))]
    if problems:
        print("\n" + "\n".join(problems), file=sys.stderr)
        session.exitstatus = 1


def gpt2_pair_bpe(word, bpe_ranks):
    """GPT-2's own encoder.py: merge the adjacent pair listed first in merges.txt, everywhere, until none is listed
    (how transformers' GPT2Tokenizer reads merges.txt, where tiktoken reads vocab.json's ranks)."""
    word = list(word)
    while len(word) > 1:
        rank, first = min((bpe_ranks.get(pair, float("inf")), pair) for pair in zip(word, word[1:]))
        if rank == float("inf"):
            break
        merged, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == first:
                merged.append(word[i] + word[i + 1])
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return word
