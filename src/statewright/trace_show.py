"""`statewright trace show`: a trace file as a readable timeline, with totals per state, agent and stage.

The rendering lives here, beside the command, and not in the runtime: a runner writes traces and carries
nothing to show them (`read_trace` and `trace_lines`, which only read them, stay with the writer in
runtime/trace.py).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from .runtime.trace import printable, trace_lines


def _when(seconds: float) -> str:
    """A wall-clock time in seconds since the epoch, as UTC text."""
    try:
        return datetime.fromtimestamp(seconds, timezone(timedelta(0))).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return str(seconds)


def _money(value: float) -> str:
    return f"${value:.4f}"


class _Totals:
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
    timeline = _Timeline()
    for number, event, why in trace_lines(path):
        if event is None:
            timeline.lines.append(f"      line {number} is unreadable: {why}")
        else:
            timeline.add(event)
    return timeline.text()


# fields every event has: not repeated in a generic line
_LINE_IDENTITY = ("event", "seq", "time")


class _Timeline:
    """The lines of a rendered trace and the totals gathered while reading it, one event at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.per_state: dict[str, _Totals] = {}
        self.per_agent: dict[str, _Totals] = {}
        self.per_stage: dict[str, _Totals] = {}  # designer calls, by stage (agents, machine, repair, merge)
        self.waiting_in: str | None = None  # the state a paused run waits in

    def add(self, event: dict[str, Any]) -> None:
        mark = len(self.lines)
        call = event.get("call")
        if isinstance(call, str) and call:  # an event of a machine the run runs: shown nested by its path
            self._add_nested(event, call, mark)
            return
        self._render(event, mark)

    def _render(self, event: dict[str, Any], mark: int) -> None:
        render = getattr(self, f"_on_{event['event']}", None) if isinstance(event["event"], str) else None
        if render is None:
            self._generic(event)
            return
        try:
            render(event)
        except (AttributeError, KeyError, TypeError, ValueError):  # a field of an unexpected shape
            del self.lines[mark:]
            self._generic(event)

    def _add_nested(self, event: dict[str, Any], call: str, mark: int) -> None:
        """An event of a call, indented by its depth, its run's start and end named by the call's path; its
        states count toward the totals under that path (`investigate/draft`)."""
        kind = event.get("event")
        depth = call.count("/") + 1
        if kind == "run_start":
            self.lines.append(f"{'    ' * depth}call {call}: machine {event.get('machine')}"
                              f"{' (resumed)' if event.get('resumed') else ''}")
            return
        if kind == "run_end":
            status = event.get("status")
            outcome = (f"final state {event.get('final_state')}" if status == "final" else
                       "waiting for a person's answer" if status == "waiting" else _failure_text(event.get("failure")))
            self.lines.append(f"{'    ' * depth}end of call {call}: {outcome}; {event.get('steps', 0)} steps")
            return
        plain = {k: v for k, v in event.items() if k != "call"}
        if "state" in plain and kind in ("state_enter", "llm_call", "waiting"):
            plain["state"] = f"{call}/{plain['state']}"
        if kind == "waiting":
            self.waiting_in = str(plain["state"])
        self._render(plain, mark)
        self.lines[mark:] = [f"{'    ' * depth}{line}" for line in self.lines[mark:]]

    def text(self) -> str:
        lines = list(self.lines)
        for title, rows, with_visits in (("state", self.per_state, True), ("agent", self.per_agent, False),
                                         ("designer stage", self.per_stage, False)):
            if rows:
                lines += ["", *_table(title, rows, with_visits=with_visits)]
        # every line, the tables' too, holds text a model, a tool, an input or a spec's names produced:
        # escaped, it can neither move the cursor nor break into a line of its own
        return "\n".join(printable(line).replace("\n", "\\n") for line in lines) + "\n"

    def _generic(self, event: dict[str, Any]) -> None:
        fields = ", ".join(f"{k}={_brief(v)}" for k, v in event.items() if k not in _LINE_IDENTITY)
        self.lines.append(f"      {event['event']}{': ' + fields if fields else ''}")

    # -- a run ---------------------------------------------------------------------------------------

    def _on_run_start(self, event: dict[str, Any]) -> None:
        resumed = " (resumed)" if event.get("resumed") else ""
        self.lines.append(f"run {event.get('run_id')} of machine {event.get('machine')}{resumed}"
                          f"  {event.get('time', '')}")
        inputs = event.get("inputs")
        if inputs:
            shown = ", ".join(f"{k}={_brief(v)}" for k, v in inputs.items())
            self.lines.append(f"  inputs: {shown}")

    def _on_state_enter(self, event: dict[str, Any]) -> None:
        state = str(event.get("state"))
        self.per_state.setdefault(state, _Totals()).visits += 1
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
                f"{_money(float(event.get('cost_usd') or 0.0))}, "
                f"{float(event.get('latency_ms') or 0.0):.0f} ms{retried}")
        per_place.setdefault(state, _Totals()).add_call(event)
        self.per_agent.setdefault(who, _Totals()).add_call(event)
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
        self.lines.append(f"      verdict  {_brief(event.get('choice'))}: {event.get('reason', '')}")

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

    def _on_waiting(self, event: dict[str, Any]) -> None:
        self.waiting_in = str(event.get("state"))
        deadline = event.get("deadline")
        until = f" until {_when(float(deadline))}" if isinstance(deadline, (int, float)) else ""
        self.lines.append(f"      waiting  for a person's answer in {self.waiting_in}{until}")

    def _on_run_end(self, event: dict[str, Any]) -> None:
        usage = event.get("usage") or {}
        tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        status = event.get("status")
        if status == "final":
            outcome = f"final state {event.get('final_state')}"
        elif status == "waiting":
            where = f" in state {self.waiting_in}" if self.waiting_in else ""
            outcome = f"waiting for a person's answer{where} (resume the run with the answer)"
        else:
            outcome = _failure_text(event.get("failure"))
        self.lines.append(f"end: {outcome}; {event.get('steps', 0)} steps, {tokens} tokens, "
                          f"{_money(float(usage.get('cost_usd') or 0.0))}, "
                          f"{usage.get('llm_calls', 0)} model calls")

    # -- a designer session ------------------------------------------------------------------------------

    def _on_designer_start(self, event: dict[str, Any]) -> None:
        self.lines.append(f"design of {event.get('output')} with model {event.get('model')} "
                          f"(up to {event.get('max_repairs')} repairs)  {event.get('time', '')}")
        self.lines.append(f"  task: {_brief(event.get('task'), 100)}")

    def _on_designer_attempt(self, event: dict[str, Any]) -> None:
        if event.get("ok"):
            self.lines.append(f"  attempt {event.get('attempt')}: ok, the machine checks and its tests pass")
            return
        problems = []
        errors = int(event.get("error_count") or 0)
        if errors:
            codes = ", ".join(str(code) for code in _as_list(event.get("codes")))
            problems.append(f"{_count(errors, 'error')}{f' ({codes})' if codes else ''}")
        failing = event.get("test_failures")
        failing_count = len(failing) if isinstance(failing, list) else int(failing or 0)
        if failing_count:
            problems.append(_count(failing_count, "failing test"))
        self.lines.append(f"  attempt {event.get('attempt')}: {', '.join(problems) or 'not accepted'}")

    def _on_designer_feedback(self, event: dict[str, Any]) -> None:
        diagnostics = [d for d in _as_list(event.get("diagnostics")) if isinstance(d, dict)]
        failing = [str(report) for report in _as_list(event.get("test_failures"))]
        severities: dict[str, int] = {}
        for diagnostic in diagnostics:
            severity = str(diagnostic.get("severity") or "diagnostic")
            severities[severity] = severities.get(severity, 0) + 1
        parts = [_count(count, severity) for severity, count in
                 sorted(severities.items(), key=lambda item: (item[0] != "error", item[0]))]
        if failing:
            parts.append(_count(len(failing), "failing test"))
        self.lines.append(f"      feedback on attempt {event.get('attempt')}: {', '.join(parts) or 'sent'}")
        for diagnostic in diagnostics:
            self.lines.append(f"        {_diagnostic_text(diagnostic)}")
        for report in failing:
            first = report.strip().splitlines()[0] if report.strip() else "(no report)"
            name = first[len("FAIL"):].strip() if first.startswith("FAIL") else first
            self.lines.append(f"        test failed: {name}")

    def _on_designer_end(self, event: dict[str, Any]) -> None:
        attempts = _count(int(event.get("attempts") or 0), "attempt")
        if event.get("ok"):
            self.lines.append(f"end: designed {event.get('output')} after {attempts}")
        else:
            error = f": {event['error']}" if event.get("error") else ""
            self.lines.append(f"end: design failed after {attempts}{error}")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    return value


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _diagnostic_text(diagnostic: dict[str, Any]) -> str:
    """`error[SW2002] m.fsm:44:42 unknown state 'sned'`, from a diagnostic's JSON form."""
    start = (diagnostic.get("range") or {}).get("start") or {}
    where = ":".join(str(p) for p in (diagnostic.get("file"), start.get("line"), start.get("column"))
                     if p is not None)
    return (f"{diagnostic.get('severity', 'error')}[{diagnostic.get('code', '?')}]"
            f"{' ' + where if where else ''} {diagnostic.get('message', '')}").rstrip()


