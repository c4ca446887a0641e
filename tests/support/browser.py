"""Headless Chromium for tests that look at a page: a screenshot of a local HTML file, and a PNG decoder
(zlib + numpy, no imaging library) to look at it with.

`screenshot` runs `/usr/bin/chromium --headless=new` with a throw-away profile and HOME, kills it (by
its process group, its own session) if it does not finish in time, and skips the test when Chromium
is missing — except under CI=true, where a missing browser fails it (CI must run everything).
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.support.fixtures import running_in_ci

CHROMIUM = Path("/usr/bin/chromium")


def require_chromium() -> Path:
    if CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    reason = f"{CHROMIUM} is missing (Debian package `chromium`; `make system-deps` installs it as root)"
    if running_in_ci():
        pytest.fail(f"the page rendering test needs Chromium under CI: {reason}", pytrace=False)
    pytest.skip(reason)


def screenshot(page: Path, png: Path, *, width: int = 1400, height: int = 900,
               timeout_s: float = 90.0) -> Path:
    """Render `page` (a local HTML file) in headless Chromium and save a PNG screenshot to `png`."""
    browser = require_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium-") as scratch:
        env = {**os.environ, "HOME": scratch, "XDG_CONFIG_HOME": scratch, "XDG_CACHE_HOME": scratch}
        args = [str(browser), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--hide-scrollbars", f"--user-data-dir={scratch}/profile", f"--screenshot={png}",
                f"--window-size={width},{height}", page.resolve().as_uri()]
        with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True) as proc:
            try:
                output, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group id is its pid
                output, _ = proc.communicate()
                raise AssertionError(f"chromium did not finish within {timeout_s} s: "
                                     f"{output.decode(errors='replace')[-2000:]}") from None
    if not png.exists():
        raise AssertionError(f"chromium wrote no screenshot (exit {proc.returncode}): "
                             f"{output.decode(errors='replace')[-2000:]}")
    return png


def read_png(path: Path) -> np.ndarray:
    """An 8-bit RGB or RGBA PNG (non-interlaced, what Chromium writes) as a (height, width, 3) array."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, bytearray(), b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = chunk
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read here")
    raw = np.frombuffer(zlib.decompress(bytes(idat)), np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), np.uint8)
    prior = np.zeros(width * channels, np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 1:    # Sub: a running sum per channel
            row = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            row = (line + prior) % 256
        elif kind in (3, 4):
            row = _sequential(line, prior, channels, kind)
        else:
            row = line
        out[y] = row
        prior = row.astype(np.int32)
    return out.reshape(height, width, channels)[:, :, :3]


def _sequential(line: np.ndarray, prior: np.ndarray, bpp: int, kind: int) -> np.ndarray:
    """Average (3) and Paeth (4): each byte depends on the decoded one to its left (plain ints: faster
    than numpy one pixel at a time)."""
    cur, up = line.tolist(), prior.tolist()
    row = [0] * len(cur)
    for i, x in enumerate(cur):
        left = row[i - bpp] if i >= bpp else 0
        above = up[i]
        if kind == 3:
            row[i] = (x + (left + above) // 2) & 255
            continue
        corner = up[i - bpp] if i >= bpp else 0
        p = left + above - corner
        pa, pb, pc = abs(p - left), abs(p - above), abs(p - corner)
        row[i] = (x + (left if pa <= pb and pa <= pc else above if pb <= pc else corner)) & 255
    return np.array(row, np.int32)
