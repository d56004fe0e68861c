"""The native client: models of OpenAI-compatible providers are called with one POST to `/chat/completions`
over statewright's own keep-alive HTTP (http_pool.py), with no SDK and without importing litellm; every
other model goes through litellm. Retries, fallbacks, deadlines and events are every client's
(model_calls.py): only how an attempt travels, and how its failures read, is here.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from .call_failures import call_retryable, retry_after_seconds
from .client import ModelRequest, ToolCallRequest, rough_tokens
from .http_pool import HTTPFailure, HTTPOrigin, HTTPReply, http_pool
from .model_calls import Completion, ModelCaller, ModelCallPlan, ModelTransport
from .model_prices import model_price
from .untrusted import read_json


@dataclass(frozen=True)
class OpenAIProvider:
    """A provider whose servers speak OpenAI's chat completions: where they are and how a key is sent."""

    name: str  # the model prefix, as litellm names the provider ("groq" for "groq/llama-3.1-8b-instant")
    base_variables: tuple[str, ...]  # environment variables naming the endpoint; the first one set wins
    default_base: str | None  # None: an endpoint must be given
    key_variables: tuple[str, ...]  # environment variables holding the key; the first one set wins
    key_header: str = "Authorization"  # "Authorization" sends "Bearer KEY"; another header sends KEY


# Every provider whose models take the native path (`auto`, the default). The variables are those litellm
# reads, so an environment set up for litellm works unchanged.
OPENAI_PROVIDERS = {provider.name: provider for provider in (
    OpenAIProvider("openai", ("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com/v1",
                   ("OPENAI_API_KEY",)),
    OpenAIProvider("azure", ("AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"), None,
                   ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY"), key_header="api-key"),
    OpenAIProvider("openrouter", ("OPENROUTER_API_BASE",), "https://openrouter.ai/api/v1",
                   ("OPENROUTER_API_KEY",)),
    OpenAIProvider("together_ai", ("TOGETHER_AI_API_BASE",), "https://api.together.xyz/v1",
                   ("TOGETHERAI_API_KEY", "TOGETHER_AI_API_KEY", "TOGETHER_API_KEY")),
    OpenAIProvider("groq", ("GROQ_API_BASE",), "https://api.groq.com/openai/v1", ("GROQ_API_KEY",)),
    OpenAIProvider("deepseek", ("DEEPSEEK_API_BASE",), "https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",)),
    OpenAIProvider("hosted_vllm", ("HOSTED_VLLM_API_BASE",), None, ("HOSTED_VLLM_API_KEY",)),
    OpenAIProvider("llamafile", ("LLAMAFILE_API_BASE",), "http://127.0.0.1:8080/v1", ("LLAMAFILE_API_KEY",)),
)}
AZURE_API_VERSION = "2024-10-21"  # the latest generally available version, unless AZURE_API_VERSION says
# OpenAI's reasoning models take `max_completion_tokens` and no temperature but 1 (litellm drops it too)
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# what an error status is called, in the OpenAI SDK's (and litellm's) words
_STATUS_NAMES = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
                 404: "NotFoundError", 408: "Timeout", 409: "ConflictError",
                 422: "UnprocessableEntityError", 429: "RateLimitError", 500: "InternalServerError",
                 502: "BadGatewayError", 503: "ServiceUnavailableError", 504: "GatewayTimeoutError"}
