"""The long form of a diagnostic code (`statewright explain SW2002`): what it means, wrong and right."""

from __future__ import annotations

import textwrap

from .codes import CODES, CodeInfo

_WIDTH = 100


def all_codes() -> list[CodeInfo]:
    """Every registered code, in code order (for the documentation's list of diagnostics)."""
    return [CODES[code] for code in sorted(CODES)]


def _example(title: str, text: str) -> list[str]:
    return ["", f"{title}:", "", textwrap.indent(text, "    ")]


def explain(code: str) -> str | None:
    """The long explanation of `code` ("SW2002"), or None when no such code is registered."""
    info = CODES.get(code.strip().upper())
    if info is None:
        return None
    lines = [f"{info.code}: {info.title} ({info.severity.value})", ""]
    lines.extend(textwrap.wrap(info.explanation, _WIDTH))
    if info.wrong:
        lines.extend(_example("Wrong", info.wrong))
    if info.right:
        lines.extend(_example("Right", info.right))
    return "\n".join(lines) + "\n"
