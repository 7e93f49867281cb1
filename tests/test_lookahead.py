"""Lookahead decoding (beyond/lookahead.py) gives exactly greedy_generate's tokens; its one pass gives each row
what that row alone would get; its cache holds exactly the text; a wrong mask or an unchecked accept is caught."""

import numpy as np
import pytest

import beyond.lookahead as la
from beyond.lookahead import NGramPool, advance, fit, layout, lookahead_generate
from decoding import GenerationError
from stats import Stats
from kvcache import KVCache
from speculative import greedy_generate
from test_greedy import SEEDS, assert_same_greedy, make_model_dir_cached, prompt

SHAPES = [dict(W=1, N=2, G=1), dict(W=2, N=2, G=2), dict(W=3, N=3, G=3), dict(W=5, N=4, G=5), dict(W=4, N=5, G=8)]


def traced(oracle, ids, n_new, **shape):
    stats = Stats(trace=[])
    return list(lookahead_generate(oracle, ids, n_new, stats=stats, **shape)), stats


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_lookahead_equals_greedy(oracle, seed, shape):
    ids = prompt(oracle, 4 + seed, seed)
    got, stats = traced(oracle, ids, 40, **shape)
    assert_same_greedy(list(greedy_generate(oracle, ids, 40)), got, oracle, ids)
    assert len(stats.from_draft) == 40 and stats.rounds == stats.oracle_passes - 1  # one pass per round, and the prompt's


def test_rounds_end_at_every_possible_point(oracle):
    # The equality tests mean most when candidates are kept whole, in part, and not at all.
    kept = set()
    for seed in range(6):
        _, stats = traced(oracle, prompt(oracle, 5, seed), 40, W=5, N=4, G=5)
        kept |= {r.accepted for r in stats.trace if len(r.drafted) == 3}
    assert kept == {0, 1, 2, 3}


def test_a_repetitive_text_is_made_in_fewer_passes_than_tokens(oracle):
    _, stats = traced(oracle, prompt(oracle, 5, 2), 60)
    assert stats.accepted > 0 and stats.rounds < 60


@pytest.fixture(scope="module")
def learned(demo_dirs):
    from fixtures import held_out
    from gpt2 import GPT2
    from weights.tokenizer import encode, load_tokenizer
    enc = load_tokenizer(demo_dirs["oracle"])
    return GPT2.from_pretrained(demo_dirs["oracle"]), [(kind, encode(enc, p)[:48]) for kind, p in held_out()]


@pytest.mark.parametrize("shape", [{}, dict(W=3, N=3, G=2), dict(W=8, N=5, G=8)], ids=str)
@pytest.mark.slow
def test_lookahead_equals_greedy_on_the_learned_pair_held_out_prompts(learned, shape):
    oracle, prompts = learned
    stats = Stats()
    for kind, ids in prompts:
        assert list(lookahead_generate(oracle, ids, 40, stats=stats, **shape)) == \
            list(greedy_generate(oracle, ids, 40)), kind
    assert stats.accepted > 0  # candidates were kept, not only the oracle's own tokens


# --- the one pass: each row sees exactly what it must ---------------------------------------------

def rows_of_a_full_window(oracle):
    """A text, a full window (N = 4: three levels) and two candidates, laid out as one pass."""
    rng = np.random.default_rng(5)
    text = prompt(oracle, 6, 5)
    W, N = 4, 4
    window = [rng.integers(0, oracle.vocab_size, W - 1).tolist()] + \
        [rng.integers(0, oracle.vocab_size, W).tolist() for _ in range(N - 2)]
    candidates = [rng.integers(0, oracle.vocab_size, N - 1).tolist(), rng.integers(0, oracle.vocab_size, 2).tolist()]
    return text, layout(text[-1], len(text), window, candidates)


