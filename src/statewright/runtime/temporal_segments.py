"""What a run's workflow and its segments agree on (--durability segment; temporal_worker.py, docs/temporal.md):
the key that names a call (or a person's answer) among a run's effects, the machines whose runs a segment
could make go another way than their workflow, and how a segment stops."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .effects import AwaitPerson
from .spec import MachineSpec
from .temporal import TEMPORAL_CALL_MODEL


class SegmentEnd(BaseException):  # not an Exception: the core must not take it for a call's failure
    """A segment stops here (a person is asked, its calls are many, the server no longer wants it)."""


def segment_key(name: str, payload: Mapping[str, Any]) -> str:
    """What names a call among a run's calls, the same in its workflow and in a segment: a model call by
    the identity its request carries (state, role, number, element, machine) and a digest of the request
    itself (messages, schema, tools, model: all but the time left to it), a tool call by its machine, state,
    tool, number, element and a digest of its arguments. An answer is taken only for the very request it
    answered: a run that went another way in its workflow than in a segment asks for other keys."""
    if name == TEMPORAL_CALL_MODEL:
        request = dict(payload.get("request") or {})
        identity = (request.get("metadata") or {}).get("statewright") or {}
        request.pop("timeout", None)
        return json.dumps(["model", identity, _digest(request)], sort_keys=True)
    return json.dumps(["tool", payload.get("key"), payload.get("state"), payload.get("tool"), payload.get("seq"),
                       payload.get("item"), _digest(payload.get("args"))])


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


SEGMENT_STOPS = "segment_stops"  # an answer the workflow logged for a call whose activity failed


def segments_unsafe(machine: MachineSpec) -> bool:
    """Whether a run of `machine` (or of a machine it runs) could go another way in a segment than in its
    workflow: a `seconds` limit (a segment reads the wall clock, the workflow Temporal's), or a parallel
    state that takes the first branches to finish (which finish first differs between the two). Such runs
    make each call an activity, as with `call`."""
    from .spec import every_machine

    for each in every_machine(machine):
        if each.limits.seconds is not None:
            return True
        if any(state.parallel is not None and state.parallel.join.rule != "all" for state in each.states.values()):
            return True
    return False


def person_key(effect: AwaitPerson) -> str:
    return json.dumps(["person", effect.where, effect.seq, effect.item])
