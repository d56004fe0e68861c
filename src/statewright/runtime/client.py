"""The model seam: the one request/response shape every model call goes through.

The engine talks to a `ModelClient`; the default one calls litellm (imported on the first call, never
before). Tests and benchmarks can inject a client here to measure or script the engine without litellm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
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


class ModelError(Exception):
    """A model call failed for good: retries and fallbacks exhausted. Names the model and the last error."""

    def __init__(self, model: str, message: str, attempts: int = 1) -> None:
        super().__init__(f"model {model!r} failed after {attempts} attempt(s): {message}")
        self.model = model
        self.last_error = message
        self.attempts = attempts


class ModelClient(Protocol):
    def complete(self, request: ModelRequest) -> ModelResponse: ...
