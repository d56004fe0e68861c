"""A machine whose script would loop forever ends on a bound or a limit, through the command line: exit 1,
and the JSON result names the failure (kind, and the limit) — never a silent last output."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import compile_runner, read_events, runner_process

from statewright import cli

LOOP = "the work is unfinished"


def looping_spec(limits: str, loop_bound: int) -> str:
    return f"""\
machine looping {{
    model "openai/gpt-4o-mini"
    limits {{
        {limits}
    }}
    agent worker {{
        prompt "You work."
    }}
    start state work {{
        agent worker
        do "Work."
        -> check
    }}
    state check {{
        agent worker
        do "Check."
        when output == "finished" -> done
        when "{LOOP}" -> work max {loop_bound}
    }}
    final state done
}}
"""


def endless_script(delay: float = 0.0) -> dict[str, Any]:
    """Replies that never say "finished", and a verifier that always sends the run round again."""
    def reply(value: Any) -> Any:
        return {"value": value, "delay": delay} if delay else value

    return {"agent": {"work": [reply("more work")] * 200, "check": [reply("not yet")] * 200},
            "verifier": {"check": [reply({"choice": LOOP, "reason": "more to do", "feedback": "go on"})] * 200}}


def write_case(tmp_path: Path, limits: str, loop_bound: int, delay: float = 0.0) -> tuple[Path, Path]:
    spec, script = tmp_path / "looping.fsm", tmp_path / "script.json"
    spec.write_text(looping_spec(limits, loop_bound), encoding="utf-8")
    script.write_text(json.dumps(endless_script(delay)), encoding="utf-8")
    return spec, script


# the token limit stops the run before a call whose prompt would take it past 400 tokens, not once spent
@pytest.mark.parametrize("limits, loop_bound, delay, kind, limit, steps, says", [
    ("steps 7", 50, 0.0, "limit", "steps", 7, "exhausted before the next step"),
    ("steps 100", 3, 0.0, "bound", None, 8, None),
    ("tokens 400", 50, 0.0, "limit", "tokens", None, "would be exceeded by the next model call"),
    ("seconds 1", 50, 0.2, "limit", "seconds", None, "exhausted before the next model call"),
], ids=["step-limit", "edge-bound", "token-limit", "time-limit"])
def test_an_endless_loop_ends_with_the_typed_failure(limits: str, loop_bound: int, delay: float, kind: str,
                                                      limit: str | None, steps: int | None, says: str | None,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, script = write_case(tmp_path, limits, loop_bound, delay)
    trace = tmp_path / "trace.jsonl"
    code = cli.main(["run", str(spec), "--script", str(script), "--trace", str(trace)])
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert code == 1
    assert result["status"] == "failed" and result["final_state"] is None and result["result"] is None
    failure = result["failure"]
    assert (failure["kind"], failure["limit"]) == (kind, limit)
    assert f"run failed ({'limit ' + limit if limit else kind})" in captured.err
    if limit:
        assert f"limit {limit} {says}" in failure["message"]
    else:
        assert "no transition can fire" in failure["message"] and failure["state"] == "check"
    if steps is not None:
        assert len(result["path"]) == steps
    events = read_events(trace)
    ending = [e for e in events if e["event"] == "transition"][-1]
    assert (ending["to"], ending["cause"]) == (None, kind)
    assert events[-1]["event"] == "run_end" and events[-1]["failure"]["kind"] == kind


def test_the_generated_runner_ends_an_endless_loop_on_its_step_limit(tmp_path: Path) -> None:
    spec, script = write_case(tmp_path, "steps 5", 50)
    runner = compile_runner(spec, tmp_path / "looping_runner.py")
    done = runner_process(sys.executable, runner, "--script", str(script), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["path"] == ["work", "check", "work", "check", "work"]
    failure = result["failure"]
    assert (failure["kind"], failure["limit"], failure["state"]) == ("limit", "steps", "check")
