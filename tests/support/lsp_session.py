"""A real LSP client session with `statewright lsp` over stdio (pygls's LanguageClient), for the tests."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.client import LanguageClient

T = TypeVar("T")
TIMEOUT = 30.0


def uri_of(path: str | Path) -> str:
    return Path(path).resolve().as_uri()


class Session:
    """One server process and the client talking to it; diagnostics are kept per document as they come."""

    def __init__(self, client: LanguageClient, result: types.InitializeResult) -> None:
        self.client = client
        self.result = result
        self.published: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.arrived = asyncio.Condition()
        self.versions: dict[str, int] = {}
        self.messages: list[tuple[str, types.MessageType, str]] = []  # ("show" or "log", type, text)

    async def _message(self, how: str, kind: types.MessageType, text: str) -> None:
        async with self.arrived:
            self.messages.append((how, kind, text))
            self.arrived.notify_all()

    async def message(self, contains: str, how: str = "show") -> tuple[types.MessageType, str]:
        """The first message shown (or, with how="log", logged) whose text contains `contains`."""
        def found() -> tuple[types.MessageType, str] | None:
            return next(((k, t) for h, k, t in self.messages if h == how and contains in t), None)

        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: found() is not None), TIMEOUT)
        result = found()
        assert result is not None
        return result

    async def _publish(self, params: types.PublishDiagnosticsParams) -> None:
        async with self.arrived:
            self.published.setdefault(params.uri, []).append(params)
            self.arrived.notify_all()

    # -- documents

    def open(self, uri: str, text: str) -> None:
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="statewright", version=1, text=text)))

    def replace(self, uri: str, text: str) -> None:
        """Send the whole new text, as a change event without a range."""
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def edit(self, uri: str, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """Send one incremental change: `text` replaces the range from `start` to `end` (line, character)."""
        self.versions[uri] += 1
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*start), types.Position(*end)), text=text)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[change]))

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=self.doc(uri)))

    def configure(self, settings: Any) -> None:
        self.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))

    async def diagnostics(self, uri: str, version: int | None = None) -> list[types.Diagnostic]:
        """The diagnostics published for the document's `version` (by default its latest)."""
        want = self.versions[uri] if version is None else version

        def ready() -> bool:
            return any(p.version == want for p in self.published.get(uri, ()))

        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(ready), TIMEOUT)
        return next(p for p in reversed(self.published[uri]) if p.version == want).diagnostics

    async def published_until(self, uri: str, wanted: Callable[[list[types.Diagnostic]], bool]
                              ) -> list[types.Diagnostic]:
        """The diagnostics of the first publish for the document, from now on or before, that `wanted` says
        is the one (a document published again because a file it uses changed keeps its version)."""
        def ready() -> bool:
            return any(wanted(list(p.diagnostics)) for p in self.published.get(uri, ()))

        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(ready), TIMEOUT)
        return next(list(p.diagnostics) for p in self.published[uri] if wanted(list(p.diagnostics)))

    def published_count(self, uri: str) -> int:
        return len(self.published.get(uri, ()))

    async def published_after(self, uri: str, count: int) -> list[types.Diagnostic]:
        """The diagnostics of the next publish for the document after its first `count` ones (a document
        published again because a file it uses changed keeps its version)."""
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: len(self.published.get(uri, ())) > count), TIMEOUT)
        return self.published[uri][-1].diagnostics

    # -- requests

    def doc(self, uri: str) -> types.TextDocumentIdentifier:
        return types.TextDocumentIdentifier(uri=uri)

    async def request(self, call: Callable[[Any], Awaitable[T]], params: Any) -> T:
        return await asyncio.wait_for(call(params), TIMEOUT)

    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        return await self.request(self.client.text_document_hover_async, types.HoverParams(
            text_document=self.doc(uri), position=types.Position(line, character)))

    async def definition(self, uri: str, line: int, character: int) -> Any:
        return await self.request(self.client.text_document_definition_async, types.DefinitionParams(
            text_document=self.doc(uri), position=types.Position(line, character)))

    async def references(self, uri: str, line: int, character: int, declaration: bool = True) -> Any:
        return await self.request(self.client.text_document_references_async, types.ReferenceParams(
            text_document=self.doc(uri), position=types.Position(line, character),
            context=types.ReferenceContext(include_declaration=declaration)))

    async def completion(self, uri: str, line: int, character: int) -> list[str]:
        return [item.label for item in await self.completion_items(uri, line, character)]

    async def completion_items(self, uri: str, line: int, character: int) -> list[types.CompletionItem]:
        result = await self.request(self.client.text_document_completion_async, types.CompletionParams(
            text_document=self.doc(uri), position=types.Position(line, character)))
        return list(result.items if isinstance(result, types.CompletionList) else (result or []))

    async def rename(self, uri: str, line: int, character: int, new_name: str) -> Any:
        return await self.request(self.client.text_document_rename_async, types.RenameParams(
            text_document=self.doc(uri), position=types.Position(line, character), new_name=new_name))

    async def command(self, name: str, *arguments: Any) -> Any:
        return await self.request(self.client.workspace_execute_command_async, types.ExecuteCommandParams(
            command=name, arguments=list(arguments)))

    async def code_lenses(self, uri: str) -> list[types.CodeLens]:
        found = await self.request(self.client.text_document_code_lens_async,
                                   types.CodeLensParams(text_document=self.doc(uri)))
        return list(found or [])

    async def prepare_rename(self, uri: str, line: int, character: int) -> Any:
        return await self.request(self.client.text_document_prepare_rename_async, types.PrepareRenameParams(
            text_document=self.doc(uri), position=types.Position(line, character)))

    async def formatting(self, uri: str) -> Any:
        return await self.request(self.client.text_document_formatting_async, types.DocumentFormattingParams(
            text_document=self.doc(uri), options=types.FormattingOptions(tab_size=4, insert_spaces=True)))


