"""The run trace: one JSON object per line for every event of a run, with secrets redacted, and its reading."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from typing import Any

from .structured import to_jsonable

REDACTED = "[REDACTED]"
_TRACE_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{12,}"  # OpenAI / Anthropic style keys
    r"|\bBearer\s+[A-Za-z0-9._~+/=\-]{8,}"
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
)
_TRACE_SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def _trace_secret_values() -> list[str]:
    """Values of environment variables whose names say they hold a secret, longest first."""
    values = set()
    for name, value in os.environ.items():
        if len(value) >= 8 and any(part in name.upper() for part in _TRACE_SECRET_NAMES):
            values.add(value)
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            values.add(escaped)
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str] | None = None) -> str:
    for value in _trace_secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    return _TRACE_KEY_SHAPES.sub(REDACTED, text)


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
        self._secrets = _trace_secret_values()

    def emit(self, event: str, **fields: Any) -> None:
        self._seq += 1
        record = {"event": event, "seq": self._seq,
                  "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds")}
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


def _trace_money(value: float) -> str:
    return f"${value:.4f}"


class _TraceTotals:
    __slots__ = ("calls", "completion_tokens", "cost_usd", "latency_ms", "prompt_tokens", "visits")

    def __init__(self) -> None:
        self.visits = self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = self.latency_ms = 0.0

    def add_call(self, event: dict[str, Any]) -> None:
        self.calls += 1
        self.prompt_tokens += int(event.get("prompt_tokens") or 0)
        self.completion_tokens += int(event.get("completion_tokens") or 0)
        self.cost_usd += float(event.get("cost_usd") or 0.0)
        self.latency_ms += float(event.get("latency_ms") or 0.0)


def render_trace(path: str) -> str:
    """A readable timeline of a trace: states, calls, guards, transitions with their causes, then totals
    per state and per agent. Raises OSError when the file cannot be read."""
    events = read_trace(path)
    lines: list[str] = []
    per_state: dict[str, _TraceTotals] = {}
    per_agent: dict[str, _TraceTotals] = {}
    for event in events:
        kind = event["event"]
        if kind == "run_start":
            resumed = " (resumed)" if event.get("resumed") else ""
            lines.append(f"run {event.get('run_id')} of machine {event.get('machine')}{resumed}"
                         f"  {event.get('time', '')}")
            inputs = event.get("inputs")
            if inputs:
                shown = ", ".join(f"{k}={_trace_brief(v)}" for k, v in inputs.items())
                lines.append(f"  inputs: {shown}")
        elif kind == "state_enter":
            state = str(event.get("state"))
            per_state.setdefault(state, _TraceTotals()).visits += 1
            lines.append(f"  {state} (visit {event.get('visit')})")
        elif kind == "llm_call":
            state = str(event.get("state"))
            who = "verifier" if event.get("role") == "verifier" else str(event.get("agent") or "agent")
            per_state.setdefault(state, _TraceTotals()).add_call(event)
            per_agent.setdefault(who, _TraceTotals()).add_call(event)
            retried = f"  {event.get('attempts')} attempts" if (event.get("attempts") or 1) > 1 else ""
            caller = "verifier" if who == "verifier" else f"agent    {who}"
            lines.append(
                f"      {caller} via {event.get('model')}: "
                f"{event.get('prompt_tokens', 0)}+{event.get('completion_tokens', 0)} tokens, "
                f"{_trace_money(float(event.get('cost_usd') or 0.0))}, "
                f"{float(event.get('latency_ms') or 0.0):.0f} ms{retried}"
            )
        elif kind == "llm_error":
            lines.append(f"      {event.get('role', 'agent')} call failed after {event.get('attempts')} "
                         f"attempt(s): {event.get('error', '')}")
        elif kind == "tool_call":
            status = "ok" if event.get("ok") else f"failed: {event.get('error', '')}"
            scripted = " (scripted)" if event.get("scripted") else ""
            lines.append(f"      tool     {event.get('tool')}{scripted}: {status}, "
                         f"{float(event.get('latency_ms') or 0.0):.0f} ms")
        elif kind == "guard":
            lines.append(f"      guard    #{event.get('index')} `{event.get('text')}` -> "
                         f"{'true' if event.get('value') else 'false'}")
        elif kind == "verdict":
            lines.append(f"      verdict  {_trace_brief(event.get('choice'))}: {event.get('reason', '')}")
        elif kind == "bound_skip":
            lines.append(f"      skipped  #{event.get('index')} -> {event.get('to')}: {event.get('bound')} "
                         "exhausted")
        elif kind == "repair":
            lines.append(f"      repaired {event.get('role')} reply: {', '.join(event.get('repairs', []))}")
        elif kind == "transition":
            reason = event.get("reason") or ""
            target = event.get("to") or "(none)"
            lines.append(f"  -> {target}  ({event.get('cause')}{': ' + reason if reason else ''})")
        elif kind == "run_end":
            usage = event.get("usage") or {}
            tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
            outcome = (f"final state {event.get('final_state')}" if event.get("status") == "final"
                       else _trace_failure_text(event.get("failure")))
            lines.append(f"end: {outcome}; {event.get('steps', 0)} steps, {tokens} tokens, "
                         f"{_trace_money(float(usage.get('cost_usd') or 0.0))}, "
                         f"{usage.get('llm_calls', 0)} model calls")
    if per_state:
        lines.append("")
        lines.append(_trace_table("state", per_state, with_visits=True))
    if per_agent:
        lines.append("")
        lines.append(_trace_table("agent", per_agent, with_visits=False))
    return "\n".join(lines) + "\n"


def _trace_failure_text(failure: Any) -> str:
    if not isinstance(failure, dict):
        return "failed"
    kind = failure.get("kind")
    label = f"limit {failure.get('limit')}" if kind == "limit" else str(kind)
    where = f" in state {failure.get('state')}" if failure.get("state") else ""
    return f"failed ({label}){where}: {failure.get('message', '')}"


def _trace_brief(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _trace_table(title: str, rows: dict[str, _TraceTotals], with_visits: bool) -> str:
    header = f"{title:<20} {'visits':>6} {'calls':>6} {'prompt':>9} {'compl.':>9} {'cost':>10} {'latency':>10}"
    if not with_visits:
        header = f"{title:<20} {'':>6} {'calls':>6} {'prompt':>9} {'compl.':>9} {'cost':>10} {'latency':>10}"
    out = [header]
    total = _TraceTotals()
    for name, row in rows.items():
        visits = str(row.visits) if with_visits else ""
        out.append(f"{name:<20} {visits:>6} {row.calls:>6} {row.prompt_tokens:>9} {row.completion_tokens:>9} "
                   f"{_trace_money(row.cost_usd):>10} {row.latency_ms / 1000:>9.2f}s")
        total.visits += row.visits
        total.calls += row.calls
        total.prompt_tokens += row.prompt_tokens
        total.completion_tokens += row.completion_tokens
        total.cost_usd += row.cost_usd
        total.latency_ms += row.latency_ms
    visits = str(total.visits) if with_visits else ""
    out.append(f"{'total':<20} {visits:>6} {total.calls:>6} {total.prompt_tokens:>9} "
               f"{total.completion_tokens:>9} {_trace_money(total.cost_usd):>10} {total.latency_ms / 1000:>9.2f}s")
    return "\n".join(out)
