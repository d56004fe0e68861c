"""YAML with positions: CrewAI's config files read into the same positioned values as JSON.

PyYAML composes a node tree whose marks say where each node was written; the tree is turned into
`JsonValue`s, so the schema checks and messages the JSON importer uses serve YAML too. PyYAML is an
optional dependency (`pip install 'statewright[crewai]'`): it is imported here, only when YAML is read.
Aliases are followed into shared nodes, never expanded without bound: a document of more than
`MAX_VALUES` values, or one that contains itself, is refused.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import Diagnostics, SourceFile, Span
from .json_source import JsonValue

MAX_VALUES = 100_000  # far beyond any real config file; aliases can make a small file name billions
INSTALL_HINT = "pip install 'statewright[crewai]'"


class MissingYamlReader(RuntimeError):
    """PyYAML is not installed: reading CrewAI's YAML needs it."""

    def __init__(self) -> None:
        super().__init__(f"importing a CrewAI project reads YAML with PyYAML, which is not installed; install it "
                         f"with {INSTALL_HINT}")


def require_yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise MissingYamlReader() from None
    return yaml


def parse_yaml(source: SourceFile, diagnostics: Diagnostics) -> JsonValue | None:
    """The document's root value (None for an empty document), or None after reporting SW8010."""
    yaml = require_yaml()
    try:
        node = yaml.compose(source.text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        offset = mark.index if mark is not None else 0
        problem = (e.problem or e.context or "not YAML").strip()
        context = f" ({e.context.strip()})" if e.context and e.problem else ""
        diagnostics.report("SW8010", f"not valid YAML: {problem}{context}", source.span(offset, offset + 1),
                           label="the YAML parser stopped here", help=_hint(source.text, problem))
        return None
    except yaml.YAMLError as e:  # a reader error: a character YAML does not allow
        offset = int(getattr(e, "position", 0) or 0)
        diagnostics.report("SW8010", f"not valid YAML: {str(e).splitlines()[0]}", source.span(offset, offset + 1),
                           label="the YAML reader stopped here")
        return None
    except RecursionError:
        diagnostics.report("SW8010", "not valid YAML: nested too deeply to read", source.span(0, 1))
        return None
    if node is None:
        return None
    return _Converter(source, diagnostics).convert(node)


def _hint(text: str, problem: str) -> str:
    if "\t" in text and "tab" in problem:
        return "YAML indents with spaces, never tabs"
    if text.lstrip().startswith("{") or text.lstrip().startswith("<"):
        return "a CrewAI config file is YAML: a mapping of names to their settings"
    if "mapping values are not allowed" in problem:
        return "a value that holds ': ' must be quoted, or written as a block with '>' or '|'"
    return ""


class _Converter:
    """Node tree -> JsonValue tree; counts values so that aliases cannot multiply them without bound."""

    def __init__(self, source: SourceFile, diagnostics: Diagnostics) -> None:
        import yaml

        self.yaml = yaml
        self.source = source
        self.diagnostics = diagnostics
        self.constructor = yaml.constructor.SafeConstructor()
        self.count = 0

    def convert(self, root: Any) -> JsonValue | None:
        try:
            return self._value(root, frozenset())
        except _TooLarge as e:
            self.diagnostics.report("SW8010", str(e), e.span, label="here",
                                    help="write the values out instead of repeating aliases")
            return None
        except RecursionError:
            self.diagnostics.report("SW8010", "not valid YAML: nested too deeply to read", self.source.span(0, 1))
            return None

    def _span(self, node: Any) -> Span:
        start = node.start_mark.index
        end = node.end_mark.index if node.end_mark is not None else start
        # a block scalar's end mark lies on the line after it: keep the span on the value's own text
        text = self.source.text[start:end].rstrip()
        return self.source.span(start, start + max(len(text), 1) if text else start)

    def _value(self, node: Any, on_path: frozenset[int]) -> JsonValue:
        self.count += 1
        if self.count > MAX_VALUES:
            raise _TooLarge(f"not valid YAML here: the document names more than {MAX_VALUES:,} values "
                            "(aliases repeat them)", self._span(node))
        if id(node) in on_path:
            raise _TooLarge("not valid YAML here: an alias makes this value contain itself", self._span(node))
        span = self._span(node)
        if isinstance(node, self.yaml.MappingNode):
            inner = on_path | {id(node)}
            own = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
            if len(own) < len(node.value):
                self._merge(node, inner)
            members: dict[str, tuple[Span, JsonValue]] = {}
            written: set[str] = set()  # keys the mapping writes itself (a merged key may be written over)
            for key_node, value_node in node.value:
                key = self._value(key_node, inner)
                name = key.value if key.kind == "string" else key.span.text
                if id(key_node) in own and name in written:
                    self.diagnostics.report("SW8007", f"the key '{name}' is written twice", key.span,
                                            label="written again here",
                                            notes=[f"first written at {members[name][0].label()}"],
                                            help="YAML keeps only the last one: remove or rename one of them")
                if id(key_node) in own:
                    written.add(name)
                members[str(name)] = (key.span, self._value(value_node, inner))
            return JsonValue("object", span, members=members)
        if isinstance(node, self.yaml.SequenceNode):
            inner = on_path | {id(node)}
            return JsonValue("array", span, items=[self._value(item, inner) for item in node.value])
        try:
            value = self.constructor.construct_object(node, deep=True)
        except self.yaml.YAMLError:
            value = node.value  # a tag PyYAML's safe loader does not construct: keep the text
        if isinstance(value, bool):
            return JsonValue("bool", span, value)
        if value is None:
            return JsonValue("null", span, None)
        if isinstance(value, (int, float)):
            return JsonValue("number", span, value)
        return JsonValue("string", span, str(value))


    def _merge(self, node: Any, on_path: frozenset[int]) -> None:
        """`<<: *base`: the keys of the merged mappings, under the node's own (PyYAML's own merge, after
        checking that the merged values do not contain the node)."""
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge" and id(value) in on_path:
                raise _TooLarge("not valid YAML here: an alias makes this value contain itself", self._span(value))
        try:
            self.constructor.flatten_mapping(node)
        except self.yaml.YAMLError as e:
            raise _TooLarge(f"not valid YAML here: {getattr(e, 'problem', None) or e}", self._span(node)) from None


class _TooLarge(Exception):
    def __init__(self, message: str, span: Span) -> None:
        super().__init__(message)
        self.span = span
