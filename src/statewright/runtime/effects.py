"""What the deterministic core asks the world to do: the effects an executor performs.

The core (core.py) never calls a model, runs a tool or reads a clock itself. It yields one of these
requests, and whoever drives it — the local asyncio executor (engine.py), or a durable engine that records
each result — performs it and sends the result back (or throws the error it raised into the core). Only
effects touch the world, and only effects are ever retried.
"""

from __future__ import annotations

from typing import Any

from .client import ModelRequest


class CallModel:
    """One model call (agent, verifier or designer): answered with a ModelResponse, or a ModelError."""

    __slots__ = ("request",)

    def __init__(self, request: ModelRequest) -> None:
        self.request = request


class EstimateCall:
    """What a call would use at most, asked before it is made: answered with (tokens, cost_usd)."""

    __slots__ = ("request",)

    def __init__(self, request: ModelRequest) -> None:
        self.request = request


class CallTool:
    """One tool call: by an action state (`agent` None) or asked for by an agent's model.

    Answered with a ToolOutcome holding the tool's JSON-ready result, or a ToolError whose text is meant for a model. `seq` counts
    the state's earlier tool calls in the run (kept in checkpoints), so a scripted tool answers a resumed
    run exactly as it would have answered the interrupted one.
    """

    __slots__ = ("agent", "args", "call", "item", "machine", "seq", "state", "tool")

    def __init__(self, state: str, tool: str, args: dict[str, Any], seq: int, agent: str | None = None,
                 item: int | None = None, call: str = "", machine: Any = None) -> None:
        self.state = state
        self.tool = tool
        self.args = args
        self.seq = seq
        self.agent = agent
        self.item = item  # a map's element, numbered over the run: a script answers it by that number
        self.call = call  # where the run making it is, when another machine runs it (`investigate[2]`)
        self.machine = machine  # the MachineSpec whose tools these are (a machine another one runs has its own)

    @property
    def where(self) -> str:
        """The state's path: `investigate/draft` in a machine that `investigate` runs (what scripts name)."""
        return f"{self.call}/{self.state}" if self.call else self.state


class ToolOutcome:
    """What a CallTool is answered with: the result, how long the call took, whether a script gave it."""

    __slots__ = ("latency_ms", "scripted", "value")

    def __init__(self, value: Any, latency_ms: float = 0.0, scripted: bool = False) -> None:
        self.value = value
        self.latency_ms = latency_ms
        self.scripted = scripted


class DescribeTools:
    """The function-tool schemas of an agent's tools: answered with (schemas, {function name: tool name})."""

    __slots__ = ("agent", "machine", "state", "tools")

    def __init__(self, state: str, agent: str, tools: tuple[str, ...], machine: Any = None) -> None:
        self.state = state
        self.agent = agent
        self.tools = tools
        self.machine = machine  # the MachineSpec whose tools these are


class Paused(Exception):
    """A person has not answered yet: the run stops here, checkpointed, until it is resumed."""


class AwaitPerson:
    """A person's answer to a state's question, or to a tool call that waits for approval (approvals.py):
    answered with a PersonReply.

    `seq` counts the state's earlier questions in the run; `deadline` is when the person's time runs out
    (None before the question was first put, or when the state has no `after`), and `seconds` how long
    the state gives. An executor answers at once: with the answer it holds for the run, with "timeout"
    once the deadline has passed, or with "none" — the run then pauses, durably, until it is resumed with
    an answer. A durable engine may instead wait (a signal, a timer) before it answers.
    """

    __slots__ = ("call", "deadline", "item", "question", "schema", "seconds", "seq", "state")

    def __init__(self, state: str, question: str, schema: dict[str, Any], seq: int, deadline: float | None,
                 seconds: float | None, call: str = "", item: int | None = None) -> None:
        self.state = state
        self.question = question
        self.schema = schema
        self.seq = seq
        self.deadline = deadline
        self.seconds = seconds
        self.call = call  # where the run asking is, when another machine runs it
        self.item = item  # a map's element whose tool call waits (approvals.py), numbered over the run

    @property
    def where(self) -> str:
        """The state's path (`investigate[2]/approve`; `build[3]` for a map's element): scripts and answers
        name it."""
        state = self.state if self.item is None else f"{self.state}[{self.item}]"
        return f"{self.call}/{state}" if self.call else state


class PersonReply:
    """What an AwaitPerson is answered with. kind: "answer" (`value` is the answer as given: text or a
    JSON value), "timeout" (the deadline passed) or "none" (no answer yet); `now` is the executor's wall
    clock (seconds since the epoch), from which the core takes the question's time and deadline."""

    __slots__ = ("kind", "now", "scripted", "value")

    def __init__(self, kind: str, now: float, value: Any = None, scripted: bool = False) -> None:
        self.kind = kind
        self.now = now
        self.value = value
        self.scripted = scripted


Effect = CallModel | EstimateCall | CallTool | DescribeTools | AwaitPerson
