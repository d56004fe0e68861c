"""`statewright lsp` over stdio with run variables and approval between tool calls: hover tells a variable's
type, starting value and the states that update it; definition, references and rename reach its updates,
guards, templates, tool arguments and `expect var`; completion offers variables in expressions and
templates, after an update's reducer and after `expect var`, the agent's tools in `ask before`, and the new
items where they fit."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytestmark = pytest.mark.slow

from support.lsp_session import Session, apply_edits, run, uri_of
from test_lsp import line_of, where

from statewright import api

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "approved_steps.fsm"
TEXT = EXAMPLE.read_text(encoding="utf-8")
URI = uri_of(EXAMPLE)


def test_hover_and_references_of_a_run_variable() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, TEXT)
        await s.diagnostics(URI)
        hover = await s.hover(URI, *where(TEXT, "var past_steps", inside=5))
        value = hover.contents.value  # type: ignore[union-attr]
        assert "**run variable**" in value and "var past_steps: list[Outcome] = []" in value
        assert "execute: append past_steps <- output" in value
        read = await s.hover(URI, *where(TEXT, "when next < len(todo)", inside=6))  # `next` in a guard
        assert "var next: int = 0" in read.contents.value  # type: ignore[union-attr]
        found = await s.definition(URI, *where(TEXT, "{{ todo[next] }}", inside=4))  # in a template
        assert found and found[0].range.start.line == line_of(TEXT, "    var todo: list[str] = []")
        places = await s.references(URI, *where(TEXT, "var next", inside=5))
        lines = sorted(r.range.start.line for r in places)
        assert line_of(TEXT, "        set next <- 0") in lines
        assert line_of(TEXT, "        set next <- next + 1") in lines  # the update and its value read it
        assert line_of(TEXT, "        expect var next 2") in lines
        assert line_of(TEXT, "            Carry out step {{ next + 1 }}") in lines

    run(scenario)


def test_renaming_a_run_variable_reaches_updates_guards_templates_and_tests() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, TEXT)
        edit = await s.rename(URI, *where(TEXT, "var next", inside=5), "position")
        renamed = apply_edits(TEXT, edit.changes[URI])
        for piece in ("var position: int = 0", "set position <- position + 1", "{{ todo[position] }}",
                      "when position < len(todo)", "expect var position 2", "{{ position + 1 }}"):
            assert piece in renamed, piece
        assert api.check_text(renamed, "x.fsm").ok
        for taken in ("todo", "task", "plan", "loop"):  # a variable, an input, a state, a Jinja name
            with pytest.raises(Exception, match="already declares|reserved"):
                await s.rename(URI, *where(TEXT, "var next", inside=5), taken)

    run(scenario)


def test_completion_of_variables_reducers_tools_and_test_steps() -> None:
    async def scenario(s: Session) -> None:
        s.open(URI, TEXT)
        await s.diagnostics(URI)
        line = line_of(TEXT, "        -> check")
        variables = {"todo", "next", "past_steps"}
        cases = [
            ("        when ", variables | {"output", "task"}),
            ("        append ", variables),
            ("        set next <- ", variables | {"output", "len"}),
            ('        do "{{ ', variables | {"task", "plan"}),
        ]
        for typed, expected in cases:
            s.edit(URI, (line, 0), (line, 0), typed + "\n")
            labels = set(await s.completion(URI, line, len(typed)))
            assert expected <= labels, (typed, labels)
            s.edit(URI, (line, 0), (line + 1, 0), "")
        s.edit(URI, (line, 0), (line, 0), "        when past_steps.\n")
        assert await s.completion(URI, line, len("        when past_steps.")) == []  # a list has no fields
        s.edit(URI, (line, 0), (line + 1, 0), "")
        s.edit(URI, (line, 0), (line, 0), "        ask before [std.\n")
        tools = set(await s.completion(URI, line, len("        ask before [std.")))
        assert {"std.shell", "std.python", "std.read_file"} <= tools and "std.http_get" not in tools
        s.edit(URI, (line, 0), (line + 1, 0), "")
        # the check state: an agent state without tool settings yet, updates repeatable
        check_line = line_of(TEXT, "        when output.finished -> done")
        s.edit(URI, (check_line, 0), (check_line, 0), "        \n")
        offered = set(await s.completion(URI, check_line, 8))
        assert {"ask before", "tool_rounds", "set", "append", "extend", "merge"} <= offered
        s.edit(URI, (check_line, 0), (check_line + 1, 0), "")
        # in the machine's block and in a test
        top = line_of(TEXT, "    var todo: list[str] = []")
        s.edit(URI, (top, 0), (top, 0), "    \n")
        assert "var" in set(await s.completion(URI, top, 4))
        s.edit(URI, (top, 0), (top + 1, 0), "")
        step = line_of(TEXT, "        approve execute\n")
        for typed, expected in (("        expect var ", variables), ("        reject ", {"execute"}),
                                ("        ", {"approve", "reject", "edit", "expect var"})):
            s.edit(URI, (step, 0), (step, 0), typed + "\n")
            labels = set(await s.completion(URI, step, len(typed)))
            assert expected <= labels, (typed, labels)
            if typed.strip() == "reject":
                assert "plan" not in labels  # no call of plan's waits for approval
            s.edit(URI, (step, 0), (step + 1, 0), "")

    run(scenario)