def test_every_row_sees_a_line_of_text_at_consecutive_positions(oracle):
    text, rows = rows_of_a_full_window(oracle)
    n = len(text)
    for r, seen in enumerate(rows.sees):
        assert seen[0] == 0 and seen[-1] == r and seen == sorted(seen)
        assert [rows.positions[s] for s in seen] == list(range(n - 1, rows.positions[r] + 1))
    # Level l, column c: level 0 up to column c, then column c of levels 1..l.
    for l, level in enumerate(rows.levels):
        for c, r in enumerate(level):
            assert rows.sees[r] == rows.levels[0][:c + 1] + [rows.levels[k][c] for k in range(1, l + 1)] if l else \
                rows.levels[0][:c + 1]
    for g, candidate in enumerate(rows.candidates):
        for m, r in enumerate(candidate):
            assert rows.sees[r] == [0] + candidate[:m + 1]


def test_the_mask_opens_exactly_the_text_and_the_rows_seen(oracle):
    text, rows = rows_of_a_full_window(oracle)
    n_cached = len(text) - 1
    mask = la.branch_mask(rows, n_cached) == 0
    for r, seen in enumerate(rows.sees):
        assert mask[r].tolist() == [True] * n_cached + [s in seen for s in range(len(rows.tokens))]


def wide_logits(oracle, text, rows, mask_fn=la.branch_mask):
    cache = KVCache()
    oracle.forward(text[:-1], cache)
    return oracle.forward(rows.tokens, cache, positions=rows.positions, mask=mask_fn(rows, cache.n_tokens()),
                          n_logits=len(rows.tokens))


def rows_that_differ_from_running_alone(oracle, text, rows, logits):
    """The rows whose logits are not those of their branch run alone: the text, then the rows it sees, in order."""
    differ = []
    for r, seen in enumerate(rows.sees):
        alone = oracle.forward(text[:-1] + [rows.tokens[s] for s in seen], n_logits=1)[-1]
        if not np.allclose(logits[r], alone, atol=2e-4, rtol=1e-4) or np.argmax(logits[r]) != np.argmax(alone):
            differ.append(r)
    return differ


def test_each_row_of_the_pass_is_its_branch_run_alone(oracle):
    text, rows = rows_of_a_full_window(oracle)
    assert rows_that_differ_from_running_alone(oracle, text, rows, wide_logits(oracle, text, rows)) == []


def test_a_candidate_one_position_off_is_caught_row_by_row(oracle):
    # Negative control: the candidates' rows one position further on than a line of text puts them.
    text, rows = rows_of_a_full_window(oracle)
    shifted = {r for candidate in rows.candidates for r in candidate}
    rows.positions = [p + (r in shifted) for r, p in enumerate(rows.positions)]
    assert set(rows_that_differ_from_running_alone(oracle, text, rows, wide_logits(oracle, text, rows))) == shifted


def prompts_where_greedy_differs(oracle):
    """The greedy equality as a negative control's detector: the seeds (of test_greedy.SEEDS) whose prompt's 40
    tokens from lookahead_generate, as patched, differ from greedy decoding's."""
    caught = []
    for seed in SEEDS:
        ids = prompt(oracle, 5, seed)
        if list(lookahead_generate(oracle, ids, 40)) != list(greedy_generate(oracle, ids, 40)):
            caught.append(seed)
    return caught


def test_a_causal_mask_is_caught_row_by_row_and_by_the_equality(oracle, monkeypatch):
    # Negative control: with the plain causal mask every row sees all the rows before it (other levels,
    # other candidates). The row-by-row check must find it, and so must the greedy equality.
    from gpt2 import causal_mask

    def causal(rows, n_cached):
        n = len(rows.tokens)
        return causal_mask(n, n_cached + n)

    text, rows = rows_of_a_full_window(oracle)
    assert rows_that_differ_from_running_alone(oracle, text, rows, wide_logits(oracle, text, rows, causal))
    monkeypatch.setattr(la, "branch_mask", causal)
    assert prompts_where_greedy_differs(oracle)


