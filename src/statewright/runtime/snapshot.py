"""The run state a checkpoint keeps: a typed, versioned snapshot, and the typed delta each save adds to it.

A save (`make_delta`) writes a `Delta`: the run's `Head` — small, rewritten each time: status, the state to
run next, usage, the question a person was asked, the branches under way — and the `Changes` since the last
save: outputs produced, counters that moved, log items appended (the path, agents' memories). The store
(checkpoint.py) keeps the latest head and the changes in order; loading replays them into a `Snapshot`
(`Snapshot.apply`), and `revive_run` turns a snapshot back into the `Run` the core continues.

Everything read back is checked against this shape and against the machine: a field of the wrong type, a
state the machine lacks, an output that no longer validates, a value nested deeper than `MAX_SNAPSHOT_DEPTH`
(the limit of a record the runtime wrote, untrusted.MAX_RECORD_DEPTH) or a snapshot of a newer version is a `SnapshotError`, which the engine reports as a damaged checkpoint
that cannot be resumed — never an internal error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .memory import AgentMemory
from .plan import MachinePlan
from .result import Failure, Usage
from .run_state import Question, Run
from .structured import to_jsonable, validate_typed
from .untrusted import MAX_RECORD_CHARS, MAX_RECORD_DEPTH, BorderError, read_record
from .variables import read_var_ops

SNAPSHOT_VERSION = 3  # 3: run variables (the "vars" log, a branch's "writes") and tool calls waiting for approval
# how deep a value in a checkpoint may nest (a model's output is read back through pydantic, which recurses)
MAX_SNAPSHOT_DEPTH = MAX_RECORD_DEPTH
RUN_STATUSES = ("running", "waiting", "final", "failed")
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


class SnapshotError(ValueError):
    """A checkpoint record that does not fit the snapshot's shape or the machine: the message says where."""


# ---- the records ---------------------------------------------------------------------------------------


@dataclass
class TaskRecord:
    """One branch or map element under way: where it is, and what it did up to its last finished step."""

    state: str
    last: str | None = None
    feedback: str | None = None
    path: list[str] = field(default_factory=list)
    memory: dict[str, list[Any]] = field(default_factory=dict)  # messages it added, by agent
    done: bool = False
    output: Any = None  # a finished map element's output (JSON)
    events: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)  # held back
    writes: list[Any] = field(default_factory=list)  # its updates of run variables, [variable, reducer, value]


@dataclass
class FanOutRecord:
    """The branches of a parallel state or the elements of a map under way (kind "parallel" or "map")."""

    state: str
    kind: str
    base: int = 0  # a map's first element, numbered over the run
    finished: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    tasks: list[TaskRecord] = field(default_factory=list)


@dataclass
class Head:
    """What a save rewrites: the run as of its last transition, without its growing parts."""

    machine: str
    source_sha256: str
    status: str
    state: str
    version: int = SNAPSHOT_VERSION
    feedback: str | None = None
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    elapsed: float = 0.0
    last_state: str | None = None
    result: Any = None
    final_state: str | None = None
    failure: Failure | None = None
    workspace: str | None = None
    waiting: Question | None = None
    source_path: str = ""
    fanout: FanOutRecord | None = None
    # how the run was started, so that resuming it needs only its id: {"script": an absolute path}
    options: dict[str, str] = field(default_factory=dict)
    # the calls under way (machines the run runs), by key (`state#n`, `state[item]`): each one's own head
    calls: dict[str, Head] = field(default_factory=dict)
    # the W3C traceparent of the run's span (otel.py): a resumed run's spans join the same trace
    trace_context: str | None = None


# the head of a call that ended: its changes are in the log, and are not revived
_ENDED_CALL = Head(machine="", source_sha256="", status="final", state="")


