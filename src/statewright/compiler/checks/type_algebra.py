"""The types the checks reason with: how each is written, what a state outputs, what fits and joins.

The IR's own types (`ir.Type`) plus what inference needs: `Record` (a standard tool's result, an object
without a declared type), `TextOutput` (the plain-text output of an agent state: a str whose fields are a
mistake worth its own message) and `MaybeAbsent` (a state's output that may not be there yet). Anything
unknown is `any`, which keeps one mistake from cascading into many.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...diagnostics import did_you_mean, quoted_list
from ...runtime.tool_signatures import STD_TOOLS
from .. import ir
from .callees import UntypedResult, outcome_type
from .resolve import (
    BUILTIN_TYPES,
    StateView,
    Symbols,
)


@dataclass(frozen=True)
class Record:
    """An object type without a declaration: a standard tool's result."""

    fields: tuple[tuple[str, ir.Type], ...]
    label: str


@dataclass(frozen=True)
class TextOutput:
    """The plain-text output of agent state `state` (no `output TYPE`): a str."""

    state: str


@dataclass(frozen=True)
class MaybeAbsent:
    """`STATE.output` where state `state` may not have run yet: `inner`, or none.

    Comparing it with `==` / `!=` is fine (with none, too); reading a field or an item of it, ordering,
    arithmetic and `len()` are not (SW4014) until a test for none narrows it (`none_tests`).
    """

    inner: TypeLike
    state: str


TypeLike = (ir.Prim | ir.ListOf | ir.Optional_ | ir.Enum | ir.Named | ir.Variant | Record | TextOutput
            | MaybeAbsent | UntypedResult)


def type_text(t: TypeLike) -> str:
    """A type the way a user writes it."""
    if isinstance(t, ir.Prim):
        return t.name
    if isinstance(t, ir.ListOf):
        return f"list[{type_text(t.item)}]"
    if isinstance(t, ir.Optional_):
        return f"{type_text(t.inner)}?"
    if isinstance(t, ir.Enum):
        return " | ".join(f'"{v}"' for v in t.values)
    if isinstance(t, ir.Named):
        return t.name
    if isinstance(t, ir.Variant):
        return " | ".join(t.options)
    if isinstance(t, Record):
        return t.label
    if isinstance(t, MaybeAbsent):
        return type_text(t.inner)
    if isinstance(t, UntypedResult):
        return f"the untyped result of {t.machine}"
    return "str"  # TextOutput


def parse_signature_type(text: str) -> ir.Type:
    """A type written in tool_signatures.py's notation ("str", "list[str]", "float?") as an IR type."""
    text = text.strip()
    if text.endswith("?"):
        return ir.Optional_(parse_signature_type(text[:-1]))
    if text.startswith("list[") and text.endswith("]"):
        return ir.ListOf(parse_signature_type(text[5:-1]))
    return BUILTIN_TYPES.get(text, ir.ANY)


def std_tool_result(name: str) -> TypeLike:
    returns = STD_TOOLS[name]["returns"]
    if isinstance(returns, dict):
        return Record(tuple((k, parse_signature_type(v)) for k, v in returns.items()),
                      f"the result of {name}")
    return parse_signature_type(returns)


def tool_result_type(name: str, symbols: Symbols) -> TypeLike:
    """What an action state calling `name` outputs (for tools outside the standard set: `any`)."""
    if name in STD_TOOLS and (name not in symbols.tools or symbols.tools[name].import_path is None):
        return std_tool_result(name)
    return ir.ANY


def output_type(view: StateView, symbols: Symbols) -> TypeLike:
    """The type of a state's output: its `output TYPE`, plain text for an agent, a tool's result; for a
    state that maps over a list, the list of those; for a parallel state, the list of its branches'
    outputs (`list[any]` when the branches end in outputs of different types)."""
    if view.parallel is not None:
        found = symbols.parallel_outputs.get(view.name)
        if found is None:
            found = ir.ListOf(as_ir_type(common_type([branch_output_type(ends, symbols)
                                                  for _, ends in symbols.branches.get(view.name, ())])))
            symbols.parallel_outputs[view.name] = found
        return found
    one = step_output_type(view, symbols)
    return ir.ListOf(as_ir_type(one)) if view.each is not None else one


def step_output_type(view: StateView, symbols: Symbols) -> TypeLike:
    """What one step of a state gives: its `output TYPE`, plain text for an agent, a tool's result (for a
    map, what one element's step gives)."""
    if view.output is not None:
        return symbols.resolve_output(view.output.type)
    if view.kind in ("agent", "human"):
        return TextOutput(view.name)
    if view.kind == "action" and view.call is not None:
        return tool_result_type(view.call.tool.dotted, symbols)
    if view.kind == "call" and view.run is not None:  # the call's outcome (checks/callees.py)
        callee = symbols.callees.get(view.run.machine.value)
        return outcome_type(symbols, callee) if callee is not None else ir.ANY
    return ir.ANY


def branch_output_type(ends: tuple[str, ...], symbols: Symbols) -> TypeLike:
    """The output of a branch: the output of the state it ended in."""
    views = [symbols.states[e] for e in ends if e in symbols.states]
    # (a parallel state ending a branch is an error of its own, SW3069: its type is not worked out)
    return common_type([output_type(v, symbols) if v.parallel is None else ir.ANY for v in views])


def common_type(types: list[TypeLike]) -> TypeLike:
    """The one type all of `types` have (plain text counting as str), else `any`."""
    normal = [ir.STR if isinstance(t, TextOutput) else t for t in types]
    if normal and all(t == normal[0] for t in normal):
        return normal[0]
    return ir.ANY


