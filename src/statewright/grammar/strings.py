"""String literals: the value of a "double-quoted" or a triple-quoted token.

What decode_string accepts after a backslash is also what the decoding constraint (grammar/decoding) allows
a model to write, so that a constrained draft cannot hold a bad escape.
"""

from __future__ import annotations

import re
import textwrap

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
