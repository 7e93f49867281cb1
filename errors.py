"""What counts as the user's error, and how text from outside is shown.

Bad input (a flag, a file, a server, a prompt) must end in one clear line, not
a traceback. Every module that can meet such input raises a subclass of
UserError: GenerationError (decoding.py), CheckpointError, TokenizerError and
DownloadError (weights/), and the command line's own (app/program.py). The
programs in app/ catch UserError and OSError, print one line and exit; any
other exception is a bug and keeps its traceback.

Text that comes from outside (a server's answer, a file's contents, a path, a
prompt) can hold control characters: an escape sequence printed raw can move
the cursor, recolour or rewrite what the user sees. printable() is the one
place that makes such text safe to show.
"""

import re


class UserError(Exception):
    """An error caused by the input (a file, a flag, the network), not by a bug: one line for the user."""


# C0 and C1 control characters and DEL, but tab and newline; the Unicode controls that reorder
# or hide text (bidirectional marks, embeddings, overrides and isolates, the zero-width space and
# the byte-order mark; not the joiners, which emoji and many scripts need); bytes that did not decode.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\udc80-\udcff]")


def printable(text, newlines=True):
    """text with every control character written as an escape (\\x1b, \\u202e), never sent raw.

    newlines: keep tabs and newlines as they are (False escapes them too, for one-line messages).
    Bytes that did not decode (surrogateescape) show as \\xNN of the byte.
    """
    def escape(match):
        code = ord(match.group())
        if 0xDC80 <= code <= 0xDCFF:
            return f"\\x{code - 0xDC00:02x}"
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    text = str(text)
    if not newlines:
        text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return CONTROL.sub(escape, text)
