"""The bundled examples are specifications users copy from: each parses, checks clean and carries tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from statewright import api
from statewright.grammar import ast

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.fsm"))
BUNDLED = {"content_pipeline", "ml_pipeline", "software_team", "evaluator_optimizer", "trivia_writing",
            "support_triage"}


def _machine(path: Path) -> ast.Machine:
    parsed = api.parse_text(path.read_text(encoding="utf-8"), str(path))
    assert parsed.machine is not None, [d.message for d in parsed.diagnostics]
    return parsed.machine


def test_every_bundled_example_is_present() -> None:
    assert BUNDLED <= {p.stem for p in EXAMPLES}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_parses_without_diagnostics(path: Path) -> None:
    parsed = api.parse_text(path.read_text(encoding="utf-8"), str(path))
    assert [(d.code, d.message) for d in parsed.diagnostics] == []
    assert parsed.machine is not None
    assert parsed.machine.name.value == path.stem


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_opens_with_a_header_saying_what_it_shows(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line)
    assert header, "the file must open with a comment header"
    assert header[0].startswith(f"# {path.name} — ")
    assert any(line.startswith("# Shows: ") for line in header)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_has_at_least_two_test_blocks_with_expectations(path: Path) -> None:
    tests = [item for item in _machine(path).items if isinstance(item, ast.TestDecl)]
    assert len(tests) >= 2
    expectation_kinds = (ast.ExpectPath, ast.ExpectFinal, ast.ExpectResult, ast.ExpectFailure)
    for test in tests:
        assert any(isinstance(item, expectation_kinds) for item in test.items), test.name.value


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_checks_clean_with_no_warnings(path: Path) -> None:
    compilation = api.check_file(path)
    assert [(d.severity.value, d.code, d.message) for d in compilation.diagnostics] == []
    assert compilation.ok


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_in_canonical_format(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert api.format_text(text, str(path)).text == text


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_test_blocks_pass(path: Path) -> None:
    outcomes = api.run_tests(api.check_file(path))
    assert len(outcomes) >= 2
    assert [(o.name, o.messages) for o in outcomes if not o.passed] == []
