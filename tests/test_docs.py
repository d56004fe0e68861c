"""The documentation stays true to the code: generated indexes, documented commands, examples that check."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from statewright import api
from statewright.cli import build_parser
from statewright.diagnostics import CODES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the diagnostics index -------------------------------------------------------------------------


def test_diagnostics_page_holds_the_index_marker() -> None:
    hook = _load_hook("diagnostics")
    assert hook.MARKER in (DOCS / "diagnostics.md").read_text(encoding="utf-8")


def test_diagnostics_index_has_a_heading_for_every_registered_code() -> None:
    index = _load_hook("diagnostics").render_index()
    for code in CODES:
        assert re.search(rf"^### {code}: .+ \{{#{code}\}}$", index, re.MULTILINE), code
    headings = re.findall(r"^### (SW\d{4}):", index, re.MULTILINE)
    assert headings == sorted(CODES)


def test_diagnostics_index_entry_shows_severity_explanation_and_examples() -> None:
    hook = _load_hook("diagnostics")
    info = CODES["SW3007"]
    entry = hook.render_entry(info)
    assert f"**Severity:** {info.severity.value}" in entry
    assert "Wrong:" in entry and info.wrong in entry
    assert "Right:" in entry and info.right in entry
    assert "Transitions are tried in source order" in entry


def test_diagnostics_index_escapes_markup_in_prose() -> None:
    hook = _load_hook("diagnostics")
    fake = type(CODES["SW1001"])("SW1999", "a <b> *title*", CODES["SW1001"].severity, "use `x` & [y]")
    entry = hook.render_entry(fake)
    assert r"a &lt;b\> \*title\*" in entry
    assert r"\`x\` &amp; \[y\]" in entry


def test_diagnostics_hook_changes_only_the_page_with_the_marker() -> None:
    hook = _load_hook("diagnostics")
    assert hook.on_page_markdown("# Other\n", page=None, config=None, files=None) == "# Other\n"
    rendered = hook.on_page_markdown(f"# D\n\n{hook.MARKER}\n", page=None, config=None, files=None)
    assert hook.MARKER not in rendered
    assert "### SW2002: unknown state" in rendered


# ---- the examples page -------------------------------------------------------------------------------


def test_examples_page_shows_every_bundled_example() -> None:
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    named = set(_load_hook("examples").MARKER.findall(page))
    assert named == {p.stem for p in (ROOT / "examples").glob("*.fsm")}


def test_examples_hook_renders_the_graph_and_the_source() -> None:
    hook = _load_hook("examples")
    text = hook.render_example("software_team")
    assert text.startswith("```mermaid\n")
    assert "run_tests" in text
    assert (ROOT / "examples" / "software_team.fsm").read_text(encoding="utf-8").rstrip() in text


def test_examples_hook_stops_the_build_for_a_missing_example() -> None:
    hook = _load_hook("examples")
    with pytest.raises(hook.ExampleError, match="no_such_example"):
        hook.render_example("no_such_example")


# ---- machines shown in the reference pages -------------------------------------------------------


def _complete_machines(page: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```fsm\n(.*?)```", text, re.DOTALL)
    return [b for b in blocks if re.match(r"(#[^\n]*\n)*machine ", b)]


@pytest.mark.parametrize("page", ["index.md", "language.md"])
def test_complete_machines_in_the_docs_check_clean(page: str) -> None:
    machines = _complete_machines(page)
    assert machines, f"{page} shows no complete machine"
    for text in machines:
        compilation = api.check_text(text, page)
        assert [(d.code, d.message) for d in compilation.diagnostics] == []


@pytest.mark.parametrize("page", ["index.md", "language.md"])
def test_complete_machines_in_the_docs_pass_their_test_blocks(page: str) -> None:
    for text in _complete_machines(page):
        outcomes = api.run_tests(api.check_text(text, page))
        assert outcomes
        assert [(o.name, o.messages) for o in outcomes if not o.passed] == []


@pytest.mark.parametrize("page", ["index.md", "language.md"])
def test_complete_machines_in_the_docs_are_in_canonical_format(page: str) -> None:
    for text in _complete_machines(page):
        assert api.format_text(text, page).text == text


def test_language_reference_names_every_grammar_keyword() -> None:
    grammar = (ROOT / "src" / "statewright" / "grammar" / "statewright.lark").read_text(encoding="utf-8")
    rules = "\n".join(line.split("//", 1)[0] for line in grammar.splitlines())
    keywords = set(re.findall(r'"([a-z_]{2,})"', rules))
    reference = (DOCS / "language.md").read_text(encoding="utf-8")
    assert sorted(k for k in keywords if f"`{k}`" not in reference) == []


# ---- the CLI reference -------------------------------------------------------------------------------


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every command as the docs name it ('trace show' for nested ones) and its parser."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    full = f"{prefix} {name}".strip()
                    has_sub = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                    if has_sub:
                        walk(sub, full)
                    else:
                        found[full] = sub

    walk(build_parser(), "")
    return found


def test_cli_reference_has_a_section_for_every_command() -> None:
    reference = (DOCS / "cli.md").read_text(encoding="utf-8")
    missing = [name for name in _commands() if f"\n## {name}\n" not in reference]
    assert missing == []


def test_cli_reference_documents_every_option() -> None:
    reference = (DOCS / "cli.md").read_text(encoding="utf-8")
    undocumented = [
        f"{name} {option}"
        for name, parser in _commands().items()
        for action in parser._actions
        for option in action.option_strings
        if option not in ("-h", "--help") and option not in reference
    ]
    assert undocumented == []


@pytest.mark.skipif(importlib.util.find_spec("statewright.runtime.runner_cli") is None,
                    reason="the runner's command line is not available yet")
def test_cli_reference_documents_every_option_of_run() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "statewright", "run", str(ROOT / "examples" / "content_pipeline.fsm"), "--help"],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", result.stdout)) - {"--help"}
    section = (DOCS / "cli.md").read_text(encoding="utf-8").split("\n## run\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(o for o in options if o not in section) == []


# ---- the site ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_site_builds_in_strict_mode(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "site" / "diagnostics" / "index.html").read_text(encoding="utf-8")
    assert all(f'id="{code}"' in page for code in CODES)
