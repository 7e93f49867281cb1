"""Download OpenAI's GPT-2 checkpoints from the Hugging Face hub.

    python download_weights.py gpt2 gpt2-large [--models-dir models]    (its command line: app/download.py)

Each model is four files in models/NAME/: config.json, model.safetensors,
vocab.json and merges.txt, fetched from
{HF_ENDPOINT}/openai-community/NAME/resolve/main/FILE. Set HF_ENDPOINT to use
a mirror (the same variable huggingface_hub reads), e.g. from mainland China
HF_ENDPOINT=https://hf-mirror.com.

What a download guarantees:
- A file under its final name is complete. It is written as FILE.incomplete
  and renamed into place (atomically, after an fsync) only once it is what the
  server announced: its size, and its SHA-256 (the hub announces one for
  model.safetensors). A file announced without a checksum must at least have
  the shape of what it is: a JSON object, BPE merges, a safetensors header that
  checkpoint.py reads and the file's bytes match. So an HTML page from a
  captive portal or a broken mirror is never stored.
- Resumable. A download that is interrupted, drops, stalls or fills the disk
  keeps FILE.incomplete, and the next run asks only for the missing bytes (an
  HTTP Range request). Bytes that cannot be the file (more than announced, a
  wrong checksum, the wrong content) are removed instead.
- One downloader per file. FILE.lock, held with an OS lock, makes a second
  download of the same file (another process or thread) wait for the first,
  then find the file done.
- Nothing from the server is trusted. A small file is checked as the loader
  checks it (config.json's keys and types, vocab.json's ids and alphabet,
  merges.txt against that vocabulary) before it is renamed into place; a
  server that is slow to answer has a deadline for its headers
  (HEADERS_SECONDS) and a least rate for its body (STALL_BYTES in
  STALL_SECONDS, weights/http.py); what it says is shown with its control characters escaped;
  and the credentials a URL may carry (HF_ENDPOINT=https://user:password@host)
  are never shown: messages name the host.
- Nothing past its bound is stored: a small file announced or sent bigger than
  the loader would read (weights/reading.py's LIMITS), or weights bigger than
  STORE_LIMITS allows, is refused before a byte past the bound is written.
- A link or anything but a regular file at FILE.incomplete or FILE.lock is
  never followed or written through: the download stops and says to remove it.
- Every failure is one DownloadError naming the file and the problem; those a
  server or the network may cause end with how to switch to a mirror.
"""

import contextlib
import errno
import hashlib
import json
import os
import stat
import sys
import time

import requests
from tqdm import tqdm

from errors import printable
from weights import files, reading
from weights.checkpoint import CheckpointError, load_safetensors, validate_config
from weights.http import (CHUNK, DEFAULT_ENDPOINT, MIRROR, DeadlineAdapter, DownloadError, Interrupted,  # noqa: F401
                          ServerProblem, announced, body_chunks, check_status, content_range, endpoint, host_of, open_url)
from weights.tokenizer import TokenizerError, validate_merges, validate_vocab

try:
    import fcntl  # POSIX file locks
except ImportError:
    fcntl = None
try:
    import msvcrt  # Windows file locks
except ImportError:
    msvcrt = None

MODEL_NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
MODEL_SIZES = {"gpt2": "124M parameters, 548 MB", "gpt2-medium": "355M, 1.5 GB",
               "gpt2-large": "774M, 3.2 GB", "gpt2-xl": "1.56B, 6.4 GB"}
FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
RETRIES = 5              # a dropped or stalled connection is resumed this many times before giving up
LOCK_POLL = 0.5          # seconds between two looks at a lock another download holds
DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
# The most a server may make us store of each file, checked before a byte is written past it: what the
# loader reads whole, as much as it reads (weights/reading.py); the weights, gpt2-xl's 6.4 GB with room.
STORE_LIMITS = {**{name: reading.LIMITS[name] for name in ("config.json", "vocab.json", "merges.txt")},
                "model.safetensors": 8 << 30}


class NotTheFile(ServerProblem):
    """What arrived is not the file announced: its partial download is removed, not resumed."""



def file_url(name, filename):
    return f"{endpoint()}/openai-community/{name}/resolve/main/{filename}"


# ---------------------------------------------------------------------------
# A model: its missing files, one by one
# ---------------------------------------------------------------------------

