"""Rendering diagnostics: Rust-style text for people, one JSON object for tools and the designer LLM."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .diagnostic import Diagnostic, Severity


def render_text(diag: Diagnostic) -> str:
    """error[SW2002]: message / --> file:line:col / the source line / carets / = help: …"""
    lines = [f"{diag.severity.value}[{diag.code}]: {diag.message}"]
    span = diag.span
    gutter = " "  # the width of the line number, so that '|' and '=' stand in one column
    if span is None:
        lines.append(f"  --> {diag.path}")
    else:
        start, end = span.start_pos, span.end_pos
        lines.append(f"  --> {span.path}:{start.line}:{start.column}")
        source_line = span.source.line_text(start.line)
        gutter = " " * len(str(start.line))
        shown = source_line.expandtabs(1)  # one column per character keeps carets aligned
        lines.append(f"{gutter} |")
        lines.append(f"{start.line} | {shown}")
        if end.line == start.line:
            width = max(1, end.column - start.column)
        else:
            width = max(1, len(source_line) - start.column + 1)
        carets = " " * (start.column - 1) + "^" * width
        label = f" {diag.label}" if diag.label else ""
        lines.append(f"{gutter} | {carets}{label}".rstrip())
    for note in diag.notes:
        lines.append(f"{gutter} = note: {note}")
    if diag.help:
        lines.append(f"{gutter} = help: {diag.help}")
    return "\n".join(lines)


def render_summary(diags: Sequence[Diagnostic]) -> str:
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    warnings = len(diags) - errors
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
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
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    doc = {
        "valid": errors == 0,
        "error_count": errors,
        "warning_count": len(diags) - errors,
        "diagnostics": [diagnostic_to_json(d) for d in diags],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)
