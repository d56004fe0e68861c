"""Source files and spans: where every diagnostic and IR origin points."""

from __future__ import annotations

import bisect
import re
from array import array

_NEWLINE = re.compile("\n")
_set = object.__setattr__


class Position:
    """A point in a source file: 1-based line and column (in characters), 0-based character offset."""

    __slots__ = ("column", "line", "offset")

    line: int
    column: int
    offset: int

    def __init__(self, line: int, column: int, offset: int) -> None:
        _set(self, "line", line)
        _set(self, "column", column)
        _set(self, "offset", offset)

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column, "offset": self.offset}

    def _key(self) -> tuple[int, int, int]:
        return (self.line, self.column, self.offset)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, Position) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Position(line={self.line}, column={self.column}, offset={self.offset})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Position is immutable: cannot assign to {name!r}")

    def __reduce__(self) -> tuple[type[Position], tuple[int, int, int]]:  # for pickle and copy
        return (Position, self._key())


class SourceFile:
    """The text of one `.fsm` file, with a line index for turning offsets into positions."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        # an array of numbers, not a list of int objects: a line costs 8 bytes, not 36
        self._line_starts = array("q", [0])
        self._line_starts.extend(m.end() for m in _NEWLINE.finditer(text))

    @property
    def line_starts(self) -> array[int]:
        """The offset each line starts at (after each `\n`): shared, not to be changed."""
        return self._line_starts

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


END_SHIFT = 32  # a span keeps both offsets in one int: start in the low bits, end above them
START_MASK = (1 << END_SHIFT) - 1


class Span:
    """A half-open character range [start, end) in one source file.

    A small immutable class rather than a frozen dataclass: every syntax-tree node holds one, and the
    dataclass machinery cost more at start-up than the whole class does. Both offsets are kept in one
    int (`start` and `end` read it): a large machine has a span for each of hundreds of thousands of nodes,
    and two int objects each would cost more than the span itself."""

    __slots__ = ("_offsets", "source")

    source: SourceFile
    _offsets: int

    def __init__(self, source: SourceFile, start: int, end: int) -> None:
        if not 0 <= start <= START_MASK:
            raise ValueError(f"a span starts at an offset from 0 to {START_MASK:,}, not {start}")
        _set(self, "source", source)
        _set(self, "_offsets", start | end << END_SHIFT)

    @classmethod
    def packed(cls, source: SourceFile, offsets: int) -> Span:
        """The span of `source` whose offsets `packed_offsets` gave."""
        span = object.__new__(cls)
        _set(span, "source", source)
        _set(span, "_offsets", offsets)
        return span

    @property
    def packed_offsets(self) -> int:
        """Both offsets in one int (what a syntax-tree node keeps instead of the span: grammar/node.py)."""
        return self._offsets

    @property
    def start(self) -> int:
        return self._offsets & START_MASK

    @property
    def end(self) -> int:
        return self._offsets >> END_SHIFT

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Span):
            return NotImplemented
        return self.source is other.source and self.start == other.start and self.end == other.end

    def __hash__(self) -> int:
        return hash((id(self.source), self.start, self.end))

    def __repr__(self) -> str:
        return f"Span(start={self.start}, end={self.end})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Span is immutable: cannot assign to {name!r}")

    def __reduce__(self) -> tuple[type[Span], tuple[SourceFile, int, int]]:  # for pickle and copy
        return (Span, (self.source, self.start, self.end))

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
