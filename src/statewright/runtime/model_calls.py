"""What every model client shares: the retry policy, one call's way through its model and fallbacks, the
request each model is sent and the reply read back into a ModelResponse.

A client differs from another only in its *transport*: how one attempt reaches a model (litellm's
`acompletion`, or statewright's own HTTP client for OpenAI-compatible endpoints) and how that transport's
failures read (which are worth a retry, which mean a refused key, what a Retry-After says). Everything
else — deadlines, backoff, fallbacks, the events the trace records, the reply cap, structured output, the
tool prompt protocol, usage, spent replies and the redaction of error texts — is here, once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .call_failures import CallDeadline, EmptyReply, ReplyTooLarge, call_cause, call_status
from .client import ModelError, ModelRequest, ModelResponse, ToolCallRequest, reply_allowance
from .scripted import ScriptExhausted
from .sync import run_sync
from .trace import redact, secret_forms
from .untrusted import BorderError, read_json


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one model is tried before the next fallback: exponential backoff with jitter.

    `max_retries` counts retries after the first attempt; `timeout` (seconds) bounds each attempt.
    A server's Retry-After is honoured up to `max_delay`.
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 8.0
    multiplier: float = 2.0
    jitter: float = 0.25  # +/- this fraction of the delay, so clients that failed together spread out
    timeout: float = 60.0

    def delay(self, retry: int, rng: random.Random) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (retry - 1))
        if self.jitter:
            base *= 1.0 + rng.uniform(-self.jitter, self.jitter)
        return max(0.0, min(self.max_delay, base))


# The most bytes a reply's body may have once decompressed: far above what any model writes (a million
# tokens is about 4 MB), far below what a gzip bomb inflates to.
MAX_REPLY_BYTES = 16 * 1024 * 1024
# Model prefixes whose servers speak the full OpenAI protocol whatever a capability table says: every
# OpenAI-compatible server (llama.cpp, vLLM, ...) behind `openai/`, and our own scripted provider.
CALL_OPENAI_LIKE_PREFIXES = ("openai/", "scripted/")
_ERROR_TEXT_LIMIT = 600
_TOOL_PROTOCOL_KEY_CALLS = "tool_calls"
_TOOL_PROTOCOL_KEY_FINAL = "final"


@dataclass
class Completion:
    """A provider's answer with a 200 status, read: what a call needs of it, whichever transport got it.

    `choices` counts the answer's choices (0: it carries no answer); `cost_usd` is what the transport
    priced it at (0.0 when no price is known)."""

    choices: int
    content: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    finish_reason: str | None = None  # why the model stopped, as the provider said ("stop", "length", ...)

    def size(self) -> int:
        """The characters of the answer: its text and its tool calls' arguments."""
        return len(self.content) + sum(len(call.arguments) for call in self.tool_calls)


class ModelTransport(Protocol):
    """How one attempt reaches a model, and how its failures read (see the module's docstring)."""

    async def send(self, plan: ModelCallPlan, model: str) -> Completion: ...

    def supports_response_schema(self, model: str) -> bool: ...

    def supports_function_calling(self, model: str) -> bool: ...

    def is_auth_error(self, error: BaseException) -> bool: ...

    def key_advice(self, model: str) -> str: ...

    def is_retryable(self, error: Exception) -> bool: ...

    def retry_after(self, error: Exception) -> float | None: ...

    def describe(self, error: Exception) -> str: ...

    def prompt_tokens(self, request: ModelRequest) -> int: ...

    def price(self, model: str, prompt_tokens: int, completion_tokens: int) -> float: ...


