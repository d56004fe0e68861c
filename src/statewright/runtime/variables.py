"""Run variables: values a run carries from state to state, each updated by a reducer after a state's step.

A variable starts with its declared value and changes only by updates: `set` (the value given), `append`
(one more item of a list), `extend` (the items of a list), `merge` (the fields of an object that are not
none written into a declared type's value). An update is recorded as an operation — (variable, reducer,
operand), the operand as JSON — and `apply_reducer` is the one definition of what an operation does, used
when a run applies it and when a checkpoint is read back (the checkpoint keeps the operations as a log, so a
save costs the size of what changed, not of the variable). Every value a variable takes is checked for size
and depth and validated against its type: a variable always holds a value of its type.

Branches of a parallel state and elements of a map update their own view of the variables (fanout.py); each
keeps the operations it made, and the join applies them to the run in written order — the order of
`parallel [...]`, or of the list — never in the order the branches finished.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .spec import MachineSpec
from .structured import to_jsonable, type_adapter
from .untrusted import BorderError, check_value

REDUCERS = ("set", "append", "extend", "merge")

# one update of a run variable: (variable, reducer, operand as JSON)
VarOp = tuple[str, str, Any]


class VariableError(ValueError):
    """An update that cannot be applied: the operand does not suit the reducer, or the value it makes does
    not fit the variable's type (or is too large or too deep)."""


def apply_reducer(reducer: str, current: Any, operand: Any) -> Any:
    """What `reducer` makes of a variable's value `current` and an update's `operand` (both JSON data); never
    changes either. VariableError when the operand does not suit the reducer."""
    if reducer == "set":
        return operand
    if reducer == "append":
        return [*_list_held(current, "append"), operand]
    if reducer == "extend":
        if not isinstance(operand, list):
            raise VariableError(f"'extend' takes a list, not {_value_kind(operand)}")
        return [*_list_held(current, "extend"), *operand]
    if reducer == "merge":
        if operand is None:
            return current  # none merges nothing
        if not isinstance(operand, dict):
            raise VariableError(f"'merge' takes an object, not {_value_kind(operand)}")
        if not isinstance(current, dict):
            raise VariableError(f"'merge' writes into an object, and the variable holds {_value_kind(current)}")
        merged = dict(current)
        merged.update((key, value) for key, value in operand.items() if value is not None)
        return merged
    raise VariableError(f"unknown reducer {reducer!r}")


def _list_held(value: Any, reducer: str) -> list[Any]:
    if not isinstance(value, list):
        raise VariableError(f"'{reducer}' adds to a list, and the variable holds {_value_kind(value)}")
    return value


def _value_kind(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class VariableTypes:
    """A machine's run variables as its runs need them: one TypeAdapter per variable, made once per machine
    (MachinePlan), and what a run does with their values."""

    def __init__(self, machine: MachineSpec) -> None:
        self.specs = {v.name: v for v in machine.variables}
        self._adapters: dict[str, Any] = {}

    def __bool__(self) -> bool:
        return bool(self.specs)

    def _adapter(self, name: str) -> Any:
        adapter = self._adapters.get(name)
        if adapter is None:
            adapter = self._adapters[name] = type_adapter(self.specs[name].annotation)
        return adapter

    def typed(self, name: str, data: Any) -> Any:
        """`data` (JSON) as a value of variable `name`'s type; VariableError when it does not fit, or is too
        large or too deep to be a value a run holds."""
        try:
            check_value(data, f"the value of run variable '{name}'")  # before pydantic, which recurses
        except BorderError as exc:
            raise VariableError(str(exc)) from None
        from pydantic import ValidationError

        try:
            return self._adapter(name).validate_python(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise VariableError(f"the value does not fit the variable's type: {first.get('msg', 'invalid')}"
                                f"{' at ' + where if where else ''}") from None

    def initial(self) -> dict[str, Any]:
        """Every variable with the value a run starts with."""
        return {name: self.typed(name, spec.initial) for name, spec in self.specs.items()}

    def apply(self, values: Mapping[str, Any], op: VarOp) -> Any:
        """The value variable op[0] takes when `op` is applied to `values` (which it does not change)."""
        name, reducer, operand = op
        return self.typed(name, apply_reducer(reducer, to_jsonable(values[name]), operand))

    def replay(self, ops: Iterable[VarOp]) -> dict[str, Any]:
        """The variables after the operations of a run's log, from their initial values (a checkpoint read
        back): applied to JSON data, then each variable validated once."""
        data = {name: spec.initial for name, spec in self.specs.items()}
        for name, reducer, operand in ops:
            if name not in data:
                raise VariableError(f"the checkpoint updates run variable '{name}', which the machine does not have")
            data[name] = apply_reducer(reducer, data[name], operand)
        return {name: self.typed(name, value) for name, value in data.items()}


def read_var_ops(items: list[Any], where: str) -> list[VarOp]:
    """The operations of a checkpoint's log, each checked for its shape (ValueError says where)."""
    ops: list[VarOp] = []
    for number, item in enumerate(items):
        if (not isinstance(item, list) or len(item) != 3 or not isinstance(item[0], str)
                or item[1] not in REDUCERS):
            raise ValueError(f"{where}: update {number + 1} is not [variable, reducer, value]")
        ops.append((item[0], item[1], item[2]))
    return ops


def update_variables(types: VariableTypes, run: Any, state: str, updates: tuple[Any, ...], output: Any) -> None:
    """Apply a state's updates after its step, in order, each seeing the ones before it: the run's variables
    (a branch's or an element's own view of them) take their new values and the run's log records each
    operation. A value that cannot be computed or does not fit ends the run (failure kind "variable")."""
    from .result import Failure, RunFailed
    from .spec import Scope

    for update in updates:
        scope = Scope(output, run.inputs, run.outputs, run.visits, run.locals or {}, run.vars)
        try:
            operand = to_jsonable(update.value(scope))
            op = (update.var, update.reducer, operand)
            value = types.apply(run.vars, op)
        except Exception as exc:  # noqa: BLE001 - an update that cannot be made is a typed failure
            detail = str(exc) if isinstance(exc, VariableError) else f"{type(exc).__name__}: {exc}"
            raise RunFailed(Failure("variable", f"state '{state}': `{update.reducer} {update.var} <- {update.text}` "
                                                f"could not be applied: {detail}", state=state,
                                    origin=update.origin)) from None
        run.vars[update.var] = value
        run.var_log.append(op)
        if run.events:
            fields: dict[str, Any] = {"state": state, "var": update.var, "reducer": update.reducer}
            if run.item is not None:
                fields["item"] = run.item
            if run.content:
                fields["value"] = operand
            run.emit("var", fields)
    run.context_cache = None
