"""Headless Chromium for the page tests, and the README's screenshot:

    python tests/browser.py page.html docs/page.png [--width 1280] [--height 1350]

The screenshot is the top width x height pixels of the page as Chromium lays
it out in a window of that size. Chromium is Debian's package
(apt-get install chromium); nothing here touches the network: the flags turn
off every background connection, and the page itself needs none.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MISSING = "headless Chromium not found: apt-get install chromium"


def find_chromium():
    """The path of the chromium binary, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(html_path, *options, timeout=120):
    """Run Chromium on the file with a fresh profile; its CompletedProcess (stdout as text)."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError(MISSING)
    url = "file://" + os.path.abspath(html_path)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *options, url],
                              capture_output=True, text=True, timeout=timeout)


def screenshot(html_path, png_path, width=1280, height=2000):
    """Render the page in a width x height window and save that window as a PNG."""
    png_path = os.path.abspath(png_path)
    if os.path.exists(png_path):
        os.remove(png_path)  # so that a stale file cannot pass for a new one
    r = run_chromium(html_path, f"--screenshot={png_path}", f"--window-size={width},{height}", "--hide-scrollbars")
    if r.returncode != 0 or not os.path.isfile(png_path):
        raise RuntimeError(f"chromium made no screenshot (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    return png_path


def dump_dom(html_path):
    """The page's DOM after Chromium parsed it, as HTML text."""
    r = run_chromium(html_path, "--dump-dom")
    if r.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout


# ---------------------------------------------------------------------------
# A minimal PNG reader: 8-bit, not interlaced, which is what Chromium writes
# ---------------------------------------------------------------------------

CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel: grey, RGB, grey + alpha, RGBA


def read_png(path):  # -> [height, width, channels] uint8
    """The pixels of a PNG file, its filters undone."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = int.from_bytes(data[pos:pos + 4], "big"), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length  # length, type, body, CRC
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    bit_depth, colour_type, interlace = header[8], header[9], header[12]
    if bit_depth != 8 or colour_type not in CHANNELS or interlace:
        raise ValueError(f"{path}: only 8-bit, non-interlaced PNGs are read here")
    channels = CHANNELS[colour_type]
    # Each row is one filter-type byte, then width * channels filtered bytes.
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, 1 + width * channels)
    pixels, previous = np.zeros((height, width * channels), dtype=np.uint8), np.zeros(width * channels, dtype=np.uint8)
    for y in range(height):
        pixels[y] = previous = unfilter(raw[y, 0], raw[y, 1:], previous, channels)
    return pixels.reshape(height, width, channels)


def unfilter(filter_type, row, previous, bpp):  # [n], [n] -> [n] uint8
    """Undo one row's PNG filter: each byte was stored minus a prediction from
    a (the byte bpp to the left), b (above) or c (above left)."""
    if filter_type == 0:
        return row
    if filter_type == 1:  # Sub: a running sum along the row, per channel (uint8 wraps mod 256)
        return np.cumsum(row.reshape(-1, bpp), axis=0, dtype=np.uint8).reshape(-1)
    if filter_type == 2:  # Up
        return row + previous
    if filter_type not in (3, 4):
        raise ValueError(f"unknown PNG filter type {filter_type}")
    out, above = bytearray(row.tobytes()), previous.tobytes()
    for i in range(len(out)):  # Average and Paeth depend on the byte just decoded: one at a time
        a = out[i - bpp] if i >= bpp else 0
        b, c = above[i], above[i - bpp] if i >= bpp else 0
        if filter_type == 3:
            prediction = (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            prediction = a if pa <= pb and pa <= pc else b if pb <= pc else c
        out[i] = (out[i] + prediction) & 0xFF
    return np.frombuffer(bytes(out), dtype=np.uint8)


def colours(path):
    """{(r, g, b): how many pixels} of a PNG (grey as r = g = b; alpha ignored)."""
    pixels = read_png(path)
    rgb = pixels[..., :3] if pixels.shape[2] >= 3 else np.repeat(pixels[..., :1], 3, axis=2)
    packed = rgb.astype(np.uint32) @ np.array([1 << 16, 1 << 8, 1], dtype=np.uint32)  # [h, w, 3] -> [h, w]
    values, counts = np.unique(packed, return_counts=True)
    return {(int(v) >> 16, int(v) >> 8 & 0xFF, int(v) & 0xFF): int(n) for v, n in zip(values, counts)}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Screenshot an HTML file with headless Chromium.")
    parser.add_argument("html", help="the page")
    parser.add_argument("png", help="where to write the screenshot")
    parser.add_argument("--width", type=int, default=1280, help="window width in pixels (default 1280)")
    parser.add_argument("--height", type=int, default=1350, help="window height: the part of the page shown (default 1350)")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.html):
        sys.exit(f"error: {args.html}: no such file")
    if find_chromium() is None:
        sys.exit(f"error: {MISSING}")
    try:
        screenshot(args.html, args.png, args.width, args.height)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        sys.exit(f"error: {e}")
    print(f"wrote {args.png} ({args.width} x {args.height})")


if __name__ == "__main__":
    main()
