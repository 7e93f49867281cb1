"""How every file the project writes is written: whole or not at all, and never anything but the file named.

A page (--html), a CSV, the benchmark's results, a checkpoint or its
converted copy, a download: each goes through this module. What is at the
name decides how, and who chose the name:

  a name the project chose (model.blocked.safetensors, suite.md inside --out
  DIR, a demo model's files):  only a regular file, or nothing, is replaced;
      a link, a device, a FIFO, a socket or a directory there is refused in
      one line naming it, never followed or written into, never removed.
  a name the user gave (--html FILE, ablation's --out FILE, the session's
  /html), once why_not_writable has passed it:  a link is followed to the
      file it names, which is replaced (the link stays a link); a character
      device or a pipe (/dev/null, /dev/stdout, a FIFO) is written in place,
      as `cat > /dev/null` would, never renamed over.
  either way, a regular file (or none yet):  a temporary file of this
      writer's own beside it, created fresh (O_EXCL) and never through a link
      (O_NOFOLLOW), flushed to disk when durable, then renamed over the target
      in one step. A reader sees the old file or the new one, never half of
      one; two writers never share a file; the rename replaces a name, never
      writes through it.

A set of files in one directory (bench.py suite's five) is checked together
before the work (why_not_writable_in) and written together (write_together):
all or none replaced. A failed write is an OSError naming the file it was
for (the destination, not a temporary or a source).

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
from weights.reading import kind_of

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows: there links are checked with lstat first
STALE_SECONDS = 24 * 3600  # where a process cannot be asked whether it lives (Windows), a day-old temporary is stale
TEMP = re.compile(r"\.(\d+)-[0-9a-f]{8}\.tmp$")  # NAME.PID-RANDOM.tmp, a writer's temporary file
TEMP_DIR = re.compile(r"^\.writing-(\d+)-")       # .writing-PID-..., a writer's temporary directory


TEMP_SUFFIX_BYTES = len(".4194304-01234567.tmp")  # what temp_file adds to a name (Linux's largest pid)
NAMED = set()  # absolute paths the user named and why_not_writable passed: the only ones written through a link or in place


class WriteError(UserError):
    """A target that cannot be written as asked (a directory, a socket, a read-only place, a link at a name of ours)."""


def shown(path):
    return printable(path, newlines=False)


def name_limits(folder):
    """(the longest file name, the longest path) the file system at folder takes; POSIX's usual where it does not say."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (AttributeError, ValueError, OSError):  # Windows has no pathconf
        return 255, 4096


def why_too_long(path):
    """Why path's name, or the temporary name written beside it, is longer than its file system takes; or None."""
    name_max, path_max = name_limits(os.path.dirname(path) or ".")
    if len(os.fsencode(os.path.basename(path))) + TEMP_SUFFIX_BYTES > name_max:
        return f"{shown(path)}: its name is too long (at most {name_max - TEMP_SUFFIX_BYTES} bytes here)"
    if len(os.fsencode(path)) + TEMP_SUFFIX_BYTES >= path_max:
        return f"{shown(path)}: the path is too long (at most {path_max - TEMP_SUFFIX_BYTES - 1} bytes here)"
    return None


