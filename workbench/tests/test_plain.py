"""--plain: the models exactly as gpt2.GPT2.from_pretrained gives them, and nothing of speed/ run.

The command line runs in a subprocess under a tracer (sys.setprofile, installed before
speculative.py is even read): every Python function entered is recorded by its file, module
code included, so an import of speed/ counts as a call. A --plain run must enter no file of
speed/ and none of threadpoolctl, and print the default run's text. The same tracer on the
default run sees speed/ (the negative control: a tracer that saw nothing would pass anything).
"""

import json
import os
import re
import subprocess
import sys

import pytest

from fixtures import ROOT

# Runs in the child: trace, then run speculative.py as `python speculative.py ARGS` would.
TRACED = r"""
import json, os, runpy, sys, threading

out_path, root, *args = sys.argv[1:]
speed_dir = os.path.join(root, "speed") + os.sep
entered = set()

def profile(frame, event, arg):
    if event == "call":
        path = frame.f_code.co_filename
        if path.startswith(speed_dir) or "threadpoolctl" in path:
            entered.add(f"{os.path.relpath(path, root) if path.startswith(root) else path}:{frame.f_code.co_name}")

sys.argv = [os.path.join(root, "speculative.py"), *args]
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
    """(the CompletedProcess, the speed/ and threadpoolctl functions it entered) of speculative.py ARGS
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
    # The negative control: the same tracer sees speed/ in the default run, the products and the threads.
    assert any(e.startswith(os.path.join("speed", "blocked.py")) for e in entered_by_default), entered_by_default
    assert any(e.startswith(os.path.join("speed", "threads.py")) for e in entered_by_default), entered_by_default


def test_plain_with_trace_compare_and_verbose(tmp_path, pair):
    r, entered = traced_run(tmp_path, "the cat and", *pair, "--plain", "--trace", "--compare", "--verbose")
    assert entered == [], entered
    assert "speed: plain NumPy (--plain)" in r.stderr and "round 1:" in r.stderr and "identical output" in r.stderr


def test_the_session_with_plain_runs_nothing_of_speed(tmp_path, pair):
    r, entered = traced_run(tmp_path, "-i", *pair[:4], "--plain", typed="/length 12\nthe cat and\n/settings\n")
    assert entered == [], entered
    assert "speculative: 12 new tokens" in r.stdout and "plain on" in r.stdout
    _, entered = traced_run(tmp_path, "-i", *pair[:4], typed="/length 12\nthe cat and\n")
    assert any(e.startswith(os.path.join("speed", "blocked.py")) for e in entered), entered  # the negative control


def test_help_says_what_plain_does():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "--help"], capture_output=True, text=True,
                       timeout=60)
    text = " ".join(r.stdout.split())
    assert "--plain the models exactly as gpt2.GPT2.from_pretrained gives them, NumPy's own @" in text
    assert "logits within about 1e-5 of the fast path's (the same greedy text but at a near-tie; a seeded sample may " \
           "differ), slower verification" in text


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


# ---------------------------------------------------------------------------
# READING.md's sessions, typed on a terminal of their own: "Stepping through the code", "From Python"
# ---------------------------------------------------------------------------

READING = os.path.join(ROOT, "READING.md")
PROMPT = re.compile(r"(\(Pdb\) |>>> )$")
QUIT = {"(Pdb) ": "q\n", ">>> ": "\x04"}  # what leaves after the documented session: q, Ctrl-D


def documented_sessions():
    """{section title: (the command after "$ ", the terminal's text after it)} of READING.md's session blocks."""
    with open(READING, encoding="utf-8") as f:
        text = f.read()
    found = {}
    for title in ("Stepping through the code", "From Python"):
        section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
        block = re.search(r"```text\n\$ ([^\n]*)\n(.*?)\n```", section, re.S)
        found[title] = (block.group(1), block.group(2) + "\n")
    return found


def typed_lines(transcript):
    """What is typed at each prompt of a transcript, in order."""
    return [line[len(m.group(0)):] for line in transcript.splitlines() for m in [re.match(r"\(Pdb\) |>>> ", line)] if m]


