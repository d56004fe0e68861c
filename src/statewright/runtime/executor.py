"""The executor skeleton every face shares: the drive loop, one dispatch by effect type, one concurrency rule.

The core (core.py) runs a machine as a generator of effects (effects.py). `drive` runs that generator: it
performs each effect the core yields and sends the result back, or throws the effect's error into the core,
which decides what a failure means. A `Performer` performs effects: it dispatches on the effect's type
once, and it owns the rule for effects run at once (a parallel state's branches, a map's elements): start
them, answer with the first to finish, cancel those a join no longer waits for, abandon what is in flight
when the run ends.

The local engine (engine.py) and the Temporal workflow (temporal_workflow.py) are subclasses that supply
only the leaf effects — a model call, a tool call, a budget estimate, an agent's tool schemas, a person's
answer — so the faces cannot drift in how they drive the core.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, ClassVar

from .concurrency import Cancel, Completed, Concurrently
from .effects import AwaitPerson, CallModel, CallTool, DescribeTools, EstimateCall

# what a leaf of the dispatch is: the performer's method for one kind of effect
Leaf = Callable[[Any, Any], Awaitable[Any]]


class Performer:
    """Performs the effects of one run. Subclasses override the leaves; the rest is shared.

    `in_flight` holds the effects started by Concurrently and not yet answered, by key."""

    # effect type -> the name of the method that performs it (resolved per subclass, once)
    LEAVES: ClassVar[dict[type, str]] = {
        CallModel: "call_model",
        CallTool: "call_tool",
        EstimateCall: "estimate",
        DescribeTools: "describe_tools",
        AwaitPerson: "await_person",
        Concurrently: "concurrently",
        Cancel: "cancel",
    }
    _dispatch: ClassVar[dict[type, Leaf]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {kind: getattr(cls, name) for kind, name in cls.LEAVES.items()}

    # whether `settle` must be awaited before each effect (a run with a checkpoint store)
    settles = False

    def __init__(self) -> None:
        self.in_flight: dict[str, asyncio.Future[Any]] = {}

    async def perform(self, effect: Any) -> Any:
        leaf = self._dispatch.get(type(effect))
        if leaf is None:
            raise TypeError(f"{type(self).__name__} cannot perform {type(effect).__name__}")
        return await leaf(self, effect)

    async def settle(self) -> None:
        """Awaited before each effect the core yields when `settles` is true (not before the inner effects
        of a Concurrently): the local engine commits the checkpoint of what the run decided before it acts
        on it."""

    # -- the leaves: one per effect a face performs in its own way ---------------------------------------

    async def call_model(self, effect: CallModel) -> Any:
        raise NotImplementedError

    async def call_tool(self, effect: CallTool) -> Any:
        raise NotImplementedError

    async def estimate(self, effect: EstimateCall) -> tuple[int, float]:
        raise NotImplementedError

    async def describe_tools(self, effect: DescribeTools) -> tuple[list[dict[str, Any]], dict[str, str]]:
        raise NotImplementedError

    async def await_person(self, effect: AwaitPerson) -> Any:
        raise NotImplementedError

    # -- effects at once: the same on every face ---------------------------------------------------------

    async def concurrently(self, effect: Concurrently) -> Completed:
        """Start the effects of branches or map elements, and answer with the first of all those in flight to
        finish (of several finishing together, the one started first). On a durable engine the event loop
        is deterministic, so a replay sees the same one finish first."""
        in_flight = self.in_flight
        for key, inner in effect.start.items():
            in_flight[key] = asyncio.ensure_future(self.perform(inner))
        await asyncio.wait(list(in_flight.values()), return_when=asyncio.FIRST_COMPLETED)
        key = next(k for k, task in in_flight.items() if task.done())
        task = in_flight.pop(key)
        error = task.exception()
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, a stopped tool: the run stops, as for a call made alone
        return Completed(key, None if error is not None else task.result(), error)

    async def cancel(self, effect: Cancel) -> None:
        """Abandon effects a join no longer waits for (an activity is cancelled with its task)."""
        for key in effect.keys:
            task = self.in_flight.pop(key, None)
            if task is not None:
                task.cancel()

    def abandon(self) -> None:
        """Cancel what the run started and no longer waits for (its core has ended)."""
        for task in self.in_flight.values():
            task.cancel()
        self.in_flight.clear()


async def drive(steps: Generator[Any, Any, Any], performer: Performer) -> Any:
    """Run the core's generator to its end: perform each effect it yields and send back the result, or throw
    the error the effect raised into it (the core decides what a failure means). Whatever the run leaves in
    flight is abandoned when it ends, however it ends."""
    value: Any = None
    error: Exception | None = None
    settles = performer.settles
    dispatch = performer._dispatch  # (perform's lookup, inlined: this loop runs once per effect of every run)
    try:
        while True:
            try:
                effect = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            error = None
            if settles:
                await performer.settle()
            try:
                leaf = dispatch.get(type(effect))
                value = await (leaf(performer, effect) if leaf is not None else performer.perform(effect))
            except Exception as exc:  # noqa: BLE001 - sent back into the core, which turns it into a failure
                value, error = None, exc
    finally:
        performer.abandon()
