"""bench.py end to end on tiny models, and the pieces its figures rest on.

No timing is asserted here (speed goals live in bench.py itself): these tests
check that the benchmark runs, writes what it says, and computes its
predictions and its synthetic draft correctly.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT
import bench
import matmul
from kvcache import KVCache
from speculative import greedy_generate, speculative_generate


def run_bench(*args, timeout=300):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def tiny_models(tiny_dirs, base):
    """base/models with tiny models standing in as real gpt2 and gpt2-xl."""
    shutil.copytree(tiny_dirs["related"], base / "models" / "gpt2")
    shutil.copytree(tiny_dirs["oracle"], base / "models" / "gpt2-xl")
    return base / "models"


@pytest.fixture(scope="module")
def bench_run(tiny_dirs, tmp_path_factory):
    """`python bench.py --quick` on the tiny models."""
    base = tmp_path_factory.mktemp("bench")
    r = run_bench("--quick", "--models-dir", tiny_models(tiny_dirs, base), "--out", base / "out",
                  "--new-tokens", 8, "--context", 16)
    return r, base / "out"


def test_bench_runs_and_writes_its_files(bench_run):
    r, out = bench_run
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "differs from greedy" not in r.stderr  # greedy methods reproduced the oracle's tokens
    assert {"cost_curve.csv", "end_to_end.csv", "bench.json"} <= set(os.listdir(out))
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


def test_products_alone_are_the_products_of_a_single_token_forward(oracle, monkeypatch):
    # The same weights, in the same order, each multiplied by one row: so T(1)
    # minus their time is exactly the work between the products.
    seen = []
    real_product = matmul.product
    monkeypatch.setattr(matmul, "product", lambda x, w: seen.append((x.shape[0], id(w))) or real_product(x, w))
    cache = KVCache()
    oracle.forward([3, 1, 4], cache)
    seen.clear()
    oracle.forward([1], cache)
    in_forward = list(seen)
    seen.clear()
    bench.products_run(oracle)()
    assert seen == in_forward and len(seen) == 4 * oracle.n_layer + 1
    assert all(n_rows == 1 for n_rows, _ in seen)


@pytest.mark.parametrize("n_bytes", [10_000, 8_000, 1_000])
def test_bandwidth_probe_reads_as_many_bytes_as_asked(monkeypatch, n_bytes):
    # As many bytes as a model's weights, so that the probe lasts as long as the forward it bounds.
    read = []
    real_max = np.max
    monkeypatch.setattr(np, "max", lambda a: read.append(a.nbytes) or real_max(a))
    bench.stream(np.ones(1000, dtype=np.float32), n_bytes)()
    assert sum(read) == n_bytes


def test_best_seconds_takes_turns():
    # Each run once per round, so a probe and the forward beside it meet the same moments of the host.
    calls = []
    best = bench.best_seconds({"probe": lambda: calls.append("probe"), 1: lambda: calls.append(1)}, repeats=3)
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
    assert bench.predicted_speedup(0.0, 4, 0.1) == pytest.approx(1 / (4 * 0.1 + 1))  # nothing accepted: pure overhead
    assert bench.predicted_speedup(0.8, 0, 0.1) == pytest.approx(1.0)  # no drafts: plain decoding
    alpha, gamma, c = 0.8, 4, 0.05
    expected_tokens = sum(alpha ** i for i in range(gamma + 1))  # 1 + alpha + ... + alpha^gamma
    assert bench.predicted_speedup(alpha, gamma, c) == pytest.approx(expected_tokens / (gamma * c + 1))
    assert bench.predicted_speedup(alpha, gamma, c, verify_ratio=1.5) == pytest.approx(expected_tokens / (gamma * c + 1.5))


def test_synthetic_draft_is_calibrated_and_right_at_its_fixed_positions(oracle, draft):
    ids = [3, 1, 4, 1, 5]
    reference = ids + [int(t) for t in np.random.default_rng(0).integers(oracle.vocab_size, size=200)]
    synthetic = bench.SyntheticDraft(draft, reference, alpha=0.7, seed=1)
    assert 0.6 < synthetic.right.mean() < 0.8
    logits = synthetic.forward(np.array(reference[:100]), KVCache())
    probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    proposals = logits.argmax(axis=-1)
    assert np.allclose(probabilities[np.arange(100), proposals], 0.7, atol=1e-5)  # P(proposal) = alpha
    right = proposals == np.array(reference[1:101])
    assert np.array_equal(right, synthetic.right[1:101])  # right exactly where drawn, never by chance


def test_synthetic_draft_speculation_reproduces_the_reference(oracle, draft):
    ids = [3, 1, 4, 1, 5]
    reference = ids + [int(t) for t in greedy_generate(oracle, ids, 12)]
    out = list(speculative_generate(bench.SyntheticDraft(draft, reference, alpha=0.6), oracle, ids, 12, n_draft=3))
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

    monkeypatch.setattr(bench, "greedy_generate", greedy)
    rows = bench.end_to_end_synthetic(draft, oracle, "draft -> oracle", 8, [0.8], [2], 0.1, {k: 1.0 for k in range(1, 17)},
                                      lambda message: None, beyond_alphas=())
    assert len(calls) == 2 and rows[0]["method"] == "greedy (oracle alone)"
    base = rows[0]["seconds"]
    assert base < 1.0  # the undisturbed run
    assert all(r["speedup"] == round(base / r["seconds"], 2) for r in rows)


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
