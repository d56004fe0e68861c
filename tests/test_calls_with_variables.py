"""Run variables and approvals in machines that run machines: each call of a machine starts its variables
afresh and keeps them to itself (its caller reads what it did only through the outcome's result); a test
answers a called machine's tool call by path; a run paused at an approval inside one call of a map of calls
resumes with that call's variables, and its trace is the trace of a run that never paused — through
`statewright test`, `run`, `resume`, the Python API and a generated runner."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, read_events, runner_process

import statewright
from statewright.api import check_file

TEAM = '''machine team {
    input topic: str
    returns str

    var notes: list[str] = []

    tool std.shell

    agent worker {
        prompt "You work on a topic."
        tools [std.shell]
    }

    start state work {
        agent worker
        do "Work on {{ topic }} ({{ notes | length }} notes so far)"
        ask before [std.shell]
        append notes <- output
        when len(notes) < 2 -> work max 2
        -> done
    }

    final state done {
        result "{{ notes | join('+') }}"
    }

    test "two notes" {
        input { topic "t" }
        reply work "a"
        reply work "b"
        expect var notes ["a", "b"]
        expect result "a+b"
    }
}
'''

# The caller has a variable of the callee's name: they are two variables, one in each machine.
LEAD = '''use "team.fsm"

machine lead {
    input topics: list[str]

    var notes: list[str] = []
    var results: list[str] = []

    start state investigate {
        for topic in topics max 3
        run team(topic = topic)
        append results <- output.result or "failed"
        -> again
    }

    state again {
        run team(topic = "again: " + results[0])
        append notes <- output.result or "failed"
        -> done
    }

    final state done {
        result "{{ results | join(',') }} | {{ notes | join(',') }}"
    }

    test "each call has its own variables" {
        input { topics ["x", "y"] }
        reply investigate[0]/work "x1"
        reply investigate[0]/work "x2"
        reply investigate[1]/work "y1"
        reply investigate[1]/work call std.shell(command = "echo hi")
        approve investigate[1]/work std.shell
        reply investigate[1]/work "y2"
        reply again/work call std.shell(command = "rm -r /")
        reject again/work "not that"
        reply again/work call std.shell(command = "ls /nowhere")
        edit again/work { command "echo edited" }
        reply again/work "z1"
        reply again/work "z2"
        expect var results ["x1+x2", "y1+y2"]
        expect var notes ["z1+z2"]
        expect result "x1+x2,y1+y2 | z1+z2"
    }
}
'''

SHELL_CALL = {"tool_calls": [{"name": "std.shell", "arguments": {"command": "echo hi"}}]}
REPLIES = {"investigate[0]/work": ["x1", "x2"], "investigate[1]/work": ["y1", SHELL_CALL, "y2"],
           "again/work": ["z1", "z2"]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team.fsm").write_text(TEAM, encoding="utf-8")
    (tmp_path / "lead.fsm").write_text(LEAD, encoding="utf-8")
    return tmp_path / "lead.fsm"


def script_file(path: Path, person: dict[str, Any] | None = None) -> Path:
    path.write_text(json.dumps({"agent": REPLIES, **({"person": person} if person else {})}), encoding="utf-8")
    return path


def test_each_call_keeps_its_variables_and_a_test_answers_its_tool_calls_by_path(project: Path) -> None:
    done = cli("test", str(project.parent))  # the folder: both files' tests
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  each call has its own variables" in done.stdout and "PASS  two notes" in done.stdout
    # the caller's variables are its own: the callee's `notes` is in no result of the caller's
    result = statewright.load(project).run({"topics": ["x", "y"]}, script=json.loads(
        script_file(project.parent / "s.json", {"investigate[1]/work": [{"answer": "approve"}]}).read_text()))
    assert result.ok, result.failure
    assert result.variables == {"notes": ["z1+z2"], "results": ["x1+x2", "y1+y2"]}
    # a call's output is its outcome: what the callee's variables held reaches the caller through `result`
    assert [o.result for o in result.outputs["investigate"]] == ["x1+x2", "y1+y2"]


def test_a_generated_runner_of_the_project_passes_the_same_tests(project: Path) -> None:
    runner = project.parent / "lead_runner.py"
    assert cli("compile", str(project), "-o", str(runner)).returncode == 0
    selftest = runner_process(sys.executable, runner, "--selftest", cwd=project.parent)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    assert "PASS  each call has its own variables" in selftest.stdout and "PASS  team: two notes" in selftest.stdout


def test_approval_steps_by_path_are_checked_against_the_called_machine(project: Path) -> None:
    text = LEAD.replace("approve investigate[1]/work std.shell", "approve investigate[1]/wrok std.shell")
    text = text.replace("reject again/work", "reject again/work std.python")
    text = text.replace("edit again/work {", "edit investigate/work {")
    project.write_text(text, encoding="utf-8")
    found = [(d.code, d.span.source.position(d.span.start).line if d.span else 0)
             for d in check_file(str(project)).diagnostics]
    line = {piece: next(i for i, ln in enumerate(text.splitlines(), 1) if piece in ln)
            for piece in ("/wrok", "std.python", "edit investigate/work")}
    assert ("SW6101", line["/wrok"]) in found  # the called machine has no such state
    assert ("SW6083", line["std.python"]) in found  # its state does not ask before that tool
    assert ("SW6102", line["edit investigate/work"]) in found  # a map of calls: which call?
    assert len(found) == 3, found


def _normalized(path: Path) -> list[dict[str, Any]]:
    """A trace's events without what differs between runs doing the same (times, durations, ids, paths),
    and without the events a pause adds (the waiting, the runs' ends at the pause, their resumed starts)."""
    out = []
    for event in read_events(path):
        if event["event"] == "waiting" or event.get("status") == "waiting" or event.get("resumed"):
            continue
        out.append({k: v for k, v in event.items()
                    if k not in ("time", "seq", "seconds", "run_id", "workspace", "latency_ms", "asked_at")})
    return out


def test_a_run_paused_inside_a_call_resumes_with_its_variables_and_the_trace_of_a_run_never_paused(
        project: Path) -> None:
    folder = project.parent
    whole = cli("run", str(project), "--input", 'topics=["x","y"]', "--quiet", "--trace", str(folder / "whole.jsonl"),
                "--trace-content", "--script", str(script_file(folder / "whole.json",
                                                                {"investigate[1]/work": [{"answer": "approve"}]})))
    assert whole.returncode == 0, whole.stderr
    script = str(script_file(folder / "paused.json"))
    common = ["--checkpoint", str(folder / "runs.db"), "--quiet", "--trace", str(folder / "paused.jsonl"),
              "--trace-content", "--script", script]
    first = cli("run", str(project), "--input", 'topics=["x","y"]', "--run-id", "r1", *common)
    assert first.returncode == 4, first.stderr
    waiting = json.loads(first.stdout)
    assert waiting["waiting"]["path"] == "investigate[1]/work" and waiting["waiting"]["kind"] == "approval"
    # the caller's variables only; the elements' updates apply at the join, after the pause
    assert waiting["variables"] == {"notes": [], "results": []}
    resumed = cli("resume", "r1", "--answer", "approve", *common)
    assert resumed.returncode == 0, resumed.stderr
    ended = json.loads(resumed.stdout)
    # the call resumed with the note it had made before the pause ("y1"): the same result as a whole run
    assert ended["result"] == json.loads(whole.stdout)["result"] == "x1+x2,y1+y2 | z1+z2"
    assert ended["variables"] == json.loads(whole.stdout)["variables"]
    # every event of the paused call before the pause is in the trace, once, in the order of a whole run
    assert _normalized(folder / "paused.jsonl") == _normalized(folder / "whole.jsonl")
