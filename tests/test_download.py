"""download_weights against a local HTTP server on 127.0.0.1 that mimics the hub.

The server serves /openai-community/gpt2/resolve/main/FILE like the Hugging Face
hub: small files directly, model.safetensors as a 302 redirect to /cdn/FILE
carrying X-Linked-Size and X-Linked-Etag (its SHA-256), and the CDN honours
HTTP Range. It can drop a connection midway and lie about a checksum.
"""

import errno
import hashlib
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import download_weights
from conftest import ROOT
from download_weights import DownloadError, download

FILES = {"config.json": b'{"n_layer": 1}', "vocab.json": b"{}", "merges.txt": b"#version: 0.2\n",
         "model.safetensors": os.urandom(3 * download_weights.CHUNK + 12345)}


class Hub(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass

    def do_HEAD(self):
        self.respond(body=False)

    def do_GET(self):
        self.respond(body=True)

    def respond(self, body):
        state = self.server.state
        state["log"].append((self.command, self.path, self.headers.get("Range")))
        prefix = "/openai-community/gpt2/resolve/main/"
        if self.path.startswith(prefix) and self.path[len(prefix):] in state["files"]:
            name = self.path[len(prefix):]
            if name == "model.safetensors":
                self.send_response(302)
                self.send_header("Location", "/cdn/" + name)
                self.send_header("X-Linked-Size", str(len(state["files"][name])))
                self.send_header("X-Linked-Etag", f'"{state.get("sha") or hashlib.sha256(state["files"][name]).hexdigest()}"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            return self.send_data(state["files"][name], body)
        if self.path.startswith("/cdn/") and self.path[5:] in state["files"]:
            return self.send_data(state["files"][self.path[5:]], body)
        self.send_error(state.get("error", 404))

    def send_data(self, data, body):
        state, start = self.server.state, 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if not body:
            return
        if state["drops"] and len(data) > 1000:  # send part of it, then hang up
            state["drops"] -= 1
            self.wfile.write(data[start:start + (len(data) - start) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)
            self.close_connection = True
            return
        state["served"] += len(data) - start
        self.wfile.write(data[start:])


@pytest.fixture
def hub(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    server.state = {"files": dict(FILES), "log": [], "drops": 0, "served": 0}
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield server.state
    server.shutdown()
    server.server_close()


def assert_complete(model_dir):
    for name, data in FILES.items():
        with open(os.path.join(model_dir, name), "rb") as f:
            assert f.read() == data, name
    assert not [f for f in os.listdir(model_dir) if f.endswith(".incomplete")]


def test_complete_download_follows_the_redirect(hub, tmp_path):
    model_dir = download("gpt2", str(tmp_path))
    assert_complete(model_dir)
    assert ("GET", "/cdn/model.safetensors", None) in hub["log"]


def test_second_run_downloads_nothing(hub, tmp_path):
    download("gpt2", str(tmp_path))
    n_requests = len(hub["log"])
    download("gpt2", str(tmp_path))
    assert len(hub["log"]) == n_requests


def test_dropped_connection_is_resumed_with_range(hub, tmp_path):
    hub["drops"] = 2
    assert_complete(download("gpt2", str(tmp_path)))
    ranges = [r for method, path, r in hub["log"] if method == "GET" and path == "/cdn/model.safetensors"]
    assert ranges[0] is None and all(r and r.startswith("bytes=") and r != "bytes=0-" for r in ranges[1:])
    assert len(ranges) == 3


def test_partial_file_from_an_earlier_run_is_resumed(hub, tmp_path):
    model_dir = tmp_path / "gpt2"
    model_dir.mkdir()
    data = FILES["model.safetensors"]
    (model_dir / "model.safetensors.incomplete").write_bytes(data[:1000])
    download("gpt2", str(tmp_path))
    assert_complete(str(model_dir))
    assert ("GET", "/cdn/model.safetensors", "bytes=1000-") in hub["log"]
    assert hub["served"] == sum(len(d) for d in FILES.values()) - 1000


def test_checksum_mismatch_leaves_no_file(hub, tmp_path):
    hub["sha"] = "0" * 64
    with pytest.raises(DownloadError, match="SHA-256 mismatch"):
        download("gpt2", str(tmp_path))
    assert not any(f.startswith("model.safetensors") for f in os.listdir(tmp_path / "gpt2"))


def test_404_is_a_clear_error(hub, tmp_path):
    del hub["files"]["merges.txt"]
    with pytest.raises(DownloadError, match=r"not found \(HTTP 404\): .*/merges.txt"):
        download("gpt2", str(tmp_path))


def test_server_error_is_a_clear_error(hub, tmp_path):
    hub["files"].clear()
    hub["error"] = 503
    with pytest.raises(DownloadError, match="server error \\(HTTP 503\\)"):
        download("gpt2", str(tmp_path))


def test_full_disk_is_a_clear_error_and_leaves_no_file(hub, tmp_path, monkeypatch):
    real_open = open

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(download_weights, "open", lambda *a, **k: FullDisk(real_open(*a, **k)), raising=False)
    with pytest.raises(DownloadError, match="disk full"):
        download("gpt2", str(tmp_path))
    assert os.listdir(tmp_path) == []  # the first write failed: not even the directory is left


def test_unknown_model_name(tmp_path):
    with pytest.raises(DownloadError, match="unknown model 'gpt5'"):
        download("gpt5", str(tmp_path))


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, "download_weights.py"), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)


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
    assert "HF_ENDPOINT" in r.stderr.strip().splitlines()[-1]


def test_cli_help():
    r = run_cli("--help")
    assert r.returncode == 0 and "--models-dir" in r.stdout and "HF_ENDPOINT" in r.stdout
