"""`python speculative.py "prompt"` end to end on tiny models and the tiny tokenizer, and its error paths."""

import io
import os
import subprocess
import sys

import pytest

from conftest import ROOT, make_model_dir
from app.display import stream
from weights.tokenizer import encode, load_tokenizer


def run(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return ["--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"]]


def assert_one_line_error(r, *fragments, code=None):
    assert r.returncode != 0 if code is None else r.returncode == code
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), r.stderr
    assert sum(line.startswith("error") for line in lines) == 1
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


@pytest.mark.parametrize("method", ["speculative", "threshold", "sps", "greedy", "sample", "tree", "ngram", "staged",
                                    "adaptive", "adaptive-hf", "beam", "draft-alone"])
def test_each_method_runs_and_reports(pair, method):
    r = run("the cat and", *pair, "--method", method, "-n", "12", "--compare")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("the cat and")
    assert "\x1b[" not in r.stdout  # piped: plain text
    assert f"{method}: 12 new tokens" in r.stderr and "tokens/s" in r.stderr and "speedup" in r.stderr
    if method in ("speculative", "threshold", "sps", "tree", "staged", "adaptive", "adaptive-hf"):
        assert "acceptance" in r.stderr
    if method not in ("sps", "sample", "draft-alone", "beam"):
        assert "identical output" in r.stderr


def test_sps_at_temperature_0_is_compared_with_greedy_and_must_equal_it(pair):
    r = run("the cat and", *pair, "--method", "sps", "--temperature", "0", "-n", "16", "--compare")
    assert r.returncode == 0, r.stderr
    assert "oracle alone (greedy)" in r.stderr and "identical output" in r.stderr


def test_greedy_methods_print_the_oracles_greedy_text(pair):
    methods = ("greedy", "speculative", "threshold", "tree", "ngram", "staged", "adaptive", "adaptive-hf")
    texts = {m: run("the cat the cat", *pair, "--method", m, "-n", "15").stdout for m in methods}
    assert len(set(texts.values())) == 1, texts


def test_seed_reproduces_sampling(pair):
    a, b = (run("a", *pair, "--method", "sps", "--seed", "3", "--temperature", "0.8", "--top-k", "20", "-n", "10") for _ in range(2))
    assert a.returncode == 0 and a.stdout == b.stdout


def test_color_marks_accepted_draft_tokens_and_no_color_is_honoured(tiny_dirs):
    same = ["--draft", tiny_dirs["oracle"], "--oracle", tiny_dirs["oracle"], "-n", "8"]
    colored = run("the", *same, "--color", "always")
    assert "\x1b[32m" in colored.stdout
    assert "\x1b[" not in run("the", *same, env={"NO_COLOR": "1"}).stdout
    ngram = run("the the the the", "--oracle", tiny_dirs["oracle"], "--method", "ngram", "-n", "8", "--color", "always")
    assert "green" in ngram.stderr  # the legend, whenever drafted tokens can be coloured


def test_empty_prompt_starts_from_endoftext(pair):
    r = run("", *pair, "-n", "5", "--trace")
    assert r.returncode == 0, r.stderr
    assert "prompt of 1 tokens" in r.stderr


def test_trace_shows_each_round(pair):
    r = run("the cat", *pair, "-n", "10", "--n-draft", "3", "--trace")
    assert r.returncode == 0
    assert "round 1:" in r.stderr and "drafted" in r.stderr and "kept" in r.stderr and "caches" in r.stderr


@pytest.mark.parametrize("method", ["speculative", "threshold", "sps", "tree", "ngram", "staged", "adaptive", "adaptive-hf"])
def test_trace_works_for_every_method_that_verifies_rounds(pair, method):
    r = run("the cat the cat the", *pair, "--method", method, "-n", "12", "--trace")
    assert r.returncode == 0, r.stderr
    passes = int(r.stderr.split(" oracle passes")[0].rsplit(" ", 1)[-1])
    assert r.stderr.count("\nround ") == passes  # one block per oracle pass
    assert "caches" in r.stderr
    if method == "sps":  # Chen et al.'s letters: p the draft, q the target
        assert "p(x)" in r.stderr and "q(x)" in r.stderr and " r " in r.stderr
        assert ("-> accept" in r.stderr or "-> REJECT" in r.stderr) and ("resample" in r.stderr or "bonus" in r.stderr)
    if method == "tree":
        assert "accepted path" in r.stderr
    if method == "threshold":
        assert ", threshold 0.4" in r.stderr  # the threshold the first round drafted with


