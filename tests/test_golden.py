"""Golden cases: every tests/cases/<area>/<case>/input.fsm checks to exactly the diagnostics beside it.

Each case holds `expected.txt` (the rendered text diagnostics and the summary line) and `expected.json` (the
`check --format json` object). Run with UPDATE_EXPECT=1 to rewrite them after an intended change, then
review the diff. A case without errors must also lower to IR.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from statewright.api import Compilation, check_file
from statewright.diagnostics import CODES, render_json, render_summary, render_text

CASES = Path(__file__).parent / "cases"
UPDATE = os.environ.get("UPDATE_EXPECT") == "1"

# Codes that no committed input file can show, each with the test that covers it instead.
NOT_SHOWN_BY_A_CASE = {
    "SW1021": "tests/test_check_robustness.py (an input over 16 MB is built in memory rather than committed)",
    "SW1022": "tests/test_cli_conventions.py and tests/test_cli_exit_codes.py (a file that cannot be read is "
              "no file to commit)",
    "SW9001": "tests/test_check_fuzz.py (an internal error is a compiler bug, simulated there: no input is meant "
              "to produce it)",
}


def _case_dirs() -> list[Path]:
    return sorted(p.parent for p in CASES.glob("*/*/input.fsm"))


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _run(case: Path, monkeypatch: pytest.MonkeyPatch) -> Compilation:
    monkeypatch.chdir(case)  # diagnostics then name the file as `input.fsm`, whatever the checkout path
    return check_file("input.fsm")


def render_case_text(compilation: Compilation) -> str:
    blocks = [render_text(d) for d in compilation.diagnostics]
    blocks.append(render_summary(compilation.diagnostics))
    return "\n\n".join(blocks) + "\n"


def _compare(path: Path, actual: str) -> None:
    if UPDATE or not path.exists():
        path.write_text(actual, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"{path} did not exist and was written; review it and run again")
        return
    assert actual == path.read_text(encoding="utf-8"), f"{path} differs (UPDATE_EXPECT=1 rewrites it)"


@pytest.mark.parametrize("case", _case_dirs(), ids=_case_id)
def test_case_reports_exactly_its_expected_diagnostics(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compilation = _run(case, monkeypatch)
    _compare(case / "expected.txt", render_case_text(compilation))
    _compare(case / "expected.json", render_json(compilation.diagnostics) + "\n")
    has_errors = any(d.severity.value == "error" for d in compilation.diagnostics)
    if not has_errors:
        assert compilation.ir is not None, "a case without errors must lower to IR"
    else:
        assert compilation.ir is None, "a case with errors must not produce IR"


def test_valid_cases_report_no_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    valid = [c for c in _case_dirs() if c.parent.name == "valid"]
    assert valid, "there must be valid cases"
    for case in valid:
        compilation = _run(case, monkeypatch)
        assert compilation.ok, f"{_case_id(case)}: " + "; ".join(d.message for d in compilation.diagnostics)


def test_every_registered_code_is_shown_by_a_golden_case() -> None:
    shown: set[str] = set()
    expectations = [case / "expected.txt" for case in _case_dirs()]
    expectations += CASES.glob("import/*/expected-import.txt")  # the importers' cases (tests/test_import.py)
    for expected in expectations:
        if expected.exists():
            shown.update(re.findall(r"^(?:error|warning)\[(SW\d{4})\]", expected.read_text("utf-8"),
                                    re.MULTILINE))
    missing = sorted(set(CODES) - shown - set(NOT_SHOWN_BY_A_CASE))
    assert not missing, "codes without a golden case under tests/cases: " + ", ".join(missing)


def test_case_names_say_what_they_show() -> None:
    for case in _case_dirs():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", case.name), f"{_case_id(case)}: use kebab-case names"
