"""What a run shows on a terminal while it happens: states entered, models called, transitions and causes.

A `Progress` is a listener (engine.py): it hears every event of a run and writes a line for those a person
follows — in colour on a terminal, plain when the stream is piped or NO_COLOR is set. Text that a model or
a tool produced is printed with its control characters escaped, so it cannot move the cursor, clear the
screen or retitle the window.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from .trace import printable, redact, secret_values

_STYLES = {"state": "1", "dim": "2", "ok": "32", "fail": "31", "cause": "36", "model": "35"}


def wants_color(stream: Any) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM is dumb; FORCE_COLOR
    turns it on anywhere."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"




class Progress:
    """Writes one line per step a person follows to `stream` (stderr by default). A key or token of the
    environment (trace.secret_values) is redacted from every line, as from the trace; the secrets a run's
    tools name never reach a listener."""

    def __init__(self, stream: IO[str] | None = None, *, color: bool | None = None, end: bool = True) -> None:

        self.stream = stream if stream is not None else sys.stderr
        self.color = wants_color(self.stream) if color is None else color
        self.end = end  # a line when the run ends (a caller printing its own summary turns it off)
        self._secrets = secret_values()

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        line = self.line(event, fields)
        if line is not None and self._secrets:

            line = redact(line, self._secrets)
        if line is not None:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # a closed or broken stream: progress is not worth a failed run
                pass

    def paint(self, style: str, text: str) -> str:
        return f"\x1b[{_STYLES[style]}m{text}\x1b[0m" if self.color else text

    @staticmethod
    def _caller(fields: dict[str, Any]) -> str:
        role = fields.get("role")
        if role == "verifier":
            return "verifier"
        if role == "designer":
            return f"designer ({printable(fields.get('state'))})"
        return f"agent {printable(fields.get('agent'))}"

    def line(self, event: str, fields: dict[str, Any]) -> str | None:
        """The line for one event, or None for events nobody needs to watch."""
        if event.startswith("designer_"):
            return self._designer_line(event, fields)
        if event.startswith("llm_") or event == "tool_call":
            return self._call_line(event, fields)
        if event in ("fan_out", "join"):
            return self._fanout_line(event, fields)
        return self._run_line(event, fields)

    def _run_line(self, event: str, fields: dict[str, Any]) -> str | None:
        """A run's start and end, the states it enters, its transitions, its variables' updates and the
        person it waits for."""
        p = self.paint
        if event == "run_start":
            resumed = " (resumed)" if fields.get("resumed") else ""
            return p("dim", f"run {printable(fields.get('run_id'))} of {printable(fields.get('machine'))}{resumed}")
        if event == "state_enter":
            visit = int(fields.get("visit") or 1)
            again = f" (visit {visit})" if visit > 1 else ""
            return f"{p('state', printable(fields.get('state')))}{again}"
        if event == "transition":
            cause = str(fields.get("cause"))
            reason = fields.get("reason") or ""
            target = fields.get("to")
            because = f"{cause}: {printable(reason, 160)}" if reason else cause
            if target is None:
                return p("fail", f"  stopped ({because})")
            return f"  -> {printable(target)} {p('cause', '(' + because + ')')}"
        if event == "waiting":
            if fields.get("kind") == "approval":
                return p("cause", f"  waiting for a person to approve a call of {printable(fields.get('tool'))} "
                                  f"at {printable(fields.get('state'))}")
            return p("cause", f"  waiting for a person's answer at {printable(fields.get('state'))}")
        if event == "answer":
            said = "no answer in time" if fields.get("timed_out") else "answered"
            return f"  person: {said}"
        if event == "approval":
            decided = {"approve": "approved", "reject": "rejected", "edit": "edited"}.get(
                str(fields.get("decision")), printable(fields.get("decision")))
            return f"  person: {decided} the call of {printable(fields.get('tool'))}"
        if event == "var":
            return p("dim", f"  {printable(fields.get('reducer'))} {printable(fields.get('var'))}")
        if event == "run_end" and self.end:
            if fields.get("status") == "final":
                return p("ok", f"done: final state {printable(fields.get('final_state'))}")
            if fields.get("status") == "waiting":
                return p("cause", "paused: waiting for a person's answer")
            failure = fields.get("failure") or {}
            return p("fail", f"failed ({printable(failure.get('kind'))}): {printable(failure.get('message'), 300)}")
        return None

    def _call_line(self, event: str, fields: dict[str, Any]) -> str | None:
        """A model call asked for and answered (or failed), a tool call's outcome."""
        p = self.paint
        if event == "llm_request":
            return p("dim", f"  calling {self._caller(fields)} ({printable(fields.get('model'))})")
        if event == "llm_call":
            if fields.get("error"):
                return p("fail", f"  {self._caller(fields)} failed: {printable(fields.get('error'), 300)}")
            tokens = int(fields.get("prompt_tokens") or 0) + int(fields.get("completion_tokens") or 0)
            seconds = float(fields.get("latency_ms") or 0.0) / 1000
            return (f"  {self._caller(fields)} {p('model', printable(fields.get('model')))}: {tokens} tokens, "
                    f"{seconds:.1f} s")
        if event == "llm_error":
            return p("fail", f"  model call failed: {printable(fields.get('error'), 300)}")
        if event == "tool_call":
            status = p("ok", "ok") if fields.get("ok") else p("fail", f"failed: {printable(fields.get('error'), 200)}")
            return f"  tool {printable(fields.get('tool'))}: {status}"
        return None

    def _fanout_line(self, event: str, fields: dict[str, Any]) -> str | None:
        """A parallel state's or a map's start, and its join (the branches' own lines follow at the join,
        branch by branch)."""
        p = self.paint
        if event == "fan_out":
            if fields.get("kind") == "map":
                return p("dim", f"  {fields.get('items')} elements, {fields.get('concurrency')} at a time")
            branches = ", ".join(printable(b) for b in fields.get("branches") or [])
            return p("dim", f"  branches at once: {branches}")
        if event == "join" and "joined" in fields:
            joined = ", ".join(printable(b) for b in fields.get("joined") or []) or "no branch"
            cancelled = fields.get("cancelled") or []
            return p("dim", f"  joined {joined}" + (f"; cancelled {', '.join(map(printable, cancelled))}"
                                                     if cancelled else ""))
        return None

    def _designer_line(self, event: str, fields: dict[str, Any]) -> str | None:
        """The designer's start, each attempt, the feedback it sends back, and its end."""
        p = self.paint
        if event == "designer_start":
            return p("dim", f"designing {printable(fields.get('output'))} with {printable(fields.get('model'))}")
        if event == "designer_attempt":
            if fields.get("ok"):
                return p("ok", f"attempt {fields.get('attempt')}: the machine checks and its tests pass")
            codes = ", ".join(printable(c) for c in fields.get("codes") or [])
            problems = [f"{fields.get('error_count', 0)} error(s)" + (f" ({codes})" if codes else "")]
            if fields.get("test_failures"):
                problems.append(f"{fields.get('test_failures')} failing test(s)")
            return p("fail", f"attempt {fields.get('attempt')}: {', '.join(problems)}")
        if event == "designer_feedback":
            return p("dim", f"  sending the diagnostics of attempt {fields.get('attempt')} back")
        if event == "designer_end":
            if fields.get("ok"):
                return p("ok", f"designed {printable(fields.get('output'))}")
            return p("fail", f"design failed{': ' + printable(fields['error'], 300) if fields.get('error') else ''}")
        return None
