"""Scripted replies for test blocks, `--script` runs and unit tests, answered by an in-process client."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .client import ModelError, ModelRequest, ModelResponse, ToolCallRequest, rough_call_estimate
from .spec import MachineSpec, TestSpec, state_at
from .untrusted import MAX_DEPTH, BorderError, read_json_file

# designer: `design` and `optimize --llm`; person: the answers of states that `ask` ({"answer": VALUE}, or
# {"timeout": true} for a person who does not answer in time)
SCRIPT_ROLES = ("agent", "verifier", "tool", "designer", "person")
SCRIPT_LOG_ENV = "STATEWRIGHT_SCRIPT_LOG"


@dataclass(frozen=True)
class ScriptedReply:
    value: Any
    delay: float = 0.0  # seconds the provider waits before answering


class ScriptError(ValueError):
    """A script (JSON file or hand-built) that does not have the documented shape."""


# a reply may nest as deep as any reply (MAX_DEPTH); a script holds it inside role -> state -> list and
# perhaps {"value": ..., "delay": ...}
MAX_SCRIPT_DEPTH = MAX_DEPTH + 4


class ScriptExhausted(ModelError):
    """The script has no reply for a call: the run asked for more than the test scripted.

    A ModelError (the core catches model failures in one place and reports this one as kind "script",
    because it is `scripted`), whose text is only the script's complaint.
    """

    scripted = True

    def __init__(self, role: str, state: str, seq: int, available: int) -> None:
        message = f"script has no reply #{seq + 1} for {role} of state {state!r} (it has {available})"
        Exception.__init__(self, message)
        self.model = "scripted"
        self.last_error = message
        self.attempts = 1
        self.events: list[dict[str, Any]] = []
        self.role = role
        self.state = state
        self.seq = seq
        self.available = available


class Script:
    """Replies per (role, state), in order. Roles: "agent", "verifier", "tool".

    `next(role, state, seq)` answers with the seq-th reply (0-based) for that pair. The core supplies
    `seq` — the number of earlier calls for the pair in the run, kept in checkpoints — so a resumed run
    gets the reply the interrupted one would have got, not the next unused one. A script is data: reading
    it changes nothing, so any number of concurrent runs can share one (each run's ScriptedClient records
    what that run was served).
    """

    def __init__(self, replies: Mapping[tuple[str, str], list[ScriptedReply]] | None = None) -> None:
        self._replies: dict[tuple[str, str], list[ScriptedReply]] = {}
        for (role, state), items in (replies or {}).items():
            for item in items:
                self.add(role, state, item)

    def add(self, role: str, state: str, reply: ScriptedReply | Any) -> None:
        if role not in SCRIPT_ROLES:
            raise ScriptError(f"unknown script role {role!r}; expected one of {', '.join(SCRIPT_ROLES)}")
        if not isinstance(reply, ScriptedReply):
            reply = ScriptedReply(reply)
        self._replies.setdefault((role, state), []).append(reply)

    def replies(self, role: str, state: str) -> list[ScriptedReply]:
        return list(self._replies.get((role, state), []))

    def has(self, role: str, state: str) -> bool:
        """Whether the script speaks for (role, state) at all — e.g. replaces an action state's tool (for a
        map, replies for one of its elements, `state[N]`, count too)."""
        if self._replies.get((role, state)):
            return True
        prefix = state + "["
        return any(r == role and s.startswith(prefix) and items for (r, s), items in self._replies.items())

    def keys(self) -> list[tuple[str, str]]:
        """Every (role, state) the script has replies for, in the order they were added."""
        return list(self._replies)

    def next(self, role: str, state: str, seq: int, *, run_id: str | None = None) -> ScriptedReply:
        """The seq-th reply for (role, state); ScriptExhausted when the script has no such reply."""
        replies = self._replies.get((role, state), [])
        if seq < 0 or seq >= len(replies):
            raise ScriptExhausted(role, state, seq, len(replies))
        _log_call(role, state, seq, run_id)
        return replies[seq]

    def next_item(self, role: str, state: str, item: int, seq: int, *,
                  run_id: str | None = None) -> tuple[ScriptedReply, str, int]:
        """The reply to call `seq` of element `item` (numbered over the run) of a map state, and where it
        was: (the state, or `state[item]`; its index there).

        The element's own replies, `state[item]`, when the script has them; else the state's replies, one
        per element in order: element `item` takes reply `item`, and a second call of one element needs
        replies of its own (`state[item]`). Elements run at once, so the order their calls arrive in cannot
        choose the reply; their numbers do."""
        own = f"{state}[{item}]"
        if self._replies.get((role, own)):
            return self.next(role, own, seq, run_id=run_id), own, seq
        if seq > 0:
            raise ScriptExhausted(role, own, seq, 0)
        replies = self._replies.get((role, state), [])
        if item >= len(replies):
            raise ScriptExhausted(role, state, item, len(replies))
        _log_call(role, state, item, run_id, item=item)
        return replies[item], state, item

    def answer(self, where: str, seq: int, item: int | None = None, *,
               run_id: str | None = None) -> tuple[ScriptedReply, str, int] | None:
        """A person's answer at `where` (a state's path; `state[item]` for a map's element) and where the
        script has it, or None when it has no more: an element takes its own answers (`state[item]`) when the
        script has them, else the state's, one per element in order, as its replies do (`next_item`)."""
        own = self._replies.get(("person", where), [])
        if own or item is None:
            if seq >= len(own):
                return None
            _log_call("person", where, seq, run_id)
            return own[seq], where, seq
        base = where[: where.rfind("[")]
        shared = self._replies.get(("person", base), [])
        if seq > 0 or item >= len(shared):
            return None
        _log_call("person", base, item, run_id, item=item)
        return shared[item], base, item

    @classmethod
    def from_test(cls, machine: MachineSpec, test: TestSpec) -> Script:
        """A test block's `reply` and `verdict` lines, in source order.

        A reply goes to the state's agent, or to its tool for an action state. A reply for a state whose
        output the model wraps in `{"value": ...}` is wrapped the same way unless written wrapped already.
        """
        script = cls()
        for kind, state_name, value in test.steps:
            state = state_at(machine, state_name)  # (a state of a machine it runs: `investigate/draft`)
            role = script_role_of_step(machine, kind, state_name)
            if role == "verifier":
                # a condition by its exact text; none as 0, which no condition's text can be taken for
                verdict = {"choice": value if value else 0, "reason": "scripted verdict", "feedback": ""}
                script.add("verifier", state_name, verdict)
            elif role == "person":
                script.add("person", state_name, {"timeout": True} if kind == "timeout" else {"answer": value})
            elif role == "tool":
                script.add("tool", state_name, value)
            elif kind == "calls":
                script.add("agent", state_name, {"tool_calls": value})
            else:
                if state is not None and state.output_wrapped and not _is_wrapped(value):
                    value = {"value": value}
                script.add("agent", state_name, value)
        return script

    @classmethod
    def from_file(cls, path: str, what: str) -> Script:
        """The script a JSON file holds; ScriptError, with `what` ("--script FILE") naming the file, when it
        cannot be read, is too large or too deep, is not JSON or does not have the documented shape."""
        try:
            data = read_json_file(path, what, max_depth=MAX_SCRIPT_DEPTH)
        except OSError as exc:
            raise ScriptError(f"cannot read {what}: {exc.strerror or exc}") from None
        except BorderError as exc:
            raise ScriptError(str(exc)) from None
        except ValueError as exc:
            raise ScriptError(f"{what} is not valid JSON: {exc}") from None
        try:
            return cls.from_json(data)
        except (ScriptError, TypeError, ValueError) as exc:
            raise ScriptError(f"{what}: {exc}") from None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Script:
        """`{"agent": {"state": [reply, ...]}, "verifier": {...}, "tool": {...}}`.

        A reply is any JSON value; `{"value": v, "delay": seconds}` (both keys, nothing else) delays it.
        """
        if not isinstance(data, Mapping):
            raise ScriptError("a script is a JSON object with keys agent, verifier and tool")
        script = cls()
        for role, states in data.items():
            if role not in SCRIPT_ROLES:
                raise ScriptError(f"unknown script role {role!r}; expected one of {', '.join(SCRIPT_ROLES)}")
            if not isinstance(states, Mapping):
                raise ScriptError(f"script[{role!r}] must map state names to lists of replies")
            for state, replies in states.items():
                if not isinstance(replies, list):
                    raise ScriptError(f"script[{role!r}][{state!r}] must be a list of replies")
                for reply in replies:
                    delayed = isinstance(reply, Mapping) and set(reply) == {"value", "delay"}
                    value, delay = (reply["value"], float(reply["delay"])) if delayed else (reply, 0.0)
                    if role == "person" and not (isinstance(value, Mapping) and (
                            set(value) == {"answer"} or (set(value) == {"timeout"} and value["timeout"] is True))):
                        raise ScriptError(f"script['person'][{state!r}]: each entry is {{\"answer\": VALUE}} or "
                                          f"{{\"timeout\": true}}, not {json.dumps(value)[:80]}")
                    script.add(role, state, ScriptedReply(value, delay))
        return script


