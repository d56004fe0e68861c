"""Untrusted data at every border, through the paths users take: each ends in its typed outcome.

A model reply nested 600 deep is re-asked, then fails with kind `output` (and a batch of such runs writes
every result line, and resumes); tool arguments and results too deep are the tool's error; a case line
nested 500 or 5,000 deep fails with kind `input` and the batch goes on; an answer nested 600 deep, or one
that fits only by lax coercion, is refused with exit 2 and the run keeps waiting; a checkpoint value 3,000
deep is a damaged checkpoint (exit 2); a trace line 5,000 deep is shown as unreadable by `trace show`; a
script, an inputs file, an input or an imported file too deep is a usage error or a positioned diagnostic.
Never a RecursionError, a traceback, an internal error or a batch that cannot finish.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, compile_runner, read_events
from support.fake_client import FakeClient, tool_calls

import statewright
from statewright.runtime.result import AnswerError
from statewright.runtime.scripted import Script, ScriptedClient

SPEC = textwrap.dedent("""\
    machine refund {
        input amount: int
        input tags: list[str] = []

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
            output Decision
            -> approve
        }

        state approve {
            ask "Refund {{ amount }} USD? The clerk says: {{ check.output.note }}"
            output Decision
            when output.approved -> pay
            otherwise -> refuse
        }

        final state pay {
            result "paid {{ amount }}: {{ approve.output.note }}"
        }

        final state refuse
    }
