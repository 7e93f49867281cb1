"""How every file the project writes is written: whole or not at all, and never anything but the file named.

A page (--html), a CSV, the benchmark's results, a checkpoint or its
converted copy, a download: each goes through this module.

  a regular file (or none yet):  a temporary file of this writer's own beside
      it, created fresh (O_EXCL) and never through a link (O_NOFOLLOW),
      flushed to disk when durable, then renamed over the target in one step.
      A reader (another run, a browser, a spreadsheet) sees the old file or
      the new one, never half of one; two writers never share a file.
  a link the user named:  followed to the file it names, which is written as
      above; the link stays a link.
  a character device or a pipe (/dev/null, /dev/stdout, a FIFO):  written in
      place, as `cat > /dev/null` would; never renamed over, so /dev/null stays
      /dev/null.
  anything else (a directory, a socket, a block device):  refused, before the
      work starts (why_not_writable), in one line.

A writer that is killed leaves its temporary file behind; its name carries
the writer's process id, and the next writer in that directory removes the
ones whose process is gone, saying so (remove_stale).
"""

import contextlib
import errno
import os
import re
import secrets
import stat
import sys
import time

from errors import UserError, printable

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows: there links are checked with lstat first
STALE_SECONDS = 24 * 3600  # where a process cannot be asked whether it lives (Windows), a day-old temporary is stale
TEMP = re.compile(r"\.(\d+)-[0-9a-f]{8}\.tmp$")  # NAME.PID-RANDOM.tmp, a writer's temporary file
TEMP_DIR = re.compile(r"^\.writing-(\d+)-")       # .writing-PID-..., a writer's temporary directory


class WriteError(UserError):
    """A target that cannot be written as asked (a directory, a socket, a read-only place)."""


def kind_of(mode):
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a pipe")):
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a file"


def in_place(path):
    """True when path is a character device or a pipe (after links): written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def why_not_writable(path):
    """Why a file cannot be written at path, said before a long run rather than after it; or None."""
    if not path:
        return "needs a file name"
    shown = printable(path, newlines=False)
    real = os.path.realpath(path)
    if os.path.lexists(real):
        mode = os.stat(real).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            return None if os.access(real, os.W_OK) else f"{shown}: cannot write to it (permission denied)"
        if not stat.S_ISREG(mode):
            return f"{shown} is {kind_of(mode)}: give a file name"
        if not os.access(real, os.W_OK):
            return f"{shown} is read-only"
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        return f"{shown}: its directory does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{shown}: cannot write in {printable(folder, newlines=False)} (permission denied)"
    return None


def why_not_a_folder_to_write(path):
    """Why results cannot be written into the directory path (made if missing); or None."""
    shown = printable(path, newlines=False)
    if os.path.lexists(path) and not os.path.isdir(path):
        return f"{shown} is not a directory"
    existing = path
    while not os.path.isdir(existing):  # the nearest directory that exists is where it would be made
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{shown}: cannot write in {printable(existing, newlines=False)} (permission denied)"
    return None


def open_new(name, mode="wb"):
    """A new file at name, for this writer alone: never an existing file, never through a link."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_BINARY", 0), 0o666)
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""}))


def temp_file(path, mode="wb"):
    """(an open file, its name) beside path, for this writer alone; os.replace(name, path) when done."""
    name = f"{path}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    return open_new(name, mode), name


@contextlib.contextmanager
def replacing(path, mode="wb", durable=False):
    """An open file that becomes path when the block ends without an error (flushed to disk
    first when durable: a crash then never leaves a complete-looking file with missing data).
    On any error, Ctrl-C included, the old file stays and the temporary one is removed.

    A link at path is followed (the file it names is replaced, the link stays); a character
    device or a pipe is written in place, never replaced."""
    real = os.path.realpath(path)
    if in_place(real):
        with open(real, mode if "b" in mode else "w", **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        return
    remove_stale(os.path.dirname(real))
    f, name = temp_file(real, mode)
    try:
        with f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(name, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(name)
        raise


def write_text(path, text):
    """Write text (UTF-8) to path, whole or not at all; on failure the old file stays and no temporary one is left."""
    with replacing(path, "w") as f:
        f.write(text)


def open_for_appending(path, fresh):
    """A download's partial file, for adding to it (fresh: emptied first): a regular file or none, never a link."""
    if os.path.islink(path):  # where O_NOFOLLOW does not exist, ask first
        raise WriteError(f"{printable(path, newlines=False)} is a link, not a partial download: remove it")
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW | getattr(os, "O_BINARY", 0) | (os.O_TRUNC if fresh else 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise WriteError(f"{printable(path, newlines=False)} is a link, not a partial download: remove it") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise WriteError(f"{printable(path, newlines=False)} is {kind_of(mode)}, not a partial download: remove it")
    return os.fdopen(fd, "ab")


def size_of(path):
    """The size of the regular file at path, 0 where there is none; a link or anything else is not counted."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


# ---------------------------------------------------------------------------
# What killed writers leave behind
# ---------------------------------------------------------------------------

def process_is_gone(pid):
    """True when no process has this id (POSIX); None where that cannot be asked safely (Windows)."""
    if os.name != "posix":
        return None
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, another user's
        return False
    return False


def remove_stale(folder, log=None):
    """Remove the temporary files and directories in folder whose writer was killed, and say so (on log, else stderr)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = TEMP.search(entry.name) or TEMP_DIR.match(entry.name)
        if not match:
            continue
        with contextlib.suppress(OSError):
            gone = process_is_gone(int(match.group(1)))
            if gone is None:
                gone = time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            if not gone:
                continue
            if entry.is_dir(follow_symlinks=False):
                for inner in os.scandir(entry.path):
                    os.remove(inner.path)
                os.rmdir(entry.path)
            else:
                os.remove(entry.path)
            print(f"note: removed {printable(entry.path, newlines=False)}, left by a run that was stopped "
                  "before it finished", file=log or sys.stderr)


def temp_dir(parent):
    """A new directory in parent for this writer alone (.writing-PID-...), renamed into place when complete."""
    remove_stale(parent)
    name = os.path.join(parent, f".writing-{os.getpid()}-{secrets.token_hex(4)}")
    os.mkdir(name)
    return name
