"""Block verification (beyond/block_verification.py) keeps the oracle's distribution: exactly, by enumerating
every outcome of the real verification code on small vocabularies, and statistically; it keeps at least as many
drafts as token verification (sps.py), with the paper's toy example worked out; two wrong rules fail the same
tests; and at temperature 0 it is greedy decoding."""

import itertools
from collections import Counter

import numpy as np
import pytest

import beyond.block_verification as bv
from beyond.block_verification import acceptance_probabilities, block_sample, block_weights, last_passing, verify_block
from stats import Stats
from processors import Processor, make_processor
from sps import acceptance_probability, residual, sample
from speculative import speculative_generate
from test_greedy import prompt
from test_sps import (assert_a_seed_reproduces_a_run, assert_exactly_n_new_tokens,  # noqa: F401 (small: a fixture)
                      assert_the_context_limit_and_bad_arguments, assert_self_drafting_keeps_every_draft,
                      assert_the_oracles_distribution, assert_temperature_zero_is_greedy, chi_square_rejects,
                      with_the_draft_as_oracle, generator_chi_square, small)
from test_tree_sampling import dirichlet, extend, oracle_sequences

ALMOST_ONE = np.nextafter(1.0, 0.0)  # r just below 1 fails every test whose h is below 1; r = 0 passes every h > 0


def stop_at_first_failure(h, rs):
    """Wrong: keep the prefixes up to the first failed test, as token verification stops at its first rejection."""
    return next((i - 1 for i in range(1, len(h)) if not rs[i - 1] < h[i]), len(h) - 1)


# Deliberately wrong rules, patched into the module so the real verification uses them (the negative controls).
BIASED = {
    "the residual without the weight w": ("block_residual", lambda q, p, w: residual(q, p)),
    "stop at the first failed prefix": ("last_passing", stop_at_first_failure),
}


def random_contexts(rng, V, n_draft, kind="random"):
    """q after every context of up to n_draft tokens, p after every context of fewer: {tuple: [V]}, each depending on
    its context (two fake models). kind: "random"; "zeros" (q and p with zeros, as top-k leaves them); "equal"
    (p == q: the residuals have no mass); "greedy" (one-hot, temperature 0)."""
    q, p = {}, {}
    for n in range(n_draft + 1):
        for context in itertools.product(range(V), repeat=n):
            q[context] = dirichlet(rng, V)
            if n < n_draft:
                p[context] = dirichlet(rng, V, 0.5)
            if kind == "zeros":
                for dist in (q[context],) + ((p[context],) if n < n_draft else ()):
                    dist[rng.integers(V)] = 0
                    dist /= dist.sum()
            elif kind == "equal" and n < n_draft:
                p[context] = q[context].copy()
            elif kind == "greedy":
                q[context] = np.eye(V, dtype=np.float32)[rng.integers(V)]
                if n < n_draft:
                    p[context] = np.eye(V, dtype=np.float32)[rng.integers(V)]
    return q, p


def weighted_pair():
    """Two fake models on 3 tokens, n_draft = 2, made so that the weight matters: the first draft is most often token 2,
    which the oracle likes less (w_1 = 0.3125); after it the oracle gives tokens 0 and 1 more than the draft does,
    but w_1 q exceeds p at token 0 only, so the block residual max(w_1 q - p, 0) is one-hot where sps.py's
    (q - p)+ is not. Random models use the residual after a shortfall too rarely for a test of 4000 rounds."""
    f32 = lambda *probs: np.array(probs, np.float32)  # noqa: E731
    q_at, p_at = {(): f32(0.5, 0.25, 0.25)}, {(): f32(0.1, 0.1, 0.8)}
    for x in range(3):
        q_at[(x,)], p_at[(x,)] = f32(0.45, 0.45, 0.1), f32(0.0, 0.2, 0.8)
        for y in range(3):
            q_at[(x, y)] = f32(0.2, 0.3, 0.5)
    return q_at, p_at