""")

GOOD_REPLY = '{"approved": true, "note": "fine"}'


def deep(levels: int, inner: str = "") -> str:
    return "[" * levels + inner + "]" * levels


DEEP_REPLY = '{"approved": true, "note": ' + deep(600) + "}"


def clean(done: Any) -> None:
    """No traceback, no internal error, no RecursionError in what a process printed."""
    text = done.stdout + done.stderr
    for sign in ("Traceback", "internal error", "RecursionError", "maximum recursion depth"):
        assert sign not in text, text[-3000:]


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "refund.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


def script_file(tmp_path: Path, replies: list[Any], name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"agent": {"check": replies}}), encoding="utf-8")
    return path


# ---- model replies ------------------------------------------------------------------------------------------


def test_a_reply_nested_600_deep_is_re_asked_then_fails_with_kind_output(spec: Path, tmp_path: Path) -> None:
    script = script_file(tmp_path, [DEEP_REPLY] * 3)
    done = cli("run", str(spec), "--input", "amount=5", "--script", str(script), "--trace",
               str(tmp_path / "t.jsonl"), cwd=tmp_path)
    clean(done)
    assert done.returncode == 1
    failure = json.loads(done.stdout)["failure"]
    assert failure["kind"] == "output" and "after 3 attempt(s)" in failure["message"]
    assert "nested too deeply: more than 100 levels" in failure["message"]
    reasks = [e for e in read_events(tmp_path / "t.jsonl") if e["event"] == "reask"]
    assert [e["attempt"] for e in reasks] == [1, 2] and "nested too deeply" in reasks[0]["error"]


def test_a_deep_reply_then_a_good_one_goes_on(spec: Path, tmp_path: Path) -> None:
    client = ScriptedClient(Script.from_json({"agent": {"check": ["Sure: " + DEEP_REPLY, GOOD_REPLY]}}))
    result = statewright.load(spec).run({"amount": 5}, client=client, checkpoint=str(tmp_path / "r.db"))
    assert result.status == "waiting" and result.path == ["check", "approve"]
    feedback = client.received[1]["messages"][-1]["content"]
    assert "nested too deeply" in feedback  # what the model was told on the retry


def test_a_reply_with_nan_or_infinity_is_not_json_and_is_re_asked(spec: Path, tmp_path: Path) -> None:
    # Python's json reads NaN and Infinity, JSON has neither: let in, `approved` could be compared with NaN
    for bad in ('{"approved": true, "note": NaN}', '{"approved": true, "note": "x", "cost": -Infinity}'):
        client = ScriptedClient(Script.from_json({"agent": {"check": [bad, GOOD_REPLY]}}))
        result = statewright.load(spec).run({"amount": 5}, client=client, checkpoint=str(tmp_path / "r.db"))
        assert result.status == "waiting" and result.path == ["check", "approve"]
        feedback = client.received[1]["messages"][-1]["content"]
        assert "is not a JSON number (JSON has no NaN or Infinity)" in feedback, feedback


@pytest.mark.parametrize("bad, said", [
    ('{"approved": true, "note": "x", "cost": 1e400}', "1e400 is too large a number (it would read as infinity"),
    ('{"approved": true, "note": "x", "cost": -1.5E+999}', "-1.5E+999 is too large a number"),
    ('Here: {"approved": true, "note": "x", "cost": 1e400}', "1e400 is too large a number"),  # found in prose
    ('{"approved": true, "note": "x", "n": ' + "9" * 5000 + "}", "is too long a number: 5,000 digits, and at most"),
])
def test_a_reply_with_a_number_beyond_range_is_re_asked(spec: Path, tmp_path: Path, bad: str, said: str) -> None:
    # Python's json reads 1e400 as inf (an Infinity by another name), and refuses 5,000 digits with advice
    # to raise its own limit: neither may pass for a number, or reach the model as Python's words
    client = ScriptedClient(Script.from_json({"agent": {"check": [bad, GOOD_REPLY]}}))
    result = statewright.load(spec).run({"amount": 5}, client=client, checkpoint=str(tmp_path / "r.db"))
    assert result.status == "waiting" and result.path == ["check", "approve"]
    feedback = client.received[1]["messages"][-1]["content"]
    assert said in feedback and "set_int_max_str_digits" not in feedback, feedback


def test_numbers_json_reads_within_range_are_read_as_they_are() -> None:
    from statewright.runtime.untrusted import NotAJsonNumber, read_json

    text = '[1e308, -1.7976931348623157e308, 1e-400, -0.0, "1e400", 12, ' + "7" * 4000 + "]"
    assert read_json(text, "a value") == [1e308, -1.7976931348623157e308, 0.0, -0.0, "1e400", 12, int("7" * 4000)]
    with pytest.raises(NotAJsonNumber, match="too large a number"):
        read_json('{"x": [1, 2e308]}', "a value")


SCORED = textwrap.dedent("""\
    machine scored {
        input weight: float = 1.0
        var total: float = 10.0

        type Score {
            score: float
            marks: list[float?]
        }

        agent judge {
            prompt "You score."
        }

        start state judge {
            agent judge
            do "Score it, weight {{ weight }}."
            output Score
            set total <- total * total * output.score
            when output.score >= 85 -> good
            -> judge max 20
            otherwise -> good
        }

        final state good {
            result "{{ total }}"
        }
    }
