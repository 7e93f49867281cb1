"""batch.py: many prompts at once give, row for row, what one prompt at a time gives.

Greedy: exactly greedy_generate's tokens for every row, on tiny random models and on the learned pair,
for prompts of different lengths, every n_draft from 1 to 8, rows that finish at different rounds, up
to the context limit (a float32 near-tie, top-2 gap under 1e-5, the only excuse). Sampling: every row of
speculative_sample_batch has exactly the oracle's distribution (chi-square, with a negative control).
"""

import numpy as np
import pytest

import batch
from decoding import GenerationError
from stats import Stats
from batch import BatchKVCache, forward_batch
from kvcache import KVCache
from speculative import greedy_generate
from sps import autoregressive_sample
from test_greedy import assert_same_greedy, prompt
from test_sps import chi_square_rejects, exact_distribution, small  # noqa: F401 (small: a fixture)


def prompts_of(model, lengths, seed=0):
    return [prompt(model, n, seed + i) for i, n in enumerate(lengths)]


LENGTHS = [5, 1, 12, 7, 3]  # different lengths, one of a single token


def assert_rows_are_greedy(model, batch_ids, n_new, got):
    assert len(got) == len(batch_ids)
    for ids, row in zip(batch_ids, got):
        assert len(row) == n_new
        assert_same_greedy(list(greedy_generate(model, ids, n_new)), row, model, ids)


def test_greedy_batch_equals_greedy_row_for_row(oracle):
    batch_ids = prompts_of(oracle, LENGTHS)
    assert_rows_are_greedy(oracle, batch_ids, 30, batch.greedy_generate_batch(oracle, batch_ids, 30))


@pytest.mark.parametrize("n_draft", range(1, 9))
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])  # all rejected, partly accepted, all accepted
def test_speculative_batch_equals_greedy_row_for_row(request, oracle, kind, n_draft):
    batch_ids = prompts_of(oracle, LENGTHS, seed=n_draft)
    stats = Stats(trace=[])
    got = batch.speculative_generate_batch(request.getfixturevalue(kind), oracle, batch_ids, 30, n_draft=n_draft,
                                           stats=stats)
    assert_rows_are_greedy(oracle, batch_ids, 30, got)
    assert stats.n_generated == 30 * len(batch_ids) and stats.accepted <= stats.drafted


def test_rows_finish_at_different_rounds_and_leave(related, oracle):
    # A partly accepting draft: rows keep different numbers of drafts, so they finish at different rounds;
    # each round records the rows still in the batch.
    batch_ids = prompts_of(oracle, LENGTHS, seed=3)
    stats = Stats(trace=[])
    got = batch.speculative_generate_batch(related, oracle, batch_ids, 30, n_draft=4, stats=stats)
    assert_rows_are_greedy(oracle, batch_ids, 30, got)
    in_batch = [len(r.details.rows) for r in stats.trace]
    assert in_batch[0] == len(batch_ids) and in_batch[-1] < len(batch_ids)
    assert sorted(in_batch, reverse=True) == in_batch  # rows only ever leave
    assert len(set(in_batch)) > 2  # they left at different rounds, not all at once


@pytest.mark.parametrize("n_draft", [1, 3, 8])
def test_batches_that_reach_the_context_limit(draft, oracle, n_draft):
    # The longest prompt plus n_new fills the window exactly; the others stop short of it.
    window = oracle.n_positions
    batch_ids = [prompt(oracle, window - 40, 1), prompt(oracle, 4, 2), prompt(oracle, window - 41, 3)]
    assert_rows_are_greedy(oracle, batch_ids, 40, batch.speculative_generate_batch(draft, oracle, batch_ids, 40,
                                                                                   n_draft=n_draft))
    with pytest.raises(GenerationError, match="prompt 1: .*does not fit"):
        batch.speculative_generate_batch(draft, oracle, batch_ids, 41, n_draft=n_draft)


def test_a_batch_of_one_is_greedy_decoding(draft, oracle):
    ids = prompt(oracle, 6, 9)
    assert batch.greedy_generate_batch(oracle, [ids], 20) == [list(greedy_generate(oracle, ids, 20))]
    assert_rows_are_greedy(oracle, [ids], 20, batch.speculative_generate_batch(draft, oracle, [ids], 20))


