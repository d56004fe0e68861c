"""An in-process ModelClient for engine tests: answers from a per-(role, state) list, records every request.

The n-th call for a (role, state) — the request's metadata `seq` — gets the n-th answer, so a resumed run
gets the same answers a fresh run would. An answer is:
  - a str: the reply text;
  - a dict or list: sent as JSON text (typed outputs, verifier verdicts — see `verdict`);
  - a ModelResponse: returned as it is (tool calls, usage);
  - an exception instance: raised (a ModelError, or a crash);
  - a callable: called with the request, its return value treated as above.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from statewright.runtime.client import ModelRequest, ModelResponse, ToolCallRequest

Answer = Any


def verdict(choice: str | None, reason: str = "", feedback: str = "") -> dict[str, str]:
    """A verifier answer: `choice` is a condition's text, or None for "none"."""
    return {"choice": choice if choice is not None else "none", "reason": reason, "feedback": feedback}


def tool_calls(*calls: tuple[str, Any], content: str = "") -> ModelResponse:
    """A reply asking for tool calls: (function name, arguments as a dict or raw JSON text)."""
    return ModelResponse(
        content=content,
        model="fake",
        tool_calls=[ToolCallRequest(id=f"call_{i}", name=name,
                                    arguments=args if isinstance(args, str) else json.dumps(args))
                    for i, (name, args) in enumerate(calls)],
    )


class Crash(RuntimeError):
    """Stands for the process dying in the middle of a model call."""


class FakeClient:
    def __init__(
        self,
        answers: Mapping[tuple[str, str], Sequence[Answer]] | None = None,
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        cost_usd: float = 0.001,
        default: Callable[[ModelRequest], Answer] | None = None,
    ) -> None:
        self.answers = {key: list(values) for key, values in (answers or {}).items()}
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_usd = cost_usd
        self.default = default
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        meta = request.metadata["statewright"]
        key = (meta["role"], meta["state"])
        queue = self.answers.get(key, [])
        if meta["seq"] < len(queue):
            answer = queue[meta["seq"]]
        elif self.default is not None:
            answer = self.default(request)
        else:
            raise AssertionError(f"the fake client has no answer #{meta['seq']} for {key}")
        if callable(answer) and not isinstance(answer, (type, ModelResponse)):
            answer = answer(request)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, ModelResponse):
            return answer
        content = answer if isinstance(answer, str) else json.dumps(answer)
        return ModelResponse(content=content, model=request.model, prompt_tokens=self.prompt_tokens,
                             completion_tokens=self.completion_tokens, cost_usd=self.cost_usd, latency_ms=1.0)

    # -- what the engine asked ---------------------------------------------------------------------

    def calls(self, role: str | None = None, state: str | None = None) -> list[ModelRequest]:
        return [r for r in self.requests
                if (role is None or r.role == role) and (state is None or r.state == state)]

    def call_keys(self) -> list[tuple[str, str, int]]:
        """(role, state, seq) of every request, in order."""
        return [(r.metadata["statewright"]["role"], r.metadata["statewright"]["state"],
                 r.metadata["statewright"]["seq"]) for r in self.requests]

    def agent_text(self) -> str:
        """Everything any agent was sent, as one text."""
        return "\n".join(str(m.get("content") or "") for r in self.calls("agent") for m in r.messages)
