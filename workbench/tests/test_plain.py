"""--plain: the models exactly as gpt2.GPT2.from_pretrained gives them, and nothing of workbench/speed/ run.

The workbench's command line runs in a subprocess under a tracer (sys.setprofile, installed before
workbench.py is even read): every Python function entered is recorded by its file, module code
included, so an import of workbench/speed/ counts as a call. A --plain run must enter no file of
workbench/speed/ and none of threadpoolctl, and print the default run's text. The same tracer on the
default run sees workbench/speed/ (the negative control: a tracer that saw nothing would pass anything).
(READING.md's debugger sessions, on the reading path: tests/test_reading_sessions.py.)
"""

import json
import os
import subprocess
import sys

import pytest

from fixtures import ROOT

# Runs in the child: trace, then run workbench.py as `python workbench.py ARGS` would.
TRACED = r"""
import json, os, runpy, sys, threading

out_path, root, *args = sys.argv[1:]
speed_dir = os.path.join(root, "workbench", "speed") + os.sep
entered = set()

def profile(frame, event, arg):
    if event == "call":
        path = frame.f_code.co_filename
        if path.startswith(speed_dir) or "threadpoolctl" in path:
            entered.add(f"{os.path.relpath(path, root) if path.startswith(root) else path}:{frame.f_code.co_name}")

sys.argv = [os.path.join(root, "workbench.py"), *args]
sys.path.insert(0, root)
threading.setprofile(profile)  # threads started from here on too
sys.setprofile(profile)
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    code = e.code
else:
    code = 0
finally:
    sys.setprofile(None)
    threading.setprofile(None)
    with open(out_path, "w") as f:
        json.dump(sorted(entered), f)
sys.exit(code)
"""


def traced_run(tmp_path, *args, typed=None):
    """(the CompletedProcess, the workbench/speed/ and threadpoolctl functions it entered) of workbench.py ARGS
    (typed: the lines a session reads)."""
    out = tmp_path / f"entered-{len(list(tmp_path.iterdir()))}.json"
    r = subprocess.run([sys.executable, "-c", TRACED, str(out), ROOT, *args], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path), input=typed)
    assert r.returncode == 0, r.stderr
    return r, json.loads(out.read_text())


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return ["--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"], "-n", "24"]


@pytest.mark.parametrize("method", ["speculative", "sps"])
def test_plain_runs_nothing_of_speed_and_prints_the_same_text(tmp_path, pair, method):
    flags = ["--method", method] + (["--seed", "3", "--temperature", "0.8"] if method == "sps" else [])
    plain, entered = traced_run(tmp_path, "the cat and", *pair, *flags, "--plain")
    assert entered == [], entered
    default, entered_by_default = traced_run(tmp_path, "the cat and", *pair, *flags)
    assert plain.stdout == default.stdout and plain.stdout.startswith("the cat and")
    # The negative control: the same tracer sees workbench/speed/ in the default run, the plan's model and the threads.
    assert any(e.startswith(os.path.join("workbench", "speed", "planned.py")) for e in entered_by_default), entered_by_default
    assert any(e.startswith(os.path.join("workbench", "speed", "threads.py")) for e in entered_by_default), entered_by_default


def test_plain_with_trace_compare_and_verbose(tmp_path, pair):
    r, entered = traced_run(tmp_path, "the cat and", *pair, "--plain", "--trace", "--compare", "--verbose")
    assert entered == [], entered
    assert "speed: plain NumPy (--plain)" in r.stderr and "round 1:" in r.stderr and "identical output" in r.stderr


def test_the_session_with_plain_runs_nothing_of_speed(tmp_path, pair):
    r, entered = traced_run(tmp_path, "-i", *pair[:4], "--plain", typed="/length 12\nthe cat and\n/settings\n")
    assert entered == [], entered
    assert "speculative: 12 new tokens" in r.stdout and "plain on" in r.stdout
    _, entered = traced_run(tmp_path, "-i", *pair[:4], typed="/length 12\nthe cat and\n")
    assert any(e.startswith(os.path.join("workbench", "speed", "planned.py")) for e in entered), entered  # the negative control


def test_help_says_what_plain_does():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "--help"], capture_output=True, text=True,
                       timeout=60)
    text = " ".join(r.stdout.split())
    assert ("--plain the models exactly as gpt2.GPT2.from_pretrained gives them, NumPy's own products, nothing of "
            "workbench/speed/ run: logits within about 1e-5") in text and "python speculative.py always runs them" in text


def test_the_plain_loader_gives_the_models_as_from_pretrained_does(tiny_dirs):
    import io

    import numpy as np

    from workbench import runner
    from gpt2 import GPT2
    model, _ = runner.load_model(tiny_dirs["oracle"], plain=True, log=io.StringIO())
    assert type(model) is GPT2
    reference = GPT2.from_pretrained(tiny_dirs["oracle"])
    assert np.array_equal(model.forward([1, 2, 3]), reference.forward([1, 2, 3]))
    assert type(model.params["h"][0]["attn"]["c_attn"]["weight"]) is np.ndarray  # NumPy's own @
