"""docs/USAGE.md's session of the workbench, typed word for word on a terminal of its own: what the terminal shows
must be what USAGE.md shows, but for the times (load times, seconds and tokens per second vary; nothing else may).

Each ```text block of docs/USAGE.md that starts with "$ python workbench.py -i" is a session: the lines after
its prompts "> " are typed, one after the other, each once the session has answered the one before, on a
pseudo-terminal (as a person types them: the terminal echoes them, the colours are stripped as USAGE.md shows
none). The models are the learned pair, written into models/ of a working directory of the test's own.
python workbench/tests/test_usage_session.py --fix rewrites the sessions from a checkout where `python demo.py`
has written models/. Slow: a whole program, and the pair's first use on this machine.
"""

import os
import re
import select
import shlex
import subprocess
import sys
import time

import pytest

from fixtures import checkout_with_demo_pair

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout (runs alone too)
USAGE = os.path.join(ROOT, "docs", "USAGE.md")
COMMAND = "$ python workbench.py -i"
PROMPT = "> "

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX-only")]

# The session is started, not forked from this process (whose worker threads a fork would copy in a broken
# state): this prelude makes the new terminal its controlling one, as pty.fork does (workbench/tests/test_session.py).
ON_TERMINAL = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
               "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def documented_sessions(text=None):
    """[(the command after "$ ", the transcript after it)] of USAGE.md's session blocks."""
    if text is None:
        with open(USAGE, encoding="utf-8") as f:
            text = f.read()
    return [(m.group(1), m.group(2) + "\n")
            for m in re.finditer(r"```text\n\$ (python workbench\.py -i[^\n]*)\n(.*?)\n```", text, re.S)]


def typed_lines(transcript):
    """What is typed at each prompt of a transcript, in order."""
    return [line[len(PROMPT):] for line in transcript.splitlines() if line.startswith(PROMPT) and line != PROMPT.strip()]


def as_shown(text):
    """A terminal's text as USAGE.md shows it: no colours, no carriage returns."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text.replace("\r\n", "\n"))


def normalized(text):
    """as_shown, and every time (a load, a run, the time in each model, tokens per second) as 0.0: they vary
    from run to run; nothing else may."""
    text = re.sub(r"\b\d+\.\d+ s\b", "0.0 s", as_shown(text))
    return re.sub(r"\b\d+\.\d+ tokens/s\b", "0.0 tokens/s", text)


def replay(command, transcript, cwd, extra=()):
    """Type a documented session's lines on a pseudo-terminal, each after the session's prompt; the terminal's
    text, from its first line to the end of the session."""
    import pty
    argv = shlex.split(command)
    assert argv[:2] == ["python", "workbench.py"], command
    fd, terminal = pty.openpty()
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-c", ON_TERMINAL, os.path.join(ROOT, "workbench.py"), *argv[2:], *extra],
                            cwd=cwd, env=env, stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    seen = ""

    def read(start, until_prompt=True, timeout=300):
        """Read until the text read after `start` ends with a prompt (or, until_prompt False, the session ends)."""
        nonlocal seen
        deadline = time.monotonic() + timeout
        while not (until_prompt and seen[start:].endswith("\n" + PROMPT)):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"no {'prompt' if until_prompt else 'end'} within {timeout} s; the terminal "
                                     f"shows:\n{seen[-3000:]}")
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the session has ended
                chunk = b""
            if not chunk:
                if until_prompt:
                    raise AssertionError(f"the session ended before its prompt:\n{seen[-3000:]}")
                return
            seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")

    try:
        read(0)
        for line in typed_lines(transcript):
            start = len(seen)
            os.write(fd, line.encode() + b"\n")
            read(start, until_prompt=line != "/quit")
        return seen
    finally:
        proc.kill()
        proc.wait()
        os.close(fd)


@pytest.fixture(scope="module")
def checkout_with_models(tmp_path_factory):
    return checkout_with_demo_pair(tmp_path_factory)


def test_usage_md_shows_a_session_that_generates_and_leaves():
    sessions = documented_sessions()
    assert sessions, f"docs/USAGE.md has no ```text block starting with {COMMAND!r}"
    for command, transcript in sessions:
        typed = typed_lines(transcript)
        assert typed and typed[-1] == "/quit", typed
        assert any(not line.startswith("/") for line in typed), "no prompt is generated"
        assert re.search(r"^\w[\w-]*: \d+ new tokens in ", transcript, re.M), "no statistics line"


@pytest.mark.parametrize("number", range(len(documented_sessions())))
def test_the_documented_session_is_what_the_terminal_shows(checkout_with_models, number):
    command, transcript = documented_sessions()[number]
    shown = replay(command, transcript, checkout_with_models, extra=("--models-dir", "models"))
    assert normalized(shown).strip("\n") == normalized(transcript).strip("\n"), (
        "docs/USAGE.md's session differs from what the workbench shows now (python "
        "workbench/tests/test_usage_session.py --fix rewrites it from a checkout with models/; then read the text "
        "around it again)")


def test_a_changed_word_of_the_session_is_caught():
    # Negative control: the comparison sees a changed word of the text or of a reply, not only the times.
    command, transcript = documented_sessions()[0]
    generated = next(line for line in transcript.splitlines() if line and not line.startswith((PROMPT, "loaded ")))
    for changed in (transcript.replace(generated, generated + " x", 1), transcript.replace("length 24\n", "length 25\n")):
        assert changed != transcript
        assert normalized(changed) != normalized(transcript)
    assert normalized("in 0.31 s, 77.1 tokens/s") == normalized("in 0.25 s, 95.0 tokens/s")  # only the times vary


def fix():
    """python workbench/tests/test_usage_session.py --fix: rewrite USAGE.md's sessions with what a terminal shows
    now, colours stripped (run in a checkout where `python demo.py` has written models/)."""
    with open(USAGE, encoding="utf-8") as f:
        text = f.read()
    for command, transcript in documented_sessions(text):
        shown = as_shown(replay(command, transcript, ROOT)).strip("\n")
        text = text.replace(f"$ {command}\n{transcript}", f"$ {command}\n{shown}\n")
        print(f"{command}: {'unchanged' if normalized(transcript).strip() == normalized(shown).strip() else 'rewritten'}")
    with open(USAGE, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__" and sys.argv[1:] == ["--fix"]:
    sys.path[:0] = [ROOT]
    fix()
