"""A newcomer's mistakes: specs written as a new user writes them, each with several independent mistakes.

Every file under tests/cases/mistakes/ marks its mistakes where they are, in comments the grammar ignores:
`# expect: SW1030` at the end of the line holding the mistake, or `# expect below: SW1004` on the line
before it (where a comment would become part of the mistake, inside a string left open). `statewright
check` must report exactly those codes on exactly those lines, each once, in one run: none missed, none
invented by an earlier mistake. Each file is also a golden case (tests/test_golden.py holds its full text
and JSON output).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from statewright.api import check_file

CORPUS = Path(__file__).parent / "cases" / "mistakes"
_MARK = re.compile(r"#\s*expect( below)?:\s*(SW\d{4}(?:\s*,\s*SW\d{4})*)\s*$")


def expected_marks(text: str) -> Counter[tuple[int, str]]:
    """(line, code) of every mistake the file marks."""
    marks: Counter[tuple[int, str]] = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        found = _MARK.search(line)
        if found is not None:
            target = number + 1 if found.group(1) else number
            for code in re.split(r"\s*,\s*", found.group(2)):
                marks[(target, code)] += 1
    return marks


def _cases() -> list[Path]:
    return sorted(CORPUS.glob("*/input.fsm"))


def test_the_corpus_has_at_least_thirty_files_of_several_mistakes_each() -> None:
    counts = {case.parent.name: sum(expected_marks(case.read_text(encoding="utf-8")).values()) for case in _cases()}
    assert len(counts) >= 30, counts
    few = {name: n for name, n in counts.items() if n < 3}
    assert few == {}, "each file holds several independent mistakes"
    assert sum(counts.values()) >= 120


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case.parent.name)
def test_check_reports_each_marked_mistake_once_and_nothing_else(case: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(case.parent)
    expected = expected_marks(case.read_text(encoding="utf-8"))
    compilation = check_file("input.fsm")
    reported = Counter((d.span.start_pos.line, d.code) for d in compilation.diagnostics if d.span is not None)
    assert all(d.span is not None for d in compilation.diagnostics), "every diagnostic is positioned"
    assert all(d.help for d in compilation.diagnostics if d.code.startswith("SW1")), "every syntax error has a hint"
    missed, invented = expected - reported, reported - expected
    assert (dict(missed), dict(invented)) == ({}, {}), "\n".join(
        f"{d.span.start_pos.line}:{d.span.start_pos.column} {d.code} {d.message}" for d in compilation.diagnostics)
