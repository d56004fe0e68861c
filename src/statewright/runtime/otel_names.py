"""OpenTelemetry's names and texts as statewright uses them: the GenAI conventions' names of providers and
models, what of an event is content, trace contexts as W3C traceparent text, and event times. Pure
functions, no OpenTelemetry import: otel.py (where spans and metrics go) and otel_sink.py (a run's spans)
both read them, and so do the engine, the Temporal worker and `trace export`.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

OTEL_SCOPE = "statewright"
# OTEL_SEMCONV_STABILITY_OPT_IN value for the latest GenAI conventions (v1.41.0) instead of v1.36.0's
OTEL_LATEST = "gen_ai_latest_experimental"
OTEL_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# the fields of each event that are content: what only `--trace-content` (or the capture setting) shows
OTEL_CONTENT_FIELDS = {"llm_call": ("messages", "reply"), "tool_call": ("args", "result"),
                       "state_exit": ("output",), "item_end": ("output",), "waiting": ("question",),
                       "answer": ("answer",)}
# litellm's provider prefixes, as the conventions name the providers: (v1.36.0 gen_ai.system, latest)
_PROVIDERS = {
    "openai": ("openai", "openai"), "anthropic": ("anthropic", "anthropic"),
    "azure": ("az.ai.openai", "azure.ai.openai"), "azure_ai": ("az.ai.inference", "azure.ai.inference"),
    "bedrock": ("aws.bedrock", "aws.bedrock"), "gemini": ("gemini", "gcp.gemini"),
    "vertex_ai": ("vertex_ai", "gcp.vertex_ai"), "mistral": ("mistral_ai", "mistral_ai"),
    "groq": ("groq", "groq"), "cohere": ("cohere", "cohere"), "deepseek": ("deepseek", "deepseek"),
    "xai": ("xai", "x_ai"), "perplexity": ("perplexity", "perplexity"), "watsonx": ("ibm.watsonx.ai", "ibm.watsonx.ai"),
}


def otel_capture_content() -> bool:
    """Whether the conventions' capture setting asks for prompts and replies in spans."""
    return os.environ.get(OTEL_CAPTURE_ENV, "").strip().lower() in ("true", "1", "yes")


def otel_latest_conventions() -> bool:
    """Whether OTEL_SEMCONV_STABILITY_OPT_IN asks for the latest experimental GenAI conventions."""
    values = os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return OTEL_LATEST in (v.strip() for v in values.split(","))


def otel_without_content(event: str, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` without the content fields of `event` (for a sink that records no content)."""
    names = OTEL_CONTENT_FIELDS.get(event)
    if not names or not any(name in fields for name in names):
        return fields
    return {k: v for k, v in fields.items() if k not in names}


@lru_cache(maxsize=256)  # (a run names the same few models on every call)
def otel_model_names(model: str, latest: bool) -> tuple[str, str]:
    """(provider, model) as the conventions name them, from a litellm model string (`openai/gpt-4o`)."""
    prefix, _, name = model.partition("/")
    known = _PROVIDERS.get(prefix)
    if known is not None and name:
        return known[1 if latest else 0], name
    return (prefix if name else "_OTHER"), model


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def otel_event_ns(text: Any) -> int | None:
    """An event's ISO `time` in nanoseconds since the epoch; None when it has none or it does not read."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:  # (a time without its zone is local time, as timestamp() reads it)
            moment = moment.astimezone()
        # in whole microseconds, exactly (a float of seconds since 1970 would read .954 as .953999872)
        return (moment - _EPOCH) // _MICROSECOND * 1000
    except (ValueError, OverflowError, OSError):
        return None


def otel_traceparent(context: Any) -> str:
    """A span context as W3C `traceparent` text (what a checkpoint and a workflow's input keep)."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def otel_parse_traceparent(text: str | None) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of `traceparent` text; None for None or text that is not one."""
    if not text:
        return None
    parts = text.split("-")
    if len(parts) != 4 or parts[0] != "00" or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    return (trace_id, span_id, flags) if trace_id and span_id else None


def otel_context(trace_api: Any, parent: str | None) -> Any:
    """An OpenTelemetry context whose current span is the remote span `parent` (traceparent text) names."""
    parsed = otel_parse_traceparent(parent)
    if parsed is None:
        return None
    trace_id, span_id, flags = parsed
    remote = trace_api.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace_api.TraceFlags(flags))
    return trace_api.set_span_in_context(trace_api.NonRecordingSpan(remote))
