"""What the fuzzing of outside input shares (test_fuzz*.py): the property, its bounds, hypothesis's settings,
the strategies of any JSON.

The property: given anything, a parser either returns a valid result or raises the project's own clear
error (errors.UserError's subclass for that input), never another exception (KeyError, ValueError,
struct.error, UnicodeDecodeError, RecursionError...), never a hang, never a huge allocation. Every target
runs at least 300 examples, derandomized (the same examples at every run) and with no example database;
hypothesis's own caches go to a temporary directory (hypothesis_outside_the_checkout), so nothing is
written in the checkout, not even .hypothesis/ (conftest.py's pytest_sessionfinish). Import it after
pytest.importorskip("hypothesis"): hypothesis is a test-only dependency.
"""

import atexit
import os
import shutil
import signal
import tempfile
import threading
import tracemalloc

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from weights.tokenizer import ENDOFTEXT

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
