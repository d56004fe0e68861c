"""What each of Jinja's filters gives, for the template check: the type of its result, and the fields it reads.

A filter that reads a field of every item — `map(attribute=...)`, `selectattr`, `rejectattr`, `groupby`,
`sort`, `unique`, `join`, `sum`, `min`, `max` with an attribute, and `attr` — has each read checked like
`item.FIELD` (SW2006, SW4031, SW4014). A filter that keeps or picks items (`first`, `list`, `select`, ...)
keeps their type; one that makes text or a number gives that. Any other filter applied to a typed value gives
a value the check does not follow (SW5010 where it is read into).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jinja2 import nodes

from .. import ir
from .template_values import GROUP_LABEL, Types, Untracked, shown_name, tracked, union
from .type_algebra import Record, is_numeric, is_stringy, join_types

if TYPE_CHECKING:
    from .template_types import TemplateTypes

FilterRule = Callable[["FilterCall"], Types]


class FilterCall:
    """One filter applied to a value, as the filter rules (template_filters.py) see it."""

    def __init__(self, types: TemplateTypes, node: nodes.Filter, value: Types) -> None:
        self.types = types
        self.node = node
        self.value = value

    def argument(self, position: int, keyword: str) -> nodes.Node | None:
        """The filter's argument by its position after the value, or by keyword."""
        given = next((kw.value for kw in self.node.kwargs if keyword and kw.key == keyword), None)
        if given is None and 0 <= position < len(self.node.args):
            given = self.node.args[position]
        return given

    def items(self, reading: bool = False) -> Types:
        """The items of the value the filter goes over; `reading` (it reads a field of each), a value that
        may be none is reported (any other filter decides for itself what it does with none)."""
        if self.node.node is None:
            return ()
        return self.types._iterate(self.node.node, self.value, self.node if reading else None)

    def attribute(self, items: Types, argument: nodes.Node | None) -> Types:
        """What `attribute="a.b"` reads from each item: the fields one after another, checked like reads."""
        if argument is None:
            return items
        tt = self.types
        if not (isinstance(argument, nodes.Const) and isinstance(argument.value, (str, int))):
            if any(tracked(t) for t in items):  # the filter reads it from every item, now
                tt._untracked(Untracked("the attribute it reads is decided at run time",
                                        "name the attribute: attribute=\"FIELD\""), self.node,
                              tt.parsed.node_span(argument), shown_name(self.node.node, tt.parsed))
            return (ir.ANY,)
        place = tt.parsed.node_span(argument)
        parts: list[str | int] = [int(p) if p.isdigit() else p for p in str(argument.value).split(".")]
        found = items
        shown = f"an item of '{shown_name(self.node.node, tt.parsed)}'" if self.node.node is not None else "an item"
        for part in parts:
            found = tt._read(found, part, None, self.node, place=place, shown=shown, via=self.node.name)
            shown = f"{shown}.{part}" if not shown.startswith("an item") else f"the '{part}' of {shown}"
        return found

    def untracked(self, why: str, how: str) -> Types:
        return self.types._untracked_if(self.value, why, how)


_TEXT = ("string", "upper", "lower", "title", "capitalize", "trim", "striptags", "escape", "e", "forceescape",
         "format", "indent", "replace", "truncate", "wordwrap", "center", "urlencode", "urlize", "tojson",
         "filesizeformat", "safe", "pprint", "xmlattr")
_NUMBERS = {"length": ir.INT, "count": ir.INT, "wordcount": ir.INT, "int": ir.INT, "float": ir.FLOAT,
            "round": ir.FLOAT}
# (position after the value, keyword) of the attribute a filter reads from each item
_ATTRIBUTE = {"selectattr": 0, "rejectattr": 0, "groupby": 0, "sum": 0, "join": 1, "sort": 2, "unique": 1,
              "min": 1, "max": 1, "map": -1}


def _listed(call: FilterCall, items: Types) -> Types:
    """A list of items of the types `items` (one list type, or a value the check does not follow)."""
    return call.types._list([items])


def _same_list(call: FilterCall) -> Types:
    """`sort`, `unique`, `reverse`, `list`, ...: the items, in a list (after any attribute they read)."""
    position = _ATTRIBUTE.get(call.node.name)
    attribute = call.argument(position, "attribute") if position is not None else None
    items = call.items(reading=attribute is not None)
    call.attribute(items, attribute)
    if call.node.name in ("reverse",) and all(t == ir.STR for t in call.value):
        return (ir.STR,)
    return _listed(call, items)


def _attr_select(call: FilterCall) -> Types:
    """`selectattr("f", test)` / `rejectattr`: the items whose field passes (fails) the test. With the test
    `defined` or `undefined` a missing field is the point, so it is not reported."""
    test = call.argument(1, "")
    lenient = getattr(test, "value", None) in ("defined", "undefined")
    items = call.items(reading=not lenient)
    if not lenient:
        call.attribute(items, call.argument(0, "attribute"))
    return _listed(call, items)


def _select(call: FilterCall) -> Types:
    """`select(test)` / `reject(test)`: the items that pass (fail) a test; a variant test narrows them."""
    items = call.items()
    test = getattr(call.argument(0, ""), "value", None)
    variants = call.types.narrowing.variant_names
    if isinstance(test, str) and test in variants:
        keep = call.node.name == "select"
        narrowed: list[Any] = []
        for t in items:
            if isinstance(t, ir.Variant) and test in t.options:
                options = (test,) if keep else tuple(o for o in t.options if o != test)
                narrowed.append(ir.Named(options[0]) if len(options) == 1 else ir.Variant(options))
            else:
                narrowed.append(t)
        items = union(narrowed)
    return _listed(call, items)


