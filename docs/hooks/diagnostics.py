"""mkdocs hook: renders the diagnostic-code index into docs/diagnostics.md from the code registry.

The index is generated at build time from `statewright.diagnostics.codes.CODES`, so the documentation
cannot drift from the codes the compiler reports.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MARKER = "<!-- diagnostics-index -->"

# The registry groups codes by their first digit; these are the section titles for each group.
GROUPS = {
    "1": "Syntax",
    "2": "Names",
    "3": "Machine structure",
    "4": "Types and guards",
    "5": "Templates",
    "6": "Test blocks",
    "7": "Warnings: unused and dead parts",
    "8": "Importers",
    "9": "Internal",
}

# Characters Python-Markdown treats as markup in running text; the registry's prose is plain text.
_MARKUP = set("\\`*_{}[]()#+-.!>|")


def _registry() -> Mapping[str, Any]:
    try:
        from statewright.diagnostics.codes import CODES
    except ImportError:  # building the docs from a checkout without installing the package
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
        from statewright.diagnostics.codes import CODES
    return CODES


def _plain(text: str) -> str:
    """Text shown exactly as written: markup characters escaped, HTML neutralised."""
    out = []
    for ch in text:
        if ch == "<":
            out.append("&lt;")
        elif ch == "&":
            out.append("&amp;")
        elif ch in _MARKUP:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _code_block(text: str) -> list[str]:
    fence = "```"
    while fence in text:
        fence += "`"
    return [fence + "text", text, fence]


def render_entry(info: Any) -> str:
    lines = [
        f"### {info.code}: {_plain(info.title)} {{#{info.code}}}",
        "",
        f"**Severity:** {info.severity.value}",
        "",
        _plain(info.explanation),
        "",
    ]
    if info.wrong:
        lines += ["Wrong:", ""] + _code_block(info.wrong) + [""]
    if info.right:
        lines += ["Right:", ""] + _code_block(info.right) + [""]
    return "\n".join(lines)


def render_index(codes: Mapping[str, Any] | None = None) -> str:
    """The Markdown index of every code: a section per group, a heading per code, in code order."""
    registry = _registry() if codes is None else codes
    parts: list[str] = []
    group = None
    for code in sorted(registry):
        digit = code[2:3]
        if digit != group:
            group = digit
            parts.append(f"## {GROUPS.get(digit, f'SW{digit}xxx')}\n")
        parts.append(render_entry(registry[code]))
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_index())
