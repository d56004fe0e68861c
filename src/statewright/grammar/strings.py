"""String literals: the value of a "double-quoted" or a triple-quoted token.

What decode_string accepts after a backslash is also what the decoding constraint (grammar/decoding) allows
a model to write, so that a constrained draft cannot hold a bad escape.
"""

from __future__ import annotations

import bisect
import re
import textwrap
from array import array
from collections.abc import Iterator, Sequence

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
# What decode_string accepts after a backslash: one of ESCAPE_CHARS, or 'u' and four hex digits (a lone
# surrogate is refused). Only ESCAPING_TERMINAL's tokens are decoded so; the decoding constraint
# (grammar/decoding) is built from these, so that a constrained draft cannot hold a bad escape.
ESCAPE_CHARS = frozenset(_ESCAPES)
ESCAPING_TERMINAL = "STRING"


class BadEscape(Exception):
    """A backslash escape decode_string does not read, at `offset` in the raw token."""

    def __init__(self, offset: int, text: str) -> None:
        self.offset = offset
        self.text = text


def decode_string(raw: str) -> str:
    """The value of a "double-quoted" string token (quotes included)."""
    body = raw[1:-1]

    def replace(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc in _ESCAPES:
            return _ESCAPES[esc]
        if esc.startswith("u") and len(esc) == 5:
            return chr(int(esc[1:], 16))
        raise BadEscape(m.start() + 1, m.group(0))

    value = _ESCAPE_RE.sub(replace, body)
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        value = _join_surrogates(raw, value)
    return value


def _join_surrogates(raw: str, value: str) -> str:
    """Join \\uD83D\\uDE00-style escape pairs into one character; a lone surrogate is an error."""
    joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if "\ufffd" in joined and "\ufffd" not in value:
        m = re.search(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}", raw)
        offset = m.start() if m else 1
        raise BadEscape(offset, m.group(0) if m else "\\u")
    return joined


def decode_long_string(raw: str) -> str:
    """The value of a \"\"\"triple-quoted\"\"\" string: taken literally, common indentation removed.

    A line break right after the opening quotes and the whitespace before the closing quotes are dropped,
    so a block written indented inside a state reads back as the text the author meant.
    """
    body = raw[3:-3].replace("\r\n", "\n")
    body = body.removeprefix("\n")
    lines = body.split("\n")
    if len(lines) > 1 and lines[-1].strip() == "":
        lines[-1] = ""
    body = textwrap.dedent("\n".join(lines))
    return body.rstrip(" \t\n") if len(lines) > 1 else body


# ---- where each character of a value came from --------------------------------------------------


class OffsetMap:
    """For each position of a text made from another (a string's value from its source; a template's text
    from that value), the position it came from: runs of consecutive positions are one entry each, so a
    string of a million plain characters is one entry, not a million.

    Read like the list it stands for: `map[i]` for 0 <= i < len(map), and equal to a list of the same
    positions."""

    __slots__ = ("_keys", "_length", "_values")

    def __init__(self) -> None:
        self._keys = array("q")  # the first position of each run
        self._values = array("q")  # where that position came from; the run's others follow it one by one
        self._length = 0

    def add(self, offset: int, count: int = 1) -> None:
        """The next `count` positions come from `offset`, `offset + 1`, ..."""
        if count <= 0:
            return
        keys, values = self._keys, self._values
        if not keys or values[-1] + (self._length - keys[-1]) != offset:
            keys.append(self._length)
            values.append(offset)
        self._length += count

    def trim(self, count: int) -> None:
        """Drop the last `count` positions."""
        self._length = max(0, self._length - count)
        while self._keys and self._keys[-1] >= self._length and self._length > 0:
            self._keys.pop()
            self._values.pop()
        if self._length == 0:
            self._keys, self._values = array("q"), array("q")

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, i: int) -> int:
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError(i)
        run = bisect.bisect_right(self._keys, i) - 1
        return self._values[run] + i - self._keys[run]

    def __iter__(self) -> Iterator[int]:
        bounds = [*self._keys[1:], self._length]
        for key, value, bound in zip(self._keys, self._values, bounds):
            yield from range(value, value + bound - key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OffsetMap):
            return (self._length, self._keys, self._values) == (other._length, other._keys, other._values)
        if isinstance(other, Sequence):
            return len(other) == self._length and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OffsetMap({list(zip(self._keys, self._values))}, length={self._length})"


