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

A set of files in one directory (workbench.py bench suite's five) is checked together
before the work (why_not_writable_in) and written together (write_together):
all or none replaced. A failed write is an OSError naming the file it was
for (the destination, not a temporary or a source).

A replaced file keeps the mode (and, where the system allows, the owner) of
the file it replaces: a 0600 page stays 0600. A link on the way to a name the
user gave is not followed where Linux's protected_symlinks would not follow it
(another user's link in a sticky directory anyone may write, such as /tmp).

A writer that is killed leaves its temporary file behind, named
.speculative-gpt2-PID-RANDOM.tmp (TEMP: a name no user would choose), and the
next writer in that directory removes the ones whose process is gone, saying
so (remove_stale). Nothing is removed by a run that only reads, and no name
but TEMP's is ever taken for a temporary file.
"""

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import sys
import time

from errors import UserError, printable
from weights.reading import file_type, open_owned

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows: there links are checked with lstat first
STALE_SECONDS = 24 * 3600  # where a process cannot be asked whether it lives (Windows), a day-old temporary is stale
# A writer's temporary file or directory: the program's prefix, its process id and 64 random bits.
TEMP = re.compile(r"\.speculative-gpt2-(\d{1,10})-[0-9a-f]{16}\.tmp")  # fullmatch on a name
TEMP_BYTES = len(".speculative-gpt2-2147483647-0123456789abcdef.tmp")  # the longest temporary name
MAX_PID = 2 ** 31 - 1  # pid_t is 32 bits: a larger "process id" in a name is no process of ours
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
    folder = os.path.dirname(path)
    name_max, path_max = name_limits(folder or ".")
    if len(os.fsencode(os.path.basename(path))) > name_max:
        return f"{shown(path)}: its name is too long (at most {name_max} bytes here)"
    longest = max(len(os.fsencode(path)), len(os.fsencode(folder)) + 1 + TEMP_BYTES)
    if longest >= path_max:
        return f"{shown(path)}: the path is too long for this file system (at most {path_max - 1} bytes here, " \
               "and its directory's with a temporary name)"
    return None


def in_place(path):
    """True when path is a character device or a pipe (after links): written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


MAX_LINKS = 40  # as Linux's path resolution: more links than this is a loop


def why_link_refused(path):
    """Why a link on the way to path, a name the user gave, must not be followed; or None. Linux's
    protected_symlinks rule, applied here too (Python resolves links itself, where the kernel's rule is
    not asked): a link in a sticky directory anyone may write (/tmp) is followed only when it belongs
    to the user running this program or to the directory's owner. Another user's link there would send
    this program's write wherever the running user may write (root's: anywhere)."""
    if os.name != "posix":  # no link owners to compare (Windows)
        return None
    me, resolved, links = os.geteuid(), "/", 0
    rest = os.path.join(os.getcwd(), path).split("/")  # not normalised: a ".." applies after the links before it
    while rest:
        name = rest.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        step = os.path.join(resolved, name)
        try:
            st = os.lstat(step)
        except OSError:  # not there (yet): nothing further is a link
            resolved = step
            continue
        if not stat.S_ISLNK(st.st_mode):
            resolved = step
            continue
        links += 1
        try:
            folder = os.stat(resolved)
            target = os.readlink(step)
        except OSError:  # unreadable: the write itself will fail, and say why
            return None
        sticky_and_open = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
        if sticky_and_open and st.st_uid not in (me, folder.st_uid):
            where = shown(path) if os.path.abspath(path) == step else f"{shown(path)}: {shown(step)}"
            return (f"{where} is another user's link in {shown(resolved)}, a directory anyone may write: it is not "
                    "followed (as the kernel's protected_symlinks rule)")
        if links > MAX_LINKS:
            return f"{shown(path)}: too many levels of links"
        rest = target.split("/") + rest
        if target.startswith("/"):
            resolved = "/"
    return None


def why_not_writable(path):
    """Why a file cannot be written at path, the name the user gave, said before a long run rather than
    after it; or None, and from then on path is a name of the user's (NAMED): a link there is followed,
    a device or a pipe written in place."""
    if not path:
        return "needs a file name"
    if path == "-":  # not standard output, as many programs take it: a file named - would surprise
        return "- is not a file name here: give one (./- for a file named -)"
    if "\0" in path:
        return f"{shown(path)}: a file name cannot hold a NUL byte"
    problem = why_link_refused(path)
    if problem:
        return problem
    real = os.path.realpath(path)
    if os.path.lexists(real):
        mode = os.stat(real).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            if not os.access(real, os.W_OK):
                return f"{shown(path)}: cannot write to it (permission denied)"
            NAMED.add(os.path.abspath(path))
            return None
        if not stat.S_ISREG(mode):
            return f"{shown(path)} is {file_type(mode)}: give a file name"
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
    """Why results cannot be written into the directory path (made if missing, with its parents); or None."""
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
        return f"{shown(path)} is {file_type(st.st_mode)}, not a file this program wrote: remove it, or write elsewhere"
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):  # the mode bits: root's access() says yes to all
        return f"{shown(path)} is read-only"
    return None


def why_not_writable_in(folder, names):
    """Why the files names cannot all be written into the directory folder (made if missing, in a parent that
    exists: as with a file's name, a typo builds no tree of directories), said before the work: the folder's
    problem, or the first name's; or None."""
    problem = why_not_a_folder_to_write(folder)
    if problem is None and folder and not os.path.isdir(folder) and not os.path.isdir(os.path.dirname(os.path.abspath(folder))):
        problem = f"{shown(folder)}: its parent directory does not exist"
    for name in names:
        problem = problem or why_not_ours_to_replace(os.path.join(folder, name)) or \
            why_too_long(os.path.join(os.path.abspath(folder), name))
    return problem


def open_new(name, mode="wb"):
    """A new file at name, for this writer alone: never an existing file, never through a link. The file
    object owns its descriptor from the start (reading.open_owned)."""
    exclusive = mode.replace("w", "x")  # O_CREAT | O_EXCL
    return open_owned(name, exclusive, NOFOLLOW | getattr(os, "O_BINARY", 0),
                      **({} if "b" in mode else {"encoding": "utf-8", "newline": ""}))


def temp_name(folder):
    """A name in folder for a temporary file or directory of this writer's own (TEMP)."""
    return os.path.join(folder, f".speculative-gpt2-{os.getpid()}-{secrets.token_hex(8)}.tmp")


def is_temporary(name):
    """True when name (a file name, not a path) is a temporary one of this program's writers."""
    return TEMP.fullmatch(name) is not None


def temp_file(path, mode="wb"):
    """(an open file, its name) beside path, for this writer alone; os.replace(name, path) when done."""
    name = temp_name(os.path.dirname(path))
    return open_new(name, mode), name


def keep_mode(fd, target):
    """Give the new file open at fd the mode of the regular file at target that it will replace (and its
    owner and group, where the system allows it): a replaced 0600 file stays 0600. Nothing there: the
    new file keeps the usual mode (0666 less the umask)."""
    try:
        st = os.lstat(target)  # a link here (planted since the check) gives nothing: the rename replaces the link
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or not hasattr(os, "fchmod"):  # Windows: no modes to keep
        return
    os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777)  # not set-user-ID and the like: those are not ours to give
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
        with contextlib.suppress(OSError):  # only root may give a file away; a group of one's own is allowed
            os.fchown(fd, st.st_uid, st.st_gid)


