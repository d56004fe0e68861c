"""Every bundled example, end to end: its test blocks pass under `statewright test` and under its generated
runner in an environment without statewright, and both execute them identically, trace for trace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import (
    EXAMPLE_IDS,
    EXAMPLES,
    cli,
    compile_runner,
    import_runner,
    normalized_trace,
    runner_process,
    runtime_module_of,
)

from statewright import api
from statewright.runtime.testing import run_test


def _test_names(example: Path, *, called: bool = False) -> list[str]:
    """The example's test blocks; with `called`, also those of the machines it runs, named after their
    machine (as a runner's --selftest names them)."""
    machine: Any = api.runtime_machine(api.check_file(example))
    names = [t.name for t in machine.tests]
    assert names, f"{example.name} has no test blocks"
    if called:
        names += [f"{callee.name}: {t.name}" for callee in machine.machines.values() for t in callee.tests]
    return names


@pytest.mark.parametrize("example", EXAMPLES, ids=EXAMPLE_IDS)
def test_statewright_test_passes_every_test_block(example: Path) -> None:
    done = cli("test", str(example))
    assert done.returncode == 0, done.stdout + done.stderr
    names = _test_names(example)
    assert done.stdout.splitlines() == [f"PASS  {name}" for name in names]
    assert f"{len(names)} passed, 0 failed" in done.stderr


@pytest.mark.parametrize("form", ["package", "standalone"])
@pytest.mark.parametrize("example", EXAMPLES, ids=EXAMPLE_IDS)
def test_the_generated_runner_passes_its_self_tests_without_statewright(example: Path, form: str,
                                                                        bare_python: Path, tmp_path: Path) -> None:
    """Each form, run as a script from another directory by a Python without statewright (and no
    PYTHONPATH): the default runner with only the runtime package beside it, the standalone one alone."""
    (tmp_path / "out").mkdir()
    runner = compile_runner(example, tmp_path / "out" / f"{example.stem}_runner.py",
                            *(["--standalone"] if form == "standalone" else []))
    beside = sorted(p.name for p in runner.parent.iterdir())
    assert beside == sorted([runner.name, *(["statewright_runtime"] if form == "package" else [])])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = runner_process(bare_python, runner, "--selftest", cwd=elsewhere, env={"PYTHONPATH": None})
    assert done.returncode == 0, done.stdout + done.stderr
    names = _test_names(example, called=True)  # the runner holds the machines the example runs, and tests them
    assert done.stdout.splitlines() == [f"PASS  {name}" for name in names]
    assert f"{len(names)} passed, 0 failed" in done.stderr


@pytest.mark.parametrize("form", ["package", "standalone"])
@pytest.mark.parametrize("example", EXAMPLES, ids=EXAMPLE_IDS)
def test_interpreted_and_generated_runs_write_the_same_traces(example: Path, form: str, tmp_path: Path) -> None:
    """Same test block, same machine: `statewright run`'s engine and the engine of the runtime a runner
    imports (the package beside it, or a one-file runner's own) produce the same events in the same
    order, with the same content (see VOLATILE_TRACE_FIELDS for what may differ)."""
    comp = api.check_file(example)
    interpreted = api.runtime_machine(comp)
    runner_path = tmp_path / f"{example.stem}_runner.py"  # (the spec named as `statewright run` names it)
    runner_path.write_text(api.generate_runner(comp, standalone=form == "standalone"), encoding="utf-8")
    if form == "package":
        api.write_runtime_package(tmp_path / api.RUNTIME_DIR)
    runner = import_runner(runner_path, f"e2e_runner_{example.stem}")
    run_runner_test = runtime_module_of(runner, "testing").run_test
    try:
        assert [t.name for t in runner.MACHINE.tests] == [t.name for t in interpreted.tests]  # type: ignore[attr-defined]
        for index, (ours, theirs) in enumerate(zip(interpreted.tests, runner.MACHINE.tests)):  # type: ignore[attr-defined]
            ours_trace, theirs_trace = tmp_path / f"interpreted-{index}.jsonl", tmp_path / f"generated-{index}.jsonl"
            expected = run_test(interpreted, ours, trace_path=str(ours_trace), trace_content=True)  # type: ignore[arg-type]
            actual = run_runner_test(runner.MACHINE, theirs, trace_path=str(theirs_trace), trace_content=True)
            assert (actual.passed, actual.actual_path, actual.messages) == (
                expected.passed, expected.actual_path, expected.messages), ours.name
            actual_json, expected_json = actual.result.to_json(), expected.result.to_json()  # type: ignore[union-attr]
            for volatile in ("run_id", "workspace"):
                actual_json.pop(volatile), expected_json.pop(volatile)
            assert actual_json == expected_json, ours.name
            expected_events = normalized_trace(ours_trace)
            assert {e["event"] for e in expected_events} >= {"run_start", "state_enter", "llm_call", "transition",
                                                             "run_end"}
            assert normalized_trace(theirs_trace) == expected_events, ours.name
    finally:
        sys.modules.pop(f"e2e_runner_{example.stem}", None)


def test_support_triage_pauses_under_statewright_run_and_a_generated_runner_resumes_it(bare_python: Path,
                                                                                       tmp_path: Path) -> None:
    """The example's urgent ticket waits for a person in one process (`statewright run`, exit status 4) and
    is answered in another, by the example's generated runner without statewright installed: the resumed
    run does not call the model again for the steps before the question."""
    import json

    example = next(p for p in EXAMPLES if p.stem == "support_triage")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {
        "classify": [{"product": "api", "urgency": 5, "tags": ["outage"], "summary": "All calls fail."}],
        "draft_escalation": ["We are on it."]}}), encoding="utf-8")
    db = tmp_path / "runs.sqlite"
    started = cli("run", str(example), "--input", "ticket=Every call returns 500.", "--script", str(script),
                  "--checkpoint", str(db), "--run-id", "ticket-1", cwd=tmp_path)
    assert started.returncode == 4, started.stderr
    waiting = json.loads(started.stdout)["waiting"]
    assert waiting["state"] == "approve" and "Draft reply:\nWe are on it." in waiting["question"]
    runner = compile_runner(example, tmp_path / "support_triage_runner.py")
    refused = runner_process(bare_python, runner, "--checkpoint", str(db), "--resume", "ticket-1", "--answer",
                             '{"approve": "yes"}', cwd=tmp_path)
    assert refused.returncode == 2 and "approve" in refused.stderr, refused.stderr
    done = runner_process(bare_python, runner, "--checkpoint", str(db), "--resume", "ticket-1", "--answer",
                          '{"approve": true, "reply": "Fixed: a bad deploy, rolled back."}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["path"] == ["classify", "draft_escalation", "approve", "sent"]
    assert result["result"] == "Fixed: a bad deploy, rolled back."
    assert result["usage"]["llm_calls"] == 2  # the two scripted calls before the question, made once


def test_newsroom_waits_inside_its_writing_team_and_a_generated_runner_resumes_it_there(
        bare_python: Path, tmp_path: Path) -> None:
    """The project example pauses at the approval inside the call of its writing team (`write/approve`,
    exit status 4) under `statewright run`; its runner, without statewright, resumes it there: the
    research calls, the brief and the draft are not made again, and the run ends as the person says."""
    import json

    example = next(p for p in EXAMPLES if p.stem == "newsroom")
    findings = {"summary": "FSMs halt.", "sources": [{"title": "Automata", "url": "https://example.org/a"}]}
    holds = {"verdict": "holds", "missing": ""}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {
        "investigate[0]/gather": [findings], "investigate[0]/check": [holds], "investigate[0]/report": [findings],
        "brief": [{"headline": "FSMs", "claim": "FSMs halt", "points": ["bounds"]}],
        "fact_check/gather": [findings], "fact_check/check": [holds], "fact_check/report": [findings],
        "write/draft": ["Bounded machines halt."]}}), encoding="utf-8")
    db = tmp_path / "runs.sqlite"
    started = cli("run", str(example), "--input", 'topics=["FSMs"]', "--script", str(script), "--checkpoint",
                  str(db), "--run-id", "story-1", cwd=tmp_path)
    assert started.returncode == 4, started.stderr
    waiting = json.loads(started.stdout)["waiting"]
    assert waiting["state"] == "approve" and 'Publish "FSMs"?' in waiting["question"]
    assert "at state write/approve" in started.stderr
    assert f"statewright resume story-1 --checkpoint {db} --answer" in started.stderr
    runner = compile_runner(example, tmp_path / "newsroom_runner.py")
    done = runner_process(bare_python, runner, "--checkpoint", str(db), "--resume", "story-1", "--script",
                          str(script), "--answer", '{"approve": true, "notes": ""}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["path"] == ["investigate", "brief", "fact_check", "write", "done"]
    assert result["result"] == "Bounded machines halt."
    assert result["usage"]["llm_calls"] == 8  # each scripted call before the question, made once
