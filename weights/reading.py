"""How every file from outside is read: a regular file, of a size bounded for what it is, checked before reading.

A checkpoint directory, a prompts file or SHA256SUMS may be anyone's: a link
to /dev/zero or a device, a FIFO that never ends, a sparse file of gigabytes.
Each is opened without waiting (O_NONBLOCK: opening a FIFO with no writer
would block for ever), looked at through the open file (fstat: what is read
is what was checked, even if the name is swapped meanwhile), and refused in
one line unless it is a regular file within LIMITS for what it is. Then at most
the limit is read, so a file that grows meanwhile is refused too.

Every descriptor the project opens has one owner from the moment it exists:
a file object, made by open() with an opener for the flags open() has no
mode letter for (open_owned). No file's descriptor is closed by hand, so a Ctrl-C
at any moment is a KeyboardInterrupt and closes it once, never a second close
(an OSError "Bad file descriptor", or another thread's file closed instead).

model.safetensors itself is not read but memory-mapped (weights/checkpoint.py,
through map_read_only): its bound is on its header, MAX_HEADER_BYTES there. A
mapped file cut short while in use (cp over it, rsync --inplace) would end the
process at its next read past the new end, by the signal SIGBUS and without a
word: the handler set on the first mapping names the file in one line instead
(on_bus_error). The downloader stores no small file bigger than its limit
(weights/download.py), so what it stores can always be read back.
"""

import contextlib
import mmap
import os
import signal
import stat
import threading
import weakref

from errors import UserError, printable

MB = 1 << 20
# The largest file of each sort that is read whole. Real ones are far smaller: GPT-2's config.json
# is 1 KB, its vocab.json 1 MB, merges.txt 0.5 MB; a limit is what no honest file comes near.
LIMITS = {
    "config.json": 1 * MB,
    "vocab.json": 16 * MB,
    "merges.txt": 16 * MB,
    "SHA256SUMS": 64 << 10,
    "prompts": 4 * MB,
    "record": 64 << 10,  # weights/derived.py's record of a derived file (model.blocked.json): about 500 bytes
    "key": 32,  # weights/derived.py's key (derived.key)
    "plan": 64 << 10,  # workbench/speed/plan.py's plan of how the machine runs a model: about 3 KB
}
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # not on Windows, which has no FIFOs in the file system


class ReadError(UserError):
    """A file from outside that is not a regular file, or bigger than its LIMITS allow."""


def file_type(mode):
    """What a file's st_mode says it is, in words for a message."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a file"


def shown(path):
    return printable(path, newlines=False)


def open_regular(path, limit=None, what="file"):
    """path opened for reading in binary, when it is a regular file (after links) of at most limit
    bytes (None: any size); else ReadError. OSError as open() raises it (missing, unreadable).
    Opened without waiting (O_NONBLOCK: a FIFO with no writer) and checked through the open file."""
    if "\0" in str(path):
        raise ReadError(f"{shown(path)}: a file name cannot hold a NUL byte")
    f = open_owned(path, "rb", NONBLOCK | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"{shown(path)} is {file_type(st.st_mode)}, not a file")
        if limit is not None and st.st_size > limit:
            raise ReadError(f"{shown(path)} has {st.st_size} bytes, more than the {limit} a {what} may have")
        if NONBLOCK:
            os.set_blocking(f.fileno(), True)
        return f
    except BaseException:
        f.close()  # a file object closes its descriptor once, however often it is asked
        raise


def open_owned(path, mode="rb", flags=0, **kwargs):
    """open(path, mode, **kwargs) with these flags added to those of mode (O_NONBLOCK, O_NOFOLLOW, O_EXCL...):
    a file object that owns its descriptor from the moment the descriptor exists.

    open() calls the opener, which is Python: a Ctrl-C landing between os.open and the opener's return
    would lose the descriptor. So Ctrl-C is held back for the open (interrupts_held) and delivered once
    the file object holds it. Delivered there, it would take the file object from the caller: so the file
    is closed at once, and a file this call made ("x" in mode: created fresh, a temporary file) removed,
    so that a Ctrl-C never leaves behind a file that no one will remove."""
    def opener(name, mode_flags):
        return os.open(name, mode_flags | flags, 0o666)

    f = None
    try:
        with interrupts_held():
            f = open(path, mode, opener=opener, **kwargs)
    except BaseException:
        if f is not None:  # opened, then the held Ctrl-C: no caller will ever hold f
            f.close()
            if "x" in mode:
                with contextlib.suppress(OSError):
                    os.remove(path)
        raise
    return f


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C held back for the body, then delivered as it would have been: for the few steps between a
    descriptor's making and its owner's. Python runs signal handlers in the main thread only, where this
    swaps the handler; in another thread (or under a handler set outside Python) the body runs as it is."""
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:  # no signals here (an interpreter without them)
        previous = None
    if previous is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and callable(previous):
            previous(signal.SIGINT, held[0])  # default_int_handler raises KeyboardInterrupt here, after the body
        elif held and previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def read_bytes(path, what):
    """The bytes of the regular file at path, at most LIMITS[what] of them; else ReadError."""
    limit = LIMITS[what]
    with open_regular(path, limit, what) as f:
        # As many bytes as the file has, then what it grew by since, never past the limit:
        # a read of the whole limit at once would allocate it for a file of a kilobyte.
        data = [f.read(os.fstat(f.fileno()).st_size + 1)]
        total = len(data[0])
        while total <= limit and (chunk := f.read(min(1 << 16, limit + 1 - total))):
            data.append(chunk)
            total += len(chunk)
    if total > limit:  # it grew after the check
        raise ReadError(f"{shown(path)} has more than the {limit} bytes a {what} may have")
    return b"".join(data)