async def start(initialization_options: Any = None, encodings: list[str] | None = None,
                capabilities: types.ClientCapabilities | None = None, cwd: str | None = None) -> Session:
    client = LanguageClient("statewright-tests", "1")
    await client.start_io(sys.executable, "-m", "statewright", "lsp", "--stdio", cwd=cwd)
    capabilities = capabilities or types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=encodings) if encodings else None)
    result = await asyncio.wait_for(client.initialize_async(types.InitializeParams(
        capabilities=capabilities, process_id=None, root_uri=None,
        initialization_options=initialization_options)), TIMEOUT)
    session = Session(client, result)
    async def publish(params: types.PublishDiagnosticsParams) -> None:
        await session._publish(params)

    client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(publish)

    async def shown(params: types.ShowMessageParams) -> None:
        await session._message("show", params.type, params.message)

    async def logged(params: types.LogMessageParams) -> None:
        await session._message("log", params.type, params.message)

    client.feature(types.WINDOW_SHOW_MESSAGE)(shown)
    client.feature(types.WINDOW_LOG_MESSAGE)(logged)
    client.initialized(types.InitializedParams())
    return session


async def stop(session: Session) -> None:
    await asyncio.wait_for(session.client.shutdown_async(None), TIMEOUT)
    session.client.exit(None)
    await session.client.stop()


def run(scenario: Callable[[Session], Awaitable[None]], **options: Any) -> None:
    """Run one scenario against a fresh server."""
    async def main() -> None:
        session = await start(**options)
        try:
            await scenario(session)
        finally:
            await stop(session)

    asyncio.run(main())


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """A text with LSP edits applied (UTF-16 positions; the tests' texts keep to the BMP)."""
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)

    def offset(p: types.Position) -> int:
        return starts[p.line] + p.character if p.line < len(starts) else len(text)

    out, pos = [], 0
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character)):
        start, end = offset(e.range.start), offset(e.range.end)
        out += [text[pos:start], e.new_text]
        pos = end
    return "".join(out) + text[pos:]
