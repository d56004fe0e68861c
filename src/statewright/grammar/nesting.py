"""How deep a syntax tree nests: guards, types and values past MAX_NESTING levels are refused (SW1020).

The parser builds any depth without recursion, and the compiler's own walks over expressions, types and
values keep their own stacks; but what a machine holds ends up in generated Python (whose parser takes at
most 200 nested brackets), pydantic models and JSON schemas (built recursively), and run-time values
(which the runtime refuses past 100 levels). So the depth a spec may nest is bounded here, once, right
after parsing, at 100 levels, with a message that says which construct is too deep and how to flatten it.
"""

from __future__ import annotations

from typing import Any

from . import ast
from .node import Node, child_fields

MAX_NESTING = 100  # levels of one guard, one type or one value

_EXPRESSIONS = (ast.BinaryOp, ast.UnaryOp, ast.Attribute, ast.Index, ast.Call, ast.ListExpr, ast.Quantifier,
                ast.IsVariant, ast.Conditional, ast.NameExpr, ast.Literal)
_TYPES = (ast.NamedType, ast.ListType, ast.OptionalType, ast.EnumType)
_HELP = {
    "expression": "split the guard into simpler parts: several `when` transitions, or a field the agent "
                  "fills in",
    "type": "name the inner types: declare a `type` for a level and refer to it by its name",
    "value": "flatten the value; data nested this deep belongs in a file a tool reads at run time",
}


_KINDS: dict[type, str | None] = {}


def _kind_of(cls: type) -> str | None:
    """What nests in a node of this class: "expression", "type", "value" or nothing (cached per class)."""
    found = _KINDS.get(cls, "")
    if found == "":
        found = _KINDS[cls] = ("expression" if issubclass(cls, _EXPRESSIONS) else "type" if issubclass(cls, _TYPES)
                               else "value" if issubclass(cls, (ast.Value, ast.ObjectEntry)) else None)
    return found


def too_deep(machine: ast.Machine) -> tuple[Any, str, str] | None:
    """The first guard, type or value (in source order) nested more than MAX_NESTING levels deep (inside
    more than MAX_NESTING others of its kind), what it is ("expression", "type" or "value") and the help
    for it; found without recursion. A level is one node of the same kind inside another (an object
    entry is no level of its own: in `{ a { b 1 } }` the 1 is two levels deep, inside two objects)."""
    stack: list[tuple[Any, int]] = [(machine, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, level = pop()
        cls = type(node)
        kind = _kind_of(cls)
        if level > MAX_NESTING and kind is not None:
            return node, kind, _HELP[kind]
        if cls is ast.Value:
            children = node.value if node.kind in ("list", "object") else ()
        else:
            children = []
            for name in child_fields(cls):
                child = getattr(node, name)
                if type(child) is tuple:
                    children.extend(child)
                elif child is not None:
                    children.append(child)
        for child in reversed(children):
            if not isinstance(child, Node):
                continue
            child_kind = _kind_of(type(child))
            if child_kind is None:
                push((child, 0))
            elif type(child) is ast.ObjectEntry:
                push((child, level))  # an entry is part of its object's level
            else:
                push((child, level + 1 if child_kind == kind else 0))
    return None
