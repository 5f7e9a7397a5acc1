"""What a file is, from its bytes: the attachments' type check (never the name or the browser's
Content-Type, which the sender chooses).

    sniff(b"\\x89PNG...")  -> Sniffed(name="png", mime="image/png", image=True, width=640, height=480)
    sniff(b"%PDF-1.7...") -> Sniffed(name="pdf", mime="application/pdf", image=False)
    sniff("héllo".encode()) -> Sniffed(name="text", mime="text/plain", image=False)
    sniff(b"MZ\\x90...")   -> None: no type this app knows

An image's size is read from its header (PNG IHDR, GIF's screen, JPEG's SOF, WebP's VP8/VP8L/VP8X
chunk); an image whose header has no size is not an image. Text is UTF-8 without U+0000 (what
PostgreSQL and a model read): an SVG or HTML file is text here, and is served as text/plain.

Pure: no Django.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

IMAGE_MIMES = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
FILE_MIMES = {"pdf": "application/pdf", "text": "text/plain"}
TYPES = {**IMAGE_MIMES, **FILE_MIMES}  # the names RELAY_ATTACHMENT_TYPES may list
WORDS = {"png": "PNG", "jpeg": "JPEG", "gif": "GIF", "webp": "WebP", "pdf": "PDF", "text": "plain text"}
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


@dataclass(frozen=True, slots=True)
class Sniffed:
    name: str  # a key of TYPES
    mime: str
    image: bool
    width: int | None = None
    height: int | None = None


def sniff(data: bytes) -> Sniffed | None:
    """The type of `data` (one of TYPES), or None."""
    size = _image_size(data)
    if size is not None:
        name, width, height = size
        return Sniffed(name, IMAGE_MIMES[name], True, width, height)
    if data.startswith(b"%PDF-"):
        return Sniffed("pdf", FILE_MIMES["pdf"], False)
    if data and b"\x00" not in data:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return Sniffed("text", FILE_MIMES["text"], False)
    return None


def _image_size(data: bytes) -> tuple[str, int, int] | None:
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return _sized("png", width, height)
        if data[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", data[6:10])
            return _sized("gif", width, height)
        if data.startswith(b"\xff\xd8\xff"):
            return _jpeg_size(data)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
    except struct.error:  # a header cut short
        return None
    return None


def _sized(name: str, width: int, height: int) -> tuple[str, int, int] | None:
    return (name, width, height) if width > 0 and height > 0 else None


def _jpeg_size(data: bytes) -> tuple[str, int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            at += 2
            continue
        length = struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in _SOF:
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return _sized("jpeg", width, height)
        at += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[str, int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return _sized("webp", width, height)
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return _sized("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return _sized("webp", width & 0x3FFF, height & 0x3FFF)
    return None
