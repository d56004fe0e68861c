"""The run trace: one JSON object per line for every event of a run, with secrets redacted, and its reading."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from .structured import to_jsonable

REDACTED = "[REDACTED]"
# UTC spelled without `timezone.utc`: ruff asks for `datetime.UTC` there when a repo targets Python 3.11+,
# which a runner (it supports 3.10) cannot use, and generated runners must lint clean in any repo.
_TRACE_UTC = timezone(timedelta(0))
_TRACE_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{12,}"  # OpenAI / Anthropic style keys
    r"|\bBearer\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
)
# every key shape above starts with one of these: text holding none of them needs no regex
_TRACE_KEY_PREFIXES = ("sk-", "Bearer", "AKIA", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox")
_TRACE_SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def secret_values() -> list[str]:
    """Values of environment variables whose names say they hold a secret, longest first."""
    values = set()
    for name, value in os.environ.items():
        if len(value) >= 8 and any(part in name.upper() for part in _TRACE_SECRET_NAMES):
            values.add(value)
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            values.add(escaped)
    return sorted(values, key=len, reverse=True)


def secret_forms(values: Iterable[str]) -> list[str]:
    """Each value as text may hold it — as it is and JSON-escaped — longest first, for `redact`."""
    forms = set()
    for value in values:
        if value:
            forms.add(value)
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
            forms.add(json.dumps(value)[1:-1])
    return sorted(forms, key=len, reverse=True)


def redact_data(data: Any, secrets: list[str]) -> Any:
    """`data` with `redact` applied to every string in it (keys too), containers rebuilt; pydantic models
    become their JSON data. With no secrets, `data` itself."""
    if not secrets:
        return data
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {redact_data(k, secrets): redact_data(v, secrets) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_data(v, secrets) for v in data]
    if isinstance(data, tuple):
        return tuple(redact_data(v, secrets) for v in data)
    if hasattr(data, "model_dump") and not isinstance(data, type):
        return redact_data(to_jsonable(data), secrets)
    return data


def redact(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every known secret value and every key-shaped token replaced by [REDACTED]."""
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    if any(prefix in text for prefix in _TRACE_KEY_PREFIXES):
        text = _TRACE_KEY_SHAPES.sub(REDACTED, text)
    return text


class Trace:
    """Writes events as JSONL to `path` (appending, line-buffered so a crash keeps every line) and/or
    appends them, as dicts, to `sink`. With `content=False` messages, replies, tool arguments and results
    stay out of the trace; with `content=True` they are written (still redacted).
    """

    def __init__(self, path: str | None = None, *, content: bool = False, sink: list | None = None) -> None:
        self.path = path
        self.content = content
        self._sink = sink
        self._file = open(path, "a", encoding="utf-8", buffering=1) if path else None  # noqa: SIM115
        self._seq = 0
        self._secrets = secret_values()

    def emit(self, event: str, **fields: Any) -> None:
        self.record(event, fields)

    def record(self, event: str, fields: dict[str, Any], at: str | None = None) -> None:
        """Write one event (what a run's `emit` hook is bound to); `at`, an ISO time, when it happened
        elsewhere (a Temporal workflow's events carry the workflow's time)."""
        self._seq += 1
        record = {"event": event, "seq": self._seq,
                  "time": at or datetime.now(_TRACE_UTC).isoformat(timespec="milliseconds")}
        record.update(fields)
        record["event"], record["seq"] = event, self._seq  # fields never overwrite the line's identity
        line = redact(json.dumps(record, ensure_ascii=False, default=_trace_json_default), self._secrets)
        if self._file is not None:
            self._file.write(line + "\n")
        if self._sink is not None:
            self._sink.append(json.loads(line))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _trace_json_default(value: Any) -> Any:
    return to_jsonable(value)


# ---- reading a trace -----------------------------------------------------------------------------


def read_trace(path: str) -> list[dict[str, Any]]:
    """The events of a trace file. A line that is not an event (a write cut short by a crash) is skipped;
    a file with text but no event at all is not a trace: ValueError."""
    events = []
    other_lines = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if isinstance(event, dict) and "event" in event:
                events.append(event)
            else:
                other_lines += 1
    if other_lines and not events:
        raise ValueError("no line of it is a trace event")
    return events
