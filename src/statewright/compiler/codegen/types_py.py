"""IR types as Python source: class names, field attributes, output wrappers and annotations.

One plan (`plan_models`) decides every class name, field attribute and wrapper of the pydantic models a
machine module defines; code generation writes them from it.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .. import ir

PRIMITIVE_SOURCE = {"str": "str", "int": "int", "float": "float", "bool": "bool", "none": "None", "any": "Any"}

# Attributes of pydantic.BaseModel that a field may not take over (fixed here rather than read from
# dir(BaseModel), so that generated code does not change with the installed pydantic).
_BASEMODEL_ATTRIBUTES = frozenset({
    "construct", "copy", "dict", "from_orm", "json", "parse_file", "parse_obj", "parse_raw", "schema",
    "schema_json", "update_forward_refs", "validate",
})

WRAPPER_FIELD = "value"
# The most options a union annotation chains with `|` in one run. `A | B | C` nests to the left, one
# level per option, and Python's own parser gives up on a chain a few thousand long (compiling or
# importing the module is a RecursionError); a longer union is written in parenthesized runs of this
# many, and runs of runs, which evaluate to the same union in the same order.
UNION_RUN = 64


class NameAllocator:
    """Hands out Python names that collide neither with reserved names nor with each other."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._taken: set[str] = set(reserved)  # membership only: never iterated, so order cannot leak

    def claim(self, preferred: str, suffix: str = "_") -> str:
        candidate = preferred
        n = 1
        while candidate in self._taken or keyword.iskeyword(candidate):
            n += 1
            candidate = f"{preferred}{suffix}" if n == 2 else f"{preferred}{suffix}{n - 1}"
        self._taken.add(candidate)
        return candidate

    def taken(self, name: str) -> bool:
        return name in self._taken


def holds_float(t: ir.Type) -> bool:
    """Whether a field of type `t` holds a float of its own model's (not through a declared type, whose
    model says for its own fields): `float`, `float?`, `list[float]`, ..."""
    while isinstance(t, (ir.ListOf, ir.Optional_)):
        t = t.item if isinstance(t, ir.ListOf) else t.inner
    return isinstance(t, ir.Prim) and t.name == "float"


def is_plain_attribute(name: str) -> bool:
    """Whether a field can be a pydantic attribute under its own name."""
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and not name.startswith("model_")
        and name not in _BASEMODEL_ATTRIBUTES
    )


@dataclass(frozen=True)
class FieldPlan:
    name: str  # as in the spec: the JSON key the model produces (the alias when attribute differs)
    attribute: str  # the Python attribute
    type: ir.Type
    doc: str = ""
    constraints: ir.Constraints | None = None

    @property
    def optional(self) -> bool:
        return isinstance(self.type, ir.Optional_)


@dataclass(frozen=True)
class ModelPlan:
    """One pydantic class: a declared type, or the single-field wrapper of a state's non-object output."""

    title: str  # the name the spec gives it (the JSON schema title)
    class_name: str  # the Python class name (differs from title only to avoid a clash)
    fields: tuple[FieldPlan, ...]
    wrapper: bool = False
    forward: bool = False  # refers to a class defined after it (recursive types): rebuild once all exist
    variant: bool = False  # the wrapper of a variant output (a VariantOutput); its field is an ir.Variant
    branch_of: str | None = None  # a VariantBranch: `{"TYPE": ...}` for the declared type of this name


@dataclass(frozen=True)
class ModelPlans:
    types: tuple[ModelPlan, ...]  # declared types, each after the types it uses (source order otherwise)
    outputs: Mapping[str, ModelPlan] = field(default_factory=dict)  # state -> output class, typed states
    class_names: Mapping[str, str] = field(default_factory=dict)  # declared type name -> Python class name
    # the branch class of each declared type some variant output offers, in order of first use
    branches: Mapping[str, ModelPlan] = field(default_factory=dict)
    # `returns T`: the class a result is validated against (T's own, or a wrapper when T is not a record)
    result: ModelPlan | None = None

    def output_of(self, state: str) -> ModelPlan | None:
        return self.outputs.get(state)