""")


@pytest.mark.parametrize("bad", ['{"score": "nan", "marks": []}', '{"score": 90, "marks": [1, "-Infinity"]}',
                                 '{"score": "1e400", "marks": []}'])
def test_a_float_is_a_finite_number_whatever_text_lax_validation_would_convert(tmp_path: Path, bad: str) -> None:
    # pydantic's lax mode reads the text "nan", "inf" or "1e400" as a float: a reply's "nan" became a NaN
    # output (stdout then printed `"score": NaN`), and `--input weight=nan` a NaN input
    path = tmp_path / "scored.fsm"
    path.write_text(SCORED, encoding="utf-8")
    good = '{"score": 90.5, "marks": [1.5, null]}'
    client = ScriptedClient(Script.from_json({"agent": {"judge": [bad, good]}}))
    result = statewright.load(path).run({}, client=client)
    assert result.status == "final" and result.path == ["judge", "good"], result.failure
    feedback = client.received[1]["messages"][-1]["content"]
    assert "Input should be a finite number" in feedback, feedback
    # the same from the command line's text, and from a Python caller
    (tmp_path / "script.json").write_text(json.dumps({"agent": {"judge": [good]}}), encoding="utf-8")
    for value in ("nan", "inf", "-Infinity", "1e400"):
        done = cli("run", str(path), "--script", "script.json", "--input", f"weight={value}", cwd=tmp_path)
        clean(done)
        assert done.returncode == 2 and "input 'weight': Input should be a finite number" in done.stderr, done.stderr
    refused = statewright.load(path).run({"weight": math.inf}, script={"agent": {"judge": [good]}})
    assert refused.failure is not None and refused.failure.kind == "input"


def test_a_run_variable_a_guard_overflows_to_infinity_fails_with_kind_variable(tmp_path: Path) -> None:
    path = tmp_path / "scored.fsm"
    path.write_text(SCORED, encoding="utf-8")
    (tmp_path / "script.json").write_text(json.dumps({"agent": {"judge": ['{"score": 10, "marks": []}'] * 20}}),
                                          encoding="utf-8")
    done = cli("run", str(path), "--script", "script.json", "--checkpoint", "runs.db", "--quiet", cwd=tmp_path)
    clean(done)

    def strict(name: str) -> Any:
        raise AssertionError(f"{name} on stdout")

    printed = json.loads(done.stdout, parse_constant=strict)
    assert done.returncode == 1 and printed["failure"]["kind"] == "variable", done.stdout
    assert "Input should be a finite number" in printed["failure"]["message"]
    assert math.isfinite(printed["variables"]["total"])  # the last value that fit stays


def test_a_case_line_with_nan_is_not_a_case_and_every_result_line_is_strict_json(spec: Path, tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"inputs": {"amount": NaN}}\n{"inputs": {"amount": 1, "tags": [Infinity]}}\n'
                     '{"inputs": {"amount": 2}}\n{"inputs": {"amount": 3, "x": 1e400}}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script_file(tmp_path, [GOOD_REPLY])),
               "--out", str(out), cwd=tmp_path, timeout=120)
    clean(done)

    def strict(name: str) -> Any:
        raise AssertionError(f"{name} in a result line")

    lines = sorted((json.loads(line, parse_constant=strict) for line in out.read_text().splitlines()),
                   key=lambda line: line["line"])
    assert [(line["line"], line["status"]) for line in lines] == [(1, "invalid"), (2, "invalid"), (3, "waiting"),
                                                                  (4, "invalid")]
    assert "NaN is not a JSON number" in lines[0]["error"] and "Infinity is not a JSON number" in lines[1]["error"]
    assert "1e400 is too large a number" in lines[3]["error"]


def test_what_the_runtime_wrote_itself_reads_back_with_a_nan_a_python_caller_gave() -> None:
    from statewright.runtime.untrusted import NotAJsonNumber, read_json, read_record

    with pytest.raises(NotAJsonNumber, match="NaN is not a JSON number"):
        read_json('{"x": NaN}', "a value")
    assert math.isnan(read_record('{"x": NaN}', "a checkpoint row")["x"])  # a record it wrote: as written


def test_a_batch_of_runs_whose_replies_are_too_deep_writes_every_line_and_resumes(spec: Path, tmp_path: Path) -> None:
    script = script_file(tmp_path, [DEEP_REPLY] * 3)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"inputs": {"amount": n}}) + "\n" for n in range(6)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script), "--out", str(out), cwd=tmp_path)
    clean(done)
    assert done.returncode == 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6 and {line["failure"]["kind"] for line in lines} == {"output"}
    again = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script), "--out", str(out),
                "--resume", cwd=tmp_path)
    clean(again)
    assert again.returncode == 1 and "6 done by an earlier run of the batch" in again.stderr
    assert len(out.read_text().splitlines()) == 6


# ---- tools -------------------------------------------------------------------------------------------------------

TOOLS = '''
def nest(levels: int) -> list:
    """A list nested `levels` deep."""
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def loop(levels: int) -> list:
    """A list that holds itself."""
    value: list = []
    value.append(value)
    return value
'''

TOOL_SPEC = textwrap.dedent("""\
    machine tooly {
        input levels: int
        tool nest = "border_tools:nest"
        tool loop = "border_tools:loop"
        agent a {
            prompt "You call tools."
            tools [nest, loop]
        }
        start state ask {
            agent a
            do "Call them."
            -> make
        }
        state make {
            call nest(levels = levels)
            -> done
        }
        final state done
    }