def words_of(e):
    """What an OSError says, never "[Errno None] None": its strerror, else its own message, else its type."""
    return e.strerror or next((a for a in e.args if isinstance(a, str) and a), None) or type(e).__name__


def naming(e, path):
    """The OSError e, naming path (the file the write was for) where it names no file or a temporary one of ours."""
    if e.filename is None or is_temporary(os.path.basename(str(e.filename))):
        return OSError(e.errno, words_of(e), path)
    return e


@contextlib.contextmanager
def replacing(path, mode="wb", durable=False):
    """An open file that becomes path when the block ends without an error (flushed to disk
    first when durable: a crash then never leaves a complete-looking file with missing data).
    On any error, Ctrl-C included, the old file stays and the temporary one is removed. The
    new file keeps the old one's mode (keep_mode).

    At a name the user gave (NAMED) a link is followed (the file it names is replaced, the link
    stays), unless why_link_refused, and a character device or a pipe is written in place, never
    replaced. At any other name, anything but a regular file is a WriteError. A failure is an
    OSError naming path."""
    try:
        if os.path.abspath(path) in NAMED:
            problem = why_link_refused(path)  # again: a link may have been planted since the check
            if problem:
                raise WriteError(problem)
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
                f.flush()
                keep_mode(f.fileno(), real)
                if durable:
                    os.fsync(f.fileno())
            os.replace(name, real)  # replaces the name: whatever was planted there meanwhile is not written into
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(name)
            raise
    except OSError as e:
        raise naming(e, path) from None


