"""A run's state: everything a run has done so far, what a checkpoint stores and a resume restores.

`Run` is what the core (core.py) reads and writes while it runs; snapshot.py turns it into the typed,
versioned records a checkpoint keeps and back. `Question` is the question a person has been asked and not
yet answered.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from .memory import AgentMemory
from .result import Usage
from .structured import to_jsonable


class Question:
    """A question put to a person and not yet answered: in which state, its text, which question of that
    state it is (`seq`), when it was first put and when the person's time runs out (seconds since the
    epoch; None before it was put, or when the state gives no deadline)."""

    __slots__ = ("asked_at", "deadline", "question", "seq", "state")

    def __init__(self, state: str, question: str, seq: int, asked_at: float | None = None,
                 deadline: float | None = None) -> None:
        self.state = state
        self.question = question
        self.seq = seq
        self.asked_at = asked_at
        self.deadline = deadline

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "question": self.question, "seq": self.seq, "asked_at": self.asked_at,
                "deadline": self.deadline}


# a step's generator: yields effects (effects.py), is sent their results, returns what the step gives
Steps = Generator[Any, Any, Any]


def _no_event(event: str, fields: dict[str, Any]) -> None:
    pass


def _no_save(run_id: str, delta: Any) -> None:
    pass


class Run:
    """Everything a run has done so far: what a checkpoint stores and a resume restores.

    `emit` and `save` are the executor's hooks for trace events and checkpoint records; `content` says
    whether events carry messages, replies and tool arguments.
    """

    __slots__ = (
        "approvals",
        "call_heads",
        "call_path",
        "caller",
        "calls",
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
        "trace_context",
        "usage",
        "var_log",
        "vars",
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
        self.waiting: Question | None = None  # the question a person has been asked and not yet answered
        # the W3C traceparent of the run's first span (otel.py), kept in checkpoints: one trace per run
        self.trace_context: str | None = None
        self.emit: Callable[[str, dict[str, Any]], None] = _no_event
        self.events = False  # whether anyone listens to `emit`
        self.content = False
        self.save: Callable[[str, Any], None] = _no_save
        # the wall time of an event, as ISO text, for the events a branch holds back until its join
        self.stamp: Callable[[], str] | None = None
        self.fanout: Any = None  # the parallel state's branches or the map's elements under way (fanout.FanOut)
        self.locals: dict[str, Any] | None = None  # a map's element and position, in that element's step
        self.item: int | None = None  # which element of a map this step is, numbered over the run
        # hears ("instruction" | "output", state, visit, value) for every step: a test block's expectations
        self.observe: Callable[[str, str, int, Any], None] | None = None
        # a machine another one runs: the run that called it (and its core, whose limits the call counts
        # toward), and where it is in the caller (`investigate[2]`, `a/b` for a call within a call)
        self.caller: tuple[Run, Any] | None = None
        self.call_path = ""
        # the calls under way in this run's step (machines it runs), by key (`state#n`, `state[item]`), and
        # the head each last saved: a checkpoint of this run carries them (snapshot.py)
        self.calls: dict[str, Run] = {}
        self.call_heads: dict[str, Any] = {}
        # the run variables' values, and every update applied to them, in order (variables.py): a checkpoint
        # keeps the log and replays it; a branch's view keeps its own, applied to the run at the join
        self.vars: dict[str, Any] = {}
        self.var_log: list[Any] = []
        # the tool calls of its agents that wait for a person's approval, by where they are (`execute`,
        # `build[3]` for a map's element): approvals.ApprovalRecord records (a branch's are the run's)
        self.approvals: dict[str, Any] = {}

    def listen(self, emit: Callable[[str, dict[str, Any]], None] | None, *, content: bool = False,
               save: Callable[[str, Any], None] | None = None,
               stamp: Callable[[], str] | None = None) -> None:
        """Attach the executor's hooks: `emit` for trace events, `save` for checkpoint records (a
        snapshot.Delta), `stamp` for the time of an event a branch holds back (it is written when the
        branches join)."""
        self.stamp = stamp
        if emit is not None:
            self.emit, self.events, self.content = emit, True, content
        if save is not None:
            self.save = save
            if self.changed is None:
                self.changed = {"outputs": set(), "visits": set(), "edges": set(), "seqs": set(),
                                "approvals": set()}

    def count(self, mapping: str, key: str) -> None:
        """Note a changed entry of `outputs`, `visits`, `edges`, `seqs` or `approvals` for the next checkpoint."""
        changed = self.changed
        if changed is not None:
            changed[mapping].add(key)


# the separator of a call's key from its number: `investigate#0` (a state's name never holds it)
CALL_KEY_MARK = "#"


def call_key(plan: Any, run: Run) -> tuple[str, str]:
    """The key a call is kept under in its caller (unique over the run: a state's calls are numbered, a
    map's elements are numbered over the run) and where it is shown to be (`investigate`, `investigate[2]`)."""
    if run.item is not None:
        where = f"{plan.name}[{run.item}]"
        return where, where
    return f"{plan.name}{CALL_KEY_MARK}{run.seqs.get(plan.call_key, 0)}", plan.name


def where_of_key(key: str) -> str:
    """Where a call is shown to be, from its key: `investigate#3` -> `investigate`; `research[2]` as it is."""
    return key.split(CALL_KEY_MARK, 1)[0]


def state_of_key(key: str) -> str:
    """The calling state of a call's key."""
    return where_of_key(key).split("[", 1)[0]


def real_run(run: Run) -> Run:
    """The run a branch's view belongs to (a run itself for anything else): the one that is checkpointed."""
    parent = getattr(run, "parent", None)
    return parent if parent is not None else run
