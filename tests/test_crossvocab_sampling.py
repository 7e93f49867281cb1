"""crossvocab.py's sampling (TLI): a draft whose tokenizer is not the oracle's samples from its p on the tokens both
vocabularies share, and the output has exactly the oracle's distribution, by enumeration of a round and by a
chi-square test over whole generations, each with a negative control the test catches. At temperature 0 it is
greedy decoding. The tokenizers and models are test_crossvocab.py's.
"""

from collections import Counter

import numpy as np
import pytest

import crossvocab
from checks.part7_vocab import crossvocab_prompts as prompts  # the checker's prompts, on any oracle
from crossvocab import crossvocab_sample, encode_bytes, intersection_proposal, shared_tokens, spell
from processors import make_processor
from sps import acceptance_probability, autoregressive_sample, residual
from stats import Stats
from test_crossvocab import (OTHER_MERGES, THIRD_MERGES, expected, loaded, make_random_model,  # noqa: F401
                             make_translated_copy, pair, traced)  # (expected, pair: fixtures)
from test_greedy import assert_same_greedy
from test_sps import chi_square_rejects
from weights.tokenizer import load_tokenizer


def emitted_distribution(q, proposal, drawn_from=None):
    """P(one step emits x) when the draft's token is drawn from drawn_from (default: proposal) and checked against
    proposal by sps's own functions: the sum over every draw, kept or resampled, computed exactly."""
    drawn_from = proposal if drawn_from is None else drawn_from
    drawn_from = drawn_from / drawn_from.sum()
    accept = np.array([acceptance_probability(q, proposal, x) if drawn_from[x] > 0 else 0.0 for x in range(len(q))])
    return drawn_from * accept + float(np.sum(drawn_from * (1 - accept))) * residual(q, proposal)


@pytest.fixture(scope="module")
def sampling_pair(tmp_path_factory):
    """For the sampling tests: an oracle of the third BPE and a translated draft of it in the second; each has
    about as many tokens of its own as shared ones, so the draft's mass is often outside the intersection
    and the oracle's tokens often are."""
    base = tmp_path_factory.mktemp("sampling")
    oracle_dir = make_random_model(base / "oracle", THIRD_MERGES, seed=31, n_layer=2, n_embd=32, n_positions=16)
    draft_dir = make_translated_copy(oracle_dir, base / "draft", OTHER_MERGES, noise=0.05, seed=32, paired=True)
    return loaded(draft_dir), loaded(oracle_dir)


def test_the_intersection_is_the_tokens_with_the_same_bytes(sampling_pair):
    (_, draft_enc), (_, oracle_enc) = sampling_pair
    to_oracle, to_draft = shared_tokens(draft_enc, oracle_enc)
    draft_bytes = {draft_enc.decode_single_token_bytes(d): d for d in range(draft_enc.n_vocab)}
    oracle_bytes = {oracle_enc.decode_single_token_bytes(o): o for o in range(oracle_enc.n_vocab)}
    both = draft_bytes.keys() & oracle_bytes.keys()
    assert (to_oracle >= 0).sum() == (to_draft >= 0).sum() == len(both) >= 257  # every byte and <|endoftext|>
    for b in both:
        assert to_oracle[draft_bytes[b]] == oracle_bytes[b] and to_draft[oracle_bytes[b]] == draft_bytes[b]
    assert 0.3 < 1 - len(both) / draft_enc.n_vocab < 0.7  # the draft has many tokens of its own


def test_one_step_emits_exactly_q(sampling_pair):
    (_, draft_enc), (_, oracle_enc) = sampling_pair
    to_oracle, to_draft = shared_tokens(draft_enc, oracle_enc)
    rng = np.random.default_rng(0)
    V_draft, V_oracle = draft_enc.n_vocab, oracle_enc.n_vocab
    own = np.flatnonzero(to_oracle < 0)
    cases = []
    for _ in range(5):
        cases.append((rng.dirichlet(np.ones(V_draft)), rng.dirichlet(np.ones(V_oracle))))
    p = rng.dirichlet(np.ones(V_draft))
    cases.append((p, np.where(to_draft >= 0, 0, rng.random(V_oracle))))  # q only outside the intersection
    a, b = oracle_enc.encode_single_token(b"a"), oracle_enc.encode_single_token(b"b")  # tokens of both
    cases.append((np.eye(V_draft)[to_draft[a]], np.eye(V_oracle)[b]))  # temperature 0, disagreeing
    cases.append((np.eye(V_draft)[to_draft[a]], np.eye(V_oracle)[a]))  # temperature 0, agreeing
    cases.append((rng.dirichlet(np.full(V_draft, 0.05)), rng.dirichlet(np.full(V_oracle, 0.05))))  # peaked
    for p_draft, q in cases:
        p_draft, q = p_draft.astype(np.float32), (q / q.sum()).astype(np.float32)
        proposal = intersection_proposal(p_draft, to_oracle, V_oracle)
        assert proposal[to_draft < 0].sum() == 0 and proposal.sum() == pytest.approx(1, abs=1e-6)
        with np.errstate(over="ignore"):  # q/p' of a token p' gives a subnormal probability: inf, kept for sure
            np.testing.assert_allclose(emitted_distribution(q, proposal), q, atol=1e-6)
    # No mass on the shared tokens: no proposal (the oracle samples alone), never a NaN.
    only_own = np.zeros(V_draft, np.float32)
    only_own[own] = rng.dirichlet(np.ones(len(own)))
    assert intersection_proposal(only_own, to_oracle, V_oracle) is None
    assert intersection_proposal(np.full(V_draft, np.nan, np.float32), to_oracle, V_oracle) is None


