"""The downloader (weights/download.py, python download_weights.py) against a stand-in hub on 127.0.0.1 (tests/download_server.py).

The server is reached through HF_ENDPOINT, as a mirror would be. Besides the
happy paths, each way a server, a network, a disk or a second download can go
wrong has a test named after it: what arrives is stored only when it is the
file announced, a partial download is kept for resuming whenever it can be,
and every failure is one clear DownloadError.
"""

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import urllib3

import download_server
from fixtures import ROOT, tiny_config, write_tiny_bpe
from weights import download as download_weights
from weights import http
from weights.download import DownloadError, download

def tiny_files():
    """config.json, vocab.json and merges.txt as the loader checks them (the tests' tiny BPE), and a safetensors file."""
    folder = tempfile.mkdtemp()
    write_tiny_bpe(folder)
    with open(os.path.join(folder, "vocab.json"), "rb") as f, open(os.path.join(folder, "merges.txt"), "rb") as g:
        vocab, merges = f.read(), g.read()
    shutil.rmtree(folder)
    config = json.dumps(tiny_config()).encode()
    return {"config.json": config, "vocab.json": vocab, "merges.txt": merges,
            "model.safetensors": download_server.safetensors_bytes((3 * download_weights.CHUNK + 12345) // 4)}


FILES = tiny_files()
MODEL = FILES["model.safetensors"]
MIRROR_HINT = "HF_ENDPOINT=https://hf-mirror.com"


@pytest.fixture
def hub(monkeypatch):
    server = download_server.start(FILES)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield server.state
    download_server.stop(server)


def assert_complete(model_dir):
    for name, data in FILES.items():
        with open(os.path.join(model_dir, name), "rb") as f:
            assert f.read() == data, name
    assert sorted(os.listdir(model_dir)) == sorted(FILES)  # no .incomplete or .lock left


def cdn_gets(hub):
    return [r for method, path, r in hub["log"] if method == "GET" and path == "/cdn/model.safetensors"]


def listing(tmp_path):
    return sorted(os.listdir(tmp_path / "gpt2")) if (tmp_path / "gpt2").exists() else []


# --- the happy paths ---------------------------------------------------------

def test_complete_download_follows_the_redirect(hub, tmp_path):
    model_dir = download("gpt2", str(tmp_path))
    assert_complete(model_dir)
    assert ("GET", "/cdn/model.safetensors", None) in hub["log"]
    assert hub["served"] == sum(len(d) for d in FILES.values())


def test_second_run_downloads_nothing(hub, tmp_path):
    download("gpt2", str(tmp_path))
    n_requests = len(hub["log"])
    download("gpt2", str(tmp_path))
    assert len(hub["log"]) == n_requests


def test_dropped_connection_is_resumed_with_range(hub, tmp_path):
    hub["drops"] = 2
    assert_complete(download("gpt2", str(tmp_path)))
    ranges = cdn_gets(hub)
    assert ranges[0] is None and all(r and r.startswith("bytes=") and r != "bytes=0-" for r in ranges[1:])
    assert len(ranges) == 3
    assert hub["served"] == sum(len(d) for d in FILES.values())  # not a byte fetched twice


def test_download_without_read1_still_works(hub, tmp_path, monkeypatch):
    # urllib3 before 2.3 has no HTTPResponse.read1: the download falls back to read.
    monkeypatch.delattr(urllib3.response.HTTPResponse, "read1")
    monkeypatch.delattr(urllib3.response.BaseHTTPResponse, "read1")
    assert_complete(download("gpt2", str(tmp_path)))


def test_partial_file_from_an_earlier_run_is_resumed(hub, tmp_path):
    model_dir = tmp_path / "gpt2"
    model_dir.mkdir()
    (model_dir / "model.safetensors.incomplete").write_bytes(MODEL[:1000])
    download("gpt2", str(tmp_path))
    assert_complete(str(model_dir))
    assert cdn_gets(hub) == ["bytes=1000-"]
    assert hub["served"] == sum(len(d) for d in FILES.values()) - 1000


def test_unknown_model_name(tmp_path):
    with pytest.raises(DownloadError, match="unknown model 'gpt5'"):
        download("gpt5", str(tmp_path))


# --- 1. what arrives is stored only when it is the file announced -------------

def test_html_page_with_status_200_is_never_stored(hub, tmp_path):
    hub["page"] = (b"<!DOCTYPE html><html><body>Please log in to the Wi-Fi</body></html>", "text/html; charset=utf-8")
    with pytest.raises(DownloadError) as e:
        download("gpt2", str(tmp_path))
    assert "config.json" in str(e.value) and "HTML" in str(e.value) and MIRROR_HINT in str(e.value)
    assert listing(tmp_path) == []
    hub["page"] = None  # the portal is gone: the next run fetches the real files
    assert_complete(download("gpt2", str(tmp_path)))


@pytest.mark.parametrize("name", sorted(FILES))
def test_file_that_is_not_what_its_name_says_is_never_stored(hub, tmp_path, name):
    # A mirror answering an error page with status 200 and a neutral Content-Type,
    # announcing neither size nor checksum: only the content itself can tell.
    hub["page"], hub["page_for"] = (b"<html><body>502 Bad Gateway</body></html>\n", "application/octet-stream"), name
    with pytest.raises(DownloadError) as e:
        download("gpt2", str(tmp_path))
    assert str(e.value).startswith(name) and "<html>" in str(e.value) and MIRROR_HINT in str(e.value)
    assert not [f for f in listing(tmp_path) if f.startswith(name)]
    hub["page"] = None
    assert_complete(download("gpt2", str(tmp_path)))


def test_mirror_without_checksums_still_downloads(hub, tmp_path):
    hub["lfs"] = False  # no redirect, no X-Linked-Size or X-Linked-Etag: the content checks alone decide
    assert_complete(download("gpt2", str(tmp_path)))


def test_truncated_safetensors_without_a_checksum_is_never_stored(hub, tmp_path):
    hub["lfs"], hub["files"]["model.safetensors"] = False, MODEL[:len(MODEL) * 2 // 3]  # a mirror's broken copy
    with pytest.raises(DownloadError, match="model.safetensors: what arrived is not a safetensors file .*truncated") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)
    assert not any(f.startswith("model.safetensors") for f in listing(tmp_path))


def test_error_page_shorter_than_the_announced_file_is_never_stored(hub, tmp_path):
    # The HEAD went through to the hub (size and checksum announced); the GET got an error page.
    hub["page"], hub["page_for"], hub["page_methods"] = (b"<html>429 Too Many Requests</html>", "application/octet-stream"), "model.safetensors", ("GET",)
    with pytest.raises(DownloadError, match=f"model.safetensors: the server announced {len(MODEL)} bytes but answers with a body of 34") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)
    assert not any(f.startswith("model.safetensors") for f in listing(tmp_path))


def test_checksum_mismatch_leaves_no_file(hub, tmp_path):
    hub["sha"] = "0" * 64
    with pytest.raises(DownloadError, match="SHA-256 mismatch") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)
    assert not any(f.startswith("model.safetensors") for f in listing(tmp_path))


