"""Scripted replies for test blocks and unit tests, served as the litellm custom provider `scripted`."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .client import ModelError
from .spec import MachineSpec, TestSpec

SCRIPT_ROLES = ("agent", "verifier", "tool", "designer")  # designer: `design` and `optimize --llm`
SCRIPT_LOG_ENV = "STATEWRIGHT_SCRIPT_LOG"


@dataclass(frozen=True)
class ScriptedReply:
    value: Any
    delay: float = 0.0  # seconds the provider waits before answering


class ScriptError(ValueError):
    """A script (JSON file or hand-built) that does not have the documented shape."""


class ScriptExhausted(ModelError):
    """The script has no reply for a call: the run asked for more than the test scripted.

    A ModelError (the engine catches model failures in one place and reports this one as kind "script"),
    whose text is only the script's complaint.
    """

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

    `next(role, state, seq)` answers with the seq-th reply (0-based) for that pair. The engine supplies
    `seq` — the number of earlier calls for the pair in this run, kept in checkpoints — so a resumed run
    gets the reply the interrupted one would have got, not the next unused one.
    """

    def __init__(self, replies: Mapping[tuple[str, str], list[ScriptedReply]] | None = None) -> None:
        self._replies: dict[tuple[str, str], list[ScriptedReply]] = {}
        for (role, state), items in (replies or {}).items():
            for item in items:
                self.add(role, state, item)
        self.calls: list[tuple[str, str, int]] = []  # every reply served: (role, state, seq)
        # what the provider received for each call, as litellm delivered it: role, state, seq, model, messages
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, role: str, state: str, reply: ScriptedReply | Any) -> None:
        if role not in SCRIPT_ROLES:
            raise ScriptError(f"unknown script role {role!r}; expected one of {', '.join(SCRIPT_ROLES)}")
        if not isinstance(reply, ScriptedReply):
            reply = ScriptedReply(reply)
        self._replies.setdefault((role, state), []).append(reply)

    def replies(self, role: str, state: str) -> list[ScriptedReply]:
        return list(self._replies.get((role, state), []))

    def has(self, role: str, state: str) -> bool:
        """Whether the script speaks for (role, state) at all — e.g. replaces an action state's tool."""
        return bool(self._replies.get((role, state)))

    def next(self, role: str, state: str, seq: int | None = None, *,
             run_id: str | None = None) -> ScriptedReply:
        """The seq-th reply for (role, state); without `seq`, the one after those already served."""
        with self._lock:
            replies = self._replies.get((role, state), [])
            if seq is None:
                seq = sum(1 for call in self.calls if call[:2] == (role, state))
            if seq < 0 or seq >= len(replies):
                raise ScriptExhausted(role, state, seq, len(replies))
            self.calls.append((role, state, seq))
            _script_log_call(role, state, seq, run_id)
            return replies[seq]

    @classmethod
    def from_test(cls, machine: MachineSpec, test: TestSpec) -> Script:
        """A test block's `reply` and `verdict` lines, in source order.

        A reply goes to the state's agent, or to its tool for an action state. A reply for a state whose
        output the model wraps in `{"value": ...}` is wrapped the same way unless written wrapped already.
        """
        script = cls()
        for kind, state_name, value in test.steps:
            state = machine.states.get(state_name)
            if kind == "verdict":
                verdict = {"choice": value if value else "none", "reason": "scripted verdict", "feedback": ""}
                script.add("verifier", state_name, verdict)
            elif state is not None and state.kind == "action":
                script.add("tool", state_name, value)
            else:
                if state is not None and state.output_wrapped and not _script_is_wrapped(value):
                    value = {"value": value}
                script.add("agent", state_name, value)
        return script

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
                    if isinstance(reply, Mapping) and set(reply) == {"value", "delay"}:
                        script.add(role, state, ScriptedReply(reply["value"], float(reply["delay"])))
                    else:
                        script.add(role, state, ScriptedReply(reply))
        return script


def _script_is_wrapped(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"value"}


def _script_log_call(role: str, state: str, seq: int, run_id: str | None) -> None:
    # A file other processes can read: the crash/resume tests prove from it that no completed step re-runs.
    path = os.environ.get(SCRIPT_LOG_ENV)
    if not path:
        return
    line = json.dumps({"role": role, "state": state, "seq": seq, "run_id": run_id, "pid": os.getpid()})
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


# --- the litellm custom provider --------------------------------------------------------------------

_SCRIPTED_PROVIDER: dict[str, Any] = {"handler": None}
# request options a script records with each call it answers (Script.received)
_SCRIPTED_RECORDED_OPTIONS = ("max_tokens", "temperature", "response_format", "tools")


