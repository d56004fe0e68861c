"""The deterministic core: everything a run decides, and nothing it does to the world.

A run is a generator (`RunCore.execute`). It renders instructions, validates outputs, evaluates guards,
applies bounds and limits, picks each transition and its cause, and builds the checkpoint record. Where it
needs the world — a model call, a verifier call, a tool call — it yields an effect (effects.py) and waits for
the result to be sent back. It reads no clock but the one it is given and draws no random numbers, so the
same inputs and the same effect results always make the same run: a durable engine can replay it.

What a run reports goes to hooks the executor attaches to the run: `emit(event, fields)` for trace events
and `save(run_id, snapshot)` for checkpoint records.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import deque
from collections.abc import Callable, Generator, Mapping
from typing import Any

from .bounds import bound_text, bound_value
from .checkpoint import CheckpointError
from .client import ModelError, ModelRequest, ModelResponse, reply_allowance
from .concurrency import Cancel, Completed, Concurrently
from .effects import AwaitPerson, CallModel, CallTool, DescribeTools, EstimateCall, PersonReply, ToolOutcome
from .memory import AgentMemory
from .result import AnswerError, Failure, RunFailed, RunResult, Usage, Waiting
from .spec import AgentSpec, InputSpec, MachineSpec, Scope, StateSpec
from .structured import ReplyError, output_type_name, parse_typed_reply, to_jsonable, to_text, validate_typed
from .templates import TemplateDeadlineExceeded, TemplateRenderError, TemplateSet, variant_tests
from .verifier import Verdict, parse_verdict, verdict_schema, verifier_messages

MAX_TOOL_ROUNDS = 8
SNAPSHOT_VERSION = 2
NEUTRAL_RETRY = "Your previous answer to this step did not let the run move on. Do this step again, better."
# failures that leave the last checkpoint as it was, so that resuming the run retries the step
RETRYABLE_FAILURES = ("model", "script")

_TIMED_OUT = object()  # what a person's step gives when its deadline passed without an answer


class _Paused(Exception):
    """A person has not answered yet: the run stops here, checkpointed, until it is resumed."""


# A run's generator: yields effects, is sent their results, returns the RunResult.
RunSteps = Generator[Any, Any, RunResult]
Steps = Generator[Any, Any, Any]


# ---- inputs --------------------------------------------------------------------------------------


class InputError(ValueError):
    """The inputs given to a run do not match the machine's `input` declarations."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class InputValidator:
    """Checks values against input annotations with pydantic, one TypeAdapter per annotation."""

    def __init__(self) -> None:
        self._adapters: dict[Any, Any] = {}

    def validate(self, spec: InputSpec, value: Any) -> Any:
        """`value` checked (and coerced where pydantic's lax mode does) against the input's annotation."""
        annotation = spec.annotation
        if annotation is str and isinstance(value, str):
            return value
        if annotation is None or annotation is Any:
            return value
        try:
            adapter = self._adapters.get(annotation)
        except TypeError:  # an unhashable annotation: no caching
            adapter = None
        if adapter is None:
            from pydantic import TypeAdapter

            adapter = TypeAdapter(annotation)
            try:
                self._adapters[annotation] = adapter
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

    def prepare(self, machine: MachineSpec, given: Mapping[str, Any]) -> dict[str, Any]:
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
                    values[spec.name] = self.validate(spec, given[spec.name])
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

    __slots__ = ("guard", "index", "key", "kind", "max", "origin", "seconds", "target", "target_visits", "text")

    def __init__(self, state: str, index: int, spec: Any, target_visits: int | str | None) -> None:
        self.index = index
        self.kind = spec.kind
        self.target = spec.target
        self.guard = spec.guard
        self.text = spec.text
        self.max = spec.max
        self.origin = spec.origin
        self.seconds = spec.seconds
        self.target_visits = target_visits
        self.key = f"{state}:{index}"


class _AgentPlan:
    __slots__ = ("fallbacks", "map_model", "model", "name", "prompt", "spec", "temperature", "tools")

    def __init__(self, spec: AgentSpec, machine: MachineSpec, map_model: Callable[[str], str]) -> None:
        self.name = spec.name
        self.spec = spec
        self.map_model = map_model
        self.model = map_model(spec.model or machine.model)
        self.fallbacks = tuple(map_model(m) for m in spec.fallbacks)
        self.temperature = spec.temperature if spec.temperature is not None else machine.temperature
        self.prompt = spec.prompt
        self.tools = spec.tools

    def with_model(self, model: str) -> _AgentPlan:
        """The same agent — memory, prompt, tools, fallbacks — calling `model` (a state's own model)."""
        plan = object.__new__(_AgentPlan)
        for slot in _AgentPlan.__slots__:
            setattr(plan, slot, getattr(self, slot))
        plan.model = self.map_model(model)
        return plan


class _StatePlan:
    __slots__ = (
        "agent",
        "agent_key",
        "agent_tool_key",
        "direct",
        "edges",
        "final",
        "instruction",
        "items_key",
        "kind",
        "name",
        "output",
        "person_key",
        "retries",
        "schema",
        "schema_name",
        "spec",
        "tell",
        "timeout",
        "tool_key",
        "variant",
        "verifier_key",
        "visit_edges",
        "works",
        "wrapped",
    )

    def __init__(self, spec: StateSpec, machine: MachineSpec, agents: Mapping[str, _AgentPlan]) -> None:
        self.name = spec.name
        self.spec = spec
        self.kind = spec.kind
        self.final = spec.final or spec.kind == "final"
        self.works = spec.kind != "final"  # a final state may do work before the run ends
        self.agent = agents[spec.agent] if spec.agent else None
        if self.agent is not None and spec.model:  # the state's own model, the agent's everything else
            self.agent = self.agent.with_model(spec.model)
        self.instruction = spec.instruction or ""
        self.output = spec.output
        self.wrapped = spec.output_wrapped
        self.variant = spec.output_variant
        self.schema: dict[str, Any] | None = None
        self.schema_name = "output"
        if spec.output is not None and (self.agent is not None or spec.kind == "human"):
            self.schema = spec.output.model_json_schema()  # type: ignore[attr-defined]
            self.schema_name = output_type_name(spec.output)
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
        # the counters of `otherwise stay max N per visit`, set back to 0 whenever the run arrives here
        self.visit_edges = tuple(e.key for e in self.edges if e.kind == "stay" and spec.transitions[e.index].per_visit)
        # `after 24h -> s`: the edge a person's silence takes, outside the evaluation in source order
        self.timeout = next((e for e in self.edges if e.kind == "timeout"), None)
        self.person_key = "person:" + spec.name
        self.agent_key = "agent:" + spec.name
        self.verifier_key = "verifier:" + spec.name
        self.tool_key = "tool:" + spec.name
        self.agent_tool_key = "agent-tool:" + spec.name
        self.items_key = "items:" + spec.name  # a map's elements run in earlier visits: numbers them over the run

    def for_item(self, number: int) -> _StatePlan:
        """The plan of one element's step of a map: its own call counters (`agent:build[3]`), so that the
        elements' calls, run at once, are counted (and scripted, and resumed) each on its own."""
        plan = object.__new__(_StatePlan)
        for slot in _StatePlan.__slots__:
            setattr(plan, slot, getattr(self, slot))
        suffix = f"[{number}]"
        plan.agent_key, plan.tool_key = self.agent_key + suffix, self.tool_key + suffix
        plan.agent_tool_key = self.agent_tool_key + suffix
        return plan


def _core_quoted_condition(condition: str) -> str:
    """A pattern for a condition quoted in a verifier's words: whole words only (with a condition "ok",
    "Look at the token" stays as it is), in any case, with any spacing between its words."""
    words = [re.escape(word) for word in condition.split()]
    pattern = r"\s+".join(words)
    if re.match(r"\w", condition.strip()):
        pattern = r"(?<!\w)" + pattern
    if re.search(r"\w$", condition.strip()):
        pattern += r"(?!\w)"
    return pattern


