"""READING.md's two debugger sessions, "Stepping through the code" and "From Python", typed word for word on a
terminal of their own: what the terminal shows must be what READING.md shows (the reading path: python -m pdb
speculative.py on the plain models, and gpt2.GPT2 from Python). python tests/test_reading_sessions.py --fix
rewrites them. Slow: the demo pair, and two debugger sessions."""

import os
import re
import subprocess
import sys

import pytest

from fixtures import checkout_with_demo_pair

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout (as fixtures.ROOT; this file also runs alone)

pytestmark = pytest.mark.slow

# The session is started, not forked from this process (whose worker threads a fork would copy in a broken
# state; Python 3.12+ warns): this prelude makes the new terminal its controlling one, as pty.fork does.
ON_TERMINAL = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"

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
    # Started, not forked from this threaded process (Python 3.12+ warns of deadlocks): ON_TERMINAL makes the
    # new terminal the program's controlling one. Python 3.13's new REPL would colour and redraw its prompt;
    # the basic one shows what the document shows.
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
    return checkout_with_demo_pair(tmp_path_factory)


SETUP = "import weights.models; weights.models.DEFAULT_MODELS_DIR = 'models'"  # from_pretrained looks here


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX-only")
@pytest.mark.skipif(sys.version_info >= (3, 13), reason="READING.md's transcripts are Python 3.10-3.12's pdb; 3.13's "
                    "stops at breakpoint() itself and steps differently, as READING.md says")
@pytest.mark.parametrize("title", ["Stepping through the code", "From Python"])
def test_the_documented_session_is_what_the_terminal_shows(demo_here, title):
    command, transcript = documented_sessions()[title]
    shown = replay(command, transcript, demo_here, setup=SETUP if "pdb" not in command else "")
    assert shown.strip("\n") == transcript.strip("\n"), (
        f"READING.md's {title!r} session differs from what is shown now (python tests/test_reading_sessions.py --fix "
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
    assert "speed/" not in transcript and "threadpoolctl" not in transcript and "workbench" not in transcript


def fix():
    """python tests/test_reading_sessions.py --fix: rewrite READING.md's two sessions with what a terminal shows now
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
    fix()
