"""Properties of `statewright fmt` over random machines: idempotent, same tree, same comments, valid output."""

from __future__ import annotations

import dataclasses
from collections import Counter
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import machines, objects, values

from statewright.compiler.views import formatter
from statewright.compiler.views.formatter import LINE_WIDTH, format_text
from statewright.compiler.views.source_text import display_width
from statewright.grammar import ast, parse_text

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def canonical(source: str) -> str:
    result = format_text(source)
    assert [(d.code, d.message) for d in result.diagnostics] == []
    assert result.text is not None
    return result.text


def comment_texts(source: str) -> Counter[str]:
    return Counter(c.text.rstrip(" \t\f\r") for c in parse_text(source).comments)


@PROPERTY
@given(machines())
def test_generated_machines_are_valid_input(source: str) -> None:
    assert [(d.code, d.message) for d in parse_text(source).diagnostics] == []


@PROPERTY
@given(machines())
def test_formatting_is_idempotent(source: str) -> None:
    once = canonical(source)
    assert canonical(once) == once


@PROPERTY
@given(machines())
def test_formatting_keeps_the_syntax_tree(source: str) -> None:
    before = parse_text(source).machine
    assert before is not None
    assert parse_text(canonical(source)).machine == before


@PROPERTY
@given(machines())
def test_formatting_keeps_every_comment(source: str) -> None:
    assert comment_texts(canonical(source)) == comment_texts(source)


@PROPERTY
@given(machines())
def test_formatted_text_parses_without_diagnostics_and_has_one_final_newline(source: str) -> None:
    out = canonical(source)
    assert [(d.code, d.message) for d in parse_text(out).diagnostics] == []
    assert out.endswith("\n") and not out.endswith("\n\n")
    assert "\r" not in out
    if '"""' not in out:  # text inside triple quotes may end in spaces; nothing else may
        assert all(line == line.rstrip(" \t") for line in out.split("\n"))


@PROPERTY
@given(machines())
def test_crlf_line_endings_give_the_same_result(source: str) -> None:
    assert canonical(source.replace("\n", "\r\n")) == canonical(source)


# ---- short values on one line -------------------------------------------------------------------------


def _block_values(node: object) -> list[ast.Value]:
    """Every object with entries and every list holding one, outermost first, in source order; the
    arguments of a scripted tool call are always written inline and are left out."""
    found: list[ast.Value] = []
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.ReplyCalls):
            continue
        if isinstance(item, ast.Value):
            if item.kind in ("object", "list") and _holds_an_entry(item):
                found.append(item)
            children: list[object] = [e.value for e in ast.object_entries(item)] + list(ast.list_items(item))
        elif isinstance(item, ast.Node):
            children = [getattr(item, f.name) for f in dataclasses.fields(item)]
        elif isinstance(item, (tuple, list)):
            children = list(item)
        else:
            continue
        stack.extend(reversed(children))
    return found


def _holds_an_entry(value: ast.Value) -> bool:
    return bool(ast.object_entries(value)) or any(_holds_an_entry(v) for v in ast.list_items(value))


def _line_of(text: str, offset: int) -> tuple[int, str]:
    """The column of `offset` in its line, and that whole line."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return offset - start, text[start : end if end >= 0 else len(text)]


@st.composite
def machines_with_values(draw: st.DrawFn) -> str:
    """A machine whose test replies, input and expectations are random values (objects and lists, nested)."""
    replies = draw(st.lists(st.one_of(objects, values), min_size=1, max_size=6))
    lines = [f"reply s{i} {' '.join(tokens)}" for i, tokens in enumerate(replies)]
    lines.append("input " + " ".join(draw(objects)))
    lines.append("expect output s0 visit 2 " + " ".join(draw(values)))
    default = " ".join(draw(objects))
    return f'machine m {{ input cfg: Cfg = {default}\ntest "t" {{\n' + "\n".join(lines) + "\n}\n}\n"


@PROPERTY
@given(st.one_of(machines(with_comments=False), machines_with_values()),
       st.one_of(st.just(LINE_WIDTH), st.integers(16, 120)))
def test_a_value_is_on_one_line_exactly_when_that_line_fits(source: str, width: int) -> None:
    with mock.patch.object(formatter, "LINE_WIDTH", width):
        out = canonical(source)
        assert canonical(out) == out
    with mock.patch.object(formatter, "LINE_WIDTH", 10**9):
        unbounded = canonical(source)  # every value that can be on one line is
    narrow, wide = parse_text(out).machine, parse_text(unbounded).machine
    assert narrow is not None and wide is not None
    for value, as_one_line in zip(_block_values(narrow), _block_values(wide), strict=True):
        written = value.span.text
        one_line = as_one_line.span.text
        column, line = _line_of(out, value.span.start)
        if "\n" not in written:
            assert display_width(line) <= width, line
            continue
        # on several lines: its one-line form holds a line break (a string over lines) or does not fit
        suffix = 1 if out[value.span.end : value.span.end + 1] == "," else 0
        assert "\n" in one_line or display_width(line[:column] + one_line) + suffix > width, written
