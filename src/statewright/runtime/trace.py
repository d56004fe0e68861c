"""The run trace: one JSON object per line for every event of a run, with secrets redacted, and its reading."""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from .structured import safe_json_dumps, to_jsonable
from .untrusted import JSON_SPACE, MAX_RECORD_CHARS, BorderError, read_lines, read_record

REDACTED = "[REDACTED]"
# UTC spelled without `timezone.utc`: ruff asks for `datetime.UTC` there when a repo targets Python 3.11+,
# which a runner (it supports 3.10) cannot use, and generated runners must lint clean in any repo.
_UTC = timezone(timedelta(0))
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)


def event_time(at_ns: int | None = None) -> str:
    """An event's `time` as a trace writes it, ISO 8601 in UTC to the microsecond: of `at_ns` (ns since the
    epoch, exactly: no float between) or of now. (Microseconds, not milliseconds: the state visits of a
    scripted run start well within one millisecond of each other, and a trace read back later, by
    `trace export` among others, orders them by these times.)"""
    moment = datetime.now(_UTC) if at_ns is None else _EPOCH + timedelta(microseconds=at_ns // 1000)
    return moment.isoformat(timespec="microseconds")
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{12,}"  # OpenAI / Anthropic style keys
    r"|\bBearer\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
)
# every key shape above starts with one of these: text holding none of them needs no regex
_KEY_PREFIXES = ("sk-", "Bearer", "AKIA", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox")
_KEY_PREFIX = re.compile("|".join(re.escape(prefix) for prefix in _KEY_PREFIXES))
_SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def printable(text: Any, limit: int | None = None) -> str:
    """`text` safe for a terminal: control characters (escape sequences included) written as escapes, and
    lone surrogates (which no terminal encoding can write) as \\udXXX."""
    out = []
    for ch in str(text):
        code = ord(ch)
        if ch == "\n" or ch == "\t":
            out.append(ch)
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or 0xD800 <= code <= 0xDFFF or code in (
                0x061C, 0x2028, 0x2029, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068,
                0x2069):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    result = "".join(out)
    if limit is not None and len(result) > limit:
        result = result[: limit - 1] + "…"
    return result


def _may_hold_a_key(text: str) -> bool:
    """Whether `text` holds a prefix of a key shape (_KEY_PREFIXES), the quick test before the pattern (every
    record a run writes passes here): one scan of the text, not one per prefix."""
    return _KEY_PREFIX.search(text) is not None


def secret_values() -> list[str]:
    """Every form (`secret_forms`) of the values of environment variables whose names say they hold a
    secret, longest first."""
    return secret_forms(value for name, value in os.environ.items()
                        if len(value) >= 8 and any(part in name.upper() for part in _SECRET_NAMES))


def secret_forms(values: Iterable[str]) -> list[str]:
    """Every form in which text may carry each secret value, longest first, for `redact`: the one place
    that knows them, so every sink that redacts hides them all.

    Each value as it is; as the project writes it into a request — in a header, whose value a server
    reads without the spaces and tabs around it; percent-encoded in a query string (`http_get` writes
    `quote(value, safe="")`; `quote` keeping `/` and `quote_plus`, which writes a space as `+`, are the
    other forms a URL takes); as an error text quotes it (Python's repr, in either of its quote styles);
    and as a terminal line shows it (`printable`'s escapes). Then each of those as JSON writes it inside a
    string: escaped with and without ASCII escapes, and as `safe_json_dumps` writes it.
    """
    forms: set[str] = set()
    for value in values:
        if not value:
            continue
        shown = {value, value.strip(" \t"), urllib.parse.quote(value, safe=""), urllib.parse.quote(value),
                 urllib.parse.quote_plus(value), urllib.parse.quote_plus(value, safe="/"),
                 repr(value + "\"'")[1:-4], printable(value)}
        if '"' not in value:
            shown.add(repr(value + "'")[1:-2])  # the style repr takes when the text holds a ' and no "
        for form in shown:
            forms.add(form)
            forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
            forms.add(json.dumps(form)[1:-1])
            forms.add(safe_json_dumps(form)[1:-1])
    forms.discard("")
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
    """`text` with every known secret value (in every form, see `secret_forms`) and every key-shaped token
    replaced by [REDACTED]."""
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    if _may_hold_a_key(text):
        text = _KEY_SHAPES.sub(REDACTED, text)
    return text


def redacted_json(value: Any, secrets: list[str] | None = None, *, ascii: bool = False, **options: Any) -> str:
    """`safe_json_dumps(value)` (`ascii=True`: every non-ASCII character escaped) with every secret redacted
    (the environment's when `secrets` is None) — in the strings, before they are written: redacting the
    written text could cut an escape in two and leave JSON that no longer reads. Key-shaped tokens hold no
    character JSON escapes, so they are redacted in the text; so is a secret that only an object's str()
    shows, last, should one still be there."""
    hidden = secret_values() if secrets is None else secrets

    def dump(data: Any) -> str:
        if ascii:
            return json.dumps(data, ensure_ascii=True, default=to_jsonable, **options)
        return safe_json_dumps(data, **options)

    text = dump(value)
    if any(form in text for form in hidden):
        text = dump(redact_data(value, hidden))
        if any(form in text for form in hidden):
            text = redact(text, hidden)
    if _may_hold_a_key(text):
        text = _KEY_SHAPES.sub(REDACTED, text)
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
        self._failed = False  # a write raised (a full disk): closing fails the same way, and says nothing new

    def emit(self, event: str, **fields: Any) -> None:
        self.record(event, fields)

    def record(self, event: str, fields: dict[str, Any], at: str | None = None) -> None:
        """Write one event (what a run's `emit` hook is bound to); `at`, an ISO time, when it happened
        elsewhere (a Temporal workflow's events carry the workflow's time)."""
        self._seq += 1
        record = {"event": event, "seq": self._seq,
                  "time": at or event_time()}
        record.update(fields)
        record["event"], record["seq"] = event, self._seq  # fields never overwrite the line's identity
        line = redacted_json(record, self._secrets)
        if self._file is not None:
            try:
                self._file.write(line + "\n")
            except OSError:
                self._failed = True
                raise
        if self._sink is not None:
            self._sink.append(json.loads(line))

    def close(self) -> None:
        """Close the file. When a write failed already, that error was raised where it happened (and the run
        reported it); the close, which tries to write the same line again, does not raise it a second time
        (from a `finally`, that had replaced the run's own error with an internal one)."""
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.close()
        except OSError:
            if not self._failed:
                raise


def sink_json(value: Any, **options: Any) -> str:
    """JSON for a sink a person or a program reads (a result on stdout, a batch's results): every string
    writable in any encoding, nothing a terminal would obey, and secrets redacted, as in traces."""
    return redacted_json(value, **options)


# ---- reading a trace -----------------------------------------------------------------------------


def read_trace(path: str) -> list[dict[str, Any]]:
    """The events of a trace file. A line that is not an event (a write cut short by a crash) is skipped;
    a file with text but no event at all is not a trace: ValueError."""
    events = [event for _, event, _ in trace_lines(path) if event is not None]
    return events


def trace_lines(path: str) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """Each line of a trace file that holds text: (its number, its event, "") — or (its number, None, why it
    is not an event: cut short, not JSON, nested too deeply or too large to read). ValueError at the end
    of a file with text but no event at all: it is not a trace."""
    events = 0
    others = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(read_lines(handle, MAX_RECORD_CHARS), 1):
            if line is None:
                others += 1
                yield number, None, f"too large: more than {MAX_RECORD_CHARS:,} characters"
                continue
            line = line.strip(JSON_SPACE)
            if not line:
                continue
            try:
                event = read_record(line, f"line {number}")
            except BorderError as exc:
                event, why = None, str(exc).removeprefix(f"line {number} is ")
            except ValueError as exc:
                event, why = None, f"not JSON ({exc})"
            else:
                why = "not a trace event"
            if isinstance(event, dict) and "event" in event:
                events += 1
                yield number, event, ""
            else:
                others += 1
                yield number, None, why
    if others and not events:
        raise ValueError("no line of it is a trace event")
