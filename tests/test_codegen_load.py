"""Machine modules loaded in memory (compiler/codegen/load.py): compiled and executed a few top-level
statements at a time, they must do exactly what the whole module's code does — the same names, the same
code at the same lines — and no statement of a generated module may grow with the machine."""

from __future__ import annotations

import re
import sys
import traceback
import types
from pathlib import Path

import pytest
from support.e2e_runs import EXAMPLES

from statewright import api
from statewright.compiler.codegen.load import compiled_pieces, load_machine_module
from statewright.compiler.pipeline import compile_source
from statewright.diagnostics import SourceFile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from compile_scaling import generate_machine


def installed_text(text: str, path: str = "spec.fsm") -> str:
    """The module `run` loads for a spec (api.runtime_machine_text)."""
    compilation = api.check_text(text, path)
    assert compilation.ok, [d.message for d in compilation.diagnostics]
    return api.runtime_machine_text(compilation)


def code_positions(code: types.CodeType) -> dict[tuple[str, int], list[object]]:
    """Every code object inside `code` (itself included), by qualified name and first line: its positions."""
    found: dict[tuple[str, int], list[object]] = {}
    stack = [code]
    while stack:
        item = stack.pop()
        found[(item.co_qualname, item.co_firstlineno)] = list(item.co_positions())
        stack.extend(c for c in item.co_consts if isinstance(c, types.CodeType))
    return found


def executed(codes: list[types.CodeType], name: str) -> dict[str, object]:
    module = types.ModuleType(name)
    sys.modules[name] = module  # pydantic resolves annotations through sys.modules
    try:
        for code in codes:
            exec(code, module.__dict__)  # noqa: S102 - statewright's own generated code
    finally:
        del sys.modules[name]
    return dict(module.__dict__)


def shape(namespace: dict[str, object]) -> dict[str, str]:
    """The module's names and what they hold, with addresses and module names taken out."""
    return {key: re.sub(r"0x[0-9a-f]+|statewright_load_test_\w+", "?", repr(value))
            for key, value in namespace.items() if not key.startswith("__")}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_pieces_do_what_the_whole_module_does(example: Path) -> None:
    text = installed_text(example.read_text(encoding="utf-8"), str(example))
    whole = compile(text, "m", "exec", dont_inherit=True)
    pieces = list(compiled_pieces(text, "m"))
    assert len(pieces) > 10  # a statement or a few at a time, not the module at once
    merged: dict[tuple[str, int], list[object]] = {}
    for piece in pieces:
        merged.update(code_positions(piece))
    expected = code_positions(whole)
    # the module's own code differs (it is cut); every function, class body and comprehension is the same
    assert {k: v for k, v in merged.items() if k[0] != "<module>"} == \
        {k: v for k, v in expected.items() if k[0] != "<module>"}
    one, other = (executed(codes, f"statewright_load_test_{i}") for i, codes in enumerate(([whole], pieces)))
    assert shape(one) == shape(other)
    assert one["__doc__"] == other["__doc__"] and str(one["__doc__"]).startswith("Runner for the statewright")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_bytes_loaded_are_the_text_encoded(example: Path) -> None:
    """load_machine renders the module straight into chunks of UTF-8 bytes: the text `run` prints, encoded."""
    from statewright.compiler.codegen import machine_module_text
    from statewright.compiler.codegen.render import render_installed_module

    compilation = api.check_text(example.read_text(encoding="utf-8"), str(example))
    assert compilation.ok and compilation.source is not None
    machine = api.optimize(compilation)
    text = machine_module_text(machine, source_text=compilation.source.text, source_path=str(example))
    module = render_installed_module(machine, source_text=compilation.source.text, source_path=str(example))
    assert bytes(module) == text.encode("utf-8")


CHUNKINGS = [1, 2, 3, 7, 64, 4096]


