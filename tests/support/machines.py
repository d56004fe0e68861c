"""Small builders for runtime MachineSpecs, so engine tests state the machine they run in a few lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from statewright.runtime.spec import (
    AgentSpec,
    InputSpec,
    LimitsSpec,
    MachineSpec,
    Scope,
    StateSpec,
    ToolCallSpec,
    TransitionSpec,
)

MODEL = "fake/model"


def go(target: str, max: int | None = None) -> TransitionSpec:
    return TransitionSpec("always", target, max=max)


def when(guard: Callable[[Scope], Any], target: str, text: str = "guard", max: int | None = None) -> TransitionSpec:
    return TransitionSpec("guard", target, guard=guard, text=text, max=max, origin=f"spec.fsm:{text}")


def cond(text: str, target: str, max: int | None = None) -> TransitionSpec:
    return TransitionSpec("condition", target, text=text, max=max)


def otherwise(target: str, max: int | None = None) -> TransitionSpec:
    return TransitionSpec("otherwise", target, max=max)


def stay(state: str, max: int | None = None) -> TransitionSpec:
    return TransitionSpec("stay", state, max=max)


def state(name: str, *transitions: TransitionSpec, agent: str = "worker", do: str | None = None,
          output: type | None = None, wrapped: bool = False, tell: Iterable[str] = (), visits: int | None = None,
          retries: int = 2) -> StateSpec:
    return StateSpec(name, "agent", agent=agent, instruction=do if do is not None else f"Do {name}.",
                     output=output, output_wrapped=wrapped, tell=tuple(tell), visits=visits, retries=retries,
                     transitions=tuple(transitions), origin=f"spec.fsm:{name}")


def action(name: str, tool: str, args: Callable[[Scope], dict[str, Any]], *transitions: TransitionSpec,
           output: type | None = None, tell: Iterable[str] = ()) -> StateSpec:
    return StateSpec(name, "action", call=ToolCallSpec(tool, args), output=output, tell=tuple(tell),
                     transitions=tuple(transitions))


def final(name: str, result: str | None = None) -> StateSpec:
    return StateSpec(name, "final", result=result)


def agent(name: str, prompt: str | None = None, **options: Any) -> AgentSpec:
    options.setdefault("model", MODEL)
    return AgentSpec(name, prompt if prompt is not None else f"You are {name}.", **options)


def machine(*states: StateSpec, agents: Iterable[AgentSpec] = (), inputs: Iterable[InputSpec] = (),
            limits: LimitsSpec | None = None, name: str = "m", sha: str = "sha-1", **options: Any) -> MachineSpec:
    """The first state is the start; agents the states name but `agents` omits get a default spec."""
    declared = {a.name: a for a in agents}
    for s in states:
        if s.agent and s.agent not in declared:
            declared[s.agent] = agent(s.agent)
        for listener in s.tell:
            declared.setdefault(listener, agent(listener))
    return MachineSpec(
        name=name, description="", inputs=tuple(inputs), model=MODEL, verifier_model="fake/verifier",
        temperature=None, limits=limits or LimitsSpec(), agents=declared, states={s.name: s for s in states},
        start=states[0].name, source_sha256=sha, **options,
    )


def runtime_of(machine_ir: Any, source_text: str = "", source_path: str = "spec.fsm") -> MachineSpec:
    """The MachineSpec every face runs for a checked machine's IR: its machine module, compiled in memory."""
    from statewright.compiler.codegen import load_machine

    return load_machine(machine_ir, source_text=source_text, source_path=source_path)  # type: ignore[no-any-return]