@pytest.mark.parametrize("method", ["speculative", "sps", "tree", "ngram"])
def test_html_writes_the_page(pair, tmp_path, method):
    page = tmp_path / "run.html"
    r = run("the cat", *pair, "--method", method, "-n", "10", "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert f"wrote {page}" in r.stderr
    assert page.read_text(encoding="utf-8").count("<html") == 1


def test_beam_with_one_beam_is_greedy(pair):
    texts = [run("the cat", *pair, "--method", m, "-n", "10", *extra).stdout for m, extra in
             (("greedy", []), ("beam", ["--n-beams", "1"]))]
    assert texts[0] == texts[1]


def test_a_generated_escape_character_never_reaches_the_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True
    out = Terminal()
    stream(iter([0, 1]), {0: b"a\x1b[2J", 1: b"\tb\n"}.__getitem__, [False, False], False, out)
    assert out.getvalue() == "a\\x1b[2J\tb\n"


def test_trace_of_the_oracle_alone_is_refused(pair):
    assert_one_line_error(run("hi", *pair, "--method", "greedy", "--trace"), "has none", code=2)


def test_split_characters_are_never_printed_half(tiny_dirs):
    # With the tiny byte-level BPE, "中" and "🙂" are several tokens each.
    enc = load_tokenizer(tiny_dirs["oracle"])
    text = "中文 and 🙂 café"
    tokens = encode(enc, text)
    assert len(tokens) > len(text)
    out = io.StringIO()
    writes = []
    out.write = lambda s, w=out.write: (writes.append(s), w(s))[1]
    stream(iter(tokens), enc.decode_single_token_bytes, [False] * len(tokens), False, out)
    assert out.getvalue() == text
    assert "\ufffd" not in "".join(writes)


@pytest.mark.parametrize("args, fragment", [
    (["--n-draft", "0"], "--n-draft"),
    (["--n-draft", "x"], "a whole number from 1 to 128, not 'x'"), (["-K", "4"], "unrecognized arguments: -K"),
    (["--max-new-tokens", "-3"], "--max-new-tokens"),
    (["--top-p", "1.5"], "--top-p"),
    (["--method", "magic"], "invalid choice"),
    (["--temperature", "0.5"], "--temperature applies to --method sps, tree-sps, sample"),
    (["--bogus"], "unrecognized arguments"),
    (["--method", "sps", "--seed", "-1"], "--seed"),
    (["--method", "sps", "--temperature", "nan"], "a number from 0 to 1000, not 'nan'"),
    (["--method", "sps", "--temperature", "inf"], "a number from 0 to 1000, not 'inf'"),
])
def test_bad_options_are_one_line(pair, args, fragment):
    assert_one_line_error(run("hi", *pair, *args), fragment, code=2)


def test_missing_model_without_network(tmp_path):
    r = run("hi", "--oracle", "gpt2-medium", "--method", "greedy", "--models-dir", str(tmp_path),
            env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert_one_line_error(r, "cannot reach", "python demo.py", "HF_ENDPOINT", code=1)  # the offline demo, named


def test_unknown_model(pair):
    assert_one_line_error(run("hi", "--oracle", "gpt-9"), "unknown model 'gpt-9'")


def test_draft_and_oracle_with_different_vocabularies(tmp_path, tiny_dirs):
    other = make_model_dir(tmp_path / "other", vocab_size=300, tokenizer=False)
    r = run("hi", "--draft", other, "--oracle", tiny_dirs["oracle"])
    assert_one_line_error(r, "vocabulary")


def test_draft_and_oracle_with_different_tokenizer_files(tmp_path, tiny_dirs):
    other = make_model_dir(tmp_path / "other")
    with open(os.path.join(other, "merges.txt"), "a") as f:
        f.write("")  # same merges; now change the vocab's order of two byte tokens
    import json
    with open(os.path.join(other, "vocab.json")) as f:
        vocab = json.load(f)
    vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
    with open(os.path.join(other, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    assert_one_line_error(run("hi", "--draft", other, "--oracle", tiny_dirs["oracle"]), "different tokenizers")


def test_prompt_longer_than_the_window(pair):
    r = run("the cat " * 100, *pair, "-n", "5")
    assert_one_line_error(r, "does not fit the context window of 128")


def test_corrupt_checkpoint(tmp_path, tiny_dirs):
    bad = make_model_dir(tmp_path / "bad")
    with open(os.path.join(bad, "model.safetensors"), "r+b") as f:
        f.truncate(1000)
    assert_one_line_error(run("hi", "--draft", bad, "--oracle", tiny_dirs["oracle"]), "truncated")


def test_models_dir_that_is_a_file_is_one_line(tmp_path):
    not_a_dir = tmp_path / "models"
    not_a_dir.write_text("")
    r = run("hi", "--oracle", "gpt2-medium", "--method", "greedy", "--models-dir", str(not_a_dir),
            env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert_one_line_error(r, str(not_a_dir))


def test_prompt_bytes_that_are_not_utf8_are_one_line(pair):
    # Under a C locale Python hands undecodable argv bytes over as lone surrogates.
    r = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), b"caf\xe9".decode("utf-8", "surrogateescape"), *pair],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "LC_ALL": "C"})
    assert_one_line_error(r, "not valid UTF-8")


def test_piped_output_is_utf8_whatever_the_locale(tiny_dirs):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), "中文 🙂", "--draft", tiny_dirs["oracle"],
                        "--oracle", tiny_dirs["oracle"], "-n", "6"], capture_output=True, timeout=120,
                       env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8").startswith("中文 🙂")


