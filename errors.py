"""What counts as the user's error.

Bad input (a flag, a file, a server, a prompt) must end in one clear line, not
a traceback. Every module that can meet such input raises a subclass of
UserError: GenerationError (decoding.py), CheckpointError, TokenizerError and
DownloadError (weights/), and the command line's own (app/program.py). The
programs in app/ catch UserError and OSError, print one line and exit; any
other exception is a bug and keeps its traceback.
"""


class UserError(Exception):
    """An error caused by the input (a file, a flag, the network), not by a bug: one line for the user."""
