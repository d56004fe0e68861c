"""What the index of names is made of: a key for each declared thing and an occurrence for each place.

Its own module because both the index of one file (index.py) and the index of the names other files
declare (project_index.py) make them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Span
from ..diagnostics.source import END_SHIFT, START_MASK
from ..grammar.node import Node

KINDS = ("state", "agent", "type", "tool", "input", "variable", "field", "machine", "file")


@dataclass(frozen=True, slots=True)
class Key:
    """One declared thing: its kind and its name (`Type.field` for a field, `std.python` for a tool, a
    file's path for a file), and the file that declares it when that is another file."""

    kind: str
    name: str
    file: str = ""

    def of(self, path: str) -> Key:
        """This key with its file named: `path` when it is this file's."""
        return self if self.file else Key(self.kind, self.name, path)


class Occurrence(Node):
    """A name in the text that stands for `key`: its declaration or a use, over [start, end) of `span`
    (kept as a node keeps one, its file and packed offsets: a large file has hundreds of thousands)."""

    key: Key
    span: Span
    definition: bool = False

    @property
    def start(self) -> int:
        return self._span_offsets & START_MASK  # type: ignore[attr-defined,no-any-return]

    @property
    def end(self) -> int:
        return self._span_offsets >> END_SHIFT  # type: ignore[attr-defined,no-any-return]