def test_help_explains_methods():
    r = run("--help")
    assert r.returncode == 0
    for word in ("speculative", "threshold", "sps", "--compare", "--n-draft", "NO_COLOR"):
        assert word in r.stdout


@pytest.mark.parametrize("delay", [0.5, 0.8, 1.1, 1.4])
def test_ctrl_c_while_starting_is_one_line(pair, delay):
    # Whenever it lands (loading the command line, the models, or generating): one line, exit 130.
    import signal
    import time
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "speculative.py"), "the cat", *pair, "-n", "40"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert p.returncode == 0 or (p.returncode == 130 and err.strip().splitlines()[-1] == "error: interrupted"), (p.returncode, err)


def test_html_into_a_missing_directory_is_refused_before_the_run(pair, tmp_path):
    assert_one_line_error(run("hi", *pair, "--html", str(tmp_path / "nowhere" / "run.html")), "does not exist", code=2)
    assert_one_line_error(run("hi", *pair, "--html", str(tmp_path)), "is a directory", code=2)


def test_a_tokenizer_that_is_not_the_models_is_one_line(tmp_path, tiny_dirs):
    # A model whose vocabulary is smaller than its tokenizer's: refused at load, not a KeyError mid-output.
    small = make_model_dir(tmp_path / "small", vocab_size=200)
    r = run("the cat", "--draft", small, "--oracle", small, "-n", "4")
    assert_one_line_error(r, "vocab_size 200")


def test_flags_for_other_methods_and_empty_html_are_refused(pair):
    assert_one_line_error(run("hi", *pair, "--n-beams", "3"), "--n-beams applies to --method beam", code=2)
    assert_one_line_error(run("hi", *pair, "--draft-layers", "1"), "--draft-layers applies to --method self-speculative",
                          code=2)
    assert_one_line_error(run("hi", *pair, "--html", ""), "needs a file name", code=2)


def test_too_many_beams_for_memory_is_one_line(pair, monkeypatch, capsys):
    # --n-beams is bounded (256); within the bound, a search that does not fit is refused before any output.
    assert_one_line_error(run("hi", *pair, "--method", "beam", "--n-beams", "100000000", "-n", "4"), "from 1 to 256", code=2)
    import beam
    monkeypatch.setattr(beam, "memory_budget", lambda: 1000)
    from app import cli
    with pytest.raises(beam.GenerationError, match="200 beams of 6 tokens need about .* GB, more than the"):
        cli.main(["hi", *pair, "--method", "beam", "--n-beams", "200", "-n", "4"])
    assert capsys.readouterr().out == ""  # refused before the prompt is printed


def test_the_session_through_a_pipe_under_an_ascii_locale(pair):
    # A Windows pipe or a C locale: the session's output is UTF-8, and an undecodable line is one line.
    lines = "/length 4\n中文 🙂\n".encode("utf-8") + b"caf\xe9\n/quit\n"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), "-i", *pair], input=lines,
                       capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii", "LC_ALL": "C"})
    out = r.stdout.decode("utf-8")
    assert r.returncode == 0 and "Traceback" not in r.stderr.decode("utf-8", "replace"), r.stderr
    assert "中文 🙂" in out and "speculative: 4 new tokens" in out and "error: the prompt is not valid UTF-8" in out


def test_a_session_cannot_start_with_a_sampling_processor_on_a_greedy_method(pair):
    # The session refuses /speculative at temperature 0.8 (runner.check_sampling); so it cannot start that way either.
    r = run("-i", *pair, "--temperature", "0.8")
    assert_one_line_error(r, "applies to --method sps", "not speculative", code=2)
    r = run("-i", *pair, "--top-k", "5", "--method", "threshold")
    assert_one_line_error(r, "topk 5, temperature 1.0", "not threshold", code=2)
