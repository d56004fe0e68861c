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
from support.e2e_runs import EXAMPLES

from statewright import api
from statewright.cli import build_parser
from statewright.diagnostics import CODES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the generated pages -----------------------------------------------------------------------------


def test_generated_pages_are_current() -> None:
    stale = _generator().stale_pages()
    assert stale == [], (f"{', '.join('docs/' + p for p in stale)} out of date with the code registry or "
                         "examples/: run `python docs/generate.py`")


def test_generate_check_names_a_stale_page_and_rewriting_fixes_it(tmp_path: Path) -> None:
    generator = _generator()
    page = (DOCS / "diagnostics.md").read_text(encoding="utf-8")
    stale = page.replace("### SW2002: unknown state", "### SW2002: an old title")
    assert generator.regenerate(stale) == page
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in generator.PAGES:
        (docs / name).write_text((DOCS / name).read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "diagnostics.md").write_text(stale, encoding="utf-8")
    assert generator.stale_pages(docs) == ["diagnostics.md"]


def test_generate_leaves_the_hand_written_parts_alone() -> None:
    generator = _generator()
    text = "# Title\n\nProse.\n\n<!-- begin: example software_team -->\nold\n<!-- end: example software_team -->\n\nEnd.\n"
    new = generator.regenerate(text)
    assert new.startswith("# Title\n\nProse.\n\n<!-- begin: example software_team -->\n\n```mermaid\n")
    assert new.endswith("```\n\n<!-- end: example software_team -->\n\nEnd.\n") and "old" not in new


def test_generate_refuses_unpaired_markers_and_unknown_examples() -> None:
    generator = _generator()
    with pytest.raises(generator.GenerationError, match="no matching"):
        generator.regenerate("<!-- begin: diagnostics-index -->\n")
    with pytest.raises(generator.GenerationError, match="no_such_example"):
        generator.regenerate("<!-- begin: example no_such_example -->\n<!-- end: example no_such_example -->")


def test_the_generator_runs_as_the_docs_say() -> None:
    done = subprocess.run([sys.executable, str(DOCS / "generate.py"), "--check"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr


# ---- the diagnostics index -------------------------------------------------------------------------


def test_diagnostics_index_has_an_anchor_and_a_heading_for_every_registered_code() -> None:
    index = (DOCS / "diagnostics.md").read_text(encoding="utf-8")
    for code in CODES:
        assert re.search(rf'^<a id="{code}"></a>\n\n### {code}: .+$', index, re.MULTILINE), code
    headings = re.findall(r"^### (SW\d{4}):", index, re.MULTILINE)
    assert headings == sorted(CODES)


def test_diagnostics_index_entry_shows_severity_explanation_and_examples() -> None:
    info = CODES["SW3007"]
    entry = _generator().render_entry(info)
    assert f"**Severity:** {info.severity.value}" in entry
    assert "Wrong:" in entry and info.wrong in entry
    assert "Right:" in entry and info.right in entry
    assert "Transitions are tried in source order" in entry


def test_diagnostics_index_escapes_only_what_markdown_would_read_as_markup() -> None:
    generator = _generator()
    fake = type(CODES["SW1001"])("SW1999", "a <b> *title*", CODES["SW1001"].severity,
                                 "use `x` & [y] &amp; this. - not a list")
    entry = generator.render_entry(fake)
    assert r"### SW1999: a &lt;b> \*title\*" in entry
    assert r"use \`x\` & \[y\] \&amp; this. - not a list" in entry
    assert generator._plain("- a list?") == r"\- a list?" and generator._plain("1. first") == r"1\. first"


# ---- the examples page -------------------------------------------------------------------------------


def test_examples_page_shows_every_bundled_example() -> None:
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    assert set(_generator().examples_named(page)) == {p.stem for p in EXAMPLES}  # a folder's by its entry


def test_examples_page_holds_each_graph_and_source() -> None:
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    for path in (ROOT / "examples").glob("*.fsm"):
        assert path.read_text(encoding="utf-8").rstrip() in page, path.name
    assert _generator().render_example("software_team").startswith("```mermaid\n")


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
