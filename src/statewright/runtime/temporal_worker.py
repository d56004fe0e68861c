"""The worker's side of durable runs: the workflow that drives the core, and the worker that serves it with
the activities that touch the world (temporal_activities.py).

One run is one workflow. `TemporalWorkflow` drives the same deterministic core as the local engine, through
the same executor skeleton (executor.py): it is a Performer whose leaves are activities — a model or
verifier call (`statewright.call_model`), a tool call (`statewright.call_tool`), and, as local activities,
a budget estimate and an agent's tool schemas — and whose person's answer is a signal, awaited under a
durable timer. It reads Temporal's clock (`workflow.time()`). Temporal's event history is the checkpoint: a
worker that dies mid-run is replaced by another that replays the history through the core — every
completed activity answers from the history, nothing is called again — and carries on.

With `--durability segment` the calls are made by a segment activity instead (`statewright.run_segment`):
`SegmentPerformer` drives the same core again from the run's start past the answers the workflow took, makes
the calls that come next and records each on the cluster as the activity's heartbeat before the run goes on;
the workflow takes them as its effects' answers (`TemporalWorkflow.from_segment`), by a key that names the
very request (`segment_key`, temporal_segments.py). docs/temporal.md says when segments give way to an
activity per call.

`TemporalWorkflow` is an ordinary class here; `temporal_workflow_class` binds it to the machines one worker
serves and applies Temporal's decorators to that binding (temporalio is imported only then, so a runner
carries this module and works without temporalio installed until one of its `--temporal` options is used).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from .client import ModelError, ModelRequest, ModelResponse
from .effects import AwaitPerson, CallModel, CallTool, DescribeTools, EstimateCall, PersonReply, ToolOutcome
from .executor import Performer, drive
from .inputs import InputError
from .result import AnswerError, Failure, RunResult
from .scripted import Script, ScriptError
from .spec import MachineSpec, state_at
from .structured import to_jsonable
from .temporal import (
    TEMPORAL_ANSWER_SIGNAL,
    TEMPORAL_CALL_MODEL,
    TEMPORAL_CALL_TOOL,
    TEMPORAL_DEFAULT_NAMESPACE,
    TEMPORAL_DESCRIBE_TOOLS,
    TEMPORAL_ESTIMATE,
    TEMPORAL_HEARTBEAT_SECONDS,
    TEMPORAL_RETRY_DEFAULTS,
    TEMPORAL_RUN_SEGMENT,
    TEMPORAL_SEGMENT_BYTES,
    TEMPORAL_SEGMENT_HISTORY_BYTES,
    TEMPORAL_SEGMENT_LOG_BYTES,
    TEMPORAL_TOOL_TIMEOUT_SECONDS,
    TEMPORAL_TRACE_PAGE,
    TEMPORAL_WORKFLOW,
    RemoteModelError,
    RemoteToolError,
    TemporalMachines,
    default_task_queue,
    machine_key,
    request_to_json,
    response_from_json,
    result_to_json,
    script_to_json,
    temporal_connect,
    temporal_policy,
    temporal_sdk,
    temporal_workspace,
)
from .temporal_activities import TemporalActivities
from .temporal_segments import SEGMENT_STOPS, SegmentEnd, person_key, segment_key, segments_unsafe
from .tool_secrets import read_secrets
from .trace import redact_data, redacted_json, secret_forms, secret_values


def _where(request: ModelRequest) -> str:
    """The state a request is for, as scripts name it (`investigate/draft` in a machine a run runs)."""
    identity = request.metadata.get("statewright") or {}
    call = identity.get("call")
    return f"{call}/{request.state}" if call else request.state


# ---- the workflow ------------------------------------------------------------------------------------------


class TemporalWorkflow(Performer):
    """One run, as a workflow: drives the core and performs its effects as activities, signals and timers.

    It runs outside Temporal's sandbox: the sandbox re-imports a workflow's module by name for every run,
    which a one-file runner (its runtime a package it installs itself) and a machine compiled in memory
    cannot offer. What the sandbox would guard is the core's own contract — no clock but the one it is
    given, no randomness, no I/O — which its tests hold, and which replaying a history checks.

    `machines` and `hidden` (the values no event may hold) are set on the class `temporal_workflow_class`
    binds for one worker."""

    machines: TemporalMachines
    hidden: list[str]
    otel: Any = None  # the worker's otel.OtelTelemetry: the run's events as spans too

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []  # JSON lines, keys in the order the core wrote them
        self.record_events = False  # the run was started with a trace: keep its events for the `trace` query
        self.trace_content = False
        self.otel_sink: Any = None
        self.answers: list[dict[str, Any]] = []
        self.waits: dict[str, dict[str, Any]] = {}  # the questions it waits on, by path (calls may ask at once)
        self.refused: list[dict[str, Any]] = []  # answers refused, with why (status shows them)
        self.core: Any = None
        self.run: Any = None
        self.result: dict[str, Any] | None = None
        self.spec: dict[str, Any] = {}
        self.script: Script | None = None
        self.key = ""
        self.machine: MachineSpec | None = None
        self.policy = dict(TEMPORAL_RETRY_DEFAULTS)
        self.heartbeat = TEMPORAL_HEARTBEAT_SECONDS
        self.durability = "call"  # how a call's result is recorded: as an activity, in a segment, with the task
        # --durability segment: answers a segment made and the workflow has not taken yet (by segment_key),
        # every answer taken so far ([key, answer], what the next segment drives the run past), their size
        self.journal: dict[str, Any] = {}
        self.log: list[list[Any]] = []
        self.taken_keys: set[str] = set()
        self.log_bytes = 0  # (and the run's input: a segment is given both)
        self.segment: Any = None  # the segment under way (its task), which effects asked at once await
        self.fruitless_at = -1  # the log's length when a segment made no call: none again before it grows
        self.segments_off = False  # a machine whose runs a segment could make go another way (segments_unsafe)
        self.sent_bytes = 0  # what segments were given so far: it stays in the history
        # a test's run: what each visit saw and produced, and which scripted replies it was served
        self.observed: list[list[Any]] | None = None
        self.served: list[list[Any]] = []
        self.keys: dict[int, str] = {}  # the machines it runs, by id: their keys

    # -- running --------------------------------------------------------------------------------------------

    async def execute(self, spec: dict[str, Any]) -> dict[str, Any]:
        from temporalio import workflow
        from temporalio.exceptions import ApplicationError

        self.spec = spec
        entry = self.machines.get(str(spec.get("key")))
        if entry is None:
            raise ApplicationError(self.machines.refusal(spec, workflow.info().task_queue),
                                   type="MachineNotServed", non_retryable=True)
        self.configure(spec, entry.machine)
        core = self.core = entry.core(workflow.time, spec.get("model_map"), spec.get("max_tokens"))
        run_id = workflow.info().workflow_id
        workspace = str(spec.get("workspace") or temporal_workspace(run_id))
        given = dict(spec.get("inputs") or {})
        self.record_events = bool(spec.get("trace"))
        self.trace_content = bool(spec.get("trace_content"))
        if self.otel is not None:
            self.otel_sink = self.span_sink(spec)
        emit = self.emit if self.record_events or self.otel_sink is not None else None
        try:
            run = core.start(run_id, given, workspace)
        except InputError as exc:
            return self.finish(core.fail_input(run_id, given, workspace, Failure("input", str(exc)), emit))
        run.listen(emit, content=self.trace_content or (self.otel_sink is not None and self.otel_sink.content),
                   stamp=lambda: workflow.now().isoformat(timespec="microseconds"))
        if spec.get("observe"):
            observed: list[list[Any]] = []
            self.observed = observed
            run.observe = lambda kind, state, visit, value: observed.append([kind, state, visit, to_jsonable(value)])
        self.run = run
        core.begin(run, resumed=False)
        return self.finish(await drive(core.execute(run), self))

    def configure(self, spec: dict[str, Any], machine: MachineSpec) -> None:
        """What the run's input says: its machine, script, retries, heartbeat and durability."""
        self.spec = spec
        self.key = str(spec["key"])
        self.machine = machine
        self.script = Script.from_json(spec["script"]) if spec.get("script") is not None else None
        self.policy = temporal_policy(spec)
        self.heartbeat = float(spec.get("heartbeat") or TEMPORAL_HEARTBEAT_SECONDS)
        durability = spec.get("durability")
        self.durability = durability if durability in ("task", "segment") else "call"
        if self.durability == "segment":  # (a segment is given the run's input with the answers taken)
            self.log_bytes = len(json.dumps(spec, default=str))
            self.segments_off = segments_unsafe(machine)

    def workflow_id(self) -> str:
        from temporalio import workflow

        return workflow.info().workflow_id

    def clock(self) -> float:
        from temporalio import workflow

        return workflow.time()

    def span_sink(self, spec: Mapping[str, Any]) -> Any:
        """The run's events as spans (otel.py), under the span of the client that started it. Every span's
        id is planned from the workflow's own identity, and a span is sent only when it ends outside a
        replay: a worker that takes the run over makes the spans of the one before again, with the same ids
        and times, and sends only those that had not ended."""
        from temporalio import workflow

        info = workflow.info()
        sink = self.otel.run_sink(None, self.machine, content=self.trace_content, secrets=self.hidden,
                                  planned=f"{info.workflow_id}:{info.run_id}")
        sink.parent = spec.get("trace_context") if isinstance(spec.get("trace_context"), str) else None
        sink.replaying = workflow.unsafe.is_replaying
        return sink

    def span_context(self) -> dict[str, Any]:
        """What an activity's payload carries of the run's spans: the one it is performed for."""
        return {"trace_context": self.otel_sink.current()} if self.otel_sink is not None else {}

    def finish(self, result: RunResult) -> dict[str, Any]:
        data = result_to_json(result)
        if self.observed is not None:
            data["observed"] = self.observed
            data["served"] = self.served
        self.result = redact_data(data, self.hidden)
        return self.result

    # -- the leaves of the executor skeleton ------------------------------------------------------------

    async def activity(self, name: str, payload: dict[str, Any], seconds: float, summary: str) -> Any:
        """A model or tool call, as the run's durability says: an activity, whose result the history holds
        before the run goes on (`call`, the default), or a local activity, run in this worker and recorded
        with the workflow task (`task`: fewer round trips to the cluster; a worker that dies before the task
        completes leaves its calls to be made again)."""
        from temporalio import workflow

        if self.durability == "task":
            return await workflow.execute_local_activity(
                name, payload, start_to_close_timeout=timedelta(seconds=seconds), retry_policy=self.retry_policy(),
                summary=summary)
        if self.durability == "segment":
            key = segment_key(name, payload)
            answer = await self.from_segment(key)
            if answer is not None:
                return answer
        try:
            answer = await workflow.execute_activity(
                name, payload, start_to_close_timeout=timedelta(seconds=seconds),
                heartbeat_timeout=timedelta(seconds=self.heartbeat), retry_policy=self.retry_policy(),
                summary=summary)
        except BaseException:
            if self.durability == "segment":  # the run took a failure here: no segment drives it past this
                self.taken(key, {SEGMENT_STOPS: True})
            raise
        if self.durability == "segment":
            self.taken(key, answer)
        return answer

    async def from_segment(self, key: str) -> Any:
        """The answer a segment made for the call `key` (--durability segment): one made already, or one the
        segment this starts (or that is under way) makes; None where no segment makes it (the call is then
        an activity of its own, as with `call`)."""
        while True:
            if key in self.journal:
                answer = self.journal.pop(key)
                self.taken(key, answer)
                return answer
            if self.segment is None:
                if (self.segments_off or self.log_bytes > TEMPORAL_SEGMENT_LOG_BYTES
                        or self.sent_bytes + self.log_bytes > TEMPORAL_SEGMENT_HISTORY_BYTES
                        or len(self.log) == self.fruitless_at):
                    return None
                self.sent_bytes += self.log_bytes
                self.segment = asyncio.ensure_future(self.run_segment())
            await asyncio.shield(self.segment)  # (it is None again once done, for everyone waiting on it)

    async def run_segment(self) -> int:
        """One segment (TemporalActivities.run_segment): how many calls it made, now in the journal."""
        from temporalio import workflow
        from temporalio.exceptions import ActivityError

        run = self.run
        payload = {"spec": self.spec, "log": self.log, "run_id": workflow.info().workflow_id,
                   "workspace": run.workspace if run is not None else "",
                   "started": run.started if run is not None else workflow.time(), **self.span_context()}
        limit = self.machine.limits.seconds if self.machine is not None else None
        seconds = limit + 60.0 if limit is not None else 24 * 3600.0
        made = 0
        try:
            answer = await workflow.execute_activity(
                TEMPORAL_RUN_SEGMENT, payload, start_to_close_timeout=timedelta(seconds=seconds),
                heartbeat_timeout=timedelta(seconds=self.heartbeat), retry_policy=self.retry_policy(),
                summary="calls, each recorded before the next")
            made = self.take_journal(answer.get("journal"))
        except ActivityError as exc:  # its last attempt failed: the calls it recorded were made all the same
            details = getattr(exc.cause, "last_heartbeat_details", None) or ()
            made = self.take_journal(details[0] if details else None)
            # (the calls after them are made one activity each, as with `call`)
        finally:
            self.segment = None
            if not made:
                self.fruitless_at = len(self.log)
        return made

    def take_journal(self, journal: Any) -> int:
        """Keep the calls a segment made (as [key, answer] pairs) for the effects that will ask for them."""
        made = 0
        for item in journal if isinstance(journal, list) else ():
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                continue
            key, value = item
            if key not in self.journal and key not in self.taken_keys:
                self.journal[key] = value
                made += 1
        return made

    def taken(self, key: str, answer: Any) -> None:
        """An answer the run took: the next segment drives the run past it."""
        self.log.append([key, answer])
        self.taken_keys.add(key)
        self.log_bytes += len(json.dumps(answer, default=str))

    def retry_policy(self) -> Any:
        from temporalio.common import RetryPolicy

        policy = self.policy
        return RetryPolicy(initial_interval=timedelta(seconds=max(policy["retry_delay"], 0.01)),
                           backoff_coefficient=2.0, maximum_interval=timedelta(seconds=policy["max_delay"]),
                           maximum_attempts=int(policy["retries"]) + 1)

    def key_of(self, machine: MachineSpec | None) -> str:
        """The key of the machine whose tools an effect uses (the run's own, or one it runs)."""
        if machine is None or machine is self.machine:
            return self.key
        key = self.keys.get(id(machine))
        if key is None:
            key = self.keys[id(machine)] = machine_key(machine)
        return key

    def script_for(self, role: str, state: str) -> dict[str, Any] | None:
        if self.script is None:
            return None
        return script_to_json(self.script, (role, state))

    async def call_model(self, effect: CallModel) -> ModelResponse:
        from temporalio.exceptions import ActivityError
        from temporalio.exceptions import TimeoutError as ActivityTimeout

        request = effect.request
        identity = request.metadata.get("statewright") or {}
        models = 1 + len(request.fallbacks)
        seconds = self.policy["timeout"] * models + 10.0  # the client's own deadlines end the call first
        if request.timeout is not None:
            seconds = min(seconds, request.timeout + 5.0)
        payload = {"request": request_to_json(request), "policy": self.policy, "heartbeat": self.heartbeat / 3,
                   "script": self.script_for(str(identity.get("role") or request.role), _where(request)),
                   **self.span_context()}
        try:
            answer = await self.activity(TEMPORAL_CALL_MODEL, payload, max(seconds, 1.0),
                                         f"{request.role} {request.state}")
        except ActivityError as exc:
            cause = exc.cause or exc
            error = ModelError(request.model, f"the model call's activity failed: {cause}",
                               int(self.policy["retries"]) + 1)
            if request.timeout is not None and isinstance(cause, ActivityTimeout):
                error.limit = "seconds"  # type: ignore[attr-defined]  # the run's own time ran out
            raise error from None
        self.served.extend(answer.get("served") or ())
        if "error" in answer:
            raise RemoteModelError(answer["error"])
        return response_from_json(answer["response"])

    async def call_tool(self, effect: CallTool) -> ToolOutcome:
        from temporalio.exceptions import ActivityError

        where = effect.where
        scripted = effect.agent is None and self.script is not None and self.script.has("tool", where)
        payload = {"key": self.key_of(effect.machine), "state": where, "tool": effect.tool,
                   "args": to_jsonable(effect.args),
                   "seq": effect.seq, "item": effect.item, "run_id": self.workflow_id(),
                   "heartbeat": self.heartbeat / 3,
                   "workspace": self.run.workspace if self.run is not None else "",
                   "script": self.script_for("tool", where) if scripted else None, **self.span_context()}
        seconds = TEMPORAL_TOOL_TIMEOUT_SECONDS
        limit = self.machine.limits.seconds if self.machine is not None else None
        if limit is not None and self.run is not None:
            seconds = max(1.0, limit - (self.run.elapsed_before + self.clock() - self.run.started) + 5.0)
        try:
            answer = await self.activity(TEMPORAL_CALL_TOOL, payload, seconds, f"{effect.tool} in {effect.state}")
        except ActivityError as exc:
            raise RemoteToolError({"message": f"the tool call's activity failed: {exc.cause or exc}"}) from None
        self.served.extend(answer.get("served") or ())
        if "error" in answer:
            raise RemoteToolError(answer["error"])
        outcome = answer["outcome"]
        return ToolOutcome(outcome.get("value"), float(outcome.get("latency_ms") or 0.0),
                           scripted=bool(outcome.get("scripted")))

    async def estimate(self, effect: EstimateCall) -> tuple[int, float]:
        from temporalio import workflow

        request = effect.request
        identity = request.metadata.get("statewright") or {}
        payload = {"request": request_to_json(request), "policy": self.policy,
                   "script": self.script_for(str(identity.get("role") or request.role), _where(request))}
        tokens, cost = await workflow.execute_local_activity(
            TEMPORAL_ESTIMATE, payload, start_to_close_timeout=timedelta(seconds=60))
        return int(tokens), float(cost)

    async def describe_tools(self, effect: DescribeTools) -> tuple[list[dict[str, Any]], dict[str, str]]:
        from temporalio import workflow

        payload = {"key": self.key_of(effect.machine), "tools": list(effect.tools),
                   "workspace": self.run.workspace if self.run is not None else ""}
        answer = await workflow.execute_local_activity(
            TEMPORAL_DESCRIBE_TOOLS, payload, start_to_close_timeout=timedelta(seconds=120))
        if "error" in answer:
            raise RemoteToolError(answer["error"])
        return list(answer["schemas"]), dict(answer["names"])

    async def await_person(self, effect: AwaitPerson) -> PersonReply:
        reply = await self.person(effect)
        if self.durability == "segment":  # a segment drives the run past it as the workflow took it
            self.taken(person_key(effect), {"kind": reply.kind, "now": reply.now, "value": reply.value,
                                            "scripted": reply.scripted})
        return reply

    async def person(self, effect: AwaitPerson) -> PersonReply:
        """Wait for a person's answer: the `answer` signal brings it, a durable timer bounds the wait.

        Unlike a local run, which pauses, the workflow itself waits: it is durable already. An answer that
        does not fit the question is refused (traced as `answer_refused`, shown by `status`) and the wait
        goes on; the deadline is the one the core set when the question was first put."""
        from temporalio import workflow

        state = effect.where  # (a question of a machine the run runs is answered by its path)
        now = workflow.now().timestamp()
        deadline = effect.deadline if effect.deadline is not None else (
            None if effect.seconds is None else now + effect.seconds)
        found = self.script.answer(state, effect.seq, effect.item) if self.script is not None else None
        if found is not None:
            reply, where, number = found
            self.served.append(["person", where, number])
            value = reply.value
            if value.get("timeout"):
                return PersonReply("timeout", now, scripted=True)
            return PersonReply("answer", now, value.get("answer"), scripted=True)
        self.waits[state] = {"state": effect.state, "path": state, "question": effect.question,
                             "answer_schema": effect.schema, "deadline": deadline,
                             "since": workflow.now().isoformat(timespec="seconds")}
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
                    self.core.check_answer(self.run, answer.get("answer"), state)
                except AnswerError as exc:
                    self.refused.append(redact_data(  # shown by `status`: a sink like the others
                        {"answer": answer.get("answer"), "error": str(exc), "id": answer.get("id")}, self.hidden))
                    if self.run is not None and self.run.events:
                        self.run.emit("answer_refused", {"state": state, "error": str(exc), "by": answer.get("by")})
                    continue
                if self.run is not None and self.run.events and answer.get("by"):
                    self.run.emit("answered_by", {"state": state, "by": answer.get("by")})
                return PersonReply("answer", workflow.now().timestamp(), answer.get("answer"))
        finally:
            self.waits.pop(state, None)

    def first_answer(self, state: str | None) -> int | None:
        for index, answer in enumerate(self.answers):
            if answer.get("state") in (None, state):
                return index
        return None

    # -- what the world reads and sends ---------------------------------------------------------------------

    def emit(self, event: str, fields: dict[str, Any]) -> None:
        from temporalio import workflow

        if self.otel_sink is not None:
            self.otel_sink.record(event, fields, workflow.time_ns())
            if not self.record_events:
                return
            if not self.trace_content:
                from .otel_names import otel_without_content

                fields = otel_without_content(event, fields)
        record = {"event": event, "time": workflow.now().isoformat(timespec="microseconds")}
        record.update(fields)
        record["event"] = event
        self.events.append(redacted_json(record, self.hidden))

    def take_answer(self, payload: dict[str, Any]) -> None:
        """An answer, for the question at its path (or whichever is asked first): one for a path where the
        machine asks nobody is refused at once rather than kept for a question that never comes."""
        path = payload.get("state")
        if path and self.machine is not None:
            found = state_at(self.machine, re.sub(r"\[[0-9]+\]$", "", str(path)))  # (a map element's call)
            if found is None or (found.kind != "human" and not found.ask_before):
                self.refused.append({"answer": payload.get("answer"), "id": payload.get("id"),
                                     "error": f"the machine asks no question at {path}"})
                return
        self.answers.append(dict(payload))

    def status(self) -> dict[str, Any]:
        from temporalio import workflow

        run = self.run
        waits = list(self.waits.values())
        status = "waiting" if waits else "running"
        if self.result is not None:
            status = str(self.result["status"])
        data: dict[str, Any] = {"run_id": workflow.info().workflow_id, "machine": self.spec.get("machine"),
                                "status": status, "waiting": waits[0] if waits else None, "waits": waits,
                                "refused": self.refused[-20:], "events": len(self.events),
                                "answers_queued": len(self.answers),
                                "queued": [a.get("id") for a in self.answers if a.get("id")]}
        if run is not None:
            data.update(state=run.state, steps=run.steps, path=list(run.path), usage=run.usage.to_json())
        if self.result is not None:
            data["result"] = self.result
        return data

    def trace_page(self, offset: int) -> dict[str, Any]:
        page = self.events[offset:offset + TEMPORAL_TRACE_PAGE]
        return {"events": page, "next": offset + len(page), "total": len(self.events)}