def as_ir_type(t: TypeLike) -> ir.Type:
    """A checker type as the IR type of a list's items (the checker's own kinds as what they are at run time)."""
    if isinstance(t, (ir.Prim, ir.ListOf, ir.Optional_, ir.Enum, ir.Named, ir.Variant)):
        return t
    if isinstance(t, TextOutput):
        return ir.STR
    return ir.ANY


def fields_of(t: TypeLike, symbols: Symbols) -> dict[str, ir.Type]:
    """The fields of a declared type or of a tool's result; {} for every other type."""
    if isinstance(t, ir.Named):
        return symbols.fields_of(t.name)
    if isinstance(t, Record):
        return dict(t.fields)
    return {}


def unknown_field_help(name: str, fields: dict[str, ir.Type]) -> str:
    """Help for a field `name` that a type lacks: the likely intended field, or the fields there are."""
    if not fields:
        return "the type has no fields"
    return did_you_mean(name, fields) or f"its fields are {quoted_list(fields)}"


def normalized(t: TypeLike) -> TypeLike:
    if isinstance(t, MaybeAbsent):  # otherwise it behaves like an optional value
        inner = normalized(t.inner)
        return inner if isinstance(inner, ir.Optional_) else ir.Optional_(inner)  # type: ignore[arg-type]
    if isinstance(t, UntypedResult):  # a value whose type is not known: anything may be done with it
        return ir.ANY
    return ir.STR if isinstance(t, TextOutput) else t


def without_optional(t: TypeLike) -> TypeLike:
    t = normalized(t)
    return normalized(t.inner) if isinstance(t, ir.Optional_) else t


def is_numeric(t: TypeLike) -> bool:
    return t in (ir.INT, ir.FLOAT)


def is_stringy(t: TypeLike) -> bool:
    return t == ir.STR or isinstance(t, ir.Enum)


def is_bool(t: TypeLike) -> bool:
    return without_optional(t) in (ir.BOOL, ir.ANY)


def comparable(a: TypeLike, b: TypeLike) -> bool:
    """Whether `==` / `!=` between values of these types can ever be true (ints and floats mix)."""
    a, b = normalized(a), normalized(b)
    if ir.ANY in (a, b):
        return True
    if ir.NONE in (a, b):
        other = b if a == ir.NONE else a
        return other == ir.NONE or isinstance(other, ir.Optional_)
    a, b = without_optional(a), without_optional(b)
    if ir.ANY in (a, b):
        return True
    if (is_numeric(a) and is_numeric(b)) or (is_stringy(a) and is_stringy(b)):
        return True
    if isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf):
        return comparable(a.item, b.item)
    return a == b


def assignable(src: TypeLike, dst: TypeLike) -> bool:
    """Whether a value of type `src` can be passed where `dst` is expected (lenient about optionals)."""
    src, dst = normalized(src), normalized(dst)
    if ir.ANY in (src, dst):
        return True
    if isinstance(dst, ir.Optional_):
        return src == ir.NONE or assignable(src, dst.inner)
    if isinstance(src, ir.Optional_):
        return assignable(src.inner, dst)
    if dst == ir.FLOAT and src == ir.INT:
        return True
    if is_stringy(src) and is_stringy(dst):
        return True
    if isinstance(src, ir.ListOf) and isinstance(dst, ir.ListOf):
        return assignable(src.item, dst.item)
    return src == dst


def join_types(a: TypeLike, b: TypeLike) -> TypeLike | None:
    """The one type for a value of type `a` or `b` (neither optional): the same type, float for ints and
    floats, str for texts and enums, a list of the items' join, the variant of the declared types both may
    be, `any` when either is; None when they do not go together. `none` joins anything (as its optional)."""
    a, b = normalized(a), normalized(b)
    if ir.ANY in (a, b):
        return ir.ANY
    if a == ir.NONE or b == ir.NONE:
        return b if a == ir.NONE else a
    if a == b:
        return a
    if is_numeric(a) and is_numeric(b):
        return ir.FLOAT
    if is_stringy(a) and is_stringy(b):
        if isinstance(a, ir.Enum) and isinstance(b, ir.Enum):
            return ir.Enum(tuple(dict.fromkeys((*a.values, *b.values))))
        return ir.STR
    if isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf):
        if a.item == ir.ANY or b.item == ir.ANY:
            return ir.ListOf(ir.ANY)
        item = join_types(a.item, b.item)
        return ir.ListOf(as_ir_type(item)) if item is not None else None
    declared = [declared_options(t) for t in (a, b)]
    if declared[0] and declared[1]:
        return variant_of((*declared[0], *declared[1]))
    return None


def declared_options(t: TypeLike) -> tuple[str, ...]:
    if isinstance(t, ir.Named):
        return (t.name,)
    if isinstance(t, ir.Variant):
        return t.options
    return ()


def variant_of(options: tuple[str, ...]) -> ir.Named | ir.Variant:
    names = tuple(dict.fromkeys(options))
    return ir.Named(names[0]) if len(names) == 1 else ir.Variant(names)


def coalesces(left: TypeLike, right: TypeLike) -> bool:
    """Whether `left or right` picks a value rather than combining truth values: neither side is a boolean,
    and not both are of unknown type (`any or any` stays a boolean `or`)."""
    kinds = [without_optional(t) for t in (left, right)]
    if any(k == ir.BOOL for k in kinds):
        return False
    return not all(k == ir.ANY for k in kinds)
