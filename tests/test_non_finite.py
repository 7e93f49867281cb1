"""A NaN or an infinity never keeps a draft, and never loads (issue 43, case 1).

Two places hold the class. Where tensors are read (weights/checkpoint.py's loaders, the heads'
loader, the fast copy's source): every value must be finite, or the load is one line naming the
file and the tensor. Where a draft is kept (sps.acceptance_probability, through which the trees go,
and block verification's weights): a draft is kept only on a true comparison of finite numbers
with p(x) > 0. Weights that are finite but overflow in a product (3e38) reach the second place:
every draft is rejected, and the residual, which falls back to q, draws the token, so the output
still has the target's distribution (chi-square, with the old rule as its negative control).
"""

import json
import os
import shutil

import numpy as np
import pytest

import sps
from beyond import block_verification, tree_sampling, tree_without_replacement
from fixtures import make_model_dir, save_tensors
from gpt2 import GPT2
from processors import Processor
from test_sps import N_SAMPLES, generator_chi_square, small  # noqa: F401 (small: the fixture)
from weights import checkpoint, heads
from weights.checkpoint import CheckpointError

NAN, INF = float("nan"), float("inf")


def old_acceptance_probability(q, p, x):
    """The rule before issue 43: min(1, NaN) is 1, so a NaN kept every draft (the negative control)."""
    return min(1.0, float(q[x] / p[x]))


def overflowed(n=6):
    """A distribution made, as the programs make it, from logits that overflowed: 3e38 weights times
    activations are inf, and inf - inf in the softmax is NaN."""
    with np.errstate(all="ignore"):
        return Processor(1.0)(np.float32([3e38] * n) * np.float32(10))


