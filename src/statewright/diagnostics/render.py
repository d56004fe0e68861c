"""Rendering diagnostics: Rust-style text for people, one JSON object for tools and the designer LLM."""

from __future__ import annotations

from collections.abc import Sequence

from .diagnostic import Diagnostic, Severity

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

    With `color`, the parts are styled with ANSI escapes; the text is otherwise the same."""
    severity = diag.severity.value
    lines = [paint(f"{severity}[{diag.code}]", severity, color) + paint(f": {diag.message}", "message", color)]
    span = diag.span
    gutter = " "  # the width of the line number, so that '|' and '=' stand in one column
    if span is None:
        lines.append(f"  {paint('-->', 'frame', color)} {diag.path}")
    else:
        start, end = span.start_pos, span.end_pos
        lines.append(f"  {paint('-->', 'frame', color)} {span.path}:{start.line}:{start.column}")
        source_line = span.source.line_text(start.line)
        gutter = " " * len(str(start.line))
        shown = source_line.expandtabs(1)  # one column per character keeps carets aligned
        bar = paint("|", "frame", color)
        lines.append(f"{gutter} {bar}")
        lines.append(f"{paint(str(start.line), 'frame', color)} {bar} {shown}")
        if end.line == start.line:
            width = max(1, end.column - start.column)
        else:
            width = max(1, len(source_line) - start.column + 1)
        marks = "^" * width + (f" {diag.label}" if diag.label else "")
        lines.append(f"{gutter} {bar} {' ' * (start.column - 1)}{paint(marks, severity, color)}")
    equals = paint("=", "frame", color)
    for note in diag.notes:
        lines.append(f"{gutter} {equals} {paint('note', 'help', color)}: {note}")
    if diag.help:
        lines.append(f"{gutter} {equals} {paint('help', 'help', color)}: {diag.help}")
    return "\n".join(lines)


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
