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
  the shape of its kind: a JSON object, BPE merges, a safetensors header that
  checkpoint.py reads and the file's bytes match. So an HTML page from a
  captive portal or a broken mirror is never stored.
- Resumable. A download that is interrupted, drops, stalls or fills the disk
  keeps FILE.incomplete, and the next run asks only for the missing bytes (an
  HTTP Range request). Bytes that cannot be the file (more than announced, a
  wrong checksum, the wrong kind of content) are removed instead.
- One downloader per file. FILE.lock, held with an OS lock, makes a second
  download of the same file (another process or thread) wait for the first,
  then find the file done.
- Every failure is one DownloadError naming the file and the problem; those a
  server or the network may cause end with how to switch to a mirror.
"""

import contextlib
import errno
import hashlib
import json
import os
import re
import sys
import time
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from tqdm import tqdm

from errors import UserError
from weights.checkpoint import CheckpointError, load_safetensors

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
DEFAULT_ENDPOINT = "https://huggingface.co"
MIRROR = "https://hf-mirror.com"  # the mirror widely used from mainland China
CHUNK = 1 << 20          # bytes read at a time, from the network and when hashing
RETRIES = 5              # a dropped or stalled connection is resumed this many times before giving up
CONNECT_TIMEOUT = 10     # seconds to connect
STALL_SECONDS = 60       # a connection that brings fewer than STALL_BYTES in this many seconds has stalled
STALL_BYTES = 1 << 16
MAX_REDIRECTS = 10
LOCK_POLL = 0.5          # seconds between two looks at a lock another download holds
DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


class DownloadError(UserError):
    """A download that cannot be completed; the message says what to do."""


class ServerProblem(DownloadError):
    """A failure the server or the network may cause: the message ends with how to use a mirror."""

    def __init__(self, message):
        super().__init__(f"{message}; {mirror_hint()}")


class NotTheFile(ServerProblem):
    """What arrived is not the file announced: its partial download is removed, not resumed."""


class Interrupted(Exception):
    """A connection that dropped or stalled mid-download: fetch() resumes from what is on disk."""


def mirror_hint():
    """The last words of every error a server or the network may cause."""
    if "hf-mirror.com" in os.environ.get("HF_ENDPOINT", ""):
        return f"to use the hub itself: HF_ENDPOINT={DEFAULT_ENDPOINT}"
    return f"to use a mirror: HF_ENDPOINT={MIRROR}"


def endpoint():
    """HF_ENDPOINT, checked, without a trailing slash (read at each call: a change after import counts)."""
    value = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    try:
        parts = urlsplit(value)
        parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as e:
        raise DownloadError(f"HF_ENDPOINT={value!r} is not a URL: {e} (e.g. HF_ENDPOINT={MIRROR})") from None
    if parts.scheme not in ("http", "https"):
        raise DownloadError(f"HF_ENDPOINT={value!r} must start with http:// or https:// (e.g. HF_ENDPOINT={MIRROR})")
    if not parts.hostname:
        raise DownloadError(f"HF_ENDPOINT={value!r} has no host name (e.g. HF_ENDPOINT={MIRROR})")
    return value.rstrip("/")


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
        if os.path.exists(d) and not os.path.isdir(d):
            raise DownloadError(f"{d} is not a directory: choose another --models-dir")
    print(f"downloading {name} ({MODEL_SIZES[name]}) to {model_dir}", file=sys.stderr)
    made = [d for d in (models_dir, model_dir) if not os.path.isdir(d)]
    os.makedirs(model_dir, exist_ok=True)
    try:
        with requests.Session() as session:
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
        try:
            size, sha256 = announced(session, url)
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
    raise ServerProblem(f"{name}: {reason} ({urlsplit(url).netloc}, {RETRIES + 1} attempts); {keep_for_resuming(partial)}")


def keep_for_resuming(partial):
    """What to tell the user about a partial download left for the next run (an empty one is removed)."""
    got = os.path.getsize(partial) if os.path.exists(partial) else 0
    if not got:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
        return "run the same command again"
    return f"kept the {got} bytes downloaded so far in {partial}: run the same command again to resume"


# ---------------------------------------------------------------------------
# One file: what the server announces, then its bytes
# ---------------------------------------------------------------------------

def announced(session, url):
    """(size, sha256) the server announces for url, either may be None.

    The hub answers a large (LFS) file with a redirect to its CDN, carrying
    X-Linked-Size and X-Linked-Etag (the SHA-256 of the content); so we follow
    the redirects ourselves (open_url) and read the headers of every step.
    """
    r = open_url(session, "HEAD", url)
    check_status(r)
    size = sha256 = None
    for step in r.history + [r]:
        linked = step.headers.get("X-Linked-Etag", "").removeprefix("W/").strip('"').lower()
        if re.fullmatch("[0-9a-f]{64}", linked):
            sha256 = linked
        if step.headers.get("X-Linked-Size", "").isdigit():
            size = int(step.headers["X-Linked-Size"])
    if size is None and r.headers.get("Content-Length", "").isdigit():
        size = int(r.headers["Content-Length"])
    return size, sha256


def stream(session, url, partial, size):
    """Append the missing bytes of url to partial, up to size (None: unknown); return the file's size.

    Raises Interrupted when the connection drops or stalls (what arrived is
    kept) and NotTheFile when the server contradicts what it announced.
    """
    name = os.path.basename(partial).removesuffix(".incomplete")
    offset = os.path.getsize(partial) if os.path.exists(partial) else 0
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
        raise ServerProblem(f"{name}: {urlsplit(r.url).netloc} answered with an HTML page ({content_type}), not the file: "
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


def content_range(r):
    """(first byte, file size) from a Content-Range such as 'bytes 100-199/200' or 'bytes */200'; None where absent."""
    match = re.fullmatch(r"bytes (?:(\d+)-\d+|\*)/(\d+|\*)", r.headers.get("Content-Range", "").strip())
    if not match:
        return None, None
    start, total = match.groups()
    return (int(start) if start else None), (int(total) if total != "*" else None)


def write_body(r, partial, name, offset, size):
    """Write r's body to partial from offset on, never past size; return the new offset.

    Raises Interrupted when the body ends before size, NotTheFile when it goes
    past it, and a DownloadError keeping the partial when the disk is full.
    """
    try:
        with open(partial, "ab" if offset else "wb") as f, \
                tqdm(total=size, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=name) as bar:
            for chunk in body_chunks(r, None if size is None else size - offset):
                if size is not None and offset + len(chunk) > size:
                    raise NotTheFile(f"{name}: the server sent more than the {size} bytes announced; removed what arrived")
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


def body_chunks(r, room):
    """The pieces of r's body as they arrive; room: the bytes still expected (None: unknown).

    Raises Interrupted when the connection drops, or brings fewer than
    STALL_BYTES in STALL_SECONDS (a slow drip is a stall too). Once room bytes
    have come, a server that hangs up or goes quiet has sent the whole file,
    even if its Content-Length promised more.
    """
    # read1 (urllib3 2.3+) returns what has arrived, so the deadline is checked between arrivals;
    # an older urllib3 only has read, which waits for a whole CHUNK.
    read = getattr(r.raw, "read1", r.raw.read)
    deadline, since = time.monotonic() + STALL_SECONDS, 0
    while True:
        try:
            chunk = read(CHUNK)
        except (urllib3.exceptions.HTTPError, OSError) as e:
            if room == 0:
                return
            stalled = isinstance(e, urllib3.exceptions.ReadTimeoutError)
            raise Interrupted(f"no progress for {STALL_SECONDS:g} s" if stalled else "the connection dropped") from None
        if not chunk:
            return
        yield chunk
        room = None if room is None else room - len(chunk)
        since += len(chunk)
        if since >= STALL_BYTES:
            deadline, since = time.monotonic() + STALL_SECONDS, 0
        elif time.monotonic() > deadline:
            raise Interrupted(f"no progress for {STALL_SECONDS:g} s")


def disk_error(error, partial, size):
    """The DownloadError for a write to partial that failed (a full disk, mostly): the bytes on disk stay for resuming."""
    if error.errno in DISK_FULL:
        got = os.path.getsize(partial) if os.path.exists(partial) else 0
        needed = f" ({size - got} more bytes needed)" if size is not None else ""
        problem = f"disk full while writing {os.path.basename(partial).removesuffix('.incomplete')}{needed}"
    else:
        problem = f"cannot write {partial} ({error.strerror or error})"
    return DownloadError(f"{problem}; {keep_for_resuming(partial)}")


# ---------------------------------------------------------------------------
# Is it the file? (size, checksum, and the shape of its kind)
# ---------------------------------------------------------------------------

def verify(partial, name, size, sha256):
    """Raise NotTheFile unless partial is what was announced: its size, and its SHA-256;
    where no checksum was announced, at least the shape of its kind."""
    got = os.path.getsize(partial)
    if size is not None and got != size:
        raise NotTheFile(f"{name}: got {got} bytes, the server announced {size}; removed it")
    if sha256 is not None:
        if (digest := hash_file(partial, name)) != sha256:
            raise NotTheFile(f"{name}: SHA-256 mismatch (expected {sha256}, got {digest}); removed it")
        return
    kind, check = CONTENT[name]
    try:
        check(partial)
    except (ValueError, CheckpointError) as e:
        with open(partial, "rb") as f:
            head = f.read(48)
        problem = str(e).removeprefix(f"{partial}: ")
        raise NotTheFile(f"{name}: what arrived is not {kind} (checking it: {problem}); it begins {head!r}; removed it") from None


def hash_file(path, name):
    digest = hashlib.sha256()
    with open(path, "rb") as f, tqdm(total=os.path.getsize(path), unit="B", unit_scale=True,
                                     unit_divisor=1024, desc=f"checking {name}", leave=False) as bar:
        while chunk := f.read(CHUNK * 8):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def check_json_object(path):
    with open(path, "rb") as f:
        if not isinstance(json.load(f), dict):
            raise ValueError("valid JSON, but not an object")


def check_merges(path):
    """GPT-2's merges.txt: a '#version' line, then merge pairs 'a b', one a line."""
    with open(path, encoding="utf-8") as f:
        lines = [f.readline(1000) for _ in range(5)]
    if lines[0].startswith("#version"):
        return
    if not lines[0].strip() or lines[0].startswith("<") or not all(len(line.split()) == 2 for line in lines if line.strip()):
        raise ValueError("neither a '#version' line nor merge pairs")


