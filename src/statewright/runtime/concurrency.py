"""Effects several at a time: the calls of a parallel state's branches, or of a map's elements.

The core (core.py) runs each branch as its own generator of ordinary effects (effects.py) and hands the
executor every effect they ask for in a Concurrently; the executor keeps them all in flight and answers
with the first to finish, so that the branches' model calls overlap. Cancel abandons the effects a join no
longer waits for.
"""

from __future__ import annotations

from typing import Any


class Concurrently:
    """Effects to start now, by key, beside those already started and not yet answered: the calls of a
    parallel state's branches, or of a map's elements, run at the same time.

    Answered with a Completed for the next effect to finish, of all started this way and not yet answered
    (effects finishing together come in the order they were started). Each effect is performed as it would
    be alone; an executor keeps those in flight running between one Concurrently and the next."""

    __slots__ = ("start",)

    def __init__(self, start: dict[str, Any]) -> None:
        self.start = start


class Completed:
    """What a Concurrently is answered with: the key of the effect that finished, and its result or the
    error it raised."""

    __slots__ = ("error", "key", "value")

    def __init__(self, key: str, value: Any = None, error: BaseException | None = None) -> None:
        self.key = key
        self.value = value
        self.error = error


class Cancel:
    """Abandon effects started by Concurrently and not yet answered (the branches a `join first` no longer
    waits for): answered at once with None. An effect that finishes anyway is forgotten."""

    __slots__ = ("keys",)

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
