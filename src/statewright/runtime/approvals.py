"""Approval between tool calls: an agent's call of a tool in its state's `ask before [...]` waits for a person.

The person approves the call (it runs), rejects it (it does not run; the agent reads the reason as the
call's result) or edits its arguments (it runs with those, checked first against the tool's argument
schema). The wait is a person's answer like a state's question: the core yields an AwaitPerson, a local run
pauses (checkpointed) and is resumed with the answer, a durable engine waits for its signal, a script or a
test block answers in order. What the answer may be is typed (`approval_schema`) and checked before the
run moves (`parse_approval`); an answer that does not fit leaves the run waiting, unchanged.

A call that waits is in the middle of an agent's step: its `ApprovalRecord` keeps where the step's tool
loop was — the conversation so far, the round, the round's calls and which of them waits, the attempt of a
typed reply — so a resumed run carries on from there, and asks its model nothing it asked before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .effects import AwaitPerson, Paused, PersonReply
from .result import AnswerError, Failure, RunFailed
from .run_state import Run, Steps, real_run
from .structured import safe_json_dumps
from .untrusted import BorderError, check_value, read_json

DECISIONS = ("approve", "reject", "edit")
# what an agent reads as the result of a call a person rejected
REJECTED = "A person reviewing this call rejected it; it did not run."


class ApprovalPaused(Paused):
    """A tool call waits for a person's approval: the run stops in the middle of the agent's step."""


class ApprovalDecision:
    """A person's answer to a tool call that waits: "approve", "reject" (with an optional reason) or "edit"
    (with the arguments to call the tool with instead)."""

    __slots__ = ("arguments", "decision", "reason")

    def __init__(self, decision: str, reason: str | None = None, arguments: dict[str, Any] | None = None) -> None:
        self.decision = decision
        self.reason = reason
        self.arguments = arguments

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"decision": self.decision}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.arguments is not None:
            data["arguments"] = self.arguments
        return data


class ToolLoop:
    """Where an agent's step is in its tool loop: what a call that waits keeps, and a resumed step continues
    from. `conversation` is the typed reply's conversation at `attempt` (the instruction, and the replies sent
    back); `tool_conversation` the tool loop's, up to the call that waits (the model's reply asking for the
    round's `calls`, and the results of those before `index`)."""

    __slots__ = ("attempt", "calls", "conversation", "index", "instruction", "round", "tool_conversation",
                 "user_text")

    def __init__(self, instruction: str, user_text: str) -> None:
        self.instruction = instruction
        self.user_text = user_text
        self.attempt = 0
        self.conversation: list[dict[str, Any]] = []
        self.tool_conversation: list[dict[str, Any]] = []
        self.round = 0
        self.calls: list[dict[str, Any]] = []
        self.index = 0

    def to_json(self) -> dict[str, Any]:
        return {"instruction": self.instruction, "user_text": self.user_text, "attempt": self.attempt,
                "conversation": list(self.conversation), "tool_conversation": list(self.tool_conversation),
                "round": self.round, "calls": list(self.calls), "index": self.index}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolLoop:
        loop = cls(str(data["instruction"]), str(data["user_text"]))
        loop.attempt, loop.round, loop.index = int(data["attempt"]), int(data["round"]), int(data["index"])
        loop.conversation = list(data["conversation"])
        loop.tool_conversation = list(data["tool_conversation"])
        loop.calls = list(data["calls"])
        return loop


