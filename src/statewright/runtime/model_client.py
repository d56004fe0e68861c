"""Which client a run's model calls take: `auto` (the default) calls the models of OpenAI-compatible providers
over statewright's own HTTP client and every other model through litellm; `litellm` sends every call through
litellm. Chosen with `--model-client` or STATEWRIGHT_MODEL_CLIENT (docs/models.md)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from .model_calls import ModelCaller, RetryPolicy

MODEL_CLIENT_ENV = "STATEWRIGHT_MODEL_CLIENT"
MODEL_CLIENTS = ("auto", "litellm")


def model_client_choice(choice: str | None = None) -> str:
    """`choice`, else STATEWRIGHT_MODEL_CLIENT, else "auto"; ValueError for anything but MODEL_CLIENTS."""
    given = choice if choice is not None else os.environ.get(MODEL_CLIENT_ENV, "").strip() or "auto"
    if given not in MODEL_CLIENTS:
        where = "the model client" if choice is not None else MODEL_CLIENT_ENV
        raise ValueError(f"{where} must be {' or '.join(MODEL_CLIENTS)}, not {given!r}")
    return given


def default_model_client(retry: RetryPolicy | None = None, choice: str | None = None) -> ModelCaller:
    """The client a run uses unless it is given one, with `retry` (default: RetryPolicy())."""
    policy = retry if retry is not None else RetryPolicy()
    if model_client_choice(choice) == "litellm":
        from .litellm_client import LiteLLMClient

        return LiteLLMClient(retry=policy)
    from .openai_http import OpenAIHTTPClient

    return OpenAIHTTPClient(retry=policy)


def calls_need_litellm(models: Iterable[str], choice: str | None = None) -> bool:
    """Whether calling `models` with the chosen client imports litellm."""
    if model_client_choice(choice) == "litellm":
        return True
    from .openai_http import openai_provider

    return any(openai_provider(model) is None for model in models)