def _core_output_label(plan: _StatePlan) -> str:
    """The output type as the spec names it: `type Verdict`, or the state's own `output list[str]`."""
    if plan.output is None or plan.wrapped:
        return f"the output type of state '{plan.name}'"
    return f"type {output_type_name(plan.output)}"


def _output_text(plan: _StatePlan, output: Any) -> str:
    """An output as a message shows it: a variant with the name of its type (`{"Answer": {...}}`)."""
    if plan.variant:
        from .variants import tagged

        output = tagged(output)
    return to_text(output)


def _no_event(event: str, fields: dict[str, Any]) -> None:
    pass


def _no_save(run_id: str, snapshot: dict[str, Any]) -> None:
    pass


class Run:
    """Everything a run has done so far: what a checkpoint stores and a resume restores.

    `emit` and `save` are the executor's hooks for trace events and checkpoint records; `content` says
    whether events carry messages, replies and tool arguments.
    """

    __slots__ = (
        "changed",
        "content",
        "context_cache",
        "edges",
        "elapsed_before",
        "emit",
        "events",
        "fanout",
        "feedback",
        "inputs",
        "inputs_json",
        "item",
        "last_state",
        "locals",
        "memories",
        "observe",
        "outputs",
        "path",
        "run_id",
        "save",
        "saved_logs",
        "seqs",
        "stamp",
        "started",
        "state",
        "steps",
        "system_prompts",
        "tool_schemas",
        "usage",
        "visits",
        "waiting",
        "workspace",
    )

    def __init__(self, run_id: str, inputs: dict[str, Any], start: str, workspace: str, started: float) -> None:
        self.run_id = run_id
        self.inputs = inputs
        self.inputs_json = to_jsonable(inputs)
        self.state = start  # the state to run next
        self.outputs: dict[str, Any] = {}
        # what changed since the last checkpoint, by mapping: only that goes into the next piece
        self.changed: dict[str, set[str]] | None = None  # None while nothing is checkpointed
        self.saved_logs: dict[str, int] = {}  # log name ("path", "memory:NAME") -> items already saved
        self.visits: dict[str, int] = {}
        self.edges: dict[str, int] = {}  # "state:index" -> firings, for edges with `max`
        self.seqs: dict[str, int] = {}  # "role:state" -> calls made
        self.feedback: str | None = None  # for the next state: traceback reason or `stay` feedback
        self.usage = Usage()
        self.steps = 0
        self.path: list[str] = []
        self.memories: dict[str, AgentMemory] = {}
        self.last_state: str | None = None
        self.started = started
        self.elapsed_before = 0.0
        self.system_prompts: dict[str, str] = {}
        self.context_cache: dict[str, Any] | None = None
        self.tool_schemas: dict[str, tuple[list[dict[str, Any]], dict[str, str]]] = {}
        self.workspace = workspace  # the directory tools work in; created by the first step that uses tools
        # the question a person has been asked and not yet answered: {state, question, seq, asked_at, deadline}
        self.waiting: dict[str, Any] | None = None
        self.emit: Callable[[str, dict[str, Any]], None] = _no_event
        self.events = False  # whether anyone listens to `emit`
        self.content = False
        self.save: Callable[[str, dict[str, Any]], None] = _no_save
        # the wall time of an event, as ISO text, for the events a branch holds back until its join
        self.stamp: Callable[[], str] | None = None
        self.fanout: _FanOut | None = None  # the parallel state's branches or the map's elements under way
        self.locals: dict[str, Any] | None = None  # a map's element and position, in that element's step
        self.item: int | None = None  # which element of a map this step is, numbered over the run
        # hears ("instruction" | "output", state, visit, value) for every step: a test block's expectations
        self.observe: Callable[[str, str, int, Any], None] | None = None

    def listen(self, emit: Callable[[str, dict[str, Any]], None] | None, *, content: bool = False,
               save: Callable[[str, dict[str, Any]], None] | None = None,
               stamp: Callable[[], str] | None = None) -> None:
        """Attach the executor's hooks: `emit` for trace events, `save` for checkpoint records, `stamp` for
        the time of an event a branch holds back (it is written when the branches join)."""
        self.stamp = stamp
        if emit is not None:
            self.emit, self.events, self.content = emit, True, content
        if save is not None:
            self.save = save
            if self.changed is None:
                self.changed = {"outputs": set(), "visits": set(), "edges": set(), "seqs": set()}

    def count(self, mapping: str, key: str) -> None:
        """Note a changed entry of `outputs`, `visits`, `edges` or `seqs` for the next checkpoint."""
        changed = self.changed
        if changed is not None:
            changed[mapping].add(key)


# ---- branches and elements: a run's parts that run at once --------------------------------------------


class _Overlay(dict):  # type: ignore[type-arg]
    """A mapping of the run (outputs, visits, edges, call counters) as one branch or element sees it: its
    own writes, over the run's values. The writes reach the run when the branch commits a finished step,
    so a checkpoint taken meanwhile never holds half a step of a branch."""

    __slots__ = ("base",)

    def __init__(self, base: dict[str, Any]) -> None:
        super().__init__()
        self.base = base

    def __missing__(self, key: str) -> Any:
        return self.base[key]

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.base

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        return self.base.get(key, default)

    def commit(self, run: Run, mapping: str) -> None:
        """Write this overlay's values into the run's mapping (noting them for its next checkpoint)."""
        if self:
            self.base.update(self)
            for key in self:
                run.count(mapping, key)
            self.clear()


class _ForkedMemories(dict):  # type: ignore[type-arg]
    """The agents' memories as one branch sees them: the run's, as they were when the branches started,
    plus what this branch added. What it added joins the run's memories, branch by branch, at the join."""

    __slots__ = ("base", "kept")

    def __init__(self, base: Mapping[str, AgentMemory], added: Mapping[str, list[Any]] | None = None) -> None:
        super().__init__()
        self.base = base
        self.kept: dict[str, int] = {}  # agent -> messages that are the run's, not this branch's
        for name, messages in (added or {}).items():
            self[name].messages.extend(messages)

    def __missing__(self, name: str) -> AgentMemory:
        base = self.base[name]
        memory = AgentMemory(base.policy, base.count, list(base.messages))
        self.kept[name] = len(base.messages)
        self[name] = memory
        return memory

    def added(self) -> dict[str, list[Any]]:
        """The messages this branch added, by agent."""
        return {name: memory.messages[self.kept[name]:] for name, memory in self.items()
                if len(memory.messages) > self.kept[name]}


class _ForkedRun(Run):
    """A run as one branch of a parallel state (or one element of a map) sees it while the branches run at
    once. Its position, path, feedback, memories and trace events are its own, and so are the counters and
    outputs it changes, the steps it takes and what its calls use, until each finished step is committed to
    the run (`RunCore._commit`). Limits count what every branch has used, committed or not."""

    __slots__ = ("fan", "parent", "reserved")

    def __init__(self, parent: Run, fan: _FanOut, task: _Task) -> None:
        for slot in ("run_id", "inputs", "inputs_json", "started", "elapsed_before", "system_prompts",
                     "tool_schemas", "workspace", "content", "events", "stamp", "observe"):
            setattr(self, slot, getattr(parent, slot))
        self.parent = parent
        self.fan = fan
        self.state = task.state
        self.last_state = task.last
        self.feedback = task.feedback
        self.path = list(task.path)
        self.outputs = _Overlay(parent.outputs)
        self.visits = _Overlay(parent.visits)
        self.edges = _Overlay(parent.edges)
        self.seqs = _Overlay(parent.seqs)
        self.memories = _ForkedMemories(parent.memories, task.memory)
        self.usage = Usage()  # used by calls since the last commit
        self.reserved = (0, 0.0)  # the estimate of the call in flight, which budgets count before it ends
        self.steps = 0
        self.changed = None  # commits note the changes in the run
        self.saved_logs = {}
        self.context_cache = None
        self.waiting = None
        self.fanout = None
        self.locals = task.locals
        self.item = task.number
        self.save = _no_save
        buffered = task.events
        self.emit = lambda event, fields: buffered.append(
            (event, fields, parent.stamp() if parent.stamp is not None else None))


