"""HTTP for the downloader: the hub's address, redirects followed by hand, deadlines, and clear failures.

weights/download.py decides what to fetch and whether what arrived is the
file; this module only talks to the server: endpoint() reads HF_ENDPOINT,
announced() asks what a file is (its size and SHA-256), open_url() follows
redirects itself (the hub's answers along the way carry the checksum),
body_chunks() yields a body and notices stalls, and every failure the server
or the network may cause is a ServerProblem whose message ends with how to
switch to a mirror. Messages name a server by its host: the credentials a
URL may carry are never shown.
"""

import contextlib
import os
import re
import socket
import threading
import time
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from errors import UserError

DEFAULT_ENDPOINT = "https://huggingface.co"
MIRROR = "https://hf-mirror.com"  # the mirror widely used from mainland China
CHUNK = 1 << 20          # bytes read at a time, from the network and when hashing
CONNECT_TIMEOUT = 10     # seconds to connect
HEADERS_SECONDS = 60     # seconds from the request to the end of the answer's headers, however they trickle in
STALL_SECONDS = 60       # a connection that brings fewer than STALL_BYTES in this many seconds has stalled
STALL_BYTES = 1 << 16
MAX_REDIRECTS = 10


class DownloadError(UserError):
    """A download that cannot be completed; the message says what to do."""


class ServerProblem(DownloadError):
    """A failure the server or the network may cause: the message ends with how to use a mirror."""

    def __init__(self, message):
        super().__init__(f"{message}; {mirror_hint()}")


class Interrupted(Exception):
    """A connection that dropped or stalled mid-download: fetch() resumes from what is on disk."""


def mirror_hint():
    """The last words of every error a server or the network may cause."""
    if "hf-mirror.com" in os.environ.get("HF_ENDPOINT", ""):
        return f"to use the hub itself: HF_ENDPOINT={DEFAULT_ENDPOINT}"
    return f"to use a mirror: HF_ENDPOINT={MIRROR}"


def endpoint():
    """HF_ENDPOINT, checked, without a trailing slash (read at each call: a change after import counts).
    No part of a value that is refused is shown, nor the parser's words, which quote it: where a
    password holds a / ? or #, the parser cuts the URL inside the password."""
    value = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    example = f"(e.g. HF_ENDPOINT={MIRROR})"
    escape = "in a user name or password, write / ? # @ as %2F %3F %23 %40"
    try:
        parts = urlsplit(value)
    except ValueError:  # a [ without its ], or the other way round
        raise DownloadError(f"HF_ENDPOINT is not a URL {example}; {escape}") from None
    try:
        parts.port
    except ValueError:
        raise DownloadError(f"HF_ENDPOINT's port is not a number from 0 to 65535 {example}; {escape}") from None
    if "@" in parts.path + parts.query + parts.fragment:  # user:pa/ss@host parses, as host "user", path "/ss@host"
        raise DownloadError(f"HF_ENDPOINT has an @ after its host name {example}; {escape}")
    if parts.scheme not in ("http", "https"):
        raise DownloadError(f"HF_ENDPOINT must start with http:// or https:// {example}")
    if not parts.hostname:
        raise DownloadError(f"HF_ENDPOINT has no host name {example}")
    return value.rstrip("/")


def host_of(url):
    """The host (and port) of url, never its credentials: how messages name a server ("?" for no URL at all)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. a redirect to "http://[::1": nothing of it is shown
        return "?"
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or "?"
    return f"{host}:{port}" if port else host


def shown_url(url):
    """url as messages show it: scheme, host and path; no credentials, no query."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "an address that is not a URL"
    return f"{parts.scheme}://{host_of(url)}{parts.path}"


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


def content_range(r):
    """(first byte, file size) from a Content-Range such as 'bytes 100-199/200' or 'bytes */200'; None where absent."""
    match = re.fullmatch(r"bytes (?:(\d+)-\d+|\*)/(\d+|\*)", r.headers.get("Content-Range", "").strip())
    if not match:
        return None, None
    start, total = match.groups()
    return (int(start) if start else None), (int(total) if total != "*" else None)