def poke(path, name, value, where=slice(None)):
    """Write value over tensor `name`'s values (all, or the flat positions `where`) in a safetensors file, in place."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        entry = json.loads(f.read(n))[name]
        kind = {"F32": np.float32, "F16": np.float16}[entry["dtype"]]
        begin, end = entry["data_offsets"]
        f.seek(8 + n + begin)
        values = np.frombuffer(f.read(end - begin), kind).copy()
        with np.errstate(over="ignore"):
            values[where] = value
        f.seek(8 + n + begin)
        f.write(values.tobytes())


# ---------------------------------------------------------------------------
# Where a draft is kept
# ---------------------------------------------------------------------------

Q = np.float32([0.1, 0.2, 0.3, 0.4])
P = np.float32([0.25, 0.25, 0.25, 0.25])
BAD = {"NaN": NAN, "Inf": INF, "-Inf": -INF}


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("where", ["p", "q", "both"])
def test_a_non_finite_probability_never_keeps_a_draft(bad, where):
    q, p = Q.copy(), P.copy()
    if where in ("p", "both"):
        p[2] = BAD[bad]
    if where in ("q", "both"):
        q[2] = BAD[bad]
    assert sps.acceptance_probability(q, p, 2) == 0.0
    assert sps.likelihood_ratio(q, p, 2) == 0.0
    assert sps.acceptance_probability(q, p, 1) == pytest.approx(0.8)  # the finite ones as before


def test_an_overflowed_draft_distribution_keeps_no_draft_and_the_old_rule_kept_every_one():
    p = overflowed(len(Q))
    assert np.isnan(p).all()
    assert all(sps.acceptance_probability(Q, p, x) == 0.0 for x in range(len(Q)))
    with np.errstate(all="ignore"):
        assert all(old_acceptance_probability(Q, p, x) == 1.0 for x in range(len(Q)))  # the negative control


def test_p_of_zero_keeps_nothing_and_finite_ratios_are_min_1_q_over_p():
    assert sps.acceptance_probability(Q, np.float32([0.5, 0.5, 0, 0]), 2) == 0.0
    rng = np.random.default_rng(0)
    for _ in range(200):
        q, p = rng.dirichlet(np.ones(7)).astype(np.float32), rng.dirichlet(np.ones(7)).astype(np.float32)
        for x in range(7):
            assert sps.acceptance_probability(q, p, x) == min(1.0, float(q[x]) / float(p[x]))


@pytest.mark.parametrize("bad", ["NaN", "Inf", "overflowed"])
def test_one_step_with_a_non_finite_p_emits_exactly_q(bad):
    # Whatever token the broken draft proposed: kept with chance 0, and the residual draws from q itself.
    p = overflowed(len(Q)) if bad == "overflowed" else np.full(len(Q), BAD[bad], np.float32)
    for x in range(len(Q)):
        accept = sps.acceptance_probability(Q, p, x)
        with np.errstate(all="ignore"):
            emitted = accept * np.eye(len(Q))[x] + (1 - accept) * sps.residual(Q, p)
            old = old_acceptance_probability(Q, p, x)
        np.testing.assert_array_equal(emitted, Q)
        assert bad == "Inf" or old == 1.0  # the old rule emitted the draft's token itself (Inf: 0/inf = 0 then)


def overflowing(model):
    """model (a plain GPT2) with 3e38 in ln_f.weight: finite weights whose products overflow to inf, then NaN."""
    params = {**model.params, "ln_f": {**model.params["ln_f"], "weight": np.full_like(model.params["ln_f"]["weight"], 3e38)}}
    return GPT2(params, {"n_layer": model.n_layer, "n_head": model.n_head, "n_embd": model.n_embd,
                         "n_positions": model.n_positions, "vocab_size": model.vocab_size, "layer_norm_epsilon": float(model.eps)})


def test_an_overflowing_draft_keeps_no_draft_and_sps_keeps_the_targets_distribution(small):  # noqa: F811
    p_model, q_model = small
    broken = overflowing(p_model)
    with np.errstate(all="ignore"):
        assert np.isnan(broken.forward([1, 4])).all()
        rejects, detail, stats = generator_chi_square(sps.speculative_sample, (broken, q_model), N_SAMPLES, n_draft=3)
    assert not rejects, detail
    assert stats.drafted > 0 and stats.accepted == 0


def test_the_chi_square_test_catches_the_old_rule_on_an_overflowing_draft(small, monkeypatch):  # noqa: F811
    p_model, q_model = small
    monkeypatch.setattr(sps, "acceptance_probability", old_acceptance_probability)
    with np.errstate(all="ignore"):
        rejects, detail, stats = generator_chi_square(sps.speculative_sample, (overflowing(p_model), q_model),
                                                      N_SAMPLES, n_draft=3)
    assert rejects and stats.accepted == stats.drafted, detail  # every draft kept: the old fault


def test_block_verification_keeps_no_draft_on_a_nan_and_draws_from_q():
    q = np.stack([Q, Q, Q])
    p = [P, overflowed(len(Q))]  # the first draft's p is sound, the second's NaN
    with np.errstate(all="ignore"):
        w = block_verification.block_weights(q, p, [3, 3])
        h = block_verification.acceptance_probabilities(q, p, w)
        tau, last, _, _ = block_verification.verify_block(q, p, [3, 3], np.zeros(2))  # r = 0 passes any h > 0
    assert w[1] == 1.0 and w[2] == 0.0  # the sound draft's weight as ever, the NaN one's 0
    # Prefix 1 ends where the token after it would come from max(w_1 q - p_1, 0), with p_1 NaN: it never passes either.
    assert h[1] == 0.0 and h[2] == 0.0 and tau == 0
    p = [overflowed(len(Q))] * 2
    with np.errstate(all="ignore"):
        tau, last, w, h = block_verification.verify_block(q, p, [3, 3], np.zeros(2))
    assert tau == 0 and w[1:] == [0.0, 0.0] and h[1:] == [0.0, 0.0]
    np.testing.assert_allclose(last, Q, rtol=1e-6)  # the residual of a NaN p is q itself


@pytest.mark.parametrize("tree", [tree_sampling, tree_without_replacement])
def test_the_trees_keep_no_child_on_a_nan(tree):
    with np.errstate(all="ignore"):
        i, target, checks = tree.accept_at_node(Q, overflowed(len(Q)), [3, 2], [0.0, 0.0])
    assert i is None and all(c["accept_prob"] == 0.0 and not c["accepted"] for c in checks)
    assert not np.isnan(target).any()


# ---------------------------------------------------------------------------
# Where tensors are read
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["NaN", "Inf", "-Inf"])
def test_a_non_finite_weight_is_refused_by_every_loader_naming_file_and_tensor(tmp_path, value):
    # (the workbench's fast copy refuses it too: workbench/tests/test_non_finite_fast.py)
    model_dir = make_model_dir(tmp_path / "m", seed=5, n_layer=1, tokenizer=False)
    source = os.path.join(model_dir, "model.safetensors")
    poke(source, "h.0.mlp.c_fc.weight", value, [100])
    said = f"{source}: tensor h.0.mlp.c_fc.weight holds {'NaN' if value != value else 'an infinity'}"
    for load in (GPT2.from_pretrained, lambda d: checkpoint.load(d)):
        with pytest.raises(CheckpointError) as e:
            load(model_dir)
        assert str(e.value).startswith(said), str(e.value)


def test_a_finite_weight_of_3e38_loads():
    t = np.full((4, 4), 3e38, np.float32)
    checkpoint.check_finite("x.safetensors", "t", t)  # finite: an overflow later is the acceptance rule's to meet


def f32_eagle_head(demo_oracle, dest, **values):
    """A copy of the demo oracle (no converted copy) whose EAGLE head is stored as F32, with `values` set."""
    shutil.copytree(demo_oracle, dest, ignore=shutil.ignore_patterns("model.blocked.*"))
    path = os.path.join(dest, "heads", "eagle", "model.safetensors")
    tensors = {k: np.asarray(t, np.float32) for k, t in checkpoint.load_safetensors(path).items()}
    for name, value in values.items():
        tensors[name] = np.full_like(tensors[name], value)
    save_tensors(path, tensors)
    return str(dest)


@pytest.mark.parametrize("value", [NAN, INF], ids=["NaN", "Inf"])
def test_a_non_finite_head_is_refused_naming_file_and_tensor(demo_dirs, tmp_path, value):
    oracle_dir = f32_eagle_head(demo_dirs["oracle"], tmp_path / "o")
    poke(os.path.join(oracle_dir, "heads", "eagle", "model.safetensors"), "fc.weight", value, [7])
    oracle = GPT2.from_pretrained(oracle_dir)
    with pytest.raises(CheckpointError, match=r"heads/eagle/model.safetensors: tensor fc.weight holds (NaN|an infinity)"):
        heads.load(oracle_dir, "eagle", oracle)


def test_a_head_of_3e38_loads_and_eagle_sampling_keeps_none_of_its_drafts(demo_dirs, tmp_path):
    # (the workbench's eagle-sps on it: workbench/tests/test_non_finite_fast.py)
    from beyond.eagle import EagleHead, eagle_sample
    from gpt2 import nest
    from stats import Stats
    oracle_dir = f32_eagle_head(demo_dirs["oracle"], tmp_path / "o", **{"fc.weight": 3e38})
    oracle = GPT2.from_pretrained(oracle_dir)
    config, tensors = heads.load(oracle_dir, "eagle", oracle)  # finite: it loads
    stats = Stats()
    with np.errstate(all="ignore"):
        tokens = list(eagle_sample(EagleHead(nest(tensors), config, oracle), oracle, [464, 2393, 857], 24,
                                   rng=np.random.default_rng(1), processor=Processor(0.8), stats=stats))
    assert len(tokens) == 24 and stats.drafted > 0 and stats.accepted == 0


@pytest.mark.parametrize("method", ["speculative", "sps"])
def test_an_oracle_whose_finite_weights_overflow_is_one_line_not_a_wrong_token(small, method):  # noqa: F811
    # The loaders take 3e38 (finite); the oracle's products overflow to inf and NaN: an argmax or a draw from
    # them would be a wrong token with exit 0, so the decoders stop at the oracle's first such pass.
    from decoding import GenerationError
    from speculative import speculative_generate
    p_model, q_model = small
    generate = speculative_generate if method == "speculative" else sps.speculative_sample
    with np.errstate(all="ignore"), pytest.raises(GenerationError, match="logits are not finite numbers"):
        list(generate(p_model, overflowing(q_model), [1, 4], 5, n_draft=2))