# --- 2. a body longer than announced -----------------------------------------

def test_body_longer_than_announced_stops_at_the_announced_size(hub, tmp_path):
    hub["endless"] = 96 << 20
    with pytest.raises(DownloadError, match="model.safetensors: .*more than the .* bytes announced"):
        download("gpt2", str(tmp_path))
    # It stopped reading: what the server got out is the file plus what the sockets buffer, not the 96 MB.
    assert hub["served"] < sum(len(d) for d in FILES.values()) + (32 << 20)
    assert not any(f.startswith("model.safetensors") for f in listing(tmp_path))  # no garbage kept


# --- 3. redirects ------------------------------------------------------------

@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_redirect_loop_is_a_clear_error(hub, tmp_path, method):
    hub["loop"] = (method,)
    with pytest.raises(DownloadError, match=f"more than {http.MAX_REDIRECTS} redirects") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)
    assert sum(path == "/cdn/model.safetensors" for _, path, _ in hub["log"]) <= http.MAX_REDIRECTS + 1


# --- 4. a slow drip ----------------------------------------------------------

def test_slow_drip_stalls_with_a_deadline_and_keeps_the_partial(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(http, "STALL_SECONDS", 0.3)
    monkeypatch.setattr(download_weights, "RETRIES", 1)
    hub["drip"] = 0.002  # a byte now and then: the connection never times out, the download never ends
    failure = []
    worker = threading.Thread(target=lambda: failure.append(pytest.raises(DownloadError, download, "gpt2", str(tmp_path))), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the download hung on a slow drip"
    message = str(failure[0].value)
    assert "model.safetensors" in message and "no progress" in message and "resume" in message and MIRROR_HINT in message
    kept = (tmp_path / "gpt2" / "model.safetensors.incomplete").read_bytes()
    assert 0 < len(kept) < len(MODEL) and MODEL.startswith(kept)
    hub["drip"] = 0
    assert_complete(download("gpt2", str(tmp_path)))
    assert cdn_gets(hub)[-1] == f"bytes={len(kept)}-"


# --- 5. two downloads at once ------------------------------------------------

def wait_for(condition, what, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def wait_for_stderr(capsys, text, worker):
    """What the download threads printed on stderr, once it contains text (worker must still be running)."""
    err = []

    def printed():
        assert worker.is_alive(), f"the download ended without printing {text!r}: {''.join(err)}"
        err.append(capsys.readouterr().err)
        return text in "".join(err)

    wait_for(printed, repr(text))
    return "".join(err)


def test_two_downloads_of_the_same_model_at_once_share_the_work(hub, tmp_path):
    hub["gate"] = threading.Event()  # the first download holds halfway through model.safetensors
    logs = [open(tmp_path / f"stderr{i}", "w+") for i in range(2)]
    models_dir = str(tmp_path / "models")
    first = start_cli(logs[0], "gpt2", "--models-dir", models_dir)
    wait_for(lambda: os.path.exists(os.path.join(models_dir, "gpt2", "model.safetensors.incomplete")) or first.poll() is not None,
             "the first download")
    second = start_cli(logs[1], "gpt2", "--models-dir", models_dir)
    wait_for(lambda: "waiting for another download" in (tmp_path / "stderr1").read_text() or second.poll() is not None,
             "the second to wait")
    assert first.poll() is None and second.poll() is None, (tmp_path / "stderr0").read_text() + (tmp_path / "stderr1").read_text()
    hub["gate"].set()
    for process, log in zip((first, second), logs):
        assert process.wait(60) == 0, open(log.name).read()
        log.close()
    assert_complete(os.path.join(models_dir, "gpt2"))
    assert len(cdn_gets(hub)) == 1  # the second found the file done and fetched nothing


@pytest.mark.parametrize("locks", ["os", "fallback"])
def test_two_downloads_in_threads_share_the_work(hub, tmp_path, monkeypatch, capsys, locks):
    if locks == "fallback":  # a platform with neither fcntl nor msvcrt: creating the lock file exclusively is the lock
        monkeypatch.setattr(download_weights, "fcntl", None)
        monkeypatch.setattr(download_weights, "msvcrt", None)
    monkeypatch.setattr(download_weights, "LOCK_POLL", 0.02)
    hub["gate"] = threading.Event()
    results = []
    threads = [threading.Thread(target=lambda: results.append(download("gpt2", str(tmp_path)))) for _ in range(2)]
    threads[0].start()
    wait_for(lambda: os.path.exists(tmp_path / "gpt2" / "model.safetensors.incomplete"), "the first download")
    threads[1].start()
    wait_for_stderr(capsys, "waiting for another download", threads[1])
    hub["gate"].set()
    for t in threads:
        t.join(30)
    assert len(results) == 2
    assert_complete(str(tmp_path / "gpt2"))
    assert len(cdn_gets(hub)) == 1


def test_stale_fallback_lock_says_which_file_to_remove(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(download_weights, "fcntl", None)
    monkeypatch.setattr(download_weights, "msvcrt", None)
    monkeypatch.setattr(download_weights, "LOCK_POLL", 0.02)
    (tmp_path / "gpt2").mkdir()
    lock = tmp_path / "gpt2" / "config.json.lock"
    lock.write_bytes(b"")  # left by a run that was killed
    worker = threading.Thread(target=download, args=("gpt2", str(tmp_path)))
    worker.start()
    err = wait_for_stderr(capsys, "waiting for another download", worker)
    assert f"if none is running, delete {lock}" in err
    lock.unlink()
    worker.join(30)
    assert_complete(str(tmp_path / "gpt2"))


# --- 6. a full disk ----------------------------------------------------------

def fill_disk_after(monkeypatch, n_bytes):
    """Make the downloader's partial files raise ENOSPC once n_bytes have been written to them."""
    real_open, written = download_weights.files.open_for_appending, [0]

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            space = n_bytes - written[0]  # what the disk still takes
            if len(data) > space:
                self.f.write(data[:max(space, 0)])
                written[0] = n_bytes
                raise OSError(errno.ENOSPC, "No space left on device")
            written[0] += len(data)
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(download_weights.files, "open_for_appending", lambda *a, **k: FullDisk(real_open(*a, **k)))
    return real_open


def test_full_disk_keeps_the_partial_for_resuming(hub, tmp_path, monkeypatch):
    small = sum(len(d) for name, d in FILES.items() if name != "model.safetensors")
    real_open = fill_disk_after(monkeypatch, small + 1_500_000)
    with pytest.raises(DownloadError) as e:
        download("gpt2", str(tmp_path))
    partial = tmp_path / "gpt2" / "model.safetensors.incomplete"
    assert str(e.value).startswith("disk full while writing model.safetensors") and f"in {partial}: run the same command again to resume" in str(e.value)
    assert partial.read_bytes() == MODEL[:1_500_000]
    monkeypatch.setattr(download_weights.files, "open_for_appending", real_open)  # room again
    assert_complete(download("gpt2", str(tmp_path)))
    assert cdn_gets(hub)[-1] == "bytes=1500000-"


def test_full_disk_at_the_first_byte_leaves_nothing(hub, tmp_path, monkeypatch):
    fill_disk_after(monkeypatch, 0)
    with pytest.raises(DownloadError, match="disk full"):
        download("gpt2", str(tmp_path))
    assert os.listdir(tmp_path) == []  # nothing to resume: not even the directory is left


# --- 7. sizes the server gets wrong ------------------------------------------

def test_too_large_announced_size_fails_clearly_once(hub, tmp_path):
    # Every size the CDN announces (X-Linked-Size, Content-Length, Content-Range) is a megabyte
    # too large; only its range logic knows the truth (416 past the real end).
    hub["inflate"] = download_weights.CHUNK
    with pytest.raises(DownloadError, match=f"announced {len(MODEL) + download_weights.CHUNK} bytes but its file has {len(MODEL)} ") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)
    assert len(cdn_gets(hub)) == 2  # the whole file, then one request that finds its true end
    assert hub["served"] == sum(len(d) for d in FILES.values())  # no megabyte thrown away and fetched again
    assert not any(f.startswith("model.safetensors") for f in listing(tmp_path))


def test_too_large_content_length_still_finishes(hub, tmp_path):
    hub["inflate_body_length"] = download_weights.CHUNK  # X-Linked-Size is right, the body's Content-Length is not
    assert_complete(download("gpt2", str(tmp_path)))
    assert hub["served"] == sum(len(d) for d in FILES.values())


def test_partial_larger_than_the_file_is_started_over(hub, tmp_path):
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "model.safetensors.incomplete").write_bytes(MODEL + b"\0" * 100)
    assert_complete(download("gpt2", str(tmp_path)))
    assert cdn_gets(hub) == [None]


# --- 8 and 9. HF_ENDPOINT, the mirror and server errors -------------------------

@pytest.mark.parametrize("value, problem", [("ftp://x", "must start with http:// or https://"),
                                            ("huggingface.co", "must start with http:// or https://"),
                                            ("http://127.0.0.1:99999", "port is not a number from 0 to 65535"),
                                            ("http://[::1", "is not a URL"), ("http://", "has no host name")])
def test_bad_hf_endpoint_is_one_line_naming_it(tmp_path, monkeypatch, value, problem):
    # Named as HF_ENDPOINT, never quoted: a value that does not parse may hold a password cut anywhere (issue 43).
    monkeypatch.setenv("HF_ENDPOINT", value)
    with pytest.raises(DownloadError) as e:
        download("gpt2", str(tmp_path))
    message = str(e.value)
    assert message.startswith("HF_ENDPOINT") and problem in message and "\n" not in message
    assert repr(value) not in message and "Port out of range" not in message
    assert os.listdir(tmp_path) == []


def test_404_is_a_clear_error(hub, tmp_path):
    del hub["files"]["merges.txt"]
    with pytest.raises(DownloadError, match=r"not found \(HTTP 404\): .*/merges.txt") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)


def test_server_error_is_a_clear_error(hub, tmp_path):
    hub["files"].clear()
    hub["error"] = 503
    with pytest.raises(DownloadError, match="server error \\(HTTP 503\\)") as e:
        download("gpt2", str(tmp_path))
    assert MIRROR_HINT in str(e.value)


def test_on_the_mirror_the_hint_names_the_hub(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://hf-mirror.com")
    assert "HF_ENDPOINT=https://huggingface.co" in http.mirror_hint()


# --- the command line --------------------------------------------------------

def run_cli(*args, env=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, "download_weights.py"), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)


def start_cli(stderr, *args):
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "download_weights.py"), *args],
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)