@dataclass
class ModelCaller:
    """A model client: each request's model, then each fallback, each retried with backoff, through the
    transport `transport(model)` names. Subclasses name the transport; everything else is here.

    `api_base`/`api_key` override the endpoint and key read from the environment (OPENAI_API_BASE,
    OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) for every model this client calls.
    `structured_mode` ("auto" | "json_schema" | "json_object") and `tool_mode` ("auto" | "native" |
    "prompt") force a mode instead of asking what the model supports.
    """

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    api_base: str | None = None
    api_key: str | None = None
    structured_mode: str = "auto"
    tool_mode: str = "auto"
    seed: int | None = None  # seeds the backoff jitter, for reproducible waits
    max_reply_bytes: int = MAX_REPLY_BYTES  # a reply's body, decompressed; a larger one fails the call

    def __post_init__(self) -> None:
        if self.structured_mode not in ("auto", "json_schema", "json_object"):
            raise ValueError("structured_mode must be auto, json_schema or json_object, "
                             f"not {self.structured_mode!r}")
        if self.tool_mode not in ("auto", "native", "prompt"):
            raise ValueError(f"tool_mode must be auto, native or prompt, not {self.tool_mode!r}")
        self._rng = random.Random(self.seed)

    def transport(self, model: str) -> ModelTransport:
        raise NotImplementedError

    def complete(self, request: ModelRequest) -> ModelResponse:
        """`acomplete` for synchronous code (the designer's calls)."""
        return run_sync(self.acomplete(request))  # type: ignore[no-any-return]

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """One model call: the request's model, then each fallback, each retried with backoff.

        Deadlines: every model gets `retry.timeout` seconds for all its attempts and the waits between
        them together — connecting, every read of a slowly sent reply, every retry — and the whole call
        ends when what `request.timeout` gives (what is left of the run's `seconds` limit) runs out.
        A call that runs out of the run's time raises a ModelError whose `limit` is "seconds"."""
        return await drive_model_call(ModelCallPlan(self, request))

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        """(tokens, cost_usd) the call may use, before it is made — what `tokens` and `cost_usd` limits
        compare against: the prompt as the request's model's transport counts it, plus the reply
        allowance (`max_tokens`, else DEFAULT_REPLY_ALLOWANCE), priced at the dearest of the request's
        model and its fallbacks (0.0 for a model with no known price)."""
        prompt = self.transport(request.model).prompt_tokens(request)
        allowance = reply_allowance(request)
        models = [request.model, *(m for m in request.fallbacks if m != request.model)]
        cost = max(self.transport(model).price(model, prompt, allowance) for model in models)
        return prompt + allowance, cost


async def drive_model_call(plan: ModelCallPlan) -> ModelResponse:
    """The attempts of one call, under its deadlines (see `ModelCaller.acomplete`)."""
    clock = time.monotonic
    timeout = plan.request.timeout
    run_deadline = clock() + timeout if timeout is not None else None
    for model in plan.models():
        try:
            transport = plan.transport(model)
        except ImportError as error:  # litellm, for a model only it calls, is not installed
            plan.unavailable(model, error)
            continue
        deadline = clock() + plan.client.retry.timeout
        if run_deadline is not None:
            deadline = min(deadline, run_deadline)
        for attempt in plan.attempts(model):
            left = deadline - clock()
            if left <= 0:
                break
            try:
                completion = await asyncio.wait_for(transport.send(plan, model), left)
                plan.check(completion)
            except Exception as error:  # noqa: BLE001 - each transport's failures, judged by the transport
                timed_out = isinstance(error, (asyncio.TimeoutError, TimeoutError))
                if timed_out and not isinstance(error, CallDeadline):
                    error = CallDeadline(f"no reply within the {left:.3g} s the call had left")
                wait = plan.failed(model, attempt, error)
                if wait is None:
                    break
                if clock() + wait >= deadline:
                    plan.out_of_time(model, wait)
                    break
                await asyncio.sleep(wait)
                continue
            return plan.response(model, completion)
        if run_deadline is not None and clock() >= run_deadline - 1e-3:
            raise plan.limit_error("seconds")
    raise plan.final_error()


