"""States that ask a person: the run pauses durably, resumes with an answer (checked against its type) or
takes its `after` edge, through the Python API, `statewright run`/`resume`, a generated runner and test
blocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import statewright
from statewright.cli import main
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.result import AnswerError
from statewright.runtime.scripted import Script

SPEC = '''machine refund {
    input amount: int

    type Decision {
        approved: bool
        note: str
    }

    agent clerk {
        prompt "You handle refunds."
    }

    start state check {
        agent clerk
        do "Check the refund of {{ amount }} USD."
        -> approve
    }

    state approve {
        ask "Refund {{ amount }} USD? The clerk says: {{ check.output }}"
        output Decision
        after DEADLINE -> escalate
        when output.approved -> pay
        otherwise -> refuse
    }

    state escalate {
        agent clerk
        do "Escalate the refund of {{ amount }} USD: nobody answered."
        -> refuse
    }

    final state pay {
        result "paid {{ amount }}: {{ approve.output.note }}"
    }

    final state refuse

    test "an approval pays" {
        input {
            amount 30
        }
        reply check "looks fine"
        reply approve {
            approved true
            note "ok"
        }
        expect path [check, approve, pay]
        expect result "paid 30: ok"
    }

    test "silence escalates" {
        input {
            amount 30
        }
        reply check "looks fine"
        timeout approve
        reply escalate "escalated"
        expect path [check, approve, escalate, refuse]
    }
}
'''

CHECKED = {"agent": {"check": ["looks fine"], "escalate": ["escalated"]}}


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "refund.fsm"
    path.write_text(SPEC.replace("DEADLINE", "24h"), encoding="utf-8")
    return path


def _start(spec: Path, db: str, run_id: str = "r1") -> statewright.RunResult:  # type: ignore[name-defined]
    machine = statewright.load(spec)
    return machine.run({"amount": 30}, script=Script.from_json(CHECKED), checkpoint=db, run_id=run_id)


def test_a_run_pauses_with_the_question_and_the_answer_type(spec: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    before = time.time()
    result = _start(spec, db)
    assert result.status == "waiting" and not result.ok
    assert result.failure is None and result.final_state is None
    assert result.path == ["check", "approve"]
    waiting = result.waiting
    assert waiting is not None and waiting.state == "approve"
    assert waiting.question == "Refund 30 USD? The clerk says: looks fine"
    assert waiting.answer_schema["properties"]["approved"]["type"] == "boolean"
    assert waiting.asked_at is not None and before <= waiting.asked_at <= time.time()
    assert waiting.deadline == pytest.approx(waiting.asked_at + 24 * 3600)
    assert json.loads(json.dumps(result.to_json()))["waiting"]["state"] == "approve"
    assert CheckpointStore(db).list_runs()[0]["status"] == "waiting"


def test_a_bad_answer_is_refused_and_the_run_keeps_waiting(spec: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    _start(spec, db)
    machine = statewright.load(spec)
    for bad in ("yes", '{"approved": "perhaps", "note": "x"}', {"note": "no approved field"}):
        with pytest.raises(AnswerError, match="does not fit Decision"):
            machine.resume("r1", bad, checkpoint=db, script=Script.from_json(CHECKED))
    still = machine.resume("r1", checkpoint=db, script=Script.from_json(CHECKED))
    assert still.status == "waiting" and still.path == ["check", "approve"]
    done = machine.resume("r1", '{"approved": true, "note": "fine"}', checkpoint=db,
                          script=Script.from_json(CHECKED))
    assert done.ok and done.result == "paid 30: fine" and done.path == ["check", "approve", "pay"]
    # an answer as a value, not as text
    _start(spec, db, "r2")
    other = machine.resume("r2", {"approved": False, "note": "no"}, checkpoint=db, script=Script.from_json(CHECKED))
    assert other.ok and other.final_state == "refuse"


def test_an_answer_to_a_run_that_waits_for_none_is_refused(spec: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    _start(spec, db)
    machine = statewright.load(spec)
    machine.resume("r1", '{"approved": true, "note": ""}', checkpoint=db, script=Script.from_json(CHECKED))
    with pytest.raises(AnswerError, match="has ended"):
        machine.resume("r1", '{"approved": true, "note": ""}', checkpoint=db)
    with pytest.raises(AnswerError, match="resume"):
        machine.run({"amount": 1}, answer="x", checkpoint=db)


def test_the_resumed_run_does_not_repeat_finished_work_or_count_the_state_twice(spec: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    _start(spec, db)
    trace = tmp_path / "t.jsonl"
    result = statewright.load(spec).resume("r1", '{"approved": true, "note": "x"}', checkpoint=db,
                                           script=Script.from_json({"agent": {}}), trace=str(trace))
    assert result.ok and result.usage.llm_calls == 1  # the clerk's one call, from before the pause
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in events if e["event"] in ("state_enter", "answer")] == ["answer", "state_enter"]
    assert next(e for e in events if e["event"] == "answer")["timed_out"] is False


def test_a_person_who_does_not_answer_in_time_takes_the_after_edge(tmp_path: Path) -> None:
    path = tmp_path / "refund.fsm"
    path.write_text(SPEC.replace("DEADLINE", "1s"), encoding="utf-8")
    db = str(tmp_path / "runs.sqlite")
    machine = statewright.load(path)
    first = machine.run({"amount": 5}, script=Script.from_json(CHECKED), checkpoint=db, run_id="late")
    assert first.status == "waiting"
    early = machine.resume("late", checkpoint=db, script=Script.from_json(CHECKED))
    assert early.status == "waiting"  # the deadline has not passed yet
    time.sleep(max(0.0, first.waiting.deadline - time.time()) + 0.05)  # type: ignore[union-attr]
    late = machine.resume("late", checkpoint=db, script=Script.from_json(CHECKED))
    assert late.ok and late.path == ["check", "approve", "escalate", "refuse"]


def test_test_blocks_script_answers_and_timeouts(spec: Path, tmp_path: Path, capsys) -> None:
    assert main(["test", str(spec)]) == 0
    assert "2 passed, 0 failed" in capsys.readouterr().err
    runner = tmp_path / "runner.py"
    assert main(["compile", str(spec), "-o", str(runner)]) == 0
    done = subprocess.run([sys.executable, str(runner), "--selftest"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_test_that_scripts_no_answer_fails_saying_so(tmp_path: Path, capsys) -> None:
    path = tmp_path / "refund.fsm"
    path.write_text(SPEC.replace("DEADLINE", "24h").replace('''        timeout approve
''', ""), encoding="utf-8")
    assert main(["test", str(path)]) == 1
    out = capsys.readouterr().out
    assert "waits for an answer at state 'approve'" in out and "timeout approve" in out


def test_an_answer_or_timeout_the_run_never_asks_for_fails_the_test(tmp_path: Path, capsys) -> None:
    path = tmp_path / "refund.fsm"
    extra = SPEC.replace("DEADLINE", "24h").replace('''        reply escalate "escalated"
''', '''        reply escalate "escalated"
        timeout approve
''').replace('''        expect path [check, approve, pay]
''', '''        reply approve {
            approved false
            note "twice"
        }
        expect path [check, approve, pay]
''')
    path.write_text(extra, encoding="utf-8")
    assert main(["test", str(path)]) == 1
    out = capsys.readouterr().out
    assert "answer #2 for state 'approve'" in out and "was never used" in out
    assert "timeout #2 for state 'approve'" in out and "the run never asked" in out
    path.write_text(extra.replace("        expect path [check, approve, pay]\n",
                                  "        expect path [check, approve, pay]\n        allow unused replies\n")
                    .replace("        expect path [check, approve, escalate, refuse]\n",
                             "        expect path [check, approve, escalate, refuse]\n        allow unused replies\n"),
                    encoding="utf-8")
    assert main(["test", str(path)]) == 0, capsys.readouterr().out


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statewright", *args], capture_output=True, text=True,
                          check=False, timeout=120, cwd=cwd, env={**os.environ, "NO_COLOR": "1"})


def test_paused_by_one_process_and_answered_in_another(spec: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(CHECKED), encoding="utf-8")
    first = _cli(["run", str(spec), "--input", "amount=30", "--script", str(script), "--run-id", "p1"], tmp_path)
    assert first.returncode == 4, first.stderr  # waiting: neither a failure (1) nor an internal error (3)
    assert json.loads(first.stdout)["waiting"]["question"].startswith("Refund 30 USD?")
    assert "waiting for an answer at state approve" in first.stderr
    # the hint works as printed: the run recorded its file and its script
    assert "answer it with: statewright resume p1 --answer '...'" in first.stderr
    assert (tmp_path / ".statewright" / "checkpoints.sqlite").is_file()  # the default checkpoint
    bad = _cli(["resume", "p1", "--answer", "sure", "--quiet"], tmp_path)
    assert bad.returncode == 2 and "does not fit Decision" in bad.stderr
    good = _cli(["resume", "p1", "--answer", '{"approved": true, "note": "ok"}', "--quiet"], tmp_path)
    assert good.returncode == 0, good.stderr
    assert good.stderr == ""  # --quiet: nothing but the result
    assert json.loads(good.stdout)["result"] == "paid 30: ok"


def test_a_generated_runner_pauses_and_resumes_with_an_answer(spec: Path, tmp_path: Path) -> None:
    runner = tmp_path / "runner.py"
    assert main(["compile", str(spec), "-o", str(runner)]) == 0
    script = tmp_path / "script.json"
    script.write_text(json.dumps(CHECKED), encoding="utf-8")
    db = str(tmp_path / "runs.sqlite")
    common = [sys.executable, str(runner), "--checkpoint", db, "--script", str(script), "--quiet"]
    first = subprocess.run([*common, "--input", "amount=7", "--run-id", "g1"], capture_output=True, text=True,
                           check=False, timeout=120)
    assert first.returncode == 4, first.stderr
    resumed = subprocess.run([*common, "--resume", "g1", "--answer", '{"approved": false, "note": "no"}'],
                             capture_output=True, text=True, check=False, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["final_state"] == "refuse"
    orphan = subprocess.run([*common, "--answer", "x"], capture_output=True, text=True, check=False, timeout=120)
    assert orphan.returncode == 2 and "--answer needs --resume" in orphan.stderr


def test_batch_counts_waiting_cases(spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"inputs": {"amount": n}}) + "\n" for n in (1, 2)), encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(CHECKED), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    assert main(["batch", str(spec), "--inputs", str(cases), "--out", str(out), "--script", str(script),
                 "--quiet"]) == 4  # no case failed; some wait for an answer
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["status"] for line in lines] == ["waiting", "waiting"]
    # the summary's hint names the batch's own checkpoint database, and answering it as printed works
    hint = capsys.readouterr().err.split("answer each with: ")[1].split(")")[0]
    db = f"{out}.checkpoints.sqlite"
    assert hint == f"statewright resume RUN_ID --checkpoint {db} --answer '...'"
    answered = _cli(["resume", lines[0]["run_id"], "--checkpoint", db, "--answer",
                     '{"approved": true, "note": "ok"}', "--quiet"], tmp_path)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["final_state"] == "pay"
    assert all(line["waiting"]["state"] == "approve" for line in lines)


def test_time_spent_waiting_does_not_count_against_the_seconds_limit(tmp_path: Path) -> None:
    path = tmp_path / "refund.fsm"
    path.write_text(SPEC.replace("DEADLINE", "24h").replace("    input amount: int\n",
                                                            "    input amount: int\n    limits {\n"
                                                            "        seconds 1\n    }\n"), encoding="utf-8")
    db = str(tmp_path / "runs.sqlite")
    machine = statewright.load(path)
    assert machine.run({"amount": 1}, script=Script.from_json(CHECKED), checkpoint=db,
                       run_id="w").status == "waiting"
    time.sleep(1.2)
    done = machine.resume("w", '{"approved": true, "note": ""}', checkpoint=db, script=Script.from_json(CHECKED))
    assert done.ok


VARIANT = '''machine verdicts {
    type Approve {
        note: str len 1..20
    }

    type Reject {
        reason: str
        severity: int in 1..5
    }

    start state decide {
        ask "Approve?"
        output Approve | Reject
        after 1h -> late
        when output is Approve -> ok
        otherwise -> no
    }

    final state ok {
        result "{% if decide.output is Approve %}{{ decide.output.note }}{% endif %}"
    }

    final state no

    final state late

    test "approve" {
        reply decide Approve {
            note "fine"
        }
        expect path [decide, ok]
        expect result "fine"
    }
}
'''


def test_an_answer_to_a_variant_output_is_held_to_its_variant_and_constraints(tmp_path: Path) -> None:
    spec = tmp_path / "verdicts.fsm"
    spec.write_text(VARIANT, encoding="utf-8")
    started = _cli(["run", str(spec)], tmp_path)
    assert started.returncode == 4, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    schema = json.loads(started.stdout)["waiting"]["answer_schema"]  # what a person types, not the model's wrapper
    assert "value" not in schema.get("properties", {}) and len(schema["anyOf"]) == 2 and "Reject" in schema["$defs"]
    bad = _cli(["resume", run_id, "--answer", '{"Reject": {"reason": "x", "severity": 9}}'], tmp_path)
    assert bad.returncode == 2
    assert f"statewright resume {run_id}: error: the answer does not fit the output type of state 'decide'" in bad.stderr
    assert "severity" in bad.stderr and "VerdictsOutput" not in bad.stderr and "DecideOutput" not in bad.stderr
    done = _cli(["resume", run_id, "--answer", '{"Approve": {"note": "fine"}}'], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "fine"
    assert main(["test", str(spec)]) == 0


DAMAGES = {
    "a field of the wrong type": ("head", lambda head: {**head, "steps": "many"}, "steps is text, not a whole number"),
    "a state the machine lacks": ("head", lambda head: {**head, "state": "nowhere"},
                                  "'nowhere', a state the machine does not have"),
    "a question in a state that asks nobody": (
        "head", lambda head: {**head, "waiting": {**head["waiting"], "state": "check"}}, "which asks nobody"),
    "a newer snapshot version": ("head", lambda head: {**head, "version": 99}, "snapshot version 99, newer"),
    "a value nested too deep": ("tail", lambda tail: tail + "\n" + json.dumps({"outputs": {"check": "x"}})
                                .replace('"x"', "[" * 3000 + "]" * 3000), "too deeply (at most 200 levels"),
    "a log that is not a list": ("tail", lambda tail: tail + '\n{"path": "check"}', "path is text, not a list"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_checkpoint_is_refused_with_exit_2_and_never_an_internal_error(
        spec: Path, tmp_path: Path, damage: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(CHECKED), encoding="utf-8")
    first = _cli(["run", str(spec), "--input", "amount=5", "--script", str(script), "--run-id", "d1", "--quiet"],
                 tmp_path)
    assert first.returncode == 4, first.stderr
    column, change, message = DAMAGES[damage]
    db = tmp_path / ".statewright" / "checkpoints.sqlite"
    import sqlite3

    with sqlite3.connect(db) as conn:
        value = conn.execute(f"SELECT {column} FROM runs WHERE run_id = 'd1'").fetchone()[0]
        changed = change(json.loads(value)) if column == "head" else change(value)
        conn.execute(f"UPDATE runs SET {column} = ? WHERE run_id = 'd1'",
                     (json.dumps(changed) if column == "head" else changed,))
    resumed = _cli(["resume", "d1", "--answer", '{"approved": true, "note": "ok"}'], tmp_path)
    assert resumed.returncode == 2, resumed.stderr
    assert "is damaged" in resumed.stderr and "It cannot be resumed" in resumed.stderr, resumed.stderr
    assert message in resumed.stderr, resumed.stderr
    assert "Traceback" not in resumed.stderr and "--resume" not in resumed.stderr
