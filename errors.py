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
import unicodedata


class UserError(Exception):
    """An error caused by the input (a file, a flag, the network), not by a bug: one line for the user."""


# C0 and C1 control characters and DEL, but tab and newline; the Unicode controls that reorder
# or hide text (bidirectional marks, embeddings, overrides and isolates, the zero-width space and
# the byte-order mark; not the joiners, which emoji and many scripts need); surrogates, which
# no terminal can be sent (U+DC80..U+DCFF: bytes that did not decode, under surrogateescape).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
LINE_CONTROL = re.compile(CONTROL.pattern.replace("\x0b", "\t\n\x0b"))  # the same, tab, newline and return too
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
    pattern = CONTROL if newlines else LINE_CONTROL
    if not invisible:
        return pattern.sub(lambda match: escape(match.group()), text)
    return "".join(escape(c) if pattern.match(c) or (c != " " and unicodedata.category(c) in INVISIBLE) else c
                   for c in text)


SHOWN_VALUE = 40  # the most characters of a value a message quotes back (a setting, a command's word)


def quoted(value):
    """A value someone set, quoted in a message as Python would write it, cut to SHOWN_VALUE characters: an
    environment variable or a session's word of 100 kB is not echoed whole."""
    text = str(value)
    return repr(text[:SHOWN_VALUE]) + ("..." if len(text) > SHOWN_VALUE else "")