def normalized(text, cwd):
    """A terminal's text as READING.md shows it: no colours or terminal modes, paths inside the project
    and the working directory relative, load times as 0.1 s (they vary; nothing else may)."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text.replace("\r\n", "\n"))
    for prefix in (ROOT + os.sep, str(cwd) + os.sep):
        text = text.replace(prefix, "")
    return re.sub(r"(loaded .*\)) in \d+\.\d s", r"\1 in 0.1 s", text)


def replay(command, transcript, cwd, setup=""):
    """Type a documented session's lines on a pseudo-terminal; the text it shows, normalized as READING.md
    shows it. setup: Python run first (python -c), for what the test's models directory needs."""
    import pty
    import select
    import shlex
    import time
    argv = shlex.split(command)
    argv[0] = sys.executable
    if setup:
        argv += ["-i", "-c", setup]
    if "-m" in argv and argv[argv.index("-m") + 1] == "pdb":
        script = argv.index("pdb") + 1
        argv[script] = os.path.join(ROOT, argv[script])
        argv += ["--models-dir", "models"]
    # Started, not forked from this threaded process (Python 3.12+ warns of deadlocks): test_session's
    # prelude makes the new terminal the program's controlling one. Python 3.13's new REPL would colour
    # and redraw its prompt; the basic one shows what the document shows.
    from test_session import ON_TERMINAL
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHON_BASIC_REPL": "1", "PYTHON_COLORS": "0"}
    fd, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", ON_TERMINAL, *argv[1:]], cwd=cwd, env=env, stdin=terminal,
                            stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    seen = ""

    def read(until_prompt=True, timeout=240):
        """Read what the terminal shows, up to the next prompt after what was read so far."""
        nonlocal seen
        start, deadline = len(seen), time.monotonic() + timeout
        while not (until_prompt and PROMPT.search(seen, start)):
            ready = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]
            if not ready:
                if until_prompt:
                    raise AssertionError(f"no prompt within {timeout} s; the terminal shows:\n{seen[-3000:]}")
                return
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the program has ended
                return
            if not chunk:
                return
            seen += chunk.decode("utf-8", "replace")

    try:
        read()
        for line in typed_lines(transcript):
            os.write(fd, line.encode() + b"\n")
            read()
        prompt = PROMPT.search(seen).group(0)
        shown = seen[:seen.rindex(prompt)]  # the session as documented ends before its last prompt
        os.write(fd, QUIT[prompt].encode())
        read(until_prompt=False, timeout=30)
        return normalized(shown, cwd)
    finally:
        proc.kill()
        proc.wait()
        os.close(fd)


@pytest.fixture(scope="module")
def demo_here(tmp_path_factory):
    """A working directory whose models/ holds the demo pair, as `python demo.py` leaves a checkout."""
    from weights import demo_pair
    cwd = tmp_path_factory.mktemp("checkout")
    demo_pair.build_pair(str(cwd / "models"))
    return cwd


SETUP = "import weights.models; weights.models.DEFAULT_MODELS_DIR = 'models'"  # from_pretrained looks here


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX-only")
@pytest.mark.skipif(sys.version_info >= (3, 13), reason="READING.md's transcripts are Python 3.10-3.12's pdb; 3.13's "
                    "stops at breakpoint() itself and steps differently, as READING.md says")
@pytest.mark.parametrize("title", ["Stepping through the code", "From Python"])
def test_the_documented_session_is_what_the_terminal_shows(demo_here, title):
    command, transcript = documented_sessions()[title]
    shown = replay(command, transcript, demo_here, setup=SETUP if "pdb" not in command else "")
    assert shown.strip("\n") == transcript.strip("\n"), (
        f"READING.md's {title!r} session differs from what is shown now (python tests/test_plain.py --fix "
        f"rewrites it from a checkout with models/; then read its explanations again)")


def test_the_stepping_session_reaches_x_at_w_in_numpy_alone():
    _, transcript = documented_sessions()["Stepping through the code"]
    with open(READING, encoding="utf-8") as f:
        section = f.read().split("\n## Stepping through the code\n", 1)[1].split("```text", 1)[0]
    explained = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    assert explained == typed_lines(transcript)  # the table explains each command typed, in order
    stops = [m.group(1, 3) for m in re.finditer(r"> ([\w/.]+)\((\d+)\)([\w<>]+)\(\)", transcript)]
    assert stops[1] == ("speculative.py", "verify")  # the first stop after c: the breakpoint in the verification
    assert re.search(r"\n> gpt2\.py\(\d+\)linear\(\)\n-> return x @ w \+ b\n", transcript)  # the product, reached
    assert "<class 'numpy.ndarray'>" in transcript  # NumPy's own @
    assert "speed/" not in transcript and "threadpoolctl" not in transcript


def fix():
    """python tests/test_plain.py --fix: rewrite READING.md's two sessions with what a terminal shows now
    (run in a checkout where `python demo.py` has written models/)."""
    with open(READING, encoding="utf-8") as f:
        text = f.read()
    for title, (command, transcript) in documented_sessions().items():
        shown = replay(command, transcript, ROOT, setup="")
        text = text.replace(f"$ {command}\n{transcript}", f"$ {command}\n{shown.strip(chr(10))}\n")
        print(f"{title}: {'unchanged' if shown.strip() == transcript.strip() else 'rewritten'}")
    with open(READING, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__" and sys.argv[1:] == ["--fix"]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    fix()