def test_one_step_negative_control_the_ratio_against_the_unrestricted_p(sampling_pair):
    # Drawn from p' but checked against the draft's unrestricted p (not renormalised): the step keeps too much.
    (_, draft_enc), (_, oracle_enc) = sampling_pair
    to_oracle, _ = shared_tokens(draft_enc, oracle_enc)
    rng = np.random.default_rng(1)
    p_draft = rng.dirichlet(np.ones(draft_enc.n_vocab)).astype(np.float32)
    q = rng.dirichlet(np.ones(oracle_enc.n_vocab)).astype(np.float32)
    proposal = intersection_proposal(p_draft, to_oracle, oracle_enc.n_vocab)
    unrestricted = unnormalised_proposal(p_draft, to_oracle, oracle_enc.n_vocab)
    assert np.abs(emitted_distribution(q, unrestricted, drawn_from=proposal) - q).max() > 1e-3


def unnormalised_proposal(p_draft, to_oracle, oracle_vocab_size):
    """A wrong p': the draft's own probabilities of the shared tokens, not renormalised (draws from it are still
    p'-distributed, since sampling renormalises; the ratio q/p is the unrestricted draft's)."""
    proposal = np.zeros(oracle_vocab_size, dtype=np.float32)
    proposal[to_oracle[to_oracle >= 0]] = p_draft[to_oracle >= 0]
    return proposal if proposal.sum() > 0 else None


def exact_distribution(model, ids, n_new, processor):
    """{continuation: probability} of autoregressive sampling, by enumerating the tokens with q > 0 only (a top-k
    processor keeps a few: the tree is small)."""
    dist = {(): 1.0}
    for _ in range(n_new):
        grown = {}
        for seq, prob in dist.items():
            q = processor(model.forward(list(ids) + list(seq))[-1])
            for x in np.flatnonzero(q):
                grown[seq + (int(x),)] = prob * float(q[x])
        dist = grown
    return dist


def crossvocab_chi_square(sampling_pair, n_runs, processor, n_draft, seed=1234, n_new=3):
    (draft, draft_enc), (oracle, oracle_enc) = sampling_pair
    ids = encode_bytes(oracle_enc, b"x")
    rng, stats = np.random.default_rng(seed), Stats(trace=[])
    counts = Counter(tuple(crossvocab_sample(draft, oracle, draft_enc, oracle_enc, ids, n_new, n_draft, rng=rng,
                                             processor=processor, stats=stats)) for _ in range(n_runs))
    return (*chi_square_rejects(counts, exact_distribution(oracle, ids, n_new, processor), n_runs), stats)


def assert_the_oracles_distribution(sampling_pair, n_runs, processor, n_draft):
    rejects, detail, stats = crossvocab_chi_square(sampling_pair, n_runs, processor, n_draft)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    # both branches of the check, and oracle tokens outside the intersection (the draft read them through the text)
    assert 0 < stats.accepted < stats.drafted
    (_, draft_enc), (_, oracle_enc) = sampling_pair
    _, to_draft = shared_tokens(draft_enc, oracle_enc)
    assert any(to_draft[t] < 0 for r in stats.trace for t in r.new)
    return stats


def test_sampling_has_the_oracles_distribution(sampling_pair):
    stats = assert_the_oracles_distribution(sampling_pair, 800, make_processor("topk", 3), n_draft=3)
    # and some rounds stopped drafting for want of mass on the shared tokens (the fallback)
    assert any(r.details.stopped.startswith("the draft's distribution has no mass") for r in stats.trace)


def test_the_chi_square_test_catches_the_unrestricted_ratio(sampling_pair, monkeypatch):
    # Negative control: the same decoder with p' not renormalised, the ratio taken against the draft's own p.
    monkeypatch.setattr(crossvocab, "intersection_proposal", unnormalised_proposal)
    assert crossvocab_chi_square(sampling_pair, 300, make_processor("topk", 3), n_draft=3)[0]


