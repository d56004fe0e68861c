"""XML with positions: a small element tree built with expat, each element knowing where it was written.

`xml.etree` drops positions; the importer's errors and lint notes must point into the input file. Document
type declarations are refused outright (a workflow form needs none, and entity expansion is how an XML
file grows without bound).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.parsers import expat

from ..diagnostics import Diagnostics, SourceFile, Span


@dataclass
class XmlElement:
    tag: str
    span: Span  # the start tag's `<name`, which is what diagnostics underline
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[XmlElement] = field(default_factory=list)
    text: str = ""  # the character data directly inside, white space at both ends removed
    text_span: Span | None = None  # where that text was written (the element's span when it is empty)

    def child(self, tag: str) -> XmlElement | None:
        for c in self.children:
            if c.tag == tag:
                return c
        return None

    def all(self, tag: str) -> list[XmlElement]:
        return [c for c in self.children if c.tag == tag]

    def child_text(self, tag: str) -> str | None:
        c = self.child(tag)
        return c.text if c is not None else None

    @property
    def value_span(self) -> Span:
        return self.text_span if self.text_span is not None else self.span


class _DoctypeRefused(Exception):
    pass


def parse_xml(source: SourceFile, diagnostics: Diagnostics) -> XmlElement | None:
    """The document's root element, or None after reporting why the text is not well-formed XML (SW8002)."""
    data = source.text.encode("utf-8")
    parser = expat.ParserCreate(encoding="UTF-8")
    built = _XmlTree(source, parser)
    parser.StartElementHandler = built.start
    parser.EndElementHandler = built.end
    parser.CharacterDataHandler = built.characters
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_doctype
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        index = built.char_at(parser.ErrorByteIndex if parser.ErrorByteIndex >= 0 else len(data))
        reason = expat.ErrorString(e.code) if e.code is not None else str(e)
        looks_like_json = source.text.lstrip().startswith(("{", "["))
        hint = "this looks like JSON: a MetaAgent FSM imports with `statewright import metaagent`"
        diagnostics.report("SW8002", f"not well-formed XML: {reason}", source.span(index, index + 1),
                           label="the XML parser stopped here", help=hint if looks_like_json else "")
        return None
    except _DoctypeRefused:
        index = source.text.find("<!DOCTYPE")
        index = index if index >= 0 else built.char_at(parser.CurrentByteIndex)
        diagnostics.report("SW8002", "not accepted: the file has a document type declaration",
                           source.span(index, index + len("<!DOCTYPE")), label="a DTD is not needed",
                           help="remove the <!DOCTYPE ...> declaration")
        return None
    return built.root[0] if built.root else None


def _refuse_doctype(*_: object) -> None:
    raise _DoctypeRefused


class _XmlTree:
    """The elements expat reads, built as it calls its handlers: each with the span of its start tag and
    of its text."""

    def __init__(self, source: SourceFile, parser: expat.XMLParserType) -> None:
        self.source = source
        self.parser = parser
        self.char_at = _byte_to_char(source.text)
        self.stack: list[XmlElement] = []
        self.pieces: list[list[tuple[int, str]]] = []  # per open element: (byte index, character data)
        self.root: list[XmlElement] = []

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        at = self.char_at(self.parser.CurrentByteIndex)
        element = XmlElement(tag, self.source.span(at, at + len(tag) + 1), dict(attrs))
        if self.stack:
            self.stack[-1].children.append(element)
        else:
            self.root.append(element)
        self.stack.append(element)
        self.pieces.append([])

    def end(self, tag: str) -> None:
        element = self.stack.pop()
        chunks = self.pieces.pop()
        raw = "".join(text for _, text in chunks)
        element.text = raw.strip()
        if element.text and chunks:
            # the text begins at its first non-blank character; entity references make the end approximate
            first = chunks[0][0]
            lead = len(raw) - len(raw.lstrip())
            begin = self.char_at(first) + lead
            element.text_span = self.source.span(begin, begin + len(element.text))

    def characters(self, text: str) -> None:
        if self.pieces:
            self.pieces[-1].append((self.parser.CurrentByteIndex, text))


def _byte_to_char(text: str) -> Callable[[int], int]:
    """A function from a UTF-8 byte offset in `text` to the character offset."""
    if text.isascii():
        return lambda b: max(0, min(b, len(text)))
    byte_starts: list[int] = []
    total = 0
    for ch in text:
        byte_starts.append(total)
        total += len(ch.encode("utf-8", "surrogatepass"))

    def char_at(b: int) -> int:
        return max(0, min(bisect.bisect_right(byte_starts, b) - 1, len(text))) if b < total else len(text)

    return char_at
