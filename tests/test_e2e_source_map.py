"""Runtime errors name the .fsm line they come from: a guard that cannot be evaluated fails the run, and the
JSON result, the runner's summary, `statewright test` and `trace show` all point at the guard's line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.e2e_runs import cli, runner_process

SPEC = """\
machine early_look {
    model "openai/gpt-4o-mini"

    type Review {
        score: int
    }

    agent critic {
        prompt "You review."
    }

    start state first {
        agent critic
        do "Start."
        when 10 / (len(output) - 2) > 3 -> done
        -> later
    }

    state later {
        agent critic
        do "Review it."
        output Review
        -> done
    }

    final state done

    test "a guard divides by zero" {
        reply first "hi"
        expect final done
    }
}
"""
GUARD_LINE = "early_look.fsm:15:9"  # where `when 10 / (len(output) - 2) > 3 -> done` is written


def test_a_guard_failing_at_run_time_names_its_fsm_line_in_every_face(tmp_path: Path) -> None:
    spec = tmp_path / "early_look.fsm"
    spec.write_text(SPEC, encoding="utf-8")
    (tmp_path / "script.json").write_text(json.dumps({"agent": {"first": ["hi"]}}), encoding="utf-8")
    assert cli("compile", "early_look.fsm", "-o", "early_look_runner.py", cwd=tmp_path).returncode == 0
    runner = tmp_path / "early_look_runner.py"
    trace = tmp_path / "trace.jsonl"

    ran = runner_process(sys.executable, runner, "--script", "script.json", "--trace", str(trace), cwd=tmp_path)
    interpreted = cli("run", "early_look.fsm", "--script", "script.json", cwd=tmp_path)
    tested = cli("test", "early_look.fsm", cwd=tmp_path)
    shown = cli("trace", "show", str(trace))

    for done in (ran, interpreted):
        assert done.returncode == 1, done.stderr
        failure = json.loads(done.stdout)["failure"]
        assert (failure["kind"], failure["origin"]) == ("guard", GUARD_LINE)
        assert f"run failed (guard) at {GUARD_LINE}: state 'first'" in done.stderr
    assert tested.returncode == 1
    assert f"the run failed (guard) at {GUARD_LINE}: state 'first'" in tested.stdout
    assert shown.returncode == 0 and f"failed (guard) in state first at {GUARD_LINE}" in shown.stdout