class SegmentPerformer(TemporalWorkflow):
    """A run's effects as a segment activity performs them (TemporalActivities.run_segment): the workflow's
    own leaves (the same payloads, the same answers), but a call is made here, in this worker, and recorded
    on the server before the run goes on; an effect the workflow took already is answered as it was.

    It is no workflow: it reads the wall clock, and the run's id from the segment's input."""

    def __init__(self, activities: TemporalActivities, payload: Mapping[str, Any],
                 recorded: list[list[Any]]) -> None:
        super().__init__()
        self.activities = activities
        self.payload = payload
        entry = activities.machines.get(str(payload["spec"].get("key")))
        if entry is not None:
            self.configure(dict(payload["spec"]), entry.machine)
        self.durability = "call"  # (its leaves: see `activity`)
        self.known: dict[str, Any] = {str(key): answer for key, answer in payload.get("log") or ()}
        self.known.update((str(key), answer) for key, answer in recorded)  # an earlier attempt's calls
        self.made: list[list[Any]] = list(recorded)  # [key, answer] of every call this segment made
        self.size = sum(len(json.dumps(answer, default=str)) for _, answer in recorded)
        self.stopping = False
        self.active = 0
        self.quiet = asyncio.Event()
        self.quiet.set()
        self.sending = asyncio.Lock()
        self.wanted = True

    def workflow_id(self) -> str:
        return str(self.payload["run_id"])

    def clock(self) -> float:
        return time.time()

    async def activity(self, name: str, payload: dict[str, Any], seconds: float, summary: str) -> Any:
        key = segment_key(name, payload)
        if key in self.known:
            known = self.known.pop(key)
            if isinstance(known, dict) and known.get(SEGMENT_STOPS):
                await self.stop()  # (the workflow's activity failed here: a segment cannot answer as it did)
            return known
        if self.stopping or self.size > TEMPORAL_SEGMENT_BYTES:
            await self.stop()
        payload = {**payload, "heartbeat": 0}  # (this segment's own heartbeat says it is alive)
        self.active += 1
        self.quiet.clear()
        try:
            if name == TEMPORAL_CALL_MODEL:
                answer = await self.activities.call_model(payload)
            else:
                answer = await self.activities.call_tool(payload)
            self.made.append([key, answer])
            self.size += len(json.dumps(answer, default=str))
            await self.send()
        finally:
            self.active -= 1
            if not self.active:
                self.quiet.set()
        if not self.wanted:
            raise SegmentEnd()
        return answer

    async def send(self) -> None:
        """Record every call made so far (one heartbeat at a time, so none overtakes a later one)."""
        async with self.sending:
            if self.wanted and not await self.activities.record(self.made):
                self.wanted = False

    async def keep_beating(self) -> None:
        """Heartbeat while calls take long, with what is recorded already (so the details never go back)."""
        while self.wanted:
            await asyncio.sleep(max(self.heartbeat / 3, 0.1))
            await self.send()

    async def stop(self) -> None:
        """End the segment once the calls under way are made and recorded (none is started after this)."""
        self.stopping = True
        await self.quiet.wait()
        raise SegmentEnd()

    async def person(self, effect: AwaitPerson) -> PersonReply:
        known = self.known.pop(person_key(effect), None)
        if known is None:  # a question the workflow has not had answered yet: the workflow waits for it
            await self.stop()
        return PersonReply(str(known["kind"]), float(known["now"]), known.get("value"), bool(known.get("scripted")))

    async def estimate(self, effect: EstimateCall) -> tuple[int, float]:
        request = effect.request
        identity = request.metadata.get("statewright") or {}
        payload = {"request": request_to_json(request), "policy": self.policy,
                   "script": self.script_for(str(identity.get("role") or request.role), _where(request))}
        await self.activities.ready(payload)
        tokens, cost = self.activities.estimate(payload)
        return int(tokens), float(cost)

    async def describe_tools(self, effect: DescribeTools) -> tuple[list[dict[str, Any]], dict[str, str]]:
        payload = {"key": self.key_of(effect.machine), "tools": list(effect.tools),
                   "workspace": self.run.workspace if self.run is not None else ""}
        answer = self.activities.describe_tools(payload)
        if "error" in answer:
            raise RemoteToolError(answer["error"])
        return list(answer["schemas"]), dict(answer["names"])


