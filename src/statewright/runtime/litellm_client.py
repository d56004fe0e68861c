"""The litellm client: every model call goes through litellm's `acompletion`, with the retries, fallbacks
and timeouts every client shares (model_calls.py). It is the path of every provider but the
OpenAI-compatible ones the native client serves (openai_http.py), and of every model when forced."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import json
import logging
import os
import re
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .call_failures import CappedBody, call_retryable, call_status, retry_after_seconds
from .client import ModelRequest, ToolCallRequest, rough_tokens
from .model_calls import MAX_REPLY_BYTES, Completion, ModelCaller, ModelCallPlan, RetryPolicy  # noqa: F401

# (RetryPolicy is imported from here too, where it was defined before model_calls.py existed.)

_reply_cap: contextvars.ContextVar[int] = contextvars.ContextVar("statewright_reply_cap",
                                                                 default=MAX_REPLY_BYTES)


@dataclass
class LiteLLMClient(ModelCaller):
    """Calls every model through litellm; `litellm` is imported on the first call, never before.

    `api_base`/`api_key` override what litellm reads from the environment (OPENAI_API_BASE,
    OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) for every model this client calls. The other options are
    ModelCaller's."""

    _transport: LiteLLMTransport | None = field(default=None, init=False, repr=False, compare=False)

    def transport(self, model: str) -> LiteLLMTransport:
        if self._transport is None:
            self._transport = LiteLLMTransport(self)
        return self._transport


