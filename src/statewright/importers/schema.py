"""Reading an input file's structure with positioned errors: what both importers share about bad input."""

from __future__ import annotations

from collections.abc import Iterable

from ..diagnostics import Diagnostics, Span, did_you_mean, quoted_list
from .json_source import JsonValue, describe


class JsonSchema:
    """Typed access to a JSON document that reports, with positions, every value of the wrong kind."""

    def __init__(self, diagnostics: Diagnostics) -> None:
        self.diagnostics = diagnostics

    def object(self, value: JsonValue | None, what: str) -> JsonValue | None:
        if value is None:
            return None
        if value.kind != "object":
            self._wrong(value, what, "an object")
            return None
        return value

    def array(self, value: JsonValue | None, what: str) -> list[JsonValue]:
        if value is None or value.kind == "null":
            return []
        if value.kind != "array":
            self._wrong(value, what, "a list")
            return []
        return value.items

    def require(self, owner: JsonValue, key: str, what: str) -> JsonValue | None:
        value = owner.get(key)
        if value is None:
            self.diagnostics.report("SW8004", f"{what} has no '{key}'", anchor(owner),
                                    label=f"'{key}' is missing here",
                                    help=did_you_mean(key, owner.members) or f"add \"{key}\": ... to it")
        return value

    def text(self, value: JsonValue | None, what: str) -> str | None:
        if value is None or value.kind == "null":
            return None
        if value.kind != "string":
            self._wrong(value, what, "a string")
            return None
        return str(value.value)

    def ident(self, value: JsonValue | None, what: str) -> str | None:
        """An id: a string, or a whole number (MetaAgent writes both)."""
        if value is None:
            return None
        if value.kind == "string":
            return str(value.value)
        if value.kind == "number" and isinstance(value.value, int):
            return str(value.value)
        self._wrong(value, what, "a string or a whole number")
        return None

    def flag(self, value: JsonValue | None, what: str) -> bool:
        if value is None or value.kind == "null":
            return False
        if value.kind != "bool":
            self._wrong(value, what, "true or false")
            return False
        return bool(value.value)

    def _wrong(self, value: JsonValue, what: str, expected: str) -> None:
        self.diagnostics.report("SW8005", f"{what} must be {expected}, not {describe(value)}", value.span,
                                label=f"expected {expected}")


def anchor(value: JsonValue) -> Span:
    """Where to point at an object as a whole: its opening brace."""
    return Span(value.span.source, value.span.start, value.span.start + 1)


def unknown(diagnostics: Diagnostics, what: str, name: str, span: Span, known: Iterable[str], label: str
            ) -> None:
    """SW8006: a reference to an id or a name that nothing declares ("unknown agent id '7'")."""
    known = list(known)
    help_text = did_you_mean(name, known)
    if not help_text and known:
        help_text = "known: " + quoted_list(known)
    diagnostics.report("SW8006", f"unknown {what} '{name}'", span, label=label, help=help_text)