class _Task:
    """One branch of a parallel state, or one element of a map: where it is, and what it has done up to its
    last finished step (what a checkpoint records, and a resumed run starts it from)."""

    __slots__ = ("cancelled", "committed_events", "done", "events", "feedback", "index", "instruction", "key", "last",
                 "locals", "memory", "number", "output", "path", "run", "state", "work")

    def __init__(self, index: int, key: str, state: str) -> None:
        self.index = index  # position in `parallel [...]`, or the element's index in the list
        self.key = key
        self.state = state  # the state it runs next
        self.last: str | None = None  # the state whose step it finished last
        self.feedback: str | None = None
        self.path: list[str] = []
        self.memory: dict[str, list[Any]] = {}  # messages it added to agents' memories, by agent
        self.events: list[tuple[str, dict[str, Any], str | None]] = []  # held back until the join
        self.committed_events = 0  # of which those of its finished steps
        self.done = False
        self.cancelled = False
        self.output: Any = None
        self.instruction: str | None = None  # a map element's rendered instruction (for test expectations)
        self.locals: dict[str, Any] | None = None
        self.number: int | None = None  # a map's element, numbered over the run
        self.run: _ForkedRun | None = None
        self.work: Steps | None = None  # its steps, as a generator of effects, while it runs


class _FanOut:
    """The branches of a parallel state (kind "parallel"), or the elements of a map ("map"), while they run:
    the tasks in their written order, the order they finished in, and (for a map) the number of its first
    element over the run."""

    __slots__ = ("accepted", "base", "finished", "kind", "state", "tasks")

    def __init__(self, state: str, kind: str, tasks: list[_Task], base: int = 0) -> None:
        self.state = state
        self.kind = kind
        self.tasks = tasks
        self.base = base
        self.finished: list[int] = []  # task indexes, in the order they finished
        self.accepted: list[int] = []  # of those, the ones the join takes (a join guard may refuse some)

    def to_json(self) -> dict[str, Any]:
        tasks = []
        for t in self.tasks:
            record: dict[str, Any] = {"state": t.state, "last": t.last, "feedback": t.feedback, "path": t.path,
                                      "memory": t.memory, "done": t.done}
            if t.done and self.kind == "map":
                record["output"] = to_jsonable(t.output)
            if t.committed_events:
                record["events"] = [[e, to_jsonable(f), at] for e, f, at in t.events[:t.committed_events]]
            tasks.append(record)
        return {"state": self.state, "kind": self.kind, "base": self.base, "finished": self.finished,
                "accepted": self.accepted, "tasks": tasks}


def _fan_out_totals(run: Run) -> tuple[int, Usage, tuple[int, float]]:
    """The steps a run has taken and what it has used, counting its branches' uncommitted work, and the
    estimates of their calls in flight."""
    if not isinstance(run, _ForkedRun):
        return run.steps, run.usage, (0, 0.0)
    parent = run.parent
    steps = parent.steps
    total = Usage(parent.usage.prompt_tokens, parent.usage.completion_tokens, parent.usage.cost_usd,
                  parent.usage.llm_calls)
    tokens, cost = 0, 0.0
    for task in run.fan.tasks:
        forked = task.run
        if forked is None:
            continue
        steps += forked.steps
        total.prompt_tokens += forked.usage.prompt_tokens
        total.completion_tokens += forked.usage.completion_tokens
        total.cost_usd += forked.usage.cost_usd
        total.llm_calls += forked.usage.llm_calls
        if forked is not run:
            tokens += forked.reserved[0]
            cost += forked.reserved[1]
    return steps, total, (tokens, cost)


def _exit_fields(run: Run, plan: _StatePlan, output: Any) -> dict[str, Any]:
    """The fields of a `state_exit` event: the state, its output (in a trace with content) and, for a
    variant output, which variant it was."""
    fields: dict[str, Any] = {"state": plan.name, "output": output} if run.content else {"state": plan.name}
    if plan.variant:
        from .variants import variant_name

        fields["variant"] = variant_name(output)
    return fields


def _add_usage(total: Usage, more: Usage) -> None:
    total.prompt_tokens += more.prompt_tokens
    total.completion_tokens += more.completion_tokens
    total.cost_usd += more.cost_usd
    total.llm_calls += more.llm_calls


def join_text(join: Any) -> str:
    """A join as written: `all`, `first 2`, `first 1 where output.approve`."""
    if join.rule == "all":
        return "all"
    text = f"first {join.count or 1}"
    return f"{text} where {join.text}" if join.text else text


# ---- the core ------------------------------------------------------------------------------------