def literal_offsets(text: str, start: int, end: int, triple: bool, value: str) -> OffsetMap | None:
    """Where each character of a string literal's value is in `text`, the literal's body being
    text[start:end] (its quotes left out), and one past the last: the closing quote. None when the value
    cannot be lined up with the source (callers then point at the whole literal)."""
    found = _long_offsets(text, start, end, value) if triple else _short_offsets(text, start, end, value)
    if found is not None:
        found.add(end)
    return found


def _short_offsets(text: str, start: int, end: int, value: str) -> OffsetMap | None:
    """decode_string's walk: one run between escapes; an escape is one character (a surrogate pair
    written as two escapes, one character at the first)."""
    found = OffsetMap()
    pos = start
    pending_high = False  # the last escape gave half of a surrogate pair
    for m in _ESCAPE_RE.finditer(text, start, end):
        found.add(pos, m.start() - pos)
        pending_high = pending_high and m.start() == pos
        esc = m.group(1)
        char = chr(int(esc[1:], 16)) if esc.startswith("u") and len(esc) == 5 else _ESCAPES.get(esc, esc)
        if pending_high and "\udc00" <= char <= "\udfff":
            pending_high = False  # the second half: no character of its own
        else:
            found.add(m.start())
            pending_high = "\ud800" <= char <= "\udbff"
        pos = m.end()
    found.add(pos, end - pos)
    return found if len(found) == len(value) else None


def _long_offsets(text: str, start: int, end: int, value: str) -> OffsetMap | None:
    """decode_long_string's steps, over line ranges: CRLF read as LF, the first line break dropped, the
    common indentation removed, blank lines emptied, trailing whitespace cut from a text of several lines."""
    lines: list[tuple[int, int]] = []  # [start, end) of each line's characters
    breaks: list[int] = []  # the offset of each line break (a CRLF's at its CR)
    pos = start
    while True:
        newline = text.find("\n", pos, end)
        if newline < 0:
            lines.append((pos, end))
            break
        crlf = newline > pos and text[newline - 1] == "\r"
        lines.append((pos, newline - 1 if crlf else newline))
        breaks.append(newline - 1 if crlf else newline)
        pos = newline + 1
    if lines[0][0] == lines[0][1] and breaks:  # the first character is a line break: it is dropped
        lines.pop(0)
        breaks.pop(0)
    several = len(lines) > 1
    if several and not text[lines[-1][0] : lines[-1][1]].strip():
        lines[-1] = (lines[-1][1], lines[-1][1])
    texts = [text[a:b] for a, b in lines]
    margin = len(_common_margin([t[: len(t) - len(t.lstrip(" \t"))] for t in texts if t.strip(" \t")]))
    pieces: list[tuple[int, str]] = []  # (offset, text) of what the value keeps, in order
    for n, ((a, _), line) in enumerate(zip(lines, texts)):
        if n:
            pieces.append((breaks[n - 1], "\n"))
        if line.strip(" \t"):
            pieces.append((a + margin, line[margin:]))
    if several:
        while pieces and pieces[-1][1].rstrip(" \t\n") != pieces[-1][1]:
            offset, piece = pieces.pop()
            kept = piece.rstrip(" \t\n")
            if kept:
                pieces.append((offset, kept))
                break
    if "".join(piece for _, piece in pieces) != value:
        return None
    found = OffsetMap()
    for offset, piece in pieces:
        found.add(offset, len(piece))
    return found


def _common_margin(indents: list[str]) -> str:
    if not indents:
        return ""
    first, last = min(indents), max(indents)
    n = 0
    while n < len(first) and n < len(last) and first[n] == last[n]:
        n += 1
    return first[:n]
