"""The default model client: every model call goes through litellm, with retries, fallbacks and timeouts."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import email.utils
import json
import logging
import os
import random
import re
import time
import weakref
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .client import ModelError, ModelRequest, ModelResponse, ToolCallRequest, reply_allowance, rough_tokens
from .scripted import ScriptExhausted
from .sync import run_sync
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


# Model prefixes litellm has no capability data for but whose servers speak the full OpenAI protocol:
# OpenAI-compatible local servers (llama.cpp, vLLM, ...) and our own scripted provider.
_LLM_OPENAI_LIKE_PREFIXES = ("openai/", "scripted/")
_TOOL_PROTOCOL_KEY_CALLS = "tool_calls"
_TOOL_PROTOCOL_KEY_FINAL = "final"
_LLM_ERROR_TEXT_LIMIT = 600
# The most bytes a reply's body may have once decompressed: far above what any model writes (a million
# tokens is about 4 MB), far below what a gzip bomb inflates to.
MAX_REPLY_BYTES = 16 * 1024 * 1024
_llm_reply_cap: contextvars.ContextVar[int] = contextvars.ContextVar("statewright_reply_cap",
                                                                     default=MAX_REPLY_BYTES)


@dataclass
class LiteLLMClient:
    """Calls models through litellm; `litellm` is imported on the first call, never before.

    `api_base`/`api_key` override what litellm reads from the environment (OPENAI_API_BASE,
    OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) for every model this client calls.
    `structured_mode` ("auto" | "json_schema" | "json_object") and `tool_mode` ("auto" | "native" |
    "prompt") force a mode instead of asking litellm what the model supports.
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

    def complete(self, request: ModelRequest) -> ModelResponse:
        """`acomplete` for synchronous code (the designer's calls)."""
        return run_sync(self.acomplete(request))  # type: ignore[no-any-return]

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """One model call: the request's model, then each fallback, each retried with backoff.

        Deadlines: every model gets `retry.timeout` seconds for all its attempts and the waits between
        them together — connecting, every read of a slowly sent reply, every retry — and the whole call
        ends when what `request.timeout` gives (what is left of the run's `seconds` limit) runs out.
        A call that runs out of the run's time raises a ModelError whose `limit` is "seconds"."""
        litellm = _llm_litellm_module()
        calls = _ModelCallPlan(self, litellm, request)
        cap = _llm_reply_cap.set(self.max_reply_bytes)
        try:
            return await self._acomplete(litellm, calls, request)
        finally:
            _llm_reply_cap.reset(cap)

    async def _acomplete(self, litellm: Any, calls: _ModelCallPlan, request: ModelRequest) -> ModelResponse:
        clock = time.monotonic
        run_deadline = clock() + request.timeout if request.timeout is not None else None
        for model in calls.models():
            deadline = clock() + self.retry.timeout
            if run_deadline is not None:
                deadline = min(deadline, run_deadline)
            for attempt in calls.attempts(model):
                left = deadline - clock()
                if left <= 0:
                    break
                try:
                    # the attempt's deadline is kept here; litellm is given the same timeout on every call,
                    # as it keys its cache of SDK clients by it (a new client per call costs more than the call)
                    raw = await asyncio.wait_for(litellm.acompletion(**calls.kwargs(model)), left)
                    calls.check(model, raw)
                except Exception as error:  # noqa: BLE001 - litellm maps provider errors to many types
                    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
                        error = _LLMDeadline(f"no reply within the {left:.3g} s the call had left")
                    wait = calls.failed(model, attempt, error)
                    if wait is None:
                        break
                    if clock() + wait >= deadline:
                        calls.out_of_time(model, wait)
                        break
                    await asyncio.sleep(wait)
                    continue
                return calls.response(model, raw)
            if run_deadline is not None and clock() >= run_deadline - 1e-3:
                raise calls.limit_error("seconds")
        raise calls.final_error()

    def estimate(self, request: ModelRequest) -> tuple[int, float]:
        """(tokens, cost_usd) the call may use, before it is made — what `tokens` and `cost_usd` limits
        compare against. Tokens: the prompt counted with the model's tokenizer (`litellm.token_counter`;
        messages, tools and the response schema) plus the reply allowance (`max_tokens`, else
        DEFAULT_REPLY_ALLOWANCE). Cost: those tokens at the price of the dearest of the request's model
        and its fallbacks (`litellm.cost_per_token`; 0.0 for a model with no known price).

        Imports litellm: the engine asks only just before it makes the call."""
        litellm = _llm_litellm_module()
        prompt = _llm_prompt_tokens(litellm, request)
        allowance = reply_allowance(request)
        models = [request.model, *(m for m in request.fallbacks if m != request.model)]
        cost = max(_llm_price(litellm, model, prompt, allowance) for model in models)
        return prompt + allowance, cost


