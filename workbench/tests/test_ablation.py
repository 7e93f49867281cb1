"""python workbench.py bench ablation: the project documentation's set, then every other method of the registry, one
row each, a CSV."""

import csv
import os
import subprocess
import sys

from fixtures import ROOT
from workbench import methods

DOCUMENTED = ["greedy", "draft-alone", "speculative", "adaptive", "adaptive-hf", "threshold", "tree", "staged", "ngram",
              "sample", "sps"]  # the project documentation's set (docs/sources.md), in its order
METHODS = DOCUMENTED + [name for name in methods.METHODS if name not in DOCUMENTED]  # then the registry's others


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "bench", "ablation", *map(str, args)], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


def test_the_ablations_on_the_demo_pair_write_their_csv(demo_dirs, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The meaning of life is\nOnce upon a time\\nthere was\n", encoding="utf-8")
    out = tmp_path / "ablation.csv"
    r = run("--draft", demo_dirs["draft"], "--oracle", demo_dirs["oracle"], "--prompts", prompts, "-n", 12, "--out", out)
    assert r.returncode == 0, r.stderr
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [row["method"] for row in rows] == METHODS
    assert all(int(row["tokens"]) == 2 * 12 for row in rows)  # two prompts, exactly -n tokens each
    greedy = [row for row in rows if not row["matches_greedy"].startswith("n/a")]
    assert {row["method"] for row in greedy} == {m.name for m in methods.METHODS.values() if m.exact}
    assert all(row["matches_greedy"] == "yes" for row in greedy)  # every greedy method gave the oracle's text
    assert all(float(row["speedup"]) > 0 for row in rows)
    assert float(next(r for r in rows if r["method"] == "speculative")["acceptance"]) > 0.3
    assert "speculative" in r.stdout and "tokens_per_pass" in r.stdout  # the table on screen


def test_bad_input_is_one_line(tmp_path, tiny_dirs):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    gap = tmp_path / "gap.txt"
    gap.write_text("one\n\ntwo\n", encoding="utf-8")
    for args, fragment in [(["--prompts", empty], "no prompts"), (["--prompts", gap], "line 2 is empty"),
                           (["--prompts", tmp_path / "missing.txt"], "missing.txt"),
                           (["-n", "0"], "--max-new-tokens"), (["--n-draft", "0"], "--n-draft")]:
        r = run("--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"], *args)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith("error:") and fragment in r.stderr, r.stderr


def test_an_unwritable_out_or_prompts_file_is_refused_before_the_run(tmp_path, tiny_dirs):
    latin1 = tmp_path / "prompts.txt"
    latin1.write_bytes(b"caf\xe9\n")
    for args, fragment in [(["--out", tmp_path / "missing" / "a.csv"], "does not exist"), (["--out", tmp_path], "is a directory"),
                           (["--prompts", latin1], "not UTF-8")]:
        r = run("--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"], *args)
        assert r.returncode != 0 and "Traceback" not in r.stderr and fragment in r.stderr, r.stderr
        assert "loaded" not in r.stderr or fragment == "not UTF-8"  # the --out checks come before any model is loaded