def test_an_unchecked_accept_is_caught_by_the_equality(oracle, monkeypatch):
    # Negative control: keep the newest candidate whole without comparing it with the oracle's choices.
    def trusting(candidates, rows, choice):
        return (0, len(candidates[0])) if candidates else (None, 0)

    monkeypatch.setattr(la, "best_candidate", trusting)
    assert prompts_where_greedy_differs(oracle)


# --- the cache, the window, the pool ----------------------------------------------------------------

def test_the_cache_holds_the_text_but_its_newest_token_after_every_round(oracle, monkeypatch):
    caches = []

    class Kept(KVCache):
        def __init__(self):
            super().__init__()
            caches.append(self)

    monkeypatch.setattr(la, "KVCache", Kept)
    ids = prompt(oracle, 5, 1)
    got, stats = traced(oracle, ids, 40, W=4, N=4, G=4)
    length = len(ids)
    for r in stats.trace:
        length += len(r.new)
        assert r.cached["oracle"] == length - 1 and r.cached["draft"] is None
        assert r.new[:-1] == r.drafted[:r.accepted] and r.new[-1] == r.oracle[r.accepted]
    # What it holds are the keys and values of the text itself, as a plain prefill computes them.
    (cache,) = caches
    fresh = KVCache()
    oracle.forward(ids + got[:-1], fresh)
    assert cache.n_tokens() == fresh.n_tokens() == len(ids) + 40 - 1
    for layer in range(oracle.n_layer):
        for held, plain in ((cache.keys, fresh.keys), (cache.values, fresh.values)):
            np.testing.assert_allclose(held[layer][:, :cache.n_tokens()], plain[layer][:, :fresh.n_tokens()], atol=1e-4)


def test_each_round_is_what_the_oracle_says_with_no_cache(oracle):
    # The trace's numbers, recomputed with a fresh forward pass over the whole text.
    ids = prompt(oracle, 6, 0)
    got, stats = traced(oracle, ids, 40, W=5, N=4, G=5)
    text, made = ids + got, {}
    for r in stats.trace:
        d = r.details
        assert len(r.oracle) == len(r.drafted) + 1
        for i, choice in enumerate(r.oracle[:r.accepted + 1]):
            assert choice == int(np.argmax(oracle.forward(text[:r.context_length] + r.drafted[:i], n_logits=1)[-1]))
        # The candidates are the pool's n-grams after the text's last token, made in earlier rounds.
        last = text[r.context_length - 1]
        for candidate in d.candidates:
            assert any(ng[0] == last and ng[1:1 + len(candidate)] == candidate for ng in made.get(last, []))
        assert r.drafted == (d.candidates[d.best] if d.candidates else [])
        # The best is the longest match among them.
        for candidate in d.candidates:
            n = 0
            while n < len(candidate) and candidate[n] == int(np.argmax(
                    oracle.forward(text[:r.context_length] + candidate[:n], n_logits=1)[-1])):
                n += 1
            assert n <= r.accepted
        # A full window's n-grams: column c of every level, then the oracle's argmax after that line of text.
        window = d.window
        assert len(d.ngrams) == (len(window[-1]) if len(window) == 3 else 0)
        for c, ng in enumerate(d.ngrams):
            line = window[0][:c] + [window[1][c], window[2][c]]
            assert ng[:-1] == ([last] + window[0])[c:c + 1] + line[c:]
            assert ng[-1] == int(np.argmax(oracle.forward(text[:r.context_length] + line, n_logits=1)[-1]))
            made.setdefault(ng[0], []).append(ng)
        # ... the numbers the trace's "why" quotes (workbench/tests/test_shown_text.py)
        assert d.W == 5 and d.N == 4 and d.left == len(ids) + 40 - r.context_length


