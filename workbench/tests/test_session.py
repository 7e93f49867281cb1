"""The interactive workbench, driven as a person would drive it: through a pseudo-terminal (pty).

Each test starts `python workbench.py -i` on a terminal of its own, types lines,
and reads what the terminal shows: the prompt "> ", the streamed text, the
statistics line, the answers to /commands. Ctrl-C is a real ^C typed on the
terminal, which the terminal driver turns into SIGINT.
"""

import os
import re
import select
import subprocess
import sys
import time

import pytest

from fixtures import ROOT

pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX-only")


# The session is started, not forked from this process (whose worker threads a fork would copy
# in a broken state; Python 3.12+ warns): this prelude makes the new terminal its controlling one, as pty.fork does.
ON_TERMINAL = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"


class Terminal:
    def __init__(self, *args):
        self.fd, terminal = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-c", ON_TERMINAL, "workbench.py", "-i", *args], cwd=ROOT,
                                     stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
        os.close(terminal)
        self.pid = self.proc.pid
        self.seen = ""

    def read_until(self, pattern, timeout=120):
        """Everything the terminal shows until pattern (a regex) appears; fails after timeout seconds."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.seen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} within {timeout} s; the terminal shows:\n{self.seen[-3000:]}")
            if select.select([self.fd], [], [], left)[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the session has ended
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the session ended while waiting for {pattern!r}:\n{self.seen[-3000:]}")
                self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        found = self.seen
        self.seen = ""
        return found

    def type(self, text):
        os.write(self.fd, text.encode())

    def command(self, line, timeout=120):
        """Type a line and return what the session answers, up to its next prompt."""
        self.type(line + "\n")
        return self.read_until(r"\n> $", timeout)

    def close(self):
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.fd)


def generated(out, prompt, method):
    """The streamed text of one generation: from the last time the prompt is printed to the statistics line."""
    before = re.sub(r"\x1b\[\d*m", "", out.split(f"{method}:")[0])  # the colour of accepted drafts
    return before[before.rindex(prompt):]


@pytest.fixture
def terminal(tiny_dirs):
    t = Terminal("--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"])
    t.read_until(r"> $")
    yield t
    t.close()


def test_a_prompt_is_generated_and_reported(terminal):
    out = terminal.command("the cat")
    assert "loaded" in out and "the cat" in out
    assert re.search(r"speculative: 64 new tokens in [\d.]+ s", out)
    assert "acceptance" in out


def test_commands_change_the_settings(terminal):
    assert "length 12" in terminal.command("/length 12")
    assert "n_draft 3" in terminal.command("/n_draft 3")
    out = terminal.command("the cat")
    assert "speculative: 12 new tokens" in out
    assert "method sps" in terminal.command("/method sps")
    assert "topk 5, temperature 1.0" in terminal.command("/processor topk 5")
    assert "seed 7" in terminal.command("/seed 7")
    first = generated(terminal.command("the cat"), "the cat", "sps")
    terminal.command("/seed 7")
    assert first == generated(terminal.command("the cat"), "the cat", "sps")  # the same seed, the same text
    settings = terminal.command("/settings")
    assert "method sps" in settings and "length 12" in settings and "n_draft 3" in settings


def test_every_documented_toggle_answers(terminal):
    for line, answer in [("/egag", "method adaptive"), ("/egag off", "method speculative"), ("/ngram on", "method ngram"),
                         ("/n_draft_min 2", "n_draft_min 2"), ("/n_draft_max 6", "n_draft_max 6"),
                         ("/egag_ema 0.9", "ema 0.9"), ("/ema 0.8", "ema 0.8"), ("/ngram_n 3", "ngram_n 3"), ("/top_k_filler 3", "top_k_filler 3"),
                         ("/set_ngramstorage onelevel 3", "n-gram storage onelevel, n 3"), ("/reset_in_between off", "reset_in_between off"),
                         ("/target", "method greedy"), ("/draft_alone", "method draft-alone"), ("/speculative", "method speculative"),
                         ("/trace on", "trace on"), ("/debug off", "trace off"), ("/cache off", "cache off"), ("/cache on", "cache on"),
                         ("/compare on", "compare on"), ("/method sps", "method sps"), ("/temperature 0.5", "temperature 0.5"),
                         ("/processor greedy", "processor greedy"), ("/plain on", "plain on"), ("/plain off", "plain off"),
                         ("/method beam", "method beam"), ("/n_beams 2", "n_beams 2"), ("/html off", "html off")]:
        assert answer in terminal.command(line), line


def test_a_sampling_processor_is_refused_by_speculative_as_on_the_command_line(terminal):
    # The command line's rule (runner.check_sampling): --method speculative --temperature 0.8 is refused, so is this,
    # naming the same methods.
    cli = subprocess.run([sys.executable, os.path.join(ROOT, "workbench.py"), "--temperature", "0.8"],
                         capture_output=True, text=True, timeout=60)
    methods = re.search(r"--temperature applies to --method (.*), not speculative\b", cli.stderr).group(1)
    refused = f"the processor (multinomial, temperature 0.8) applies to /method {methods}, not speculative"
    out = terminal.command("/temperature 0.8")
    assert f"\nerror: {refused}" in out and "temperature 0.8" not in terminal.command("/settings")
    assert "method sps" in terminal.command("/method sps")
    assert "processor multinomial, temperature 0.8; method now: sps" in terminal.command("/temperature 0.8")
    for line, method in (("/speculative", "speculative"), ("/method speculative", "speculative"), ("/egag on", "adaptive")):
        out = terminal.command(line)
        assert "\nerror: " + refused.replace("not speculative", f"not {method}") in out, (line, out)
    assert "method sps" in terminal.command("/settings")  # a refused command changes nothing
    assert "method sample (/target samples at temperature 0.8" in terminal.command("/target")
    assert "method now: greedy" in terminal.command("/processor greedy")
    assert "method speculative" in terminal.command("/speculative")


def test_length_and_draft_layers_are_refused_at_the_command_with_the_models_range(terminal):
    # The tiny models: a context window of 128 tokens, an oracle of 3 layers.
    out = terminal.command("/length 100000")
    assert "loaded" in out and "\nerror: length must be a whole number from 0 to 127 with these models" in out
    assert "context window of 128 tokens" in out
    assert "length 127" in terminal.command("/length 127")
    out = terminal.command("/draft_layers 3")
    assert "error: draft_layers must be a whole number from 1 to 2 with the oracle" in out and "(3 layers)" in out
    assert "draft_layers 2" in terminal.command("/draft_layers 2")
    settings = terminal.command("/settings")
    assert "length 127" in settings and "draft_layers 2 (self-speculative)" in settings


def test_the_session_answers_once(terminal):
    out = terminal.command("/cache off")
    answers = [line for line in out.splitlines() if line.startswith("cache")]
    assert len(answers) == 1, out  # one answer, not the setting and then its cost again


def test_ngram_with_options_still_gives_the_oracles_text(terminal):
    terminal.command("/length 16")
    terminal.command("/target")
    alone = generated(terminal.command("the cat the cat the"), "the cat the cat the", "greedy")
    terminal.command("/ngram on")
    terminal.command("/top_k_filler 3")
    terminal.command("/reset_in_between off")
    for _ in range(2):  # the second run starts with the table the first one taught
        assert generated(terminal.command("the cat the cat the"), "the cat the cat the", "ngram") == alone


def test_bad_commands_are_one_line_and_the_session_goes_on(terminal):
    for line, message in [("/bogus", "unknown command /bogus"), ("/n_draft x", "n_draft must be a whole number"),
                          ("/n_draft", "usage: /n_draft N"), ("/n_draft 0", "n_draft must be a whole number from 1 to 128"), ("/gamma 4", "the project documentation's /gamma is /n_draft here"),
                          ("/beams 2", "unknown command /beams; /help lists the commands"), ("/method magic", "unknown method"),
                          ("/processor beam", "unknown processor"), ("/egag maybe", "expected on or off"),
                          ("/n_draft_min 99", "need n_draft_min <= n_draft_max"), ("/length -1", "length must be a whole number from 0 to 100000"),
                          ("/temperature nan", "temperature must be"), ("/set_ngramstorage fancy", "/set_ngramstorage takes"),
                          ("/", "unknown command /"), ("/html /nonexistent/dir/x.html", "does not exist")]:
        out = terminal.command(line)
        errors = [l for l in out.splitlines() if l.startswith("error:")]
        assert len(errors) == 1 and message in errors[0] and "Traceback" not in out, (line, out)
    assert "speculative: 64 new tokens" in terminal.command("still alive")


def test_reset_in_between_off_keeps_the_table(terminal):
    # Off: the n-gram table of one generation is still there for the next (the drafter is kept).
    terminal.command("/ngram on")
    terminal.command("/length 12")
    terminal.command("/reset_in_between off")
    first = terminal.command("the cat sat on the mat")
    second = terminal.command("the cat sat on the mat")
    accepted = [int(re.search(r"acceptance [\d.]+% \((\d+)/", out).group(1)) for out in (first, second)]
    assert accepted[1] > accepted[0], accepted  # the second run drafts from what the first one taught


def test_a_missing_model_is_one_line(terminal, tmp_path):
    terminal.command(f"/draft {tmp_path}")
    out = terminal.command("the cat")
    assert "error:" in out and "has no config.json" in out and "Traceback" not in out


def test_trace_and_html(terminal, tmp_path):
    terminal.command("/length 10")
    terminal.command("/trace on")
    page = tmp_path / "run.html"
    terminal.command(f"/html {page}")
    out = terminal.command("the cat")
    assert "round 1:" in out and "drafted" in out
    assert page.exists() and "<html" in page.read_text(encoding="utf-8")


def test_a_draft_of_another_vocabulary_runs_or_is_refused_in_one_line(terminal, other_vocabulary, tiny_dirs):
    # /draft with its own tokenizer: speculative gives the oracle's greedy text (crossvocab.py), a method that checks
    # drafts by id says in one line that it does not take it, and the session goes on.
    terminal.command("/length 12")
    greedy = generated(terminal.command("the cat"), "the cat", "speculative")  # the tiny pair: the oracle's text
    assert f"draft {other_vocabulary}" in terminal.command(f"/draft {other_vocabulary}")
    out = terminal.command("the cat")
    assert generated(out, "the cat", "speculative") == greedy and "acceptance" in out
    terminal.command("/method tree")
    out = terminal.command("the cat")
    assert "error: /method tree needs a draft with the oracle's vocabulary" in out and "use /method speculative" in out
    assert "Traceback" not in out and "tree:" not in out
    terminal.command("/method sps")
    terminal.command("/trace on")
    out = terminal.command("the cat")
    assert "sps: 12 new tokens" in out and "as text" in out
    out = terminal.command("/ablation")  # the ablations compare tokens by id
    assert "error: the draft" in out and "has a vocabulary of its own" in out


def test_help_lists_the_project_documentations_commands(terminal):
    out = terminal.command("/help")
    for name in ("/speculative", "/target", "/drafter", "/length", "/gamma", "/egag", "/egag_gamma_min", "/egag_gamma_max",
                 "/egag_ema", "/processor", "/debug", "/cache", "/ngram", "/top_k_filler", "/set_ngramstorage",
                 "/reset_in_between", "/quit"):
        assert f"[docs: {name}]" in out, name


def test_ctrl_d_and_quit_leave(tiny_dirs):
    for ending in ("\x04", "/quit\n"):
        t = Terminal("--draft", tiny_dirs["related"], "--oracle", tiny_dirs["oracle"])
        t.read_until(r"> $")
        t.type(ending)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pid, status = os.waitpid(t.pid, os.WNOHANG)
            if pid:
                assert os.waitstatus_to_exitcode(status) == 0
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"{ending!r} did not end the session")
        os.close(t.fd)


def test_ctrl_c_stops_a_generation_and_the_session_goes_on(demo_dirs):
    t = Terminal("--draft", demo_dirs["draft"], "--oracle", demo_dirs["oracle"])
    try:
        t.read_until(r"> $")
        t.command("/length 480")  # the learned pair's window is 512
        t.command("/cache off")  # every step recomputes the prefix: slow enough to interrupt for sure
        t.type("the meaning of life is\n")
        t.read_until(r"the meaning of life is\S* \S+ \S+")  # a few tokens are out
        t.type("\x03")  # Ctrl-C, as typed
        out = t.read_until(r"\n> $", timeout=60)
        assert re.search(r"\(stopped after \d+ tokens\)", out) and "Traceback" not in out
        assert "length 5" in t.command("/length 5")
        assert "new tokens" in t.command("/cache on") + t.command("still here")
    finally:
        t.close()


def test_plain_gives_the_same_text_from_the_models_as_from_pretrained_gives_them(terminal):
    terminal.command("/length 16")
    fast = generated(terminal.command("the cat and"), "the cat and", "speculative")
    out = terminal.command("/plain on")
    assert "plain on: the models as gpt2.GPT2.from_pretrained gives them" in out
    out = terminal.command("the cat and")
    assert out.count("loaded") == 2  # the plain models are loaded anew
    assert generated(out, "the cat and", "speculative") == fast
    assert "plain on" in terminal.command("/settings") and "(plain)" in terminal.command("/settings")
