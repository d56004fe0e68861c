"""A reader of standard output that goes away (`statewright ... | head`) ends the command quietly: no
traceback, no "Exception ignored" at exit, status 0; on the CLI and in a generated runner alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.e2e_runs import compile_runner

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPT = '{"agent": {"draft": ["a draft"]}}'
SPEC = '''machine notes {
    model "openai/x"
    agent writer { prompt "p" }
    start state draft {
        agent writer
        do "write"
        -> done
    }
    final state done

    test "drafts" {
        reply draft "a draft"
        expect path [draft, done]
    }
}
'''


def _with_closed_stdout(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`command` with a pipe for standard output whose reading end is closed before it starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=cwd,
                              check=False, timeout=120)
    finally:
        os.close(write_end)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes.fsm").write_text(SPEC)
    (tmp_path / "script.json").write_text(SCRIPT)
    return tmp_path


@pytest.mark.parametrize("args", [
    ["run", "notes.fsm", "--script", "script.json", "--quiet"],
    ["dump", "notes.fsm"],
    ["graph", "notes.fsm"],
    ["fmt", "--check", "notes.fsm", "--diff"],
    ["check", "notes.fsm", "--format", "json"],
    ["explain", "SW4015"],
])
def test_the_cli_ends_quietly_when_its_output_is_closed(project: Path, args: list[str]) -> None:
    done = _with_closed_stdout(sys.executable, "-m", "statewright", *args, cwd=project)
    _assert_quiet(done)


@pytest.mark.parametrize("args", [["--script", "script.json", "--quiet"], ["--help"], ["--selftest"]])
def test_a_runner_ends_quietly_when_its_output_is_closed(project: Path, args: list[str]) -> None:
    runner = compile_runner(project / "notes.fsm", project / "notes_runner.py")
    done = _with_closed_stdout(sys.executable, str(runner), *args, cwd=project)
    _assert_quiet(done)


def _assert_quiet(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
