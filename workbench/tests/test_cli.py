"""`python workbench.py "prompt"` end to end on tiny models and the tiny tokenizer, every method and flag, and its
error paths. The method lists are the registry's (workbench/methods/)."""

import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from fixtures import ROOT, held_out, make_model_dir
from weights.tokenizer import encode, load_tokenizer
from workbench import methods
from workbench.display import stream
from workbench.settings import Settings

NO_HEAD = [m for m in methods.METHODS.values() if m.head is None and m.draft_head is None]  # tiny models have no heads
SAMPLING = [m.name for m in methods.METHODS.values() if m.samples]


def run(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), *args], capture_output=True, text=True,
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


def compared(m, stderr):
    """--compare's line for method m, and what it must say: what was compared, and for a text that must be the
    oracle's, that it is; no speedup for a text that is not the oracle's by design (the draft alone)."""
    [line] = [line for line in stderr.splitlines() if line.startswith("oracle alone (")]
    assert line.startswith(f"oracle alone ({m.baseline}"), line
    if m.draft_writes:
        assert f"{m.name} writes the draft's own text, not the oracle's: no speedup to compare" in line, line
        assert not re.search(r"speedup \d", line), line
        return line
    assert re.search(r"; speedup \d+\.\d\dx", line), line
    if m.exact:
        assert line.endswith("; identical output"), line
    elif m.samples:
        assert line.endswith("; sampled: each text is a draw from the oracle's distribution, so the two differ"), line
    else:
        assert f"; {m.name}'s text need not be greedy decoding's (" in line, line
    return line


@pytest.mark.parametrize("method", [m.name for m in NO_HEAD])
def test_each_method_runs_and_reports(pair, method):
    m = methods.get(method)
    r = run("the cat and", *pair, "--method", method, "-n", "12", "--compare")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("the cat and")
    assert "\x1b[" not in r.stdout  # piped: plain text
    assert f"{method}: 12 new tokens" in r.stderr and "tokens/s" in r.stderr
    if m.draft_model and m.verifies:
        assert "acceptance" in r.stderr
    summary = next(line for line in r.stderr.splitlines() if line.startswith(f"{method}: 12 new tokens"))
    assert re.search(r"\d+ rounds, \d+ oracle passes, \d+\.\d\d tokens per round" if m.verifies else
                     r"; \d+ forward passes$", summary), summary
    compared(m, r.stderr)


@pytest.mark.parametrize("method", [m.name for m in methods.METHODS.values() if m.head is not None])
def test_each_method_that_drafts_with_a_trained_head_needs_it(pair, method):
    head = methods.get(method).head
    assert_one_line_error(run("the cat", *pair, "--method", method, "-n", "4"), f"has no {head} head (heads/{head})",
                          "python demo.py writes the learned pair's")


def test_sps_at_temperature_0_is_compared_with_greedy_and_must_equal_it(pair):
    r = run("the cat and", *pair, "--method", "sps", "--temperature", "0", "-n", "16", "--compare")
    assert r.returncode == 0, r.stderr
    assert "oracle alone (greedy)" in r.stderr and "identical output" in r.stderr


def test_greedy_methods_print_the_oracles_greedy_text(pair):
    greedy = [m.name for m in NO_HEAD if m.exact]
    texts = {m: run("the cat the cat", *pair, "--method", m, "-n", "15").stdout for m in greedy}
    assert len(set(texts.values())) == 1 and len(texts) > 10, texts


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


VERIFYING = [m.name for m in NO_HEAD if m.verifies]


@pytest.mark.parametrize("method", VERIFYING)
def test_trace_works_for_every_method_that_verifies_rounds(pair, method):
    r = run("the cat the cat the", *pair, "--method", method, "-n", "12", "--trace")
    assert r.returncode == 0, r.stderr
    rounds = int(re.search(r"(\d+) rounds, \d+ oracle passes", r.stderr).group(1))
    assert r.stderr.count("\nround ") == rounds  # one block per round
    assert "caches" in r.stderr
    if method == "sps":  # Chen et al.'s letters: p the draft, q the target
        assert "p(x)" in r.stderr and "q(x)" in r.stderr and " r " in r.stderr
        assert ("-> accept" in r.stderr or "-> REJECT" in r.stderr) and ("resample" in r.stderr or "bonus" in r.stderr)
    if method == "tree":
        assert "accepted path" in r.stderr
    if method == "threshold":
        assert ", threshold 0.4" in r.stderr  # the threshold the first round drafted with


