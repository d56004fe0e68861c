"""Run variables: updated by reducers after a state's step, read by guards, templates, tool arguments and map
lists, merged from branches and map elements in written order whatever order they finish in, checkpointed
as a log of updates and restored exactly on resume, shown in traces — through the Python API, test blocks,
`statewright run` and generated runners."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, compile_runner, runner_process

import statewright
from statewright.runtime.checkpoint import CheckpointError, CheckpointStore
from statewright.runtime.trace import Trace

SPEC = '''machine fan {
    input files: list[str]

    var notes: list[str] = []
    var best: int = 0
    var last: Review = { ok false, note "" }

    type Review {
        ok: bool
        note: str
        score: int?
    }

    agent critic {
        prompt "You review."
    }

    start state reviews {
        parallel [style, facts]
        append notes <- "joined"
        -> build
    }

    branch state style {
        agent critic
        do "Style. Notes so far: {{ notes }}"
        output Review
        append notes <- "style: " + output.note
        set best <- max(best, output.score or 0)
        merge last <- output
    }

    branch state facts {
        agent critic
        do "Facts. Notes so far: {{ notes }}"
        output Review
        append notes <- "facts: " + output.note
        merge last <- output
    }

    state build {
        for i, file in files max 5 concurrency 3
        agent critic
        do "Build {{ file }} ({{ i }}); {{ notes | length }} notes"
        append notes <- file + ": " + output
        -> check
    }

    state check {
        call std.python(code = "print(" + notes[0] + ")")
        when len(notes) >= 6 -> done
        otherwise -> failed
    }

    final state done {
        result "{{ notes | join('|') }} {{ best }} {{ last.note }}"
    }

    final state failed

    test "written order" {
        input { files ["a", "b", "c"] }
        reply style { ok true, note "tidy", score 7 }
        reply facts { ok true, note "true" }
        reply build "A"
        reply build "B"
        reply build "C"
        reply check { exit_code 0, stdout "6", stderr "", timed_out false }
        expect var notes ["style: tidy", "facts: true", "joined", "a: A", "b: B", "c: C"]
        expect var best 7
        expect var last { ok true, note "true", score 7 }
        expect final done
    }
}
'''

WRITTEN = ["style: tidy", "facts: true", "joined", "a: A", "b: B", "c: C"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def spec_file(tmp_path: Path, text: str = SPEC, name: str = "fan.fsm") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def script(delays: dict[str, float] | None = None, build: int = 3) -> dict[str, Any]:
    delays = delays or {}
    replies: dict[str, list[Any]] = {"style": [{"ok": True, "note": "tidy", "score": 7}],
                                     "facts": [{"ok": True, "note": "true"}], "build": ["A", "B", "C"][:build]}
    agent = {state: [{"value": r, "delay": delays.get(f"{state}{i}", delays.get(state, 0.0))}
                     for i, r in enumerate(items)] for state, items in replies.items()}
    return {"agent": agent, "tool": {"check": [{"exit_code": 0, "stdout": "6", "stderr": "", "timed_out": False}]}}


def run(path: Path, data: dict[str, Any], **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    result = statewright.load(path).run({"files": ["a", "b", "c"]}, script=data, trace=Trace(sink=events),
                                        **options)
    return result, events


def test_branches_and_elements_update_in_written_order_whichever_finishes_first(tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    in_order, _ = run(path, script())
    # facts finishes before style, and the map's last element before its first
    reversed_, events = run(path, script({"style": 0.4, "facts": 0.0, "build0": 0.5, "build1": 0.25, "build2": 0.0}))
    for result in (in_order, reversed_):
        assert result.ok, result.failure
        assert result.variables == {"notes": WRITTEN, "best": 7, "last": {"ok": True, "note": "true", "score": 7}}
        assert result.result == "|".join(WRITTEN) + " 7 true"
    join = next(e for e in events if e["event"] == "join" and e["state"] == "reviews")
    assert join["finished"] == ["facts", "style"]  # they did finish the other way round
    finished = [e["item"] for e in events if e["event"] == "item_end"]
    assert finished == [0, 1, 2]  # the trace holds each element's events in the list's order


def test_each_branch_and_element_reads_the_variables_as_they_were_when_they_started(tmp_path: Path) -> None:
    client_events: list[dict[str, Any]] = []
    path = spec_file(tmp_path)
    result = statewright.load(path).run({"files": ["a", "b", "c"]}, script=script(),
                                        trace=Trace(sink=client_events, content=True))
    assert result.ok
    asked = {e["state"] + str(e.get("item", "")): e["messages"][-1]["content"]
             for e in client_events if e["event"] == "llm_call"}
    assert asked["style"] == "Style. Notes so far: []"
    assert asked["facts"] == "Facts. Notes so far: []"  # not style's note: branches see their own updates only
    assert asked == {**asked, "build0": "Build a (0); 3 notes", "build1": "Build b (1); 3 notes",
                     "build2": "Build c (2); 3 notes"}


def test_the_trace_has_an_event_per_update_with_the_operand_when_it_has_content(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    statewright.load(spec_file(tmp_path)).run({"files": ["a"]}, script=script(build=1),
                                              trace=Trace(sink=events, content=True))
    updates = [(e["state"], e["var"], e["reducer"], e.get("item"), e["value"]) for e in events if e["event"] == "var"]
    assert updates == [
        ("style", "notes", "append", None, "style: tidy"), ("style", "best", "set", None, 7),
        ("style", "last", "merge", None, {"ok": True, "note": "tidy", "score": 7}),
        ("facts", "notes", "append", None, "facts: true"),
        ("facts", "last", "merge", None, {"ok": True, "note": "true", "score": None}),
        ("reviews", "notes", "append", None, "joined"), ("build", "notes", "append", 0, "a: A")]
    plain: list[dict[str, Any]] = []
    statewright.load(spec_file(tmp_path)).run({"files": ["a"]}, script=script(build=1), trace=Trace(sink=plain))
    assert all("value" not in e for e in plain if e["event"] == "var")
    # an update is traced after its state's exit and before its transition
    names = [(e["event"], e.get("state")) for e in events]
    at = names.index(("var", "reviews"))
    assert names[at - 1] == ("state_exit", "reviews") and names[at + 1][0] == "transition"


def test_a_run_stopped_among_its_elements_resumes_with_exactly_the_variables_of_an_unstopped_run(
        tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    db = str(tmp_path / "runs.db")
    whole, _ = run(path, script())
    # the script has a reply for the first element only: the others fail (kind script), which leaves the
    # last checkpoint for a resume — the first element's step and its update are in it
    stopped, _ = run(path, script(build=1), checkpoint=db, run_id="r1")
    assert not stopped.ok and stopped.failure.kind == "script"
    stored = CheckpointStore(db).load("r1")
    assert stored is not None and stored.head.fanout is not None
    tasks = stored.head.fanout.tasks
    assert [t.done for t in tasks] == [True, False, False] and tasks[0].writes == [["notes", "append", "a: A"]]
    assert [op[0] for op in stored.logs["vars"]] == ["notes", "notes", "best", "last", "last", "notes"][:0] + [
        "notes", "best", "last", "notes", "last", "notes"]  # the branches' updates, joined in written order
    resumed = statewright.load(path).run(checkpoint=db, resume="r1", script=script())
    assert resumed.ok and resumed.variables == whole.variables and resumed.result == whole.result
    # the ended run resumes to the same result again, variables and all
    again = statewright.load(path).run(checkpoint=db, resume="r1", script=script())
    assert again.variables == whole.variables


def test_a_branch_that_fails_leaves_no_update_half_made(tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    data = script()
    data["agent"]["facts"] = [{"value": "not a review", "delay": 0.0}] * 3  # never validates: kind output
    result, events = run(path, data)
    assert result.failure.kind == "output" and result.failure.state == "facts"
    # style finished and made its updates, in its own view: none reached the run
    assert result.variables == {"notes": [], "best": 0, "last": {"ok": False, "note": "", "score": None}}
    assert [e["state"] for e in events if e["event"] == "var"] == ["style", "style", "style"]


def test_an_update_whose_value_does_not_fit_fails_the_run_with_kind_variable(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    comp = statewright.api.check_text(SPEC.replace('append notes <- "joined"', 'extend notes <- "joined"'))
    assert [d.code for d in comp.diagnostics if d.severity == "error"] == ["SW4082"]  # a text is no list
    # a value the check cannot type (a user tool's result) is held to the type when the run makes it
    monkeypatch.syspath_prepend(str(tmp_path))
    tool = tmp_path / "variables_tools_mod.py"
    tool.write_text("def lookup(q: str):\n    return {'not': 'a list'}\n", encoding="utf-8")
    text = SPEC.replace("    agent critic {", '    tool lookup = "variables_tools_mod:lookup"\n\n    agent critic {')
    text = text.replace('call std.python(code = "print(" + notes[0] + ")")', 'call lookup(q = "x")')
    text = text.replace("        when len(notes) >= 6 -> done", "        extend notes <- output\n        -> done")
    text = text.replace("        otherwise -> failed\n", "")
    path = spec_file(tmp_path, text)
    data = script()
    del data["tool"]
    result, _ = run(path, data, tools=None)
    assert result.failure is not None and result.failure.kind == "variable", result.failure
    assert result.failure.state == "check" and "'extend' takes a list, not an object" in result.failure.message
    assert result.failure.origin == f"{path}:{text.splitlines().index('        extend notes <- output') + 1}:9"


def test_hostile_and_huge_values_reach_no_sink_raw_and_a_value_too_large_is_refused(tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    data = script()
    data["agent"]["build"][0]["value"] = "\x1b[2J\x1b]0;owned\x07\u202e" + "A"
    runner = compile_runner(path, tmp_path / "fan_runner.py")
    (tmp_path / "script.json").write_text(json.dumps(data), encoding="utf-8")
    done = runner_process(sys.executable, runner, "--script", "script.json",
                          "--input", 'files=["a","b","c"]', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x1b" not in done.stderr and "\u202e" not in done.stdout
    printed = json.loads(done.stdout)
    assert printed["variables"]["notes"][3] == "a: \x1b[2J\x1b]0;owned\x07\u202eA"  # the value, losslessly
    # a list that doubles itself each step is refused once it passes the limit of a value a run holds
    grow = spec_file(tmp_path, GROW, "grow.fsm")
    result = statewright.load(grow).run({}, script={"agent": {"grow": ["x" * 1_000_000] * 100}})
    assert result.failure is not None and result.failure.kind == "variable", result.failure
    assert "too large" in result.failure.message and result.failure.state == "grow"
    assert 2 ** 5 <= len(result.variables["chunks"]) < 2 ** 7  # the last value that fit stays


GROW = '''machine grow {
    var chunks: list[str] = []

    agent writer {
        prompt "You write."
    }

    start state grow {
        agent writer
        do "Write more."
        extend chunks <- chunks + chunks + [output]
        -> grow max 90
        otherwise -> done
    }

    final state done
}
'''


SQUARE = '''machine square {
    input start: int = 2
    var n: int = 2

    agent worker {
        prompt "You work."
    }

    start state grow {
        agent worker
        do "Again."
        set n <- n * n
        -> grow max 20
        otherwise -> done
    }

    final state done {
        result "{{ n }}"
    }
}
'''


def test_a_number_too_long_to_write_is_refused_where_a_run_would_hold_it(tmp_path: Path) -> None:
    # 2 squared 13 times has 2,467 digits, 14 times 4,933: more than Python writes as text (4,300), so the
    # checkpoint, the trace and the result could not be written (the run stopped with Python's ValueError)
    path = spec_file(tmp_path, SQUARE, "square.fsm")
    (tmp_path / "script.json").write_text(json.dumps({"agent": {"grow": ["ok"] * 21}}), encoding="utf-8")
    done = cli("run", str(path), "--script", "script.json", "--checkpoint", "runs.db", "--trace", "t.jsonl",
               "--quiet", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr and "ValueError" not in done.stderr, done.stderr
    printed = json.loads(done.stdout)
    assert printed["failure"]["kind"] == "variable" and printed["failure"]["state"] == "grow"
    assert "holds a whole number of more than 4,300 digits" in printed["failure"]["message"]
    assert len(str(printed["variables"]["n"])) == 2467  # the last value that fit stays
    for line in (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)
    # the same number given by a Python caller is refused as an input, before anything writes it
    result = statewright.load(path).run({"start": 10 ** 5000}, script={"agent": {"grow": ["ok"]}})
    assert result.failure is not None and result.failure.kind == "input", result.failure
    assert "more than 4,300 digits" in result.failure.message


def test_a_damaged_log_of_updates_is_a_damaged_checkpoint(tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    db = tmp_path / "runs.db"
    stopped, _ = run(path, script(build=1), checkpoint=str(db), run_id="r1")
    assert stopped.failure.kind == "script"
    damaged = 0
    with sqlite3.connect(db) as connection:
        stored = [("run_pieces", "changes", "piece", number, text) for number, text in
                  connection.execute("SELECT piece, changes FROM run_pieces WHERE run_id = 'r1'")]
        stored += [("runs", "tail", "run_id", "r1", connection.execute(
            "SELECT tail FROM runs WHERE run_id = 'r1'").fetchone()[0])]
        for table, column, key, value, text in stored:
            lines = []
            for line in str(text).split("\n"):
                if '"vars"' in line:
                    changes = json.loads(line)
                    changes["vars"] = [["nobody" if op[0] == "best" else op[0], *op[1:]] for op in changes["vars"]]
                    damaged += sum(op[0] == "nobody" for op in changes["vars"])
                    line = json.dumps(changes)
                lines.append(line)
            connection.execute(f"UPDATE {table} SET {column} = ? WHERE run_id = 'r1' AND {key} = ?",
                               ("\n".join(lines), value))
    assert damaged == 1
    with pytest.raises(CheckpointError, match="damaged.*run variable 'nobody'"):
        statewright.load(path).run(checkpoint=str(db), resume="r1", script=script())


def test_statewright_test_and_a_generated_runners_selftest_check_expect_var(tmp_path: Path) -> None:
    path = spec_file(tmp_path)
    done = cli("test", str(path))
    assert done.returncode == 0 and "PASS  written order" in done.stdout, done.stdout + done.stderr
    wrong = spec_file(tmp_path, SPEC.replace("expect var best 7", "expect var best 8"), "wrong.fsm")
    failed = cli("test", str(wrong))
    assert failed.returncode == 1
    assert "expect var best (" in failed.stdout and "the value is 7, expected 8" in failed.stdout
    for form in ([], ["--standalone"]):
        runner = tmp_path / f"fan_{len(form)}.py"
        assert cli("compile", str(path), "-o", str(runner), *form).returncode == 0
        selftest = runner_process(sys.executable, runner, "--selftest", cwd=tmp_path)
        assert selftest.returncode == 0 and "PASS  written order" in selftest.stdout, selftest.stdout
