"""Speculative sampling keeps the target distribution: exactly, and statistically. The checks every sampling
decoder must pass (chi-square with its negative control, greedy at temperature 0, the context limit) are
functions here that the tests of beyond/'s sampling decoders call too."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from fixtures import make_model_dir
from gpt2 import GPT2
from processors import Processor, make_processor
from sps import acceptance_probability, autoregressive_sample, residual, sample, speculative_sample
from decoding import GenerationError
from stats import Stats
from speculative import greedy_generate, speculative_generate
from test_greedy import assert_same_greedy, prompt


def emitted_distribution(q, p):
    """P(the accept-or-resample step emits x) for a draft x ~ p, computed from sps's own functions."""
    accept = np.array([acceptance_probability(q, p, x) if p[x] > 0 else 0.0 for x in range(len(p))])
    p_reject = float(np.sum(p * (1 - accept)))
    return p * accept + p_reject * residual(q, p)


def random_distributions(rng, V):
    yield rng.dirichlet(np.ones(V)).astype(np.float32), rng.dirichlet(np.ones(V)).astype(np.float32)
    p = rng.dirichlet(np.ones(V) * 0.2).astype(np.float32)
    yield p, p.copy()  # p == q: nothing is ever rejected, the residual is all zeros
    q = rng.dirichlet(np.ones(V)).astype(np.float32)
    q[: V // 2] = 0  # a top-k-processed target with zeros where the draft has mass
    yield q / q.sum(), rng.dirichlet(np.ones(V)).astype(np.float32)
    yield np.eye(V, dtype=np.float32)[1], np.eye(V, dtype=np.float32)[3]  # temperature 0, disagreeing
    yield np.eye(V, dtype=np.float32)[2], rng.dirichlet(np.ones(V)).astype(np.float32)


@pytest.mark.parametrize("seed", range(5))
def test_one_step_emits_exactly_q(seed):
    rng = np.random.default_rng(seed)
    for q, p in random_distributions(rng, V=1 + 7 * (seed + 1)):
        np.testing.assert_allclose(emitted_distribution(q, p), q, atol=1e-6)


def test_residual_never_nan():
    p = np.array([0.2, 0.5, 0.3], np.float32)
    r = residual(p.copy(), p)
    assert np.isfinite(r).all() and r.sum() == pytest.approx(1)


def test_sample_follows_its_distribution_and_skips_zeros():
    rng = np.random.default_rng(0)
    probs = np.array([0.0, 0.5, 0.0, 0.25, 0.25, 0.0], np.float32)
    counts = np.bincount([sample(probs, rng) for _ in range(20000)], minlength=6)
    assert counts[[0, 2, 5]].sum() == 0
    np.testing.assert_allclose(counts / 20000, probs, atol=0.015)


# --- statistical tests on tiny models -------------------------------------------------

V = 6          # a vocabulary small enough to enumerate every 3-token continuation
N_SAMPLES = 3000


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    base = tmp_path_factory.mktemp("sps")
    kw = dict(vocab_size=V, n_embd=16, n_head=2, n_positions=16, tokenizer=False, scale=0.5)
    return (GPT2.from_pretrained(make_model_dir(base / "p", seed=21, n_layer=1, **kw)),
            GPT2.from_pretrained(make_model_dir(base / "q", seed=22, n_layer=2, **kw)))


def exact_distribution(model, ids, n_new, processor=Processor()):
    """{continuation: probability} under autoregressive sampling, by enumeration."""
    dist = {}
    for seq in itertools.product(range(V), repeat=n_new):
        logits = model.forward(list(ids) + list(seq[:-1]))[len(ids) - 1:]
        probs = processor(logits)
        dist[seq] = float(np.prod([probs[i, t] for i, t in enumerate(seq)]))
    return dist


def chi_square_rejects(counts, dist, n):
    """Pearson's chi-square test at alpha = 0.001; bins with expected count < 5 are pooled."""
    observed, expected = [], []
    pooled_o = pooled_e = 0.0
    for seq, p in dist.items():
        if p * n >= 5:
            observed.append(counts.get(seq, 0))
            expected.append(p * n)
        else:
            pooled_o += counts.get(seq, 0)
            pooled_e += p * n
    if pooled_e > 0:
        observed.append(pooled_o)
        expected.append(pooled_e)
    impossible = sum(c for seq, c in counts.items() if dist.get(seq, 0) == 0)
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    df = len(observed) - 1
    assert df >= 1, "degenerate test: the target puts all its mass on one continuation"
    # Wilson-Hilferty approximation of the chi-square quantile; z = 3.09 for alpha = 0.001.
    critical = df * (1 - 2 / (9 * df) + 3.0902 * math.sqrt(2 / (9 * df))) ** 3
    return impossible > 0 or chi2 > critical, (chi2, critical, df, impossible)


# ---------------------------------------------------------------------------
# What every sampling decoder must do (sps here; beyond/'s block verification and trees call these too)
# ---------------------------------------------------------------------------

def generator_chi_square(generate, models, n_runs, processor=Processor(), seed=1234, n_new=3, **settings):
    """Pearson's test of n_runs generations of n_new tokens after [1, 4] by a sampling decoder on the tiny models
    (draft, oracle), against the oracle's exact distribution: (rejects, detail, the Stats of all the runs)."""
    p_model, q_model = models
    rng, stats = np.random.default_rng(seed), Stats()
    counts = Counter(tuple(generate(p_model, q_model, [1, 4], n_new, rng=rng, processor=processor, stats=stats,
                                    **settings)) for _ in range(n_runs))
    return (*chi_square_rejects(counts, exact_distribution(q_model, [1, 4], n_new, processor), n_runs), stats)


def assert_the_oracles_distribution(generate, models, n_runs, processor, n_new=3, **settings):
    """generator_chi_square passes, and both branches of the check (a draft kept, a draft rejected) were taken."""
    rejects, detail, stats = generator_chi_square(generate, models, n_runs, processor, n_new=n_new, **settings)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted and stats.n_generated == n_new * n_runs


def with_the_draft_as_oracle(generate):
    """A wrong decoder, the negative control of generator_chi_square: the draft checks its own drafts, so the
    output follows the draft's distribution, not the oracle's."""
    return lambda draft, oracle, *args, **settings: generate(draft, draft, *args, **settings)


def assert_temperature_zero_is_greedy(generate, d, oracle, n_draft, **settings):
    """At temperature 0 the text is greedy decoding's (test_greedy.py's check), on two prompts: [(ids, text)]."""
    runs = []
    for seed in (0, 1):
        ids = prompt(oracle, 5 + seed, seed)
        got = list(generate(d, oracle, ids, 20, n_draft=n_draft, rng=np.random.default_rng(seed), temperature=0,
                            **settings))
        assert_same_greedy(list(greedy_generate(oracle, ids, 20)), got, oracle, ids)
        runs.append((ids, got))
    return runs


def assert_self_drafting_keeps_every_draft(generate, oracle):
    """p == q: every check keeps its draft, so each round of 3 drafts keeps all 3 and ends with the bonus."""
    stats = Stats(trace=[])
    list(generate(oracle, oracle, [1, 2, 3], 24, n_draft=3, rng=np.random.default_rng(0), stats=stats))
    assert [r.accepted for r in stats.trace] == [3] * 6 and all(r.details.last["from"] == "bonus" for r in stats.trace)


def assert_a_seed_reproduces_a_run(generate, related, oracle, n_new=15):
    runs = [list(generate(related, oracle, [1, 2, 3], n_new, rng=np.random.default_rng(7))) for _ in range(2)]
    assert runs[0] == runs[1]


def assert_exactly_n_new_tokens(generate, related, oracle, n_new, n_drafts):
    for n_draft in n_drafts:
        out = list(generate(related, oracle, [1, 2], n_new, n_draft=n_draft, rng=np.random.default_rng(n_new)))
        assert len(out) == n_new


def assert_the_context_limit_and_bad_arguments(generate, small, bad_settings):
    """6 tokens after 10 fill the tiny models' context of 16; 7 are refused, and so is each of bad_settings."""
    p_model, q_model = small
    assert len(list(generate(p_model, q_model, [1] * 10, 6, n_draft=4, rng=np.random.default_rng(0)))) == 6
    with pytest.raises(GenerationError, match="context window of 16"):
        list(generate(p_model, q_model, [1] * 10, 7))
    for bad in bad_settings:
        with pytest.raises(GenerationError):
            list(generate(p_model, q_model, [1], 3, **bad))


# ---------------------------------------------------------------------------
# speculative_sample
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n_draft, n_new, processor", [
    (2, 3, Processor()),
    (4, 3, Processor()),
    (1, 2, Processor()),
    (3, 3, make_processor("multinomial", temperature=0.6)),
    (3, 3, make_processor("multinomial", temperature=1.7)),
    (3, 3, make_processor("topk", 3)),
    (2, 3, make_processor("topk", 2, temperature=1.5)),
    (3, 3, make_processor("nucleus", 0.8, temperature=0.8)),
    (2, 3, make_processor("nucleus", 0.5, temperature=2.0)),
    (3, 3, make_processor("topknucleus", 4, 0.9, temperature=1.2)),
    (2, 3, make_processor("topknucleus", 3, 0.6)),
], ids=str)
@pytest.mark.slow
def test_speculative_sample_has_the_targets_distribution(small, n_draft, n_new, processor):
    # Both branches of step 3 must be taken: 0 < accepted < drafted.
    assert_the_oracles_distribution(speculative_sample, small, N_SAMPLES, processor, n_new=n_new, n_draft=n_draft)


