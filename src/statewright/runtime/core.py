"""The deterministic core: everything a run decides, and nothing it does to the world.

A run is a generator (`RunCore.execute`). It renders instructions, validates outputs, evaluates guards,
applies bounds and limits, picks each transition and its cause, and builds the checkpoint record. Where it
needs the world — a model call, a verifier call, a tool call — it yields an effect (effects.py) and waits for
the result to be sent back. It reads no clock but the one it is given and draws no random numbers, so the
same inputs and the same effect results always make the same run: a durable engine can replay it.

What a run reports goes to hooks the executor attaches to the run: `emit(event, fields)` for trace events
and `save(run_id, delta)` for checkpoint records (snapshot.py).

The core is one class in several rooms: this module holds the step loop, action states, model calls,
transitions, limits, templates and the run's end; agent_steps.py an agent's step and its tool calls;
person.py the states that ask a person; fanout.py parallel states and maps. What every run of a machine
shares is its MachinePlan (plan.py); what one run has done is its Run (run_state.py).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

from .agent_steps import AgentSteps
from .approvals import ApprovalSteps
from .bounds import bound_text, bound_value
from .call_steps import CallSteps
from .checkpoint import CheckpointError
from .client import ModelError, ModelRequest, ModelResponse, reply_allowance
from .effects import CallModel, CallTool, EstimateCall, Paused, ToolOutcome
from .fanout import FanOut, FanOutSteps, ForkedRun, run_totals
from .inputs import InputError, InputValidator
from .person import TIMED_OUT, PersonSteps, waiting_of
from .plan import AgentPlan, EdgePlan, MachinePlan, StatePlan, exit_fields, output_label, output_text
from .rendering import TemplateDeadlineExceeded, TemplateRenderError
from .result import Failure, RunFailed, RunResult, Usage
from .run_state import Run, Steps
from .snapshot import Snapshot, SnapshotError, make_delta, new_memories, revive_run
from .spec import Scope
from .structured import ReplyError, to_jsonable, to_text, validate_typed
from .untrusted import shown_within_limits
from .variables import update_variables
from .verifier import Verdict, parse_verdict, verdict_schema, verifier_messages

NEUTRAL_RETRY = "Your previous answer to this step did not let the run move on. Do this step again, better."
# failures that leave the last checkpoint as it was, so that resuming the run retries the step
RETRYABLE_FAILURES = ("model", "script")

# A run's generator: yields effects, is sent their results, returns the RunResult.
RunSteps = Generator[Any, Any, RunResult]
# ---- the core ------------------------------------------------------------------------------------


class RunCore(AgentSteps, ApprovalSteps, CallSteps, FanOutSteps, PersonSteps):
    """Runs of one machine, as generators of effects. One core serves any number of concurrent runs: all a
    run's state is in its Run; what every run of the machine shares is its MachinePlan (plan.py).

    `clock()` returns seconds on a monotonic scale (the executor's, or a durable engine's replayable one);
    it is read for the `seconds` limit and what is left of it, nothing else.
    """

    def __init__(self, plan: MachinePlan, *, clock: Callable[[], float]) -> None:
        self.plan = plan
        self.machine = plan.machine
        self.clock = clock
        self.max_tokens = plan.max_tokens
        self.templates = plan.templates
        self.inputs = InputValidator()
        self._plans = plan.states
        self._verifier_model = plan.verifier_model
        self._limits = plan.limits
        self._usage_limited = plan.usage_limited
        self._budget_limited = plan.budget_limited
        self._state_names = plan.state_names
        self._variable_names = tuple(plan.variables.specs)
        self.callee_cores: dict[str, RunCore] = {}  # the cores of the machines this one runs, made on first use

    def core_for(self, plan: MachinePlan) -> RunCore:
        """A core for another machine's plan, on this core's clock (a machine this one runs)."""
        return RunCore(plan, clock=self.clock)

    # -- starting and resuming ---------------------------------------------------------------------

    def start(self, run_id: str, inputs: Mapping[str, Any], workspace: str) -> Run:
        """A new run at the start state. Raises InputError when the inputs do not fit the declarations."""
        run = Run(run_id, self.inputs.prepare(self.machine, inputs), self.machine.start, workspace, self.clock())
        new_memories(self.plan, run, {})
        if self.plan.variables:
            run.vars = self.plan.variables.initial()
        return run

    def begin(self, run: Run, resumed: bool) -> None:
        """Announce the run (trace) and, for a new run, write its first checkpoint."""
        self._emit_start(run, resumed)
        if not resumed:
            self._save(run, "running")

    def restore(self, run_id: str, snapshot: Snapshot, workspace: str) -> Run | RunResult:
        """The run a checkpoint snapshot describes; its RunResult when it had already ended.

        Raises CheckpointError when the snapshot belongs to another machine or another version of it, or
        does not fit this machine (a damaged checkpoint, which cannot be resumed)."""
        head = snapshot.head
        if head.machine != self.machine.name:
            raise CheckpointError(f"run '{run_id}' belongs to machine '{head.machine}', not '{self.machine.name}'")
        if head.source_sha256 != self.machine.source_sha256:
            raise CheckpointError(
                f"run '{run_id}' was started by a different version of machine '{self.machine.name}' "
                f"(source sha256 {head.source_sha256[:12] or '-'} vs "
                f"{self.machine.source_sha256[:12] or '-'}); resume it with the machine it started with")
        try:
            run = self.revive_child(run_id, snapshot, workspace)
        except (SnapshotError, ValueError) as exc:
            raise CheckpointError(f"the checkpoint of run '{run_id}' is damaged: {exc}. It cannot be resumed; "
                                  "start the run again under a new id") from None
        if head.status in ("final", "failed"):
            return self._result(run, head.status, head.final_state, head.result, head.failure)
        return run

    def revive_child(self, run_id: str, snapshot: Snapshot, workspace: str) -> Run:
        """The run a snapshot describes, with the branches and calls it had under way (SnapshotError or
        ValueError when it does not fit this machine)."""
        if snapshot.head.machine != self.machine.name:
            raise SnapshotError(f"a call of machine '{self.machine.name}' holds a run of '{snapshot.head.machine}'")
        try:
            inputs = self.inputs.prepare(self.machine, snapshot.inputs)  # typed inputs come back as their types
        except InputError:
            inputs = dict(snapshot.inputs)
        run = revive_run(self.plan, run_id, snapshot, workspace, self.clock(), inputs)
        head = snapshot.head
        run.fanout = FanOut.from_record(self.machine, head.fanout) if head.fanout is not None else None
        self.revive_calls(run, snapshot, workspace)
        return run

    # -- running ------------------------------------------------------------------------------------

    def execute(self, run: Run) -> RunSteps:
        """The run from its current state to a final state or a typed failure, as a generator of effects."""
        try:
            return (yield from self._steps(run))
        except RunFailed as exc:
            if exc.owner is not None and exc.owner is not run:
                raise  # a limit of a run that called this one: that run ends
            return self._fail(run, exc.failure)
        except Paused:
            return self._pause(run)

    def _steps(self, run: Run) -> RunSteps:
        """The step loop: a state entered, its work done, its output recorded, a transition fired (and the
        checkpoint saved), until a final state. Its work is dispatched here, not in a generator of its own:
        this is the run's innermost loop, and a generator between it and each step would put one more frame
        on every effect a step yields (bench/overhead.py)."""
        plans = self._plans
        while True:
            plan = plans[run.state]
            if not plan.works:
                return self._finish(run, plan, entered=False)
            visit = self._enter(run, plan)
            feedback = run.feedback
            run.feedback = None
            step = plan.step
            if step == "agent":
                output, instruction = yield from self._agent_step(run, plan, feedback)
            elif step == "parallel":
                output, instruction = (yield from self._parallel_step(run, plan, feedback)), None
            elif step == "map":
                output, instruction = (yield from self._map_step(run, plan, feedback)), None
            elif step == "human":
                answered = yield from self._person_step(run, plan)
                if answered is TIMED_OUT:
                    self._no_answer_in_time(run, plan)
                    continue
                output, instruction = answered
            elif step == "call":
                output, instruction = (yield from self._call_step(run, plan)), None
            else:
                output, instruction = (yield from self._action_step(run, plan)), None
            self._record(run, plan, visit, output)
            if plan.final:
                return self._finish(run, plan, entered=True)
            if plan.direct is not None:
                self._fire_direct(run, plan)
            else:
                yield from self._transition(run, plan, output, instruction)
            if run.changed is not None:
                self._save(run, "running")

    def _enter(self, run: Run, plan: StatePlan) -> int:
        """Enter the state (limits checked, visit counted, `state_enter`): its visit. A run resumed while
        waiting for a person — for an answer or to approve a tool call —, while its branches ran or while it
        ran another machine is inside its step."""
        name = plan.name
        if run.waiting is not None or run.fanout is not None or run.calls or name in run.approvals:
            return run.visits.get(name, 0)
        self._check_limits(run, name, True)
        run.steps += 1
        visit = run.visits.get(name, 0) + 1
        run.visits[name] = visit
        run.path.append(name)
        run.context_cache = None
        if run.changed is not None:
            run.changed["visits"].add(name)
        if run.events:
            run.emit("state_enter", {"state": name, "visit": visit})
        return visit

    def _no_answer_in_time(self, run: Run, plan: StatePlan) -> None:
        """A person gave no answer in time: the state is left by its timeout edge, with no output."""
        assert plan.timeout is not None
        if run.events:
            run.emit("state_exit", {"state": plan.name})
        run.last_state = plan.name
        self._fire(run, plan, plan.timeout, "timeout", "no answer in time", None)
        self._save(run, "running")

    def _record(self, run: Run, plan: StatePlan, visit: int, output: Any) -> None:
        """The state's output kept (`state_exit`), the run variables it updates updated, and the output told
        to the agents that listen to it."""
        name = plan.name
        run.outputs[name] = output
        if run.observe is not None:
            run.observe("output", name, visit, output)
        if run.changed is not None:
            run.changed["outputs"].add(name)
        run.last_state = name
        run.context_cache = None
        if run.events:
            run.emit("state_exit", exit_fields(run, plan, output))
        if plan.updates and plan.step != "map":  # (a map's updates are its elements')
            update_variables(self.plan.variables, run, name, plan.updates, output)
        if plan.tell:
            text = output_text(plan, output)
            for listener in plan.tell:
                run.memories[listener].hear(name, text)

    # -- a step -----------------------------------------------------------------------------------

    def _action_step(self, run: Run, plan: StatePlan) -> Steps:
        call = plan.spec.call
        name = plan.name
        if call is None:
            raise RunFailed(Failure("tool", f"state '{name}' has neither an agent nor a tool call",
                                    state=name, origin=plan.spec.origin))
        seq = run.seqs.get(plan.tool_key, 0)
        run.seqs[plan.tool_key] = seq + 1
        run.count("seqs", plan.tool_key)
        scope = Scope(run.outputs.get(run.last_state) if run.last_state else None, run.inputs, run.outputs,
                      run.visits, run.locals or {}, run.vars)
        try:
            args = call.args(scope)
        except Exception as exc:  # noqa: BLE001 - reported as the step's failure
            raise RunFailed(Failure("tool", f"state '{name}': the arguments of {call.tool}(...) could not "
                                            f"be computed: {exc}", state=name, origin=call.origin)) from None
        try:
            outcome: ToolOutcome = yield CallTool(name, call.tool, args, seq, item=run.item, call=run.call_path,
                                                  machine=self.machine)
        except Exception as exc:  # noqa: BLE001 - tools raise ToolError; anything else is the tool's too
            if getattr(exc, "scripted", False):  # the test's script has no result for this call
                raise RunFailed(Failure("script", f"state '{name}': {exc}", state=name)) from None
            self._emit_tool(run, name, call.tool, False, getattr(exc, "latency_ms", 0.0), args, None, str(exc),
                            False)
            raise RunFailed(Failure("tool", f"state '{name}': tool {call.tool} failed: {exc}",
                                    state=name, origin=call.origin)) from None
        result = outcome.value
        self._emit_tool(run, name, call.tool, True, outcome.latency_ms, args, result, None, outcome.scripted)
        if plan.output is not None:
            try:
                result = validate_typed(plan.output, result, plan.wrapped)
            except ValueError as exc:
                raise RunFailed(Failure("tool", f"state '{name}': the result of {call.tool} does not fit "
                                                f"{output_label(plan)}: {exc}", state=name,
                                        origin=call.origin)) from None
        return result

    def _emit_tool(self, run: Run, state: str, tool: str, ok: bool, latency: float, args: Any, result: Any,
                   error: str | None, scripted: bool) -> None:
        if not run.events:
            return
        fields: dict[str, Any] = {"state": state, "tool": tool, "ok": ok, "latency_ms": latency}
        if scripted:
            fields["scripted"] = True
        if error is not None:
            fields["error"] = error
        if run.content:
            fields["args"] = args
            if ok:
                fields["result"] = result
        run.emit("tool_call", fields)

    # -- model calls -------------------------------------------------------------------------------

    def _call_model(self, run: Run, role: str, state: str, key: str, agent: AgentPlan | None,
                    messages: list[dict[str, Any]], schema: dict[str, Any] | None, schema_name: str,
                    tools: list[dict[str, Any]] | None) -> Steps:
        if self._usage_limited or run.caller is not None or type(run) is not Run:  # (else nothing to check)
            self._check_limits(run, state, False)
        seq = run.seqs.get(key, 0)
        run.seqs[key] = seq + 1
        if run.changed is not None:
            run.changed["seqs"].add(key)
        if agent is not None:
            model, fallbacks, temperature = agent.model, agent.fallbacks, agent.temperature
        else:
            model, fallbacks, temperature = self._verifier_model, (), 0.0
        identity = {"run_id": run.run_id, "state": state, "role": role, "seq": seq,
                    "agent": agent.name if agent is not None else None}
        if run.item is not None:
            identity["item"] = run.item
        if run.call_path:
            identity["call"] = run.call_path
        timeout = None
        if self._limits.seconds is not None:  # the call's deadline: what is left of the run's time
            timeout = max(self._limits.seconds - self._elapsed(run), 0.0)
        # (positional: a call is made on every step, and keywords cost twice as much here)
        request = ModelRequest(role, state, model, messages, temperature, schema, schema_name, tools, fallbacks,
                               timeout, self.max_tokens, {"statewright": identity})
        if self._budget_limited or (run.caller is not None and self._callers_budgeted(run)):
            estimate = yield EstimateCall(request)
            self._check_budget(run, request, estimate)
            if isinstance(run, ForkedRun):
                run.reserved = estimate
        try:
            response: ModelResponse = yield CallModel(request)
        except ModelError as exc:
            if isinstance(run, ForkedRun):
                run.reserved = (0, 0.0)
            spent_prompt, spent_completion, spent_usd = getattr(exc, "spent", (0, 0, 0.0))
            run.usage.prompt_tokens += spent_prompt  # replies received and thrown away count all the same
            run.usage.completion_tokens += spent_completion
            run.usage.cost_usd += spent_usd
            if run.events:
                run.emit("llm_error", {"role": role, "state": state, "agent": agent.name if agent else None,
                                       "model": model, "call_index": seq, "error": str(exc),
                                       "attempts": exc.attempts, "events": getattr(exc, "events", [])})
            limit = getattr(exc, "limit", None)
            if limit is not None:  # the run's own time ran out during the call
                raise RunFailed(Failure("limit", f"limit {limit} exhausted during a model call in state "
                                                 f"'{state}': {exc}", state=state, limit=limit)) from None
            kind = "script" if getattr(exc, "scripted", False) else "model"
            raise RunFailed(Failure(kind, f"state '{state}': {exc}", state=state)) from None
        if isinstance(run, ForkedRun):
            run.reserved = (0, 0.0)
        usage = run.usage
        usage.prompt_tokens += response.prompt_tokens
        usage.completion_tokens += response.completion_tokens
        usage.cost_usd += response.cost_usd
        usage.llm_calls += 1
        if run.events:
            self._emit_call(run, request, response, agent, seq)
        return response

    def _emit_call(self, run: Run, request: ModelRequest, response: ModelResponse, agent: AgentPlan | None,
                   seq: int) -> None:
        fields: dict[str, Any] = {
            "role": request.role, "state": request.state, "agent": agent.name if agent else None,
            "model": response.model or request.model, "call_index": seq,
            "prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens,
            "cost_usd": response.cost_usd, "latency_ms": response.latency_ms, "attempts": response.attempts,
        }
        if run.item is not None:
            fields["item"] = run.item
        if response.model and response.model != request.model:
            fields["request_model"] = request.model  # a fallback answered
        if response.finish_reason:
            fields["finish_reason"] = response.finish_reason
        if response.events:
            fields["events"] = response.events
        if run.content:
            # a copy: the agent's tool loop appends to its conversation, and a branch's or an element's
            # events are written at the join
            fields["messages"] = list(request.messages)
            reply: dict[str, Any] = {"content": response.content}
            if response.tool_calls:
                reply["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                       for c in response.tool_calls]
            fields["reply"] = reply
        run.emit("llm_call", fields)

    # -- transitions -------------------------------------------------------------------------------

    def _fire_direct(self, run: Run, plan: StatePlan) -> None:
        target = plan.direct
        assert target is not None
        if run.visits.get(target, 0):
            run.feedback = plan.back_here
        if plan.direct_resets:
            self._arrive(run, target)
        else:  # (no `stay ... per visit` at the target to start afresh)
            run.state = target
        if run.events:
            run.emit("transition", {"from": plan.name, "to": target, "cause": "unconditional", "reason": "",
                                    "index": 0})

    def _arrive(self, run: Run, target: str) -> None:
        """The run moves to `target` by any transition but a stay: a new visit there begins."""
        run.state = target
        for key in self._plans[target].visit_edges:
            if run.edges.get(key):
                run.edges[key] = 0
                run.count("edges", key)

    def _transition(self, run: Run, plan: StatePlan, output: Any, instruction: str | None) -> Steps:
        """Evaluate the state's transitions in source order and move to the first that fires."""
        edges = plan.edges
        count = len(edges)
        scope = None
        verdict_feedback = ""
        skipped = 0
        i = 0
        while i < count:
            edge = edges[i]
            if edge.kind == "condition":
                group_end = i + 1
                while group_end < count and edges[group_end].kind == "condition":
                    group_end += 1
                enabled = [e for e in edges[i:group_end] if self._enabled(run, plan, e)]
                skipped += group_end - i - len(enabled)
                if enabled:
                    verdict = yield from self._judge(run, plan, instruction, output, enabled)
                    if verdict.choice is not None:
                        self._fire(run, plan, enabled[verdict.choice], "verifier", verdict.reason, verdict)
                        return
                    verdict_feedback = verdict.feedback or verdict_feedback
                i = group_end
                continue
            i += 1
            kind = edge.kind
            if kind == "timeout":
                continue  # taken only when a person does not answer (see _steps)
            if not self._enabled(run, plan, edge):
                skipped += 1
                continue
            if kind == "guard":
                if scope is None:
                    scope = Scope(output, run.inputs, run.outputs, run.visits, {}, run.vars)
                if self._evaluate_guard(run, plan, edge, scope):
                    self._fire(run, plan, edge, "guard", f"`{edge.text}` is true", None)
                    return
            elif kind == "always":
                self._fire(run, plan, edge, "unconditional", "", None)
                return
            elif kind == "otherwise":
                self._fire(run, plan, edge, "otherwise", "", None)
                return
            elif kind == "stay":
                self._fire(run, plan, edge, "stay", verdict_feedback, None)
                return
        if skipped:
            message = (f"state '{plan.name}': no transition can fire — {skipped} of {count} are exhausted "
                       "by their bounds (`max` on the edge or `visits` on its target) and none of the others "
                       "matched")
        else:
            message = f"state '{plan.name}': no transition matched its output"
        raise RunFailed(Failure("bound", message, state=plan.name, origin=plan.spec.origin))

    def _enabled(self, run: Run, plan: StatePlan, edge: EdgePlan) -> bool:
        most = bound_value(edge.max, run.inputs)
        visits = bound_value(edge.target_visits, run.inputs)
        if most is not None and run.edges.get(edge.key, 0) >= most:
            bound = bound_text("max", edge.max, run.inputs) + (" per visit" if edge.key in plan.visit_edges else "")
        elif visits is not None and run.visits.get(edge.target, 0) >= visits:
            bound = bound_text("visits", edge.target_visits, run.inputs)
        else:
            return True
        if run.events:
            run.emit("bound_skip", {"state": plan.name, "index": edge.index, "to": edge.target, "bound": bound})
        return False

    def _evaluate_guard(self, run: Run, plan: StatePlan, edge: EdgePlan, scope: Scope) -> bool:
        if edge.guard is None:
            raise RunFailed(Failure("guard", f"state '{plan.name}': the guard `{edge.text}` has no code",
                                    state=plan.name, origin=edge.origin))
        try:
            value = bool(edge.guard(scope))
        except RunFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - a guard that cannot be evaluated is a typed failure
            raise RunFailed(Failure("guard", f"state '{plan.name}': the guard `{edge.text}` could not be "
                                             f"evaluated: {type(exc).__name__}: {exc}",
                                    state=plan.name, origin=edge.origin)) from None
        if run.events:
            run.emit("guard", {"state": plan.name, "index": edge.index, "text": edge.text, "value": value})
        return value

    def _fire(self, run: Run, plan: StatePlan, edge: EdgePlan, cause: str, reason: str,
              verdict: Verdict | None) -> None:
        if edge.max is not None:
            run.edges[edge.key] = run.edges.get(edge.key, 0) + 1
            run.count("edges", edge.key)
        target = edge.target
        if cause == "stay":
            run.feedback = (self.plan.without_conditions(f"Do this step again. Feedback on your previous answer: "
                                                     f"{reason}") if reason else NEUTRAL_RETRY)
        elif run.visits.get(target, 0):
            if verdict is not None:
                parts = ["This step is being done again."]
                if verdict.reason:
                    parts.append(f"Reason: {verdict.reason}")
                if verdict.feedback:
                    parts.append(f"Feedback: {verdict.feedback}")
                if len(parts) == 1:
                    parts.append(f"State '{plan.name}' sent the run back here.")
                run.feedback = self.plan.without_conditions("\n".join(parts))
            else:
                run.feedback = plan.back_here
        if cause == "stay":
            run.state = target
        else:
            self._arrive(run, target)
        if run.events:
            run.emit("transition", {"from": plan.name, "to": target, "cause": cause, "reason": reason,
                                    "index": edge.index})

    def _judge(self, run: Run, plan: StatePlan, instruction: str | None, output: Any,
               edges: list[EdgePlan]) -> Steps:
        conditions = [e.text for e in edges]
        if instruction is None:
            call, parallel, each = plan.spec.call, plan.spec.parallel, plan.spec.each
            if parallel is not None:
                instruction = (f"(branches {', '.join(parallel.branches)} ran at the same time; the output lists "
                               "the outputs of those joined)")
            elif each is not None:
                instruction = f"(a step ran once for each element of a list, {each.text}; the output lists them)"
            else:
                instruction = f"(an automated step: the tool {call.tool} was called)" if call else ""
        messages = verifier_messages(instruction, to_text(output), conditions)
        schema = verdict_schema(conditions)
        try:
            verdict, _response = yield from self._ask_until_valid(
                run, plan, "verifier", messages, lambda text: parse_verdict(text, conditions),
                lambda conversation, _attempt: self._call_model(run, "verifier", plan.name, plan.verifier_key,
                                                                None, conversation, schema, "verdict", None))
        except ReplyError as exc:
            raise RunFailed(Failure(
                "output", f"state '{plan.name}': the verifier's answer was unusable after {exc.attempts} "
                          f"attempt(s); last error: {exc.last_error}", state=plan.name,
                origin=edges[0].origin)) from None
        if run.events:
            choice = conditions[verdict.choice] if verdict.choice is not None else "none"
            run.emit("verdict", {"state": plan.name, "conditions": conditions, "choice": choice,
                                 "reason": verdict.reason, "feedback": verdict.feedback})
        return verdict

    # -- limits ------------------------------------------------------------------------------------

    def _elapsed(self, run: Run) -> float:
        return run.elapsed_before + (self.clock() - run.started)

    def _check_limits(self, run: Run, state: str, before_step: bool) -> None:
        if run.caller is None and not run.calls and type(run) is Run:  # the common case, checked at once
            if before_step and run.steps >= self._limits.steps:
                self._limit_reached(state, "steps", f"the run reached its limit of {self._limits.steps} steps")
            if not self._usage_limited:
                return
        self._check_own_limits(run, state, before_step)
        if run.caller is not None:  # a machine another one runs: the callers' limits count what it does
            self._check_callers(run, lambda core, caller: core._check_own_limits(caller, caller.state, before_step))

    def _check_own_limits(self, run: Run, state: str, before_step: bool) -> None:
        limits = self._limits
        if run.calls or type(run) is not Run:  # every branch's and call's steps and usage, while they run
            steps, usage, _ = run_totals(run)
        else:
            steps, usage = run.steps, run.usage
        if before_step and steps >= limits.steps:
            self._limit_reached(state, "steps", f"the run reached its limit of {limits.steps} steps")
        if not self._usage_limited:
            return
        if limits.tokens is not None and usage.prompt_tokens + usage.completion_tokens >= limits.tokens:
            self._limit_reached(state, "tokens", f"the run used {usage.tokens} tokens; its limit is "
                                                 f"{limits.tokens}")
        if limits.cost_usd is not None and usage.cost_usd >= limits.cost_usd:
            self._limit_reached(state, "cost_usd", f"the run cost ${usage.cost_usd:.4f}; its limit is "
                                                   f"${limits.cost_usd:.4f}")
        if limits.seconds is not None:
            elapsed = self._elapsed(run)
            if elapsed >= limits.seconds:
                self._limit_reached(state, "seconds", f"the run took {elapsed:.1f} s; its limit is "
                                                      f"{limits.seconds:g} s")

    def _check_budget(self, run: Run, request: ModelRequest, estimate: tuple[int, float]) -> None:
        """Refuse a call whose estimate would take the run past its `tokens` or `cost_usd` limit.

        The estimate (tokens, cost_usd) counts the prompt plus the reply allowance (`max_tokens`, when the
        run sets one); the executor asks the model client for it (client.py: CallEstimator)."""
        self._check_own_budget(run, request.state, request, estimate)
        if run.caller is not None:
            self._check_callers(run, lambda core, caller: core._check_own_budget(caller, caller.state, request,
                                                                                estimate))

    def _check_own_budget(self, run: Run, state: str, request: ModelRequest, estimate: tuple[int, float]) -> None:
        tokens, cost = estimate
        limits = self._limits
        _steps, usage, (reserved_tokens, reserved_cost) = run_totals(run)
        # the calls other branches have in flight count at their estimates until they are answered
        usage = Usage(usage.prompt_tokens + reserved_tokens, usage.completion_tokens, usage.cost_usd + reserved_cost,
                      usage.llm_calls)
        if limits.tokens is not None and usage.tokens + tokens > limits.tokens:
            allowance = reply_allowance(request)
            self._budget_exceeded(state, "tokens", f"the run used {usage.tokens} tokens and the call is "
                                                   f"estimated at {tokens} ({tokens - allowance} prompt + "
                                                   f"{allowance} reply allowance); its limit is {limits.tokens}")
        if limits.cost_usd is not None and usage.cost_usd + cost > limits.cost_usd:
            self._budget_exceeded(state, "cost_usd", f"the run cost ${usage.cost_usd:.4f} and the call is "
                                                     f"estimated at ${cost:.4f} ({tokens} tokens of "
                                                     f"{request.model}); its limit is ${limits.cost_usd:.4f}")

    def _budget_exceeded(self, state: str, limit: str, message: str) -> None:
        raise RunFailed(Failure("limit", f"limit {limit} would be exceeded by the next model call in state "
                                         f"'{state}': {message}", state=state, limit=limit))

    def _limit_reached(self, state: str, limit: str, message: str) -> None:
        where = "before the next model call" if limit != "steps" else "before the next step"
        raise RunFailed(Failure("limit", f"limit {limit} exhausted {where} in state '{state}': {message}",
                                state=state, limit=limit))

    # -- templates ---------------------------------------------------------------------------------

    def _context(self, run: Run) -> dict[str, Any]:
        context = run.context_cache
        if context is None:
            context = dict(run.inputs)
            outputs, visits = run.outputs, run.visits
            for name in self._state_names:
                context[name] = {"output": outputs.get(name), "visits": visits.get(name, 0)}
            variables = run.vars
            for name in self._variable_names:  # (a branch's view holds its own updates over the run's)
                context[name] = variables[name]
            if run.locals:  # a map's element and position, in that element's step
                context.update(run.locals)
            run.context_cache = context
        return context

    def _render(self, run: Run, source: str, state: str, context: Mapping[str, Any] | None = None) -> str:
        templates = self.templates
        if templates.is_constant(source):
            return source
        # a template renders within what is left of the run's time (the renderer keeps its own clock)
        seconds = None
        if self.plan.render_deadlines:  # (on a durable engine the only clock is the engine's: see MachinePlan)
            seconds = max(self._limits.seconds - self._elapsed(run), 0.0)  # type: ignore[operator]
        try:
            return templates.render(source, self._context(run) if context is None else context, seconds=seconds)
        except TemplateDeadlineExceeded as exc:
            raise RunFailed(Failure("limit", f"limit seconds exhausted while rendering a template in state "
                                             f"'{state}': {exc}", state=state, limit="seconds",
                                    origin=self.machine.states[state].origin)) from None
        except TemplateRenderError as exc:
            raise RunFailed(Failure("template", f"state '{state}': {exc}", state=state,
                                    origin=self.machine.states[state].origin)) from None

    # -- ending ------------------------------------------------------------------------------------

    def _finish(self, run: Run, plan: StatePlan, *, entered: bool) -> RunResult:
        """End the run in final state `plan`; `entered` when the state has already done its work."""
        name = plan.name
        if not entered:
            run.visits[name] = run.visits.get(name, 0) + 1
            run.count("visits", name)
            run.path.append(name)
            run.context_cache = None
            if run.events:
                run.emit("state_enter", {"state": name, "visit": run.visits[name]})
        run.state = name
        spec = plan.spec
        if spec.fail is not None:
            failure = Failure("final", self._render(run, spec.fail, name), state=name, origin=spec.origin)
            self._save(run, "failed", final_state=name, failure=failure)
            if run.events:
                if not entered:
                    run.emit("state_exit", {"state": name})
                self._emit_end(run, "failed", name, failure)
            return self._result(run, "failed", name, None, failure)
        if spec.result is not None:
            result: Any = self._render(run, spec.result, name)
        else:
            result = to_jsonable(run.outputs.get(run.last_state)) if run.last_state else None
        self._save(run, "final", result=result, final_state=name)
        if run.events:
            if not entered:
                run.emit("state_exit", {"state": name})
            self._emit_end(run, "final", name, None)
        return self._result(run, "final", name, result, None)

    def _pause(self, run: Run) -> RunResult:
        """The run waits for a person — its own question, or one a machine it runs asks: checkpointed as
        "waiting", resumed by giving the answer."""
        waiting = run.waiting
        self._save(run, "waiting")
        if run.events:
            if waiting is not None:  # (a machine it runs announced its own question)
                fields: dict[str, Any] = {"state": waiting.state, "deadline": waiting.deadline}
                if run.content:
                    fields["question"] = waiting.question
                run.emit("waiting", fields)
            for approval in run.approvals.values():  # tool calls of its agents that wait for approval
                fields = {"state": approval.state, "kind": "approval", "tool": approval.tool, "deadline": None}
                if approval.item is not None:
                    fields["item"] = approval.item
                if run.content:
                    fields["question"] = approval.question
                    fields["arguments"] = approval.arguments
                run.emit("waiting", fields)
            self._emit_end(run, "waiting", None, None)
        return self._result(run, "waiting", None, None, None)

    def _fail(self, run: Run, failure: Failure) -> RunResult:
        if run.events and failure.kind in ("limit", "bound"):
            run.emit("transition", {"from": failure.state or run.state, "to": None, "cause": failure.kind,
                                    "reason": failure.message})
        if failure.kind not in RETRYABLE_FAILURES and failure.kind != "input":
            self._save(run, "failed", failure=failure)
        if run.events:
            self._emit_end(run, "failed", None, failure)
        return self._result(run, "failed", None, None, failure)

    def fail_input(self, run_id: str, inputs: Mapping[str, Any], workspace: str, failure: Failure,
                   emit: Callable[[str, dict[str, Any]], None] | None) -> RunResult:
        """The result of a run whose inputs are invalid: announced and ended in the trace, never saved."""
        run = Run(run_id, {}, self.machine.start, workspace, self.clock())
        run.inputs_json = to_jsonable(shown_within_limits(dict(inputs)))  # a refused value is not written
        run.listen(emit)
        self._emit_start(run, resumed=False)
        return self._fail(run, failure)

    def _result(self, run: Run, status: str, final_state: str | None, result: Any,
                failure: Failure | None) -> RunResult:
        _steps, usage, _ = run_totals(run)  # (a run that waits inside a call counts what the call did so far)
        waits = []
        if status == "waiting":
            waits = [waiting_of(where, q, core.answer_schema(plan)) for where, q, plan, core in self.waits(run)]
        return RunResult(status=status, run_id=run.run_id, machine=self.machine.name, final_state=final_state,
                         result=result, path=list(run.path), outputs=dict(run.outputs), failure=failure,
                         usage=Usage(usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                                     usage.llm_calls), workspace=run.workspace,
                         waiting=waits[0] if waits else None, waits=waits,
                         variables={name: to_jsonable(value) for name, value in run.vars.items()})

    def _emit_start(self, run: Run, resumed: bool) -> None:
        if run.events:
            fields: dict[str, Any] = {"run_id": run.run_id, "machine": self.machine.name,
                                      "inputs": run.inputs_json, "workspace": run.workspace}
            if resumed:
                fields.update(resumed=True, state=run.state, steps=run.steps)
            run.emit("run_start", fields)

    def _emit_end(self, run: Run, status: str, final_state: str | None, failure: Failure | None) -> None:
        steps, usage, _ = run_totals(run)
        run.emit("run_end", {"run_id": run.run_id, "status": status, "final_state": final_state,
                             "failure": failure.to_json() if failure else None, "usage": usage.to_json(),
                             "steps": steps, "path": run.path, "seconds": round(self._elapsed(run), 3)})

    # -- checkpoints -------------------------------------------------------------------------------

    def _save(self, run: Run, status: str, *, result: Any = None, final_state: str | None = None,
              failure: Failure | None = None) -> None:
        """Hand the checkpoint record to the run's `save` hook: the head, and only what changed since the last
        save (snapshot.py)."""
        if run.changed is None:
            return
        run.save(run.run_id, make_delta(self.plan, run, status, self._elapsed(run), result=result,
                                        final_state=final_state, failure=failure))