@pytest.mark.parametrize("method", VERIFYING)
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
    (["--temperature", "0.5"], f"--temperature applies to --method {', '.join(SAMPLING[:-1])} or {SAMPLING[-1]}, "
                               "not speculative"),
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
    # Two byte tokens swapped: the same size, another vocabulary. The draft crosses by text (crossvocab.py), and
    # the text is still the oracle's greedy text; a method that checks drafts by id refuses it in one line.
    other = make_model_dir(tmp_path / "other")
    with open(os.path.join(other, "vocab.json")) as f:
        vocab = json.load(f)
    vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
    with open(os.path.join(other, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    greedy = run("the cat", "--oracle", tiny_dirs["oracle"], "--method", "greedy", "-n", "12")
    r = run("the cat", "--draft", other, "--oracle", tiny_dirs["oracle"], "-n", "12", "--trace")
    assert r.returncode == 0 and r.stdout == greedy.stdout, r.stderr
    assert "as text" in r.stderr  # the rounds across vocabularies
    assert_one_line_error(run("hi", "--draft", other, "--oracle", tiny_dirs["oracle"], "--method", "tree"),
                          "--method tree needs a draft with the oracle's vocabulary")


def test_tokenizer_files_that_differ_but_spell_the_same_tokens_are_one_vocabulary(tmp_path, tiny_dirs):
    # merges.txt without its #version line: other bytes, the same tokenizer; the pair shares it, every method runs.
    same = tmp_path / "same"
    shutil.copytree(tiny_dirs["related"], same)
    lines = (same / "merges.txt").read_text().splitlines()
    (same / "merges.txt").write_text("\n".join(lines[1:]) + "\n")
    r = run("the cat", "--draft", str(same), "--oracle", tiny_dirs["oracle"], "--method", "tree", "-n", "8", "--trace")
    assert r.returncode == 0 and "accepted path" in r.stderr and "as text" not in r.stderr, r.stderr


# --- a draft with a vocabulary of its own: crossvocab.py through the command line ----------------------------

def accepted(stderr):
    """The drafts accepted, from the statistics line: "acceptance 61.5% (8/13 drafts)"."""
    return int(re.search(r"acceptance [\d.]+% \((\d+)/\d+ drafts\)", stderr).group(1))


def test_a_draft_of_another_vocabulary_gives_the_oracles_greedy_text(tiny_dirs, other_vocabulary):
    prompt = "the cat and the café"
    greedy = run(prompt, "--oracle", tiny_dirs["oracle"], "--method", "greedy", "-n", "30")
    r = run(prompt, "--draft", other_vocabulary, "--oracle", tiny_dirs["oracle"], "-n", "30", "--compare")
    assert r.returncode == 0 and r.stdout == greedy.stdout, r.stderr
    assert accepted(r.stderr) > 0 and "identical output" in r.stderr


def test_sps_with_a_draft_of_another_vocabulary_samples(tiny_dirs, other_vocabulary):
    pair = ["--draft", other_vocabulary, "--oracle", tiny_dirs["oracle"], "--method", "sps", "-n", "20"]
    a, b, c = (run("the cat", *pair, "--seed", seed) for seed in ("3", "3", "4"))
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout != c.stdout, a.stderr
    assert "sps: 20 new tokens" in a.stderr and accepted(a.stderr) > 0
    zero = run("the cat", *pair, "--temperature", "0", "--compare")  # temperature 0 is greedy decoding
    assert zero.returncode == 0 and "oracle alone (greedy)" in zero.stderr and "identical output" in zero.stderr


REFUSING = [m.name for m in methods.METHODS.values() if m.draft_model and methods.variant(m, True) is None]


@pytest.mark.parametrize("method", REFUSING)
def test_every_other_method_that_takes_a_draft_refuses_one_of_another_vocabulary(tiny_dirs, other_vocabulary, method):
    r = run("the cat", "--draft", other_vocabulary, "--oracle", tiny_dirs["oracle"], "--method", method, "-n", "4")
    assert_one_line_error(r, f"--method {method} needs a draft with the oracle's vocabulary", "has its own",
                          "use --method speculative or --method sps")
    assert r.stdout == ""


def test_the_refusing_methods_are_the_greedy_and_sampling_ones_crossvocab_does_not_run():
    assert {"speculative", "sps", "draft-alone"}.isdisjoint(REFUSING) and {"tree", "threshold", "staged"} <= set(REFUSING)


def test_the_draft_alone_writes_in_its_own_tokens(tiny_dirs, other_vocabulary):
    from speculative import greedy_generate
    from workbench.speed.accelerate import load_fast
    enc = load_tokenizer(other_vocabulary)
    expected = b"".join(enc.decode_single_token_bytes(t) for t in
                        greedy_generate(load_fast(other_vocabulary), encode(enc, "the cat"), 10)).decode("utf-8", "replace")
    r = run("the cat", "--draft", other_vocabulary, "--oracle", tiny_dirs["oracle"], "--method", "draft-alone", "-n", "10",
            "--compare")
    assert r.returncode == 0 and r.stdout == "the cat" + expected + "\n", r.stderr
    assert "draft-alone: 10 new tokens" in r.stderr and "oracle alone (greedy): 10 tokens" in r.stderr
    compared(methods.get("draft-alone"), r.stderr)  # the draft's own text: no speedup presented as one


def test_a_page_and_a_trace_of_a_run_across_vocabularies(tiny_dirs, other_vocabulary, tmp_path):
    for method in ("speculative", "sps"):
        page = tmp_path / f"{method}.html"
        r = run("the cat", "--draft", other_vocabulary, "--oracle", tiny_dirs["oracle"], "--method", method, "-n", "12",
                "--trace", "--html", str(page))
        assert r.returncode == 0 and f"wrote {page}" in r.stderr, r.stderr
        passes = int(r.stderr.split(" oracle passes")[0].rsplit(" ", 1)[-1])
        assert r.stderr.count("\nround ") == r.stderr.count("\n  as text  ") == passes
        assert ("\n  x~1 " in r.stderr) == (method == "sps")  # each test's p', q and r
        html = page.read_text(encoding="utf-8")
        assert "The draft wrote, in its own vocabulary" in html and "a vocabulary of its own: " in html


def test_prompts_refuse_a_draft_of_another_vocabulary(tiny_dirs, other_vocabulary, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\n")
    r = run("--prompts", str(prompts), "--draft", other_vocabulary, "--oracle", tiny_dirs["oracle"])
    assert_one_line_error(r, "has a vocabulary of its own", "compares drafts with the oracle's tokens by id")


def broken_copy(other_vocabulary, path, how):
    """The draft of another vocabulary with its tokenizer files missing, one token short of its config, or without a
    token for the byte "!" (every id after it one lower, so that only the byte is missing)."""
    shutil.copytree(other_vocabulary, path)
    if how == "missing":
        os.remove(path / "vocab.json")
        os.remove(path / "merges.txt")
    elif how == "short":
        from fixtures import write_bpe
        from test_crossvocab import OTHER_MERGES
        write_bpe(path, OTHER_MERGES[:-1])
    else:
        vocab = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
        gone = vocab.pop("!")
        (path / "vocab.json").write_text(json.dumps({t: i - (i > gone) for t, i in vocab.items()}), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("how, fragments", [
    ("missing", ["has a vocabulary of", "has no vocab.json and merges.txt of its own"]),
    ("short", ["vocab.json has", "says vocab_size", "the tokenizer is not this model's"]),
    ("no byte", ["no token for the byte written '!'", "every byte needs one"]),
])
def test_a_draft_whose_tokenizer_is_missing_or_wrong_is_one_line(tiny_dirs, other_vocabulary, tmp_path, how, fragments):
    bad = broken_copy(other_vocabulary, tmp_path / "bad", how)
    r = run("the cat", "--draft", bad, "--oracle", tiny_dirs["oracle"], "-n", "4")
    assert_one_line_error(r, *fragments)
    assert r.stdout == ""


# --- the learned pair and demo-draft-4k -----------------------------------------------------------------------

def greedy_text(oracle, enc, prompt, n):
    from speculative import greedy_generate
    tokens = greedy_generate(oracle, encode(enc, prompt), n)
    return prompt + b"".join(enc.decode_single_token_bytes(t) for t in tokens).decode("utf-8", "replace") + "\n"


@pytest.fixture(scope="module")
def learned(demo_dirs):
    from workbench.speed.accelerate import load_fast
    return ["--models-dir", os.path.dirname(demo_dirs["oracle"])], load_fast(demo_dirs["oracle"]), \
        load_tokenizer(demo_dirs["oracle"])


def test_demo_draft_4k_gives_the_oracles_greedy_text_with_drafts_accepted(learned):
    models, oracle, enc = learned
    prompt = held_out()[0][1][:200]
    r = run(prompt, "--draft", "demo-draft-4k", "--oracle", "demo-oracle", *models, "-n", "48")
    assert r.returncode == 0 and r.stdout == greedy_text(oracle, enc, prompt, 48), r.stderr
    assert accepted(r.stderr) > 10


@pytest.mark.slow
def test_demo_draft_4k_on_held_out_prompts_of_every_kind(learned):
    # Two prompts of each kind, the runs of the command line in one process (runner.prepare and runner.run: cli.main's
    # route), each text the oracle's greedy text, with drafts accepted on every kind; then sps samples.
    from workbench import runner
    models, oracle, enc = learned
    names = {"draft": "demo-draft-4k", "oracle": "demo-oracle"}
    load = functools.lru_cache(maxsize=None)(lambda role: runner.load_model(names[role], models[1], log=io.StringIO()))
    for kind, prompt in held_out(n_per_kind=2):
        loaded = runner.prepare(load, "speculative", prompt, 64, names)
        out = io.StringIO()
        result = runner.run(Settings(max_new_tokens=64), loaded, prompt, runner.View(out, io.StringIO()))
        assert out.getvalue() == greedy_text(oracle, enc, prompt, 64), kind
        assert result.stats.accepted > 0, kind
    r = run(held_out()[0][1], "--draft", "demo-draft-4k", "--oracle", "demo-oracle", *models, "--method", "sps",
            "--seed", "1", "-n", "32")
    assert r.returncode == 0 and "sps: 32 new tokens" in r.stderr and accepted(r.stderr) > 0, r.stderr


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
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), b"caf\xe9".decode("utf-8", "surrogateescape"), *pair],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "LC_ALL": "C"})
    assert_one_line_error(r, "not valid UTF-8")


