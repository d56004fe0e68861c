"""The language server's pieces in process: positions, the cursor's context, quick fixes from a
diagnostic's own help, and completion and hover in the places the stdio tests do not visit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("lsprotocol")

from lsprotocol import types

from statewright.api import check_text
from statewright.lsp import features
from statewright.lsp.analysis import Analysis
from statewright.lsp.context import cursor_context, dotted_chain
from statewright.lsp.positions import LineIndex

SOURCE = """machine m {
    input topic: str

    type Note {
        text: str "what to say"
    }

    agent w {
        prompt "About {{ topic }}."
    }

    start state a {
        agent w
        do "Write about {{ topic }}."
        output Note
        -> done
    }

    final state done

    test "t" {
        reply a { text "x" }
        expect path [a, done]
    }
}
"""


def labels(text: str, line: int, character: int, good: Analysis | None = None) -> set[str]:
    a = Analysis("file:///m.fsm", 1, text)
    return {i.label for i in features.completion(a, good, types.Position(line, character)).items}


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_offsets_and_positions_round_trip_in_every_encoding(encoding: str) -> None:
    text = "a\nhé😀llo\n\nend"
    index = LineIndex(text, encoding)
    for offset in range(len(text) + 1):
        assert index.offset(*index.position(offset)) == offset
    emoji_after = {"utf-8": 7, "utf-16": 4, "utf-32": 3}[encoding]
    assert index.position(text.index("llo")) == (1, emoji_after)


@settings(max_examples=200, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "é", "😀", "\n", "\r", "\r\n", "\u2028", " "]), max_size=60).map("".join))
def test_a_document_shares_the_compilers_line_starts_and_they_are_its_own(text: str) -> None:
    """An open document's line index uses the line starts its compilation made of the same text (a large
    file has a line every few bytes): they are the ones it would make itself."""
    from statewright.diagnostics import SourceFile

    assert SourceFile("x.fsm", text).line_starts == LineIndex(text).starts
    analysis = Analysis("file:///x.fsm", 1, text)
    assert analysis.compilation.source is not None
    assert analysis.lines.starts is analysis.compilation.source.line_starts


def test_the_cursor_context_knows_its_block_its_string_and_its_template() -> None:
    text = SOURCE.replace('do "Write about {{ topic }}."', 'do "Write about {{ a.output.')
    context = cursor_context(text, text.index("a.output.") + len("a.output."))
    assert [b.kind for b in context.blocks] == ["machine", "state"]
    assert context.state is not None and context.state.name == "a"
    assert context.in_string and context.template == " a.output."
    assert dotted_chain(context.template) == (["a", "output"], "")
    comment = cursor_context("machine m { # a {{ b", len("machine m { # a {{ b"))
    assert comment.in_comment and not comment.in_string


def test_keywords_fit_the_block_the_cursor_is_in() -> None:
    lines = SOURCE.splitlines()
    agent_line = next(i for i, line in enumerate(lines) if "prompt" in line)
    text = "\n".join([*lines[:agent_line], "        ", *lines[agent_line:]]) + "\n"
    assert {"prompt", "model", "tools", "memory"} <= labels(text, agent_line, 8)
    machine_line = next(i for i, line in enumerate(lines) if "input topic" in line)
    text = "\n".join([*lines[:machine_line], "    ", *lines[machine_line:]]) + "\n"
    assert {"state", "agent", "type", "input", "test"} <= labels(text, machine_line, 4)
    final_line = next(i for i, line in enumerate(lines) if "final state done" in line)
    text = "\n".join([*lines[:final_line], "    final state x {", "        ", "    }", *lines[final_line:]]) + "\n"
    final = labels(text, final_line + 1, 8)
    assert {"result", "fail", "agent", "do", "call"} <= final and not {"when", "otherwise", "ask"} & final
    state_line = next(i for i, line in enumerate(lines) if "start state" in line)
    text = "\n".join([*lines[:state_line], "    state y {", "        ", "    }", *lines[state_line:]]) + "\n"
    empty = labels(text, state_line + 1, 8)
    assert {"ask", "agent", "call", "model", "when", "otherwise", "visits", "parallel", "for"} <= empty
    assert "after" not in empty  # only a state that asks a person has a deadline
    text = "\n".join([*lines[:machine_line], '    test "t" {', "        ", "    }", *lines[machine_line:]]) + "\n"
    assert {"timeout", "expect output", "expect instruction", "allow unused replies"} <= labels(
        text, machine_line + 1, 8)
    text = "\n".join([*lines[:machine_line], "    tool std.http_get {", "        ", "    }",
                      *lines[machine_line:]]) + "\n"
    assert labels(text, machine_line + 1, 8) == {"allow", "secrets", "headers", "query"}


def test_a_prompt_template_offers_inputs_only() -> None:
    text = SOURCE.replace('prompt "About {{ topic }}."', 'prompt "About {{ ')
    line = text.splitlines().index('        prompt "About {{ ')
    good = Analysis("file:///m.fsm", 1, SOURCE)
    assert labels(text, line, len('        prompt "About {{ '), good) == {"topic"}


def test_hover_describes_an_agent_an_input_and_a_type() -> None:
    a = Analysis("file:///m.fsm", 1, SOURCE)

    def hover(needle: str, inside: int) -> str:
        offset = SOURCE.index(needle) + inside
        line = SOURCE.count("\n", 0, offset)
        found = features.hover(a, types.Position(line, offset - SOURCE.rfind("\n", 0, offset) - 1))
        assert found is not None
        return found.contents.value  # type: ignore[union-attr]

    assert "**agent** `w`" in hover("agent w {", 6) and "About {{ topic }}." in hover("agent w {", 6)
    assert "input topic: str" in hover("input topic", 7)
    assert 'text: str  # what to say' in hover("type Note", 6)
    assert "**field** `Note.text`: `str`" in hover('text "x"', 1)


@pytest.mark.parametrize(("wrong", "fixed"), [
    ("when output.text = \"x\" -> done", "when output.text == \"x\" -> done"),
    ("when output.text => done", "when output.text -> done"),
    ("else -> done", "otherwise -> done"),
    ("-> dnoe", "-> done"),
])
def test_a_diagnostic_that_names_its_fix_carries_it(wrong: str, fixed: str) -> None:
    text = SOURCE.replace("-> done\n    }\n\n    final", f"{wrong}\n    }}\n\n    final")
    [first, *_] = check_text(text, "m.fsm").diagnostics
    [(title, new_text), *_] = features.fixes_for(first)
    assert first.span is not None
    repaired = text[: first.span.start] + new_text + text[first.span.end :]
    assert fixed in repaired and title


FAN_OUT = """machine m {
    input files: list[str]

    agent w {
        prompt "p"
    }

    start state reviews {
        parallel [a, b]
        -> build
    }

    branch state a {
        agent w
        do "A."
    }

    branch state b {
        agent w
        do "B."
    }

    state build {
        for file in files max 3
        agent w
        do "Write {{ file }}."
        -> done
    }

    final state done
}
"""


def test_a_state_offers_the_fan_out_keywords_and_parallel_offers_the_branch_states() -> None:
    lines = FAN_OUT.splitlines()
    good = Analysis("file:///m.fsm", 1, FAN_OUT)
    build = lines.index("    state build {")
    text = "\n".join([*lines[:build], "    state empty {", "        ", "    }", *lines[build:]]) + "\n"
    assert {"parallel", "join all", "join first", "for", "agent"} <= labels(text, build + 1, 8, good)
    text = "\n".join([*lines[:build + 1], "        ", *lines[build + 1:]]) + "\n"
    in_map = labels(text, build + 1, 8, good)  # a map whose agent works: no fan-out, no person
    assert {"model", "output", "when"} <= in_map
    assert not {"parallel", "join all", "join first", "for", "ask", "after", "call", "agent", "do"} & in_map
    line = lines.index("        parallel [a, b]")
    text = "\n".join([*lines[:line], "        parallel [", *lines[line + 1:]]) + "\n"
    assert labels(text, line, len("        parallel ["), good) == {"a", "b"}
    machine_line = lines.index("    input files: list[str]")
    text = "\n".join([*lines[:machine_line], "    ", *lines[machine_line:]]) + "\n"
    assert "branch state" in labels(text, machine_line, 4, good)


def test_a_branch_entry_is_a_reference_to_its_state() -> None:
    from statewright.lsp.index import Key, build_index

    compilation = check_text(FAN_OUT)
    assert compilation.ast is not None
    index = build_index(compilation.ast, compilation.symbols)
    uses = [FAN_OUT[o.start:o.end] for o in index.references(Key("state", "a"), include_definition=False)]
    assert uses == ["a"]
    assert index.references(Key("input", "files"), include_definition=False)  # the list a map goes over


def test_the_index_keeps_one_occurrence_per_name_and_place_the_declaration_first() -> None:
    """Occurrences found twice (by the syntax tree and by the checks' records) are one; at one place a
    declaration wins over a use of the same name; two names at one place are both kept; all by place."""
    from statewright.diagnostics import SourceFile
    from statewright.lsp.index import Key, Occurrence, SymbolIndex

    source = SourceFile("x.fsm", "state a -> b\n")
    a, b, other = Key("state", "a"), Key("state", "b"), Key("agent", "a")
    index = SymbolIndex([
        Occurrence(b, source.span(11, 12)),
        Occurrence(a, source.span(6, 7)),
        Occurrence(a, source.span(6, 7), definition=True),
        Occurrence(other, source.span(6, 7)),
        Occurrence(b, source.span(11, 12)),
        Occurrence(a, source.span(6, 7)),
        Occurrence(a, source.span(0, 12), definition=True),
    ])
    assert [(o.key, o.start, o.end, o.definition) for o in index.occurrences] == [
        (a, 0, 12, True), (a, 6, 7, True), (other, 6, 7, False), (b, 11, 12, False)]
    assert index.at(6) is not None and index.at(6).key in (a, other) and index.at(11).key == b  # type: ignore[union-attr]
    assert index.definition(a) is not None and index.definition(a).start == 0  # type: ignore[union-attr]
    assert len(index.references(a)) == 2 and index.references(b, include_definition=False)[0].start == 11


@settings(max_examples=200, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(0, 3_000_000), st.integers(0, 40)), max_size=300))
def test_the_index_orders_occurrences_by_place_as_a_sort_of_every_key_would(spans: list[tuple[int, int]]) -> None:
    """The symbol index's order (buckets of starts, each sorted) is the order of one sort by start, then
    end, then the order found: the same places in the same order, without a sort key per occurrence."""
    from array import array

    from statewright.diagnostics.source import END_SHIFT
    from statewright.lsp.index import _by_place

    offsets = array("q", [start | (start + length) << END_SHIFT for start, length in spans])
    expected = sorted(range(len(spans)), key=lambda i: (spans[i][0], spans[i][1], i))
    assert list(_by_place(offsets)) == expected


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-(2**40), 2**40), max_size=300), data=st.data())
def test_the_index_puts_its_columns_in_order_where_they_are(values: list[int], data: st.DataObject) -> None:
    """The index orders its arrays in place, following the order's cycles (no second copy of them): each
    column ends as the gather of the order, and the order is spent."""
    from array import array

    from statewright.lsp.index import _permute

    order = data.draw(st.permutations(range(len(values))))
    wide, narrow, flags = array("q", values), array("i", [v % 1000 for v in values]), bytearray(v % 256 for v in values)
    _permute(array("i", order), wide, narrow, flags)
    assert list(wide) == [values[k] for k in order]
    assert list(narrow) == [values[k] % 1000 for k in order] and list(flags) == [values[k] % 256 for k in order]