@dataclass
class Changes:
    """What one save adds: entries of the mappings that changed, and items appended to the logs."""

    inputs: dict[str, Any] | None = None  # the run's first save only
    outputs: dict[str, Any] = field(default_factory=dict)
    visits: dict[str, int] = field(default_factory=dict)
    edges: dict[str, int] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    logs: dict[str, list[Any]] = field(default_factory=dict)  # "path", "memory:AGENT", "vars" -> appended items
    calls: dict[str, Changes] = field(default_factory=dict)  # each call's own changes, by its key
    # tool calls waiting for approval, by where they are: the record (JSON), or None once answered
    approvals: dict[str, Any] = field(default_factory=dict)

    def empty(self) -> bool:
        return (self.inputs is None and not self.outputs and not self.visits and not self.edges
                and not self.seqs and not self.logs and not self.calls and not self.approvals)


@dataclass
class Delta:
    """One save: the new head, and what changed since the save before."""

    head: Head
    changes: Changes


@dataclass
class Snapshot:
    """A run as its checkpoints left it: the latest head with every change replayed."""

    head: Head
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    visits: dict[str, int] = field(default_factory=dict)
    edges: dict[str, int] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    logs: dict[str, list[Any]] = field(default_factory=dict)
    calls: dict[str, Snapshot] = field(default_factory=dict)  # the calls under way, each as its own snapshot
    approvals: dict[str, Any] = field(default_factory=dict)  # tool calls waiting for approval (JSON records)

    def apply(self, changes: Changes) -> None:
        """Merge one save's changes: mappings key by key, logs extended, each call's changes into its own."""
        if changes.inputs is not None:
            self.inputs = changes.inputs
        self.outputs.update(changes.outputs)
        self.visits.update(changes.visits)
        self.edges.update(changes.edges)
        self.seqs.update(changes.seqs)
        for name, items in changes.logs.items():
            self.logs.setdefault(name, []).extend(items)
        for key, record in changes.approvals.items():
            if record is None:
                self.approvals.pop(key, None)
            else:
                self.approvals[key] = record
        for key, child in changes.calls.items():
            snapshot = self.calls.get(key)
            if snapshot is None:  # (its head is the latest one the run saved; a call that ended has none)
                snapshot = self.calls[key] = Snapshot(self.head.calls.get(key) or _ENDED_CALL)
            snapshot.apply(child)

    def prune(self) -> None:
        """Forget the calls that ended: only those under way when the last save was made are revived."""
        self.calls = {key: child for key, child in self.calls.items() if key in self.head.calls}
        for child in self.calls.values():
            child.prune()


# ---- as JSON -------------------------------------------------------------------------------------------


def head_to_json(head: Head) -> dict[str, Any]:
    return {**head_fixed_json(head), **head_moving_json(head)}


def head_fixed_json(head: Head) -> dict[str, Any]:
    """The fields of a head that stay as they are for the whole run (a store writes their JSON once)."""
    return {"version": head.version, "machine": head.machine, "source_sha256": head.source_sha256,
            "workspace": head.workspace, "source_path": head.source_path,
            **({"options": head.options} if head.options else {})}


def head_moving_json(head: Head) -> dict[str, Any]:
    """The fields of a head that a transition may change."""
    fanout = head.fanout
    return {
        "status": head.status, "state": head.state, "feedback": head.feedback, "usage": head.usage.to_json(),
        "steps": head.steps, "elapsed": head.elapsed, "last_state": head.last_state, "result": head.result,
        "final_state": head.final_state, "failure": head.failure.to_json() if head.failure else None,
        "waiting": head.waiting.to_json() if head.waiting else None,
        "fanout": _fanout_to_json(fanout) if fanout is not None else None,
        **({"calls": {key: head_to_json(child) for key, child in head.calls.items()}} if head.calls else {}),
        **({"trace_context": head.trace_context} if head.trace_context else {}),
    }


def _fanout_to_json(fan: FanOutRecord) -> dict[str, Any]:
    tasks = []
    for t in fan.tasks:
        record: dict[str, Any] = {"state": t.state, "last": t.last, "feedback": t.feedback, "path": t.path,
                                  "memory": t.memory, "done": t.done}
        if t.done and fan.kind == "map":
            record["output"] = t.output
        if t.events:
            record["events"] = [[e, f, at] for e, f, at in t.events]
        if t.writes:
            record["writes"] = [list(op) for op in t.writes]
        tasks.append(record)
    return {"state": fan.state, "kind": fan.kind, "base": fan.base, "finished": fan.finished,
            "accepted": fan.accepted, "tasks": tasks}


