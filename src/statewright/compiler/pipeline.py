"""The front door: one source file through parse, checks, lowering, passes and loading, stopping where asked.

Every face that checks a text — `statewright check`, the Python API, the designer's repair loop, the
source edits, the language server — calls `compile_source`, the way Jinja's `Environment.compile` runs
its parse, generate and compile. Each stage adds to one `Compilation`; none raises for a bad input, and a
stage runs only when the ones before it left it something to work on.

The stages' own modules are imported when a stage first runs, so that a command that only parses pays
for nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from ..diagnostics import Diagnostics, SourceFile, suggestion_budget
from ..grammar import ast, parse_source
from .compilation import STAGES, Compilation, Stage

if TYPE_CHECKING:
    from ..runtime.spec import MachineSpec
    from .checks.resolve import Symbols
    from .codegen.load import ModuleText
    from .ir import Machine as IRMachine
    from .project import Project, UsedFile

T = TypeVar("T")



def compile_source(source: SourceFile, *, stop_after: Stage = "lower", level: int = 1,
                   disabled: Sequence[str] = (), log: list[str] | None = None, project: Project | None = None,
                   location: str | None = None, keep_syntax: bool = True) -> Compilation:
    """Compile one source file as far as `stop_after`:

        parse   the syntax tree and its comments (syntax errors are diagnostics)
        check   every check, into one list of diagnostics, and the symbol tables (the files its `use`
                lines name are read and compiled first, through `project`)
        lower   the IR, when no check reported an error
        passes  the IR after the optimization passes (`level`, `disabled` and `log` as for run_passes)
        load    the machine part of its runner, compiled in memory: what run, test and the API execute

    `project` holds the files already compiled (a new one by default: the used files are read from disk,
    relative to `location`, which is the source's path unless given; the project hands over the source's
    syntax tree when it parsed the source already, on its way down the files it uses). Every problem is a diagnostic, none is raised (an unknown pass name in `disabled`
    excepted).

    `keep_syntax` False is for a caller that wants only the diagnostics and the machine (the designer's
    evaluation of a draft): the syntax tree, its comments and the symbols are let go once the IR is made,
    and with "load" the IR too once the machine's module is rendered, before the module runs (the
    Compilation holds none of them but the IR of a machine not loaded), so that the memory they take is
    free for the code."""
    if stop_after not in STAGES:
        raise ValueError(f"unknown stage {stop_after!r}; the stages are {', '.join(STAGES)}")
    if project is None:
        from .project import Project

        return Project(compile_source).compile_source(source, location=location, stop_after=stop_after, level=level,
                                        disabled=tuple(disabled), log=log, keep_syntax=keep_syntax)
    from ..grammar.parser import paused_gc

    last = STAGES.index(stop_after)
    location = location if location is not None else source.path
    uses: list[UsedFile] = []
    with paused_gc():
        parsed = project.take_parsed(location)
        parsed = parsed if parsed is not None else parse_source(source)
        diagnostics = parsed.diagnostics
        symbols = ir = optimized = machine = None
        if parsed.machine is not None and last >= STAGES.index("check"):
            project.parsed(location, parsed.machine)
            if parsed.machine.uses:
                uses = project.resolve_uses(parsed.machine, source, location, diagnostics, "lower")
            symbols = _check(source, parsed.machine, diagnostics, uses)
            if symbols is not None and not diagnostics.has_errors and last >= STAGES.index("lower"):
                checked, found = parsed.machine, symbols
                ir = _stage("lowering", checked.name, diagnostics, lambda: _lower(checked, found))
                del checked, found
    tree: ast.Machine | None = parsed.machine
    comments: list[ast.Comment] | None = parsed.comments
    name = tree.name if tree is not None else None
    if not keep_syntax:
        project.forget_parsed(location)
        parsed = tree = comments = symbols = None
    if ir is not None and last >= STAGES.index("passes"):
        from .passes import run_passes

        optimized = run_passes(ir, level=level, disabled=disabled, log=log)
        if last >= STAGES.index("load") and keep_syntax:
            ready = optimized
            machine = _stage("generating code for", name, diagnostics, lambda: _load(ready, source))
            ir = ir if machine is not None else None
        elif last >= STAGES.index("load"):
            # the IR too is let go once the machine's module is rendered, before the module runs: what
            # runs it is then free for the machine it makes (the Compilation holds the machine alone)
            ready = optimized
            module = _stage("generating code for", name, diagnostics, lambda: _render(ready, source))
            ir = optimized = ready = None
            if module is not None:
                machine = _stage("generating code for", name, diagnostics, lambda: _run(module, source))
    return Compilation(source, tree, comments if comments is not None else [], ir, diagnostics.sorted(), symbols,
                       optimized, machine, uses)


def _check(source: SourceFile, machine: ast.Machine, diagnostics: Diagnostics,
           uses: list[UsedFile]) -> Symbols | None:
    from .checks import check_machine

    with suggestion_budget():  # what this file's "did you mean" suggestions may cost
        return check_machine(source, machine, diagnostics, uses)


def _lower(machine: ast.Machine, symbols: Symbols) -> IRMachine:
    from .lower import lower_machine

    return lower_machine(machine, symbols)


def _load(optimized: IRMachine, source: SourceFile) -> MachineSpec:
    from .codegen import load_machine

    return load_machine(optimized, source_text=source.text, source_path=source.path)  # type: ignore[no-any-return]


def _render(optimized: IRMachine, source: SourceFile) -> ModuleText:
    from .codegen.render import render_installed_module

    return render_installed_module(optimized, source_text=source.text, source_path=source.path)


def _run(module: ModuleText, source: SourceFile) -> MachineSpec:
    from .codegen.load import load_machine_module

    return load_machine_module(module, source.path).MACHINE  # type: ignore[no-any-return]


def _stage(doing: str, name: ast.Name | None, diagnostics: Diagnostics, run: Callable[[], T]) -> T | None:
    """A stage that must not fail for a checked machine (`name`, the machine's): if it does, that is an
    SW9001 for this file."""
    try:
        return run()
    except Exception as e:  # noqa: BLE001 - reported as a diagnostic, as a failing check is
        span = name.span if name is not None else None
        diagnostics.report("SW9001", f"internal compiler error while {doing} this file: {type(e).__name__}: "
                           f"{str(e)[:200]}", span, label="the compiler failed here",
                           help="this is a bug in statewright; please report it with this file")
        return None
