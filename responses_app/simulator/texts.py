"""What the simulated model says: a small multilingual corpus and a word-ish tokenizer."""

from __future__ import annotations

import base64
import colorsys
import math
import random
import re
import struct
import zlib

from ..sniff import sniff

PARAGRAPHS: tuple[str, ...] = (
    "Streaming a response is a little like watching a river: the water you see now was upstream a "
    "moment ago, and the relay’s job is to keep every drop in order, even when the bank gives way.",
    "A naïve client reads until the socket closes and hopes for the best. A careful one counts "
    "sequence numbers, notices the gap, and asks for everything *after* the last event it trusted.",
    "In Zürich the café on the corner serves crème brûlée at noon; in Kraków they call the same "
    "idea “deser”, and nobody argues about the spelling — the dessert speaks for itself.",
    "日本語のテキストも正しく流れるべきです。"
    "文字化けは許されません。Every byte of UTF-8 has to survive "
    "the trip, whether it is a kana, an emoji like 🚀 or a humble ASCII letter.",
    "Ελληνικά, русский и español: the tokenizer splits words, the wire carries them, and the "
    "assembler glues them back together without losing a single accent.",
    "Background mode changes the contract. The server keeps generating after you leave, so a "
    "reconnect is not a retry: it is a resume, and `starting_after` is the bookmark.",
    "Keep-alive comments are the heartbeat of a quiet stream. They carry no data, yet without them "
    "a proxy somewhere decides the conversation is over and hangs up.",
    "Fault injection is a rehearsal for bad days: duplicated events, stalls, a truncated JSON "
    "object, or an `error` that arrives after the user has already read half an answer.",
    "A good simulator is boring in the best way — deterministic, fast and honest about the wire "
    "format — so that every surprise in a test comes from the code under test.",
    "Numbers help too: 3.14159, 42, 1 000 000 and −7 °C all have to round-trip exactly, as do "
    "tabs,\tcurly quotes “like these” and the occasional non-breaking space.",
    "When the model calls a tool it stops talking and waits. The client runs the function, sends "
    "back the result with the same `call_id`, and the conversation continues from there.",
    "Reasoning summaries arrive in parts. Each part is announced, filled delta by delta, and "
    "closed, before the visible answer even begins.",
)

SUMMARY_PARTS: tuple[str, ...] = (
    "**Planning the answer**\n\nThe user wants a clear explanation. I should outline the key ideas "
    "first, then pick an example that makes the mechanism concrete.",
    "**Checking the details**\n\nBefore answering I want to verify the ordering rules: items are "
    "added before their deltas, and every part is closed before its item is done.",
    "**Choosing a tone**\n\nA short, friendly answer with one concrete example will work best "
    "here.",
)

# sim-rich: every construct the chat page renders beyond prose (docs/chat-page.md), each closed.
RICH_ANSWER = (
    "Here is a short tour of what an answer can hold.\n\n"
    "| Construct | Streams | Notes |\n"
    "|:----------|:-------:|------:|\n"
    "| Tables | yes | rows appear **whole** |\n"
    "| Quotes | yes | one level deep |\n"
    "| Task lists | yes | disabled boxes |\n"
    "| Math | typeset | $e^{i\\pi} + 1 = 0$ |\n\n"
    "> **Note:** a quote holds *emphasis*, `code` and lists:\n"
    "> - one point\n"
    "> - another point\n\n"
    "- [x] Render tables, quotes and task lists\n"
    "- [x] Stream them without flicker\n"
    "- [ ] Typeset the math\n\n"
    "```python\n"
    "def area(radius: float) -> float:\n"
    "    return 3.14159 * radius ** 2\n"
    "```\n\n"
    "Inline math such as $a^2 + b^2 = c^2$ sits in a sentence; display math stands alone:\n\n"
    "$$\\frac{a}{b} + \\sqrt{x^2 + y^2}$$"
)

REFUSAL = "I’m sorry, but I can’t help with that request."

CODE = (
    "import statistics\n\n"
    "values = [3, 1, 4, 1, 5, 9, 2, 6]\n"
    "mean = statistics.mean(values)\n"
    "stdev = statistics.stdev(values)\n"
    'print(f"mean={mean:.3f} stdev={stdev:.3f}")\n'
)
CODE_LOGS = "mean=3.875 stdev=2.800\n"

_TOKEN = re.compile(r"\s*[\w'’.-]+|\s*[^\w\s]|\s+")
_MAX_TOKEN = 12
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af]")


def tokenize(text: str) -> list[str]:
    """Word-ish tokens that concatenate back to exactly `text` (long runs, e.g. CJK, are cut)."""
    tokens: list[str] = []
    for piece in _TOKEN.findall(text):
        size = 3 if _CJK.search(piece) else _MAX_TOKEN
        if len(piece) <= size:
            tokens.append(piece)
        else:
            tokens.extend(piece[i : i + size] for i in range(0, len(piece), size))
    return tokens


def paragraphs(rng: random.Random, count: int) -> list[str]:
    return rng.sample(PARAGRAPHS, k=min(count, len(PARAGRAPHS)))


