"""The machines a machine runs, as its checks see them: each callee, its result, and a call's outcome.

A `run` state's output is the call's outcome, a record: `ok`, `final` (an enum of the callee's final
states), `result` (the callee's `returns` type, text, or untyped) and `failure` (a CallFailure record).
Guards and templates read it like any typed output, so its types live in the caller's symbol tables as
*foreign types*: named so that no declaration can take the name (`CallOutcome[research]`,
`research.Report`, `CallFailure`), their fields worked out on first look. A callee's type keeps the
identity of its declaration: the same `type` reached through two machines (or imported here with
`use ... { T }`) is one type, under the first name it was met by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...grammar import ast
from ...grammar.node import Node
from .. import ir

if TYPE_CHECKING:
    from ..project import UsedFile
    from .resolve import Symbols

OUTCOME = "CallOutcome"
FAILURE = "CallFailure"
# What a failed call says: its kind ("limit", "final", "error", ...), a message, the callee's state it
# failed in, the limit that ran out, and where in the source (the runtime's CallOutcome.failure)
FAILURE_FIELDS: dict[str, ir.Type] = {
    "kind": ir.STR, "message": ir.STR, "state": ir.Optional_(ir.STR), "limit": ir.Optional_(ir.STR),
    "origin": ir.STR,
}


class Callee(Node, frozen=False):
    """A machine this one may run: the file a `use` line names, by the name `run` gives it."""

    name: str
    used: UsedFile
    symbols: Symbols

    @property
    def decl(self) -> ast.UseDecl:
        return self.used.decl

    @property
    def machine_name(self) -> str:
        return self.symbols.machine_name

    @property
    def path(self) -> str:
        return self.used.path


@dataclass(frozen=True)
class UntypedResult:
    """The result of a called machine that declares no `returns` and ends without a `result` template in
    some final state: a value a template may show, whose fields cannot be known (reading one is SW4105)."""

    machine: str


class ForeignType:
    """A type a guard or template of this machine can read that no declaration here names."""

    def fields(self) -> dict[str, ir.Type]:
        raise NotImplementedError

    def field_decl(self, name: str) -> ast.FieldDecl | None:
        return None


@dataclass
class FixedType(ForeignType):
    table: dict[str, ir.Type]

    def fields(self) -> dict[str, ir.Type]:
        return self.table


@dataclass
class CalleeType(ForeignType):
    """Declared type `name` of a callee, its field types named as this machine sees them."""

    owner: Symbols
    callee: Callee
    name: str
    table: dict[str, ir.Type] | None = field(default=None, repr=False)

    def fields(self) -> dict[str, ir.Type]:
        if self.table is None:
            self.table = {f: import_type(self.owner, self.callee, t)
                          for f, t in self.callee.symbols.fields_of(self.name).items()}
        return self.table

    def field_decl(self, name: str) -> ast.FieldDecl | None:
        return self.callee.symbols.field_decl(self.name, name)


def import_type(owner: Symbols, callee: Callee, t: ir.Type) -> ir.Type:
    """A callee's type as `owner` names it: each declared type under the name it has here."""
    if isinstance(t, ir.Named):
        return ir.Named(_type_name(owner, callee, t.name))
    if isinstance(t, ir.ListOf):
        return ir.ListOf(import_type(owner, callee, t.item))
    if isinstance(t, ir.Optional_):
        return ir.Optional_(import_type(owner, callee, t.inner))
    if isinstance(t, ir.Variant):
        return ir.Variant(tuple(_type_name(owner, callee, o) for o in t.options))
    return t


def _type_name(owner: Symbols, callee: Callee, name: str) -> str:
    decl = callee.symbols.types.get(name)
    if decl is None:  # a name the callee's own checks left unknown: it has no errors, so this is none
        return name
    known = owner.type_names_by_decl().get(id(decl))
    if known is not None:
        return known
    base = f"{_declared_in(callee, decl)}.{name}"
    qualified, n = base, 1
    while qualified in owner.foreign_types:  # another declaration under the same name: numbered apart
        n += 1
        qualified = f"{base}#{n}"
    owner.foreign_types[qualified] = CalleeType(owner, callee, name)
    owner.type_names_by_decl()[id(decl)] = qualified
    return qualified


def _declared_in(callee: Callee, decl: ast.TypeDecl) -> str:
    """The machine that declares a type of a callee: the callee itself, or the machine of the file it
    imported the type from (so a type reached through two callees has one name, its home's)."""
    for imported in callee.symbols.imports:
        if imported.decl is decl:
            for used in callee.symbols.uses:
                if used.path == imported.path and used.compilation is not None and used.compilation.ast is not None:
                    return used.compilation.ast.name.value
    return callee.name


def machine_result(symbols: Symbols) -> ir.Type | UntypedResult:
    """The type of a machine's result: its `returns` type; text when every final state that succeeds
    renders a `result`; else untyped."""
    returns = symbols.machine.returns
    if returns is not None:
        return symbols.resolve_type(returns.type)
    finals = [v for v in symbols.states.values() if v.decl.final and v.fail is None]
    if finals and all(v.result is not None for v in finals):
        return ir.STR
    return UntypedResult(symbols.machine_name)


def outcome_type(owner: Symbols, callee: Callee) -> ir.Named:
    """The type of a call's outcome, registered in `owner`'s tables on first use."""
    name = f"{OUTCOME}[{callee.name}]"
    if name not in owner.foreign_types:
        finals = tuple(n for n, v in callee.symbols.states.items() if v.decl.final)
        result = machine_result(callee.symbols)
        imported: ir.Type | UntypedResult = (
            UntypedResult(callee.name) if isinstance(result, UntypedResult) else import_type(owner, callee, result))
        owner.foreign_types[name] = FixedType({
            "ok": ir.BOOL,
            "final": ir.Optional_(ir.Enum(finals) if finals else ir.STR),
            "result": ir.Optional_(imported),  # type: ignore[arg-type]  # read by the checks, never lowered
            "failure": ir.Optional_(ir.Named(failure_type(owner))),
        })
    return ir.Named(name)


def failure_type(owner: Symbols) -> str:
    """The name of the CallFailure record in `owner` (another name when a declared type has this one)."""
    name = FAILURE if FAILURE not in owner.types else f"{FAILURE} (of a call)"
    owner.foreign_types.setdefault(name, FixedType(dict(FAILURE_FIELDS)))
    return name