def body_chunks(r, left):
    """The pieces of r's body as they arrive; left: the bytes still expected (None: unknown).

    Raises Interrupted when the connection drops, or brings fewer than
    STALL_BYTES in STALL_SECONDS (a slow drip is a stall too). Once left bytes
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
            if left == 0:
                return
            stalled = isinstance(e, urllib3.exceptions.ReadTimeoutError)
            raise Interrupted(f"no progress for {STALL_SECONDS:g} s" if stalled else "the connection dropped") from None
        if not chunk:
            return
        yield chunk
        left = None if left is None else left - len(chunk)
        since += len(chunk)
        if since >= STALL_BYTES:
            deadline, since = time.monotonic() + STALL_SECONDS, 0
        elif time.monotonic() > deadline:
            raise Interrupted(f"no progress for {STALL_SECONDS:g} s")


# ---------------------------------------------------------------------------
# HTTP: redirects followed by hand, failures turned into clear messages
# ---------------------------------------------------------------------------

class HeadersLate(ServerProblem):
    """A server whose answer's headers did not all arrive within HEADERS_SECONDS."""


def deadline_connection(base):
    """urllib3's connection class `base`, with a deadline for the answer's headers: requests' read
    timeout is per read, so headers that trickle in a byte at a time would keep it waiting forever.
    When the deadline passes, the socket is shut and the wait ends in HeadersLate."""
    class Connection(base):
        late = False

        def getresponse(self, *args, **kwargs):
            timer = threading.Timer(HEADERS_SECONDS, self.give_up)
            timer.daemon = True
            timer.start()
            try:
                response = super().getresponse(*args, **kwargs)
            except Exception:
                if self.late:
                    raise self.too_late() from None
                raise
            finally:
                timer.cancel()
            if self.late:  # cut off mid-headers, http.client returns what it had: not an answer
                response.close()
                raise self.too_late()
            return response

        def too_late(self):
            return HeadersLate(f"{self.host}:{self.port} sent no complete answer within {HEADERS_SECONDS:g} s "
                               "(its headers trickle in: a broken or overloaded server)")

        def give_up(self):
            self.late = True
            with contextlib.suppress(OSError, AttributeError):
                self.sock.shutdown(socket.SHUT_RDWR)

    return Connection


class DeadlineHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = deadline_connection(urllib3.connection.HTTPConnection)


class DeadlineHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = deadline_connection(urllib3.connection.HTTPSConnection)


class DeadlineAdapter(HTTPAdapter):
    """requests' adapter, its connections (and a proxy's) with the deadline for headers."""
    POOLS = {"http": DeadlineHTTPPool, "https": DeadlineHTTPSPool}

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self.POOLS

    def proxy_manager_for(self, proxy, **kwargs):
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = self.POOLS
        return manager


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
        try:
            url = urljoin(url, r.headers["Location"])
        except ValueError:  # e.g. "http://[::1": the parser's words would quote it
            raise ServerProblem(f"{shown_url(url)} redirects to an address that is not a URL") from None
    raise ServerProblem(f"{shown_url(history[0].url)}: more than {MAX_REDIRECTS} redirects (a redirect loop?)")


def send(session, method, url, headers, stream):
    """One HTTP request. Failing to connect is Interrupted for a body (fetch() retries), a clear error otherwise."""
    try:
        # identity: the bytes on the wire are the file's, so sizes and ranges mean the same on both
        return session.request(method, url, headers={"Accept-Encoding": "identity", **headers}, stream=stream,
                               timeout=(CONNECT_TIMEOUT, STALL_SECONDS), allow_redirects=False)
    except ValueError:  # requests' InvalidURL, MissingSchema, InvalidSchema and urllib3's LocationParseError
        raise ServerProblem(f"cannot request {shown_url(url)}: not a URL it can use") from None
    except (requests.ConnectionError, requests.Timeout) as e:
        if stream:
            raise Interrupted(f"cannot reach the server ({type(e).__name__})") from None
        raise ServerProblem(f"cannot reach {host_of(url)} ({type(e).__name__}): "
                            "no network? python demo.py makes an offline demo pair") from None


def check_status(r):
    """Raise a clear ServerProblem unless r succeeded (the server's words are escaped where they are printed)."""
    code, url = r.status_code, shown_url(r.url)
    if code == 404:
        raise ServerProblem(f"not found (HTTP 404): {url}")
    if code in (401, 403):
        raise ServerProblem(f"access denied (HTTP {code}): {url}")
    if code >= 500:
        raise ServerProblem(f"server error (HTTP {code}) for {url}; try again later")
    if not 200 <= code < 300:
        raise ServerProblem(f"unexpected answer (HTTP {code} {r.reason}) for {url}")
