"""Final states that do work, failing final states, a model for one state, and per-visit stay budgets —
through the CLI, the Python API and a generated runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import statewright
from statewright.cli import main
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.scripted import Script, ScriptedClient

SPEC = '''machine helpdesk {
    input question: str

    agent solver {
        prompt "You answer support questions."
    }

    agent writer {
        prompt "You write short replies."
        model "openai/gpt-4o-mini"
    }

    start state solve {
        agent solver
        model "openai/gpt-4o"
        do "Answer: {{ question }}"
        when "the answer is complete" -> reply
        when "the question cannot be answered" -> give_up
        otherwise stay max 1 per visit
    }

    final state reply {
        agent writer
        do "Write the reply to the customer from: {{ solve.output }}"
        result "Dear customer, {{ reply.output }}"
    }

    final state give_up {
        fail "no answer to {{ question }}"
    }

    test "a complete answer becomes the reply" {
        input {
            question "How do I export?"
        }
        reply solve "Use Settings > Export."
        verdict solve "the answer is complete"
        reply reply "go to Settings, then Export."
        expect path [solve, reply]
        expect result "Dear customer, go to Settings, then Export."
    }

    test "an impossible question fails the run" {
        input {
            question "What is the meaning of life?"
        }
        reply solve "I cannot say."
        verdict solve "the question cannot be answered"
        expect final give_up
        expect failure final
    }
}
'''


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "helpdesk.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


def _script(*, complete: bool) -> Script:
    verdict = "the answer is complete" if complete else "the question cannot be answered"
    return Script.from_json({
        "agent": {"solve": ["An answer."], "reply": ["A reply."]},
        "verifier": {"solve": [{"choice": verdict, "reason": "r", "feedback": ""}]},
    })


def test_the_test_blocks_pass_through_the_cli_and_the_runner(spec: Path, tmp_path: Path, capsys) -> None:
    assert main(["test", str(spec)]) == 0
    assert "2 passed, 0 failed" in capsys.readouterr().err
    runner = tmp_path / "runner.py"
    assert main(["compile", str(spec), "-o", str(runner)]) == 0
    done = subprocess.run([sys.executable, str(runner), "--selftest"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("PASS") == 2


def test_a_final_state_does_its_work_and_its_result_reads_its_own_output(spec: Path) -> None:
    machine = statewright.load(spec)
    client = ScriptedClient(_script(complete=True))
    result = machine.run({"question": "How?"}, client=client)
    assert result.status == "final" and result.final_state == "reply"
    assert result.result == "Dear customer, A reply."
    assert result.path == ["solve", "reply"]
    asked = [(r["state"], r["model"]) for r in client.received]
    # the state's own model for `solve`, the agent's model for the final state's work
    assert asked == [("solve", "openai/gpt-4o"), ("solve", "openai/gpt-4o-mini"), ("reply", "openai/gpt-4o-mini")]


def test_a_state_model_goes_through_the_model_map_like_any_other(spec: Path) -> None:
    machine = statewright.load(spec)
    client = ScriptedClient(_script(complete=True))
    machine.run({"question": "How?"}, client=client, model_map={"openai/gpt-4o": "local/big"})
    assert [r["model"] for r in client.received if r["role"] == "agent"] == ["local/big", "openai/gpt-4o-mini"]


def test_a_failing_final_state_fails_the_run_with_its_rendered_reason(spec: Path) -> None:
    result = statewright.load(spec).run({"question": "Why?"}, script=_script(complete=False))
    assert result.status == "failed" and not result.ok
    assert result.final_state == "give_up"
    assert result.failure is not None and result.failure.kind == "final"
    assert result.failure.message == "no answer to Why?"
    line = SPEC.splitlines().index("    final state give_up {") + 1
    assert result.failure.state == "give_up" and result.failure.origin == f"{spec}:{line}:5"
    assert result.result is None


def test_a_runner_exits_1_with_the_failure_in_its_json(spec: Path, tmp_path: Path) -> None:
    runner = tmp_path / "runner.py"
    assert main(["compile", str(spec), "-o", str(runner)]) == 0
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "agent": {"solve": ["x"]},
        "verifier": {"solve": [{"choice": "the question cannot be answered", "reason": "", "feedback": ""}]},
    }), encoding="utf-8")
    done = subprocess.run([sys.executable, str(runner), "--input", "question=Why?", "--script", str(script),
                           "--quiet"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "failed" and out["final_state"] == "give_up"
    assert out["failure"]["kind"] == "final" and out["failure"]["message"] == "no answer to Why?"


def test_batch_counts_a_failing_final_state_as_a_failure(spec: Path, tmp_path: Path, capsys) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"inputs": {"question": "Why?"}}) + "\n", encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "agent": {"solve": ["x"]},
        "verifier": {"solve": [{"choice": "the question cannot be answered", "reason": "", "feedback": ""}]},
    }), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    assert main(["batch", str(spec), "--inputs", str(cases), "--out", str(out), "--script", str(script),
                 "--quiet"]) == 1
    row = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert row["status"] == "failed" and row["failure"]["kind"] == "final"


def test_a_crash_in_a_final_states_work_resumes_there(spec: Path, tmp_path: Path) -> None:
    machine = statewright.load(spec)
    db = str(tmp_path / "runs.sqlite")

    class Crash(Exception):
        pass

    class CrashOnReply(ScriptedClient):
        async def acomplete(self, request):  # type: ignore[no-untyped-def]
            if request.state == "reply":
                raise Crash
            return await super().acomplete(request)

    with pytest.raises(Crash):
        machine.run({"question": "How?"}, client=CrashOnReply(_script(complete=True)), checkpoint=db,
                    run_id="r")
    client = ScriptedClient(_script(complete=True))
    result = machine.run(client=client, checkpoint=CheckpointStore(db), resume="r")
    assert result.ok and result.result == "Dear customer, A reply."
    assert [r["state"] for r in client.received] == ["reply"]  # solve is not asked again
    assert result.path == ["solve", "reply"]


PER_VISIT = '''machine retry {
    agent a {
        prompt "A."
    }

    start state solve {
        agent a
        do "Solve."
        when "ok" in output -> check
        otherwise stay max 1 BUDGET
    }

    state check {
        agent a
        do "Check."
        when "back" in output -> solve max 1
        otherwise -> done
    }

    final state done
}
'''


@pytest.mark.parametrize(("budget", "status", "path"), [
    # a fresh try on each visit: solve stays once on its first visit and once again after coming back
    ("per visit", "final", ["solve", "solve", "check", "solve", "solve", "check", "done"]),
    # over the whole run: the second visit has no stay left, and nothing else fires
    ("", "failed", ["solve", "solve", "check", "solve"]),
])
def test_a_per_visit_stay_budget_starts_afresh_each_visit(budget: str, status: str, path: list[str]) -> None:
    machine = statewright.load_text(PER_VISIT.replace("BUDGET", budget))
    script = Script.from_json({"agent": {
        "solve": ["no", "ok", "no", "ok"],
        "check": ["back", "fine"],
    }})
    result = machine.run(script=script)
    assert (result.status, result.path) == (status, path)
    if status == "failed":
        assert result.failure is not None and result.failure.kind == "bound"


def test_a_per_visit_budget_survives_a_resume(tmp_path: Path) -> None:
    machine = statewright.load_text(PER_VISIT.replace("BUDGET", "per visit"))
    script = Script.from_json({"agent": {"solve": ["no", "ok", "no", "ok"], "check": ["back", "fine"]}})
    db = str(tmp_path / "runs.sqlite")

    class Crash(Exception):
        pass

    class CrashOnSecondCheck(ScriptedClient):
        async def acomplete(self, request):  # type: ignore[no-untyped-def]
            if request.state == "solve" and sum(r["state"] == "solve" for r in self.received) == 3:
                raise Crash  # during the second visit's stay
            return await super().acomplete(request)

    with pytest.raises(Crash):
        machine.run(client=CrashOnSecondCheck(script), checkpoint=db, run_id="r")
    result = machine.run(script=script, checkpoint=CheckpointStore(db), resume="r")
    assert result.ok and result.path == ["solve", "solve", "check", "solve", "solve", "check", "done"]


def test_the_trace_names_a_per_visit_bound(tmp_path: Path) -> None:
    machine = statewright.load_text(PER_VISIT.replace("BUDGET", "per visit"))
    trace = tmp_path / "t.jsonl"
    machine.run(script=Script.from_json({"agent": {"solve": ["no", "no"]}}), trace=str(trace))
    skips = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()
             if json.loads(line)["event"] == "bound_skip"]
    assert skips and skips[0]["bound"] == "max 1 per visit"
