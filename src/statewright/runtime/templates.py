"""Instruction, prompt and result templates: sandboxed Jinja2, compiled once, values rendered as data."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .structured import to_jsonable

_TEMPLATE_MARKERS = ("{{", "{%", "{#")


class TemplateRenderError(Exception):
    """A template failed to compile or render (an unknown name, a forbidden operation)."""


def _templates_finalize(value: Any) -> Any:
    """How a value prints: text as is, nothing as "", typed objects and collections as JSON."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (dict, list, tuple)) or hasattr(value, "model_dump"):
        return json.dumps(to_jsonable(value), ensure_ascii=False)
    return value


def _templates_environment() -> Any:
    """A fresh sandboxed environment: undefined names are errors, nothing is escaped, values print as data."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, finalize=_templates_finalize)


def is_constant(source: str) -> bool:
    """A template without any Jinja markup renders to itself; the engine skips Jinja for it."""
    return not any(marker in source for marker in _TEMPLATE_MARKERS)


class TemplateSet:
    """The templates of one machine: one sandboxed environment, each template compiled on first use.

    Owned by the machine's core, so nothing is shared between machines and nothing is global."""

    def __init__(self) -> None:
        self._environment: Any = None
        self._compiled: dict[str, Any] = {}

    is_constant = staticmethod(is_constant)

    def compile(self, source: str) -> Any:
        compiled = self._compiled.get(source)
        if compiled is None:
            from jinja2 import TemplateError as JinjaTemplateError

            if self._environment is None:
                self._environment = _templates_environment()
            try:
                compiled = self._environment.from_string(source)
            except JinjaTemplateError as exc:
                raise TemplateRenderError(f"the template does not compile: {exc}") from None
            self._compiled[source] = compiled
        return compiled

    def render(self, source: str, context: Mapping[str, Any]) -> str:
        """Render `source` with `context`. Rendered values are data: their text is never rendered again."""
        if is_constant(source):
            return source
        compiled = self.compile(source)
        try:
            return compiled.render(context)
        except Exception as exc:  # noqa: BLE001 - any render error is the template's, reported as one
            raise TemplateRenderError(_templates_describe(exc)) from None


def render_template(source: str, context: Mapping[str, Any]) -> str:
    """Render one template with a fresh environment (for one-off use; machines keep a TemplateSet)."""
    return TemplateSet().render(source, context)


def _templates_describe(exc: Exception) -> str:
    name = type(exc).__name__
    if name == "UndefinedError":
        return f"the template uses a name that is not defined: {exc}"
    if name == "SecurityError":
        return f"the template tried an operation the sandbox forbids: {exc}"
    return f"the template failed to render: {name}: {exc}"