def temporal_workflow_class(machines: TemporalMachines, secrets: Sequence[str] | None = None,
                            otel: Any = None) -> type:
    """The workflow one worker runs: TemporalWorkflow bound to the machines it serves, with Temporal's
    decorators applied (temporalio requires the run method on the class it defines)."""
    from temporalio import workflow

    async def run(self: TemporalWorkflow, spec: dict) -> dict:
        return await TemporalWorkflow.execute(self, spec)

    def answer(self: TemporalWorkflow, payload: dict) -> None:
        TemporalWorkflow.take_answer(self, payload)

    def status(self: TemporalWorkflow) -> dict:
        return TemporalWorkflow.status(self)

    def trace(self: TemporalWorkflow, offset: int) -> dict:
        return TemporalWorkflow.trace_page(self, offset)

    for function in (run, answer, status, trace):
        function.__qualname__ = f"StatewrightRun.{function.__name__}"
    members = {"machines": machines, "hidden": list(secret_values() if secrets is None else secrets),
               "__module__": __name__, "run": workflow.run(run), "otel": otel,
               "answer": workflow.signal(name=TEMPORAL_ANSWER_SIGNAL)(answer),
               "status": workflow.query(name="status")(status), "trace": workflow.query(name="trace")(trace)}
    bound = type("StatewrightRun", (TemporalWorkflow,), members)
    # a workflow input that cannot be read (a bad script) fails the run; it would fail every retry alike
    return workflow.defn(name=TEMPORAL_WORKFLOW, sandboxed=False, failure_exception_types=[ScriptError])(bound)


# ---- the worker ---------------------------------------------------------------------------------------------


async def temporal_serve(machines: Sequence[MachineSpec], address: str, *, task_queue: str | None = None,
                         concurrency: int = 64, namespace: str = TEMPORAL_DEFAULT_NAMESPACE,
                         registry: TemporalMachines | None = None, stop: asyncio.Event | None = None,
                         announce: Callable[[str], None] | None = None, unsafe_tools: bool = False,
                         otel: Any = None) -> None:
    """Serve `machines` until `stop` is set (or SIGTERM/SIGINT): one Temporal worker per task queue, each
    machine on `task_queue` or its own `default_task_queue`. `concurrency` caps the activities (model and
    tool calls) this process runs at once; `unsafe_tools` lets std.python and std.shell run unconfined where
    their jail cannot run (as a local run's --unsafe-tools). `otel` (an otel.OtelTelemetry) makes the runs'
    spans and metrics, and a span of each activity."""
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
    run_class = temporal_workflow_class(registry, sorted(set(hidden), key=len, reverse=True), otel)
    activities = TemporalActivities(registry, unsafe_tools=unsafe_tools, secrets=tool_secrets,
                                    otel=otel, client=client, segment_performer=SegmentPerformer).definitions()
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
