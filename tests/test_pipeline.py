"""The compiler's one front door: `compile_source` runs the stages in order and stops where asked, and every
face that checks a text goes through it; the packages depend on each other in one direction."""

from __future__ import annotations

import ast as python_ast
from pathlib import Path

import pytest

from statewright.compiler import pipeline
from statewright.compiler.pipeline import STAGES, compile_source
from statewright.diagnostics import SourceFile

SRC = Path(__file__).resolve().parents[1] / "src" / "statewright"

GOOD = """# kept comment
machine m {
    agent w { prompt "You write." }

    start state a {
        agent w
        do "Write."
        -> done
    }

    final state done

    test "t" {
        reply a "x"
        expect path [a, done]
    }
}
"""


def _compile(text: str, **options: object):  # type: ignore[no-untyped-def]
    return compile_source(SourceFile("m.fsm", text), **options)  # type: ignore[arg-type]


def test_each_stage_adds_its_part_and_the_ones_after_it_do_not_run() -> None:
    parts = {}
    for stage in STAGES:
        c = _compile(GOOD, stop_after=stage)
        parts[stage] = (c.ast is not None, c.symbols is not None, c.ir is not None, c.optimized is not None,
                        c.machine is not None)
        assert [x.text for x in c.comments] == ["# kept comment"]
    assert parts == {
        "parse": (True, False, False, False, False),
        "check": (True, True, False, False, False),
        "lower": (True, True, True, False, False),
        "passes": (True, True, True, True, False),
        "load": (True, True, True, True, True),
    }
    loaded = _compile(GOOD, stop_after="load", level=0)
    assert loaded.machine is not None and loaded.machine.name == "m"


def test_without_its_syntax_a_compilation_has_the_same_diagnostics_and_machine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """keep_syntax=False (the designer's evaluation of a draft) lets the tree, comments and symbols go
    before loading, and the IR once the module is rendered; the rest is what a full compilation has, a
    failing load's SW9001 included."""
    unknown = GOOD.replace('do "Write."', 'do "Write {{ nothing }}."')
    for text in (GOOD, unknown, GOOD.replace("-> done", "-> dnoe"), "machine m {"):
        source = SourceFile("m.fsm", text)
        full = compile_source(source, stop_after="load", level=0)
        lean = compile_source(source, stop_after="load", level=0, keep_syntax=False)
        assert (lean.ast, lean.comments, lean.symbols, lean.ir, lean.optimized) == (None, [], None, None, None)
        assert lean.diagnostics == full.diagnostics and lean.ok == full.ok
        assert (lean.machine is None) == (full.machine is None)
        if full.machine is not None:
            assert lean.machine is not None and lean.machine.states == full.machine.states
            assert lean.machine.tests == full.machine.tests
    # stopped before loading, it keeps the IR (there is no machine to stand for it)
    lowered = compile_source(SourceFile("m.fsm", GOOD), stop_after="lower", keep_syntax=False)
    assert lowered.ir is not None and lowered.ok and lowered.ast is None

    def broken(*args: object) -> None:
        raise KeyError("boom")

    for stage in ("_render", "_run"):  # the module's text, then its code
        with monkeypatch.context() as patched:
            patched.setattr(pipeline, stage, broken)
            lean = _compile(GOOD, stop_after="load", keep_syntax=False)
        [internal] = [d for d in lean.diagnostics if d.code == "SW9001"]
        assert "while generating code for" in internal.message and internal.span is not None
        assert internal.span.start == GOOD.index("machine m") + len("machine ")
        assert lean.machine is None and not lean.ok


def test_without_its_syntax_no_syntax_tree_or_ir_is_alive_while_the_module_loads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What keep_syntax=False lets go is really gone (no frame of the project or the pipeline holds it)
    when the machine's module runs: the memory is the machine's. A file that uses another is compiled
    through the project's way down, which parsed it first."""
    import gc

    from statewright.compiler import ir as ir_module
    from statewright.designer.design import compile_text
    from statewright.grammar import ast

    alive: list[tuple[int, int]] = []
    run = pipeline._run
    name = "let_go_while_loading"  # other tests' trees may live on in this process: only this one counts

    def counting(module: object, source: SourceFile) -> object:
        gc.collect()
        objects = gc.get_objects()
        alive.append((sum(isinstance(o, ast.Machine) and o.name.value == name for o in objects),
                      sum(isinstance(o, ir_module.Machine) and o.name == name for o in objects)))
        return run(module, source)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "_run", counting)
    text = GOOD.replace("machine m ", f"machine {name} ", 1)
    assert text != GOOD
    lean = compile_text(text, "m.fsm", stop_after="load", keep_syntax=False)
    assert lean.machine is not None and lean.machine.name == name and alive == [(0, 0)]


