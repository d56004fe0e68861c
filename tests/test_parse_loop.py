"""The parse loop (grammar/lalr.py) builds exactly what Lark's own parser builds, and stops where it stops.

The reference is Lark as its documentation has it: the contextual lexer, the post-lexer, the LALR parser
with propagated positions building a parse tree, and the builder's methods run over that tree as a
transformer. Every example and every test case, and thousands of mutations of them (the hostile inputs a
person or a model writes: cut, doubled, spliced, keywords where names go), must come out the same: the
same tree and the same comments for a text that parses; for one that does not, the loop's first slip is
where Lark's parser raises its first error — the same place, the same token, the same parser state, the
same tokens acceptable there. (What the loop does after that, recovery, has no counterpart in Lark.)

Both sides share the builder's methods, the post-lexer and the keyword-as-name handler (parser.py): what
is compared is the reading and the parse, each of those being tested on its own elsewhere.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.visitors import Transformer_NonRecursive

from statewright.diagnostics import SourceFile, Span
from statewright.grammar import parser
from statewright.grammar.build import TreeBuilder
from statewright.grammar.lalr import END, BuildFailure, drive
from statewright.grammar.node import Node

_ROOT = Path(__file__).resolve().parents[1]
_SPECS = sorted([*_ROOT.glob("examples/*.fsm"), *_ROOT.glob("tests/cases/*/*/input.fsm")])


def _texts() -> list[tuple[str, str]]:
    found = []
    for path in _SPECS:
        try:
            found.append((str(path.relative_to(_ROOT)), path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue  # a case of a file that is not UTF-8: it never reaches the parser
    return found


class _Reference:
    """A parse as Lark itself would do it: a parse tree with propagated positions, then the builder's
    methods over it, bottom up, left to right (the order of the LALR reductions); or Lark's first error,
    read as the loop reads a slip."""

    def __init__(self) -> None:
        self.comments: list[Token] = []
        self.lark = Lark(parser.GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                         propagate_positions=True, maybe_placeholders=False,
                         lexer_callbacks={"COMMENT": self.comments.append}, postlex=parser._FieldNamesPostLex())

    def outcome(self, source: SourceFile) -> tuple[Any, ...]:
        self.comments.clear()
        builder = TreeBuilder(source)

        class Build(Transformer_NonRecursive):
            def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
                return getattr(builder, data)(meta, *children)

        on_error = parser._keyword_as_name(self.lark)
        try:
            with parser._parsing(source.text):
                tree = self.lark.parse(source.text, on_error=on_error)
        except UnexpectedInput as err:
            # what was reduced before the error is built first, as the loop builds it, and a failure in it
            # comes first (the loop stops building at a failure, and reads on for syntax only)
            try:
                pending = list(err.interactive_parser.parser_state.value_stack)
                while pending:  # each tree of a rule with a builder method, inlined helpers opened up
                    value = pending.pop(0)
                    if isinstance(value, Tree) and value.data.startswith("_"):
                        pending[:0] = value.children
                    elif isinstance(value, Tree):
                        Build().transform(value)
            except BuildFailure as e:
                return ("failure", type(e).__name__, e.code)
            except VisitError as e:
                return ("failure", type(e.orig_exc).__name__, getattr(e.orig_exc, "code", None))
            original = _original_error(err, on_error.converted)
            found = _error(original, source.text, self.lark.parser.parser.parser.parse_table.states)
            if original is not err:  # its parser state has moved on since (Lark's errors hold the live one)
                found = (*found[:3], "keyword", found[4])
            return found
        try:
            machine = Build().transform(tree) if isinstance(tree, Tree) else tree
        except VisitError as e:
            return ("failure", type(e.orig_exc).__name__, getattr(e.orig_exc, "code", None))
        except BuildFailure as e:
            return ("failure", type(e).__name__, e.code)
        return ("tree", _flat(machine), [(str(t), t.start_pos, t.end_pos) for t in self.comments])


def _original_error(err: UnexpectedInput, converted: list[UnexpectedToken]) -> UnexpectedInput:
    """If reading a keyword as a name led straight into a refused token on the same line, the keyword was
    the mistake: Lark's error is then the one it raised at the keyword (as the loop's slip is). A character
    no token starts with (an unterminated string) is that character's own mistake, whatever was read before."""
    if converted and isinstance(err, UnexpectedToken) and getattr(err, "line", None) == converted[-1].token.line:
        return converted[-1]
    return err


