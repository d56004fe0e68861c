"""The borders of the parser: files over the size limit, nesting past the depth limit, and the compact
records that keep a large file's memory linear (where each character of a string came from; a tree's
digest in place of a second tree).

The memory itself is measured by bench/memory.py (a benchmark, not a test: no memory or time is asserted
here); these tests hold the pieces it relies on to what they must mean.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statewright import api
from statewright.compiler.pipeline import compile_source
from statewright.compiler.views.graph import render_graph
from statewright.diagnostics import SourceFile
from statewright.grammar import parse_text
from statewright.grammar.nesting import MAX_NESTING
from statewright.grammar.node import digest
from statewright.grammar.parser import MAX_FILE_BYTES
from statewright.grammar.strings import OffsetMap, decode_long_string, decode_string, literal_offsets

# ---- the size limit ------------------------------------------------------------------------------


def _statewright(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "statewright", *args], cwd=cwd, input=stdin, capture_output=True,
                          check=False, timeout=120)


def test_a_file_over_the_limit_is_one_positioned_diagnostic_and_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.fsm"
    with open(big, "wb") as f:  # sparse: 17 MiB of nothing the checker ever reads
        f.truncate(MAX_FILE_BYTES + 2**20)
    done = _statewright("check", "--format", "json", "big.fsm", cwd=tmp_path)
    [diag] = json.loads(done.stdout)["diagnostics"]
    assert done.returncode == 1
    assert diag["code"] == "SW1021" and diag["range"]["start"]["line"] == 1 and diag["range"]["start"]["column"] == 1
    assert f"{MAX_FILE_BYTES + 2**20:,} bytes" in diag["message"] and "16 MiB" in diag["message"]


def test_a_stream_without_end_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    done = _statewright("check", "--format", "json", "/dev/zero", cwd=tmp_path)
    [diag] = json.loads(done.stdout)["diagnostics"]
    assert diag["code"] == "SW1021" and "more than" in diag["message"]
    done = _statewright("fmt", "-", cwd=tmp_path, stdin=b"#" * (MAX_FILE_BYTES + 10))
    assert done.returncode == 1 and b"SW1021" in done.stderr + done.stdout


def test_a_file_at_the_limit_is_read() -> None:
    text = 'machine m {\n    agent w { prompt "p" }\n    start state a {\n        agent w\n        do "x"\n        -> done\n    }\n    final state done\n}\n'
    assert api.check_text(text, "edge.fsm").diagnostics == []
    data = (text + "#" * (MAX_FILE_BYTES - len(text) - 1) + "\n").encode()
    assert len(data) == MAX_FILE_BYTES
    assert [d.code for d in api.check_bytes(data, "edge.fsm").diagnostics] == []


def test_a_text_given_directly_is_measured_in_characters() -> None:
    compilation = api.check_text("#" * (MAX_FILE_BYTES + 1), "big.fsm")
    assert [d.code for d in compilation.diagnostics] == ["SW1021"]
    assert "characters" in compilation.diagnostics[0].message


# ---- nesting -----------------------------------------------------------------------------------

AGENT = '    agent w { prompt "p" }\n'


def _machine(*, inputs: str = "", types: str = "", guard: str = "x > 0", reply: str = '"ok"') -> str:
    return ("machine m {\n    input x: int = 1\n" + inputs + types + AGENT
            + f'    start state s {{\n        agent w\n        do "x"\n        when {guard} -> done\n'
            "        -> done\n    }\n    final state done\n"
            f'    test "t" {{\n        reply s {reply}\n        expect path [s, done]\n    }}\n}}\n')


def _deep(kind: str, levels: int) -> str:
    """A machine holding one guard, type or value `levels` levels deep (inside as many of its kind)."""
    if kind == "guard":  # the comparison is the outermost level
        return _machine(guard="-" * (levels - 1) + "x > 0")
    if kind == "type":
        return _machine(inputs="    input d: " + "list[" * levels + "str" + "]" * levels + " = []\n")
    if kind == "default":
        return _machine(inputs="    input d: " + "list[" * levels + "int" + "]" * levels + " = "
                        + "[" * levels + "]" * levels + "\n")
    if kind == "reply":
        types = "".join(f"    type T{i} {{ f: T{i + 1}? }}\n" for i in range(levels)) + f"    type T{levels} {{ g: int }}\n"
        text = _machine(types=types, reply="{ f " * levels + "{ g 1 }" + " }" * levels)
        return text.replace('do "x"\n', 'do "x"\n        output T0\n')
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["guard", "type", "default", "reply"])
def test_nesting_past_the_limit_is_one_positioned_error_with_a_hint(kind: str) -> None:
    [diag] = api.check_text(_deep(kind, MAX_NESTING + 1), "deep.fsm").diagnostics
    assert diag.code == "SW1020" and f"more than {MAX_NESTING} levels" in diag.message
    assert diag.span is not None and diag.span.start > 0 and diag.help


@pytest.mark.parametrize("kind", ["guard", "type", "default"])
def test_nesting_at_the_limit_goes_through_every_stage_and_face(kind: str) -> None:
    text = _deep(kind, MAX_NESTING)
    compilation = compile_source(SourceFile("deep.fsm", text), stop_after="load")
    assert compilation.machine is not None, [d.message for d in compilation.diagnostics]
    assert api.format_text(text).text is not None
    assert api.dump_ir(compilation) and render_graph(compilation.ir, "mermaid")  # type: ignore[arg-type]
    assert "MACHINE = MachineSpec(" in api.generate_runner(compilation)


@pytest.mark.parametrize("levels", [3000, 100_000])
def test_a_type_nested_thousands_deep_is_a_nesting_error_not_an_internal_one(levels: int) -> None:
    text = "machine m {\n    input x: " + "list[" * levels + "str" + "]" * levels + "\n    final state done\n}\n"
    [diag] = api.check_text(text, "deep.fsm").diagnostics
    assert diag.code == "SW1020" and diag.help


@pytest.mark.parametrize("opening", ["(", "[", "not ", "-", "f(", "x[", "{ k "])
def test_any_construct_nested_far_past_the_limit_stops_the_parse_with_one_error(opening: str) -> None:
    if opening.startswith("{"):
        text = _machine().replace('reply s "ok"', "reply s " + opening * 50_000 + "1")
    else:
        text = _machine().replace("when x > 0", "when " + opening * 50_000 + "x")
    diagnostics = parse_text(text, "deep.fsm").diagnostics.items
    assert [d.code for d in diagnostics] == ["SW1020"]


# ---- where each character of a string came from --------------------------------------------------

_BODY = st.lists(st.sampled_from([*'ab \t{}é😀', "\\n", '\\"', "\\\\", "\\u00e9", "\\ud83d\\ude00"]),
                 max_size=20).map("".join)


@given(_BODY)
def test_a_double_quoted_value_maps_each_character_to_where_it_is_written(body: str) -> None:
    raw = '"' + body + '"'
    value = decode_string(raw)
    text = "x = " + raw
    found = literal_offsets(text, 5, len(text) - 1, False, value)
    assert found is not None and len(found) == len(value) + 1 and found[len(value)] == len(text) - 1
    offsets = list(found)
    assert offsets == sorted(set(offsets))
    for char, at in zip(value, offsets):
        assert text[at] == char or text[at] == "\\"  # the character itself, or the escape that writes it


@given(st.lists(st.tuples(st.sampled_from(["", "  ", "    ", "\t"]), st.text(alphabet="ab \"", max_size=8)),
                max_size=6), st.booleans(), st.booleans())
def test_a_triple_quoted_value_maps_each_character_to_where_it_is_written(
        lines: list[tuple[str, str]], crlf: bool, first_break: bool) -> None:
    body = ("\n" if first_break else "") + "\n".join(indent + words for indent, words in lines)
    body = body.replace('"""', "").rstrip('"')
    if crlf:
        body = body.replace("\n", "\r\n")
    raw = '"""' + body + '"""'
    value = decode_long_string(raw)
    text = "x = " + raw
    found = literal_offsets(text, 7, len(text) - 3, True, value)
    assert found is not None and len(found) == len(value) + 1
    for char, at in zip(value, found):
        assert text[at] == char or (char == "\n" and text[at : at + 2] == "\r\n")


