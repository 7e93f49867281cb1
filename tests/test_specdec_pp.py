"""SpecDec++ (beyond/specdec_pp.py): a stop decided before each draw keeps speculative sampling exact. Exactly, by
enumerating every outcome of a round with the real drafting loop and a toy stop rule on a vocabulary of 3, beside
fixed-length SpS; statistically, on tiny models with a random head and on the learned pair with the trained one;
the classic mistake (dropping the draft the stop was decided on) fails the same tests. With γ = 1 it is sps.py;
at temperature 0 it is greedy decoding; the shipped head is read shape-checked beside the draft."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

import beyond.specdec_pp as sd
from beyond.specdec_pp import AcceptanceHead, SpecDecDetails, draft_line, specdec_sample, stops
from decoding import GenerationError
from stats import Stats
from processors import Processor, make_processor
from sps import acceptance_probability, residual, speculative_sample
from test_greedy import prompt
from test_sps import (assert_exactly_n_new_tokens, assert_temperature_zero_is_greedy,  # noqa: F401 (small: a fixture)
                      chi_square_rejects, generator_chi_square, small)
from test_tree_sampling import dirichlet, extend, oracle_sequences


def drop_the_draft_it_stopped_on(step, k, max_risk, draw):
    """Wrong: the stop is read off the newest draft's a and that draft is dropped with it, so which draws stay in
    the draft depends on the draws themselves (an off-by-one of the stop: "stop before x_i" instead of "after")."""
    drafted, p, chances, why = RIGHT(step, k, max_risk, draw)
    return (drafted[:-1], p[:-1], chances, why) if why == "head" else (drafted, p, chances, why)


RIGHT = draft_line


def random_head(draft, seed=0, n_layers=2, scale=0.05):
    rng = np.random.default_rng(seed)
    d = draft.n_embd
    w = lambda *shape: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    params = {"accept": {"h": [{"weight": w(d, d), "bias": w(d)} for _ in range(n_layers)],
                         "out": {"weight": w(d, 2), "bias": np.array([0.0, 1.0], np.float32)}}}
    return AcceptanceHead(params, {"head": "accept", "n_embd": d}, draft)


# ---------------------------------------------------------------------------
# Exact: every outcome of a round, the real drafting loop with a toy stop rule
# ---------------------------------------------------------------------------

def toy_models(seed, V=3, depth=4):
    """q and p after every context of up to depth tokens, and a toy head: a after every non-empty context (the
    chance it gives the context's last draft), {tuple: ...}."""
    rng = np.random.default_rng(seed)
    q_at, p_at, a_at = {}, {}, {}
    for n in range(depth + 1):
        for context in itertools.product(range(V), repeat=n):
            q_at[context], p_at[context] = dirichlet(rng, V), dirichlet(rng, V, 0.7)
            a_at[context] = float(rng.uniform(0.3, 1.0))
    return q_at, p_at, a_at


def draft_outcomes(p_at, a_at, k, max_risk):
    """Every line the real draft_line drafts with the toy models: (chance, drafts, their p)."""
    def run(script):
        answers = iter(script)

        def draw(dist):
            try:
                return next(answers)
            except StopIteration:
                raise LookupError from None
        try:
            drafted, p, _, _ = sd.draft_line(lambda xs: (p_at[tuple(xs)], a_at.get(tuple(xs))), k, max_risk, draw)
        except LookupError:
            for x in range(len(p_at[()])):
                yield from run(script + [x])
            return
        chance = math.prod(float(p_at[tuple(script[:i])][x]) for i, x in enumerate(script))  # every draw made
        if chance > 0:
            yield chance, drafted, p
    yield from run([])


def round_distribution(q_at, p_at, a_at, V, k, max_risk, n):
    """P(the first n tokens): a round (sps.py's checks on the line drafted, from the real acceptance_probability and
    residual), then q."""
    dist = Counter()
    for chance, xs, p in draft_outcomes(p_at, a_at, k, max_risk):
        reach = chance
        for t, x in enumerate(xs):
            q = q_at[tuple(xs[:t])]
            a = acceptance_probability(q, p[t], x)
            rejected = residual(q, p[t])
            for y in range(V):
                extend(dist, tuple(xs[:t]), y, reach * (1 - a) * float(rejected[y]), q_at, n)
            reach *= a
        for y in range(V):
            extend(dist, tuple(xs), y, reach * float(q_at[tuple(xs)][y]), q_at, n)
    return dist


def round_error(seed, k, max_risk, V=3):
    q_at, p_at, a_at = toy_models(seed, V, k)
    got, want = round_distribution(q_at, p_at, a_at, V, k, max_risk, k + 1), oracle_sequences(q_at, V, k + 1)
    return max(abs(got[s] - want[s]) for s in want), sum(got.values()), got


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("max_risk", [0.0, 0.3, 0.45, 0.6, 1.0])
@pytest.mark.parametrize("seed", range(2))
def test_a_round_with_a_stop_emits_exactly_the_oracles_sequences(seed, max_risk, k):
    error, total, got = round_error(seed, k, max_risk)
    assert error < 1e-6 and total == pytest.approx(1, abs=1e-6)
    fixed = round_error(seed, k, 1.0)[2]  # fixed-length SpS (γ = 1 never stops): the same distribution
    assert max(abs(got[s] - fixed[s]) for s in set(got) | set(fixed)) < 1e-6


def test_the_toy_stop_rule_stops_some_lines_and_not_others():
    _, p_at, a_at = toy_models(0, 3, 3)
    lengths = Counter(len(xs) for _, xs, _ in draft_outcomes(p_at, a_at, 3, 0.45))
    assert set(lengths) == {1, 2, 3}  # so the enumeration above meets every kind of round


def test_the_enumeration_catches_dropping_the_draft_the_stop_was_decided_on(monkeypatch):
    monkeypatch.setattr(sd, "draft_line", drop_the_draft_it_stopped_on)
    assert round_error(0, 2, 0.45)[0] > 1e-2 and round_error(0, 3, 0.45)[0] > 1e-2


def test_the_stop():
    assert stops([0.9, 0.8], 0.25) and not stops([0.9, 0.8], 0.3) and not stops([], 0.0)
    assert not stops([0.5] * 10, 1.0)  # γ = 1: never


# ---------------------------------------------------------------------------
# The generator on tiny models
# ---------------------------------------------------------------------------

def with_head(max_risk=0.5, seed=3, scale=0.3, **kw):
    """specdec_sample with a random head whose a varies with the draft (0.1 to 0.98 on test_sps.py's tiny draft), so
    that the stop depends on what was drafted."""
    return lambda d, o, *args, **settings: specdec_sample(d, o, *args, head=random_head(d, seed, scale=scale),
                                                           max_risk=max_risk, **kw, **settings)


N_RUNS = 1500


@pytest.mark.parametrize("max_risk, processor", [(0.3, Processor()), (0.7, make_processor("topk", 3, temperature=1.3))],
                         ids=str)
@pytest.mark.slow
def test_the_generator_has_the_oracles_distribution(small, max_risk, processor):
    rejects, detail, stats = generator_chi_square(with_head(max_risk), small, N_RUNS, processor, n_draft=4)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted


@pytest.mark.slow
def test_the_generators_chi_square_catches_dropping_the_draft(small, monkeypatch):
    monkeypatch.setattr(sd, "draft_line", drop_the_draft_it_stopped_on)
    assert generator_chi_square(with_head(0.3), small, N_RUNS, n_draft=4)[0]  # stops after some first drafts only


def test_gamma_one_is_sps(related, oracle):
    """γ = 1 never stops: the same draws, the same checks, the same text as sps.speculative_sample."""
    for seed in range(3):
        ids = prompt(oracle, 6, seed)
        want = list(speculative_sample(related, oracle, ids, 30, n_draft=4, rng=np.random.default_rng(seed),
                                       temperature=0.9))
        got = list(specdec_sample(related, oracle, ids, 30, head=random_head(related), n_draft=4, max_risk=1.0,
                                  rng=np.random.default_rng(seed), temperature=0.9))
        assert got == want


def test_the_stop_shortens_the_rounds(related, oracle):
    stats = Stats(trace=[])
    list(specdec_sample(related, oracle, prompt(oracle, 6, 0), 40, head=random_head(related), n_draft=6, max_risk=0.0,
                        rng=np.random.default_rng(0), temperature=0.9, stats=stats))
    for r in stats.trace:  # γ = 0: the first a below 1 stops, so a round drafts 1 token
        d = r.details
        assert isinstance(d, SpecDecDetails) and d.max_risk == 0.0 and len(d.chances) <= len(r.drafted)
        assert len(r.drafted) == 1 and (d.stop == "head" or d.stop == "room" or d.k == 1)
        assert r.cached["oracle"] == r.context_length + len(r.new) - 1 and r.cached["draft"] <= r.cached["oracle"]
    stats = Stats(trace=[])
    list(specdec_sample(related, oracle, prompt(oracle, 6, 0), 40, head=random_head(related), n_draft=6, max_risk=0.6,
                        rng=np.random.default_rng(0), temperature=0.9, stats=stats))
    assert {len(r.drafted) for r in stats.trace} - {0} != {6}  # some rounds stopped early
    assert any(r.details.stop == "head" for r in stats.trace)


@pytest.mark.parametrize("kind", ["draft", "related"])
@pytest.mark.parametrize("max_risk", [0.2, 0.8])
def test_temperature_zero_is_greedy(request, oracle, kind, max_risk):
    d = request.getfixturevalue(kind)
    assert_temperature_zero_is_greedy(lambda dr, o, *a, **s: specdec_sample(dr, o, *a, head=random_head(dr), max_risk=max_risk,
                                                                            **s), d, oracle, 5)


@pytest.mark.parametrize("n_new", [0, 1, 2, 5])
def test_exactly_n_new_tokens(related, oracle, n_new):
    assert_exactly_n_new_tokens(with_head(), related, oracle, n_new, n_drafts=(1, 3))


def test_bad_arguments(related, oracle, draft):
    with pytest.raises(GenerationError):
        list(specdec_sample(related, oracle, [1, 2], 4, head=random_head(draft)))  # another draft's head
    for bad in ({"max_risk": -0.1}, {"max_risk": 1.5}, {"n_draft": 0}):
        with pytest.raises(GenerationError):
            list(specdec_sample(related, oracle, [1, 2], 4, head=random_head(related), **bad))
    with pytest.raises(GenerationError):
        AcceptanceHead({"accept": {"h": [], "out": {}}}, {"head": "accept", "n_embd": 3}, related)


# ---------------------------------------------------------------------------
# The learned pair and its trained head
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def learned(demo_dirs):
    from gpt2 import GPT2, nest
    from weights import heads
    draft, oracle = (GPT2.from_pretrained(demo_dirs[k]) for k in ("draft", "oracle"))
    config, tensors = heads.load(demo_dirs["draft"], "accept", draft)
    return draft, oracle, AcceptanceHead(nest(tensors), config, draft)


def test_the_head_is_written_beside_the_demo_draft_and_checked(demo_dirs, tmp_path):
    import os
    import shutil
    from weights import demo_pair, heads
    from weights.checkpoint import CheckpointError
    sums = demo_pair.shipped_sums()
    for name in ("config.json", "model.safetensors"):
        assert demo_pair.same_file(os.path.join(demo_dirs["draft"], "heads", "accept", name), sums[f"heads/accept/{name}"])
    assert os.path.getsize(os.path.join(demo_dirs["draft"], "heads", "accept", "model.safetensors")) < 1 << 20
    assert not os.path.exists(os.path.join(demo_dirs["oracle"], "heads", "accept"))  # the oracle's heads are its own
    from workbench.speed.accelerate import load_fast
    oracle = load_fast(demo_dirs["oracle"])
    with pytest.raises(CheckpointError, match="n_embd"):  # the draft's head is refused for the oracle
        heads.load(demo_dirs["draft"], "accept", oracle)
    copy = tmp_path / "draft"
    shutil.copytree(demo_dirs["draft"], copy)
    import json
    config = json.loads((copy / "heads" / "accept" / "config.json").read_text())
    (copy / "heads" / "accept" / "config.json").write_text(json.dumps({**config, "n_layers": 9}))
    with pytest.raises(CheckpointError, match="n_layers"):
        heads.load(str(copy), "accept", load_fast(demo_dirs["draft"]))


def test_the_trained_head_stops_and_the_text_is_greedy_at_temperature_zero(learned):
    from speculative import greedy_generate
    from test_greedy import assert_same_greedy
    draft, oracle, head = learned
    ids = [464, 2163, 5860, 257, 1351]
    stats = Stats(trace=[])
    got = list(specdec_sample(draft, oracle, ids, 40, head=head, n_draft=8, max_risk=0.5, rng=np.random.default_rng(0),
                              temperature=0, stats=stats))
    assert_same_greedy(list(greedy_generate(oracle, ids, 40)), got, oracle, ids)
    chances = [a for r in stats.trace for a in r.details.chances]
    assert chances and all(0 < a < 1 for a in chances) and any(r.details.stop == "head" for r in stats.trace)


LEARNED_RUNS = 1500


def learned_chi_square(learned, max_risk=0.25, seed=5):
    from test_traversal import learned_distribution
    draft, oracle, head = learned
    ids = [464, 2163, 5860, 257]
    processor = make_processor("topk", 4)
    rng, stats = np.random.default_rng(seed), Stats()
    counts = Counter(tuple(specdec_sample(draft, oracle, ids, 3, head=head, n_draft=4, max_risk=max_risk, rng=rng,
                                          processor=processor, stats=stats)) for _ in range(LEARNED_RUNS))
    return (*chi_square_rejects(counts, learned_distribution(oracle, ids, processor), LEARNED_RUNS), stats)


@pytest.mark.slow
def test_the_learned_pair_has_the_oracles_distribution(learned):
    rejects, detail, stats = learned_chi_square(learned)
    assert not rejects, f"chi2, critical, df, impossible = {detail}"
    assert 0 < stats.accepted < stats.drafted


@pytest.mark.slow
def test_the_learned_pairs_chi_square_catches_dropping_the_draft(learned, monkeypatch):
    monkeypatch.setattr(sd, "draft_line", drop_the_draft_it_stopped_on)
    assert learned_chi_square(learned)[0]