def changes_to_json(changes: Changes) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if changes.inputs is not None:
        data["inputs"] = changes.inputs
    for name in ("outputs", "visits", "edges", "seqs"):
        values = getattr(changes, name)
        if values:
            data[name] = values
    data.update(changes.logs)
    if changes.approvals:
        data["approvals"] = changes.approvals
    if changes.calls:
        data["calls"] = {key: changes_to_json(child) for key, child in changes.calls.items()}
    return data


class _Fields:
    """Reads the fields of one JSON object of a checkpoint, each checked for its type; `where` names the
    object in the messages."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise SnapshotError(f"{where} is {_kind(data)}, not an object")
        self.data = data
        self.where = where

    def _get(self, name: str, kinds: tuple[type, ...], what: str, required: bool) -> Any:
        value = self.data.get(name)
        if value is None:
            if required:
                raise SnapshotError(f"{self.where} has no {name}")
            return None
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise SnapshotError(f"{self.where}: {name} is {_kind(value)}, not {what}")
        return value

    def text(self, name: str, *, optional: bool = False) -> Any:
        return self._get(name, (str,), "text", not optional)

    def whole(self, name: str, default: int = 0) -> int:
        value = self._get(name, (int,), "a whole number", False)
        return default if value is None else int(value)

    def number(self, name: str, default: float = 0.0) -> float:
        value = self._get(name, (int, float), "a number", False)
        return default if value is None else float(value)

    def truth(self, name: str, default: bool = False) -> bool:
        value = self._get(name, (bool,), "true or false", False)
        return default if value is None else bool(value)

    def obj(self, name: str) -> dict[str, Any]:
        return dict(self._get(name, (dict,), "an object", False) or {})

    def items(self, name: str) -> list[Any]:
        return list(self._get(name, (list,), "a list", False) or [])

    def counters(self, name: str) -> dict[str, int]:
        values = self.obj(name)
        for key, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SnapshotError(f"{self.where}: {name}[{key!r}] is {_kind(value)}, not a count")
        return values

    def names(self, name: str) -> list[str]:
        values = self.items(name)
        for value in values:
            if not isinstance(value, str):
                raise SnapshotError(f"{self.where}: {name} holds {_kind(value)}, not a state's name")
        return values


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def read_snapshot_json(text: str, where: str, *, plural: bool = False) -> Any:
    """A checkpoint record's JSON, refused before it is parsed when it nests deeper or is larger than a
    record may be (the runtime's one guard, untrusted.py: Python's JSON reader recurses, and so does
    validating the outputs in it)."""
    try:
        return read_record(text, where)
    except BorderError as exc:
        problem = f"{'nest' if plural else 'nests'} too deeply" if exc.limit == "depth" else (
            f"{'are' if plural else 'is'} too large")
        raise SnapshotError(f"{where} {problem} (at most {MAX_SNAPSHOT_DEPTH} levels and "
                            f"{MAX_RECORD_CHARS:,} characters are read)") from None
    except ValueError:
        raise SnapshotError(f"{where} {'do' if plural else 'does'} not read as JSON") from None


def read_head(data: Any) -> Head:
    """A head from its JSON, every field checked."""
    f = _Fields(data, "the run's record")
    version = f.whole("version", SNAPSHOT_VERSION)
    if version > SNAPSHOT_VERSION:
        raise SnapshotError(f"the run's record is of snapshot version {version}, newer than this statewright "
                            f"reads ({SNAPSHOT_VERSION}): resume it with the statewright that made it")
    status = f.text("status")
    if status not in RUN_STATUSES:
        raise SnapshotError(f"the run's record has the status {status!r}, not one of {', '.join(RUN_STATUSES)}")
    usage = _Fields(f.obj("usage"), "the run's usage")
    failure = None
    if f.data.get("failure") is not None:
        record = _Fields(f.data["failure"], "the run's failure")
        failure = Failure(record.text("kind"), record.text("message"), record.text("state", optional=True),
                          record.text("limit", optional=True), record.text("origin", optional=True) or "")
    return Head(
        version=version, machine=f.text("machine"), source_sha256=f.text("source_sha256", optional=True) or "",
        status=status, state=f.text("state"), feedback=f.text("feedback", optional=True),
        usage=Usage(usage.whole("prompt_tokens"), usage.whole("completion_tokens"), usage.number("cost_usd"),
                    usage.whole("llm_calls")),
        steps=f.whole("steps"), elapsed=f.number("elapsed"), last_state=f.text("last_state", optional=True),
        result=f.data.get("result"), final_state=f.text("final_state", optional=True), failure=failure,
        workspace=f.text("workspace", optional=True),
        waiting=_read_question(f.data["waiting"]) if f.data.get("waiting") is not None else None,
        source_path=f.text("source_path", optional=True) or "",
        fanout=_read_fanout(f.data["fanout"]) if f.data.get("fanout") is not None else None,
        options=_read_options(f.obj("options")),
        calls={str(key): read_head(child) for key, child in f.obj("calls").items()},
        trace_context=_read_trace_context(f.text("trace_context", optional=True)),
    )


def _read_trace_context(text: str | None) -> str | None:
    if text is not None and not _TRACEPARENT.fullmatch(text):
        raise SnapshotError(f"the run's record: trace_context {text[:80]!r} is not a W3C traceparent")
    return text


def _read_options(data: dict[str, Any]) -> dict[str, str]:
    for name, value in data.items():
        if not isinstance(value, str):
            raise SnapshotError(f"the run's record: options[{name!r}] is {_kind(value)}, not text")
    return data


def _read_question(data: Any) -> Question:
    f = _Fields(data, "the question the run waits on")
    asked = f.data.get("asked_at")
    deadline = f.data.get("deadline")
    return Question(f.text("state"), f.text("question"), f.whole("seq"),
                    f.number("asked_at") if asked is not None else None,
                    f.number("deadline") if deadline is not None else None)


def _read_fanout(data: Any) -> FanOutRecord:
    f = _Fields(data, "the branches under way")
    kind = f.text("kind")
    if kind not in ("parallel", "map"):
        raise SnapshotError(f"the branches under way are of kind {kind!r}, not parallel or map")
    fan = FanOutRecord(f.text("state"), kind, f.whole("base"), _indexes(f, "finished"), _indexes(f, "accepted"))
    for number, item in enumerate(f.items("tasks")):
        t = _Fields(item, f"branch {number + 1} under way")
        memory = t.obj("memory")
        for agent, messages in memory.items():
            if not isinstance(messages, list):
                raise SnapshotError(f"branch {number + 1} under way: memory[{agent!r}] is not a list")
        events = []
        for event in t.items("events"):
            if (not isinstance(event, list) or len(event) != 3 or not isinstance(event[0], str)
                    or not isinstance(event[1], dict) or not isinstance(event[2], (str, type(None)))):
                raise SnapshotError(f"branch {number + 1} under way holds an event that is not [name, fields, time]")
            events.append((event[0], event[1], event[2]))
        try:
            writes = read_var_ops(t.items("writes"), f"branch {number + 1} under way")
        except ValueError as exc:
            raise SnapshotError(str(exc)) from None
        fan.tasks.append(TaskRecord(t.text("state"), t.text("last", optional=True), t.text("feedback", optional=True),
                                    t.names("path"), memory, t.truth("done"), t.data.get("output"), events,
                                    [list(op) for op in writes]))
    for index in (*fan.finished, *fan.accepted):
        if index >= len(fan.tasks):
            raise SnapshotError(f"the branches under way name branch {index + 1} of {len(fan.tasks)}")
    return fan


def _indexes(f: _Fields, name: str) -> list[int]:
    values = f.items(name)
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SnapshotError(f"{f.where}: {name} holds {_kind(value)}, not a branch's position")
    return values


def read_changes(data: Any, where: str) -> Changes:
    """One save's changes from their JSON, every field checked."""
    f = _Fields(data, where)
    changes = Changes(
        inputs=f.obj("inputs") if "inputs" in f.data else None, outputs=f.obj("outputs"),
        visits=f.counters("visits"), edges=f.counters("edges"), seqs=f.counters("seqs"))
    for key, child in f.obj("calls").items():
        changes.calls[str(key)] = read_changes(child, f"{where}, call {key}")
    changes.approvals = {str(key): record for key, record in f.obj("approvals").items()}
    for name, items in f.data.items():
        if name in ("inputs", "outputs", "visits", "edges", "seqs", "calls", "approvals"):
            continue
        if name not in ("path", "vars") and not name.startswith("memory:"):
            raise SnapshotError(f"{where} holds {name!r}, which no save writes")
        if not isinstance(items, list):
            raise SnapshotError(f"{where}: {name} is {_kind(items)}, not a list")
        changes.logs[name] = items
    return changes


