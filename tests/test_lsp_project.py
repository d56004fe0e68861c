"""`statewright lsp` over stdio on a project of files that use files: navigation to declarations of other
files (a `run`'s machine, imported agents and types, a called machine's states in test paths, the used file),
references and rename across files, diagnostics of a using file that follow the used file's edits, and
completion of imported names and `run` targets."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types
from support.lsp_session import Session, apply_edits, run, uri_of
from test_lsp import where

COMMON = """\
machine common {
    input audience: str = "engineers"

    type Critique {
        score: int
    }

    agent editor {
        prompt "You edit for {{ audience }}."
    }

    start state review {
        agent editor
        do "Review."
        output Critique
        -> done
    }

    final state done
}
"""

TEAM = """\
machine research {
    input topic: str
    returns Findings

    type Findings {
        summary: str
    }

    agent researcher {
        prompt "You research."
    }

    start state draft {
        agent researcher
        do "Research {{ topic }}."
        output Findings
        -> done
    }

    final state done
}
"""

LEAD = """\
use "team.fsm"
use "common.fsm" { Critique, editor }

machine lead {
    input topic: str
    input audience: str = "engineers"

    start state investigate {
        run research(topic = topic)
        when output.ok -> review
        otherwise -> failed
    }

    state review {
        agent editor
        do "Review {{ investigate.output.result }}."
        output Critique
        -> done
    }

    final state done
    final state failed

    test "t" {
        input { topic "x" }
        reply investigate/draft { summary "s" }
        reply review { score 1 }
        expect final done
    }
}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in {"common.fsm": COMMON, "team.fsm": TEAM, "lead.fsm": LEAD}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_definition_goes_to_the_declarations_of_other_files(folder: Path) -> None:
    lead, team, common = (uri_of(folder / n) for n in ("lead.fsm", "team.fsm", "common.fsm"))

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        assert not await s.diagnostics(lead)
        for needle, inside, uri, text, declared in (
            ("run research", 5, team, TEAM, "machine research"),
            ("agent editor", 7, common, COMMON, "agent editor"),
            ("output Critique", 8, common, COMMON, "type Critique"),
            ("investigate/draft", 13, team, TEAM, "state draft"),
            ("{ Critique,", 3, common, COMMON, "type Critique"),
        ):
            [found] = await s.definition(lead, *where(LEAD, needle, inside=inside))
            assert found.uri == uri, needle
            line, column = where(text, declared, inside=declared.index(" ") + 1)
            assert (found.range.start.line, found.range.start.character) == (line, column), needle
        [used] = await s.definition(lead, *where(LEAD, '"team.fsm"', inside=2))
        assert used.uri == team and used.range.start == types.Position(0, 0)

    run(scenario)


def test_references_and_hover_reach_across_files(folder: Path) -> None:
    lead, common = uri_of(folder / "lead.fsm"), uri_of(folder / "common.fsm")

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        s.open(common, COMMON)
        await s.diagnostics(lead)
        await s.diagnostics(common)
        found = await s.references(common, *where(COMMON, "type Critique", inside=5))
        places = sorted((f.uri == lead, f.range.start.line) for f in found)
        assert places == [(False, where(COMMON, "type Critique")[0]), (False, where(COMMON, "output Critique")[0]),
                          (True, 1), (True, where(LEAD, "output Critique")[0])]
        hover = await s.hover(lead, *where(LEAD, "run research", inside=5))
        assert hover is not None and "**machine** `research(topic: str) -> Findings`" in hover.contents.value
        assert "team.fsm" in hover.contents.value

    run(scenario)


def test_rename_of_a_called_machines_state_renames_the_test_paths_that_name_it(folder: Path) -> None:
    lead, team = uri_of(folder / "lead.fsm"), uri_of(folder / "team.fsm")

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        s.open(team, TEAM)
        await s.diagnostics(lead)
        await s.diagnostics(team)
        edit = await s.rename(team, *where(TEAM, "state draft", inside=6), "sketch")
        assert set(edit.changes) == {lead, team}
        assert "reply investigate/sketch { summary" in apply_edits(LEAD, edit.changes[lead])
        assert "start state sketch {" in apply_edits(TEAM, edit.changes[team])

    run(scenario)