def read_text(path, what):
    """The UTF-8 text of the regular file at path, at most LIMITS[what] bytes; ReadError, or
    UnicodeDecodeError (a ValueError) when it is not UTF-8."""
    return read_bytes(path, what).decode("utf-8")


# ---------------------------------------------------------------------------
# Mapped files: a file cut short under a mapping is one line, not a bus error
# ---------------------------------------------------------------------------

_mapped = []  # (path, weak reference to its mmap, the size it had when mapped) of every file mapped
_bus_handler = []  # the handler once set (kept alive: the C library calls it)


def map_read_only(f, path):
    """The open regular file f (named path in messages) mapped read-only, and watched: if the file is cut short
    while mapped, reading a page past its new end raises SIGBUS in whatever code reads it (NumPy, the BLAS),
    which kills the process without a word; on_bus_error names the file and exits instead."""
    pages = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    _mapped[:] = [entry for entry in _mapped if entry[1]() is not None]  # mappings since freed
    _mapped.append((path, weakref.ref(pages), len(pages)))
    watch_bus_errors()
    return pages


def watch_bus_errors():
    """Set on_bus_error as the handler of SIGBUS, once (POSIX, through ctypes: Python's own signal handlers
    run between bytecodes, but a bus error happens inside C code, which would fault again at once).
    Where it cannot be set, a bus error stays the system's."""
    if _bus_handler or not hasattr(signal, "SIGBUS"):
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(on_bus_error)
        libc.signal.restype, libc.signal.argtypes = ctypes.c_void_p, (ctypes.c_int, ctypes.c_void_p)
        libc.signal(signal.SIGBUS, ctypes.cast(handler, ctypes.c_void_p))
        _bus_handler.append(handler)
    except (ImportError, OSError, AttributeError):  # no ctypes, no C library to ask
        pass


def on_bus_error(signum):
    """SIGBUS: one line naming the mapped file that is now shorter than when it was mapped, and exit 1 (or, with
    no such file, a line saying what happened, and the signal's usual status). Runs inside the signal: it only
    looks at the mappings, writes and leaves."""
    cut = []
    for path, pages, size in list(_mapped):
        try:
            mapping = pages()
            if mapping is not None and mapping.size() < size:  # size(): the file's size now, through its descriptor
                cut.append(path)
        except (OSError, ValueError):  # closed meanwhile
            continue
    if cut:
        message = (f"error: {shown(cut[0])} was cut short while this program was reading it (copied over, or written "
                   "in place, by another program?): run the command again")
    else:
        message = "error: bus error (SIGBUS): a memory-mapped file changed under this program, or the memory failed"
    with contextlib.suppress(OSError):
        os.write(2, (message + "\n").encode("utf-8", "replace"))
    os._exit(1 if cut else 128 + signum)
