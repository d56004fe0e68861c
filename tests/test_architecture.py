"""The architecture page tells the truth: the table of which module reports each diagnostic code is held
to the code, and every module opens with a one-line docstring naming its role."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from statewright.compiler.checks.reporters import REPORTED_BY
from statewright.diagnostics import CODES

SRC = Path(__file__).resolve().parents[1] / "src" / "statewright"
CODE = re.compile(r"SW\d{4}")
# where the codes are declared and attributed, not reported
REGISTRY = {"diagnostics/codes.py", "compiler/checks/reporters.py",
            "lsp/features.py"}  # (the language server names codes to offer their fixes, and reports none)
PIPELINE = ("grammar", "compiler", "designer", "lsp")  # the packages of the pipeline and its front ends


def codes_in(path: Path) -> set[str]:
    """The codes a module names as a whole string literal: the ones it reports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.fullmatch(node.value)}


def test_each_module_reports_exactly_the_codes_the_table_lists_for_it() -> None:
    listed = {module: set(codes) for _, module, codes in REPORTED_BY}
    assert len(listed) == len(REPORTED_BY), "a module is listed twice"
    found = {str(p.relative_to(SRC)): codes_in(p) for p in SRC.rglob("*.py")}
    reporting = {module: codes for module, codes in found.items() if codes and module not in REGISTRY}
    assert reporting == listed


def test_every_registered_code_is_attributed_to_a_module() -> None:
    attributed = {code for _, _, codes in REPORTED_BY for code in codes}
    assert sorted(set(CODES) - attributed) == []
    assert sorted(attributed - set(CODES)) == []


def test_every_module_of_the_pipeline_opens_with_a_one_line_docstring_naming_its_role() -> None:
    missing = []
    for path in sorted(p for package in PIPELINE for p in (SRC / package).rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        first = (doc or "").split("\n\n")[0].strip()
        if not first or "\n" in first:
            missing.append(str(path.relative_to(SRC)))
    assert missing == []
