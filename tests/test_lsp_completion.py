"""Completion through `statewright lsp` with a real LSP client (pygls's): inside a state only what fits the
kind of state its other lines make it, and snippets for a machine, a state, a test, a parallel state, a
map and a state that asks a person — each of which, filled with its defaults, is a machine that checks."""

from __future__ import annotations

import pytest

pytest.importorskip("pygls")

from lsprotocol import types
from support.lsp_session import Session, run

from statewright import api
from statewright.lsp.completion import snippet_text

URI = "file:///work/kinds.fsm"
KINDS = """machine kinds {
    input files: list[str]

    type Decision {
        approved: bool
    }

    agent w {
        prompt \"\"\"
            ask yourself first
            after that, answer
        \"\"\"
    }

    start state write {
        agent w
        do "Write."
        -> run
    }

    state run {
        call std.python(code = "print(1)")
        -> approve
    }

    state approve {
        ask "Go on?"
        output Decision
        when output.approved -> fan
        otherwise -> done
    }

    state fan {
        parallel [a, b]
        -> each
    }

    branch state a {
        agent w
        do "A."
    }

    branch state b {
        agent w
        do "B."
    }

    state each {
        for f in files max 3
        agent w
        do "{{ f }}"
        -> done
    }

    final state done {
        fail "stopped"
    }
}
"""
SNIPPETS = types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
    completion=types.CompletionClientCapabilities(
        completion_item=types.ClientCompletionItemOptions(snippet_support=True))))
EVERY_STATE_WORD = {"agent", "model", "do", "call", "ask", "output", "tell", "visits", "retries", "after", "when",
                    "otherwise", "->", "parallel", "join all", "join first", "for", "result", "fail"}


def with_blank_line_after(text: str, line: str) -> tuple[str, int]:
    """The text with an empty line (8 spaces) after `line`, and that empty line's number."""
    lines = text.split("\n")
    at = lines.index(line) + 1
    return "\n".join([*lines[:at], "        ", *lines[at:]]), at


@pytest.mark.parametrize(("after_line", "offered", "not_offered"), [
    ("    start state write {", {"model", "output", "tell", "visits", "retries", "when", "otherwise", "->", "for"},
     {"ask", "after", "call", "parallel", "join all", "join first", "agent", "do", "result", "fail"}),
    ("    state run {", {"output", "tell", "visits", "retries", "when", "for"},
     {"agent", "do", "model", "ask", "after", "parallel", "join all"}),
    ("    state approve {", {"tell", "visits", "after", "when"},
     {"agent", "do", "model", "call", "retries", "for", "parallel", "join all", "ask", "output", "otherwise"}),
    ("    state fan {", {"join all", "join first", "tell", "visits", "when", "otherwise"},
     {"agent", "do", "model", "call", "ask", "after", "output", "retries", "for", "parallel"}),
    ("    branch state a {", {"model", "output", "when"}, {"ask", "after", "parallel", "join all", "for", "call"}),
    ("    state each {", {"model", "output", "when", "tell"},
     {"ask", "after", "parallel", "join first", "for", "call", "agent", "do"}),
    ("    final state done {", {"agent", "do", "call", "output", "model"},
     {"result", "fail", "when", "otherwise", "->", "after", "ask", "tell", "parallel"}),
])
def test_a_state_is_offered_only_what_fits_its_kind(after_line: str, offered: set[str],
                                                    not_offered: set[str]) -> None:
    text, line = with_blank_line_after(KINDS, after_line)

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        await s.diagnostics(URI)
        labels = set(await s.completion(URI, line, 8)) & EVERY_STATE_WORD
        assert offered <= labels and not labels & not_offered, labels

    run(scenario)


def test_the_kind_is_read_from_a_state_that_does_not_parse_yet() -> None:
    text = KINDS.replace('    state approve {\n        ask "Go on?"\n',
                         '    state approve {\n        ask "Go on?\n        \n')
    line = text.split("\n").index('        ask "Go on?') + 1

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        assert any(d.code.startswith("SW1") for d in await s.diagnostics(URI))
        labels = set(await s.completion(URI, line, 8))
        assert "after" in labels and not {"agent", "do", "call"} & labels

    run(scenario)


def test_snippets_are_offered_where_they_go_to_a_client_that_takes_snippets() -> None:
    lines = KINDS.split("\n")
    machine_level = lines.index("    state run {")
    text = "\n".join([*lines[:machine_level], "    ", *lines[machine_level:]])

    async def scenario(s: Session) -> None:
        s.open(URI, text)
        await s.diagnostics(URI)
        items = [i for i in await s.completion_items(URI, machine_level, 4)
                 if i.kind == types.CompletionItemKind.Snippet]
        assert [i.label for i in items] == ["state", "test", "parallel", "map", "ask"]
        assert all(i.insert_text_format == types.InsertTextFormat.Snippet and i.insert_text for i in items)
        top = [i.label for i in await s.completion_items(URI, len(lines), 0)
               if i.kind == types.CompletionItemKind.Snippet]
        assert top == ["machine"]
        inside_state = await s.completion_items(URI, lines.index("    state run {") + 2, 8)
        assert not [i for i in inside_state if i.kind == types.CompletionItemKind.Snippet]

    run(scenario, capabilities=SNIPPETS)

    async def plain_client(s: Session) -> None:
        s.open(URI, text)
        await s.diagnostics(URI)
        items = await s.completion_items(URI, machine_level, 4)
        assert items and not [i for i in items if i.kind == types.CompletionItemKind.Snippet]

    run(plain_client)


def test_each_snippet_filled_with_its_defaults_is_part_of_a_machine_that_checks() -> None:
    def indented(text: str) -> str:
        return "\n".join("    " + line if line else "" for line in text.split("\n"))

    machine = snippet_text("machine")
    assert api.check_text(machine, "m.fsm").ok
    agent = '\n    agent agent {\n        prompt "p"\n    }\n'
    around = {  # what the rest of the machine declares for the snippet's names
        "state": agent + "    final state next\n",
        "test": "",
        "parallel": agent + "    final state next\n",
        "map": agent + "    input list: list[str]\n    final state next\n",
        "ask": "\n    type Decision {\n        approved: bool\n    }\n"
               "    final state next\n    final state refused\n    final state timed_out\n",
    }
    for label, extra in around.items():
        text = snippet_text(label)
        assert "$" not in text
        source = machine[: machine.rindex("}")] + "\n" + indented(text) + "\n" + extra + "}\n"
        if label == "test":  # the test scripts the machine's own start state
            source = source.replace('reply state "A reply."', 'reply work "A reply."').replace(
                "expect path [state, done]", "expect path [work, done]").replace('name "value"', 'task "value"')
        errors = [(d.code, d.message) for d in api.check_text(source, f"{label}.fsm").diagnostics
                  if d.severity.value == "error"]
        assert errors == [], (label, source)