_ERROR_TEXT = 600
# what an `openai/` call also sends when the environment names them, as the OpenAI SDK does
_ACCOUNT_HEADERS = (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project"))
_TOKENS_MAX = 10**12  # usage a server reports beyond this is not believed


def openai_provider(model: str) -> OpenAIProvider | None:
    """The OpenAI-compatible provider of `model` ("provider/name"), or None: litellm's to call."""
    prefix, slash, _ = model.partition("/")
    return OPENAI_PROVIDERS.get(prefix) if slash else None


@dataclass
class OpenAIHTTPClient(ModelCaller):
    """The default client: every model of an OpenAI-compatible provider (OPENAI_PROVIDERS: `openai/...`
    with or without OPENAI_API_BASE, and any server an `api_base` names) over statewright's own HTTP
    client; any other model through litellm, imported only when such a model is called.

    `api_base`/`api_key` override the endpoint and key the provider's variables give, for every model
    (litellm is given them too). The other options are ModelCaller's."""

    _http: OpenAIHTTPTransport | None = field(default=None, init=False, repr=False, compare=False)
    _litellm: ModelTransport | None = field(default=None, init=False, repr=False, compare=False)

    def transport(self, model: str) -> ModelTransport:
        if openai_provider(model) is not None:
            if self._http is None:
                self._http = OpenAIHTTPTransport(self)
            return self._http
        if self._litellm is None:
            from .litellm_client import LiteLLMTransport

            self._litellm = LiteLLMTransport(self)
        return self._litellm


class OpenAICallError(Exception):
    """A failed attempt on the native path: an error status, a reply that cannot be read, a missing key."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, retryable: bool = False,
                 headers: dict[str, str] | None = None, no_key: bool = False) -> None:
        super().__init__(f"{kind} ({status}): {message}" if status is not None else f"{kind}: {message}")
        self.kind = kind
        self.status_code = status
        self.retryable = retryable
        self.headers = headers or {}
        self.no_key = no_key


class _Endpoint:
    """Where one model's calls go, made once per client: the origin, and the request's head up to its
    Content-Length (the key is read into it once: a changed environment is seen by a new client)."""

    __slots__ = ("head", "key_variable", "model_name", "origin", "provider", "reasoning")

    def __init__(self, client: ModelCaller, model: str, provider: OpenAIProvider) -> None:
        self.provider = provider
        self.model_name = model.split("/", 1)[1]
        self.reasoning = provider.name in ("openai", "azure") and self.model_name.startswith(
            _REASONING_PREFIXES)
        base = client.api_base or _first_set(provider.base_variables) or provider.default_base
        if not base:
            raise OpenAICallError("BadRequestError", f"no endpoint for model {model!r}: set "
                                  f"{' or '.join(provider.base_variables)} (or give the client an api_base)")
        key = client.api_key or _first_set(provider.key_variables)
        self.key_variable = provider.key_variables[0]
        if not key and base == provider.default_base:
            raise OpenAICallError("AuthenticationError", "no API key", no_key=True)
        url = _url(provider, base, self.model_name)
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OpenAICallError("BadRequestError", f"the endpoint {base!r} of model {model!r} is not an "
                                  "http:// or https:// URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise OpenAICallError("BadRequestError", f"the endpoint {base!r} has an invalid port") from None
        self.origin = HTTPOrigin(parts.scheme, parts.hostname, port)
        path = urllib.parse.quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        if parts.query:
            path += "?" + urllib.parse.quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
        lines = [f"POST {self.origin.target(path)} HTTP/1.1", f"Host: {self.origin.authority}",
                 "User-Agent: statewright", "Accept: application/json", "Accept-Encoding: gzip, deflate",
                 "Content-Type: application/json"]
        if key:
            lines.append(f"{provider.key_header}: Bearer {key}" if provider.key_header == "Authorization"
                         else f"{provider.key_header}: {key}")
        if provider.name == "openai":
            for variable, header in _ACCOUNT_HEADERS:
                if os.environ.get(variable):
                    lines.append(f"{header}: {os.environ[variable]}")
        if any(c in line for line in lines for c in "\0\r\n"):
            raise OpenAICallError("BadRequestError", f"the key or endpoint of model {model!r} holds a line "
                                  "break or a character a request header cannot carry")
        try:
            self.head = ("\r\n".join(lines) + "\r\n" + self.origin.proxy_header()).encode("latin-1")
        except UnicodeEncodeError:
            raise OpenAICallError("BadRequestError", f"the key or endpoint of model {model!r} holds a "
                                  "character a request header cannot carry") from None


def _first_set(variables: tuple[str, ...]) -> str | None:
    for variable in variables:
        value = os.environ.get(variable)
        if value:
            return value
    return None


def _url(provider: OpenAIProvider, base: str, model_name: str) -> str:
    base = base.rstrip("/")
    if provider.name == "azure":
        version = os.environ.get("AZURE_API_VERSION") or AZURE_API_VERSION
        deployment = urllib.parse.quote(model_name, safe="")
        return (f"{base}/openai/deployments/{deployment}/chat/completions?"
                f"api-version={urllib.parse.quote(version, safe='')}")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


class OpenAIHTTPTransport:
    """An attempt as one POST to the model's `/chat/completions`; the failures of the native path read."""

    def __init__(self, client: ModelCaller) -> None:
        self.client = client
        self.endpoints: dict[str, _Endpoint] = {}

    def endpoint(self, model: str) -> _Endpoint:
        found = self.endpoints.get(model)
        if found is None:
            provider = openai_provider(model)
            assert provider is not None, model
            found = self.endpoints[model] = _Endpoint(self.client, model, provider)
        return found

    async def send(self, plan: ModelCallPlan, model: str) -> Completion:
        body = plan.body(model)
        endpoint = self.endpoint(model)
        body["model"] = endpoint.model_name
        if endpoint.reasoning:
            if "max_tokens" in body:
                body["max_completion_tokens"] = body.pop("max_tokens")
            if body.get("temperature") not in (None, 1):
                del body["temperature"]
        extra = plan.request.extra_body
        if extra:
            body.update({key: value for key, value in extra.items() if key not in ("model", "messages")})
        data = json.dumps(body).encode("ascii")
        request = endpoint.head + b"Content-Length: %d\r\n\r\n" % len(data) + data
        pool = await http_pool()
        try:
            reply = await pool.exchange(endpoint.origin, request, self.client.max_reply_bytes)
        except HTTPFailure as exc:
            raise OpenAICallError("APIConnectionError", f"{endpoint.origin.authority}: {exc}",
                                  retryable=True) from None
        return openai_completion(model, reply)

    def supports_response_schema(self, model: str) -> bool:
        price = model_price(model)
        return price is not None and price.response_schema

    def supports_function_calling(self, model: str) -> bool:
        price = model_price(model)
        return price is not None and price.function_calling

    def is_auth_error(self, error: BaseException) -> bool:
        if isinstance(error, OpenAICallError):
            return error.no_key or error.status_code in (401, 403)
        return False

    def key_advice(self, model: str) -> str:
        provider = openai_provider(model)
        variables = provider.key_variables if provider is not None else ("OPENAI_API_KEY",)
        if not (self.client.api_key or _first_set(variables)):
            return f"set {variables[0]} for model {model!r} (statewright reads the key from it)"
        return (f"the key for model {model!r} was refused; statewright reads it from {variables[0]} (or the "
                "api_key the client was given) — check that it is right and allowed to use this model")

    def is_retryable(self, error: Exception) -> bool:
        if isinstance(error, OpenAICallError):
            return error.retryable
        return call_retryable(error)

    def retry_after(self, error: Exception) -> float | None:
        headers = getattr(error, "headers", None)
        if not isinstance(headers, dict):
            return None
        milliseconds = retry_after_seconds(headers.get("retry-after-ms"))
        if milliseconds is not None:
            return milliseconds / 1000.0
        return retry_after_seconds(headers.get("retry-after"))

    def describe(self, error: Exception) -> str:
        text = str(error).strip().split("\n", 1)[0]
        if isinstance(error, OpenAICallError):
            return text
        return f"{type(error).__name__}: {text}" if text else type(error).__name__

    def prompt_tokens(self, request: ModelRequest) -> int:
        """A tokenizer-free count (a token per four characters): the native path loads no tokenizer."""
        return rough_tokens(request)

    def price(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        found = model_price(model)
        return found.cost(prompt_tokens, completion_tokens) if found is not None else 0.0


# ---- reading replies: every byte a server sends on this path is decoded in `openai_reply_json` -----------


def openai_reply_json(data: bytes) -> Any:
    """A reply body as JSON: the one place the native path decodes what a server sent, through the guard
    for untrusted JSON (untrusted.py: nested too deeply or too large is a BorderError, before json reads
    it). ValueError when it is not JSON."""
    return read_json(data, "the reply")


def openai_completion(model: str, reply: HTTPReply) -> Completion:
    """A reply read: a 2xx chat completion as a Completion, anything else as an OpenAICallError."""
    if not 200 <= reply.status < 300:
        raise _status_error(reply)
    try:
        payload = openai_reply_json(reply.body)
    except (ValueError, RecursionError) as exc:
        raise OpenAICallError("APIError", f"the reply is not valid JSON ({_snippet(exc)})",
                              retryable=True) from None
    if not isinstance(payload, dict):
        raise OpenAICallError("APIError", "the reply is not a JSON object", retryable=True)
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    price = model_price(model)
    choices = payload.get("choices")
    read = Completion(choices=len(choices) if isinstance(choices, list) else 0, prompt_tokens=prompt,
                      completion_tokens=completion,
                      cost_usd=price.cost(prompt, completion, cached) if price is not None else 0.0)
    if read.choices:
        assert isinstance(choices, list)
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise OpenAICallError("APIError", "the reply's first choice has no message", retryable=True)
        read.content = _text(message.get("content"))
        read.tool_calls = _tool_calls(message.get("tool_calls"))
        reason = choices[0].get("finish_reason")
        read.finish_reason = reason if isinstance(reason, str) and reason else None
    return read


def _text(content: Any) -> str:
    """A message's content: its text, or the text of its text parts (some servers send a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _tool_calls(calls: Any) -> list[ToolCallRequest]:
    found: list[ToolCallRequest] = []
    for index, call in enumerate(calls if isinstance(calls, list) else ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # a server that sends the object itself, not its JSON text
            arguments = json.dumps(arguments) if arguments is not None else "{}"
        name, call_id = function.get("name"), call.get("id")
        found.append(ToolCallRequest(id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                                     name=name if isinstance(name, str) else "", arguments=arguments or "{}"))
    return found


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _TOKENS_MAX:
        return value
    return 0


def _status_error(reply: HTTPReply) -> OpenAICallError:
    status = reply.status
    kind = _STATUS_NAMES.get(status, "InternalServerError" if status >= 500 else "APIStatusError")
    message = ""
    try:
        payload = openai_reply_json(reply.body)
    except (ValueError, RecursionError):
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            error = error.get("message", "")
        message = error if isinstance(error, str) else ""
    if not message:
        message = reply.body[:_ERROR_TEXT].decode("utf-8", "replace").strip() or "(no message)"
    retryable = status in (408, 409, 429) or status >= 500
    return OpenAICallError(kind, message[:_ERROR_TEXT], status=status, retryable=retryable,
                           headers=reply.headers)


def _snippet(error: BaseException) -> str:
    return str(error)[:120]
