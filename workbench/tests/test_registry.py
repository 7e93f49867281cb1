"""app/methods.py: adding a method is one module and one registration, and every program sees it."""

import contextlib
import io

import numpy as np
import pytest

from workbench import cli, methods, runner, session
from workbench.bench import ablation
from workbench.methods import Method
from processors import Processor
from speculative import greedy_generate
from toy_method import echo_generate


def run_echo(c):
    return echo_generate(c.oracle, c.ids, c.n_new, n_draft=c.n_draft, stats=c.stats)


@pytest.fixture
def toy():
    method = methods.register(Method("echo", "greedy, the last token repeated as the draft (tests/toy_method.py)",
                                     run_echo, draft_model=False, n_draft=3))
    yield method
    del methods.METHODS["echo"]


def test_a_registered_method_is_in_the_help(toy):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.parse_args(["--help"])
    assert "echo" in out.getvalue() and toy.summary in " ".join(out.getvalue().split())


def test_a_registered_method_runs_from_the_command_line(toy, tiny_dirs, capsys):
    cli.main(["the cat", "--method", "echo", "-n", "10", "--oracle", tiny_dirs["oracle"], "--compare", "--color", "never"])
    err = capsys.readouterr().err
    assert "echo: 10 new tokens" in err and "identical output" in err


def test_a_registered_method_runs_in_the_session(toy, tiny_dirs):
    out = io.StringIO()
    s = session.Session(tiny_dirs["related"], tiny_dirs["oracle"], None, runner.Settings(processor=Processor(0.0)), out=out)
    for line in ("/method echo", "/length 8", "/compare on", "the cat"):
        assert s.handle(line)
    assert "method echo" in out.getvalue() and "echo: 8 new tokens" in out.getvalue() and "identical output" in out.getvalue()
    s.handle("/help")
    assert "echo" in out.getvalue().split("/method NAME", 1)[1].splitlines()[0]


def test_a_registered_method_is_in_a_bench_run(toy, draft, oracle):
    ids = np.random.default_rng(0).integers(0, oracle.vocab_size, 5).tolist()
    rows = ablation.run_ablations(draft, oracle, [ids], 8, progress=False)
    echo = next(r for r in rows if r["method"] == "echo")
    assert echo["matches_greedy"] == "yes" and echo["tokens"] == 8
    assert list(runner.generator(runner.Settings(method="echo", max_new_tokens=8), None, oracle, ids,
                                 runner.Stats())) == list(greedy_generate(oracle, ids, 8))


def test_an_unknown_method_is_one_line():
    with pytest.raises(methods.GenerationError, match="unknown method 'nope'; the methods are: speculative"):
        methods.get("nope")