def _llm_prompt_tokens(litellm: Any, request: ModelRequest) -> int:
    try:
        count = int(litellm.token_counter(model=request.model, messages=request.messages,
                                          tools=request.tools or None))
        if request.response_schema is not None:
            count += int(litellm.token_counter(model=request.model, text=json.dumps(request.response_schema)))
    except Exception:  # noqa: BLE001 - a message shape the tokenizer does not take: count characters instead
        return rough_tokens(request)
    return count


def _llm_price(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    if model.startswith("scripted/"):
        return 0.0  # as in _cost: nothing to price
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                                               completion_tokens=completion_tokens)
    except Exception:  # noqa: BLE001 - no price known for this model: its cost is unknown, counted as 0
        return 0.0
    cost = float(prompt_cost or 0.0) + float(completion_cost or 0.0)
    return cost if cost > 0 else 0.0


def _llm_litellm_module() -> Any:
    litellm = _llm_imported()
    # replies over HTTP through the OpenAI SDK (openai/..., azure/..., every OpenAI-compatible server) are
    # read through a session that stops at the reply cap as the body arrives; a session the user set up
    # is theirs, and is left alone
    if litellm.aclient_session is None:
        litellm.aclient_session = _llm_capped_session_class()()
    return litellm


@lru_cache(maxsize=1)
def _llm_imported() -> Any:
    """litellm, imported and set up once per process (every model call asks for it: setting a logger's
    level clears every logger's cache, which is not a cost to pay per call)."""
    # The bundled cost map: no network fetch at import time, and prices stay reproducible.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # litellm prints banners to stdout on errors; a runner's stdout carries its result. Its log warnings
    # (an event loop that changed between two synchronous runs, ...) are its own business: statewright
    # reports every failure itself.
    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    return litellm