def distributions(q_at, p_at, xs):
    """The round's inputs for drafts xs: q [n_draft + 1, V] after each prefix, and the n_draft draft distributions."""
    return np.stack([q_at[xs[:i]] for i in range(len(xs) + 1)]), [p_at[xs[:i]] for i in range(len(xs))]


def outcomes(q_at, p_at, V, n_draft):
    """Every outcome of one round of the real verify_block, with its probability: yields (chance, drafts, tau,
    the last token's distribution, w). Each prefix's test r < h passes (r = 0) or fails (r just below 1), with
    chance h or 1 - h; whatever rule the code applies to the tests, it decides the outcome."""
    for xs in itertools.product(range(V), repeat=n_draft):
        weight = float(np.prod([p_at[xs[:i]][x] for i, x in enumerate(xs)]))
        if weight == 0:
            continue
        q, p = distributions(q_at, p_at, xs)
        h = acceptance_probabilities(q, p, block_weights(q, p, list(xs)))
        for passes in itertools.product((True, False), repeat=n_draft):
            chance = weight * float(np.prod([h[i] if ok else 1 - h[i] for i, ok in enumerate(passes, 1)]))
            if chance > 0:
                tau, last, w, _ = verify_block(q, p, list(xs), [0.0 if ok else ALMOST_ONE for ok in passes])
                yield chance, xs, tau, last, w


def round_distribution(q_at, p_at, V, n_draft):
    """P(the first n_draft + 1 tokens) after one round of block verification and sampling from q after it (extend: the
    next rounds, which follow q by induction)."""
    dist = Counter()
    for chance, xs, tau, last, _ in outcomes(q_at, p_at, V, n_draft):
        for y in range(V):
            extend(dist, xs[:tau], y, chance * float(last[y]), q_at, n_draft + 1)
    return dist


def max_error(q_at, p_at, V, n_draft):
    """(the largest difference between one round's and the oracle's probability of a sequence, the total)."""
    got, expected = round_distribution(q_at, p_at, V, n_draft), oracle_sequences(q_at, V, n_draft + 1)
    assert set(got) <= set(expected)
    return max(abs(got[seq] - expected[seq]) for seq in expected), sum(got.values())


def total_variation(q_at, p_at, V, n_draft):
    got, expected = round_distribution(q_at, p_at, V, n_draft), oracle_sequences(q_at, V, n_draft + 1)
    return 0.5 * sum(abs(got[seq] - expected[seq]) for seq in expected)


# ---------------------------------------------------------------------------
# Exact: every outcome of one round, with its probability
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n_draft", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["random", "zeros", "equal", "greedy"])
def test_one_round_emits_exactly_the_oracles_sequences(n_draft, kind):
    for seed in range(2 if n_draft < 4 else 1):
        q_at, p_at = random_contexts(np.random.default_rng(100 * n_draft + seed), 3, n_draft, kind)
        error, total = max_error(q_at, p_at, 3, n_draft)
        assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)


def test_a_binary_vocabulary_with_four_drafts():
    q_at, p_at = random_contexts(np.random.default_rng(5), 2, 4)
    assert max_error(q_at, p_at, 2, 4)[0] < 1e-6


@pytest.mark.parametrize("rule", BIASED)
def test_the_enumeration_catches_a_wrong_rule(monkeypatch, rule):
    assert total_variation(*weighted_pair(), 3, 2) < 1e-6
    q_at, p_at = random_contexts(np.random.default_rng(300), 3, 3)
    monkeypatch.setattr(bv, *BIASED[rule])
    assert total_variation(*weighted_pair(), 3, 2) > 0.03
    assert max_error(q_at, p_at, 3, 3)[0] > 1e-4  # on random models too, by far more than rounding