class ApprovalRecord:
    """A tool call that waits for a person: which call (its tool, the model's id for it, its arguments), the
    tool's argument schema an edit must fit, the question shown, which answer of the state's it takes
    (`seq`), when it was first put, and the tool loop to resume. It stands where a state's question does in
    a run's waits (`state`, `question`, `seq`, `asked_at`, `deadline`)."""

    __slots__ = ("arguments", "asked_at", "call_id", "function", "item", "key", "loop", "question", "schema", "seq",
                 "state", "tool")

    kind = "approval"
    deadline = None  # a call waits until a person answers

    def __init__(self, key: str, state: str, item: int | None, tool: str, call_id: str, function: str,
                 arguments: dict[str, Any], schema: dict[str, Any], seq: int, loop: ToolLoop,
                 asked_at: float | None = None) -> None:
        self.key = key
        self.state = state
        self.item = item
        self.tool = tool
        self.call_id = call_id
        self.function = function
        self.arguments = arguments
        self.schema = schema
        self.seq = seq
        self.loop = loop
        self.asked_at = asked_at
        self.question = approval_question(tool, arguments)

    @property
    def answer_schema(self) -> dict[str, Any]:
        return approval_schema(self.tool, self.schema)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "item": self.item, "tool": self.tool, "call_id": self.call_id,
                "function": self.function, "arguments": self.arguments, "schema": self.schema, "seq": self.seq,
                "asked_at": self.asked_at, "loop": self.loop.to_json()}

    @classmethod
    def from_json(cls, key: str, data: Any) -> ApprovalRecord:
        """A record read back from a checkpoint; ValueError says what does not fit."""
        if not isinstance(data, dict):
            raise ValueError(f"the tool call waiting at {key} is not an object")  # noqa: TRY004 - a damaged record
        try:
            item = data.get("item")
            asked = data.get("asked_at")
            arguments, schema, loop = data["arguments"], data["schema"], data["loop"]
            if not isinstance(arguments, dict) or not isinstance(schema, dict) or not isinstance(loop, dict):
                raise TypeError("its arguments, schema and loop are objects")
            for name in ("conversation", "tool_conversation", "calls"):
                if not isinstance(loop.get(name), list) or not all(isinstance(m, dict) for m in loop[name]):
                    raise TypeError(f"its {name} is a list of objects")
            return cls(key, _checked_text(data["state"]), None if item is None else _checked_count(item), _checked_text(data["tool"]),
                       _checked_text(data["call_id"]), _checked_text(data["function"]), arguments, schema, _checked_count(data["seq"]),
                       ToolLoop.from_json(loop), None if asked is None else float(asked))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the tool call waiting at {key} does not read back ({exc})") from None


def _checked_text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _checked_count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{value!r} is not a count")
    return value


def approval_key(state: str, item: int | None) -> str:
    """Where a call that waits is in its run: the state, or `state[item]` for a map's element."""
    return state if item is None else f"{state}[{item}]"


def approval_question(tool: str, arguments: Mapping[str, Any]) -> str:
    """The question a person is asked about a call."""
    return f"Run {tool} with {safe_json_dumps(arguments, sort_keys=True)}?"


