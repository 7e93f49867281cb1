"""Files written whole or not at all: a temporary file beside the target, then one rename.

A reader (another run, a browser, a spreadsheet) sees the old file or the new one,
never half of one. Each writer gets its own temporary name (the process id and
random letters, created with O_EXCL), so two writers never write into one file.
"""

import contextlib
import os
import secrets


def temp_file(path, mode="wb"):
    """(an open file, its name) beside path, for this writer alone; os.replace(name, path) when done."""
    name = f"{path}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})), name


@contextlib.contextmanager
def replacing(path, mode="wb", durable=False):
    """An open file that becomes path when the block ends without an error (flushed to
    disk first when durable: a crash then never leaves a complete-looking file with
    missing data). On any error, Ctrl-C included, the old file stays and the
    temporary one is removed."""
    f, name = temp_file(path, mode)
    try:
        with f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(name)
        raise


def write_text(path, text):
    """Write text (UTF-8) to path atomically; on failure the old file stays and no temporary one is left."""
    with replacing(path, "w") as f:
        f.write(text)


def why_not_writable(path):
    """Why a file cannot be written at path, said before a long run rather than after it; or None."""
    if not path:
        return "needs a file name"
    if os.path.isdir(path):
        return f"{path} is a directory: give a file name"
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return f"{path}: its directory does not exist"
    return None