def register_scripted_provider(script: Script) -> None:
    """Installs `script` behind litellm's custom provider "scripted" (models "scripted/<anything>").

    Safe to call again: the one handler is kept and its script replaced, so the last script registered
    answers. Imports litellm.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    handler = _SCRIPTED_PROVIDER["handler"]
    if handler is None:
        handler = _scripted_handler_class(litellm)()
        _SCRIPTED_PROVIDER["handler"] = handler
    handler.script = script
    others = [entry for entry in litellm.custom_provider_map if entry.get("provider") != "scripted"]
    litellm.custom_provider_map = [*others, {"provider": "scripted", "custom_handler": handler}]
    setup = getattr(litellm.utils, "custom_llm_setup", None)  # litellm also runs it before each call
    if setup is not None:
        setup()


def current_script() -> Script | None:
    """The script the `scripted` provider answers from now; None when none is registered."""
    return getattr(_SCRIPTED_PROVIDER["handler"], "script", None)


@contextmanager
def scripted_provider(script: Script) -> Iterator[Script]:
    """`script` answers for the `scripted` provider inside the block; afterwards the script registered
    before answers again (or none, when there was none). Test blocks run this way, so running them never
    takes the provider from whoever registered it first — e.g. a scripted designer model."""
    previous = current_script()
    register_scripted_provider(script)
    try:
        yield script
    finally:
        handler = _SCRIPTED_PROVIDER["handler"]
        if previous is not None:
            register_scripted_provider(previous)
        elif handler is not None:
            handler.script = None


def _scripted_handler_class(litellm: Any) -> type:
    # Defined on first use: subclassing litellm.CustomLLM at import time would import litellm.

    class ScriptedLLM(litellm.CustomLLM):  # type: ignore[name-defined,misc]
        script: Script | None = None

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            reply, call = self._reply(kwargs)
            if reply.delay > 0:
                time.sleep(reply.delay)
            return _scripted_model_response(litellm, kwargs, reply, call)

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            reply, call = self._reply(kwargs)
            if reply.delay > 0:
                await asyncio.sleep(reply.delay)
            return _scripted_model_response(litellm, kwargs, reply, call)

        def _reply(self, kwargs: dict[str, Any]) -> tuple[ScriptedReply, dict[str, Any]]:
            if self.script is None:
                raise RuntimeError("no script registered for the scripted provider")
            call = _scripted_call_identity(kwargs)
            reply = self.script.next(call["role"], call["state"], call["seq"], run_id=call["run_id"])
            options = kwargs.get("optional_params") or {}
            self.script.received.append(json.loads(json.dumps({
                "role": call["role"], "state": call["state"], "seq": call["seq"], "model": kwargs.get("model"),
                "messages": kwargs.get("messages") or [],
                "options": {k: options[k] for k in _SCRIPTED_RECORDED_OPTIONS if k in options},
            }, default=str)))
            return reply, call

    return ScriptedLLM


def _scripted_call_identity(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Who is asking: statewright's `metadata=` reaches a custom provider as litellm_params["metadata"]."""
    metadata: Any = None
    litellm_params = kwargs.get("litellm_params") or {}
    for candidate in (litellm_params.get("metadata"), kwargs.get("metadata"),
                      (kwargs.get("optional_params") or {}).get("metadata")):
        if isinstance(candidate, Mapping) and isinstance(candidate.get("statewright"), Mapping):
            metadata = candidate["statewright"]
            break
    if metadata is None:
        from litellm.llms.custom_llm import CustomLLMError

        # status 400: litellm raises it as BadRequestError, which no client retries
        raise CustomLLMError(400, "the scripted provider needs "
                                  'metadata={"statewright": {"role": ..., "state": ..., "seq": ...}}')
    seq = metadata.get("seq")
    return {
        "role": str(metadata.get("role") or "agent"),
        "state": str(metadata.get("state") or ""),
        "seq": int(seq) if seq is not None else None,
        "run_id": metadata.get("run_id"),
    }


def _scripted_model_response(litellm: Any, kwargs: Mapping[str, Any], reply: ScriptedReply,
                             call: Mapping[str, Any]) -> Any:
    response = kwargs["model_response"]
    message = response.choices[0].message
    value = reply.value
    is_tool_calls = isinstance(value, Mapping) and set(value) == {"tool_calls"}
    tool_calls = value["tool_calls"] if is_tool_calls else None
    if isinstance(tool_calls, list):
        # {"tool_calls": [{"name", "arguments"}]} answers as native tool calls: agent tool use is scriptable
        message.content = None
        from litellm.types.utils import ChatCompletionMessageToolCall, Function

        message.tool_calls = [
            ChatCompletionMessageToolCall(
                id=f"call_{call['seq']}_{index}", type="function",
                function=Function(name=item.get("name", ""), arguments=json.dumps(item.get("arguments", {}))))
            for index, item in enumerate(tool_calls)
        ]
        response.choices[0].finish_reason = "tool_calls"
        content = json.dumps(value)
    else:
        content = value if isinstance(value, str) else json.dumps(value)
        message.content = content
    prompt_chars = sum(len(str(m.get("content") or "")) for m in kwargs.get("messages") or [])
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                   total_tokens=prompt_tokens + completion_tokens)
    response.model = f"scripted/{kwargs.get('model', '')}"
    return response
