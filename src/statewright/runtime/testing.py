"""The test-block runner: runs a machine against its scripted replies and checks what the test expects."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .engine import Engine
from .file_names import MAX_NAME_CHARS, file_name_for
from .result import Failure, RunResult
from .scripted import Script, ScriptedClient, script_role_of_step
from .spec import ExpectationSpec, MachineSpec, TestSpec
from .structured import to_jsonable
from .sync import run_sync
from .trace import Trace, printable, redact

# what a run did, visit by visit: (kind, state) -> {visit: value}, kind "instruction" or "output"
Observed = dict[tuple[str, str], dict[int, Any]]


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest test class

    name: str
    passed: bool
    expected_path: list[str] | None
    actual_path: list[str]
    messages: list[str] = field(default_factory=list)
    result: RunResult | None = None
    origin: str = ""  # the test block's position in the .fsm file


def run_test(machine: MachineSpec, test: TestSpec, *, trace_path: str | None = None,
             trace_content: bool = False, otel: Any = None) -> TestOutcome:
    """`arun_test` for synchronous code."""
    return run_sync(arun_test(machine, test, trace_path=trace_path, trace_content=trace_content,  # type: ignore[no-any-return]
                              otel=otel))


async def arun_test(machine: MachineSpec, test: TestSpec, *, trace_path: str | None = None,
                    trace_content: bool = False, otel: Any = None) -> TestOutcome:
    """Runs one test block: its replies and verdicts play the models, then its expectations are checked.

    Every model — agents, fallbacks, verifier — answers from the test's own script, in process: no model,
    no network, no litellm. A run that asks for more replies than the test scripted fails the test, and so
    does one that never asks for a reply or verdict the test scripted (unless `allow unused replies`); it
    never raises. `otel` (an otel.OtelTelemetry) makes the run's spans and metrics.
    """
    script = Script.from_test(machine, test)
    client = ScriptedClient(script)
    observed: Observed = {}

    def observe(kind: str, state: str, visit: int, value: Any) -> None:
        observed.setdefault((kind, state), {})[visit] = to_jsonable(value)
    trace = Trace(trace_path, content=trace_content) if trace_path else None
    # tools a test lets run (an agent's scripted tool calls) work in a directory that goes with the test
    workspace = tempfile.TemporaryDirectory(prefix="statewright-test-")
    try:
        # a directory the registry makes, so it belongs to the user tool code runs as (see docs/tools.md)
        # a test needs no secrets: scripted tools never run, and a real tool that needs one fails its call
        engine = Engine(machine, client=client, trace=trace, script=script,
                        workspace=os.path.join(workspace.name, "workspace"), require_secrets=False,
                        observe=observe if test.expectations else None, otel=otel)
        result = await engine.arun(dict(test.inputs))
    except Exception as error:  # noqa: BLE001 - a test reports what broke instead of crashing the suite
        return crashed_test(test, error)
    finally:
        if trace is not None:
            trace.close()
        workspace.cleanup()
    return judge_test(machine, test, result, observed, client.calls)


def judge_test(machine: MachineSpec, test: TestSpec, result: RunResult, observed: Observed,
               served: Iterable[tuple[str, str, int]]) -> TestOutcome:
    """A test block's outcome from what its run did, on whatever face it ran: the result, what each visit
    saw and produced (`observed`), and which scripted replies were served, as (role, state, seq)."""
    expected = list(test.expect_path) if test.expect_path is not None else None
    messages = check_expectations(test, result, observed)
    if not messages and not test.allow_unused:
        messages = unused_script(machine, test, served)
    return TestOutcome(test.name, not messages, expected, list(result.path), messages, result, test.origin)


def crashed_test(test: TestSpec, error: BaseException) -> TestOutcome:
    """The outcome of a test whose run raised instead of ending: it fails, saying what broke."""
    expected = list(test.expect_path) if test.expect_path is not None else None
    crashed = f"the run crashed: {type(error).__name__}: {error}"
    return TestOutcome(test.name, False, expected, [], [crashed], None, test.origin)


def run_tests(machine: MachineSpec, *, trace_dir: str | None = None, trace_content: bool = False,
              name_filter: str | None = None, otel: Any = None) -> list[TestOutcome]:
    """Runs the machine's test blocks in source order; `name_filter` is a substring or glob of test names.

    With `trace_dir`, each test writes its trace to `<trace_dir>/<test name>.jsonl` (trace_file_names).
    """
    outcomes = []
    files = trace_file_names([t.name for t in machine.tests])
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
    for test in machine.tests:
        if name_filter and name_filter not in test.name and not fnmatch.fnmatchcase(test.name, name_filter):
            continue
        trace_path = os.path.join(trace_dir, files[test.name]) if trace_dir else None
        outcomes.append(run_test(machine, test, trace_path=trace_path, trace_content=trace_content, otel=otel))
    return outcomes


def check_expectations(test: TestSpec, result: RunResult, observed: Observed | None = None) -> list[str]:
    """What the run did that the test did not expect, one message each; empty when it passes. `observed`
    holds the instructions and outputs of each visit, for `expect output` and `expect instruction`."""
    messages = []
    failure = result.failure
    if result.waiting is not None and result.waiting.kind == "approval":
        where = result.waiting.path or result.waiting.state
        messages.append(f"the run waits for a person to approve a call of {result.waiting.tool} at '{where}': the "
                        f"test scripts no answer (write 'approve {where}', 'reject {where} \"...\"' or "
                        f"'edit {where} {{ ... }}')")
    elif result.waiting is not None:
        messages.append(f"the run waits for an answer at state '{result.waiting.state}': the test scripts none "
                        f"(write 'reply {result.waiting.state} VALUE', or 'timeout {result.waiting.state}')")
    if test.expect_failure is not None:
        if failure is None:
            messages.append(f"expected a failure ({test.expect_failure}), "
                            f"but the run ended in '{result.final_state}'")
        elif test.expect_failure not in (failure.kind, failure.limit):
            messages.append(f"expected failure {test.expect_failure}, got {_failure_text(failure)}")
    elif failure is not None and not (failure.kind == "final" and test.expect_final == result.final_state):
        # (expecting a failing final state expects the failure it declares)
        messages.append(f"the run failed {_failure_text(failure)}")
    if test.expect_path is not None and list(test.expect_path) != list(result.path):
        messages.append("the path differs from the expected path")
    if test.expect_final is not None and result.final_state != test.expect_final:
        ended = f"ended in '{result.final_state}'" if result.final_state else "ended without a final state"
        messages.append(f"expected final state '{test.expect_final}', but the run {ended}")
    if test.has_expect_result:
        difference = typed_difference(test.expect_result, result.result)
        if difference is not None:
            expected_text, actual_text = _show(test.expect_result), _show(result.result)
            if expected_text == actual_text or _kind(test.expect_result) != _kind(result.result):
                expected_text += f" ({_kind(test.expect_result)})"
                actual_text += f" ({_kind(result.result)})"
            messages.append(f"expected result {expected_text}, got {actual_text}")
    for expectation in test.expectations:
        problem = _visit_problem(expectation, result, observed or {})
        if problem is not None:
            where = f" ({expectation.origin})" if expectation.origin else ""
            messages.append(f"{_expectation_text(expectation)}{where}: {problem}")
    for expected in test.expect_vars:
        where = f" ({expected.origin})" if expected.origin else ""
        if expected.name not in result.variables:
            messages.append(f"expect var {expected.name}{where}: the run has no variable '{expected.name}'")
            continue
        actual = result.variables[expected.name]
        difference = typed_difference(expected.value, actual, partial=True, subject="the value")
        if difference is not None:
            if not difference.startswith("the value "):
                difference += f"; the value is {_show(actual, 300)}"
            messages.append(f"expect var {expected.name}{where}: {difference}")
    return messages


def unused_script(machine: MachineSpec, test: TestSpec, calls: Iterable[tuple[str, str, int]]) -> list[str]:
    """One message for each reply, verdict, answer and timeout the test scripted that the run never asked
    for; `calls` are the (role, state, seq) of the replies served."""
    served = {(role, state, seq) for role, state, seq in calls}
    counts: dict[tuple[str, str], int] = {}
    messages = []
    for index, (kind, state, value) in enumerate(test.steps):
        role = script_role_of_step(machine, kind, state)
        seq = counts.get((role, state), 0)
        counts[role, state] = seq + 1
        if (role, state, seq) in served:
            continue
        origin = test.step_origins[index] if index < len(test.step_origins) else ""
        where = f" ({origin})" if origin else ""
        what = kind if kind in ("verdict", "timeout", "approval") else "answer" if role == "person" else "reply"
        if kind == "timeout":
            messages.append(f"timeout #{seq + 1} for state '{state}'{where} was never used: the run never asked")
            continue
        shown = "none" if kind == "verdict" and value is None else _show(value, 120)
        messages.append(f"{what} #{seq + 1} for state '{state}'{where} was never used: {shown}")
    if messages:
        messages.append("a test scripts only what its run asks for; remove the unused lines, or write "
                        "'allow unused replies' in the test")
    return messages


def typed_difference(expected: Any, actual: Any, *, partial: bool = False, where: str = "",
                     subject: str = "the value") -> str | None:
    """Where `actual` differs from `expected` as typed values, in words ("`.score` is 70, expected 88"), or
    None when they are equal. Text is not a number (`"1"` is not `1`), a boolean is not a number (`true`
    is not `1`), whole and decimal numbers compare by value (`1` is `1.0`). With `partial`, an object in
    `expected` checks only the fields it names; lists always compare item by item, lengths included."""
    expected, actual = _plain(expected), _plain(actual)
    label = f"`{where}` " if where else f"{subject} "
    kind, actual_kind = _kind(expected), _kind(actual)
    if kind != actual_kind:
        return (f"{label}is {_show(actual, 80)} ({actual_kind}), expected {_show(expected, 80)} "
                f"({kind})")
    if isinstance(expected, dict):
        for key, value in expected.items():
            if key not in actual:
                return f"`{where}.{key}` is missing, expected {_show(value, 80)}"
            found = typed_difference(value, actual[key], partial=partial, where=f"{where}.{key}")
            if found is not None:
                return found
        extra = [key for key in actual if key not in expected]
        if extra and not partial:
            return f"{label}has the unexpected field{'s' if len(extra) > 1 else ''} " + ", ".join(
                f"`{key}`" for key in extra)
        return None
    if isinstance(expected, list):
        for index, (want, got) in enumerate(zip(expected, actual)):
            found = typed_difference(want, got, partial=partial, where=f"{where}[{index}]")
            if found is not None:
                return found
        if len(expected) != len(actual):
            return f"{label}has {len(actual)} item(s), expected {len(expected)}"
        return None
    if expected != actual:
        return f"{label}is {_show(actual, 80)}, expected {_show(expected, 80)}"
    return None


def _kind(value: Any) -> str:
    value = _plain(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _expectation_text(expectation: ExpectationSpec) -> str:
    visit = f" visit {expectation.visit}" if expectation.visit != 1 else ""
    return f"expect {expectation.kind} {expectation.state}{visit}"


def _visit_problem(expectation: ExpectationSpec, result: RunResult, observed: Observed) -> str | None:
    """What is wrong with one `expect output` or `expect instruction`, or None when it holds."""
    state, visit, kind = expectation.state, expectation.visit, expectation.kind
    values = observed.get((kind, state), {})
    if visit not in values:
        ran = result.path.count(state)
        if ran >= visit:
            return f"visit {visit} of '{state}' ended before it had {'an' if kind == 'instruction' else 'its'} {kind}"
        times = {0: "never ran", 1: "ran once"}.get(ran, f"ran {ran} times")
        return f"'{state}' {times}, so it has no {kind} at visit {visit}"
    actual = values[visit]
    if expectation.contains:
        if not isinstance(actual, str):
            return f"the {kind} is {_kind(actual)}, not text: {_show(actual, 200)}"
        if str(expectation.value) in actual:
            return None
        return f"the {kind} does not contain {_show(expectation.value, 200)}; it is {_show(actual, 300)}"
    if kind == "instruction" and isinstance(actual, str) and isinstance(expectation.value, str):
        return _text_difference(expectation.value, actual)
    difference = typed_difference(expectation.value, actual, partial=True, subject="the output")
    if difference is None or difference.startswith("the output "):
        return difference
    return f"{difference}; the output is {_show(actual, 300)}"


def _text_difference(expected: str, actual: str) -> str | None:
    if expected == actual:
        return None
    at = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    start = max(at - 30, 0)
    return (f"the instruction differs from the expected text at character {at + 1}: expected "
            f"{_show(expected[start:at + 40])}, got {_show(actual[start:at + 40])} (the whole "
            f"instruction: {_show(actual, 300)})")


def format_outcome(outcome: TestOutcome) -> str:
    """One line for a pass; for a failure, expected and actual path side by side and what went wrong."""
    # a test's name, the spec's path, the states and what a tool or a reply produced reach these lines:
    # escaped, they cannot act on the terminal, and the environment's keys are redacted, as in a trace
    where = f"  ({outcome.origin})" if outcome.origin else ""
    if outcome.passed:
        return printable(redact(f"PASS  {outcome.name}")).replace("\n", "\\n")
    lines = [f"FAIL  {outcome.name}{where}".replace("\n", "\\n")]
    if outcome.expected_path is not None:
        lines += _path_columns(outcome.expected_path, outcome.actual_path)
    elif outcome.actual_path:
        lines.append("      path: " + " -> ".join(outcome.actual_path))
    lines += [f"      {message}" for message in outcome.messages]
    return printable(redact("\n".join(lines)))


def _path_columns(expected: list[str], actual: list[str]) -> list[str]:
    width = max([len("expected path"), *map(len, expected)]) + 4
    lines = [f"      {'expected path':<{width}}actual path"]
    first_difference = next((i for i, (e, a) in enumerate(zip(expected, actual)) if e != a),
                            None if len(expected) == len(actual) else min(len(expected), len(actual)))
    for index in range(max(len(expected), len(actual))):
        left = expected[index] if index < len(expected) else "-"
        right = actual[index] if index < len(actual) else "-"
        marker = "  >>  " if index == first_difference else "      "
        lines.append(f"{marker}{left:<{width}}{right}".rstrip())
    return lines


def trace_file_names(names: Iterable[str]) -> dict[str, str]:
    """The trace file of each test of a machine: its name with each run of other characters than letters,
    digits, `.`, `_` and `-` one `-` (`good draft.jsonl` -> `good-draft.jsonl`); a name that another test's
    shares that way (`a b`, `a-b`, `a!b`), or that is too long for a file name, keeps a hash of itself
    (file_names.py), so no two tests write into one file."""
    readable = {name: re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "test" for name in names}
    counts = Counter(readable.values())
    return {name: (file if counts[file] == 1 and len(file) <= MAX_NAME_CHARS else file_name_for(name, "test", "-"))
            + ".jsonl" for name, file in readable.items()}


def _failure_text(failure: Failure) -> str:
    kind = f"{failure.kind}: {failure.limit}" if failure.limit else failure.kind
    where = f" at {failure.origin}" if failure.origin else ""  # the .fsm line of the construct that failed
    return f"({kind}){where}: {failure.message}"


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None and not isinstance(value, type):
        return dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _show(value: Any, limit: int | None = None) -> str:
    """A value as JSON on one line, cut to about `limit` characters (…) when one is given."""
    plain = _plain(value)
    try:
        text = json.dumps(plain, ensure_ascii=False, sort_keys=not isinstance(plain, str))
    except (TypeError, ValueError):
        text = repr(plain)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