""")


@pytest.fixture
def tool_spec(tmp_path: Path) -> Path:
    (tmp_path / "border_tools.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "tooly.fsm"
    path.write_text(TOOL_SPEC, encoding="utf-8")
    return path


def test_tool_results_too_deep_are_the_tools_errors(tool_spec: Path, tmp_path: Path) -> None:
    calls = {"tool_calls": [{"name": "nest", "arguments": {"levels": 5000}}, {"name": "loop", "arguments": {"levels": 1}}]}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"ask": [calls, "called"]}}), encoding="utf-8")
    env = {"PYTHONPATH": str(tmp_path)}
    ok = cli("run", str(tool_spec), "--input", "levels=50", "--script", str(script), "--trace", str(tmp_path / "t.jsonl"),
             cwd=tmp_path, env=env)
    clean(ok)
    assert ok.returncode == 0, ok.stderr
    errors = [e["error"] for e in read_events(tmp_path / "t.jsonl") if e["event"] == "tool_call" and not e["ok"]]
    assert len(errors) == 2 and all("nested too deeply" in error for error in errors)  # the model was told
    failed = cli("run", str(tool_spec), "--input", "levels=5000", "--script", str(script), cwd=tmp_path, env=env)
    clean(failed)
    failure = json.loads(failed.stdout)["failure"]
    assert failed.returncode == 1 and failure["kind"] == "tool" and "nested too deeply" in failure["message"]


def test_tool_arguments_too_deep_are_sent_back_to_the_model(tool_spec: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    arguments = '{"levels": ' + deep(3000) + "}"
    client = FakeClient({("agent", "ask"): [tool_calls(("nest", arguments)), "called"]})
    result = statewright.load(tool_spec).run({"levels": 3}, client=client, workspace=str(tmp_path / "ws"))
    assert result.ok, result.failure
    tool_message = client.requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith("error: the arguments are not a valid JSON object: the arguments "
                                              "is nested too deeply")


# ---- a person's answers ------------------------------------------------------------------------------------


@pytest.fixture
def waiting(spec: Path, tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    script = script_file(tmp_path, [GOOD_REPLY])
    done = cli("run", str(spec), "--input", "amount=7", "--script", str(script), "--checkpoint", str(db), "--run-id",
               "r1", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    return db


@pytest.mark.parametrize("answer, said", [
    ('{"approved": true, "note": ' + deep(600) + "}", "the answer is nested too deeply: more than 100 levels"),
    (deep(50_000), "the answer is nested too deeply"),
    ('{"approved": "yes", "note": 5}', ("- approved: Input should be a valid boolean (got 'yes')\n"
                                       "- note: Input should be a valid string (got 5)")),
    ('{"approved": 1, "note": "x"}', "- approved: Input should be a valid boolean (got 1)"),
    ("yes", "the answer does not fit Decision"),
    ('{"approved": true, "note": "x", "score": NaN}', "NaN is not a JSON number"),
    ('{"approved": true, "note": "x", "score": 1e400}', "1e400 is too large a number"),
])
def test_an_answer_that_does_not_fit_is_refused_and_the_run_keeps_waiting(
        waiting: Path, tmp_path: Path, answer: str, said: str) -> None:
    refused = cli("resume", "r1", "--checkpoint", str(waiting), "--answer", answer, cwd=tmp_path)
    clean(refused)
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    still = cli("resume", "r1", "--checkpoint", str(waiting), cwd=tmp_path)
    assert still.returncode == 4 and json.loads(still.stdout)["status"] == "waiting"
    taken = cli("resume", "r1", "--checkpoint", str(waiting), "--answer", '{"approved": true, "note": "ok"}', cwd=tmp_path)
    assert taken.returncode == 0 and json.loads(taken.stdout)["result"] == "paid 7: ok"


def test_answers_are_strict_where_replies_are_lenient(spec: Path, tmp_path: Path) -> None:
    machine = statewright.load(spec)
    db = str(tmp_path / "runs.db")
    # the model's "yes" for a bool is coerced (a documented repair) ...
    replies = Script.from_json({"agent": {"check": ['{"approved": "yes", "note": "lax"}']}})
    result = machine.run({"amount": 3}, script=replies, checkpoint=db, run_id="r1")
    assert result.status == "waiting"
    # ... a person's is not; the error names every field that does not fit
    with pytest.raises(AnswerError) as refused:
        machine.resume("r1", {"approved": "yes", "note": 5}, checkpoint=db)
    assert "approved: Input should be a valid boolean" in str(refused.value)
    assert "note: Input should be a valid string" in str(refused.value)
    done = machine.resume("r1", {"approved": False, "note": "no"}, checkpoint=db)
    assert done.ok and done.final_state == "refuse"


# ---- batch case lines ----------------------------------------------------------------------------------------


def test_deep_case_lines_fail_with_kind_input_and_the_batch_goes_on(spec: Path, tmp_path: Path) -> None:
    script = script_file(tmp_path, [GOOD_REPLY])
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join([
        json.dumps({"inputs": {"amount": 1}}),
        '{"id": "deep", "inputs": {"amount": ' + deep(500) + "}}",
        json.dumps({"inputs": {"amount": 2}}),
        '{"inputs": {"amount": 3, "tags": ' + deep(5000, '"x"') + "}}",
        "not json",
        json.dumps({"inputs": {"amount": 4}}),
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script), "--out", str(out), cwd=tmp_path,
               timeout=120)
    clean(done)
    lines = {line["line"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert sorted(lines) == [1, 2, 3, 4, 5, 6]  # nothing lost
    for number in (2, 4):
        assert lines[number]["status"] == "failed" and lines[number]["failure"]["kind"] == "input"
        assert lines[number]["id"] == f"line-{number}" and "nested too deeply" in lines[number]["failure"]["message"]
    assert lines[5]["status"] == "invalid"
    assert [lines[n]["status"] for n in (1, 3, 6)] == ["waiting"] * 3
    assert done.returncode == 1 and "failed    2 (input 2)" in done.stderr
    again = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script), "--out", str(out), "--resume",
                cwd=tmp_path)
    clean(again)
    assert len(out.read_text().splitlines()) == 6  # every line was settled: nothing runs again


# what str.strip() and str.isspace() take for blank but JSON does not: separators, a vertical tab and a form
# feed, C1's next line, Unicode's spaces and line separators
NOT_JSON_SPACE = ["\x1c", "\x1d", "\x1e", "\x1f", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\u3000", "\xa0"]


def test_a_case_line_of_what_only_python_calls_blank_is_reported_not_skipped(spec: Path, tmp_path: Path) -> None:
    script = script_file(tmp_path, [GOOD_REPLY])
    cases = tmp_path / "cases.jsonl"
    odd = [f"{char}" for char in NOT_JSON_SPACE] + [f'{NOT_JSON_SPACE[0]}{{"inputs": {{"amount": 9}}}}']
    cases.write_text("\n".join([json.dumps({"inputs": {"amount": 1}}), " \t ", *odd, "\r"]) + "\n",
                     encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script), "--out", str(out), cwd=tmp_path,
               timeout=120)
    clean(done)
    lines = {line["line"]: line for line in map(json.loads, out.read_text().splitlines())}
    # JSON's own whitespace (line 2, the last) is a blank line; each of the others is text that is not a case
    assert sorted(lines) == [1, *range(3, 3 + len(odd))]
    assert lines[1]["status"] == "waiting"
    for number in range(3, 3 + len(odd)):
        assert lines[number]["status"] == "invalid" and "not a JSON object" in lines[number]["error"], lines[number]
    assert f"invalid   {len(odd)} line(s) skipped" in done.stderr


def waiting_trace(spec: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """The trace file of a run that waits for the person's answer, and its lines."""
    trace = tmp_path / "t.jsonl"
    done = cli("run", str(spec), "--input", "amount=5", "--script", str(script_file(tmp_path, [GOOD_REPLY])),
               "--trace", str(trace), cwd=tmp_path)
    assert done.returncode == 4
    return trace, trace.read_text().splitlines()


