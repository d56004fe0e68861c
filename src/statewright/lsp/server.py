"""The pygls server: open documents, compiled off the event loop, answered from the latest compilation.

Each open document is compiled in a worker thread through the front door (the parser is reentrant, so
two documents compile at once without sharing comments or diagnostics). While a document is being
compiled, edits to it only mark it stale: when the compile ends, the newest text is compiled next, so a
burst of keystrokes costs one compile for the last of them, and diagnostics are always those of a
version the editor had. Requests (hover, completion, ...) wait for a compilation of the current text.

Every document is compiled through one project, which reads open documents from the editor and other
files from disk: a file several documents use is compiled once. When a document changes, the project
forgets it and the files that use it (directly or through others); the open ones among those are compiled
again and their diagnostics published anew, after the edited document's own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..compiler.project import Project, read_file
from . import features
from .analysis import Analysis, path_of

log = logging.getLogger(__name__)
REQUEST_FAILED = -32803  # LSP's RequestFailed: the request was valid, and it cannot be done


class StatewrightServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("statewright", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.analyses: dict[str, Analysis] = {}  # the latest compilation of each open document
        self.parsed: dict[str, Analysis] = {}  # the latest one that parsed: names for completion
        self.compiling: dict[str, asyncio.Task[None]] = {}
        self.stale: set[str] = set()
        self.compiler = ThreadPoolExecutor(max_workers=2, thread_name_prefix="statewright-compile")
        self.explain_link = features.DEFAULT_EXPLAIN_LINK
        # one project for the session; compiles through it take turns (it holds the files being compiled)
        self.project = Project(reader=self._read)
        self.project_lock = threading.Lock()

    def _read(self, location: str) -> bytes:
        """A file's text for the project: the editor's, for an open document; the disk's otherwise."""
        key = Project.key(location)
        for uri, document in list(self.workspace.text_documents.items()):
            if Project.key(path_of(uri)) == key:
                return document.source.encode("utf-8")
        return read_file(location)

    def _compile(self, uri: str, version: int | None, text: str) -> tuple[Analysis, set[str]]:
        """A document's analysis (in a worker thread), and the files that use it that were forgotten."""
        path = path_of(uri)
        with self.project_lock:
            known = self.project.compilation(path)
            if known is not None and known.source is not None and known.source.text == text:
                # compiled already from this very text (a file another one uses, opened as it is on disk)
                return Analysis(uri, version, text, self.encoding(), self.project, known), set()
            forgotten = self.project.invalidate(path) - {Project.key(path)}
            return Analysis(uri, version, text, self.encoding(), self.project), forgotten

    def _recompile_users(self, forgotten: set[str]) -> None:
        """The open documents that use a changed one: compiled again, their diagnostics published anew."""
        for uri in list(self.workspace.text_documents):
            if Project.key(path_of(uri)) in forgotten:
                self.analyses.pop(uri, None)
                self.changed(uri)

    # -- documents

    def encoding(self) -> str:
        value: Any = self.workspace.position_encoding or "utf-16"
        return str(getattr(value, "value", value))

    def changed(self, uri: str) -> None:
        """A document was opened or edited: compile it now, or after the compile under way."""
        if uri in self.compiling:
            self.stale.add(uri)
            return
        self.compiling[uri] = asyncio.get_running_loop().create_task(self._compile_and_publish(uri))

    async def _compile_and_publish(self, uri: str) -> None:
        try:
            while True:
                self.stale.discard(uri)
                analysis = await self.analysis(uri)
                if analysis is None or uri not in self.workspace.text_documents:
                    return  # closed meanwhile: its diagnostics were cleared
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                    uri=uri, version=analysis.version, diagnostics=features.diagnostics(analysis, self.explain_link)))
                if uri in self.stale:
                    continue
                # ready the index for the requests that follow, off the event loop
                await asyncio.get_running_loop().run_in_executor(self.compiler, _build_index, analysis)
                if uri not in self.stale:
                    return
        except Exception:
            log.exception("compiling %s failed", uri)
        finally:
            self.compiling.pop(uri, None)

    async def analysis(self, uri: str) -> Analysis | None:
        """The compilation of the document's current text (made now, off the event loop, if need be)."""
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        known = self.analyses.get(uri)
        text, version = document.source, document.version
        if known is not None and known.version == version and known.text == text:
            return known
        loop = asyncio.get_running_loop()
        analysis, forgotten = await loop.run_in_executor(self.compiler, self._compile, uri, version, text)
        current = self.workspace.text_documents.get(uri)
        if current is not None and (uri not in self.analyses or current.version == version):
            self.analyses[uri] = analysis
            if analysis.parsed:
                self.parsed[uri] = analysis
        if forgotten:
            self._recompile_users(forgotten)
        return analysis

    def closed(self, uri: str) -> None:
        for table in (self.analyses, self.parsed):
            table.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        # the file is read from disk from now on, for the documents that use it
        self.compiler.submit(self._forget, path_of(uri), asyncio.get_running_loop())

    def _forget(self, path: str, loop: asyncio.AbstractEventLoop) -> None:
        try:
            with self.project_lock:
                forgotten = self.project.invalidate(path) - {Project.key(path)}
        except Exception:
            log.exception("forgetting %s failed", path)
            return
        if forgotten:
            loop.call_soon_threadsafe(self._recompile_users, forgotten)


