"""The pygls server: open documents, compiled off the event loop, answered from the latest compilation.

Each open document is compiled in a worker thread through the front door (the parser is reentrant, so
two documents compile at once without sharing comments or diagnostics). While a document is being
compiled, edits to it only mark it stale: when the compile ends, the newest text is compiled next, so a
burst of keystrokes costs one compile for the last of them, and diagnostics are always those of a
version the editor had. Requests (hover, completion, ...) wait for a compilation of the current text.

Test runs and runner writes (running.py) go to a thread of their own, so a long test never holds up the
diagnostics of the next keystroke; a failed test leaves a diagnostic over its block until the text changes.

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

from .. import __version__, api
from ..compiler.project import Project, read_file
from . import features, running
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
        self.runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statewright-run")
        self.explain_link = features.DEFAULT_EXPLAIN_LINK
        self.settings = running.EditorSettings()
        # the diagnostics of the last test run of each document, with the version it ran
        self.test_results: dict[str, tuple[int | None, list[types.Diagnostic]]] = {}
        # one project for the session; compiles through it take turns (it holds the files being compiled)
        self.project = api.new_project(reader=self._read)
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
                self.publish(analysis)
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

    def takes_snippets(self) -> bool:
        """Whether the client inserts completion snippets (`${1:name}` placeholders) as snippets."""
        document = self.client_capabilities.text_document
        completion = document.completion if document is not None else None
        item = completion.completion_item if completion is not None else None
        return bool(item is not None and item.snippet_support)

    def publish(self, analysis: Analysis) -> None:
        """The document's diagnostics: the compiler's, and those of its last test run if it ran this version."""
        found = features.diagnostics(analysis, self.explain_link)
        version, failures = self.test_results.get(analysis.uri, (None, []))
        if failures and version == analysis.version:
            found += failures
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=analysis.uri, version=analysis.version, diagnostics=found))

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Info, *, popup: bool = True) -> None:
        """A message for the user: shown by the editor (`popup`), or only written to the server's log."""
        if popup:
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))
        else:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))

    async def run_tests(self, uri: str, name: str | None) -> dict[str, Any]:
        a = await self.analysis(uri)
        if a is None:
            return self._refused(f"{uri} is not open in the editor")
        try:
            run = await asyncio.get_running_loop().run_in_executor(self.runner, running.run_tests, a, name)
        except running.CannotRun as e:
            return self._refused(str(e))
        except Exception as e:  # noqa: BLE001 - a bug of ours: the editor hears of it, the session goes on
            return self._failed("running the tests", e)
        self.test_results[uri] = (a.version, run.diagnostics)
        current = self.analyses.get(uri)
        if current is not None and current.version == a.version:
            self.publish(current)
        self.tell(run.summary, types.MessageType.Error if run.failed else types.MessageType.Info)
        return {"ok": True, "failed": run.failed, "tests": run.results}

    async def compile_runner(self, uri: str, *, on_save: bool = False) -> dict[str, Any]:
        a = await self.analysis(uri)
        if a is None:
            return self._refused(f"{uri} is not open in the editor")
        try:
            path = await asyncio.get_running_loop().run_in_executor(
                self.runner, running.compile_runner, a, self.settings)
        except running.CannotRun as e:
            # a save with errors is common and the diagnostics show them: that goes to the log only
            return self._refused(f"not compiled: {e}" if on_save else str(e), popup=not (on_save and e.has_errors))
        except Exception as e:  # noqa: BLE001 - as for tests
            return self._failed("writing the runner", e)
        self.tell(f"wrote {path}", popup=not on_save)
        return {"ok": True, "path": str(path)}

    def _refused(self, message: str, *, popup: bool = True) -> dict[str, Any]:
        self.tell(message, types.MessageType.Warning, popup=popup)
        return {"ok": False, "error": message}

    def _failed(self, doing: str, e: Exception) -> dict[str, Any]:
        log.exception("%s failed", doing)
        message = f"statewright failed {doing} ({type(e).__name__}: {e}); please report this"
        self.tell(message, types.MessageType.Error)
        return {"ok": False, "error": message}

    def closed(self, uri: str) -> None:
        for table in (self.analyses, self.parsed, self.test_results):
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
    ls.settings.update(options)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: StatewrightServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    # VS Code sends the extension's section ({"statewright": {...}}); other clients may send it bare
    ls.settings.update(settings.get("statewright", settings) if isinstance(settings, dict) else None)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: StatewrightServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: StatewrightServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.changed(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: StatewrightServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.changed(uri)
    if ls.settings.compile_on_save:
        await ls.compile_runner(uri, on_save=True)


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
    if a is None:
        return None
    return features.completion(a, ls.parsed.get(uri), params.position, snippets=ls.takes_snippets())


@server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
async def prepare_rename(ls: StatewrightServer, params: types.PrepareRenameParams) -> types.Range | None:
    a = await ls.analysis(params.text_document.uri)
    return features.prepare_rename(a, params.position) if a is not None else None


# pygls advertises `prepareProvider` exactly when the client says it can send prepareRename (the LSP
# allows RenameOptions only then): tests/test_lsp_running.py holds the capabilities to the handlers.
@server.feature(types.TEXT_DOCUMENT_RENAME)
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


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
async def code_lenses(ls: StatewrightServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    uri = params.text_document.uri
    a = await ls.analysis(uri)
    return running.code_lenses(a, uri) if a is not None else []


@server.command(features.EXPLAIN_COMMAND)
def explain_code(ls: StatewrightServer, code: str) -> str:
    return features.explain_code(code)


@server.command(running.RUN_TESTS_COMMAND)
async def run_tests(ls: StatewrightServer, uri: str) -> dict[str, Any]:
    return await ls.run_tests(uri, None)


@server.command(running.RUN_TEST_COMMAND)
async def run_test(ls: StatewrightServer, uri: str, name: str) -> dict[str, Any]:
    return await ls.run_tests(uri, name)


@server.command(running.COMPILE_COMMAND)
async def compile_runner(ls: StatewrightServer, uri: str) -> dict[str, Any]:
    return await ls.compile_runner(uri)


@server.command(running.RUNNER_SOURCE_COMMAND)
async def runner_source(ls: StatewrightServer, runner_uri: str, line: int) -> types.Location | None:
    try:
        return await asyncio.get_running_loop().run_in_executor(
            ls.runner, running.runner_source, runner_uri, int(line), ls.encoding())
    except running.CannotRun as e:
        ls.tell(str(e), types.MessageType.Warning)
        return None


def serve() -> int:
    """Serve one client over stdin and stdout until it exits."""
    server.start_io()
    return 0