def approval_schema(tool: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an answer to a call of `tool`: approve it, reject it (with a reason the agent
    reads), or edit its arguments (`parameters`, the tool's argument schema). `tool`, when given, must name
    the call's tool."""
    named = {"tool": {"const": tool}}

    def answer(decision: str, fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": {"decision": {"const": decision}, **fields, **named},
                "required": ["decision", *required], "additionalProperties": False}

    return {"oneOf": [answer("approve", {}, []), answer("reject", {"reason": {"type": "string"}}, []),
                      answer("edit", {"arguments": dict(parameters)}, ["arguments"])]}


def parse_approval(record: ApprovalRecord, given: Any) -> ApprovalDecision:
    """A person's answer to the call `record` waits on, checked: AnswerError says what does not fit. Text is
    read as JSON when it parses; the words `approve` and `reject` alone are those decisions."""
    try:
        check_value(given, "the answer")  # before json and the schema check, which recurse
    except BorderError as exc:
        raise AnswerError(str(exc)) from None
    value = given
    if isinstance(given, str):
        word = given.strip()
        if word in ("approve", "reject"):
            value = {"decision": word}
        else:
            try:
                value = read_json(given, "the answer")
            except ValueError as exc:
                raise AnswerError(f"the answer to a tool call is JSON, such as {{\"decision\": \"approve\"}}: {exc}"
                                  ) from None
    if not isinstance(value, dict):
        raise AnswerError("the answer to a tool call is an object: {\"decision\": \"approve\"}, {\"decision\": "
                          "\"reject\", \"reason\": \"...\"} or {\"decision\": \"edit\", \"arguments\": {...}}")
    decision = value.get("decision")
    if decision not in DECISIONS:
        raise AnswerError(f"the answer's decision is {json.dumps(decision)}: it is one of approve, reject or edit")
    allowed = {"decision", "tool", *({"reason"} if decision == "reject" else ()),
               *({"arguments"} if decision == "edit" else ())}
    extra = sorted(set(value) - allowed)
    if extra:
        raise AnswerError(f"an answer that decides {decision!r} has no field {', '.join(map(repr, extra))}")
    if "tool" in value and value["tool"] != record.tool:
        raise AnswerError(f"the call that waits is of {record.tool}, not {value['tool']!r}")
    reason = value.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise AnswerError("the reason of a rejection is text")
    if decision != "edit":
        return ApprovalDecision(decision, reason)
    arguments = value.get("arguments")
    if not isinstance(arguments, dict):
        raise AnswerError("an edit gives the call's arguments as an object: {\"decision\": \"edit\", \"arguments\": "
                          "{...}}")
    problems = schema_problems(record.schema, arguments)
    if problems:
        shown = "; ".join(problems[:12]) + (f"; and {len(problems) - 12} more" if len(problems) > 12 else "")
        raise AnswerError(f"the edited arguments do not fit {record.tool}: {shown}")
    return ApprovalDecision("edit", None, arguments)


# ---- the arguments an edit gives, against the tool's JSON Schema ----------------------------------------

_SCHEMA_TYPES: dict[str, Any] = {"string": str, "object": dict, "array": list, "boolean": bool}


def schema_problems(schema: Mapping[str, Any], value: Any, where: str = "", root: Mapping[str, Any] | None = None,
                    depth: int = 0) -> list[str]:
    """Where `value` does not fit `schema` (the subset of JSON Schema a tool's arguments are described in:
    types, properties, required, additionalProperties, items, anyOf and oneOf, $ref into $defs, enum,
    const, ranges, lengths and patterns); [] when it fits. Keywords it does not know are not checked here:
    the tool checks its arguments again when it is called."""
    root = schema if root is None else root
    here = where or "the arguments"
    if depth > 200:
        return [f"{here} nest too deeply"]
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _schema_ref(root, ref)
        return [f"{here}: the schema's {ref} cannot be followed"] if target is None else schema_problems(
            target, value, where, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            found = [schema_problems(o, value, where, root, depth + 1) for o in options if isinstance(o, dict)]
            if found and all(found):
                return min(found, key=len)
    problems: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        kinds = expected if isinstance(expected, list) else [expected]
        if not any(_schema_is_type(value, k) for k in kinds):
            return [f"{here} is {_schema_kind(value)}, not {' or '.join(map(str, kinds))}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{here} is {json.dumps(value)[:80]}, not {json.dumps(schema['const'])[:80]}")
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        problems.append(f"{here} is not one of {', '.join(json.dumps(v)[:40] for v in schema['enum'])}")
    problems += _schema_bounds(schema, value, here)
    if isinstance(value, dict):
        problems += _schema_object(schema, value, where, root, depth)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems += schema_problems(schema["items"], item, f"{where}[{index}]", root, depth + 1)
    return problems


def _schema_object(schema: Mapping[str, Any], value: dict[str, Any], where: str, root: Mapping[str, Any],
            depth: int) -> list[str]:
    problems: list[str] = []
    given = schema.get("properties")
    properties: Mapping[str, Any] = given if isinstance(given, dict) else {}
    for name in schema.get("required") or ():
        if name not in value:
            problems.append(f"`{where}{'.' if where else ''}{name}` is missing")
    extra = schema.get("additionalProperties")
    for name, item in value.items():
        path = f"{where}.{name}" if where else name
        if name in properties and isinstance(properties[name], dict):
            problems += schema_problems(properties[name], item, f"`{path}`", root, depth + 1)
        elif extra is False:
            known = ", ".join(properties) or "none"
            problems.append(f"`{path}` is not one of its parameters ({known})" if not where
                            else f"`{path}` is not a field here ({known})")
        elif isinstance(extra, dict):
            problems += schema_problems(extra, item, f"`{path}`", root, depth + 1)
    return problems


def _schema_bounds(schema: Mapping[str, Any], value: Any, here: str) -> list[str]:
    problems = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(schema.get("minimum"), (int, float)) and value < schema["minimum"]:
            problems.append(f"{here} is below {schema['minimum']}")
        if isinstance(schema.get("maximum"), (int, float)) and value > schema["maximum"]:
            problems.append(f"{here} is above {schema['maximum']}")
    sized = len(value) if isinstance(value, (str, list)) else None
    low, high = ("minLength", "maxLength") if isinstance(value, str) else ("minItems", "maxItems")
    if sized is not None and isinstance(schema.get(low), int) and sized < schema[low]:
        problems.append(f"{here} is shorter than {schema[low]}")
    if sized is not None and isinstance(schema.get(high), int) and sized > schema[high]:
        problems.append(f"{here} is longer than {schema[high]}")
    pattern = schema.get("pattern")
    if isinstance(value, str) and isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                problems.append(f"{here} does not match {pattern}")
        except re.error:
            pass  # a pattern Python's re does not read: the tool checks it when it is called
    return problems


def _schema_ref(root: Mapping[str, Any], ref: str) -> Mapping[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def _schema_is_type(value: Any, kind: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    wanted = _SCHEMA_TYPES.get(str(kind))
    return wanted is not None and isinstance(value, wanted) and (kind != "boolean" or isinstance(value, bool))


def _schema_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "an object"


# ---- the core's part ------------------------------------------------------------------------------------


class ApprovalSteps:
    """The core's step of a tool call that waits for a person (mixed into RunCore, used by agent_steps.py)."""

    if TYPE_CHECKING:
        machine: Any

    def _approve(self, run: Run, plan: Any, tool: str, call: Any, arguments: dict[str, Any],
                 parameters: dict[str, Any], loop: ToolLoop) -> Steps:
        """Ask a person about the call `call` of `tool` with `arguments`: their ApprovalDecision. The run pauses
        (ApprovalPaused) while nobody has answered; the record of the call keeps `loop` to resume from."""
        key = approval_key(plan.name, run.item)
        record = run.approvals.get(key)
        if record is None or record.call_id != call.id:
            record = ApprovalRecord(key, plan.name, run.item, tool, call.id, call.name, arguments, parameters,
                              run.seqs.get(plan.person_key, 0), loop_snapshot(loop))
            run.approvals[key] = record
            _note_changed(run, key)
        reply: PersonReply = yield AwaitPerson(plan.name, record.question, record.answer_schema, record.seq, None,
                                               None, call=run.call_path, item=run.item)
        if record.asked_at is None and not reply.scripted:
            record.asked_at = reply.now
            _note_changed(run, key)
        if reply.kind != "answer":  # (no deadline: nobody's silence ends the wait)
            raise ApprovalPaused
        del run.approvals[key]
        _note_changed(run, key)
        run.seqs[plan.person_key] = record.seq + 1
        run.count("seqs", plan.person_key)
        try:
            decision = parse_approval(record, reply.value)
        except AnswerError as exc:
            kind = "script" if reply.scripted else "output"
            raise RunFailed(Failure(kind, f"state '{plan.name}': the answer to the call of {tool} does not fit: "
                                          f"{exc}", state=plan.name, origin=plan.spec.origin)) from None
        if run.events:
            fields: dict[str, Any] = {"state": plan.name, "tool": tool, "decision": decision.decision}
            if run.item is not None:
                fields["item"] = run.item
            if not reply.scripted and record.asked_at is not None:
                fields["asked_at"] = record.asked_at
            if run.content:
                if decision.reason is not None:
                    fields["reason"] = decision.reason
                if decision.arguments is not None:
                    fields["arguments"] = decision.arguments
            run.emit("approval", fields)
        return decision


def loop_snapshot(loop: ToolLoop) -> ToolLoop:
    """A copy of where the loop is (the loop goes on changing after the call that waits was recorded)."""
    return ToolLoop.from_json(loop.to_json())


def _note_changed(run: Run, key: str) -> None:
    """Note a changed record of a call that waits, for the run's next checkpoint (a branch's are the run's)."""
    real_run(run).count("approvals", key)


def rejection_text(reason: str | None) -> str:
    """What the agent reads as the result of a call a person rejected."""
    return f"{REJECTED} Their reason: {reason}" if reason else REJECTED