def check_safetensors(path):
    """checkpoint.py's own reading: the header parses and its tensors lie within the file (mapped, not read)."""
    load_safetensors(path)


CONTENT = {"config.json": ("a JSON object", check_json_object), "vocab.json": ("a JSON object", check_json_object),
           "merges.txt": ("a BPE merges file", check_merges), "model.safetensors": ("a safetensors file", check_safetensors)}


# ---------------------------------------------------------------------------
# HTTP: redirects followed by hand, failures turned into clear messages
# ---------------------------------------------------------------------------

def open_url(session, method, url, headers=None, stream=False):
    """The response at the end of url's redirects (at most MAX_REDIRECTS); its .history lists them, as in requests."""
    history = []
    for _ in range(MAX_REDIRECTS + 1):
        r = send(session, method, url, headers or {}, stream)
        if not r.is_redirect:
            r.history = history
            return r
        r.close()
        history.append(r)
        url = urljoin(url, r.headers["Location"])
    raise ServerProblem(f"{history[0].url}: more than {MAX_REDIRECTS} redirects (a redirect loop?)")


def send(session, method, url, headers, stream):
    """One HTTP request. Failing to connect is Interrupted for a body (fetch() retries), a clear error otherwise."""
    try:
        # identity: the bytes on the wire are the file's, so sizes and ranges mean the same on both
        return session.request(method, url, headers={"Accept-Encoding": "identity", **headers}, stream=stream,
                               timeout=(CONNECT_TIMEOUT, STALL_SECONDS), allow_redirects=False)
    except ValueError as e:  # requests' InvalidURL, MissingSchema, InvalidSchema and urllib3's LocationParseError
        raise ServerProblem(f"cannot request {url}: {e}") from None
    except (requests.ConnectionError, requests.Timeout) as e:
        if stream:
            raise Interrupted(f"cannot reach the server ({type(e).__name__})") from None
        raise ServerProblem(f"cannot reach {urlsplit(url).netloc} ({type(e).__name__}): "
                            "no network? python demo.py makes an offline demo pair") from None


