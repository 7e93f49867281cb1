"""speculative_generate and threshold_generate give exactly greedy_generate's tokens."""

import shutil

import numpy as np
import pytest

from fixtures import make_model_dir, save_tensors
from gpt2 import GPT2
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate, speculative_generate
from threshold import next_threshold, threshold_generate

SEEDS = [0, 1, 2]


def prompt(model, n, seed):
    return np.random.default_rng(seed).integers(0, model.vocab_size, n).tolist()


def assert_same_greedy(expected, got, oracle, ids):
    """Equal, or the first difference is a genuine float near-tie in the oracle's logits."""
    if got == expected:
        return
    i = next(i for i, (a, b) in enumerate(zip(expected, got)) if a != b)
    logits = oracle.forward(ids + expected[:i])[-1]
    top2 = np.sort(logits)[-2:]
    assert top2[1] - top2[0] < 1e-5, f"token {i}: {got[i]} instead of {expected[i]}, top-2 logit gap {top2[1] - top2[0]}"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_draft", range(1, 9))
@pytest.mark.parametrize("kind", ["draft", "related"])  # unrelated (all rejected), noisy copy (partly accepted)
def test_speculative_equals_greedy(request, oracle, kind, seed, n_draft):
    draft = request.getfixturevalue(kind)
    ids = prompt(oracle, 5 + seed, seed)
    expected = list(greedy_generate(oracle, ids, 30))
    stats = Stats()
    got = list(speculative_generate(draft, oracle, ids, 30, n_draft=n_draft, stats=stats))
    assert_same_greedy(expected, got, oracle, ids)
    assert stats.n_generated == 30 and stats.accepted <= stats.drafted


def test_the_related_draft_exercises_partial_acceptance(related, oracle):
    # The equality tests above mean most when rounds end at every possible point.
    accepted = set()
    for seed in SEEDS:
        stats = Stats(trace=[])
        list(speculative_generate(related, oracle, prompt(oracle, 5 + seed, seed), 30, n_draft=4, stats=stats))
        accepted |= {r.accepted for r in stats.trace if len(r.drafted) == 4}
    assert accepted == {0, 1, 2, 3, 4}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_draft", range(1, 9))