def _error(err: UnexpectedInput, text: str, rows: dict[Any, Any]) -> tuple[Any, ...]:
    if isinstance(err, UnexpectedCharacters):
        return ("slip", "", err.pos_in_stream, None, None)
    assert isinstance(err, UnexpectedToken)
    state = frozenset(rows[getattr(err.state, "position", err.state)])
    accepts = frozenset(err.accepts) if err.interactive_parser is not None else None
    start = len(text) if err.token.type == END else err.token.start_pos
    return ("slip", err.token.type, start, state, accepts)


def _loop_outcome(source: SourceFile) -> tuple[Any, ...]:
    found = drive(parser._tables(), source.text, TreeBuilder(source))
    if found.problems:  # a failure of what was built before the slip, as the reference builds it first (a
        failure = found.problems[0]  # failure met earlier stops the loop there: this one came from the
        return ("failure", type(failure).__name__, getattr(failure, "code", None))  # slip's own reductions)
    if found.slip is not None:
        slip = found.slip
        state = frozenset(parser._tables().states[slip.state]) if slip.kind else None
        return ("slip", slip.kind, slip.start, state, slip.accepts if slip.kind else None)
    return ("tree", _flat(found.value), found.comments)


def _flat(tree: Any) -> list[Any]:
    """Every node of a tree with its span, and every value, in order, without recursion (a tree may nest
    deeper than the parser front accepts: the loop builds it all the same, as Lark does)."""
    out: list[Any] = []
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, Node):
            span = getattr(item, "span", None)
            out.append((type(item).__name__, (span.start, span.end) if isinstance(span, Span) else span))
            stack.extend(reversed([getattr(item, name) for name in item._field_names if name != "span"]))
        elif isinstance(item, (tuple, list)):
            out.append(len(item))
            stack.extend(reversed(item))
        elif isinstance(item, Span):
            out.append((item.start, item.end))
        else:
            out.append(item)
    return out


@pytest.fixture(scope="module")
def compare() -> Any:
    reference = _Reference()

    # two parsers built in one process may number their LALR states differently: a state is compared by
    # what its row of the table holds (the tokens and rules it has an action for)
    def same(path: str, text: str) -> None:
        source = SourceFile(path, text)
        ours, theirs = _loop_outcome(source), reference.outcome(source)
        if ours[0] == theirs[0] == "slip" and theirs[4] is None:  # Lark's lexer raised it: no accepts
            ours = ours[:4] + (None,)
        if ours[0] == theirs[0] == "slip" and theirs[3] == "keyword":  # a keyword read as a name, then refused
            ours = (*ours[:3], "keyword", ours[4])
        assert ours == theirs, f"{path}:\n{text}"

    return same


def test_every_spec_parses_as_larks_own_parser_parses_it(compare: Any) -> None:
    """The valid specs, and each syntax error too."""
    texts = _texts()
    assert len(texts) > 150
    valid = 0
    for path, text in texts:
        compare(path, text)
        valid += parser.parse_text(text).machine is not None
    assert valid > 100  # the corpus holds both kinds
    assert len(texts) - valid > 10


_WORDS = ["state", "agent", "type", "input", "description", "model", "in", "len", "matches", "max", "do",
          "done", "->", ":", "{", "}", "(", ")", "..", "1.5h", "==", "->=", '"', '"""', "#", "\\", "\n", " when ", " and ", "1.5e3"]


def _mutate(text: str, rng: random.Random) -> str:
    """One edit a hurried person or a model makes: a cut, a doubled line, a splice, a stray word."""
    if not text:
        return rng.choice(_WORDS)
    i, j = sorted(rng.randrange(len(text) + 1) for _ in range(2))
    kind = rng.randrange(5)
    if kind == 0:
        return text[:i] + text[j:j + rng.randrange(1, 40)] + text[i:]
    if kind == 1:
        return text[:i] + text[min(j, i + rng.randrange(1, 12)):]
    if kind == 2:
        lines = text.split("\n")
        k = rng.randrange(len(lines))
        return "\n".join([*lines[:k], lines[rng.randrange(len(lines))], *lines[k:]])
    if kind == 3:
        return text[:i] + rng.choice(_WORDS) + text[i:]
    return text[:i] + rng.choice(_WORDS) + " " + text[j:]


