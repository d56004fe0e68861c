"""Rendering diagnostics: Rust-style text for people, one JSON object for tools and the designer LLM."""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from .diagnostic import Diagnostic, Severity

# The most terminal columns of a source line a diagnostic shows. A longer line is cut to a window around
# the span, with "…" where text is left out (as rustc and ruff do): printing all of it again for every
# diagnostic on it made the output of n diagnostics on one line grow as n times its length.
SOURCE_WIDTH = 120
# How many columns of the line a cut window keeps before the span, to read it in.
SOURCE_CONTEXT = SOURCE_WIDTH // 3
ELLIPSIS = "\u2026"

# ANSI styles for text on a terminal (SGR parameters), as rustc colours its diagnostics.
_STYLES = {
    "error": "1;31",  # bold red: the severity, the code and the carets of an error
    "warning": "1;33",  # bold yellow: the same for a warning
    "frame": "1;34",  # bold blue: the arrow, the gutter and the line number
    "message": "1",  # bold: the one-line message
    "help": "1;36",  # bold cyan: the "help" and "note" labels
    "ok": "1;32",  # bold green: a summary with no errors
}


def paint(text: str, style: str, color: bool = True) -> str:
    """`text` in one of the styles above when `color` is on; unchanged otherwise (and when empty)."""
    if not color or not text:
        return text
    return f"\x1b[{_STYLES[style]}m{text}\x1b[0m"


def render_text(diag: Diagnostic, *, color: bool = False) -> str:
    """error[SW2002]: message / --> file:line:col / the source line / carets / = help: …

    With `color`, the parts are styled with ANSI escapes; the text is otherwise the same. What the file
    holds — the source line, and the names and values a message quotes from it — is shown with its control
    characters escaped (the source line with a stand-in of the same width): a hostile spec or imported
    file can neither clear the screen nor retitle the window through a diagnostic."""
    severity = diag.severity.value
    lines = [paint(f"{severity}[{diag.code}]", severity, color)
             + paint(f": {_escaped(diag.message)}", "message", color)]
    span = diag.span
    gutter = " "  # the width of the line number, so that '|' and '=' stand in one column
    if span is None:
        lines.append(f"  {paint('-->', 'frame', color)} {_escaped(diag.path)}")
    else:
        start, end = span.start_pos, span.end_pos
        lines.append(f"  {paint('-->', 'frame', color)} {_escaped(span.path)}:{start.line}:{start.column}")
        source_line = span.source.line_text(start.line)
        gutter = " " * len(str(start.line))
        if end.line == start.line:
            width = max(1, end.column - start.column)
        else:
            width = max(1, len(source_line) - start.column + 1)
        shown, pad, carets = _shown_line(source_line, start.column - 1, width)
        bar = paint("|", "frame", color)
        lines.append(f"{gutter} {bar}")
        lines.append(f"{paint(str(start.line), 'frame', color)} {bar} {shown.translate(_SHOWN_CONTROLS)}")
        marks = "^" * carets + (f" {_escaped(diag.label)}" if diag.label else "")
        lines.append(f"{gutter} {bar} {' ' * pad}{paint(marks, severity, color)}")
    equals = paint("=", "frame", color)
    for note in diag.notes:
        lines.append(f"{gutter} {equals} {paint('note', 'help', color)}: {_escaped(note)}")
    if diag.help:
        lines.append(f"{gutter} {equals} {paint('help', 'help', color)}: {_escaped(diag.help)}")
    return "\n".join(lines)