# ---- from a run and back -------------------------------------------------------------------------------


def make_delta(plan: MachinePlan, run: Run, status: str, elapsed: float, *, result: Any = None,
               final_state: str | None = None, failure: Failure | None = None) -> Delta:
    """A save of `run`: its head, and only what changed since the last save (so a save costs the same however
    much the run holds). Marks what it took as saved."""
    changed = run.changed
    assert changed is not None
    changes = Changes()
    if not run.saved_logs:  # the run's first record carries what never changes
        changes.inputs = run.inputs_json
    if changed["approvals"]:
        changes.approvals = {key: run.approvals[key].to_json() if key in run.approvals else None
                             for key in sorted(changed["approvals"])}
        changed["approvals"].clear()
    for mapping, values in (("outputs", run.outputs), ("visits", run.visits), ("edges", run.edges),
                            ("seqs", run.seqs)):
        keys = changed[mapping]
        if keys:
            if mapping == "outputs":
                changes.outputs = {name: stored_output(plan, name, values[name]) for name in keys}
            else:
                setattr(changes, mapping, {name: values[name] for name in keys})
            keys.clear()
    logs: dict[str, list[Any]] = {"path": run.path}
    if run.var_log:
        logs["vars"] = run.var_log
    for name, memory in run.memories.items():
        if memory.policy != "none":
            logs["memory:" + name] = memory.messages
    for name, items in logs.items():
        saved = run.saved_logs.get(name, 0)
        if len(items) > saved:
            changes.logs[name] = items[saved:]
        run.saved_logs[name] = len(items)
    machine = plan.machine
    head = Head(machine=machine.name, source_sha256=machine.source_sha256, status=status, state=run.state,
                feedback=run.feedback, usage=Usage(**run.usage.to_json()), steps=run.steps, elapsed=elapsed,
                last_state=run.last_state, result=result, final_state=final_state, failure=failure,
                workspace=run.workspace, waiting=run.waiting, source_path=machine.source_path,
                fanout=run.fanout.to_record() if run.fanout is not None else None, calls=dict(run.call_heads),
                trace_context=run.trace_context)
    return Delta(head, changes)


