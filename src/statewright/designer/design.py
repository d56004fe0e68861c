"""Task description -> checked, tested, formatted `.fsm` source, via a designer model and a repair loop.

Two stages, as the FSM-design literature does it: the model first proposes the fewest agents that can do
the job, then writes the whole machine as statewright source. The source is compiled with the same
functions `statewright check` uses; every diagnostic (as the JSON that `check --format json` prints) and
every failing test block is fed back, and the model repairs its text, up to `max_repairs` times. Where the
model's server takes a grammar, the drafts are held to the statewright grammar at decoding time
(constraint.py), so they parse by construction and the repairs go to meaning.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..diagnostics import diagnostic_to_json
from ..runtime.untrusted import read_json
from .constraint import CONSTRAIN_MODES, Constraint, choose_constraint, grammar_request_fields

if TYPE_CHECKING:
    from ..compiler.pipeline import Compilation, Stage
    from ..grammar.decoding.completion import Completion

DEFAULT_DESIGNER_MODEL = "openai/gpt-4o-mini"
HEADER_WIDTH = 100
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
    """One version of the machine the model wrote, and what the compiler and the test blocks said."""

    number: int
    source: str
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    test_failures: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [d for d in self.diagnostics if d["severity"] == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.test_failures


@dataclass
class DesignOutcome:
    ok: bool
    output: str
    source: str | None  # the file written, when ok
    attempts: list[Attempt]
    log: list[str]  # what happened, one line per event, for people
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
    constrain: str = "auto",
    max_tokens: int | None = None,
    system_prompt: str | None = None,
    timeout: float | None = None,
) -> DesignOutcome:
    """Design a machine for `task` and write it to `output`; on failure keep the last attempt beside it.

    `constrain` ("auto", "grammar" or "none") says whether the machine drafts are constrained to the grammar
    at decoding time (see designer/constraint.py); `max_tokens` caps every designer reply; `system_prompt`
    replaces the language reference the model reads (for a model with a small context window); `timeout`
    gives each designer call that many seconds (a slow local model) instead of the client's default.
    Never raises for a failed design or an unreachable model: the outcome is not ok and its log says why.
    """
    from ..stdlib.reference import designer_system_prompt

    model = model or default_model()
    log: list[str] = []
    attempts: list[Attempt] = []
    task_text = task.strip()
    problem = _bad_arguments(task_text, output, max_repairs, constrain, max_tokens)
    if problem:
        return DesignOutcome(False, output, None, attempts, [f"error: {problem}"])
    constraint = choose_constraint(constrain, model)
    caller = _DesignerCalls(model, client, trace, max_tokens=max_tokens, timeout=timeout)
    caller.emit("designer_start", task=task_text, model=model, max_repairs=max_repairs, output=output,
                constraint=constraint.mode, constraint_reason=constraint.reason)
    if constraint.grammar:
        log.append(f"drafting under the grammar constraint: {constraint.reason}")
    system = {"role": "system", "content": system_prompt or designer_system_prompt()}
    try:
        agents = _propose_agents(caller, system, task_text, log)
        drafts = _Drafts(caller, constraint, Path(output).name, output, attempts, log)
        drafts.until_valid(system, task_text, agents, max_repairs)
    except DesignError as e:
        log.append(f"error: the designer model failed: {e}")
        outcome = _failed(output, attempts, log)
        caller.emit("designer_end", ok=False, attempts=len(attempts), error=str(e))
        return outcome

    final = attempts[-1]
    if not final.ok:
        outcome = _failed(output, attempts, log, repairs=max_repairs)
        caller.emit("designer_end", ok=False, attempts=len(attempts))
        return outcome
    source = _finish(final.source, Path(output).name, output, task_text, model, optimize, log)
    _write_design(output, source, len(attempts), log)
    caller.emit("designer_end", ok=True, attempts=len(attempts), output=output)
    return DesignOutcome(True, output, source, attempts, log)


def _propose_agents(caller: _DesignerCalls, system: dict[str, str], task: str,
                    log: list[str]) -> list[dict[str, Any]]:
    """Stage 1: the agents the model proposes for the task."""
    request = {"role": "user", "content": _agents_request(task)}
    agents = _parse_agents(caller.call("agents", [system, request], schema=AGENTS_SCHEMA))
    names = ", ".join(a["name"] for a in agents) or "(none)"
    log.append(f"designer proposed {len(agents)} agent(s): {names}")
    return agents


@dataclass
class _Drafts:
    """Stage 2: the machine drafted, then repaired from what the compiler and its tests say; each attempt
    is appended to `attempts`, and said in the trace and the log."""

    caller: _DesignerCalls
    constraint: Constraint  # whether drafts are held to the grammar
    name: str  # the file name the drafts are checked as
    location: str  # where they will be written: their `use` lines are read from its folder
    attempts: list[Attempt]
    log: list[str]

    def until_valid(self, system: dict[str, str], task: str, agents: list[dict[str, Any]],
                    max_repairs: int) -> None:
        """Draft, then repair up to `max_repairs` times; stop at the first attempt that checks and passes
        its tests. Raises DesignError when the model fails."""
        grammar, mode = self.constraint.grammar, self.constraint.mode
        draft_fields = grammar_request_fields() if grammar else None
        conversation = [system, {"role": "user", "content": _machine_request(task, agents, grammar)}]
        reply = self.caller.call("machine", conversation, extra_body=draft_fields, constraint=mode)
        for number in range(1, max_repairs + 2):
            text, finished = draft_source(reply, grammar)
            attempt = evaluate_attempt(text, self.name, number, location=self.location)
            self.attempts.append(attempt)
            self._said(attempt, finished)
            if attempt.ok or number == max_repairs + 1:
                return
            feedback = repair_request(attempt, constrained=grammar)
            self.caller.emit("designer_feedback", attempt=number, diagnostics=attempt.diagnostics,
                             test_failures=attempt.test_failures, message=feedback)
            conversation += [{"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
            reply = self.caller.call("repair", conversation, extra_body=draft_fields, constraint=mode)

    def _said(self, attempt: Attempt, finished: Completion | None) -> None:
        """The attempt in the trace (`designer_attempt`, with what it fixed of the one before) and the log."""
        number, log = attempt.number, self.log
        fields: dict[str, Any] = {}
        if finished is not None:
            fields["completed"] = {"added": finished.added, "dropped": finished.dropped}
            log.append(f"attempt {number}: the reply stopped before the machine was complete (a token limit);"
                       f" finished it with {finished.added.strip()!r}")
        previous = self.attempts[-2] if len(self.attempts) > 1 else None
        summary = attempt_summary(attempt, previous)
        if previous is not None:
            before, after = _codes(previous.errors), _codes(attempt.errors)
            fields["fixed"] = sorted(before - after)
            fields["new"] = sorted(after - before)
            fields["previous_error_count"] = len(previous.errors)
        self.caller.emit("designer_attempt", attempt=number, ok=attempt.ok, error_count=len(attempt.errors),
                         codes=sorted(_codes(attempt.errors)), test_failures=len(attempt.test_failures),
                         summary=summary, **fields)
        log.append(f"attempt {number}: {summary}")


def _write_design(output: str, source: str, attempts: int, log: list[str]) -> None:
    """Write the designed machine, and remove what an earlier design that failed left beside it."""
    Path(output).write_text(source, encoding="utf-8")
    log.append(f"wrote {output} after {attempts} attempt(s)")
    for stale in (output + ".last-attempt", output + ".diagnostics.json"):
        if Path(stale).is_file():
            Path(stale).unlink()
            log.append(f"removed {stale}, left by an earlier design that failed")


def _bad_arguments(task: str, output: str, max_repairs: int, constrain: str, max_tokens: int | None) -> str | None:
    if not task:
        return "the task description is empty"
    if max_repairs < 0:
        return f"the number of repairs must be 0 or more, not {max_repairs}"
    if constrain not in CONSTRAIN_MODES:
        return f"constrain must be one of {', '.join(CONSTRAIN_MODES)}, not {constrain!r}"
    if max_tokens is not None and max_tokens < 1:
        return f"the token limit must be 1 or more, not {max_tokens}"
    folder = Path(output).parent
    if not folder.is_dir():
        return f"cannot write {output}: the folder {str(folder)!r} does not exist"
    return None


def attempt_summary(attempt: Attempt, previous: Attempt | None = None) -> str:
    """What an attempt still has, and, after the first, what it fixed of the attempt before:

        3 errors (SW2002, SW3008, SW4001)
        3 errors -> 0 errors (fixed SW2002, SW3008, SW4001); 1 test problem
        1 test problem -> 0: the machine checks and its tests pass

    Test blocks run only when a machine has no errors, so test problems are compared only with an attempt
    whose tests ran."""
    errors, tests = attempt.errors, len(attempt.test_failures)
    parts = []
    if previous is None or not (previous.errors or errors):
        if errors:
            parts.append(f"{_count(len(errors), 'error')} ({', '.join(sorted(_codes(errors)))})")
    else:
        before, after = _codes(previous.errors), _codes(errors)
        what = [f"{word} {', '.join(sorted(codes))}" for word, codes in
                (("fixed", before - after), ("new", after - before), ("still", before & after)) if codes]
        parts.append(f"{_count(len(previous.errors), 'error')} -> {_count(len(errors), 'error')} ({'; '.join(what)})")
    if previous is not None and not previous.errors and not errors and (previous.test_failures or tests):
        parts.append(f"{_count(len(previous.test_failures), 'test problem')} -> {tests}")
    elif tests:
        parts.append(_count(tests, "test problem"))
    done = "the machine checks and its tests pass" if attempt.ok else ""
    return ": ".join(part for part in ("; ".join(parts), done) if part)


def _codes(diagnostics: list[dict[str, Any]]) -> set[str]:
    return {d["code"] for d in diagnostics}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _failed(output: str, attempts: list[Attempt], log: list[str],
            repairs: int | None = None) -> DesignOutcome:
    if not attempts:
        return DesignOutcome(False, output, None, attempts, log)
    last_path, diag_path = _keep_failed_attempt(output, attempts[-1])
    if repairs is not None:
        log.append(f"design failed: the machine still has problems after {repairs} repair attempt(s)")
    log.append(f"the last attempt is in {last_path} and its diagnostics in {diag_path}")
    return DesignOutcome(False, output, None, attempts, log, last_path, diag_path)


# ---- prompts -------------------------------------------------------------------------------------


def _agents_request(task: str) -> str:
    return (
        f"Task description:\n{task}\n\n"
        "Stage 1 of 2: propose the fewest agents that can do this kind of task. For each agent give a "
        "name (lower_snake_case), a focused system prompt, and the tools it needs, chosen from: "
        + ", ".join(AVAILABLE_TOOLS)
        + '. Reply with JSON only: {"agents": [{"name": ..., "prompt": ..., "tools": [...]}]}'
    )


def _machine_request(task: str, agents: list[dict[str, Any]], constrained: bool = False) -> str:
    return (
        f"Task description:\n{task}\n\n"
        f"Stage 2 of 2: the agents are:\n{json.dumps(agents, indent=2, ensure_ascii=False)}\n\n"
        "Write the complete statewright machine that uses these agents: inputs, types for every output a "
        "guard or later step reads, the states and transitions (foresee bad intermediate results, missing "
        "data and failed checks; use guards on typed outputs, natural-language conditions where the output "
        "is text, and traceback edges to redo earlier steps), bounded loops, success and failure final "
        "states, and at least one test block. " + _reply_form(constrained)
    )


def _reply_form(constrained: bool) -> str:
    if constrained:  # the decoder only allows statewright source: a code fence could not be written
        return "Reply with the statewright source only, starting with `machine`, without a code fence."
    return "Reply with the source only, in one ```fsm code block."


def repair_request(attempt: Attempt, constrained: bool = False) -> str:
    """The message that feeds one attempt's problems back to the designer model."""
    parts = ["The statewright compiler checked your machine."]
    if attempt.diagnostics:
        errors = attempt.errors
        parts.append(
            f"It reported {len(errors)} error(s). Here are its diagnostics as JSON (codes, positions, "
            "messages and help):\n```json\n" + json.dumps(
                {"valid": not errors, "error_count": len(errors),
                 "warning_count": len(attempt.diagnostics) - len(errors),
                 "diagnostics": attempt.diagnostics}, indent=2, ensure_ascii=False) + "\n```"
        )
    if attempt.test_failures:
        parts.append("Its test blocks did not pass:\n" + "\n\n".join(attempt.test_failures))
    if constrained:
        parts.append("Fix every problem and reply with the complete corrected source only, starting with "
                     "`machine`, without a code fence.")
    else:
        parts.append("Fix every problem and reply with the complete corrected source, in one ```fsm code block.")
    return "\n\n".join(parts)


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"\A\s*```[ \t]*[A-Za-z0-9_-]*[ \t]*\n")


