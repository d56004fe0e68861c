"""Diagnostics: source files and spans, the diagnostic type, the code registry, text and JSON rendering.

Used by every stage; depends on none of them.
"""

from typing import TYPE_CHECKING, Any

from .diagnostic import (
    Diagnostic,
    Diagnostics,
    Severity,
    close_names,
    did_you_mean,
    quoted_list,
    suggestion_budget,
)
from .render import diagnostic_to_json, paint, render_json, render_summary, render_text
from .source import Position, SourceFile, Span

if TYPE_CHECKING:
    from .codes import CODES, CodeInfo


def __getattr__(name: str) -> Any:
    # The registry is loaded on first use: checking a file that has no problems never reads it.
    if name in ("CODES", "CodeInfo"):
        from . import codes

        return getattr(codes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CODES",
    "CodeInfo",
    "Diagnostic",
    "Diagnostics",
    "Position",
    "Severity",
    "SourceFile",
    "Span",
    "close_names",
    "diagnostic_to_json",
    "did_you_mean",
    "paint",
    "quoted_list",
    "render_json",
    "render_summary",
    "render_text",
    "suggestion_budget",
]
