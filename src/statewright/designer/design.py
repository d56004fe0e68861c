"""Task description -> checked, tested, formatted `.fsm` source, via a designer model and a repair loop.

Two stages, as the FSM-design literature does it: the model first proposes the fewest agents that can do
the job, then writes the whole machine as statewright source. The source is compiled with the same
functions `statewright check` uses; every diagnostic (as the JSON that `check --format json` prints) and
every failing test block is fed back, and the model repairs its text, up to `max_repairs` times.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..diagnostics import render_json

DEFAULT_DESIGNER_MODEL = "openai/gpt-4o-mini"
AVAILABLE_TOOLS = ("std.python", "std.read_file", "std.write_file", "std.list_files")

AGENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "prompt": {"type": "string"},
                    "tools": {"type": "array", "items": {"type": "string", "enum": list(AVAILABLE_TOOLS)}},
                },
                "required": ["name", "prompt", "tools"],
            },
        }
    },
    "required": ["agents"],
}


@dataclass
class Attempt:
    number: int
    source: str
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    test_failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d["severity"] == "error" for d in self.diagnostics) and not self.test_failures


@dataclass
class DesignOutcome:
    ok: bool
    output: str
    source: str | None
    attempts: list[Attempt]
    log: list[str]
    last_attempt_path: str | None = None
    diagnostics_path: str | None = None


class DesignError(Exception):
    """The designer model could not be reached or answered with nothing usable."""


def default_model() -> str:
    return os.environ.get("STATEWRIGHT_DESIGNER_MODEL", DEFAULT_DESIGNER_MODEL)


def design(
    task: str,
    *,
    output: str,
    model: str | None = None,
    max_repairs: int = 3,
    optimize: bool = True,
    client: Any = None,
    trace: Any = None,
) -> DesignOutcome:
    """Design a machine for `task` and write it to `output`; on failure keep the last attempt beside it."""
    from .. import api
    from ..stdlib.reference import designer_system_prompt

    model = model or default_model()
    caller = _DesignerCalls(model, client, trace)
    log: list[str] = []
    system = {"role": "system", "content": designer_system_prompt()}
    task_text = task.strip()

    # stage 1: the agents
    stage1 = [system, {"role": "user", "content": _agents_request(task_text)}]
    agents_reply = caller.call("agents", stage1, schema=AGENTS_SCHEMA)
    agents = _parse_agents(agents_reply)
    log.append(f"designer proposed {len(agents)} agent(s): {', '.join(a['name'] for a in agents) or '(none)'}")

    # stage 2: the machine, then repairs
    conversation = [system, {"role": "user", "content": _machine_request(task_text, agents)}]
    text = extract_source(caller.call("machine", conversation))
    attempts: list[Attempt] = []
    for number in range(1, max_repairs + 2):
        attempt = _evaluate(api, text, output, number)
        attempts.append(attempt)
        caller.emit("designer_attempt", attempt=number, error_count=_errors(attempt),
                    codes=sorted({d["code"] for d in attempt.diagnostics if d["severity"] == "error"}),
                    test_failures=len(attempt.test_failures))
        if attempt.ok:
            break
        log.append(f"attempt {number}: {_errors(attempt)} error(s), {len(attempt.test_failures)} failing test(s)")
        if number == max_repairs + 1:
            break
        feedback = repair_request(attempt)
        caller.emit("designer_feedback", attempt=number, diagnostics=attempt.diagnostics,
                    test_failures=attempt.test_failures)
        conversation += [{"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
        text = extract_source(caller.call("repair", conversation))

    final = attempts[-1]
    if not final.ok:
        last_path, diag_path = _keep_failed_attempt(output, final)
        log.append(f"design failed after {max_repairs} repair attempt(s); the last attempt is in {last_path} "
                   f"and its diagnostics in {diag_path}")
        return DesignOutcome(False, output, None, attempts, log, last_path, diag_path)

    source = final.source
    if optimize:
        source = _optimize_source(api, source, output, log)
    formatted = api.format_text(source, output)
    source = formatted.text if formatted.text is not None else source
    source = _with_header(source, task_text, model)
    Path(output).write_text(source, encoding="utf-8")
    log.append(f"wrote {output} after {len(attempts)} attempt(s)")
    return DesignOutcome(True, output, source, attempts, log)


# ---- prompts -------------------------------------------------------------------------------------


def _agents_request(task: str) -> str:
    return (
        f"Task description:\n{task}\n\n"
        "Stage 1 of 2: propose the fewest agents that can do this kind of task. For each agent give a "
        "name (lower_snake_case), a focused system prompt, and the tools it needs, chosen from: "
        + ", ".join(AVAILABLE_TOOLS)
        + '. Reply with JSON only: {"agents": [{"name": ..., "prompt": ..., "tools": [...]}]}'
    )


def _machine_request(task: str, agents: list[dict[str, Any]]) -> str:
    return (
        f"Task description:\n{task}\n\n"
        f"Stage 2 of 2: the agents are:\n{json.dumps(agents, indent=2, ensure_ascii=False)}\n\n"
        "Write the complete statewright machine that uses these agents: inputs, types for every output a "
        "guard or later step reads, the states and transitions (foresee bad intermediate results, missing "
        "data and failed checks; use guards on typed outputs, natural-language conditions where the output "
        "is text, and traceback edges to redo earlier steps), bounded loops, success and failure final "
        "states, and at least one test block. Reply with the source only, in one ```fsm code block."
    )


def repair_request(attempt: Attempt) -> str:
    """The message that feeds one attempt's problems back to the designer model."""
    parts = ["The statewright compiler checked your machine."]
    if attempt.diagnostics:
        errors = [d for d in attempt.diagnostics if d["severity"] == "error"]
        parts.append(
            f"It reported {len(errors)} error(s). Here are its diagnostics as JSON (codes, positions, "
            "messages and help):\n```json\n" + json.dumps(
                {"valid": not errors, "error_count": len(errors),
                 "warning_count": len(attempt.diagnostics) - len(errors),
                 "diagnostics": attempt.diagnostics}, indent=2, ensure_ascii=False) + "\n```"
        )
    if attempt.test_failures:
        parts.append("Its test blocks failed:\n" + "\n\n".join(attempt.test_failures))
    parts.append("Fix every problem and reply with the complete corrected source, in one ```fsm code block.")
    return "\n\n".join(parts)


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)


