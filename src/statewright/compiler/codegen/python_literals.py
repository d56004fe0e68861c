"""Python literals for generated code: any text a spec holds is safe in them, and they stay readable.

Long strings are written in pieces and short collections on one line; json_string, comment_text and
docstring_text write text into a JSON string, a comment or a docstring.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .source_layout import INDENT, WIDTH
from .types_py import (
    py_string,
)

LAYOUT = "runner.py.jinja"
# Where the machine part of a module finds the runtime: in the package statewright_runtime/ beside it
# (`statewright compile`, the default), in marked sections above it (`compile --standalone`, one file), or
# in the installed statewright (`statewright run`, `test` and the Python API, compiled in memory).
RUNTIME_SHARED, RUNTIME_STANDALONE, RUNTIME_INSTALLED = "shared", "standalone", "installed"
RUNTIME_FORMS = (RUNTIME_SHARED, RUNTIME_STANDALONE)  # what `compile` writes
INSTALLED_RUNTIME = "statewright.runtime"


def json_string(text: str) -> str:
    """A str as a JSON string literal (for comments that show the JSON a model writes)."""
    import json

    return json.dumps(text, ensure_ascii=False)


def comment_text(text: str) -> str:
    """Text safe inside a `#` comment: anything that could end the line is written as an escape."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def docstring_text(text: str) -> str:
    """Text safe inside a (non-raw) triple-quoted docstring, reading back as itself: a backslash and a
    double quote are escaped (`\\N`, `\\x` or `\"\"\"` in a file name would end the docstring or be
    read as an escape it is not), and anything comment_text escapes too."""
    return "".join('\\\\' if ch == "\\" else '\\"' if ch == '"' else comment_text(ch) for ch in text)


@dataclass(frozen=True)
class Raw:
    """Source text used as it is: a name, an annotation, a constraint's value."""

    text: str


@dataclass(frozen=True)
class Position(Raw):
    """A reference into SOURCE_MAP (`SOURCE_MAP["review"]`), the only name it uses."""


@dataclass(frozen=True)
class Call:
    """`func(key=value, ...)` with data or Raw values: on one line if it fits, else one argument per line."""

    func: str
    arguments: Sequence[tuple[str, object]]


def py_scalar(value: object) -> str:
    if isinstance(value, str):
        return py_string(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'  # inf and nan have no literal
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"cannot write {type(value).__name__} as a Python literal")


def py_source(value: object, indent: int = 0) -> str:
    """`value` as Python source starting `indent` levels deep (continuation lines indented to match)."""
    if isinstance(value, Raw):
        return value.text  # written as it is, however long
    flat = _flat(value, WIDTH - (indent + 1) * len(INDENT))
    if flat is not None:
        return flat
    pad = INDENT * (indent + 1)
    end = INDENT * indent
    if isinstance(value, str):
        pieces = string_pieces(value, WIDTH - len(pad) - 2)
        if len(pieces) == 1:
            return py_string(value)  # one piece that cannot be cut
        return "(\n" + "".join(f"{pad}{py_string(p)}\n" for p in pieces) + f"{end})"
    if isinstance(value, Call):
        items = [f"{pad}{k}={py_source(v, indent + 1)},\n" for k, v in value.arguments]
        return f"{value.func}(\n" + "".join(items) + f"{end})"
    if isinstance(value, dict):
        items = [f"{pad}{py_source(k, indent + 1)}: {py_source(v, indent + 1)},\n" for k, v in value.items()]
        return "{\n" + "".join(items) + f"{end}}}"
    if isinstance(value, (list, tuple)):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        filled = _filled(value, pad)
        if filled is not None:
            return opening + "\n" + filled + f"{end}{closing}"
        items = [f"{pad}{py_source(v, indent + 1)},\n" for v in value]
        return opening + "\n" + "".join(items) + f"{end}{closing}"
    return py_scalar(value)


def _filled(items: Sequence[object], pad: str) -> str | None:
    """A long list of short scalars (a parallel state's branches, a type's variants) as lines filled up
    to the width, like a paragraph: one name per line made a runner three times its source's size. None
    when an item is not a short scalar (those go one per line)."""
    texts: list[str] = []
    for item in items:
        if isinstance(item, (Raw, Call, dict, list, tuple)) or (isinstance(item, str) and "\n" in item):
            return None
        text = py_scalar(item)
        if len(text) > (WIDTH - len(pad)) // 2:
            return None
        texts.append(text + ",")
    lines: list[str] = []
    line = ""
    for text in texts:
        if line and len(pad) + len(line) + 1 + len(text) > WIDTH:
            lines.append(f"{pad}{line}\n")
            line = text
        else:
            line = f"{line} {text}" if line else text
    lines.append(f"{pad}{line}\n")
    return "".join(lines)


def _flat(value: object, budget: int) -> str | None:
    """The one-line form when it takes at most `budget` characters; None when it is longer, or when the
    value must span lines (a string with a line break inside). Writing stops as soon as the budget is
    spent, so each part of a large literal is written flat only while it is small."""
    if budget < 0:
        return None
    text: str | None
    if isinstance(value, Raw):
        text = value.text
    elif isinstance(value, str):
        if "\n" in value[:-1] or len(value) + 2 > budget:
            return None
        text = py_string(value)
    elif isinstance(value, Call):
        inner = _flat_items([(f"{k}=", v) for k, v in value.arguments], budget - len(value.func) - 2)
        text = None if inner is None else f"{value.func}({inner})"
    elif isinstance(value, dict):
        parts: list[str] = []
        room = budget - 2
        for k, v in value.items():
            key = _flat(k, room)
            if key is None:
                return None
            item = _flat(v, room - len(key) - 2)
            if item is None:
                return None
            parts.append(f"{key}: {item}")
            room -= len(parts[-1]) + 2
        text = "{" + ", ".join(parts) + "}"
    elif isinstance(value, (list, tuple)):
        inner = _flat_items([("", v) for v in value], budget - 2)
        if inner is None:
            return None
        if isinstance(value, list):
            text = f"[{inner}]"
        else:
            text = f"({inner},)" if len(value) == 1 else f"({inner})"
    else:
        text = py_scalar(value)
    return text if text is not None and len(text) <= budget else None


def _flat_items(items: list[tuple[str, object]], budget: int) -> str | None:
    """`prefix + value` for each item, joined by ", ", or None past `budget` characters."""
    parts: list[str] = []
    room = budget
    for prefix, v in items:
        text = _flat(v, room - len(prefix))
        if text is None:
            return None
        parts.append(prefix + text)
        room -= len(parts[-1]) + 2
    return ", ".join(parts)


def string_pieces(value: str, width: int) -> list[str]:
    """`value` cut into pieces that join back to it: after each line break, and at a space (anywhere, in a
    run without spaces) so that no piece is much wider than `width`."""
    width = max(width, 20)
    pieces: list[str] = []
    for line in value.splitlines(keepends=True):
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width) + 1 or width
            pieces.append(line[:cut])
            line = line[cut:]
        if line:
            pieces.append(line)
    return pieces or [value]
