"""The local executor: drives the deterministic core on asyncio and performs its effects.

`Engine(machine, ...)` holds what every run of a machine shares — the core, the model client, the trace,
the checkpoint store. `await engine.arun(inputs)` starts a run: the core (core.py) decides every step and
yields effects; this module performs them — model calls through the client's `acomplete`, tools as asyncio
subprocesses or coroutines — and sends the results back. `engine.run(...)` is the same run for synchronous
code. Everything a run touches is its own: its Run, its workspace and tool registry, its scripted client,
its usage, its trace events and its checkpoint row. Thousands of runs share one event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .checkpoint import LEASE_SECONDS, CheckpointError, CheckpointStore
from .client import ModelClient, ModelRequest, ModelResponse, rough_call_estimate
from .core import RunCore
from .effects import AwaitPerson, CallModel, CallTool, DescribeTools, EstimateCall, PersonReply, ToolOutcome
from .executor import Performer, drive
from .file_names import file_name_for
from .inputs import InputError, InputValidator
from .plan import MachinePlan
from .result import AnswerError, Failure, RunResult
from .run_state import Run
from .scripted import Script, ScriptedClient
from .snapshot import Delta
from .spec import InputSpec, MachineSpec
from .sync import run_sync
from .tool_secrets import SecretError, read_secrets
from .trace import Trace, event_time, redact, redact_data, secret_forms

# where a run's tools work when no workspace is given: a fresh directory per run, under the current one
DEFAULT_WORKSPACE_ROOT = os.path.join(".statewright", "runs")

# Something that hears a run's events as they happen: `(event, fields)`; see progress.py.
Listener = Callable[[str, dict[str, Any]], None]


def default_workspace(run_id: str) -> str:
    """`.statewright/runs/<run_id>/workspace` under the current directory, as an absolute path.

    A run id is only a name here: one that could leave the runs directory, share another's directory or be
    too long for a file name is made a safe name of its own (file_names.py)."""
    return os.path.abspath(os.path.join(DEFAULT_WORKSPACE_ROOT, file_name_for(run_id, "run"), "workspace"))


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def validate_input(spec: InputSpec, value: Any) -> Any:
    """`value` checked (and coerced where pydantic's lax mode does) against one input's annotation."""
    return InputValidator().validate(spec, value)


def prepare_inputs(machine: MachineSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """A run's inputs: given values validated, defaults filled. Raises InputError naming every problem."""
    return InputValidator().prepare(machine, given)


class Engine:
    """Runs one machine, any number of times, concurrently if asked.

    `client=None` calls models with the default client (model_client.py: OpenAI-compatible models over
    statewright's own HTTP, others through litellm, imported on the first such call). `script` answers
    every model call, verifier verdict and action-state tool from a Script instead (no litellm is
    imported); each run
    gets its own scripted client. `tools` is a tool registry serving every run; without it each run gets
    its own, working in the run's workspace. `unsafe_tools` lets std.python and std.shell run with no
    confinement where their bubblewrap jail cannot run (runs it starts say so in their trace's
    `run_start`). `listeners` hear every run's events as they happen.

    `otel` (an otel.OtelTelemetry) makes each run's events spans and metrics too; a run's trace context
    is kept in its checkpoint, so a resumed run continues its trace.

    `started_with` is recorded in every checkpoint (how the run was started: `{"script": PATH}`), so that
    `statewright resume RUN_ID` continues it the same way.

    Each run reads the secrets its tools name (`secrets [...]`) from the environment when it starts; one
    that is not set ends the run at once with a failure of kind `secret` (`require_secrets=False`, for
    test blocks, lets it start: a tool that needs a missing secret then fails its call). Every value read
    is redacted from the run's trace, listeners, checkpoints, tool results and RunResult.
    """

    def __init__(
        self,
        machine: MachineSpec,
        *,
        client: ModelClient | None = None,
        trace: Trace | None = None,
        checkpoint: CheckpointStore | None = None,
        model_map: Mapping[str, str] | None = None,
        script: Script | None = None,
        workspace: str | None = None,
        tools: Any = None,
        unsafe_tools: bool = False,
        max_tokens: int | None = None,
        listeners: Sequence[Listener] = (),
        clock: Callable[[], float] | None = None,
        require_secrets: bool = True,
        observe: Callable[[str, str, int, Any], None] | None = None,
        started_with: Mapping[str, str] | None = None,
        otel: Any = None,
    ) -> None:
        self.machine = machine
        self._client = client
        self.trace = trace
        self.checkpoint = checkpoint
        self.script = script
        self.workspace = os.path.abspath(workspace) if workspace else None
        self._tools = tools
        self.unsafe_tools = unsafe_tools
        self._running: set[_LocalEffects] = set()  # the runs in progress, whose tool processes may need killing
        self._tools_stopped = False  # kill_tool_processes was called: no run starts tool code any more
        self.listeners = tuple(listeners)
        self.require_secrets = require_secrets
        self.observe = observe  # hears each step's instruction and output (test blocks' expectations)
        self.started_with = dict(started_with or {})  # recorded in checkpoints: how runs were started
        self.otel = otel  # an OtelTelemetry (otel.py): each run's events as spans and metrics too
        self.core = RunCore(MachinePlan(machine, model_map=model_map, max_tokens=max_tokens),
                            clock=clock or _monotonic)

    @property
    def client(self) -> ModelClient:
        """The model client of unscripted runs (the default client, made on first use)."""
        if self._client is None:
            from .model_client import default_model_client

            self._client = default_model_client()
        return self._client

    # -- running ------------------------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
            resume: bool = False, answer: Any = None, path: str | None = None) -> RunResult:
        """Run the machine to a final state or a typed failure (see `arun`), from synchronous code."""
        return run_sync(self.arun(inputs, run_id=run_id, resume=resume, answer=answer,  # type: ignore[no-any-return]
                                  path=path))


    async def arun(self, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
                   resume: bool = False, trace: Trace | None = None, answer: Any = None,
                   path: str | None = None) -> RunResult:
        """Run the machine to a final state, a typed failure, or a pause for a person's answer (status
        "waiting"). With `resume=True`, continue the checkpointed run `run_id` (its stored inputs are used;
        `inputs` is ignored); `answer` is the answer of the person it waits for — at `path` (a state, or
        `investigate[2]/approve` inside a machine it runs) when it waits in several places. `trace`, when
        given, takes this run's events instead of the engine's trace (a batch writes one trace per case).

        Raises CheckpointError when resuming is impossible (no store, unknown run, different machine), and
        AnswerError when `answer` does not fit the question (or the run waits for none): the run is left
        as it was."""
        if answer is not None and not resume:
            raise AnswerError("an answer is given to a waiting run that is resumed; this run is new")
        opened = self._resumed(run_id, answer, path) if resume else self._started(run_id, inputs, trace)
        if isinstance(opened, RunResult):
            return opened
        run, path = opened
        core = self.core
        try:
            secrets = read_secrets(self.machine, os.environ, required=self.require_secrets)
        except SecretError as exc:  # before anything runs: nothing is saved, the run can start again
            return core.fail_input(run.run_id, run.inputs_json, run.workspace, Failure("secret", str(exc)),
                                   self._emitter(trace or self.trace, self._otel_sink(None)))
        redactions = secret_forms(secrets.values())
        effects = _LocalEffects(self, run, secrets, (path or "", answer) if answer is not None else None)
        self._running.add(effects)
        try:
            return await self._drive_to_end(run, effects, trace or self.trace, redactions, resume)
        finally:
            self._running.discard(effects)

    def _resumed(self, run_id: str | None, answer: Any,
                 path: str | None) -> tuple[Run, str | None] | RunResult:
        """The checkpointed run `run_id` to continue, with the path its `answer` answers; or its result,
        when it has ended."""
        restored = self._restore(run_id)
        if isinstance(restored, RunResult):
            if answer is not None:
                raise AnswerError(f"run '{run_id}' has ended ({restored.status}); it waits for no answer")
            return restored
        if answer is not None:
            path = self.core.check_answer(restored, answer, path)
        return restored, path

    def _started(self, run_id: str | None, inputs: Mapping[str, Any] | None,
                 trace: Trace | None) -> tuple[Run, None] | RunResult:
        """A new run; or, when its inputs do not fit, its result (a failure of kind `input`)."""
        store = self.checkpoint
        run_id = run_id or new_run_id()
        if store is not None and store.exists(run_id):
            raise CheckpointError(f"run '{run_id}' already exists in {store.path}; "
                                  "resume it or choose another run id")
        workspace = self.workspace or default_workspace(run_id)
        given = dict(inputs or {})
        try:
            return self.core.start(run_id, given, workspace), None
        except InputError as exc:
            return self.core.fail_input(run_id, given, workspace, Failure("input", str(exc)),
                                        self._emitter(trace or self.trace, self._otel_sink(None)))

    async def _drive_to_end(self, run: Run, effects: _LocalEffects, trace: Trace | None,
                            redactions: list[str], resumed: bool) -> RunResult:
        """Drive the run on its effects; with a checkpoint store, as the run's one owner, each save made
        durable before the result is handed back."""
        core, store = self.core, self.checkpoint
        if store is None:
            self._attach(run, trace, redactions)
            core.begin(run, resumed=resumed)
            result = await drive(core.execute(run), effects)
            return _redacted_result(result, redactions)
        store.group_commits()
        store.acquire(run.run_id)  # one owner per run: another process holding it is refused here
        keeper = asyncio.ensure_future(_keep_lease(store, run.run_id))
        try:
            self._attach(run, trace, redactions)
            core.begin(run, resumed=resumed)
            result = await drive(core.execute(run), effects)
            await store.durable()
            return _redacted_result(result, redactions)
        finally:
            keeper.cancel()
            store.release(run.run_id)
            await store.durable()


    def kill_tool_processes(self) -> int:
        """SIGKILL the processes of every std.python and std.shell call running now, in every run of this
        engine; the number of calls killed. A killed call raises SandboxStopped (a KeyboardInterrupt)
        out of its run instead of returning a result, so the run ends as after Ctrl-C with its checkpoint
        at the last transition; those registries start no more code.

        Meant for a runner's SIGTERM handler: it only sends signals and sets flags, so it is safe inside one."""
        self._tools_stopped = True
        registries = [registry for effects in list(self._running) for registry in effects.registries.values()]
        if self._tools is not None:
            registries.append(self._tools)
        killed = 0
        seen: set[int] = set()
        for registry in registries:
            kill = getattr(registry, "kill_processes", None)
            if kill is not None and id(registry) not in seen:
                seen.add(id(registry))
                killed += kill()
        return killed

    def _restore(self, run_id: str | None) -> Run | RunResult:
        store = self.checkpoint
        if store is None:
            raise CheckpointError("resuming a run needs a checkpoint store")
        if not run_id:
            raise CheckpointError("resuming a run needs its run id")
        snapshot = store.load(run_id)
        if snapshot is None:
            raise CheckpointError(f"no checkpoint of run '{run_id}' in {store.path}")
        # the workspace the run started with, unless this engine was given one
        workspace = self.workspace or snapshot.head.workspace or default_workspace(run_id)
        return self.core.restore(run_id, snapshot, workspace)

    def _attach(self, run: Run, trace: Trace | None, redactions: list[str]) -> None:
        sink = self._otel_sink(run)
        emit = self._emitter(trace, sink)
        save: Callable[[str, Delta], None] | None = None
        if self.checkpoint is not None:
            store, options = self.checkpoint, self.started_with

            def save(run_id: str, delta: Delta) -> None:
                delta.head.options = options
                store.save(run_id, delta, redactions)

        if redactions and emit is not None:  # the run's secret values leave through no hook
            emit = _redacting(emit, redactions)
        content = (trace.content if trace is not None else False) or (sink is not None and sink.content)
        run.listen(emit, content=content, save=save, stamp=event_time)  # (the time of a branch's event)
        run.observe = self.observe

    def _otel_sink(self, run: Run | None) -> Any:
        return self.otel.run_sink(run, self.machine, batched=True) if self.otel is not None else None

    def _emitter(self, trace: Trace | None, otel_sink: Any = None) -> Listener | None:
        sinks: list[Listener] = []
        if trace is not None:  # (the spans may carry content a trace without it must not)
            sinks.append(trace.record if trace.content or otel_sink is None or not otel_sink.content
                         else _without_content(trace.record))
        sinks += self.listeners
        if otel_sink is not None:
            sinks.append(otel_sink)
        if not sinks:
            return None
        if len(sinks) == 1 and not self.unsafe_tools:
            return sinks[0]
        unsafe = self.unsafe_tools
        if trace is not None and otel_sink is not None:
            return _one_time(sinks[0], sinks[1:-1], otel_sink.record, unsafe)

        def emit(event: str, fields: dict[str, Any]) -> None:
            if unsafe and event == "run_start":
                # the opt-out is a property of the run, recorded where a reader of the trace looks first
                fields = {**fields, "unsafe_tools": True}
            for sink in sinks:
                sink(event, fields)

        return emit


