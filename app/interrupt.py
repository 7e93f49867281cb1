"""Ctrl-C while a program loads: one line, not a traceback. The first thing every entry script does.

Set before anything else is imported: NumPy, the decoders and argparse take tenths of a second to
load, and a Ctrl-C then would print a traceback. So this module imports only the standard library's
os, sys and signal. From app/program.py's run() on, Ctrl-C is handled there.
"""

import os
import signal
import sys


def interrupt_quietly():
    """Until run() starts main(): Ctrl-C while a script loads ends it with one line, not a traceback.

    The process ends at once (os._exit): an exception raised in the middle of an import can be
    caught and turned into another by the module being imported (NumPy's does), and nothing
    has been written yet that would need cleaning up."""
    signal.signal(signal.SIGINT, lambda signum, frame: exit_now("interrupted", 130))


def exit_now(message, code):
    try:
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or gone: the exit status says it
        pass
    os._exit(code)