@pytest.mark.slow
@pytest.mark.parametrize("n_draft", [1, 4, 8])
def test_the_learned_pair_batched_is_greedy_row_for_row(demo_dirs, n_draft):
    import json
    import os
    from gpt2 import GPT2
    from weights import demo_pair
    from weights.tokenizer import encode, load_tokenizer
    draft, oracle = GPT2.from_pretrained(demo_dirs["draft"]), GPT2.from_pretrained(demo_dirs["oracle"])
    enc = load_tokenizer(demo_dirs["oracle"])
    with open(os.path.join(demo_pair.ASSETS, "prompts.json"), encoding="utf-8") as f:  # the held-out prompts
        prompts = json.load(f)[:8]
    batch_ids = [encode(enc, p["prompt"])[:10 + 7 * i] for i, p in enumerate(prompts)]
    stats = Stats()
    got = batch.speculative_generate_batch(draft, oracle, batch_ids, 48, n_draft=n_draft, stats=stats)
    assert_rows_are_greedy(oracle, batch_ids, 48, got)
    assert 0 < stats.accepted < stats.drafted


def test_bad_batches_are_one_line_before_any_work(draft, oracle):
    with pytest.raises(GenerationError, match="no prompts"):
        batch.greedy_generate_batch(oracle, [], 5)
    with pytest.raises(GenerationError, match="prompt 2: the prompt has no tokens"):
        batch.speculative_generate_batch(draft, oracle, [[1, 2], []], 5)
    with pytest.raises(GenerationError, match="n_draft must be at least 1"):
        batch.speculative_generate_batch(draft, oracle, [[1, 2]], 5, n_draft=0)
    with pytest.raises(GenerationError, match="a batch of 100000 prompts needs about .* use fewer prompts"):
        batch.greedy_generate_batch(oracle, [[1, 2]] * 100000, 100, budget=8 << 30)


# --- the cache: rows cut to different lengths ------------------------------------------------

def test_a_ragged_cache_gives_each_row_its_own_logits(oracle):
    # Rows cut to different lengths, then fed on: each row's logits are those of its own sequence alone.
    rows = prompts_of(oracle, [9, 6, 11], seed=5)
    cache = BatchKVCache(3)
    ids = np.zeros((3, 11), dtype=np.int64)
    for b, row in enumerate(rows):
        ids[b, :len(row)] = row
    forward_batch(oracle, ids, cache, [len(r) for r in rows])
    cache.truncate([4, 6, 2])  # a rejection in rows 0 and 2
    nxt = [[7, 8], [9, 10], [11, 12]]
    logits = forward_batch(oracle, np.array(nxt), cache, [2, 2, 2], n_logits=2)
    for b, (row, kept) in enumerate(zip(rows, [4, 6, 2])):
        expected = oracle.forward(row[:kept] + nxt[b], KVCache())[-2:]
        np.testing.assert_allclose(logits[b], expected, atol=2e-5, err_msg=f"row {b}")
    assert cache.n_tokens().tolist() == [6, 8, 4]


def test_the_cache_refuses_a_cut_past_a_rows_end_and_starts_finite():
    cache = BatchKVCache(2)
    cache.append(0, np.ones((2, 2, 3, 4), np.float32), np.ones((2, 2, 3, 4), np.float32))
    cache.commit(3)
    with pytest.raises(ValueError):
        cache.truncate([2, 4])
    cache.truncate([1, 3])
    cache.append(0, np.ones((2, 2, 40, 4), np.float32), np.ones((2, 2, 40, 4), np.float32))  # grows
    # Attention reads a row's positions past its end (masked): they must never hold a NaN.
    assert all(np.isfinite(buffers[0]).all() for buffers in (cache.keys, cache.values))


# --- sampling: every row has the oracle's distribution -----------------------------------------

BATCH_PROMPTS = [[1, 4], [2], [3, 0, 5]]  # different lengths, so rows meet their ends at different rounds
RUNS = 1200  # samples per prompt


