"""What counts as the user's error, how text from outside is shown, and how a program ends on one.

Bad input (a flag, a file, a server, a prompt) must end in one clear line, not
a traceback. Every module that can meet such input raises a subclass of
UserError: GenerationError (decoding.py), CheckpointError, TokenizerError and
DownloadError (weights/), and the workbench's UsageError. Every program runs its
main() through run() below: UserError, OSError, MemoryError and Ctrl-C become
one line on stderr and an exit status; any other exception is a bug and keeps
its traceback. interrupt_quietly(), the first thing every script does, makes
Ctrl-C one line while the script is still loading.

Text that comes from outside (a server's answer, a file's contents, a path, a
prompt) can hold control characters: an escape sequence printed raw can move
the cursor, recolour or rewrite what the user sees. printable() is the one
place that makes such text safe to show.
"""

# Only what interrupt_quietly() needs: every script imports this module before it can set its Ctrl-C handling,
# and a Ctrl-C while an import runs before that is Python's traceback. So not signal.py, which imports enum
# first, but its C half, _signal (the same functions and handlers); and re and unicodedata where printable()
# first needs them: together about a third of a script's start before its handler.
import _signal as signal
import os
import sys


class UserError(Exception):
    """An error caused by the input (a file, a flag, the network), not by a bug: one line for the user."""


# C0 and C1 control characters and DEL, but tab and newline; the Unicode controls that reorder
# or hide text (bidirectional marks, embeddings, overrides and isolates, the zero-width space and
# the byte-order mark; not the joiners, which emoji and many scripts need); surrogates, which
# no terminal can be sent (U+DC80..U+DCFF: bytes that did not decode, under surrogateescape).
CONTROL_CHARACTERS = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
LINE_CONTROL_CHARACTERS = CONTROL_CHARACTERS.replace("\x0b", "\t\n\x0b")  # the same, tab, newline and return too
NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
INVISIBLE = {"Cf", "Zs", "Zl", "Zp"}  # format characters, spaces but " ", line and paragraph separators


def printable(text, newlines=True, invisible=False, mark=None):
    """text with every control character written as an escape, never sent raw: the one escaping
    function for whatever reaches a terminal or a page (a path, a name, a server's words, a token).

    Escaped: CONTROL above. A byte that did not decode (U+DC80..U+DCFF) shows as \\xNN of the
    byte (always >= \\x80), any other character below U+0100 as \\xNN, the rest as \\uNNNN.
    newlines=False: tab, newline and return too, as \\t \\n \\r (one-line messages).
    invisible=True: also every character that shows as nothing or as a blank: format characters
    (joiners included), spaces other than " ", line and paragraph separators (a token shown alone).
    mark: a function given each escape, whose result is put in its place (a page wraps them in a
    <span>; HTML-escape the text before, the escapes need none); default: the escape itself.
    Everything else, newlines and tabs (by default) included, is kept as it is.
    """
    def escape(c):
        code = ord(c)
        if c in NAMED_ESCAPES and not newlines:
            shown = NAMED_ESCAPES[c]
        elif 0xDC80 <= code <= 0xDCFF:
            shown = f"\\x{code - 0xDC00:02x}"
        else:
            shown = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        return mark(shown) if mark else shown

    text = str(text)
    pattern = control_pattern(newlines)
    if not invisible:
        return pattern.sub(lambda match: escape(match.group()), text)
    import unicodedata
    return "".join(escape(c) if pattern.match(c) or (c != " " and unicodedata.category(c) in INVISIBLE) else c
                   for c in text)


def control_pattern(newlines=True):
    """CONTROL (newlines=True) or LINE_CONTROL, the compiled patterns of the characters printable() escapes;
    compiled at first use (see the imports above)."""
    name = "CONTROL" if newlines else "LINE_CONTROL"
    if name not in globals():
        import re
        globals()[name] = re.compile(CONTROL_CHARACTERS if newlines else LINE_CONTROL_CHARACTERS)
    return globals()[name]


SHOWN_VALUE = 40  # the most characters of a value a message quotes back (a setting, a command's word)


def quoted(value):
    """A value someone set, quoted in a message as Python would write it, cut to SHOWN_VALUE characters: an
    environment variable or a session's word of 100 kB is not echoed whole."""
    text = str(value)
    return repr(text[:SHOWN_VALUE]) + ("..." if len(text) > SHOWN_VALUE else "")


# ---------------------------------------------------------------------------
# How a program ends: one line on stderr and an exit status
# ---------------------------------------------------------------------------

REQUIRED = frozenset({"numpy", "tiktoken", "requests", "tqdm", "threadpoolctl"})  # requirements.txt's the programs import


def interrupt_quietly():
    """Until run() starts main(): Ctrl-C while a script loads ends it with one line, not a traceback.
    From then on, a package of requirements.txt that is not installed is one line too (missing_package).

    The process ends at once (os._exit): an exception raised in the middle of an import can be
    caught and turned into another by the module being imported (NumPy's does), and nothing
    has been written yet that would need cleaning up."""
    signal.signal(signal.SIGINT, lambda signum, frame: exit_now("interrupted", 130))
    sys.excepthook = missing_package


def missing_package(error_type, error, trace):
    """sys.excepthook: a package of requirements.txt that is not installed (the set-up's pip install skipped, or
    another Python run) is one line saying what to run, whenever it is first imported. Any other exception that
    reaches it is a bug, and keeps Python's traceback; so do a module missing inside an installed package (a typo:
    `import numpy.lnalg` names numpy.lnalg, where a package not installed is named itself, numpy, whatever was
    imported from it) and an import that failed while another exception was handled (the one line would lose
    that exception). Python exits with status 1 after either."""
    if isinstance(error, ModuleNotFoundError) and error.name in REQUIRED and error.__context__ is None:
        python = printable(sys.executable, newlines=False)
        sys.stderr.write(f"error: the package {error.name} is not installed for this Python ({python}): "
                         f"pip install -r requirements.txt\n")
        return
    sys.__excepthook__(error_type, error, trace)


def exit_now(message, code):
    try:
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or gone: the exit status says it
        pass
    os._exit(code)


def __getattr__(name):
    """errors.Parser, made at its first use: argparse is imported then, after the script's interrupt_quietly(),
    so that a Ctrl-C while it loads is one line too (this module is the one a script imports before that); and
    errors.CONTROL and errors.LINE_CONTROL, compiled at first use (control_pattern)."""
    if name in ("CONTROL", "LINE_CONTROL"):
        return control_pattern(newlines=name == "CONTROL")
    if name != "Parser":
        raise AttributeError(f"module 'errors' has no attribute {name!r}")
    import argparse

    class Parser(argparse.ArgumentParser):
        """argparse's parser, whose errors are one line (the script's name and --help), not a usage dump."""
        def error(self, message):
            fail(f"{message} (see {self.prog} --help)", code=2)

    globals()["Parser"] = Parser
    return Parser


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
    replace_what_stdout_cannot_encode()
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


def replace_what_stdout_cannot_encode():
    """A character the encoding of stdout has no bytes for (PYTHONIOENCODING=ascii, a Latin-1 terminal: a prompt's
    é, a generated 日) is written as ?, as stderr writes it as an escape: never a UnicodeEncodeError halfway through
    the text."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")


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
