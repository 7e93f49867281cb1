"""N-gram drafts (prompt lookup, NASD's n-gram storages, the top-k filler) and staged decoding
give exactly greedy_generate's tokens, with every combination of the drafter's options."""

import functools
import itertools

import numpy as np
import pytest

from decoding import GenerationError
from stats import Stats
from ngram import STORAGES, NGramDrafter, ngram_generate, staged_generate, top_tokens
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, prompt

DRAFTS = ["draft", "related", "oracle"]  # unrelated, partly agreeing, identical
OPTIONS = [dict(n=n, storage=storage, top_k_filler=k, prompt_lookup=lookup)
           for n, storage, k, lookup in itertools.product((2, 4), STORAGES, (1, 3), (True, False))]


def option_id(options):
    return "{storage}-n{n}-fill{top_k_filler}-{lookup}".format(**options, lookup="lookup" if options["prompt_lookup"] else "table")


def repetitive_prompt(oracle, seed):
    # Text that repeats itself, so that n-gram drafts have something to find.
    piece = prompt(oracle, 4, seed)
    return piece * 3 + piece[:2]


def prompts(oracle, seed):
    return prompt(oracle, 6, seed), repetitive_prompt(oracle, seed)


@functools.lru_cache(maxsize=None)
def greedy(oracle, ids, n_new):
    return list(greedy_generate(oracle, list(ids), n_new))


@pytest.mark.parametrize("n_draft", [1, 3, 8])
@pytest.mark.parametrize("reset_in_between", [True, False])
@pytest.mark.parametrize("options", OPTIONS, ids=option_id)
def test_ngram_equals_greedy(oracle, options, reset_in_between, n_draft):
    drafter = NGramDrafter(reset_in_between=reset_in_between, **options)  # one drafter for all six calls
    for seed in SEEDS:
        for ids in prompts(oracle, seed):
            got = list(ngram_generate(oracle, ids, 30, n_draft=n_draft, drafter=drafter))
            assert_same_greedy(greedy(oracle, tuple(ids), 30), got, oracle, ids)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", DRAFTS)
@pytest.mark.parametrize("n_draft", [1, 4, 8])
def test_staged_equals_greedy(request, oracle, seed, kind, n_draft):
    for ids in prompts(oracle, seed):
        got = list(staged_generate(request.getfixturevalue(kind), oracle, ids, 30, n_draft=n_draft))
        assert_same_greedy(greedy(oracle, tuple(ids), 30), got, oracle, ids)


@pytest.mark.parametrize("reset_in_between", [True, False])
@pytest.mark.parametrize("options", OPTIONS, ids=option_id)
@pytest.mark.slow
def test_staged_equals_greedy_with_every_drafter(related, oracle, options, reset_in_between):
    drafter = NGramDrafter(reset_in_between=reset_in_between, **options)
    for seed in SEEDS:
        for ids in prompts(oracle, seed):
            got = list(staged_generate(related, oracle, ids, 30, n_draft=4, drafter=drafter))
            assert_same_greedy(greedy(oracle, tuple(ids), 30), got, oracle, ids)


def test_staged_drafts_are_the_draft_models_greedy_tokens(related):
    # With the draft as its own oracle, staged decoding must give the draft's greedy text.
    ids = repetitive_prompt(related, 1)
    assert list(staged_generate(related, related, ids, 30)) == list(greedy_generate(related, ids, 30))


@pytest.mark.parametrize("prompt_lookup", [True, False])
def test_ngram_drafts_are_used_on_repetitive_text(oracle, prompt_lookup):
    stats = Stats()
    list(ngram_generate(oracle, repetitive_prompt(oracle, 0), 40, drafter=NGramDrafter(prompt_lookup=prompt_lookup),
                        stats=stats))
    assert stats.drafted > 0 and stats.accepted > 0


def test_prompt_lookup():
    d = NGramDrafter(n=3)
    tokens = [1, 2, 3, 4, 1, 2]
    assert d.lookup(tokens, 3) == [3, 4, 1]          # after the earlier "1 2" came "3 4 1"
    assert d.lookup([0, 5, 6], 2) == []               # nothing repeats
    assert d.propose([0, 0], 0) == []
    assert d.lookup([0, 0, 0], 2) == [0]              # token 0 is a token


def test_basic_storage_backs_off_and_onelevel_does_not():
    text = [7, 8, 7, 8, 7, 9]
    basic, onelevel = NGramDrafter(n=3, storage="basic"), NGramDrafter(n=3, storage="onelevel")
    for d in (basic, onelevel):
        d.start(text)
    # basic: contexts of 2 tokens, then 1. (7,) -> 8 twice; (7, 8) -> 7; (8, 7) -> 8 and 9 once each: the first seen
    assert basic.from_table([7], 3) == [8, 7, 8]
    assert basic.from_table([5, 7], 1) == [8]         # (5, 7) is unknown: back off to (7,)
    # onelevel: contexts of exactly 2 tokens
    assert onelevel.from_table([7], 3) == []          # too short a context
    assert onelevel.from_table([5, 7], 1) == []       # no back-off
    assert onelevel.from_table([8, 7], 3) == [8, 7, 8]
    assert set(map(len, basic.table)) == {1, 2} and set(map(len, onelevel.table)) == {2}