def extract_source(reply: str) -> str:
    """The machine source in a reply: the fenced block holding `machine`, else the whole reply (without an
    opening fence that was never closed, as in a reply cut off at its length limit)."""
    blocks = _FENCE.findall(reply)
    for lang, body in blocks:
        if lang in ("fsm", "statewright", "") and re.search(r"\bmachine\b", body):
            return body.strip() + "\n"
    for _, body in blocks:
        if re.search(r"\bmachine\b", body):
            return body.strip() + "\n"
    return _OPEN_FENCE.sub("", reply).strip() + "\n"


def draft_source(reply: str, constrained: bool) -> tuple[str, Completion | None]:
    """The source in a draft, and how it was finished if a token limit cut it off.

    A constrained reply is the source itself (a code fence inside one of its strings is no wrapper); one
    that stops early is finished with the shortest text the grammar allows. If the server ignored the
    grammar the reply is read as any other, and the repair loop sees its syntax errors as usual."""
    if constrained:
        from ..grammar.decoding.completion import complete_draft

        text = reply.strip() + "\n"
        if text.lstrip().startswith(("machine", "#")):
            finished = complete_draft(text)
            if finished is not None:
                return finished.text, finished
            if not _has_syntax_errors(text):
                return text, None
    return extract_source(reply), None


