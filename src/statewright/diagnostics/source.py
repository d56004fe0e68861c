"""Source files and spans: where every diagnostic and IR origin points."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

_NEWLINE = re.compile("\n")


@dataclass(frozen=True)
class Position:
    """A point in a source file: 1-based line and column (in characters), 0-based character offset."""

    line: int
    column: int
    offset: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column, "offset": self.offset}


class SourceFile:
    """The text of one `.fsm` file, with a line index for turning offsets into positions."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def position(self, offset: int) -> Position:
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return Position(line + 1, offset - self._line_starts[line] + 1, offset)

    def line_text(self, line: int) -> str:
        """The text of 1-based `line`, without its line break."""
        if line < 1 or line > len(self._line_starts):
            return ""
        start = self._line_starts[line - 1]
        end = self._line_starts[line] if line < len(self._line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def span(self, start: int, end: int) -> Span:
        return Span(self, start, max(start, end))

    def __repr__(self) -> str:
        return f"SourceFile({self.path!r})"


@dataclass(frozen=True)
class Span:
    """A half-open character range [start, end) in one source file."""

    source: SourceFile = field(repr=False)
    start: int
    end: int

    @property
    def path(self) -> str:
        return self.source.path

    @property
    def start_pos(self) -> Position:
        return self.source.position(self.start)

    @property
    def end_pos(self) -> Position:
        return self.source.position(self.end)

    @property
    def text(self) -> str:
        return self.source.text[self.start : self.end]

    def label(self) -> str:
        """`file:line:col`, the form used in messages and source maps."""
        p = self.start_pos
        return f"{self.path}:{p.line}:{p.column}"

    def to_json(self) -> dict[str, object]:
        return {"start": self.start_pos.to_json(), "end": self.end_pos.to_json()}

    def cover(self, other: Span) -> Span:
        return Span(self.source, min(self.start, other.start), max(self.end, other.end))