def test_a_machine_with_errors_stops_after_its_checks_with_every_diagnostic() -> None:
    c = _compile(GOOD.replace("-> done", "-> dnoe"), stop_after="load")
    assert c.ir is None and c.machine is None and not c.ok
    assert c.symbols is not None  # the language server still navigates a file with errors
    assert {d.code for d in c.diagnostics} >= {"SW2002"}


def test_a_syntax_error_stops_after_parsing() -> None:
    c = _compile("machine m {", stop_after="load")
    assert (c.ast, c.symbols, c.ir) == (None, None, None)
    assert [d.code for d in c.diagnostics] == ["SW1003"]


def test_a_failing_stage_is_an_internal_error_diagnostic_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(pipeline, "_lower", broken)
    c = _compile(GOOD)
    assert c.ir is None
    [internal] = [d for d in c.diagnostics if d.code == "SW9001"]
    assert "while lowering" in internal.message


def test_an_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="the stages are parse, check, lower, passes, load"):
        _compile(GOOD, stop_after="generate")


def test_the_passes_stage_logs_what_each_pass_did() -> None:
    log: list[str] = []
    _compile(GOOD, stop_after="passes", log=log)
    assert [line.split(":")[0] for line in log] == ["dead-states", "merge-equivalent"]


# ---- one front door --------------------------------------------------------------------------------


def _calls(path: Path) -> set[str]:
    tree = python_ast.parse(path.read_text(encoding="utf-8"))
    return {node.func.id if isinstance(node.func, python_ast.Name) else node.func.attr
            for node in python_ast.walk(tree) if isinstance(node, python_ast.Call)
            and isinstance(node.func, (python_ast.Name, python_ast.Attribute))}


def test_only_the_front_door_runs_the_checks_and_lowering() -> None:
    callers = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
               if {"check_machine", "lower_machine"} & _calls(p)}
    assert callers == {"compiler/pipeline.py"}


def _imports(path: Path) -> set[str]:
    """The parts of statewright a module imports, by their first name under statewright/."""
    package = list(path.relative_to(SRC).parts[:-1])
    found = set()
    for node in python_ast.walk(python_ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, python_ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - node.level + 1]
        elif (node.module or "").startswith("statewright."):
            base = []
        else:
            continue
        module = (node.module or "").removeprefix("statewright.") if node.level == 0 else node.module
        target = [*base, *(module.split(".") if module else [])]
        found.update([target[0]] if target else [alias.name for alias in node.names])
    return found


# what each layer may import from the rest of the package: cli -> api -> designer -> compiler -> grammar ->
# diagnostics; compiler/codegen embeds runtime; runtime imports nothing of the package; cache_dir.py (where
# the caches are kept) is a leaf that the compiler's layers share
ALLOWED = {
    "diagnostics": {"diagnostics"},
    "grammar": {"grammar", "diagnostics", "cache_dir"},
    "runtime": {"runtime"},
    "compiler": {"compiler", "grammar", "diagnostics", "runtime", "cache_dir"},
    "designer": {"designer", "compiler", "grammar", "diagnostics", "runtime", "stdlib", "cache_dir"},
}


def test_the_cache_directory_module_imports_nothing_of_the_package() -> None:
    assert _imports(SRC / "cache_dir.py") == set()


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_the_packages_depend_on_each_other_in_one_direction(layer: str) -> None:
    wrong = {}
    for path in (SRC / layer).rglob("*.py"):
        extra = _imports(path) - ALLOWED[layer] - {"__version__"}
        if extra:
            wrong[str(path.relative_to(SRC))] = sorted(extra)
    assert wrong == {}