def batch_chi_square(models, processor, n_new=3, seed=7, **settings):
    """Pearson's test of each prompt's rows of one big batch against the oracle's exact distribution:
    [(rejects, detail) per prompt], and the Stats."""
    draft, oracle = models
    stats = Stats()
    rows = BATCH_PROMPTS * RUNS
    got = batch.speculative_sample_batch(draft, oracle, rows, n_new, rng=np.random.default_rng(seed),
                                         processor=processor, stats=stats, **settings)
    results = []
    for i, ids in enumerate(BATCH_PROMPTS):
        counts = {}
        for row in got[i::len(BATCH_PROMPTS)]:
            counts[tuple(row)] = counts.get(tuple(row), 0) + 1
        results.append(chi_square_rejects(counts, exact_distribution(oracle, ids, n_new, processor), RUNS))
    return results, stats


@pytest.mark.parametrize("n_draft", [1, 2, 4])
@pytest.mark.slow
def test_every_row_of_batched_sps_has_the_oracles_distribution(small, n_draft):
    from processors import make_processor
    results, stats = batch_chi_square(small, make_processor("multinomial", temperature=0.8), n_draft=n_draft)
    for ids, (rejects, detail) in zip(BATCH_PROMPTS, results):
        assert not rejects, f"prompt {ids}: chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted  # both branches of the acceptance test were taken


@pytest.mark.slow
def test_the_batch_chi_square_test_catches_a_sampler_that_keeps_every_draft(small, monkeypatch):
    # Negative control: a rule that keeps every draft gives the draft's distribution, not the oracle's.
    from processors import make_processor

    def keep_all(q, p, drafted, rng):
        from sps import sample
        return list(drafted) + [sample(q[len(drafted)], rng)], []
    monkeypatch.setattr(batch, "accept_or_resample", keep_all)
    results, _ = batch_chi_square(small, make_processor("multinomial", temperature=0.8), n_draft=2)
    assert any(rejects for rejects, _ in results)


def test_batched_sps_at_temperature_zero_is_greedy(small):
    from processors import make_processor
    draft, oracle = small
    rows = [[1, 4], [2], [3, 0, 5]]
    got = batch.speculative_sample_batch(draft, oracle, rows, 5, rng=np.random.default_rng(0),
                                         processor=make_processor("greedy"))
    assert got == [list(greedy_generate(oracle, ids, 5)) for ids in rows]
    assert got == [list(autoregressive_sample(oracle, ids, 5, rng=np.random.default_rng(0),
                                              processor=make_processor("greedy"))) for ids in rows]


def test_the_docstrings_steps_are_the_codes_comments_in_order():
    # batch.py's docstring names each step of a round; speculative_generate_batch marks each with its comment.
    import inspect
    import re
    steps = re.findall(r"^  (\d)\. (\w[\w ]*):", batch.__doc__, re.M)
    assert [n for n, _ in steps] == ["1", "2", "3", "4", "5"]
    comments = re.findall(r"^ *# (\d)\. ", inspect.getsource(batch.speculative_generate_batch), re.M)
    assert comments == ["1", "2", "3", "4", "5"]


def test_a_traced_batch_keeps_each_rows_sps_test(small):
    # A traced batch keeps each row's step 3 as one prompt's SpS round does (sps.SpsDetails: each draft's p(x),
    # q(x), min(1, q/p), r and the decision, then the residual's draw or the bonus); tracing draws nothing.
    draft, oracle = small
    rows, traced = [[1, 4], [2], [3, 0, 5]], Stats(trace=[])
    got = batch.speculative_sample_batch(draft, oracle, rows, 8, n_draft=3, rng=np.random.default_rng(3), stats=traced)
    assert got == batch.speculative_sample_batch(draft, oracle, rows, 8, n_draft=3, rng=np.random.default_rng(3))
    for r in traced.trace:
        for row in r.details.rows:
            d = row["sps"]
            tested = min(row["kept"] + 1, len(row["drafted"]))  # a rejection ends the row's tests
            assert [step["token"] for step in d.steps] == row["drafted"][:tested]
            assert [step["accepted"] for step in d.steps] == [t < row["kept"] for t in range(tested)]
            assert all(step["accepted"] == (step["r"] < step["accept_prob"]) for step in d.steps)
            assert (d.resampled is None) == (row["kept"] == len(row["drafted"]))
            assert (d.resampled or d.bonus)["token"] == row["new"][-1]
