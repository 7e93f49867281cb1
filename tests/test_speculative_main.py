"""`python speculative.py "prompt"`: the reading path's own short main, on the plain models. Its text is the oracle's
greedy text, its --trace each round's drafts, the oracle's choices and what was kept, its statistics one line; its
flags are the reading path's only (every other method and flag: python workbench.py, workbench/tests/test_cli.py);
and every error a user can cause is one line on stderr, through errors.run."""

import os
import re
import subprocess
import sys

import pytest

from fixtures import ROOT, make_model_dir
from gpt2 import GPT2
from speculative import greedy_generate
from weights.tokenizer import encode, load_tokenizer


def run(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return ["--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"]]


def one_line_error(r, *fragments, code):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and "Traceback" not in r.stderr, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert all(fragment in lines[0] for fragment in fragments), lines[0]


def greedy_text(model_dir, prompt, n):
    enc, oracle = load_tokenizer(model_dir), GPT2.from_pretrained(model_dir)
    tokens = greedy_generate(oracle, encode(enc, prompt), n)
    return prompt + b"".join(enc.decode_single_token_bytes(t) for t in tokens).decode("utf-8", "replace") + "\n"


def test_the_text_is_the_oracles_greedy_text(pair, tiny_dirs):
    for n_draft in (1, 4):
        r = run("the cat and the", *pair, "-n", 20, "--n-draft", n_draft)
        assert r.returncode == 0, r.stderr
        assert r.stdout == greedy_text(tiny_dirs["oracle"], "the cat and the", 20)
        assert "\x1b[" not in r.stdout  # piped: no colour
        [summary] = r.stderr.strip().splitlines()
        assert re.fullmatch(r"speculative: 20 new tokens in [\d.]+ s, [\d.]+ tokens/s; \d+ oracle passes, [\d.]+ tokens per "
                            r"round; acceptance [\d.]+% \(\d+/\d+ drafts\)", summary), summary


def test_the_trace_shows_each_round_from_its_record(pair):
    r = run("the cat", *pair, "-n", 12, "--n-draft", 3, "--trace")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    rounds = [line for line in lines if line.startswith("round ")]
    kept = [int(m.group(1)) for line in lines for m in [re.match(r"  kept     (\d+) draft\(s\) \+ .* from the oracle$", line)] if m]
    accepted = int(re.search(r"\((\d+)/\d+ drafts\)", lines[-1]).group(1))
    assert rounds and len(kept) == len(rounds) and sum(kept) == accepted
    assert sum(line.startswith("  drafted  ") for line in lines) == sum(line.startswith("  oracle   ") for line in lines) \
        == len(rounds)
    contexts = [int(re.match(r"round \d+: context (\d+) tokens", line).group(1)) for line in rounds]
    assert contexts == sorted(contexts) and len(set(contexts)) == len(contexts)  # one round after another
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", r.stderr)  # a token's control characters shown escaped


@pytest.mark.parametrize("args, fragments", [
    (["--method", "sps"], ["unrecognized arguments: --method sps", "speculative.py --help"]),
    (["--plain"], ["unrecognized arguments: --plain"]),
    (["-n", "x"], ["argument -n: invalid int value: 'x'"]),
])
def test_a_flag_it_does_not_take_is_one_line(pair, args, fragments):
    one_line_error(run("hi", *pair, *args), *fragments, code=2)


@pytest.mark.parametrize("args, fragment", [
    (["--n-draft", "0"], "n_draft must be at least 1"),
    (["-n", "-1"], "cannot generate -1 tokens"),
    (["-n", "1000"], "does not fit the context window of 128 tokens"),
])
def test_a_setting_the_decoder_refuses_is_one_line(pair, args, fragment):
    one_line_error(run("hi", *pair, *args), fragment, code=1)


def test_a_refused_setting_starts_its_line_afresh(pair):
    r = run("hi", *pair, "--n-draft", "0")
    assert r.stdout == "" or r.stdout.endswith("\n"), repr(r.stdout)


def test_a_model_that_cannot_be_used_is_one_line(pair, tiny_dirs, tmp_path):
    other = make_model_dir(tmp_path / "other", vocab_size=300, tokenizer=False)
    one_line_error(run("hi", "--draft", other, "--oracle", tiny_dirs["oracle"]), "vocabulary (300 tokens)", code=1)
    one_line_error(run("hi", "--draft", "gpt-9", "--oracle", tiny_dirs["oracle"]), "unknown model 'gpt-9'", code=1)
    one_line_error(run("hi", "--draft", tmp_path / "nowhere", "--oracle", tiny_dirs["oracle"]), "nowhere", code=1)