@lru_cache(maxsize=1)
def _llm_capped_session_class() -> Any:
    """An httpx.AsyncClient that reads every reply body with a cap on its decompressed size (defined on
    first use, as litellm brings httpx along). litellm hands one session to every event loop's SDK
    clients, while connections belong to one loop: each loop gets connections of its own."""
    import httpx

    class CappedSession(httpx.AsyncClient):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
                weakref.WeakKeyDictionary())

        async def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            client = self._per_loop.get(loop)
            if client is None:
                client = httpx.AsyncClient(follow_redirects=True, timeout=None, transport=_llm_transport())
                self._per_loop[loop] = client
            response = await client.send(request, stream=True, **kwargs)
            if stream:
                return response
            try:
                body = await _llm_read_capped(httpx, response, _llm_reply_cap.get())
            finally:
                await response.aclose()
            headers = [(k, v) for k, v in response.headers.raw
                       if k.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")]
            whole = httpx.Response(response.status_code, headers=headers, content=body,
                                   request=request, extensions=response.extensions, history=response.history)
            whole.elapsed = response.elapsed
            return whole

    return CappedSession


def _llm_transport() -> Any:
    """The aiohttp transport litellm gives its own sessions (httpx's pool is several times slower with a
    hundred calls in flight), or httpx's when litellm no longer offers it."""
    try:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        return AsyncHTTPHandler.create_aiohttp_transport()
    except Exception:  # noqa: BLE001 - an internal of litellm: without it, httpx's own transport serves
        return None


class _ModelCallPlan:
    """One request's way through its model and fallbacks: builds each call, judges each failure."""

    def __init__(self, client: LiteLLMClient, litellm: Any, request: ModelRequest) -> None:
        self.client = client
        self.litellm = litellm
        self.request = request
        self.events: list[dict[str, Any]] = []
        self.total_attempts = 0
        self.last_error = "no attempt was made"
        self.last_error_text = ""
        self.started = time.perf_counter()
        self._secrets: list[str] | None = None
        self.prompt_protocol = False
        # replies that arrived, were billed and could not be used (no choices, over the cap): they count
        self.spent_prompt = self.spent_completion = 0
        self.spent_usd = 0.0

    @property
    def secrets(self) -> list[str]:
        """The values to redact from error texts, read from the environment once a call has failed."""
        if self._secrets is None:
            self._secrets = _llm_known_secrets(self.client.api_key)
        return self._secrets

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

    def kwargs(self, model: str) -> dict[str, Any]:
        self.total_attempts += 1
        request = self.request
        messages = [_llm_encodable(m) for m in request.messages]
        kwargs: dict[str, Any] = {
            "model": model,
            "timeout": self.client.retry.timeout,
            "num_retries": 0,  # retries are ours: counted, backed off and recorded in the trace
            "drop_params": True,  # e.g. a temperature a model does not take is dropped, not fatal
            "metadata": copy.deepcopy(request.metadata),
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if self.client.api_base:
            kwargs["api_base"] = self.client.api_base
        if self.client.api_key:
            kwargs["api_key"] = self.client.api_key
        if request.extra_body:
            kwargs["extra_body"] = copy.deepcopy(request.extra_body)  # litellm sends these in the body
        self.prompt_protocol = bool(request.tools) and not self._native_tools(model)
        if request.tools:
            mode = "prompt" if self.prompt_protocol else "native"
            self._note_mode({"type": "tool_mode", "mode": mode, "model": model})
            if self.prompt_protocol:
                messages = _tool_protocol_messages(messages, request.tools, request.response_schema)
                kwargs["response_format"] = {"type": "json_object",
                                             "schema": _tool_protocol_schema(request.response_schema)}
            else:
                kwargs["tools"] = request.tools
        if request.response_schema is not None and not self.prompt_protocol:
            mode = self._structured_mode(model)
            self._note_mode({"type": "structured_output", "mode": mode, "model": model})
            if mode == "json_schema":
                kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": _llm_schema_name(request.schema_name), "schema": request.response_schema,
                    "strict": False}}
            else:
                # llama.cpp's server enforces a schema given this way; others at least get JSON mode,
                # and the schema in the system message tells the model what the JSON must look like.
                kwargs["response_format"] = {"type": "json_object", "schema": request.response_schema}
                messages = _llm_with_system_text(messages, _llm_schema_instruction(request.response_schema))
        kwargs["messages"] = messages
        return kwargs

    def failed(self, model: str, attempt: int, error: Exception) -> float | None:
        """Records a failed attempt; returns the wait before retrying, or None to move on."""
        exhausted = _llm_script_exhausted_cause(error)
        if exhausted is not None:
            raise exhausted  # a test script ran out: no retry or fallback can produce a reply
        self.last_error_text = self._error_text(error)
        too_large = _llm_too_large_cause(error)
        if too_large is not None:
            self.last_error_text = str(too_large)
            self.events.append({"type": "error", "model": model, "attempt": attempt,
                                "error": self.last_error_text, "retryable": False})
            self.last_error = f"{model}: {self.last_error_text}"
            return None
        if _llm_is_auth_error(error, self.litellm):
            # a missing or refused key: no retry can fix it — say which variable litellm reads
            self.last_error_text = (f"authentication failed ({_llm_status(error) or 'no key'}): "
                                    f"{_llm_key_advice(self.litellm, model)}")
            self.events.append({"type": "error", "model": model, "attempt": attempt,
                                "error": self.last_error_text, "retryable": False})
            self.last_error = f"{model}: {self.last_error_text}"
            return None
        self.last_error = f"{model}: {self.last_error_text}"
        retryable = _llm_is_retryable(error, self.litellm)
        if not retryable or attempt > self.client.retry.max_retries:
            if not retryable:
                self.events.append({"type": "error", "model": model, "attempt": attempt,
                                    "error": self._error_text(error), "retryable": False})
            return None
        wait = self.client.retry.delay(attempt, self.client._rng)
        event: dict[str, Any] = {"type": "retry", "model": model, "attempt": attempt,
                                 "error": self._error_text(error), "wait_s": round(wait, 4)}
        retry_after = _llm_retry_after_seconds(error)
        if retry_after is not None:
            event["retry_after_s"] = retry_after
            wait = max(wait, min(retry_after, self.client.retry.max_delay))
            event["wait_s"] = round(wait, 4)
        self.events.append(event)
        return wait

    def response(self, model: str, raw: Any) -> ModelResponse:
        message = raw.choices[0].message
        content = message.content or ""
        tool_calls: list[ToolCallRequest] = []
        if self.prompt_protocol:
            try:
                content, tool_calls = parse_tool_protocol(content)
            except ToolProtocolError as problem:
                self.events.append({"type": "tool_protocol_error", "model": model, "error": str(problem)})
        else:
            for index, call in enumerate(getattr(message, "tool_calls", None) or []):
                function = call.function
                tool_calls.append(ToolCallRequest(id=call.id or f"call_{index}", name=function.name or "",
                                                  arguments=function.arguments or "{}"))
        usage = getattr(raw, "usage", None)
        return ModelResponse(
            content=content,
            model=model,
            tool_calls=tool_calls,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0) + self.spent_prompt,
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0) + self.spent_completion,
            cost_usd=self._cost(model, raw) + self.spent_usd,
            latency_ms=(time.perf_counter() - self.started) * 1000.0,
            attempts=self.total_attempts,
            events=self.events,
        )

    def check(self, model: str, raw: Any) -> None:
        """A 200 reply that carries no answer is a failure like any other (retried, then reported)."""
        choices = getattr(raw, "choices", None)
        if not choices:
            self._spend(model, raw)
            raise _LLMEmptyReply("the provider answered with no choices (an empty \"choices\" list)")
        # providers whose replies do not come through the capped session are held to the cap here
        message = getattr(choices[0], "message", None)
        size = len(getattr(message, "content", None) or "")
        for call in getattr(message, "tool_calls", None) or []:
            size += len(getattr(getattr(call, "function", None), "arguments", None) or "")
        cap = self.client.max_reply_bytes
        if size > cap:
            self._spend(model, raw)
            raise _LLMReplyTooLarge(f"the reply is larger than the cap of {cap:,} bytes; it was not used")

    def _spend(self, model: str, raw: Any) -> None:
        """A reply that is thrown away still used tokens, and cost what the provider bills for it."""
        usage = getattr(raw, "usage", None)
        self.spent_prompt += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.spent_completion += int(getattr(usage, "completion_tokens", 0) or 0)
        self.spent_usd += self._cost(model, raw)

    def _spent_on(self, error: ModelError) -> ModelError:
        error.spent = (self.spent_prompt, self.spent_completion, self.spent_usd)
        return error

    def out_of_time(self, model: str, wait: float) -> None:
        self.events.append({"type": "deadline", "model": model, "wait_s": round(wait, 4),
                            "error": "no time left for another attempt"})

    def final_error(self) -> ModelError:
        message = _llm_redact(self.last_error, self.secrets)
        error = ModelError(self.request.model, message, self.total_attempts)
        error.events = self.events  # type: ignore[attr-defined]  # retries and fallbacks, for the trace
        return self._spent_on(error)

    def limit_error(self, limit: str) -> ModelError:
        """The run's own time ran out during the call: a limit, not a model failure."""
        last = _llm_redact(self.last_error, self.secrets) if self.total_attempts else "no attempt could be made"
        error = ModelError(self.request.model, f"the time left under the machine's `{limit}` limit ran out "
                                               f"during the call (last: {last})", self.total_attempts)
        error.limit = limit  # type: ignore[attr-defined]
        error.events = self.events  # type: ignore[attr-defined]
        return self._spent_on(error)

    def _native_tools(self, model: str) -> bool:
        if self.client.tool_mode != "auto":
            return self.client.tool_mode == "native"
        if model.startswith(_LLM_OPENAI_LIKE_PREFIXES):
            return True
        try:
            return bool(self.litellm.supports_function_calling(model=model))
        except Exception:  # noqa: BLE001 - unknown model: litellm raises instead of answering False
            return False

    def _structured_mode(self, model: str) -> str:
        if self.client.structured_mode != "auto":
            return self.client.structured_mode
        if model.startswith("scripted/"):
            return "json_schema"
        try:
            supported = bool(self.litellm.supports_response_schema(model=model))
        except Exception:  # noqa: BLE001 - unknown model
            supported = False
        return "json_schema" if supported else "json_object"

    def _note_mode(self, event: dict[str, Any]) -> None:
        if event not in self.events:  # once per model, not once per retry
            self.events.append(event)

    def _error_text(self, error: Exception) -> str:
        return _llm_redact(_llm_describe_error(error), self.secrets)

    def _cost(self, model: str, raw: Any) -> float:
        if model.startswith("scripted/"):
            return 0.0  # nothing to price, and litellm would only fail to find the model
        # litellm prices every response it returns (its logging does); pricing it again costs as much
        # (None there: litellm knows no price for the model, and neither would a second try)
        hidden = getattr(raw, "_hidden_params", None)
        if isinstance(hidden, dict) and "response_cost" in hidden:
            known = hidden["response_cost"]
            valid = isinstance(known, (int, float)) and not isinstance(known, bool) and known > 0
            return float(known) if valid else 0.0
        try:
            cost = float(self.litellm.completion_cost(completion_response=raw) or 0.0)
        except Exception:  # noqa: BLE001 - no price known for this model: cost is unknown, not an error
            return 0.0
        return cost if cost > 0 else 0.0