def test_rename_of_an_imported_agent_renames_it_where_it_is_declared_and_used(folder: Path) -> None:
    lead, common = uri_of(folder / "lead.fsm"), uri_of(folder / "common.fsm")

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        await s.diagnostics(lead)
        edit = await s.rename(lead, *where(LEAD, "agent editor", inside=7), "reviewer")
        assert set(edit.changes) == {lead, common}
        renamed = apply_edits(LEAD, edit.changes[lead])
        assert 'use "common.fsm" { Critique, reviewer }' in renamed and "agent reviewer\n" in renamed
        assert "agent reviewer {" in apply_edits(COMMON, edit.changes[common])

    run(scenario)


def test_rename_of_a_machine_renames_the_runs_of_it(folder: Path) -> None:
    lead, team = uri_of(folder / "lead.fsm"), uri_of(folder / "team.fsm")

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        await s.diagnostics(lead)
        edit = await s.rename(lead, *where(LEAD, "run research", inside=5), "study")
        assert "run study(topic = topic)" in apply_edits(LEAD, edit.changes[lead])
        assert apply_edits(TEAM, edit.changes[team]).startswith("machine study {")

    run(scenario)


def test_a_using_files_diagnostics_follow_the_edits_of_the_file_it_uses(folder: Path) -> None:
    lead, team = uri_of(folder / "lead.fsm"), uri_of(folder / "team.fsm")

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        s.open(team, TEAM)
        assert not await s.diagnostics(lead)
        await s.diagnostics(team)
        s.replace(team, TEAM.replace("input topic: str", "input subject: str").replace("{{ topic }}", "{{ subject }}"))
        assert not await s.diagnostics(team)
        # its `run` gives `topic`, which is gone: the lead is published again with the errors
        found = await s.published_until(lead, lambda found: bool(found))
        assert [d.code for d in found] == ["SW4101", "SW4100"]
        before = s.published_count(lead)
        s.replace(team, TEAM)
        while await s.published_after(lead, before):  # (one compiled before the fix may be published first)
            before = s.published_count(lead)

    run(scenario)


def test_completion_offers_run_targets_their_inputs_and_importable_names(folder: Path) -> None:
    lead = uri_of(folder / "lead.fsm")

    async def scenario(s: Session) -> None:
        s.open(lead, LEAD)
        await s.diagnostics(lead)
        text = LEAD.replace("        run research(topic = topic)\n", "        run \n")
        s.replace(lead, text)
        await s.diagnostics(lead)
        line, column = where(text, "run \n", inside=4)
        assert "research" in await s.completion(lead, line, column)
        text = LEAD.replace("run research(topic = topic)", "run research(")
        s.replace(lead, text)
        await s.diagnostics(lead)
        line, column = where(text, "run research(", inside=13)
        assert await s.completion(lead, line, column) == ["topic"]
        text = LEAD.replace('use "common.fsm" { Critique, editor }', 'use "common.fsm" { Critique, ')
        s.replace(lead, text)
        await s.diagnostics(lead)
        line, column = where(text, "{ Critique, ", inside=12)
        assert {"Critique", "editor"} <= set(await s.completion(lead, line, column))
        line, column = where(text, "    start state", inside=4)
        assert "run" in await s.completion(lead, line + 1, 8)

    run(scenario)


def test_a_read_inside_an_imported_declaration_is_not_indexed_in_the_using_file() -> None:
    """The checks find the inputs an imported agent's prompt reads, in the file that declares the agent: the
    using file's index holds only places of its own text, so a cursor there never lands on another file's
    offsets (which once made the name under it the wrong one)."""
    from statewright import api
    from statewright.lsp.analysis import Analysis

    path = Path(__file__).parent / "cases" / "valid" / "machines-that-run-machines" / "input.fsm"
    text = path.read_text(encoding="utf-8")
    analysis = Analysis(path.as_uri(), 1, text, project=api.new_project())
    index = analysis.index
    assert index is not None and index.occurrences
    here = analysis.compilation.ast.span.source  # type: ignore[union-attr]
    assert all(o.span.source is here for o in index.occurrences)
    for o in index.occurrences:  # each occurrence's text is its name (or holds it, for a declaration)
        assert o.key.name.rsplit(".", 1)[-1] in text[o.start:o.end] or o.key.kind == "file", (o, text[o.start:o.end])
