"""Identifiers from other systems' names: "Code Writer" -> code_writer, state "1" -> state_1.

Names are made valid (letters, digits, underscores, not starting with a digit), kept clear of the
language's keywords and reserved names, and made unique within their namespace by a numeric suffix.
"""

from __future__ import annotations

import re
import unicodedata

# Every keyword of the language, plus names the checker reserves or treats specially.
RESERVED = frozenset((
    "machine", "description", "input", "model", "verifier", "temperature", "limits", "type", "list", "tool",
    "agent", "prompt", "tools", "memory", "fallbacks", "start", "final", "state", "do", "output", "tell",
    "visits", "retries", "call", "result", "when", "otherwise", "stay", "max", "and", "or", "not", "in",
    "true", "false", "none", "test", "reply", "verdict", "expect", "path", "failure",
    "std", "len", "str", "int", "float", "bool",
))


def identifier(text: str, kind: str) -> str:
    """`text` as a valid name; `kind` ("state", "agent", ...) fills in when little of `text` is usable."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", ascii_text)
    name = re.sub(r"[^A-Za-z0-9]+", "_", words).strip("_").lower()
    if not name:
        return kind
    if name[0].isdigit():
        return f"{kind}_{name}"
    if name in RESERVED:
        return f"{name}_{kind}"
    return name


class Namespace:
    """Hands out unique names: the second "writer" becomes writer_2."""

    def __init__(self, taken: tuple[str, ...] = ()) -> None:
        self.taken: set[str] = set(taken)

    def claim(self, text: str, kind: str) -> str:
        base = identifier(text, kind)
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


def file_stem(path: str) -> str:
    """The name of a file without its folders and extension: the machine's name when nothing better exists."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    if name.startswith("<"):  # <stdin>
        return "imported"
    return name.rsplit(".", 1)[0] if "." in name else name or "imported"


def type_name(text: str, names: Namespace) -> str:
    """A type's name: `text` itself where it is a free name (types keep their capitals), else made valid and
    unique the way other names are, with a number after a taken one (Delegation, Delegation2)."""
    base = text if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", text) and text not in RESERVED else (
        identifier(text, "type").title().replace("_", ""))
    name, n = base, 1
    while name in names.taken:
        n += 1
        name = f"{base}{n}"
    names.taken.add(name)
    return name
