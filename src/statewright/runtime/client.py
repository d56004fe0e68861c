"""The model seam: the one request/response shape every model call goes through.

The engine talks to a `ModelClient`; the default one calls litellm (imported on the first call, never
before). Tests and benchmarks can inject a client here to measure or script the engine without litellm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True)  # (one is made for every model call: slots make it cheaper to build and read)
class ModelRequest:
    role: str  # "agent" | "verifier" | "designer"
    state: str  # the state the call is made for ("" for the designer)
    model: str
    messages: list[dict[str, Any]]
    temperature: float | None = None
    response_schema: dict[str, Any] | None = None  # JSON Schema of the expected object, when typed
    schema_name: str = "output"
    tools: list[dict[str, Any]] | None = None  # OpenAI-style function tools
    fallbacks: tuple[str, ...] = ()
    timeout: float | None = None
    max_tokens: int | None = None  # a cap on the reply's length, when the run sets one
    # identifies the call for scripted providers and traces: run_id, state, role, seq
    metadata: dict[str, Any] = field(default_factory=dict)
    # provider-specific fields merged into the request body as they are (e.g. llama.cpp's `grammar`)
    extra_body: dict[str, Any] | None = None


@dataclass
class ToolCallRequest:
    id: str
    name: str
    arguments: str  # JSON text as the model produced it (may be invalid)


@dataclass
class ModelResponse:
    content: str
    model: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 1
    # what the client had to do to get here: retries with their errors and waits, fallbacks taken,
    # structured-output mode used. Recorded in the trace.
    events: list[dict[str, Any]] = field(default_factory=list)
    # why the model stopped, as the provider said it ("stop", "length", "tool_calls", ...), when it did
    finish_reason: str | None = None


class ModelError(Exception):
    """A model call failed for good: retries and fallbacks exhausted. Names the model and the last error."""

    def __init__(self, model: str, message: str, attempts: int = 1) -> None:
        super().__init__(f"model {model!r} failed after {attempts} attempt(s): {message}")
        self.model = model
        self.last_error = message
        self.attempts = attempts
        # what replies the client received but could not use cost all the same: (prompt, completion, usd)
        self.spent: tuple[int, int, float] = (0, 0, 0.0)


class ModelClient(Protocol):
    def complete(self, request: ModelRequest) -> ModelResponse: ...


# ---- estimating a call before it is made (for `tokens` and `cost_usd` limits) ----------------------

# The reply tokens an estimate counts when a request sets no `max_tokens`: none. Before a call only its
# prompt is known; a reply could be any length, and guessing one would refuse calls that fit. Set
# `max_tokens` (`--max-tokens N`) to make the limits hold for the replies too.
DEFAULT_REPLY_ALLOWANCE = 0


class CallEstimator(Protocol):
    """Optional on a ModelClient: what a call would use at most, asked before it is made.

    `estimate(request)` returns (tokens, cost_usd): the prompt's tokens plus the reply allowance
    (`reply_allowance(request)`), and their price (0.0 when the client knows none). The engine asks only
    when the machine has a `tokens` or `cost_usd` limit; a client without `estimate` gets
    `rough_call_estimate`."""

    def estimate(self, request: ModelRequest) -> tuple[int, float]: ...


def reply_allowance(request: ModelRequest) -> int:
    """The reply tokens an estimate counts: the request's `max_tokens`, else DEFAULT_REPLY_ALLOWANCE."""
    return request.max_tokens if request.max_tokens is not None else DEFAULT_REPLY_ALLOWANCE


def rough_tokens(request: ModelRequest) -> int:
    """A tokenizer-free count of what a request sends: one token per four characters of the messages'
    text, the tool calls in them, the tool schemas and the response schema."""
    chars = 0
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):  # content parts: only text parts carry characters
            chars += sum(len(str(part.get("text") or "")) for part in content if isinstance(part, dict))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {}) if isinstance(call, dict) else {}
            chars += len(str(function.get("name") or "")) + len(str(function.get("arguments") or ""))
    if request.tools:
        chars += len(json.dumps(request.tools, default=str))
    if request.response_schema is not None:
        chars += len(json.dumps(request.response_schema, default=str))
    return (chars + 3) // 4


def rough_call_estimate(request: ModelRequest) -> tuple[int, float]:
    """(tokens, cost_usd) for a client that cannot estimate: `rough_tokens` plus the reply
    allowance; no price is known, so the cost is 0.0."""
    return rough_tokens(request) + reply_allowance(request), 0.0
