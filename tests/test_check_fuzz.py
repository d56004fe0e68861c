"""The checker under mutation: the bundled examples with tokens deleted, duplicated and swapped and hostile
text inserted never make `check` fail, and `check --format json` over any batch of files prints exactly one
JSON document (issue 9, item 9 and the mutation fuzz)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mutations import mutants

from statewright.api import check_text
from statewright.cli import main


def _check_one(name: str, text: str) -> None:
    compilation = check_text(text, f"{name}.fsm")
    codes = [d.code for d in compilation.diagnostics]
    assert "SW9001" not in codes, (name, [d.message for d in compilation.diagnostics if d.code == "SW9001"])
    errors = [d for d in compilation.diagnostics if d.severity.value == "error"]
    assert (compilation.ir is None) == bool(errors), name


def _check_batch(tmp_path: Path, batch: list[tuple[str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for name, text in batch:
        path = tmp_path / f"{name}.fsm"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        paths.append(str(path))
    assert main(["check", "--format", "json", *paths]) in (0, 1)
    out = capsys.readouterr().out
    doc = json.loads(out)  # exactly one document: json.loads refuses anything after it
    assert doc["error_count"] == sum(d["severity"] == "error" for d in doc["diagnostics"])
    assert not [d for d in doc["diagnostics"] if d["code"] == "SW9001"]
    assert main(["check", *paths]) in (0, 1)
    assert "internal error" not in capsys.readouterr().err


@pytest.mark.slow
def test_mutated_examples_never_make_the_checker_fail() -> None:
    started = time.monotonic()
    for name, text in mutants(400, seed=9):
        _check_one(name, text)
        if time.monotonic() - started > 30:  # bounded on a slow machine; the slow variant goes further
            break


def test_check_json_over_a_batch_of_mutants_is_one_document(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _check_batch(tmp_path, mutants(40, seed=10), capsys)


@pytest.mark.slow
def test_many_mutated_examples_never_make_the_checker_fail(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    for seed in range(20, 23):
        batch = mutants(400, seed=seed)
        for name, text in batch:
            _check_one(name, text)
        folder = tmp_path / str(seed)
        folder.mkdir()
        _check_batch(folder, batch[:100], capsys)


def test_check_json_from_the_command_line_is_one_document(tmp_path: Path) -> None:
    paths = []
    for name, text in mutants(20, seed=11):
        path = tmp_path / f"{name}.fsm"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    done = subprocess.run([sys.executable, "-m", "statewright", "check", "--format", "json", *paths],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    json.loads(done.stdout)


def test_an_internal_error_in_one_file_is_an_sw9001_diagnostic_and_the_others_are_still_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from statewright.compiler import checks as check

    good = tmp_path / "good.fsm"
    good.write_text((Path(__file__).parent / "cases" / "check" / "unused-input" / "input.fsm")
                    .read_text(encoding="utf-8"), encoding="utf-8")
    buggy = tmp_path / "buggy.fsm"
    buggy.write_text(good.read_text(encoding="utf-8").replace("machine demo", "machine buggy"), encoding="utf-8")
    real = check.check_templates

    def failing(machine, symbols, diagnostics, flow=None):  # type: ignore[no-untyped-def]
        if machine.name.value == "buggy":
            raise RecursionError("maximum recursion depth exceeded")
        return real(machine, symbols, diagnostics, flow)

    monkeypatch.setattr(check, "check_templates", failing)
    assert main(["check", "--format", "json", str(buggy), str(good)]) == 1
    doc = json.loads(capsys.readouterr().out)
    by_file = {(d["file"], d["code"]) for d in doc["diagnostics"]}
    assert (str(buggy), "SW9001") in by_file
    assert (str(good), "SW7005") in by_file
    sw9001 = next(d for d in doc["diagnostics"] if d["code"] == "SW9001")
    assert "RecursionError" in sw9001["message"] and sw9001["range"]["start"]["line"] == 1


def test_an_internal_error_while_parsing_is_an_sw9001_diagnostic_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from statewright.grammar import parser

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyError("a bug")

    monkeypatch.setattr(parser.ast, "Machine", failing)  # the builder's last reduction fails
    compilation = check_text("machine m {\n    final state done\n}\n", "m.fsm")
    assert [d.code for d in compilation.diagnostics] == ["SW9001"]
    assert "KeyError" in compilation.diagnostics[0].message


def test_an_internal_error_while_looking_for_later_syntax_errors_keeps_the_first_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statewright.grammar import recovery

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug")

    monkeypatch.setattr(recovery.Recovery, "_recognize", failing)
    compilation = check_text("machine m {\n    start state s {\n        oops\n    }\n}\n", "m.fsm")
    by_code = {d.code: d for d in compilation.diagnostics}
    assert sorted(by_code) == ["SW1002", "SW9001"] and len(compilation.diagnostics) == 2
    assert "RuntimeError" in by_code["SW9001"].message
