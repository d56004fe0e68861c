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
    reporting = {module: codes for module, codes in found.items()
                 if codes and module not in REGISTRY and not module.startswith("diagnostics/registry/")}
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


# ---- imports --------------------------------------------------------------------------------------------

# Modules that would import each other on purpose, each with why (none now); any other circle is a defect.
ALLOWED_CIRCLES: set[frozenset[str]] = set()


def _module_imports() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports, at the top or inside a
    function (a circle through a function-level import is a circle too); imports made only for type
    checking and imports of a package (for its submodule) are left out."""
    modules = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(block.test) for stmt in block.body for n in ast.walk(stmt)}
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            edges[name].update(t for t in targets if t in modules and t != name
                               and modules[t].name != "__init__.py")
    return edges


def test_no_two_modules_import_each_other_but_the_ones_named_with_why() -> None:
    edges = _module_imports()
    circles = set()
    for a, targets in edges.items():
        for b in targets:
            seen, todo = {b}, [b]
            while todo:  # is `a` reachable from `b`?
                for c in edges[todo.pop()]:
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
            if a in seen:
                circles.add(frozenset({a, b}))
    assert {c for c in circles if not any(c <= allowed for allowed in ALLOWED_CIRCLES)} == set()