def extract_source(reply: str) -> str:
    """The machine source in a reply: the fenced block holding `machine`, else the whole reply."""
    blocks = _FENCE.findall(reply)
    for lang, body in blocks:
        if lang in ("fsm", "statewright", "") and re.search(r"\bmachine\b", body):
            return body.strip() + "\n"
    for _, body in blocks:
        if re.search(r"\bmachine\b", body):
            return body.strip() + "\n"
    return reply.strip() + "\n"


def _parse_agents(reply: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(extract_json_object(reply))
        agents = data["agents"]
        return [a for a in agents if isinstance(a, dict) and isinstance(a.get("name"), str)]
    except (ValueError, KeyError, TypeError):
        return []  # stage 2 then designs the agents too; the compiler checks the result either way


def extract_json_object(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


# ---- checking an attempt -------------------------------------------------------------------------


def _evaluate(api: Any, text: str, output: str, number: int) -> Attempt:
    from ..diagnostics import diagnostic_to_json

    comp = api.check_text(text, Path(output).name)
    attempt = Attempt(number, text, [diagnostic_to_json(d) for d in comp.diagnostics])
    if not comp.ok:
        return attempt
    if not comp.ir.tests:
        attempt.test_failures.append("The machine has no test block. Add at least one `test` block that "
                                     "scripts the replies and states the expected path.")
        return attempt
    from ..runtime.testing import format_outcome

    for outcome in api.run_tests(comp):
        if not outcome.passed:
            attempt.test_failures.append(format_outcome(outcome))
    return attempt


def _errors(attempt: Attempt) -> int:
    return sum(1 for d in attempt.diagnostics if d["severity"] == "error")


def _keep_failed_attempt(output: str, attempt: Attempt) -> tuple[str, str]:
    last_path = output + ".last-attempt"
    diag_path = output + ".diagnostics.json"
    Path(last_path).write_text(attempt.source, encoding="utf-8")
    errors = [d for d in attempt.diagnostics if d["severity"] == "error"]
    doc = {"valid": not errors, "error_count": len(errors), "warning_count": len(attempt.diagnostics) - len(errors),
           "diagnostics": attempt.diagnostics, "test_failures": attempt.test_failures}
    Path(diag_path).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return last_path, diag_path


def _optimize_source(api: Any, source: str, output: str, log: list[str]) -> str:
    """Apply the exact passes to the source: drop unreachable states, merge equivalent ones."""
    from ..compiler.source_edit import apply_exact_passes_to_source

    new_source, notes = apply_exact_passes_to_source(source, Path(output).name)
    log.extend(notes)
    return new_source


def _with_header(source: str, task: str, model: str) -> str:
    lines = ["# Designed by statewright from this task description:"]
    for line in task.splitlines() or [""]:
        lines.append(f"#   {line}".rstrip())
    lines.append(f"# Designer model: {model}")
    return "\n".join(lines) + "\n\n" + source


# ---- model calls ---------------------------------------------------------------------------------


class _DesignerCalls:
    """Designer calls go through the runtime's model client, with role "designer", traced like any call."""

    def __init__(self, model: str, client: Any, trace: Any) -> None:
        self.model = model
        self.client = client
        self.trace = trace
        self.seq: dict[str, int] = {}

    def call(self, stage: str, messages: list[dict[str, Any]], schema: dict[str, Any] | None = None) -> str:
        from ..runtime.client import ModelError, ModelRequest

        if self.client is None:
            from ..runtime.litellm_client import LiteLLMClient

            self.client = LiteLLMClient()
        seq = self.seq.get(stage, 0)
        self.seq[stage] = seq + 1
        request = ModelRequest(
            role="designer", state=stage, model=self.model, messages=list(messages),
            response_schema=schema, schema_name="agents" if schema else "output",
            metadata={"statewright": {"run_id": "design", "state": stage, "role": "designer", "seq": seq}},
        )
        try:
            response = self.client.complete(request)
        except ModelError as e:
            raise DesignError(str(e)) from None
        self.emit("llm_call", role="designer", state=stage, model=response.model,
                  prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                  cost_usd=response.cost_usd, latency_ms=response.latency_ms, attempts=response.attempts)
        return response.content

    def emit(self, event: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(event, **fields)
