"""The execution engine: runs a machine step by step, exactly as the language's semantics say.

One step: enter a state, do its work (an agent's model call, or an action's tool call), deliver its
output to listeners, evaluate its transitions in source order, commit a checkpoint. Limits are checked
before every step and every model call, and a call whose estimate would exceed the `tokens` or `cost_usd`
budget is not made; every decision goes into the trace with its cause.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .checkpoint import CheckpointError, CheckpointStore
from .client import ModelClient, ModelError, ModelRequest, ModelResponse, reply_allowance, rough_call_estimate
from .memory import AgentMemory
from .result import Failure, RunFailed, RunResult, Usage
from .spec import AgentSpec, InputSpec, MachineSpec, Scope, StateSpec
from .structured import ReplyError, ask_until_valid, parse_typed_reply, to_jsonable, to_text, validate_typed
from .templates import TemplateRenderError, is_constant, render_template
from .trace import Trace
from .verifier import Verdict, parse_verdict, verdict_schema, verifier_messages

MAX_TOOL_ROUNDS = 8
SNAPSHOT_VERSION = 1
NEUTRAL_RETRY = "Your previous answer to this step did not let the run move on. Do this step again, better."
# failures that leave the last checkpoint as it was, so that resuming the run retries the step
RETRYABLE_FAILURES = ("model", "script")
# where a run's tools work when no workspace is given: a fresh directory per run, under the current one
DEFAULT_WORKSPACE_ROOT = os.path.join(".statewright", "runs")


def default_workspace(run_id: str) -> str:
    """`.statewright/runs/<run_id>/workspace` under the current directory, as an absolute path.

    A run id is only a name here: characters that could leave the runs directory are replaced."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id).strip(".") or "run"
    return os.path.abspath(os.path.join(DEFAULT_WORKSPACE_ROOT, safe, "workspace"))


# ---- inputs --------------------------------------------------------------------------------------