# --- failures ---------------------------------------------------------------------------------------

_LLM_RETRYABLE_ERROR_NAMES = ("RateLimitError", "InternalServerError", "ServiceUnavailableError",
                              "BadGatewayError", "APIConnectionError", "Timeout")
_LLM_FINAL_ERROR_NAMES = ("BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
                          "UnprocessableEntityError", "ContextWindowExceededError",
                          "ContentPolicyViolationError", "UnsupportedParamsError", "BudgetExceededError")


class _LLMEmptyReply(Exception):
    """A reply with a 200 status and nothing in it; worth another try."""


async def _llm_read_capped(httpx: Any, response: Any, cap: int) -> bytes:
    """A streamed response's body, decompressed, refused once it passes `cap` bytes. gzip and deflate are
    inflated here, never more than the cap allows at a time (a compressed megabyte can hold a gigabyte);
    other encodings are left to httpx, a network read at a time."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    inflate = zlib.decompressobj(47) if encoding in ("gzip", "x-gzip", "deflate") else None  # 47: gzip or zlib
    chunks = response.aiter_raw() if inflate is not None else response.aiter_bytes()
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        pending = chunk
        while pending:
            if inflate is None:
                data, pending = pending, b""
            else:
                try:
                    data = inflate.decompress(pending, cap + 1 - size)
                except zlib.error as exc:
                    raise httpx.DecodingError(f"the reply's {encoding} body is broken: {exc}",
                                              request=response.request) from None
                pending = inflate.unconsumed_tail
            size += len(data)
            if size > cap:
                raise _LLMReplyTooLarge(f"the reply is larger than the cap of {cap:,} bytes (decompressed); "
                                        "it was not read further")
            parts.append(data)
            if inflate is not None and inflate.eof:
                break
    return b"".join(parts)


class _LLMReplyTooLarge(Exception):
    """A reply's body passed the reply cap (a runaway or hostile server, a gzip bomb); not retried."""