def test_trace_show_shows_a_line_of_what_only_python_calls_blank_as_unreadable(spec: Path, tmp_path: Path) -> None:
    trace, lines = waiting_trace(spec, tmp_path)
    trace.write_text("\n".join([lines[0], *NOT_JSON_SPACE, " \t", *lines[1:]]) + "\n", encoding="utf-8")
    shown = cli("trace", "show", str(trace))
    clean(shown)
    assert shown.returncode == 0
    for number in range(2, 2 + len(NOT_JSON_SPACE)):
        assert f"      line {number} is unreadable: not JSON" in shown.stdout
    assert f"line {2 + len(NOT_JSON_SPACE)} is" not in shown.stdout  # spaces and a tab: a blank line
    assert "  check (visit 1)" in shown.stdout


@pytest.mark.slow
def test_a_case_line_over_the_size_limit_is_skipped_unread_and_fails_with_kind_input(
        spec: Path, tmp_path: Path) -> None:
    from statewright.runtime.untrusted import MAX_VALUE_CHARS

    script = script_file(tmp_path, [GOOD_REPLY])
    cases = tmp_path / "cases.jsonl"
    with cases.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps({"inputs": {"amount": 1}}) + "\n")
        handle.write('{"inputs": {"amount": 2, "tags": ["' + "x" * (MAX_VALUE_CHARS + 10) + '"]}}\n')
        handle.write(json.dumps({"inputs": {"amount": 3}}) + "\n")
    out = tmp_path / "out.jsonl"
    done = cli("batch", str(spec), "--inputs", str(cases), "--script", str(script), "--out", str(out), cwd=tmp_path)
    clean(done)
    lines = {line["line"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert sorted(lines) == [1, 2, 3] and lines[2]["failure"]["kind"] == "input"
    assert "too large" in lines[2]["failure"]["message"]


# ---- checkpoints and traces ----------------------------------------------------------------------------------


def test_a_checkpoint_value_3000_deep_is_a_damaged_checkpoint(waiting: Path, tmp_path: Path, spec: Path) -> None:
    with sqlite3.connect(waiting) as db:
        (tail,) = db.execute("SELECT tail FROM runs WHERE run_id = 'r1'").fetchone()
        db.execute("UPDATE runs SET tail = ? WHERE run_id = 'r1'",
                   (tail + '\n{"outputs": {"check": ' + deep(3000) + "}}",))
    for command in (["resume", "r1", "--checkpoint", str(waiting), "--answer", GOOD_REPLY],
                    ["run", str(spec), "--checkpoint", str(waiting), "--resume", "r1"]):
        done = cli(*command, cwd=tmp_path)
        clean(done)
        assert done.returncode == 2
        assert "the checkpoint of run 'r1'" in done.stderr and "is damaged" in done.stderr
        assert "too deeply (at most 200 levels" in done.stderr and "cannot be resumed" in done.stderr


def test_a_checkpoint_record_that_is_not_an_object_is_damaged(waiting: Path, tmp_path: Path) -> None:
    with sqlite3.connect(waiting) as db:
        db.execute("UPDATE runs SET head = '[1, 2]' WHERE run_id = 'r1'")
    done = cli("resume", "r1", "--checkpoint", str(waiting), cwd=tmp_path)
    clean(done)
    assert done.returncode == 2 and "is damaged" in done.stderr


def test_trace_show_shows_a_line_5000_deep_as_unreadable(spec: Path, tmp_path: Path) -> None:
    trace, lines = waiting_trace(spec, tmp_path)
    lines.insert(2, '{"event": "guard", "seq": 3, "value": ' + deep(5000) + "}")
    trace.write_text("\n".join(lines) + '\n{"event": "state_en', encoding="utf-8")
    shown = cli("trace", "show", str(trace))
    clean(shown)
    assert shown.returncode == 0
    assert "      line 3 is unreadable: nested too deeply: more than 200 levels" in shown.stdout
    assert f"      line {len(lines) + 1} is unreadable: not JSON" in shown.stdout
    assert "  check (visit 1)" in shown.stdout  # the lines around it are shown as ever
    assert "end: waiting for a person's answer in state approve" in shown.stdout  # (a pause is no failure)


# ---- files and inputs -------------------------------------------------------------------------------------------


def test_scripts_inputs_files_and_inputs_too_deep_are_usage_errors(spec: Path, tmp_path: Path) -> None:
    script = tmp_path / "deep_script.json"
    script.write_text('{"agent": {"check": ' + deep(5000) + "}}", encoding="utf-8")
    inputs = tmp_path / "inputs.json"
    inputs.write_text('{"amount": 1, "tags": ' + deep(5000) + "}", encoding="utf-8")
    good = script_file(tmp_path, [GOOD_REPLY])
    runner = compile_runner(spec, tmp_path / "refund_runner.py")
    for command in ([sys.executable, "-m", "statewright", "run", str(spec)], [sys.executable, str(runner)]):
        for args, said in ((["--input", "amount=1", "--script", str(script)], "nested too deeply"),
                           (["--inputs-file", str(inputs), "--script", str(good)], "nested too deeply"),
                           (["--input", "amount=1", "--input", f"tags={deep(5000)}", "--script", str(good)],
                            "input 'tags'")):
            done = _run(command, args, tmp_path)
            clean(done)
            assert done.returncode == 2 and said in done.stderr, (command, args, done.stderr)


def _run(command: list[str], args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def test_an_input_that_does_not_fit_is_quoted_in_short(spec: Path, tmp_path: Path) -> None:
    # the whole value was quoted: an inputs file of a 200,000-character text for an int printed all of it
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"amount": "x" * 200_000, "tags": [7] * 50_000}), encoding="utf-8")
    done = cli("run", str(spec), "--inputs-file", str(inputs), "--script", str(script_file(tmp_path, [GOOD_REPLY])),
               cwd=tmp_path)
    clean(done)
    assert done.returncode == 2 and len(done.stderr) < 1000, done.stderr[:2000]
    assert '(got "xxxxxxxxxx' in done.stderr and 'xxx...)' in done.stderr and "(got [7, 7, 7" in done.stderr


