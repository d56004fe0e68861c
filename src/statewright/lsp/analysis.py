"""One version of an open document: its compilation through the front door, its symbol index, its lines.

The server compiles every document through one project (compiler/project.py), so a file that several
open documents use is compiled once, and a document's index can name declarations of the files it uses;
`view_of` gives the same view of any file the project holds, open or not.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from .. import api
from ..compiler.pipeline import Compilation
from ..compiler.project import Project
from ..diagnostics import SourceFile
from .index import SymbolIndex, build_index
from .positions import LineIndex


class Analysis:
    """What the compiler says about one text. Built off the event loop; read-only once built."""

    def __init__(self, uri: str, version: int | None, text: str, encoding: str = "utf-16",
                 project: Project | None = None, compilation: Compilation | None = None) -> None:
        self.uri = uri
        self.version = version
        self.text = text
        self.path = path_of(uri)
        self.encoding = encoding
        self.project = project
        # what `statewright check` runs (the front door, as far as the IR), so the same diagnostics
        if compilation is not None:
            self.compilation = compilation
        elif project is not None:
            self.compilation = project.compile_source(SourceFile(self.path, text), location=self.path)
        else:
            self.compilation = api.check_source(SourceFile(self.path, text))
        source = self.compilation.source
        # the compiler's line starts of this very text, shared (a large file has a line every 25 bytes)
        self.lines = LineIndex(text, encoding, source.line_starts if source is not None and source.text is text else None)
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

    def view_of(self, path: str) -> Analysis | None:
        """The view of another file of the project (as last compiled), or None when the project has none."""
        if path == self.path:
            return self
        return view_of(self.project, path, self.encoding) if self.project is not None else None

    def views(self) -> list[Analysis]:
        """This file and every other file the project holds that parsed: where a name may be used."""
        out = [self]
        if self.project is not None:
            for compilation in self.project.compilations():
                if compilation.source is not None and compilation.source.path != self.path:
                    view = view_of(self.project, compilation.source.path, self.encoding)
                    if view is not None and view.parsed:
                        out.append(view)
        return out


_VIEWS: dict[tuple[int, str], tuple[Compilation, Analysis]] = {}


def view_of(project: Project, path: str, encoding: str = "utf-16") -> Analysis | None:
    """A file of the project as the features read it, made once per compilation of it."""
    compilation = project.compilation(path)
    if compilation is None or compilation.source is None:
        return None
    key = (id(compilation), encoding)
    known = _VIEWS.get(key)
    if known is not None and known[0] is compilation:
        return known[1]
    if len(_VIEWS) > 256:  # views of compilations the project no longer holds
        held = {id(c) for c in project.compilations()}
        for stale in [k for k in _VIEWS if k[0] not in held]:
            del _VIEWS[stale]
    view = Analysis(uri_of(compilation.source.path), None, compilation.source.text, encoding, project, compilation)
    _VIEWS[key] = (compilation, view)
    return view


def path_of(uri: str) -> str:
    """The file name diagnostics carry for a document: its path for a file URI, else the URI itself."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def uri_of(path: str) -> str:
    """The URI of a file the project holds (a path that is no file's is its own URI)."""
    return Path(path).as_uri() if Path(path).is_absolute() else path
