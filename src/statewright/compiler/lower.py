"""Lowering: a checked machine as IR, every reference bound and every default filled in.

Lowering reports nothing: the checks (checks/) have read every setting and shape already, and the front
door lowers a machine only when they found no error, so every value here is known to be valid.
"""

from __future__ import annotations

from ..grammar import ast
from . import ir
from .checks.calls import path_target
from .checks.constraints import constraint_of, lower_range
from .checks.resolve import LIMIT_NAMES, AgentView, StateView, Symbols, TestView
from .checks.testblocks import reply_variant
from .checks.type_algebra import branch_output_type, common_type


class _Lowerer:
    def __init__(self, machine: ast.Machine, symbols: Symbols) -> None:
        self.machine = machine
        self.symbols = symbols

    # -- settings

    @staticmethod
    def _temperature(setting: ast.TemperatureSetting | None) -> float | None:
        return float(setting.value.value) if setting is not None else None

    @staticmethod
    def _limits(limits: ast.Limits | None) -> ir.Limits:
        values: dict[str, int | float] = {}
        for item in limits.items if limits is not None else ():
            if item.name.value in LIMIT_NAMES:
                values.setdefault(item.name.value, item.value.value)  # the first one is used
        return ir.Limits(
            steps=int(values.get("steps", ir.DEFAULT_STEP_LIMIT)),
            cost_usd=float(values["cost_usd"]) if "cost_usd" in values else None,
            tokens=int(values["tokens"]) if "tokens" in values else None,
            seconds=float(values["seconds"]) if "seconds" in values else None,
        )

    @staticmethod
    def _memory(view: AgentView) -> tuple[str, int | None]:
        setting = view.memory
        if setting is None:
            return ir.DEFAULT_MEMORY, None
        if setting.policy.value == "last":
            return "last", int(setting.count.value) if setting.count is not None else 1
        return setting.policy.value, None

    # -- machine parts

    def inputs(self) -> tuple[ir.Input, ...]:
        out = []
        for decl in self.symbols.inputs.values():
            t = self.symbols.resolve_type(decl.type)
            constraints = lower_constraints(decl.constraints)
            if decl.default is not None:
                out.append(ir.Input(decl.name.value, t, decl.default.to_python(), True, constraints, decl.span))
            elif isinstance(t, ir.Optional_):
                # an optional input without a default defaults to none
                out.append(ir.Input(decl.name.value, t, None, True, constraints, decl.span))
            else:
                out.append(ir.Input(decl.name.value, t, None, False, constraints, decl.span))
        return tuple(out)

    def variables(self) -> tuple[ir.Variable, ...]:
        return tuple(ir.Variable(decl.name.value, self.symbols.resolve_type(decl.type), decl.value.to_python(),
                                 decl.span) for decl in self.symbols.variables.values())

    def types(self) -> tuple[ir.TypeDef, ...]:
        out = []
        for decl in self.symbols.types.values():
            fields: dict[str, ir.Field] = {}
            for f in decl.fields:
                doc = f.doc.value if f.doc is not None else ""
                fields.setdefault(f.name.value,
                                  ir.Field(f.name.value, self.symbols.resolve_type(f.type), doc,
                                           lower_constraints(f.constraints), f.span))
            out.append(ir.TypeDef(decl.name.value, tuple(fields.values()), decl.span))
        return tuple(out)

    def tools(self) -> tuple[ir.Tool, ...]:
        out = []
        for name, decl in self.symbols.tools.items():
            path = decl.import_path.value if decl.import_path is not None else None
            options: dict[str, object] = {}
            for opt in decl.options:
                options.setdefault(opt.name.value, opt.value.to_python())
            # a second `headers` or `query` block is an error the checks report: the first one is used
            headers = tuple((e.name.value, e.value.value) for e in decl.headers[0].entries) if decl.headers else ()
            query = tuple((e.name.value, e.value.value) for e in decl.query[0].entries) if decl.query else ()
            out.append(ir.Tool(name, path, tuple(sorted(options.items())), decl.secret_names, headers, query,
                               decl.span))
        out.extend(ir.Tool(name, None, ()) for name in self.symbols.implicit_tools)
        return tuple(out)

    def agents(self, model: str, temperature: float | None) -> tuple[ir.Agent, ...]:
        out = []
        for name, view in self.symbols.agents.items():
            memory, count = self._memory(view)
            own_temperature = self._temperature(view.temperature)
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

    def _parallel(self, view: StateView) -> ir.Parallel | None:
        if view.parallel is None:
            return None
        join = view.join
        if join is None or join.rule.value == "all":
            rule = ir.Join("all", origin=join.span if join is not None else None)
        else:
            count = int(join.count.value) if join.count is not None else 1
            rule = ir.Join("first", count, join.guard, join.span)
        branches = tuple(dict.fromkeys(n.value for n in view.parallel.branches))
        return ir.Parallel(branches, rule, view.parallel.span)

    @staticmethod
    def _each(view: StateView) -> ir.Each | None:
        each = view.each
        if each is None or each.max is None:
            return None
        concurrency = int(each.concurrency.value) if each.concurrency is not None else ir.DEFAULT_CONCURRENCY
        return ir.Each(each.item.value, each.items, bound_count(each.max),
                       each.index.value if each.index is not None else None, concurrency, each.span)

    def _output(self, view: StateView) -> ir.Type | None:
        if view.parallel is not None:  # the type the branches' outputs share, when they share one
            t = common_type([branch_output_type(ends, self.symbols)
                             for _, ends in self.symbols.branches.get(view.name, ())])
            if isinstance(t, ir.Named | ir.ListOf | ir.Optional_ | ir.Enum) or t in (ir.INT, ir.FLOAT, ir.BOOL):
                return t  # type: ignore[return-value]
            return None
        return self.symbols.resolve_output(view.output.type) if view.output is not None else None

    def state(self, view: StateView) -> ir.State:
        name = view.name
        final = view.decl.final
        kind = (view.kind if view.kind in ("agent", "action", "call", "human", "parallel")
                else ("final" if final else "agent"))
        transitions = tuple(
            ir.Transition(
                kind=t.kind,
                target=name if t.kind == "stay" or t.target is None else t.target.value,
                guard=t.guard,
                condition=t.condition.value if t.condition is not None else None,
                max=bound_count(t.max) if t.max is not None else None,
                origin=t.span,
                per_visit=t.per_visit is not None and t.kind == "stay",
                seconds=t.after.seconds if t.after is not None else None,
            )
            for t in view.transitions
        )
        call = None
        if view.call is not None:
            args = tuple(ir.ToolCallArg(a.name.value, a.value, a.span) for a in view.call.args)
            call = ir.ToolCall(view.call.tool.dotted, args, view.call.span)
        run = None
        if view.run is not None and kind == "call":
            args = tuple(ir.ToolCallArg(a.name.value, a.value, a.span) for a in view.run.args)
            run = ir.Run(view.run.machine.value, args, view.run.span)
        return ir.State(
            name=name,
            kind=kind,
            agent=view.agent.name.value if view.agent is not None and kind == "agent" else None,
            model=view.model.model.value if view.model is not None and kind == "agent" else None,
            instruction=(view.instruction.text.value if view.instruction is not None and kind == "agent"
                         else view.ask.text.value if view.ask is not None and kind == "human" else None),
            output=self._output(view),
            tell=tuple(dict.fromkeys(n.value for n in view.tell.agents)) if view.tell is not None else (),
            visits=bound_count(view.visits.count) if view.visits is not None else None,
            retries=int(view.retries.count.value) if view.retries is not None else ir.DEFAULT_RETRIES,
            call=call if kind == "action" else None,
            result=view.result.text.value if view.result is not None and final else None,
            fail=view.fail.text.value if view.fail is not None and final else None,
            transitions=transitions if not final else (),
            template_reads=tuple(read for read in self.symbols.state_reads.get(name, ())
                                 if (read.template == "instruction" and kind in ("agent", "human"))
                                 or (read.template in ("result", "fail") and final)),
            origin=view.decl.span,
            final=final,
            parallel=self._parallel(view),
            each=self._each(view),
            branch=self.symbols.branch_of.get(name),
            updates=tuple(ir.Update(u.reducer, u.var.value, u.value, u.span) for u in view.updates),
            ask_before=(tuple(dict.fromkeys(t.dotted for t in view.ask_before.tools))
                        if view.ask_before is not None and kind == "agent" else ()),
            tool_rounds=(int(view.tool_rounds.count.value) if view.tool_rounds is not None and kind == "agent"
                         else None),
            run=run,
        )

    # -- tests

    def test(self, view: TestView) -> ir.Test:
        inputs: dict[str, object] = {}
        if view.input is not None:
            for entry in ast.object_entries(view.input.values):
                inputs.setdefault(entry.key.value, entry.value.to_python())
        steps: list[ir.Reply | ir.ToolCalls | ir.Verdict | ir.Timeout | ir.Approval] = []
        for item in view.decl.items:
            if isinstance(item, ast.Reply):
                steps.append(ir.Reply(item.state.value, item.value.to_python(), self._reply_variant(item),
                                      item.span))
            elif isinstance(item, ast.ReplyCalls):
                calls = tuple((c.tool.dotted, tuple((a.name.value, a.value.to_python()) for a in c.args))
                              for c in item.calls)
                steps.append(ir.ToolCalls(item.state.value, calls, item.span))
            elif isinstance(item, ast.Verdict):
                condition = item.condition.value if item.condition is not None else None
                steps.append(ir.Verdict(item.state.value, condition, item.span))
            elif isinstance(item, ast.TestTimeout):
                steps.append(ir.Timeout(item.state.value, item.span))
            elif isinstance(item, ast.Approval):
                arguments = (tuple((e.key.value, e.value.to_python()) for e in ast.object_entries(item.arguments))
                             if item.arguments is not None else None)
                steps.append(ir.Approval(item.state.value, item.decision,
                                         item.tool.dotted if item.tool is not None else None,
                                         item.reason.value if item.reason is not None else None, arguments,
                                         item.span))
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
            expectations=tuple(self._expectation(e) for e in view.expectations),
            allow_unused=view.allow_unused is not None,
            origin=view.decl.span,
            expect_vars=tuple(ir.VarExpectation(e.name.value, e.value.to_python(), e.span)
                              for e in view.decl.items if isinstance(e, ast.ExpectVar)),
        )

    @staticmethod
    def _expectation(item: ast.ExpectOutput | ast.ExpectInstruction) -> ir.Expectation:
        visit = int(item.visit.value) if item.visit is not None else 1
        if isinstance(item, ast.ExpectOutput):
            return ir.Expectation("output", item.state.value, visit, item.contains, item.value.to_python(),
                                  item.span)
        return ir.Expectation("instruction", item.state.value, visit, item.contains, item.text.value, item.span)

    def _reply_variant(self, reply: ast.Reply) -> str | None:
        """The variant a reply for a variant output is: named, or the one type its fields fit (a reply
        for a called machine's state is read in that machine's symbol tables)."""
        target = path_target(self.symbols, reply.state)
        symbols, view = target if target is not None else (self.symbols, self.symbols.states.get(reply.state.value))
        if view is None or view.output is None or not isinstance(view.output.type, ast.VariantType):
            return None
        if reply.variant is not None:
            return reply.variant.value
        return reply_variant(reply.value, symbols.resolve_output(view.output.type), symbols)

    def machines(self) -> tuple[tuple[str, ir.Machine], ...]:
        """The machines the states run, by the names they run them by, in the order of the `use` lines."""
        out = []
        for name, callee in self.symbols.callees.items():
            compilation = callee.used.compilation
            if (name in self.symbols.used_callees and callee.used.usable and compilation is not None
                    and compilation.ir is not None):
                out.append((name, compilation.ir))
        return tuple(out)

    def machine_ir(self) -> ir.Machine:
        mv = self.symbols.machine
        model = mv.model.model.value if mv.model is not None else ir.DEFAULT_MODEL
        verifier = mv.verifier_model.model.value if mv.verifier_model is not None else model
        temperature = self._temperature(mv.temperature)
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
            variables=self.variables(),
            machines=self.machines(),
            returns=self.symbols.resolve_type(mv.returns.type) if mv.returns is not None else None,
        )


def lower_constraints(constraints: tuple[ast.Constraint, ...]) -> ir.Constraints:
    """A field's or an input's constraints as IR (the first of each kind; the checks report repeats)."""
    if not constraints:
        return ir.Constraints()
    values: dict[str, object] = {}
    number = constraint_of(constraints, "in")
    if number is not None:
        values["minimum"], values["maximum"] = lower_range(number.range)
    length = constraint_of(constraints, "len")
    if length is not None:
        low, high = lower_range(length.range)
        values["min_length"] = int(low) if low is not None else None
        values["max_length"] = int(high) if high is not None else None
    pattern = constraint_of(constraints, "matches")
    if pattern is not None and pattern.pattern is not None:
        values["pattern"] = pattern.pattern.value
    return ir.Constraints(**values)  # type: ignore[arg-type]


def lower_machine(machine: ast.Machine, symbols: Symbols) -> ir.Machine:
    """The IR of a machine the checks found no error in."""
    return _Lowerer(machine, symbols).machine_ir()


def bound_count(count: ast.Number | ast.Name) -> int | str:
    """A bound as the IR keeps it: the number written, or the name of the input the run reads it from."""
    return count.value if isinstance(count, ast.Name) else int(count.value)