def check_status(r):
    """Raise a clear ServerProblem unless r succeeded."""
    code = r.status_code
    if code == 404:
        raise ServerProblem(f"not found (HTTP 404): {r.url}")
    if code in (401, 403):
        raise ServerProblem(f"access denied (HTTP {code}): {r.url}")
    if code >= 500:
        raise ServerProblem(f"server error (HTTP {code}) for {r.url}; try again later")
    if not 200 <= code < 300:
        raise ServerProblem(f"unexpected answer (HTTP {code} {r.reason}) for {r.url}")


# ---------------------------------------------------------------------------
# One downloader per file: dest.lock
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def one_downloader(dest):
    """Hold dest.lock for the body: a second download of dest (process or thread) waits here for the first."""
    path = dest + ".lock"
    fd = try_lock(path)
    if fd is None:
        stale = f"; if none is running, delete {path}" if fcntl is None and msvcrt is None else ""
        print(f"waiting for another download of {dest} to finish ({path} is held){stale}", file=sys.stderr)
        while (fd := try_lock(path)) is None:
            time.sleep(LOCK_POLL)
    try:
        yield
    finally:
        unlock(fd, path)


def try_lock(path):
    """A file descriptor holding the lock at path, or None while another downloader holds it."""
    if fcntl is None and msvcrt is None:  # no OS lock here: creating the file is taking the lock
        try:
            return os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return None
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:  # held by another downloader
            os.close(fd)
            return None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)  # the holder removed path as we opened it: what we locked guards nothing, try again


def unlock(fd, path):
    # Removed while still held, so that whoever locks the old file next sees it is gone (try_lock).
    with contextlib.suppress(OSError):  # on Windows another waiter may have it open: it stays, harmless
        os.remove(path)
    if fcntl is None and msvcrt is not None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    os.close(fd)  # releases an flock