class LiteLLMTransport:
    """An attempt as a `litellm.acompletion` call, and litellm's failures read (its exception types,
    the headers it keeps, the key variables it reads). The client gives the endpoint, key and cap."""

    def __init__(self, client: ModelCaller) -> None:
        self.client = client
        _load_litellm()  # imported now, before any call's deadline starts: the import takes seconds

    @property
    def litellm(self) -> Any:
        return _load_litellm()

    async def send(self, plan: ModelCallPlan, model: str) -> Completion:
        litellm = self.litellm
        client = self.client
        kwargs = plan.body(model)
        kwargs.update({
            "model": model,
            # the attempt's deadline is kept by the caller; litellm is given the same timeout on every call,
            # as it keys its cache of SDK clients by it (a new client per call costs more than the call)
            "timeout": client.retry.timeout,
            "num_retries": 0,  # retries are ours: counted, backed off and recorded in the trace
            "drop_params": True,  # e.g. a temperature a model does not take is dropped, not fatal
            "metadata": copy.deepcopy(plan.request.metadata),
        })
        if client.api_base:
            kwargs["api_base"] = client.api_base
        if client.api_key:
            kwargs["api_key"] = client.api_key
        if plan.request.extra_body:
            kwargs["extra_body"] = copy.deepcopy(plan.request.extra_body)  # litellm sends these in the body
        cap = _reply_cap.set(client.max_reply_bytes)
        try:
            raw = await litellm.acompletion(**kwargs)
        finally:
            _reply_cap.reset(cap)
        return self._completion(model, raw)

    def _completion(self, model: str, raw: Any) -> Completion:
        usage = getattr(raw, "usage", None)
        read = Completion(choices=len(getattr(raw, "choices", None) or ()),
                          prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                          completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                          cost_usd=self._cost(model, raw))
        if read.choices:
            message = getattr(raw.choices[0], "message", None)
            read.content = getattr(message, "content", None) or ""
            read.finish_reason = getattr(raw.choices[0], "finish_reason", None) or None
            for index, call in enumerate(getattr(message, "tool_calls", None) or []):
                function = getattr(call, "function", None)
                read.tool_calls.append(ToolCallRequest(
                    id=getattr(call, "id", None) or f"call_{index}",
                    name=getattr(function, "name", None) or "",
                    arguments=getattr(function, "arguments", None) or "{}"))
        return read

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

    def supports_response_schema(self, model: str) -> bool:
        try:
            return bool(self.litellm.supports_response_schema(model=model))
        except Exception:  # noqa: BLE001 - unknown model: litellm raises instead of answering False
            return False

    def supports_function_calling(self, model: str) -> bool:
        try:
            return bool(self.litellm.supports_function_calling(model=model))
        except Exception:  # noqa: BLE001 - unknown model
            return False

    def is_auth_error(self, error: BaseException) -> bool:
        """401/403, or a provider SDK refusing to start without a key (litellm reports some as 500s)."""
        refused = _error_classes(self.litellm, ("AuthenticationError", "PermissionDeniedError"))
        if isinstance(error, refused):
            return True
        if call_status(error) in (401, 403):
            return True
        return bool(_NO_KEY.search(str(error).split("\n", 1)[0]))

    def key_advice(self, model: str) -> str:
        """Which environment variable litellm reads the key for `model` from, and what is wrong with it."""
        missing: list[str] = []
        try:
            found = self.litellm.validate_environment(model=model)
            missing = [str(k) for k in (found.get("missing_keys") or [])]
        except Exception:  # noqa: BLE001, S110 - a model litellm cannot place: advice by the provider's name
            pass
        if missing:
            return f"set {' and '.join(missing)} for model {model!r} (litellm reads the key from it)"
        provider = model.split("/", 1)[0] if "/" in model else "openai"
        variable = f"{re.sub(r'[^A-Za-z0-9]', '_', provider).upper()}_API_KEY"
        return (f"the key for model {model!r} was refused; litellm reads it from {variable} (or the api_key "
                "the client was given) — check that it is right and allowed to use this model")

    def is_retryable(self, error: Exception) -> bool:
        """429, 5xx, connection errors and timeouts are worth another try; 4xx mistakes are not."""
        if isinstance(error, _error_classes(self.litellm, _FINAL_ERROR_NAMES)):
            return False
        if isinstance(error, _error_classes(self.litellm, _RETRYABLE_ERROR_NAMES)):
            return True
        return call_retryable(error)

    def retry_after(self, error: Exception) -> float | None:
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
        return retry_after_seconds(value)

    def describe(self, error: Exception) -> str:
        # litellm appends the provider's stack (and its own retry bookkeeping) to some messages; the first
        # line, without any of that, says what happened.
        lines = str(error).strip().splitlines()
        text = _NOISE.sub("", lines[0].strip()) if lines else ""
        if not text.startswith("litellm.") and not text.startswith(type(error).__name__):
            text = f"{type(error).__name__}: {text}" if text else type(error).__name__
        return text

    def prompt_tokens(self, request: ModelRequest) -> int:
        """The prompt counted with the model's tokenizer (`litellm.token_counter`; messages, tools and the
        response schema), or by characters when the tokenizer does not take the messages."""
        litellm = self.litellm
        try:
            count = int(litellm.token_counter(model=request.model, messages=request.messages,
                                              tools=request.tools or None))
            if request.response_schema is not None:
                schema = json.dumps(request.response_schema)
                count += int(litellm.token_counter(model=request.model, text=schema))
        except Exception:  # noqa: BLE001 - a message shape the tokenizer does not take: count characters
            return rough_tokens(request)
        return count

    def price(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """`litellm.cost_per_token` of the tokens; 0.0 for a model with no known price."""
        if model.startswith("scripted/"):
            return 0.0  # as in _cost: nothing to price
        try:
            prompt_cost, completion_cost = self.litellm.cost_per_token(
                model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        except Exception:  # noqa: BLE001 - no price known for this model: its cost is unknown, counted as 0
            return 0.0
        cost = float(prompt_cost or 0.0) + float(completion_cost or 0.0)
        return cost if cost > 0 else 0.0


def _load_litellm() -> Any:
    litellm = _imported()
    # replies over HTTP through the OpenAI SDK (openai/..., azure/..., every OpenAI-compatible server) are
    # read through a session that stops at the reply cap as the body arrives; a session the user set up
    # is theirs, and is left alone
    if litellm.aclient_session is None:
        litellm.aclient_session = _capped_session_class()()
    return litellm


@lru_cache(maxsize=1)
def _imported() -> Any:
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
def _capped_session_class() -> Any:
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
                client = httpx.AsyncClient(follow_redirects=True, timeout=None,
                                           transport=_aiohttp_transport())
                self._per_loop[loop] = client
            response = await client.send(request, stream=True, **kwargs)
            if stream:
                return response
            try:
                body = await _read_capped(httpx, response, _reply_cap.get())
            finally:
                await response.aclose()
            headers = [(k, v) for k, v in response.headers.raw
                       if k.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")]
            whole = httpx.Response(response.status_code, headers=headers, content=body,
                                   request=request, extensions=response.extensions, history=response.history)
            whole.elapsed = response.elapsed
            return whole

    return CappedSession


def _aiohttp_transport() -> Any:
    """The aiohttp transport litellm gives its own sessions (httpx's pool is several times slower with a
    hundred calls in flight), or httpx's when litellm no longer offers it."""
    try:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        return AsyncHTTPHandler.create_aiohttp_transport()
    except Exception:  # noqa: BLE001 - an internal of litellm: without it, httpx's own transport serves
        return None


# --- failures ---------------------------------------------------------------------------------------

_RETRYABLE_ERROR_NAMES = ("RateLimitError", "InternalServerError", "ServiceUnavailableError",
                          "BadGatewayError", "APIConnectionError", "Timeout")
_FINAL_ERROR_NAMES = ("BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
                      "UnprocessableEntityError", "ContextWindowExceededError",
                      "ContentPolicyViolationError", "UnsupportedParamsError", "BudgetExceededError")
_NO_KEY = re.compile(r"(?i)(missing credentials|api_key client option must be set|no api key (was )?"
                     r"(provided|found|set)|api key (is )?(not set|missing|required))")
# ("(?:Trace)back", so that the word itself never appears in a runner: a runner's text is checked for it)
_NOISE = re.compile(r"\s*((?:Trace)back \(most recent call last\).*|LiteLLM Retried:.*|"
                    r"Received Model Group=.*|Available Model Group Fallbacks=.*)$", re.DOTALL)


async def _read_capped(httpx: Any, response: Any, cap: int) -> bytes:
    """A streamed response's body, decompressed, refused once it passes `cap` bytes (CappedBody); gzip and
    deflate are inflated by CappedBody, other encodings are left to httpx, a network read at a time."""
    body = CappedBody(cap, response.headers.get("content-encoding", ""))
    chunks = response.aiter_raw() if body.inflate is not None else response.aiter_bytes()
    async for chunk in chunks:
        try:
            body.feed(chunk)
        except ValueError as exc:
            raise httpx.DecodingError(str(exc), request=response.request) from None
        if body.done:
            break
    return body.whole()


def _error_classes(litellm: Any, names: tuple[str, ...]) -> tuple[type, ...]:
    return tuple(cls for cls in (getattr(litellm, name, None) for name in names) if isinstance(cls, type))