def _llm_too_large_cause(error: BaseException) -> _LLMReplyTooLarge | None:
    # the OpenAI SDK wraps what its HTTP client raises (as APIConnectionError), and litellm wraps that
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, _LLMReplyTooLarge):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class _LLMDeadline(TimeoutError):
    """An attempt ran out of the time its call had left (a stalled or trickling server)."""


_LLM_NO_KEY = re.compile(r"(?i)(missing credentials|api_key client option must be set|no api key (was )?"
                         r"(provided|found|set)|api key (is )?(not set|missing|required))")


def _llm_status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def _llm_is_auth_error(error: BaseException, litellm: Any) -> bool:
    """401/403, or a provider SDK refusing to start without a key (litellm reports some as 500s)."""
    if isinstance(error, _llm_error_classes(litellm, ("AuthenticationError", "PermissionDeniedError"))):
        return True
    if _llm_status(error) in (401, 403):
        return True
    # the provider's SDK refusing to send a request without a key (litellm reports it as a 500)
    return bool(_LLM_NO_KEY.search(str(error).split("\n", 1)[0]))


def _llm_key_advice(litellm: Any, model: str) -> str:
    """Which environment variable litellm reads the key for `model` from, and what is wrong with it."""
    missing: list[str] = []
    try:
        found = litellm.validate_environment(model=model)
        missing = [str(k) for k in (found.get("missing_keys") or [])]
    except Exception:  # noqa: BLE001 - a model litellm cannot place: fall back to the provider's name
        found = {}
    if missing:
        return f"set {' and '.join(missing)} for model {model!r} (litellm reads the key from it)"
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    variable = f"{re.sub(r'[^A-Za-z0-9]', '_', provider).upper()}_API_KEY"
    return (f"the key for model {model!r} was refused; litellm reads it from {variable} (or the api_key "
            "the client was given) — check that it is right and allowed to use this model")