def plan_models(machine: ir.Machine, reserved: Collection[str] = (), names: NameAllocator | None = None
                ) -> ModelPlans:
    """Class names, field attributes and output wrappers for a machine, avoiding `reserved` names (and
    the names `names` has handed out: the classes of the other machines of one module)."""
    names = names if names is not None else NameAllocator([*reserved, *dir(builtins)])
    class_names = {t.name: names.claim(t.name, "Type") for t in machine.types}
    ordered, forward = _dependency_order(machine.types)
    plans = [
        ModelPlan(t.name, class_names[t.name], _field_plans(t.fields), forward=t.name in forward)
        for t in ordered
    ]
    by_title = {p.title: p for p in plans}
    outputs: dict[str, ModelPlan] = {}
    branches: dict[str, ModelPlan] = {}
    for state in machine.states:
        if state.output is None:
            continue
        if isinstance(state.output, ir.Named):
            outputs[state.name] = by_title[state.output.name]
        elif isinstance(state.output, ir.Variant):
            for option in state.output.options:
                if option not in branches:
                    branch = names.claim(class_names[option] + "Variant")
                    branches[option] = ModelPlan(branch, branch, (FieldPlan(option, WRAPPER_FIELD, ir.Named(option)),),
                                                 branch_of=option)
            class_name = names.claim(_camel(state.name) + "Output")
            outputs[state.name] = ModelPlan(
                class_name, class_name, (FieldPlan(WRAPPER_FIELD, WRAPPER_FIELD, state.output),), wrapper=True,
                variant=True,
            )
        else:
            class_name = names.claim(_camel(state.name) + "Output")
            outputs[state.name] = ModelPlan(
                class_name, class_name, (FieldPlan(WRAPPER_FIELD, WRAPPER_FIELD, state.output),), wrapper=True
            )
    result = None
    if isinstance(machine.returns, ir.Named):
        result = by_title[machine.returns.name]
    elif machine.returns is not None:
        class_name = names.claim(_camel(machine.name) + "Result")
        result = ModelPlan(class_name, class_name, (FieldPlan(WRAPPER_FIELD, WRAPPER_FIELD, machine.returns),),
                           wrapper=True)
    return ModelPlans(tuple(plans), outputs, class_names, branches, result)


def _field_plans(fields: tuple[ir.Field, ...]) -> tuple[FieldPlan, ...]:
    attributes = NameAllocator(f.name for f in fields if is_plain_attribute(f.name))
    plans = []
    for f in fields:
        if is_plain_attribute(f.name):
            attribute = f.name
        else:
            stem = f.name.lstrip("_") or "field"
            attribute = attributes.claim(f"{stem}_" if is_plain_attribute(f"{stem}_") else f"field_{stem}")
        plans.append(FieldPlan(f.name, attribute, f.type, f.doc, f.constraints))
    return tuple(plans)