def test_cli_downloads(hub, tmp_path):
    r = run_cli("gpt2", "--models-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert_complete(str(tmp_path / "gpt2"))


def test_cli_unknown_name_is_one_line(tmp_path):
    r = run_cli("gpt-7", "--models-dir", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unknown model 'gpt-7'" in r.stderr


def test_cli_without_network_says_how_to_set_a_mirror(tmp_path):
    models_dir = tmp_path / "models"  # not there yet, as in a fresh clone
    r = run_cli("gpt2", "--models-dir", str(models_dir), env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 1
    assert os.listdir(tmp_path) == []  # no empty directory left behind either
    assert "Traceback" not in r.stderr
    assert MIRROR_HINT in r.stderr.strip().splitlines()[-1]


def test_cli_bad_hf_endpoint_is_one_line(tmp_path):
    r = run_cli("gpt2", "--models-dir", str(tmp_path), env={"HF_ENDPOINT": "http://127.0.0.1:99999"})
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: HF_ENDPOINT's port is not a number"), r.stderr
    assert "99999" not in r.stderr


def test_cli_models_dir_that_is_a_file_is_one_line(tmp_path):
    not_a_dir = tmp_path / "models"
    not_a_dir.write_text("I am a file")
    r = run_cli("gpt2", "--models-dir", str(not_a_dir), env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 2  # a flag's value, refused before anything is asked of the server
    assert r.stderr.count("\n") == 1 and str(not_a_dir) in r.stderr and "not a directory" in r.stderr, r.stderr
    assert not_a_dir.read_text() == "I am a file"


def test_cli_help():
    r = run_cli("--help")
    assert r.returncode == 0 and "--models-dir" in r.stdout
    assert MIRROR_HINT in r.stdout and '$env:HF_ENDPOINT="https://hf-mirror.com"' in r.stdout
