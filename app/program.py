"""How every program here runs: bad input is one line, never a traceback.

A user who mistypes a flag, has no network or points at a broken file should
see one clear line on stderr and a non-zero exit, not a usage dump or a Python
traceback. The errors we expect are UserError (errors.py), OSError (a full
disk, a directory where a file should be, a dead network), MemoryError (a
memory limit) and Ctrl-C at any moment: while the program loads
(app/interrupt.py, the first thing every entry script does, before any
other import), runs, or reports. Anything else is a bug and keeps its traceback.
"""

import argparse
import os
import signal
import sys

from errors import UserError, printable


class UsageError(UserError):
    """A setting that cannot be used (a flag's value, a session command)."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own: usage + message; ours: one line
        fail(f"{message} (see {self.prog} --help)", code=2)

    def add_models_and_results(self, outputs):
        """--models-dir, and --out: the directory a benchmark writes its files `outputs` into."""
        from weights.models import DEFAULT_MODELS_DIR  # imported here: most programs need no weights/ to parse flags
        self.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="where named models live (default: models/)")
        self.add_argument("--out", default="bench_results", help=f"directory for {', '.join(outputs)} (default: bench_results/)")

    def check_results(self, out, outputs):
        """Refuse --out before any work unless every file of the set can be written there (weights/files.py)."""
        from weights import files
        problem = files.why_not_writable_in(out, outputs)
        if problem:
            self.error(f"--out {problem}")


def fail(message, code=1):
    """One line on stderr, every control character in it escaped (a server's or a file's text may hold any), and exit."""
    print(f"error: {printable(message, newlines=False)}", file=sys.stderr)
    sys.exit(code)


def error_line(error):
    """One line for an expected error: its message, and for an OSError the file it concerns."""
    if isinstance(error, OSError) and not isinstance(error, UserError):
        what = error.strerror or str(error) or type(error).__name__
        return f"{error.filename}: {what}" if error.filename else what
    return str(error) or type(error).__name__


BROKEN_PIPE = 128 + 13  # the status a shell reports for a writer whose reader went away (signal 13)


def run(main):
    """Call main(); turn the expected exceptions into one line on stderr.

    A script's last statement: once main() is over, Ctrl-C is ignored while the process exits.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is a KeyboardInterrupt again
    reopen_closed_streams()
    try:
        try:
            return main()
        finally:
            # main() is over, however it ended: a Ctrl-C while the error is reported or the
            # interpreter shuts down would kill it by the signal, with no message; let it finish.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    except MemoryError:  # a limit (ulimit -v, a container's) or the machine's memory: what ran out is not a bug
        drop_stdout()
        fail("out of memory: use a smaller model, fewer tokens or fewer beams, or raise the memory limit")
    except BrokenPipeError:  # `... | head`: the reader has gone, stop quietly
        drop_stdout()
        sys.exit(BROKEN_PIPE)
    except (UserError, OSError) as e:
        drop_stdout()  # a full disk under stdout: its buffered text cannot be written either
        fail(error_line(e))


def reopen_closed_streams():
    """A standard stream closed before the program started (`>&-`, `<&-`) is None in sys: give it the
    null device, so that writing goes nowhere and reading ends at once (the session ends as at Ctrl-D)."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))


def drop_stdout():
    """Point stdout at the null device, so that Python's last flush at exit cannot fail a second time."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        with open(os.devnull, "wb") as null:  # its descriptor closed once copied: nothing left open
            os.dup2(null.fileno(), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (an embedding, a test's StringIO)
        pass
