"""Adding a method is its algorithm file and its family's file in workbench/methods/, and nothing else: every
program finds it there.

The toy method echo (tests/toy_method.py is its algorithm: the text's last tokens repeated as the draft) is
declared here in a toy family's file, written to a temporary directory and imported, which registers it, as a
new file in workbench/methods/ would be. Then, with no other edit, it is in --help with its option's flag, runs
from the command line with --trace, --html and --compare, runs in the session with its option's command, is a
row of the benchmarks' ablation and suite, and is drawn on the page by its own Shown. And workbench/methods/
imports every file of its folder: a family dropped in it is found with no other edit.
"""

import contextlib
import importlib
import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from decoding import GenerationError
from fixtures import ROOT
from processors import Processor
from speculative import greedy_generate
from stats import Stats
from weights.tokenizer import load_tokenizer
from workbench import cli, methods, runner, session
from workbench.bench import ablation, suite
from workbench.settings import Settings

TOY_FAMILY = '''
"""A toy family: echo, the text's last tokens repeated as the draft (tests/toy_method.py)."""

from toy_method import echo_generate
from workbench.registry import Method, Option, Shown, register

SPAN = Option("echo_span", int, 1, "echo: how many of the text's last tokens its draft repeats", 1, 8)


def run_echo(c):
    return echo_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, span=c.option("echo_span"), stats=c.stats)


def echo_reasons(r, show):
    return [f"echoed the text's last tokens: {show(r.drafted) or '(nothing)'}, {r.details.k} of n_draft {r.details.n_draft}"]


ECHO_HOW = "Each round the draft is the text's last tokens again; the oracle keeps them up to its first other choice."

register(Method("echo", "greedy, the text's last tokens repeated as the draft (tests/toy_method.py)", run_echo,
                draft_model=False, n_draft=3, options=(SPAN,), shown=Shown(reasons=echo_reasons, how_to_read=ECHO_HOW)))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy family's file, written and imported: its import registers echo. Afterwards echo is gone again."""
    (tmp_path / "toy_family.py").write_text(TOY_FAMILY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "echo" not in methods.METHODS
    family = importlib.import_module("toy_family")
    try:
        yield methods.get("echo")
    finally:
        del methods.METHODS["echo"]
        del sys.modules["toy_family"]
    assert family.SPAN not in methods.options()


def test_the_toy_is_in_the_help_with_its_options_flag(toy):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.parse_args(["--help"])
    said = " ".join(out.getvalue().split())
    assert "echo" in said and toy.summary in said
    assert "--echo-span" in said and "how many of the text's last tokens its draft repeats, a whole number from 1 to 8" \
                                     " (default: 1; echo)" in said


def test_the_toys_option_is_checked_and_is_its_own(toy, tiny_dirs, capsys):
    for args, said in ((["--method", "echo", "--echo-span", "0"], "argument --echo-span: a whole number from 1 to 8, not '0'"),
                       (["--echo-span", "2"], "--echo-span applies to --method echo, not speculative")):
        with pytest.raises(SystemExit) as e:
            cli.parse_args(["the cat", "--oracle", tiny_dirs["oracle"], *args])
        err = capsys.readouterr().err
        assert e.value.code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_the_toy_runs_from_the_command_line_with_trace_html_and_compare(toy, tiny_dirs, tmp_path, capsys):
    page = tmp_path / "echo.html"
    cli.main(["the cat the cat", "--method", "echo", "-n", "10", "--oracle", tiny_dirs["oracle"], "--echo-span", "2",
              "--trace", "--html", str(page), "--compare", "--color", "never"])
    out, err = capsys.readouterr()
    assert "echo: 10 new tokens" in err and "identical output" in err  # --compare: greedy decoding's text
    whys = [line for line in err.splitlines() if line.startswith("  why      ")]
    assert whys and all(line.startswith("  why      echoed the text's last tokens: ") for line in whys)
    assert err.count("\nround ") == len(whys)  # one "why" per round: the toy's own Shown
    html = page.read_text(encoding="utf-8")
    assert "<title>Speculative decoding: echo</title>" in html and "echo_span = 2" in html
    assert "last tokens again; the oracle keeps them" in html and "echoed the text&#x27;s last tokens" in html
    cli.main(["the cat the cat", "--method", "greedy", "-n", "10", "--oracle", tiny_dirs["oracle"], "--color", "never"])
    assert capsys.readouterr().out == out  # its text is the oracle's greedy text


def test_the_toy_runs_in_the_session_with_its_options_command(toy, tiny_dirs):
    out = io.StringIO()
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, Settings(processor=Processor(0.0)), out=out)
    for line in ("/method echo", "/echo_span 2", "/length 8", "/compare on", "the cat"):
        assert s.handle(line)
    said = out.getvalue()
    assert "method echo" in said and "echo: 8 new tokens" in said and "identical output" in said
    assert s.settings.options == {"echo_span": 2}
    s.handle("/echo_span 9")
    assert out.getvalue().splitlines()[-1] == "error: echo_span must be a whole number from 1 to 8, not '9'"
    assert s.settings.options == {"echo_span": 2}  # unchanged
    s.handle("/help")
    listed = out.getvalue().split("/method NAME", 1)[1]
    assert "echo" in listed.splitlines()[0] and "/echo_span N" in listed


def test_the_toy_is_a_row_of_the_ablation_and_of_the_suite(toy, draft, oracle, tiny_dirs):
    ids = np.random.default_rng(0).integers(0, oracle.vocab_size, 5).tolist()
    rows = ablation.run_ablations(draft, oracle, [ids], 8, progress=False)
    echo = next(r for r in rows if r["method"] == "echo")
    assert echo["matches_greedy"] == "yes" and echo["tokens"] == 8
    assert toy in suite.suite_methods()
    prompts = [{"prompt": "the cat the cat the cat", "kind": "repeat"}]
    rows, predictions, _ = suite.run_suite(draft, oracle, load_tokenizer(tiny_dirs["oracle"]), prompts, n_new=8, rounds=1,
                                           progress=False, names=["echo"])
    assert [(r["method"], r["kind"], r["output"]) for r in rows] == [("echo", "repeat", "identical")]
    assert [p["method"] for p in predictions] == ["echo"]


def test_the_toy_is_greedy_decoding_through_the_runner(toy, oracle):
    ids = np.random.default_rng(1).integers(0, oracle.vocab_size, 5).tolist()
    for span in (1, 3):
        settings = Settings(method="echo", max_new_tokens=12, options={"echo_span": span})
        stats = Stats(trace=[])
        assert list(runner.generator(settings, None, oracle, ids, stats)) == list(greedy_generate(oracle, ids, 12))
        assert stats.rounds == len(stats.trace) and all(r.details.n_draft == 3 for r in stats.trace)
    assert runner.describe_settings(Settings(method="echo", options={"echo_span": 2})) == {"n_draft": 3, "echo_span": 2}


def test_an_unknown_method_is_one_line():
    with pytest.raises(GenerationError, match="unknown method 'nope'; the methods are: speculative"):
        methods.get("nope")


# A copy of workbench/methods/ with the toy family's file dropped in beside the others, imported as the package
# itself in a process of its own: the package's __init__.py, unchanged, registers echo.
FOLDER = textwrap.dedent("""
    import importlib.util, os, shutil, sys, tempfile
    sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests")]
    folder = os.path.join(tempfile.mkdtemp(), "methods")
    shutil.copytree(os.path.join(sys.argv[1], "workbench", "methods"), folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(folder, "toy.py"), "w", encoding="utf-8") as f:
        f.write(sys.stdin.read())
    import workbench
    spec = importlib.util.spec_from_file_location("workbench.methods", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    package = importlib.util.module_from_spec(spec)
    sys.modules["workbench.methods"] = workbench.methods = package
    spec.loader.exec_module(package)
    shutil.rmtree(os.path.dirname(folder))
    print(" ".join(f.__name__ for f in package.FAMILIES))
    print(" ".join(package.METHODS))
""")


def test_every_file_of_the_methods_folder_is_a_family_imported():
    folder = os.path.join(ROOT, "workbench", "methods")
    files = {name[:-3] for name in os.listdir(folder) if name.endswith(".py") and name != "__init__.py"}
    assert {family.__name__.rsplit(".", 1)[1] for family in methods.FAMILIES} == files
    r = subprocess.run([sys.executable, "-c", FOLDER, ROOT], input=TOY_FAMILY, capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    families, names = (line.split() for line in r.stdout.strip().splitlines())
    assert families == [f"workbench.methods.{family}" for family in methods.ORDER] + ["workbench.methods.toy"]
    assert names == list(methods.METHODS) + ["echo"]  # every method, then the new family's, registered by its import
