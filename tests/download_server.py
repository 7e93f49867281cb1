"""A stand-in for the Hugging Face hub on 127.0.0.1, for tests/test_download.py.

It serves /openai-community/gpt2/resolve/main/FILE as the hub does: small files
directly, model.safetensors as a 302 redirect to /cdn/model.safetensors carrying
X-Linked-Size and X-Linked-Etag (its SHA-256), and the CDN honours HTTP Range
(206, or 416 past the end of the file). The keys of `state` (see start) make it
misbehave the ways real servers, mirrors and networks do.
"""

import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOLVE = "/openai-community/gpt2/resolve/main/"
CDN = "/cdn/"
PIECE = 1 << 16  # the CDN writes its bodies in pieces this large (or one byte at a time when dripping)


def safetensors_bytes(n_floats):
    """A valid .safetensors file of one float32 tensor of n_floats random values."""
    header = {"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}
    header = json.dumps(header).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + os.urandom(4 * n_floats)


def start(files):
    """A running server and its state; stop it with stop(server)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    server.state = {
        "files": dict(files),  # name -> bytes
        "log": [],             # (method, path, Range header) of every request
        "served": 0,           # body bytes written to clients
        "error": 404,          # status for paths it does not serve
        "sha": None,           # an X-Linked-Etag to announce instead of the true SHA-256
        "lfs": True,           # False: model.safetensors served as it is, no redirect, no size or checksum announced
        "page": None,          # (body, Content-Type): answered with status 200 to every request, a captive portal
        "page_for": None,      # ... or only to requests for this file name
        "page_methods": ("HEAD", "GET"),  # ... and only to these methods
        "drops": 0,            # this many CDN bodies are hung up halfway
        "inflate": 0,          # bytes added to every size the CDN announces (X-Linked-Size, Content-Length, Content-Range)
        "inflate_body_length": 0,  # bytes added to the Content-Length of CDN bodies only
        "endless": 0,          # after the file, the CDN goes on with this many bytes of garbage, no Content-Length
        "loop": (),            # methods for which the CDN redirects to itself
        "drip": 0,             # seconds between single bytes of CDN bodies
        "delay": 0,            # seconds between pieces of CDN bodies
        "gate": None,          # a threading.Event the CDN waits for halfway through a body
        "drip_headers": 0,     # seconds between single bytes of every answer's status line and headers
        "status": None,        # (code, reason): answered to every request, with a short text body
        "unsized": False,      # True: the small files are sent with no Content-Length, the connection closed at their end
    }
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def stop(server):
    gate = server.state["gate"]
    if gate is not None:
        gate.set()
    server.shutdown()
    server.server_close()


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
        name = self.path.rsplit("/", 1)[-1]
        if state["drip_headers"]:
            return self.drip_headers(state["drip_headers"])
        if state["status"]:
            code, reason = state["status"]
            self.wfile.write(f"HTTP/1.1 {code} {reason}\r\nContent-Length: 2\r\n\r\nno".encode("latin-1"))
            return
        if state["page"] and state["page_for"] in (None, name) and self.command in state["page_methods"]:
            return self.send_page(*state["page"], body)
        if self.path.startswith(CDN) and self.command in state["loop"]:
            return self.redirect(self.path)
        if name not in state["files"] or not self.path.startswith((RESOLVE, CDN)):
            return self.send_error(state["error"])
        data = state["files"][name]
        if self.path.startswith(RESOLVE) and name == "model.safetensors" and state["lfs"]:  # to the CDN
            return self.redirect(CDN + name, {"X-Linked-Size": str(len(data) + state["inflate"]),
                                              "X-Linked-Etag": f'"{state["sha"] or hashlib.sha256(data).hexdigest()}"'})
        if self.path.startswith(CDN):
            return self.send_cdn(data, body)
        self.send_page(data, "text/plain; charset=utf-8", body)

    def drip_headers(self, seconds):
        """An answer whose headers come one byte every `seconds`: never slower than a read timeout, never done."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n" + b"X-Slow: " + b"x" * 10000 + b"\r\n\r\n"
        try:
            for i in range(len(head)):
                self.wfile.write(head[i:i + 1])
                self.wfile.flush()
                time.sleep(seconds)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def redirect(self, location, headers=None):
        self.send_response(302)
        self.send_header("Location", location)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_page(self, data, content_type, body):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if self.server.state["unsized"]:
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.write(data)

    def send_cdn(self, data, body):
        state = self.server.state
        total = len(data) + state["inflate"]  # what it claims the file has
        start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0]) if self.headers.get("Range") else 0
        if start >= len(data) and self.headers.get("Range"):  # its range logic knows the true size
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
        if not state["endless"]:
            self.send_header("Content-Length", str(total - start + state["inflate_body_length"]))
        self.end_headers()
        if not body:
            return
        rest = data[start:]
        if state["drops"]:  # send half of it, then hang up
            state["drops"] -= 1
            self.write(rest[:len(rest) // 2], paced=True)
            self.connection.shutdown(2)
            self.close_connection = True
            return
        if state["gate"] is not None:
            if not self.write(rest[:len(rest) // 2], paced=True):
                return
            state["gate"].wait(30)
            rest = rest[len(rest) // 2:]
        if self.write(rest, paced=True) and state["endless"]:
            self.write(os.urandom(PIECE) * (state["endless"] // PIECE))

    def write(self, data, paced=False):
        """Write data in pieces (at the CDN's pace when paced); False when the client has gone."""
        state = self.server.state
        size = 1 if paced and state["drip"] else PIECE
        try:
            for i in range(0, len(data), size):
                self.wfile.write(data[i:i + size])
                self.wfile.flush()
                state["served"] += len(data[i:i + size])
                if paced and (state["drip"] or state["delay"]):
                    time.sleep(state["drip"] or state["delay"])
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True
