"""Download OpenAI's GPT-2 checkpoints from the Hugging Face hub.

    python download_weights.py gpt2 gpt2-large [--models-dir models]

Each model is four files in models/NAME/: config.json, model.safetensors,
vocab.json and merges.txt, fetched from
{HF_ENDPOINT}/openai-community/NAME/resolve/main/FILE. Set HF_ENDPOINT to use
a mirror (the same variable huggingface_hub reads).

Safe to interrupt: a file is written as FILE.incomplete, resumed with an HTTP
Range request on the next run, checked (size, and the SHA-256 the hub announces
for large files) and only then renamed to FILE. A file that exists under its
final name is complete.
"""

import errno
import hashlib
import os
import sys
from urllib.parse import urlsplit

import requests
from tqdm import tqdm

import errors

MODEL_NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
MODEL_SIZES = {"gpt2": "124M parameters, 548 MB", "gpt2-medium": "355M, 1.5 GB",
               "gpt2-large": "774M, 3.2 GB", "gpt2-xl": "1.56B, 6.4 GB"}
FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
CHUNK = 1 << 20
RETRIES = 5        # a dropped connection is resumed this many times before giving up
TIMEOUT = (10, 60)  # seconds to connect, seconds between bytes


class DownloadError(errors.UserError):
    """A download that cannot be completed; the message says what to do."""


def endpoint():
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def file_url(name, filename):
    return f"{endpoint()}/openai-community/{name}/resolve/main/{filename}"


def download(name, models_dir):
    """Make sure models_dir/name holds all of FILES; return that directory."""
    if name not in MODEL_NAMES:
        raise DownloadError(f"unknown model {name!r}: choose from {', '.join(MODEL_NAMES)}")
    model_dir = os.path.join(models_dir, name)
    todo = [f for f in FILES if not os.path.isfile(os.path.join(model_dir, f))]
    if not todo:
        return model_dir
    print(f"downloading {name} ({MODEL_SIZES[name]}) to {model_dir}", file=sys.stderr)
    made = [d for d in (models_dir, model_dir) if not os.path.isdir(d)]
    os.makedirs(model_dir, exist_ok=True)
    try:
        with requests.Session() as session:
            for filename in todo:
                fetch(session, file_url(name, filename), os.path.join(model_dir, filename))
    finally:
        for d in reversed(made):  # failed before the first byte: leave no empty directory behind
            if not os.listdir(d):
                os.rmdir(d)
    return model_dir


def fetch(session, url, dest):
    """Download url to dest through dest.incomplete, resuming and verifying."""
    size, sha256 = announced(session, url)
    partial = dest + ".incomplete"
    for attempt in range(RETRIES + 1):
        try:
            digest = stream(session, url, partial, size)
            break
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError):
            if attempt == RETRIES:
                raise DownloadError(f"the connection to {urlsplit(url).netloc} kept dropping; run again to resume {partial}") from None
    got = os.path.getsize(partial)
    if size is not None and got != size:
        os.remove(partial)
        raise DownloadError(f"{os.path.basename(dest)}: got {got} bytes, the server announced {size}; removed it, run again")
    if sha256 is not None and digest.hexdigest() != sha256:
        os.remove(partial)
        raise DownloadError(f"{os.path.basename(dest)}: SHA-256 mismatch (expected {sha256}, got {digest.hexdigest()}); removed it, run again")
    os.replace(partial, dest)


def announced(session, url):
    """(size, sha256) the server announces for url, either may be None.

    The hub answers a large (LFS) file with a redirect to its CDN, carrying
    X-Linked-Size and X-Linked-Etag (the SHA-256 of the content). So we walk
    the redirects ourselves with HEAD and keep those headers on the way.
    """
    size = sha256 = None
    for _ in range(10):
        r = request(session, "HEAD", url)
        linked = r.headers.get("X-Linked-Etag", "").removeprefix("W/").strip('"')
        if len(linked) == 64 and all(c in "0123456789abcdef" for c in linked.lower()):
            sha256 = linked.lower()
        if "X-Linked-Size" in r.headers:
            size = int(r.headers["X-Linked-Size"])
        if r.is_redirect:
            url = requests.compat.urljoin(url, r.headers["Location"])
            continue
        if size is None and "Content-Length" in r.headers:
            size = int(r.headers["Content-Length"])
        return size, sha256
    raise DownloadError(f"{url}: too many redirects")