@pytest.mark.slow
def test_the_chi_square_test_can_tell_draft_from_target(small):
    # Negative control: the draft's own samples must fail the same test.
    p_model, q_model = small
    rng = np.random.default_rng(99)
    counts = Counter(tuple(autoregressive_sample(p_model, [1, 4], 3, rng=rng)) for _ in range(N_SAMPLES))
    assert chi_square_rejects(counts, exact_distribution(q_model, [1, 4], 3), N_SAMPLES)[0]


def test_autoregressive_sample_has_the_models_distribution(small):
    _, q_model = small
    rng = np.random.default_rng(5)
    processor = make_processor("multinomial", temperature=0.8)
    counts = Counter(tuple(autoregressive_sample(q_model, [1, 4], 3, rng=rng, processor=processor)) for _ in range(N_SAMPLES))
    assert not chi_square_rejects(counts, exact_distribution(q_model, [1, 4], 3, processor), N_SAMPLES)[0]


@pytest.mark.parametrize("n_draft", range(1, 7))
def test_temperature_zero_is_speculative_greedy(draft, related, oracle, n_draft):
    ids = [3, 1, 4, 1, 5]
    for d in (draft, related, oracle):
        assert (list(speculative_sample(d, oracle, ids, 25, n_draft=n_draft, rng=np.random.default_rng(0), temperature=0))
                == list(speculative_generate(d, oracle, ids, 25, n_draft=n_draft)))