def long_text(rng: random.Random, tokens: int) -> str:
    """Paragraphs drawn with replacement until about `tokens` tokens."""
    out: list[str] = []
    total = 0
    while total < tokens:
        para = PARAGRAPHS[rng.randrange(len(PARAGRAPHS))]
        # The separator's whitespace joins the next word's token, as it would on its own.
        total += len(tokenize(("\n\n" if out else "") + para))
        out.append(para)
    return "\n\n".join(out)


def asks_to_continue(prompt: str) -> bool:
    """The user's last words ask the model to go on with its answer ("Continue ...")."""
    return prompt.lstrip().lower().startswith("continue")


def continuation(said: str, rng: random.Random) -> str:
    """What a model that was cut off writes when asked to go on: the rest of the paragraph its
    answer `said` stopped in (the simulator's own paragraphs), then one paragraph more."""
    tail = said.rsplit("\n\n", 1)[-1]
    rest = ""
    for para in PARAGRAPHS if tail else ():
        at = para.find(tail)
        if at >= 0 and at + len(tail) < len(para):
            rest = para[at + len(tail):]
            break
    more = PARAGRAPHS[rng.randrange(len(PARAGRAPHS))]
    return f"{rest}\n\n{more}" if said else more


def truncate_tokens(text: str, tokens: int) -> str:
    return "".join(tokenize(text)[:tokens])


def prompt_text(value: object) -> str:
    """The user's last words, whatever shape `input` had."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for item in reversed(value):
            if not isinstance(item, dict):
                continue
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [c.get("text", "") for c in content if isinstance(c, dict)]
                if any(texts):
                    return " ".join(t for t in texts if t)
    return ""


def _data_bytes(url: object) -> bytes | None:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    try:
        return base64.b64decode(url.split(";base64,", 1)[1], validate=True)
    except ValueError:
        return None


def attachment_notes(value: object) -> list[str]:
    """What the simulator "sees" in the last user message's images and files, deterministically:
    an inline image's size (read from its header), a file's name and size."""
    if not isinstance(value, list):
        return []
    for item in reversed(value):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        if not isinstance(item.get("content"), list):
            return []
        notes = []
        for part in item["content"]:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "input_image":
                data = _data_bytes(part.get("image_url"))
                found = sniff(data) if data else None
                if found is not None and found.image:
                    notes.append(f"I see an image {found.width}×{found.height} ({found.name.upper()}).")
                elif isinstance(part.get("image_url"), str):
                    notes.append("I see an image at a link.")
            elif part.get("type") == "input_file":
                data = _data_bytes(part.get("file_data"))
                size = f", {len(data):,} bytes" if data is not None else ""
                notes.append(f"I see a file “{str(part.get('filename') or 'unnamed')[:80]}”{size}.")
        return notes
    return []


def _png(width: int, rows: list[bytes]) -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
    raw = zlib.compress(b"".join(b"\x00" + row for row in rows), 9)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


def picture_png(rng: random.Random, size: int = 256, fill: float = 1.0) -> str:
    """A real picture (base64 PNG): a sun over hills under a sky gradient, colours from `rng`;
    `fill` < 1 leaves the lower rows blank, as a partial image does."""
    hue = rng.random()
    sky_top = tuple(int(255 * c) for c in colorsys.hsv_to_rgb(hue, 0.55, 0.95))
    sky_low = tuple(int(255 * c) for c in colorsys.hsv_to_rgb((hue + 0.08) % 1, 0.25, 1.0))
    hill = tuple(int(255 * c) for c in colorsys.hsv_to_rgb((hue + 0.35) % 1, 0.6, 0.55))
    sun = (255, 214, 90)
    cx, cy, radius = size * 0.7, size * 0.35, size * 0.12
    phase = rng.random() * math.tau
    rows = []
    for y in range(size):
        if y >= int(size * fill):
            rows.append(b"\xff" * (3 * size))
            continue
        t = y / (size - 1)
        sky = bytes(int(a + (b - a) * t) for a, b in zip(sky_top, sky_low, strict=True))
        row = bytearray(sky * size)
        for x in range(size):
            ground = size * (0.72 + 0.07 * math.sin(x / size * math.tau * 1.5 + phase))
            if y >= ground:
                row[3 * x:3 * x + 3] = bytes(hill)
            elif (x - cx) ** 2 + (y - cy) ** 2 <= radius ** 2:
                row[3 * x:3 * x + 3] = bytes(sun)
        rows.append(bytes(row))
    return _png(size, rows)


def tiny_png(rng: random.Random, size: int = 16, fill: float = 1.0) -> str:
    """A real, decodable PNG (base64): a colour block; `fill` < 1 leaves the lower rows blank."""
    r, g, b = (rng.randrange(256) for _ in range(3))
    rows = []
    filled = int(size * fill)
    for y in range(size):
        pixel = bytes((r, g, b)) if y < filled else b"\xff\xff\xff"
        rows.append(b"\x00" + pixel * size)
    return _png(size, [row[1:] for row in rows])