def _shown_line(line: str, first: int, count: int) -> tuple[str, int, int]:
    """The part of a source line to show for the characters [first, first + count) (positions past its end
    count one column each), the columns before the carets and the number of carets.

    Columns are terminal columns: a wide (East Asian) character takes two, a combining one none, a tab
    one (it is shown as a space, so carets stay aligned). A line of at most SOURCE_WIDTH columns is shown
    whole; a longer one is cut to SOURCE_WIDTH columns, from its start when the span ends in the first
    ones, else from SOURCE_CONTEXT columns before the span (less when that would end short of the line's
    end), never through a wide character."""
    n = len(line)
    cols = _columns(line)

    def col(i: int) -> int:
        return cols[min(i, n)] + max(0, i - n)

    left, right = col(first), col(first + count)
    if cols[n] <= SOURCE_WIDTH:
        return line.replace("\t", " "), left, max(1, right - left)
    if right <= SOURCE_WIDTH - 1:
        a = 0
    else:
        a = bisect.bisect_left(cols, max(0, min(left - SOURCE_CONTEXT, cols[n] - (SOURCE_WIDTH - 1))))
        while a < min(first, n) and cols[a + 1] == cols[a]:
            a += 1  # a combining character is shown with the one it combines with, or not at all
    room = SOURCE_WIDTH - (a > 0)
    if cols[n] - cols[a] <= room:
        b = n
    else:
        b = bisect.bisect_right(cols, cols[a] + room - 1) - 1
    shown = (ELLIPSIS if a > 0 else "") + line[a:b].replace("\t", " ") + (ELLIPSIS if b < n else "")
    visible_end = first + count if b == n else min(first + count, b)
    return shown, (a > 0) + left - cols[a], max(1, col(visible_end) - left)


@lru_cache(maxsize=8)
def _columns(line: str) -> Sequence[int]:
    """The terminal column where each character of `line` starts, and one past the last (cached: the
    diagnostics on one line ask for the same line one after another)."""
    if line.isascii():
        return range(len(line) + 1)
    out = [0]
    for ch in line:
        out.append(out[-1] + _char_width(ch))
    return out


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def render_summary(diags: Sequence[Diagnostic], *, color: bool = False) -> str:
    """`2 errors, 1 warning` or `no problems`; with `color`, errors in red and warnings in yellow."""
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    warnings = len(diags) - errors
    parts = []
    if errors:
        parts.append(paint(f"{errors} error{'s' if errors != 1 else ''}", "error", color))
    if warnings:
        parts.append(paint(f"{warnings} warning{'s' if warnings != 1 else ''}", "warning", color))
    return ", ".join(parts) if parts else "no problems"


def diagnostic_to_json(diag: Diagnostic) -> dict[str, object]:
    rng: dict[str, object] | None = diag.span.to_json() if diag.span is not None else None
    return {
        "file": diag.path,
        "severity": diag.severity.value,
        "code": diag.code,
        "message": diag.message,
        "help": diag.help,
        "notes": list(diag.notes),
        "range": rng,
    }


def render_json(diags: Sequence[Diagnostic]) -> str:
    """`{valid, error_count, warning_count, diagnostics: [...]}` — the form `check --format json` prints."""
    import json  # here: a clean `check` in text form never needs it

    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    doc = {
        "valid": errors == 0,
        "error_count": errors,
        "warning_count": len(diags) - errors,
        "diagnostics": [diagnostic_to_json(d) for d in diags],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


# What a terminal would act on: C0 controls (but the line breaks and tabs a message may hold), DEL, C1,
# line and paragraph separators, bidirectional marks and overrides. The runtime's `printable` escapes the
# same set for what a run prints; diagnostics depend on nothing, so the rule is written here once more.
_TERMINAL_CONTROLS = frozenset([*range(0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x2028, 0x2029, 0x200E, 0x200F,
                                *range(0x202A, 0x202F), *range(0x2066, 0x206A)]) - {0x09, 0x0A}
_ESCAPES = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _TERMINAL_CONTROLS}
# in a shown source line a control character keeps its column: one as wide as it is counted stands in
_SHOWN_CONTROLS = {code: "" if _char_width(chr(code)) == 0 else "\ufffd" for code in _TERMINAL_CONTROLS}


def _escaped(text: str) -> str:
    return text.translate(_ESCAPES)