@pytest.mark.parametrize("n_draft", [1, 2, 3, 4])
def test_the_chance_to_keep_a_prefix_is_its_weight(n_draft):
    # The proof's identity (b): P(tau >= i | the first i drafts) = w_i, summed over the later drafts and tests.
    V = 3
    q_at, p_at = random_contexts(np.random.default_rng(n_draft), V, n_draft)
    kept, reach = Counter(), Counter()
    for chance, xs, tau, _, w in outcomes(q_at, p_at, V, n_draft):
        for i in range(n_draft + 1):
            kept[xs[:i]] += chance * (tau >= i)
            reach[xs[:i], w[i]] += chance  # every block with this prefix has the same w_i
    for (prefix, w), total in reach.items():
        assert kept[prefix] == pytest.approx(total * w, abs=1e-6)


def test_the_scan_keeps_the_last_prefix_that_passes():
    h = [1.0, 0.9, 0.2, 0.7, 0.1]
    assert last_passing(h, [0.95, 0.5, 0.3, 0.99]) == 3  # prefix 4 fails, 3 passes: prefix 2's failure is ignored
    assert last_passing(h, [0.95, 0.5, 0.8, 0.99]) == 0  # every test fails: prefix 0 always passes
    assert last_passing(h, [0.0, 0.0, 0.0, 0.05]) == 4
    assert last_passing([1.0], []) == 0


def test_the_weights_carry_a_shortfall_and_never_exceed_one():
    q = np.array([[0.2, 0.8], [0.9, 0.1], [0.5, 0.5], [0.5, 0.5]], np.float32)
    p = [np.array([0.4, 0.6], np.float32), np.array([0.3, 0.7], np.float32), np.array([0.5, 0.5], np.float32)]
    w = block_weights(q, p, [0, 0, 1])
    assert w == pytest.approx([1.0, 0.5, 1.0, 1.0])  # q/p = 0.5, then 3 makes it up (capped at 1), then 1
    h = acceptance_probabilities(q, p, w)
    assert h[0] == 1.0 and h[-1] == w[-1]
    z1 = float(np.maximum(0.5 * q[1] - p[1], 0).sum())  # max(0.45 - 0.3, 0) + max(0.05 - 0.7, 0) = 0.15
    assert h[1] == pytest.approx(z1 / (z1 + 1 - 0.5))


def test_the_block_residual_can_give_the_draft_its_token_back():
    # With w < 1 the residual max(w q - p, 0) is not sps.py's (q - p)+: here it is one-hot on token 0 though
    # q(1) > p(1), and where w = 1 it is sps.py's residual.
    q, p = np.array([0.7, 0.3], np.float32), np.array([0.2, 0.8], np.float32)
    assert bv.block_residual(q, p, 0.5).tolist() == pytest.approx([1.0, 0.0])
    np.testing.assert_allclose(bv.block_residual(q, p, 1.0), residual(q, p), atol=1e-7)
    flat = np.array([0.5, 0.5], np.float32)  # no residual mass: the fallback is q, renormalised
    assert np.isfinite(bv.block_residual(flat, flat, 0.9)).all() and bv.block_residual(flat, flat, 0.9).sum() == 1


# ---------------------------------------------------------------------------
# How many drafts are kept: the paper's toy example, and never fewer than token verification
# ---------------------------------------------------------------------------

def expected_kept(q_at, p_at, V, n_draft):
    """(E[tau] of block verification, E[drafts kept] of token verification), both enumerated from the real
    code: verify_block's outcomes, and sps.acceptance_probability's chance to keep each draft in turn."""
    block = sum(chance * tau for chance, _, tau, _, _ in outcomes(q_at, p_at, V, n_draft))
    token = 0.0
    for xs in itertools.product(range(V), repeat=n_draft):
        weight = float(np.prod([p_at[xs[:i]][x] for i, x in enumerate(xs)]))
        if weight > 0:
            q, p = distributions(q_at, p_at, xs)
            keep = np.cumprod([acceptance_probability(q[i], p[i], x) for i, x in enumerate(xs)])
            token += weight * float(keep.sum())  # E[kept] = sum_i P(the first i all kept)
    return block, token