@pytest.mark.parametrize("size", CHUNKINGS)
def test_a_module_read_in_chunks_compiles_as_its_whole_text(size: int) -> None:
    """The loader reads a rendered module a chunk at a time: wherever the chunks end (in the future line,
    in a character's UTF-8, between `el` and `se:` at the start of a line, in a string), the pieces are
    the pieces of the whole text, line for line."""
    from statewright.compiler.codegen import load

    description = "\\n".join(["Intro \u00e9\u4e2d\U0001f600.", *HOSTILE_LINES[:-1], "End."])
    spec = (f'machine chunked {{\n    description "{description}"\n'
            '    agent w { prompt "Tu \u00e9cris \u2014 \U0001f600." }\n'
            '    start state a { agent w\n do "\u00c9cris." -> b }\n    final state b\n}\n')
    text = installed_text(spec, "chunked.fsm") + "if True:\n    x = 1\nelse:\n    x = 2\n"
    data = text.encode("utf-8")
    chunks = iter([data[i:i + size] for i in range(0, len(data), size)])
    pieces = list(load._Pieces(chunks, "m", text.__str__).compiled())
    expected = list(compiled_pieces(text, "m"))
    assert [code_positions(p) for p in pieces] == [code_positions(p) for p in expected]
    assert len(pieces) > 10
    assert executed(pieces, "statewright_load_test_chunked")["x"] == 1


def test_a_rendered_module_is_held_compressed_and_loads_as_its_text() -> None:
    """load_machine's module text is compressed as it is rendered (never held whole), and gives back the
    very text `run` prints, chunk by chunk; loaded, it is the module of that text."""
    from statewright.compiler.codegen.module_text import CHUNK_BYTES
    from statewright.compiler.codegen.render import render_installed_module

    spec = generate_machine(400).replace("machine scaling_400", "machine compressed_400")
    compilation = api.check_text(spec, "compressed.fsm")
    assert compilation.ok and compilation.source is not None
    machine = api.optimize(compilation)
    module_text = render_installed_module(machine, source_text=compilation.source.text, source_path="compressed.fsm")
    text = api.runtime_machine_text(compilation)
    packed = sum(len(data) for _, data in module_text.segments)
    assert packed * 5 < len(text.encode("utf-8"))
    assert all(len(chunk) <= CHUNK_BYTES for chunk in module_text.chunks())
    assert bytes(module_text) == text.encode("utf-8") and module_text.text() == text
    module = load_machine_module(module_text, "compressed.fsm")
    assert load_machine_module(text, "compressed.fsm") is module  # the same text: the same module
    assert list(module.STATES) == list(api.runtime_machine(compilation).states)


def test_a_nul_outside_the_slots_of_a_module_is_refused() -> None:
    """The slots of a rendered module (its imports, its SOURCE_MAP) are names between NULs, which no spec
    text can put in the module (every one is escaped): should one get there, rendering fails loudly."""
    from statewright.compiler.codegen import render

    class View:
        def context(self) -> dict[str, object]:
            return {"header": ["# a\0b"], "docstring": "", "imports": "", "runtime": "", "parts": [], "api": []}

    with pytest.raises(ValueError, match="NUL character outside the slots"):
        render._rendered(View())  # type: ignore[arg-type]


def test_a_module_of_any_characters_loads_from_its_bytes() -> None:
    spec = ('machine wide {\n    description "Caf\u00e9 \u2014 \U0001f600, na\u00efve \u4e2d\u6587."\n'
            '    agent w { prompt "Tu \u00e9cris \u2014 \U0001f600." }\n'
            '    start state a { agent w\n do "\u00c9cris \u4e2d\u6587." -> b }\n    final state b\n}\n')
    text = installed_text(spec, "wide.fsm")
    module = load_machine_module(text.encode("utf-8"), "wide.fsm")
    assert module.MACHINE.description == "Caf\u00e9 \u2014 \U0001f600, na\u00efve \u4e2d\u6587."
    assert module.STATES["a"].instruction == "\u00c9cris \u4e2d\u6587."
    assert load_machine_module(text, "wide.fsm") is module  # the same text as a str: the same module