def download(name, models_dir):
    """Make sure models_dir/name holds all of FILES; return that directory."""
    if name not in MODEL_NAMES:
        raise DownloadError(f"unknown model {name!r}: choose from {', '.join(MODEL_NAMES)}")
    model_dir = os.path.join(models_dir, name)
    todo = [f for f in FILES if not os.path.isfile(os.path.join(model_dir, f))]
    if not todo:
        return model_dir
    urls = {f: file_url(name, f) for f in todo}  # a bad HF_ENDPOINT stops us before anything is made
    for d in (models_dir, model_dir):
        if os.path.lexists(d) and not os.path.isdir(d):
            raise DownloadError(f"{d} is not a directory: choose another --models-dir")
    print(printable(f"downloading {name} ({MODEL_SIZES[name]}) to {model_dir} from {host_of(urls[todo[0]])}"),
          file=sys.stderr)
    made = [d for d in (models_dir, model_dir) if not os.path.isdir(d)]
    os.makedirs(model_dir, exist_ok=True)
    try:
        with requests.Session() as session:
            for scheme in ("http://", "https://"):
                session.mount(scheme, DeadlineAdapter())
            for filename in todo:
                fetch(session, urls[filename], os.path.join(model_dir, filename))
    finally:
        for d in reversed(made):  # failed before the first byte: leave no empty directory behind
            with contextlib.suppress(OSError):  # not empty (a partial kept, another download's files)
                os.rmdir(d)
    return model_dir


def fetch(session, url, dest):
    """Download url to dest: under dest.lock, through dest.incomplete, resumed, verified, renamed."""
    partial = dest + ".incomplete"
    with one_downloader(dest):
        if os.path.isfile(dest):  # another download finished it while this one waited
            return
        if os.path.lexists(partial) and not stat.S_ISREG(os.lstat(partial).st_mode):
            raise DownloadError(f"{partial} is {files.file_type(os.lstat(partial).st_mode)}, not a partial download: "
                                "remove it, then run the same command again")
        try:
            size, sha256 = announced(session, url)
            check_limit(os.path.basename(dest), size, "announced")
            size = fetch_bytes(session, url, partial, size)
            verify(partial, os.path.basename(dest), size, sha256)
        except NotTheFile:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)
            raise
        os.replace(partial, dest)


def fetch_bytes(session, url, partial, size):
    """Bring partial up to the whole file, resuming after drops and stalls; return the file's size."""
    for _ in range(RETRIES + 1):
        try:
            return stream(session, url, partial, size)
        except Interrupted as e:
            reason = e
    name = os.path.basename(partial).removesuffix(".incomplete")
    raise ServerProblem(f"{name}: {reason} ({host_of(url)}, {RETRIES + 1} attempts); {keep_for_resuming(partial)}")


def check_limit(name, size, said):
    """NotTheFile when a server announced or sent more of name than STORE_LIMITS lets us store."""
    limit = STORE_LIMITS[name]
    if size is not None and size > limit:
        what = f"announced {size} bytes" if said == "announced" else f"sent more than {limit} bytes"
        raise NotTheFile(f"{name}: the server {what}, more than a {name} may have ({limit}); nothing of it was kept")


def keep_for_resuming(partial):
    """What to tell the user about a partial download left for the next run (an empty one is removed)."""
    got = files.size_of(partial)
    if not got:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
        return "run the same command again"
    return f"kept the {got} bytes downloaded so far in {partial}: run the same command again to resume"


def stream(session, url, partial, size):
    """Append the missing bytes of url to partial, up to size (None: unknown); return the file's size.

    Raises Interrupted when the connection drops or stalls (what arrived is
    kept) and NotTheFile when the server contradicts what it announced.
    """
    name = os.path.basename(partial).removesuffix(".incomplete")
    offset = files.size_of(partial)
    if size is not None and offset > size:  # longer than the file, so not a beginning of it: start over
        os.remove(partial)
        offset = 0
    if offset and offset == size:  # all there (an earlier run stopped before the check)
        return size
    r = open_url(session, "GET", url, headers={"Range": f"bytes={offset}-"} if offset else {}, stream=True)
    with r:
        offset, size = body_range(r, name, offset, size)
        offset = write_body(r, partial, name, offset, size)
    return offset if size is None else size


