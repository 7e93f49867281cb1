"""What every command-line entry point here shares: one-line errors, no tracebacks.

A user who mistypes a flag or has no network should see one clear line on
stderr and a non-zero exit, not a usage dump or a Python traceback. Errors we
expect (bad input, missing files, the network) are exceptions listed in
USER_ERRORS; anything else is a bug and keeps its traceback.
"""

import argparse
import sys


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own: usage + message; ours: one line
        fail(f"{message} (see {self.prog} --help)", code=2)


def fail(message, code=1):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run(main, user_errors):
    """Call main(); turn the expected exceptions into one line on stderr."""
    try:
        return main()
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    except BrokenPipeError:  # `... | head`: the reader has gone, stop quietly
        sys.stderr.close()
        sys.exit(1)
    except user_errors as e:
        fail(str(e))
