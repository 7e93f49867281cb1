"""How every file from outside is read: a regular file, of a size bounded for its kind, checked before reading.

A checkpoint directory, a prompts file or SHA256SUMS may be anyone's: a link
to /dev/zero or a device, a FIFO that never ends, a sparse file of gigabytes.
Each is opened without waiting (O_NONBLOCK: opening a FIFO with no writer
would block for ever), looked at through the open file (fstat: what is read
is what was checked, even if the name is swapped meanwhile), and refused in
one line unless it is a regular file within LIMITS for its kind. Then at most
the limit is read, so a file that grows meanwhile is refused too.

model.safetensors itself is not read but memory-mapped (weights/checkpoint.py):
its bound is on its header, MAX_HEADER_BYTES there. The downloader stores no
small file bigger than its kind's limit (weights/download.py), so what it
stores can always be read back.
"""

import os
import stat

from errors import UserError, printable

MB = 1 << 20
# The largest file of each kind that is read whole. Real ones are far smaller: GPT-2's config.json
# is 1 KB, its vocab.json 1 MB, merges.txt 0.5 MB; a limit is what no honest file comes near.
LIMITS = {
    "config.json": 1 * MB,
    "vocab.json": 16 * MB,
    "merges.txt": 16 * MB,
    "SHA256SUMS": 64 << 10,
    "prompts": 4 * MB,
    "model.blocked.json": 64 << 10,  # speed/accelerate.py's record of its converted copy: about 150 bytes
}
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # not on Windows, which has no FIFOs in the file system


class ReadError(UserError):
    """A file from outside that is not a regular file, or bigger than its kind allows."""


def kind_of(mode):
    """What a file's st_mode says it is, in words for a message."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a pipe"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a file"


def shown(path):
    return printable(path, newlines=False)


def open_regular(path, limit=None, kind="file"):
    """path opened for reading in binary, when it is a regular file (after links) of at most limit
    bytes (None: any size); else ReadError. OSError as open() raises it (missing, unreadable)."""
    if "\0" in str(path):
        raise ReadError(f"{shown(path)}: a file name cannot hold a NUL byte")
    fd = os.open(path, os.O_RDONLY | NONBLOCK | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"{shown(path)} is {kind_of(st.st_mode)}, not a file")
        if limit is not None and st.st_size > limit:
            raise ReadError(f"{shown(path)} has {st.st_size} bytes, more than the {limit} a {kind} may have")
        if NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path, kind):
    """The bytes of the regular file at path, at most LIMITS[kind] of them; else ReadError."""
    limit = LIMITS[kind]
    with open_regular(path, limit, kind) as f:
        # As many bytes as the file has, then what it grew by since, never past the limit:
        # a read of the whole limit at once would allocate it for a file of a kilobyte.
        data = [f.read(os.fstat(f.fileno()).st_size + 1)]
        total = len(data[0])
        while total <= limit and (chunk := f.read(min(1 << 16, limit + 1 - total))):
            data.append(chunk)
            total += len(chunk)
    if total > limit:  # it grew after the check
        raise ReadError(f"{shown(path)} has more than the {limit} bytes a {kind} may have")
    return b"".join(data)


def read_text(path, kind):
    """The UTF-8 text of the regular file at path, at most LIMITS[kind] bytes; ReadError, or
    UnicodeDecodeError (a ValueError) when it is not UTF-8."""
    return read_bytes(path, kind).decode("utf-8")