def _item(call: FilterCall) -> Types:
    """`first`, `last`, `random`: one of the items."""
    return call.items()


def _min_max(call: FilterCall) -> Types:
    attribute = call.argument(1, "attribute")
    items = call.items(reading=attribute is not None)
    call.attribute(items, attribute)
    return items


def _map(call: FilterCall) -> Types:
    """`map(attribute="f")`: the field of each item; `map("upper")`: a filter applied to each item."""
    attribute = call.argument(-1, "attribute")
    items = call.items(reading=attribute is not None)
    if attribute is not None:
        found = call.attribute(items, attribute)
        default = call.argument(-1, "default")
        if default is not None:
            found = union(found, call.types.eval(default))
        return _listed(call, found)
    applied = getattr(call.argument(0, ""), "value", None)
    if applied in _TEXT:
        return (ir.ListOf(ir.STR),)
    if applied in _NUMBERS:
        return (ir.ListOf(_NUMBERS[applied]),)
    return call.untracked(f"it comes from 'map' with the filter {applied!r}" if applied else "it comes from 'map'",
                          "read the field with map(attribute=\"FIELD\"), or in a loop")


def _groupby(call: FilterCall) -> Types:
    """`groupby("f")`: a list of groups, each with `grouper` (the field's value) and `list` (its items)."""
    items = call.items(reading=True)
    keys = call.attribute(items, call.argument(0, "attribute"))
    grouper: Any = None
    for t in keys:
        grouper = t if grouper is None else join_types(grouper, t)
        if grouper is None:
            grouper = Untracked("the groups' keys have different types", "group by a field of one type")
            break
    group_list = _listed(call, items)
    listed: Any = group_list[0] if len(group_list) == 1 else Untracked(
        "the groups hold values the check does not follow", "group a list of one type")
    return (ir.ListOf(Record((("grouper", grouper if grouper is not None else ir.ANY), ("list", listed)),  # type: ignore[arg-type]
                             GROUP_LABEL)),)


def _join_text(call: FilterCall) -> Types:
    attribute = call.argument(1, "attribute")
    call.attribute(call.items(reading=attribute is not None), attribute)
    return (ir.STR,)


def _sum(call: FilterCall) -> Types:
    attribute = call.argument(0, "attribute")
    items = call.items(reading=attribute is not None)
    summed = call.attribute(items, attribute) if attribute is not None else items
    if summed and all(is_numeric(t) for t in summed):
        return (ir.INT if all(t == ir.INT for t in summed) else ir.FLOAT,)
    return (ir.ANY,)


def _attr(call: FilterCall) -> Types:
    """`x | attr("f")`: the field `f` of x, read like `x.f`."""
    name = call.argument(0, "")
    if call.node.node is None or name is None:
        return (ir.ANY,)
    value = getattr(name, "value", None)
    if not isinstance(value, str):
        return call.untracked("the field it reads is decided at run time", "name the field: attr(\"FIELD\")")
    tt = call.types
    return tt._read(call.value, value, call.node.node, call.node, place=tt.parsed.node_span(name))


def _default(call: FilterCall) -> Types:
    """`x | default(y)`: x, or y when x is undefined (or, with `true`, when x is false or none)."""
    fallback = call.argument(0, "default_value")
    other = call.types.eval(fallback) if fallback is not None else (ir.STR,)
    boolean = getattr(call.argument(1, "boolean"), "value", False)
    value = call.value
    if boolean is True:
        value = tuple(t.inner if isinstance(t, ir.Optional_) else t for t in value if t != ir.NONE)
    return union(value, other)


def _batch(call: FilterCall) -> Types:
    items = call.items()
    if call.argument(1, "fill_with") is not None:
        return call.untracked("its rows are filled with another value", "leave out fill_with")
    inner = _listed(call, items)
    return (ir.ListOf(inner[0]),) if len(inner) == 1 and isinstance(inner[0], ir.ListOf) else inner


def _number(call: FilterCall) -> Types:
    return (_NUMBERS[call.node.name],)


def _abs(call: FilterCall) -> Types:
    return tuple(t if is_numeric(t) else ir.ANY for t in call.value) or (ir.ANY,)


def _text(call: FilterCall) -> Types:
    return (ir.STR,)


def _reverse(call: FilterCall) -> Types:
    if all(is_stringy(t) for t in call.value):
        return (ir.STR,)
    return _same_list(call)


def _not_followed(call: FilterCall) -> Types:
    return call.untracked(f"it comes from the filter '{call.node.name}'",
                          "read the field from the value before the filter")


def _untracked_unless_plain(call: FilterCall) -> Types:
    return (ir.ANY,) if not any(tracked(t) for t in call.value) else _not_followed(call)


FILTERS: dict[str, FilterRule] = {
    **{name: _text for name in _TEXT},
    **{name: _number for name in _NUMBERS},
    "abs": _abs, "list": _same_list, "sort": _same_list, "unique": _same_list, "reverse": _reverse,
    "select": _select, "reject": _select, "selectattr": _attr_select, "rejectattr": _attr_select,
    "first": _item, "last": _item, "random": _item, "min": _min_max, "max": _min_max, "map": _map,
    "groupby": _groupby, "join": _join_text, "sum": _sum, "attr": _attr, "default": _default, "d": _default,
    "batch": _batch, "slice": _batch, "dictsort": _untracked_unless_plain, "items": _untracked_unless_plain,
}