def test_piped_output_is_utf8_whatever_the_locale(tiny_dirs):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "中文 🙂", "--draft", tiny_dirs["oracle"],
                        "--oracle", tiny_dirs["oracle"], "-n", "6"], capture_output=True, timeout=120,
                       env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8").startswith("中文 🙂")


def test_help_explains_methods():
    r = run("--help")
    assert r.returncode == 0
    for word in ("--compare", "--n-draft", "NO_COLOR", *(f"  {m.name} " for m in methods.METHODS.values())):
        assert word in r.stdout, word  # every method of the registry, each on a line of its own


@pytest.mark.parametrize("delay", [0.5, 0.8, 1.1, 1.4])
def test_ctrl_c_while_starting_is_one_line(pair, delay):
    # Whenever it lands (loading the command line, the models, or generating): one line, exit 130.
    import signal
    import time
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "workbench.py"), "the cat", *pair, "-n", "40"],
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
    from workbench import cli, system
    monkeypatch.setattr(system, "memory_budget", lambda: 1000)
    with pytest.raises(beam.GenerationError, match="200 beams of 6 tokens need about .* GB, more than the"):
        cli.main(["hi", *pair, "--method", "beam", "--n-beams", "200", "-n", "4"])
    assert capsys.readouterr().out == ""  # refused before the prompt is printed


def test_the_session_through_a_pipe_under_an_ascii_locale(pair):
    # A Windows pipe or a C locale: the session's output is UTF-8, and an undecodable line is one line.
    lines = "/length 4\n中文 🙂\n".encode("utf-8") + b"caf\xe9\n/quit\n"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "-i", *pair], input=lines,
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