def _build_index(analysis: Analysis) -> None:
    analysis.index  # noqa: B018 - built on first use, here in a worker thread


server = StatewrightServer()


@server.feature(types.INITIALIZE)
def initialize(ls: StatewrightServer, params: types.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict) and isinstance(options.get("explainLink"), str):
        ls.explain_link = options["explainLink"]


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: StatewrightServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: StatewrightServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: StatewrightServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: StatewrightServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.closed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: StatewrightServer, params: types.HoverParams) -> types.Hover | None:
    a = await ls.analysis(params.text_document.uri)
    return features.hover(a, params.position) if a is not None else None


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
async def definition(ls: StatewrightServer, params: types.DefinitionParams) -> list[types.Location] | None:
    a = await ls.analysis(params.text_document.uri)
    return features.definition(a, params.text_document.uri, params.position) if a is not None else None


@server.feature(types.TEXT_DOCUMENT_REFERENCES)
async def references(ls: StatewrightServer, params: types.ReferenceParams) -> list[types.Location] | None:
    a = await ls.analysis(params.text_document.uri)
    if a is None:
        return None
    return features.references(a, params.text_document.uri, params.position, params.context.include_declaration)


@server.feature(types.TEXT_DOCUMENT_COMPLETION,
                types.CompletionOptions(trigger_characters=[".", ">", " ", "{", "["]))
async def completion(ls: StatewrightServer, params: types.CompletionParams) -> types.CompletionList | None:
    uri = params.text_document.uri
    a = await ls.analysis(uri)
    return features.completion(a, ls.parsed.get(uri), params.position) if a is not None else None


@server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
async def prepare_rename(ls: StatewrightServer, params: types.PrepareRenameParams) -> types.Range | None:
    a = await ls.analysis(params.text_document.uri)
    return features.prepare_rename(a, params.position) if a is not None else None


@server.feature(types.TEXT_DOCUMENT_RENAME, types.RenameOptions(prepare_provider=True))
async def rename(ls: StatewrightServer, params: types.RenameParams) -> types.WorkspaceEdit | None:
    from pygls.exceptions import JsonRpcException

    a = await ls.analysis(params.text_document.uri)
    if a is None:
        return None
    try:
        return features.rename(a, params.text_document.uri, params.position, params.new_name)
    except features.RenameRefused as e:
        raise JsonRpcException(str(e), code=REQUEST_FAILED) from None


@server.feature(types.TEXT_DOCUMENT_FORMATTING)
async def formatting(ls: StatewrightServer, params: types.DocumentFormattingParams) -> list[types.TextEdit] | None:
    a = await ls.analysis(params.text_document.uri)
    return features.formatting(a) if a is not None else None


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
async def document_symbols(ls: StatewrightServer, params: types.DocumentSymbolParams
                           ) -> list[types.DocumentSymbol]:
    a = await ls.analysis(params.text_document.uri)
    return features.document_symbols(a) if a is not None else []


@server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)
async def folding_ranges(ls: StatewrightServer, params: types.FoldingRangeParams) -> list[types.FoldingRange]:
    a = await ls.analysis(params.text_document.uri)
    return features.folding_ranges(a) if a is not None else []


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
async def code_actions(ls: StatewrightServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    a = await ls.analysis(params.text_document.uri)
    if a is None:
        return []
    return features.code_actions(a, params.text_document.uri, params.context.diagnostics)


@server.command(features.EXPLAIN_COMMAND)
def explain_code(ls: StatewrightServer, code: str) -> str:
    return features.explain_code(code)


def serve() -> int:
    """Serve one client over stdin and stdout until it exits."""
    server.start_io()
    return 0
