"""The side-by-side ports of docs/coming-from-langgraph.md and docs/coming-from-crewai.md: every one
checks without a problem, is in the canonical format, has test blocks and passes them, and its guide shows
it exactly as the file holds it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from statewright import api

ROOT = Path(__file__).resolve().parent.parent
PORTS = {
    "coming-from-langgraph.md": sorted((ROOT / "examples" / "langgraph").rglob("*.fsm")),
    "coming-from-crewai.md": sorted((ROOT / "examples" / "crewai").glob("*.fsm")),
}
ALL = [(page, path) for page, paths in PORTS.items() for path in paths]


def test_there_are_the_ports_the_guides_promise() -> None:
    assert {p.stem for p in PORTS["coming-from-langgraph.md"]} >= {
        "supervisor", "plan_and_execute", "map_reduce", "approval_with_edit", "react_tool_loop",
        "hierarchical_team"}
    assert PORTS["coming-from-crewai.md"]


@pytest.mark.parametrize("page, path", ALL, ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_a_port_checks_clean_is_canonical_and_passes_its_tests(page: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    compilation = api.check_text(text, str(path))
    assert [(d.code, d.message) for d in compilation.diagnostics] == []
    assert api.format_text(text, str(path)).text == text
    results = api.run_tests(compilation)
    assert len(results) >= 1
    assert [(r.name, r.messages) for r in results if not r.passed] == []


@pytest.mark.parametrize("page, path", ALL, ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_the_guide_shows_each_port_exactly(page: str, path: Path) -> None:
    guide = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert path.relative_to(ROOT).as_posix() in guide
    body = path.read_text(encoding="utf-8").rstrip("\n")
    blocks = re.findall(r"```fsm\n(.*?)\n```", guide, re.DOTALL)
    assert body in blocks, f"{page} does not show {path.name} as the file holds it"
