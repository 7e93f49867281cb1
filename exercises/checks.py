"""The checks behind `pytest exercises/`: each takes an implementation and fails with a hint.

The same checks run in the project's own test suite against the reference
solutions (the real functions in speculative.py, threshold.py and sps.py), so
an exercise can never drift away from the code it teaches.
"""

import functools
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import checkpoint  # noqa: E402
import gpt2  # noqa: E402
from kvcache import KVCache  # noqa: E402


class NotSolved(AssertionError):
    pass


def call(exercise, f, *args):
    """Call the student's function; an untouched stub gets a clear 'not solved' failure."""
    try:
        return f(*args)
    except NotImplementedError:
        raise NotSolved(f"exercise {exercise} is not solved yet: see EXERCISES.md, then edit exercises/"
                        f"{EXERCISE_FILES[exercise]}") from None


EXERCISE_FILES = {"ex1": "ex1_accepted_prefix.py", "ex2": "ex2_rollback.py", "ex3": "ex3_residual.py",
                  "ex4": "ex4_threshold.py", "ex5": "ex5_cache_bug.py"}


def check_accepted_prefix_length(f):
    cases = [([5, 7, 9], [5, 7, 2, 4], 2), ([5, 7, 9], [5, 7, 9, 4], 3), ([5, 7, 9], [1, 7, 9, 4], 0),
             ([], [3], 0), ([0, 0], [0, 1, 2], 1), ([4], [4, 4], 1)]
    for drafted, oracle_choice, expected in cases:
        got = call("ex1", f, drafted, np.array(oracle_choice))
        assert got == expected, (f"accepted_prefix_length({drafted}, {oracle_choice}) returned {got}, expected {expected}"
                                 + ("; when every draft matches, all are accepted" if expected == len(drafted) else "")
                                 + ("; token id 0 is a token like any other" if 0 in drafted else ""))


class FakeCache(KVCache):
    def __init__(self, n):
        super().__init__()
        self.length = n


def check_rollback(f):
    for lengths, n_kept, expected in [((10, 8), 9, (9, 8)), ((12, 12), 12, (12, 12)), ((5,), 0, (0,)),
                                      ((20, 17, 3), 17, (17, 17, 3))]:
        caches = [FakeCache(n) for n in lengths]
        try:
            call("ex2", f, n_kept, *caches)
        except ValueError as e:
            raise AssertionError(f"rollback({n_kept}) on caches of {lengths} positions raised {e}: "
                                 "a cache shorter than n_kept must be left as it is") from None
        got = tuple(c.n_tokens() for c in caches)
        assert got == expected, (f"rollback({n_kept}) on caches of {lengths} positions left {got}, expected {expected}: "
                                 "keep the first n_kept positions, never more")


def check_residual(f):
    rng = np.random.default_rng(0)
    for _ in range(20):
        q, p = (rng.dirichlet(np.ones(12)).astype(np.float32) for _ in range(2))
        r = call("ex3", f, q, p)
        expected = np.maximum(q - p, 0) / np.maximum(q - p, 0).sum()
        assert np.allclose(r, expected, atol=1e-6), f"residual(q, p) should be max(q - p, 0) renormalised; got {r}"
        # together with the accepted mass it must give exactly q
        emitted = np.minimum(p, q) + (1 - np.minimum(p, q).sum()) * r
        assert np.allclose(emitted, q, atol=1e-6), "accepted + resampled mass should add up to q"
    same = np.array([0.2, 0.5, 0.3], np.float32)
    r = call("ex3", f, same, same.copy())
    assert np.all(np.isfinite(r)), "residual(q, q) returned NaN: (q - p)+ is all zeros here, return q instead"
    assert np.allclose(r, same), "when (q - p)+ is all zeros, return q"


def check_next_threshold(f):
    cases = [((0.4, [0.9, 0.6, 0.3], 2, 0.1), 0.5, "after a rejection move halfway toward cumulative[n_accepted - 1]"),
             ((0.4, [0.9, 0.6], 0, 0.1), 0.7, "with nothing accepted, move halfway toward 1.0"),
             ((0.4, [0.9, 0.6], 2, 0.1), 0.3, "when all are accepted, lower it by boost"),
             ((0.1, [0.9], 1, 0.1), 0.05, "never below 0.05"),
             ((0.95, [0.99, 0.98], 0, 0.1), 0.95, "never above 0.95")]
    for args, expected, hint in cases:
        got = call("ex4", f, *args)
        assert abs(got - expected) < 1e-6, f"next_threshold{args} returned {got}, expected {expected}: {hint}"


@functools.lru_cache(maxsize=1)
def tiny_pair():
    """A tiny random draft and a partly agreeing oracle (a noisy copy), made once."""
    base = tempfile.mkdtemp(prefix="exercises-")
    config = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 1024, "vocab_size": 272}
    oracle_dir = checkpoint.random_checkpoint(os.path.join(base, "oracle"), config, seed=2, scale=0.3)
    tensors = checkpoint.load_safetensors(os.path.join(oracle_dir, "model.safetensors"))
    rng = np.random.default_rng(0)
    draft_dir = os.path.join(base, "draft")
    os.makedirs(draft_dir)
    os.link(os.path.join(oracle_dir, "config.json"), os.path.join(draft_dir, "config.json"))
    checkpoint.save_safetensors(os.path.join(draft_dir, "model.safetensors"), {k: t.shape for k, t in tensors.items()},
                          lambda k: tensors[k] + np.float32(0.015) * rng.standard_normal(tensors[k].shape, dtype=np.float32))
    return gpt2.GPT2.from_pretrained(draft_dir), gpt2.GPT2.from_pretrained(oracle_dir)


def check_speculative_generate(f):
    from speculative import greedy_generate
    draft, oracle = tiny_pair()
    for seed in range(3):
        ids = np.random.default_rng(seed).integers(0, oracle.vocab_size, 5).tolist()
        expected = list(greedy_generate(oracle, ids, 30))
        for n_draft in (2, 4, 7):
            got = list(call("ex5", f, draft, oracle, ids, 30, n_draft))
            first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), None)
            assert first is None and len(got) == 30, (
                f"with n_draft={n_draft} the output differs from greedy decoding from token {first} on: "
                "which keys and values does the oracle's cache hold after a rejection?")