class InputError(ValueError):
    """The inputs given to a run do not match the machine's `input` declarations."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


_engine_adapters: dict[Any, Any] = {}


def validate_input(spec: InputSpec, value: Any) -> Any:
    """`value` checked (and coerced where pydantic's lax mode does) against the input's annotation."""
    annotation = spec.annotation
    if annotation is str and isinstance(value, str):
        return value
    if annotation is None or annotation is Any:
        return value
    try:
        adapter = _engine_adapters.get(annotation)
    except TypeError:  # an unhashable annotation: no caching
        adapter = None
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = TypeAdapter(annotation)
        try:
            _engine_adapters[annotation] = adapter
        except TypeError:
            pass
    from pydantic import ValidationError

    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ValueError(f"{first.get('msg', 'invalid value')}{' at ' + where if where else ''} "
                         f"(got {json.dumps(to_jsonable(value), ensure_ascii=False)})") from None


def prepare_inputs(machine: MachineSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """The run's inputs: given values validated, defaults filled. Raises InputError naming every problem."""
    problems = []
    known = {spec.name: spec for spec in machine.inputs}
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            listed = ", ".join(known) or "none"
            problems.append(f"unknown input '{name}' (the machine's inputs: {listed}){hint}")
    values: dict[str, Any] = {}
    for spec in machine.inputs:
        if spec.name in given:
            try:
                values[spec.name] = validate_input(spec, given[spec.name])
            except ValueError as exc:
                problems.append(f"input '{spec.name}': {exc}")
        elif spec.required:
            problems.append(f"missing required input '{spec.name}'")
        else:
            values[spec.name] = spec.default
    if problems:
        raise InputError(problems)
    return values


# ---- the machine, prepared for running -------------------------------------------------------------


class _Edge:
    """A transition with everything the hot path needs precomputed."""

    __slots__ = ("guard", "index", "key", "kind", "max", "origin", "target", "target_visits", "text")

    def __init__(self, state: str, index: int, spec: Any, target_visits: int | None) -> None:
        self.index = index
        self.kind = spec.kind
        self.target = spec.target
        self.guard = spec.guard
        self.text = spec.text
        self.max = spec.max
        self.origin = spec.origin
        self.target_visits = target_visits
        self.key = f"{state}:{index}"


class _AgentPlan:
    __slots__ = ("fallbacks", "model", "name", "prompt", "spec", "temperature", "tools")

    def __init__(self, spec: AgentSpec, machine: MachineSpec, map_model: Callable[[str], str]) -> None:
        self.name = spec.name
        self.spec = spec
        self.model = map_model(spec.model or machine.model)
        self.fallbacks = tuple(map_model(m) for m in spec.fallbacks)
        self.temperature = spec.temperature if spec.temperature is not None else machine.temperature
        self.prompt = spec.prompt
        self.tools = spec.tools


class _StatePlan:
    __slots__ = (
        "agent",
        "agent_key",
        "direct",
        "edges",
        "final",
        "instruction",
        "instruction_constant",
        "kind",
        "name",
        "output",
        "retries",
        "schema",
        "schema_name",
        "spec",
        "tell",
        "tool_key",
        "verifier_key",
        "wrapped",
    )

    def __init__(self, spec: StateSpec, machine: MachineSpec, agents: Mapping[str, _AgentPlan]) -> None:
        self.name = spec.name
        self.spec = spec
        self.kind = spec.kind
        self.final = spec.kind == "final"
        self.agent = agents[spec.agent] if spec.agent else None
        self.instruction = spec.instruction or ""
        self.instruction_constant = is_constant(self.instruction)
        self.output = spec.output
        self.wrapped = spec.output_wrapped
        self.schema: dict[str, Any] | None = None
        self.schema_name = "output"
        if spec.output is not None and self.agent is not None:
            self.schema = spec.output.model_json_schema()  # type: ignore[attr-defined]
            self.schema_name = spec.output.__name__
        self.retries = spec.retries
        self.tell = tuple(name for name in spec.tell if self.agent is None or name != self.agent.name)
        self.edges = tuple(
            _Edge(spec.name, i, t, machine.states[t.target].visits if t.target in machine.states else None)
            for i, t in enumerate(spec.transitions)
        )
        # the common case — one unbounded `-> t` into an unbounded state — skips transition evaluation
        only = self.edges[0] if len(self.edges) == 1 else None
        self.direct = (only.target if only is not None and only.kind == "always" and only.max is None
                       and only.target_visits is None else None)
        self.agent_key = "agent:" + spec.name
        self.verifier_key = "verifier:" + spec.name
        self.tool_key = "tool:" + spec.name


class _Run:
    """Everything a run has done so far: what a checkpoint stores and a resume restores."""

    __slots__ = (
        "context_cache",
        "dirty",
        "edges",
        "elapsed_before",
        "feedback",
        "inputs",
        "inputs_json",
        "last_state",
        "memories",
        "outputs",
        "outputs_json",
        "path",
        "run_id",
        "seqs",
        "started",
        "state",
        "steps",
        "system_prompts",
        "usage",
        "visits",
        "workspace",
    )

    def __init__(self, run_id: str, inputs: dict[str, Any], start: str, workspace: str) -> None:
        self.run_id = run_id
        self.inputs = inputs
        self.inputs_json = to_jsonable(inputs)
        self.state = start  # the state to run next
        self.outputs: dict[str, Any] = {}
        self.outputs_json: dict[str, Any] = {}
        self.dirty: set[str] = set()  # outputs produced since the last checkpoint
        self.visits: dict[str, int] = {}
        self.edges: dict[str, int] = {}  # "state:index" -> firings, for edges with `max`
        self.seqs: dict[str, int] = {}  # "role:state" -> calls made
        self.feedback: str | None = None  # for the next state: traceback reason or `stay` feedback
        self.usage = Usage()
        self.steps = 0
        self.path: list[str] = []
        self.memories: dict[str, AgentMemory] = {}
        self.last_state: str | None = None
        self.started = time.monotonic()
        self.elapsed_before = 0.0
        self.system_prompts: dict[str, str] = {}
        self.context_cache: dict[str, Any] | None = None
        self.workspace = workspace  # the directory tools work in; created by the first step that uses tools

    def elapsed(self) -> float:
        return self.elapsed_before + (time.monotonic() - self.started)


# ---- the engine ----------------------------------------------------------------------------------


class Engine:
    """Runs one machine. `client=None` calls models through litellm (imported on the first call)."""

    def __init__(
        self,
        machine: MachineSpec,
        *,
        client: ModelClient | None = None,
        trace: Trace | None = None,
        checkpoint: CheckpointStore | None = None,
        model_map: Mapping[str, str] | None = None,
        script: Any = None,
        workspace: str | None = None,
        tools: Any = None,
        max_tokens: int | None = None,
    ) -> None:
        self.machine = machine
        self._client = client
        self.trace = trace
        self.checkpoint = checkpoint
        self.model_map = dict(model_map or {})
        self.script = script
        self.workspace = os.path.abspath(workspace) if workspace else None
        self.max_tokens = max_tokens
        self._tools = tools  # a registry the caller supplies serves every run
        self._registries: dict[str, Any] = {}  # else one per workspace, made on first use
        self._agents = {name: _AgentPlan(spec, machine, self._map_model) for name, spec in machine.agents.items()}
        self._plans = {name: _StatePlan(spec, machine, self._agents) for name, spec in machine.states.items()}
        self._verifier_model = self._map_model(machine.verifier_model or machine.model)
        self._limits = machine.limits
        self._usage_limited = any(
            v is not None for v in (machine.limits.tokens, machine.limits.cost_usd, machine.limits.seconds)
        )
        # only a machine with a budget pays for estimating each call before it is made
        self._budget_limited = machine.limits.tokens is not None or machine.limits.cost_usd is not None
        self._state_names = tuple(machine.states)
        conditions = sorted({t.text for s in machine.states.values() for t in s.transitions
                             if t.kind == "condition" and t.text.strip()}, key=len, reverse=True)
        self._conditions_pattern = (re.compile("|".join(re.escape(c) for c in conditions), re.IGNORECASE)
                                    if conditions else None)
        self._tool_schemas: dict[str, tuple[list[dict[str, Any]], dict[str, str]]] = {}

    # -- collaborators, created on first use ------------------------------------------------------

    @property
    def client(self) -> ModelClient:
        if self._client is None:
            from .litellm_client import LiteLLMClient

            self._client = LiteLLMClient()
        return self._client

    def _tool_registry(self, run: _Run) -> Any:
        if self._tools is not None:
            return self._tools
        registry = self._registries.get(run.workspace)
        if registry is None:
            from .tools import ToolRegistry

            registry = self._registries[run.workspace] = ToolRegistry(self.machine.tools, run.workspace)
        return registry

    def _map_model(self, name: str) -> str:
        mapped = self.model_map.get(name)
        if mapped is None:
            mapped = self.model_map.get("*", name)
        return mapped

    # -- running ------------------------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
            resume: bool = False) -> RunResult:
        """Run the machine to a final state or a typed failure. With `resume=True`, continue the
        checkpointed run `run_id` (its stored inputs are used; `inputs` is ignored).

        Raises CheckpointError when resuming is impossible (no store, unknown run, different machine).
        """
        if resume:
            run = self._resume(run_id)
            if isinstance(run, RunResult):
                return run
        else:
            run_id = run_id or uuid.uuid4().hex[:16]
            if self.checkpoint is not None and self.checkpoint.load(run_id) is not None:
                raise CheckpointError(f"run '{run_id}' already exists in {self.checkpoint.path}; "
                                      "resume it or choose another run id")
            workspace = self.workspace or default_workspace(run_id)
            try:
                clean = prepare_inputs(self.machine, inputs or {})
            except InputError as exc:
                run = _Run(run_id, {}, self.machine.start, workspace)
                run.inputs_json = to_jsonable(dict(inputs or {}))
                self._emit_start(run, resumed=False)
                return self._fail(run, Failure("input", str(exc)))
            run = _Run(run_id, clean, self.machine.start, workspace)
            self._new_memories(run, {})
            self._emit_start(run, resumed=False)
            self._save(run, "running")
        try:
            return self._execute(run)
        except RunFailed as exc:
            return self._fail(run, exc.failure)

    async def arun(self, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
                   resume: bool = False) -> RunResult:
        """The async face: the same engine, run in a worker thread so the event loop stays free.

        Model calls inside are synchronous; one run does one thing at a time anyway, and concurrent runs
        each get their own thread."""
        import asyncio

        return await asyncio.to_thread(self.run, inputs, run_id=run_id, resume=resume)

    def _execute(self, run: _Run) -> RunResult:
        plans = self._plans
        trace = self.trace
        store = self.checkpoint
        while True:
            plan = plans[run.state]
            name = plan.name
            if plan.final:
                return self._finish(run, plan)
            self._check_limits(run, name, True)
            run.steps += 1
            visit = run.visits.get(name, 0) + 1
            run.visits[name] = visit
            run.path.append(name)
            run.context_cache = None
            if trace is not None:
                trace.emit("state_enter", state=name, visit=visit)
            feedback = run.feedback
            run.feedback = None
            if plan.agent is not None:
                output, instruction = self._agent_step(run, plan, feedback)
            else:
                output, instruction = self._action_step(run, plan), None
            run.outputs[name] = output
            run.dirty.add(name)
            run.last_state = name
            run.context_cache = None
            if trace is not None:
                if trace.content:
                    trace.emit("state_exit", state=name, output=output)
                else:
                    trace.emit("state_exit", state=name)
            if plan.tell:
                text = to_text(output)
                for listener in plan.tell:
                    run.memories[listener].hear(name, text)
            if plan.direct is not None:
                self._fire_direct(run, plan)
            else:
                self._transition(run, plan, output, instruction)
            if store is not None:
                self._save(run, "running")

    # -- a step -----------------------------------------------------------------------------------

    def _agent_step(self, run: _Run, plan: _StatePlan, feedback: str | None) -> tuple[Any, str]:
        agent = plan.agent
        assert agent is not None
        if plan.instruction_constant:
            instruction = plan.instruction
        else:
            instruction = self._render(run, plan.instruction, plan.name, self._context(run))
        user_text = instruction if feedback is None else f"{instruction}\n\n{feedback}"
        memory = run.memories[agent.name]
        system = run.system_prompts.get(agent.name)
        if system is None:
            system = self._render(run, agent.prompt, plan.name, run.inputs)
            run.system_prompts[agent.name] = system
        messages = [{"role": "system", "content": system}, *memory.view(),
                    {"role": "user", "content": user_text}]
        if plan.output is None:
            response = self._converse(run, plan, messages)
            output: Any = response.content
            reply_text = output
        else:
            model, wrapped = plan.output, plan.wrapped
            try:
                output, _response = ask_until_valid(
                    lambda conversation: self._converse(run, plan, conversation),
                    messages,
                    lambda text: parse_typed_reply(model, wrapped, text),
                    plan.retries,
                    lambda repairs: self._emit_repair(plan.name, "agent", repairs),
                    lambda attempt, error: self._emit_reask(plan.name, "agent", attempt, error),
                )
            except ReplyError as exc:
                raise RunFailed(Failure(
                    "output",
                    f"state '{plan.name}': the reply did not match {plan.schema_name} after "
                    f"{exc.attempts} attempt(s); last error: {exc.last_error}",
                    state=plan.name, origin=plan.spec.origin,
                )) from None
            reply_text = to_text(output)
        memory.keep_exchange(user_text, reply_text)
        return output, instruction

    def _converse(self, run: _Run, plan: _StatePlan, messages: list[dict[str, Any]]) -> ModelResponse:
        """One reply of the state's agent, running the tool calls it asks for (at most MAX_TOOL_ROUNDS)."""
        agent = plan.agent
        assert agent is not None
        if not agent.tools:
            return self._call_model(run, "agent", plan.name, plan.agent_key, agent, messages, plan.schema,
                                    plan.schema_name, None)
        try:
            schemas, names = self._agent_tools(run, agent)
        except Exception as exc:  # noqa: BLE001 - ToolError, or a user tool that does not import
            raise RunFailed(Failure("tool", f"state '{plan.name}': the tools of agent '{agent.name}' are not "
                                            f"available: {exc}", state=plan.name, origin=plan.spec.origin)) from None
        conversation = list(messages)
        for _round in range(MAX_TOOL_ROUNDS + 1):
            response = self._call_model(run, "agent", plan.name, plan.agent_key, agent, conversation,
                                        plan.schema, plan.schema_name, schemas)
            if not response.tool_calls:
                return response
            if _round == MAX_TOOL_ROUNDS:
                break
            conversation.append({
                "role": "assistant",
                "content": response.content or None,
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                          "arguments": c.arguments}}
                               for c in response.tool_calls],
            })
            for call in response.tool_calls:
                conversation.append({"role": "tool", "tool_call_id": call.id,
                                     "content": self._agent_tool_call(run, plan.name, agent, names, call)})
        raise RunFailed(Failure(
            "tool", f"state '{plan.name}': agent '{agent.name}' still asked for tools after "
                    f"{MAX_TOOL_ROUNDS} rounds of tool calls", state=plan.name, origin=plan.spec.origin))

    def _agent_tools(self, run: _Run, agent: _AgentPlan) -> tuple[list[dict[str, Any]], dict[str, str]]:
        cached = self._tool_schemas.get(agent.name)
        if cached is None:
            schemas, names = [], {}
            registry = self._tool_registry(run)
            for tool in agent.tools:
                schema = registry.schema(tool)
                schemas.append(schema)
                function = schema.get("function", schema)
                names[str(function.get("name", tool))] = tool
            cached = self._tool_schemas[agent.name] = (schemas, names)
        return cached

    def _agent_tool_call(self, run: _Run, state: str, agent: _AgentPlan, names: dict[str, str],
                         call: Any) -> str:
        """Run one tool call a model asked for; any problem becomes the tool message the model reads."""
        tool = names.get(call.name) or (call.name if call.name in agent.tools else None)
        started = time.perf_counter()
        args: Any = None
        ok = False
        if tool is None:
            content = f"error: there is no tool named '{call.name}'; the tools are: {', '.join(names)}"
        else:
            try:
                args = json.loads(call.arguments or "{}")
                if not isinstance(args, dict):
                    raise ValueError("the arguments must be a JSON object")  # noqa: TRY004 - reported like bad JSON
            except ValueError as exc:
                content = f"error: the arguments are not a valid JSON object: {exc}"
            else:
                try:
                    result = self._tool_registry(run).call(tool, args)
                except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
                    content = f"error: {exc}"
                else:
                    content = to_text(result)
                    ok = True
        if self.trace is not None:
            fields: dict[str, Any] = {"state": state, "agent": agent.name, "tool": tool or call.name, "ok": ok,
                                      "latency_ms": round((time.perf_counter() - started) * 1000, 3)}
            if not ok:
                fields["error"] = content
            if self.trace.content:
                fields["args"] = args if args is not None else call.arguments
                if ok:
                    fields["result"] = content
            self.trace.emit("tool_call", **fields)
        return content

    def _action_step(self, run: _Run, plan: _StatePlan) -> Any:
        call = plan.spec.call
        name = plan.name
        if call is None:
            raise RunFailed(Failure("tool", f"state '{name}' has neither an agent nor a tool call",
                                    state=name, origin=plan.spec.origin))
        seq = run.seqs.get(plan.tool_key, 0)
        run.seqs[plan.tool_key] = seq + 1
        started = time.perf_counter()
        scripted, result = self._scripted_tool(run, name, seq)
        args: Any = None
        if not scripted:
            scope = Scope(run.outputs.get(run.last_state) if run.last_state else None, run.inputs, run.outputs,
                          run.visits)
            try:
                args = call.args(scope)
            except Exception as exc:  # noqa: BLE001 - reported as the step's failure
                raise RunFailed(Failure("tool", f"state '{name}': the arguments of {call.tool}(...) could not "
                                                f"be computed: {exc}", state=name, origin=call.origin)) from None
            try:
                result = self._tool_registry(run).call(call.tool, args)
            except Exception as exc:  # noqa: BLE001 - tools raise ToolError; anything else is the tool's too
                self._emit_tool(name, call.tool, False, started, args, None, str(exc), False)
                raise RunFailed(Failure("tool", f"state '{name}': tool {call.tool} failed: {exc}",
                                        state=name, origin=call.origin)) from None
        self._emit_tool(name, call.tool, True, started, args, result, None, scripted)
        if plan.output is not None:
            try:
                result = validate_typed(plan.output, result, plan.wrapped)
            except ValueError as exc:
                raise RunFailed(Failure("tool", f"state '{name}': the result of {call.tool} is not a valid "
                                                f"{plan.output.__name__}: {exc}", state=name,
                                        origin=call.origin)) from None
        return result

    def _scripted_tool(self, run: _Run, state: str, seq: int) -> tuple[bool, Any]:
        """A scripted result for an action state's tool, when the script speaks for it: (True, value)."""
        script = self.script
        if script is None or not script.has("tool", state):
            return False, None  # the real tool runs
        from .scripted import ScriptExhausted

        try:
            reply = script.next("tool", state, seq, run_id=run.run_id)
        except ScriptExhausted as exc:
            raise RunFailed(Failure("script", f"state '{state}': {exc}", state=state)) from None
        if reply.delay > 0:
            time.sleep(reply.delay)
        return True, reply.value

    def _emit_tool(self, state: str, tool: str, ok: bool, started: float, args: Any, result: Any,
                   error: str | None, scripted: bool) -> None:
        if self.trace is None:
            return
        fields: dict[str, Any] = {"state": state, "tool": tool, "ok": ok,
                                  "latency_ms": round((time.perf_counter() - started) * 1000, 3)}
        if scripted:
            fields["scripted"] = True
        if error is not None:
            fields["error"] = error
        if self.trace.content:
            fields["args"] = args
            if ok:
                fields["result"] = result
        self.trace.emit("tool_call", **fields)

    # -- model calls -------------------------------------------------------------------------------

    def _call_model(self, run: _Run, role: str, state: str, key: str, agent: _AgentPlan | None,
                    messages: list[dict[str, Any]], schema: dict[str, Any] | None, schema_name: str,
                    tools: list[dict[str, Any]] | None) -> ModelResponse:
        self._check_limits(run, state, False)
        seq = run.seqs.get(key, 0)
        run.seqs[key] = seq + 1
        if agent is not None:
            model, fallbacks, temperature = agent.model, agent.fallbacks, agent.temperature
        else:
            model, fallbacks, temperature = self._verifier_model, (), 0.0
        timeout = None
        if self._limits.seconds is not None:
            timeout = max(self._limits.seconds - run.elapsed(), 1.0)
        request = ModelRequest(
            role=role, state=state, model=model, messages=messages, temperature=temperature,
            response_schema=schema, schema_name=schema_name, tools=tools, fallbacks=fallbacks, timeout=timeout,
            max_tokens=self.max_tokens, metadata={"statewright": {"run_id": run.run_id, "state": state, "role": role, "seq": seq}},
        )
        if self._budget_limited:
            self._check_budget(run, request)
        try:
            response = self.client.complete(request)
        except ModelError as exc:
            from .scripted import ScriptExhausted

            if self.trace is not None:
                self.trace.emit("llm_error", role=role, state=state, agent=agent.name if agent else None,
                                model=model, call_index=seq, error=str(exc), attempts=exc.attempts,
                                events=getattr(exc, "events", []))
            kind = "script" if isinstance(exc, ScriptExhausted) else "model"
            raise RunFailed(Failure(kind, f"state '{state}': {exc}", state=state)) from None
        usage = run.usage
        usage.prompt_tokens += response.prompt_tokens
        usage.completion_tokens += response.completion_tokens
        usage.cost_usd += response.cost_usd
        usage.llm_calls += 1
        if self.trace is not None:
            self._emit_call(request, response, agent, seq)
        return response

    def _emit_call(self, request: ModelRequest, response: ModelResponse, agent: _AgentPlan | None,
                   seq: int) -> None:
        trace = self.trace
        assert trace is not None
        fields: dict[str, Any] = {
            "role": request.role, "state": request.state, "agent": agent.name if agent else None,
            "model": response.model or request.model, "call_index": seq,
            "prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens,
            "cost_usd": response.cost_usd, "latency_ms": response.latency_ms, "attempts": response.attempts,
        }
        if response.events:
            fields["events"] = response.events
        if trace.content:
            fields["messages"] = request.messages
            reply: dict[str, Any] = {"content": response.content}
            if response.tool_calls:
                reply["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                       for c in response.tool_calls]
            fields["reply"] = reply
        trace.emit("llm_call", **fields)

    def _emit_repair(self, state: str, role: str, repairs: list[str]) -> None:
        if self.trace is not None:
            self.trace.emit("repair", state=state, role=role, repairs=repairs)

    def _emit_reask(self, state: str, role: str, attempt: int, error: str) -> None:
        if self.trace is not None:
            self.trace.emit("reask", state=state, role=role, attempt=attempt, error=error)

    # -- transitions -------------------------------------------------------------------------------

    def _fire_direct(self, run: _Run, plan: _StatePlan) -> None:
        target = plan.direct
        assert target is not None
        if run.visits.get(target, 0):
            run.feedback = f"This step is being done again: state '{plan.name}' sent the run back here."
        run.state = target
        if self.trace is not None:
            self.trace.emit("transition", **{"from": plan.name, "to": target, "cause": "unconditional",
                                             "reason": "", "index": 0})

    def _transition(self, run: _Run, plan: _StatePlan, output: Any, instruction: str | None) -> None:
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
                    verdict = self._judge(run, plan, instruction, output, enabled)
                    if verdict.choice is not None:
                        self._fire(run, plan, enabled[verdict.choice], "verifier", verdict.reason, verdict)
                        return
                    verdict_feedback = verdict.feedback or verdict_feedback
                i = group_end
                continue
            i += 1
            if not self._enabled(run, plan, edge):
                skipped += 1
                continue
            kind = edge.kind
            if kind == "guard":
                if scope is None:
                    scope = Scope(output, run.inputs, run.outputs, run.visits)
                value = self._evaluate_guard(plan, edge, scope)
                if value:
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

    def _enabled(self, run: _Run, plan: _StatePlan, edge: _Edge) -> bool:
        if edge.max is not None and run.edges.get(edge.key, 0) >= edge.max:
            bound = f"max {edge.max}"
        elif edge.target_visits is not None and run.visits.get(edge.target, 0) >= edge.target_visits:
            bound = f"visits {edge.target_visits}"
        else:
            return True
        if self.trace is not None:
            self.trace.emit("bound_skip", state=plan.name, index=edge.index, to=edge.target, bound=bound)
        return False

    def _evaluate_guard(self, plan: _StatePlan, edge: _Edge, scope: Scope) -> bool:
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
        if self.trace is not None:
            self.trace.emit("guard", state=plan.name, index=edge.index, text=edge.text, value=value)
        return value

    def _fire(self, run: _Run, plan: _StatePlan, edge: _Edge, cause: str, reason: str,
              verdict: Verdict | None) -> None:
        if edge.max is not None:
            run.edges[edge.key] = run.edges.get(edge.key, 0) + 1
        target = edge.target
        if cause == "stay":
            run.feedback = (self._without_conditions(f"Do this step again. Feedback on your previous answer: "
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
                run.feedback = self._without_conditions("\n".join(parts))
            else:
                run.feedback = f"This step is being done again: state '{plan.name}' sent the run back here."
        run.state = target
        if self.trace is not None:
            self.trace.emit("transition", **{"from": plan.name, "to": target, "cause": cause, "reason": reason,
                                             "index": edge.index})

    def _without_conditions(self, text: str) -> str:
        """Agents never read transition conditions, even when a verifier quotes one back."""
        if self._conditions_pattern is None:
            return text
        return self._conditions_pattern.sub("(...)", text)

    def _judge(self, run: _Run, plan: _StatePlan, instruction: str | None, output: Any,
               edges: list[_Edge]) -> Verdict:
        conditions = [e.text for e in edges]
        if instruction is None:
            call = plan.spec.call
            instruction = f"(an automated step: the tool {call.tool} was called)" if call else ""
        messages = verifier_messages(instruction, to_text(output), conditions)
        schema = verdict_schema(conditions)
        try:
            verdict, _response = ask_until_valid(
                lambda conversation: self._call_model(run, "verifier", plan.name, plan.verifier_key, None,
                                                      conversation, schema, "verdict", None),
                messages,
                lambda text: parse_verdict(text, conditions),
                plan.retries,
                lambda repairs: self._emit_repair(plan.name, "verifier", repairs),
                lambda attempt, error: self._emit_reask(plan.name, "verifier", attempt, error),
            )
        except ReplyError as exc:
            raise RunFailed(Failure(
                "output", f"state '{plan.name}': the verifier's answer was unusable after {exc.attempts} "
                          f"attempt(s); last error: {exc.last_error}", state=plan.name,
                origin=edges[0].origin)) from None
        if self.trace is not None:
            choice = conditions[verdict.choice] if verdict.choice is not None else "none"
            self.trace.emit("verdict", state=plan.name, conditions=conditions, choice=choice,
                            reason=verdict.reason, feedback=verdict.feedback)
        return verdict

    # -- limits ------------------------------------------------------------------------------------

    def _check_limits(self, run: _Run, state: str, before_step: bool) -> None:
        limits = self._limits
        if before_step and run.steps >= limits.steps:
            self._limit_reached(state, "steps", f"the run reached its limit of {limits.steps} steps")
        if not self._usage_limited:
            return
        usage = run.usage
        if limits.tokens is not None and usage.prompt_tokens + usage.completion_tokens >= limits.tokens:
            self._limit_reached(state, "tokens", f"the run used {usage.tokens} tokens; its limit is "
                                                 f"{limits.tokens}")
        if limits.cost_usd is not None and usage.cost_usd >= limits.cost_usd:
            self._limit_reached(state, "cost_usd", f"the run cost ${usage.cost_usd:.4f}; its limit is "
                                                   f"${limits.cost_usd:.4f}")
        if limits.seconds is not None and run.elapsed() >= limits.seconds:
            self._limit_reached(state, "seconds", f"the run took {run.elapsed():.1f} s; its limit is "
                                                  f"{limits.seconds:g} s")

    def _check_budget(self, run: _Run, request: ModelRequest) -> None:
        """Refuse a call whose estimate would take the run past its `tokens` or `cost_usd` limit.

        The estimate is the client's (`estimate(request) -> (tokens, cost_usd)`) when it has one, else a
        token per four characters of the prompt at no known price; both count the prompt plus the reply
        allowance (`max_tokens`, when the run sets one)."""
        estimator = getattr(self.client, "estimate", None)
        try:
            tokens, cost = estimator(request) if estimator is not None else rough_call_estimate(request)
            tokens, cost = int(tokens), float(cost)
        except Exception:  # noqa: BLE001 - a client whose estimate fails still gets its budget checked
            tokens, cost = rough_call_estimate(request)
        limits, usage, state = self._limits, run.usage, request.state
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

    def _context(self, run: _Run) -> dict[str, Any]:
        context = run.context_cache
        if context is None:
            context = dict(run.inputs)
            outputs, visits = run.outputs, run.visits
            for name in self._state_names:
                context[name] = {"output": outputs.get(name), "visits": visits.get(name, 0)}
            run.context_cache = context
        return context

    def _render(self, run: _Run, source: str, state: str, context: Mapping[str, Any]) -> str:
        try:
            deadline = self._limits.seconds and time.monotonic() + self._limits.seconds - run.elapsed()
            return render_template(source, context, deadline=deadline)
        except TemplateRenderError as exc:
            raise RunFailed(Failure("template", f"state '{state}': {exc}", state=state,
                                    origin=self.machine.states[state].origin)) from None

    # -- ending ------------------------------------------------------------------------------------

    def _finish(self, run: _Run, plan: _StatePlan) -> RunResult:
        name = plan.name
        run.visits[name] = run.visits.get(name, 0) + 1
        run.path.append(name)
        run.context_cache = None
        if self.trace is not None:
            self.trace.emit("state_enter", state=name, visit=run.visits[name])
        if plan.spec.result is not None:
            result: Any = self._render(run, plan.spec.result, name, self._context(run))
        else:
            result = to_jsonable(run.outputs.get(run.last_state)) if run.last_state else None
        run.state = name
        self._save(run, "final", result=result, final_state=name)
        if self.trace is not None:
            self.trace.emit("state_exit", state=name)
            self._emit_end(run, "final", name, None)
        return self._result(run, "final", name, result, None)

    def _fail(self, run: _Run, failure: Failure) -> RunResult:
        if self.trace is not None and failure.kind in ("limit", "bound"):
            self.trace.emit("transition", **{"from": failure.state or run.state, "to": None,
                                             "cause": failure.kind, "reason": failure.message})
        if failure.kind not in RETRYABLE_FAILURES and failure.kind != "input":
            self._save(run, "failed", failure=failure)
        if self.trace is not None:
            self._emit_end(run, "failed", None, failure)
        return self._result(run, "failed", None, None, failure)

    def _result(self, run: _Run, status: str, final_state: str | None, result: Any,
                failure: Failure | None) -> RunResult:
        usage = run.usage
        return RunResult(status=status, run_id=run.run_id, machine=self.machine.name, final_state=final_state,
                         result=result, path=list(run.path), outputs=dict(run.outputs), failure=failure,
                         usage=Usage(usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                                     usage.llm_calls), workspace=run.workspace)

    def _emit_start(self, run: _Run, resumed: bool) -> None:
        if self.trace is not None:
            fields: dict[str, Any] = {"run_id": run.run_id, "machine": self.machine.name, "inputs": run.inputs_json,
                                      "workspace": run.workspace}
            if resumed:
                fields.update(resumed=True, state=run.state, steps=run.steps)
            self.trace.emit("run_start", **fields)

    def _emit_end(self, run: _Run, status: str, final_state: str | None, failure: Failure | None) -> None:
        assert self.trace is not None
        self.trace.emit("run_end", run_id=run.run_id, status=status, final_state=final_state,
                        failure=failure.to_json() if failure else None, usage=run.usage.to_json(),
                        steps=run.steps, path=run.path, seconds=round(run.elapsed(), 3))

    # -- checkpoints -------------------------------------------------------------------------------

    def _save(self, run: _Run, status: str, *, result: Any = None, final_state: str | None = None,
              failure: Failure | None = None) -> None:
        store = self.checkpoint
        if store is None:
            return
        if run.dirty:
            for name in run.dirty:
                run.outputs_json[name] = to_jsonable(run.outputs[name])
            run.dirty.clear()
        logs: dict[str, list[Any]] = {"path": run.path}
        for name, memory in run.memories.items():
            if memory.policy != "none":
                logs["memory:" + name] = memory.messages
        store.save(run.run_id, {
            "version": SNAPSHOT_VERSION, "machine": self.machine.name,
            "source_sha256": self.machine.source_sha256, "status": status, "state": run.state,
            "inputs": run.inputs_json, "outputs": run.outputs_json, "visits": run.visits, "edges": run.edges,
            "seqs": run.seqs, "feedback": run.feedback, "usage": run.usage.to_json(), "steps": run.steps,
            "elapsed": run.elapsed(), "last_state": run.last_state, "result": result,
            "final_state": final_state, "failure": failure.to_json() if failure else None,
            "workspace": run.workspace, "logs": logs,
        })

    def _resume(self, run_id: str | None) -> _Run | RunResult:
        store = self.checkpoint
        if store is None:
            raise CheckpointError("resuming a run needs a checkpoint store")
        if not run_id:
            raise CheckpointError("resuming a run needs its run id")
        snapshot = store.load(run_id)
        if snapshot is None:
            raise CheckpointError(f"no checkpoint of run '{run_id}' in {store.path}")
        if snapshot.get("machine") != self.machine.name:
            raise CheckpointError(f"run '{run_id}' belongs to machine '{snapshot.get('machine')}', "
                                  f"not '{self.machine.name}'")
        if snapshot.get("source_sha256", "") != self.machine.source_sha256:
            raise CheckpointError(
                f"run '{run_id}' was started by a different version of machine '{self.machine.name}' "
                f"(source sha256 {str(snapshot.get('source_sha256'))[:12] or '-'} vs "
                f"{self.machine.source_sha256[:12] or '-'}); resume it with the machine it started with")
        stored_inputs = dict(snapshot.get("inputs") or {})
        try:
            inputs = prepare_inputs(self.machine, stored_inputs)  # typed inputs come back as their types
        except InputError:
            inputs = stored_inputs
        # the workspace the run started with, unless this engine was given one
        workspace = self.workspace or snapshot.get("workspace") or default_workspace(run_id)
        run = _Run(run_id, inputs, snapshot["state"], workspace)
        run.inputs_json = stored_inputs
        try:
            for name, data in (snapshot.get("outputs") or {}).items():
                run.outputs[name] = self._revive_output(name, data)
                run.outputs_json[name] = data
        except ValueError as exc:
            raise CheckpointError(f"run '{run_id}': a stored output no longer validates: {exc}") from None
        run.visits = dict(snapshot.get("visits") or {})
        run.edges = dict(snapshot.get("edges") or {})
        run.seqs = dict(snapshot.get("seqs") or {})
        run.feedback = snapshot.get("feedback")
        run.usage = Usage(**(snapshot.get("usage") or {}))
        run.steps = int(snapshot.get("steps") or 0)
        run.elapsed_before = float(snapshot.get("elapsed") or 0.0)
        run.last_state = snapshot.get("last_state")
        logs = snapshot.get("logs") or {}
        run.path = list(logs.get("path") or [])
        self._new_memories(run, logs)
        status = snapshot.get("status")
        if status in ("final", "failed"):
            failure = snapshot.get("failure")
            return self._result(run, status, snapshot.get("final_state"), snapshot.get("result"),
                                Failure(**failure) if failure else None)
        self._emit_start(run, resumed=True)
        return run

    def _revive_output(self, state: str, data: Any) -> Any:
        spec = self.machine.states.get(state)
        if spec is None or spec.output is None or data is None:
            return data
        return validate_typed(spec.output, data, spec.output_wrapped)

    def _new_memories(self, run: _Run, logs: Mapping[str, list[Any]]) -> None:
        for name, agent in self.machine.agents.items():
            run.memories[name] = AgentMemory(agent.memory, agent.memory_count,
                                             list(logs.get("memory:" + name) or []))