@pytest.mark.parametrize("temperature", [1e-40, 1e-30, 1e-60])
def test_a_tiny_temperature_is_greedy(draft, related, oracle, temperature):
    # Was: logits / 1e-40 overflowed to inf and softmax gave NaN, and the text was garbage.
    # (1e-60 is 0 in float32: it must still be a tiny temperature, not a division by zero.)
    ids = [3, 1, 4, 1, 5]
    expected = list(greedy_generate(oracle, ids, 25))
    rng = np.random.default_rng(0)
    assert list(autoregressive_sample(oracle, ids, 25, rng=rng, temperature=temperature)) == expected
    for d in (draft, related, oracle):
        assert list(speculative_sample(d, oracle, ids, 25, n_draft=4, rng=rng, temperature=temperature)) == expected


def test_a_seed_reproduces_a_run(related, oracle):
    assert_a_seed_reproduces_a_run(speculative_sample, related, oracle, n_new=20)
    runs = [list(autoregressive_sample(oracle, [1, 2, 3], 20, rng=np.random.default_rng(7))) for _ in range(2)]
    assert runs[0] == runs[1]


def test_low_temperature_with_draft_equal_to_target_has_no_nan(oracle):
    stats = Stats()
    out = list(speculative_sample(oracle, oracle, [1, 2, 3], 40, n_draft=4, rng=np.random.default_rng(0), temperature=0.01, stats=stats))
    assert len(out) == 40 and stats.accepted == stats.drafted


@pytest.mark.parametrize("n_new", range(0, 10))
def test_exactly_n_new_tokens(related, oracle, n_new):
    assert_exactly_n_new_tokens(speculative_sample, related, oracle, n_new, n_drafts=(1, 3, 6))
    assert len(list(autoregressive_sample(oracle, [1, 2], n_new))) == n_new


def test_context_limit_and_bad_arguments(small):
    assert_the_context_limit_and_bad_arguments(speculative_sample, small, (
        {"temperature": -1}, {"top_k": 0}, {"top_p": 0}, {"top_p": 1.5}, {"n_draft": 0},
        {"processor": Processor(), "temperature": 0.5}))