def test_speculative_with_the_oracle_as_draft_accepts_everything(oracle, seed, n_draft):
    ids = prompt(oracle, 4, seed)
    stats = Stats()
    got = list(speculative_generate(oracle, oracle, ids, 31, n_draft=n_draft, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 31)), got, oracle, ids)
    assert stats.accepted == stats.drafted
    assert stats.rounds == -(-31 // (n_draft + 1))  # every round but the last is n_draft + 1 tokens


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_draft", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])
def test_threshold_equals_greedy(request, oracle, seed, n_draft, kind):
    ids = prompt(oracle, 6, seed)
    got = list(threshold_generate(request.getfixturevalue(kind), oracle, ids, 30, n_draft=n_draft))
    assert_same_greedy(list(greedy_generate(oracle, ids, 30)), got, oracle, ids)


@pytest.mark.parametrize("threshold", [0.05, 0.4, 0.95])
def test_threshold_equals_greedy_for_any_starting_threshold(draft, oracle, threshold):
    ids = prompt(oracle, 6, 7)
    got = list(threshold_generate(draft, oracle, ids, 25, threshold=threshold))
    assert_same_greedy(list(greedy_generate(oracle, ids, 25)), got, oracle, ids)


@pytest.mark.parametrize("n_draft", [1, 3, 8])
def test_runs_that_reach_the_context_limit(tiny_dirs, n_draft):
    # Windows of 40 tokens: generation must stop exactly at the edge, never past it.
    small_draft = GPT2.from_pretrained(make_model_dir_cached(tiny_dirs, "d40", seed=11, n_layer=1))
    small_oracle = GPT2.from_pretrained(make_model_dir_cached(tiny_dirs, "o40", seed=12, n_layer=2))
    ids = prompt(small_oracle, 13, 3)
    expected = list(greedy_generate(small_oracle, ids, 27))
    for gen in (speculative_generate(small_draft, small_oracle, ids, 27, n_draft=n_draft),
                speculative_generate(small_oracle, small_oracle, ids, 27, n_draft=n_draft),
                threshold_generate(small_draft, small_oracle, ids, 27, n_draft=n_draft),
                threshold_generate(small_oracle, small_oracle, ids, 27, n_draft=n_draft)):
        assert_same_greedy(expected, list(gen), small_oracle, ids)
    with pytest.raises(GenerationError, match="context window of 40"):
        list(speculative_generate(small_draft, small_oracle, ids, 28, n_draft=n_draft))


_made = {}


def make_model_dir_cached(tiny_dirs, name, **kw):
    import os
    path = os.path.join(os.path.dirname(tiny_dirs["oracle"]), name)
    if path not in _made:
        _made[path] = make_model_dir(path, n_positions=40, **kw)
    return _made[path]


@pytest.mark.parametrize("n_new", range(0, 12))
def test_exactly_n_new_tokens(draft, oracle, n_new):
    ids = prompt(oracle, 3, 0)
    assert len(list(greedy_generate(oracle, ids, n_new))) == n_new
    for n_draft in (1, 4, 8):
        assert len(list(speculative_generate(draft, oracle, ids, n_new, n_draft=n_draft))) == n_new
        assert len(list(speculative_generate(oracle, oracle, ids, n_new, n_draft=n_draft))) == n_new
        assert len(list(threshold_generate(oracle, oracle, ids, n_new, n_draft=n_draft))) == n_new


@pytest.fixture(scope="module")
def zero_oracle(tiny_dirs, tmp_path_factory):
    """The oracle with token ids 0 and 152 swapped: the rows of wte, its embedding and its LM head at once. The
    same model, relabelled: its greedy text after [0, 0, 0] is the oracle's after [152, 152, 152], which is full of
    152, so this one's is full of token 0 (the oracle's own never holds a 0)."""
    import os
    from weights import checkpoint
    tensors = checkpoint.load_safetensors(os.path.join(tiny_dirs["oracle"], "model.safetensors"))
    wte = tensors["wte.weight"].copy()
    wte[[0, 152]] = wte[[152, 0]]
    path = tmp_path_factory.mktemp("zero-oracle")
    for name in ("config.json", "vocab.json", "merges.txt"):
        shutil.copy(os.path.join(tiny_dirs["oracle"], name), path)
    save_tensors(os.path.join(path, "model.safetensors"), {**tensors, "wte.weight": wte})
    return GPT2.from_pretrained(str(path))


def check_token_zero(model):
    """The model as its own draft, on a text of token 0: the text is greedy decoding's, and every draft is kept,
    the drafts of token 0 too."""
    ids = [0, 0, 0]
    stats = Stats()
    got = list(speculative_generate(model, model, ids, 20, n_draft=4, stats=stats))
    assert got == list(greedy_generate(model, ids, 20))
    assert got.count(0) >= 3, got  # what this test is about: a text in which the drafts are token 0
    assert stats.accepted == stats.drafted, f"{stats.drafted - stats.accepted} of {stats.drafted} drafts rejected"


def test_token_zero_in_prompt_and_output(zero_oracle):
    check_token_zero(zero_oracle)


def test_token_zero_fails_the_check_above_when_the_comparison_skips_it(zero_oracle, monkeypatch):
    # The mutation check: a comparison that treats token 0 as "no token" (`if drafted[n]`) rejects every draft of
    # token 0. The text stays right (the oracle's own token 0 replaces each one), so only the count shows it.
    import speculative

    def skips_zero(drafted, oracle_choice):
        n = 0
        while n < len(drafted) and drafted[n] and drafted[n] == oracle_choice[n]:
            n += 1
        return n
    monkeypatch.setattr(speculative, "accepted_prefix_length", skips_zero)
    with pytest.raises(AssertionError, match=r"\d+ of \d+ drafts rejected"):
        check_token_zero(zero_oracle)


def test_caches_hold_all_but_the_newest_token_after_every_round(draft, oracle):
    ids = prompt(oracle, 5, 4)
    stats = Stats(trace=[])
    list(speculative_generate(draft, oracle, ids, 30, n_draft=4, stats=stats))
    length = len(ids)
    for record in stats.trace:
        length += len(record.new)
        assert record.cached["oracle"] == length - 1
        assert record.cached["draft"] <= length - 1
        assert record.new[:-1] == record.drafted[:record.accepted]
        assert record.new[-1] == record.oracle[record.accepted]


def test_vocabularies_must_match(tmp_path, oracle):
    other = GPT2.from_pretrained(make_model_dir(tmp_path, vocab_size=300, tokenizer=False))
    with pytest.raises(GenerationError, match="vocabulary"):
        list(speculative_generate(other, oracle, [1, 2], 5))
    with pytest.raises(GenerationError, match="vocabulary"):
        list(threshold_generate(other, oracle, [1, 2], 5))


def test_empty_prompt_is_an_error(draft, oracle):
    with pytest.raises(GenerationError, match="no tokens"):
        list(speculative_generate(draft, oracle, [], 5))


def test_threshold_update_rule():
    # rejection: halfway toward the cumulative probability at the last accepted token
    assert next_threshold(0.4, [0.9, 0.6, 0.3], 2, 0.1) == pytest.approx(0.5)
    # nothing accepted: halfway toward 1
    assert next_threshold(0.4, [0.9, 0.6], 0, 0.1) == pytest.approx(0.7)
    # all accepted: lower by the boost
    assert next_threshold(0.4, [0.9, 0.6], 2, 0.1) == pytest.approx(0.3)
    # clamped to [0.05, 0.95]
    assert next_threshold(0.1, [0.9], 1, 0.1) == pytest.approx(0.05)
    assert next_threshold(0.95, [0.99, 0.98], 0, 0.1) == pytest.approx(0.95)
