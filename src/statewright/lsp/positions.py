"""Character offsets to LSP positions and back, in the code units the client and server agreed on.

The compiler counts in characters (Python string indexes); LSP counts lines and, within a line, UTF-16
code units unless the client offered another encoding. One LineIndex per text converts both ways in
logarithmic time, so a 1,000-state file costs nothing extra to map.
"""

from __future__ import annotations

import bisect
from array import array


class LineIndex:
    """The line starts of one text, and conversions between offsets and (line, character) positions."""

    def __init__(self, text: str, encoding: str = "utf-16", starts: array[int] | None = None) -> None:
        """`starts`: the line starts of `text` made already (its SourceFile's, the same lines), shared."""
        self.text = text
        self.encoding = encoding
        if starts is not None:
            self.starts = starts
            return
        self.starts = array("q", [0])  # numbers, not int objects: 8 bytes a line
        position = text.find("\n")
        while position >= 0:
            self.starts.append(position + 1)
            position = text.find("\n", position + 1)

    def _units(self, chars: str) -> int:
        if self.encoding == "utf-32" or chars.isascii():
            return len(chars)
        if self.encoding == "utf-8":
            return len(chars.encode("utf-8", "surrogatepass"))
        return len(chars) + sum(1 for ch in chars if ord(ch) > 0xFFFF)

    def position(self, offset: int) -> tuple[int, int]:
        """The (line, character) of a character offset, both 0-based."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, self._units(self.text[self.starts[line] : offset])

    def offset(self, line: int, character: int) -> int:
        """The character offset of an LSP position (past the end of a line: the line's end)."""
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.text)
        start = self.starts[line]
        end = self.starts[line + 1] - 1 if line + 1 < len(self.starts) else len(self.text)
        chars = self.text[start:end]
        if self.encoding == "utf-32" or chars.isascii():
            return start + min(character, len(chars))
        units = 0
        for i, ch in enumerate(chars):
            if units >= character:
                return start + i
            units += self._units(ch)
        return end
