"""A Script served through litellm's real call path: the custom provider `scripted` (models "scripted/...").

The product answers scripted runs in process (runtime/scripted.py: ScriptedClient) and never imports
litellm for them. This provider exists for the tests that prove the two paths keep one contract: the same
request gives the same ModelResponse through LiteLLMClient -> litellm -> this provider as through the
ScriptedClient.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from statewright.runtime.scripted import Script, scripted_reply_content, scripted_usage

_HANDLER: dict[str, Any] = {"handler": None}
# request options recorded with each call the provider answers
_RECORDED_OPTIONS = ("max_tokens", "temperature", "response_format", "tools")


class Served:
    """What the provider answered since the script was registered: calls (role, state, seq) and, for each,
    what litellm delivered (role, state, seq, model, messages, options)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.received: list[dict[str, Any]] = []


def register_scripted_provider(script: Script) -> Served:
    """Installs `script` behind litellm's custom provider "scripted"; the last script registered answers."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    handler = _HANDLER["handler"]
    if handler is None:
        handler = _handler_class(litellm)()
        _HANDLER["handler"] = handler
    handler.script = script
    handler.served = Served()
    others = [entry for entry in litellm.custom_provider_map if entry.get("provider") != "scripted"]
    litellm.custom_provider_map = [*others, {"provider": "scripted", "custom_handler": handler}]
    setup = getattr(litellm.utils, "custom_llm_setup", None)
    if setup is not None:
        setup()
    return handler.served  # type: ignore[no-any-return]


def _identity(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    litellm_params = kwargs.get("litellm_params") or {}
    for candidate in (litellm_params.get("metadata"), kwargs.get("metadata"),
                      (kwargs.get("optional_params") or {}).get("metadata")):
        if isinstance(candidate, Mapping) and isinstance(candidate.get("statewright"), Mapping):
            return dict(candidate["statewright"])
    raise ValueError("the scripted provider needs metadata={'statewright': {'role', 'state', 'seq'}}")


def _handler_class(litellm: Any) -> type:
    class ScriptedLLM(litellm.CustomLLM):  # type: ignore[misc]
        script: Script | None = None
        served: Served = Served()

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            value, seq, delay = self._reply(kwargs)
            if delay > 0:
                time.sleep(delay)
            return _response(litellm, kwargs, value, seq)

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            value, seq, delay = self._reply(kwargs)
            if delay > 0:
                await asyncio.sleep(delay)
            return _response(litellm, kwargs, value, seq)

        def _reply(self, kwargs: dict[str, Any]) -> tuple[Any, int, float]:
            assert self.script is not None, "no script registered for the scripted provider"
            who = _identity(kwargs)
            seq = int(who.get("seq") or 0)
            role, state = str(who.get("role") or "agent"), str(who.get("state") or "")
            reply = self.script.next(role, state, seq, run_id=who.get("run_id"))
            options = kwargs.get("optional_params") or {}
            self.served.calls.append((role, state, seq))
            self.served.received.append(json.loads(json.dumps({
                "role": role, "state": state, "seq": seq, "model": kwargs.get("model"),
                "messages": kwargs.get("messages") or [],
                "options": {k: options[k] for k in _RECORDED_OPTIONS if k in options},
            }, default=str)))
            return reply.value, seq, reply.delay

    return ScriptedLLM


def _response(litellm: Any, kwargs: Mapping[str, Any], value: Any, seq: int) -> Any:
    response = kwargs["model_response"]
    message = response.choices[0].message
    content, calls = scripted_reply_content(value)
    if calls is not None:
        from litellm.types.utils import ChatCompletionMessageToolCall, Function

        message.content = None
        message.tool_calls = [
            ChatCompletionMessageToolCall(id=f"call_{seq}_{index}", type="function",
                                          function=Function(name=call.get("name", ""),
                                                            arguments=json.dumps(call.get("arguments", {}))))
            for index, call in enumerate(calls)
        ]
        response.choices[0].finish_reason = "tool_calls"
    else:
        message.content = content
    prompt_tokens, completion_tokens = scripted_usage(list(kwargs.get("messages") or []), content)
    response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                   total_tokens=prompt_tokens + completion_tokens)
    response.model = f"scripted/{kwargs.get('model', '')}"
    return response