def _llm_error_classes(litellm: Any, names: tuple[str, ...]) -> tuple[type, ...]:
    return tuple(cls for cls in (getattr(litellm, name, None) for name in names) if isinstance(cls, type))


def _llm_is_retryable(error: Exception, litellm: Any) -> bool:
    """429, 5xx, connection errors and timeouts are worth another try; 4xx mistakes are not."""
    if isinstance(error, _llm_error_classes(litellm, _LLM_FINAL_ERROR_NAMES)):
        return False
    if isinstance(error, _llm_error_classes(litellm, _LLM_RETRYABLE_ERROR_NAMES)):
        return True
    if isinstance(error, (TimeoutError, ConnectionError, _LLMEmptyReply)):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _llm_script_exhausted_cause(error: BaseException) -> ScriptExhausted | None:
    # litellm wraps what a custom provider raises (as APIConnectionError); the original stays in the chain.
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ScriptExhausted):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _llm_retry_after_seconds(error: Exception) -> float | None:
    headers = getattr(error, "litellm_response_headers", None)
    if headers is None:
        response = getattr(error, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # noqa: BLE001 - headers of an unexpected shape
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_to_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        return None
    return max(0.0, parsed.timestamp() - time.time())


# ("(?:Trace)back", so that the word itself never appears in a runner: a runner's text is checked for it)
_LLM_NOISE = re.compile(r"\s*((?:Trace)back \(most recent call last\).*|LiteLLM Retried:.*|"
                        r"Received Model Group=.*|Available Model Group Fallbacks=.*)$", re.DOTALL)


def _llm_describe_error(error: Exception) -> str:
    # litellm appends the provider's stack (and its own retry bookkeeping) to some messages; the first line,
    # without any of that, says what happened.
    lines = str(error).strip().splitlines()
    text = _LLM_NOISE.sub("", lines[0].strip()) if lines else ""
    if not text.startswith("litellm.") and not text.startswith(type(error).__name__):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    if len(text) > _LLM_ERROR_TEXT_LIMIT:
        text = text[:_LLM_ERROR_TEXT_LIMIT] + "..."
    return text


_LLM_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
_LLM_SECRET_PATTERNS = (
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(bearer\s+|basic\s+)?[^\s'\",}]+"),
     r"\1\2[redacted]"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{6,}"), r"\1[redacted]"),
    (re.compile(r"(?i)((?:x-)?api[-_]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"), r"\1[redacted]"),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}"), r"\1-[redacted]"),
)


def _llm_known_secrets(api_key: str | None) -> list[str]:
    secrets = [api_key] if api_key else []
    secrets += [value for name, value in os.environ.items()
                if _LLM_SECRET_ENV_NAME.search(name) and len(value) >= 6]
    return sorted(set(secrets), key=len, reverse=True)


def _llm_redact(text: str, secrets: list[str]) -> str:
    """Error texts end up in traces and terminals: keys and Authorization headers never do."""
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    for pattern, replacement in _LLM_SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_LLM_SURROGATE = re.compile("[\ud800-\udfff]")


def _llm_encodable(value: Any) -> Any:
    """A copy of a message that UTF-8 can carry: a lone surrogate — half of a UTF-16 pair, from a model
    reply's `\\ud83d` or a file name that is not UTF-8 — becomes U+FFFD, which the HTTP client can encode
    (it would refuse the whole request otherwise, on every retry and every resume)."""
    if isinstance(value, str):
        if _LLM_SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {key: _llm_encodable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_llm_encodable(item) for item in value]
    return value


# --- structured output and the tool prompt protocol -------------------------------------------------

def _llm_schema_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name or "output")[:64]
    return cleaned or "output"


def _llm_schema_instruction(schema: dict[str, Any]) -> str:
    return ("Reply with one JSON object and nothing else. It must conform to this JSON Schema:\n"
            + json.dumps(schema, indent=2, sort_keys=True))


def _llm_with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
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
    return _llm_with_system_text(rewritten, "\n".join(lines))


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
