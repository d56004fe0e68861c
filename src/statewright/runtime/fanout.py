"""Branches and map elements: the parts of a run that run at once.

A parallel state starts its branches together and joins them (`join all`, `join first N [where ...]`); a
map state (`for x in list`) runs its step once per element, `concurrency` at a time. Each branch or element
is a `FanTask` running its own generator of effects over a `ForkedRun` — the run as that task sees it: its
own position, path, memories and trace events, and the counters and outputs it changes, until each finished
step is committed to the run (so a checkpoint never holds half a step of a branch). The core hands their
effects to the executor together in a Concurrently (concurrency.py) and each result back to the task that
asked. `FanOutSteps` is the core's part that does this; RunCore (core.py) mixes it in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .approvals import approval_key
from .bounds import bound_text, bound_value
from .concurrency import Cancel, Completed, Concurrently
from .effects import Paused
from .memory import AgentMemory
from .plan import MachinePlan, StatePlan
from .result import Failure, RunFailed, Usage
from .run_state import Run, Steps, _no_save, call_key, state_of_key
from .snapshot import FanOutRecord, TaskRecord
from .spec import MachineSpec, Scope
from .structured import to_jsonable, validate_typed
from .variables import VariableTypes, VarOp, read_var_ops, update_variables


class Overlay(dict):  # type: ignore[type-arg]
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


class ForkedMemories(dict):  # type: ignore[type-arg]
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


class ForkedRun(Run):
    """A run as one branch of a parallel state (or one element of a map) sees it while the branches run at
    once. Its position, path, feedback, memories and trace events are its own, and so are the counters and
    outputs it changes, the steps it takes and what its calls use, until each finished step is committed to
    the run (`RunCore._commit`). Limits count what every branch has used, committed or not."""

    __slots__ = ("fan", "parent", "reserved")

    def __init__(self, parent: Run, fan: FanOut, task: FanTask, variables: VariableTypes | None = None) -> None:
        for slot in ("run_id", "inputs", "inputs_json", "started", "elapsed_before", "system_prompts",
                     "tool_schemas", "workspace", "content", "events", "stamp", "observe", "caller", "call_path",
                     "calls", "call_heads", "approvals"):  # (every branch's calls and approvals are the run's,
            # by unique keys)
            setattr(self, slot, getattr(parent, slot))
        self.parent = parent
        self.fan = fan
        self.state = task.state
        self.last_state = task.last
        self.feedback = task.feedback
        self.path = list(task.path)
        self.outputs = Overlay(parent.outputs)
        self.visits = Overlay(parent.visits)
        self.edges = Overlay(parent.edges)
        self.seqs = Overlay(parent.seqs)
        self.memories = ForkedMemories(parent.memories, task.memory)
        # the variables as they were when the branches started, with this branch's own updates over them;
        # its log is its own, applied to the run at the join (in written order, with the other branches')
        self.vars = Overlay(parent.vars)
        self.var_log = []
        for op in task.writes if variables is not None else ():
            self.vars[op[0]] = variables.apply(self.vars, op)  # type: ignore[union-attr]
            self.var_log.append(op)
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


class FanTask:
    """One branch of a parallel state, or one element of a map: where it is, and what it has done up to its
    last finished step (what a checkpoint records, and a resumed run starts it from)."""

    __slots__ = ("cancelled", "committed_events", "done", "events", "feedback", "index", "instruction", "key", "last",
                 "locals", "memory", "number", "output", "path", "run", "state", "work", "writes")

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
        self.run: ForkedRun | None = None
        self.work: Steps | None = None  # its steps, as a generator of effects, while it runs
        self.writes: list[VarOp] = []  # its updates of run variables, as of its last finished step


class FanOut:
    """The branches of a parallel state (kind "parallel"), or the elements of a map ("map"), while they run:
    the tasks in their written order, the order they finished in, and (for a map) the number of its first
    element over the run."""

    __slots__ = ("accepted", "base", "finished", "kind", "state", "tasks")

    def __init__(self, state: str, kind: str, tasks: list[FanTask], base: int = 0) -> None:
        self.state = state
        self.kind = kind
        self.tasks = tasks
        self.base = base
        self.finished: list[int] = []  # task indexes, in the order they finished
        self.accepted: list[int] = []  # of those, the ones the join takes (a join guard may refuse some)

    def to_record(self) -> FanOutRecord:
        """What a checkpoint keeps of the branches: each task as of its last finished step."""
        tasks = []
        for t in self.tasks:
            record = TaskRecord(t.state, t.last, t.feedback, t.path, t.memory, t.done, writes=list(t.writes))
            if t.done and self.kind == "map":
                record.output = to_jsonable(t.output)
            if t.committed_events:
                record.events = [(e, to_jsonable(f), at) for e, f, at in t.events[:t.committed_events]]
            tasks.append(record)
        return FanOutRecord(self.state, self.kind, self.base, self.finished, self.accepted, tasks)

    @classmethod
    def from_record(cls, machine: MachineSpec, record: FanOutRecord) -> FanOut:
        """The branches or elements under way when a checkpoint was taken, as the run resumes them
        (ValueError when a finished element's output no longer validates)."""
        spec = machine.states[record.state]
        tasks = []
        for index, item in enumerate(record.tasks):
            task = FanTask(index, f"{spec.name}/{item.state}" if record.kind == "parallel"
                           else f"{spec.name}[{index}]", item.state)
            task.last, task.feedback, task.path = item.last, item.feedback, list(item.path)
            task.memory = {str(k): list(v) for k, v in item.memory.items()}
            task.done = item.done
            if task.done and record.kind == "map":
                output = item.output
                if spec.output is not None and output is not None:
                    output = validate_typed(spec.output, output, spec.output_wrapped)
                task.output = output
            task.events = [(str(e), dict(f), at) for e, f, at in item.events]
            task.committed_events = len(task.events)
            task.writes = read_var_ops(item.writes, f"branch {index + 1} under way")
            tasks.append(task)
        if record.kind == "parallel":  # a branch keeps its key: its entry, as written
            branches = spec.parallel.branches if spec.parallel is not None else ()
            for task in tasks:
                if task.index < len(branches):
                    task.key = f"{spec.name}/{branches[task.index]}"
        fan = cls(spec.name, record.kind, tasks, record.base)
        fan.finished = list(record.finished)
        fan.accepted = list(record.accepted)
        return fan


def fan_out_totals(run: Run) -> tuple[int, Usage, tuple[int, float]]:
    """The steps a run has taken and what it has used, counting its branches' uncommitted work, and the
    estimates of their calls in flight."""
    if not isinstance(run, ForkedRun):
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


def run_totals(run: Run) -> tuple[int, Usage, tuple[int, float]]:
    """What `fan_out_totals` counts, plus everything the machines the run is running have done so far: a
    caller's limits count what its calls do. (A call's own steps and usage join its caller's when it ends.)"""
    steps, usage, reserved = fan_out_totals(run)
    if not run.calls:
        return steps, usage, reserved
    usage = Usage(usage.prompt_tokens, usage.completion_tokens, usage.cost_usd, usage.llm_calls)
    tokens, cost = reserved
    for child in run.calls.values():
        child_steps, child_usage, (child_tokens, child_cost) = run_totals(child)
        steps += child_steps
        add_usage(usage, child_usage)
        tokens, cost = tokens + child_tokens, cost + child_cost
    return steps, usage, (tokens, cost)


def add_usage(total: Usage, more: Usage) -> None:
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




class FanOutSteps:
    """The core's steps of parallel states and maps (mixed into RunCore, whose other steps they call)."""

    if TYPE_CHECKING:  # what these steps use of the rest of the core (core.py)
        machine: MachineSpec
        plan: MachinePlan
        _plans: Mapping[str, StatePlan]

        def _check_limits(self, run: Run, state: str, before_step: bool) -> None: ...
        def _agent_step(self, run: Run, plan: StatePlan, feedback: str | None) -> Steps: ...
        def _action_step(self, run: Run, plan: StatePlan) -> Steps: ...
        def _call_step(self, run: Run, plan: StatePlan) -> Steps: ...
        def _transition(self, run: Run, plan: StatePlan, output: Any, instruction: str | None) -> Steps: ...
        def _fire_direct(self, run: Run, plan: StatePlan) -> None: ...
        def _record(self, run: Run, plan: StatePlan, visit: int, output: Any) -> None: ...
        def _save(self, run: Run, status: str) -> None: ...

    def _parallel_step(self, run: Run, plan: StatePlan, feedback: str | None) -> Steps:
        """Run a parallel state's branches at once and join them: the list of the joined branches' outputs,
        in the order the branches are written. Each branch runs from its entry until a state without
        transitions; with `join first`, the branches the join no longer waits for are cancelled."""
        spec = plan.spec.parallel
        assert spec is not None
        join = spec.join
        fan = run.fanout if run.fanout is not None else self._parallel_fan(run, plan, feedback)
        wanted = len(fan.tasks) if join.rule == "all" else (join.count or 1)

        def complete(task: FanTask) -> bool:
            fan.finished.append(task.index)
            if join.guard is None or self._join_guard(plan, task):
                fan.accepted.append(task.index)
            self._commit(run, task)
            return len(fan.accepted) >= wanted

        for task in fan.tasks:  # branches done before a run was resumed: their outputs are the run's
            if task.done and task.run is None:
                task.output = run.outputs.get(task.last) if task.last else None
            if task.done and task.index not in fan.finished:  # (not yet counted by the join)
                fan.finished.append(task.index)
                if join.guard is None or self._join_guard(plan, task):
                    fan.accepted.append(task.index)
        pending = [t for t in fan.tasks if not t.done] if len(fan.accepted) < wanted else []
        for task in pending:
            task.run = ForkedRun(run, fan, task, self.plan.variables)
            task.work = self._branch(task)
        try:
            yield from self._run_tasks(run, pending, None, complete)
        except RunFailed:
            self._abandon(run, fan)
            raise
        return self._parallel_join(run, plan, fan)

    def _parallel_fan(self, run: Run, plan: StatePlan, feedback: str | None) -> FanOut:
        """A parallel state's branches, about to start: each from its entry, which must have a visit left."""
        spec = plan.spec.parallel
        assert spec is not None
        name = plan.name
        for entry in spec.branches:  # a branch starts at its entry whatever its bound: a spent one stops the run
            limit = bound_value(self.machine.states[entry].visits, run.inputs)
            if limit is not None and run.visits.get(entry, 0) >= limit:
                raise RunFailed(Failure("bound", f"state '{name}': branch '{entry}' has used its visits {limit}",
                                        state=name, origin=plan.spec.origin))
        tasks = [FanTask(i, f"{name}/{entry}", entry) for i, entry in enumerate(spec.branches)]
        for task in tasks:
            task.feedback = feedback
        fan = run.fanout = FanOut(name, "parallel", tasks)
        if run.events:
            run.emit("fan_out", {"state": name, "kind": "parallel", "branches": list(spec.branches),
                                 "join": join_text(spec.join)})
        return fan

    def _parallel_join(self, run: Run, plan: StatePlan, fan: FanOut) -> list[Any]:
        """The join: the branches it no longer waits for cancelled, what the joined branches wrote to the run
        variables, what each branch told its agents and the states it went through made the run's (branch
        by branch), and the joined branches' outputs."""
        spec = plan.spec.parallel
        assert spec is not None
        name = plan.name
        for task in fan.tasks:
            if not task.done:
                task.cancelled = True  # (also those a resumed run found no longer waited for)
        joined = sorted(fan.accepted)
        self._join_writes(run, [fan.tasks[i] for i in joined])
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
            run.emit("join", {"state": name, "join": join_text(spec.join),
                              "finished": [spec.branches[i] for i in fan.finished],
                              "joined": [spec.branches[i] for i in joined],
                              "cancelled": [spec.branches[t.index] for t in fan.tasks if t.cancelled]})
        run.fanout = None
        run.context_cache = None
        return [fan.tasks[i].output for i in joined]

    def _join_guard(self, plan: StatePlan, task: FanTask) -> bool:
        """Whether a finished branch's output makes the join guard true (traced with the branch's events)."""
        join = plan.spec.parallel.join  # type: ignore[union-attr]
        view = task.run
        parent = view.parent if view is not None else None
        inputs = parent.inputs if parent is not None else {}
        outputs = parent.outputs if parent is not None else {}
        visits = parent.visits if parent is not None else {}
        guard = join.guard
        try:
            scope = Scope(task.output, inputs, outputs, visits, {}, view.vars if view is not None else {})
            value = bool(guard(scope)) if guard is not None else True
        except Exception as exc:  # noqa: BLE001 - a guard that cannot be evaluated is a typed failure
            raise RunFailed(Failure("guard", f"state '{plan.name}': the join guard `{join.text}` could not be "
                                             f"evaluated: {type(exc).__name__}: {exc}", state=plan.name,
                                    origin=join.origin)) from None
        if view is not None and view.events:
            branch = plan.spec.parallel.branches[task.index]  # type: ignore[union-attr]
            view.emit("guard", {"state": plan.name, "branch": branch, "text": join.text, "value": value})
        return value

    def _branch(self, task: FanTask) -> Steps:
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
            if _inside_step(view, plan):  # resumed inside the step it entered
                visit = view.visits.get(name, 0)
            else:
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
            self._record(view, plan, visit, output)
            if not plan.edges:
                return output  # the branch ends here: the join commits its last step
            if plan.direct is not None:
                self._fire_direct(view, plan)
            else:
                yield from self._transition(view, plan, output, instruction)
            self._commit(parent, task)

    def _map_step(self, run: Run, plan: StatePlan, feedback: str | None) -> Steps:
        """Run a state once per element of its list, `concurrency` elements at a time: the list of the
        elements' outputs, in the list's order. An empty list gives []; one longer than `max` ends the run
        (failure "bound")."""
        each = plan.spec.each
        assert each is not None
        items, most = self._map_items(run, plan)
        fan = self._map_fan(run, plan, feedback, items, most)
        for task in fan.tasks:
            task.locals = {each.item: items[task.index]}
            if each.index is not None:
                task.locals[each.index] = task.index
            task.number = fan.base + task.index
        pending = [t for t in fan.tasks if not t.done]
        for task in pending:
            task.run = ForkedRun(run, fan, task, self.plan.variables)
            task.work = self._element(plan.for_item(fan.base + task.index), task)

        def complete(task: FanTask) -> bool:
            fan.finished.append(task.index)
            self._commit(run, task)
            return False

        try:
            yield from self._run_tasks(run, pending, each.concurrency, complete)
        except RunFailed:
            self._abandon(run, fan)
            raise
        return self._map_join(run, plan, fan)

    def _map_items(self, run: Run, plan: StatePlan) -> tuple[list[Any] | tuple[Any, ...], int | None]:
        """The list a map runs over, and its bound (`max`); a typed failure where it cannot be computed, is
        no list, or is longer than its bound."""
        each = plan.spec.each
        assert each is not None
        name = plan.name
        try:
            items = each.items(Scope(None, run.inputs, run.outputs, run.visits, {}, run.vars))
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
        return items, most

    def _map_fan(self, run: Run, plan: StatePlan, feedback: str | None, items: list[Any] | tuple[Any, ...],
                 most: int | None) -> FanOut:
        """A map's elements: new ones, numbered on from the elements of its earlier visits; or those of a
        resumed run, which must be as many as the list has now."""
        each = plan.spec.each
        assert each is not None
        name = plan.name
        fan = run.fanout
        if fan is not None:
            if len(fan.tasks) != len(items):
                raise RunFailed(Failure("bound", f"state '{name}': the list `{each.text}` has {len(items)} "
                                                 f"elements; the run was stopped while mapping over "
                                                 f"{len(fan.tasks)}", state=name, origin=each.origin))
            return fan
        base = run.seqs.get(plan.items_key, 0)
        tasks = [FanTask(i, f"{name}[{i}]", name) for i in range(len(items))]
        for task in tasks:
            task.feedback = feedback
        fan = run.fanout = FanOut(name, "map", tasks, base)
        run.seqs[plan.items_key] = base + len(items)
        run.count("seqs", plan.items_key)
        if run.events:
            run.emit("fan_out", {"state": name, "kind": "map", "items": len(items), "max": most,
                                 "concurrency": each.concurrency})
        return fan

    def _map_join(self, run: Run, plan: StatePlan, fan: FanOut) -> list[Any]:
        """The join of a map: what each element wrote to the run variables and told its agents made the
        run's, in the list's order, and the elements' outputs."""
        name = plan.name
        self._join_writes(run, fan.tasks)
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

    def _element(self, plan: StatePlan, task: FanTask) -> Steps:
        """One element's step of a map: the state's work with the element (and its position) in scope."""
        view = task.run
        assert view is not None
        name = plan.name
        if not _inside_step(view, plan):
            if view.events:
                view.emit("item_start", {"state": name, "item": task.index})
            self._check_limits(view, name, True)
            view.steps += 1
        feedback, view.feedback = view.feedback, None
        output, task.instruction = yield from self._work(view, plan, feedback)
        if view.events:
            view.emit("item_end", {"state": name, "item": task.index, "output": output} if view.content
                      else {"state": name, "item": task.index})
        if plan.updates:
            update_variables(self.plan.variables, view, name, plan.updates, output)
        return output

    def _work(self, run: Run, plan: StatePlan, feedback: str | None) -> Steps:
        """A state's own work, in a branch or for a map's element: its agent's step or its tool call."""
        if plan.agent is not None:
            return (yield from self._agent_step(run, plan, feedback))
        if plan.kind == "call":
            return (yield from self._call_step(run, plan)), None
        if plan.kind == "human":
            raise RunFailed(Failure("tool", f"state '{plan.name}' asks a person, which a branch cannot",
                                    state=plan.name, origin=plan.spec.origin))
        return (yield from self._action_step(run, plan)), None

    def _run_tasks(self, run: Run, tasks: list[FanTask], limit: int | None,
                   complete: Callable[[FanTask], bool]) -> Steps:
        """Run the tasks' steps at once, at most `limit` at a time (in their order): every effect they ask
        for goes to the executor in a Concurrently, and each result back to the task that asked. When a task
        is done, `complete(task)` says whether the join has what it waits for; the tasks still running are
        then cancelled. A task whose call waits for a person stops where it is; once no task can go on, the
        run pauses (Paused), to go on with each of them when it is resumed."""
        waiting = deque(tasks)
        running: dict[str, FanTask] = {}  # key -> a task with an effect in flight, or about to be started
        start: dict[str, Any] = {}
        satisfied = False
        paused: list[FanTask] = []

        def advance(task: FanTask, value: Any, error: BaseException | None) -> bool:
            assert task.work is not None
            try:
                effect = task.work.send(value) if error is None else task.work.throw(error)
            except StopIteration as stop:
                running.pop(task.key, None)
                task.done, task.output, task.work = True, stop.value, None
                return complete(task)
            except Paused:  # a person is waited for: it goes on when the run is resumed, inside its step
                running.pop(task.key, None)
                task.work = None
                # its step so far is the run's: the state it entered, the calls it made and its events
                # (a machine it runs that waits has written its own so far)
                self._commit(run, task, cancelled=True)
                paused.append(task)
                return False
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
        yield from self._stop_tasks(run, running, start, paused, satisfied)

    def _stop_tasks(self, run: Run, running: Mapping[str, FanTask], start: Mapping[str, Any],
                    paused: list[FanTask], satisfied: bool) -> Steps:
        """When the tasks stop: those still running cancelled (their effects in flight too) with their
        steps so far committed; then the run pauses if a task waits for a person and the join does not have
        what it waits for yet, or else the waiting tasks' calls are abandoned with them."""
        in_flight = tuple(key for key in running if key not in start)
        if in_flight:
            yield Cancel(in_flight)
        for task in running.values():
            task.cancelled = True
            self._commit(run, task, cancelled=True)
        if paused and not satisfied:
            raise Paused
        for task in paused:  # the join has what it waits for: their calls are abandoned with them
            task.cancelled = True
            self._drop_calls(run, task)

    def _drop_calls(self, run: Run, task: FanTask) -> None:
        """Forget the calls and the tool calls waiting for approval that a task that will not go on had under
        way (keyed by its state, or its element)."""
        state = task.run.state if task.run is not None else task.state
        for key in [k for k in run.calls if state_of_key(k) == state]:
            del run.calls[key]
            run.call_heads.pop(key, None)
        waiting = approval_key(state, task.number)
        if waiting in run.approvals:
            del run.approvals[waiting]
            run.count("approvals", waiting)

    def _commit(self, run: Run, task: FanTask, *, cancelled: bool = False) -> None:
        """Hand a task's finished step to the run: the counters and outputs it changed, its steps and what
        its calls used; note where it is, and checkpoint. A cancelled task hands over what it did up to the
        cancellation (its calls were made: what they used counts)."""
        view = task.run
        assert view is not None
        for mapping in ("outputs", "visits", "edges", "seqs"):
            getattr(view, mapping).commit(run, mapping)
        run.steps += view.steps
        view.steps = 0
        add_usage(run.usage, view.usage)
        view.usage = Usage()
        task.state, task.last, task.feedback, task.path = view.state, view.last_state, view.feedback, list(view.path)
        task.writes = list(view.var_log)
        memories = view.memories
        task.memory = memories.added() if isinstance(memories, ForkedMemories) else {}
        task.committed_events = len(task.events)
        run.context_cache = None
        if not cancelled:
            self._save(run, "running")

    def _join_writes(self, run: Run, tasks: list[FanTask]) -> None:
        """Apply the updates of run variables the tasks made to the run's own, task by task in the order
        given (written order, or the list's), each task's in the order it made them. A value that does not
        fit after another task's update ends the run (failure kind "variable")."""
        variables = self.plan.variables
        for task in tasks:
            for op in task.writes:
                try:
                    run.vars[op[0]] = variables.apply(run.vars, op)
                except ValueError as exc:
                    name = run.fanout.state if run.fanout is not None else run.state
                    raise RunFailed(Failure("variable", f"state '{name}': the branches' updates of "
                                                        f"'{op[0]}' do not join: {exc}", state=name)) from None
                run.var_log.append(op)
            task.writes = []
        run.context_cache = None

    def _abandon(self, run: Run, fan: FanOut) -> None:
        """A task failed and the run with it: what every task's calls used counts, and their events are
        written, in order, for the failure to be read in context."""
        for task in fan.tasks:
            view = task.run
            if view is not None:
                run.steps += view.steps
                view.steps = 0
                add_usage(run.usage, view.usage)
                view.usage = Usage()
            if run.events:
                self._flush(run, task)

    @staticmethod
    def _flush(run: Run, task: FanTask) -> None:
        """Write the events a task held back, at the times they happened."""
        for event, fields, at in task.events:
            run.emit(event, {**fields, "time": at} if at is not None else fields)
        task.events = []
        task.committed_events = 0


def _inside_step(view: Run, plan: StatePlan) -> bool:
    """Whether a branch or an element was stopped inside its step at `plan`'s state, the state entered
    and committed: at a tool call that waits for approval, or in a machine it runs that waits. It goes on
    from there, without entering the state again."""
    if approval_key(plan.name, view.item) in view.approvals:
        return True
    return plan.kind == "call" and call_key(plan, view)[0] in view.calls
