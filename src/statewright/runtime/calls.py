"""What a state that runs another machine gives: the call's outcome, and the machines a machine runs.

A `run NAME(...)` state's output is a `CallOutcome`: whether the called machine ended well (`ok`), the final
state it ended in, its result (validated against the callee's `returns` type when it declares one) and,
when it failed, how (`CallFailure`: the failure's kind, message, state, limit and the `.fsm` position).
Guards and templates of the caller read it like any output.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from .result import RunResult
from .spec import MachineSpec
from .structured import validate_typed


class CallFailure(BaseModel):
    """How a called machine failed."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    message: str
    state: str | None = None
    limit: str | None = None
    origin: str = ""


class CallOutcome(BaseModel):
    """The output of a state that runs a machine."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    ok: bool
    final: str | None = None
    result: Any = None
    failure: CallFailure | None = None


def outcome_of(machine: MachineSpec, result: RunResult) -> CallOutcome:
    """The outcome of a finished call: `result` of a run of `machine` (status final or failed)."""
    failure = result.failure
    ok = result.status == "final" and failure is None
    value = result.result if ok else None
    if ok and machine.result_type is not None and value is not None:
        value = validate_typed(machine.result_type, value, machine.result_wrapped)
    return CallOutcome(ok=ok, final=result.final_state, result=value,
                       failure=CallFailure(kind=failure.kind, message=failure.message, state=failure.state,
                                           limit=failure.limit, origin=failure.origin) if failure else None)


def revive_outcome(machine: MachineSpec, data: Any) -> CallOutcome:
    """An outcome read back from a checkpoint (ValueError when it no longer fits)."""
    try:
        outcome = CallOutcome.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, reported like a stored output's
        raise ValueError(f"a call's outcome does not read back: {exc}") from None
    if outcome.ok and machine.result_type is not None and outcome.result is not None:
        outcome.result = validate_typed(machine.result_type, outcome.result, machine.result_wrapped)
    return outcome
