"""Lowering: settings validated as they are read, then the IR built with every default filled in.

Each setting is read exactly once here, so this is where its value is checked (known limit names, memory
policies, numeric ranges) and where each state's shape is decided (agent, action or final). Lowering runs
even when earlier stages reported errors — unknown references simply lower to nothing — so one run
reports every problem; the caller discards the IR when any error was reported.
"""

from __future__ import annotations

from ..diagnostics import Diagnostics, did_you_mean
from ..grammar import ast
from . import ir
from .checks.resolve import LIMIT_NAMES, AgentView, StateView, Symbols, TestView

MEMORY_POLICIES = ("all", "none", "last")
TEMPERATURE_RANGE = (0.0, 2.0)


class _Lowerer:
    def __init__(self, machine: ast.Machine, symbols: Symbols, diags: Diagnostics) -> None:
        self.machine = machine
        self.symbols = symbols
        self.diags = diags

    # -- settings

    def _temperature(self, setting: ast.TemperatureSetting | None, owner: str) -> float | None:
        if setting is None:
            return None
        value = float(setting.value.value)
        low, high = TEMPERATURE_RANGE
        if not low <= value <= high:
            self.diags.report("SW3015", f"temperature {setting.value.span.text} of {owner} is out of range",
                              setting.value.span, label="must be between 0 and 2",
                              help="0 is the most deterministic; most models accept up to 2")
        return value

    def _limits(self, limits: ast.Limits | None) -> ir.Limits:
        values: dict[str, int | float] = {}
        for item in limits.items if limits is not None else ():
            key = item.name.value
            if key not in LIMIT_NAMES:
                self.diags.report("SW2011", f"unknown limit '{key}'", item.name.span, label="not a limit",
                                  help=did_you_mean(key, LIMIT_NAMES)
                                  or "the limits are " + ", ".join(LIMIT_NAMES))
                continue
            if key in values:
                self.diags.report("SW2010", f"limit '{key}' is given twice", item.name.span,
                                  label="second occurrence", help=f"keep one '{key}'; the first one is used")
                continue
            number = item.value.value
            if key in ("steps", "tokens") and not isinstance(number, int):
                self.diags.report("SW3015", f"limit '{key}' takes a whole number", item.value.span,
                                  label="not a whole number",
                                  help=f"write e.g. '{key} {max(1, int(number))}'")
                number = max(1, int(number))
            elif number <= 0:
                self.diags.report("SW3015", f"limit '{key}' must be above 0", item.value.span,
                                  label="a limit of 0 stops every run before it starts",
                                  help=f"leave '{key}' out for no limit" if key != "steps"
                                  else f"leave 'steps' out for the default of {ir.DEFAULT_STEP_LIMIT}")
            values[key] = number
        return ir.Limits(
            steps=int(values.get("steps", ir.DEFAULT_STEP_LIMIT)),
            cost_usd=float(values["cost_usd"]) if "cost_usd" in values else None,
            tokens=int(values["tokens"]) if "tokens" in values else None,
            seconds=float(values["seconds"]) if "seconds" in values else None,
        )

    def _memory(self, view: AgentView) -> tuple[str, int | None]:
        setting = view.memory
        if setting is None:
            return ir.DEFAULT_MEMORY, None
        policy = setting.policy.value
        owner = f"agent '{view.decl.name.value}'"
        if policy not in MEMORY_POLICIES:
            self.diags.report("SW2011", f"unknown memory policy '{policy}' in {owner}", setting.policy.span,
                              label="not a memory policy",
                              help=did_you_mean(policy, MEMORY_POLICIES)
                              or "write 'memory all', 'memory none' "
                                   "or 'memory last N'")
            return ir.DEFAULT_MEMORY, None
        count = setting.count
        if policy == "last":
            if count is None:
                self.diags.report("SW2011", f"'memory last' in {owner} needs a count", setting.policy.span,
                                  label="how many messages?",
                                  help="write 'memory last N', e.g. 'memory last 6'")
                return "last", 1
            if int(count.value) < 1:
                self.diags.report("SW3015", f"'memory last {count.value}' in {owner} keeps nothing",
                                  count.span, label="must be at least 1",
                                  help="write 'memory none' to keep no messages")
            return "last", int(count.value)
        if count is not None:
            self.diags.report("SW2011", f"'memory {policy}' takes no count", count.span,
                              label="unexpected count",
                              help=f"write 'memory {policy}', or 'memory last {count.value}' to keep the "
                                   "most recent messages")
        return policy, None

    # -- machine parts

    def inputs(self) -> tuple[ir.Input, ...]:
        out = []
        for decl in self.symbols.inputs.values():
            t = self.symbols.resolve_type(decl.type)
            if decl.default is not None:
                out.append(ir.Input(decl.name.value, t, decl.default.to_python(), True, decl.span))
            elif isinstance(t, ir.Optional_):
                # an optional input without a default defaults to none
                out.append(ir.Input(decl.name.value, t, None, True, decl.span))
            else:
                out.append(ir.Input(decl.name.value, t, None, False, decl.span))
        return tuple(out)

    def types(self) -> tuple[ir.TypeDef, ...]:
        out = []
        for decl in self.symbols.types.values():
            fields: dict[str, ir.Field] = {}
            for f in decl.fields:
                doc = f.doc.value if f.doc is not None else ""
                fields.setdefault(f.name.value,
                                  ir.Field(f.name.value, self.symbols.resolve_type(f.type), doc, f.span))
            out.append(ir.TypeDef(decl.name.value, tuple(fields.values()), decl.span))
        return tuple(out)

    def tools(self) -> tuple[ir.Tool, ...]:
        out = []
        for name, decl in self.symbols.tools.items():
            path = decl.import_path.value if decl.import_path is not None else None
            options: dict[str, object] = {}
            for opt in decl.options:
                options.setdefault(opt.name.value, opt.value.to_python())
            out.append(ir.Tool(name, path, tuple(sorted(options.items())), decl.span))
        out.extend(ir.Tool(name, None, ()) for name in self.symbols.implicit_tools)
        return tuple(out)

    def agents(self, model: str, temperature: float | None) -> tuple[ir.Agent, ...]:
        out = []
        for name, view in self.symbols.agents.items():
            memory, count = self._memory(view)
            own_temperature = self._temperature(view.temperature, f"agent '{name}'")
            tools = tuple(dict.fromkeys(t.dotted for t in view.tools.tools)) if view.tools is not None else ()
            out.append(ir.Agent(
                name=name,
                prompt=view.prompt.text.value if view.prompt is not None else "",
                model=view.model.model.value if view.model is not None else model,
                temperature=own_temperature if own_temperature is not None else temperature,
                tools=tools,
                memory=memory,
                memory_count=count,
                fallbacks=tuple(m.value for m in view.fallbacks.models) if view.fallbacks is not None else (),
                origin=view.decl.span,
            ))
        return tuple(out)

    # -- states

    def _check_shape(self, view: StateView) -> None:
        name = view.name
        if view.decl.final:
            for item, word in ((view.agent, "agent"), (view.instruction, "do"), (view.output, "output"),
                               (view.call, "call"), (view.tell, "tell"), (view.visits, "visits"),
                               (view.retries, "retries")):
                if item is not None:
                    self.diags.report("SW3011", f"final state '{name}' cannot have '{word}'", item.span,
                                      label="a final state ends the run and does no work",
                                      help="move the work into a state before it; a final state may only "
                                           "have a 'result'")
            return
        if view.kind == "none":
            has_do = view.instruction is not None
            self.diags.report("SW3009", f"state '{name}' does no work", view.decl.name.span,
                              label="no agent and no tool call",
                              help="add 'agent NAME' to say who carries out its 'do'" if has_do
                              else "give it 'agent NAME' and 'do \"...\"', or a tool 'call'; "
                                   "or mark it 'final'")
        if view.agent is not None and view.call is not None:
            self.diags.report("SW3010", f"state '{name}' has both an agent and a tool call",
                              view.call.tool.span,
                              label=f"the state already has 'agent {view.agent.name.value}'",
                              help="split it in two: an action state for the call and an agent state")
        if view.agent is not None and view.instruction is None:
            self.diags.report("SW3014", f"agent state '{name}' has no instruction", view.agent.span,
                              label="what should the agent do here?", help="add 'do \"...\"' to the state")
        if view.agent is None and view.call is not None and view.instruction is not None:
            self.diags.report("SW3017", f"action state '{name}' has an instruction", view.instruction.span,
                              label="no agent reads it: the state only calls a tool",
                              help="remove 'do', or add a separate agent state")
        if view.result is not None:
            self.diags.report("SW3018", f"state '{name}' is not final, so its result is never used",
                              view.result.span, label="only final states have a result",
                              help=f"mark it 'final state {name}', or remove 'result'")
        if not view.transitions:
            self.diags.report("SW3012", f"state '{name}' has no transitions", view.decl.name.span,
                              label="where does the run go next?",
                              help="add a transition such as '-> NEXT', or mark the state 'final'")
        if view.visits is not None and int(view.visits.count.value) < 1:
            self.diags.report("SW3013",
                              f"'visits {view.visits.count.value}' means state '{name}' can never run",
                              view.visits.count.span, label="must be at least 1",
                              help="remove the state, or allow at least one visit")
        if view.retries is not None and int(view.retries.count.value) > ir.MAX_RETRIES:
            self.diags.report("SW3015", f"'retries {view.retries.count.value}' in state '{name}' is more than "
                              f"the most a state may retry ({ir.MAX_RETRIES})", view.retries.count.span,
                              label=f"at most {ir.MAX_RETRIES}",
                              help=f"write 'retries N' with N from 0 to {ir.MAX_RETRIES} (the default is "
                                   f"{ir.DEFAULT_RETRIES}); each retry sends the whole exchange again")
        for t in view.transitions:
            if t.max is not None and int(t.max.value) < 1:
                self.diags.report("SW3013", f"'max {t.max.value}' disables this transition", t.max.span,
                                  label="must be at least 1", help="remove the transition, or allow it once")
            if t.kind == "stay" and t.max is None and view.visits is None:
                self.diags.report("SW3016", f"'otherwise stay' in state '{name}' has no bound", t.span,
                                  label="could re-run the state forever",
                                  help=f"write 'otherwise stay max N', or give state '{name}' 'visits N'")

    def state(self, view: StateView) -> ir.State:
        self._check_shape(view)
        name = view.name
        kind = "final" if view.decl.final else ("action" if view.kind == "action" else "agent")
        transitions = tuple(
            ir.Transition(
                kind=t.kind,
                target=name if t.kind == "stay" or t.target is None else t.target.value,
                guard=t.guard,
                condition=t.condition.value if t.condition is not None else None,
                max=int(t.max.value) if t.max is not None else None,
                origin=t.span,
            )
            for t in view.transitions
        )
        call = None
        if view.call is not None:
            args = tuple(ir.ToolCallArg(a.name.value, a.value, a.span) for a in view.call.args)
            call = ir.ToolCall(view.call.tool.dotted, args, view.call.span)
        return ir.State(
            name=name,
            kind=kind,
            agent=view.agent.name.value if view.agent is not None and kind == "agent" else None,
            instruction=(view.instruction.text.value if view.instruction is not None and kind == "agent"
                         else None),
            output=self.symbols.resolve_type(view.output.type) if view.output is not None else None,
            tell=tuple(dict.fromkeys(n.value for n in view.tell.agents)) if view.tell is not None else (),
            visits=int(view.visits.count.value) if view.visits is not None else None,
            retries=int(view.retries.count.value) if view.retries is not None else ir.DEFAULT_RETRIES,
            call=call if kind == "action" else None,
            result=view.result.text.value if view.result is not None and kind == "final" else None,
            transitions=transitions if kind != "final" else (),
            template_reads=tuple(read for read in self.symbols.state_reads.get(name, ())
                                 if (read.template, kind) in (("instruction", "agent"), ("result", "final"))),
            origin=view.decl.span,
            origins=(view.decl.span,),
        )

    # -- tests

    def test(self, view: TestView) -> ir.Test:
        inputs: dict[str, object] = {}
        if view.input is not None:
            for entry in ast.object_entries(view.input.values):
                inputs.setdefault(entry.key.value, entry.value.to_python())
        steps: list[ir.Reply | ir.Verdict] = []
        for item in view.decl.items:
            if isinstance(item, ast.Reply):
                steps.append(ir.Reply(item.state.value, item.value.to_python(), item.span))
            elif isinstance(item, ast.Verdict):
                condition = item.condition.value if item.condition is not None else None
                steps.append(ir.Verdict(item.state.value, condition, item.span))
        return ir.Test(
            name=view.decl.name.value,
            inputs=tuple(inputs.items()),
            steps=tuple(steps),
            expect_path=(tuple(n.value for n in view.expect_path.states) if view.expect_path is not None
                         else None),
            expect_final=view.expect_final.state.value if view.expect_final is not None else None,
            expect_result=view.expect_result.value.to_python() if view.expect_result is not None else None,
            has_expect_result=view.expect_result is not None,
            expect_failure=view.expect_failure.kind.value if view.expect_failure is not None else None,
            origin=view.decl.span,
        )

    def machine_ir(self) -> ir.Machine:
        mv = self.symbols.machine
        model = mv.model.model.value if mv.model is not None else ir.DEFAULT_MODEL
        verifier = mv.verifier_model.model.value if mv.verifier_model is not None else model
        temperature = self._temperature(mv.temperature, f"machine '{self.machine.name.value}'")
        limits = self._limits(mv.limits)
        starts = [v.name for v in self.symbols.states.values() if v.decl.start]
        return ir.Machine(
            name=self.machine.name.value,
            description=mv.description.text.value if mv.description is not None else "",
            inputs=self.inputs(),
            model=model,
            verifier_model=verifier,
            temperature=temperature,
            limits=limits,
            types=self.types(),
            tools=self.tools(),
            agents=self.agents(model, temperature),
            states=tuple(self.state(v) for v in self.symbols.states.values()),
            start=starts[0] if starts else "",
            tests=tuple(self.test(v) for v in self.symbols.tests),
            origin=self.machine.span,
        )


def lower_machine(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics) -> ir.Machine:
    """Validate settings and state shapes, and build the IR (meaningful only when no error was reported)."""
    return _Lowerer(machine, symbols, diagnostics).machine_ir()
