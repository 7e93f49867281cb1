"""python workbench.py bench end to end on tiny models, and the pieces its figures rest on.

No timing is asserted here (speed goals live in workbench/bench/ itself): these tests
check that the benchmark runs, writes what it says, and computes its
predictions and its synthetic draft correctly.
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from fixtures import ROOT
from kvcache import KVCache
from speculative import greedy_generate, speculative_generate
from speedup import expected_tokens_per_round, predicted_speedup
from workbench.bench import main as bench
from workbench.bench import measure
from workbench.methods import baselines
from workbench.speed import blocked, panels


def run_bench(*args, timeout=300):
    return subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "bench", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def tiny_models(tiny_dirs, base):
    """base/models with tiny models standing in as real gpt2 and gpt2-xl."""
    shutil.copytree(tiny_dirs["related"], base / "models" / "gpt2")
    shutil.copytree(tiny_dirs["oracle"], base / "models" / "gpt2-xl")
    return base / "models"


# --quick measures loading in a process of its own, which it starts as the old entry point did


@pytest.fixture(scope="module")
def bench_run(tiny_dirs, tmp_path_factory):
    """`python workbench.py bench --quick` on the tiny models."""
    base = tmp_path_factory.mktemp("bench")
    r = run_bench("--quick", "--models-dir", tiny_models(tiny_dirs, base), "--out", base / "out",
                  "--new-tokens", 8, "--context", 16)
    return r, base / "out"


def test_bench_runs_and_writes_its_files(bench_run):
    r, out = bench_run
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "differs from greedy" not in r.stderr  # greedy methods reproduced the oracle's tokens
    assert {"cost_curve.csv", "end_to_end.csv", "bench.json", "summary.md"} <= set(os.listdir(out))
    with open(out / "cost_curve.csv") as f:
        curve = list(csv.DictReader(f))
    assert {(row["model"], int(row["k"])) for row in curve} == {(m, k) for m in ("gpt2", "gpt2-xl") for k in range(1, 17)}
    assert all(row["weights"] == "real" and float(row["bandwidth_GB/s"]) > 0 for row in curve)
    assert all(float(row["T(k)/T(1)"]) == 1.0 for row in curve if row["k"] == "1")
    with open(out / "one_token.csv") as f:
        one_token = list(csv.DictReader(f))
    assert [row["model"] for row in one_token] == ["gpt2", "gpt2-xl"]
    for row in one_token:  # tiny models: times of a fraction of a millisecond, rounded to 0.1
        t1, products, between = (float(row[c]) for c in ("T(1)_ms", "products_alone_ms", "between_products_ms"))
        assert t1 > 0 and abs(t1 - products - between) <= 0.15
        assert row["products_share"].endswith("%") and row["forward_share"].endswith("%")
        ratio = float(row["forward/products"])  # of the unrounded times: within what rounding to 0.1 ms allows
        assert (t1 - 0.05) / (products + 0.05) <= ratio <= (t1 + 0.05) / max(products - 0.05, 1e-9)
        of_8 = float(row["products_of_8_ms"])  # the floor under T(8)/T(1), beside it in the summary
        assert of_8 > 0 and float(row["products_of_8/products"]) > 0
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# `python workbench.py bench --quick")
    assert all(any(line.startswith(f"| {m} | ") for line in summary.splitlines()) for m in ("gpt2", "gpt2-xl"))


def test_products_alone_are_the_products_of_a_single_token_forward(oracle, monkeypatch):
    # The same weights, in the same order, each multiplied by one row: so T(1)
    # minus their time is exactly the work between the products.
    seen = []
    layout = panels if not oracle.shares else blocked  # a small model's weights are in panels
    real_product = layout.product
    monkeypatch.setattr(layout, "product", lambda x, w: seen.append((x.shape[0], id(w))) or real_product(x, w))
    cache = KVCache()
    oracle.forward([3, 1, 4], cache)
    seen.clear()
    oracle.forward([1], cache)
    in_forward = list(seen)
    seen.clear()
    measure.products_run(oracle)()
    assert seen == in_forward and len(seen) == 4 * oracle.n_layer + 1
    assert all(n_rows == 1 for n_rows, _ in seen)
    # Of 8 tokens: the products of an 8-token forward, the floor under T(8)/T(1).
    seen.clear()
    oracle.forward([2, 7, 1, 8, 2, 8, 1, 8], cache)
    in_forward = list(seen)
    seen.clear()
    measure.products_run(oracle, 8)()
    assert seen == in_forward and all(n_rows == 8 for n_rows, _ in seen)


@pytest.mark.parametrize("n_bytes", [10_000, 8_000, 1_000])
def test_bandwidth_probe_reads_as_many_bytes_as_asked(monkeypatch, n_bytes):
    # As many bytes as a model's weights, so that the probe lasts as long as the forward it bounds.
    read = []
    real_max = np.max
    monkeypatch.setattr(np, "max", lambda a: read.append(a.nbytes) or real_max(a))
    measure.stream(np.ones(1000, dtype=np.float32), n_bytes)()
    assert sum(read) == n_bytes


def test_best_seconds_takes_turns():
    # Each run once per round, so a probe and the forward beside it meet the same moments of the host.
    calls = []
    best = measure.best_seconds({"probe": lambda: calls.append("probe"), 1: lambda: calls.append(1)}, repeats=3)
    assert calls == ["probe", 1] * 3
    assert set(best) == {"probe", 1} and all(0 < s < 1 for s in best.values())


def test_bench_end_to_end_rows(bench_run):
    _, out = bench_run
    with open(out / "end_to_end.csv") as f:
        rows = list(csv.DictReader(f))
    methods = {row["method"] for row in rows}
    assert {"greedy (oracle alone)", "speculative", "threshold", "sps", "tree", "staged", "adaptive", "ngram (no draft model)"} <= methods
    assert all(int(row["tokens"]) == 8 for row in rows)  # exactly --new-tokens, never more
    assert {int(row["prompt"]) for row in rows} == set(range(len(bench.PROMPTS)))


def test_loading_is_measured_in_a_fresh_process(bench_run):
    # The parent holds a 2 GiB bandwidth probe before it starts the load probe:
    # a peak RSS inherited across fork + exec would show up here.
    _, out = bench_run
    with open(out / "bench.json") as f:
        loading = json.load(f)["loading"]
    assert loading["models"] == ["gpt2-xl", "gpt2"]
    assert 0 < loading["peak_rss_bytes"] < 500e6


def test_predicted_speedup_is_leviathans_formula():
    assert predicted_speedup(0.0, 4, 0.1) == pytest.approx(1 / (4 * 0.1 + 1))  # nothing accepted: pure overhead
    assert predicted_speedup(0.8, 0, 0.1) == pytest.approx(1.0)  # no drafts: plain decoding
    alpha, n_draft, c = 0.8, 4, 0.05
    expected_tokens = sum(alpha ** i for i in range(n_draft + 1))  # 1 + alpha + ... + alpha^n_draft
    assert predicted_speedup(alpha, n_draft, c) == pytest.approx(expected_tokens / (n_draft * c + 1))
    assert predicted_speedup(alpha, n_draft, c, check_ratio=1.5) == pytest.approx(expected_tokens / (n_draft * c + 1.5))


def test_synthetic_draft_is_calibrated_and_right_at_its_fixed_positions(oracle, draft):
    ids = [3, 1, 4, 1, 5]
    reference = ids + [int(t) for t in np.random.default_rng(0).integers(oracle.vocab_size, size=200)]
    synthetic = measure.SyntheticDraft(draft, reference, alpha=0.7, start=len(ids), seed=1)
    logits = synthetic.forward(np.array(reference[:100]), KVCache())
    probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    proposals = logits.argmax(axis=-1)
    assert np.allclose(probabilities[np.arange(100), proposals], 0.7, atol=1e-5)  # P(proposal) = alpha
    right = proposals == np.array(reference[1:101])
    assert np.array_equal(right, synthetic.right[1:101])  # right exactly where drawn, never by chance


@pytest.mark.parametrize("alpha", [0.5, 0.7, 0.8, 0.9])
@pytest.mark.parametrize("n_new", [32, 64, 200])
def test_synthetic_draft_realises_alpha(draft, alpha, n_new):
    # Exactly round(alpha * n_new) of the new positions are right, so the rate the
    # end-to-end rows are measured at is alpha up to rounding, whatever the seed
    # (independent draws realised 0.703 at alpha 0.8 over 64 tokens).
    reference = list(range(48 + n_new))
    for seed in range(5):
        synthetic = measure.SyntheticDraft(draft, reference, alpha=alpha, start=48, seed=seed)
        assert synthetic.right[48:].sum() == round(alpha * n_new)
        assert synthetic.realised == synthetic.right[48:].mean()
        assert abs(synthetic.realised - alpha) <= 0.5 / n_new + 1e-12
    patterns = {tuple(measure.SyntheticDraft(draft, reference, alpha=alpha, start=48, seed=seed).right) for seed in range(5)}
    assert len(patterns) == 5  # random order: each seed its own pattern


def test_synthetic_draft_realised_rate_is_the_share_of_right_proposals(oracle, draft):
    # What the realised rate claims, checked against what the draft did: among the
    # proposals made after a correct prefix (the ones the oracle can accept), the
    # share that equals the oracle's token.
    ids = [3, 1, 4, 1, 5]
    reference = ids + [int(t) for t in greedy_generate(oracle, ids, 40)]
    synthetic = measure.SyntheticDraft(draft, reference, alpha=0.8, start=len(ids), seed=3)
    proposals = synthetic.forward(np.array(reference[:-1]), KVCache()).argmax(axis=-1)  # row i predicts token i + 1
    right = proposals[len(ids) - 1:] == np.array(reference[len(ids):])
    assert right.mean() == synthetic.realised == round(0.8 * 40) / 40


def test_synthetic_draft_speculation_reproduces_the_reference(oracle, draft):
    ids = [3, 1, 4, 1, 5]
    reference = ids + [int(t) for t in greedy_generate(oracle, ids, 12)]
    out = list(speculative_generate(measure.SyntheticDraft(draft, reference, alpha=0.6, start=len(ids)), oracle, ids, 12, n_draft=3))
    assert out == reference[len(ids):]


def test_synthetic_end_to_end_counts_the_faster_oracle_alone_run(monkeypatch, oracle, draft):
    # The oracle-alone baseline runs twice, first and last; a first run slowed
    # by another tenant must not inflate every speedup.
    calls = []

    def greedy(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.0)  # a burst of someone else's traffic
        return greedy_generate(*args, **kwargs)

    monkeypatch.setattr(baselines, "greedy_generate", greedy)  # what the registry's "greedy" calls
    curve = {k: 1.0 for k in range(1, 17)}
    rows = bench.end_to_end_synthetic(draft, oracle, "draft -> oracle", 8, [0.8], [2], curve, curve,
                                      lambda message: None, beyond_alphas=())
    assert len(calls) == 2 and rows[0]["method"] == "greedy (oracle alone)"
    base = rows[0]["seconds"]
    assert base < 1.0  # the undisturbed run
    assert all(r["speedup"] == round(base / r["seconds"], 2) for r in rows)
    assert rows[0]["seconds_of_both_runs"].startswith("1.")  # both runs are reported, the slow one first


def test_synthetic_rows_carry_the_realised_rate_and_both_predictions(oracle, draft, tmp_path):
    curve = {k: 0.01 * (1 + k / 16) for k in range(1, 17)}
    rows = bench.end_to_end_synthetic(draft, oracle, "draft -> oracle", 16, [0.5, 0.8], [2, 4], curve, curve,
                                      lambda message: None, beyond_alphas=())
    drafted = [r for r in rows if r.get("alpha")]
    assert {r["method"] for r in drafted} == {"speculative", "threshold", "sps (T=0)"}
    assert all(r["realised"] == round(round(r["alpha"] * 16) / 16, 3) for r in drafted)
    for r in (r for r in drafted if r["method"] == "speculative"):
        n_draft = int(r["setting"].split("=")[1])
        assert r["predicted"] == round(predicted_speedup(r["realised"], n_draft, 1.0), 2)
        assert r["predicted_with_costs"] == round(r["predicted_alone_seconds"] / r["predicted_seconds"], 2)
        assert r["predicted_with_cost_curve"] > 0
        assert r["gap"] == f"{r['speedup'] / r['predicted_with_costs'] - 1:+.0%}"
    # The summary PERFORMANCE.md copies from: one table row per end-to-end row.
    results = {"run": {"command": "python workbench.py bench", "date": "today", "minutes": 1.0, "load_before": "0.00 0.00 0.00",
                       "others_load": 0.1, "weights": "random", "context": 16},
               "machine": {"cores": 2, "numpy": np.__version__, "blas": "openblas", "bandwidth_gb_s": 1.0},
               "one_token": [], "cost_curve": [],
               "loading": {"models": ["oracle", "draft"], "load_s": 0.1, "first_forward_s": 0.1, "peak_rss_bytes": 2, "files_bytes": 1},
               "end_to_end": rows}
    bench.write_summary(tmp_path / "summary.md", results)
    table = [line for line in (tmp_path / "summary.md").read_text().splitlines() if line.startswith("| ")]
    assert table[-len(rows):] == ["| " + " | ".join(str(r.get(c, "")) for c in (
        "alpha", "realised", "method", "setting", "tokens_per_s", "acceptance", "tokens_per_pass", "speedup",
        "predicted", "predicted_with_cost_curve", "predicted_with_costs", "gap")) + " |" for r in rows]


def test_predicted_seconds_count_the_prompt_and_every_pass():
    draft = {1: 1.0, 2: 1.5, "prompt": 4.0}
    oracle = {1: 10.0, 5: 12.0, "prompt": 30.0, ("prompt", 4): 33.0}
    alpha, n_draft, n_new = 0.8, 4, 40
    alone, speculative = measure.predicted_seconds(alpha, n_draft, n_new, draft, oracle)
    assert alone == pytest.approx(30.0 + 39 * 10.0)  # the prompt pass gives the first token
    rounds = n_new / (1 + 0.8 + 0.8 ** 2 + 0.8 ** 3 + 0.8 ** 4)
    drafting = 3 * 1.0 + 0.8 ** 4 * 1.5 + (1 - 0.8 ** 4) * 1.0  # 2 tokens after a round that kept all 4
    assert speculative == pytest.approx(4.0 + 3 * 1.0 + 33.0 + (rounds - 1) * (drafting + 12.0))
    # A round measured as decoding runs it replaces the cost curve's passes; a round
    # after one that accepted everything still starts with a 2-token draft pass.
    # The oracle alone's steps, timed in the same turns, replace its cost-curve pass.
    alone, measured = measure.predicted_seconds(alpha, n_draft, n_new, draft, oracle, rounds={0: 11.0, n_draft: 20.0})
    assert measured == pytest.approx(4.0 + 3 * 1.0 + 33.0 + (rounds - 1) * (20.0 + 0.8 ** 4 * 0.5))
    assert alone == pytest.approx(30.0 + 39 * 11.0)


def test_round_costs_time_draft_passes_then_the_verification(oracle, draft, monkeypatch):
    calls = []
    for model, name in ((draft, "draft"), (oracle, "oracle")):
        real = model.forward
        monkeypatch.setattr(model, "forward", lambda ids, cache, real=real, name=name, **kw: calls.append((name, len(ids))) or real(ids, cache, **kw))
    costs = measure.round_costs(draft, oracle, [3, 1, 4, 1, 5], [2, 4], repeats=1)
    assert set(costs) == {0, 2, 4} and all(s > 0 for s in costs.values())
    assert calls == ([("draft", 5), ("oracle", 5)] + [("oracle", 1)] * 2  # the prompts, two steps of the oracle alone
                     + [("draft", 1)] * 2 + [("oracle", 3)] + [("draft", 1)] * 4 + [("oracle", 5)])  # the rounds


def test_bench_help_and_bad_flag():
    r = run_bench("--help")
    assert r.returncode == 0 and "cost curve" in r.stdout
    r = run_bench("--sizes", "gpt5")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: ")


def test_real_models_without_a_tokenizer_fail_at_once(tiny_dirs, tmp_path):
    # Before any timing: not after minutes of cost curves with nothing saved.
    models = tiny_models(tiny_dirs, tmp_path)
    os.remove(models / "gpt2" / "vocab.json")
    r = run_bench("--quick", "--models-dir", models, "--out", tmp_path / "out", timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "tokenizer files" in r.stderr
    assert not os.path.exists(tmp_path / "out")


def test_the_real_text_suite_runs_on_the_learned_pair_and_writes_its_tables(demo_dirs, tmp_path):
    # python workbench.py bench suite, small: two methods, one round, 8 tokens; every greedy row's text checked against greedy.
    models_dir = os.path.dirname(demo_dirs["draft"])
    r = run_bench("suite", "--methods", "speculative", "suffix", "-n", 8, "--rounds", 1, "--models-dir", models_dir,
                  "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out" / "suite.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # speculative with demo-draft-4k too: the draft of another vocabulary, on its own rows (crossvocab.py)
    assert {(row["method"], row["kind"]) for row in rows} == {(m, k) for m in ("speculative", "suffix",
                                                                               "speculative (demo-draft-4k)")
                                                              for k in ("prose", "code", "lists", "repeat")}
    assert all(row["output"] == "identical" and 0 <= float(row["repeats"]) <= 1 for row in rows)
    assert sum(float(row["acceptance"]) for row in rows if row["method"] == "speculative (demo-draft-4k)") > 0
    for name in ("suite_prediction.csv", "suite.md", "suite.json", "suite.html"):
        assert (tmp_path / "out" / name).is_file()
    md = (tmp_path / "out" / "suite.md").read_text()
    assert "python workbench.py bench suite --methods speculative suffix" in md and "demo-draft-4k, a draft with a vocabulary" in md


def test_the_suite_sets_a_draft_of_another_vocabulary_beside_the_pairs(tiny_dirs, other_vocabulary):
    # run_suite with a draft of another vocabulary: its rows, named "METHOD (NAME)", for the methods that take one;
    # its greedy text checked against greedy decoding as every greedy row's; its own c in the prediction.
    from workbench.bench.suite import KINDS, run_suite
    from workbench.speed.accelerate import load_fast
    from weights.tokenizer import load_tokenizer
    draft, oracle, other = (load_fast(d) for d in (tiny_dirs["related"], tiny_dirs["oracle"], other_vocabulary))
    prompts = [{"kind": kind, "prompt": prompt} for kind in KINDS for prompt in ("the cat and the", "of the café")]
    rows, predictions, facts = run_suite(draft, oracle, load_tokenizer(tiny_dirs["oracle"]), prompts, n_new=12,
                                         rounds=1, progress=False, names=["speculative", "sps", "tree"],
                                         crossvocab=("other", other, load_tokenizer(other_vocabulary)))
    named = ["speculative", "sps", "tree", "speculative (other)", "sps (other)"]
    assert [row["method"] for row in rows] == [name for name in named for _ in KINDS]
    assert [row["method"] for row in predictions] == named
    for row in rows:
        assert row["output"] == ("identical" if not row["method"].startswith("sps") else "sampled: seeds 0")
    assert sum(float(row["acceptance"] or 0) for row in rows if row["method"] == "speculative (other)") > 0
    assert facts["crossvocab"]["draft"] == "other" and facts["crossvocab"]["vocabulary"] == other.vocab_size
    c = {row["method"]: row["c"] for row in predictions}
    assert c["speculative (other)"] == c["sps (other)"] == facts["crossvocab"]["c"] and c["speculative"] == facts["c"]


@pytest.mark.slow
def test_the_layers_bench_runs_every_depth_of_the_learned_oracle(demo_dirs, tmp_path):
    models_dir = os.path.dirname(demo_dirs["oracle"])
    r = run_bench("layers", "--no-xl", "-n", 4, "--models-dir", models_dir, "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    learned = json.loads((tmp_path / "out" / "layers.json").read_text())["learned"]
    assert [row["L"] for row in learned] == list(range(1, 8))  # every depth short of the oracle's 8 layers
    for row in learned:  # alpha is Leviathan's: the one that gives the measured tokens per round
        assert abs(expected_tokens_per_round(row["alpha"], 4) - row["tokens_per_round"]) < 0.01


def test_repeats_count_the_tokens_that_close_a_known_4_gram():
    from workbench.bench.suite import repeated_share
    assert repeated_share([1, 2, 3, 4], [1, 2, 3, 4, 5]) == 1 / 5  # only the second 4 closes (1, 2, 3, 4)
    assert repeated_share([1, 2, 3], [4, 5, 6]) == 0


def test_before_after_compares_two_checkouts_round_by_round(tiny_dirs, tmp_path):
    # workbench/tools/before_after.py, the check that a refactoring kept the speed: here this checkout against itself
    shutil.copytree(tiny_dirs["related"], tmp_path / "random-gpt2")
    # (each side's Python given, as when one checkout is paired under two Pythons)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench", "tools", "before_after.py"), ROOT, ROOT,
                        "--models-dir", tmp_path, "--rounds", "2", "--models", "gpt2", "--python-after", sys.executable],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("done") == 2
    lines = r.stdout.splitlines()
    for side, line in zip(("before", "after"), lines[:2]):  # which Python, NumPy and BLAS ran each side
        assert line.startswith(f"{side}: {ROOT} under Python {sys.version.split()[0]}, NumPy {np.__version__}"), line
    lines = lines[2:]
    assert lines[0].split()[:3] == ["figure", "before", "after"]
    assert [line.split()[0:2] for line in lines[1:]] == [["gpt2", "T(1)"], ["gpt2", "T(8)/T(1)"], ["gpt2", "ms"]]


def test_the_cost_bench_pairs_each_round():
    # default/best: the median of the rounds' ratios to the plain way with the lower median, not a ratio of medians
    # (a slow minute that falls on one way's round would then count against it alone)
    from workbench.bench.costs import paired
    costs = {"default": {5: [1.0, 2.0, 4.0]}, "numpy": {5: [1.0, 1.9, 4.2]}, "numpy-1": {5: [3.0, 3.0, 3.0]}}
    assert paired(costs, 5) == pytest.approx(1.0)  # rounds 1.0, 1.05, 0.95 against numpy (median 1.9 < 3.0)
    assert paired(costs, 5) != pytest.approx(2.0 / 1.9), "the ratio of the medians is not the paired figure"
    costs["numpy-1"][5] = [1.5, 1.5, 1.5]  # now numpy-1 has the lower median: the pairs are against it
    assert paired(costs, 5) == pytest.approx(2.0 / 1.5)


def test_the_cost_bench_times_every_k_of_each_way_beside_the_roofline(tiny_dirs, tmp_path):
    # python workbench.py bench cost: T(k) by the default way, NumPy on every core and on one, each beside this
    # machine's roofline; every ratio of speed over the best T(1) of the three; the ridge and the plan named in cost.md
    r = run_bench("cost", tiny_dirs["oracle"], tiny_dirs["draft"], "--ks", 2, 5, "--rounds", 3, "--context", 8,
                  "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out" / "cost.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(row["model"], int(row["k"])) for row in rows] == [(d, k) for d in (tiny_dirs["oracle"], tiny_dirs["draft"])
                                                               for k in (1, 2, 5)]
    for row in rows:
        ms = {way: float(row[f"{way}_ms"]) for way in ("default", "numpy", "numpy-1")}
        roof = float(row["roofline_ms"])
        assert all(t > 0 for t in ms.values()) and roof > 0 and row["way"] in ("numpy-1", "numpy", "fast")
        for way, t in ms.items():
            assert float(row[f"{way}/roofline"]) == pytest.approx(t / roof, rel=0.005, abs=0.01)
        assert float(row["default/best"]) > 0  # the rounds' paired ratios: test_the_cost_bench_pairs_each_round
        assert 0 < float(row["head_ms"]) and 0 < float(row["products_ms"])
        parts = [float(row[f"{part}_ms"]) for part in ("norms", "attention", "gelu")]
        assert all(t > 0 for t in parts)  # the rest of the forward, part by part; "other": what is left of it
        assert float(row["other_ms"]) == pytest.approx(float(row["rest_ms"]) - sum(parts), rel=0.01, abs=0.002)
    for model in (tiny_dirs["oracle"], tiny_dirs["draft"]):
        mine = [row for row in rows if row["model"] == model]
        best_one = min(float(mine[0][f"{way}_ms"]) for way in ("default", "numpy", "numpy-1"))
        for row in mine:  # the denominator of every ratio of speed: the best T(1) measured, not the path's own
            assert float(row["default/best_T1"]) == pytest.approx(float(row["default_ms"]) / best_one, rel=0.005, abs=0.01)
    md = (tmp_path / "out" / "cost.md").read_text()
    assert "python workbench.py bench cost" in md and measure.cpu_name() in md and "3 rounds" in md
    assert "memory bandwidth" in md and "GFLOP/s" in md and md.count("ridge at k = ") == 2 and "its plan" in md
    prose = " ".join(md.split())  # the header's prose is wrapped
    assert "each pair run back to back" in prose and re.search(r"found taken by another program \d+ times", prose)
    r = run_bench("cost", tiny_dirs["oracle"], "--ks", 0, "--out", tmp_path / "out")
    assert r.returncode != 0 and "Traceback" not in r.stderr and r.stderr.strip().splitlines()[-1].startswith("error:")


def test_the_rounds_bench_accounts_for_every_pass_from_prediction_to_measurement(demo_dirs, tmp_path):
    # python workbench.py bench rounds: the suite's prediction, then one assumption replaced at a time, down to the measured speedup
    models_dir = os.path.dirname(demo_dirs["draft"])
    r = run_bench("rounds", "--rounds", 1, "-n", 6, "--models-dir", models_dir, "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "out" / "rounds.json").read_text())
    steps = {row["step"].split(" ", 1)[0]: row for row in result["rows"]}
    assert list(steps)[:5] == ["1.", "2.", "3.", "4.", "5."]
    assert float(steps["5."]["speedup"]) == round(result["facts"]["speedups_by_round"][0], 2) > 0
    for n in ("3.", "4.", "5."):  # the passes, then the prompts', then the wall: each side only grows
        assert float(steps[n]["greedy"]) > 0 and float(steps[n]["speculative"]) > 0
    assert float(steps["3."]["greedy"]) <= float(steps["4."]["greedy"]) <= float(steps["5."]["greedy"])
    assert "python workbench.py bench rounds" in (tmp_path / "out" / "rounds.md").read_text()


def test_before_after_takes_a_model_directory_and_other_ks(tiny_dirs, tmp_path):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench", "tools", "before_after.py"), ROOT, ROOT, "--models-dir",
                        tmp_path, "--rounds", "1", "--models", tiny_dirs["oracle"], "--ks", "1", "3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    name = os.path.basename(tiny_dirs["oracle"])
    assert [line.split()[0:2] for line in r.stdout.splitlines()[3:]] == [[name, "T(1)"], [name, "T(3)/T(1)"], [name, "ms"]]
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench", "tools", "before_after.py"), ROOT, ROOT, "--models-dir",
                        tmp_path, "--models", "gpt5"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "gpt5" in r.stderr
