"""Every command keeps the exit-code contract: 0 ok, 1 the input has errors (or cannot be read), 2 usage error,
3 internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from statewright import api
from statewright.cli import main

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "content_pipeline.fsm"

BROKEN = """machine m {
    agent writer {
        prompt "You write."
    }

    start state draft {
        agent writer
        do "Write."
        -> reviw
    }

    final state done
}
"""

# each command that reads a spec, with the arguments it needs besides the path
COMMANDS = {
    "check": ["check", "{path}"],
    "check --format json": ["check", "--format", "json", "{path}"],
    "dump --stage ir": ["dump", "--stage", "ir", "{path}"],
    "dump --stage optimized": ["dump", "--stage", "optimized", "{path}"],
    "fmt --check": ["fmt", "--check", "{path}"],
    "graph": ["graph", "{path}"],
    "compile": ["compile", "{path}", "--standalone"],
    "test": ["test", "{path}"],
}


def argv(name: str, path: Path) -> list[str]:
    return [arg.format(path=path) for arg in COMMANDS[name]]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_good_spec_exits_0(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv(name, EXAMPLE)) == 0


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"fmt --check"}))  # fmt only refuses syntax errors
def test_a_spec_with_errors_exits_1(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.fsm"
    broken.write_text(BROKEN)
    assert main(argv(name, broken)) == 1
    captured = capsys.readouterr()
    assert "SW2002" in captured.out + captured.err  # check prints to stdout, the others to stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_missing_file_is_a_diagnostic_for_that_path(name: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.fsm"
    assert main(argv(name, missing)) == 1
    captured = capsys.readouterr()
    assert "SW1022" in captured.out + captured.err and f"cannot read {missing}" in captured.out + captured.err


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"check", "check --format json", "fmt --check", "test"}))
def test_a_directory_for_a_command_that_reads_one_file_is_a_usage_error(name: str, capsys) -> None:
    assert main(argv(name, ROOT / "examples")) == 2
    err = capsys.readouterr().err
    assert "reads one .fsm file" in err and "content_pipeline.fsm" in err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_bug_exits_3_with_a_request_to_report_it_and_no_traceback(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated compiler bug")

    monkeypatch.delenv("STATEWRIGHT_DEBUG", raising=False)
    monkeypatch.setattr(api, "check_bytes", fail)
    monkeypatch.setattr(api, "format_bytes", fail)
    assert main(argv(name, EXAMPLE)) == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: simulated compiler bug" in err
    assert "Please report it" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["test", "batch", "selftest"])
def test_a_trace_directory_that_cannot_be_one_is_a_usage_error(command: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # `--trace DIR` naming a file (or a place no directory can be made) had stopped each command with an
    # internal error (FileExistsError) once the first trace was to be written
    spec = ROOT / "examples" / "trivia_writing.fsm"
    taken = tmp_path / "taken"
    taken.write_text("not a directory\n", encoding="utf-8")
    if command == "test":
        code = main(["test", str(spec), "--trace", str(taken)])
    elif command == "batch":
        cases = tmp_path / "cases.jsonl"
        cases.write_text('{"inputs": {"theme": "x"}}\n', encoding="utf-8")
        code = main(["batch", str(spec), "--inputs", str(cases), "--trace", str(taken)])
    else:
        from statewright.runtime.runner_cli import main as runner_main

        code = runner_main(api.runtime_machine(api.check_file(spec)), ["--selftest", "--trace", str(taken)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"cannot write traces into --trace {taken}: it is a file, not a directory" in err
    assert "internal error" not in err and taken.read_text(encoding="utf-8") == "not a directory\n"