def test_the_papers_toy_example():
    # The paper's example (its Section 3): a binary vocabulary {a, b}, models that ignore the context, the
    # target M_b = (1/3, 2/3), the draft M_s = (2/3, 1/3), a block of 2 drafts. The paper gives 10/9 tokens
    # kept per round for token verification and 11/9 for block verification (and 12/9 for a verifier that
    # knew the models' joint probabilities of whole blocks, which needs more than one drafted block).
    q, p = np.array([1 / 3, 2 / 3], np.float32), np.array([2 / 3, 1 / 3], np.float32)
    q_at = {context: q for n in range(3) for context in itertools.product(range(2), repeat=n)}
    p_at = {context: p for n in range(2) for context in itertools.product(range(2), repeat=n)}
    block, token = expected_kept(q_at, p_at, 2, 2)
    assert token == pytest.approx(10 / 9, abs=1e-6)
    assert block == pytest.approx(11 / 9, abs=1e-6)
    assert max_error(q_at, p_at, 2, 2)[0] < 1e-6


@pytest.mark.parametrize("n_draft", [1, 2, 3, 4])
def test_never_fewer_drafts_kept_than_token_verification(n_draft):
    for seed in range(3 if n_draft < 4 else 1):
        for V, kind in ((2, "random"), (3, "random"), (3, "zeros")):
            q_at, p_at = random_contexts(np.random.default_rng(1000 + 10 * n_draft + seed), V, n_draft, kind)
            block, token = expected_kept(q_at, p_at, V, n_draft)
            assert block >= token - 1e-6
            for xs in itertools.product(range(V), repeat=n_draft):  # and prefix by prefix: w_i >= prod min(1, q/p)
                q, p = distributions(q_at, p_at, xs)
                if all(p[i][x] > 0 for i, x in enumerate(xs)):  # a block the draft can draw
                    keep = np.cumprod([acceptance_probability(q[i], p[i], x) for i, x in enumerate(xs)])
                    assert all(w >= k - 1e-6 for w, k in zip(block_weights(q, p, list(xs))[1:], keep))
            if n_draft == 1:
                assert block == pytest.approx(token, abs=1e-6)  # one draft: the two rules are one rule


def test_block_verification_keeps_strictly_more_somewhere():
    gains = []
    for seed in range(5):
        q_at, p_at = random_contexts(np.random.default_rng(seed), 3, 3)
        block, token = expected_kept(q_at, p_at, 3, 3)
        gains.append(block - token)
    assert max(gains) > 0.01


# ---------------------------------------------------------------------------
# Statistical: many draws of the real code, Pearson's chi-square at alpha = 0.001 (test_sps.py's)
# ---------------------------------------------------------------------------

N_ROUNDS = 4000


def round_counts(q_at, p_at, V, n_draft, n, rng):
    """n sequences of n_draft + 1 tokens: one round as block_sample makes it (drafts from p, rs from rng, the last
    token from what verify_block returns), then tokens from q up to n_draft + 1."""
    counts = Counter()
    for _ in range(n):
        xs = []
        for _ in range(n_draft):
            xs.append(sample(p_at[tuple(xs)], rng))
        q, p = distributions(q_at, p_at, tuple(xs))
        tau, last, _, _ = verify_block(q, p, xs, rng.random(n_draft))
        seq = xs[:tau] + [sample(last, rng)]
        while len(seq) < n_draft + 1:
            seq.append(sample(q_at[tuple(seq)], rng))
        counts[tuple(seq)] += 1
    return counts


def round_chi_square(q_at, p_at, V, n_draft, seed):
    counts = round_counts(q_at, p_at, V, n_draft, N_ROUNDS, np.random.default_rng(seed))
    return chi_square_rejects(counts, oracle_sequences(q_at, V, n_draft + 1), N_ROUNDS)


@pytest.mark.parametrize("models", ["weighted pair, n_draft = 2", "random pair, n_draft = 3"])
def test_one_round_passes_the_chi_square_test(models):
    q_at, p_at = weighted_pair() if models.startswith("weighted") else random_contexts(np.random.default_rng(300), 3, 3)
    rejects, detail = round_chi_square(q_at, p_at, 3, 2 if models.startswith("weighted") else 3, 7)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"