def stream(session, url, partial, size):
    """Append the missing bytes of url to partial; return the SHA-256 of the whole file."""
    offset = os.path.getsize(partial) if os.path.exists(partial) else 0
    if size is not None and offset > size:  # not ours to resume: start over
        os.remove(partial)
        offset = 0
    digest = hash_file(partial) if offset else hashlib.sha256()
    if size is not None and offset == size:
        return digest
    r = request(session, "GET", url, headers={"Range": f"bytes={offset}-"} if offset else {}, stream=True)
    with r:
        if r.status_code != 206:  # the server ignored the Range: take it from the start
            offset, digest = 0, hashlib.sha256()
        name = os.path.basename(partial).removesuffix(".incomplete")
        with open(partial, "ab" if offset else "wb") as f, \
                tqdm(total=size, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=name) as bar:
            for chunk in r.iter_content(CHUNK):
                try:
                    f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    f.close()
                    os.remove(partial)
                    raise DownloadError(f"disk full while writing {partial}; free {size and size - offset} bytes and run again") from None
                digest.update(chunk)
                bar.update(len(chunk))
            # On disk before fetch() renames it, as checkpoint.save_safetensors does: a crash
            # must not leave a complete-looking checkpoint with missing data.
            f.flush()
            os.fsync(f.fileno())
    return digest


def hash_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f, tqdm(total=os.path.getsize(path), unit="B", unit_scale=True,
                                     unit_divisor=1024, desc="checking partial download", leave=False) as bar:
        while chunk := f.read(CHUNK * 8):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest


def request(session, method, url, **kwargs):
    """One HTTP request, with the ways it can fail turned into clear messages."""
    try:
        r = session.request(method, url, timeout=TIMEOUT, allow_redirects=False, **kwargs)
    except (requests.ConnectionError, requests.Timeout) as e:
        if method == "GET" and kwargs.get("stream"):
            raise  # mid-download: fetch() resumes
        raise DownloadError(f"cannot reach {urlsplit(url).netloc} ({type(e).__name__}); check the network, "
                            f"or set HF_ENDPOINT to a mirror of {DEFAULT_ENDPOINT}") from None
    if method == "GET" and r.is_redirect:  # follow redirects for the body (to the CDN)
        r.close()
        return request(session, method, requests.compat.urljoin(url, r.headers["Location"]), **kwargs)
    if r.status_code == 404:
        raise DownloadError(f"not found (HTTP 404): {url}")
    if r.status_code in (401, 403):
        raise DownloadError(f"access denied (HTTP {r.status_code}): {url}")
    if r.status_code >= 400:
        raise DownloadError(f"server error (HTTP {r.status_code}) for {url}; try again later or set HF_ENDPOINT to a mirror")
    return r


def main(argv=None):
    parser = errors.Parser(description=__doc__.split("\n\n")[0], epilog="Sizes: " + "; ".join(f"{n}: {s}" for n, s in MODEL_SIZES.items())
                        + f". Set HF_ENDPOINT to use a mirror of {DEFAULT_ENDPOINT}.")
    parser.add_argument("names", nargs="*", default=["gpt2", "gpt2-large"], metavar="NAME",
                        help=f"models to fetch, from {', '.join(MODEL_NAMES)} (default: gpt2 gpt2-large, the CLI's default pair)")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR,
                        help="where models are stored (default: models/ beside this file)")
    args = parser.parse_args(argv)
    for name in args.names:
        if name not in MODEL_NAMES:
            errors.fail(f"unknown model {name!r}: choose from {', '.join(MODEL_NAMES)}", code=2)
    for name in args.names:
        print(download(name, args.models_dir))


if __name__ == "__main__":
    errors.run(main)