def _redacting(hook: Callable[[str, dict[str, Any]], None], redactions: list[str]
               ) -> Callable[[str, dict[str, Any]], None]:
    """`hook` (an emitter) handed its data with the secret values redacted."""

    def redacted(key: str, data: dict[str, Any]) -> None:
        hook(key, redact_data(data, redactions))

    return redacted


def _without_content(hook: Callable[..., None]) -> Callable[..., None]:
    """`hook` (a trace's `record`) handed events without their content fields."""
    from .otel_names import otel_without_content

    def plain(event: str, fields: dict[str, Any], at: str | None = None) -> None:
        hook(event, otel_without_content(event, fields), at)

    return plain


def _one_time(trace: Callable[..., None], listeners: list[Listener], spans: Callable[..., None],
              unsafe: bool) -> Listener:
    """The emitter of a run with a trace file and spans both: each event is stamped once, and the trace
    and the spans get that one time (the trace to the microsecond, the spans to the nanosecond), so a
    trace exported later (`trace export`) gives the spans the run made, in the same order."""

    def emit(event: str, fields: dict[str, Any]) -> None:
        if unsafe and event == "run_start":
            fields = {**fields, "unsafe_tools": True}
        if "time" in fields:  # (an event a branch held back carries the time it happened at)
            trace(event, fields)
            at = None
        else:
            at = time.time_ns()
            trace(event, fields, event_time(at))
        for listener in listeners:
            listener(event, fields)
        spans(event, fields, at)

    return emit