def create_private(path, data):
    """A new file at path holding data (bytes), readable and writable by its owner alone (0600), flushed to disk
    and linked into place whole: FileExistsError when anything is there already (another writer's, just made),
    which stays as it is. For weights/derived.py's key. A failure is an OSError naming path."""
    try:
        remove_stale(os.path.dirname(path) or ".")
        f, name = temp_file(path)
        try:
            with f:
                if hasattr(os, "fchmod"):  # not Windows: no modes there
                    os.fchmod(f.fileno(), 0o600)
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(name, path)  # never replaces: a name already taken, even by a link, is FileExistsError
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links: replaced, unless something is there by now
                if os.path.lexists(path):
                    raise FileExistsError(errno.EEXIST, "File exists", path) from None
                os.replace(name, path)
        finally:
            with contextlib.suppress(OSError):
                os.remove(name)
    except FileExistsError:
        raise
    except OSError as e:
        raise naming(e, path) from None


def write_together(folder, writers):
    """Write a set of files into folder (made if missing, its parent not): writers is {name: write(path)}, each
    writing its file at the path it is given. Checked first (why_not_writable_in); each writer
    writes a temporary file of its own, and only when all have succeeded are they renamed into
    place; if a rename fails, the files already replaced get their old contents back. So folder
    holds the old set or the new one, never a mix (where hard links exist: see SECURITY.md).
    Each new file keeps the mode of the one it replaces; a failure names the file it was for."""
    problem = why_not_writable_in(folder, writers)
    if problem:
        raise WriteError(problem)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)  # in its parent, which why_not_writable_in found: never a tree of them
    remove_stale(folder)
    targets = {name: os.path.join(folder, name) for name in writers}
    temps, saved, replaced = {}, {}, []
    try:
        for name, write in writers.items():
            try:
                f, temps[name] = temp_file(targets[name])
                f.close()
                write(temps[name])
                with open_owned(temps[name], "rb", NOFOLLOW, buffering=0) as written:
                    keep_mode(written.fileno(), targets[name])
            except OSError as e:  # a full disk: the file it was for, never the temporary one
                raise naming(e, targets[name]) from None
            except UserError as e:  # a writer's own error (a page's) quoting the path it was given: the same
                if temps[name] not in str(e):
                    raise
                raise type(e)(str(e).replace(temps[name], targets[name])) from None
        for name, target in targets.items():  # the old files kept under a second name until all new ones are in
            if os.path.lexists(target):
                saved[name] = temp_name(folder)
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
    try:
        f = open_owned(path, "ab", NOFOLLOW | getattr(os, "O_BINARY", 0) | (os.O_TRUNC if fresh else 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise WriteError(f"{printable(path, newlines=False)} is a link, not a partial download: remove it") from None
        raise
    try:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise WriteError(f"{printable(path, newlines=False)} is {file_type(mode)}, not a partial download: remove it")
        return f
    except BaseException:
        f.close()
        raise


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
    """Remove the temporary files and directories in folder (TEMP's names, no other) whose writer was
    killed, and say so (on log, else stderr). Called by writers only, in the directory they write in."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = TEMP.fullmatch(entry.name)
        if not match or not 0 < int(match.group(1)) <= MAX_PID:
            continue
        with contextlib.suppress(OSError):
            gone = process_is_gone(int(match.group(1)))
            if gone is None:
                gone = time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            if not gone:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)  # a directory of a writer's own, made fresh (temp_dir): links in it are not followed
            else:
                os.remove(entry.path)
            print(f"note: removed {printable(entry.path, newlines=False)}, left by a run that was stopped "
                  "before it finished", file=log or sys.stderr)


def temp_dir(parent):
    """A new directory in parent for this writer alone (TEMP's name), renamed into place when complete."""
    remove_stale(parent)
    name = temp_name(parent)
    os.mkdir(name)
    return name
