"""A machine as its runs need it: worked out once per machine, model map and reply cap, shared by every run.

`MachinePlan` is the one place a `MachineSpec` is turned into what running it takes — each state's plan
(its edges with their bounds, its agent with the model it calls, its output schema, its call counters'
keys), the verifier's model, the template set (with a Jinja test for every variant type), the pattern that
keeps transition conditions out of agents' feedback, and which limits make a run count its usage. Every
face builds its core from a plan: the local engine, the Temporal workflow (templates without a wall-clock
deadline: a durable engine's only clock is its own), test blocks and generated runners.

Defaults are not decided here: the compiler fills each agent's model and temperature from the machine's
(compiler/lower.py), so an agent's spec already says what it calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .spec import AgentSpec, MachineSpec, StateSpec
from .structured import json_schema, output_type_name, to_text
from .templates import TemplateSet, is_constant, variant_tests
from .variables import VariableTypes


class EdgePlan:
    """A transition with everything the hot path needs precomputed."""

    __slots__ = ("guard", "index", "key", "kind", "max", "origin", "seconds", "target", "target_visits", "text")

    def __init__(self, state: str, index: int, spec: Any, target_visits: int | str | None) -> None:
        self.index = index
        self.kind = spec.kind
        self.target = spec.target
        self.guard = spec.guard
        self.text = spec.text
        self.max = spec.max
        self.origin = spec.origin
        self.seconds = spec.seconds
        self.target_visits = target_visits
        self.key = f"{state}:{index}"


class AgentPlan:
    """An agent as a call needs it: the model it calls (the model map applied), its fallbacks, temperature,
    prompt and tools."""

    __slots__ = ("fallbacks", "map_model", "model", "name", "prompt", "spec", "temperature", "tools")

    def __init__(self, spec: AgentSpec, map_model: Any) -> None:
        self.name = spec.name
        self.spec = spec
        self.map_model = map_model
        self.model = map_model(spec.model)
        self.fallbacks = tuple(map_model(m) for m in spec.fallbacks)
        self.temperature = spec.temperature
        self.prompt = spec.prompt
        self.tools = spec.tools

    def with_model(self, model: str) -> AgentPlan:
        """The same agent — memory, prompt, tools, fallbacks — calling `model` (a state's own model)."""
        plan = object.__new__(AgentPlan)
        for slot in AgentPlan.__slots__:
            setattr(plan, slot, getattr(self, slot))
        plan.model = self.map_model(model)
        return plan


class StatePlan:
    """A state as its steps need it: who works, what it yields, its edges, and the keys of its counters."""

    __slots__ = (
        "agent",
        "agent_key",
        "agent_tool_key",
        "ask_before",
        "back_here",
        "call_key",
        "constant",
        "direct",
        "direct_resets",
        "edges",
        "final",
        "instruction",
        "items_key",
        "kind",
        "name",
        "output",
        "person_key",
        "retries",
        "schema",
        "schema_name",
        "spec",
        "step",
        "tell",
        "timeout",
        "tool_key",
        "tool_rounds",
        "updates",
        "variant",
        "verifier_key",
        "visit_edges",
        "works",
        "wrapped",
    )

    def __init__(self, spec: StateSpec, machine: MachineSpec, agents: Mapping[str, AgentPlan]) -> None:
        self.name = spec.name
        self.spec = spec
        self.kind = spec.kind
        self.final = spec.final or spec.kind == "final"
        self.works = spec.kind != "final"  # a final state may do work before the run ends
        self.agent = agents[spec.agent] if spec.agent else None
        if self.agent is not None and spec.model:  # the state's own model, the agent's everything else
            self.agent = self.agent.with_model(spec.model)
        # which step the core takes here: a parallel state's, a map's, an agent's, a person's, a call's, a tool's
        self.step = ("parallel" if spec.parallel is not None else "map" if spec.each is not None
                     else "agent" if self.agent is not None else spec.kind if spec.kind in ("human", "call")
                     else "action")
        self.instruction = spec.instruction or ""
        self.constant = is_constant(self.instruction)  # an instruction without Jinja markup: used as it is
        self.output = spec.output
        self.wrapped = spec.output_wrapped
        self.variant = spec.output_variant
        self.schema: dict[str, Any] | None = None
        self.schema_name = "output"
        if spec.output is not None and (self.agent is not None or spec.kind == "human"):
            self.schema = json_schema(spec.output)
            self.schema_name = output_type_name(spec.output)
        self.retries = spec.retries
        self.tell = tuple(name for name in spec.tell if self.agent is None or name != self.agent.name)
        self.edges = tuple(
            EdgePlan(spec.name, i, t, machine.states[t.target].visits if t.target in machine.states else None)
            for i, t in enumerate(spec.transitions)
        )
        # the common case — one unbounded `-> t` into an unbounded state — skips transition evaluation
        only = self.edges[0] if len(self.edges) == 1 else None
        self.direct = (only.target if only is not None and only.kind == "always" and only.max is None
                       and only.target_visits is None else None)
        # whether arriving by that edge starts a visit whose `stay ... per visit` counters go back to 0
        target = machine.states.get(self.direct) if self.direct is not None else None
        self.direct_resets = target is not None and any(
            t.kind == "stay" and t.per_visit for t in target.transitions)
        self.back_here = f"This step is being done again: state '{spec.name}' sent the run back here."
        # the counters of `otherwise stay max N per visit`, set back to 0 whenever the run arrives here
        self.visit_edges = tuple(e.key for e in self.edges if e.kind == "stay" and spec.transitions[e.index].per_visit)
        # `after 24h -> s`: the edge a person's silence takes, outside the evaluation in source order
        self.timeout = next((e for e in self.edges if e.kind == "timeout"), None)
        self.person_key = "person:" + spec.name
        self.agent_key = "agent:" + spec.name
        self.verifier_key = "verifier:" + spec.name
        self.tool_key = "tool:" + spec.name
        self.agent_tool_key = "agent-tool:" + spec.name
        self.items_key = "items:" + spec.name  # a map's elements run in earlier visits: numbers them over the run
        self.call_key = "run:" + spec.name  # the machine a `run` state calls: its calls, numbered over the run
        self.updates = spec.updates  # the run variables it updates after its step (a map's: each element's)
        self.ask_before = frozenset(spec.ask_before)  # tools whose calls by its agent wait for a person
        self.tool_rounds = spec.tool_rounds  # the most rounds of tool calls its agent makes in a step (None: 8)

    def for_item(self, number: int) -> StatePlan:
        """The plan of one element's step of a map: its own call counters (`agent:build[3]`), so that the
        elements' calls, run at once, are counted (and scripted, and resumed) each on its own."""
        plan = object.__new__(StatePlan)
        for slot in StatePlan.__slots__:
            setattr(plan, slot, getattr(self, slot))
        suffix = f"[{number}]"
        plan.agent_key, plan.tool_key = self.agent_key + suffix, self.tool_key + suffix
        plan.agent_tool_key = self.agent_tool_key + suffix
        plan.person_key = self.person_key + suffix  # (the answers to its tool calls that wait)
        return plan


class MachinePlan:
    """What every run of one machine needs, worked out once.

    `model_map` maps the models the machine names to the ones called (`"*"` maps every other); `max_tokens`
    caps every reply; `durable` is for an engine whose only clock is its own (Temporal): templates then
    render without a wall-clock deadline, since a render that stops at a different moment on replay would
    change the history (the `seconds` limit is still checked by the core, on that engine's clock, before
    every step and model call)."""

    def __init__(self, machine: MachineSpec, *, model_map: Mapping[str, str] | None = None,
                 max_tokens: int | None = None, durable: bool = False) -> None:
        self.machine = machine
        self.model_map = dict(model_map or {})
        self.max_tokens = max_tokens
        self.durable = durable
        self.templates = TemplateSet(tests=variant_tests(machine.variant_types))
        self.variables = VariableTypes(machine)
        self.agents = {name: AgentPlan(spec, self.map_model) for name, spec in machine.agents.items()}
        self.states = {name: StatePlan(spec, machine, self.agents) for name, spec in machine.states.items()}
        self.verifier_model = self.map_model(machine.verifier_model or machine.model)
        limits = self.limits = machine.limits
        self.usage_limited = any(v is not None for v in (limits.tokens, limits.cost_usd, limits.seconds))
        # only a machine with a budget pays for estimating each call before it is made
        self.budget_limited = limits.tokens is not None or limits.cost_usd is not None
        # templates render within what is left of the run's time, unless the engine's clock is its own
        self.render_deadlines = limits.seconds is not None and not durable
        self.state_names = tuple(machine.states)
        conditions = sorted({t.text for s in machine.states.values() for t in s.transitions
                             if t.kind == "condition" and t.text.strip()}, key=len, reverse=True)
        self.conditions_pattern = (re.compile("|".join(quoted_condition_pattern(c) for c in conditions),
                                              re.IGNORECASE) if conditions else None)

    def map_model(self, name: str) -> str:
        mapped = self.model_map.get(name)
        if mapped is None:
            mapped = self.model_map.get("*", name)
        return mapped

    def without_conditions(self, text: str) -> str:
        """`text` with every transition condition it quotes hidden: agents never read them, even when a
        verifier quotes one back."""
        if self.conditions_pattern is None:
            return text
        return self.conditions_pattern.sub("(...)", text)


def quoted_condition_pattern(condition: str) -> str:
    """A pattern for a condition quoted in a verifier's words: whole words only (with a condition "ok",
    "Look at the token" stays as it is), in any case, with any spacing between its words."""
    words = [re.escape(word) for word in condition.split()]
    pattern = r"\s+".join(words)
    if re.match(r"\w", condition.strip()):
        pattern = r"(?<!\w)" + pattern
    if re.search(r"\w$", condition.strip()):
        pattern += r"(?!\w)"
    return pattern


def output_label(plan: StatePlan) -> str:
    """The output type as the spec names it: `type Verdict`, or the state's own `output list[str]`."""
    if plan.output is None or plan.wrapped:
        return f"the output type of state '{plan.name}'"
    return f"type {output_type_name(plan.output)}"


def output_text(plan: StatePlan, output: Any) -> str:
    """An output as a message shows it: a variant with the name of its type (`{"Answer": {...}}`)."""
    if plan.variant:
        from .variants import tagged

        output = tagged(output)
    return to_text(output)


def exit_fields(run: Any, plan: StatePlan, output: Any) -> dict[str, Any]:
    """The fields of a `state_exit` event: the state, its output (in a trace with content) and, for a
    variant output, which variant it was."""
    fields: dict[str, Any] = {"state": plan.name, "output": output} if run.content else {"state": plan.name}
    if plan.variant:
        from .variants import variant_name

        fields["variant"] = variant_name(output)
    return fields
