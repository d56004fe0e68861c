"""The runner's options for running without a model, capping replies and choosing where tools work, through
`statewright run` and the Python face."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT, read_events

from statewright import api, cli
from statewright.runtime.runner_cli import arun_machine as arun
from statewright.runtime.runner_cli import run_machine as run
from statewright.runtime.scripted import Script, ScriptedClient

SOFTWARE_TEAM = ROOT / "examples" / "software_team.fsm"
EVALUATOR = ROOT / "examples" / "evaluator_optimizer.fsm"

TEAM_SCRIPT: dict[str, Any] = {
    "agent": {
        "write_prd": [{"goal": "g", "user_stories": [], "requirements": [], "out_of_scope": []}],
        "design": [{"summary": "s", "files": [{"path": "tips.py", "purpose": "split()"}], "interfaces": ""}],
        # the one file of the design is element 0 of the map: its replies are its own, a tool call first
        "implement[0]": [
            {"tool_calls": [{"name": "std_write_file", "arguments": {"path": "tips.py", "content": "X = 1\n"}}]},
            {"path": "tips.py", "summary": "X"},
        ],
        "write_tests": [{"test_code": "raise SystemExit(3)", "summary": "tips.py written"}],
    },
    # the tests "pass" because the script says so: the test code above, which would fail, never runs
    "tool": {"run_tests": [{"exit_code": 0, "stdout": "", "stderr": "", "timed_out": False}]},
}


def statewright_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code = cli.main(["run", *args])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


def test_a_script_runs_a_machine_without_any_model_and_stands_in_for_action_tools(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "team.json"
    script.write_text(json.dumps(TEAM_SCRIPT), encoding="utf-8")
    trace = tmp_path / "trace.jsonl"

    code, result, _ = statewright_run(capsys, str(SOFTWARE_TEAM), "--input", "requirement=a tip calculator",
                                      "--script", str(script), "--run-id", "demo", "--trace", str(trace))

    assert code == 0 and result is not None and result["result"] == "tips.py written"
    assert result["path"] == ["write_prd", "design", "implement", "write_tests", "run_tests", "done"]
    events = read_events(trace)
    # the script answers for the spec's own models: the trace names them, as a real run's would
    team: Any = api.runtime_machine(api.check_file(SOFTWARE_TEAM))
    named = {a.model for a in team.agents.values()} | {team.verifier_model}
    models = {e["model"] for e in events if e["event"] == "llm_call"}
    assert models and models <= named
    [tool] = [e for e in events if e["event"] == "tool_call" and e["state"] == "run_tests"]
    assert tool["scripted"] is True
    # the agent's own tool call did run, in the run's default workspace
    workspace = tmp_path / ".statewright" / "runs" / "demo" / "workspace"
    assert result["workspace"] == str(workspace) and events[0]["workspace"] == str(workspace)
    assert (workspace / "tips.py").read_text(encoding="utf-8") == "X = 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".statewright", "team.json", "trace.jsonl"]


def test_a_run_whose_tools_are_never_used_creates_no_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "agent": {"outline": ["1. Intro (25 min)"],
                  "evaluate": [{"decision": "accept", "strengths": [], "problems": []}]},
        "verifier": {"outline": [{"choice": "every section has a length in minutes", "reason": "",
                                  "feedback": ""}]},
    }), encoding="utf-8")

    code, result, _ = statewright_run(capsys, str(EVALUATOR), "--input", "subject=FSMs", "--script", str(script),
                                      "--run-id", "quiet")

    assert code == 0 and result is not None
    assert result["workspace"] == str(tmp_path / ".statewright" / "runs" / "quiet" / "workspace")
    assert not (tmp_path / ".statewright").exists()


def test_a_resumed_run_keeps_the_workspace_it_started_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    short = json.loads(json.dumps(TEAM_SCRIPT))
    short["agent"]["implement[0]"].pop()  # the engineer writes its file, then the script runs out
    (tmp_path / "short.json").write_text(json.dumps(short))
    (tmp_path / "full.json").write_text(json.dumps(TEAM_SCRIPT))
    chosen = tmp_path / "chosen"
    common = [str(SOFTWARE_TEAM), "--checkpoint", str(tmp_path / "runs.db")]

    code, result, _ = statewright_run(capsys, *common, "--input", "requirement=tips", "--run-id", "r1",
                                      "--workspace", str(chosen), "--script", str(tmp_path / "short.json"))
    assert code == 1 and result is not None and result["failure"]["kind"] == "script"
    assert result["workspace"] == str(chosen) and (chosen / "tips.py").exists()
    (chosen / "tips.py").unlink()

    code, result, _ = statewright_run(capsys, *common, "--resume", "r1", "--script", str(tmp_path / "full.json"))
    assert code == 0 and result is not None and result["result"] == "tips.py written"
    assert result["workspace"] == str(chosen) and (chosen / "tips.py").exists()
    assert not (tmp_path / ".statewright").exists()


@pytest.mark.parametrize("args, message", [
    (["--script", "missing.json"], "cannot read --script missing.json"),
    (["--script", "broken.json"], "is not valid JSON"),
    (["--script", "shapeless.json"], "unknown script role 'agents'"),
    (["--script", "broken.json", "--model-map", "*=openai/x"], "cannot be combined with --model-map"),
    (["--max-tokens", "0"], "--max-tokens: expected one or more, got 0"),
    (["--retries", "-1"], "--retries: expected zero or more, got -1"),
    (["--retry-delay", "soon"], "--retry-delay: expected a number of seconds, got 'soon'"),
    (["--timeout", "0"], "--timeout: expected a number of seconds more than 0, got 0"),
    (["--timeout", "inf"], "--timeout: expected a finite number of seconds, zero or more, got inf"),
])
def test_bad_runner_options_are_usage_errors(args: list[str], message: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.json").write_text("{agent: ")
    (tmp_path / "shapeless.json").write_text(json.dumps({"agents": {}}))

    code, result, err = statewright_run(capsys, str(EVALUATOR), "--input", "subject=FSMs", *args)

    assert code == 2 and result is None
    assert message in err and "Traceback" not in err


def test_the_python_face_takes_a_script_max_tokens_and_retry_options() -> None:
    machine: Any = api.runtime_machine(api.check_file(EVALUATOR))
    replies = {
        "agent": {"outline": ["1. Intro (25 min)"],
                  "evaluate": [{"decision": "accept", "strengths": ["short"], "problems": []}]},
        "verifier": {"outline": [{"choice": "every section has a length in minutes", "reason": "",
                                  "feedback": ""}]},
    }
    client = ScriptedClient(Script.from_json(replies))
    result = run(machine, {"subject": "FSMs"}, client=client, max_tokens=32, retries=0, retry_delay=0.0)
    assert result.ok and result.result == "1. Intro (25 min)"
    assert [c["options"]["max_tokens"] for c in client.received] == [32, 32, 32]

    again = ScriptedClient(Script.from_json(replies))
    result = asyncio.run(arun(machine, {"subject": "FSMs"}, client=again, max_tokens=8))
    assert result.ok and {c["options"]["max_tokens"] for c in again.received} == {8}
    # given as data, a script answers just the same
    assert run(machine, {"subject": "FSMs"}, script=replies).ok
    assert result.workspace is not None and result.workspace.endswith(f"{result.run_id}/workspace")