def in_place(path):
    """True when path is a character device or a pipe (after links): written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def why_not_writable(path):
    """Why a file cannot be written at path, the name the user gave, said before a long run rather than
    after it; or None, and from then on path is a name of the user's (NAMED): a link there is followed,
    a device or a pipe written in place."""
    if not path:
        return "needs a file name"
    if "\0" in path:
        return f"{shown(path)}: a file name cannot hold a NUL byte"
    real = os.path.realpath(path)
    if os.path.lexists(real):
        mode = os.stat(real).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            if not os.access(real, os.W_OK):
                return f"{shown(path)}: cannot write to it (permission denied)"
            NAMED.add(os.path.abspath(path))
            return None
        if not stat.S_ISREG(mode):
            return f"{shown(path)} is {kind_of(mode)}: give a file name"
        if not os.access(real, os.W_OK):
            return f"{shown(path)} is read-only"
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        return f"{shown(path)}: its directory does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{shown(path)}: cannot write in {shown(folder)} (permission denied)"
    problem = why_too_long(real)
    if problem is None:
        NAMED.add(os.path.abspath(path))
    return problem


def why_not_a_folder_to_write(path):
    """Why results cannot be written into the directory path (made if missing); or None."""
    if not path:
        return "needs a directory name"
    if "\0" in path:
        return f"{shown(path)}: a directory name cannot hold a NUL byte"
    if os.path.lexists(path) and not os.path.isdir(path):
        return f"{shown(path)} is not a directory"
    existing = path
    while not os.path.isdir(existing):  # the nearest directory that exists is where it would be made
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{shown(path)}: cannot write in {shown(existing)} (permission denied)"
    return None


def why_not_ours_to_replace(path):
    """Why the project may not write its own file at path, a name it chose: anything there but a
    regular file (a link, a device, a FIFO, a socket, a directory), or a read-only file; or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return f"{shown(path)} is {kind_of(st.st_mode)}, not a file this program wrote: remove it, or write elsewhere"
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):  # the mode bits: root's access() says yes to all
        return f"{shown(path)} is read-only"
    return None


def why_not_writable_in(folder, names):
    """Why the files names cannot all be written into the directory folder (made if missing), said
    before the work: the folder's problem, or the first name's; or None."""
    problem = why_not_a_folder_to_write(folder)
    for name in names:
        problem = problem or why_not_ours_to_replace(os.path.join(folder, name)) or \
            why_too_long(os.path.join(os.path.abspath(folder), name))
    return problem


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

    At a name the user gave (NAMED) a link is followed (the file it names is replaced, the link
    stays) and a character device or a pipe is written in place, never replaced. At any other
    name, anything but a regular file is a WriteError. A failure is an OSError naming path."""
    try:
        if os.path.abspath(path) in NAMED:
            real = os.path.realpath(path)
            if in_place(real):
                with open(real, mode if "b" in mode else "w", **({} if "b" in mode else {"encoding": "utf-8"})) as f:
                    yield f
                return
        else:
            real = path
            problem = why_not_ours_to_replace(real)
            if problem:
                raise WriteError(problem)
        remove_stale(os.path.dirname(real))
        f, name = temp_file(real, mode)
        try:
            with f:
                yield f
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(name, real)  # replaces the name: whatever was planted there meanwhile is not written into
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(name)
            raise
    except OSError as e:
        if e.filename is None or str(e.filename).endswith(".tmp"):  # a write's error names no file, or our temporary one
            raise OSError(e.errno, e.strerror, path) from None
        raise


def write_together(folder, writers):
    """Write a set of files into folder (made if missing): writers is {name: write(path)}, each
    writing its file at the path it is given. Checked first (why_not_writable_in); each writer
    writes a temporary file of its own, and only when all have succeeded are they renamed into
    place; if a rename fails, the files already replaced get their old contents back. So folder
    holds the old set or the new one, never a mix (where hard links exist: see SECURITY.md)."""
    problem = why_not_writable_in(folder, writers)
    if problem:
        raise WriteError(problem)
    os.makedirs(folder, exist_ok=True)
    remove_stale(folder)
    targets = {name: os.path.join(folder, name) for name in writers}
    temps, saved, replaced = {}, {}, []
    try:
        for name, write in writers.items():
            f, temps[name] = temp_file(targets[name])
            f.close()
            write(temps[name])
        for name, target in targets.items():  # the old files kept under a second name until all new ones are in
            if os.path.lexists(target):
                saved[name] = f"{target}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
                with contextlib.suppress(OSError):  # no hard links here: no way back, but still whole files
                    os.link(target, saved[name], follow_symlinks=False)
        try:
            for name, target in targets.items():
                problem = why_not_ours_to_replace(target)  # planted since the check
                if problem:
                    raise WriteError(problem)
                os.replace(temps[name], target)
                replaced.append(name)
        except BaseException:
            for name in replaced:
                with contextlib.suppress(OSError):
                    if os.path.exists(saved.get(name, "")):
                        os.replace(saved[name], targets[name])
                    else:
                        os.remove(targets[name])
            raise
    finally:
        for leftover in [*temps.values(), *saved.values()]:
            with contextlib.suppress(OSError):
                os.remove(leftover)


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
