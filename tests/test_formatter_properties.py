"""Properties of `statewright fmt` over random machines: idempotent, same tree, same comments, valid output."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from strategies import machines

from statewright.compiler.tools.formatter import format_text
from statewright.grammar import parse_text

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
