"""The parse loop (grammar/lalr.py) builds exactly what Lark's own parser builds.

The reference is Lark as its documentation has it: the contextual lexer, the post-lexer, the LALR parser
with propagated positions building a parse tree, and the builder's methods run over that tree as a
transformer. Every example and every test case, and thousands of mutations of them (the hostile inputs a
person or a model writes: cut, doubled, spliced, keywords where names go), must come out the same: the
same tree, the same comments, the same diagnostics.

Both sides share the builder's methods, the post-lexer and the keyword-as-name handler (parser.py): what
is compared is the reading and the parse, each of those being tested on its own elsewhere.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import pytest
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput, VisitError
from lark.lexer import ContextualLexer
from lark.visitors import Transformer_NonRecursive

from statewright.diagnostics import SourceFile
from statewright.grammar import build_parser, parser, syntax_errors
from statewright.grammar.lalr import SyntaxStop

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
    """`parser._build` as Lark itself would do it: a parse tree with propagated positions, then the
    builder's methods over it, bottom up, left to right (the order of the LALR reductions)."""

    def __init__(self) -> None:
        self.comments: list[Token] = []
        self.lark = Lark(parser.GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                         propagate_positions=True, maybe_placeholders=False,
                         lexer_callbacks={"COMMENT": self.comments.append}, postlex=parser._FieldNamesPostLex())
        contextual = self.lark.parser.lexer.lexer
        assert isinstance(contextual, ContextualLexer)

    def build(self, source: SourceFile) -> tuple[Any, list[tuple[str, int, int]]]:
        self.comments.clear()
        builder = parser._BuildAst(source)

        class Build(Transformer_NonRecursive):
            def __default__(self, data: str, children: list[Any], meta: Any) -> Any:
                if data.startswith("_"):  # an inlined rule not spliced in yet: before an error
                    return Tree(data, children, meta)
                builder.meta = meta
                return getattr(builder, data)(meta, *children)

        def run(tree: Any) -> Any:
            try:
                return Build().transform(tree) if isinstance(tree, Tree) else tree
            except VisitError as e:
                raise e.orig_exc from None

        on_error = parser._keyword_as_name(self.lark)
        try:
            with parser._parsing(source.text):
                tree = self.lark.parse(source.text, on_error=on_error)
        except UnexpectedInput as err:
            # what was reduced before the error was built, and any failure in it comes first
            for value in err.interactive_parser.parser_state.value_stack:
                run(value)
            raise SyntaxStop(0) from None
        comments = [(str(t), t.start_pos, t.end_pos) for t in self.comments]
        return run(tree), comments


def _outcome(source: SourceFile) -> tuple[str, list[str], list[tuple[str, str, int, int]]]:
    result = parser.parse_source(source)
    diagnostics = [(d.code, d.message, d.span.start, d.span.end) for d in result.diagnostics]
    return repr(result.machine), [repr(c) for c in result.comments], diagnostics


@pytest.fixture(scope="module")
def compare() -> Any:
    reference = _Reference()
    larks = build_parser(cache=False)  # the error names, read by Lark's own contextual lexer too
    contextual = larks.parser.lexer.lexer
    contextual.lex = ContextualLexer.lex.__get__(contextual)  # type: ignore[method-assign]

    # two parsers built in one process may number their LALR states differently: each has its own
    # examples of syntax errors, parsed by it
    their_examples = functools.lru_cache(maxsize=None)(lambda example: parser._first_error(larks, example))
    their_states: dict[Any, Any] = {}

    def same(path: str, text: str) -> None:
        source = SourceFile(path, text)
        ours = _outcome(source)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(parser, "_build", reference.build)
            mp.setattr(parser, "_parser", lambda: larks)
            mp.setattr(parser, "_example_error", their_examples)
            mp.setattr(syntax_errors, "_STATES", their_states)
            theirs = _outcome(source)
        assert ours == theirs, f"{path}:\n{text}"

    return same


@pytest.mark.parametrize("scanner", ["root scanner first", "own scanners"])
def test_every_spec_parses_as_larks_own_parser_parses_it(
    scanner: str, compare: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The valid specs, and each syntax error too; Lark's parser names the errors, reading with the
    scanner of every terminal first or with each state's own (parser.OWN_SCANNER_AFTER)."""
    monkeypatch.setattr(parser, "OWN_SCANNER_AFTER", 10**9 if scanner == "root scanner first" else 0)
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
        outcomes.add(parser.parse_text(text).machine is None)
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
