"""The activities of a Temporal worker: where a durable run touches the world (model calls, tool calls, a
budget estimate, an agent's tool schemas) and the segment activity that makes a run's calls one after
another (--durability segment). The workflow that asks for them is temporal_worker.py's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from .client import ModelError, rough_call_estimate
from .executor import drive
from .scripted import Script, ScriptedClient, ScriptExhausted
from .structured import to_jsonable
from .temporal import (
    TEMPORAL_CALL_MODEL,
    TEMPORAL_CALL_TOOL,
    TEMPORAL_DESCRIBE_TOOLS,
    TEMPORAL_ESTIMATE,
    TEMPORAL_RETRY_DEFAULTS,
    TEMPORAL_RUN_SEGMENT,
    TemporalMachines,
    request_from_json,
    response_to_json,
    temporal_model_error_json,
)
from .temporal_segments import SegmentEnd


def _host() -> str:
    import socket

    return socket.gethostname()


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


# ---- activities: where the world is touched ---------------------------------------------------------------


class TemporalActivities:
    """What a worker performs for the workflows it runs: model calls, tool calls, estimates, tool schemas.

    Each activity answers with data, not an exception, when the call failed for good: Temporal retries
    only a lost or timed-out activity, and the core decides what a failure means. A scripted call's answer
    says which scripted reply it served (`served`), so a test run on the cluster can tell unused replies."""

    def __init__(self, machines: TemporalMachines, *, unsafe_tools: bool = False,
                 secrets: Mapping[str, Mapping[str, str]] | None = None, otel: Any = None,
                 client: Any = None, segment_performer: Any = None) -> None:
        self.machines = machines
        self.temporal = client  # the worker's Temporal client: a segment records its calls through it
        # temporal_worker.SegmentPerformer: the workflow's own leaves, as a segment performs them (given by the
        # worker, which imports this module)
        self.segment_performer = segment_performer
        self.otel = otel  # an otel.OtelTelemetry: each activity a span under the run's span that asked for it
        self.unsafe_tools = unsafe_tools  # the worker's to give, never a run's: its tools run on this host
        self.secrets = dict(secrets or {})  # machine key -> the tool secrets this worker read for it
        self.registries: OrderedDict[tuple[str, str], Any] = OrderedDict()  # (key, workspace) -> ToolRegistry
        self.litellm_import: asyncio.Future[Any] | None = None

    def definitions(self) -> list[Any]:
        from temporalio import activity

        async def call_model(payload: dict) -> dict:
            with self.activity_span(TEMPORAL_CALL_MODEL, payload):
                return await self.call_model(payload)

        async def call_tool(payload: dict) -> dict:
            with self.activity_span(TEMPORAL_CALL_TOOL, payload):
                return await self.call_tool(payload)

        async def estimate(payload: dict) -> list:
            await self.ready(payload)
            return self.estimate(payload)

        async def describe_tools(payload: dict) -> dict:
            return self.describe_tools(payload)

        async def run_segment(payload: dict) -> dict:
            with self.activity_span(TEMPORAL_RUN_SEGMENT, payload):
                return await self.run_segment(payload)

        return [activity.defn(name=TEMPORAL_CALL_MODEL)(call_model),
                activity.defn(name=TEMPORAL_CALL_TOOL)(call_tool),
                activity.defn(name=TEMPORAL_ESTIMATE)(estimate),
                activity.defn(name=TEMPORAL_DESCRIBE_TOOLS)(describe_tools),
                activity.defn(name=TEMPORAL_RUN_SEGMENT)(run_segment)]

    @contextlib.contextmanager
    def activity_span(self, name: str, payload: Mapping[str, Any]) -> Any:
        """A span of this worker's part in a run — one activity — under the run's span that asked for it, so a
        run that moved between workers is one tree that says which worker did what."""
        context = payload.get("trace_context")
        if self.otel is None or not context:
            yield None
            return
        from temporalio import activity

        info = activity.info()
        span = self.otel.child_span(f"RunActivity:{name}", context, {
            "statewright.worker.pid": os.getpid(), "statewright.worker.host": _host(),
            "temporal.activity.attempt": info.attempt, "temporal.workflow.id": info.workflow_id})
        try:
            yield span
        finally:
            span.end()

    async def ready(self, payload: Mapping[str, Any]) -> None:
        """Import litellm, the first time a call needs it, in a thread: the import takes seconds, and an
        event loop blocked that long sends no heartbeats — Temporal would take the worker for dead."""
        if payload.get("script") is not None:
            return
        from .model_client import calls_need_litellm

        request = payload.get("request") or {}
        if not calls_need_litellm([str(request.get("model", "")), *(request.get("fallbacks") or ())]):
            return  # the native client (model_client.py) loads nothing that takes long
        if self.litellm_import is None:  # one import for every call waiting on it: a second `import
            from .litellm_client import _load_litellm  # litellm` would block the loop on its lock

            self.litellm_import = asyncio.ensure_future(asyncio.to_thread(_load_litellm))
        await asyncio.shield(self.litellm_import)

    def client(self, payload: Mapping[str, Any]) -> Any:
        script = payload.get("script")
        if script is not None:
            return ScriptedClient(Script.from_json(script))
        from .model_calls import RetryPolicy
        from .model_client import default_model_client

        policy = payload.get("policy") or TEMPORAL_RETRY_DEFAULTS
        return default_model_client(RetryPolicy(max_retries=int(policy["retries"]),
                                                initial_delay=float(policy["retry_delay"]),
                                                max_delay=float(policy["max_delay"]),
                                                timeout=float(policy["timeout"])))

    async def call_model(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """One model call with the client's own retries and fallbacks; a call that fails for good is answered
        with its error."""
        request = request_from_json(payload["request"])
        await _beating(self.ready(payload), float(payload.get("heartbeat") or 0))
        client = self.client(payload)
        try:
            response = await _beating(client.acomplete(request), float(payload.get("heartbeat") or 0))
        except ModelError as exc:
            return {"error": temporal_model_error_json(exc)}
        answer: dict[str, Any] = {"response": response_to_json(response)}
        if isinstance(client, ScriptedClient):
            answer["served"] = [list(call) for call in client.calls]
        return answer

    async def call_tool(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        state, seq = str(payload["state"]), int(payload["seq"])
        script = payload.get("script")
        if script is not None:  # an action state's tool, answered by the run's script
            item = payload.get("item")
            client = ScriptedClient(Script.from_json(script))
            try:
                reply = client.tool(state, seq, run_id=payload.get("run_id"),
                                    item=int(item) if item is not None else None)
            except ScriptExhausted as exc:
                return {"error": {"message": str(exc), "scripted": True}}
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)
            return {"outcome": {"value": to_jsonable(reply.value), "latency_ms": _ms_since(started),
                                "scripted": True}, "served": [list(call) for call in client.calls]}
        try:
            registry = self.tools(str(payload["key"]), str(payload["workspace"]))
            value = await _beating(registry.acall(payload["tool"], payload["args"]),
                                   float(payload.get("heartbeat") or 0))
        except Exception as exc:  # noqa: BLE001 - the tool's failure goes back to the core, as locally
            return {"error": {"message": str(exc), "latency_ms": getattr(exc, "latency_ms", None)
                              or _ms_since(started)}}
        return {"outcome": {"value": to_jsonable(value), "latency_ms": _ms_since(started)}}

    async def run_segment(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Run a run on from where its workflow is (--durability segment): the run's core, driven again from
        its start with the answers the workflow has taken so far (`log`), makes the calls that come next,
        one after another, and records each on the server — the heartbeat of this activity, its details
        every call made so far, awaited — before the run goes on. It stops before a question to a person,
        once its calls hold TEMPORAL_SEGMENT_BYTES, or where the run ends, and answers with the calls it
        made (`journal`), which the workflow takes as the answers of the effects its own core asks for.

        A worker that dies inside a segment leaves it to another attempt (the heartbeat stops), given the
        calls recorded: it drives the run again past them and makes only the calls after them."""
        from temporalio import activity

        info = activity.info()
        recorded = list(info.heartbeat_details[0]) if info.heartbeat_details else []
        entry = self.machines.get(str(payload["spec"].get("key")))
        if entry is None or self.segment_performer is None:
            return {"journal": recorded}
        performer = self.segment_performer(self, payload, recorded)
        spec = payload["spec"]
        core = entry.activity_core(spec.get("model_map"), spec.get("max_tokens"))
        run = core.start(str(payload["run_id"]), dict(spec.get("inputs") or {}), str(payload["workspace"]))
        run.started = float(payload["started"])
        performer.run = run
        core.begin(run, resumed=False)
        beating = asyncio.ensure_future(performer.keep_beating())
        try:
            await drive(core.execute(run), performer)
        except SegmentEnd:
            pass
        except Exception as exc:  # noqa: BLE001 - the calls made are answered all the same; the workflow
            # makes the rest one activity each (a segment that fails would leave them to be made again)
            activity.logger.warning("a segment stopped: %s: %s", type(exc).__name__, exc)
        finally:
            beating.cancel()
        return {"journal": performer.made}

    async def record(self, journal: list[list[Any]]) -> bool:
        """Record a segment's calls on the server as its activity's heartbeat details, and wait until they
        are; whether the activity is still wanted (False: cancelled, timed out, or its workflow gone)."""
        from temporalio import activity
        from temporalio.api.common.v1 import Payloads
        from temporalio.api.workflowservice.v1 import RecordActivityTaskHeartbeatRequest

        client = self.temporal
        if client is None:  # (activities served without the worker's client record nothing: no segment)
            return False
        info = activity.info()
        try:
            payloads = await client.data_converter.encode([journal])
            answer = await client.workflow_service.record_activity_task_heartbeat(RecordActivityTaskHeartbeatRequest(
                task_token=info.task_token, details=Payloads(payloads=payloads), identity=client.identity,
                namespace=client.namespace))
        except Exception:  # noqa: BLE001 - the server no longer takes this attempt (or it cannot be told): stop
            return False
        return not answer.cancel_requested

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


async def _beating(work: Any, every: float) -> Any:
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