def stored_output(plan: MachinePlan, state: str, output: Any) -> Any:
    """An output as a checkpoint keeps it (JSON): a variant with the name of its type, so it revives as it
    was."""
    state_plan = plan.states.get(state)
    if state_plan is not None and state_plan.variant:
        from .variants import tagged

        output = tagged(output)
    return to_jsonable(output)


def revive_output(plan: MachinePlan, state: str, data: Any) -> Any:
    """An output read back from a checkpoint, validated against its state's type again."""
    spec = plan.machine.states.get(state)
    if spec is not None and spec.run is not None and data is not None:  # a call's outcome (a map's: a list)
        from .calls import revive_outcome

        callee = plan.machine.machines[spec.run.machine]
        if spec.each is not None and isinstance(data, list):
            return [revive_outcome(callee, item) for item in data]
        return revive_outcome(callee, data)
    if spec is None or spec.output is None or data is None:
        return data
    if (spec.each is not None or spec.parallel is not None) and isinstance(data, list):
        return [validate_typed(spec.output, item, spec.output_wrapped) for item in data]  # one per element
    return validate_typed(spec.output, data, spec.output_wrapped)


def check_fits(plan: MachinePlan, snapshot: Snapshot) -> None:
    """SnapshotError when the snapshot names a state, an agent or a question the machine does not have."""
    states = plan.machine.states
    head = snapshot.head

    def state(name: str | None, what: str) -> None:
        if name is not None and name not in states:
            raise SnapshotError(f"{what} is '{name}', a state the machine does not have")

    state(head.state, "the state to run next")
    state(head.last_state, "the last state run")
    state(head.final_state, "the final state")
    for name in (*snapshot.outputs, *snapshot.visits):
        state(name, "a state with an output or visits")
    for name in snapshot.logs.get("path", []):
        if not isinstance(name, str):
            raise SnapshotError("the path holds something that is not a state's name")
        state(name, "a state on the path")
    for name, items in snapshot.logs.items():
        if name.startswith("memory:"):
            if name[len("memory:"):] not in plan.machine.agents:
                raise SnapshotError(f"the checkpoint keeps the memory of agent '{name[7:]}', which the machine "
                                    "does not have")
            if not all(isinstance(m, dict) for m in items):
                raise SnapshotError(f"the memory of agent '{name[7:]}' holds something that is not a message")
    for key in snapshot.approvals:
        where = key.split("[", 1)[0]
        state(where, "a state whose tool call waits for approval")
        if not states[where].ask_before:
            raise SnapshotError(f"a tool call of state '{where}' waits for approval, and the state asks before "
                                "no tool")
    if head.waiting is not None:
        state(head.waiting.state, "the state the run waits in")
        if states[head.waiting.state].kind != "human":
            raise SnapshotError(f"the run waits for an answer in state '{head.waiting.state}', which asks "
                                "nobody")
    fan = head.fanout
    if fan is not None:
        state(fan.state, "the state whose branches were under way")
        for task in fan.tasks:
            state(task.state, "a branch's next state")
            state(task.last, "a branch's last state")
            for name in task.path:
                state(name, "a state on a branch's path")
            for op in task.writes:
                if op[0] not in plan.variables.specs:
                    raise SnapshotError(f"a branch under way updates run variable '{op[0]}', which the machine "
                                        "does not have")