def script_role_of_step(machine: MachineSpec, kind: str, state_name: str) -> str:
    """Who answers a test block's step: `verdict` the verifier; `timeout`, an approval (`approve`, `reject`,
    `edit`) and a reply to a state that asks, the person; a reply to an action state its tool; any other reply the state's agent."""
    state = state_at(machine, state_name)
    if kind == "verdict":
        return "verifier"
    if kind == "calls":
        return "agent"  # an agent's reply that asks for tool calls
    if kind in ("timeout", "approval") or (state is not None and state.kind == "human"):
        return "person"
    return "tool" if state is not None and state.kind == "action" else "agent"


def _is_wrapped(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"value"}


def _log_call(role: str, state: str, seq: int, run_id: str | None, *, item: int | None = None) -> None:
    # A file other processes can read: the crash/resume tests prove from it that no completed step re-runs.
    path = os.environ.get(SCRIPT_LOG_ENV)
    if not path:
        return
    entry: dict[str, Any] = {"role": role, "state": state, "seq": seq, "run_id": run_id, "pid": os.getpid()}
    if item is not None:
        entry["item"] = item
    line = json.dumps(entry)
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


# --- the scripted client --------------------------------------------------------------------------


class ScriptedClient:
    """A model client that answers every request from a Script, in process: no litellm, no network.

    It keeps the litellm client's request and response contract (tests/test_scripted.py proves it through
    litellm's real call path): the reply text (JSON for a non-text reply), native tool calls for a reply
    `{"tool_calls": [{"name", "arguments"}]}`, a token count of one per four characters, no cost, and the
    same structured-output and tool-mode events. One client belongs to one run: `calls` and `received`
    record what that run asked.
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls: list[tuple[str, str, int]] = []  # (role, state, seq) of every reply served
        self.received: list[dict[str, Any]] = []  # role, state, seq, model, messages and options of each call
        self.arrivals: list[float] = []  # when each of them arrived (perf_counter): calls made at once show it

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        started = time.perf_counter()
        reply, seq = self._reply(request)
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        return scripted_response(request, reply.value, seq, (time.perf_counter() - started) * 1000.0)

    def complete(self, request: ModelRequest) -> ModelResponse:
        started = time.perf_counter()
        reply, seq = self._reply(request)
        if reply.delay > 0:
            time.sleep(reply.delay)
        return scripted_response(request, reply.value, seq, (time.perf_counter() - started) * 1000.0)

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        return rough_call_estimate(request)

    def person(self, state: str, seq: int, *, run_id: str | None = None, item: int | None = None
               ) -> ScriptedReply | None:
        """The scripted answer of the person a state asks (`{"answer": v}` or `{"timeout": true}`), or None
        when the script has no more answers for it: the run then waits, as for a real person. `item`: the
        map's element whose tool call waits, `state` then being `state[item]` (answered as `Script.answer`
        says)."""
        found = self.script.answer(state, seq, item, run_id=run_id)
        if found is None:
            return None
        reply, where, index = found
        self.calls.append(("person", where, index))
        return reply

    def tool(self, state: str, seq: int, *, run_id: str | None = None, item: int | None = None) -> ScriptedReply:
        """The scripted result of an action state's tool call (the real tool does not run); `item`, the
        element of a map state it is for."""
        if item is not None:
            reply, where, index = self.script.next_item("tool", state, item, seq, run_id=run_id)
            self.calls.append(("tool", where, index))
            return reply
        reply = self.script.next("tool", state, seq, run_id=run_id)
        self.calls.append(("tool", state, seq))
        return reply

    def _reply(self, request: ModelRequest) -> tuple[ScriptedReply, int]:
        identity = request.metadata.get("statewright") if isinstance(request.metadata, Mapping) else None
        identity = identity if isinstance(identity, Mapping) else {}
        role = str(identity.get("role") or request.role)
        state = str(identity.get("state") if identity.get("state") is not None else request.state)
        if identity.get("call"):  # a state of a machine another one runs: scripted by its path
            state = f"{identity['call']}/{state}"
        given = identity.get("seq")
        seq = int(given) if given is not None else sum(1 for c in self.calls if c[:2] == (role, state))
        item = identity.get("item")
        if item is not None:  # one element of a map state: answered by its number, whenever it asks
            reply, where, index = self.script.next_item(role, state, int(item), seq, run_id=identity.get("run_id"))
            self.calls.append((role, where, index))
        else:
            reply = self.script.next(role, state, seq, run_id=identity.get("run_id"))
            self.calls.append((role, state, seq))
        options = {"max_tokens": request.max_tokens, "temperature": request.temperature,
                   "response_schema": request.response_schema, "tools": request.tools}
        self.received.append({"role": role, "state": state, "seq": seq, "model": request.model,
                              "messages": list(request.messages),
                              "options": {k: v for k, v in options.items() if v is not None},
                              **({"item": int(item)} if item is not None else {})})
        self.arrivals.append(time.perf_counter())
        return reply, seq


def scripted_reply_content(value: Any) -> tuple[str, list[Mapping[str, Any]] | None]:
    """What a scripted reply says: (message text, tool calls or None). A reply that is exactly
    `{"tool_calls": [...]}` asks for native tool calls; its text is then the JSON of the reply."""
    calls = value.get("tool_calls") if isinstance(value, Mapping) and set(value) == {"tool_calls"} else None
    if isinstance(calls, list):
        return json.dumps(value), [call if isinstance(call, Mapping) else {} for call in calls]
    return (value if isinstance(value, str) else json.dumps(value)), None


def scripted_usage(messages: list[dict[str, Any]], content: str) -> tuple[int, int]:
    """(prompt, completion) tokens of a scripted call: one per four characters, at least one each."""
    prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
    return max(1, prompt_chars // 4), max(1, len(content) // 4)


def scripted_response(request: ModelRequest, value: Any, seq: int, latency_ms: float = 0.0) -> ModelResponse:
    """The ModelResponse the litellm client makes of a scripted reply to `request`."""
    content, calls = scripted_reply_content(value)
    prompt_tokens, completion_tokens = scripted_usage(request.messages, content)
    tool_calls = [ToolCallRequest(id=f"call_{seq}_{index}", name=str(call.get("name", "")),
                                  arguments=json.dumps(call.get("arguments", {})))
                  for index, call in enumerate(calls or ())]
    events: list[dict[str, Any]] = []
    if request.tools:
        events.append({"type": "tool_mode", "mode": "native", "model": request.model})
    if request.response_schema is not None:
        events.append({"type": "structured_output", "mode": "json_schema", "model": request.model})
    return ModelResponse(content="" if calls is not None else content, model=request.model,
                         tool_calls=tool_calls, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                         cost_usd=0.0, latency_ms=latency_ms, attempts=1, events=events,
                         finish_reason="tool_calls" if calls else "stop")
