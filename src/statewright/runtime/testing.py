"""The test-block runner: runs a machine against its scripted replies and checks what the test expects."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

from .engine import Engine
from .result import Failure, RunResult
from .scripted import Script, ScriptedClient
from .spec import MachineSpec, TestSpec
from .sync import run_sync
from .trace import Trace


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
             trace_content: bool = False) -> TestOutcome:
    """`arun_test` for synchronous code."""
    return run_sync(arun_test(machine, test, trace_path=trace_path, trace_content=trace_content))  # type: ignore[no-any-return]


async def arun_test(machine: MachineSpec, test: TestSpec, *, trace_path: str | None = None,
                    trace_content: bool = False) -> TestOutcome:
    """Runs one test block: its replies and verdicts play the models, then its expectations are checked.

    Every model — agents, fallbacks, verifier — answers from the test's own script, in process: no model,
    no network, no litellm. A run that asks for more replies than the test scripted fails the test; it
    never raises.
    """
    script = Script.from_test(machine, test)
    client = ScriptedClient(script)
    trace = Trace(trace_path, content=trace_content) if trace_path else None
    expected = list(test.expect_path) if test.expect_path is not None else None
    # tools a test lets run (an agent's scripted tool calls) work in a directory that goes with the test
    workspace = tempfile.TemporaryDirectory(prefix="statewright-test-")
    try:
        # a directory the registry makes, so it belongs to the user tool code runs as (see docs/tools.md)
        # a test needs no secrets: scripted tools never run, and a real tool that needs one fails its call
        engine = Engine(machine, client=client, trace=trace, script=script,
                        workspace=os.path.join(workspace.name, "workspace"), require_secrets=False)
        result = await engine.arun(dict(test.inputs))
    except Exception as error:  # noqa: BLE001 - a test reports what broke instead of crashing the suite
        crashed = f"the run crashed: {type(error).__name__}: {error}"
        return TestOutcome(test.name, False, expected, [], [crashed], None, test.origin)
    finally:
        if trace is not None:
            trace.close()
        workspace.cleanup()
    messages = check_expectations(test, result)
    return TestOutcome(test.name, not messages, expected, list(result.path), messages, result, test.origin)


def run_tests(machine: MachineSpec, *, trace_dir: str | None = None, trace_content: bool = False,
              name_filter: str | None = None) -> list[TestOutcome]:
    """Runs the machine's test blocks in source order; `name_filter` is a substring or glob of test names.

    With `trace_dir`, each test writes its trace to `<trace_dir>/<test name>.jsonl`.
    """
    outcomes = []
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
    for test in machine.tests:
        if name_filter and name_filter not in test.name and not fnmatch.fnmatchcase(test.name, name_filter):
            continue
        trace_path = os.path.join(trace_dir, _testing_file_name(test.name) + ".jsonl") if trace_dir else None
        outcomes.append(run_test(machine, test, trace_path=trace_path, trace_content=trace_content))
    return outcomes


def check_expectations(test: TestSpec, result: RunResult) -> list[str]:
    """What the run did that the test did not expect, one message each; empty when it passes."""
    messages = []
    failure = result.failure
    if test.expect_failure is not None:
        if failure is None:
            messages.append(f"expected a failure ({test.expect_failure}), "
                            f"but the run ended in '{result.final_state}'")
        elif test.expect_failure not in (failure.kind, failure.limit):
            messages.append(f"expected failure {test.expect_failure}, got {_testing_failure_text(failure)}")
    elif failure is not None:
        messages.append(f"the run failed {_testing_failure_text(failure)}")
    if test.expect_path is not None and list(test.expect_path) != list(result.path):
        messages.append("the path differs from the expected path")
    if test.expect_final is not None and result.final_state != test.expect_final:
        ended = f"ended in '{result.final_state}'" if result.final_state else "ended without a final state"
        messages.append(f"expected final state '{test.expect_final}', but the run {ended}")
    if test.has_expect_result and not _testing_same_result(result.result, test.expect_result):
        expected_text, actual_text = _testing_show(test.expect_result), _testing_show(result.result)
        messages.append(f"expected result {expected_text}, got {actual_text}")
    return messages


def format_outcome(outcome: TestOutcome) -> str:
    """One line for a pass; for a failure, expected and actual path side by side and what went wrong."""
    where = f"  ({outcome.origin})" if outcome.origin else ""
    if outcome.passed:
        return f"PASS  {outcome.name}"
    lines = [f"FAIL  {outcome.name}{where}"]
    if outcome.expected_path is not None:
        lines += _testing_path_columns(outcome.expected_path, outcome.actual_path)
    elif outcome.actual_path:
        lines.append("      path: " + " -> ".join(outcome.actual_path))
    lines += [f"      {message}" for message in outcome.messages]
    return "\n".join(lines)


def _testing_path_columns(expected: list[str], actual: list[str]) -> list[str]:
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


def _testing_file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "test"


def _testing_failure_text(failure: Failure) -> str:
    kind = f"{failure.kind}: {failure.limit}" if failure.limit else failure.kind
    where = f" at {failure.origin}" if failure.origin else ""  # the .fsm line of the construct that failed
    return f"({kind}){where}: {failure.message}"


def _testing_plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None and not isinstance(value, type):
        return dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _testing_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_testing_plain(v) for v in value]
    return value


def _testing_same_result(actual: Any, expected: Any) -> bool:
    actual, expected = _testing_plain(actual), _testing_plain(expected)
    if actual == expected:
        return True
    # a final state's result template renders text: `expect result 90` matches "90"
    is_number = isinstance(expected, (int, float)) and not isinstance(expected, bool)
    return is_number and isinstance(actual, str) and actual.strip() == str(expected)


def _testing_show(value: Any) -> str:
    plain = _testing_plain(value)
    if isinstance(plain, str):
        return json.dumps(plain, ensure_ascii=False)
    try:
        return json.dumps(plain, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(plain)
