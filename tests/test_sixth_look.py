"""The sixth look from outside, at the reading house's own modules: what it found broken, each held here.

A Ctrl-C held back while a file is made is delivered after it exists (weights/reading.open_owned); the root's
programs write to a stdout that cannot encode every character (errors.run); errors.py, imported before any
script can set its Ctrl-C handling, loads nothing but what that needs; the reading path's trace shows a byte
token as bytes; a package of requirements.txt that is not installed is one line saying what to run.
"""

import os
import signal
import subprocess
import sys

import pytest

from fixtures import ROOT
from weights import derived, files, reading


def interrupted_while_opening(monkeypatch):
    """Every os.open from now on is followed by a Ctrl-C, while the open holds Ctrl-C back: it is delivered as the
    open returns, after the file exists."""
    real_open = os.open

    def open_then_interrupt(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupt)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="a signal sent to this process")
@pytest.mark.parametrize("write", ["write_text", "open_new", "create_private"])
def test_a_ctrl_c_as_a_file_is_made_leaves_no_file_behind(tmp_path, monkeypatch, write):
    target = tmp_path / "page.html"
    target.write_text("old")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    actions = {"write_text": lambda: files.write_text(str(target), "new"),
               "open_new": lambda: files.open_new(str(tmp_path / "new.bin")),
               "create_private": lambda: files.create_private(str(tmp_path / derived.KEY_FILE), b"k" * 32)}
    interrupted_while_opening(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        actions[write]()
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["page.html"]  # no temporary file, no half-made new one
    assert target.read_text() == "old"


def test_a_ctrl_c_as_a_file_is_read_removes_nothing(tmp_path, monkeypatch):
    """The negative control: a file opened for reading ("x" not in its mode) is closed, never removed."""
    kept = tmp_path / "config.json"
    kept.write_text("{}")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupted_while_opening(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        reading.read_bytes(str(kept), "config.json")
    monkeypatch.undo()
    assert kept.read_text() == "{}"


def test_errors_imports_nothing_but_what_the_ctrl_c_handler_needs():
    """Every script imports errors before interrupt_quietly() can run: a Ctrl-C while an import runs before that is
    Python's traceback. errors.py imported re, unicodedata and signal.py (which imports enum): 10 ms of such
    imports, a third of a script's start before its handler; in 150 Ctrl-Cs at random in the first 0.12 s of
    python speculative.py, 44 tracebacks after the script had started (16 once it imports nothing else)."""
    r = subprocess.run([sys.executable, "-c", "import sys; before = set(sys.modules); import errors; "
                        "print(sorted(set(sys.modules) - before))"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.split() == ["['errors']"], r.stdout + r.stderr


SCRIPTS = ("speculative.py", "demo.py", "workbench.py", "download_weights.py")


def not_installed(tmp_path, package, name):
    """The environment of a Python where `import package` fails as a package that is not installed does, naming
    the module `name` (a package first on the path that raises what the import system raises)."""
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text(f'raise ModuleNotFoundError("No module named {name!r}", name={name!r})\n')
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_the_packages_named_in_one_line_are_requirements_txt_s():
    """errors.REQUIRED is requirements.txt's packages the programs import (pytest is the tests'): a package added to
    one and not the other would be a traceback again, or a line naming a package pip was never asked for."""
    import errors
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
        names = {line.split(">")[0].split("=")[0].split("<")[0].strip() for line in f if line.strip()}
    assert errors.REQUIRED == names - {"pytest"}


def missing_line(package):
    return f"error: the package {package} is not installed for this Python ({sys.executable}): pip install -r requirements.txt\n"


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_package_not_installed_is_one_line_saying_what_to_run(tmp_path, script):
    """A student who skipped the set-up's pip install (or ran another Python) got a traceback ending in
    ModuleNotFoundError from the first script they ran. NumPy is every script's first import."""
    r = subprocess.run([sys.executable, script, "--help"], env=not_installed(tmp_path, "numpy", "numpy"),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", missing_line("numpy"))


@pytest.mark.parametrize("package, argv", [("threadpoolctl", ["speculative.py", "The"]),  # imported in main()
                                           ("tqdm", ["workbench.py", "--help"])])  # imported by weights/checkpoint.py
def test_a_package_imported_later_is_one_line_too(tmp_path, package, argv):
    r = subprocess.run([sys.executable, *argv], env=not_installed(tmp_path, package, package),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", missing_line(package))


@pytest.mark.parametrize("name", ["numpy_x", "numpy.lnalg"])
def test_a_missing_module_that_is_no_requirement_keeps_its_traceback(tmp_path, name):
    """The negative controls: a module the project does not ask users to install (an extra's), or a module inside
    a package that is installed (a typo in an import: numpy.lnalg), is a bug, and keeps Python's traceback."""
    r = subprocess.run([sys.executable, "speculative.py", "--help"], env=not_installed(tmp_path, "numpy", name),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 1 and "Traceback" in r.stderr and f"ModuleNotFoundError: No module named '{name}'" in r.stderr
    assert "pip install" not in r.stderr


def test_a_package_missing_while_another_error_is_handled_keeps_both_tracebacks():
    """The one line would hide the error being handled when the import failed: that one is a bug's."""
    import errors
    code = ("import errors, sys; errors.interrupt_quietly()\n"
            "try:\n    raise ValueError('the first error')\n"
            "except ValueError:\n    raise ModuleNotFoundError(\"No module named 'tqdm'\", name='tqdm')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 1 and "ValueError: the first error" in r.stderr and "Traceback" in r.stderr, r.stderr
    assert errors.REQUIRED >= {"tqdm"} and "pip install" not in r.stderr


def test_the_escaping_is_the_same_compiled_at_first_use():
    import errors
    assert errors.printable("a\x1b[2J\u202eb\n", newlines=False) == "a\\x1b[2J\\u202eb\\n"
    assert errors.printable("x\u200dy", invisible=True) == "x\\u200dy"
    assert errors.CONTROL.search("\x07") and not errors.CONTROL.search("\n") and errors.LINE_CONTROL.search("\n")


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_stdout_that_cannot_encode_the_text_gets_question_marks_not_a_traceback(tiny_dirs, encoding):
    """speculative.py (and demo.py, through the same Text) wrote the prompt and the text to stdout as they are: under
    PYTHONIOENCODING=ascii a prompt "café" was a UnicodeEncodeError and a traceback. errors.run makes every
    program's stdout write what it cannot encode as ?."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "speculative.py"), "café 日本", "--draft", tiny_dirs["related"],
                        "--oracle", tiny_dirs["oracle"], "-n", "5"], capture_output=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "PYTHONIOENCODING": encoding})
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    assert r.stdout.startswith("café ??".encode(encoding) if encoding == "latin-1" else b"caf? ??"), r.stdout


def test_the_trace_never_shows_a_byte_token_as_a_text_token():
    """python speculative.py --trace showed the token of the byte 0x9a as '\\\\x9a', as it shows the text token of the
    four characters \\x9a: the two read the same. A byte token is shown as its bytes, b'\\x9a', as the workbench's
    trace shows it."""
    from speculative import trace_lines
    from stats import Round
    tokens = {1: b"\x9a", 2: b"\\x9a", 3: b" is", 4: b"\n"}
    [line] = [line for line in trace_lines([Round(new=[4], drafted=[1, 2, 3], accepted=0, oracle=[4, 4, 4, 4],
                                                  context_length=5)], tokens.__getitem__) if line.startswith("  drafted")]
    assert line == "  drafted  b'\\x9a' '\\\\x9a' ' is'", line