@pytest.mark.slow
@pytest.mark.parametrize("n_draft, processor", [
    (1, make_processor("topk", 3)),
    (4, make_processor("topk", 4, temperature=0.7)),
    (2, make_processor("topk", 3, temperature=1.6)),
    (3, make_processor("topknucleus", 4, 0.8)),
], ids=str)
def test_sampling_has_the_oracles_distribution_for_every_processor(sampling_pair, n_draft, processor):
    assert_the_oracles_distribution(sampling_pair, 3000, processor, n_draft)


@pytest.mark.parametrize("n_draft", [1, 3, 6])
def test_temperature_zero_is_greedy(pair, expected, n_draft):
    (oracle, oracle_enc) = pair["oracle"]
    for kind in ("translated", "bytes"):
        draft, draft_enc = pair[kind]
        for name, ids in prompts(oracle_enc).items():
            got, stats = traced(crossvocab_sample, draft, oracle, draft_enc, oracle_enc, ids, 30, n_draft,
                                rng=np.random.default_rng(0), temperature=0)
            assert_same_greedy(expected[name], got, oracle, ids)
            for r in stats.trace:
                assert spell(draft_enc, r.details.draft_ids[:r.details.draft_kept] + r.details.reencoded) == \
                    spell(oracle_enc, r.new)


class OwnTokensOnly:
    """A draft that puts all its mass on a token the oracle does not have: its restricted distribution is empty."""

    def __init__(self, draft, token):
        self.vocab_size, self.n_positions, self.token = draft.vocab_size, draft.n_positions, token

    def forward(self, ids, kvcache, n_logits=1):
        kvcache.length += len(ids)  # the cache discipline, without a cache
        logits = np.full((n_logits, self.vocab_size), -np.inf, dtype=np.float32)
        logits[:, self.token] = 0
        return logits


def test_a_draft_with_no_shared_mass_leaves_the_oracle_alone(sampling_pair):
    (draft, draft_enc), (oracle, oracle_enc) = sampling_pair
    to_oracle, _ = shared_tokens(draft_enc, oracle_enc)
    lonely = OwnTokensOnly(draft, int(np.flatnonzero(to_oracle < 0)[0]))
    ids = encode_bytes(oracle_enc, b"x")
    got, stats = traced(crossvocab_sample, lonely, oracle, draft_enc, oracle_enc, ids, 10, 4,
                        rng=np.random.default_rng(5))
    # every round drafts nothing and the oracle draws its token from q: the same draws as sampling alone
    assert got == list(autoregressive_sample(oracle, ids, 10, rng=np.random.default_rng(5)))
    assert stats.drafted == 0 and stats.rounds == 10
    assert all(r.details.stopped.startswith("the draft's distribution has no mass") for r in stats.trace[:-1])
    assert stats.trace[-1].details.stopped == ""  # the last token was the oracle's alone anyway (k = 0)


def test_a_seed_reproduces_a_run_and_the_trace_holds_each_test(sampling_pair):
    (draft, draft_enc), (oracle, oracle_enc) = sampling_pair
    ids = encode_bytes(oracle_enc, b"x")
    runs = [traced(crossvocab_sample, draft, oracle, draft_enc, oracle_enc, ids, 12, 3, rng=np.random.default_rng(7))
            for _ in range(2)]
    assert runs[0][0] == runs[1][0]
    stats = runs[0][1]
    assert stats.n_generated == 12 and stats.draft_passes >= stats.drafted
    for r in stats.trace:
        d = r.details
        # a test per candidate up to the first rejection
        assert isinstance(d, crossvocab.CrossVocabDetails) and len(d.candidates) == len(d.draft_ids) == len(r.drafted)
        assert len(d.tests) == d.kept + (d.kept < len(d.candidates))
        assert [t["token"] for t in d.tests] == d.candidates[:len(d.tests)]
        assert sum(t["accepted"] for t in d.tests) == d.kept
        for t in d.tests:
            assert 0 < t["p"] <= 1 and 0 <= t["q"] <= 1 and t["accepted"] == (t["r"] < min(1, t["q"] / t["p"]))


def test_sampling_with_one_tokenizer_keeps_every_draft_of_the_oracle_itself(tiny_dirs, oracle):
    # p' == q when the draft is the oracle and the vocabularies are one: every test keeps its draft.
    enc = load_tokenizer(tiny_dirs["oracle"])
    stats = traced(crossvocab_sample, oracle, oracle, enc, enc, [1, 2, 3], 24, 3, rng=np.random.default_rng(0))[1]
    assert [r.accepted for r in stats.trace] == [3] * 6