def test_the_top_k_filler_counts_the_given_tokens_after_each_verified_context():
    d = NGramDrafter(n=2, top_k_filler=3)
    d.start([1, 2])                                   # (1,) -> 2
    d.update([1, 2, 3])                               # (2,) -> 3
    d.fill([1, 2, 3], 1, [[2, 4, 5], [3, 6, 0]])      # after [1]: 2, 4, 5; after [1, 2]: 3, 6, 0
    assert d.table[(1,)] == {2: 2, 4: 1, 5: 1}        # the chosen token, counted as text too, weighs more
    assert d.table[(2,)] == {3: 2, 6: 1, 0: 1}
    no_filler = NGramDrafter(n=2, top_k_filler=1)
    no_filler.start([1, 2])
    no_filler.fill([1, 2], 1, [[2]])
    assert no_filler.table[(1,)] == {2: 1}            # k = 1: the chosen token only, already counted


def test_the_filler_learns_the_oracles_top_k_at_every_position(oracle):
    # Every generated token sits at a position the oracle verified, so after a run the
    # table knows the oracle's top 3 after each one-token context of the output.
    ids = prompt(oracle, 5, 0)
    drafter = NGramDrafter(n=2, top_k_filler=3)
    out = ids + list(ngram_generate(oracle, ids, 12, n_draft=3, drafter=drafter))
    logits = oracle.forward(out[:-1])[len(ids) - 1:]  # the logits before each generated token
    for j, top in zip(range(len(ids), len(out)), top_tokens(logits, 3)):
        assert set(top) <= set(drafter.table[(out[j - 1],)])


def test_top_tokens():
    logits = np.array([[1.0, 5.0, 3.0, 5.0], [0.0, -1.0, 2.0, 1.0]], np.float32)
    assert top_tokens(logits, 2) == [[1, 3], [2, 3]]
    assert top_tokens(logits, 9) == [[1, 3, 2, 0], [2, 3, 0, 1]]
    assert top_tokens(logits, 1) == [[1], [2]]


def test_reset_in_between_or_keep_the_table(oracle):
    # The same prompt twice: a drafter that keeps its table drafts the second
    # run from the first run's text; one that is reset starts from scratch again.
    ids = prompt(oracle, 6, 2)
    for reset_in_between in (True, False):
        drafter, runs = NGramDrafter(reset_in_between=reset_in_between, prompt_lookup=False), []
        for _ in range(2):
            stats = Stats()
            runs.append((list(ngram_generate(oracle, ids, 30, drafter=drafter, stats=stats)), stats.accepted))
        assert runs[0][0] == runs[1][0] == greedy(oracle, tuple(ids), 30)
        if reset_in_between:
            assert runs[1][1] == runs[0][1]
        else:
            assert runs[1][1] > runs[0][1]
    kept = NGramDrafter(reset_in_between=False)
    kept.start([1, 2, 3])
    kept.start([4, 5])
    assert (1, 2) in kept.table and (4,) in kept.table and kept.n_seen == 2


@pytest.mark.parametrize("n_new", range(0, 8))
def test_exactly_n_new_tokens(related, oracle, n_new):
    ids = prompt(oracle, 3, 0)
    for drafter in (NGramDrafter(), NGramDrafter(n=2, storage="onelevel", top_k_filler=4, prompt_lookup=False)):
        assert len(list(ngram_generate(oracle, ids * 3, n_new, drafter=drafter))) == n_new
        assert len(list(staged_generate(related, oracle, ids * 3, n_new, drafter=drafter))) == n_new


@pytest.mark.parametrize("options, message", [
    (dict(n=1), "the n-gram order n must be a whole number >= 2"),
    (dict(n=2.5), "the n-gram order n must be a whole number >= 2"),
    (dict(storage="trie"), "unknown n-gram storage 'trie'; the storages are: basic, onelevel"),
    (dict(top_k_filler=0), "top_k_filler must be a whole number >= 1, got 0"),
])
def test_bad_drafter_options(options, message):
    with pytest.raises(GenerationError, match=message):
        NGramDrafter(**options)


def test_bad_arguments(draft, oracle):
    with pytest.raises(GenerationError, match="n_draft must be at least 1"):
        list(ngram_generate(oracle, [1], 3, n_draft=0))
    with pytest.raises(GenerationError, match="n_draft must be at least 1"):
        list(staged_generate(draft, oracle, [1], 3, n_draft=0))
    with pytest.raises(GenerationError, match="context window"):
        list(ngram_generate(oracle, [1], oracle.n_positions))