def _failure_text(failure: Any) -> str:
    if not isinstance(failure, dict):
        return "failed"
    kind = failure.get("kind")
    label = f"limit {failure.get('limit')}" if kind == "limit" else str(kind)
    where = f" in state {failure.get('state')}" if failure.get("state") else ""
    if failure.get("origin"):
        where += f" at {failure['origin']}"
    return f"failed ({label}){where}: {failure.get('message', '')}"


def _brief(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _table(title: str, rows: dict[str, _Totals], with_visits: bool) -> list[str]:
    header = f"{title:<20} {'visits':>6} {'calls':>6} {'prompt':>9} {'compl.':>9} {'cost':>10} {'latency':>10}"
    if not with_visits:
        header = f"{title:<20} {'':>6} {'calls':>6} {'prompt':>9} {'compl.':>9} {'cost':>10} {'latency':>10}"
    out = [header]
    total = _Totals()
    for name, row in rows.items():
        visits = str(row.visits) if with_visits else ""
        out.append(f"{name:<20} {visits:>6} {row.calls:>6} {row.prompt_tokens:>9} {row.completion_tokens:>9} "
                   f"{_money(row.cost_usd):>10} {row.latency_ms / 1000:>9.2f}s")
        total.visits += row.visits
        total.calls += row.calls
        total.prompt_tokens += row.prompt_tokens
        total.completion_tokens += row.completion_tokens
        total.cost_usd += row.cost_usd
        total.latency_ms += row.latency_ms
    visits = str(total.visits) if with_visits else ""
    out.append(f"{'total':<20} {visits:>6} {total.calls:>6} {total.prompt_tokens:>9} "
               f"{total.completion_tokens:>9} {_money(total.cost_usd):>10} {total.latency_ms / 1000:>9.2f}s")
    return out