@pytest.mark.slow
def test_mutated_specs_parse_as_larks_own_parser_parses_them(compare: Any) -> None:
    rng = random.Random(20261201)
    texts = [t for t in _texts() if len(t[1]) < 6000]
    outcomes = set()
    for n in range(1500):
        path, text = rng.choice(texts)
        for _ in range(rng.randrange(1, 4)):
            text = _mutate(text, rng)
        compare(f"{path}#mutation{n}", text)
        result = parser.parse_text(text)
        outcomes.add(result.machine is None)
        # and recovery, which reads on after the first slip, names each later one without failing itself
        diagnostics = result.diagnostics.items
        assert all(d.code != "SW9001" and d.help for d in diagnostics if d.code.startswith("SW1")), text
        assert (result.machine is None) == any(d.severity.value == "error" for d in diagnostics), text
    assert outcomes == {True, False}  # some mutations still parse, most do not


_SUPPORT = (_ROOT / "examples" / "support_triage.fsm").read_text(encoding="utf-8")


@pytest.mark.parametrize("edit", [
    ("after 1d", "after 1.5h"),  # the scanner of every terminal reads 1.5 as a FLOAT; here it is a DURATION
    ("after 1d", "after 1.5e3h"),
    ("after 1d", "after 2.5"),
    ("after 1d", "after 12"),
    ("after 1d", "after 1->"),
    ("-> unanswered", "- > unanswered"),
    ("-> unanswered", "->= unanswered"),
    ("steps", "steps 1.5 steps"),
])
def test_a_token_read_another_way_in_its_state_is_read_as_larks_contextual_lexer_reads_it(
    edit: tuple[str, str], compare: Any,
) -> None:
    old, new = edit
    assert old in _SUPPORT
    compare("support_triage.fsm", _SUPPORT.replace(old, new, 1))


_SMALL = (_ROOT / "examples" / "content_pipeline.fsm").read_text(encoding="utf-8")


@pytest.mark.parametrize("text", [
    "",
    "   \n\t\f\r\n",
    "# only a comment",
    "# a comment\n# and another\n",
    _SMALL.replace("\n", "\r\n"),  # CRLF line ends
    _SMALL.replace("    ", "\t"),
    _SMALL + "\n\n   \t  ",
    _SMALL + "\x00",
    "\x00" + _SMALL,
    _SMALL.replace("machine content_pipeline", "machine contént_pipeline"),
    _SMALL.replace('"', '\\"', 3),
    _SMALL.replace("steps 20", "steps " + "9" * 150),  # a number too long (SW3015)
    _SMALL.replace("{{ topic }}", "\\q{{ topic }}", 1),
    _SMALL.replace("steps 20", "steps (((((((((((((((((((((20)))))))))))))))))))))"),
    "machine m {\n    start state s {\n        do \"x\"\n        when " + "(" * 300 + "a" + ")" * 300
    + " -> s\n    }\n}\n",
    "machine m {\n    start state s {\n        do \"x\"\n        when a" + " + a" * 400 + " > 1 -> s\n    }\n}\n",
    "machine m {\n    start state s {\n        do \"x\"\n        when " + "not " * 300 + "a -> s\n    }\n}\n",
    "machine m {" * 50,
    "}" * 50,
    '"""' + "x" * 100,
    _SMALL[: len(_SMALL) // 2],
])
def test_hostile_and_odd_texts_come_out_as_larks_own_parser_has_them(text: str, compare: Any) -> None:
    compare("odd.fsm", text)


def test_a_keyword_where_only_a_name_can_go_is_read_as_the_name(compare: Any) -> None:
    text = """machine m {
    type T {
        description: str
        model: int
        in: str
        len: int len 1..5
    }
    agent a { prompt "p" }
    start state s {
        agent a
        do "go"
        output T
        -> done
    }
    final state done
}
"""
    assert parser.parse_text(text).machine is not None
    compare("keywords.fsm", text)
