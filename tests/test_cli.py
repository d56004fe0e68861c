"""The command line, as a user types it: exit codes, output forms, and what each command may import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statewright.cli import main

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "content_pipeline.fsm"

BROKEN = """machine m {
    agent writer {
        prompt "You write."
    }

    start state draft {
        agent writer
        do "Write about {{ topc }}."
        -> reviw
    }

    final state done
}
"""


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    p = tmp_path / "broken.fsm"
    p.write_text(BROKEN)
    return p


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("statewright ")


def test_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(EXAMPLE)]) == 0
    assert "ok: 1 file checked" in capsys.readouterr().err


def test_check_reports_every_error_with_position_code_and_help(broken: Path, capsys) -> None:
    assert main(["check", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "error[SW2002]: unknown state 'reviw'" in out
    assert f"--> {broken}:9:12" in out
    assert "error[SW2008]: unknown template variable 'topc'" in out
    assert "^^^^^" in out
    assert "= help:" in out


def _columns(text: str) -> int:
    """The terminal columns `text` takes (wide characters two, combining ones none)."""
    import unicodedata

    return sum(0 if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf")
               else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _shown(out: str, line: int) -> tuple[str, str]:
    """The source line and the caret line of the one diagnostic printed, without their gutters."""
    lines = out.split("\n")
    text = next(i for i, row in enumerate(lines) if row.startswith(f"{line} | "))
    return lines[text][len(f"{line} | "):], lines[text + 1][len(f"{' ' * len(str(line))} | "):]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("pad", ["x", "漢字", "a😀é\u0301\t"])  # wide, emoji, combining and tab characters
def test_a_long_source_line_is_shown_as_a_window_with_the_carets_under_the_span(
        where: str, pad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = {"start": (1, 400), "middle": (200, 200), "end": (400, 1)}[where]
    spec = tmp_path / "long.fsm"
    spec.write_text(BROKEN.replace("Write about {{ topc }}.", f"{pad * before} {{{{ topc }}}} {pad * after}"),
                    encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    shown, carets = _shown(capsys.readouterr().out, 8)
    assert _columns(shown) <= 120
    assert shown.startswith("…") == (where != "start") and shown.endswith("…") == (where != "end")
    # the carets stand under 'topc', counted in terminal columns
    column = _columns(shown[:shown.index("topc")])
    assert carets == " " * column + "^^^^ not in scope"
    assert "\t" not in shown  # a tab is shown as one space, as in a line that fits


def test_a_source_line_that_fits_is_shown_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "short.fsm"
    spec.write_text(BROKEN.replace("Write about", "漢字 " + "x" * 90), encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    shown, carets = _shown(capsys.readouterr().out, 8)
    assert shown == '        do "漢字 ' + "x" * 90 + ' {{ topc }}."'
    assert carets == " " * _columns(shown[:shown.index("topc")]) + "^^^^ not in scope"


def test_many_diagnostics_on_one_long_line_print_a_window_each(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "many.fsm"
    spec.write_text(BROKEN.replace("{{ topc }}", " ".join(f"{{{{ nope{i} }}}}" for i in range(500))),
                    encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    out = capsys.readouterr().out
    rows = [row for row in out.split("\n") if row.startswith("8 | ")]
    assert len(rows) == 500 and max(_columns(row) for row in rows) <= len("8 | ") + 120
    assert all(f"nope{i} " in row for i, row in enumerate(rows))


def test_check_json_form(broken: Path, capsys) -> None:
    assert main(["check", "--format", "json", str(broken)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is False
    assert doc["error_count"] == len([d for d in doc["diagnostics"] if d["severity"] == "error"]) >= 2
    first = doc["diagnostics"][0]
    assert set(first) == {"file", "severity", "code", "message", "help", "notes", "range"}
    assert set(first["range"]["start"]) == {"line", "column", "offset"}
    codes = {d["code"] for d in doc["diagnostics"]}
    assert {"SW2002", "SW2008"} <= codes


def test_check_many_files_one_json_object(broken: Path, capsys) -> None:
    assert main(["check", "--format", "json", str(EXAMPLE), str(broken)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {d["file"] for d in doc["diagnostics"]} == {str(broken)}


def test_usage_errors_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["no-such-command"]) == 2
    assert main(["explain", "SW0000"]) == 2
    assert main(["compile", str(EXAMPLE), "--check"]) == 2


def test_explain_prints_wrong_and_right(capsys) -> None:
    assert main(["explain", "SW3008"]) == 0
    out = capsys.readouterr().out
    assert "SW3008" in out and "bound" in out


def test_dump_stages(capsys) -> None:
    for stage in ("ast", "ir", "optimized"):
        assert main(["dump", "--stage", stage, str(EXAMPLE)]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data
    assert main(["dump", "--stage", "optimized", "--no-pass", "nope", str(EXAMPLE)]) == 2


def test_graph_formats(capsys) -> None:
    from statewright import api

    names = [s.name for s in api.check_file(EXAMPLE).ir.states]
    assert main(["graph", str(EXAMPLE), "--format", "mermaid"]) == 0
    mermaid = capsys.readouterr().out
    assert all(name in mermaid for name in names)
    assert main(["graph", str(EXAMPLE), "--format", "dot"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("digraph")


def test_fmt_check_and_diff(tmp_path: Path, capsys) -> None:
    messy = tmp_path / "messy.fsm"
    messy.write_text(EXAMPLE.read_text().replace("\n    ", "\n  "))
    assert main(["fmt", "--check", str(EXAMPLE)]) == 0
    assert main(["fmt", "--check", str(messy)]) == 1
    assert "would reformat" in capsys.readouterr().err
    assert main(["fmt", "--diff", str(messy)]) == 0
    assert capsys.readouterr().out.startswith("---")
    assert main(["fmt", str(messy)]) == 0
    assert messy.read_text() == EXAMPLE.read_text()


def test_fmt_stdin(monkeypatch, capsys) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(EXAMPLE.read_bytes())))
    assert main(["fmt", "-"]) == 0
    assert capsys.readouterr().out == EXAMPLE.read_text()


def test_fmt_refuses_syntax_errors(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.fsm"
    bad.write_text("machine m {\n    state a {\n")
    assert main(["fmt", str(bad)]) == 1
    assert "error[SW1003]" in capsys.readouterr().err
    assert bad.read_text() == "machine m {\n    state a {\n"


def test_compile_writes_checks_and_refuses_foreign_files(tmp_path: Path, capsys) -> None:
    out = tmp_path / "runner.py"
    assert main(["compile", str(EXAMPLE), "-o", str(out)]) == 0
    assert main(["compile", str(EXAMPLE), "-o", str(out), "--check"]) == 0
    out.write_text(out.read_text() + "# edited\n")
    assert main(["compile", str(EXAMPLE), "-o", str(out), "--check"]) == 1
    foreign = tmp_path / "mine.py"
    foreign.write_text("print('hand written')\n")
    assert main(["compile", str(EXAMPLE), "-o", str(foreign)]) == 1
    assert foreign.read_text() == "print('hand written')\n"


def test_compile_without_an_output_path_prints_only_the_one_file_form(capsys) -> None:
    assert main(["compile", str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert "without -o FILE, pass --standalone" in err and "statewright_runtime/" in err
    assert main(["compile", str(EXAMPLE), "--standalone"]) == 0
    assert capsys.readouterr().out.startswith("# Generated by statewright")


def test_test_command_runs_test_blocks(capsys) -> None:
    assert main(["test", str(EXAMPLE)]) == 0
    assert "0 failed" in capsys.readouterr().err


LIGHT_COMMANDS = [
    ["check", str(EXAMPLE)],
    ["check", "--format", "json", str(EXAMPLE)],
    ["fmt", "--check", str(EXAMPLE)],
    ["graph", str(EXAMPLE)],
    ["dump", "--stage", "ir", str(EXAMPLE)],
    ["compile", str(EXAMPLE), "--standalone"],
    ["test", str(EXAMPLE)],  # scripted replies are answered in process: a spec's own tests start fast
]


@pytest.mark.parametrize("argv", LIGHT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_commands_that_call_no_model_never_import_litellm(argv: list[str]) -> None:
    code = (
        "import sys\nfrom statewright.cli import main\n"
        f"rc = main({argv!r})\n"
        "assert rc == 0, rc\n"
        "heavy = [m for m in ('litellm', 'openai', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_scripted_runs_and_a_runners_selftest_never_import_litellm(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"harvest": [{"key_points": ["k"], "open_questions": []}],
                                            "draft": ["A draft."], "review": [{"score": 90, "fixes": []}]}}))
    runner = tmp_path / "runner.py"
    assert main(["compile", str(EXAMPLE), "-o", str(runner)]) == 0
    code = (
        "import runpy, sys\nfrom statewright.cli import main\n"
        f"rc = main(['run', {str(EXAMPLE)!r}, '--input', 'topic=x', '--script', {str(script)!r}, '--quiet'])\n"
        "assert rc == 0, rc\n"
        f"sys.argv = [{str(runner)!r}, '--selftest']\n"
        "try:\n"
        f"    runpy.run_path({str(runner)!r}, run_name='__main__')\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "heavy = [m for m in ('litellm', 'openai', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_check_stays_off_pydantic() -> None:
    code = ("import sys\nfrom statewright.cli import main\n"
            f"assert main(['check', {str(EXAMPLE)!r}]) == 0\n"
            "assert 'pydantic' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_compile_into_a_missing_directory_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["compile", str(EXAMPLE), "-o", str(tmp_path / "no" / "such" / "dir" / "runner.py")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_dump_optimized_lists_what_each_pass_did(tmp_path: Path, capsys) -> None:
    src = tmp_path / "dup.fsm"
    src.write_text("""machine m {
    agent w {
        prompt "p"
    }

    start state a {
        agent w
        do "x"
        when "1" in output -> b1
        otherwise -> b2
    }

    state b1 {
        agent w
        do "y"
        -> done
    }

    state b2 {
        agent w
        do "y"
        -> done
    }

    state orphan {
        agent w
        do "z"
        -> done
    }

    final state done
}
""")
    assert main(["dump", "--stage", "optimized", str(src)]) == 0
    captured = capsys.readouterr()
    assert "pass dead-states: removed 'orphan'" in captured.err
    assert "pass merge-equivalent: 'b2' shares the work of 'b1'" in captured.err
    states = json.loads(captured.out)["states"]
    assert [(s["name"], s["shares"]) for s in states] == [("a", None), ("b1", None), ("b2", "b1"), ("done", None)]
    assert main(["dump", "--stage", "optimized", "-O0", str(src)]) == 0
    assert "pass merge-equivalent: off" in capsys.readouterr().err


def test_dump_ast_only_parses(tmp_path: Path, broken: Path, capsys) -> None:
    assert main(["dump", "--stage", "ast", str(broken)]) == 0  # unknown names are not syntax errors
    assert json.loads(capsys.readouterr().out)["node"] == "Machine"


def test_a_runner_names_its_spec_relative_to_itself_however_the_path_is_typed(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:
    spec = tmp_path / "flows" / "content.fsm"
    spec.parent.mkdir()
    spec.write_text(EXAMPLE.read_text())
    out = tmp_path / "runners" / "content_runner.py"
    out.parent.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "flows/content.fsm", "-o", str(out)]) == 0
    first = out.read_text()
    assert "../flows/content.fsm" in first and str(tmp_path) not in first
    for typed in ("./flows/content.fsm", str(spec), "flows/../flows/content.fsm"):
        assert main(["compile", typed, "-o", "runners/content_runner.py", "--check"]) == 0, typed
    assert main(["compile", "flows/content.fsm", "-o", "runners/missing.py", "--check"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_a_file_that_does_not_check_is_not_counted_as_a_test(broken: Path, capsys) -> None:
    assert main(["test", str(EXAMPLE), str(broken)]) == 1
    err = capsys.readouterr().err
    assert "1 file did not check" in err
    assert err.rstrip().endswith("3 passed, 0 failed")
