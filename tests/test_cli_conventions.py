"""The command line's manners: help everywhere, stdin only when asked, every file reported, one JSON document,
a filter that must match, colour on a terminal only, and every code listed."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statewright import api
from statewright.cli import COMMANDS, main
from statewright.diagnostics import CODES

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "content_pipeline.fsm"
BROKEN = EXAMPLE.read_text(encoding="utf-8").replace("-> review\n", "-> reviw\n", 1)
ESC = "\x1b["


def statewright(*args: str, env: dict[str, str] | None = None, stdin: object = subprocess.DEVNULL,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real program, with output piped (not a terminal) and colour variables cleared unless given."""
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-m", "statewright", *args], capture_output=True, text=True,
                          env={**base, **(env or {})}, stdin=stdin, timeout=timeout, cwd=ROOT, check=False)


def on_terminal(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, str]:
    """The real program with a pseudo-terminal for stdin, stdout and stderr: its exit status and output."""
    pty = pytest.importorskip("pty")
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "statewright", *args], stdin=child_fd, stdout=child_fd,
                            stderr=child_fd, env={**base, "TERM": "xterm", **(env or {})}, cwd=ROOT)
    os.close(child_fd)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([main_fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                pytest.fail(f"statewright {' '.join(args)} still runs after {timeout} s on a terminal")
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        status = proc.wait(timeout=timeout)
    finally:
        os.close(main_fd)
        if proc.poll() is None:
            proc.kill()
    return status, b"".join(chunks).decode("utf-8", errors="replace")


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.fsm"
    path.write_text(BROKEN, encoding="utf-8")
    return path


# ---- --help for every command ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [*sorted(COMMANDS), "trace show"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command.split(), "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: statewright {command}")


def test_run_help_without_a_path_prints_help_and_says_where_the_runner_options_are() -> None:
    done = statewright("run", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: statewright run")
    assert "statewright run PATH --help" in " ".join(done.stdout.split())


def test_run_path_help_prints_the_runners_options_with_the_inputs() -> None:
    done = statewright("run", str(EXAMPLE), "--help")
    assert done.returncode == 0, done.stderr
    assert "--input" in done.stdout and "topic" in done.stdout and "--checkpoint" in done.stdout


# ---- fmt and standard input --------------------------------------------------------------------------


def test_fmt_without_a_path_on_a_terminal_prints_usage_instead_of_waiting() -> None:
    status, output = on_terminal("fmt", timeout=30)
    assert status == 2
    assert "usage: statewright fmt" in output and "'-' to read standard input" in output


def test_fmt_without_a_path_reads_a_pipe() -> None:
    messy = EXAMPLE.read_text(encoding="utf-8").replace("\n    ", "\n  ")
    done = subprocess.run([sys.executable, "-m", "statewright", "fmt"], input=messy, capture_output=True,
                          text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXAMPLE.read_text(encoding="utf-8")


def test_fmt_dash_cannot_be_mixed_with_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fmt", "-", str(EXAMPLE)]) == 2
    assert "cannot be combined" in capsys.readouterr().err


# ---- several files -------------------------------------------------------------------------------------


def test_every_file_is_reported_and_a_missing_one_is_a_diagnostic(broken: Path, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "reviw.fsm"
    assert main(["check", str(EXAMPLE), str(missing), str(broken)]) == 1
    captured = capsys.readouterr()
    assert f"error[SW1022]: cannot read {missing}: No such file or directory" in captured.out
    assert f"--> {broken}:" in captured.out
    assert "failed: 3 files checked, 2 errors" in captured.err


def test_a_missing_file_gets_a_did_you_mean_for_the_specs_beside_it(tmp_path: Path, capsys) -> None:
    (tmp_path / "review.fsm").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["check", str(tmp_path / "reveiw.fsm")]) == 1
    assert "= help: did you mean 'review.fsm'?" in capsys.readouterr().out


def test_json_is_one_document_with_a_diagnostic_for_the_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.fsm"
    done = statewright("check", "--format", "json", str(EXAMPLE), str(missing))
    assert done.returncode == 1
    doc = json.loads(done.stdout)  # one document: json.loads refuses anything after it
    assert doc["valid"] is False and doc["error_count"] == 1
    assert doc["diagnostics"] == [{
        "file": str(missing), "severity": "error", "code": "SW1022",
        "message": f"cannot read {missing}: No such file or directory", "help": "", "notes": [], "range": None}]


def test_json_is_one_document_even_when_the_compiler_fails_on_one_file(
        broken: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = api.check_bytes

    def fail_on_the_example(data: bytes, path: str, *project: object) -> api.Compilation:
        if path == str(EXAMPLE):
            raise RuntimeError("simulated compiler bug")
        return real(data, path, *project)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "check_bytes", fail_on_the_example)
    assert main(["check", "--format", "json", str(EXAMPLE), str(broken)]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [d["code"] for d in doc["diagnostics"] if d["file"] == str(EXAMPLE)] == ["SW9001"]
    assert "SW2002" in {d["code"] for d in doc["diagnostics"] if d["file"] == str(broken)}
    assert "internal error: RuntimeError: simulated compiler bug" in captured.err


def test_json_is_one_document_when_nothing_is_found(tmp_path: Path) -> None:
    done = statewright("check", "--format", "json", str(tmp_path))
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"valid": True, "error_count": 0, "warning_count": 0, "diagnostics": []}


def test_output_piped_into_a_short_reader_is_not_an_error(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    for n in range(40):
        (specs / f"b{n}.fsm").write_text(BROKEN, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "statewright", "check", str(specs)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 1)
    assert "Traceback" not in err and "Exception ignored" not in err


# ---- test --filter -----------------------------------------------------------------------------------


def test_a_filter_that_matches_no_test_is_an_error_naming_the_tests(capsys) -> None:
    assert main(["test", str(EXAMPLE), "--filter", "no such test"]) == 1
    err = capsys.readouterr().err
    assert "no test matches --filter 'no such test'; the tests are: " in err
    for test in api.check_file(EXAMPLE).ir.tests:
        assert f"'{test.name}' ({EXAMPLE})" in err


def test_a_filter_that_matches_runs_only_those_tests(capsys) -> None:
    name = api.check_file(EXAMPLE).ir.tests[0].name
    assert main(["test", str(EXAMPLE), "--filter", name]) == 0
    assert capsys.readouterr().err.rstrip().endswith("1 passed, 0 failed")


# ---- colour ------------------------------------------------------------------------------------------


def test_piped_output_has_no_escape_codes(broken: Path) -> None:
    done = statewright("check", str(broken))
    assert done.returncode == 1 and "error[SW2002]" in done.stdout
    assert ESC not in done.stdout and ESC not in done.stderr


def test_a_terminal_gets_colour_in_diagnostics_and_the_summary(broken: Path) -> None:
    status, output = on_terminal("check", str(broken))
    assert status == 1
    assert f"{ESC}1;31merror[SW2002]{ESC}0m" in output  # severity and code
    assert f"{ESC}1;34m-->{ESC}0m" in output and f"{ESC}1;34m|{ESC}0m" in output  # arrow and gutter
    assert f"{ESC}1;31m^^^^^ " in output  # carets and label
    assert f"{ESC}1;31mfailed{ESC}0m: 1 file checked" in output  # the summary


def test_no_color_turns_colour_off_even_on_a_terminal(broken: Path) -> None:
    status, output = on_terminal("check", str(broken), env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert status == 1 and "error[SW2002]" in output and ESC not in output


def test_force_color_and_color_always_colour_a_pipe(broken: Path) -> None:
    assert ESC in statewright("check", str(broken), env={"FORCE_COLOR": "1"}).stdout
    assert ESC in statewright("check", "--color", "always", str(broken)).stdout
    assert ESC in statewright("check", "--color", "always", str(broken), env={"NO_COLOR": "1"}).stdout


def test_color_never_wins_over_force_color(broken: Path) -> None:
    done = statewright("check", "--color", "never", str(broken), env={"FORCE_COLOR": "1"})
    assert ESC not in done.stdout + done.stderr


def test_test_summaries_are_coloured_on_a_terminal_only() -> None:
    status, output = on_terminal("test", str(EXAMPLE))
    assert status == 0 and f"{ESC}1;32mPASS{ESC}0m" in output and f"{ESC}1;32m3 passed{ESC}0m" in output
    piped = statewright("test", str(EXAMPLE))
    assert ESC not in piped.stdout + piped.stderr


# ---- explain --list ----------------------------------------------------------------------------------


def test_explain_list_gives_every_code_with_its_severity_and_summary(capsys) -> None:
    assert main(["explain", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(CODES)
    for line in lines:
        info = CODES[line.split()[0]]
        assert line == f"{info.code}  {info.severity.value:<7}  {info.title}"


@pytest.mark.parametrize("argv", [["explain"], ["explain", "SW2002", "--list"]])
def test_explain_needs_exactly_one_of_a_code_and_list(argv: list[str], capsys) -> None:
    assert main(argv) == 2
    assert "--list" in capsys.readouterr().err


# ---- the short commands end without tearing the interpreter down: nothing they write may be lost ----------


def test_files_and_output_written_by_the_short_commands_are_complete(tmp_path: Path) -> None:
    runner = tmp_path / "runner.py"
    assert statewright("compile", str(EXAMPLE), "-o", str(runner)).returncode == 0
    assert statewright("compile", str(EXAMPLE), "-o", str(runner), "--check").returncode == 0
    printed = statewright("compile", str(EXAMPLE), "--standalone")  # to stdout: the spec named from the cwd
    expected = api.generate_runner(api.check_text(EXAMPLE.read_text(encoding="utf-8"),
                                                  "examples/content_pipeline.fsm"), standalone=True)
    assert printed.returncode == 0 and printed.stdout == expected and len(expected.splitlines()) > 1000
    graph = tmp_path / "graph.mmd"
    assert statewright("graph", str(EXAMPLE), "-o", str(graph)).returncode == 0
    assert graph.read_text(encoding="utf-8") == statewright("graph", str(EXAMPLE)).stdout
    messy = tmp_path / "messy.fsm"
    messy.write_text(EXAMPLE.read_text(encoding="utf-8").replace("\n    ", "\n  "), encoding="utf-8")
    assert statewright("fmt", str(messy)).returncode == 0
    assert messy.read_text(encoding="utf-8") == EXAMPLE.read_text(encoding="utf-8")
