"""A run's inputs: the values given checked against the machine's `input` declarations, defaults filled."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .spec import InputSpec, MachineSpec
from .structured import to_jsonable, type_adapter
from .untrusted import check_value


class InputError(ValueError):
    """The inputs given to a run do not match the machine's `input` declarations."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# how much of a value that does not fit an error quotes: an input may be 64 Mi characters long
_SHOWN_CHARS = 80


def _shown(value: Any) -> str:
    """`value` as JSON for an error message, cut to `_SHOWN_CHARS` characters (a text is cut before it is
    written, so a long one costs nothing)."""
    data = value[:_SHOWN_CHARS + 1] if isinstance(value, str) else to_jsonable(value)
    text = json.dumps(data, ensure_ascii=False)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


class InputValidator:
    """Checks values against input annotations with pydantic, one TypeAdapter per annotation."""

    def __init__(self) -> None:
        self._adapters: dict[Any, Any] = {}

    def validate(self, spec: InputSpec, value: Any) -> Any:
        """`value` checked (and coerced where pydantic's lax mode does) against the input's annotation."""
        check_value(value, "the value")  # before pydantic, which recurses
        annotation = spec.annotation
        if annotation is str and isinstance(value, str):
            return value
        if annotation is None or annotation is Any:
            return value
        try:
            adapter = self._adapters.get(annotation)
        except TypeError:  # an unhashable annotation: no caching
            adapter = None
        if adapter is None:
            adapter = type_adapter(annotation)
            try:
                self._adapters[annotation] = adapter
            except TypeError:
                pass
        from pydantic import ValidationError

        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise ValueError(f"{first.get('msg', 'invalid value')}{' at ' + where if where else ''} "
                             f"(got {_shown(value)})") from None

    def prepare(self, machine: MachineSpec, given: Mapping[str, Any]) -> dict[str, Any]:
        """The run's inputs: given values validated, defaults filled. Raises InputError naming every problem."""
        problems = []
        known = {spec.name: spec for spec in machine.inputs}
        for name in given:
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, list(known), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                listed = ", ".join(known) or "none"
                problems.append(f"unknown input '{name}' (the machine's inputs: {listed}){hint}")
        values: dict[str, Any] = {}
        for spec in machine.inputs:
            if spec.name in given:
                try:
                    values[spec.name] = self.validate(spec, given[spec.name])
                except ValueError as exc:
                    problems.append(f"input '{spec.name}': {exc}")
            elif spec.required:
                problems.append(f"missing required input '{spec.name}'")
            else:
                values[spec.name] = spec.default
        if problems:
            raise InputError(problems)
        return values
