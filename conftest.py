"""pytest's setup for the whole checkout: tests/ (the reading house), workbench/tests/ and exercises/.

The fixtures every test root shares (tiny random checkpoints and the learned demo pair, written into the
test run's temporary directories), which tests are slow, and the run's own check that it touched nothing
of the checkout. The models themselves are each test root's: plain gpt2.GPT2 in tests/conftest.py, the
workbench's fast ones in workbench/tests/conftest.py. The helpers the fixtures use are tests/fixtures.py's.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
sys.path.append(os.path.join(ROOT, "exercises"))  # the exercises' checkers, imported as `checks`

from fixtures import make_model_dir, make_noisy_copy  # noqa: E402


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
OTHER_JOBS = {os.path.join(ROOT, "workbench", "tools", "out"), os.path.join(ROOT, "workbench", "tools", "data")}  # training's, not the tests'


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
        if item.path.parent.name != "tests":  # exercises/test_exercises.py is the student's checker: never slow
            continue
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