def body_range(r, name, offset, size):
    """(where r's body starts in the file, the file's size): checked against what we asked and were told."""
    start, total = content_range(r)
    if r.status_code == 416:  # nothing from offset on: the file ends there, or before
        if size is None and total == offset:
            return offset, offset
        said = f"announced {size} bytes" if size is not None else "announced no size"
        ends = f"its file has {total}" if total is not None else f"it has nothing from byte {offset} on"
        raise NotTheFile(f"{name}: the server {said} but {ends} (HTTP 416 for a Range from byte {offset}); "
                         "removed the partial download")
    check_status(r)
    content_type = r.headers.get("Content-Type", "")
    if "text/html" in content_type:
        raise ServerProblem(f"{name}: {host_of(r.url)} answered with an HTML page ({content_type}), not the file: "
                            "a network that wants a login first, or a broken mirror; nothing was stored")
    if r.status_code == 206:
        if start != offset:
            raise ServerProblem(f"{name}: asked for the bytes from {offset} on, the server sent "
                                f"Content-Range {r.headers.get('Content-Range')!r}")
        return offset, size if size is not None else total
    length = r.headers.get("Content-Length", "")  # a 200: the whole file, whatever the Range asked
    length = int(length) if length.isdigit() else None
    if size is not None and length is not None and length < size:  # too short to be the file: an error page?
        raise NotTheFile(f"{name}: the server announced {size} bytes but answers with a body of {length}; nothing was stored")
    return 0, size if size is not None else length


def write_body(r, partial, name, offset, size):
    """Write r's body to partial from offset on, never past size; return the new offset.

    Raises Interrupted when the body ends before size, NotTheFile when it goes
    past it, and a DownloadError keeping the partial when the disk is full.
    """
    try:
        with files.open_for_appending(partial, fresh=not offset) as f, \
                tqdm(total=size, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=name) as bar:
            for chunk in body_chunks(r, None if size is None else size - offset):
                if size is not None and offset + len(chunk) > size:
                    raise NotTheFile(f"{name}: the server sent more than the {size} bytes announced; removed what arrived")
                check_limit(name, offset + len(chunk), "sent")
                f.write(chunk)
                offset += len(chunk)
                bar.update(len(chunk))
            # On disk before fetch() renames it, as checkpoint.save_safetensors does: a crash
            # must not leave a complete-looking checkpoint with missing data.
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise disk_error(e, partial, size) from None
    if size is not None and offset < size:
        raise Interrupted(f"the response ended at byte {offset} of {size}")
    return offset


def disk_error(error, partial, size):
    """The DownloadError for a write to partial that failed (a full disk, mostly): the bytes on disk stay for resuming."""
    if error.errno in DISK_FULL:
        got = files.size_of(partial)
        needed = f" ({size - got} more bytes needed)" if size is not None else ""
        problem = f"disk full while writing {os.path.basename(partial).removesuffix('.incomplete')}{needed}"
    else:
        problem = f"cannot write {partial} ({error.strerror or error})"
    return DownloadError(f"{problem}; {keep_for_resuming(partial)}")


# ---------------------------------------------------------------------------
# Is it the file? (size, checksum, and the shape of what it is)
# ---------------------------------------------------------------------------

def verify(partial, name, size, sha256):
    """Raise NotTheFile unless partial is what was announced: its size, its SHA-256 where one was
    announced, and the content of what it is, checked as the loader checks it (the weights, where the
    SHA-256 vouches for them, are checked at every load instead)."""
    got = files.size_of(partial)
    if size is not None and got != size:
        raise NotTheFile(f"{name}: got {got} bytes, the server announced {size}; removed it")
    if sha256 is not None:
        if (digest := hash_file(partial, name)) != sha256:
            raise NotTheFile(f"{name}: SHA-256 mismatch (expected {sha256}, got {digest}); removed it")
        if name == "model.safetensors":
            return
    what, check = CONTENT[name]
    try:
        check(partial, os.path.dirname(partial))
    except (ValueError, RecursionError, CheckpointError, TokenizerError, reading.ReadError) as e:
        with open(partial, "rb") as f:
            head = f.read(48)
        problem = str(e).removeprefix(f"{name}: ").removeprefix(f"{partial}: ")
        raise NotTheFile(f"{name}: what arrived is not {what} (checking it: {problem}); it begins {head!r}; removed it") from None


