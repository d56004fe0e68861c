"""JSON with positions: every value and every object key keeps the span it was written at.

Python's `json` module says where a syntax error is but not where a value came from, and an importer's
schema errors and lint notes must point into the input file. `parse_json` checks the text with `json`
(for its exact syntax messages) and then reads it again with a small reader that records spans.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Diagnostics, SourceFile, Span
from ..runtime.untrusted import MAX_DEPTH, json_depth_problem

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_OPENINGS_AND_CLOSINGS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_CONSTANTS = {"true": True, "false": False, "null": None, "NaN": float("nan"),
              "Infinity": float("inf"), "-Infinity": float("-inf")}


@dataclass
class JsonValue:
    """One JSON value and where it was written. Objects map keys to (key span, value)."""

    kind: str  # "object", "array", "string", "number", "bool", "null"
    span: Span
    value: Any = None  # str, int, float, bool or None for scalars
    items: list[JsonValue] = field(default_factory=list)
    members: dict[str, tuple[Span, JsonValue]] = field(default_factory=dict)

    def get(self, key: str) -> JsonValue | None:
        member = self.members.get(key)
        return member[1] if member is not None else None

    def key_span(self, key: str) -> Span | None:
        member = self.members.get(key)
        return member[0] if member is not None else None

    def string_span(self, start: int, end: int) -> Span:
        """The span in the file of characters [start, end) of this string's decoded value."""
        offsets = _decoded_offsets(self.span.text)
        start = min(max(start, 0), len(offsets) - 1)
        end = min(max(end, start), len(offsets) - 1)
        return Span(self.span.source, self.span.start + offsets[start], self.span.start + offsets[end])


def describe(value: JsonValue) -> str:
    """The kind of a value in words, for messages: 'a list', 'the number 3', 'a string'."""
    if value.kind == "object":
        return "an object"
    if value.kind == "array":
        return "a list"
    if value.kind == "string":
        return "a string"
    if value.kind == "bool":
        return "true" if value.value else "false"
    if value.kind == "null":
        return "null"
    return f"the number {value.span.text}"


def parse_json(source: SourceFile, diagnostics: Diagnostics) -> JsonValue | None:
    """The document's root value, or None after reporting why the text is not JSON (SW8001). Nesting is
    checked first, without recursion: json and the reader below both recurse."""
    too_deep = json_depth_problem(source.text, "the file", MAX_DEPTH)
    if too_deep is not None:
        deepest = _deepest_opening(source.text, MAX_DEPTH)
        diagnostics.report("SW8001", f"not valid JSON: {too_deep}", source.span(deepest, deepest + 1),
                           label=f"level {MAX_DEPTH + 1} opens here",
                           help="a spec to import nests a few levels deep; check that this is the file you meant")
        return None
    try:
        json.loads(source.text)
    except json.JSONDecodeError as e:
        looks_like_xml = source.text.lstrip().startswith("<")
        hint = "this looks like XML: an AutoAgent workflow form imports with `statewright import autoagent`"
        if not source.text[e.pos :].strip():
            diagnostics.report("SW8001", "not valid JSON: the file ends before the JSON does",
                               source.span(e.pos, e.pos), label="the file ends here",
                               help="close every '{' and '[' that is still open")
        else:
            before = source.text[: e.pos].rstrip()
            if before.endswith(",") and source.text[e.pos] in "]}":
                hint = "JSON allows no comma after the last item"
            elif not looks_like_xml:
                hint = ""
            diagnostics.report("SW8001", f"not valid JSON: {e.msg[0].lower() + e.msg[1:]}",
                               source.span(e.pos, e.pos + 1), label="the JSON parser stopped here",
                               help=hint)
        return None
    return _Reader(source).document()


def _deepest_opening(text: str, max_depth: int) -> int:
    """Where the first bracket that opens level max_depth + 1 stands (strings skipped), for the diagnostic."""
    depth = 0
    for match in _OPENINGS_AND_CLOSINGS.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > max_depth:
                return match.start()
        elif match.group() in "]}":
            depth -= 1
    return 0


class _Reader:
    """Reads text that `json` has already accepted, so it only has to keep track of positions."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.text = source.text
        self.pos = 0

    def document(self) -> JsonValue:
        self._skip()
        value = self._value()
        self._skip()
        return value

    def _skip(self) -> None:
        match = _WHITESPACE.match(self.text, self.pos)
        assert match is not None
        self.pos = match.end()

    def _value(self) -> JsonValue:
        start, ch = self.pos, self.text[self.pos]
        if ch == "{":
            return self._object()
        if ch == "[":
            return self._array()
        if ch == '"':
            value, self.pos = json.decoder.scanstring(self.text, start + 1)  # type: ignore[attr-defined]
            return JsonValue("string", self.source.span(start, self.pos), value)
        for word, constant in _CONSTANTS.items():
            if self.text.startswith(word, start):
                self.pos = start + len(word)
                kind = "bool" if isinstance(constant, bool) else "null" if constant is None else "number"
                return JsonValue(kind, self.source.span(start, self.pos), constant)
        match = _NUMBER.match(self.text, start)
        assert match is not None, "json accepted a value the reader does not know"
        self.pos = match.end()
        number: int | float = json.loads(match.group(0))
        return JsonValue("number", self.source.span(start, self.pos), number)

    def _object(self) -> JsonValue:
        start = self.pos
        self.pos += 1
        members: dict[str, tuple[Span, JsonValue]] = {}
        self._skip()
        while self.text[self.pos] != "}":
            key = self._value()
            self._skip()
            self.pos += 1  # the colon
            self._skip()
            members[key.value] = (key.span, self._value())  # like json: the last of repeated keys wins
            self._skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                self._skip()
        self.pos += 1
        return JsonValue("object", self.source.span(start, self.pos), members=members)

    def _array(self) -> JsonValue:
        start = self.pos
        self.pos += 1
        items: list[JsonValue] = []
        self._skip()
        while self.text[self.pos] != "]":
            items.append(self._value())
            self._skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                self._skip()
        self.pos += 1
        return JsonValue("array", self.source.span(start, self.pos), items=items)


def _decoded_offsets(raw: str) -> list[int]:
    """For a string token (quotes included), the raw offset of each decoded character, plus one for the end.

    Escapes are several raw characters for one decoded character; a surrogate pair written as two
    `\\uXXXX` escapes is one character.
    """
    offsets: list[int] = []
    i, end = 1, len(raw) - 1
    while i < end:
        offsets.append(i)
        if raw[i] != "\\":
            i += 1
        elif raw[i + 1] != "u":
            i += 2
        else:
            high = int(raw[i + 2 : i + 6], 16)
            paired = 0xD800 <= high < 0xDC00 and raw.startswith("\\u", i + 6)
            i += 12 if paired and 0xDC00 <= int(raw[i + 8 : i + 12], 16) < 0xE000 else 6
    offsets.append(end)
    return offsets