def test_a_bytearray_is_let_go_as_it_is_compiled_and_tracebacks_still_show_the_lines() -> None:
    """load_machine hands the module's text over as a bytearray: it is emptied as its pieces compile (the
    text is not held beside the module it makes), and linecache keeps it compressed for tracebacks."""
    spec = (EXAMPLES[0].parent / "parallel_review.fsm").read_text(encoding="utf-8").replace(
        "machine ", "machine handed_", 1)
    text = installed_text(spec, "handed.fsm")
    data = bytearray(text.encode("utf-8"))
    module = load_machine_module(data, "handed.fsm")
    assert not data  # emptied
    pieces = executed(list(compiled_pieces(text, "m")), "statewright_load_test_handed")
    assert sorted(k for k in module.__dict__ if not k.startswith("__")) == sorted(k for k in pieces
                                                                                  if not k.startswith("__"))
    assert list(module.STATES) == list(pieces["STATES"])  # type: ignore[call-overload]
    assert "return sum(1 for r in s.output if r.approve) >= 2" in guard_traceback(module)


def test_a_bytearray_that_compiles_only_whole_is_compiled_from_the_whole_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from statewright.compiler.codegen import load

    monkeypatch.setattr(load, "_STATEMENT_START", re.compile(rb"^(?=[A-Za-z_@#])", re.MULTILINE))
    text = ("\nfrom __future__ import annotations\ncalls = []\ncalls.append(1)\ndef f():\n    x = 2\n# a note\n"
            "    return x\n\nvalue = f()\n")
    with pytest.raises(load.UncutModule) as raised:
        list(load.compiled_pieces(bytearray(text.encode()), "m", lambda: text))
    assert executed([raised.value.code], "statewright_load_test_whole")["value"] == 2
    with pytest.raises(ValueError, match="give `whole`"):
        list(load.compiled_pieces(bytearray(text.encode()), "m"))


HOSTILE_LINES = [
    "STATES = None",
    "from __future__ import annotations",
    "else: pass",
    "@decorator",
    "# a comment",
    "def f(",
    "MACHINE = 1",
    '"""',
]


def test_a_description_whose_lines_look_like_statements_is_still_the_docstring() -> None:
    """The docstring holds the machine's description as it is: lines of it that start like a statement
    are cut at, found not to compile alone, and taken back into their piece."""
    description = "\\n".join(HOSTILE_LINES[:-1])
    spec = (f'machine hostile {{\n    description "Intro.\\n{description}\\nEnd."\n'
            '    agent w { prompt "You write." }\n    start state a { agent w\n do "Write." -> b }\n'
            "    final state b\n}\n")
    compilation = compile_source(SourceFile("hostile.fsm", spec), stop_after="load")
    assert compilation.machine is not None, [d.message for d in compilation.diagnostics]
    assert compilation.machine.description == "Intro.\n" + "\n".join(HOSTILE_LINES[:-1]) + "\nEnd."
    text = installed_text(spec, "hostile.fsm")
    assert "\nSTATES = None\n" in text  # the line really is in the docstring, at the start of a line
    module = load_machine_module(text, "hostile.fsm")
    assert "STATES = None" in str(module.__doc__) and module.STATES["a"].name == "a"


def guard_traceback(module: types.ModuleType) -> str:
    """The traceback of parallel_review's first guard called without its run (it reads an output of None)."""
    try:
        module.guard_reviews_0(None)
    except AttributeError:
        return traceback.format_exc()
    raise AssertionError("the guard read an output from None")


def test_a_traceback_through_generated_code_shows_its_line() -> None:
    spec = (EXAMPLES[0].parent / "parallel_review.fsm").read_text(encoding="utf-8")
    text = installed_text(spec, "parallel_review.fsm")
    module = load_machine_module(text, "parallel_review.fsm")
    shown = guard_traceback(module)
    assert "statewright-machine:parallel_review.fsm:" in shown
    assert "return sum(1 for r in s.output if r.approve) >= 2" in shown
    line = int(re.findall(r"line (\d+), in guard_reviews_0", shown)[0])
    assert text.splitlines()[line - 1].strip() == "return sum(1 for r in s.output if r.approve) >= 2"


def test_a_module_that_does_not_compile_raises_with_its_own_positions() -> None:
    text = installed_text((EXAMPLES[0].parent / "parallel_review.fsm").read_text(encoding="utf-8"))
    lines = text.splitlines(keepends=True)
    broken_at = next(i for i, line in enumerate(lines) if line.startswith('STATES["revise"]'))
    lines.insert(broken_at, "x = (\n")
    with pytest.raises(SyntaxError) as raised:
        list(compiled_pieces("".join(lines), "m"))
    assert raised.value.lineno == broken_at + 1