class RunCore:
    """Runs of one machine, as generators of effects. One core serves any number of concurrent runs: all a
    run's state is in its Run.

    `clock()` returns seconds on a monotonic scale (the executor's, or a durable engine's replayable one);
    it is read for the `seconds` limit and what is left of it, nothing else.
    """

    def __init__(self, machine: MachineSpec, *, clock: Callable[[], float],
                 model_map: Mapping[str, str] | None = None, max_tokens: int | None = None,
                 templates: TemplateSet | None = None) -> None:
        self.machine = machine
        self.clock = clock
        self.model_map = dict(model_map or {})
        self.max_tokens = max_tokens
        self.templates = templates or TemplateSet(tests=variant_tests(machine.variant_types))
        self.inputs = InputValidator()
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
        self._conditions_pattern = (re.compile("|".join(_core_quoted_condition(c) for c in conditions),
                                               re.IGNORECASE) if conditions else None)

    def _map_model(self, name: str) -> str:
        mapped = self.model_map.get(name)
        if mapped is None:
            mapped = self.model_map.get("*", name)
        return mapped

    # -- starting and resuming ---------------------------------------------------------------------

    def start(self, run_id: str, inputs: Mapping[str, Any], workspace: str) -> Run:
        """A new run at the start state. Raises InputError when the inputs do not fit the declarations."""
        run = Run(run_id, self.inputs.prepare(self.machine, inputs), self.machine.start, workspace, self.clock())
        self._new_memories(run, {})
        return run

    def begin(self, run: Run, resumed: bool) -> None:
        """Announce the run (trace) and, for a new run, write its first checkpoint."""
        self._emit_start(run, resumed)
        if not resumed:
            self._save(run, "running")

    def restore(self, run_id: str, snapshot: Mapping[str, Any], workspace: str) -> Run | RunResult:
        """The run a checkpoint snapshot describes; its RunResult when it had already ended.

        Raises CheckpointError when the snapshot belongs to another machine or another version of it."""
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
            inputs = self.inputs.prepare(self.machine, stored_inputs)  # typed inputs come back as their types
        except InputError:
            inputs = stored_inputs
        run = Run(run_id, inputs, snapshot["state"], workspace, self.clock())
        run.inputs_json = stored_inputs
        try:
            for name, data in (snapshot.get("outputs") or {}).items():
                run.outputs[name] = self._revive_output(name, data)
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
        waiting = snapshot.get("waiting")
        run.waiting = dict(waiting) if isinstance(waiting, dict) else None
        try:
            run.fanout = self._revive_fanout(snapshot.get("fanout"))
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointError(f"run '{run_id}': the branches it was running no longer fit the machine: "
                                  f"{exc}") from None
        logs = snapshot.get("logs") or {}
        run.path = list(logs.get("path") or [])
        self._new_memories(run, logs)
        run.saved_logs = {name: len(items) for name, items in logs.items()}
        run.saved_logs.setdefault("path", len(run.path))
        status = snapshot.get("status")
        if status in ("final", "failed"):
            failure = snapshot.get("failure")
            return self._result(run, status, snapshot.get("final_state"), snapshot.get("result"),
                                Failure(**failure) if failure else None)
        return run

    def _stored_output(self, state: str, output: Any) -> Any:
        """An output as a checkpoint keeps it: a variant with the name of its type, so it revives as it was."""
        plan = self._plans.get(state)
        if plan is None or not plan.variant:
            return output
        from .variants import tagged

        return tagged(output)

    def _revive_output(self, state: str, data: Any) -> Any:
        spec = self.machine.states.get(state)
        if spec is None or spec.output is None or data is None:
            return data
        if (spec.each is not None or spec.parallel is not None) and isinstance(data, list):
            return [validate_typed(spec.output, item, spec.output_wrapped) for item in data]  # one per element
        return validate_typed(spec.output, data, spec.output_wrapped)

    def _new_memories(self, run: Run, logs: Mapping[str, list[Any]]) -> None:
        for name, agent in self.machine.agents.items():
            run.memories[name] = AgentMemory(agent.memory, agent.memory_count,
                                             list(logs.get("memory:" + name) or []))

    # -- running ------------------------------------------------------------------------------------

    def execute(self, run: Run) -> RunSteps:
        """The run from its current state to a final state or a typed failure, as a generator of effects."""
        try:
            return (yield from self._steps(run))
        except RunFailed as exc:
            return self._fail(run, exc.failure)
        except _Paused:
            return self._pause(run)

    def _steps(self, run: Run) -> RunSteps:
        plans = self._plans
        while True:
            plan = plans[run.state]
            name = plan.name
            if not plan.works:
                return self._finish(run, plan, entered=False)
            changed = run.changed
            # (a run resumed while waiting for a person, or while its branches ran, is inside its step)
            if run.waiting is None and run.fanout is None:
                self._check_limits(run, name, True)
                run.steps += 1
                visit = run.visits.get(name, 0) + 1
                run.visits[name] = visit
                run.path.append(name)
                run.context_cache = None
                if changed is not None:
                    changed["visits"].add(name)
                if run.events:
                    run.emit("state_enter", {"state": name, "visit": visit})
            else:
                visit = run.visits.get(name, 0)
            feedback = run.feedback
            run.feedback = None
            if plan.spec.parallel is not None:
                output, instruction = (yield from self._parallel_step(run, plan, feedback)), None
            elif plan.spec.each is not None:
                output, instruction = (yield from self._map_step(run, plan, feedback)), None
            elif plan.agent is not None:
                output, instruction = yield from self._agent_step(run, plan, feedback)
            elif plan.kind == "human":
                answered = yield from self._person_step(run, plan)
                if answered is _TIMED_OUT:
                    assert plan.timeout is not None
                    if run.events:
                        run.emit("state_exit", {"state": name})
                    run.last_state = name
                    self._fire(run, plan, plan.timeout, "timeout", "no answer in time", None)
                    self._save(run, "running")
                    continue
                output, instruction = answered
            else:
                output, instruction = (yield from self._action_step(run, plan)), None
            run.outputs[name] = output
            if run.observe is not None:
                run.observe("output", name, visit, output)
            if changed is not None:
                changed["outputs"].add(name)
            run.last_state = name
            run.context_cache = None
            if run.events:
                run.emit("state_exit", _exit_fields(run, plan, output))
            if plan.tell:
                text = _output_text(plan, output)
                for listener in plan.tell:
                    run.memories[listener].hear(name, text)
            if plan.final:
                return self._finish(run, plan, entered=True)
            if plan.direct is not None:
                self._fire_direct(run, plan)
            else:
                yield from self._transition(run, plan, output, instruction)
            self._save(run, "running")


    # -- parallel branches and maps -----------------------------------------------------------------

    def _parallel_step(self, run: Run, plan: _StatePlan, feedback: str | None) -> Steps:
        """Run a parallel state's branches at once and join them: the list of the joined branches' outputs,
        in the order the branches are written. Each branch runs from its entry until a state without
        transitions; with `join first`, the branches the join no longer waits for are cancelled."""
        spec = plan.spec.parallel
        assert spec is not None
        name = plan.name
        join = spec.join
        fan = run.fanout
        if fan is None:
            for entry in spec.branches:  # a branch starts at its entry whatever its bound: a spent one stops the run
                limit = bound_value(self.machine.states[entry].visits, run.inputs)
                if limit is not None and run.visits.get(entry, 0) >= limit:
                    raise RunFailed(Failure("bound", f"state '{name}': branch '{entry}' has used its visits {limit}",
                                            state=name, origin=plan.spec.origin))
            tasks = [_Task(i, f"{name}/{entry}", entry) for i, entry in enumerate(spec.branches)]
            for task in tasks:
                task.feedback = feedback
            fan = run.fanout = _FanOut(name, "parallel", tasks)
            if run.events:
                run.emit("fan_out", {"state": name, "kind": "parallel", "branches": list(spec.branches),
                                     "join": join_text(join)})
        wanted = len(fan.tasks) if join.rule == "all" else (join.count or 1)

        def complete(task: _Task) -> bool:
            fan.finished.append(task.index)
            if join.guard is None or self._join_guard(plan, task):
                fan.accepted.append(task.index)
            self._commit(run, task)
            return len(fan.accepted) >= wanted

        for task in fan.tasks:  # branches done before a run was resumed, not yet counted by the join
            if task.done and task.index not in fan.finished:
                task.output = run.outputs.get(task.last) if task.last else None
                fan.finished.append(task.index)
                if join.guard is None or self._join_guard(plan, task):
                    fan.accepted.append(task.index)
        pending = [t for t in fan.tasks if not t.done] if len(fan.accepted) < wanted else []
        for task in pending:
            task.run = _ForkedRun(run, fan, task)
            task.work = self._branch(task)
        try:
            yield from self._run_tasks(run, pending, None, complete)
        except RunFailed:
            self._abandon(run, fan)
            raise
        for task in fan.tasks:
            if not task.done:
                task.cancelled = True  # (also those a resumed run found no longer waited for)
        joined = sorted(fan.accepted)
        for task in fan.tasks:
            for agent, messages in task.memory.items():  # what each branch told its agents, branch by branch
                run.memories[agent].messages.extend(messages)
            run.path.extend(task.path)
            if run.events:
                self._flush(run, task)
                status = "done" if task.done else "cancelled"
                run.emit("branch_end", {"state": name, "branch": spec.branches[task.index], "status": status,
                                        "last": task.last})
        if run.events:
            run.emit("join", {"state": name, "join": join_text(join),
                              "finished": [spec.branches[i] for i in fan.finished],
                              "joined": [spec.branches[i] for i in joined],
                              "cancelled": [spec.branches[t.index] for t in fan.tasks if t.cancelled]})
        run.fanout = None
        run.context_cache = None
        return [fan.tasks[i].output for i in joined]

    def _join_guard(self, plan: _StatePlan, task: _Task) -> bool:
        """Whether a finished branch's output makes the join guard true (traced with the branch's events)."""
        join = plan.spec.parallel.join  # type: ignore[union-attr]
        view = task.run
        parent = view.parent if view is not None else None
        inputs = parent.inputs if parent is not None else {}
        outputs = parent.outputs if parent is not None else {}
        visits = parent.visits if parent is not None else {}
        guard = join.guard
        try:
            value = bool(guard(Scope(task.output, inputs, outputs, visits))) if guard is not None else True
        except Exception as exc:  # noqa: BLE001 - a guard that cannot be evaluated is a typed failure
            raise RunFailed(Failure("guard", f"state '{plan.name}': the join guard `{join.text}` could not be "
                                             f"evaluated: {type(exc).__name__}: {exc}", state=plan.name,
                                    origin=join.origin)) from None
        if view is not None and view.events:
            branch = plan.spec.parallel.branches[task.index]  # type: ignore[union-attr]
            view.emit("guard", {"state": plan.name, "branch": branch, "text": join.text, "value": value})
        return value

    def _branch(self, task: _Task) -> Steps:
        """One branch: its states' steps, from where it is to a state without transitions, whose output is
        the branch's. Each finished step is committed to the run (and checkpointed)."""
        view = task.run
        assert view is not None
        parent = view.parent
        plans = self._plans
        if view.events and not task.events:
            view.emit("branch_start", {"state": view.fan.state, "branch": task.state})
        while True:
            plan = plans[view.state]
            name = plan.name
            self._check_limits(view, name, True)
            view.steps += 1
            visit = view.visits.get(name, 0) + 1
            view.visits[name] = visit
            view.path.append(name)
            view.context_cache = None
            if view.events:
                view.emit("state_enter", {"state": name, "visit": visit})
            feedback, view.feedback = view.feedback, None
            output, instruction = yield from self._work(view, plan, feedback)
            view.outputs[name] = output
            if view.observe is not None:
                view.observe("output", name, visit, output)
            view.last_state = name
            view.context_cache = None
            if view.events:
                view.emit("state_exit", _exit_fields(view, plan, output))
            if plan.tell:
                text = _output_text(plan, output)
                for listener in plan.tell:
                    view.memories[listener].hear(name, text)
            if not plan.edges:
                return output  # the branch ends here: the join commits its last step
            if plan.direct is not None:
                self._fire_direct(view, plan)
            else:
                yield from self._transition(view, plan, output, instruction)
            self._commit(parent, task)

    def _map_step(self, run: Run, plan: _StatePlan, feedback: str | None) -> Steps:
        """Run a state once per element of its list, `concurrency` elements at a time: the list of the
        elements' outputs, in the list's order. An empty list gives []; one longer than `max` ends the run
        (failure "bound")."""
        each = plan.spec.each
        assert each is not None
        name = plan.name
        try:
            items = each.items(Scope(None, run.inputs, run.outputs, run.visits))
        except Exception as exc:  # noqa: BLE001 - a list that cannot be computed is a typed failure
            raise RunFailed(Failure("guard", f"state '{name}': the list `{each.text}` could not be computed: "
                                             f"{type(exc).__name__}: {exc}", state=name, origin=each.origin)) from None
        if not isinstance(items, (list, tuple)):
            raise RunFailed(Failure("guard", f"state '{name}': `{each.text}` is {type(items).__name__}, not a list",
                                    state=name, origin=each.origin))
        most = bound_value(each.max, run.inputs)
        if most is not None and len(items) > most:
            raise RunFailed(Failure("bound", f"state '{name}': the list `{each.text}` has {len(items)} elements, "
                                             f"more than its {bound_text('max', each.max, run.inputs)}",
                                    state=name, origin=each.origin))
        fan = run.fanout
        if fan is None:
            base = run.seqs.get(plan.items_key, 0)
            tasks = [_Task(i, f"{name}[{i}]", name) for i in range(len(items))]
            for task in tasks:
                task.feedback = feedback
            fan = run.fanout = _FanOut(name, "map", tasks, base)
            run.seqs[plan.items_key] = base + len(items)
            run.count("seqs", plan.items_key)
            if run.events:
                run.emit("fan_out", {"state": name, "kind": "map", "items": len(items), "max": most,
                                     "concurrency": each.concurrency})
        elif len(fan.tasks) != len(items):
            raise RunFailed(Failure("bound", f"state '{name}': the list `{each.text}` has {len(items)} elements; "
                                             f"the run was stopped while mapping over {len(fan.tasks)}",
                                    state=name, origin=each.origin))
        for task in fan.tasks:
            task.locals = {each.item: items[task.index]}
            if each.index is not None:
                task.locals[each.index] = task.index
            task.number = fan.base + task.index
        pending = [t for t in fan.tasks if not t.done]
        for task in pending:
            task.run = _ForkedRun(run, fan, task)
            task.work = self._element(plan.for_item(fan.base + task.index), task)

        def complete(task: _Task) -> bool:
            fan.finished.append(task.index)
            self._commit(run, task)
            return False

        try:
            yield from self._run_tasks(run, pending, each.concurrency, complete)
        except RunFailed:
            self._abandon(run, fan)
            raise
        for task in fan.tasks:
            for agent, messages in task.memory.items():
                run.memories[agent].messages.extend(messages)
            if run.events:
                self._flush(run, task)
        if run.events:
            run.emit("join", {"state": name, "items": len(fan.tasks)})
        if run.observe is not None and plan.agent is not None:  # a test's: every element's instruction
            run.observe("instruction", name, run.visits[name],
                        "\n\n".join(t.instruction or "" for t in fan.tasks))
        run.fanout = None
        run.context_cache = None
        return [task.output for task in fan.tasks]

    def _element(self, plan: _StatePlan, task: _Task) -> Steps:
        """One element's step of a map: the state's work with the element (and its position) in scope."""
        view = task.run
        assert view is not None
        name = plan.name
        if view.events:
            view.emit("item_start", {"state": name, "item": task.index})
        self._check_limits(view, name, True)
        view.steps += 1
        feedback, view.feedback = view.feedback, None
        output, task.instruction = yield from self._work(view, plan, feedback)
        if view.events:
            view.emit("item_end", {"state": name, "item": task.index, "output": output} if view.content
                      else {"state": name, "item": task.index})
        return output

    def _work(self, run: Run, plan: _StatePlan, feedback: str | None) -> Steps:
        """A state's own work, in a branch or for a map's element: its agent's step or its tool call."""
        if plan.agent is not None:
            return (yield from self._agent_step(run, plan, feedback))
        if plan.kind == "human":
            raise RunFailed(Failure("tool", f"state '{plan.name}' asks a person, which a branch cannot",
                                    state=plan.name, origin=plan.spec.origin))
        return (yield from self._action_step(run, plan)), None

    def _run_tasks(self, run: Run, tasks: list[_Task], limit: int | None,
                   complete: Callable[[_Task], bool]) -> Steps:
        """Run the tasks' steps at once, at most `limit` at a time (in their order): every effect they ask
        for goes to the executor in a Concurrently, and each result back to the task that asked. When a task
        is done, `complete(task)` says whether the join has what it waits for; the tasks still running are
        then cancelled."""
        waiting = deque(tasks)
        running: dict[str, _Task] = {}  # key -> a task with an effect in flight, or about to be started
        start: dict[str, Any] = {}
        satisfied = False

        def advance(task: _Task, value: Any, error: BaseException | None) -> bool:
            assert task.work is not None
            try:
                effect = task.work.send(value) if error is None else task.work.throw(error)
            except StopIteration as stop:
                running.pop(task.key, None)
                task.done, task.output, task.work = True, stop.value, None
                return complete(task)
            except BaseException:
                running.pop(task.key, None)
                task.work = None
                raise
            running[task.key] = task
            start[task.key] = effect
            return False

        try:
            while True:
                while not satisfied and waiting and (limit is None or len(running) < limit):
                    satisfied = advance(waiting.popleft(), None, None)
                if satisfied or not running:
                    break
                completed: Completed = yield Concurrently(dict(start))
                start.clear()
                satisfied = advance(running[completed.key], completed.value, completed.error)
        finally:
            for task in running.values():
                if task.work is not None:
                    task.work.close()
                    task.work = None
        in_flight = tuple(key for key in running if key not in start)
        if in_flight:
            yield Cancel(in_flight)
        for task in running.values():
            task.cancelled = True
            self._commit(run, task, cancelled=True)

    def _commit(self, run: Run, task: _Task, *, cancelled: bool = False) -> None:
        """Hand a task's finished step to the run: the counters and outputs it changed, its steps and what
        its calls used; note where it is, and checkpoint. A cancelled task hands over what it did up to the
        cancellation (its calls were made: what they used counts)."""
        view = task.run
        assert view is not None
        for mapping in ("outputs", "visits", "edges", "seqs"):
            getattr(view, mapping).commit(run, mapping)
        run.steps += view.steps
        view.steps = 0
        _add_usage(run.usage, view.usage)
        view.usage = Usage()
        task.state, task.last, task.feedback, task.path = view.state, view.last_state, view.feedback, list(view.path)
        memories = view.memories
        task.memory = memories.added() if isinstance(memories, _ForkedMemories) else {}
        task.committed_events = len(task.events)
        run.context_cache = None
        if not cancelled:
            self._save(run, "running")

    def _abandon(self, run: Run, fan: _FanOut) -> None:
        """A task failed and the run with it: what every task's calls used counts, and their events are
        written, in order, for the failure to be read in context."""
        for task in fan.tasks:
            view = task.run
            if view is not None:
                run.steps += view.steps
                view.steps = 0
                _add_usage(run.usage, view.usage)
                view.usage = Usage()
            if run.events:
                self._flush(run, task)

    @staticmethod
    def _flush(run: Run, task: _Task) -> None:
        """Write the events a task held back, at the times they happened."""
        for event, fields, at in task.events:
            run.emit(event, {**fields, "time": at} if at is not None else fields)
        task.events = []
        task.committed_events = 0

    def _revive_fanout(self, data: Mapping[str, Any] | None) -> _FanOut | None:
        """The branches or elements under way when a checkpoint was taken, as the run resumes them."""
        if not data:
            return None
        spec = self.machine.states.get(str(data.get("state")))
        if spec is None:
            raise CheckpointError(f"the checkpoint's branches belong to state '{data.get('state')}', which the "
                                  "machine does not have")
        tasks = []
        for index, record in enumerate(data.get("tasks") or []):
            task = _Task(index, f"{spec.name}/{record.get('state')}" if data.get("kind") == "parallel"
                         else f"{spec.name}[{index}]", str(record.get("state") or spec.name))
            task.last = record.get("last")
            task.feedback = record.get("feedback")
            task.path = list(record.get("path") or [])
            task.memory = {str(k): list(v) for k, v in (record.get("memory") or {}).items()}
            task.done = bool(record.get("done"))
            if task.done and data.get("kind") == "map":
                output = record.get("output")
                if spec.output is not None and output is not None:
                    output = validate_typed(spec.output, output, spec.output_wrapped)
                task.output = output
            task.events = [(str(e), dict(f), at) for e, f, at in record.get("events") or []]
            task.committed_events = len(task.events)
            tasks.append(task)
        if data.get("kind") == "parallel":  # a branch keeps its key: its entry, as written
            branches = spec.parallel.branches if spec.parallel is not None else ()
            for task in tasks:
                if task.index < len(branches):
                    task.key = f"{spec.name}/{branches[task.index]}"
        fan = _FanOut(spec.name, str(data.get("kind")), tasks, int(data.get("base") or 0))
        fan.finished = [int(i) for i in data.get("finished") or []]
        fan.accepted = [int(i) for i in data.get("accepted") or []]
        return fan

    # -- a step -----------------------------------------------------------------------------------

    def _agent_step(self, run: Run, plan: _StatePlan, feedback: str | None) -> Steps:
        agent = plan.agent
        assert agent is not None
        instruction = self._render(run, plan.instruction, plan.name)
        if run.observe is not None and run.item is None:  # (a map's elements: at their join, together)
            run.observe("instruction", plan.name, run.visits[plan.name], instruction)
        user_text = instruction if feedback is None else f"{instruction}\n\n{feedback}"
        memory = run.memories[agent.name]
        system = run.system_prompts.get(agent.name)
        if system is None:
            system = self._render(run, agent.prompt, plan.name, run.inputs)
            run.system_prompts[agent.name] = system
        messages = [{"role": "system", "content": system}, *memory.view(),
                    {"role": "user", "content": user_text}]
        if plan.output is None:
            response = yield from self._converse(run, plan, messages)
            output: Any = response.content
            reply_text = output
        else:
            model, wrapped = plan.output, plan.wrapped
            try:
                output, _response = yield from self._ask_until_valid(
                    run, plan, "agent", messages, lambda text: parse_typed_reply(model, wrapped, text),
                    lambda conversation: self._converse(run, plan, conversation))
            except ReplyError as exc:
                raise RunFailed(Failure(
                    "output",
                    f"state '{plan.name}': the reply did not match {_core_output_label(plan)} after "
                    f"{exc.attempts} attempt(s); last error: {exc.last_error}",
                    state=plan.name, origin=plan.spec.origin,
                )) from None
            reply_text = _output_text(plan, output)
        memory.keep_exchange(user_text, reply_text)
        return output, instruction

    def _ask_until_valid(self, run: Run, plan: _StatePlan, role: str, messages: list[dict[str, Any]],
                         parse: Callable[[str], tuple[Any, list[str]]],
                         call: Callable[[list[dict[str, Any]]], Steps]) -> Steps:
        """Call, parse, and on a bad reply feed the error back and ask again, `retries` more times at most.

        The bad reply and the error message go into the conversation of the retry only. Raises ReplyError
        when every attempt failed."""
        conversation = messages
        last_error = ""
        retries = plan.retries
        for attempt in range(retries + 1):
            response = yield from call(conversation)
            try:
                value, repairs = parse(response.content)
            except ValueError as exc:
                last_error = str(exc)
                if attempt == retries:
                    break
                if run.events:
                    run.emit("reask", {"state": plan.name, "role": role, "attempt": attempt + 1,
                                       "error": last_error})
                conversation = conversation + [
                    {"role": "assistant", "content": response.content},
                    {"role": "user", "content": f"Your reply could not be used: {last_error}\n"
                                                "Reply again with only the JSON value, matching the schema."},
                ]
                continue
            if repairs and run.events:
                run.emit("repair", {"state": plan.name, "role": role, "repairs": repairs})
            return value, response
        raise ReplyError(last_error, retries + 1)

    def _converse(self, run: Run, plan: _StatePlan, messages: list[dict[str, Any]]) -> Steps:
        """One reply of the state's agent, running the tool calls it asks for (at most MAX_TOOL_ROUNDS)."""
        agent = plan.agent
        assert agent is not None
        if not agent.tools:
            return (yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, messages,
                                                plan.schema, plan.schema_name, None))
        schemas, names = yield from self._agent_tools(run, plan, agent)
        conversation = list(messages)
        for _round in range(MAX_TOOL_ROUNDS + 1):
            response = yield from self._call_model(run, "agent", plan.name, plan.agent_key, agent, conversation,
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
                content = yield from self._agent_tool_call(run, plan.name, plan.agent_tool_key, agent, names, call)
                conversation.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise RunFailed(Failure(
            "tool", f"state '{plan.name}': agent '{agent.name}' still asked for tools after "
                    f"{MAX_TOOL_ROUNDS} rounds of tool calls", state=plan.name, origin=plan.spec.origin))

    def _agent_tools(self, run: Run, plan: _StatePlan, agent: _AgentPlan) -> Steps:
        cached = run.tool_schemas.get(agent.name)
        if cached is None:
            try:
                cached = yield DescribeTools(plan.name, agent.name, agent.tools)
            except Exception as exc:  # noqa: BLE001 - ToolError, or a user tool that does not import
                raise RunFailed(Failure("tool", f"state '{plan.name}': the tools of agent '{agent.name}' are "
                                                f"not available: {exc}", state=plan.name,
                                        origin=plan.spec.origin)) from None
            run.tool_schemas[agent.name] = cached
        return cached

    def _agent_tool_call(self, run: Run, state: str, key: str, agent: _AgentPlan, names: dict[str, str],
                         call: Any) -> Steps:
        """Run one tool call a model asked for; any problem becomes the tool message the model reads."""
        tool = names.get(call.name) or (call.name if call.name in agent.tools else None)
        args: Any = None
        ok = False
        latency = 0.0
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
                seq = run.seqs.get(key, 0)
                run.seqs[key] = seq + 1
                run.count("seqs", key)
                try:
                    outcome: ToolOutcome = yield CallTool(state, tool, args, seq, agent=agent.name)
                except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
                    content = f"error: {exc}"
                    latency = getattr(exc, "latency_ms", 0.0)
                else:
                    content = to_text(outcome.value)
                    latency = outcome.latency_ms
                    ok = True
        if run.events:
            fields: dict[str, Any] = {"state": state, "agent": agent.name, "tool": tool or call.name, "ok": ok,
                                      "latency_ms": latency}
            if not ok:
                fields["error"] = content
            if run.content:
                fields["args"] = args if args is not None else call.arguments
                if ok:
                    fields["result"] = content
            run.emit("tool_call", fields)
        return content

    def _person_step(self, run: Run, plan: _StatePlan) -> Steps:
        """Ask a person the state's question: their answer (validated against the state's output type) and
        the question; _TIMED_OUT when the deadline passed first. Raises _Paused while nobody has answered."""
        name = plan.name
        waiting = run.waiting
        if waiting is None:
            question = self._render(run, plan.instruction, name)
            waiting = {"state": name, "question": question, "seq": run.seqs.get(plan.person_key, 0),
                       "asked_at": None, "deadline": None}
            run.waiting = waiting
        seconds = plan.timeout.seconds if plan.timeout is not None else None
        reply: PersonReply = yield AwaitPerson(name, waiting["question"], self.answer_schema(plan),
                                               waiting["seq"], waiting["deadline"], seconds)
        if waiting["asked_at"] is None:
            waiting["asked_at"] = reply.now
            if seconds is not None:
                waiting["deadline"] = reply.now + seconds
        if reply.kind == "none":
            raise _Paused
        run.waiting = None
        run.seqs[plan.person_key] = waiting["seq"] + 1
        run.count("seqs", plan.person_key)
        if reply.kind == "timeout":
            if run.events:
                run.emit("answer", {"state": name, "timed_out": True})
            return _TIMED_OUT
        try:
            answer = self.parse_answer(plan, reply.value)
        except AnswerError as exc:
            if reply.scripted:
                raise RunFailed(Failure("script", f"state '{name}': the scripted answer does not fit: {exc}",
                                        state=name, origin=plan.spec.origin)) from None
            raise RunFailed(Failure("output", f"state '{name}': the answer does not fit: {exc}", state=name,
                                    origin=plan.spec.origin)) from None
        if run.events:
            fields: dict[str, Any] = {"state": name, "timed_out": False}
            if run.content:
                fields["answer"] = answer
            run.emit("answer", fields)
        return answer, waiting["question"]

    def answer_schema(self, plan: _StatePlan) -> dict[str, Any]:
        """The JSON Schema of an answer to `plan`'s question: its output type's, or text. A person answers
        with the value itself, so an output the model gets wrapped (`{"value": ...}`: a list, a variant)
        is shown unwrapped, its definitions kept."""
        if plan.schema is None:
            return {"type": "string"}
        if not plan.wrapped:
            return plan.schema
        inner = dict(plan.schema.get("properties", {}).get("value", {}))
        if "$defs" in plan.schema:
            inner["$defs"] = plan.schema["$defs"]
        return inner

    def parse_answer(self, plan: _StatePlan, given: Any) -> Any:
        """A person's answer as the state's output: text as it is for an untyped state; for a typed one a
        JSON value (text is read as JSON when it parses, else taken as the text itself). AnswerError says
        what does not fit."""
        if plan.output is None:
            if isinstance(given, str):
                return given
            raise AnswerError(f"state '{plan.name}' takes text as its answer, not {type(given).__name__}")
        candidates = [given]
        if isinstance(given, str):
            try:
                candidates.insert(0, json.loads(given))
            except ValueError:
                pass
        error = ""
        for value in candidates:
            try:
                return validate_typed(plan.output, value, plan.wrapped)
            except ValueError as exc:
                error = error or str(exc)
        # a declared type by its name; a list, a text type or a variant has only the generated schema's name
        what = f"the output type of state '{plan.name}'" if plan.wrapped or plan.variant else plan.schema_name
        raise AnswerError(f"the answer does not fit {what}: {error}")

    def check_answer(self, run: Run, given: Any) -> Any:
        """An answer given to a resumed run, checked before the run moves: AnswerError when the run waits
        for no answer or the answer does not fit (the run then keeps waiting, unchanged)."""
        if run.waiting is None:
            raise AnswerError(f"run '{run.run_id}' is not waiting for an answer")
        plan = self._plans[run.waiting["state"]]
        return self.parse_answer(plan, given)

    def _action_step(self, run: Run, plan: _StatePlan) -> Steps:
        call = plan.spec.call
        name = plan.name
        if call is None:
            raise RunFailed(Failure("tool", f"state '{name}' has neither an agent nor a tool call",
                                    state=name, origin=plan.spec.origin))
        seq = run.seqs.get(plan.tool_key, 0)
        run.seqs[plan.tool_key] = seq + 1
        run.count("seqs", plan.tool_key)
        scope = Scope(run.outputs.get(run.last_state) if run.last_state else None, run.inputs, run.outputs,
                      run.visits, run.locals or {})
        try:
            args = call.args(scope)
        except Exception as exc:  # noqa: BLE001 - reported as the step's failure
            raise RunFailed(Failure("tool", f"state '{name}': the arguments of {call.tool}(...) could not "
                                            f"be computed: {exc}", state=name, origin=call.origin)) from None
        try:
            outcome: ToolOutcome = yield CallTool(name, call.tool, args, seq, item=run.item)
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
                                                f"{_core_output_label(plan)}: {exc}", state=name,
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

    def _call_model(self, run: Run, role: str, state: str, key: str, agent: _AgentPlan | None,
                    messages: list[dict[str, Any]], schema: dict[str, Any] | None, schema_name: str,
                    tools: list[dict[str, Any]] | None) -> Steps:
        self._check_limits(run, state, False)
        seq = run.seqs.get(key, 0)
        run.seqs[key] = seq + 1
        run.count("seqs", key)
        if agent is not None:
            model, fallbacks, temperature = agent.model, agent.fallbacks, agent.temperature
        else:
            model, fallbacks, temperature = self._verifier_model, (), 0.0
        timeout = None
        if self._limits.seconds is not None:  # the call's deadline: what is left of the run's time
            timeout = max(self._limits.seconds - self._elapsed(run), 0.0)
        request = ModelRequest(
            role=role, state=state, model=model, messages=messages, temperature=temperature,
            response_schema=schema, schema_name=schema_name, tools=tools, fallbacks=fallbacks, timeout=timeout,
            max_tokens=self.max_tokens,
            metadata={"statewright": {"run_id": run.run_id, "state": state, "role": role, "seq": seq,
                                      "agent": agent.name if agent is not None else None,
                                      **({"item": run.item} if run.item is not None else {})}},
        )
        if self._budget_limited:
            estimate = yield EstimateCall(request)
            self._check_budget(run, request, estimate)
            if isinstance(run, _ForkedRun):
                run.reserved = estimate
        try:
            response: ModelResponse = yield CallModel(request)
        except ModelError as exc:
            if isinstance(run, _ForkedRun):
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
        if isinstance(run, _ForkedRun):
            run.reserved = (0, 0.0)
        usage = run.usage
        usage.prompt_tokens += response.prompt_tokens
        usage.completion_tokens += response.completion_tokens
        usage.cost_usd += response.cost_usd
        usage.llm_calls += 1
        if run.events:
            self._emit_call(run, request, response, agent, seq)
        return response

    def _emit_call(self, run: Run, request: ModelRequest, response: ModelResponse, agent: _AgentPlan | None,
                   seq: int) -> None:
        fields: dict[str, Any] = {
            "role": request.role, "state": request.state, "agent": agent.name if agent else None,
            "model": response.model or request.model, "call_index": seq,
            "prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens,
            "cost_usd": response.cost_usd, "latency_ms": response.latency_ms, "attempts": response.attempts,
        }
        if run.item is not None:
            fields["item"] = run.item
        if response.events:
            fields["events"] = response.events
        if run.content:
            fields["messages"] = request.messages
            reply: dict[str, Any] = {"content": response.content}
            if response.tool_calls:
                reply["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                       for c in response.tool_calls]
            fields["reply"] = reply
        run.emit("llm_call", fields)

    # -- transitions -------------------------------------------------------------------------------

    def _fire_direct(self, run: Run, plan: _StatePlan) -> None:
        target = plan.direct
        assert target is not None
        if run.visits.get(target, 0):
            run.feedback = f"This step is being done again: state '{plan.name}' sent the run back here."
        self._arrive(run, target)
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

    def _transition(self, run: Run, plan: _StatePlan, output: Any, instruction: str | None) -> Steps:
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
                    scope = Scope(output, run.inputs, run.outputs, run.visits)
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

    def _enabled(self, run: Run, plan: _StatePlan, edge: _Edge) -> bool:
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

    def _evaluate_guard(self, run: Run, plan: _StatePlan, edge: _Edge, scope: Scope) -> bool:
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

    def _fire(self, run: Run, plan: _StatePlan, edge: _Edge, cause: str, reason: str,
              verdict: Verdict | None) -> None:
        if edge.max is not None:
            run.edges[edge.key] = run.edges.get(edge.key, 0) + 1
            run.count("edges", edge.key)
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
        if cause == "stay":
            run.state = target
        else:
            self._arrive(run, target)
        if run.events:
            run.emit("transition", {"from": plan.name, "to": target, "cause": cause, "reason": reason,
                                    "index": edge.index})

    def _without_conditions(self, text: str) -> str:
        """Agents never read transition conditions, even when a verifier quotes one back."""
        if self._conditions_pattern is None:
            return text
        return self._conditions_pattern.sub("(...)", text)

    def _judge(self, run: Run, plan: _StatePlan, instruction: str | None, output: Any,
               edges: list[_Edge]) -> Steps:
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
                lambda conversation: self._call_model(run, "verifier", plan.name, plan.verifier_key, None,
                                                      conversation, schema, "verdict", None))
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
        limits = self._limits
        steps, usage, _ = _fan_out_totals(run)  # (every branch's steps and usage, while branches run)
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
        tokens, cost = estimate
        limits, state = self._limits, request.state
        _steps, usage, (reserved_tokens, reserved_cost) = _fan_out_totals(run)
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
            if run.locals:  # a map's element and position, in that element's step
                context.update(run.locals)
            run.context_cache = context
        return context

    def _render(self, run: Run, source: str, state: str, context: Mapping[str, Any] | None = None) -> str:
        templates = self.templates
        if templates.is_constant(source):
            return source
        # a template renders within what is left of the run's time (the renderer keeps its own clock)
        seconds = None if self._limits.seconds is None else max(self._limits.seconds - self._elapsed(run), 0.0)
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

    def _finish(self, run: Run, plan: _StatePlan, *, entered: bool) -> RunResult:
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
        """The run waits for a person: checkpointed as "waiting", resumed by giving the answer."""
        waiting = run.waiting
        assert waiting is not None
        self._save(run, "waiting")
        if run.events:
            fields: dict[str, Any] = {"state": waiting["state"], "deadline": waiting["deadline"]}
            if run.content:
                fields["question"] = waiting["question"]
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
        run.inputs_json = to_jsonable(dict(inputs))
        run.listen(emit)
        self._emit_start(run, resumed=False)
        return self._fail(run, failure)

    def _result(self, run: Run, status: str, final_state: str | None, result: Any,
                failure: Failure | None) -> RunResult:
        usage = run.usage
        waiting = None
        if status == "waiting" and run.waiting is not None:
            w = run.waiting
            waiting = Waiting(w["state"], w["question"], self.answer_schema(self._plans[w["state"]]),
                              w["asked_at"], w["deadline"])
        return RunResult(status=status, run_id=run.run_id, machine=self.machine.name, final_state=final_state,
                         result=result, path=list(run.path), outputs=dict(run.outputs), failure=failure,
                         usage=Usage(usage.prompt_tokens, usage.completion_tokens, usage.cost_usd,
                                     usage.llm_calls), workspace=run.workspace, waiting=waiting)

    def _emit_start(self, run: Run, resumed: bool) -> None:
        if run.events:
            fields: dict[str, Any] = {"run_id": run.run_id, "machine": self.machine.name,
                                      "inputs": run.inputs_json, "workspace": run.workspace}
            if resumed:
                fields.update(resumed=True, state=run.state, steps=run.steps)
            run.emit("run_start", fields)

    def _emit_end(self, run: Run, status: str, final_state: str | None, failure: Failure | None) -> None:
        run.emit("run_end", {"run_id": run.run_id, "status": status, "final_state": final_state,
                             "failure": failure.to_json() if failure else None, "usage": run.usage.to_json(),
                             "steps": run.steps, "path": run.path, "seconds": round(self._elapsed(run), 3)})

    # -- checkpoints -------------------------------------------------------------------------------

    def _save(self, run: Run, status: str, *, result: Any = None, final_state: str | None = None,
              failure: Failure | None = None) -> None:
        """Hand the checkpoint record to the run's `save` hook: a small head, and only what changed since
        the last save (so a save costs the same however much the run holds)."""
        changed = run.changed
        if changed is None:
            return
        changes: dict[str, Any] = {}
        if not run.saved_logs:  # the run's first record carries what never changes
            changes["inputs"] = run.inputs_json
        for mapping, values in (("outputs", run.outputs), ("visits", run.visits), ("edges", run.edges),
                                ("seqs", run.seqs)):
            keys = changed[mapping]
            if keys:
                if mapping == "outputs":
                    changes[mapping] = {name: to_jsonable(self._stored_output(name, values[name])) for name in keys}
                else:
                    changes[mapping] = {name: values[name] for name in keys}
                keys.clear()
        logs: dict[str, list[Any]] = {"path": run.path}
        for name, memory in run.memories.items():
            if memory.policy != "none":
                logs["memory:" + name] = memory.messages
        for name, items in logs.items():
            saved = run.saved_logs.get(name, 0)
            if len(items) > saved:
                changes[name] = items[saved:]
            run.saved_logs[name] = len(items)
        run.save(run.run_id, {"head": {
            "version": SNAPSHOT_VERSION, "machine": self.machine.name,
            "source_sha256": self.machine.source_sha256, "status": status, "state": run.state,
            "feedback": run.feedback, "usage": run.usage.to_json(), "steps": run.steps,
            "elapsed": self._elapsed(run), "last_state": run.last_state, "result": result,
            "final_state": final_state, "failure": failure.to_json() if failure else None,
            "workspace": run.workspace, "waiting": run.waiting, "source_path": self.machine.source_path,
            "fanout": run.fanout.to_json() if run.fanout is not None else None,
        }, "changes": changes or None})