class ModelCallPlan:
    """One request's way through its model and fallbacks: builds each attempt's request, judges each
    failure, reads the reply; the events it records go to the trace."""

    def __init__(self, client: ModelCaller, request: ModelRequest) -> None:
        self.client = client
        self.request = request
        self.events: list[dict[str, Any]] = []
        self.total_attempts = 0
        self.last_error = "no attempt was made"
        self.last_error_text = ""
        self.started = time.perf_counter()
        self._secrets: list[str] | None = None
        self._transports: dict[str, ModelTransport] = {}
        self.prompt_protocol = False
        # replies that arrived, were billed and could not be used (no choices, over the cap): they count
        self.spent_prompt = self.spent_completion = 0
        self.spent_usd = 0.0

    @property
    def secrets(self) -> list[str]:
        """The values to redact from error texts, read from the environment once a call has failed."""
        if self._secrets is None:
            self._secrets = call_secrets(self.client.api_key)
        return self._secrets

    def transport(self, model: str) -> ModelTransport:
        found = self._transports.get(model)
        if found is None:
            found = self._transports[model] = self.client.transport(model)
        return found

    def models(self) -> Iterator[str]:
        """The request's model, then each fallback in order (recording that it took over)."""
        models = [self.request.model]
        models.extend(m for m in self.request.fallbacks if m not in models)
        for index, model in enumerate(models):
            if index:
                self.events.append({"type": "fallback", "model": model, "after": models[index - 1],
                                    "error": self.last_error_text})
            yield model

    def attempts(self, model: str) -> range:
        """Attempt numbers for one model: the first try and its retries."""
        return range(1, self.client.retry.max_retries + 2)

    def body(self, model: str) -> dict[str, Any]:
        """The OpenAI chat request of one attempt on `model`, without the model's name: its messages and,
        as the request asks, temperature, max_tokens, tools and response_format (each transport adds what
        it sends besides). Counts the attempt."""
        self.total_attempts += 1
        request = self.request
        messages = [call_encodable(m) for m in request.messages]
        body: dict[str, Any] = {}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        self.prompt_protocol = bool(request.tools) and not self._native_tools(model)
        if request.tools:
            mode = "prompt" if self.prompt_protocol else "native"
            self._note_mode({"type": "tool_mode", "mode": mode, "model": model})
            if self.prompt_protocol:
                messages = _tool_protocol_messages(messages, request.tools, request.response_schema)
                body["response_format"] = {"type": "json_object",
                                           "schema": _tool_protocol_schema(request.response_schema)}
            else:
                body["tools"] = request.tools
        if request.response_schema is not None and not self.prompt_protocol:
            mode = self._structured_mode(model)
            self._note_mode({"type": "structured_output", "mode": mode, "model": model})
            if mode == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": _schema_name(request.schema_name), "schema": request.response_schema,
                    "strict": False}}
            else:
                # llama.cpp's server enforces a schema given this way; others at least get JSON mode,
                # and the schema in the system message tells the model what the JSON must look like.
                body["response_format"] = {"type": "json_object", "schema": request.response_schema}
                messages = _call_with_system_text(messages, _schema_instruction(request.response_schema))
        body["messages"] = messages
        return body

    def failed(self, model: str, attempt: int, error: Exception) -> float | None:
        """Records a failed attempt; returns the wait before retrying, or None to move on."""
        exhausted = call_cause(error, ScriptExhausted)
        if exhausted is not None:
            raise exhausted  # a test script ran out: no retry or fallback can produce a reply
        transport = self.transport(model)
        self.last_error_text = self._error_text(transport, error)
        too_large = call_cause(error, ReplyTooLarge)
        if too_large is not None:
            self.last_error_text = str(too_large)
            self._final_for_model(model, attempt)
            return None
        if transport.is_auth_error(error):
            # a missing or refused key: no retry can fix it — say which variable the key is read from
            self.last_error_text = (f"authentication failed ({call_status(error) or 'no key'}): "
                                    f"{transport.key_advice(model)}")
            self._final_for_model(model, attempt)
            return None
        self.last_error = f"{model}: {self.last_error_text}"
        retryable = transport.is_retryable(error)
        if not retryable or attempt > self.client.retry.max_retries:
            if not retryable:
                self.events.append({"type": "error", "model": model, "attempt": attempt,
                                    "error": self.last_error_text, "retryable": False})
            return None
        wait = self.client.retry.delay(attempt, self.client._rng)
        event: dict[str, Any] = {"type": "retry", "model": model, "attempt": attempt,
                                 "error": self.last_error_text, "wait_s": round(wait, 4)}
        retry_after = transport.retry_after(error)
        if retry_after is not None:
            event["retry_after_s"] = retry_after
            wait = max(wait, min(retry_after, self.client.retry.max_delay))
            event["wait_s"] = round(wait, 4)
        self.events.append(event)
        return wait

    def unavailable(self, model: str, error: ImportError) -> None:
        """The client this model needs cannot be loaded: no attempt is made on it (a fallback may be)."""
        self.last_error_text = (f"this model is called through litellm, which cannot be imported here "
                                f"({error}): install litellm, or name an OpenAI-compatible model "
                                "(docs/models.md)")
        self._final_for_model(model, 0)

    def _final_for_model(self, model: str, attempt: int) -> None:
        self.events.append({"type": "error", "model": model, "attempt": attempt,
                            "error": self.last_error_text, "retryable": False})
        self.last_error = f"{model}: {self.last_error_text}"

    def check(self, completion: Completion) -> None:
        """A 200 reply that carries no answer is a failure like any other (retried, then reported); one
        over the reply cap is refused (a transport that reads the body holds it to the cap as it reads)."""
        if not completion.choices:
            self._spend(completion)
            raise EmptyReply("the provider answered with no choices (an empty \"choices\" list)")
        cap = self.client.max_reply_bytes
        if completion.size() > cap:
            self._spend(completion)
            raise ReplyTooLarge(f"the reply is larger than the cap of {cap:,} bytes; it was not used")

    def response(self, model: str, completion: Completion) -> ModelResponse:
        content = completion.content
        tool_calls = completion.tool_calls
        if self.prompt_protocol:  # the calls are in the text, and only there
            tool_calls = []
            try:
                content, tool_calls = parse_tool_protocol(content)
            except ToolProtocolError as problem:
                self.events.append({"type": "tool_protocol_error", "model": model, "error": str(problem)})
        return ModelResponse(
            content=content,
            model=model,
            tool_calls=tool_calls,
            prompt_tokens=completion.prompt_tokens + self.spent_prompt,
            completion_tokens=completion.completion_tokens + self.spent_completion,
            cost_usd=completion.cost_usd + self.spent_usd,
            latency_ms=(time.perf_counter() - self.started) * 1000.0,
            attempts=self.total_attempts,
            events=self.events,
            finish_reason=completion.finish_reason,
        )

    def _spend(self, completion: Completion) -> None:
        """A reply that is thrown away still used tokens, and cost what the provider bills for it."""
        self.spent_prompt += completion.prompt_tokens
        self.spent_completion += completion.completion_tokens
        self.spent_usd += completion.cost_usd

    def _spent_on(self, error: ModelError) -> ModelError:
        error.spent = (self.spent_prompt, self.spent_completion, self.spent_usd)
        return error

    def out_of_time(self, model: str, wait: float) -> None:
        self.events.append({"type": "deadline", "model": model, "wait_s": round(wait, 4),
                            "error": "no time left for another attempt"})

    def final_error(self) -> ModelError:
        message = redact_call_error(self.last_error, self.secrets)
        error = ModelError(self.request.model, message, self.total_attempts)
        error.events = self.events  # type: ignore[attr-defined]  # retries and fallbacks, for the trace
        return self._spent_on(error)

    def limit_error(self, limit: str) -> ModelError:
        """The run's own time ran out during the call: a limit, not a model failure."""
        last = (redact_call_error(self.last_error, self.secrets) if self.total_attempts
                else "no attempt could be made")
        error = ModelError(self.request.model, f"the time left under the machine's `{limit}` limit ran out "
                                               f"during the call (last: {last})", self.total_attempts)
        error.limit = limit  # type: ignore[attr-defined]
        error.events = self.events  # type: ignore[attr-defined]
        return self._spent_on(error)

    def _native_tools(self, model: str) -> bool:
        if self.client.tool_mode != "auto":
            return self.client.tool_mode == "native"
        if model.startswith(CALL_OPENAI_LIKE_PREFIXES):
            return True
        return self.transport(model).supports_function_calling(model)

    def _structured_mode(self, model: str) -> str:
        if self.client.structured_mode != "auto":
            return self.client.structured_mode
        if model.startswith("scripted/"):
            return "json_schema"
        return "json_schema" if self.transport(model).supports_response_schema(model) else "json_object"

    def _note_mode(self, event: dict[str, Any]) -> None:
        if event not in self.events:  # once per model, not once per retry
            self.events.append(event)

    def _error_text(self, transport: ModelTransport, error: Exception) -> str:
        text = transport.describe(error)
        if len(text) > _ERROR_TEXT_LIMIT:
            text = text[:_ERROR_TEXT_LIMIT] + "..."
        return redact_call_error(text, self.secrets)