def _camel(name: str) -> str:
    parts = [p for p in re.split(r"_+", name) if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or "State"


def _named_in(t: ir.Type) -> list[str]:
    if isinstance(t, ir.Named):
        return [t.name]
    if isinstance(t, ir.ListOf):
        return _named_in(t.item)
    if isinstance(t, ir.Optional_):
        return _named_in(t.inner)
    return []


def _dependency_order(types: tuple[ir.TypeDef, ...]) -> tuple[list[ir.TypeDef], set[str]]:
    """Types ordered so each follows the types its fields use; names that must refer forward (cycles).

    A depth-first walk with its own stack: a chain of types as long as a spec can hold needs no recursion,
    and no closure refers to itself (which would leave the walk's tables for the cyclic collector)."""
    by_name = {t.name: t for t in types}
    done: dict[str, bool] = {}  # name -> finished (False while on the current path)
    order: list[ir.TypeDef] = []
    forward: set[str] = set()
    for root in types:
        if root.name in done:
            continue
        done[root.name] = False
        stack = [(root, _uses(root))]
        while stack:
            t, uses = stack[-1]
            for dep in uses:
                if dep not in by_name:
                    continue
                if dep not in done:
                    done[dep] = False
                    stack.append((by_name[dep], _uses(by_name[dep])))
                    break
                if not done[dep]:
                    forward.add(t.name)  # a cycle: this class refers to one not yet defined
            else:
                done[t.name] = True
                order.append(t)
                stack.pop()
    return order, forward


def _uses(t: ir.TypeDef) -> Iterator[str]:
    """The names of the types `t`'s fields use, in field order."""
    return (dep for f in t.fields for dep in _named_in(f.type))


# ---- annotations ---------------------------------------------------------------------------------


def py_string(value: str) -> str:
    """A str as Python source: repr(), in double quotes when the string holds none (the project's style)."""
    text = repr(value)
    if text.startswith("'") and '"' not in value:
        text = '"' + text[1:-1] + '"'
    return text


def annotation_source(t: ir.Type, class_names: Mapping[str, str], branches: Mapping[str, str] | None = None,
                      constraints: ir.Constraints | None = None) -> str:
    """The same annotation as Python source text (may need `Any` and `Literal` from typing); a variant
    is the union of its branch classes (`branches`: type name -> branch class name). With `constraints`,
    the value (inside an optional) is `Annotated[T, Field(...)]`."""
    if constraints is not None and not constraints.empty:
        if isinstance(t, ir.Optional_):
            return f"{annotation_source(t.inner, class_names, branches, constraints)} | None"
        arguments = ", ".join(f"{k}={v}" for k, v in constraint_arguments(constraints, t))
        return f"Annotated[{annotation_source(t, class_names, branches)}, Field({arguments})]"
    if isinstance(t, ir.Variant):
        assert branches is not None, "a variant needs its branch classes"
        return union_source([branches[o] for o in t.options])
    if isinstance(t, ir.Prim):
        return PRIMITIVE_SOURCE[t.name]
    if isinstance(t, ir.ListOf):
        return f"list[{annotation_source(t.item, class_names)}]"
    if isinstance(t, ir.Optional_):
        inner = annotation_source(t.inner, class_names)
        return inner if inner == "None" else f"{inner} | None"
    if isinstance(t, ir.Enum):
        return "Literal[" + ", ".join(py_string(v) for v in t.values) + "]"
    if isinstance(t, ir.Named):
        return class_names[t.name]
    raise TypeError(f"not an IR type: {t!r}")


def union_source(options: list[str]) -> str:
    """`A | B | ...` for annotations, nested no deeper than a few UNION_RUN runs however many options
    there are: `(A | ... | Z) | (A2 | ...) | ...` past UNION_RUN (a union of unions is flat, so this is the
    same type as the plain chain)."""
    parts = options
    while len(parts) > UNION_RUN:
        parts = ["(" + " | ".join(parts[i:i + UNION_RUN]) + ")" for i in range(0, len(parts), UNION_RUN)]
    return " | ".join(parts)


def constraint_arguments(c: ir.Constraints, t: ir.Type) -> list[tuple[str, str]]:
    """pydantic `Field` arguments for constraints, as source (`ge=1`, `max_length=80`, `pattern="..."`):
    the one place they are spelled, so the JSON schema the model gets and the validation of its reply
    come from the same words."""
    base = t.inner if isinstance(t, ir.Optional_) else t
    whole = base == ir.INT

    def number(value: float) -> str:
        return repr(int(value)) if whole and float(value).is_integer() else repr(value)

    out: list[tuple[str, str]] = []
    if c.minimum is not None:
        out.append(("ge", number(c.minimum)))
    if c.maximum is not None:
        out.append(("le", number(c.maximum)))
    if c.min_length is not None:
        out.append(("min_length", repr(c.min_length)))
    if c.max_length is not None:
        out.append(("max_length", repr(c.max_length)))
    if c.pattern is not None:
        out.append(("pattern", py_string(c.pattern)))
    return out
