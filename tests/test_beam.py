"""Beam search: one beam is greedy decoding; enough beams find the best continuation of all."""

import itertools
import tracemalloc

import numpy as np
import pytest

from beam import beam_score, beam_search, log_softmax, memory_needed
from fixtures import make_model_dir
from decoding import GenerationError
from stats import Stats
from gpt2 import GPT2
from speculative import greedy_generate
from test_greedy import SEEDS, prompt
from weights import checkpoint

V = 6  # a vocabulary small enough to score every continuation


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two V-token models with spread-out distributions, where greedy is often not the most likely path."""
    base = tmp_path_factory.mktemp("beam")
    return [GPT2.from_pretrained(make_model_dir(base / str(seed), seed=seed, vocab_size=V, n_embd=16, n_head=2,
                                                n_layer=n_layer, n_positions=16, tokenizer=False, scale=0.3))
            for seed, n_layer in ((31, 1), (32, 2))]


def exhaustive_scores(model, ids, n_new, length_penalty=1.0):
    """{continuation: beam_score} for all V ** n_new continuations, each scored from one full forward."""
    scores = {}
    for seq in itertools.product(range(V), repeat=n_new):
        logits = model.forward(list(ids) + list(seq[:-1]))[len(ids) - 1:]  # [n_new, V]: the logits before each token
        log_probs = [log_softmax(row)[token] for row, token in zip(logits, seq)]
        scores[seq] = beam_score(np.sum(log_probs, dtype=np.float32), n_new, length_penalty)
    return scores


@pytest.mark.parametrize("seed", SEEDS)
def test_one_beam_is_greedy(oracle, seed):
    ids = prompt(oracle, 5 + seed, seed)
    stats = Stats()
    assert list(beam_search(oracle, ids, 30, n_beams=1, stats=stats)) == list(greedy_generate(oracle, ids, 30))
    assert (stats.rounds, stats.n_generated, stats.oracle_passes) == (0, 30, 30)  # a step per token; no rounds


@pytest.mark.parametrize("n_new, n_beams", [(1, 1), (1, 3), (2, 6), (2, 9), (3, 36), (3, 50)])
@pytest.mark.parametrize("length_penalty", [1.0, 0.0, 2.0])
def test_enough_beams_find_the_best_continuation(tiny, n_new, n_beams, length_penalty):
    assert n_beams >= V ** (n_new - 1)  # no candidate is ever dropped
    greedy_missed = 0
    for model, ids in itertools.product(tiny, ([1], [2, 5, 0], [4, 4, 3, 1], [0, 3])):
        scores = exhaustive_scores(model, ids, n_new, length_penalty)
        best = max(scores, key=scores.get)
        got = tuple(beam_search(model, ids, n_new, n_beams=n_beams, length_penalty=length_penalty))
        # The same continuation, unless two scores are a float rounding apart (the full forward
        # above and the search's cached forwards round differently).
        assert got == best or scores[best] - scores[got] < 1e-5, (got, best, scores[got], scores[best])
        greedy_missed += scores[tuple(beam_search(model, ids, n_new, n_beams=1))] < scores[best] - 1e-4
    if n_new > 1:
        assert greedy_missed > 0  # cases where one beam is not enough: the search had work to do


class Bigram:
    """A stand-in for a model whose next token depends on the last token only: probabilities table[last]."""
    n_positions = 16
    n_layer, n_embd, n_head = 1, 1, 1  # what beam_search's memory check reads

    def __init__(self, table):
        self.vocab_size = len(table)
        self.log_table = np.log(np.array(table, np.float32))

    def forward(self, ids, kvcache, n_logits=1):
        kvcache.commit(len(ids))  # it keeps no keys or values, only the count
        return self.log_table[ids][-n_logits:]


def test_few_beams_can_miss_the_best_continuation():
    # Greedy (one beam) takes 1 (0.5) and then has nothing better than 0.25: 0.125 in all.
    # Two beams also keep 2 (0.4), which is followed by 3 with 0.9: 0.36.
    model = Bigram([[0.01, 0.5, 0.4, 0.09],
                    [0.25, 0.25, 0.25, 0.25],
                    [0.05, 0.03, 0.02, 0.9],
                    [0.25, 0.25, 0.25, 0.25]])
    assert list(beam_search(model, [0], 2, n_beams=1)) == [1, 0]  # a tie after 1: the lower id
    assert list(beam_search(model, [0], 2, n_beams=2)) == [2, 3]
    assert list(beam_search(model, [0], 2, n_beams=4)) == [2, 3]


@pytest.mark.parametrize("n_new", range(0, 6))
@pytest.mark.parametrize("n_beams", [1, 2, 5])
def test_exactly_n_new_tokens(tiny, n_new, n_beams):
    stats = Stats()
    assert len(list(beam_search(tiny[0], [1, 2], n_new, n_beams=n_beams, stats=stats))) == n_new
    assert (stats.rounds, stats.n_generated) == (0, n_new)  # tokens, no draft-and-verify rounds


def test_context_window_and_bad_arguments(tiny):
    model = tiny[0]  # a window of 16
    assert len(list(beam_search(model, [1] * 10, 6, n_beams=3))) == 6
    with pytest.raises(GenerationError, match="context window of 16"):
        list(beam_search(model, [1] * 10, 7))
    with pytest.raises(GenerationError, match="n_beams must be at least 1"):
        list(beam_search(model, [1], 3, n_beams=0))
    with pytest.raises(GenerationError, match="no tokens"):
        list(beam_search(model, [], 3))
    # At the call, before any token is asked for: a caller prints nothing before the error.
    with pytest.raises(GenerationError, match="beams of 10 tokens need about"):
        beam_search(model, [1] * 4, 6, n_beams=10 ** 9, budget=8 << 30)
    with pytest.raises(GenerationError, match="n_beams must be at least 1"):
        beam_search(model, [1], 3, n_beams=0)


def test_best_pairs_is_a_stable_sort_of_all_scores_cut_to_n():
    # Many ties and -inf scores: the tie rule (earlier beam, then lower token id) must hold exactly.
    from beam import best_pairs
    rng = np.random.default_rng(0)
    for _ in range(500):
        n_beams, V = rng.integers(1, 5), rng.integers(1, 30)
        scores = rng.integers(-4, 1, size=(n_beams, V)).astype(np.float32)
        scores[rng.random((n_beams, V)) < 0.2] = -np.inf
        n = int(rng.integers(1, n_beams * V + 3))
        expected = np.argsort(-scores, axis=None, kind="stable")[:n]
        assert best_pairs(scores, n).tolist() == expected.tolist()


MEMORY_CASES = [(50257, 128, 4, 20), (50257, 128, 16, 12), (50257, 64, 8, 60), (300, 64, 16, 60)]


def assert_the_estimate_holds_the_peak(load, model_dir, vocab_size, n_embd, n_beams, n_new):
    """beam.memory_needed holds the peak of a search on the model load(directory) gives: a random checkpoint of
    this vocabulary and width. The workbench's fast model is held to it too (workbench/tests/test_speed.py)."""
    model = load(checkpoint.random_checkpoint(model_dir, {"n_layer": 2, "n_head": 4, "n_embd": n_embd,
                                                          "n_positions": 128, "vocab_size": vocab_size}, scale=0.3))
    ids = list(range(1, 6))
    list(beam_search(model, ids, 2, n_beams=2))  # first calls' one-time allocations are not the search's
    tracemalloc.start()
    try:
        list(beam_search(model, ids, n_new, n_beams=n_beams))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    estimate = memory_needed(model, n_beams, len(ids), n_new)
    assert peak <= estimate <= 4 * peak, (peak, estimate)


@pytest.mark.parametrize("vocab_size, n_embd, n_beams, n_new", MEMORY_CASES)
@pytest.mark.slow
def test_the_memory_estimate_is_an_upper_bound_of_the_peak(tmp_path, vocab_size, n_embd, n_beams, n_new):
    # A GPT-2 vocabulary makes the scores the biggest part; a tiny one, the caches. tracemalloc sees
    # NumPy's allocations. The estimate must hold the peak, and not be so loose that it refuses what fits.
    assert_the_estimate_holds_the_peak(GPT2.from_pretrained, str(tmp_path / "m"), vocab_size, n_embd, n_beams, n_new)
