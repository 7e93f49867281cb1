"""The offline demo pair: the oracle contains the draft, and its own blocks make them disagree sometimes."""

import hashlib
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from decoding import Stats
from speculative import greedy_generate, speculative_generate
from speed.accelerate import load_fast
from weights import demo_pair as demo
from weights.tokenizer import encode, load_tokenizer


@pytest.fixture
def small_demo(monkeypatch, tmp_path):
    """The demo's construction at a small size (same code, smaller shapes)."""
    monkeypatch.setattr(demo, "VOCAB", 300)
    monkeypatch.setattr(demo, "WINDOW", 64)
    monkeypatch.setattr(demo, "DRAFT", {"n_layer": 2, "n_head": 2, "n_embd": 128})
    monkeypatch.setattr(demo, "ORACLE", {"n_layer": 4, "n_head": 8, "n_embd": 512})

    def build(perturbation):
        monkeypatch.setattr(demo, "PERTURBATION", perturbation)
        base = tmp_path / f"p{perturbation}"
        return [load_fast(d) for d in demo.build_pair(str(base))]
    return build


def test_without_perturbation_the_oracle_computes_exactly_the_draft(small_demo):
    draft, oracle = small_demo(0.0)
    ids = np.random.default_rng(0).integers(0, 300, 40)
    np.testing.assert_allclose(oracle.forward(ids), draft.forward(ids), rtol=1e-4, atol=1e-4)


def test_the_perturbation_makes_them_disagree_sometimes(small_demo):
    draft, oracle = small_demo(demo.PERTURBATION)
    same = [list(greedy_generate(oracle, ids, 40)) == list(greedy_generate(draft, ids, 40))
            for ids in (np.random.default_rng(seed).integers(0, 300, 8).tolist() for seed in range(6))]
    assert any(same) and not all(same)


def test_the_demo_pair_is_realistic(demo_dirs):
    # The README's session: the draft costs a small fraction of the oracle (c <= 0.15, here by the
    # bytes each streams per token) and agrees with it a realistic share of the time.
    draft, oracle = (load_fast(demo_dirs[k]) for k in ("draft", "oracle"))
    size = {k: os.path.getsize(os.path.join(demo_dirs[k], "model.safetensors")) for k in demo_dirs}
    assert size["draft"] / size["oracle"] < 0.1
    enc = load_tokenizer(demo_dirs["draft"])
    stats = Stats()
    for text in ("The meaning of life is", "Once upon a time", "def fibonacci(n):"):
        ids = encode(enc, text)
        assert list(speculative_generate(draft, oracle, ids, 40, n_draft=4, stats=stats)) == list(greedy_generate(oracle, ids, 40))
    assert 0.5 <= stats.acceptance_rate <= 0.8, stats.acceptance_rate


def test_the_construction_is_seeded(small_demo, monkeypatch, tmp_path):
    # Every build writes byte-identical files, so the README's session and READING.md's trace hold.
    first = demo.build_pair(str(tmp_path / "a"))
    second = demo.build_pair(str(tmp_path / "b"))
    for a, b in zip(first, second):
        for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt"):
            digests = [hashlib.sha256(open(os.path.join(d, name), "rb").read()).hexdigest() for d in (a, b)]
            assert digests[0] == digests[1], name


def test_demo_names_resolve_and_build_on_first_use(tmp_path, monkeypatch):
    from weights import models
    built = []
    monkeypatch.setattr(demo, "build_pair", lambda d: built.append(d) or (d + "/demo-draft", d + "/demo-oracle"))
    assert models.resolve_model_dir("demo-oracle", str(tmp_path)) == str(tmp_path) + "/demo-oracle"
    assert built == [str(tmp_path)]


def readme_block(starting):
    """The README's code block whose first line is `starting`, as a list of lines."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    for block in text.split("```")[1::2]:
        lines = block.split("\n")[1:]  # after the opening fence's language tag
        if lines and lines[0] == starting:
            return lines
    raise AssertionError(f"README.md has no code block starting with {starting!r}")


def without_timings(line):
    return re.sub(r" in [\d.]+ s, [\d.]+ tokens/s|; time in draft .*|; speedup [\d.]+x", "", line)


def test_the_readme_demo_session_is_what_the_demo_prints(demo_dirs):
    # The README's `python demo.py` session, word for word but for the timings.
    lines = readme_block("$ python demo.py")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), "The meaning of life is",
                          "--draft", demo_dirs["draft"], "--oracle", demo_dirs["oracle"], "-n", "48", "-K", "4",
                          "--compare"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = next(line for line in lines if line.startswith("The meaning of life is"))
    assert out.stdout.rstrip("\n") == text
    stats = [without_timings(line) for line in out.stderr.splitlines() if line.startswith(("speculative:", "oracle alone"))]
    assert stats == [without_timings(line) for line in lines if line.startswith(("speculative:", "oracle alone"))]


def test_the_readme_workbench_session_is_what_the_workbench_prints(demo_dirs):
    # The README's short session: the lines typed after "> " go in; every reply but the
    # timings and the loading lines comes out as shown (sampling is seeded with /seed).
    lines = readme_block("$ python speculative.py -i --draft demo-draft --oracle demo-oracle")
    typed = [line[2:] for line in lines if line.startswith("> ")]
    out = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), "-i", "--draft", "demo-draft",
                          "--oracle", "demo-oracle", "--models-dir", os.path.dirname(demo_dirs["draft"])],
                         input="\n".join(typed) + "\n", capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr

    def replies(text_lines):
        return [without_timings(line) for line in text_lines
                if line and not line.startswith(("loaded ", "$ ")) and line not in typed]
    # Through a pipe the typed lines are not echoed: each prompt "> " is followed by the reply.
    got = [line.removeprefix("> ") for line in (out.stdout + out.stderr).replace("> ", "\n").splitlines()]
    shown = [line for line in lines if not line.startswith("> ")]
    assert sorted(replies(got)) == sorted(replies(shown))