def test_an_offset_map_keeps_a_run_of_plain_characters_as_one_entry() -> None:
    value = "x" * 1_000_000
    text = f'do "{value}"'
    found = literal_offsets(text, 4, len(text) - 1, False, value)
    assert isinstance(found, OffsetMap) and len(found) == len(value) + 1
    assert (found[0], found[500_000], found[len(value)]) == (4, 500_004, len(text) - 1)
    assert len(found._keys) == 1  # the run, the closing quote right after it included


# ---- a tree's digest ------------------------------------------------------------------------------

PIPELINE = (Path(__file__).resolve().parents[1] / "examples" / "content_pipeline.fsm").read_text(encoding="utf-8")


def test_trees_that_differ_only_in_layout_have_one_digest_and_any_change_shows() -> None:
    tree = parse_text(PIPELINE).machine
    relaid = parse_text(api.format_text(PIPELINE.replace("    ", "\t")).text or "").machine
    assert tree == relaid and digest(tree) == digest(relaid)
    for old, new in [("max 2", "max 3"), ("score >= 85", "score >= 86"), ("critic", "critik"),
                     ("20", "20.5"), ('"', '"""', )]:
        changed = parse_text(PIPELINE.replace(old, new, 1)).machine
        if changed is not None and changed != tree:
            assert digest(changed) != digest(tree), (old, new)


def test_the_digest_sees_numbers_as_equality_does_and_needs_no_recursion() -> None:
    assert digest(parse_text("machine m { limits { steps 2 } }").machine) == \
        digest(parse_text("machine m { limits { steps 2 } }").machine)
    text = _machine(guard="-" * 50_000 + "x > 0")
    tree = parse_text(text.replace("machine m", "machine m")).machine  # too deep for the front: built anyway
    assert tree is None or len(digest(tree)) == 32


@pytest.mark.parametrize("opening", ["(", "[", "not "])
def test_nesting_far_past_the_limit_after_an_earlier_slip_is_reported_not_an_internal_error(opening: str) -> None:
    """Recovery reads on after the first slip without building; its own stack limit names the slip too deep
    as the parser does (SW1020), never SW9001."""
    closing = {"(": ")", "[": "]", "not ": ""}[opening]
    guard = opening * 3000 + "x" + closing * 3000
    text = f'machine m {{\n  input x: bool\n  start state a {{\n    do "x" => a\n    when {guard} -> a\n  }}\n}}\n'
    codes = [d.code for d in api.check_text(text, "deep.fsm").diagnostics]
    assert "SW9001" not in codes and codes[0] == "SW1014" and "SW1020" in codes