@pytest.mark.parametrize("rule", BIASED)
def test_the_chi_square_test_catches_a_wrong_rule(monkeypatch, rule):
    monkeypatch.setattr(bv, *BIASED[rule])
    assert round_chi_square(*weighted_pair(), 3, 2, 7)[0]


N_RUNS = 600  # whole generations on test_sps.py's tiny models (vocabulary of 6): 216 three-token outcomes


@pytest.mark.parametrize("n_draft, processor", [
    (2, Processor()),
    (2, make_processor("topk", 3, temperature=1.3)),
    (1, make_processor("nucleus", 0.8, temperature=0.8)),
], ids=str)
def test_the_generator_has_the_oracles_distribution(small, n_draft, processor):
    assert_the_oracles_distribution(block_sample, small, N_RUNS, processor, n_draft=n_draft)


def test_the_generators_chi_square_test_can_tell_draft_from_target(small):
    # Negative control of the generator-level test: the draft model's own sequences fail it.
    assert generator_chi_square(with_the_draft_as_oracle(block_sample), small, N_RUNS, n_draft=2)[0]


# ---------------------------------------------------------------------------
# Temperature 0, the caches, the statistics (the trace, the page and the registry: workbench/tests/test_shown_sampling.py)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n_draft", [1, 3, 5])
@pytest.mark.parametrize("kind", ["draft", "related", "oracle"])  # unrelated, partly agreeing, identical
def test_temperature_zero_is_greedy(request, oracle, kind, n_draft):
    d = request.getfixturevalue(kind)
    for ids, got in assert_temperature_zero_is_greedy(block_sample, d, oracle, n_draft):
        assert got == list(speculative_generate(d, oracle, ids, 20, n_draft=n_draft))


def test_caches_and_statistics_after_every_round(related, oracle):
    ids = prompt(oracle, 5, 4)
    stats = Stats(trace=[])
    out = list(block_sample(related, oracle, ids, 30, n_draft=3, rng=np.random.default_rng(3), temperature=0.8,
                            stats=stats))
    length = len(ids)
    for r in stats.trace:
        steps = r.details.steps
        length += len(r.new)
        assert r.cached["oracle"] == length - 1 and r.cached["draft"] <= length - 1  # all but the newest token
        assert r.new[:-1] == r.drafted[:r.accepted] and r.accepted == r.details.kept == sum(s["kept"] for s in steps)
        assert all(s["passed"] is False for s in steps[r.accepted:])  # every prefix after tau failed its test
        if r.accepted:
            assert steps[r.accepted - 1]["passed"] is True
        assert isinstance(r.details, bv.BlockDetails)  # its trace lines: workbench/tests/test_shown_sampling.py
    assert length == len(ids) + 30 and stats.n_generated == len(out) == 30
    assert stats.rounds == len(stats.trace) and stats.drafted == sum(len(r.drafted) for r in stats.trace)
    assert stats.accepted == sum(r.accepted for r in stats.trace) > 0


def test_the_oracle_as_its_own_draft_keeps_every_block(oracle):
    # p == q: every w_i is 1, so h_k = 1 and the last prefix always passes.
    assert_self_drafting_keeps_every_draft(block_sample, oracle)


def test_a_seed_reproduces_a_run(related, oracle):
    assert_a_seed_reproduces_a_run(block_sample, related, oracle)


@pytest.mark.parametrize("n_new", [0, 1, 2, 5])
def test_exactly_n_new_tokens(related, oracle, n_new):
    assert_exactly_n_new_tokens(block_sample, related, oracle, n_new, n_drafts=(1, 3, 6))


def test_context_limit_and_bad_arguments(small):
    assert_the_context_limit_and_bad_arguments(block_sample, small, (
        {"n_draft": 0}, {"temperature": -1}, {"top_k": 0}, {"processor": Processor(), "temperature": 0.5}))