# --- keeping secrets out of error texts ---------------------------------------------------------------

_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
# credentials a server or an SDK quotes back in an error, whatever their value
_SECRET_PATTERNS = (
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(bearer\s+|basic\s+)?[^\s'\",}]+"),
     r"\1\2[REDACTED]"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{6,}"), r"\1[REDACTED]"),
    (re.compile(r"(?i)((?:x-)?api[-_]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"), r"\1[REDACTED]"),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}"), r"\1-[REDACTED]"),
)


def call_secrets(api_key: str | None) -> list[str]:
    """The key a client was given and the values of environment variables whose names say they hold a
    secret, in every form text may hold them (trace.secret_forms), for `redact_call_error`."""
    values = [api_key] if api_key else []
    values += [value for name, value in os.environ.items()
               if _SECRET_ENV_NAME.search(name) and len(value) >= 6]
    return secret_forms(values)


def redact_call_error(text: str, secrets: list[str]) -> str:
    """Error texts end up in traces and terminals: keys and Authorization headers never do."""
    text = redact(text, secrets)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


def call_encodable(value: Any) -> Any:
    """A copy of a message that UTF-8 can carry: a lone surrogate — half of a UTF-16 pair, from a model
    reply's `\\ud83d` or a file name that is not UTF-8 — becomes U+FFFD, which the HTTP client can encode
    (it would refuse the whole request otherwise, on every retry and every resume)."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {key: call_encodable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [call_encodable(item) for item in value]
    return value


# --- structured output and the tool prompt protocol -------------------------------------------------

def _schema_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name or "output")[:64]
    return cleaned or "output"


def _schema_instruction(schema: dict[str, Any]) -> str:
    return ("Reply with one JSON object and nothing else. It must conform to this JSON Schema:\n"
            + json.dumps(schema, indent=2, sort_keys=True))


def _call_with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    # Merged into a leading system message: some local chat templates reject a second system message.
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        first = dict(messages[0])
        first["content"] = f"{first['content']}\n\n{text}" if first["content"] else text
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _tool_protocol_schema(response_schema: dict[str, Any] | None) -> dict[str, Any]:
    calls = {
        "type": "object",
        "properties": {_TOOL_PROTOCOL_KEY_CALLS: {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name", "arguments"]}}},
        "required": [_TOOL_PROTOCOL_KEY_CALLS],
    }
    final = {"type": "object",
             "properties": {_TOOL_PROTOCOL_KEY_FINAL: response_schema or {"type": "string"}},
             "required": [_TOOL_PROTOCOL_KEY_FINAL]}
    return {"anyOf": [calls, final]}


def _tool_protocol_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                            response_schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    """For models without native tool calling: tools described in the system message, and earlier tool
    calls and results rewritten as plain turns the model can read."""
    lines = ["You can call tools. Available tools:"]
    for tool in tools:
        function = tool.get("function", tool)
        lines.append(f"- {function.get('name')}: {function.get('description', '').strip()}")
        parameters = json.dumps(function.get("parameters", {}), sort_keys=True)
        lines.append(f"  arguments (JSON Schema): {parameters}")
    final_shape = ('{"final": <an object conforming to the schema below>}' if response_schema
                   else '{"final": "<your answer>"}')
    lines += [
        "",
        "Reply with exactly one JSON object and nothing else, in one of two forms:",
        '{"tool_calls": [{"name": "<tool name>", "arguments": {...}}]} to call one or more tools, or',
        f"{final_shape} when you have the answer.",
    ]
    if response_schema:
        lines.append(json.dumps(response_schema, indent=2, sort_keys=True))
    names_by_id: dict[str, str] = {}
    rewritten: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function", {})
                names_by_id[call.get("id", "")] = function.get("name", "")
                try:
                    arguments = read_json(function.get("arguments") or "{}", "the arguments")
                except ValueError:
                    arguments = function.get("arguments")
                calls.append({"name": function.get("name"), "arguments": arguments})
            rewritten.append({"role": "assistant", "content": json.dumps({_TOOL_PROTOCOL_KEY_CALLS: calls})})
        elif message.get("role") == "tool":
            name = message.get("name") or names_by_id.get(message.get("tool_call_id", ""), "tool")
            result = message.get("content", "")
            rewritten.append({"role": "user", "content": f"Result of tool {name}:\n{result}"})
        else:
            rewritten.append(message)
    return _call_with_system_text(rewritten, "\n".join(lines))


class ToolProtocolError(Exception):
    """A reply in prompt-protocol mode is neither `{"tool_calls": [...]}` nor `{"final": ...}`."""


def parse_tool_protocol(text: str) -> tuple[str, list[ToolCallRequest]]:
    """Reads a prompt-protocol reply: `{"tool_calls": [...]}` or `{"final": ...}`, nothing else.

    Returns (final content, tool calls); raises ToolProtocolError saying what is wrong with the reply.
    """
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", stripped, re.DOTALL)
    if fenced:
        stripped = fenced.group(1)
    try:
        data = read_json(stripped, "the reply")
    except BorderError as error:
        raise ToolProtocolError(str(error)) from None
    except ValueError as error:
        raise ToolProtocolError(f"reply is not JSON: {error}") from None
    if not isinstance(data, dict) or len(data) != 1 or not set(data) <= {_TOOL_PROTOCOL_KEY_CALLS,
                                                                         _TOOL_PROTOCOL_KEY_FINAL}:
        raise ToolProtocolError('reply must be an object with exactly one key, "tool_calls" or "final"')
    if _TOOL_PROTOCOL_KEY_FINAL in data:
        final = data[_TOOL_PROTOCOL_KEY_FINAL]
        return (final if isinstance(final, str) else json.dumps(final)), []
    calls = data.get(_TOOL_PROTOCOL_KEY_CALLS)
    if not isinstance(calls, list) or not calls:
        raise ToolProtocolError('"tool_calls" must be a non-empty list')
    requests = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
            raise ToolProtocolError(f'tool call #{index + 1} must be {{"name": ..., "arguments": {{...}}}}')
        if not isinstance(call["name"], str) or not call["name"]:
            raise ToolProtocolError(f"tool call #{index + 1} has no tool name")
        if not isinstance(call["arguments"], dict):
            raise ToolProtocolError(f"tool call #{index + 1}: arguments must be an object")
        requests.append(ToolCallRequest(id=f"call_{index}", name=call["name"],
                                        arguments=json.dumps(call["arguments"])))
    return "", requests
