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
    per state and per agent. A designer's trace (`design`, `optimize --llm`) shows its attempts and the
    feedback each got, with totals per designer stage. An event this version does not know is shown as a
    generic line. Raises OSError when the file cannot be read."""
    timeline = _TraceTimeline()
    for event in read_trace(path):
        timeline.add(event)
    return timeline.text()


# fields every event has: not repeated in a generic line
_TRACE_LINE_IDENTITY = ("event", "seq", "time")


class _TraceTimeline:
    """The lines of a rendered trace and the totals gathered while reading it, one event at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.per_state: dict[str, _TraceTotals] = {}
        self.per_agent: dict[str, _TraceTotals] = {}
        self.per_stage: dict[str, _TraceTotals] = {}  # designer calls, by stage (agents, machine, repair, merge)

    def add(self, event: dict[str, Any]) -> None:
        render = getattr(self, f"_on_{event['event']}", None) if isinstance(event["event"], str) else None
        if render is None:
            self._generic(event)
            return
        mark = len(self.lines)
        try:
            render(event)
        except (AttributeError, KeyError, TypeError, ValueError):  # a field of an unexpected shape
            del self.lines[mark:]
            self._generic(event)

    def text(self) -> str:
        lines = list(self.lines)
        for title, rows, with_visits in (("state", self.per_state, True), ("agent", self.per_agent, False),
                                         ("designer stage", self.per_stage, False)):
            if rows:
                lines += ["", _trace_table(title, rows, with_visits=with_visits)]
        return "\n".join(lines) + "\n"

    def _generic(self, event: dict[str, Any]) -> None:
        fields = ", ".join(f"{k}={_trace_brief(v)}" for k, v in event.items() if k not in _TRACE_LINE_IDENTITY)
        self.lines.append(f"      {event['event']}{': ' + fields if fields else ''}")

    # -- a run ---------------------------------------------------------------------------------------

    def _on_run_start(self, event: dict[str, Any]) -> None:
        resumed = " (resumed)" if event.get("resumed") else ""
        self.lines.append(f"run {event.get('run_id')} of machine {event.get('machine')}{resumed}"
                          f"  {event.get('time', '')}")
        inputs = event.get("inputs")
        if inputs:
            shown = ", ".join(f"{k}={_trace_brief(v)}" for k, v in inputs.items())
            self.lines.append(f"  inputs: {shown}")

    def _on_state_enter(self, event: dict[str, Any]) -> None:
        state = str(event.get("state"))
        self.per_state.setdefault(state, _TraceTotals()).visits += 1
        self.lines.append(f"  {state} (visit {event.get('visit')})")

    def _on_state_exit(self, event: dict[str, Any]) -> None:
        pass  # the next transition says where the run went

    def _on_llm_call(self, event: dict[str, Any]) -> None:
        role = event.get("role")
        state = str(event.get("state"))
        if role == "designer":
            caller, who, per_place = f"designer {state}", "designer", self.per_stage
        elif role == "verifier":
            caller, who, per_place = "verifier", "verifier", self.per_state
        else:
            who = str(event.get("agent") or "agent")
            caller, per_place = f"agent    {who}", self.per_state
        if event.get("error"):  # a designer call that failed is an llm_call with its error
            self.lines.append(f"      {caller} via {event.get('model')}: failed: {event['error']}")
            return
        retried = f"  {event.get('attempts')} attempts" if int(event.get("attempts") or 1) > 1 else ""
        line = (f"      {caller} via {event.get('model')}: "
                f"{int(event.get('prompt_tokens') or 0)}+{int(event.get('completion_tokens') or 0)} tokens, "
                f"{_trace_money(float(event.get('cost_usd') or 0.0))}, "
                f"{float(event.get('latency_ms') or 0.0):.0f} ms{retried}")
        per_place.setdefault(state, _TraceTotals()).add_call(event)
        self.per_agent.setdefault(who, _TraceTotals()).add_call(event)
        self.lines.append(line)

    def _on_llm_error(self, event: dict[str, Any]) -> None:
        self.lines.append(f"      {event.get('role', 'agent')} call failed after {event.get('attempts')} "
                          f"attempt(s): {event.get('error', '')}")

    def _on_tool_call(self, event: dict[str, Any]) -> None:
        status = "ok" if event.get("ok") else f"failed: {event.get('error', '')}"
        scripted = " (scripted)" if event.get("scripted") else ""
        self.lines.append(f"      tool     {event.get('tool')}{scripted}: {status}, "
                          f"{float(event.get('latency_ms') or 0.0):.0f} ms")

    def _on_guard(self, event: dict[str, Any]) -> None:
        if event.get("branch") is not None:  # a join guard, on one branch's output
            self.lines.append(f"      join     `{event.get('text')}` on branch {event.get('branch')} -> "
                              f"{'true' if event.get('value') else 'false'}")
            return
        self.lines.append(f"      guard    #{event.get('index')} `{event.get('text')}` -> "
                          f"{'true' if event.get('value') else 'false'}")

    # -- parallel branches and maps ------------------------------------------------------------------

    def _on_fan_out(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "map":
            self.lines.append(f"      map      {event.get('items')} elements, {event.get('concurrency')} at a time "
                              f"(max {event.get('max')})")
        else:
            self.lines.append(f"      branches {', '.join(map(str, event.get('branches') or []))} at once "
                              f"(join {event.get('join')})")

    def _on_branch_start(self, event: dict[str, Any]) -> None:
        self.lines.append(f"    branch {event.get('branch')}:")

    def _on_branch_end(self, event: dict[str, Any]) -> None:
        if event.get("status") != "done":
            self.lines.append(f"    branch {event.get('branch')} {event.get('status')} in {event.get('last')}")

    def _on_item_start(self, event: dict[str, Any]) -> None:
        self.lines.append(f"    element {event.get('item')}:")

    def _on_item_end(self, event: dict[str, Any]) -> None:
        pass  # the element's calls are above; the join says when all are done

    def _on_join(self, event: dict[str, Any]) -> None:
        if "items" in event:
            self.lines.append(f"    joined {event.get('items')} elements of {event.get('state')}")
            return
        cancelled = event.get("cancelled") or []
        self.lines.append(f"    joined {', '.join(map(str, event.get('joined') or [])) or 'no branch'} "
                          f"(finished: {', '.join(map(str, event.get('finished') or []))}"
                          f"{'; cancelled: ' + ', '.join(map(str, cancelled)) if cancelled else ''})")

    def _on_verdict(self, event: dict[str, Any]) -> None:
        self.lines.append(f"      verdict  {_trace_brief(event.get('choice'))}: {event.get('reason', '')}")

    def _on_bound_skip(self, event: dict[str, Any]) -> None:
        self.lines.append(f"      skipped  #{event.get('index')} -> {event.get('to')}: {event.get('bound')} "
                          "exhausted")

    def _on_repair(self, event: dict[str, Any]) -> None:
        self.lines.append(f"      repaired {event.get('role')} reply: {', '.join(event.get('repairs', []))}")

    def _on_reask(self, event: dict[str, Any]) -> None:
        error = str(event.get("error") or "").strip().splitlines()
        self.lines.append(f"      re-asked {event.get('role')}: reply {event.get('attempt')} was not usable"
                          f"{': ' + ' '.join(line.strip() for line in error) if error else ''}")

    def _on_transition(self, event: dict[str, Any]) -> None:
        reason = event.get("reason") or ""
        target = event.get("to") or "(none)"
        self.lines.append(f"  -> {target}  ({event.get('cause')}{': ' + reason if reason else ''})")

    def _on_run_end(self, event: dict[str, Any]) -> None:
        usage = event.get("usage") or {}
        tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        outcome = (f"final state {event.get('final_state')}" if event.get("status") == "final"
                   else _trace_failure_text(event.get("failure")))
        self.lines.append(f"end: {outcome}; {event.get('steps', 0)} steps, {tokens} tokens, "
                          f"{_trace_money(float(usage.get('cost_usd') or 0.0))}, "
                          f"{usage.get('llm_calls', 0)} model calls")

    # -- a designer session ------------------------------------------------------------------------------

    def _on_designer_start(self, event: dict[str, Any]) -> None:
        self.lines.append(f"design of {event.get('output')} with model {event.get('model')} "
                          f"(up to {event.get('max_repairs')} repairs)  {event.get('time', '')}")
        self.lines.append(f"  task: {_trace_brief(event.get('task'), 100)}")

    def _on_designer_attempt(self, event: dict[str, Any]) -> None:
        if event.get("ok"):
            self.lines.append(f"  attempt {event.get('attempt')}: ok, the machine checks and its tests pass")
            return
        problems = []
        errors = int(event.get("error_count") or 0)
        if errors:
            codes = ", ".join(str(code) for code in _trace_list(event.get("codes")))
            problems.append(f"{_trace_count(errors, 'error')}{f' ({codes})' if codes else ''}")
        failing = event.get("test_failures")
        failing_count = len(failing) if isinstance(failing, list) else int(failing or 0)
        if failing_count:
            problems.append(_trace_count(failing_count, "failing test"))
        self.lines.append(f"  attempt {event.get('attempt')}: {', '.join(problems) or 'not accepted'}")

    def _on_designer_feedback(self, event: dict[str, Any]) -> None:
        diagnostics = [d for d in _trace_list(event.get("diagnostics")) if isinstance(d, dict)]
        failing = [str(report) for report in _trace_list(event.get("test_failures"))]
        severities: dict[str, int] = {}
        for diagnostic in diagnostics:
            severity = str(diagnostic.get("severity") or "diagnostic")
            severities[severity] = severities.get(severity, 0) + 1
        parts = [_trace_count(count, severity) for severity, count in
                 sorted(severities.items(), key=lambda item: (item[0] != "error", item[0]))]
        if failing:
            parts.append(_trace_count(len(failing), "failing test"))
        self.lines.append(f"      feedback on attempt {event.get('attempt')}: {', '.join(parts) or 'sent'}")
        for diagnostic in diagnostics:
            self.lines.append(f"        {_trace_diagnostic_text(diagnostic)}")
        for report in failing:
            first = report.strip().splitlines()[0] if report.strip() else "(no report)"
            name = first[len("FAIL"):].strip() if first.startswith("FAIL") else first
            self.lines.append(f"        test failed: {name}")

    def _on_designer_end(self, event: dict[str, Any]) -> None:
        attempts = _trace_count(int(event.get("attempts") or 0), "attempt")
        if event.get("ok"):
            self.lines.append(f"end: designed {event.get('output')} after {attempts}")
        else:
            error = f": {event['error']}" if event.get("error") else ""
            self.lines.append(f"end: design failed after {attempts}{error}")


def _trace_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    return value


def _trace_count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _trace_diagnostic_text(diagnostic: dict[str, Any]) -> str:
    """`error[SW2002] m.fsm:44:42 unknown state 'sned'`, from a diagnostic's JSON form."""
    start = (diagnostic.get("range") or {}).get("start") or {}
    where = ":".join(str(p) for p in (diagnostic.get("file"), start.get("line"), start.get("column"))
                     if p is not None)
    return (f"{diagnostic.get('severity', 'error')}[{diagnostic.get('code', '?')}]"
            f"{' ' + where if where else ''} {diagnostic.get('message', '')}").rstrip()


def _trace_failure_text(failure: Any) -> str:
    if not isinstance(failure, dict):
        return "failed"
    kind = failure.get("kind")
    label = f"limit {failure.get('limit')}" if kind == "limit" else str(kind)
    where = f" in state {failure.get('state')}" if failure.get("state") else ""
    if failure.get("origin"):
        where += f" at {failure['origin']}"
    return f"failed ({label}){where}: {failure.get('message', '')}"


def _trace_brief(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


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