def new_memories(plan: MachinePlan, run: Run, logs: dict[str, list[Any]]) -> None:
    for name, agent in plan.machine.agents.items():
        run.memories[name] = AgentMemory(agent.memory, agent.memory_count, list(logs.get("memory:" + name) or []))


def revive_run(plan: MachinePlan, run_id: str, snapshot: Snapshot, workspace: str, started: float,
               inputs: dict[str, Any]) -> Run:
    """The run a snapshot describes, ready to go on: SnapshotError when it does not fit the machine."""
    check_fits(plan, snapshot)
    head = snapshot.head
    run = Run(run_id, inputs, head.state, workspace, started)
    run.inputs_json = snapshot.inputs
    for name, data in snapshot.outputs.items():
        try:
            run.outputs[name] = revive_output(plan, name, data)
        except ValueError as exc:
            raise SnapshotError(f"the stored output of state '{name}' no longer validates: {exc}") from None
    run.visits = dict(snapshot.visits)
    run.edges = dict(snapshot.edges)
    run.seqs = dict(snapshot.seqs)
    run.feedback = head.feedback
    run.usage = Usage(**head.usage.to_json())
    run.steps = head.steps
    run.elapsed_before = head.elapsed
    run.last_state = head.last_state
    run.waiting = head.waiting
    run.trace_context = head.trace_context
    logs = snapshot.logs
    run.path = list(logs.get("path") or [])
    new_memories(plan, run, logs)
    if plan.variables or logs.get("vars"):
        try:
            ops = read_var_ops(list(logs.get("vars") or []), "the run's updates of its variables")
            run.vars = plan.variables.replay(ops)
        except ValueError as exc:
            raise SnapshotError(str(exc)) from None
        run.var_log = list(ops)
    if snapshot.approvals:
        from .approvals import ApprovalRecord

        try:
            run.approvals = {key: ApprovalRecord.from_json(key, record) for key, record in snapshot.approvals.items()}
        except ValueError as exc:
            raise SnapshotError(str(exc)) from None
    run.saved_logs = {name: len(items) for name, items in logs.items()}
    run.saved_logs.setdefault("path", len(run.path))
    return run