def test_an_input_given_as_a_deep_python_value_fails_the_run_with_kind_input(spec: Path, tmp_path: Path) -> None:
    value: Any = "x"
    for _ in range(100_000):
        value = [value]
    result = statewright.load(spec).run({"amount": 1, "tags": value}, script=Script.from_json({"agent": {}}),
                                        workspace=str(tmp_path / "ws"))
    assert result.failure is not None and result.failure.kind == "input"
    assert "input 'tags': the value is nested too deeply" in result.failure.message


def test_an_imported_file_too_deep_is_a_positioned_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"agents": [], "states": ' + deep(3000) + "}", encoding="utf-8")
    done = cli("import", "metaagent", str(path))
    clean(done)
    assert done.returncode == 1 and "was not imported" in done.stderr
    assert "error[SW8001]: not valid JSON: the file is nested too deeply" in done.stderr
    assert f"{path}:1:" in done.stderr and "level 101 opens here" in done.stderr


def test_a_deep_input_for_a_run_on_temporal_fails_before_anything_is_sent(spec: Path) -> None:
    pytest.importorskip("temporalio")
    import asyncio

    from statewright import api
    from statewright.runtime.temporal import TemporalRunner

    value: Any = "x"
    for _ in range(5000):
        value = [value]
    runner = TemporalRunner(api.runtime_machine(api.check_path(spec)), "127.0.0.1:1")  # nothing listens there
    result = asyncio.run(runner.arun({"amount": 1, "tags": value}))
    assert result.failure is not None and result.failure.kind == "input"
    assert result.failure.message.startswith("input 'tags': the value is nested too deeply")