def _has_syntax_errors(text: str) -> bool:
    return any(d.code.startswith("SW10") for d in compile_text(text, "<draft>", stop_after="parse").diagnostics)


def _parse_agents(reply: str) -> list[dict[str, Any]]:
    try:
        data = read_json(extract_json_object(reply), "the reply")  # a model's: depth and size checked
        agents = data["agents"]
        return [a for a in agents if isinstance(a, dict) and isinstance(a.get("name"), str)]
    except (ValueError, KeyError, TypeError):
        return []  # stage 2 then designs the agents too; the compiler checks the result either way


def extract_json_object(text: str) -> str:
    """The outermost `{...}` of a reply that may wrap its JSON in prose or a code fence."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


# ---- checking an attempt -------------------------------------------------------------------------


def evaluate_attempt(text: str, path: str, number: int = 1, *, location: str | None = None) -> Attempt:
    """Check one version of the source as `statewright check` does on the file at `location` (by default
    `path`: its `use` lines are read from that file's folder), then run its test blocks."""
    compilation = compile_text(text, path, stop_after="load", keep_syntax=False, location=location)
    attempt = Attempt(number, text, [diagnostic_to_json(d) for d in compilation.diagnostics])
    if not compilation.ok:
        return attempt
    if compilation.machine is not None and not compilation.machine.tests:
        attempt.test_failures.append("The machine has no test block. Add at least one `test` block that "
                                     "scripts the replies and states the expected path.")
        return attempt
    attempt.test_failures.extend(failing_tests(compilation))
    return attempt


def compile_text(text: str, path: str, *, stop_after: Stage = "lower", keep_syntax: bool = True,
                 location: str | None = None) -> Compilation:
    """One source text through the compiler's front door; with "load", its machine is ready to test as
    written (no optimization: the test blocks script the states the text declares). `keep_syntax` False
    when only the diagnostics, the IR and the machine are wanted: the syntax tree and the symbols are let go
    before the machine is generated and loaded (pipeline.compile_source)."""
    from ..compiler.pipeline import compile_source
    from ..diagnostics import SourceFile

    return compile_source(SourceFile(path, text), stop_after=stop_after, level=0, keep_syntax=keep_syntax,
                          location=location)


def failing_tests(compilation: Compilation) -> list[str]:
    """A report for each test block of a loaded machine that does not pass (as `statewright test`)."""
    from ..runtime.testing import format_outcome

    try:
        outcomes = run_test_blocks(compilation)
    except Exception as e:  # noqa: BLE001 - whatever breaks, the model hears about it as a test problem
        return [f"The test blocks could not run: {type(e).__name__}: {e}"]
    return [format_outcome(o) for o in outcomes if not o.passed]


def run_test_blocks(compilation: Compilation) -> list[Any]:
    """Run the test blocks of a machine the front door loaded, with their scripted replies; one outcome
    each (each test block answers from its own scripted client: nothing is shared with the designer's
    model)."""
    from ..runtime.testing import run_tests

    assert compilation.machine is not None, "compile with stop_after='load'"
    return list(run_tests(compilation.machine))


def _keep_failed_attempt(output: str, attempt: Attempt) -> tuple[str, str]:
    last_path = output + ".last-attempt"
    diag_path = output + ".diagnostics.json"
    Path(last_path).write_text(attempt.source, encoding="utf-8")
    errors = attempt.errors
    doc = {"valid": not errors, "error_count": len(errors),
           "warning_count": len(attempt.diagnostics) - len(errors),
           "diagnostics": attempt.diagnostics, "test_failures": attempt.test_failures}
    Path(diag_path).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return last_path, diag_path


# ---- the file that is written --------------------------------------------------------------------


def _finish(source: str, path: str, location: str, task: str, model: str, optimize: bool, log: list[str]) -> str:
    """Optimize (exact passes only), format and add the header. Every version must still check (as the file
    at `location`) and pass its tests; an optimization that breaks either is left out."""
    plain = _formatted(with_header(source, task, model), path)
    if not optimize:
        return plain
    from .source_edit import apply_exact_passes_to_source

    optimized, notes = apply_exact_passes_to_source(source, location)
    if optimized == source:
        log.extend(notes)
        return plain
    candidate = _formatted(with_header(optimized, task, model), path)
    checked = compile_text(candidate, path, stop_after="load", keep_syntax=False, location=location)
    if not checked.ok or checked.machine is None or not checked.machine.tests or failing_tests(checked):
        log.append("kept the machine as designed: the optimized version did not pass its tests")
        return plain
    log.extend(notes)
    return candidate


def _formatted(source: str, path: str) -> str:
    from ..compiler.views.formatter import format_text

    formatted = format_text(source, path)
    return formatted.text if formatted.text is not None else source


def with_header(source: str, task: str, model: str) -> str:
    """The source with a comment naming the task it was designed for and the designer model."""
    lines = ["# Designed by statewright from this task description:"]
    for line in task.splitlines() or [""]:
        # long lines are wrapped, so the header reads well beside the formatted source
        lines.extend(f"#   {part}" for part in textwrap.wrap(line, HEADER_WIDTH - 4) or [""])
    lines.append(f"# Designer model: {model}")
    lines = [line.rstrip() for line in lines]
    return "\n".join(lines) + "\n\n" + source


# ---- model calls ---------------------------------------------------------------------------------


class _DesignerCalls:
    """Designer calls go through the runtime's model client, with role "designer", traced like any call."""

    def __init__(self, model: str, client: Any, trace: Any, max_tokens: int | None = None,
                 timeout: float | None = None) -> None:
        self.model = model
        self.client = client
        self.trace = trace
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.seq: dict[str, int] = {}

    def call(self, stage: str, messages: list[dict[str, Any]], schema: dict[str, Any] | None = None,
             extra_body: dict[str, Any] | None = None, constraint: str | None = None) -> str:
        from ..runtime.client import ModelError, ModelRequest

        if self.client is None:
            from ..runtime.model_calls import RetryPolicy
            from ..runtime.model_client import default_model_client

            self.client = default_model_client(RetryPolicy(timeout=self.timeout) if self.timeout else None)
        seq = self.seq.get(stage, 0)
        self.seq[stage] = seq + 1
        request = ModelRequest(
            role="designer", state=stage, model=self.model, messages=list(messages),
            response_schema=schema, schema_name="agents" if schema else "output", max_tokens=self.max_tokens,
            metadata={"statewright": {"run_id": "design", "state": stage, "role": "designer", "seq": seq}},
            extra_body=extra_body,
        )
        self.emit("llm_request", role="designer", state=stage, model=self.model)
        try:
            response = self.client.complete(request)
        except ModelError as e:
            self.emit("llm_call", role="designer", state=stage, model=self.model, call_index=seq,
                      error=str(e))
            raise DesignError(str(e)) from None
        fields: dict[str, Any] = {
            "role": "designer", "state": stage, "model": response.model or self.model, "call_index": seq,
            "prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens,
            "cost_usd": response.cost_usd, "latency_ms": response.latency_ms, "attempts": response.attempts,
        }
        if constraint is not None:
            fields["constraint"] = constraint
        if response.events:
            fields["events"] = response.events
        if getattr(self.trace, "content", False):  # as for agents: messages only when asked for
            fields["messages"] = request.messages
            fields["reply"] = {"content": response.content}
        self.emit("llm_call", **fields)
        return response.content

    def emit(self, event: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(event, **fields)
