"""Issue 9, item 17: a test block scripts an agent's tool calls (`reply STATE call TOOL(...)`) and the real tools
run in the test's workspace — so "the engineer writes the files, the tests run" is rehearsed by
`statewright test` and a generated runner's `--selftest`, with no model and no `--script` file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.e2e_runs import ROOT, cli, compile_runner, runner_process

CASE = ROOT / "tests" / "cases" / "valid" / "test-scripts-tool-calls" / "input.fsm"


def variant(tmp_path: Path, old: str, new: str) -> Path:
    text = CASE.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "build.fsm"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize("face", ["statewright test", "generated runner"])
def test_scripted_tool_calls_run_the_real_tools_and_the_tests_they_wrote_pass(tmp_path: Path, face: str) -> None:
    if face == "statewright test":
        done = cli("test", str(CASE), cwd=tmp_path)
        report = done.stdout
    else:
        done = runner_process(sys.executable, compile_runner(CASE, tmp_path / "build_runner.py"), "--selftest",
                              cwd=tmp_path)
        report = done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  the files the engineer writes pass their test" in report
    assert not (tmp_path / "add.py").exists()  # written in the test's own workspace, not here


def test_a_file_the_scripted_calls_get_wrong_fails_the_test_that_runs_it(tmp_path: Path) -> None:
    """The tools really ran: a wrong file written by a scripted call makes the real test in it fail."""
    spec = variant(tmp_path, "assert add(2, 3) == 5", "assert add(2, 3) == 6")
    done = cli("test", str(spec), cwd=tmp_path)
    assert done.returncode == 1
    assert ">>  done             failed" in done.stdout, done.stdout  # the real test ran, and failed
    assert "AssertionError" in done.stdout  # what the test the scripted calls wrote printed


def test_a_scripted_tool_call_the_run_never_asks_for_is_an_unused_reply(tmp_path: Path) -> None:
    spec = variant(tmp_path, '        reply implement "Wrote add.py and test_add.py."\n',
                   '        reply implement "Wrote add.py and test_add.py."\n'
                   '        reply implement call std.list_files()\n')
    done = cli("test", str(spec), cwd=tmp_path)
    assert done.returncode == 1
    assert "reply #4 for state 'implement'" in done.stdout and "was never used" in done.stdout


def test_a_tool_the_agent_does_not_have_is_refused_by_check(tmp_path: Path) -> None:
    spec = variant(tmp_path, "std.list_files()\n", "std.python(code = \"print(1)\")\n")
    done = cli("check", str(spec), cwd=tmp_path)
    assert done.returncode == 1
    assert "error[SW6009]: agent 'engineer' of state 'implement' has no tool 'std.python'" in done.stdout + done.stderr


def test_what_a_scripted_tool_call_prints_reaches_the_test_report_escaped(tmp_path: Path) -> None:
    # the test file the scripted call writes prints a C1 control sequence (CSI 2 J: clear the screen) and a
    # right-to-left override; the result template passes them into the report's "expected ..., got ..."
    spec = variant(tmp_path, "assert add(2, 3) == 5", r"print('\\x9b2J\\u202e'); assert add(2, 3) == 5")
    done = cli("test", str(spec), cwd=tmp_path)
    assert done.returncode == 1
    assert "expected result" in done.stdout, done.stdout
    assert "\x9b" not in done.stdout and "\u202e" not in done.stdout
    assert "\\x9b2J" in done.stdout
