"""Bounds read from inputs, and the expressions that pick or total values, on every face.

`max rounds` on an edge, `visits rounds` on a state and `for x in xs max rounds` on a map name an int input
with a range: the compiler proves loops bounded with the range's maximum, and a run reads the bound from its
inputs. `x if c else y`, a coalescing `or`, and `sum`, `min` and `max` work in guards, tool-call arguments
and map lists. Each is run through the Python API, `statewright test`, and a generated runner.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli

import statewright
from statewright.api import check_text
from statewright.runtime.trace import Trace

DEBATE = '''machine debate {
    input question: str
    input rounds: int in 1..5 = 2
    input speakers: list[str] = ["ann", "bob", "cy"]
    input most_speakers: int in 1..3 = 3

    type Score {
        points: list[int]
        note: str?
    }

    agent speaker {
        prompt "You argue."
    }

    agent judge {
        prompt "You judge."
    }

    start state argue {
        agent speaker
        do "Argue: {{ question }}"
        -> judge
    }

    state judge {
        agent judge
        do "Score the argument."
        output Score
        when sum(output.points) >= 10 and min(output.points) > 0 -> closing
        -> argue max rounds
        otherwise -> tired
    }

    state closing {
        for who in speakers or ["nobody"] max most_speakers
        call std.python(code = "print(" + ("'" + who + " wins'" if max(judge.output.points) > 5 else "'tie'") + ")")
        -> done
    }

    final state done {
        result "{{ judge.output.note or 'no note' }}: {% for c in closing.output %}{{ c.stdout | trim }} {% endfor %}"
    }

    final state tired {
        result "gave up after {{ judge.visits }} rounds"
    }

    test "two rounds, then the judge gives up" {
        input {
            question "Is it?"
        }
        reply argue "Yes."
        reply judge {
            points [1, 2]
        }
        reply argue "Yes!"
        reply judge {
            points [3]
        }
        reply argue "YES!"
        reply judge {
            points [3]
        }
        expect path [argue, judge, argue, judge, argue, judge, tired]
        expect result "gave up after 3 rounds"
    }

    test "one round when the input says so" {
        input {
            question "Is it?"
            rounds 1
        }
        reply argue "Yes."
        reply judge {
            points [1]
        }
        reply argue "Yes!"
        reply judge {
            points [3]
        }
        expect path [argue, judge, argue, judge, tired]
    }

    test "a convinced judge closes with every speaker" {
        input {
            question "Is it?"
            speakers ["ann", "bob"]
        }
        reply argue "Yes."
        reply judge {
            points [4, 7]
            note "convinced"
        }
        expect path [argue, judge, closing, done]
        expect result "convinced: ann wins bob wins "
    }
}
'''


def weak(points: list[int]) -> dict[str, Any]:
    return {"points": points}


def script(*judged: list[int]) -> dict[str, Any]:
    return {"agent": {"argue": ["Yes."] * len(judged), "judge": [weak(p) for p in judged]}}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str = DEBATE) -> Path:
    path = tmp_path / "debate.fsm"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_a_run_reads_its_loop_bound_from_its_inputs(tmp_path: Path, rounds: int) -> None:
    machine = statewright.load(write(tmp_path))
    events: list[dict[str, Any]] = []
    result = machine.run({"question": "q", "rounds": rounds}, script=script(*[[1]] * (rounds + 1)),
                         trace=Trace(sink=events))
    assert result.status == "final" and result.final_state == "tired"
    assert result.path.count("judge") == rounds + 1
    skips = [e for e in events if e["event"] == "bound_skip"]
    assert [s["bound"] for s in skips] == [f"max rounds ({rounds})"]


def test_an_input_outside_its_range_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    machine = statewright.load(write(tmp_path))
    result = machine.run({"question": "q", "rounds": 9}, script=script([1]))
    assert result.status == "failed" and result.failure is not None and result.failure.kind == "input"
    assert "rounds" in result.failure.message


def test_a_map_longer_than_its_bound_from_an_input_fails_with_the_bound(tmp_path: Path) -> None:
    machine = statewright.load(write(tmp_path))
    result = machine.run({"question": "q", "most_speakers": 2}, script=script([9, 1]))
    assert result.status == "failed" and result.failure is not None and result.failure.kind == "bound"
    assert "more than its max most_speakers (2)" in result.failure.message


def test_visits_from_an_input_bound_a_state(tmp_path: Path) -> None:
    text = DEBATE.replace("        -> argue max rounds\n", "        -> argue\n").replace(
        '        do "Argue: {{ question }}"\n', '        do "Argue: {{ question }}"\n        visits rounds\n')
    machine = statewright.load(write(tmp_path, text))
    result = machine.run({"question": "q", "rounds": 3}, script=script([1], [1], [1]))
    assert result.final_state == "tired" and result.path.count("argue") == 3


def test_the_sum_min_and_max_of_a_typed_output_decide_the_guard(tmp_path: Path) -> None:
    machine = statewright.load(write(tmp_path))
    assert machine.run({"question": "q"}, script=script([9, 1], [1])).final_state == "done"
    assert machine.run({"question": "q"}, script=script([10, 0], [1], [1])).final_state == "tired"


def test_test_blocks_the_python_api_and_a_generated_runner_agree(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert [o.passed for o in statewright.load(path).test()] == [True, True, True]
    done = cli("test", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    runner = tmp_path / "runner.py"
    assert cli("compile", str(path), "-o", str(runner)).returncode == 0
    selftest = subprocess.run([sys.executable, str(runner), "--selftest"], capture_output=True, text=True,
                              check=False, cwd=tmp_path, timeout=300)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    data = script([4, 7])
    data["agent"]["judge"][0]["note"] = "convinced"
    (tmp_path / "script.json").write_text(json.dumps(data), encoding="utf-8")
    ran = subprocess.run([sys.executable, str(runner), "--input", "question=q", "--input", "rounds=1",
                          "--script", str(tmp_path / "script.json")], capture_output=True, text=True, check=False,
                         cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stderr
    api = statewright.load(path).run({"question": "q", "rounds": 1}, script=data).to_json()
    assert json.loads(ran.stdout)["result"] == api["result"] == "convinced: ann wins bob wins cy wins "


def test_a_loop_bounded_only_by_an_input_without_a_range_is_one_error_saying_what_to_add() -> None:
    text = DEBATE.replace("input rounds: int in 1..5 = 2", "input rounds: int = 2")
    found = [d for d in check_text(text, "debate.fsm").diagnostics if d.severity.value == "error"]
    assert [d.code for d in found] == ["SW3040"]
    assert "'input rounds: int in 1..10 = 2'" in found[0].help
    assert found[0].span is not None and found[0].span.text == "rounds"


def test_a_misspelled_bound_counts_as_a_use_of_the_input_it_meant() -> None:
    text = DEBATE.replace("-> argue max rounds", "-> argue max round")
    found = [(d.code, d.help) for d in check_text(text, "debate.fsm").diagnostics]
    assert found == [("SW2070", "did you mean 'rounds'?")]