def _redacted_result(result: RunResult, redactions: list[str]) -> RunResult:
    """The RunResult with no secret value in its result or failure (what a runner prints on stdout)."""
    if not redactions:
        return result
    result.result = redact_data(result.result, redactions)
    if result.failure is not None:
        result.failure.message = redact(result.failure.message, redactions)
    return result


class _LocalEffects(Performer):
    """Performs the effects of one run in this process: the leaves of the executor skeleton (executor.py)."""

    __slots__ = ("acomplete", "answer", "client", "engine", "registries", "run", "scripted", "secrets", "settles",
                 "store")

    def __init__(self, engine: Engine, run: Run, secrets: Mapping[str, str],
                 answer: tuple[str, Any] | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.run = run
        self.secrets = secrets
        self.answer = answer  # (the path of the question, a person's answer to it) for the waiting run
        self.store = engine.checkpoint
        self.settles = self.store is not None
        given = engine._client
        # a scripted run answers from its own client; a given ScriptedClient (a test block's) records it all
        self.scripted = (given if isinstance(given, ScriptedClient)
                         else ScriptedClient(engine.script) if engine.script is not None else None)
        self.client: Any = given if given is not None else self.scripted or engine.client
        self.acomplete = getattr(self.client, "acomplete", None)  # (a client may answer synchronously only)
        self.registries: dict[int, Any] = {}  # by machine: each machine a run runs has its own tools

    async def settle(self) -> None:
        assert self.store is not None
        await self.store.durable()  # what the run decided is committed before it acts on it

    async def call_model(self, effect: CallModel) -> ModelResponse:
        request = effect.request
        if self.engine.listeners:
            self.announce(request)
        acomplete = self.acomplete
        if acomplete is not None:
            return await acomplete(request)  # type: ignore[no-any-return]
        return self.client.complete(request)  # type: ignore[no-any-return]

    def announce(self, request: ModelRequest) -> None:
        """Listeners (not the trace) hear of a model call as it starts: a person watching sees the wait."""
        identity = request.metadata.get("statewright") or {}
        fields = {"role": request.role, "state": request.state, "agent": identity.get("agent"),
                  "model": request.model}
        for listener in self.engine.listeners:
            listener("llm_request", fields)

    async def estimate(self, effect: EstimateCall) -> tuple[int, float]:
        request = effect.request
        estimator = getattr(self.client, "estimate", None)
        try:
            tokens, cost = estimator(request) if estimator is not None else rough_call_estimate(request)
            return int(tokens), float(cost)
        except Exception:  # noqa: BLE001 - a client whose estimate fails still gets its budget checked
            return rough_call_estimate(request)

    def tools(self, machine: Any) -> Any:
        """The tool registry of `machine` in this run (the engine's own, when it was given one)."""
        if self.engine._tools is not None:
            return self.engine._tools
        machine = machine or self.engine.machine
        registry = self.registries.get(id(machine))
        if registry is None:
            from .tools import ToolRegistry

            registry = self.registries[id(machine)] = ToolRegistry(
                machine.tools, self.run.workspace, unsafe_tools=self.engine.unsafe_tools, secrets=self.secrets)
            if self.engine._tools_stopped:
                registry.kill_processes()  # made after the stop: it must start nothing either
        return registry

    async def call_tool(self, effect: CallTool) -> ToolOutcome:
        started = time.perf_counter()
        scripted = self.scripted
        if effect.agent is None and scripted is not None and scripted.script.has("tool", effect.where):
            reply = scripted.tool(effect.where, effect.seq, run_id=self.run.run_id, item=effect.item)
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)
            return ToolOutcome(reply.value, _ms_since(started), scripted=True)
        registry = self.tools(effect.machine)
        try:
            acall = getattr(registry, "acall", None)
            if acall is not None:
                value = await acall(effect.tool, effect.args)
            else:
                value = registry.call(effect.tool, effect.args)
        except Exception as exc:
            exc.latency_ms = _ms_since(started)  # type: ignore[attr-defined]
            raise
        return ToolOutcome(value, _ms_since(started))

    async def await_person(self, effect: AwaitPerson) -> PersonReply:
        """The answer this run was resumed with, a scripted one, a timeout once the deadline passed, or
        none: locally, a run that waits for a person pauses (checkpointed) instead of blocking."""
        now = time.time()
        scripted = self.scripted
        if scripted is not None:
            reply = scripted.person(effect.where, effect.seq, run_id=self.run.run_id, item=effect.item)
            if reply is not None:
                if reply.value.get("timeout"):
                    return PersonReply("timeout", now, scripted=True)
                return PersonReply("answer", now, reply.value["answer"], scripted=True)
        if self.answer is not None and self.answer[0] == effect.where:  # (the question it was given for)
            answer, self.answer = self.answer[1], None
            return PersonReply("answer", now, answer)
        if effect.deadline is not None and now >= effect.deadline:
            return PersonReply("timeout", now)
        return PersonReply("none", now)

    async def describe_tools(self, effect: DescribeTools) -> tuple[list[dict[str, Any]], dict[str, str]]:
        registry = self.tools(effect.machine)
        schemas: list[dict[str, Any]] = []
        names: dict[str, str] = {}
        for tool in effect.tools:
            schema = registry.schema(tool)
            schemas.append(schema)
            function = schema.get("function", schema)
            names[str(function.get("name", tool))] = tool
        return schemas, names


async def _keep_lease(store: CheckpointStore, run_id: str) -> None:
    """Renew a run's lease while it runs, however long one model call takes."""
    while True:
        await asyncio.sleep(LEASE_SECONDS / 3)
        store.renew(run_id)
        await store.durable()


def _monotonic() -> float:
    return time.monotonic()


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
