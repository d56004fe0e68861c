"""One version of an open document: its compilation through the front door, its symbol index, its lines."""

from __future__ import annotations

from urllib.parse import unquote, urlparse

from .. import api
from ..compiler.pipeline import Compilation
from ..diagnostics import SourceFile
from .index import SymbolIndex, build_index
from .positions import LineIndex


class Analysis:
    """What the compiler says about one text. Built off the event loop; read-only once built."""

    def __init__(self, uri: str, version: int | None, text: str, encoding: str = "utf-16") -> None:
        self.uri = uri
        self.version = version
        self.text = text
        self.path = path_of(uri)
        # what `statewright check` runs (the front door, as far as the IR), so the same diagnostics
        self.compilation: Compilation = api.check_source(SourceFile(self.path, text))
        self.lines = LineIndex(text, encoding)
        self._index: SymbolIndex | None = None

    @property
    def index(self) -> SymbolIndex | None:
        """Where each name is declared and used (None when the text does not parse). Built the first time
        it is asked for: diagnostics do not need it, so they are published without waiting for it."""
        machine = self.compilation.ast
        if self._index is None and machine is not None:
            self._index = build_index(machine, self.compilation.symbols)
        return self._index

    @property
    def parsed(self) -> bool:
        return self.compilation.ast is not None


def path_of(uri: str) -> str:
    """The file name diagnostics carry for a document: its path for a file URI, else the URI itself."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri
