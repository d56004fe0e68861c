"""Every syntax error of a file in one run: each positioned, with a hint, none of them a consequence of another.

The property: k independent mistakes put into a valid spec (each in its own statement, anywhere, several in
one block as readily as in separate ones) give exactly k syntax errors, each on the line of its mistake and
with the code that names it. The specs are the examples and the valid golden cases in their canonical layout
(`statewright fmt`), so each statement is one line. Then the common slips one by one, the faces that report
them (the CLI, the language server), and the limits (at most MAX_SYNTAX_ERRORS, never an internal error).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statewright import api
from statewright.compiler.views.formatter import format_text
from statewright.grammar import parse_text
from statewright.grammar.recovery import MAX_SYNTAX_ERRORS

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted([*ROOT.glob("examples/*.fsm"), *ROOT.glob("tests/cases/valid/*/input.fsm")])


def _canonical(path: Path) -> str:
    text = format_text(path.read_text(encoding="utf-8")).text
    assert text is not None and not parse_text(text).diagnostics.items, path
    return text


CANONICAL = [_canonical(p) for p in SPECS]


# ---- mistakes, one statement each ----------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """A slip made in one line: the line it fits, the line it makes, and the code that names it."""

    code: str
    fits: re.Pattern[str]
    make: str  # a replacement for `fits`, in re.sub's syntax
    block: str = "state"  # the block whose statements it is made in ("" for the machine's own)


_STATEMENT_END = r"(?P<end>\s*(?:#.*)?)$"
MISTAKES = (
    Mistake("SW1030", re.compile(r"^(?P<i>\s+)output (?P<t>[A-Za-z_][\w\[\]?]*)" + _STATEMENT_END),
            r"\g<i>output: \g<t>\g<end>"),
    Mistake("SW1030", re.compile(r"^(?P<i>\s+)agent (?P<a>\w+)" + _STATEMENT_END), r"\g<i>agent: \g<a>\g<end>"),
    Mistake("SW1014", re.compile(r"^(?P<i>\s+)-> (?P<rest>\w+.*)$"), r"\g<i>=> \g<rest>"),
    Mistake("SW1014", re.compile(r"^(?P<i>\s+when .+?) -> (?P<rest>\w+.*)$"), r"\g<i> => \g<rest>"),
    Mistake("SW1014", re.compile(r"^(?P<i>\s+when [^\"]+?) -> (?P<rest>\w+.*)$"), r"\g<i> \g<rest>"),
    Mistake("SW1010", re.compile(r"^(?P<i>\s+when [^\"]*?) == (?P<rest>.*)$"), r"\g<i> = \g<rest>"),
    Mistake("SW1012", re.compile(r"^(?P<i>\s+when [^\"]*?) and (?P<rest>.*)$"), r"\g<i> && \g<rest>"),
    Mistake("SW1011", re.compile(r"^(?P<i>\s+)otherwise -> (?P<rest>.*)$"), r"\g<i>else -> \g<rest>"),
    Mistake("SW1001", re.compile(r"^(?P<i>\s+(?:-> \w+|agent \w+|output \w+|tell \[[\w, ]*\]|visits \d+))"
                                 + _STATEMENT_END), r"\g<i>;\g<end>"),
    Mistake("SW1001", re.compile(r"^(?P<i>\s+do )\"(?P<s>[^\"\\']*)\"" + _STATEMENT_END), r"\g<i>'\g<s>'\g<end>"),
    Mistake("SW1013", re.compile(r"^(?P<i>\s+)final state (?P<n>\w+)" + _STATEMENT_END), r"\g<i>final \g<n>\g<end>",
            block=""),
    Mistake("SW1031", re.compile(r"^(?P<i>\s+)(?P<s>(?:agent \w+|do \"[^\"].*\"|output \w+))" + _STATEMENT_END),
            "\\g<i>\\g<s>\\g<end>\n\\g<i>prompt \"Be brief.\""),
)


def candidates(text: str) -> list[tuple[int, int]]:
    """(line index, mistake index) for every mistake that fits a line of `text`, in the kind of block it is
    made in (outside strings over several lines)."""
    found = []
    block: list[str] = []
    in_long_string = False
    for i, line in enumerate(text.split("\n")):
        quotes = line.count('"""') % 2 == 1
        if in_long_string or quotes:
            in_long_string ^= quotes
            continue
        opened = re.match(r"\s*(?:(?:start|final|branch)\s+)*(state|agent|test|tool|type|limits)\b.*\{\s*$", line)
        if opened:
            block.append(opened.group(1))
            continue
        if line.strip() == "}" and block:
            block.pop()
            continue
        here = block[-1] if block else ""
        found += [(i, m) for m, mistake in enumerate(MISTAKES) if mistake.block == here and mistake.fits.match(line)]
    return found


def inject(text: str, picks: list[tuple[int, int]]) -> tuple[str, list[tuple[int, str]]]:
    """The text with each picked mistake made, and (line, code) of each, 1-based lines."""
    lines = text.split("\n")
    expected = []
    out: list[str] = []
    by_line = dict(picks)
    for i, line in enumerate(lines):
        if i in by_line:
            mistake = MISTAKES[by_line[i]]
            made = mistake.fits.sub(mistake.make, line, count=1).split("\n")
            expected.append((len(out) + len(made), mistake.code))  # the last line made holds the mistake
            out += made
        else:
            out.append(line)
    return "\n".join(out), expected


@st.composite
def mistaken_specs(draw: st.DrawFn) -> tuple[str, list[tuple[int, str]]]:
    text = draw(st.sampled_from(CANONICAL))
    places = candidates(text)
    lines = sorted({line for line, _ in places})
    k = draw(st.integers(1, min(6, len(lines))))
    chosen = draw(st.lists(st.sampled_from(lines), min_size=k, max_size=k, unique=True))
    picks = [(line, draw(st.sampled_from([m for l_, m in places if l_ == line]))) for line in chosen]
    return inject(text, picks)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mistaken_specs())
def test_k_independent_mistakes_give_exactly_k_syntax_errors_on_their_lines(case: tuple[str, list]) -> None:
    text, expected = case
    found = [(d.span.start_pos.line, d.code) for d in parse_text(text, "m.fsm").diagnostics.sorted()]
    assert sorted(found) == sorted(expected), text


def test_each_mistake_alone_and_with_one_on_the_next_line_gives_exactly_its_errors() -> None:
    """Every place of every spec, every kind of mistake that fits there: alone, and beside each that fits
    the next line (two mistakes in a row in one block, the case a per-declaration recovery misses)."""
    tried = 0
    for text in CANONICAL:
        places = candidates(text)
        cases = [[p] for p in places] + [[p, q] for p in places for q in places if q[0] == p[0] + 1]
        for picks in cases:
            mistaken, expected = inject(text, picks)
            found = [(d.span.start_pos.line, d.code) for d in parse_text(mistaken, "m.fsm").diagnostics.sorted()]
            assert sorted(found) == sorted(expected), mistaken
            tried += 1
    assert tried > 1000


def test_every_spec_offers_places_for_several_mistakes() -> None:
    rich = [t for t in CANONICAL if len({line for line, _ in candidates(t)}) >= 6]
    assert len(rich) >= 10
    kinds = {m for t in CANONICAL for _, m in candidates(t)}
    assert kinds == set(range(len(MISTAKES))), "every kind of mistake is tried somewhere"


# ---- the common slips, each with its hint ---------------------------------------------------------

STATE = """machine m {
    type Draft { text: str }
    agent writer { prompt "You write." }
    start state draft {
        agent writer
        do "Write."
        output Draft
        when output.text == "x" -> done
        -> done
    }
    final state done
}
"""


@pytest.mark.parametrize(("old", "new", "code", "message", "help"), [
    ("output Draft", "output: Draft", "SW1030", "'output' takes no ':'", "drop the colon"),
    ("-> done\n    }", "=> done\n    }", "SW1014", "'=>' is not an arrow", "write '->'"),
    ("-> done\n    }", "-> done\n", "SW1002", "unexpected token 'final'", "the block before this line may be missing"),
    ('do "Write."', 'do "Write."\n        prompt "Be brief."', "SW1031", "'prompt' does not belong in a state",
     "'prompt' is written in an agent"),
    ('prompt "You write."', 'prompt "You write." do "Write."', "SW1031", "'do' does not belong in an agent",
     "'do' is written in a state"),
    # an arrow at the end of a line: the next line's first word is read as its target
    ('"x" -> done', '"x" ->', "SW1002", "'->' has no target state", "write the state this transition goes to"),
    ('"x" -> done', '"x" -> # later', "SW1002", "'->' has no target state", "write the state"),
    ('"x" -> done\n        -> done', '"x" ->\n\n        agent writer', "SW1002", "'->' has no target state",
     "write the state"),
    ('"x" -> done\n        -> done', '"x" -> done\n        ->', "SW1002", "'->' has no target state",
     "write the state this transition goes to after '->', on the same line ('}' on the next line"),
])
def test_a_common_slip_is_named_with_its_hint(old: str, new: str, code: str, message: str, help: str) -> None:
    text = STATE.replace(old, new, 1)
    [diag] = parse_text(text, "m.fsm").diagnostics.items
    assert (diag.code, diag.message) == (code, message)
    assert diag.help.startswith(help)


def test_an_arrow_without_a_target_is_named_at_the_arrow_and_the_lines_after_it_still_read() -> None:
    text = STATE.replace('"x" -> done', '"x" ->').replace('prompt "You write."', 'prompt "You write." "again"')
    found = [(d.span.start_pos.line, d.span.start_pos.column, d.code, d.message)
             for d in parse_text(text, "m.fsm").diagnostics.sorted()]
    assert found == [(3, 40, "SW1002", "unexpected string '\"again\"'"), (8, 33, "SW1002", "'->' has no target state")]
    # a target below its arrow is a target
    assert not parse_text(STATE.replace('"x" -> done', '"x" ->\n            done')).diagnostics
    # a keyword that a whole transition then reads as its target: the check says what happened
    text = STATE.replace('"x" -> done\n        -> done', '"x" ->\n        otherwise -> done')
    [diag] = api.check_text(text, "m.fsm").diagnostics
    assert (diag.code, diag.span.start_pos.line) == ("SW2002", 9)
    assert diag.message == "'->' has no target state: 'otherwise' on the next line was read as its target"


def test_several_mistakes_in_one_block_are_all_reported_once_in_one_run() -> None:
    text = STATE.replace("output Draft", "output: Draft").replace('"x" -> done', '"x" => done').replace(
        "-> done\n    }", "-> done;\n    }").replace("agent writer\n", "agent writer\n        memory all\n")
    found = [(d.span.start_pos.line, d.code) for d in parse_text(text, "m.fsm").diagnostics.sorted()]
    assert found == [(6, "SW1031"), (8, "SW1030"), (9, "SW1014"), (10, "SW1001")]


def test_a_missing_brace_is_one_error_and_the_blocks_after_it_are_read_as_blocks() -> None:
    text = STATE.replace("        -> done\n    }", "        -> done\n") + ""
    text = text.replace("    final state done\n", "    state extra {\n        do 'x'\n    }\n    final state done\n")
    found = [(d.span.start_pos.line, d.code) for d in parse_text(text, "m.fsm").diagnostics.sorted()]
    assert found == [(11, "SW1002"), (12, "SW1001")]


def test_at_most_the_limit_of_syntax_errors_is_reported_and_nothing_breaks() -> None:
    text = "machine m {\n" + "".join(f"    state s{i} {{ -> x; }}\n" for i in range(200)) + "}\n"
    codes = [d.code for d in parse_text(text, "m.fsm").diagnostics.items]
    assert codes == ["SW1001"] * MAX_SYNTAX_ERRORS


@pytest.mark.parametrize("text", [
    ";;;;;;;;;;;" * 50,
    "machine m { " + "{" * 500 + " }",
    "machine m { state a { " + "when " * 300 + "-> b } }",
    "machine m {\n" + "state s { '" * 100 + "\n}\n",
    '"""' * 7 + "machine m {",
    "machine m { test \"t\" { reply a { b { c " + "}" * 40,
    "}" * 300,
])
def test_hostile_texts_end_in_syntax_errors_never_an_internal_one(text: str) -> None:
    diagnostics = parse_text(text, "m.fsm").diagnostics.items
    assert diagnostics and len(diagnostics) <= MAX_SYNTAX_ERRORS + 1
    assert all(d.code.startswith("SW1") and d.help for d in diagnostics)


# ---- the faces that report them -----------------------------------------------------------------


def test_check_reports_every_syntax_error_of_a_file_in_one_run(tmp_path: Path) -> None:
    text = STATE.replace("output Draft", "output: Draft").replace('"x" -> done', '"x" => done')
    (tmp_path / "m.fsm").write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "statewright", "check", "--format", "json", "m.fsm"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    doc = json.loads(done.stdout)
    assert done.returncode == 1
    assert [(d["code"], d["range"]["start"]["line"]) for d in doc["diagnostics"]] == [("SW1030", 7), ("SW1014", 8)]
    assert all(d["help"] for d in doc["diagnostics"])


def test_the_api_reports_every_syntax_error_and_no_check_runs_on_a_text_that_does_not_parse() -> None:
    text = STATE.replace("output Draft", "output: Draft").replace("-> done\n    }", "=> done\n    }")
    compilation = api.check_text(text, "m.fsm")
    assert compilation.ast is None and compilation.ir is None
    assert [d.code for d in compilation.diagnostics] == ["SW1030", "SW1014"]


def test_the_language_server_publishes_every_syntax_error_of_a_document() -> None:
    pytest.importorskip("pygls")
    from support.lsp_session import Session, run, uri_of

    text = STATE.replace("output Draft", "output: Draft").replace('"x" -> done', '"x" => done').replace(
        "-> done\n    }", "-> done;\n    }")
    uri = uri_of(ROOT / "m.fsm")

    async def scenario(s: Session) -> None:
        s.open(uri, text)
        found = await s.diagnostics(uri)
        assert [(d.code, d.range.start.line) for d in found] == [("SW1030", 6), ("SW1014", 7), ("SW1001", 8)]
        assert all("help:" in d.message for d in found)

    run(scenario)


def test_an_unterminated_string_after_a_keyword_read_as_a_name_is_named_as_the_string() -> None:
    """In `limits { steps 9  prompt "You w` the keyword `prompt` may be a limit's name; the string it is
    followed by never ends: that is the mistake named, not the keyword."""
    text = STATE.replace('prompt "You write."', 'prompt "You write."\n    }\n    limits {\n        steps 9  prompt "You w', 1)
    found = [(d.code, d.message) for d in parse_text(text, "m.fsm").diagnostics.sorted()]
    assert found[0] == ("SW1004", "unterminated string")
