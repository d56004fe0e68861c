"""IR -> runtime MachineSpec for `statewright run`: the same machine a generated runner defines, with guards
and tool-call arguments interpreted instead of compiled to Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..diagnostics import Span
from ..runtime.spec import (
    AgentSpec,
    InputSpec,
    LimitsSpec,
    MachineSpec,
    Scope,
    StateSpec,
    TestSpec,
    ToolCallSpec,
    ToolSpec,
    TransitionSpec,
)
from . import ir
from .codegen.python_expr import spec_source
from .evaluate import GuardNames, compile_expr, compile_guard
from .types_py import annotation, build_models, plan_models


def origin(span: Span | None) -> str:
    """A construct's place in its source as "file:line:col" ("" for IR built without a source)."""
    return span.label() if span is not None else ""


def transition_text(t: ir.Transition) -> str:
    """What a transition says, for traces and messages: the guard as spec source, or the NL condition."""
    if t.kind == "guard" and t.guard is not None:
        return spec_source(t.guard)
    if t.kind == "condition":
        return t.condition or ""
    return ""


def effective_agent(machine: ir.Machine, agent: ir.Agent) -> ir.Agent:
    """The agent with the machine's defaults filled in where it sets nothing itself."""
    return replace(
        agent,
        model=agent.model or machine.model,
        temperature=agent.temperature if agent.temperature is not None else machine.temperature,
    )


def scripted_step(step: ir.Reply | ir.Verdict) -> tuple[str, str, Any]:
    if isinstance(step, ir.Reply):
        return ("reply", step.state, step.value)
    return ("verdict", step.state, step.condition)


def to_runtime(machine: ir.Machine, *, source_sha256: str = "", source_path: str = "") -> MachineSpec:
    # Class names avoid the names a generated runner binds, exactly as codegen does, so both faces show a
    # model the same schema under the same name. (Imported here: codegen imports this module.)
    from .codegen.inline_runtime import installed_runtime_names, reserved_names

    plans = plan_models(machine, reserved_names(installed_runtime_names()))
    classes = build_models(plans)
    by_type = {name: classes[class_name] for name, class_name in plans.class_names.items()}
    names = GuardNames.of(machine)

    def state_spec(s: ir.State) -> StateSpec:
        plan = plans.output_of(s.name)
        return StateSpec(
            name=s.name,
            kind=s.kind,
            agent=s.agent,
            instruction=s.instruction,
            output=classes[plan.class_name] if plan is not None else None,
            output_wrapped=plan is not None and plan.wrapper,
            tell=s.tell,
            visits=s.visits,
            retries=s.retries,
            call=tool_call_spec(s.call) if s.call is not None else None,
            result=s.result,
            transitions=tuple(transition_spec(t) for t in s.transitions),
            origin=origin(s.origin),
        )

    def transition_spec(t: ir.Transition) -> TransitionSpec:
        guard = compile_guard(t.guard, names) if t.kind == "guard" and t.guard is not None else None
        return TransitionSpec(t.kind, t.target, guard, transition_text(t), t.max, origin(t.origin))

    def tool_call_spec(call: ir.ToolCall) -> ToolCallSpec:
        return ToolCallSpec(call.tool, _args_builder(call, names), origin(call.origin))

    agents = {}
    for a in machine.agents:
        a = effective_agent(machine, a)
        agents[a.name] = AgentSpec(
            name=a.name,
            prompt=a.prompt,
            model=a.model,
            temperature=a.temperature,
            tools=a.tools,
            memory=a.memory,
            memory_count=a.memory_count,
            fallbacks=a.fallbacks,
            origin=origin(a.origin),
        )
    return MachineSpec(
        name=machine.name,
        description=machine.description,
        inputs=tuple(
            InputSpec(i.name, annotation(i.type, by_type), required=not i.has_default, default=i.default)
            for i in machine.inputs
        ),
        model=machine.model,
        verifier_model=machine.verifier_model,
        temperature=machine.temperature,
        limits=LimitsSpec(
            steps=machine.limits.steps,
            cost_usd=machine.limits.cost_usd,
            tokens=machine.limits.tokens,
            seconds=machine.limits.seconds,
        ),
        agents=agents,
        states={s.name: state_spec(s) for s in machine.states},
        start=machine.start,
        tools={t.name: ToolSpec(t.name, t.import_path, dict(t.options)) for t in machine.tools},
        tests=tuple(
            TestSpec(
                name=t.name,
                inputs=dict(t.inputs),
                steps=tuple(scripted_step(step) for step in t.steps),
                expect_path=t.expect_path,
                expect_final=t.expect_final,
                expect_result=t.expect_result,
                has_expect_result=t.has_expect_result,
                expect_failure=t.expect_failure,
                origin=origin(t.origin),
            )
            for t in machine.tests
        ),
        source_sha256=source_sha256,
        source_path=source_path,
    )


def _args_builder(call: ir.ToolCall, names: GuardNames) -> Callable[[Scope], dict[str, Any]]:
    evaluators = [(arg.name, compile_expr(arg.value, names)) for arg in call.args]

    def build(scope: Scope) -> dict[str, Any]:
        return {name: evaluate(scope) for name, evaluate in evaluators}

    return build
