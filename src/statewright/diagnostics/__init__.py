"""Diagnostics: source files and spans, the diagnostic type, the code registry, text and JSON rendering.

Used by every stage; depends on none of them.
"""

from .codes import CODES, CodeInfo
from .diagnostic import Diagnostic, Diagnostics, Severity, did_you_mean, quoted_list
from .render import diagnostic_to_json, render_json, render_summary, render_text
from .source import Position, SourceFile, Span

__all__ = [
    "CODES",
    "CodeInfo",
    "Diagnostic",
    "Diagnostics",
    "Position",
    "Severity",
    "SourceFile",
    "Span",
    "diagnostic_to_json",
    "did_you_mean",
    "quoted_list",
    "render_json",
    "render_summary",
    "render_text",
]
