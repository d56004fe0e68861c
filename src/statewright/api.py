"""The Python API: one function per thing statewright does. The CLI, the designer's repair loop and the
tests all call these, so every face of the compiler behaves the same.

Heavy modules (pydantic, jinja2, litellm) are imported inside the functions that need them, so that
`check`, `fmt` and `graph` start fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import Diagnostic, Diagnostics, SourceFile
from .grammar import ParseResult, ast, parse_source, read_source


@dataclass
class Compilation:
    """Everything one pass of the front end learned about one file."""

    source: SourceFile | None
    ast: ast.Machine | None
    comments: list[ast.Comment]
    ir: object | None  # compiler.ir.Machine when the file has no errors
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ir is not None and not any(d.severity.value == "error" for d in self.diagnostics)


def parse_text(text: str, path: str = "<string>") -> ParseResult:
    return parse_source(SourceFile(path, text))


def check_source(source: SourceFile) -> Compilation:
    """Parse and check one source file; every problem is reported, none raised."""
    from .compiler.check import check_machine

    parsed = parse_source(source)
    diags = parsed.diagnostics
    ir = None
    if parsed.machine is not None:
        ir = check_machine(source, parsed.machine, diags)
    return Compilation(source, parsed.machine, parsed.comments, ir, diags.sorted())


def check_text(text: str, path: str = "<string>") -> Compilation:
    return check_source(SourceFile(path, text))


def check_bytes(data: bytes, path: str) -> Compilation:
    diags = Diagnostics()
    source = read_source(path, data, diags)
    if source is None:
        return Compilation(None, None, [], None, diags.sorted())
    return check_source(source)


def check_file(path: str | Path) -> Compilation:
    """Check a file on disk. A missing or unreadable file is an OSError for the caller to report."""
    p = Path(path)
    return check_bytes(p.read_bytes(), str(path))