def test_no_statement_grows_with_the_machine() -> None:
    """The pieces of the module of a machine ten times larger are no larger: each state, agent and test is
    a statement, and SOURCE_MAP is written 250 entries a statement."""
    largest = []
    for states in (300, 3000):  # both with a full group of SOURCE_MAP entries
        text = installed_text(generate_machine(states), f"scaling_{states}.fsm")
        sizes = [len(text[s:e]) for s, e in _piece_spans(text)]
        largest.append(max(sizes[1:]))  # after the header (the docstring and the imports)
    assert largest[1] < 1.3 * largest[0], largest


def _piece_spans(text: str) -> list[tuple[int, int]]:
    """Where each compiled piece lies in the text, from the lines its code starts at."""
    starts = []
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    for code in compiled_pieces(text, "m"):
        positions = [p[0] for p in code.co_positions() if p[0] is not None]
        starts.append(offsets[min(positions) - 1] if positions else 0)
    starts[0] = 0
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def test_a_comment_at_the_start_of_a_line_inside_a_block_is_no_place_to_cut() -> None:
    text = "\nfrom __future__ import annotations\ndef f():\n    x = 1\n# a note\n    return x\n\ny = f()\n"
    assert executed(list(compiled_pieces(text, "m")), "statewright_load_test_comment")["y"] == 1


def test_a_module_that_compiles_only_whole_is_run_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a cut ever split what only compiles whole, the loader runs the whole module's code in a
    fresh namespace (here forced by cutting at comments, which may sit inside a block)."""
    from statewright.compiler.codegen import load

    monkeypatch.setattr(load, "_STATEMENT_START", re.compile(rb"^(?=[A-Za-z_@#])", re.MULTILINE))
    text = ("\nfrom __future__ import annotations\ncalls = []\ncalls.append(1)\ndef f():\n    x = 2\n# a note\n"
            "    return x\n\nvalue = f()\n")
    with pytest.raises(load.UncutModule):
        list(load.compiled_pieces(text, "m"))
    module = load_machine_module(text, "whole.fsm")
    assert module.value == 2 and module.calls == [1]  # run once, from a fresh namespace


def test_threads_loading_one_machine_at_once_get_it_whole_and_once() -> None:
    import threading

    text = installed_text(generate_machine(120), "threads.fsm")
    barrier = threading.Barrier(4)
    found: list[object] = []

    def load() -> None:
        barrier.wait()
        module = load_machine_module(text, "threads.fsm")
        found.append((module, len(module.MACHINE.states)))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4 and len({id(module) for module, _ in found}) == 1
    assert {count for _, count in found} == {122}  # every state, in every thread


def test_a_source_path_holding_a_nul_loads_under_a_file_name_that_shows_it() -> None:
    """A path given to the Python API may hold any character; a code object's file name cannot hold a NUL."""
    spec = (EXAMPLES[0].parent / "parallel_review.fsm").read_text(encoding="utf-8").replace(
        "machine ", "machine nul_path_", 1)
    machine = api.load_text(spec, "a\0b.fsm")
    assert machine.spec.states
    module = sys.modules[next(name for name, m in sys.modules.items()
                              if name.startswith("statewright.machines.m_") and "nul_path_" in str(m.__doc__))]
    assert str(module.__file__).startswith("statewright-machine:a\\x00b.fsm:")


def test_a_text_that_ends_with_its_future_line_makes_no_empty_piece() -> None:
    """Read a chunk at a time, a text whose last line is its `from __future__` line gives its head and
    nothing after it, as the whole text does."""
    from statewright.compiler.codegen import load

    text = '"""A module."""\nfrom __future__ import annotations\n'
    for size in (1, 5, len(text)):
        chunks = iter([text.encode()[i:i + size] for i in range(0, len(text), size)])
        pieces = list(load._Pieces(chunks, "m", text.__str__).compiled())
        assert len(pieces) == len(list(compiled_pieces(text, "m"))) == 1
