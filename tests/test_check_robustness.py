"""The checker on hostile input: huge files, broken files, and what it must never import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from statewright.api import check_text
from statewright.grammar.parser import MAX_FILE_CHARS

VALID = Path(__file__).parent / "cases" / "valid"


def test_a_file_over_the_size_limit_is_refused_with_a_diagnostic() -> None:
    text = "machine m {\n" + "#" * MAX_FILE_CHARS + "\n}\n"
    compilation = check_text(text, "huge.fsm")
    assert [d.code for d in compilation.diagnostics] == ["SW1021"]
    assert compilation.ir is None


def test_deleting_any_one_line_of_a_valid_machine_never_crashes_the_checker() -> None:
    lines = (VALID / "review-pipeline" / "input.fsm").read_text(encoding="utf-8").split("\n")
    for i in range(len(lines)):
        compilation = check_text("\n".join(lines[:i] + lines[i + 1:]), "cut.fsm")
        errors = [d for d in compilation.diagnostics if d.severity.value == "error"]
        assert (compilation.ir is None) == bool(errors), f"line {i + 1} removed"


def test_many_independent_mistakes_are_all_reported_in_one_run() -> None:
    source = (VALID / "review-pipeline" / "input.fsm").read_text(encoding="utf-8")
    broken = (source.replace("agent critic\n", "agent critc\n")
              .replace("-> review\n    }\n\n    state review", "-> reviw\n    }\n\n    state review")
              .replace("output.score >= 85", "output.scor >= 85")
              .replace("{{ review.output.fixes }}", "{{ review.output.fixs }}")
              .replace("reply review { score 90  fixes [] }", 'reply review { score "90"  fixes [] }'))
    diagnostics = check_text(broken, "broken.fsm").diagnostics
    errors = sorted(d.code for d in diagnostics if d.severity.value == "error")
    assert errors == ["SW2002", "SW2003", "SW2006", "SW2006", "SW6002"]


_PROBE = (
    "import sys\n"
    "from statewright.api import check_file\n"
    "c = check_file(sys.argv[1])\n"
    "assert c.ir is not None\n"
    "print(' '.join(sorted(m for m in ('litellm', 'pydantic') if m in sys.modules)))\n"
)


def test_checking_a_file_imports_neither_litellm_nor_pydantic() -> None:
    path = str(VALID / "all-features" / "input.fsm")
    loaded = subprocess.run([sys.executable, "-c", _PROBE, path], check=True, capture_output=True,
                            text=True).stdout.strip()
    assert loaded == ""
