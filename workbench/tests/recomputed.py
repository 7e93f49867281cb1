"""What the tests of the trace's reasons share (test_reasons_*.py): the pairs they run on, a traced run, the
models' probabilities recomputed with no cache (a fresh forward pass over the whole text), and a round's "why"
as its method's Shown words it (workbench/methods/)."""

import math
import re

import numpy as np
import pytest

from gpt2 import softmax
from stats import Stats
from workbench import methods

PROMPTS = ([5, 9, 2, 7], [3, 3, 8, 1, 3, 3, 8])  # token ids: bytes in any GPT-2 vocabulary, the learned one too
NEAR_TIE = 1e-5  # the only excusable greedy difference (README: near-ties)
NEAR = 1e-4  # a test this close to its threshold may go either way between a cached and an uncached pass
NUMBER = r"(\d[0-9.]*(?:e[-+]?\d+)?)"
GREEDY_WORDS = re.compile(r"oracle's choice|oracle chose|choices follow|first disagreement|oracle's own token|argmax")


@pytest.fixture(scope="module", params=["tiny random pair", pytest.param("learned pair", marks=pytest.mark.slow)])
def models(request, tiny_dirs, demo_dirs):
    """(draft, oracle): every test of the reasons runs on the tests' tiny random pair, and in the slow tests
    (python -m pytest -m slow) on the learned pair."""
    from workbench.speed.accelerate import load_fast
    if request.param == "learned pair":
        return load_fast(demo_dirs["draft"]), load_fast(demo_dirs["oracle"])
    return load_fast(tiny_dirs["related"]), load_fast(tiny_dirs["oracle"])


@pytest.fixture
def related(models):  # the draft (conftest's name for the tiny pair's draft, kept so the tests read alike)
    return models[0]


@pytest.fixture
def oracle(models):
    return models[1]


def traced(generate, *args, **kwargs):
    stats = Stats(trace=[])
    tokens = list(generate(*args, stats=stats, **kwargs))
    return tokens, stats.trace


def probs_after(model, tokens):  # -> [V], with no cache: an independent recomputation
    return softmax(model.forward(tokens, n_logits=1)[-1].astype(np.float32))


def probs_rows(model, tokens, n):  # -> [n, V]: after each of the last n tokens, one pass with no cache
    return softmax(model.forward(tokens, n_logits=n).astype(np.float32))


def is_argmax(probs, token):
    return probs[token] >= probs.max() - NEAR_TIE


def show(tokens):
    return " ".join(f"<{t}>" for t in tokens)


def shown_of(method):
    """The registry.Shown of a method (its name), or of a Method given (a variant across vocabularies)."""
    return (methods.get(method) if isinstance(method, str) else method).shown


def reasons(method, r):
    """The round's "why" lines as `method` shows them (--trace and the page alike), joined."""
    return " | ".join(shown_of(method).reasons(r, show))


def close(a, b):
    return math.isclose(a, b, rel_tol=2e-3, abs_tol=1e-5)


def printed(shown, value):
    """A number printed with 3 significant digits (shown) stands for value: within its rounding, and the noise."""
    return math.isclose(shown, value, rel_tol=6e-3, abs_tol=1e-5)


def residual_of(q, p):
    """(q - p)+ renormalised, computed here apart from sps.residual; q itself where it has no mass."""
    mass = np.maximum(q - p, 0)
    return mass / mass.sum() if mass.sum() > 0 else q


def without_token(p, x):
    rest = p.copy()
    rest[x] = 0
    return rest / rest.sum()