def hash_file(path, name):
    digest = hashlib.sha256()
    with open(path, "rb") as f, tqdm(total=os.path.getsize(path), unit="B", unit_scale=True,
                                     unit_divisor=1024, desc=f"checking {name}", leave=False) as bar:
        while chunk := f.read(CHUNK * 8):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def read_json(path, what):  # as the loader reads it: bounded, strict UTF-8 (json.load on bytes would also take a BOM or UTF-16)
    return json.loads(reading.read_text(path, what))


def check_config(path, model_dir):
    """config.json as the loader reads it: an object with GPT-2's sizes, each of the right type."""
    validate_config("config.json", read_json(path, "config.json"))


def check_vocab(path, model_dir):
    """vocab.json as the tokenizer reads it: ids 0..n-1 once each, every token in GPT-2's byte alphabet."""
    validate_vocab("vocab.json", read_json(path, "vocab.json"))


def check_merges(path, model_dir):
    """merges.txt against the vocab.json beside it (downloaded first): each line a merge of that vocabulary."""
    text = reading.read_text(path, "merges.txt")
    vocab_path = os.path.join(model_dir, "vocab.json")
    if not os.path.isfile(vocab_path):
        raise ValueError("vocab.json, which it is checked against, is missing")
    vocab = read_json(vocab_path, "vocab.json")
    validate_vocab("vocab.json", vocab)  # checked when it arrived, but it may have changed since
    validate_merges("merges.txt", text, vocab)


def check_safetensors(path, model_dir):
    """checkpoint.py's own reading: the header parses and its tensors lie within the file (mapped, not read)."""
    load_safetensors(path)


CONTENT = {"config.json": ("GPT-2's config.json", check_config), "vocab.json": ("GPT-2's vocab.json", check_vocab),
           "merges.txt": ("the merges of that vocabulary", check_merges),
           "model.safetensors": ("a safetensors file", check_safetensors)}


# ---------------------------------------------------------------------------
# One downloader per file: dest.lock
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def one_downloader(dest):
    """Hold dest.lock for the body: a second download of dest (process or thread) waits here for the first."""
    path = dest + ".lock"
    lock = try_lock(path)
    if lock is None:
        stale = f"; if none is running, delete {path}" if fcntl is None and msvcrt is None else ""
        print(printable(f"waiting for another download of {dest} to finish ({path} is held){stale}"), file=sys.stderr)
        while (lock := try_lock(path)) is None:
            time.sleep(LOCK_POLL)
    try:
        yield
    finally:
        unlock(lock, path)


def try_lock(path):
    """The open lock file at path, holding its lock, or None while another downloader holds it. The file
    object owns its descriptor (reading.open_owned). A link or anything but a regular file at path is never
    opened through: DownloadError."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise DownloadError(f"{path} is {files.file_type(os.lstat(path).st_mode)}, not a lock file: remove it, "
                            "then run the same command again")
    if fcntl is None and msvcrt is None:  # no OS lock here: creating the file is taking the lock
        try:
            return reading.open_owned(path, "xb", files.NOFOLLOW, buffering=0)
        except FileExistsError:
            return None
    while True:
        lock = reading.open_owned(path, "r+b", os.O_CREAT | files.NOFOLLOW, buffering=0)
        try:
            if not stat.S_ISREG(os.fstat(lock.fileno()).st_mode):  # planted between the look and the open
                raise DownloadError(f"{path} is not a lock file: remove it, then run the same command again")
            try:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                else:
                    msvcrt.locking(lock.fileno(), msvcrt.LK_NBLCK, 1)
            except OSError:  # held by another downloader
                lock.close()
                return None
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino:
                    return lock
        except BaseException:
            lock.close()
            raise
        lock.close()  # the holder removed path as we opened it: what we locked guards nothing, try again


def unlock(lock, path):
    # Removed while still held, so that whoever locks the old file next sees it is gone (try_lock).
    with contextlib.suppress(OSError):  # on Windows another waiter may have it open: it stays, harmless
        os.remove(path)
    with lock:  # closing it releases an flock
        if fcntl is None and msvcrt is not None:
            lock.seek(0)
            msvcrt.locking(lock.fileno(), msvcrt.LK_UNLCK, 1)