def test_the_window_moves_one_position_per_round():
    # Full (N - 1 = 2 levels): level 1 without its column 0 becomes level 0, the argmaxes the top level.
    assert advance([[1, 2], [3, 4, 5]], [6, 7, 8], N=3) == [[4, 5], [6, 7, 8]]
    # Warm-up: the argmaxes are a new level, and every level moves one column left.
    assert advance([[1, 2, 3]], [9, 8, 7, 6], N=3) == [[2, 3], [8, 7, 6]]
    # N = 2: the window is level 0 alone, full from the start.
    assert advance([[1, 2]], [5, 6, 7], N=2) == [[6, 7]]


def test_the_window_is_cut_at_the_last_token_asked_for():
    window = [[1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]  # level 0 at offsets 1..3, level l's column c at c + l
    assert fit(window, 10) == window
    assert fit(window, 3) == [[1, 2, 3], [4, 5, 6], [8, 9]]
    assert fit(window, 1) == [[1], [4], []]
    assert fit(window, 0) == [[], [], []]


def test_the_pool_keeps_the_newest_G_per_first_token():
    pool = NGramPool(G=2)
    for ngram in ([1, 2, 3], [1, 4, 5], [1, 2, 3], [1, 6, 7], [9, 9, 9]):
        pool.add(ngram)
    assert pool.candidates(1, 2) == [[6, 7], [2, 3]]  # [4, 5] was the oldest when [6, 7] came
    assert pool.candidates(1, 1) == [[6], [2]] and pool.candidates(1, 0) == [] and pool.candidates(3, 2) == []
    assert len(pool) == 3


# --- edge cases ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_new", range(0, 9))
@pytest.mark.parametrize("shape", [dict(W=1, N=2, G=1), dict(W=5, N=4, G=5)], ids=str)
def test_exactly_n_new_tokens(oracle, n_new, shape):
    ids = prompt(oracle, 3, 0)
    assert list(lookahead_generate(oracle, ids, n_new, **shape)) == list(greedy_generate(oracle, ids, n_new))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_prompt_of_one_token(oracle, shape):
    for token in (0, 7, oracle.vocab_size - 1):
        got = list(lookahead_generate(oracle, [token], 30, **shape))
        assert_same_greedy(list(greedy_generate(oracle, [token], 30)), got, oracle, [token])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_runs_that_reach_the_context_limit(tiny_dirs, shape):
    from gpt2 import GPT2
    small = GPT2.from_pretrained(make_model_dir_cached(tiny_dirs, "o40", seed=12, n_layer=2))  # a window of 40
    for ids in (prompt(small, 13, 3), prompt(small, 39, 4)):
        got = list(lookahead_generate(small, ids, 40 - len(ids), **shape))
        assert_same_greedy(list(greedy_generate(small, ids, 40 - len(ids))), got, small, ids)
    with pytest.raises(GenerationError, match="context window of 40"):
        list(lookahead_generate(small, prompt(small, 13, 3), 28, **shape))


def test_a_huge_window_is_cut_to_the_tokens_asked_for(oracle):
    # No guess lies past the last token asked for, so a window far wider than that costs nothing more.
    ids = prompt(oracle, 4, 1)
    got, stats = traced(oracle, ids, 10, W=10 ** 9, N=5, G=10 ** 9)
    assert got == list(greedy_generate(oracle, ids, 10))
    assert all(r.details.rows <= 1 + 4 * 10 + 4 * len(r.details.candidates) for r in stats.trace)


@pytest.mark.parametrize("shape, fragment", [(dict(W=0), "window W"), (dict(N=1), "n-gram size N"),
                                             (dict(G=0), "candidates G"), (dict(N=2.5), "n-gram size N"),
                                             (dict(W=2, G=-1), "candidates G")])
def test_bad_shapes_are_one_clear_error(oracle, shape, fragment):
    with pytest.raises(GenerationError, match=fragment):
        list(lookahead_generate(oracle, [1, 2], 5, **shape))
    with pytest.raises(GenerationError, match="no tokens"):
        list(lookahead_generate(oracle, [], 5))
